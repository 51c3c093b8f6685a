// plan_memory: static placement of the on-chip buffers of an Ascend program (Program pass).
#pragma once

#include "target/ascend/program.h"
#include "target/registry.h"

namespace tw::ascend {

Program plan_memory(const Program& program, const target::Target& target, bool reuse);

}  // namespace tw::ascend
