// legalize_vector: Tile IR pass of the automatic Ascend pipeline (see pipeline.cpp).
#pragma once

#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel legalize_vector(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::ascend
