// The Ascend target pipeline: Tile IR -> Ascend program (which the simulator runs and the
// AscendC printer prints).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "target/ascend/program.h"
#include "target/registry.h"
#include "tilewright/ir.h"
#include "transform/pass_log.h"

namespace tw::ascend {

struct LoweredAscend {
  ir::Kernel kernel;  // IR after the last pass
  std::shared_ptr<const Program> program;
  transform::Stages stages;  // the IR after each pass
};

LoweredAscend lower_ascend(const ir::Kernel& input, const target::Target& target);

}  // namespace tw::ascend
