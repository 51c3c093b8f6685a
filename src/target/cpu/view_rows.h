// view_rows: which tiles of row kernels the cpu target reads in place in the global tensor they
// are copied from, until a map overwrites them.
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

// A 2-D tile filled by one copy from a global tensor (a whole tile, rows contiguous, of the tile's
// dtype or a bfloat16 / float16 tensor into a float32 tile: tile_facts.h viewable_copy, widening;
// a statement of the kernel's top level, or of the body of a serial loop for the loop's
// iteration-local tiles, tile_facts.h loop_local_tiles) is not materialised while it is only
// read: it gets `@row_view(top, widens)` on its allocation (top = 1 at the kernel's top level, 0
// in a loop body; widens = 1 when the copy converts), and codegen_cpu turns the copy's fast path
// into a (pointer, leading dim) view of the tensor, through which loads and row reductions read
// the tensor in place (the masked path still copies into the tile and points the view at it). A
// widening view's readers widen each element where they read it, as the copy would have
// (tw_cpu::convert<float>, exact: the same bits): loads in maps element by element, row
// reductions a vector at a time (simd.h loadu of bfloat16 / float16); a tile read by several
// passes is read from the tensor by each; its masked path copies the values unconverted into a
// shadow tile of the tensor's dtype (2 bytes an element, counted in the block's tile bytes). With
// top = 1 and a 1-D grid the pass ending the view also prefetches the next block's rows. The view
// ends at the first full-tile map at that level writing the tile (`for i, j in T.Parallel(shape):
// t[i, j] = f(...)` reading t only at [i, j], or such a map of several stores, one of them into
// t): that map reads through the view, later statements read the tile. Anything else that writes
// the tile while the view is live, a copy or gemm reading it then, a second fill, a reduce over
// the first axis of a one-column tile, or a kernel that writes the source tensor: no view.
// codegen_cpu ignores the annotation under TW_BOUNDS_CHECK=1, which reads every tile element
// through its checked index.
ir::Kernel view_rows(const ir::Kernel& k);

}  // namespace tw::cpu
