// convert_copies: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), before
// legalize_vector.
//
// Copies that convert, and UB -> UB copies, as the moves and maps the Ascend units have:
//  - GM -> UB tile of another dtype: a copy into a UB tile of the GM dtype, then a cast map into
//    the destination;
//  - UB -> GM from a tile of another dtype: a cast map into a UB tile of the GM dtype, then the
//    copy;
//  - GM <-> UB with a window of an N-D tile that is not one run of rows: a serial loop over its
//    first non-unit dim around the copy of one index (peel_ub_window);
//  - UB -> UB: a map (a cast when the dtypes differ, a vector copy otherwise; between a 1-D tile
//    and a 2-D window whose rows are not one run of UB, a gather: reshape_map).
// The maps are T.Parallel maps that legalize_vector lowers like the user's (a conversion becomes
// the chain of Cast pairs dav-c220 has; bfloat16 is only converted, never computed on). Copies
// with runtime extents are left to select_instructions; a converting copy between regions of different
// shapes is an ir::Error at its line.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel convert_copies(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
