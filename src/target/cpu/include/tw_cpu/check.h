// TW_BOUNDS_CHECK=1: kernels compiled in checked mode test every element index against its
// dimension and throw this on the first one outside; the runtime reports it as an error at the
// kernel's source line (runtime/cpu_launch.cpp). Kernel libraries include it at the top
// (runtime/cpu_library.cpp); only checked kernels use it.
#pragma once

#include <cstdint>

namespace tw_cpu {

struct BoundsError {
  int line, col;       // of the access in the kernel's source
  const char* buffer;  // the buffer's name (an identifier)
  int dim;             // which index
  int64_t index, extent;
};

[[noreturn]] __attribute__((noinline, cold)) inline void bounds_fail(int line, int col, const char* buffer, int dim,
                                                                    int64_t index, int64_t extent) {
  throw BoundsError{line, col, buffer, dim, index, extent};
}

// `i` when 0 <= i < n, else throws.
inline int64_t checked_index(int64_t i, int64_t n, int line, int col, const char* buffer, int dim) {
  if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(n)) [[unlikely]]
    bounds_fail(line, col, buffer, dim, i, n);
  return i;
}

}  // namespace tw_cpu
