// unroll_loops: the Tile IR pass after drop_gemm_bands in the automatic Ascend pipeline, run only in
// lower_ascend's retry of a kernel that does not lower with its T.unroll loops as loops (see
// pipeline.cpp: insert_sync's cost grows much faster than the program, so loops that lower stay loops).
//
// Each T.unroll loop (a constant trip count n, at most 1024 copies in all, which the verifier checks)
// becomes n copies of its body, the loop variable replaced by min + i in copy i, before any pass
// reads the loops. So split_cube_vector
// sees straight-line code: an `if` on the variable is a constant the simplify after this pass folds
// (hunt36 F1: `if l < L - 1` in an unrolled MLP was a run-time if whose branches ended a tile on
// different units), and a tile the copies pass along is a sequence of hand-offs, not a loop-carried
// value. Nested T.unroll loops unroll innermost first.
//  - The copies' own variables (lets, loop variables of the loops inside) are renamed apart
//    (suffix _u<i>), so the copies stand side by side in one body (and in one C++ scope); a let
//    whose value is an integer constant in a copy (kk = 2 * k2 + 1) is replaced by that constant.
//  - A tile the body allocates outside any loop of the body is allocated once, before the copies
//    (as a loop allocates it once per iteration: one tile, reused by each iteration, and plan_memory
//    sees one tile, not n); a tile allocated inside a loop of the body gets a fresh tile of the same
//    shape and scope in each copy after the first, named apart (xs_u1, xs_u2, ...: the AscendC
//    declares each tile by its name).
// Everything else keeps its spans: errors at a copy name the user's line.
#pragma once

#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel unroll_loops(const ir::Kernel& kernel);

}  // namespace tw::ascend
