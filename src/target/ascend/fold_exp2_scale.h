// fold_exp2_scale: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), before
// legalize_vector.
//
// exp2 over a scaled tile: in one statement list, W: X = X * K (or where(c, X * K, L)) over the
// whole UB tile X, then only row max-reductions of X (X -> m), then E: X = exp2(X - m'[i]) over
// the whole tile: X is kept scaled by ln 2 in between (K and L times ln 2), each reduction goes
// to a temporary scaled back by 1 / ln 2 (m keeps its meaning), and E becomes
// exp(X - m' * ln 2) with the row vector scaled: one full-tile Exp instead of Muls + Exp (the
// small per-row vectors take the extra multiplies). Also exp2 with the scale inside, one map
// X = exp2(X * K - m[i]) (m a UB row vector; flash attention with no key masked) becomes
// exp(X * (K ln 2) - m2[i]) with m2 = m * ln 2 per row: Muls + Sub + Exp over the tile instead of
// expand_math's Muls + Sub + Muls + Exp (argument error of the same order: the rounding of
// X * K ln 2 and m ln 2 instead of X * K, m and their difference times ln 2). The maps it writes
// are compound or single-op T.Parallel maps that legalize_vector lowers like the user's.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel fold_exp2_scale(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
