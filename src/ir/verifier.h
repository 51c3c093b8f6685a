// Tile IR verifier: checks the structural and typing invariants every pass may rely on.
// Runs between passes in debug builds and in tests.
#pragma once

#include "tilewright/ir.h"

namespace tw::ir {

// Throws tw::ir::Error for the first problem found (in program order), with the span of the
// offending node, a message naming the buffers/shapes/dtypes involved and a hint how to fix it.
//
// Checked:
//  - scoping: every Var/Buffer is used where it is defined (parameter, shape variable, block
//    variable, for, let, alloc; lets/allocs live until the end of their Seq); no redefinition
//    of a variable that is in scope (so scalar parameters are never assigned);
//  - kernel: tensor parameters are global; 1..3 block vars == grid extents, integer typed;
//  - types: indices, region starts/extents, loop bounds and grid extents are integers; if
//    conditions are bool; stored / let / filled values are convertible to the destination
//    (any number to any number; only bool to bool);
//  - ranks: load/store indices and region dims match the buffer's rank;
//  - alloc: only non-global scopes, constant shapes;
//  - for: num_stages >= 1 exactly for pipelined loops; unroll/parallel extents are constant;
//    parallel loop bodies contain only stores, lets, ifs and nested parallel loops;
//  - copy: constant extents, equal shapes after dropping unit dims;
//  - gemm: 2-D regions with constant extents, op(A) MxK, op(B) KxN, C MxN; C in fragment/L0C;
//    A and B of the same dtype; C float32 for float inputs, int32 for int8 inputs;
//  - reduce: axis in range, dst shape == src shape without the axis (or [1] / scalar when the
//    result would be rank 0), equal dtypes;
//  - tile-op regions of non-global buffers with constant starts lie inside the buffer
//    (global regions may stick out: that is how tails work).
void verify(const Kernel& k);

}  // namespace tw::ir
