// fuse_map_reduce: which full-tile maps the cpu target reduces row by row while computing them
// (the last Tile IR pass of lower_cpu but one).
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

// A full-tile float32 map into t (tile_facts.h full_tile_map) immediately followed by a float32
// reduce of t over its rows (axis 1) into a [E0] or [E0, 1] buffer that the map does not read
// gets the annotation `@fuse_reduce(keep)` on the map's loop: codegen_cpu then emits the pair
// as one pass that computes each row in chunks of kOutChunk elements and reduces each chunk
// while it is in L1 (four vector accumulators). keep = 1 when a later statement references t
// (the chunks are written to t), 0 when none does (t itself is not written: the chunks go to a
// local buffer; only outside loops or for a tile local to the enclosing loop's iterations,
// tile_facts.h loop_local_tiles: elsewhere keep = 1, as a later iteration may read t). Not for
// rows shorter than 16 elements (a narrow softmax: the per-row vector accumulators and their fold
// cost more than the row; the map and the reduce's short-row path vectorise across rows).
ir::Kernel fuse_map_reduce(const ir::Kernel& k);

}  // namespace tw::cpu
