// Throughput of the AVX2 instruction mixes an int8 -> int32 gemm micro-kernel can use, against
// the fp32 FMA (docs/performance.md, "int8 on AVX2"). Not part of the library, not a test.
//
//   g++ -O2 -march=haswell bench/int8_avx2_mix.cpp -o int8_avx2_mix && ./int8_avx2_mix
//
// Each loop runs 12 independent accumulator chains of one mix in inline assembly (so that the
// compiler cannot hoist or merge the loop-invariant operations), best of many short trials (a
// trial of ~1 ms fits in a time slice of a loaded machine). MAC = one multiply-add of a product.
// "exact" mixes give the exact int32 sum for all int8 inputs; the vpmaddubsw mixes saturate their
// int16 pair sums for some (u8 x s8: 2 x 255 x 127 > 32767) and are shown only as the ceiling an
// exact kernel cannot reach.
#include <immintrin.h>

#include <chrono>
#include <cstdio>

#define R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define KEEP12 asm volatile("" ::"x"(c0), "x"(c1), "x"(c2), "x"(c3), "x"(c4), "x"(c5), "x"(c6), "x"(c7), \
                            "x"(c8), "x"(c9), "x"(c10), "x"(c11))

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
template <class F>
static double best(F f, long iters) {
  double b = 1e9;
  for (int r = 0; r < 400; ++r) {
    double t = now();
    f(iters);
    t = now() - t;
    if (t < b) b = t;
  }
  return b;
}

int main() {
  const long N = 50000;  // iterations per trial, 12 chains each
  const __m256 fa = _mm256_set1_ps(1.0f), fb = _mm256_set1_ps(1e-9f);
  const __m256i ia = _mm256_set1_epi16(1), ib = _mm256_set1_epi16(2), ones = _mm256_set1_epi16(1);

  double t_fma = best([&](long n) {
    __m256 c0 = fa, c1 = fa, c2 = fa, c3 = fa, c4 = fa, c5 = fa, c6 = fa, c7 = fa, c8 = fa, c9 = fa, c10 = fa, c11 = fa;
    for (long i = 0; i < n; ++i) {
#define X(k) asm volatile("vfmadd231ps %1, %2, %0" : "+x"(c##k) : "x"(fa), "x"(fb));
      R12(X)
#undef X
    }
    KEEP12;
  }, N);
  double t_add = best([&](long n) {
    __m256i c0 = ia, c1 = ia, c2 = ia, c3 = ia, c4 = ia, c5 = ia, c6 = ia, c7 = ia, c8 = ia, c9 = ia, c10 = ia, c11 = ia;
    for (long i = 0; i < n; ++i) {
#define X(k) asm volatile("vpaddd %1, %0, %0" : "+x"(c##k) : "x"(ib));
      R12(X)
#undef X
    }
    KEEP12;
  }, N);
  double t_wd = best([&](long n) {  // vpmaddwd alone (each on its own chain)
    __m256i c0 = ia, c1 = ia, c2 = ia, c3 = ia, c4 = ia, c5 = ia, c6 = ia, c7 = ia, c8 = ia, c9 = ia, c10 = ia, c11 = ia;
    for (long i = 0; i < n; ++i) {
#define X(k) asm volatile("vpmaddwd %1, %0, %0" : "+x"(c##k) : "x"(ib));
      R12(X)
#undef X
    }
    KEEP12;
  }, N);
  double t_fma_wd = best([&](long n) {  // 6 FMA + 6 vpmaddwd chains: do they share pipes?
    __m256 f0 = fa, f1 = fa, f2 = fa, f3 = fa, f4 = fa, f5 = fa;
    __m256i c0 = ia, c1 = ia, c2 = ia, c3 = ia, c4 = ia, c5 = ia;
    for (long i = 0; i < n; ++i) {
#define X(k) asm volatile("vfmadd231ps %2, %3, %0\n\tvpmaddwd %4, %1, %1" : "+x"(f##k), "+x"(c##k) : "x"(fa), "x"(fb), "x"(ib));
      X(0) X(1) X(2) X(3) X(4) X(5)
#undef X
    }
    asm volatile("" ::"x"(c0), "x"(c1), "x"(c2), "x"(c3), "x"(c4), "x"(c5), "x"(f0), "x"(f1), "x"(f2), "x"(f3), "x"(f4), "x"(f5));
  }, N);
  double t_exact = best([&](long n) {  // exact: vpmaddwd (16 MAC) + vpaddd, interleaved
    __m256i c0 = ia, c1 = ia, c2 = ia, c3 = ia, c4 = ia, c5 = ia, c6 = ia, c7 = ia, c8 = ia, c9 = ia, c10 = ia, c11 = ia, t;
    for (long i = 0; i < n; ++i) {
#define X(k) asm volatile("vpmaddwd %2, %3, %1\n\tvpaddd %1, %0, %0" : "+x"(c##k), "=&x"(t) : "x"(ia), "x"(ib));
      R12(X)
#undef X
    }
    KEEP12;
  }, N);
  double t_grouped = best([&](long n) {  // the same, 4 vpmaddwd then their 4 vpaddd
    __m256i c0 = ia, c1 = ia, c2 = ia, c3 = ia, c4 = ia, c5 = ia, c6 = ia, c7 = ia, c8 = ia, c9 = ia, c10 = ia, c11 = ia, t0, t1, t2, t3;
    for (long i = 0; i < n; ++i) {
#define G(a, b, c, d)                                                                                   \
  asm volatile("vpmaddwd %8, %9, %4\n\tvpmaddwd %8, %9, %5\n\tvpmaddwd %8, %9, %6\n\tvpmaddwd %8, %9, %7\n\t" \
               "vpaddd %4, %0, %0\n\tvpaddd %5, %1, %1\n\tvpaddd %6, %2, %2\n\tvpaddd %7, %3, %3"      \
               : "+x"(a), "+x"(b), "+x"(c), "+x"(d), "=&x"(t0), "=&x"(t1), "=&x"(t2), "=&x"(t3)      \
               : "x"(ia), "x"(ib));
      G(c0, c1, c2, c3) G(c4, c5, c6, c7) G(c8, c9, c10, c11)
#undef G
    }
    KEEP12;
  }, N);
  double t_ubs = best([&](long n) {  // not exact: vpmaddubsw (32 MAC) + vpmaddwd(ones) + vpaddd
    __m256i c0 = ia, c1 = ia, c2 = ia, c3 = ia, c4 = ia, c5 = ia, c6 = ia, c7 = ia, c8 = ia, c9 = ia, c10 = ia, c11 = ia, t;
    for (long i = 0; i < n; ++i) {
#define X(k) asm volatile("vpmaddubsw %2, %3, %1\n\tvpmaddwd %4, %1, %1\n\tvpaddd %1, %0, %0" : "+x"(c##k), "=&x"(t) : "x"(ia), "x"(ib), "x"(ones));
      R12(X)
#undef X
    }
    KEEP12;
  }, N);
  double t_ubs2 = best([&](long n) {  // not exact: 2 vpmaddubsw + vpaddw (int16) + vpmaddwd(ones) + vpaddd
    __m256i c0 = ia, c1 = ia, c2 = ia, c3 = ia, c4 = ia, c5 = ia, c6 = ia, c7 = ia, c8 = ia, c9 = ia, c10 = ia, c11 = ia, t, u;
    for (long i = 0; i < n; ++i) {
#define X(k)                                                                                            \
  asm volatile("vpmaddubsw %3, %4, %1\n\tvpmaddubsw %4, %3, %2\n\tvpaddw %2, %1, %1\n\tvpmaddwd %5, %1, %1\n\t" \
               "vpaddd %1, %0, %0"                                                                      \
               : "+x"(c##k), "=&x"(t), "=&x"(u) : "x"(ia), "x"(ib), "x"(ones));
      R12(X)
#undef X
    }
    KEEP12;
  }, N);

  const double n12 = 12.0 * N, fma = n12 * 8 / t_fma / 1e9;
  auto row = [&](const char* name, double macs_per_chain_step, double t) {
    double g = n12 * macs_per_chain_step / t / 1e9;
    std::printf("%-46s %7.1f GMAC/s  %.2fx FMA\n", name, g, g / fma);
  };
  std::printf("%-46s %7.1f GMAC/s  (%.2f G instructions/s)\n", "vfmadd231ps ymm (fp32, 8 MAC)", fma, n12 / t_fma / 1e9);
  std::printf("%-46s %7.2f G instructions/s (%.2fx the FMA's)\n", "vpaddd ymm alone", n12 / t_add / 1e9, t_fma / t_add);
  row("vpmaddwd alone (16 MAC, no accumulation)", 16, t_wd);
  std::printf("%-46s %7.2f G instructions/s (FMA alone %.2f)\n", "6 vfmadd231ps + 6 vpmaddwd chains", n12 / t_fma_wd / 1e9, n12 / t_fma / 1e9);
  row("exact: vpmaddwd + vpaddd, interleaved", 16, t_exact);
  row("exact: 4 vpmaddwd, then 4 vpaddd", 16, t_grouped);
  row("not exact: vpmaddubsw + vpmaddwd + vpaddd", 32, t_ubs);
  row("not exact: 2 vpmaddubsw + vpaddw + vpmaddwd + vpaddd", 64, t_ubs2);
  return 0;
}
