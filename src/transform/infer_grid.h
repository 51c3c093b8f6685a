// infer_grid: find the launch grid of a kernel written in the "tile loops" style.
#pragma once

#include "tilewright/ir.h"

namespace tw::transform {

// Turns the outermost perfectly nested serial loops of a kernel that has no block_vars yet into
// its launch grid. The front end's "tile loops" style (DESIGN.md, Front end) writes a kernel as
// plain loops over output tiles; this pass decides which of them are the parallel grid.
//
// Candidates: the kernel body is one serial For (after top-level Lets); while a loop's body is
// exactly one serial For (after Lets), that For is a candidate too; at most 3 levels, and an
// inner loop's min/extent must not depend on the outer candidates (the grid is a box).
//
// A candidate with loop var v becomes a grid dimension when its iterations are independent:
//  - writes: for every global buffer written in its body (copy/fill destinations, stores,
//    gemm C, reduce destinations) there is one dimension d along which every write's start is
//    s*v + I + r, with the same constant s and the same v-free part I for all writes of that
//    buffer, r ranging over [lo, hi) within one iteration (inner loop vars of constant range
//    contribute to r; Let-bound vars are substituted), and hi - lo + extent <= |s|. Then two
//    iterations write disjoint tiles.
//  - reads: every read of such a buffer (copy source, load, gemm operand, reduce source) lies
//    inside the tile the same iteration writes along d.
// The outermost candidate must pass (else ir::Error at the loop: overlapping tiles, or a read of
// a tile another iteration writes); an inner candidate that fails, and every loop below it,
// stays serial (typically the reduction loop).
//
// Rewrite: the grid loops are removed, block_vars = their vars innermost first (for by: for bx:
// gives grid(bx, by), as in CUDA), grid = their extents (Let-bound vars substituted); a non-zero
// loop min m is folded into the body as v -> v + m; Lets between the loops move to the top of
// the body, in order. A kernel without such a nest (no loop, or other statements beside it at
// top level) runs as a single block: grid(1) with an unused block var "bx". Kernels that
// already have block_vars are returned unchanged.
ir::Kernel infer_grid(const ir::Kernel& k);

}  // namespace tw::transform
