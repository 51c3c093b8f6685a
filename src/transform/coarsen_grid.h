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
ir::Kernel coarsen_grid(const ir::Kernel& k);

inline constexpr int64_t kCoarsenMaxTileElems = 64;
inline constexpr int64_t kCoarsenMergedTileElems = 256;
inline constexpr int64_t kCoarsenMaxFactor = 64;

}  // namespace tw::transform
