// independent_maps: a T.Parallel map's iterations must not depend on each other (docs/language.md
// "T.Parallel"), checked on the user's kernel for every target (PassLog runs it before any pass).
//
// A map is a T.Parallel loop with the parallel loops nested in it; an iteration is one value of
// the map's loop variables. The rule: the set of elements an iteration stores must not meet the
// set another iteration loads or stores (in any tile or tensor). Within one iteration the body
// runs in order (a store, then a read of the same element, reads the new value). Then the map's
// result does not depend on the order its iterations run in: cpu runs them one after another, an
// Ascend Vector core one vector instruction over all of them at a time.
//
// Each store S and each access A (a load or store) of the same buffer are compared: "iterations
// p != q with S(p) the element A(q)". An access at an outer level of the map (before an inner
// T.Parallel) is one access per value of the variables around it; two are different iterations
// when a variable of both differs. Per dimension, an index (lets of the map substituted) is
// c + sum(coef * atom) (transform/affine.h): atoms free of the map's variables must be the same
// on both sides (their difference a constant), atoms of the map's variables alone ((i + 1) % 4,
// bm - 1 - i, 2 * j + 1, i // 2) are evaluated at every value of the variables they use (each
// group of variables that share a dimension enumerated on its own: a 64 x 128 map is 64 + 128
// points, not 8192^2 pairs; a group of more than 2^20 points is decided for one variable at a
// constant offset, x[i] vs x[i + c], else taken as "may meet"). Guards of the accesses (an `if` of
// the map's variables alone) are evaluated at those points too. Exact for these forms.
//
// Undecidable dimensions (an index read from memory, x[i, idx[i, j]]; an atom mixing the map's
// variables with other values, (bx + i) % 4; different non-constant offsets, x[i, j] vs x[i, n])
// are taken as "may be equal": the conservative answer. So a map that writes a tile reads it only
// at indices the analysis proves, and a scatter's stores (y[idx[i]] = ...) must be the only access
// of their tile in the map and hold the program's promise that its indices are distinct (as on
// every target: the Ascend targets refuse a scatter anyway).
//
// An error is an ir::Error at the read (or the second store), naming the tile, both indices and
// two iterations that conflict, with the fix: write into another tile, or T.copy the tile first
// and read the copy.
#pragma once

#include "tilewright/ir.h"

namespace tw::transform {

// Throws ir::Error at the first access that breaks the rule.
void check_independent_maps(const ir::Kernel& kernel);

}  // namespace tw::transform
