// AscendC printer: the Ascend program (program.h) printed as a CANN project a user with an NPU
// can build: the kernel .cpp (AscendC, CANN 8.3.RC1 API), a host launcher (ACL), a CMakeLists.txt
// and a README. 1:1 with the program: one C++ statement per Stmt, one AscendC call (or one fixed,
// documented snippet) per Instr, every instruction line tagged `// line N` with the kernel source
// line it came from. Choices (parameter passing, buffers, vector forms, scratch space) are listed
// at the top of ascendc_printer.cpp.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "target/ascend/program.h"

namespace tw::ascend {

// The CANN version whose AscendC API the printer targets (also printed in the generated files).
inline constexpr const char* kAscendCCannVersion = "CANN 8.3.RC1";

struct AscendCProject {
  std::string kernel_file;  // "<name>_kernel.cpp" (the name the CMake project builds)
  std::string kernel_cpp;   // its contents
  std::string host_cpp;     // main.cpp
  std::string cmake;        // CMakeLists.txt
  std::string readme;       // README.md
  // (file name, contents) of every file of the project.
  std::vector<std::pair<std::string, std::string>> files() const {
    return {{kernel_file, kernel_cpp}, {"main.cpp", host_cpp}, {"CMakeLists.txt", cmake}, {"README.md", readme}};
  }
};

// Throws ir::Error (at the instruction's span) for what the printer cannot express.
AscendCProject print_ascendc(const Program& p);
std::string print_ascendc_kernel(const Program& p);

}  // namespace tw::ascend
