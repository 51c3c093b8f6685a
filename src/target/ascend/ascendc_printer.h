// AscendC printer: the Ascend program (program.h) printed as a CANN project a user with an NPU
// can build: the kernel .cpp (AscendC, CANN 8.3.RC1 API), a host launcher (ACL), a CMakeLists.txt
// and a README. 1:1 with the program: one C++ statement per Stmt, one AscendC call (or one fixed,
// documented snippet) per Instr, every instruction line tagged `// line N` with the kernel source
// line it came from. Choices (parameter passing, buffers, vector forms, scratch space) are listed
// at the top of ascendc_printer.cpp.
#pragma once

#include <string>

#include "target/ascend/program.h"

namespace tw::ascend {

// The CANN version whose AscendC API the printer targets (also printed in the generated files).
inline constexpr const char* kAscendCCannVersion = "CANN 8.3.RC1";

struct AscendCProject {
  std::string kernel_cpp;  // <name>_kernel.cpp
  std::string host_cpp;    // main.cpp
  std::string cmake;       // CMakeLists.txt
  std::string readme;      // README.md
};

// Throws ir::Error (at the instruction's span) for what the printer cannot express.
AscendCProject print_ascendc(const Program& p);
std::string print_ascendc_kernel(const Program& p);

}  // namespace tw::ascend
