// Mmad's arithmetic on unpacked panels (functional.cpp unpacks L0A / L0B into them): the
// simulator's hot loop, written as register-blocked micro-kernels compiled for AVX-512, AVX2 and
// the x86-64 baseline and chosen by the CPU at run time.
//
// Semantics (program.h, docs/ascend.md "What is exact"), bit for bit on every code path:
//   float: C[i][j] = (init ? +0.0f : C[i][j]), then for each K slice kk = k0 .. k0+k_step-1
//          (k0 = 0, k_step, 2 k_step, ...; the last slice may be shorter), in that order:
//          P = fp32(A[i][k0] * B[k0][j]), P = fp32(P + fp32(A[i][kk] * B[kk][j])) for the slice's
//          next kk in order, then C[i][j] = fp32(C[i][j] + P)  (every product and sum rounded to
//          float32, round to nearest even; never fused: the file is built with -ffp-contract=off).
//          k_step is the Cube's K depth per cycle (16 for fp16 / bf16, 4 for fp32: docs/ascend.md
//          "The Cube's accumulation order"); k_step = 1 is a running sum of single products.
//   int:   the same in int32 with wrap-around (exact for every Mmad the API allows).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tilewright/ir.h"

namespace tw::ascend::sim {

// The Cube's K depth per cycle for Mmad operands of `in` (per AIC per cycle 16 x 16 x k0 MACs:
// /work/shared/ascend-910b.md "Cube"): the timing model's step count and the arithmetic's K slice.
inline int cube_k0(ir::DTypeCode in) { return in == ir::DTypeCode::i8 ? 32 : in == ir::DTypeCode::f32 ? 4 : 16; }

// The panels of one Mmad. `T` is float or uint32_t (int32 bits: wrap-around arithmetic).
template <class T>
struct MmadPanels {
  const T* a = nullptr;  // m rows of k elements (row i at a + i * k)
  const T* b = nullptr;  // ceil(n / 16) column blocks of k rows of 16 elements (block jb, row kk at b + (jb * k + kk) * 16)
  T* c = nullptr;        // L0C in Nz: column block jb, row i at c + jb * c_block + i * 16 (16 elements)
  int64_t m = 0, n = 0, k = 0;
  int64_t c_block = 0;   // elements from one 16-column block of C to the next (the strip height * 16)
  bool init = false;     // true: C starts at zero (+0.0f) instead of its contents
  int64_t k_step = 1;    // products per K slice: summed on their own, then added to C (above)
};

// The instruction sets the kernel is built for, best first; the ones this CPU runs.
enum class MmadIsa : uint8_t { Avx512, Avx2, Baseline };
std::string_view mmad_isa_name(MmadIsa isa);
std::vector<MmadIsa> mmad_isas_available();

// Runs the Mmad on the panels: only C rows < m and columns < n are written. `isa` picks a code
// path (for the tests; it must be one of mmad_isas_available()); by default the best available.
void mmad_panels(const MmadPanels<float>& p);
void mmad_panels(const MmadPanels<uint32_t>& p);
void mmad_panels(const MmadPanels<float>& p, MmadIsa isa);
void mmad_panels(const MmadPanels<uint32_t>& p, MmadIsa isa);

}  // namespace tw::ascend::sim
