// Launching a compiled CPU kernel: the argument block, the grid, and the blocks on the pool.
// Shared by the compiler's CpuExecutable and the AOT runtime (tilewright/artifact.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "tilewright/signature.h"
#include "tw_cpu/abi.h"

namespace tw::runtime {

// The entry points of one kernel in a loaded library.
struct CpuEntry {
  tw_grid_fn grid = nullptr;
  tw_block_fn block = nullptr;
  int64_t tile_bytes = 0;  // stack bytes the tiles of one block need (upper bound)
};

// Runs every block of the kernel. `inputs` must have been checked by tw::bind (which gave
// `binding`); `outputs` holds one dense row-major buffer per output parameter, as described by
// binding.outputs. Launches are serialised process-wide (the packed-operand caches of gemm
// kernels are per launch); blocks run on the default pool, on a 64 MiB stack when the tiles
// need more than 1 MiB (the launch thread, runtime/thread_pool.h). Thread-safe; rethrows the first
// exception of a block. With `cancel`, no block starts once it is true (the launch then returns
// after the blocks already running, with the outputs partly written): the caller that set it
// knows the launch was cancelled. A single block is not interrupted.
void launch_cpu(const CpuEntry& entry, const Signature& sig, const std::vector<Arg>& inputs,
                const std::vector<void*>& outputs, const Binding& binding,
                const std::atomic<bool>* cancel = nullptr);

}  // namespace tw::runtime
