// The CPU code generator: one Tile IR kernel -> one C++20 translation unit.
//
// The unit includes only tw_cpu/abi.h and tw_cpu/tw_cpu.h and exports the symbols of the
// binary interface (tw_cpu/abi.h): tw_abi_version, tw_grid (grid extents from the shape
// variables and scalar parameters) and tw_block (runs one block). It is meant to be compiled
// with runtime::default_compile_flags() (`-O3 -march=<TW_CPU_ARCH, default native> ...`, 512-bit auto-vectorisation
// on AVX-512 hosts)
// and `-I<repo>/src/target/cpu/include`.
//
// Lowering, in short (details at each emitter in codegen.cpp):
//   - values are computed in float (f16/bf16/f32), double (f64), int64_t (all integers: index
//     arithmetic cannot overflow) or bool; loads widen, stores narrow with tw_cpu::convert (RNE);
//   - global tensors are dense row-major `T* __restrict` pointers; tile buffers (shared,
//     fragment and the Ascend scopes) are alignas(64) local arrays of their storage type;
//   - copy: a fast path when both regions are fully in bounds (rows copied with memcpy when the
//     dtypes match) and a masked path for tails (source outside its buffer reads 0, destination
//     outside its buffer is skipped); gemm: tw_cpu::gemm on the regions; fill/reduce: loops;
//   - serial/pipelined loops are plain loops, unroll loops get `#pragma GCC unroll`, the
//     innermost parallel loop gets `#pragma GCC ivdep`.
//   - the fusions and views the decision passes recorded as annotations (fuse_map_copy_out,
//     fuse_map_reduce, view_gemm_operands, view_rows: `@fuse_copy_out`, `@fuse_reduce`,
//     `@gemm_view`, `@row_view`) are carried out as they say; a kernel without them is printed
//     without fusions or views.
// Throws ir::Error (with the op's source line) for IR the CPU target cannot lower.
#pragma once

#include <string>

#include "tilewright/ir.h"

namespace tw::cpu {

// bounds_check (TW_BOUNDS_CHECK=1): every element index of a load or store (global tensors and
// tiles) is checked against its dimension; the first one outside throws tw_cpu::BoundsError
// (tw_cpu/check.h) with the access's source line, which the runtime turns into an error.
// Whatever bounds_check says, the tile accesses transform::check_bounds does not prove in bounds
// are checked the same way: a tile is a fixed-size stack array, never written past.
std::string codegen_cpu(const ir::Kernel& k, bool bounds_check = false);

// How every gemm call in generated code starts: a kernel library whose source holds it is linked
// against the gemm runtime library that defines tw_cpu::gemm's code (runtime/cpu_executable.cpp).
inline constexpr const char* kGemmCall = "tw_cpu::gemm(";

}  // namespace tw::cpu
