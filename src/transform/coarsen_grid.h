// coarsen_grid: merge consecutive blocks of a 1-D launch grid into one program when each
// block's work is tiny (the cpu pipeline runs it after simplify).
#pragma once

#include "tilewright/ir.h"

namespace tw::transform {

// A block whose tiles hold a few elements (softmax over (M, 1) with 8-row blocks: tiles of 8
// floats) spends its time in per-program set-up, not in its loops. When every block of a 1-D
// grid handles rows [bx * B, bx * B + B) of its tensors independently, F consecutive blocks are
// the same program with B * F rows: this pass makes every tile's first dimension B * F, every
// row offset bx * (B * F), the maps over the rows B * F long, and the grid ceildiv(G, F), so
// the vector loops run across the merged blocks. Per element the arithmetic and its order are
// unchanged (rows are independent), so results are bit-identical; rows past a tensor's end
// are handled by the same masked copies as before.
//
// Applies only when all of these hold (otherwise the kernel is returned unchanged):
//  - the grid has one axis bx, and its extent is ceildiv(D, B) (B when 1: D) for the first
//    dimension D of every tensor the body accesses, so the merged blocks cover the same rows;
//  - every tile has a constant shape whose first dimension is B, and the largest holds at most
//    kCoarsenMaxTileElems elements;
//  - the body is a sequence of: tile allocations; copies between a whole tile and the tensor
//    region starting at row bx * B (other starts free of bx), or between two whole tiles;
//    fills of whole tiles with values free of bx; reductions over a tile axis other than 0;
//    T.Parallel maps whose outer loop runs over the B rows and whose row variable is used only
//    as the first index of tile accesses (no tensor accesses, no bx) -- every row of a tile is
//    then computed from the same row of the tiles alone.
// F is the largest power of two with F * (largest tile) <= kCoarsenMergedTileElems, at most
// kCoarsenMaxFactor, and no larger than the grid needs when its extent is a constant.
//
// A grid of two or more axes gets a second rule: an axis bx over column blocks of width W whose
// blocks together read whole rows (op zoo's reduce_mid, Y[a, c] = sum_b X[a, b, c] over (B, W)
// tiles with W < C: each program read half of every 4 KiB row, and the hardware prefetcher
// streams only across rows read back to back) is merged into ONE program per value of the other
// axes, over whole rows: every tile's last dimension becomes G * W (G the axis's extent), every
// tensor region's column start 0, every map's column loop G * W long, and the axis's extent 1.
// Columns are independent, so results are bit-identical; columns past a row's end are handled
// by the same masked copies as before.
// Applies only when all of these hold:
//  - G is a constant >= 2, and the other axes are constants whose product (the programs left)
//    is at least kCoarsenMinPrograms (2 x 8 threads);
//  - every tile has a constant shape whose last dimension is W, and the merged tiles take at most
//    kCoarsenMaxColumnTileBytes;
//  - the body is a sequence of: tile allocations; copies between a whole tile and the tensor
//    region whose last dimension starts at bx * W and is W long (other starts and extents free of
//    bx), or between two whole tiles; fills of whole tiles with values free of bx; reductions
//    over a tile axis other than the last; lets of values free of bx and of loads; loops whose
//    bounds are free of bx around such a sequence (argmax_mid's walk over B: every block runs
//    the same steps, each column's in the same order); T.Parallel maps with one loop over the W columns whose variable is the last
//    index of every tile access and appears nowhere else (no tensor accesses, no bx) -- every
//    column of a tile is then computed from the same column of the tiles alone;
//  - every tensor so accessed has a constant last dimension D with ceildiv(D, W) == G and rows
//    of at most kCoarsenMaxRowBytes (the range where one row a step wins, docs/performance.md).
ir::Kernel coarsen_grid(const ir::Kernel& k);

inline constexpr int64_t kCoarsenMinPrograms = 16;
inline constexpr int64_t kCoarsenMaxColumnTileBytes = int64_t(2) << 20;
inline constexpr int64_t kCoarsenMaxRowBytes = 4096;

inline constexpr int64_t kCoarsenMaxTileElems = 64;
inline constexpr int64_t kCoarsenMergedTileElems = 256;
inline constexpr int64_t kCoarsenMaxFactor = 64;

}  // namespace tw::transform
