// The CPU target pipeline: Tile IR -> C++ source.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tilewright/ir.h"
#include "transform/pass_log.h"

namespace tw::cpu {

// Tile buffers live on the stack of the thread running a block. Worker threads have 64 MiB
// stacks (runtime/thread_pool.h); a kernel whose tiles need more is a compile-time error.
inline constexpr int64_t kMaxBlockTileBytes = int64_t(48) << 20;

struct LoweredCpu {
  ir::Kernel kernel;   // IR after the last pass
  std::string source;  // the C++ translation unit
  int64_t tile_bytes;  // stack bytes the tiles of one block need (upper bound)
  transform::Stages stages;  // the IR after each pass
};

LoweredCpu lower_cpu(const ir::Kernel& input);

}  // namespace tw::cpu
