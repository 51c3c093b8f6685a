// The CPU target pipeline: Tile IR -> C++ source.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tilewright/ir.h"

namespace tw::cpu {

struct LoweredCpu {
  ir::Kernel kernel;   // IR after the last pass
  std::string source;  // the C++ translation unit
  std::vector<std::pair<std::string, std::string>> stages;  // IR text after each pass
};

LoweredCpu lower_cpu(const ir::Kernel& input);

}  // namespace tw::cpu
