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
//  - Ascend expert mode (kernel with a sub-block variable): 1-D grid; T.Scope only in such
//    kernels and not nested; inside T.Scope("C") no UB buffer, inside T.Scope("V") no
//    L1/L0A/L0B/L0C buffer; copies only along the 910B data paths (GM->L1/L0A/L0B/UB,
//    L1->L0A/L0B, L0C->GM/L1, UB->GM/UB); set/wait flags only inside a scope, with a legal pipe
//    pair of that core (ascend-910b.md "Synchronisation"), event ids 0..7; barriers on a pipe of
//    that core; cross-core flags: mode 0..2, ids 0..10 (the 910B).
void verify(const Kernel& k);

}  // namespace tw::ir
