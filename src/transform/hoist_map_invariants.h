// hoist_map_invariants: per-column computations of a 2-D map computed once per column (the cpu
// pipeline runs it after coarsen_grid).
#pragma once

#include <functional>
#include <set>

#include "tilewright/ir.h"

namespace tw::transform {

// In a map `for i, j in T.Parallel(R, C)` (R > 1) whose body stores into tiles, a float
// subexpression that depends on the column j but not on the row i -- batch norm's
// `rsqrt(var[j] + eps)` -- is computed R times. Each maximal such subexpression that holds a
// math call or a division (a load or an add is cheaper to redo than to hoist) and reads only
// tiles the map does not write -- and is not a product or a negation, which g++ may fuse with
// the add it feeds into an fma (then its costly operands are hoisted instead) -- is computed
// once per column into a new fragment tile `<column variable>_inv<n>[C]` by a 1-D map placed
// just before, and the map reads that tile instead.
// Identical subexpressions share one tile. The value of each element is computed by the same
// operations in the same order and stored in its own dtype (float32/float64 only: float16 and
// bfloat16 values are computed in float32 by the cpu target, so a float16 tile would round),
// so results are bit-identical.
ir::Kernel hoist_map_invariants(const ir::Kernel& k);

// The rule both users share: e with each maximal float32/float64 subexpression that mentions
// `with` but not `without`, holds a math call or a division, and loads only non-global buffers
// outside `written` replaced by replace(subexpression) -- except a product or its negation: its
// operands are taken instead (written while g++ fused a product with the add it feeds, before
// kernels were compiled with -ffp-contract=off in session 37; hoisting the product whole is now
// bit-identical too, a change left to be measured on its own). The replaced value
// is computed by the same operations: results are bit-identical. hoist_map_invariants uses it per
// column (with = the column variable, without = the row's); codegen_cpu per row of a fused map
// (with = the row variable, without = the column's).
ir::Expr replace_invariants(const ir::Expr& e, const ir::VarNode* with, const ir::VarNode* without,
                            const std::set<const ir::BufferNode*>& written,
                            const std::function<ir::Expr(const ir::Expr&)>& replace);

}  // namespace tw::transform
