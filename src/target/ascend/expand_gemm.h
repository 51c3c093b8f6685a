// expand_gemm: T.gemm on L1 tiles -> L0 loads and Mmads (automatic pipeline, after infer_scope
// and split_cube_vector, before multi_buffer).
//
// The Cube multiplies L0A x L0B into L0C (ascend-910b.md "Cube"); a portable gemm names L1 tiles
// (after infer_scope). For `gemm A, B -> C` with A (MxK or KxM with trans_a), B (KxN or NxK with
// trans_b) in L1 and C in L0C:
//  - the K extent is cut into steps of kL0 elements: the largest kL0 (all of K, else a multiple
//    of the K fractal kg (16, 32 for int8) dividing K, else the largest multiple of kg, the last
//    step the K left, shorter) such that two L0A tiles of Mp x kL0 and two L0B tiles of kL0 x Np
//    fit in L0A / L0B (Mp, Np = M, N rounded up to 16). A last step that is not a fractal multiple
//    is what a whole K of 17 is: its window starts on a fractal, the load copies whole fractals
//    (L1's padding is zeros) and the Mmad's k is the K left (the Cube ignores the fractal's
//    columns past k: ascend-910b.md). Two L0 tiles, so that loading step s + 1 overlaps the
//    Mmad of step s (ping-pong; with one step the two copies come from multi_buffer instead);
//    the gemms of one loop body (innermost enclosing loop, nested ones counted) share L0A / L0B:
//    each is sized for capacity / their number (plan_memory keeps stage-indexed tiles for the
//    whole loop, so flash attention's Q K^T and P V tiles are live together);
//  - L0 tiles are allocated next to the gemm (a_l0: L0A [Mp, kL0] or [kL0, Mp] for trans_a,
//    b_l0: L0B [kL0, Np] or [Np, kL0] for trans_b: the orientation of the L1 tile, so select_instructions
//    picks a plain or a transposing LoadData), with a leading dim of 2 when there are >= 2 steps;
//  - the steps are unrolled (at most kMaxSteps): copy A window -> a_l0[s], copy B window ->
//    b_l0[s], gemm a_l0[s], b_l0[s] -> C with s = step % 2.
// Accumulator initialisation: L0C cannot be filled (no vector unit on the AIC). `T.clear(C)` /
// `T.fill(C, 0)` is removed and the first gemm into C after it initialises C instead
// (Mmad cmatrixInitVal): its init condition is `v == min` for every loop entered since the fill,
// and step == 0. A fill with another value, a first gemm under an If, or a read of C before any
// gemm is an error at the line. gemm(clear_accum=True) initialises at its first step.
// When a loop entered since the fill may run 0 times (its trip count is not a constant >= 1, e.g.
// ceildiv(K, 32) with a symbolic K), no gemm may run: after the outermost such loop (the one at the
// fill's depth), `if (any of those trip counts <= 0)` runs the clear as a gemm of two zero-filled
// L1 tiles (M x kg, and N x kg with transpose_B) with init, so C holds zeros. A trip count that depends on a loop
// variable entered since the fill, or a C window that moves with one, is then an error at the
// gemm (the guard cannot name it). Constant trip counts cost nothing.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

inline constexpr int64_t kMaxSteps = 16;

ir::Kernel expand_gemm(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
