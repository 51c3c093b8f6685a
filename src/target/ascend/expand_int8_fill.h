// expand_int8_fill: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp), before
// legalize_vector.
//
// T.fill of an int8/uint8 UB tile: dav-c220 has no 8-bit Duplicate, so the fill becomes a
// T.Parallel map storing the value over the filled region, which legalize_vector lowers to a
// float16 Duplicate and one Cast. Fills of other dtypes (one Duplicate) are left to select_instructions.
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel expand_int8_fill(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
