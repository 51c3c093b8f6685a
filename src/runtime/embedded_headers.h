// The CPU runtime headers (src/target/cpu/include), embedded at build time by CMake.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

namespace tw::runtime {

// (relative path, contents), e.g. ("tw_cpu/gemm.h", "...").
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_cpu_headers();

}  // namespace tw::runtime
