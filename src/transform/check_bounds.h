// check_bounds: the range analysis of element accesses. Accesses that go out of bounds for certain
// are compile-time errors; tile accesses it cannot prove in bounds are returned, for code
// generation to check at run time.
//
// Each index gets an interval by interval arithmetic over the ranges of the loop, block and let
// variables it uses: +, -, *, unary -, min, max, integer casts that cannot wrap, // and % by a
// positive constant (and ceildiv by one). Loop variables of loops with a constant trip count
// range exactly over their iterations; of other loops, over a bound computed from the intervals
// of their start and extent; a value loaded from memory over its dtype (so a clamp such as
// T.min(T.max(label[i], 0), N - 1) is proved); shape variables and scalar parameters have no
// known range. The interval always
// contains every value the index takes (a sound bound); it is exact (both ends are reached on
// some iteration) when the index is monotone in each variable it uses: every operation above
// except % (outside one period) and products of operands of unknown sign, with no variable
// entering both increasingly and decreasingly (i * i * i on i >= 0 is exact, i - i is not).
//
// An access buffer[i0, i1, ...] (a load or a store) is an error when one of its indices provably
// leaves [0, dim) on some iteration that certainly runs: the dimension is a constant, the access
// is not under an `if` or inside a select (T.where) arm, every loop around it has a constant,
// positive trip count, and the index's interval is exact and not inside [0, dim), or lies wholly
// outside it.
//
// An access to a tile (any scope but global: a fixed-size on-stack or on-chip buffer) is
// "unproved" when some index's interval is unknown or not inside [0, dim), wherever it is (under
// an `if` too). The cpu target checks exactly these indices at run time (a TilewrightError at the
// access's line, never a write past the tile); accesses of global tensors are checked at run time
// only under TW_BOUNDS_CHECK=1. The tile regions of a gemm (the one tile op that does not clip
// its tile regions to their buffers) are checked the same way: start .. start + extent - 1 per dim.
// A gemm operand region of a global tensor is never an error (it reads zeros outside the tensor,
// as T.copy does): the Region is recorded when not proved inside, and the cpu target clips it.
#pragma once

#include <unordered_set>

#include "tilewright/ir.h"

namespace tw::transform {

// Throws ir::Error at the access's source line for the first provably out-of-bounds access.
// Returns the LoadNode / StoreNode / GemmNode pointers of the tile accesses not proved in bounds,
// and the Region pointers of global gemm operands not proved inside their tensors.
std::unordered_set<const void*> check_bounds(const ir::Kernel& kernel);

}  // namespace tw::transform
