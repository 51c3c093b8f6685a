// map_grid: the launch grid of a portable kernel -> the AI Cores of the chip (automatic pipeline).
//
// A portable kernel has a grid of up to 3 block indices (bx fastest); an Ascend kernel runs on a
// fixed number of cores (ascend-910b.md "Chips"), each looping over its share of the blocks:
//
//   T.Kernel(block_dim, is_npu=True) as (cid, vid):
//     for t in serial(ceildiv(nblocks - cid, block_dim)):
//       let blk = cid + t * block_dim         # blocks cid, cid + block_dim, ... (round robin)
//       let bx = ..., by = ..., bz = ...      # the block order below
//       <body>
//
// block_dim = min(cores, nblocks): the AICs for kernels with Cube code (MIX kernels too: each AI
// Core = 1 AIC + 2 AIVs), the AIVs for vector-only kernels. Code that is not yet in a
// T.Scope("C")/("V") (split_cube_vector only introduces scopes for kernels that need both) is
// wrapped in the scope of the only unit it uses.
//
// Block order (L2 reuse): the cores run blocks blk .. blk + block_dim - 1 at the same time. In
// row-major order (bx fastest) those share one row of by and touch block_dim different bx:
// for a GEMM, block_dim different B panels. For a 2-D grid with more than kPanel rows, blocks are
// ordered in panels of kPanel rows of by: inside a panel by runs fastest, so concurrent blocks
// cover about kPanel x (block_dim / kPanel) tiles (fewer distinct A and B panels in flight).
// 3-D grids and grids with a symbolic extent keep row-major order (bx fastest).
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

inline constexpr int64_t kPanel = 4;

ir::Kernel map_grid(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
