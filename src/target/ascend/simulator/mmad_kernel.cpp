// Mmad micro-kernels (mmad_kernel.h). One register-blocked kernel written with GCC vector types
// (16 lanes), instantiated in three functions compiled for AVX-512, AVX2 and the baseline: the
// vector operations become zmm, 2 x ymm or 4 x xmm instructions. CMakeLists.txt builds this file
// with -ffp-contract=off, so `acc + s * b` stays a rounded product and a rounded sum (no FMA).
#include "target/ascend/simulator/mmad_kernel.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "tilewright/ir.h"

namespace tw::ascend::sim {

namespace {

typedef float VF __attribute__((vector_size(64)));
typedef uint32_t VU __attribute__((vector_size(64)));
template <class T> struct Vec;
template <> struct Vec<float> { using type = VF; };
template <> struct Vec<uint32_t> { using type = VU; };

// Rows i0 .. i0+R-1 of C, column blocks jb0 .. jb0+NB-1: accumulators and the K slice's partial
// sums in registers, kk in order.
template <class T, int R, int NB>
[[gnu::always_inline]] inline void tile(const MmadPanels<T>& p, int64_t i0, int64_t jb0) {
  using V = typename Vec<T>::type;
  const int64_t k = p.k;
  T* c = p.c + jb0 * p.c_block + i0 * 16;
  V acc[R][NB];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < NB; ++q) {
      if (p.init) acc[r][q] = V{};
      else std::memcpy(&acc[r][q], c + q * p.c_block + r * 16, sizeof(V));
    }
  const T* a = p.a + i0 * k;
  const T* b = p.b + jb0 * k * 16;
  const int64_t step = p.k_step;
  for (int64_t k0 = 0; k0 < k; k0 += step) {
    // one K slice: its products summed in order into `part`, then `part` added to C
    const int64_t k1 = std::min<int64_t>(k, k0 + step);
    V part[R][NB];
    for (int64_t kk = k0; kk < k1; ++kk) {
      V bv[NB];
      for (int q = 0; q < NB; ++q) std::memcpy(&bv[q], b + (q * k + kk) * 16, sizeof(V));
      for (int r = 0; r < R; ++r) {
        const T s = a[r * k + kk];
        for (int q = 0; q < NB; ++q) part[r][q] = kk == k0 ? s * bv[q] : part[r][q] + s * bv[q];
      }
    }
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < NB; ++q) acc[r][q] = acc[r][q] + part[r][q];
  }
  for (int q = 0; q < NB; ++q) {
    const int64_t w = std::min<int64_t>(16, p.n - (jb0 + q) * 16);
    for (int r = 0; r < R; ++r) std::memcpy(c + q * p.c_block + r * 16, &acc[r][q], static_cast<size_t>(w) * sizeof(T));
  }
}

// The `rows` (< R on the last row block) rows at i0: the tile with that many rows.
template <class T, int R, int NB>
[[gnu::always_inline]] inline void rows_tile(const MmadPanels<T>& p, int rows, int64_t i0, int64_t jb0) {
  if constexpr (R > 1) {
    if (rows < R) return rows_tile<T, R - 1, NB>(p, rows, i0, jb0);
  }
  tile<T, R, NB>(p, i0, jb0);
}

// Column blocks in pairs (the B pair stays in L1 while the row blocks stream past it).
template <class T, int R>
[[gnu::always_inline]] inline void run(const MmadPanels<T>& p) {
  const int64_t nb = (p.n + 15) / 16;
  for (int64_t jb = 0; jb < nb; jb += 2)
    for (int64_t i0 = 0; i0 < p.m; i0 += R) {
      const int rows = static_cast<int>(std::min<int64_t>(R, p.m - i0));
      if (jb + 1 < nb) rows_tile<T, R, 2>(p, rows, i0, jb);
      else rows_tile<T, R, 1>(p, rows, i0, jb);
    }
}

// Rows per tile: 2 * R accumulators and 2 * R partial sums of 16 lanes fit the register file
// (32 zmm, 16 ymm, 16 xmm).
__attribute__((target("avx512f"))) void run_avx512(const MmadPanels<float>& p) { run<float, 6>(p); }
__attribute__((target("avx512f"))) void run_avx512(const MmadPanels<uint32_t>& p) { run<uint32_t, 6>(p); }
__attribute__((target("avx2"))) void run_avx2(const MmadPanels<float>& p) { run<float, 1>(p); }
__attribute__((target("avx2"))) void run_avx2(const MmadPanels<uint32_t>& p) { run<uint32_t, 1>(p); }
void run_baseline(const MmadPanels<float>& p) { run<float, 1>(p); }
void run_baseline(const MmadPanels<uint32_t>& p) { run<uint32_t, 1>(p); }

bool available(MmadIsa isa) {
  switch (isa) {
    case MmadIsa::Avx512: return __builtin_cpu_supports("avx512f");
    case MmadIsa::Avx2: return __builtin_cpu_supports("avx2");
    case MmadIsa::Baseline: return true;
  }
  return false;
}

MmadIsa best() {
  static const MmadIsa isa = mmad_isas_available().front();
  return isa;
}

template <class T>
void dispatch(const MmadPanels<T>& p, MmadIsa isa) {
  if (!available(isa))
    throw ir::Error("internal: the Mmad kernel for " + std::string(mmad_isa_name(isa)) +
                    " was asked for, but this CPU does not run it (pick one of mmad_isas_available())");
  if (p.k_step < 1) throw ir::Error("internal: Mmad k_step " + std::to_string(p.k_step) + " (must be >= 1)");
  if (p.m <= 0 || p.n <= 0) return;
  switch (isa) {
    case MmadIsa::Avx512: return run_avx512(p);
    case MmadIsa::Avx2: return run_avx2(p);
    case MmadIsa::Baseline: return run_baseline(p);
  }
}

}  // namespace

std::string_view mmad_isa_name(MmadIsa isa) {
  switch (isa) {
    case MmadIsa::Avx512: return "avx512";
    case MmadIsa::Avx2: return "avx2";
    case MmadIsa::Baseline: return "baseline";
  }
  return "?";
}

std::vector<MmadIsa> mmad_isas_available() {
  std::vector<MmadIsa> out;
  for (MmadIsa isa : {MmadIsa::Avx512, MmadIsa::Avx2, MmadIsa::Baseline})
    if (available(isa)) out.push_back(isa);
  return out;
}

void mmad_panels(const MmadPanels<float>& p) { dispatch(p, best()); }
void mmad_panels(const MmadPanels<uint32_t>& p) { dispatch(p, best()); }
void mmad_panels(const MmadPanels<float>& p, MmadIsa isa) { dispatch(p, isa); }
void mmad_panels(const MmadPanels<uint32_t>& p, MmadIsa isa) { dispatch(p, isa); }

}  // namespace tw::ascend::sim
