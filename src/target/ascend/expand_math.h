// expand_math: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), before
// legalize_vector (after fold_exp2_scale, whose pattern reads exp2).
//
// An element store outside a map whose value calls a math function (`s[0] = T.sin(s[0])`: the scalar unit
// has none) becomes a one-element map when its elements start 32 B blocks (element_map_fits; lower_scalar_math
// computed the calls of the others on one-element tiles). Math without a vector instruction, in the
// T.Parallel maps legalize_vector lowers (those included), written with the functions that have one (fp32 error bounds measured in tests/cpp/test_legalize_vector.cpp):
//    exp2(x) = exp(x * ln2)          rel error <= |x| * 2^-24 + 1 ulp (from rounding x * ln2)
//    log2(x) = ln(x) * (1 / ln2)     1 ulp more than Ln
//    rsqrt(x) = 1 / sqrt(x)          (AscendC Rsqrt and Reciprocal miss 1e-4 / 1e-3 relative error
//                                     on the device; their docs recommend Sqrt and Div)
//    sigmoid(x) = 1 / (1 + exp(-x))
//    silu(x) = x / (1 + exp(-x))     (x * sigmoid(x))
//    tanh(x) = (e - 1) / (e + 1), e = exp(2 * clamp(x, -9, 9)), in float32    abs error <= 3e-7
//    erf(x) = s * (1 - P(t) exp(-x^2)), t = 1 / (1 + p |x|), s = clamp(x * 2^100, -1, 1), in
//             float32 (Abramowitz & Stegun 7.1.26: abs error <= 1.5e-7 exactly computed; 5.9e-7 measured with fp32 rounding, at |x| = 0.031)
//    sin(x), cos(x): tw_cpu/math.h's sin_cos written out, its float32 multiplies, adds, Abs and selects in
//             its order, so cpu and ascend910b give the same bits (abs error <= 1.5e-7 for |x| <= 400000, NaN
//             beyond and at +-inf / NaN; session 39)
//    pow(x, c) for c in {1, 2, 3, 0.5, -0.5, -1}
//    pow(x, c) = exp(c * ln(x)) in float32 for a constant non-integer c (-x or 0 at x = -inf, where
//             ln is NaN): pow's value at +-0, +-inf, negatives and NaN; rel error about |c ln x| * 2^-24
//             + Exp's and Ln's (within 2e-6 of cpu's powf in test_port36_s36; port36 F5)
// Each expansion computes in the dtype the vector units compute x in (float32 for bfloat16) and
// is cast back to the call's dtype, so the expression keeps its type. Calls on scalars (no tile
// data, no map index) stay (lower_scalar_math, first in the pipeline, computed them on a one-element
// tile or folded them; what it left is verify_program's error). floor, ceil and pow with another exponent (an integer
// other than those, or one of tile data) stay
// too: legalize_vector reports them at their line. The expansions are tile expressions like the
// user's, so legalize_vector computes their common subexpressions once with the rest of the store
// (log(x) + log2(x): one Ln; pow(x, 2) + pow(x, 3): one x * x).
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel expand_math(const ir::Kernel& kernel, const target::Target& target);

// An element store (`s[0] = T.sin(s[0] + x[r, 0])`) whose element and the tile elements it reads each start a 32 B
// block (a constant place, or one at leading indices free of tile data in a tile of padded rows): expand_math makes
// it a one-element map (vector operands start 32 B blocks); lower_scalar_math computes the calls of the others on
// one-element tiles.
bool element_map_fits(const ir::StoreNode& st);

}  // namespace tw::ascend
