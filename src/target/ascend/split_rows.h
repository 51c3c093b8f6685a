// split_rows: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), after serial_maps,
// before stage_global_copies. It runs a block's body over groups of its rows when the block's
// tiles do not fit the AIV's UB (lower_ascend asks for it after plan_memory's UB capacity error).
//
// A block's "rows" are the leading dim R of its largest tile of rank >= 2 (block_M in
// rms_norm / layer_norm / softmax); its row tiles are the tiles whose leading dim is R. The body
// splits when every row is computed on its own, the body being a straight sequence of
//   - allocs, lets (reading no row tile);
//   - copies between a global tensor and a whole row tile (the tensor's first dim of extent other
//     than 1 is the tile's rows; a constant extent), or between whole row tiles;
//   - fills of a whole row tile;
//   - reductions of a row tile along a dim other than its rows into a row tile;
//   - T.Parallel maps whose outermost loop runs over the R rows and that read and write row tiles
//     at that row only (`x[i, j]`, `ss[i]`), read other tiles at indices without it (`w[j]`) and
//     write no other tile;
//   - float max / min reductions of a row tile across its rows into another tile (block_mask's
//     `T.reduce_max(rows, any_seen)`), written by nothing before: each group merges its rows into
//     the result (filled with -inf / +inf before the groups for a clearing reduction), which gives
//     the same value in any order, NaN included;
//   - sums of a row tile across its rows into another tile (`T.reduce_sum(x, res, dim=0)`; float
//     tiles, or int32 into int32), written by nothing before: carried from group to group in the
//     unsplit order. The unsplit sum (a VecReduce over columns, or legalize_vector's row chunks of a
//     16-bit tile) adds the rows one by one, row 0 first, in float32 (int32); each group adds its
//     rows one by one into a running sum (`for row: acc[j] = acc[j] + x[row, j]`, the clipped
//     group's first R - rg * G rows only), filled with -0.0 before the groups (x + -0.0 is x for
//     every x): bitwise the unsplit sum. acc is res itself for a clearing float32 (int32) sum,
//     else a float32 tile `res_acc` stored into res after the groups (added to it for clear=False,
//     as the unsplit form adds its sum);
//   - online (a logsumexp over dim 0): a clearing float max m across the rows merged as above and
//     read by one row map `t[i, j] = exp(E - m[j])` (E reading no merged result) whose tile t only
//     a clearing float32 sum s across the rows reduces: each group saves m in m_prev before merging
//     its rows' max, rescales s to the new max (s * exp(m_prev - m), or 0 while m_prev is -inf, as
//     split_cols' online rescale), runs the map with the new m and adds its rows into s. Another
//     rounding than the unsplit kernel (exp(x - m_group) * exp(m_group - m)): within float32's
//     tolerance; m and s are read after the groups (`m + log(s)`);
//   - gemms whose A and C are whole row tiles, A not transposed (C[i, :] = A[i, :] B: row i of C
//     from row i of A; B, whose leading dim is K, is never a row tile): the Cube computes each
//     group's rows (hunt14 F5: a gemm -> residual epilogue whose vector tiles overflow the UB);
//   - an `if` or a T.serial / T.Pipelined loop (a gemm's K loop) holding such row statements (nested ones too; an `else` too) whose
//     condition / range is the same for every row: it reads no row tile and nothing the block
//     writes (`if 0 < Lens[g]`, `for t in T.serial(n)`); it runs whole in each group, its other
//     statements with it, so those must give the same values each time: lets, and copies / fills
//     of a whole tile of other rows that nothing in it touched before, reading no tensor the block
//     writes (a max / min across the rows inside it is not merged: the body stays the error);
//   - statements that touch no row tile (`T.copy(W, w)`): they run once, before the groups, which
//     needs that no row statement before them reads what they write or writes what they read; or
//     after the groups when they read such a merged result (or what such a statement wrote), which
//     needs that no row statement after them touches what they read or write.
// Then the row statements run on G-row tiles for each group rg of R / G, the tensors' rows offset
// by rg * G (a row map's other uses of its row, e.g. in a mask condition, too): as blocks of the
// grid when nothing merges across the groups and nothing before them stores into a tensor (it
// would run once per group: an atomic add too often) (the grid's first dim R / G times longer, block
// bx' = bx * (R / G) + rg: the cores run the groups in parallel, as they run the user's blocks),
// else as `for rg in serial(R / G)` in each block. G is the `step`-th of the group sizes below R,
// largest first: ceil(R / k) for k = 2, 3, ... groups (step 0: no split, the kernel as it is). When
// G does not divide R the last group is clipped: its tensor copies take the run-time extent
// min(G, R - off) (docs/language.md "Run-time extents": the rows past R are not loaded, read as 0
// in the tile, and not stored), so a prime R (8191) runs in 2 groups, not in 8191 groups of 1.
// Only divisors of R when the body merges a max / min across the rows (the clipped group's zero
// rows would enter it) or a row tile has more than 2 dims.
//
// RowSplit reports what the pass found: R, the G used, or why the body cannot be split (a
// message and the line of the statement that is not row-wise), which the capacity error's hint
// then states.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

struct RowSplit {
  int64_t rows = 0;         // R; 0 when the body has no row tiles
  int64_t group_rows = 0;   // G used (0: not split)
  bool as_blocks = false;   // the groups are blocks of the grid (else a loop in each block)
  int64_t steps = 0;        // how many G < R there are (groups.size())
  std::vector<int64_t> groups;  // the group sizes G < R, largest first (step s: groups[s - 1])
  std::string why_not;      // non-empty: the body cannot be split (what is not row-wise)
  ir::Span at;              // the statement why_not is about
  std::string row_tiles;    // the row tiles' names, for messages ("x, sq, ss")
  std::string carried;      // the tiles the sums across the rows go into (carried from group to group)
  std::string online;       // the maxes across the rows whose exp's sum is rescaled group by group
  std::string widest;       // the largest tile of rank >= 2 (whose leading dim is R) and its
  int64_t cols = 0;         // elements per row
  int64_t row_bytes = 0;    // bytes per row of it
};

ir::Kernel split_rows(const ir::Kernel& kernel, int64_t step, RowSplit* out);

}  // namespace tw::ascend
