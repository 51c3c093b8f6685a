// fuse_map_copy_out: which full-tile maps the cpu target computes straight into the global tensor
// that the next statement copies their tile to (the last Tile IR pass of lower_cpu but two).
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

// `for i, j in T.Parallel(E0, E1): t[i, j] = f(...)` (tile_facts.h full_tile_map) immediately
// followed by `T.copy(t, G[...])` gets the annotation `@fuse_copy_out` on the map's loop:
// codegen_cpu then emits the pair, when the destination region is inside G at run time, as one
// pass that computes each row in chunks of kOutChunk elements into a small L1 buffer and stores
// them to G from there (streaming stores for large outputs), instead of writing the tile (an L2
// pass) and copying it out (a second pass); on the tail path it emits the two as written.
// Conditions: t is float32 with rows of at least kOutChunk elements; the copy moves the whole
// tile into a global float32 tensor, or a bfloat16 / float16 one (each chunk converted with
// tw_cpu::convert as the separate copy converts it: the same bits; simd.h store_chunk /
// store_chunk64), its dims of extent != 1 paired in order with the
// tile's, rows contiguous, and is not provably outside G; the map does not read G; no statement
// after the copy references t; the pair is not inside a loop (which could read t on its next
// iteration) unless t is local to the loop's iterations (tile_facts.h loop_local_tiles).
ir::Kernel fuse_map_copy_out(const ir::Kernel& k);

}  // namespace tw::cpu
