// view_gemm_operands: which tiles the cpu target does not materialise because gemm reads them
// straight from the global tensor they are copied from.
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
ir::Kernel view_gemm_operands(const ir::Kernel& k);

}  // namespace tw::cpu
