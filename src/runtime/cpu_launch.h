// Launching a compiled CPU kernel: the argument block, the grid, and the blocks on the pool.
// Shared by the compiler's CpuExecutable and the AOT runtime (tilewright/artifact.h).
#pragma once

#include <cstdint>
#include <vector>

#include "tilewright/signature.h"
#include "tw_cpu/abi.h"

namespace tw_cpu {
struct AddCheck;  // tw_cpu/check.h
}

namespace tw::runtime {

// The entry points of one kernel in a loaded library.
struct CpuEntry {
  tw_grid_fn grid = nullptr;
  tw_block_fn block = nullptr;
  int64_t tile_bytes = 0;  // stack bytes the tiles of one block need (upper bound)
  // checked kernels that T.atomic_add into an out_idx output: their tw_add_check (launch_cpu_checked)
  tw_cpu::AddCheck* add_check = nullptr;
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

// launch_cpu in checked mode (TW_BOUNDS_CHECK=1), which also reports the elements of the outputs
// (the runtime allocated them: out_idx) that no store of the kernel wrote (issue 13; the
// ascend910b simulator's `unwritten output`). Each output is filled with 0xA5 bytes before the
// launch; an element still all 0xA5 after it is a candidate, and only when there are candidates
// the launch runs again with 0x5A fills: those still all 0x5A are unwritten (the first, in
// output order, is thrown as an ir::Error at the kernel's line: runtime/unwritten.h). Before the
// second launch the inputs the kernel writes (written[i]: parameter i, in place or by
// T.atomic_add) get back the bytes they held before the first, so the launches' effects are one
// launch's. A T.atomic_add into an element that still holds the fill (entry.add_check: the add
// onto memory nothing wrote) makes a candidate too, confirmed when an add of the second launch
// finds its fill, and is thrown first, at the add's line, in the simulator's words
// (runtime/unwritten.h unwritten_add). Unchecked launches neither fill nor scan.
void launch_cpu_checked(const CpuEntry& entry, const Signature& sig, const std::vector<Arg>& inputs,
                        const std::vector<void*>& outputs, const Binding& binding, const std::vector<bool>& written);

}  // namespace tw::runtime
