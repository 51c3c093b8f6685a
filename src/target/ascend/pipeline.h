// The Ascend target pipeline: Tile IR -> Ascend program (which the simulator runs and the
// AscendC printer prints).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "target/ascend/program.h"
#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {

struct LoweredAscend {
  ir::Kernel kernel;  // IR after the last pass
  std::shared_ptr<const Program> program;
  std::vector<std::pair<std::string, std::string>> stages;  // IR text after each pass
};

LoweredAscend lower_ascend(const ir::Kernel& input, const target::Target& target);

}  // namespace tw::ascend
