// split_window_copies: copies between a window with more non-unit dims than the region on the
// other side (a (2, 8, 64) window of a tensor and a (16, 64) tile), as one copy per index of the
// window's extra outer dims (the first Tile IR pass of lower_cpu after simplify).
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

// `T.copy(X[a0:a0 + 2, s0:s0 + 8, :], t)` with t of shape (16, 64): the tile's rows are the
// window's leading non-unit dims flattened row-major (docs/language.md, "N-D windows"). With
// constant extents, a side with p non-unit dims and one with q < p whose first non-unit extent is
// the product of the first p - q + 1 of the other's and whose later ones equal the other's last
// q - 1 becomes `for i0 in T.serial(e0): ... T.copy(X[a0 + i0, s0:s0 + 8, :], t[i0 * 8:(i0 + 1) * 8, :])`
// (one serial loop per extra dim, outermost first). Other shape mismatches are left for codegen,
// which reports them. Copies clip per index as before: an index past the end of X reads zeros.
ir::Kernel split_window_copies(const ir::Kernel& k);

}  // namespace tw::cpu
