// The translation unit of a CPU kernel library: every kernel's generated C++ (one namespace
// each) with its ABI symbols (tw_cpu/abi.h) renamed to <symbol>__abi_version / __grid / __block,
// and a typed C entry point <symbol> per kernel, where <symbol> is "tw_" + the kernel's name.
// A kernel compiled in-process is a library of one kernel, so exporting that kernel alone
// (aot_export.h) reuses its compiled object from the disk cache.
#pragma once

#include <string>
#include <vector>

#include "tilewright/signature.h"

namespace tw::runtime {

// "tw_<kernel>": the typed entry point of a kernel in its library.
std::string library_symbol(const std::string& kernel);

// The C prototype of a kernel's typed entry point, with the parameters' own names:
// "int tw_k(const float* A, float s, float* C, int64_t M, tw_parallel_for_fn tw_pf, void* tw_pf_ctx)".
// Tensors are pointers to their element type (16-bit floats as uint16_t), scalars are values,
// then one int64_t per shape variable, then the optional parallel-for callback.
std::string entry_prototype(const Signature& sig);

// The library's C++ source; `sources[i]` is the generated C++ of the kernel of `sigs[i]`.
// Kernel names must be distinct.
std::string library_source(const std::vector<Signature>& sigs, const std::vector<std::string>& sources);

}  // namespace tw::runtime
