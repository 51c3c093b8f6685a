// split_cube_vector: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp).
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel split_cube_vector(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
