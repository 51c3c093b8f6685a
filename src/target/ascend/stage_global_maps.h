// stage_global_maps: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), after
// stage_global_copies, before infer_scope.
//
// A T.Parallel map that stores into a global tensor (docs/language.md's first kernel,
// `C[bx * 64 + i] = A[bx * 64 + i] + B[bx * 64 + i]`; the AIV computes in UB only) becomes the
// form a user writes for it: per chunk of the map's iterations, a copy of the window each global
// tensor read in the map covers into a T.alloc_fragment tile of its dtype, the map over the tiles,
// and a copy of each stored tile out to its window. A tensor the map stores and reads (in place,
// `Y[i] = Y[i] * 2`) or stores under an `if` is copied in first, so its tile holds the values the
// map does not write; stores of one tensor at constant indices that differ (C[i, 0], C[i, 1])
// share one tile spanning them (copied in first); a window of a column is a column tile. The map's
// iterations are cut into chunks of at most kMapStageElems / (the tiles' elements per iteration)
// elements (a power of two), the last dims first, the outermost then halved while the tiles' bytes
// (rows padded to 32 B) pass kMapStageElems float32 (a serial loop over the whole chunks of a dim,
// then its tail); the copies clip the windows to the tensors (tails), and the copy of a read the map
// always makes (not under an `if`, not in a discarded arm) is checked (ir.h CopyNode::checked: the
// simulator reports its window leaving a dimension, which the map's element reads may not). Each index of a global
// tensor must be (start + one loop variable) or free of the loop variables (an index serial_maps
// guarded for an if arm counts as the index it guards); a store must use every loop variable once,
// in the map's order, stores of one tensor may differ in constant indices only, and a read of a
// stored tensor must be at a store's index: other forms are an ir::Error at the access naming the
// form that runs.
#pragma once

#include <cstdint>

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

// Elements of one chunk, shared by the staged tiles of a map (16384 float32: 64 KiB, a third of UB).
inline constexpr int64_t kMapStageElems = 16384;

ir::Kernel stage_global_maps(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
