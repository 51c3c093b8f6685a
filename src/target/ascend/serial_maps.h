// serial_maps: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), after infer_grid,
// before infer_scope.
//
// A nest of serial loops that is an element-wise map is read as the T.Parallel map it computes:
//   for i in range(bm): for j in range(bn): acc[i, j] = acc[i, j] * s      (the tile-loops style)
// becomes `for i, j in T.Parallel(bm, bn)`, which the Vector units run as whole-tile
// instructions (a serial nest would be a loop of scalar steps, and split_cube_vector could not
// hand a gemm result written element by element to the Vector side).
// The nest qualifies when its loops run from 0 over constant extents, its innermost body holds only stores
// into tiles (and lets), every store writes tile[v1, .., vk] (the nest's variables, outermost
// first, one per dim of the tile), and every read of a tile the body writes is at those same
// indices; reads of tiles it does not write are at some of the variables in nest order (a row
// vector v[i], a column vector w[j]). Then each iteration reads only what it or nothing in the
// nest writes, so running the statements over the whole tile one after the other gives the serial
// nest's result. Other loops (a running sum reading t[i, j - 1], a gather t[idx[i], j], reads of
// global tensors or of one element t[0]) stay serial loops of scalar steps.
// A serial loop of extent 1 that simplify made `let v = min` (a (bm, 1) tile's `for j in range(1)`) is
// read as that loop again where such lets of constants head the nest's innermost body.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel serial_maps(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
