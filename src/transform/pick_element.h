// pick_element: Tile IR pass of both pipelines (cpu after simplify; ascend910b after split_cols).
// The one-hot pick written the Triton way, a sum over the columns of a where that keeps one column,
//
//   for i, j in T.Parallel(R, C):  p[i, j] = T.where(j == s, e, 0.0)     (s free of j: lab[i], a scalar)
//   T.reduce_sum(p, d, dim=-1)
//
// becomes the element itself, one per row:
//
//   for i in T.Parallel(R):  d[i] = acc(where(0 <= s < C, p.dtype(e[j := min(max(s, 0), C - 1)]), 0.0)) + 0.0
//
// with acc the reduction's accumulator dtype (float32 for float16 / bfloat16 / float32, float64 for
// float64; docs/language.md "T.reduce_sum"). Bit for bit the sum: the sum of one element and C - 1
// fills of +0.0 from -0.0 is the element plus +0.0 (-0.0 becomes +0.0, NaN stays NaN, a NaN or inf
// in another column is never read), rounded into d's dtype as the reduction rounds; a label outside
// the row gives +0.0, as C fills of +0.0 do, and reads no element (the column read is clamped into
// the tile). A 1-D p (C,) reduces into d (1,): R = 1. The map and the reduction must be adjacent in
// one sequence, p read or written by nothing else in the kernel (it disappears), the reduction
// clearing (not a merge), C >= 2 (one column keeps -0.0), p a float tile of constant shape, the
// zero a literal +0.0, e a float expression whose j appears only as the index of a tile load in a
// dimension of extent C (so the clamped read stays in the tile) with no integer division.
// `j != s` with the zero on the true side, a zero of -0.0, a merge (clear=False) and a pick that is
// read elsewhere keep the map and the sum.
#pragma once

#include "tilewright/ir.h"

namespace tw::transform {

ir::Kernel pick_element(const ir::Kernel& k);

}  // namespace tw::transform
