// The CPU backend's Executable: lowers with the CPU pipeline, compiles the C++ with the host
// compiler (or loads it from the disk cache), and runs the grid on the thread pool.
#pragma once

#include <memory>

#include "target/registry.h"
#include "tilewright/runtime.h"

namespace tw::runtime {

std::shared_ptr<const Executable> compile_cpu(const ir::Kernel& kernel, const target::Target& target);

// Directory holding the tw_cpu/ headers that generated code includes (materialised from the
// copies embedded in this library, so an installed library needs no source tree).
const std::string& cpu_include_dir();

}  // namespace tw::runtime
