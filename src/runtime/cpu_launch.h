// Launching a compiled CPU kernel: the argument block, the grid, and the blocks on the pool.
// Shared by the compiler's CpuExecutable and the AOT runtime (tilewright/artifact.h).
#pragma once

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
// need more than 1 MiB. Thread-safe; rethrows the first exception of a block. Where an interrupt
// check is installed (the Python module's, support/interrupt.h) it runs about every 50 ms between
// blocks: once it reports an interrupt no block starts, and support::Interrupted is thrown when the
// blocks running have ended (the outputs partly written). A kernel of one block is not
// interrupted; nor is a block.
void launch_cpu(const CpuEntry& entry, const Signature& sig, const std::vector<Arg>& inputs,
                const std::vector<void*>& outputs, const Binding& binding);

}  // namespace tw::runtime
