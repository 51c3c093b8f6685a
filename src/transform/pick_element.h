// pick_element: Tile IR pass of both pipelines (cpu after simplify; ascend910b after split_cols, so a
// row in column blocks takes it block by block). The one-hot pick written the Triton way, a sum over
// the columns of a where that keeps one column,
//
//   for i, j in T.Parallel(R, C):  p[i, j] = T.where(j + off == s, e, 0.0)   (off, s free of j: 0 and
//                                                                            lab[i], or a block's start)
//   for i, j in T.Parallel(R, C):  p[i, j] = T.where(c, p[i, j], 0.0)       (0 or more: a tail's mask)
//   T.reduce_sum(p, d, dim=-1)                                               (or clear=False: a merge)
//
// becomes the element itself, one per row:
//
//   for i in T.Parallel(R):  d[i] = acc(where(0 <= k < C and c(col), p.dtype(e[j := col]), 0.0)) + 0.0
//   k = s - off (s first clamped to [off - 1, off + C]: no wrap), col = min(max(k, 0), C - 1)
//   (an s wider than the column, PyTorch's int64 labels: cast<int64>(j) == lab[i], is clamped so in
//   its own dtype, then converted to the column's: the same picks; session 33, h-labels33)
//
// (a merge adds d[i] first) with acc the reduction's accumulator dtype (float32 for float16 /
// bfloat16 / float32, float64 for float64; docs/language.md "T.reduce_sum"). Bit for bit the sum:
// the sum of one element and C - 1 fills of +0.0 from -0.0 is the element plus +0.0 (-0.0 becomes
// +0.0, NaN stays NaN, a NaN or inf in another column is never read), rounded into d's dtype as the
// reduction rounds; a column outside the tile gives +0.0, as C fills do, and reads nothing (the read
// is at the clamped column). A 1-D p (C,) reduces into d (1,): R = 1. The statements must be
// adjacent in one sequence, p read or written by nothing but such groups (its allocation goes; a
// row's column blocks in pairs whose pick tile has one copy run two or three groups on one p),
// C >= 2 (one column keeps -0.0), p a float tile of constant shape, the zeros literal +0.0, a merge
// only where p's dtype is acc, e and c free of integer division and reading j only as the index of
// a tile dimension of C columns (so the clamped read stays in the tile). `j != s` with the zero on
// the true side, a zero of -0.0 and a pick read elsewhere keep the map and the sum.
#pragma once

#include "tilewright/ir.h"

namespace tw::transform {

ir::Kernel pick_element(const ir::Kernel& k);

}  // namespace tw::transform
