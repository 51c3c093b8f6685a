// check_bounds: element accesses that go out of bounds for certain are compile-time errors.
//
// An access buffer[i0, i1, ...] (a load or a store) is reported when one of its indices
// provably leaves [0, dim) on some iteration that certainly runs: the dimension is a constant,
// the access is not under an `if` or inside a select (T.where) arm, every loop around it has a
// constant, positive trip count, and the index is an affine expression (+, -, * by a constant,
// // by a positive constant) of loop and block variables in which each variable occurs at most
// once, so its interval over the iteration space is exact (both ends are reached). Everything
// else is left to run time (TW_BOUNDS_CHECK=1 checks every index on the cpu target).
#pragma once

#include "tilewright/ir.h"

namespace tw::transform {

// Throws ir::Error at the access's source line for the first provably out-of-bounds access.
void check_bounds(const ir::Kernel& kernel);

}  // namespace tw::transform
