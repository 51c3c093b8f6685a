// insert_sync: automatic synchronisation of an Ascend program (Program pass).
#pragma once

#include "target/ascend/program.h"
#include "target/registry.h"

namespace tw::ascend {

Program insert_sync(const Program& program, const target::Target& target);

}  // namespace tw::ascend
