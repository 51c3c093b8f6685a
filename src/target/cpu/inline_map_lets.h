// inline_map_lets: the names a full-tile map binds (lets) written into its store, so the map fuses
// (the cpu pipeline runs it before hoist_map_invariants and the fusion passes).
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

// A map `for i, j in T.Parallel(E0, E1):` whose body binds names and then stores once
// (`qi = bx * M + i; visible = kj <= qi; t[i, j] = T.where(visible, s, -inf)`: lets, then one
// store) is a full-tile map (tile_facts.h full_tile_map) once each let is substituted into what
// follows it: the store alone is left. Every pass that takes a full-tile map (hoist_map_invariants,
// fuse_map_copy_out, fuse_map_reduce, pipeline_rows, view_rows) takes a map with one store only, so
// a map that binds names was never fused. A let is substituted when its value is a per-element
// expression of the map's own dtype (Tile IR expressions are pure; the let's variable has its
// value's dtype, so the value is not converted) and, when it holds a math call or a division, is
// used at most once after it (a costly value is not computed twice). codegen_cpu computes a let
// in its compute type (float for float16 / bfloat16 / float32, double, int64_t, bool), as it
// computes the same expression written in place, and kernels are compiled with -ffp-contract=off
// (no product fused into an add, across statements or within one): the same bits. Maps whose
// lets do not all qualify, and maps that are not full-tile maps once inlined, are left as written.
ir::Kernel inline_map_lets(const ir::Kernel& k);

}  // namespace tw::cpu
