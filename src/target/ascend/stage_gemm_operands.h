// stage_gemm_operands: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), before
// cube_row_mask and infer_scope.
//
// T.gemm with A and / or B in global tensors (docs/language.md T.gemm: operands may be "slices of
// global tensors"; the cpu target multiplies them in place; C is a fragment on every target, the
// verifier's rule) becomes the form a user writes for the Cube, which multiplies tiles in L1:
//  - a global A (B) is copied into a T.alloc_shared tile of its dtype, `<tensor>_l1` (L1 after
//    infer_scope), and the gemm reads the tile. Elements past the tensor read as 0 (T.copy's
//    tails; on cpu a gemm region past its tensor is out of bounds). A region whose rows are not
//    the tensor's second-last dim (BSHD `Q[b, r0:r0 + M, h, 0:D]`, ir.h gemm_matrix_dims) is
//    copied the same way: T.copy takes N-D windows of global tensors;
//  - K chunks: the staged tiles of one K step hold at most kStageBytes (rows rounded up to 16 x
//    the step x the element size). A larger K is walked by a T.Pipelined loop of 2 stages over
//    chunks of kc, the largest multiple of the K fractal (16, 32 for int8) that fits; C is cleared
//    before the loop when the gemm clears it (expand_gemm folds the clear into the first chunk's
//    Mmad). The last chunk of a global operand is the run-time extent min(kc, K - k * kc) (the
//    tile's columns past it zero-filled: they add nothing); a tile operand's chunks must divide
//    its K (tile windows have constant extents), else an error naming the gemm and the fix;
//  - capacity: two stages of the smallest K chunk must fit L1, else an error at the gemm's line
//    naming the sizes and the fix (blocks of at most 256 x 256). L0A / L0B are expand_gemm's (its K
//    steps), the rest plan_memory's (its capacity error names the `_l1` tiles).
// Gemms on tiles only are unchanged.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

// The bytes of the staged A and B tiles of one K chunk (one pipeline stage): an eighth of L1, so
// two stages leave three quarters of it to the kernel's own tiles.
inline constexpr int64_t kStageBytes = 64 * 1024;

ir::Kernel stage_gemm_operands(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
