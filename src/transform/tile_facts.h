// Facts about tiles in the Tile IR that passes of both targets use (target-neutral analyses, not
// passes: they change nothing): which tiles a statement references, whether a region is a whole
// tile, and which tiles are local to one iteration of a loop. The cpu decision passes
// (target/cpu/tile_facts.h re-exports these) and the Ascend multi_buffer include this one place.
#pragma once

#include <unordered_set>

#include "tilewright/ir.h"

namespace tw::transform {

// e is the variable v itself.
bool is_var(const ir::Expr& e, const ir::Var& v);

// Does statement s (a leaf, or any loads inside a compound one) reference buffer b?
bool references(const ir::Stmt& s, const ir::Buffer& b);

// Does anything outside the subtree `inside` of `root` reference t (its allocation aside)?
bool referenced_outside(const ir::Stmt& root, const ir::Stmt& inside, const ir::Buffer& t);

// The global tensors a kernel writes (by copy, store, fill, reduce or gemm): the cpu passes that
// read global tensors in place, and the Python binding that refuses a copied argument the
// kernel writes (Executable.written_inputs).
std::unordered_set<const void*> globals_written(const ir::Kernel& k);

// The global tensors a kernel writes only by T.atomic_add (a scatter-add, split-K partials, a
// histogram): an output among them starts at zero (cpu's tw_grid zeroes it, the simulator's
// machine too; the printed AscendC host zeroes every output), since adding into memory the runtime
// allocated would return garbage plus the sum (api35).
std::unordered_set<const void*> globals_accumulated(const ir::Kernel& k);

// The whole of a tile (constant shape, region at 0 with the tile's extents)?
bool whole_tile(const ir::Region& r);

// Iteration-local tiles of a serial (or pipelined, or unrolled) loop whose body is a sequence:
// nothing outside the body references such a tile, and the first statement of the body (at its
// top level) that references it overwrites all of it (a copy into the whole tile from another
// buffer, or a fill of the whole tile). No value of such a tile flows from one iteration to the
// next or out of the loop, so what is sound for a tile at the kernel's top level -- a
// read-in-place view, a map fused with its copy-out or its row reduction with the tile not
// written, a multi-buffered copy -- is sound in the body. Empty for parallel loops. With maps, a
// full-tile elementwise map that reads nothing of the tile (parallel loops from 0 over each of its
// dims storing it at the loop variables) overwrites it too (the Ascend multi_buffer asks so; the
// cpu passes do not).
std::unordered_set<const void*> loop_local_tiles(const ir::Kernel& k, const ir::ForNode& loop, bool maps = false);

}  // namespace tw::transform
