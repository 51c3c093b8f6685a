// split_cols: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), after split_rows,
// before stage_global_copies. It runs a block's rows in column blocks when one row does not fit
// the AIV's UB (lower_ascend asks for it after split_rows could not make the tiles fit: Qwen2's
// vocabulary softmax, 151936 float32 = 607744 B per row, UB 196352 B).
//
// The columns N are the last dim of the block's largest tile; its column tiles are the tiles whose
// last dim is N (x (R, N), a weight row w (N,)); the other tiles (row results: max, sum (R,)) are
// kept whole. The body must be a straight sequence of
//   - allocs; statements that touch no column tile (lets, maps over the row results, fills);
//   - copies between a tensor region whose last dim has extent N and a whole column tile, or
//     between whole column tiles; fills of a whole column tile;
//   - T.Parallel maps whose loop of extent N indexes every column tile it reads or writes in the
//     tile's last dim (`x[i, j]`, `w[j]`) and that write only column tiles;
//   - reductions of a column tile along its last dim into another tile (sum, max, min);
//   - reductions of a column tile across its rows into a column tile (`T.reduce_sum(x, res, dim=0)`
//     with res (N,)): each column on its own, run in its block like a map (session 26).
// The body then runs in phases, each a `for c in serial(K)` over column blocks of Cb columns
// (K = ceil(N / Cb)): a phase ends where a later statement needs what the phase reduces (softmax:
// the row max, then the row sum, then the stores: 3 phases, each reading the row from GM once). Each
// phase recomputes, block by block, the statements its reductions and stores need (the copies from
// the tensors and the maps since each tile was last written whole), the reductions carrying a
// running result (filled with the identity before the phase: the sum adds each block's sum, max /
// min merge, NaN included); stores happen in the phase that computes them. A block past N (the
// last, when Cb does not divide N) reads zeros and stores nothing; before a reduction its columns
// past N are set to the reduction's identity.
// Online max + sum (softmax, log_softmax, log-sum-exp, cross-entropy): where a phase would close
// because a map reads the max m it reduces, and that map is `t[i, j] = exp(E - m[i])` (E reading
// nothing the phase reduces) whose tile t only a sum s (of m's shape) reduces in the rest of the
// phase, the phase goes on: each block saves m in m_prev, merges its max into m, rescales s to the
// new max (s = s * exp(m_prev - m), or 0 while m_prev is -inf: the terms so far were exp(-inf -
// -inf), which the unsplit kernel adds as 0 unless the whole row is -inf, and then the coming blocks
// add NaN again), then computes t with the new m and adds its sum: one pass for the max and the
// sum instead of two, as flash attention carries (m, l) along its keys. Checked on the phase's
// statements (no other reader of m or t, s read by nothing else in the phase), else the two phases.
// Chan's merged variance (layer_norm): a row sum S (clearing), the row statement `S[i] = S[i] / N`,
// then a map `t[i, j] = (E - S[i]) * (E - S[i])` whose tile only a sum V reduces: one phase. Each
// block sums its columns (S_blk_sum), takes its own mean over its nb columns (S_blk_mean), runs the
// map with that mean and sums it (V_blk, the block's M2), then V += V_blk + (S_blk_mean - S / max(na,
// 1))^2 * na * nb / (na + nb) and S += S_blk_sum (na: the columns before the block); `S = S / N`
// runs after the loop as written (never the sum-of-squares form).
// A map's column index used as a value (argmax's
// `T.where(x[i, j] == best[i], j, N)`) is the column in the row (j + c * Cb). No GM workspace: a
// body whose column tile would be recomputed after a row result it reads was changed (or with any
// other statement) is not split, and `why_not` says which statement prevents it.
//
// A body whose top level holds an `if` whose condition is the same for every column (it reads no
// tile and nothing the block writes: `if Lens[bx] > 0`, `if bx < n`; buffer_sets.h's
// peel_uniform_if) is split branch by branch: the statements before and after the `if` go into each
// branch, each branch is split as a body of its own (nested ifs alike), the same column tiles.
//
// Two copies of the column tiles (copies = 2, session 27): each phase's loop runs its blocks in
// pairs, block 2p on the column tiles as made, block 2p + 1 on a second copy of them (`x_b`), and
// an odd K's last block after the loop on the first copy:
//   for col_blk in serial(K / 2) { <block 2 col_blk: x, w>; <block 2 col_blk + 1: x_b, w_b> }
//   <block K - 1: x, w>                                          # K odd
// so block b + 1's copies from GM (MTE2) land in the other copy while the Vector unit works on
// block b, and block b's stores (MTE3) leave while b + 1 is computed; insert_sync orders the
// accesses of each copy. The running results (max, sum, Chan's S and V, m_prev, a block's own
// sums) are one tile each: the blocks merge into them in order. multi_buffer cannot stage these
// loops itself: its staged tiles get a leading copy dim, and the column tiles are whole operands
// of the reductions. The second block's copies from the tensors come before the first block's
// vector work (the two copies are live together, so plan_memory places them apart). Where a copy
// between a tensor and a column tile converts (bfloat16 / float16 rows into float32 tiles, session
// 32), the conversion is made first as convert_copies would make it, a copy into a column tile of
// the tensor's dtype (`x_bfloat16_0`) and a cast map into the float32 tile (a store: the cast map,
// then the copy), and only the tiles the copies from and to the tensors use get second copies: the
// float32 tiles only the Vector unit touches stay one (two of them narrowed the blocks more than
// the overlap gained: bfloat16 softmax 256 x 151936, 369565 simulated cycles with one copy of
// every tile, 376954 with two of every tile, 312308 with two of the bfloat16 tiles).
// lower_ascend asks for two copies first, with as many blocks as make them fit (the blocks
// narrowed as for one copy), and for one copy when two do not fit at 64 columns.
// A block width Cb for a row reduction is rounded up to 64 * 2^a * b with b odd and at most 63
// (the halvings of a row reduction stop at b / 8 float32 repeats, each then one call: see the .cpp).
//
// ColSplit reports what the pass found: N, the block width used, the phases, or why not.
#pragma once

#include <cstdint>
#include <string>

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

struct ColSplit {
  int64_t cols = 0;        // N; 0 when the body has no tile
  int64_t block_cols = 0;  // Cb used (0: not split)
  int64_t blocks = 0;      // K = ceil(N / Cb)
  int64_t step = 64;       // Cb's multiple: 64, or one 32-byte block when nothing reduces along the columns
  int64_t block_bytes = 0; // bytes of the largest tile in a block
  int64_t phases = 0;      // loops over the row's column blocks (each reads its inputs once)
  int64_t copies = 1;      // copies of the column tiles (2: double buffered)
  std::string doubled;     // copies 2: the tiles with a second copy ("each", or their names)
  std::string why_not;     // non-empty: the body cannot run in column blocks
  ir::Span at;             // the statement why_not is about
  std::string col_tiles;   // the column tiles' names, for messages ("x, w")
};

// blocks > 0: split into about that many column blocks (Cb = ceil(N / blocks) rounded up to
// ColSplit::step elements: 64, or 8 float32 / 16 16-bit columns when no statement reduces a column
// tile along its columns); 0: only the analysis (out). copies: 1 or 2 copies of the column tiles (above).
ir::Kernel split_cols(const ir::Kernel& kernel, int64_t blocks, ColSplit* out, int64_t copies = 1);

}  // namespace tw::ascend
