// Single-thread micro-benchmark for tw_cpu::gemm (not a test).
//   g++ -O3 -march=native -std=c++20 -I src/target/cpu/include bench/cpu_gemm_micro.cpp -o cpu_gemm_micro
// Prints GFLOP/s (2*M*N*K / time, best of several repetitions) and % of the measured
// FMA peak of this core (FMA loop with 12 independent accumulators).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tw_cpu/tw_cpu.h"

using clk = std::chrono::steady_clock;
static double secs(clk::time_point a, clk::time_point b) { return std::chrono::duration<double>(b - a).count(); }

static double fma_peak_gflops() {
  using namespace tw_cpu::simd;
  vf acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = splat(0.001f * i);
  vf a = splat(0.99999f), b = splat(1e-5f);
  const long iters = 50'000'000;
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    auto t0 = clk::now();
    for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) acc[i] = fma(acc[i], a, b);
    }
    double s = secs(t0, clk::now());
    if (s < best) best = s;
  }
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += acc[i][0];
  if (sink == 12345.f) printf("!");
  return 2.0 * kVF * 12 * iters / best * 1e-9;
}

template <class T>
static T* alloc_fill(long n, int mod) {
  T* p = (T*)aligned_alloc(64, ((n * sizeof(T)) + 63) / 64 * 64);
  for (long i = 0; i < n; ++i) {
    float v = (float)((i * 7 + 3) % mod) / mod - 0.5f;
    if constexpr (sizeof(T) == 1) p[i] = (T)((i * 7 + 3) % 255 - 127);
    else p[i] = tw_cpu::convert<T, float>(v);
  }
  return p;
}

template <class T, class TC>
static double bench(int M, int N, int K, int calls, double min_time = 0.3) {
  T* A = alloc_fill<T>((long)M * K, 17);
  T* B = alloc_fill<T>((long)K * N, 13);
  TC* C = (TC*)aligned_alloc(64, ((long)M * N * sizeof(TC) + 63) / 64 * 64);
  memset(C, 0, (long)M * N * sizeof(TC));
  tw_cpu::gemm<T, T, TC>(M, N, K, A, K, false, B, N, false, C, N, false);  // warm-up
  double best = 1e30;
  double total = 0;
  for (int r = 0; r < 50 && (r < 3 || total < min_time); ++r) {
    auto t0 = clk::now();
    for (int c = 0; c < calls; ++c) tw_cpu::gemm<T, T, TC>(M, N, K, A, K, false, B, N, false, C, N, true);
    double s = secs(t0, clk::now());
    total += s;
    if (s / calls < best) best = s / calls;
  }
  free(A); free(B); free(C);
  return 2.0 * M * N * K / best * 1e-9;
}

int main() {
  double peak = fma_peak_gflops();
  printf("FMA peak (1 thread, %d-bit vectors): %.1f GFLOP/s\n", tw_cpu::simd::kVecBytes * 8, peak);
  auto row = [&](const char* name, double g) { printf("%-34s %8.1f GFLOP/s  %5.1f%% of FMA peak\n", name, g, 100 * g / peak); };
  row("f32 128x128x64 accumulate (x200)", bench<float, float>(128, 128, 64, 200));
  row("f32 1024^3", bench<float, float>(1024, 1024, 1024, 1));
  row("f32 2048^3", bench<float, float>(2048, 2048, 2048, 1));
  row("f32 M=1 N=K=4096", bench<float, float>(1, 4096, 4096, 1));
  row("f32 M=16 N=K=4096", bench<float, float>(16, 4096, 4096, 1));
  row("f32 M=128 N=K=4096", bench<float, float>(128, 4096, 4096, 1));
  row("f16 2048^3", bench<tw_cpu::f16, float>(2048, 2048, 2048, 1));
  row("bf16 2048^3", bench<tw_cpu::bf16, float>(2048, 2048, 2048, 1));
  printf("%-34s %8.1f GOP/s\n", "int8 2048^3", bench<int8_t, int32_t>(2048, 2048, 2048, 1));
  return 0;
}
