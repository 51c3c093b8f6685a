// lower_scalar_math: Tile IR pass of both Ascend pipelines (see pipeline.cpp): after serial_maps in the
// automatic one (a serial nest it reads as a map keeps its calls whole-tile: review37 R1), after simplify in
// expert mode.
//
// The Ascend scalar unit has no math functions: AscendC documents none for AICore code, and the
// AscendC printer prints no math call in a scalar expression. A math function of a scalar (no index
// of the map it is in: literals, parameters, loop variables, lets, an element of a tile or tensor
// read at such indices) is therefore, before anything else sees it (printer37 P1, P2, P3):
//  - of literals (T.exp(lg * C) with lg and C Python numbers: RetNet's decay gamma^C, port35): the
//    literal of its value, computed as math_fns.h scalar_value computes it (in double);
//  - else (automatic mode: group_norm's T.rsqrt(tot[0] / n + eps), T.exp(a)): computed by the
//    Vector unit on a one-element float32 tile in front of the statement that uses it, as a user
//    writes it by hand:
//        t = T.alloc_fragment((1,), "float32")
//        for i in T.Parallel(1): t[i] = x
//        for i in T.Parallel(1): t[i] = T.exp(t[i])
//    and the statement reads t[0] (a GetValue after the V -> S flag insert_sync places), cast back
//    to the call's dtype. Lowered in front of the statement that uses the value: a T.Parallel map, a
//    let, an element store (t[k] = f(t[j]) where each element starts a 32 B block stays expand_math's
//    one-element map, one vector instruction: element_map_fits; elsewhere, s[3] = T.exp(s[3]) or a tensor's
//    element, t[j] is a scalar here, math41), a fill or an if (its condition); a call elsewhere (a loop's extent) and
//    every call in an expert-mode kernel stays, and verify_program reports it at its line with the
//    hint of this form (scalar_math_hint).
// A call of a row's value in a map over more than two dims (T.rsqrt(r[i] / n + eps) over i, g, c: it uses,
// of the map's variables, only those of the leading loops legalize_vector runs serially around the 2-D map
// of the last two, where it would be a scalar operand; the map's lets seen through; tiles read along rows)
// is computed in one map over those rows before the map, into a tile of the call's compute dtype, and the
// map reads its element (session 38; a float16 / bfloat16 value widened, rounded once where stored).
// A map's loops of one iteration (T.Parallel(1, C)) are at their start in the leading indices of an element a call
// reads (w[i, 0]: legalize_vector's hoist_scalar_reads reads it as a scalar there): such a call is a scalar's
// (math40 M4; with more rows it is a column, gathered by legalize_vector).
// In a kernel with Cube code (T.gemm) such a call in a let used outside T.Parallel maps (the Cube core
// may need it; a let used only in maps is the Vector core's: split_cube_vector) or in the condition of an
// if around a gemm (the Cube core evaluates it) is refused here, naming the user's call and a form that
// runs (review37 R3; split_cube_vector would name the one-element tile).
// An integer |n| of a scalar is max(n, 0 - n) on the scalar unit (review37 R4).
// The simulator runs what the printer prints: Duplicate, Exp (or expand_math's expansion), GetValue.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel lower_scalar_math(const ir::Kernel& kernel, const target::Target& target);

// The hint of a math function the scalar unit would compute (verify_program's error).
std::string scalar_math_hint(const std::string& fn);

}  // namespace tw::ascend
