// stage_global_copies: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), after
// serial_maps, before infer_scope.
//
// A global -> global T.copy (docs/language.md T.copy: "global to global works too"; the 910B moves
// GM only to and from its units' memories) becomes the form a user writes for it: per chunk a copy
// into a T.alloc_fragment tile of the source dtype and a copy out of it (infer_scope puts the tile
// in UB, split_cube_vector on the Vector side in kernels with a gemm, convert_copies converts the
// dtype on the way out). Regions of the same extents are cut into chunks of at most kCopyStageBytes,
// the last dims first (a serial loop over the whole chunks of a dim, then its tail; a run-time
// extent min(C, e) becomes min(c, e - offset) per chunk); regions whose extents differ (a tensor
// row into a column window) are staged whole when they fit one chunk, else an ir::Error at the copy
// naming the chunked form. A region with an extent 0 copies nothing.
#pragma once

#include <cstdint>

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

// One staging tile: 16 KiB (a twelfth of UB; convert_copies adds one of the destination dtype).
inline constexpr int64_t kCopyStageBytes = 16 * 1024;

ir::Kernel stage_global_copies(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
