// cube_row_mask: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), before
// infer_scope.
//
// A row mask on a Cube operand: a T.Parallel map over a whole 2-D tile V (rows c, columns d)
//
//     V[c, d] = T.where(A + c < R, V[c, d], Z)        (Z a constant; also c < R - A, R > A + c,
//                                                     <=, >=, and where(c >= e, Z, V[c, d]))
//
// keeps the rows c < e (e = R - A, a run-time row count free of c and d) and sets the others to Z:
// paged decode's value tile, whose slots past the context may hold anything (NaN included), so
// they must be written, not multiplied by 0. When V's only other uses are the Cube's (A or B of a
// T.gemm, the destination of a copy from GM, a fill), the map becomes
//
//     for c in serial(0, rows) { if c >= e { fill V[c:+1, :] = Z } }
//
// which infer_scope leaves on the Cube (V goes to L1: no vector role) and select_instructions
// lowers to one InitConstValue over the rows max(min(e, rows), 0) .. rows - 1 of every C0 strip
// (select_instructions.h, "row-tail fill"). Without it V would be a vector tile too: copied GM ->
// UB by both AIVs, masked, and handed to the Cube through the GM workspace (twice its bytes of
// HBM traffic and one Cube <-> Vector hand-off per step). Any other map is left as it is.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel cube_row_mask(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
