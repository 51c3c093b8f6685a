// infer_scope: the Ascend memory of every portable tile (first pass of the automatic pipeline
// that knows about Ascend; see pipeline.cpp).
//
// A kernel written for any target allocates `shared` and `fragment` tiles; on Ascend a tile lives
// in the memory of the unit that uses it (ascend-910b.md "Buffers"). The role of each tile is read
// from its uses:
//  - Cube operand: the A or B operand of a T.gemm                      -> L1 (Nz)
//  - Cube accumulator: the C operand of a T.gemm                      -> L0C (Nz, fp32/int32)
//  - vector: an element load or store (T.Parallel bodies, scalar code), a reduce operand
//                                                                     -> UB
//  - copies and fills give no role (they follow the tile's other uses); a tile with no role at
//    all (only copied) is a vector tile (UB): the AIV moves it. Except a copy from an accumulator
//    only the Cube uses into an operand (`T.copy(s, p)` between two gemms): the program has no L0C -> L1 move, so
//    both tiles also get the vector role and the copy runs on the Vector core between two
//    hand-offs (the data path a T.Parallel copy takes). A copy from such an accumulator into a
//    vector tile (`T.copy(s, s16)`, s16 read by vector code or only copied on) gives the
//    accumulator the vector role: split_cube_vector makes that copy the hand-off, in s16's dtype.
//    A copy from a vector tile into an operand only the Cube uses (`T.copy(p32, p)`) gives the
//    operand the vector role: the copy runs on the Vector core, then p is handed to the Cube.
// A tile with both a Cube and a vector role (flash attention's score tile: gemm result, then
// softmax) keeps its portable scope: split_cube_vector gives it one incarnation per core and
// hands the data over through GM. A tile that is both operand and accumulator of T.gemm is an
// error. Tiles that already have an Ascend scope and global tensors are left as they are.
// A portable tile the kernel never uses (only allocated) is dropped: it needs no memory, and as a
// UB tile it made a Cube-only kernel look like it needed the Vector core too (session 21, h-hunt9a).
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel infer_scope(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
