// view_gemm_operands: which tiles the cpu target does not materialise because gemm reads them
// straight from the global tensor they are copied from, or writes them straight into the one
// they are copied to.
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

// A 2-D tile that is written only by one copy from a global region of the same dtype (a whole
// tile, rows contiguous: tile_facts.h viewable_copy) and read only as a gemm A/B operand, in a
// kernel that never writes that tensor, gets `@gemm_view(live)` on its allocation: codegen_cpu
// then turns the copy's fast path (region inside the tensor) into a (pointer, leading dim) view
// of the tensor that the gemm packs from; the masked path (tails) still copies into the tile and
// points the view back at it. Sound because nothing else reads the tile and the source cannot
// change before the gemm. live = 1 when every gemm reads the tile whole: past the part its copy
// filled from inside the source the tile is zero and no reader looks past it, so a masked copy
// whose source starts inside its tensor (a tail block) is elided too, the view pointing at the
// source's part with live extents (the gemm multiplies only that part); live = 0 otherwise.
//
// The accumulator too (`@gemm_out(gemms)` on its allocation): a 2-D tile that, in one sequence,
// is cleared (a fill of the whole tile with 0), then referenced only as the whole C of gemms (not
// as their A or B), then copied whole into a global region of its own dtype (constant extents,
// the tile's dims its non-unit dims with contiguous columns) that no other statement of the
// kernel references and whose place depends on every block index of a grid of more than one
// block, and referenced nowhere else. codegen_cpu computes it in that window: the clear becomes
// a flag that makes the first gemm overwrite (C = A B, no memset), the gemms write the window's
// rows and cols inside the tensor (a ragged last block computes only those), and the copy-out
// only writes zeros when no gemm ran (an empty K loop). Sound because nothing reads the tile or
// the window in between, tensor parameters do not alias (they are `__restrict`), and no two
// blocks share a window. A window whose start may be negative, or whose unit dims may lie outside
// the tensor, is checked at run time and falls back to the tile and its copy-out.
ir::Kernel view_gemm_operands(const ir::Kernel& k);

}  // namespace tw::cpu
