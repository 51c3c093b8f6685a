// Tests for the header-only CPU runtime (src/target/cpu/include/tw_cpu).
// Built once per compile-time code path (CMakeLists.txt: tw_cpu_runtime_tests_{native,haswell,
// x86_64}, i.e. -march=native / haswell / x86-64: AVX-512 where the host has it, AVX2, portable),
// and `make test` runs all three.
#include <gtest/gtest.h>

#include <cfloat>
#include <bit>
#include <cmath>
#include <cstdint>
#include <atomic>
#include <cstring>
#include <random>
#include <sys/mman.h>
#include <unistd.h>
#include <thread>
#include <vector>

#include "tw_cpu/tw_cpu.h"
#include "tw_cpu/gemm_impl.h"  // the internals some tests look at (packed-operand caches)

using tw_cpu::bf16;
using tw_cpu::f16;

#if defined(__AMX_TILE__)
// Built with AMX (tw_cpu_runtime_tests_sapphirerapids, or native on an AMX host): on a CPU
// without AMX every test is skipped (their code may use any instruction -march enables).
// CPUID leaf 7: EDX bit 24 AMX-TILE, 22 AMX-BF16, 25 AMX-INT8; compiled for baseline x86-64.
__attribute__((target("arch=x86-64"))) static bool cpu_has_amx() {
  unsigned a = 7, b = 0, c = 0, d = 0;
  __asm__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
  return (d >> 24 & 1) && (d >> 22 & 1) && (d >> 25 & 1);
}
struct AmxHostCheck : testing::Environment {
  void SetUp() override {
    if (!cpu_has_amx()) GTEST_SKIP() << "built for AMX (-march with AMX-TILE/BF16/INT8), but this CPU has no AMX";
  }
};
static testing::Environment* const g_amx_check = testing::AddGlobalTestEnvironment(new AmxHostCheck);
#endif

namespace {

uint32_t fb(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float bf(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// ------------------------------------------------------------------ gemm
template <class T> T make_val(std::mt19937& g);
template <> float make_val<float>(std::mt19937& g) {
  return std::uniform_real_distribution<float>(-1.f, 1.f)(g);
}
template <> f16 make_val<f16>(std::mt19937& g) {
  return tw_cpu::from_f32<f16>(std::uniform_real_distribution<float>(-2.f, 2.f)(g));
}
template <> bf16 make_val<bf16>(std::mt19937& g) {
  return tw_cpu::from_f32<bf16>(std::uniform_real_distribution<float>(-2.f, 2.f)(g));
}
template <> int8_t make_val<int8_t>(std::mt19937& g) {
  return (int8_t)std::uniform_int_distribution<int>(-128, 127)(g);
}
double to_d(float x) { return x; }
double to_d(f16 x) { return tw_cpu::to_f32(x); }
double to_d(bf16 x) { return tw_cpu::to_f32(x); }
double to_d(int8_t x) { return x; }
double to_d(int32_t x) { return x; }

// tight: the rounding-error bound of fp32 accumulation of exact products (bf16 / f16 inputs):
// one rounding per k (an FMA, or one of the two additions of a vdpbf16ps), one per K block
// added into C and one for the accumulate: |err| <= (K + K/256 + 2) u (sum_k |a b| + |c0|),
// u = 2^-24 (first order; the 1.01 covers the higher-order term). Otherwise 1e-4 relative.
template <class T, class TC>
void run_gemm_case(int M, int N, int K, bool tA, bool tB, bool acc, int pad, uint32_t seed,
                   bool tight = false, bool small = false) {
  std::mt19937 g(seed);
  long lda = (tA ? M : K) + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
  long arows = tA ? K : M, brows = tB ? N : K;
  std::vector<T> A((size_t)std::max<long>(1, arows * lda)), B((size_t)std::max<long>(1, brows * ldb));
  for (auto& v : A) v = make_val<T>(g);
  for (auto& v : B) v = make_val<T>(g);
  std::vector<TC> C((size_t)std::max<long>(1, (long)M * ldc));
  for (auto& v : C) {
    if constexpr (std::is_same_v<TC, float>) v = std::uniform_real_distribution<float>(-1.f, 1.f)(g);
    else v = (TC)std::uniform_int_distribution<int>(-1000, 1000)(g);
  }
  std::vector<TC> C0 = C;
  if constexpr (!std::is_same_v<T, int8_t>) {
    if (small)  // the small-M path itself, whatever gemm_run's dispatch picks for the shape
      tw_cpu::detail::gemm_small<T>(M, N, K, A.data(), lda, tA, B.data(), ldb, tB, C.data(), ldc, acc);
  }
  if (!small) tw_cpu::gemm<T, T, TC>(M, N, K, A.data(), lda, tA, B.data(), ldb, tB, C.data(), ldc, acc);

  // double reference on materialised op(A) (M x K) and op(B)^T (N x K)
  std::vector<double> a((size_t)M * K), bt((size_t)N * K);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) a[(size_t)i * K + k] = to_d(tA ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
  for (int j = 0; j < N; ++j)
    for (int k = 0; k < K; ++k) bt[(size_t)j * K + k] = to_d(tB ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
  long bad = 0;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      const double* ai = a.data() + (size_t)i * K;  // not &a[..]: a is empty when K = 0
      const double* bj = bt.data() + (size_t)j * K;
      double s = 0, sa = 0;
      for (int k = 0; k < K; ++k) { s += ai[k] * bj[k]; sa += std::fabs(ai[k] * bj[k]); }
      double c0 = acc ? to_d(C0[(size_t)i * ldc + j]) : 0.0;
      double ref = c0 + s;
      double got = to_d(C[(size_t)i * ldc + j]);
      if constexpr (std::is_same_v<TC, int32_t>) {
        if (got != ref && bad++ < 5)
          ADD_FAILURE() << "int8 gemm mismatch at (" << i << "," << j << ") got " << got << " ref " << ref;
      } else {
        // fp32 accumulation: |err| <= 1e-4 * (sum_k |a_ik b_kj| + |c0|) (+ tiny abs)
        double tol = (tight ? 1.01 * (K + K / 256 + 2) * 0x1p-24 : 1e-4) * (sa + std::fabs(c0)) + 1e-30;
        if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
          ADD_FAILURE() << "gemm mismatch at (" << i << "," << j << ") got " << got << " ref " << ref
                        << " tol " << tol;
      }
    }
  }
  // padding columns of C must be untouched
  for (int i = 0; i < M; ++i)
    for (long j = N; j < ldc; ++j)
      if (!(to_d(C[(size_t)i * ldc + j]) == to_d(C0[(size_t)i * ldc + j])) && bad++ < 5)
        ADD_FAILURE() << "gemm wrote padding at (" << i << "," << j << ")";
  EXPECT_EQ(bad, 0) << "M=" << M << " N=" << N << " K=" << K << " tA=" << tA << " tB=" << tB
                    << " acc=" << acc << " pad=" << pad;
}

struct Shape { int M, N, K, pad; };
const Shape kShapes[] = {{1, 1, 1, 0},     {7, 13, 5, 3},    {127, 129, 65, 5}, {128, 128, 64, 0},
                         {1, 300, 200, 1}, {3, 64, 77, 0},   {14, 33, 300, 2},  {16, 100, 64, 7},
                         {29, 31, 1, 1},   {5, 0, 4, 0},     {0, 5, 4, 0},      {6, 7, 0, 1},
                         {200, 40, 600, 4}, {15, 257, 1100, 0}};

template <class T, class TC>
void run_all_small(uint32_t seed) {
  for (const Shape& s : kShapes)
    for (int tA = 0; tA < 2; ++tA)
      for (int tB = 0; tB < 2; ++tB)
        for (int acc = 0; acc < 2; ++acc)
          run_gemm_case<T, TC>(s.M, s.N, s.K, tA, tB, acc, s.pad, seed++);
}

TEST(Gemm, F32Shapes) { run_all_small<float, float>(1); }
// M = 1 and 2 (fp32, B not transposed) take the GEMV-like path (a partial head vector up to B's
// vector boundary, full vectors, a partial tail vector; k in groups of 8 with a remainder; more
// placements in F32GemvPlacements below); M = 3 the streamed-B path.
TEST(Gemm, F32SkinnyGemv) {
  const Shape shapes[] = {{1, 2085, 7, 3}, {2, 2085, 9, 0}, {1, 1024, 256, 0}, {2, 17, 130, 1},
                          {1, 5, 3, 0},    {2, 2048, 1, 2}, {3, 1100, 33, 1}};
  uint32_t seed = 500;
  for (const Shape& s : shapes)
    for (int tA = 0; tA < 2; ++tA)
      for (int acc = 0; acc < 2; ++acc) run_gemm_case<float, float>(s.M, s.N, s.K, tA, false, acc, s.pad, seed++);
}

// Floats in their own mapping with an inaccessible page right before and right after the usable
// pages: `at_end` places the n floats so they end `slack` floats before the trailing guard page,
// otherwise they start `slack` floats after the leading one. A read or write outside [p, p + n)
// that crosses into a guard page faults (the gemv's masked head/tail loads and stores must not).
struct Guarded {
  char* base = nullptr;
  size_t len = 0;
  float* p = nullptr;
  Guarded(size_t n, long slack, bool at_end) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    const size_t body = ((n + (size_t)slack) * sizeof(float) + pg - 1) / pg * pg;
    len = body + 2 * pg;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error("mmap failed");
    base = (char*)m;
    mprotect(base, pg, PROT_NONE);
    mprotect(base + pg + body, pg, PROT_NONE);
    p = at_end ? (float*)(base + pg + body) - slack - (long)n : (float*)(base + pg) + slack;
  }
  ~Guarded() { munmap(base, len); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
};

// The M <= 2 fp32 path (gemv_f32): every placement of B relative to a vector boundary (a head
// of p = 1..kVF-1 partial columns when all rows share the offset; none when ldb makes each row's
// offset different), every tail length, K below, at and above multiples of the 8-row group,
// transposed A with an odd stride, accumulate or overwrite, R = 2 with a padded ldc, operands
// next to guard pages. Error bound of the fp32 sums (one rounding per fma/add, at most K + 1 of
// them): |got - ref| <= (K + 2) * 2^-24 * (sum_k |a_ik b_kj| + |c0|).
void run_gemv_case(int M, int N, int K, bool tA, bool acc, long boff, long ldb, bool at_end, uint32_t seed) {
  std::mt19937 g(seed);
  const long lda = tA ? M + 3 : K + 1, ldc = N + 5;
  const long arows = tA ? K : M;
  Guarded A((size_t)(arows * lda), 1, !at_end), B((size_t)((K - 1) * ldb + N), boff, at_end),
      C((size_t)((M - 1) * ldc + N), 0, at_end);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (long i = 0; i < arows * lda; ++i) A.p[i] = u(g);
  for (long i = 0; i < (K - 1) * ldb + N; ++i) B.p[i] = u(g);
  // C: its rows plus, for M = 2, the pad between them (which must stay untouched)
  const long clen = (M - 1) * ldc + N;
  for (long i = 0; i < clen; ++i) C.p[i] = u(g);
  std::vector<float> C0(C.p, C.p + clen);
  tw_cpu::gemm<float, float, float>(M, N, K, A.p, lda, tA, B.p, ldb, false, C.p, ldc, acc);
  long bad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0, sa = 0;
      for (int k = 0; k < K; ++k) {
        double t = (double)(tA ? A.p[(long)k * lda + i] : A.p[(long)i * lda + k]) * B.p[(long)k * ldb + j];
        s += t;
        sa += std::fabs(t);
      }
      const double c0 = acc ? C0[(size_t)(i * ldc + j)] : 0.0, ref = c0 + s;
      const double got = C.p[i * ldc + j];
      const double tol = (K + 2) * std::ldexp(1.0, -24) * (sa + std::fabs(c0)) + 1e-30;
      if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
        ADD_FAILURE() << "gemv mismatch at (" << i << "," << j << ") got " << got << " ref " << ref << " tol " << tol;
    }
  for (long j = N; j < ldc && M == 2; ++j)
    if (C.p[j] != C0[(size_t)j] && bad++ < 5) ADD_FAILURE() << "gemv wrote C's padding at column " << j;
  EXPECT_EQ(bad, 0) << "M=" << M << " N=" << N << " K=" << K << " tA=" << tA << " acc=" << acc
                    << " B offset=" << boff << " ldb=" << ldb << " at_end=" << at_end;
}

TEST(Gemm, F32GemvPlacements) {
  const int Ns[] = {1, 5, 12, 13, 16, 17, 47, 1027};
  const int Ks[] = {1, 7, 8, 9, 33};
  const long offs[] = {0, 1, 4, 12, 15};
  uint32_t seed = 900;
  for (int M = 1; M <= 2; ++M)
    for (int N : Ns)
      for (int K : Ks)
        for (long off : offs)
          for (int l = 0; l < 3; ++l) {
            // ldb: N itself, N + 3 (rows at different offsets), a multiple of 16 (rows at the
            // same offset, so a head of 16 - off columns on AVX-512)
            const long ldb = l == 0 ? N : l == 1 ? N + 3 : (N + 15) / 16 * 16 + 16;
            const bool tA = (seed & 1) != 0, acc = (seed & 2) != 0, at_end = (seed & 4) != 0;
            run_gemv_case(M, N, K, tA, acc, off, ldb, at_end, seed++);
          }
}
// The shape of the tile programs' calls: B rows of 4096 floats, a K step of 32 or 256, numpy's
// 16-byte offset, repeated accumulating calls into one C (the fragment) over a K loop.
TEST(Gemm, F32GemvTileLoop) {
  for (int M = 1; M <= 2; ++M)
    for (int tA = 0; tA < 2; ++tA) {
      run_gemv_case(M, 4096, 32, tA, true, 4, 4096, true, 950 + M * 2 + tA);
      run_gemv_case(M, 4096, 259, tA, false, 4, 4096, false, 960 + M * 2 + tA);
      run_gemv_case(M, 4100, 20, tA, true, 0, 4100, true, 970 + M * 2 + tA);
    }
}
// The GEMV dispatcher (gemm_path): M <= 2 with B not transposed and N = 1 with A transposed
// stream rows (gemv_f32); M = 1 with B transposed and N = 1 with A not transposed take dot
// products along contiguous K (gemv_dots); no packing for any of them.
TEST(Gemm, GemvPathChoice) {
  using tw_cpu::detail::GemmPath;
  struct Case { int M, N; bool tA, tB; GemmPath want; };
  const Case cases[] = {
      {1, 4096, false, false, GemmPath::gemv_rows}, {1, 4096, true, false, GemmPath::gemv_rows},
      {2, 4096, false, false, GemmPath::gemv_rows}, {1, 4096, false, true, GemmPath::gemv_dots},
      {1, 4096, true, true, GemmPath::gemv_dots},   {4096, 1, false, false, GemmPath::gemv_dots},
      {4096, 1, false, true, GemmPath::gemv_dots},  {4096, 1, true, false, GemmPath::gemv_rows},
      {4096, 1, true, true, GemmPath::gemv_rows},   {3, 100, false, false, GemmPath::skinny},
      {2, 100, false, true, GemmPath::packed},      {100, 2, false, false, GemmPath::packed}};
  for (const Case& c : cases)
    EXPECT_EQ(tw_cpu::detail::gemm_path(c.M, c.N, c.tA, c.tB), c.want)
        << "M=" << c.M << " N=" << c.N << " tA=" << c.tA << " tB=" << c.tB;
}
// Numerics of the GEMV shapes on every transpose against a float64 reference (1e-4 of
// sum |a b| + |c0|, run_gemm_case): K below, at and past multiples of one and two vectors (the
// masked / scalar K tail of the dot products), 1, 3, 4, 5 and many rows (groups of four and the
// remainder), padded strides (a strided vector operand is gathered, a strided output column
// written element by element), accumulate or overwrite, and empty dimensions.
TEST(Gemm, F32GemvDotsAndColumns) {
  const int Ks[] = {0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 100, 1031};
  const int Ls[] = {1, 3, 4, 5, 17, 300};
  uint32_t seed = 3000;
  for (int K : Ks)
    for (int L : Ls)
      for (int tA = 0; tA < 2; ++tA)
        for (int tB = 0; tB < 2; ++tB) {
          const int pad = (int)(seed % 3) * 2, acc = (int)(seed >> 1) & 1;
          run_gemm_case<float, float>(1, L, K, tA, tB, acc, pad, seed++);  // M = 1
          run_gemm_case<float, float>(L, 1, K, tA, tB, acc, pad, seed++);  // N = 1
        }
  for (int tA = 0; tA < 2; ++tA)
    for (int tB = 0; tB < 2; ++tB) {
      run_gemm_case<float, float>(0, 1, 5, tA, tB, false, 0, seed++);
      run_gemm_case<float, float>(1, 0, 5, tA, tB, false, 0, seed++);
      run_gemm_case<float, float>(1, 1, 0, tA, tB, true, 1, seed++);
      run_gemm_case<float, float>(1, 1, 4097, tA, tB, true, 3, seed++);
    }
}
// M = 1 on strips of B's rows (gemv_shared_rows): a tile program's loop as the op zoo's matvec
// runs it (blocks of `bn` columns of B's `width`-long rows, K in steps of `ks`, numpy's 16-byte
// offset), on 1, 2 or 3 threads splitting the blocks as the launcher does. With blocks narrower
// than kGvShareCols the whole-row products must end up in the shared arena (the path is taken);
// with wider ones (and their narrow tail block) none may (each block streams its own strip: no
// second pass over B) and each wide block's result must equal, bit for bit, the plain gemv's.
// Every other block's result (the tail's too) must equal,
// bit for bit, the strip-by-strip computation it replaces (sums from zero, added into C), whichever
// thread computed which product; and it must be within the fp32 bound of a float64 reference.
void run_shared_rows(int width, int K, int bn, int ks, bool tA, int threads, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const long lda = tA ? 3 : K;  // transposed A: a column of a K x 3 matrix
  std::vector<float> Araw((size_t)K * lda + 1), Braw((size_t)K * width + 4);
  for (auto& v : Araw) v = u(g);
  for (auto& v : Braw) v = u(g);
  const float* A = Araw.data();
  const float* B = Braw.data() + 4;
  const int blocks = (width + bn - 1) / bn;
  std::vector<float> C((size_t)blocks * bn, 7.f), E((size_t)blocks * bn, 7.f);
  auto block = [&](int bx) {
    const int n = std::min(bn, width - bx * bn);
    for (int k0 = 0; k0 < K; k0 += ks) {
      const int kc = std::min(ks, K - k0);
      const float* a = tA ? A + (long)k0 * lda : A + k0;
      tw_cpu::gemm<float, float, float>(1, n, kc, a, lda, tA, B + (long)k0 * width + bx * bn, width, false,
                                        C.data() + bx * bn, bn, k0 > 0, true, true, bx * bn, width);
    }
  };
  tw_cpu::new_launch();
  {  // thread t runs blocks [t * blocks / threads, (t + 1) * blocks / threads), the caller the first
    std::vector<std::thread> ts;
    auto share = [&](int t) { for (int bx = t * blocks / threads; bx < (t + 1) * blocks / threads; ++bx) block(bx); };
    for (int t = 1; t < threads; ++t) ts.emplace_back(share, t);
    share(0);
    for (auto& t : ts) t.join();
  }
  // the path was taken for narrow blocks (every K step's whole-row product is in the shared
  // arena), and not for wide ones
  const bool shared = bn < tw_cpu::detail::kGvShareCols;
  for (int k0 = 0; k0 < K; k0 += ks) {
    const float* a = tA ? A + (long)k0 * lda : A + k0;
    const float* prod = tw_cpu::detail::shared_packed_b().find(B + (long)k0 * width, width, std::min(ks, K - k0),
                                                               width, 64 + (tA ? 1 : 0), a, lda);
    EXPECT_EQ(prod != nullptr, shared) << "k0=" << k0 << " bn=" << bn;
  }
  // expected, bit for bit: each strip's sums from zero (the lane-wise gemv), added into C
  std::vector<float> t((size_t)bn);
  long bad = 0;
  for (int bx = 0; bx < blocks; ++bx) {
    const int n = std::min(bn, width - bx * bn);
    for (int k0 = 0; k0 < K; k0 += ks) {
      const int kc = std::min(ks, K - k0);
      const float* a = tA ? A + (long)k0 * lda : A + k0;
      if (!shared && n == bn) {  // wide blocks: the plain gemv, accumulating into C row by row
        tw_cpu::detail::gemv_f32<1>(n, kc, a, lda, tA, B + (long)k0 * width + bx * bn, width, E.data() + bx * bn,
                                    n, k0 > 0);
        continue;
      }
      tw_cpu::detail::gemv_f32<1>(n, kc, a, lda, tA, B + (long)k0 * width + bx * bn, width, t.data(), n, false);
      for (int j = 0; j < n; ++j) E[(size_t)(bx * bn + j)] = k0 > 0 ? E[(size_t)(bx * bn + j)] + t[j] : t[j];
    }
    for (int j = 0; j < n; ++j) {
      const int c = bx * bn + j;
      double s = 0, sa = 0;
      for (int k = 0; k < K; ++k) {
        const double p = (double)A[tA ? (long)k * lda : k] * B[(long)k * width + c];
        s += p;
        sa += std::fabs(p);
      }
      if (fb(C[(size_t)c]) != fb(E[(size_t)c]) && bad++ < 5)
        ADD_FAILURE() << "column " << c << ": " << C[(size_t)c] << " != strip result " << E[(size_t)c];
      // fp32: one rounding per product and per addition of a K step's sum, (K + K / ks + 1) u
      if (!(std::fabs(C[(size_t)c] - s) <= (K + K / ks + 1) * 0x1p-24 * sa + 1e-30) && bad++ < 5)
        ADD_FAILURE() << "column " << c << ": " << C[(size_t)c] << " vs float64 " << s;
    }
  }
  EXPECT_EQ(bad, 0) << "width=" << width << " K=" << K << " bn=" << bn << " ks=" << ks << " tA=" << tA
                    << " threads=" << threads;
}
TEST(Gemm, F32GemvSharedWholeRows) {
  uint32_t seed = 4000;
  for (int threads = 1; threads <= 3; ++threads)
    for (int tA = 0; tA < 2; ++tA) {
      run_shared_rows(1024, 256, 128, 128, tA, threads, seed++);
      run_shared_rows(1000, 131, 128, 32, tA, threads, seed++);  // tails: a narrow last block, a short K step
      run_shared_rows(515, 9, 37, 4, tA, threads, seed++);
      // wide blocks stream their own strips; the 5-column tail block does not start a product
      run_shared_rows(4101, 37, 2048, 16, tA, threads, seed++);
      run_shared_rows(6144, 9, 2048, 8, tA, threads, seed++);
    }
}
TEST(Gemm, F16Shapes) { run_all_small<f16, float>(2); }
TEST(Gemm, BF16Shapes) { run_all_small<bf16, float>(3); }
TEST(Gemm, I8Shapes) { run_all_small<int8_t, int32_t>(4); }

// bf16 with the tight fp32-accumulation bound. With AVX512-BF16 (the native build on such a host)
// this is the packed-k-pair / vdpbf16ps path: odd and even K (the odd one pads a zero pair
// element), K across one and several K blocks (512 k per block there), every transpose
// combination, accumulate on and off, row tails (M not a multiple of 14) and column tails,
// odd and even leading-dimension padding (odd: rows start at odd bf16 offsets).
TEST(Gemm, BF16PairsTight) {
  const Shape shapes[] = {{1, 1, 1, 0},    {2, 3, 3, 1},       {14, 32, 2, 0},    {15, 33, 7, 1},
                          {29, 65, 31, 2}, {28, 64, 512, 0},   {30, 47, 513, 3},  {17, 100, 1023, 1},
                          {141, 70, 1025, 5}, {3, 31, 16, 0},  {8, 40, 17, 4},    {43, 97, 255, 7}};
  uint32_t seed = 500;
  for (const Shape& s : shapes)
    for (int tA = 0; tA < 2; ++tA)
      for (int tB = 0; tB < 2; ++tB)
        for (int acc = 0; acc < 2; ++acc)
          run_gemm_case<bf16, float>(s.M, s.N, s.K, tA, tB, acc, s.pad, seed++, /*tight=*/true);
}
// The small-M path (gemm_small: nothing packed, f16 / bf16 widened in registers): every M up to
// kSmallM, odd N and K (column and K tails of every width class: 1, 3, 17, 129), leading-dimension
// padding (odd: rows at odd element offsets), every transpose, accumulate on and off, with the
// tight fp32-accumulation bound; called directly, and through tw_cpu::gemm (gemm_run's dispatch).
template <class T>
void small_m_cases(uint32_t seed) {
  for (int M = 1; M <= tw_cpu::detail::kSmallM; ++M)
    for (int N : {1, 3, 17, 129})
      for (int K : {1, 3, 17, 129})
        for (int tA = 0; tA < 2; ++tA)
          for (int tB = 0; tB < 2; ++tB) {
            const int acc = (M + N + K) % 2, pad = (M + tA + tB) % 2 ? 3 : 0;
            run_gemm_case<T, float>(M, N, K, tA, tB, acc, pad, seed++, /*tight=*/true, /*small=*/true);
            run_gemm_case<T, float>(M, N, K, tA, tB, !acc, 3 - pad, seed++, /*tight=*/true);
          }
}
TEST(Gemm, SmallMInPlaceF32) { small_m_cases<float>(900); }
TEST(Gemm, SmallMInPlaceBF16) { small_m_cases<bf16>(5000); }
TEST(Gemm, SmallMInPlaceF16) { small_m_cases<f16>(9000); }
// bf16 through gemm_small's halves (2 kVF bf16 read as 32-bit pairs, even and odd elements
// widened apart: B rows in blocks of 4 kVF columns, B transposed with op(A)'s rows reordered per
// 2 kVF k; with AVX512-BF16, no AMX and op(A) not transposed, vdpbf16ps on the pairs: dp_small, B rows
// interleaved in 64 / 32 columns, its column and odd-K tails masked): the paged-decode shapes, widths and depths at and around those blocks on every
// vector width (AVX-512 32 / 64, AVX2 16 / 32, SSE 8 / 16), with the K and column tails after
// them, op(A) transposed (gathered, then reordered) or not, leading-dimension padding
TEST(Gemm, SmallMBF16Halves) {
  uint32_t seed = 7000;
  const int shapes[][3] = {{4, 16, 128}, {4, 128, 16}, {4, 64, 64}, {3, 95, 63}, {2, 33, 32}, {1, 64, 31},
                           {4, 17, 97}, {8, 129, 33}, {5, 48, 16}, {7, 96, 65}};
  for (const auto& sh : shapes)
    for (int tA = 0; tA < 2; ++tA)
      for (int tB = 0; tB < 2; ++tB)
        for (int pad : {0, 5})
          run_gemm_case<bf16, float>(sh[0], sh[1], sh[2], tA, tB, (seed & 1) != 0, pad, seed++, /*tight=*/true,
                                     /*small=*/true);
}
// next_b (tw_cpu::gemm's prefetch hint: the same strip of the next page, prefetched during the
// call, spread over gemm_small's loops or all at the start on the other paths) never changes C:
// every dtype, the paged-decode shapes and odd ones (column and K tails, one row, M past 4 and
// past kSmallM: the packed driver), each transpose, accumulate on and off, the next strip at
// another leading dimension; bit for bit against the call without it, and within the tight
// fp32-accumulation bound of a float64 reference (run_gemm_case, same shapes)
template <class T>
void next_strip_cases(uint32_t seed) {
  const int shapes[][3] = {{4, 16, 128}, {4, 128, 16}, {1, 1, 1}, {3, 17, 33}, {8, 129, 17}, {5, 64, 3},
                           {4, 16, 0}, {12, 40, 70}};
  for (const auto& sh : shapes)
    for (int tB = 0; tB < 2; ++tB)
      for (int tA = 0; tA < 2; ++tA) {
        const int M = sh[0], N = sh[1], K = sh[2];
        std::mt19937 g(seed++);
        const long lda = tA ? M : K, ldb = (tB ? K : N) + 3, brows = tB ? N : K;
        const long nldb = ldb + 64;  // the next strip's rows lie farther apart
        std::vector<T> A((size_t)std::max<long>(1, (long)M * K)), B((size_t)std::max<long>(1, brows * ldb)),
            NB((size_t)std::max<long>(1, brows * nldb));
        for (auto& v : A) v = make_val<T>(g);
        for (auto& v : B) v = make_val<T>(g);
        for (auto& v : NB) v = make_val<T>(g);
        for (int acc = 0; acc < 2; ++acc) {
          std::vector<float> C0((size_t)M * N + 1);
          for (auto& v : C0) v = std::uniform_real_distribution<float>(-1.f, 1.f)(g);
          std::vector<float> c1 = C0, c2 = C0, c3 = C0;
          if (M <= tw_cpu::detail::kSmallM) {
            tw_cpu::detail::gemm_small<T>(M, N, K, A.data(), lda, tA, B.data(), ldb, tB, c1.data(), N, acc);
            tw_cpu::detail::gemm_small<T>(M, N, K, A.data(), lda, tA, B.data(), ldb, tB, c2.data(), N, acc,
                                          NB.data(), nldb);
          }
          tw_cpu::gemm<T, T, float>(M, N, K, A.data(), lda, tA, B.data(), ldb, tB, c3.data(), N, acc, false, false,
                                    -1, 0, NB.data(), nldb);
          std::vector<float> ref = C0;
          tw_cpu::gemm<T, T, float>(M, N, K, A.data(), lda, tA, B.data(), ldb, tB, ref.data(), N, acc);
          EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float))) << M << " " << N << " " << K;
          EXPECT_EQ(0, std::memcmp(ref.data(), c3.data(), ref.size() * sizeof(float))) << M << " " << N << " " << K;
        }
        run_gemm_case<T, float>(M, N, K, tA, tB, (seed & 1) != 0, 1, seed, /*tight=*/true, M <= tw_cpu::detail::kSmallM);
      }
}
TEST(Gemm, NextStripHintF32) { next_strip_cases<float>(11000); }
TEST(Gemm, NextStripHintBF16) { next_strip_cases<bf16>(12000); }
TEST(Gemm, NextStripHintF16) { next_strip_cases<f16>(13000); }
// f16 / bf16 specials through the small path: inf, NaN and subnormals widened exactly (no DAZ;
// with AVX512-BF16 and no AMX, bf16 with op(A) not transposed takes vdpbf16ps: a subnormal reads as 0)
TEST(Gemm, SmallMWidensSpecials) {
  const int M = 3, N = 5, K = 4;
  for (int tB = 0; tB < 2; ++tB) {
    std::vector<bf16> A((size_t)M * K, tw_cpu::from_f32<bf16>(1.0f)), B((size_t)K * N, tw_cpu::from_f32<bf16>(0.0f));
    std::vector<float> C((size_t)M * N, 7.0f);
    A[0] = bf16{0x0001};  // 2^-133: a subnormal bf16, kept by the widening path (no DAZ)
    auto b_at = [&](int k, int j) -> bf16& { return tB ? B[(size_t)j * K + k] : B[(size_t)k * N + j]; };
    b_at(0, 0) = tw_cpu::from_f32<bf16>(0x1p100f);
    b_at(1, 1) = bf16{0x7f80};  // +inf
    b_at(2, 2) = bf16{0x7fc0};  // NaN
    tw_cpu::gemm<bf16, bf16, float>(M, N, K, A.data(), K, false, B.data(), tB ? K : N, tB, C.data(), N, false);
#if defined(TW_CPU_SMALL_DP)  // vdpbf16ps (dp_small) reads it as 0, as the packed bf16 path (DAZ)
    EXPECT_EQ(C[0], 0.0f) << "tB=" << tB;
#else
    EXPECT_EQ(C[0], 0x1p-33f) << "tB=" << tB;
#endif
    EXPECT_EQ(C[1 * N + 0], 0x1p100f);
    for (int i = 0; i < M; ++i) {
      EXPECT_TRUE(std::isinf(C[i * N + 1]) && C[i * N + 1] > 0);
      EXPECT_TRUE(std::isnan(C[i * N + 2]));
      EXPECT_EQ(C[i * N + 3], 0.0f);
    }
  }
}
// f16 specials through the packed path (M > kSmallM: packing widens with load8): subnormal,
// inf, NaN, the largest finite value and -0 widened exactly; both transposes of A and B
TEST(Gemm, PackedF16WidensSpecials) {
  const int M = 19, N = 21, K = 11;  // row and column tails, K below the 8-wide packing block
  for (int tA = 0; tA < 2; ++tA)
    for (int tB = 0; tB < 2; ++tB) {
      std::vector<f16> A((size_t)M * K, tw_cpu::from_f32<f16>(1.0f)), B((size_t)K * N, tw_cpu::from_f32<f16>(0.0f));
      std::vector<float> C((size_t)M * N, 7.0f);
      auto a_at = [&](int i, int k) -> f16& { return tA ? A[(size_t)k * M + i] : A[(size_t)i * K + k]; };
      auto b_at = [&](int k, int j) -> f16& { return tB ? B[(size_t)j * K + k] : B[(size_t)k * N + j]; };
      a_at(0, 0) = f16{0x0001};                   // 2^-24, the smallest subnormal f16
      a_at(M - 1, 0) = f16{0x83ff};               // -(2^-14 - 2^-24), the largest subnormal, negative
      b_at(0, 0) = tw_cpu::from_f32<f16>(4096.0f);  // row 0: 2^-24 * 2^12 = 2^-12
      b_at(0, N - 1) = f16{0x7bff};               // 65504: column N-1 = a(i,0) * 65504
      b_at(1, 1) = f16{0x7c00};                   // +inf
      b_at(2, 2) = f16{0x7e00};                   // NaN
      b_at(3, 3) = f16{0x8000};                   // -0: column 3 is (+0) + (-0) ... = +0
      tw_cpu::gemm<f16, f16, float>(M, N, K, A.data(), tA ? M : K, tA, B.data(), tB ? K : N, tB, C.data(), N, false);
      EXPECT_EQ(C[0], 0x1p-12f) << "tA=" << tA << " tB=" << tB;
      EXPECT_EQ(C[N - 1], 65504.0f * 0x1p-24f);
      EXPECT_EQ(C[(size_t)(M - 1) * N], -(0x1p-14f - 0x1p-24f) * 4096.0f);
      EXPECT_EQ(C[(size_t)(M - 1) * N + N - 1], -(0x1p-14f - 0x1p-24f) * 65504.0f);
      for (int i = 0; i < M; ++i) {
        EXPECT_TRUE(std::isinf(C[(size_t)i * N + 1]) && C[(size_t)i * N + 1] > 0) << i;
        EXPECT_TRUE(std::isnan(C[(size_t)i * N + 2])) << i;
        EXPECT_EQ(fb(C[(size_t)i * N + 3]), 0u) << i;
        if (i > 0 && i < M - 1) EXPECT_EQ(C[(size_t)i * N], 4096.0f) << i;
      }
    }
}
// int8 -> int32 at the extremes, exact for every input (the AVX2 path multiplies sign-extended
// int16 pairs with vpmaddwd: -128 x -128 pairs sum to 32768, which an int16 result could not hold,
// so this is the case a vpmaddubsw kernel would get wrong): all -128, all 127, -128 against 127,
// a checkerboard of both, and random values with -128 forced on the diagonal; K = 1, odd, one
// past the AVX2 k pair, one past a K block (512 k on AVX2) and over two blocks; row / column tails
TEST(Gemm, I8Extremes) {
  const int shapes[][3] = {{1, 1, 1}, {7, 17, 1}, {6, 16, 3}, {13, 35, 513}, {25, 40, 1037}, {64, 48, 2}};
  uint32_t seed = 7000;
  for (const auto& sh : shapes) {
    const int M = sh[0], N = sh[1], K = sh[2];
    for (int pat = 0; pat < 5; ++pat)
      for (int tA = 0; tA < 2; ++tA)
        for (int tB = 0; tB < 2; ++tB) {
          std::mt19937 g(seed++);
          std::vector<int8_t> A((size_t)M * K), B((size_t)K * N);
          auto va = [&](int i, int k) -> int8_t {
            switch (pat) {
              case 0: return -128;
              case 1: return 127;
              case 2: return -128;
              case 3: return (i + k) % 2 ? -128 : 127;
              default: return i == k % M ? -128 : (int8_t)std::uniform_int_distribution<int>(-128, 127)(g);
            }
          };
          auto vb = [&](int k, int j) -> int8_t {
            switch (pat) {
              case 0: return -128;
              case 1: return 127;
              case 2: return 127;
              case 3: return (k + j) % 2 ? -128 : 127;
              default: return j == k % N ? -128 : (int8_t)std::uniform_int_distribution<int>(-128, 127)(g);
            }
          };
          for (int i = 0; i < M; ++i)
            for (int k = 0; k < K; ++k) A[tA ? (size_t)k * M + i : (size_t)i * K + k] = va(i, k);
          for (int k = 0; k < K; ++k)
            for (int j = 0; j < N; ++j) B[tB ? (size_t)j * K + k : (size_t)k * N + j] = vb(k, j);
          const bool acc = (tA + tB) % 2;
          std::vector<int32_t> C((size_t)M * N, acc ? -12345 : 777);
          tw_cpu::gemm<int8_t, int8_t, int32_t>(M, N, K, A.data(), tA ? M : K, tA, B.data(), tB ? K : N, tB,
                                                C.data(), N, acc);
          long bad = 0;
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
              int64_t ref = acc ? -12345 : 0;
              for (int k = 0; k < K; ++k)
                ref += (int64_t)A[tA ? (size_t)k * M + i : (size_t)i * K + k] * B[tB ? (size_t)j * K + k : (size_t)k * N + j];
              if (C[(size_t)i * N + j] != ref && bad++ < 3)
                ADD_FAILURE() << "M=" << M << " N=" << N << " K=" << K << " pattern " << pat << " tA=" << tA
                              << " tB=" << tB << " at (" << i << "," << j << ") got " << C[(size_t)i * N + j]
                              << " want " << ref;
            }
          if (pat == 0) EXPECT_EQ(C[0], (acc ? -12345 : 0) + 16384 * K);  // the reference itself
        }
  }
}
// The int8 packers around their vector chunks (AVX2: 16 k of a row of A and 16 columns of two rows
// of B widened at once, scalar group_i8 for the rest): K on both sides of 16 and 32 (the chunk
// boundary and the odd pair), N at, below and above a 16-column panel, row counts around the
// 6-row panel, leading dimensions wider than the operands (tiles of larger matrices, rows at odd
// byte offsets), every transpose, random full-range values: exact against an int64 reference.
TEST(Gemm, I8PackBoundaries) {
  uint32_t seed = 7600;
  for (int M : {5, 6, 7, 13})
    for (int N : {15, 16, 17, 33})
      for (int K : {15, 16, 17, 31, 32, 33})
        for (int t = 0; t < 4; ++t) {
          const bool tA = t & 1, tB = t & 2;
          const long lda = (tA ? M : K) + 3, ldb = (tB ? K : N) + 5;
          std::mt19937 g(seed++);
          std::uniform_int_distribution<int> d(-128, 127);
          std::vector<int8_t> A((size_t)(tA ? K : M) * lda), B((size_t)(tB ? N : K) * ldb);
          for (auto& x : A) x = (int8_t)d(g);
          for (auto& x : B) x = (int8_t)d(g);
          auto a = [&](int i, int k) { return (int64_t)A[tA ? (size_t)k * lda + i : (size_t)i * lda + k]; };
          auto b = [&](int k, int j) { return (int64_t)B[tB ? (size_t)j * ldb + k : (size_t)k * ldb + j]; };
          std::vector<int32_t> C((size_t)M * N, 99);
          tw_cpu::gemm<int8_t, int8_t, int32_t>(M, N, K, A.data(), lda, tA, B.data(), ldb, tB, C.data(), N, t == 3);
          long bad = 0;
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
              int64_t ref = t == 3 ? 99 : 0;
              for (int k = 0; k < K; ++k) ref += a(i, k) * b(k, j);
              if (C[(size_t)i * N + j] != ref && bad++ < 3)
                ADD_FAILURE() << "M=" << M << " N=" << N << " K=" << K << " tA=" << tA << " tB=" << tB << " at (" << i
                              << "," << j << ") got " << C[(size_t)i * N + j] << " want " << ref;
            }
        }
}
TEST(Gemm, BF16LargeTight) {
  for (int tA = 0; tA < 2; ++tA)
    for (int tB = 0; tB < 2; ++tB)
      run_gemm_case<bf16, float>(300, 263, 1537, tA, tB, (tA ^ tB), 1 + tA + 2 * tB, 600 + tA * 2 + tB, true);
}

#if defined(__AVX512BF16__) && defined(__AVX512F__)
// The documented numerics of the AVX512-BF16 path (vdpbf16ps): subnormal bf16 inputs read as
// zero (DAZ), subnormal fp32 results of a step are flushed to zero (FTZ), and each of the two
// additions of a pair's products into the accumulator is rounded to fp32 (round to nearest even).
TEST(Gemm, BF16PairsDazFtz) {
  auto bits = [](uint16_t b) { return bf16{b}; };
  const int M = 16, N = 40;  // a full 14-row kernel plus a 2-row tail, a column tail
  for (int K : {1, 2, 3, 6}) {
    for (int tA = 0; tA < 2; ++tA) {
      std::vector<bf16> A((size_t)M * K), B((size_t)K * N);
      std::vector<float> C((size_t)M * N, 5.0f);
      // rows: 0 mod 3: subnormal 2^-133 (0x0001) or -2^-127 (0x8040) times 2^100 (0x7180): the exact
      // product 2^-33 is a normal float, but the subnormal input reads as 0 -> 0.
      // 1 mod 3: 2^-70 (0x1c80) times 2^-70: the product 2^-140 is subnormal in fp32 -> flushed to 0.
      // 2 mod 3: 2^-60 (0x2180) times 2^-60: 2^-120, normal -> kept exactly (K * 2^-120).
      for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k) {
          uint16_t a = i % 3 == 0 ? ((i + k) % 2 ? 0x0001 : 0x8040) : i % 3 == 1 ? 0x1c80 : 0x2180;
          A[tA ? (size_t)k * M + i : (size_t)i * K + k] = bits(a);
        }
      for (int k = 0; k < K; ++k)
        for (int j = 0; j < N; ++j) B[(size_t)k * N + j] = bits(0x7180);  // 2^100 (rows 0 mod 3)
      // rows 1, 2 mod 3 need B = 2^-70 / 2^-60: run them as separate calls on row subsets
      std::vector<bf16> B70(B.size(), bits(0x1c80)), B60(B.size(), bits(0x2180));
      for (int r = 0; r < 3; ++r) {
        const std::vector<bf16>& Bm = r == 0 ? B : r == 1 ? B70 : B60;
        tw_cpu::gemm<bf16, bf16, float>(M, N, K, A.data(), tA ? M : K, tA, Bm.data(), N, false, C.data(),
                                        N, false);
        for (int i = r; i < M; i += 3)
          for (int j = 0; j < N; ++j) {
            const float want = r == 2 ? (float)K * 0x1p-120f : 0.0f;
            ASSERT_EQ(fb(C[(size_t)i * N + j]), fb(want)) << "K=" << K << " tA=" << tA << " row " << i << " col " << j;
          }
      }
    }
  }
  // rounding: 1 * 1 + 2^-24 * 1 + 2^-24 * 1 (k = 0, 1, 2) = 1 + 2^-23 exactly, but each addition
  // rounds to fp32 (a tie, to even): 1 whatever the order of the additions.
  {
    std::vector<bf16> A = {bits(0x3f80), bits(0x3380), bits(0x3380)}, B(3 * 16, bits(0x3f80));
    std::vector<float> C(16, 0.0f);
    tw_cpu::gemm<bf16, bf16, float>(1, 16, 3, A.data(), 3, false, B.data(), 16, false, C.data(), 16, false);
    for (int j = 0; j < 16; ++j) EXPECT_EQ(C[j], 1.0f) << j;
  }
}
#endif

// Edge sizes of the micro-kernels' blocks (16-row / 16-column tiles, 32 bf16 or 64 int8 k per
// tile row on AMX; 14 x 32 on AVX-512): every (M, N, K) from {1, 15, 16, 17, 31, 33}, every
// transpose, accumulate on and off; bf16 with the tight fp32-accumulation bound, int8 exact.
TEST(Gemm, TileEdgeSizes) {
  const int sizes[] = {1, 15, 16, 17, 31, 33};
  uint32_t seed = 800;
  for (int M : sizes)
    for (int N : sizes)
      for (int K : sizes) {
        const int t = (int)(seed % 8), pad = (int)(seed % 3);
        run_gemm_case<bf16, float>(M, N, K, t & 1, t >> 1 & 1, t >> 2 & 1, pad, seed, /*tight=*/true);
        run_gemm_case<int8_t, int32_t>(M, N, K, t >> 1 & 1, t & 1, !(t >> 2 & 1), pad, seed + 1);
        seed += 2;
      }
}
// The fp32 micro-kernel's k loop (ukr_f32) for every height 1..kMR and depth 1..41: the k steps
// that carry a line of the next call's operands (pf2_lines: none, fewer than kc, all, more) and
// the rest (AVX2: 8 k steps per iteration and a remainder), B packed (bs = kNR) or streamed
// (bs > kNR), full and partial column strips, accumulate on and off. Every k step is one FMA per
// element in k order, so with FMA the result is bit for bit a scalar fmaf chain (SSE2: mul + add,
// within a K-scaled bound).
TEST(Gemm, MicroKernelDepths) {
  namespace d = tw_cpu::detail;
  std::mt19937 rng(1600);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  std::vector<char> lines(64 * 64, 0);
  for (int R = 1; R <= d::kMR; ++R)
    for (int kc = 1; kc <= 41; ++kc)
      for (int pf : {0, 3, kc, kc + 5}) {
        const long bs = (kc + pf) % 2 ? d::kNR : d::kNR + 5;
        const int nr = kc % 3 == 0 ? d::kNR - 3 : d::kNR;
        const bool acc = kc % 2 == 0;
        const long ldc = d::kNR + 7;
        std::vector<float> A((size_t)kc * d::kMR + 16), B((size_t)kc * bs + 16 + 8 * d::kNR),
            C((size_t)R * ldc), C0;
        for (auto& x : A) x = U(rng);
        for (auto& x : B) x = U(rng);
        for (auto& x : C) x = U(rng);
        C0 = C;
        d::ukr_f32_rows(R, kc, A.data(), d::kMR, B.data(), bs, C.data(), ldc, acc, nr, lines.data(), pf);
        for (int i = 0; i < R; ++i)
          for (int j = 0; j < (int)ldc; ++j) {
            const float got = C[(size_t)i * ldc + j];
            if (j >= nr) {
              ASSERT_EQ(got, C0[(size_t)i * ldc + j]) << "column past nr written: R " << R << " kc " << kc;
              continue;
            }
            float r = 0.0f;
            double bound = 0.0;
            for (int k = 0; k < kc; ++k) {
              const float a = A[(size_t)k * d::kMR + i], b = B[(size_t)k * bs + j];
#if defined(__FMA__) || defined(__AVX512F__)
              r = std::fma(a, b, r);
#else
              r = r + a * b;
#endif
              bound += std::fabs((double)a * b);
            }
            const float want = acc ? C0[(size_t)i * ldc + j] + r : r;
#if defined(__FMA__) || defined(__AVX512F__)
            (void)bound;
            ASSERT_EQ(got, want) << "R " << R << " kc " << kc << " pf2 " << pf << " i " << i << " j " << j;
#else
            ASSERT_NEAR(got, want, 1e-6 * (bound + 2.0)) << "R " << R << " kc " << kc << " i " << i << " j " << j;
#endif
          }
      }
}
// Row panels (panel_rows): every panel of a block covers its rows exactly once, no panel is
// taller than kMR, the panels stay where the packed layout puts them (panel p at p * kMR rows'
// worth of floats), and a remainder under kSplitBelow rows after a full panel is balanced with
// it (14 + 2 -> 8 + 8 on AVX-512) whenever the two heights can both reach kSplitBelow - 1.
TEST(Gemm, PanelRowsPartition) {
  namespace d = tw_cpu::detail;
  for (int mc = 1; mc <= d::kMC; ++mc) {
    const int np = (mc + d::kMR - 1) / d::kMR;
    int next = 0;
    for (int p = 0; p < np; ++p) {
      const d::PanelRows pr = d::panel_rows(mc, p);
      EXPECT_EQ(pr.r0, next) << "mc " << mc << " panel " << p;
      EXPECT_GE(pr.h, 1) << "mc " << mc << " panel " << p;
      EXPECT_LE(pr.h, d::kMR) << "mc " << mc << " panel " << p;
      next = pr.r0 + pr.h;
    }
    EXPECT_EQ(next, mc) << "mc " << mc;
    const int rem = mc % d::kMR;
    if (mc > d::kMR && rem > 0 && rem < d::kSplitBelow && d::kMR + rem >= 2 * d::kSplitBelow - 1) {
      const d::PanelRows a = d::panel_rows(mc, np - 2), b = d::panel_rows(mc, np - 1);
      EXPECT_LE(a.h - b.h, 1) << "mc " << mc;
      EXPECT_GE(b.h, d::kSplitBelow - 1) << "mc " << mc;
    }
  }
}
// The column-tail kernel (ukr_f32_cols: a strip of at most kColTail columns, P panels at once,
// the rows along the lanes): every panel count 1..kColPanels with the driver's panel heights
// (panel_rows of every block height up to kColPanels panels, the balanced split included), depths
// 1..33, accumulate on and off, each column of the strip. Every k step is one FMA in k order, so
// with FMA the result is bit for bit a scalar fmaf chain, as ukr_f32's (SSE2: mul + add, within a
// K-scaled bound); rows past a panel's height and C's other columns untouched.
TEST(Gemm, ColumnTailKernel) {
  namespace d = tw_cpu::detail;
  std::mt19937 rng(1700);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  for (int mc = 1; mc <= d::kColPanels * d::kMR; ++mc)
    for (int kc : {1, 2, 7, 16, 33}) {
      const int np = (mc + d::kMR - 1) / d::kMR;
      const long ps = (long)d::kMR * kc, ldc = d::kColTail + 3;
      const bool acc = (mc + kc) % 2 == 0;
      std::vector<float> A((size_t)np * ps + d::kPackSlack), B((size_t)kc * d::kNR), C((size_t)mc * ldc), C0;
      for (auto& x : A) x = U(rng);
      for (auto& x : B) x = U(rng);
      for (auto& x : C) x = U(rng);
      C0 = C;
      d::PanelRows pr[d::kColPanels];
      for (int p = 0; p < np; ++p) pr[p] = d::panel_rows(mc, p);
      const int j = mc % d::kColTail;
      d::ukr_f32_cols_n(np, kc, A.data(), ps, B.data() + j, C.data() + j, ldc, pr, acc);
      std::vector<float> want = C0;  // column j of each panel's rows: lane r of panel p is row r0 + r
      for (int p = 0; p < np; ++p)
        for (int r = 0; r < pr[p].h; ++r) {
          float x = 0.0f;
          for (int k = 0; k < kc; ++k) {
            const float a = A[(size_t)p * ps + (size_t)k * d::kMR + r], b = B[(size_t)k * d::kNR + j];
#if defined(__FMA__) || defined(__AVX512F__)
            x = std::fma(a, b, x);
#else
            x = x + a * b;
#endif
          }
          float& w = want[(size_t)(pr[p].r0 + r) * ldc + j];
          w = acc ? w + x : x;
        }
      for (size_t e = 0; e < C.size(); ++e) {
#if defined(__FMA__) || defined(__AVX512F__)
        ASSERT_EQ(C[e], want[e]) << "mc " << mc << " kc " << kc << " row " << e / ldc << " col " << e % ldc;
#else
        ASSERT_NEAR(C[e], want[e], 1e-6 * (kc + 2.0)) << "mc " << mc << " kc " << kc << " row " << e / ldc;
#endif
      }
    }
}
// Whole gemms whose last column strip is a narrow tail (1..kColTail columns after full strips:
// ukr_f32_cols; kColTail + 1: ukr_f32), over one and several row blocks (more panels than
// kColPanels), one and two K blocks (accumulating into C), every transpose, fp32 and bf16 (tight).
TEST(Gemm, ColumnTailShapes) {
  namespace d = tw_cpu::detail;
  uint32_t seed = 1800;
  for (int t = 1; t <= d::kColTail + 1; ++t)
    for (int M : {9, 64, d::kMC + 7})
      for (int K : {5, 300}) {
        const int N = 2 * d::kNR + t, tr = (int)(seed % 4);
        run_gemm_case<float, float>(M, N, K, tr & 1, tr >> 1, seed % 3 != 0, (int)(seed % 2), seed);
        run_gemm_case<bf16, float>(M, N, K, tr >> 1, tr & 1, seed % 3 == 0, 1, seed + 1, /*tight=*/true);
        seed += 2;
      }
}
// Every row count of a block and past it (each remainder of the 14-row (AVX-512) / 6-row (AVX2)
// panels, the balanced split, several row blocks) for fp32, f16 and bf16 (tight bound), against
// the float64 reference; N = 37 and 5 (a full 32-column strip + tail, a tail alone), K odd. Then
// the same product through the stable-A path (the whole A packed once into the per-thread cache
// and read by a second call) must be bit for bit the first call's result.
template <class T>
void run_row_tails(uint32_t seed) {
  namespace d = tw_cpu::detail;
  const int ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 14, 15, 16, 17, 18, 27, 28, 29, 30, 31, 43, 57, 64, 113, 127,
                    128, 129, d::kMC - 1, d::kMC, d::kMC + 1, d::kMC + 2, d::kMC + 3, d::kMC + 15, 2 * d::kMC + 2};
  for (int M : ms)
    for (int N : {37, 5}) {
      const int K = 19 + (int)(seed % 3);
      run_gemm_case<T, float>(M, N, K, seed & 1, seed >> 1 & 1, seed >> 2 & 1, (int)(seed % 3), seed,
                              /*tight=*/!std::is_same_v<T, float>);
      std::mt19937 g(seed);
      const long ldb = N + 3;  // ldb != N: the packed A is kept for reuse (a_reused)
      std::vector<T> A((size_t)M * K), B((size_t)K * ldb);
      for (auto& v : A) v = make_val<T>(g);
      for (auto& v : B) v = make_val<T>(g);
      std::vector<float> c0((size_t)M * N), c1((size_t)M * N), c2((size_t)M * N);
      tw_cpu::gemm<T, T, float>(M, N, K, A.data(), K, false, B.data(), ldb, false, c0.data(), N, false);
      tw_cpu::new_launch();
      tw_cpu::gemm<T, T, float>(M, N, K, A.data(), K, false, B.data(), ldb, false, c1.data(), N, false, true);
      tw_cpu::gemm<T, T, float>(M, N, K, A.data(), K, false, B.data(), ldb, false, c2.data(), N, false, true);
      EXPECT_EQ(std::memcmp(c0.data(), c1.data(), c0.size() * sizeof(float)), 0) << "M " << M << " N " << N;
      EXPECT_EQ(std::memcmp(c0.data(), c2.data(), c0.size() * sizeof(float)), 0) << "M " << M << " N " << N;
      ++seed;
    }
}
TEST(Gemm, RowTailsF32) { run_row_tails<float>(1200); }
TEST(Gemm, RowTailsF16) { run_row_tails<f16>(1300); }
TEST(Gemm, RowTailsBF16) { run_row_tails<bf16>(1400); }
// A larger ragged shape over several K blocks, row blocks and column blocks, every transpose.
TEST(Gemm, RaggedLarge) {
  for (int t = 0; t < 4; ++t) {
    run_gemm_case<bf16, float>(1025, 369, 741, t & 1, t >> 1, t == 1, 1 + t, 900 + t, /*tight=*/true);
    run_gemm_case<int8_t, int32_t>(1025, 369, 741, t & 1, t >> 1, t == 2, 1 + t, 910 + t);
  }
}

// Which bf16 / int8 path a build takes and the fallback: with AMX compiled in, the tile unit is
// used when the kernel grants the permission (it does on Linux >= 5.16 with AMX); amx_allow(false)
// (what TW_CPU_AMX=0 makes the runtime do; a refused permission takes the same branch) switches
// the process to the AVX-512 paths, which must give the same int8 results and bf16 results within
// the same bound.
TEST(Gemm, AmxPathAndFallback) {
  namespace d = tw_cpu::detail;
#if defined(TW_CPU_AMX)
  ASSERT_EQ(d::amx_permission_errno(), 0) << "the kernel refused AMX tile permission on an AMX CPU";
  EXPECT_TRUE(d::amx_usable());
#else
  EXPECT_FALSE(d::amx_usable());
#endif
  const int M = 67, N = 45, K = 300;
  std::mt19937 g(77);
  std::vector<int8_t> A((size_t)M * K), B((size_t)K * N);
  for (auto& v : A) v = make_val<int8_t>(g);
  for (auto& v : B) v = make_val<int8_t>(g);
  std::vector<int32_t> C1((size_t)M * N), C2((size_t)M * N);
  tw_cpu::gemm<int8_t, int8_t, int32_t>(M, N, K, A.data(), K, false, B.data(), N, false, C1.data(), N, false);
  d::amx_allow(false);
  EXPECT_FALSE(d::amx_usable());
  tw_cpu::gemm<int8_t, int8_t, int32_t>(M, N, K, A.data(), K, false, B.data(), N, false, C2.data(), N, false);
  run_gemm_case<bf16, float>(M, N, K, false, true, true, 1, 78, /*tight=*/true);
  run_gemm_case<int8_t, int32_t>(M, N, K, true, false, false, 1, 79);
  d::amx_allow(true);
  EXPECT_EQ(C1, C2);
#if defined(TW_CPU_AMX)
  EXPECT_TRUE(d::amx_usable());
  EXPECT_STREQ(tw_cpu_gemm_amx_setup(0), "gemm runtime: AMX disabled (TW_CPU_AMX=0): bf16 and int8 gemms use the AVX-512 paths");
  EXPECT_FALSE(d::amx_usable());
  EXPECT_STREQ(tw_cpu_gemm_amx_setup(1), "gemm runtime: AMX tiles in use for bf16 (TDPBF16PS) and int8 (TDPBSSD) gemms");
  EXPECT_TRUE(d::amx_usable());
#endif
}

// bf16 gemms of at most 4 rows skip the tile unit (amx_pays): the runtime's result is the small-M
// path's bit for bit (decode attention's 4-row tiles: 4 x 16 x 128 with B transposed,
// 4 x 128 x 16), from 5 rows the tile unit's when the process may use it, else up to kSmallM rows
// the small-M path's and from kSmallM + 1 the packed driver's.
TEST(Gemm, BF16FewRowsSkipTiles) {
  namespace d = tw_cpu::detail;
  EXPECT_FALSE(d::amx_pays(1));
  EXPECT_FALSE(d::amx_pays(4));
  EXPECT_TRUE(d::amx_pays(5));
  std::mt19937 g(91);
  const int shapes[][3] = {{1, 37, 129}, {2, 16, 128}, {3, 33, 17}, {4, 16, 128}, {4, 128, 16}, {5, 40, 70}, {8, 33, 70}, {9, 40, 70}, {16, 32, 64}};
  for (const auto& sh : shapes)
    for (int tB = 0; tB < 2; ++tB) {
      const int M = sh[0], N = sh[1], K = sh[2];
      std::vector<bf16> A((size_t)M * K), B((size_t)K * N);
      for (auto& v : A) v = make_val<bf16>(g);
      for (auto& v : B) v = make_val<bf16>(g);
      const long ldb = tB ? K : N;
      std::vector<float> C1((size_t)M * N, 0.5f), C2 = C1;
      tw_cpu::gemm<bf16, bf16, float>(M, N, K, A.data(), K, false, B.data(), ldb, tB, C1.data(), N, true);
#if defined(TW_CPU_AMX)
      if (d::amx_pays(M) && d::amx_usable())
        d::gemm_amx<bf16, float>(M, N, K, A.data(), K, false, B.data(), ldb, tB, C2.data(), N, true, false, false);
      else
#endif
      if (d::small_m_path(M))
        d::gemm_small<bf16>(M, N, K, A.data(), K, false, B.data(), ldb, tB, C2.data(), N, true);
      else
        d::gemm_f32<bf16>(M, N, K, A.data(), K, false, B.data(), ldb, tB, C2.data(), N, true, false, false);
      EXPECT_EQ(0, std::memcmp(C1.data(), C2.data(), C1.size() * sizeof(float))) << M << "x" << N << "x" << K << " tB " << tB;
    }
}

TEST(Gemm, F32Large) {
  for (int tA = 0; tA < 2; ++tA)
    for (int tB = 0; tB < 2; ++tB) run_gemm_case<float, float>(1000, 777, 513, tA, tB, (tA ^ tB), 9, 100 + tA * 2 + tB);
}
TEST(Gemm, F16Large) { run_gemm_case<f16, float>(1000, 777, 513, false, true, true, 9, 200); }
TEST(Gemm, BF16Large) { run_gemm_case<bf16, float>(1000, 777, 513, true, false, false, 9, 201); }
TEST(Gemm, I8Large) {
  run_gemm_case<int8_t, int32_t>(1000, 777, 513, false, false, true, 9, 300);
  run_gemm_case<int8_t, int32_t>(1000, 777, 513, true, true, false, 9, 301);
}

// repeated tile calls with accumulate (the codegen pattern) + scratch reuse of various sizes
// fp32 A read in place by the micro-kernel (a_in_place: not transposed, one row block, one K
// block, rows not 4 KiB apart, no overlap with C) instead of packed. Every row count 1..30 (each
// micro-kernel height on AVX-512 / AVX2 / SSE, the balanced row tails), N and K in {1, 3, 17, 129}
// (column tails, K = 1), padded leading dimensions, B transposed or not, accumulate or not: the
// float64 reference (1e-4 of sum |a b| + |c0|), the path taken exactly for the packed-path shapes
// (gemm_path; gemm_small's shapes excepted), and bit for bit the packed path's result (the same A
// given transposed, K x M, which is packed: the same products in the same order).
TEST(Gemm, F32InPlaceA) {
  namespace d = tw_cpu::detail;
  uint32_t seed = 3000;
  long in_place = 0, packed_calls = 0;
  for (int M = 1; M <= 30; ++M)
    for (int N : {1, 3, 17, 129})
      for (int K : {1, 3, 17, 129}) {
        const int pad = (int)(seed % 3) * 3, tB = (int)(seed >> 1 & 1), acc = (int)(seed >> 2 & 1);
        run_gemm_case<float, float>(M, N, K, false, tB, acc, pad, seed);
        std::mt19937 g(seed++);
        const long lda = K + pad, ldat = M + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
        std::vector<float> A((size_t)M * lda), At((size_t)K * ldat), B((size_t)(tB ? N : K) * ldb), C((size_t)M * ldc);
        for (auto& v : A) v = make_val<float>(g);
        for (auto& v : B) v = make_val<float>(g);
        for (auto& v : C) v = make_val<float>(g);
        for (int i = 0; i < M; ++i)
          for (int k = 0; k < K; ++k) At[(size_t)k * ldat + i] = A[(size_t)i * lda + k];
        std::vector<float> C1 = C;
        const long before = d::a_in_place_calls();
        tw_cpu::gemm<float, float, float>(M, N, K, A.data(), lda, false, B.data(), ldb, tB, C.data(), ldc, acc);
        const bool took = d::a_in_place_calls() > before;
        const bool want = d::gemm_path(M, N, false, tB) == d::GemmPath::packed && !d::small_f32_path(M, N, K, tB);
        EXPECT_EQ(took, want) << "M " << M << " N " << N << " K " << K << " tB " << tB;
        in_place += took;
        tw_cpu::gemm<float, float, float>(M, N, K, At.data(), ldat, true, B.data(), ldb, tB, C1.data(), ldc, acc);
        EXPECT_EQ(d::a_in_place_calls(), before + took) << "a transposed A is packed";
        packed_calls += !took;
        if (took)  // (N = 1 and the skinny shapes take other paths for A and A^T)
          EXPECT_EQ(std::memcmp(C.data(), C1.data(), C.size() * sizeof(float)), 0)
              << "in place vs packed: M " << M << " N " << N << " K " << K << " tB " << tB << " acc " << acc;
      }
  EXPECT_GT(in_place, 100);
  EXPECT_GT(packed_calls, 10);
}
// When A is not read in place: transposed, more rows than one row block or more k than one K
// block, rows 4 KiB apart (one L1 set), A overlapping C, a stable A found packed in the cache. An
// A overlapping C (the product written over its own operand) stays right.
TEST(Gemm, F32InPlaceAChoice) {
  namespace d = tw_cpu::detail;
  std::vector<float> buf(4096 * 160 + 4096, 0.5f);
  float *A = buf.data(), *C = buf.data() + 256 * 160;
  EXPECT_TRUE(d::a_in_place(128, 128, 128, A, 128, false, C, 128));
  EXPECT_TRUE(d::a_in_place(d::kMC, 128, d::kKC, A, d::kKC + 3, false, C, 128));
  EXPECT_FALSE(d::a_in_place(128, 128, 128, A, 128, true, C, 128));
  EXPECT_FALSE(d::a_in_place(d::kMC + 1, 128, 128, A, 128, false, C, 128));
  EXPECT_FALSE(d::a_in_place(128, 128, d::kKC + 1, A, d::kKC + 1, false, C, 128));
  EXPECT_FALSE(d::a_in_place(128, 128, 128, A, 1024, false, C, 128));
  EXPECT_FALSE(d::a_in_place(64, 128, 128, A, 128, false, A + 63 * 128, 128));  // C starts in A's last row
  EXPECT_FALSE(d::a_in_place(64, 64, 128, A + 64, 128, false, A, 128));        // interleaved rows
  EXPECT_TRUE(d::a_in_place(64, 128, 128, A, 128, false, A + 64 * 128, 128));   // C right behind A
  // C = A B with C on top of A (M = K): packed, so the product is of the old A
  const int M = 40, K = 40, N = 40;
  std::mt19937 g(3100);
  std::vector<float> X((size_t)M * K), B((size_t)K * N);
  for (auto& v : X) v = make_val<float>(g);
  for (auto& v : B) v = make_val<float>(g);
  std::vector<float> want((size_t)M * N), X0 = X;
  tw_cpu::gemm<float, float, float>(M, N, K, X0.data(), K, false, B.data(), N, false, want.data(), N, false);
  const long before = d::a_in_place_calls();
  tw_cpu::gemm<float, float, float>(M, N, K, X.data(), K, false, B.data(), N, false, X.data(), N, false);
  EXPECT_EQ(d::a_in_place_calls(), before);
  EXPECT_EQ(std::memcmp(X.data(), want.data(), X.size() * sizeof(float)), 0);
  // a stable A (one K block, reused: ldb != N) is packed once into the cache, not read in place
  std::vector<float> Bw((size_t)K * (N + 8)), C2((size_t)M * N);
  for (auto& v : Bw) v = make_val<float>(g);
  tw_cpu::new_launch();
  tw_cpu::gemm<float, float, float>(M, N, K, X0.data(), K, false, Bw.data(), N + 8, false, C2.data(), N, false, true);
  EXPECT_EQ(d::a_in_place_calls(), before);
}

TEST(Gemm, TileAccumulateLoop) {
  const int M = 128, N = 128, K = 512, KB = 64;
  std::mt19937 g(7);
  std::vector<float> A(M * K), B(K * N), C(M * N, 0.f);
  for (auto& v : A) v = make_val<float>(g);
  for (auto& v : B) v = make_val<float>(g);
  for (int k0 = 0; k0 < K; k0 += KB)
    tw_cpu::gemm<float, float, float>(M, N, KB, A.data() + k0, K, false, B.data() + (size_t)k0 * N, N,
                                      false, C.data(), N, k0 > 0);
  for (int i = 0; i < M; i += 7)
    for (int j = 0; j < N; j += 3) {
      double s = 0, sa = 0;
      for (int k = 0; k < K; ++k) { s += (double)A[i * K + k] * B[k * N + j]; sa += std::fabs((double)A[i * K + k] * B[k * N + j]); }
      EXPECT_NEAR(C[i * N + j], s, 1e-4 * sa);
    }
}

// T.gemm's bands (gemm.h Band) against float64. a_band: op(A) zeroed outside the band (the
// caller's promise), then every element of C checked (accumulated or overwritten); c_band: the
// elements inside the band checked, C pre-filled with a sentinel (the others are unspecified).
// Odd shapes (tails of rows and columns, one element, more rows than a row block, more k than a
// K block), bands empty, full, one diagonal, ending mid micro-tile, past either edge.
template <class T>
long run_band_case(int M, int N, int K, bool tA, bool tB, bool acc, int kind, long lo, long hi, uint32_t seed) {
  std::mt19937 g(seed);
  const long lda = tA ? M + 1 : K + 3, ldb = tB ? K + 2 : N + 1, ldc = N + 5;
  std::vector<T> A((size_t)std::max<long>(1, (tA ? K : M) * lda)), B((size_t)std::max<long>(1, (tB ? N : K) * ldb));
  for (auto& v : A) v = make_val<T>(g);
  for (auto& v : B) v = make_val<T>(g);
  auto a_at = [&](int i, int k) -> T& { return tA ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]; };
  auto b_at = [&](int k, int j) -> T& { return tB ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]; };
  if (kind == 1)
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < K; ++k)
        if (k - i < lo || k - i >= hi) a_at(i, k) = tw_cpu::from_f32<T>(0.0f);
  const float sentinel = 12345.0f;
  std::vector<float> C((size_t)std::max<long>(1, (long)M * ldc), sentinel);
  if (acc)
    for (auto& v : C) v = make_val<float>(g);
  std::vector<float> C0 = C;
  tw_cpu::gemm<T, T, float>(M, N, K, A.data(), lda, tA, B.data(), ldb, tB, C.data(), ldc, acc, false, false, -1, 0,
                            nullptr, 0, tw_cpu::Band{kind, lo, hi});
  long bad = 0, skipped = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const bool in = j - i >= lo && j - i < hi;
      const float got = C[(size_t)i * ldc + j];
      if (kind == 2 && !in) {
        skipped += got == sentinel;
        continue;
      }
      double r = acc ? C0[(size_t)i * ldc + j] : 0.0, sa = std::fabs(r);
      for (int k = 0; k < K; ++k) {
        const double p = to_d(a_at(i, k)) * to_d(b_at(k, j));
        r += p;
        sa += std::fabs(p);
      }
      if (!(std::fabs(got - r) <= 1e-4 * sa + 1e-30) && bad++ < 5)
        ADD_FAILURE() << "band " << kind << " (" << lo << ", " << hi << ") M " << M << " N " << N << " K " << K
                      << " tA " << tA << " tB " << tB << " acc " << acc << ": at (" << i << ", " << j << ") got "
                      << got << " want " << r;
    }
  for (int i = 0; i < M; ++i)  // C's padding untouched
    for (long j = N; j < ldc; ++j)
      if (C[(size_t)i * ldc + j] != C0[(size_t)i * ldc + j] && bad++ < 5) ADD_FAILURE() << "band wrote C's padding";
  EXPECT_EQ(bad, 0);
  return skipped;
}

template <class T>
void band_cases(uint32_t seed) {
  for (int M : {1, 5, 14, 29, 64, 141})
    for (int N : {1, 33, 64, 100})
      for (int K : {1, 13, 64, 300}) {
        const long bands[][2] = {{-100000, 100000}, {5, 5}, {0, 1}, {-7, 3}, {-20, 18}, {1 - M, 1},
                                 {N - 3, N + 100}, {-M - 5, -M + 2}, {K - 1, K + 40}, {3, 2}};
        for (const auto& b : bands)
          for (int kind : {1, 2}) {
            const bool tA = seed % 3 == 0, tB = seed % 2 == 0, acc = seed % 5 < 2;
            run_band_case<T>(M, N, K, tA, tB, acc, kind, b[0], b[1], seed++);
          }
      }
}
TEST(Gemm, BandF32) { band_cases<float>(21000); }
TEST(Gemm, BandF16) { band_cases<f16>(22000); }
TEST(Gemm, BandBF16) { band_cases<bf16>(23000); }

// The band skips work where the packed path runs: a 64 x 64 causal score (Q K^T, K 128) leaves
// unwritten (the sentinel stays) every row of a micro-tile's columns that lies wholly above the
// diagonal: in the kNR-wide column tile from j0, rows 0 .. j0 - 1 (whole micro-tiles, and the
// first rows of the row panel the diagonal crosses), and P V with P's upper triangle zero gives
// the full product with each row panel's K trimmed.
TEST(Gemm, BandSkipsMicroTiles) {
  namespace d = tw_cpu::detail;
  ASSERT_EQ(d::gemm_path(64, 64, false, true), d::GemmPath::packed);
  const long skipped = run_band_case<float>(64, 64, 128, false, true, false, 2, -63, 1, 99);
  long above = 0;  // the rows of each column tile wholly above the diagonal
  for (int j0 = 0; j0 < 64; j0 += d::kNR) above += (long)j0 * std::min(d::kNR, 64 - j0);
  EXPECT_EQ(skipped, above);  // AVX-512 (14 x 32 tiles): rows 0-31 of columns 32-63, 1024
  run_band_case<float>(64, 128, 64, false, false, true, 1, -63, 1, 100);
  run_band_case<float>(64, 128, 64, false, false, false, 1, -63, 1, 101);
}

// The same causal score with A packed (a_stable, as flash attention's Q): c_band also computes
// only the column half (kVF columns) of a strip that a row segment needs (ukr_f32's one-vector
// call), so more of the sentinel above the diagonal stays than whole strips leave, and no more
// than the rows of each half wholly above it.
TEST(Gemm, BandSkipsHalfStrips) {
  namespace d = tw_cpu::detail;
  const int M = 64, N = 64, K = 128;
  std::mt19937 g(98);
  std::vector<float> A(M * K), B(N * K), C(M * N, 12345.0f), W(M * N);
  for (auto& v : A) v = make_val<float>(g);
  for (auto& v : B) v = make_val<float>(g);
  tw_cpu::new_launch();
  tw_cpu::gemm<float, float, float>(M, N, K, A.data(), K, false, B.data(), K, true, W.data(), N, false, true);
  tw_cpu::gemm<float, float, float>(M, N, K, A.data(), K, false, B.data(), K, true, C.data(), N, false, true, false,
                                    -1, 0, nullptr, 0, tw_cpu::Band{2, -63, 1});
  long skipped = 0, strips = 0, halves = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      if (j <= i) EXPECT_EQ(C[i * N + j], W[i * N + j]) << i << "," << j;
      else skipped += C[i * N + j] == 12345.0f;
    }
  for (int j0 = 0; j0 < N; j0 += d::kNR) strips += (long)j0 * std::min(d::kNR, N - j0);
  for (int j0 = 0; j0 < N; j0 += d::kVF) halves += (long)j0 * std::min(d::kVF, N - j0);
  EXPECT_GT(skipped, strips);
  EXPECT_LE(skipped, halves);
}

// c_band computes each element inside the band with the same FMAs in the same order as the
// product without a band (whole kNR-wide strips, one-vector half strips, rows trimmed: only
// which elements are computed changes), so inside the band C is bit for bit the unbanded C.
// Bands whose edges cross the column halves of the micro-tiles at every offset (windows of 1 ..
// 33 diagonals on either side), column tails (N 40, 50: a strip narrower than one vector, or
// with a partial second half), row tails, accumulate or not, fp32 / f16 / bf16.
template <class T>
void run_band_bitwise_case(int M, int N, int K, bool acc, bool a_stable, long lo, long hi, uint32_t seed) {
  tw_cpu::new_launch();  // a_stable: A is packed once per launch (fp32 A is otherwise read in place)
  std::mt19937 g(seed);
  std::vector<T> A((size_t)M * K), B((size_t)N * K);
  for (auto& v : A) v = make_val<T>(g);
  for (auto& v : B) v = make_val<T>(g);
  std::vector<float> C0((size_t)M * N);
  for (auto& v : C0) v = make_val<float>(g);
  std::vector<float> whole = C0, band = C0;
  tw_cpu::gemm<T, T, float>(M, N, K, A.data(), K, false, B.data(), K, true, whole.data(), N, acc, a_stable);
  tw_cpu::gemm<T, T, float>(M, N, K, A.data(), K, false, B.data(), K, true, band.data(), N, acc, a_stable, false,
                            -1, 0, nullptr, 0, tw_cpu::Band{2, lo, hi});
  long bad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      if (j - i >= lo && j - i < hi && std::memcmp(&whole[(size_t)i * N + j], &band[(size_t)i * N + j], 4) != 0 &&
          bad++ < 5)
        ADD_FAILURE() << "c_band (" << lo << ", " << hi << ") M " << M << " N " << N << " K " << K << " acc " << acc
                      << " a_stable " << a_stable << ": at (" << i << ", " << j << ") " << band[(size_t)i * N + j] << " against "
                      << whole[(size_t)i * N + j] << " without the band";
  EXPECT_EQ(bad, 0);
}

template <class T>
void band_bitwise_cases(uint32_t seed) {
  for (int M : {64, 29})
    for (int N : {64, 40, 50})
      for (long w : {1, 2, 15, 16, 17, 31, 33, 1000}) {
        const long bands[][2] = {{1 - w, 1}, {0, w}, {1 - w + 16, 17}, {-16, w - 16}, {-40, -40 + w}, {20, 20 + w}};
        for (const auto& b : bands)
          for (bool a_stable : {true, false})
            run_band_bitwise_case<T>(M, N, 128, seed % 3 == 0, a_stable, b[0], b[1], seed++);
      }
}
TEST(Gemm, CBandBitwiseF32) { band_bitwise_cases<float>(24000); }
TEST(Gemm, CBandBitwiseF16) { band_bitwise_cases<f16>(25000); }
TEST(Gemm, CBandBitwiseBF16) { band_bitwise_cases<bf16>(26000); }

// a_stable: packed A blocks are reused across calls within a launch (same pointer and shape),
// and dropped by new_launch(). The tile loop runs over several block columns (reuse), then A
// changes in place and a new launch must see the new data.
template <class T>
void run_stable_a_case(int M, bool transA, uint32_t seed) {
  const int N = 96, K = 256, KB = 64, NB = 32;  // M: one or several row blocks, with a row tail
  std::mt19937 g(seed);
  std::vector<T> A(M * K), B(K * N);
  std::vector<float> C(M * N);
  for (auto& v : B) v = make_val<T>(g);
  for (int launch = 0; launch < 3; ++launch) {
    for (auto& v : A) v = make_val<T>(g);  // same memory, new contents
    tw_cpu::new_launch();
    for (int j0 = 0; j0 < N; j0 += NB)  // "blocks" of NB columns, each walking K
      for (int k0 = 0; k0 < K; k0 += KB) {
        const T* a = transA ? A.data() + (size_t)k0 * M : A.data() + k0;
        tw_cpu::gemm<T, T, float>(M, NB, KB, a, transA ? M : K, transA, B.data() + (size_t)k0 * N + j0, N, false,
                                  C.data() + j0, N, k0 > 0, /*a_stable=*/true);
      }
    for (int i = 0; i < M; i += 3)
      for (int j = 0; j < N; ++j) {
        double s = 0, sa = 0;
        for (int k = 0; k < K; ++k) {
          double x = (double)tw_cpu::convert<float>(transA ? A[k * M + i] : A[i * K + k]) * tw_cpu::convert<float>(B[k * N + j]);
          s += x;
          sa += std::fabs(x);
        }
        ASSERT_NEAR(C[i * N + j], s, 1e-5 * sa + 1e-6) << "launch " << launch << " at " << i << "," << j;
      }
  }
}
TEST(Gemm, StableAPackedReuse) {
  run_stable_a_case<float>(100, false, 11);
  run_stable_a_case<float>(100, true, 12);
  run_stable_a_case<bf16>(100, false, 13);
  run_stable_a_case<float>(300, false, 14);  // 300 > the row block: packed once, used per block
  run_stable_a_case<f16>(300, true, 15);
}

// b_stable: packed B panels (one K block, one column block per call) are shared across calls
// and threads within a launch, and dropped by new_launch(). A grid of (row block, column block)
// "blocks", each walking K, runs on `threads` threads: either every thread runs the whole grid
// into its own C (all threads race for the same panels) or the threads share the grid. B changes
// in place between launches; tails in M, N and K; B transposed or not.
template <class T>
void run_stable_b_case(int M, int N, int K, int MB, int NB, int KB, bool transB, int threads, bool race,
                       uint32_t seed) {
  std::mt19937 g(seed);
  const long ldb = transB ? K + 3 : N + 5;
  std::vector<T> A((size_t)M * K), B((size_t)(transB ? N : K) * ldb);
  for (auto& v : A) v = make_val<T>(g);
  std::vector<std::vector<float>> C(race ? threads : 1, std::vector<float>((size_t)M * N));
  const int nbm = (M + MB - 1) / MB, nbn = (N + NB - 1) / NB;
  for (int launch = 0; launch < 3; ++launch) {
    for (auto& v : B) v = make_val<T>(g);  // same memory, new contents
    tw_cpu::new_launch();
    std::atomic<int> next{0};
    auto block = [&](int b, float* c) {
      const int i0 = b / nbn * MB, j0 = b % nbn * NB;
      const int mb = std::min(MB, M - i0), nb = std::min(NB, N - j0);
      for (int k0 = 0; k0 < K; k0 += KB) {
        const int kb = std::min(KB, K - k0);
        const T* bp = transB ? B.data() + (size_t)j0 * ldb + k0 : B.data() + (size_t)k0 * ldb + j0;
        tw_cpu::gemm<T, T, float>(mb, nb, kb, A.data() + (size_t)i0 * K + k0, K, false, bp, ldb, transB,
                                  c + (size_t)i0 * N + j0, N, k0 > 0, /*a_stable=*/true, /*b_stable=*/true);
      }
    };
    std::vector<std::thread> th;
    for (int t = 0; t < threads; ++t)
      th.emplace_back([&, t] {
        if (race)
          for (int b = 0; b < nbm * nbn; ++b) block(b, C[t].data());
        else
          for (int b; (b = next.fetch_add(1)) < nbm * nbn;) block(b, C[0].data());
      });
    for (auto& t : th) t.join();
    for (const auto& c : C)
      for (int i = 0; i < M; i += 3)
        for (int j = 0; j < N; ++j) {
          double s = 0, sa = 0;
          for (int k = 0; k < K; ++k) {
            double x = (double)tw_cpu::convert<float>(A[(size_t)i * K + k]) *
                       tw_cpu::convert<float>(transB ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            s += x;
            sa += std::fabs(x);
          }
          ASSERT_NEAR(c[(size_t)i * N + j], s, 1e-5 * sa + 1e-6) << "launch " << launch << " at " << i << "," << j;
        }
  }
}
// The read-only lookups the next-call prefetch uses: they find exactly the entries this launch
// packed (same key), nothing of an earlier launch, and never insert.
TEST(Gemm, PackedCacheLookups) {
  using namespace tw_cpu::detail;
  static float a[64 * 64], b[64 * 64];
  tw_cpu::new_launch();
  auto& pa = packed_a_cache();
  EXPECT_EQ(pa.find(a, 64, 28, 64, 8), nullptr);
  bool fresh = false;
  float* qa = pa.find_or_add(a, 64, 28, 64, 8, 28 * 64, &fresh);
  ASSERT_NE(qa, nullptr);
  EXPECT_TRUE(fresh);
  EXPECT_EQ(pa.find(a, 64, 28, 64, 8), qa);
  EXPECT_EQ(pa.find(a + 64, 64, 28, 64, 8), nullptr);  // the next K step: not packed yet
  EXPECT_EQ(pa.find(a, 64, 28, 64, 9), nullptr);       // other element type / transpose
  auto& pb = shared_packed_b();
  EXPECT_EQ(pb.find(b, 64, 64, 64, 8), nullptr);
  bool fill = false;
  SharedPackedB::Slot* slot = nullptr;
  float* qb = pb.acquire(b, 64, 64, 64, 8, 64 * 64, &fill, &slot);
  ASSERT_NE(qb, nullptr);
  ASSERT_TRUE(fill);
  EXPECT_EQ(pb.find(b, 64, 64, 64, 8), nullptr);  // still being filled
  SharedPackedB::publish(slot);
  EXPECT_EQ(pb.find(b, 64, 64, 64, 8), qb);
  EXPECT_EQ(pb.find(b + 64 * 64, 64, 64, 64, 8), nullptr);
  tw_cpu::new_launch();  // a new launch sees none of them
  EXPECT_EQ(pa.find(a, 64, 28, 64, 8), nullptr);
  EXPECT_EQ(pb.find(b, 64, 64, 64, 8), nullptr);
}

// A tile program over a small-K matrix with one column block (tall-skinny): every gemm reads whole
// rows of A and of B in place (lda == K, ldb == N), so A is packed without the packed-A cache and
// the next block's rows are prefetched, past the end of A for the last block. Integer-valued
// inputs: the results are exact.
TEST(Gemm, TallSkinnyWholeRowTiles) {
  for (int tA = 0; tA < 2; ++tA)
    for (int mb : {64, 14, 9}) {
      const int M = 1000, N = 50, K = 40;
      std::vector<float> A((size_t)M * K), B((size_t)K * N), C((size_t)M * N, -1.0f);
      for (size_t i = 0; i < A.size(); ++i) A[i] = (float)((int)(i * 7 % 11) - 5);
      for (size_t i = 0; i < B.size(); ++i) B[i] = (float)((int)(i * 5 % 7) - 3);
      tw_cpu::new_launch();
      for (int i0 = 0; i0 < M; i0 += mb) {
        const int m = std::min(mb, M - i0);
        // transposed A: the tile is a column block of the K x M matrix (lda == M), no prefetch
        std::vector<float> At;
        if (tA) {
          At.resize((size_t)K * M);
          for (int i = 0; i < M; ++i)
            for (int k = 0; k < K; ++k) At[(size_t)k * M + i] = A[(size_t)i * K + k];
        }
        const float* a = tA ? At.data() + i0 : A.data() + (size_t)i0 * K;
        tw_cpu::gemm<float, float, float>(m, N, K, a, tA ? M : K, tA, B.data(), N, false, C.data() + (size_t)i0 * N,
                                          N, false, /*a_stable=*/true, /*b_stable=*/true);
      }
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double s = 0;
          for (int k = 0; k < K; ++k) s += (double)A[(size_t)i * K + k] * B[(size_t)k * N + j];
          ASSERT_EQ(C[(size_t)i * N + j], (float)s) << "tA " << tA << " mb " << mb << " at " << i << "," << j;
        }
    }
}

// Flash attention's walk: each row block of Q (whole rows: lda == K) against every key tile
// (B transposed, whole rows: ldb == K), runs of calls on one A whose lengths vary (causal: the
// run of row block r covers key tiles 0..r), both operands stable: the next key tile's source is
// fetched while the shared panels are packed, the next row block's during a run's last calls
// (past the end of Q and K for the last ones). Results vs float64, then against the first pass
// (the second pass reads every packed operand from the caches); the run bookkeeping checked.
TEST(Gemm, AttentionWalk) {
  using namespace tw_cpu::detail;
  for (int causal = 0; causal < 2; ++causal)
    for (int mb : {64, 14, 9}) {
      const int S = 300, D = 40, nb = 48;
      std::mt19937 g(31 + mb + causal);
      std::vector<float> Q((size_t)S * D), K((size_t)S * D);
      for (auto& x : Q) x = make_val<float>(g);
      for (auto& x : K) x = make_val<float>(g);
      std::vector<float> C((size_t)S * S, 0.0f), C1;
      for (int pass = 0; pass < 2; ++pass) {
        tw_cpu::new_launch();
        for (int i0 = 0; i0 < S; i0 += mb) {
          const int m = std::min(mb, S - i0);
          const int j1 = causal ? std::min(S, i0 + m) : S;
          int calls = 0;
          for (int j0 = 0; j0 < j1; j0 += nb, ++calls) {
            const int n = std::min(nb, S - j0);
            tw_cpu::gemm<float, float, float>(m, n, D, Q.data() + (size_t)i0 * D, D, false, K.data() + (size_t)j0 * D, D,
                                              true, C.data() + (size_t)i0 * S + j0, S, false, /*a_stable=*/true,
                                              /*b_stable=*/true);
          }
          if (m > kSmallM) {  // (a last block of a few rows takes gemm_small: nothing packed)
            EXPECT_EQ(block_walk().run_a, (const void*)(Q.data() + (size_t)i0 * D)) << "causal " << causal << " mb " << mb;
            EXPECT_EQ(block_walk().run_calls, calls);
          }
        }
        if (pass == 1) ASSERT_EQ(C, C1) << "causal " << causal << " mb " << mb;
        C1 = C;
      }
      for (int i = 0; i < S; ++i)
        for (int j = 0; j < (causal ? (i / mb + 1) * mb : S) && j < S; ++j) {
          double s = 0;
          for (int k = 0; k < D; ++k) s += (double)Q[(size_t)i * D + k] * K[(size_t)j * D + k];
          ASSERT_NEAR(C[(size_t)i * S + j], s, 1e-5 * D) << "causal " << causal << " mb " << mb << " at " << i << "," << j;
        }
    }
}

TEST(Gemm, StableBSharedPanels) {
  run_stable_b_case<float>(200, 160, 256, 64, 64, 64, false, 1, false, 21);
  run_stable_b_case<float>(150, 130, 200, 48, 40, 48, false, 1, false, 22);   // tails in M, N, K
  run_stable_b_case<float>(150, 130, 200, 48, 40, 48, true, 1, false, 23);    // B transposed
  run_stable_b_case<bf16>(120, 100, 130, 32, 48, 64, false, 1, false, 24);
  run_stable_b_case<f16>(120, 100, 130, 32, 48, 64, true, 1, false, 25);
  run_stable_b_case<float>(256, 192, 512, 64, 64, 128, false, 2, false, 26);  // threads share the grid
  run_stable_b_case<float>(130, 96, 300, 32, 32, 64, false, 2, true, 27);     // 2 threads race per panel
  run_stable_b_case<float>(130, 96, 300, 32, 32, 64, true, 4, true, 28);
}

// The packed-A cache is a ring: when the arena is full, a new block goes to its start and only the
// entries it overwrites are dropped (the oldest), and the oldest entry when the table is full; the
// others keep their place and contents.
TEST(Gemm, PackedCacheRing) {
  using namespace tw_cpu::detail;
  static char keys[600];
  tw_cpu::new_launch();
  {
    PackedCache pc(1024);  // room for four blocks of 208 floats (200 rounded up to 16)
    float* q[6];
    for (int i = 0; i < 6; ++i) {
      bool fresh = false;
      q[i] = pc.find_or_add(keys + i, 64, 14, 128, 8, 200, &fresh);
      ASSERT_NE(q[i], nullptr);
      EXPECT_TRUE(fresh);
      for (int t = 0; t < 200; ++t) q[i][t] = (float)(i * 1000 + t);
    }
    EXPECT_EQ(q[4], q[0]);  // the fifth block wrapped to the start, over the first
    EXPECT_EQ(q[5], q[1]);
    EXPECT_EQ(pc.find(keys + 0, 64, 14, 128, 8), nullptr);
    EXPECT_EQ(pc.find(keys + 1, 64, 14, 128, 8), nullptr);
    for (int i = 2; i < 6; ++i) {
      const float* f = pc.find(keys + i, 64, 14, 128, 8);
      ASSERT_EQ(f, q[i]) << i;
      for (int t = 0; t < 200; ++t) ASSERT_EQ(f[t], (float)(i * 1000 + t)) << i;
      bool fresh = true;
      EXPECT_EQ(pc.find_or_add(keys + i, 64, 14, 128, 8, 200, &fresh), q[i]);
      EXPECT_FALSE(fresh);
    }
    bool fresh = false;
    EXPECT_EQ(pc.find_or_add(keys, 64, 14, 128, 8, 300, &fresh), nullptr);  // over a quarter: not cached
  }
  {
    PackedCache pc(size_t(1) << 20);
    const int n = PackedCache::kEntries + 3;
    for (int i = 0; i < n; ++i) {
      bool fresh = false;
      ASSERT_NE(pc.find_or_add(keys + i, 64, 14, 128, 8, 16, &fresh), nullptr);
    }
    for (int i = 0; i < n; ++i)  // a full table drops its oldest entries, one per new entry
      EXPECT_EQ(pc.find(keys + i, 64, 14, 128, 8) != nullptr, i >= 3) << i;
    tw_cpu::new_launch();
    EXPECT_EQ(pc.find(keys + n - 1, 64, 14, 128, 8), nullptr);
  }
}

// The packed-A cache under a random mix of adds and lookups (the queue of entries, the lookup hint
// and the per-bucket counts): a block found is the one last added under its key with its contents
// intact (no newer block overlaps a live entry), keys never added and those of an earlier launch
// are not found, and the most recent blocks that fit in the arena beside the newest are always
// found. Block sizes vary (a wrap leaves a gap at the arena's end), keys repeat (lookups of the
// entries after the last hit, and far from it) and share buckets (neighbouring addresses).
TEST(Gemm, PackedCacheRandomMix) {
  using namespace tw_cpu::detail;
  static char keys[300];
  std::mt19937 g(7);
  tw_cpu::new_launch();
  PackedCache pc(4096);
  std::vector<std::pair<int, size_t>> added;  // (key, floats) of every block added, in order
  std::vector<size_t> size_of(300, 0);    // floats of each key's last block
  std::vector<int> version(300, -1);      // what the last block of each key holds
  for (int it = 0; it < 20000; ++it) {
    const int key = (int)(g() % 300);
    if (g() % 3 == 0) {  // lookup only
      const float* f = pc.find(keys + key, 64, 6, 128, 8);
      if (version[key] < 0) {
        ASSERT_EQ(f, nullptr) << it;
      } else if (f) {
        ASSERT_EQ(f[0], (float)version[key]) << it;
        ASSERT_EQ(f[size_of[key] - 1], (float)version[key]) << it;
      }
      continue;
    }
    bool fresh = false;
    const size_t floats = 16 * (1 + g() % 60);  // up to 960 floats: at most a quarter of 4096
    float* q = pc.find_or_add(keys + key, 64, 6, 128, 8, floats, &fresh);
    ASSERT_NE(q, nullptr);
    if (fresh) {
      for (size_t t = 0; t < floats; ++t) q[t] = (float)it;
      version[key] = it;
      size_of[key] = floats;
      added.push_back({key, floats});
    } else {
      ASSERT_EQ(q[0], (float)version[key]) << it;
      ASSERT_EQ(q[size_of[key] - 1], (float)version[key]) << it;
    }
    // the newest blocks whose sizes sum to at most half the arena are all still there (a wrap
    // wastes less than a quarter, and the blocks it drops early lie further back)
    size_t sum = 0;
    std::vector<bool> seen(300, false);
    for (int i = (int)added.size() - 1; i >= 0; --i) {
      const auto [k, f] = added[i];
      sum += f;
      if (sum > 2048) break;
      if (seen[k]) continue;  // an older block of a key added again
      seen[k] = true;
      ASSERT_NE(pc.find(keys + k, 64, 6, 128, 8), nullptr) << it << " key " << k;
    }
  }
  EXPECT_EQ(pc.find(keys + 1, 64, 6, 128, 9), nullptr);  // another tag
  tw_cpu::new_launch();
  for (int k = 0; k < 300; ++k) ASSERT_EQ(pc.find(keys + k, 64, 6, 128, 8), nullptr);
}

// A large-K tile program (the op zoo's matmul_large_k shape, scaled): blocks of MB x NB walk K in
// steps of KB with A and B stable, one thread, the launcher's row-major block order. A block row's
// packed A tiles fit the thread's packed-A arena but two rows do not: the second column block of
// every row must still find all of its row's tiles (the arena used to start over when full, and the
// rows after the first re-packed most of theirs). Tails in M (17 rows: more than a micro-panel on
// every instruction set, so the packed path), N and K (a last K step of 37); float64 reference
// over every element.
template <class T>
void run_large_k_case(bool transA, uint32_t seed) {
  using namespace tw_cpu::detail;
  const int MB = 64, NB = 40, KB = 128;
  const int M = 2 * MB + 17, N = NB + 30, K = 120 * KB + 37;
  std::mt19937 g(seed);
  std::vector<T> A((size_t)M * K), B((size_t)K * N);
  for (auto& v : A) v = make_val<T>(g);
  for (auto& v : B) v = make_val<T>(g);
  std::vector<float> C((size_t)M * N, -1.0f);
  std::vector<const float*> first((K + KB - 1) / KB);
  tw_cpu::new_launch();
  for (int i0 = 0; i0 < M; i0 += MB)
    for (int j0 = 0; j0 < N; j0 += NB) {
      const int mb = std::min(MB, M - i0), nb = std::min(NB, N - j0);
      std::vector<float> c((size_t)mb * nb, 0.0f);
      for (int k0 = 0; k0 < K; k0 += KB) {
        const int kb = std::min(KB, K - k0);
        const T* a = transA ? A.data() + (size_t)k0 * M + i0 : A.data() + (size_t)i0 * K + k0;
        tw_cpu::gemm<T, T, float>(mb, nb, kb, a, transA ? M : K, transA, B.data() + (size_t)k0 * N + j0, N,
                                  false, c.data(), nb, true, /*a_stable=*/true, /*b_stable=*/true, j0, N);
      }
      for (int i = 0; i < mb; ++i)
        for (int j = 0; j < nb; ++j) C[(size_t)(i0 + i) * N + j0 + j] = c[(size_t)i * nb + j];
      // after the row's first block every A tile of the row is cached, and after its last block
      // the same packed copies still are (none was packed again)
      const int tag = packed_tag<T>(transA, std::is_same_v<T, bf16> && amx_usable());
      int missing = 0, moved = 0;
      for (int k0 = 0, t = 0; k0 < K; k0 += KB, ++t) {
        const T* a = transA ? A.data() + (size_t)k0 * M + i0 : A.data() + (size_t)i0 * K + k0;
        const float* p = packed_a_cache().find(a, transA ? M : K, mb, std::min(KB, K - k0), tag);
        missing += p == nullptr;
        if (j0 == 0) first[t] = p;
        else moved += p != first[t];
      }
      EXPECT_EQ(missing, 0) << "row block " << i0 / MB << ", column block " << j0 / NB;
      EXPECT_EQ(moved, 0) << "row block " << i0 / MB << ", column block " << j0 / NB;
    }
  std::vector<double> Bd((size_t)K * N);
  for (size_t t = 0; t < Bd.size(); ++t) Bd[t] = tw_cpu::convert<float>(B[t]);
  for (int i = 0; i < M; ++i) {
    std::vector<double> s(N, 0.0), sa(N, 0.0);
    for (int k = 0; k < K; ++k) {
      const double a = tw_cpu::convert<float>(transA ? A[(size_t)k * M + i] : A[(size_t)i * K + k]);
      for (int j = 0; j < N; ++j) {
        s[j] += a * Bd[(size_t)k * N + j];
        sa[j] += std::fabs(a * Bd[(size_t)k * N + j]);
      }
    }
    for (int j = 0; j < N; ++j) ASSERT_NEAR(C[(size_t)i * N + j], s[j], 2e-6 * sa[j] + 1e-6) << i << "," << j;
  }
}
TEST(Gemm, LargeKTileRows) {
  run_large_k_case<float>(false, 31);
  run_large_k_case<float>(true, 32);
  run_large_k_case<bf16>(false, 33);
  run_large_k_case<f16>(true, 34);
}

// An int8 tile program with A and B stable (gemm_i8 packs each A tile once per launch into the
// packed-A cache and each B panel once into the shared packed-B arena, with its column
// corrections): blocks of MB x NB walking K in steps of KB, the launcher's row-major order, tails
// in M, N and K, every transpose of A and B, padded leading dimensions, C in place (the first K
// step overwrites). Exact against an int64 reference; after each block its tiles are in the
// caches (not under AMX: gemm_amx's own tags); a second launch on changed values (new epoch:
// nothing of the first may be reused) exact too. threads = 2: the block rows split between two
// threads running at once (the B panels shared between them, or packed privately when the other
// thread is filling one).
void run_i8_tile_case(int M, int N, int K, int MB, int NB, int KB, bool tA, bool tB, int pad, uint32_t seed,
                      int threads = 1) {
  using namespace tw_cpu::detail;
  SCOPED_TRACE(testing::Message() << M << "x" << N << "x" << K << " blocks " << MB << "/" << NB << "/" << KB
                                  << " tA " << tA << " tB " << tB << " pad " << pad << " threads " << threads);
  std::mt19937 g(seed);
  const long lda = (tA ? M : K) + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
  std::vector<int8_t> A((size_t)(tA ? K : M) * lda), B((size_t)(tB ? N : K) * ldb);
  std::vector<int32_t> C((size_t)M * ldc);
  for (int launch = 0; launch < 2; ++launch) {
    for (auto& v : A) v = (int8_t)(g() % 256 - 128);
    for (auto& v : B) v = (int8_t)(g() % 256 - 128);
    if (launch == 0) {  // the extremes: the u8 offset and the column corrections at their limits
      for (size_t t = 0; t < A.size(); t += 3) A[t] = -128;
      for (size_t t = 1; t < B.size(); t += 5) B[t] = -128;
    }
    std::fill(C.begin(), C.end(), 0x5a5a5a5a);
    tw_cpu::new_launch();
    const int rows = (M + MB - 1) / MB;
    auto run_rows = [&](int r0, int r1) {
      for (int i0 = r0 * MB; i0 < std::min(M, r1 * MB); i0 += MB)
        for (int j0 = 0; j0 < N; j0 += NB) {
          const int mb = std::min(MB, M - i0), nb = std::min(NB, N - j0);
          for (int k0 = 0; k0 < K; k0 += KB) {
            const int kb = std::min(KB, K - k0);
            const int8_t* a = tA ? A.data() + (size_t)k0 * lda + i0 : A.data() + (size_t)i0 * lda + k0;
            const int8_t* b = tB ? B.data() + (size_t)j0 * ldb + k0 : B.data() + (size_t)k0 * ldb + j0;
            tw_cpu::gemm<int8_t, int8_t, int32_t>(mb, nb, kb, a, lda, tA, b, ldb, tB, C.data() + (size_t)i0 * ldc + j0,
                                                  ldc, k0 > 0, /*a_stable=*/true, /*b_stable=*/true);
            if (amx_usable()) continue;
            const bool a_cached = (tB || ldb != nb) && kb <= kKCG * kKG;  // gemm_i8's a_reused, one K block
            EXPECT_EQ(packed_a_cache().find(a, lda, mb, kb, packed_tag<int8_t>(tA, false)) != nullptr, a_cached)
                << i0 << "," << j0 << "," << k0;
            if (threads == 1)  // (with two, the other thread may hold the slot while filling it)
              EXPECT_EQ(shared_packed_b().find(b, ldb, kb, nb, packed_tag<int8_t>(tB, false)) != nullptr,
                        kb <= kKCG * kKG && nb <= kNC)
                  << i0 << "," << j0 << "," << k0;
          }
        }
    };
    if (threads == 1) {
      run_rows(0, rows);
    } else {
      std::thread other(run_rows, rows / 2, rows);
      run_rows(0, rows / 2);
      other.join();
    }
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        int64_t s = 0;
        for (int k = 0; k < K; ++k)
          s += (int64_t)(tA ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
               (tB ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
        ASSERT_EQ(C[(size_t)i * ldc + j], (int32_t)s) << "launch " << launch << " at " << i << "," << j;
      }
  }
}
TEST(Gemm, I8TileProgramStable) {
  run_i8_tile_case(2 * 64 + 17, 3 * 96 + 7, 3 * 128 + 11, 64, 96, 128, false, false, 0, 41);
  run_i8_tile_case(2 * 64 + 17, 3 * 96 + 7, 3 * 128 + 11, 64, 96, 128, true, false, 3, 42);
  run_i8_tile_case(45, 5 * 32 + 9, 201, 45, 32, 64, false, true, 5, 43);
  run_i8_tile_case(4 * 30 + 1, 33, 130, 30, 64, 64, true, true, 0, 44);
  run_i8_tile_case(70, 64, 1, 32, 64, 1, false, false, 0, 45);       // K = 1 steps; one column block
  run_i8_tile_case(33, 40, 2 * 1024 + 3, 33, 40, 1024 + 1, false, false, 1, 46);  // K steps past one K block
  run_i8_tile_case(8 * 32 + 5, 3 * 64 + 1, 5 * 128 + 9, 32, 64, 128, false, false, 2, 47, 2);
  run_i8_tile_case(6 * 16 + 3, 2 * 48 + 7, 4 * 64 + 1, 16, 48, 64, true, true, 0, 48, 2);
}

// A tile program's launch computing C in place (@gemm_out: the first K step of each block
// overwrites its window of C, the others accumulate), blocks in the launcher's row-major order,
// rows [r0, r1) of the grid on this thread with the columns of each row rotated by `rot`
// (cpu_launch.cpp). Returns the calls that fetched the next block's first tiles (BlockWalk).
long run_tile_walk(const float* A, const float* B, float* C, int M, int N, int K, long ld_a, long ld_b,
                   long ld_c, int MB, int NB, int KB, int r0, int r1, int rot) {
  using namespace tw_cpu::detail;
  const long before = block_walk().prefetches;
  const int nbx = (N + NB - 1) / NB;
  for (int by = r0; by < r1; ++by)
    for (int t = 0; t < nbx; ++t) {
      const int bx = (t + rot) % nbx;
      const int i0 = by * MB, j0 = bx * NB, mb = std::min(MB, M - i0), nb = std::min(NB, N - j0);
      for (int k0 = 0; k0 < K; k0 += KB) {
        const float* a = A + (long)i0 * ld_a + k0;
        const float* b = B + (long)k0 * ld_b + j0;
        tw_cpu::gemm<float, float, float>(mb, nb, std::min(KB, K - k0), a, ld_a, false, b, ld_b, false,
                                          C + (long)i0 * ld_c + j0, ld_c, k0 > 0, true, true, j0, ld_b);
        const bool packed = gemm_path(mb, nb, false, false) == GemmPath::packed &&
                            !small_f32_path(mb, nb, std::min(KB, K - k0), false);
        if (k0 == 0 && packed) {  // the block's first call: its tiles are the walk's first ones
          EXPECT_EQ(block_walk().a0, (const void*)a);
          EXPECT_EQ(block_walk().b0, (const void*)b);
        }
      }
    }
  return block_walk().prefetches - before;
}

// The next block's first tiles fetched at the last K step of a block (BlockWalk in gemm_impl.h):
// tails in M, N and K (a last K step shallower than the first: the prediction uses the block's
// first depth), padded leading dimensions, one row of blocks, one column of blocks, 2 threads
// with rotated rows; float64 reference over every element, C filled with NaN first (every
// element is overwritten by its block's first K step).
TEST(Gemm, BlockWalkNextBlock) {
  struct Case { int M, N, K, MB, NB, KB, pad, threads; };
  for (const Case& c : {Case{2 * 64 + 17, 3 * 96 + 7, 3 * 128 + 11, 64, 96, 128, 0, 1},
                        Case{3 * 28, 4 * 64, 2 * 64, 28, 64, 64, 16, 1},
                        Case{45, 5 * 32 + 9, 200, 45, 32, 64, 3, 1},
                        Case{4 * 30 + 1, 33, 130, 30, 64, 64, 0, 1},
                        Case{4 * 32 + 3, 4 * 64 + 5, 3 * 64 + 1, 32, 64, 64, 5, 2}}) {
    SCOPED_TRACE(testing::Message() << c.M << "x" << c.N << "x" << c.K << " blocks " << c.MB << "/" << c.NB
                                    << "/" << c.KB << " pad " << c.pad << " threads " << c.threads);
    std::mt19937 g(c.M * 7 + c.N);
    const long la = c.K + c.pad, lb = c.N + c.pad, lc = c.N + c.pad;
    std::vector<float> A((size_t)c.M * la), B((size_t)c.K * lb), C((size_t)c.M * lc, NAN);
    for (auto& v : A) v = make_val<float>(g);
    for (auto& v : B) v = make_val<float>(g);
    const int rows = (c.M + c.MB - 1) / c.MB, nbx = (c.N + c.NB - 1) / c.NB;
    tw_cpu::new_launch();
    long fetched = 0;
    if (c.threads == 1) {
      fetched = run_tile_walk(A.data(), B.data(), C.data(), c.M, c.N, c.K, la, lb, lc, c.MB, c.NB, c.KB, 0, rows, 0);
      // every block fetches the next one's first tiles at its last K step (the first block at
      // every step: none of its next K step's tiles is packed yet, only its first A tile), and
      // with a shallower last K step at the step before it too (NextPrefetch looks for the next
      // step's tiles at this step's depth); none when B's tile spans every column (one column
      // block: A is not cached, gemm_f32's a_reused)
      const long steps = (c.K + c.KB - 1) / c.KB, blocks = (long)rows * nbx;
      const long expect = steps + blocks - 1 + (c.K % c.KB ? blocks - 1 : 0);
      EXPECT_EQ(fetched, nbx == 1 && c.pad == 0 ? 0 : expect);
    } else {
      std::atomic<long> sum{0};
      std::vector<std::thread> th;
      for (int t = 0; t < c.threads; ++t)
        th.emplace_back([&, t] {
          sum += run_tile_walk(A.data(), B.data(), C.data(), c.M, c.N, c.K, la, lb, lc, c.MB, c.NB, c.KB,
                               rows * t / c.threads, rows * (t + 1) / c.threads, t * nbx / c.threads);
        });
      for (auto& t : th) t.join();
      EXPECT_GT(sum.load(), 0);
    }
    for (int i = 0; i < c.M; ++i)
      for (int j = 0; j < c.N; ++j) {
        double s = 0, sa = 0;
        for (int k = 0; k < c.K; ++k) {
          const double p = (double)A[(size_t)i * la + k] * B[(size_t)k * lb + j];
          s += p;
          sa += std::fabs(p);
        }
        ASSERT_NEAR(C[(size_t)i * lc + j], s, 2e-6 * sa + 1e-6) << i << "," << j;
      }
  }
}

// ------------------------------------------------------------------ conversions
double f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp((double)m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp((double)(m | 0x400), e - 25);
}

TEST(Convert, F16ToF32All) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float got = tw_cpu::to_f32(f16{(uint16_t)h});
    double ref = f16_value((uint16_t)h);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      EXPECT_EQ(fb(got) >> 31, h >> 15);
      EXPECT_EQ((fb(got) >> 13) & 0x3ff, h & 0x3ff) << "payload " << h;
    } else {
      ASSERT_EQ((double)got, ref) << h;
      ASSERT_EQ(std::signbit(got), (bool)(h & 0x8000)) << h;
    }
  }
}

// The vector widenings of f16 that the gemm's packing (load8) and its small-M path (ldw) use:
// vcvtph2ps where the target has F16C (x86-64-v3 and up), the integer form otherwise. Both give
// to_f32's value for every f16 bit pattern (subnormals exact, no DAZ); a NaN stays a NaN with
// its sign and payload (vcvtph2ps quietens a signalling one: bit 22 may be set).
TEST(Convert, F16VectorWidenAll) {
  using tw_cpu::detail::v8f;
  constexpr int W = tw_cpu::simd::kVF;
  std::vector<f16> h(65536 + W);
  for (uint32_t i = 0; i < 65536 + W; ++i) h[i] = f16{(uint16_t)i};
  auto check = [&](uint32_t i, float got, const char* what) {
    const float want = tw_cpu::to_f32(h[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << what << " " << i;
      ASSERT_EQ(fb(got) & ~(1u << 22), fb(want) & ~(1u << 22)) << what << " payload " << i;
    } else {
      ASSERT_EQ(fb(got), fb(want)) << what << " " << i;
    }
  };
  for (uint32_t i = 0; i < 65536; i += 8) {
    v8f o;
    tw_cpu::detail::load8(h.data() + i, o);
    for (int l = 0; l < 8; ++l) check(i + l, o[l], "load8");
  }
  for (uint32_t i = 0; i < 65536; i += W) {
    const tw_cpu::simd::vf o = tw_cpu::detail::ldw(h.data() + i);
    for (int l = 0; l < W; ++l) check(i + l, o[l], "ldw");
  }
}

TEST(Convert, F16RoundTripAll) {
  for (uint32_t h = 0; h < 65536; ++h) {
    uint16_t back = tw_cpu::from_f32<f16>(tw_cpu::to_f32(f16{(uint16_t)h})).bits;
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan) EXPECT_EQ(back, h | 0x200) << h;  // quietened, payload kept
    else ASSERT_EQ(back, h) << h;
  }
}

TEST(Convert, BF16RoundTripAll) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = tw_cpu::to_f32(bf16{(uint16_t)h});
    ASSERT_EQ(fb(f), h << 16);
    uint16_t back = tw_cpu::from_f32<bf16>(f).bits;
    bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    if (nan) EXPECT_EQ(back, h | 0x40) << h;
    else ASSERT_EQ(back, h) << h;
  }
}

// independent reference: nearest f16 by search over the (monotone) positive values
uint16_t ref_f16(float f) {
  if (std::isnan(f)) return 0x7e00;
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs((double)f);
  if (a >= 65520.0) return sign | 0x7c00;
  int lo = 0, hi = 0x7bff;  // largest code with value <= a
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (f16_value((uint16_t)mid) <= a) lo = mid; else hi = mid - 1;
  }
  if (lo == 0x7bff) return sign | 0x7bff;
  double vl = f16_value((uint16_t)lo), vh = f16_value((uint16_t)(lo + 1));
  int pick = (a - vl < vh - a) ? lo : (a - vl > vh - a) ? lo + 1 : ((lo & 1) ? lo + 1 : lo);
  return sign | (uint16_t)pick;
}
uint16_t ref_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t u = fb(f);
  uint32_t lo = u & 0xffff0000u;
  double dlo = bf(lo), dhi = (lo & 0x7fffffffu) == 0x7f7f0000u ? std::copysign(std::ldexp(1.0, 128), f)
                                                               : (double)bf(lo + 0x10000u);
  double x = f;
  double el = std::fabs(x - dlo), eh = std::fabs(dhi - x);
  if ((u & 0x7fffffffu) == 0x7f800000u) return (uint16_t)(u >> 16);
  uint32_t pick = el < eh ? lo : el > eh ? lo + 0x10000u : (((lo >> 16) & 1) ? lo + 0x10000u : lo);
  return (uint16_t)(pick >> 16);
}

TEST(Convert, F32ToHalfSweep) {
  // every 61st float bit pattern (~70M) plus all f16 ties/midpoints
  for (uint64_t u = 0; u < (1ull << 32); u += 61) {
    float f = bf((uint32_t)u);
    uint16_t h = tw_cpu::from_f32<f16>(f).bits;
    uint16_t b = tw_cpu::from_f32<bf16>(f).bits;
    if (std::isnan(f)) {
      ASSERT_EQ(h & 0x7e00, 0x7e00);
      ASSERT_EQ(b & 0x7fc0, 0x7fc0);
      continue;
    }
    ASSERT_EQ(h, ref_f16(f)) << std::hex << u;
    ASSERT_EQ(b, ref_bf16(f)) << std::hex << u;
  }
}

TEST(Convert, HalfTiesAndSpecials) {
  // exact midpoints between consecutive f16 values: must round to even
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    double mid = 0.5 * (f16_value((uint16_t)h) + f16_value((uint16_t)(h + 1)));
    float f = (float)mid;  // exact (needs 12 bits)
    ASSERT_EQ((double)f, mid);
    uint16_t want = (h & 1) ? h + 1 : h;
    ASSERT_EQ(tw_cpu::from_f32<f16>(f).bits, want) << h;
    ASSERT_EQ(tw_cpu::from_f32<f16>(-f).bits, want | 0x8000) << h;
  }
  EXPECT_EQ(tw_cpu::from_f32<f16>(65504.f).bits, 0x7bff);
  EXPECT_EQ(tw_cpu::from_f32<f16>(65519.99f).bits, 0x7bff);
  EXPECT_EQ(tw_cpu::from_f32<f16>(65520.f).bits, 0x7c00);
  EXPECT_EQ(tw_cpu::from_f32<f16>(INFINITY).bits, 0x7c00);
  EXPECT_EQ(tw_cpu::from_f32<f16>(-INFINITY).bits, 0xfc00);
  EXPECT_EQ(tw_cpu::from_f32<f16>(-0.0f).bits, 0x8000);
  EXPECT_EQ(tw_cpu::from_f32<f16>(std::ldexp(1.f, -25)).bits, 0x0000);        // tie -> even (0)
  EXPECT_EQ(tw_cpu::from_f32<f16>(std::ldexp(1.5f, -25)).bits, 0x0001);
  EXPECT_EQ(tw_cpu::from_f32<f16>(std::ldexp(3.f, -25)).bits, 0x0002);        // 1.5 ulp tie -> 2
  EXPECT_EQ(tw_cpu::from_f32<f16>(1e-30f).bits, 0x0000);
  EXPECT_EQ(tw_cpu::from_f32<bf16>(1.0f + std::ldexp(1.f, -8)).bits, 0x3f80);  // tie -> even
  EXPECT_EQ(tw_cpu::from_f32<bf16>(1.0f + std::ldexp(3.f, -8)).bits, 0x3f82);
  EXPECT_EQ(tw_cpu::from_f32<bf16>(3.4028235e38f).bits, 0x7f80);                // rounds to Inf
  EXPECT_EQ(tw_cpu::from_f32<bf16>(bf(0x00000001)).bits, 0x0000);               // subnormal
  EXPECT_EQ(tw_cpu::from_f32<bf16>(bf(0x00018000)).bits, 0x0002);               // tie -> even
  EXPECT_TRUE(std::isnan(tw_cpu::to_f32(tw_cpu::from_f32<bf16>(NAN))));
  EXPECT_TRUE(std::isnan(tw_cpu::to_f32(tw_cpu::from_f32<f16>(-NAN))));
}

TEST(Convert, Generic) {
  using tw_cpu::convert;
  EXPECT_EQ((convert<int32_t, float>(-3.9f)), -3);
  EXPECT_EQ((convert<int8_t, float>(100.7f)), 100);
  EXPECT_EQ((convert<uint8_t, float>(200.5f)), 200);
  EXPECT_EQ((convert<int64_t, double>(-1e12)), -1000000000000LL);
  EXPECT_EQ((convert<bool, float>(0.0f)), false);
  EXPECT_EQ((convert<bool, float>(-0.0f)), false);
  EXPECT_EQ((convert<bool, float>(NAN)), true);
  EXPECT_EQ((convert<bool, f16>(f16{0x8000})), false);
  EXPECT_EQ((convert<bool, bf16>(bf16{0x0001})), true);
  EXPECT_EQ((convert<float, bool>(true)), 1.0f);
  EXPECT_EQ((convert<f16, bool>(true)).bits, 0x3c00);
  EXPECT_EQ((convert<int32_t, f16>(f16{0xc500})), -5);
  EXPECT_EQ((convert<int8_t, int32_t>(300)), 44);  // modular
  EXPECT_EQ((convert<double, f16>(f16{0x3555})), f16_value(0x3555));
  EXPECT_EQ((convert<f16, int8_t>(-7)).bits, 0xc700);
  EXPECT_EQ((convert<bf16, uint8_t>(255)).bits, 0x437f);
  EXPECT_EQ((convert<bf16, int32_t>(257)).bits, 0x4380);  // tie -> even
  // double -> f16: naive double->float->f16 would double-round to 1.0
  EXPECT_EQ((convert<f16, double>(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40))).bits, 0x3c01);
  EXPECT_EQ((convert<f16, double>(1.0 + std::ldexp(1.0, -11))).bits, 0x3c00);
  EXPECT_EQ((convert<bf16, double>(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30))).bits, 0x3f81);
  EXPECT_EQ((convert<f16, double>(1e300)).bits, 0x7c00);
  EXPECT_EQ((convert<f16, double>(-1e-300)).bits, 0x8000);
  EXPECT_TRUE(std::isnan(tw_cpu::to_f32(convert<bf16, double>(NAN))));
  // int32 -> bf16: (float) rounding first would double-round to 2^24
  EXPECT_EQ((convert<bf16, int32_t>((1 << 24) + (1 << 16) + 1)).bits, 0x4b81);
  EXPECT_EQ((convert<bf16, int64_t>(-3)).bits, 0xc040);
  EXPECT_EQ((convert<f16, bf16>(bf16{0x3f80})).bits, 0x3c00);
  EXPECT_EQ((convert<bf16, f16>(f16{0x7c00})).bits, 0x7f80);
  EXPECT_EQ((convert<float, int64_t>(1LL << 40)), std::ldexp(1.f, 40));
  EXPECT_EQ((convert<uint8_t, bool>(true)), 1);
  EXPECT_EQ((tw_cpu::to_f32((int8_t)-128)), -128.0f);
  EXPECT_EQ((tw_cpu::from_f32<int32_t>(7.9f)), 7);
}

// ------------------------------------------------------------------ math
// Sweep: every `step`-th float bit pattern in [lo, hi] (both signs handled by caller).
template <class F, class R>
void sweep(const char* name, F f, R ref, float lo, float hi, uint32_t step, double rel_bound,
           double abs_bound) {
  double worst_rel = 0, worst_abs = 0;
  float worst_x = 0;
  long n = 0, bad = 0;
  auto check = [&](float x) {
    ++n;
    float got = f(x);
    double want = ref((double)x);
    double err = std::fabs((double)got - want);
    double rel = want != 0 ? err / std::fabs(want) : err;
    bool ok = err <= abs_bound || rel <= rel_bound;
    if (std::isinf(want)) ok = (double)got == want;
    if (!ok && bad++ < 5)
      ADD_FAILURE() << name << "(" << x << ") = " << got << " want " << want << " rel " << rel << " abs " << err;
    if (std::isfinite(want) && err > abs_bound && rel > worst_rel) { worst_rel = rel; worst_x = x; }
    if (std::isfinite(want) && err > worst_abs) worst_abs = err;
  };
  // positive and negative ranges by walking bit patterns (dense in ulps)
  auto walk = [&](float a, float b) {  // a <= b, same sign, a,b >= 0
    for (uint64_t u = fb(a); u <= fb(b); u += step) check(bf((uint32_t)u));
  };
  if (lo >= 0) walk(lo, hi);
  else if (hi <= 0) { for (uint64_t u = fb(-hi); u <= fb(-lo); u += step) check(-bf((uint32_t)u)); }
  else { walk(0.f, hi); for (uint64_t u = fb(0.f); u <= fb(-lo); u += step) check(-bf((uint32_t)u)); }
  // also a uniform linear sweep
  for (int i = 0; i <= 200000; ++i) check(lo + (hi - lo) * (float)i / 200000.f);
  EXPECT_EQ(bad, 0);
  printf("  %-8s n=%ld worst rel %.3g at %g (worst abs %.3g)\n", name, n, worst_rel, worst_x, worst_abs);
}

TEST(Math, Exp) {
  // normal results: rel 2.5e-7; subnormal results: abs 2^-148 (math.h)
  sweep("exp", [](float x) { return tw_cpu::exp(x); }, [](double x) { return std::exp(x); }, -110.f,
        88.72f, 97, 2.5e-7, std::ldexp(1.0, -148));
  EXPECT_EQ(tw_cpu::exp(-INFINITY), 0.0f);
  EXPECT_EQ(tw_cpu::exp(INFINITY), INFINITY);
  EXPECT_EQ(tw_cpu::exp(88.8f), INFINITY);
  EXPECT_EQ(tw_cpu::exp(1000.f), INFINITY);
  EXPECT_EQ(tw_cpu::exp(-200.f), 0.0f);
  EXPECT_EQ(tw_cpu::exp(std::nextafter(-104.0f, -INFINITY)), 0.0f);
  EXPECT_EQ(tw_cpu::exp(-1.0e30f), 0.0f);
  EXPECT_EQ(tw_cpu::exp(0.f), 1.0f);
  EXPECT_TRUE(std::isnan(tw_cpu::exp(NAN)));
  EXPECT_GT(tw_cpu::exp(-100.f), 0.0f);  // subnormal, not flushed
  // the clamps work on the bits (unsigned min below, signed min above): both NaN signs, the
  // largest finite values and the values just beyond the clamps
  EXPECT_TRUE(std::isnan(tw_cpu::exp(-NAN)));
  EXPECT_TRUE(std::isnan(tw_cpu::exp(std::bit_cast<float>(0xffc00123u))));  // -NaN with payload
  EXPECT_TRUE(std::isnan(tw_cpu::exp(std::bit_cast<float>(0x7f800001u))));  // signalling NaN
  EXPECT_EQ(tw_cpu::exp(FLT_MAX), INFINITY);
  EXPECT_EQ(tw_cpu::exp(-FLT_MAX), 0.0f);
  EXPECT_EQ(tw_cpu::exp(89.5f), INFINITY);
  EXPECT_EQ(tw_cpu::exp(-104.5f), 0.0f);
  EXPECT_EQ(tw_cpu::exp(-103.9f), std::ldexp(1.0f, -149));  // e^-103.9 = 1.07 * 2^-149
  EXPECT_NEAR(tw_cpu::exp(88.72f) / std::exp((double)88.72f), 1.0, 2.5e-7);  // near FLT_MAX: finite
}

TEST(Math, Exp2) {
  // normal results: rel 2.5e-7; subnormal results: abs 2^-148
  sweep("exp2", [](float x) { return tw_cpu::exp2(x); }, [](double x) { return std::exp2(x); }, -155.f,
        127.99f, 97, 2.5e-7, std::ldexp(1.0, -148));
  EXPECT_EQ(tw_cpu::exp2(3.0f), 8.0f);  // exact on integers
  EXPECT_EQ(tw_cpu::exp2(-126.0f), std::ldexp(1.0f, -126));
  EXPECT_EQ(tw_cpu::exp2(128.0f), INFINITY);
  EXPECT_EQ(tw_cpu::exp2(-INFINITY), 0.0f);
  EXPECT_EQ(tw_cpu::exp2(-151.0f), 0.0f);
  // below -151 (softmax's masked scores): 0 by a select, with no underflowing multiply
  EXPECT_EQ(tw_cpu::exp2(std::nextafter(-151.0f, -INFINITY)), 0.0f);
  EXPECT_EQ(tw_cpu::exp2(-1.0e30f), 0.0f);
  EXPECT_GT(tw_cpu::exp2(-149.0f), 0.0f);  // subnormal, not flushed
  EXPECT_TRUE(std::isnan(tw_cpu::exp2(NAN)));
  EXPECT_TRUE(std::isnan(tw_cpu::exp2(-NAN)));
}

// Results that round to +0 are selected, not computed (an underflowing vector operation costs a
// microcode assist on Intel cores): every float at or below the threshold gives +0 exactly (not
// -0, not NaN), in a vectorised loop too, and the first values above it still give subnormals.
TEST(Math, ExpZeroRegionIsSelected) {
  std::vector<float> x;
  for (uint32_t u = fb(-150.0f); u < 0xff800000u; u += 997) x.push_back(bf(u));  // -150 .. -FLT_MAX
  for (float s : {-150.0f, -151.0f, -1.0e30f, -FLT_MAX, -INFINITY}) x.push_back(s);
  const int n = (int)x.size();
  std::vector<float> y2(n), ye(n);
  const float* __restrict xp = x.data();
  float* __restrict p2 = y2.data();
  float* __restrict pe = ye.data();
#pragma GCC ivdep
  for (int i = 0; i < n; ++i) p2[i] = tw_cpu::exp2(xp[i]);
#pragma GCC ivdep
  for (int i = 0; i < n; ++i) pe[i] = tw_cpu::exp(xp[i] < -104.0f ? xp[i] : -104.0f);
  long bad = 0;
  for (int i = 0; i < n; ++i) {
    if (fb(y2[i]) != 0u && bad++ < 5) ADD_FAILURE() << "exp2(" << x[i] << ") = " << y2[i];
    if (fb(ye[i]) != 0u && bad++ < 5) ADD_FAILURE() << "exp(" << std::min(x[i], -104.0f) << ") = " << ye[i];
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(fb(tw_cpu::exp(-104.0f)), 0u);
  EXPECT_EQ(tw_cpu::exp2(-149.5f), std::ldexp(1.0f, -149));  // 2^-149.5 rounds up to the least subnormal
  EXPECT_EQ(tw_cpu::exp2(-149.0f), std::ldexp(1.0f, -149));
  EXPECT_EQ(tw_cpu::exp(-103.9f), std::ldexp(1.0f, -149));
}

TEST(Math, Log) {
  sweep("log", [](float x) { return tw_cpu::log(x); }, [](double x) { return std::log(x); },
        bf(1), 3.4e38f, 97, 2.5e-7, 0.0);
  EXPECT_EQ(tw_cpu::log(0.f), -INFINITY);
  EXPECT_EQ(tw_cpu::log(-0.f), -INFINITY);
  EXPECT_EQ(tw_cpu::log(INFINITY), INFINITY);
  EXPECT_EQ(tw_cpu::log(1.f), 0.0f);
  EXPECT_TRUE(std::isnan(tw_cpu::log(-1.f)));
  EXPECT_TRUE(std::isnan(tw_cpu::log(-INFINITY)));
  EXPECT_TRUE(std::isnan(tw_cpu::log(NAN)));
}

TEST(Math, Sqrt) {
  sweep("sqrt", [](float x) { return tw_cpu::sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.f,
        3.4e38f, 31, 1.2e-7, 0.0);
  EXPECT_EQ(fb(tw_cpu::sqrt(-0.f)), fb(-0.f));
  EXPECT_EQ(tw_cpu::sqrt(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(tw_cpu::sqrt(-1.f)));
  EXPECT_TRUE(std::isnan(tw_cpu::sqrt(NAN)));
  EXPECT_EQ(tw_cpu::sqrt(4.f), 2.f);
}

TEST(Math, Rsqrt) {
  sweep("rsqrt", [](float x) { return tw_cpu::rsqrt(x); }, [](double x) { return 1.0 / std::sqrt(x); },
        bf(1), 3.4e38f, 97, 2.4e-7, 0.0);
  EXPECT_EQ(tw_cpu::rsqrt(0.f), INFINITY);
  EXPECT_EQ(tw_cpu::rsqrt(INFINITY), 0.f);
  EXPECT_TRUE(std::isnan(tw_cpu::rsqrt(-2.f)));
  EXPECT_TRUE(std::isnan(tw_cpu::rsqrt(NAN)));
}

TEST(Math, Tanh) {
  sweep("tanh", [](float x) { return tw_cpu::tanh(x); }, [](double x) { return std::tanh(x); }, -30.f,
        30.f, 97, 1e9, 1.2e-7);  // absolute bound everywhere
  sweep("tanh-s", [](float x) { return tw_cpu::tanh(x); }, [](double x) { return std::tanh(x); },
        -0.5499f, 0.5499f, 97, 2.5e-7, 0.0);  // relative bound near 0
  EXPECT_EQ(tw_cpu::tanh(INFINITY), 1.f);
  EXPECT_EQ(tw_cpu::tanh(-INFINITY), -1.f);
  EXPECT_EQ(tw_cpu::tanh(1e-30f), 1e-30f);
  EXPECT_EQ(fb(tw_cpu::tanh(-0.f)), fb(-0.f));
  EXPECT_TRUE(std::isnan(tw_cpu::tanh(NAN)));
}

TEST(Math, Erf) {
  sweep("erf", [](float x) { return tw_cpu::erf(x); }, [](double x) { return std::erf(x); }, -10.f,
        10.f, 97, 1e9, 2.0e-7);
  sweep("erf-s", [](float x) { return tw_cpu::erf(x); }, [](double x) { return std::erf(x); },
        -0.9999f, 0.9999f, 97, 2.5e-7, std::ldexp(1.0, -149));  // subnormal results: abs
  EXPECT_EQ(tw_cpu::erf(INFINITY), 1.f);
  EXPECT_EQ(tw_cpu::erf(-INFINITY), -1.f);
  EXPECT_EQ(tw_cpu::erf(0.f), 0.f);
  EXPECT_TRUE(std::isnan(tw_cpu::erf(NAN)));
}

TEST(Math, Sigmoid) {
  auto ref = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  sweep("sigmoid", [](float x) { return tw_cpu::sigmoid(x); }, ref, -87.f, 100.f, 97, 3.6e-7, 0.0);
  sweep("sigm-sub", [](float x) { return tw_cpu::sigmoid(x); }, ref, -110.f, -87.f, 97, 3.6e-7,
        std::ldexp(1.0, -148));
  EXPECT_EQ(tw_cpu::sigmoid(INFINITY), 1.f);
  EXPECT_EQ(tw_cpu::sigmoid(-INFINITY), 0.f);
  EXPECT_EQ(tw_cpu::sigmoid(0.f), 0.5f);
  EXPECT_TRUE(std::isnan(tw_cpu::sigmoid(NAN)));
}

TEST(Math, Silu) {
  auto ref = [](double x) { return x / (1.0 + std::exp(-x)); };
  sweep("silu", [](float x) { return tw_cpu::silu(x); }, ref, -87.f, 3.4e38f, 97, 4.2e-7,
        std::ldexp(1.0, -149));  // subnormal results (tiny x: x / 2): abs
  sweep("silu-sub", [](float x) { return tw_cpu::silu(x); }, ref, -110.f, -87.f, 97, 4.2e-7,
        std::ldexp(1.0, -141));
  EXPECT_EQ(tw_cpu::silu(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(tw_cpu::silu(-INFINITY)));  // -Inf * 0, as x / (1 + exp(-x)) gives
  EXPECT_EQ(tw_cpu::silu(0.f), 0.f);
  EXPECT_EQ(fb(tw_cpu::silu(-0.f)), fb(-0.f));
  EXPECT_TRUE(std::isnan(tw_cpu::silu(NAN)));
}

// The functions must be usable in vectorisable loops (compile-only smoke + values).
TEST(Math, LoopUse) {
  std::vector<float> x(1000), y(1000);
  for (int i = 0; i < 1000; ++i) x[i] = -5.f + 0.01f * i;
  for (int i = 0; i < 1000; ++i) y[i] = tw_cpu::exp(x[i]) + tw_cpu::tanh(x[i]) + tw_cpu::erf(x[i]) +
                                       tw_cpu::sigmoid(x[i]) + tw_cpu::sqrt(x[i] + 5.f) + tw_cpu::log(x[i] + 6.f);
  for (int i = 0; i < 1000; i += 37) {
    double d = x[i];
    double want = std::exp(d) + std::tanh(d) + std::erf(d) + 1 / (1 + std::exp(-d)) + std::sqrt(d + 5) + std::log(d + 6);
    EXPECT_NEAR(y[i], want, 2e-6 * (1 + std::fabs(want)));
  }
}


// The same functions in an auto-vectorised loop (every function of math.h is if-converted and
// vectorised on AVX-512, AVX2 and SSE2, see tests/python/test_cpu_vectorize.py) give the same
// bits as one call at a time: the sweeps above hold for the vector code too. The scalar
// reference reads each input through a volatile, which keeps that loop scalar.
template <class F>
void vector_matches_scalar(const char* name, F f) {
  std::vector<float> x;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 65521) x.push_back(bf((uint32_t)u));  // both signs
  for (float s : {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, 1e-45f, -1e-45f}) x.push_back(s);
  const int n = (int)x.size();
  std::vector<float> vec(n), ref(n);
  const float* __restrict xp = x.data();
  float* __restrict vp = vec.data();
#pragma GCC ivdep
  for (int i = 0; i < n; ++i) vp[i] = f(xp[i]);
  for (int i = 0; i < n; ++i) {
    volatile float xi = x[i];
    ref[i] = f(xi);
  }
  long bad = 0;
  for (int i = 0; i < n; ++i)
    if (fb(vec[i]) != fb(ref[i]) && !(std::isnan(vec[i]) && std::isnan(ref[i])) && bad++ < 5)
      ADD_FAILURE() << name << "(" << x[i] << "): vector loop " << vec[i] << ", scalar " << ref[i];
  EXPECT_EQ(bad, 0) << name;
}

TEST(Math, VectorLoopMatchesScalar) {
  vector_matches_scalar("exp", [](float v) { return tw_cpu::exp(v); });
  vector_matches_scalar("exp2", [](float v) { return tw_cpu::exp2(v); });
  vector_matches_scalar("log", [](float v) { return tw_cpu::log(v); });
  vector_matches_scalar("sqrt", [](float v) { return tw_cpu::sqrt(v); });
  vector_matches_scalar("rsqrt", [](float v) { return tw_cpu::rsqrt(v); });
  vector_matches_scalar("sigmoid", [](float v) { return tw_cpu::sigmoid(v); });
  vector_matches_scalar("silu", [](float v) { return tw_cpu::silu(v); });
  vector_matches_scalar("tanh", [](float v) { return tw_cpu::tanh(v); });
  vector_matches_scalar("erf", [](float v) { return tw_cpu::erf(v); });
}

// exp_chunk / exp2_chunk (dst, src, n: the forms the generated row maps call, from a local chunk
// into the tile or output; in place too; on AVX-512 vscalefps applies 2^n) give the scalar functions' bits (NaN for NaN) on every float pattern of a dense
// sweep (both signs, every 251st pattern: the ranges below -104 / -150, the subnormal results, the
// overflows) and the specials, in chunks of every length 0..70 at every alignment mod 16 floats
// (the masked last vector). The whole 2^32 patterns were checked once by a stand-alone loop.
TEST(Math, ExpChunkMatchesScalar) {
  std::vector<float> x;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 251) x.push_back(bf((uint32_t)u));
  for (float s : {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, 1e-45f, -1e-45f, -104.0f, 89.0f,
                  88.72283f, -103.97f, -150.0f, 129.0f, 128.0f, -149.5f, -87.34f, -1.0e30f})
    x.push_back(s);
  const int64_t n = (int64_t)x.size();
  std::vector<float> e(x.size(), 7.0f), e2(x);  // exp from x into e; exp2 in place in e2
  for (int64_t i = 0, len = 0; i < n; i += len) {  // chunks of 0..70 floats, starting anywhere
    len = std::min<int64_t>(n - i, (i / 3) % 71);
    tw_cpu::exp_chunk(e.data() + i, x.data() + i, len);
    tw_cpu::exp2_chunk(e2.data() + i, e2.data() + i, len);
    if (len == 0) len = 1, e[i] = tw_cpu::exp(x[i]), e2[i] = tw_cpu::exp2(x[i]);
  }
  long bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    volatile float xi = x[i];
    const float want = tw_cpu::exp(xi), want2 = tw_cpu::exp2(xi);
    if (fb(e[i]) != fb(want) && !(std::isnan(e[i]) && std::isnan(want)) && bad++ < 5)
      ADD_FAILURE() << "exp_chunk(" << x[i] << ") = " << e[i] << ", exp " << want;
    if (fb(e2[i]) != fb(want2) && !(std::isnan(e2[i]) && std::isnan(want2)) && bad++ < 5)
      ADD_FAILURE() << "exp2_chunk(" << x[i] << ") = " << e2[i] << ", exp2 " << want2;
  }
  EXPECT_EQ(bad, 0);
  // a chunk's length is respected: the floats past it are not written, the source is not written
  std::vector<float> c(40, 1.0f), src(40, 2.0f);
  tw_cpu::exp_chunk(c.data() + 3, src.data() + 3, 21);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(c[i], i >= 3 && i < 24 ? tw_cpu::exp(2.0f) : 1.0f) << i;
  for (int i = 0; i < 40; ++i) EXPECT_EQ(src[i], 2.0f) << i;
  tw_cpu::exp2_chunk(c.data() + 3, c.data() + 3, 21);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(c[i], i >= 3 && i < 24 ? tw_cpu::exp2(tw_cpu::exp(2.0f)) : 1.0f) << i;
}

// exp_nonpos_chunk (the row pipeline's exp(x - max), no upper clamp): exp() bit for bit on every
// value it is called with -- <= 0 (a stride through all of them), -0, +0, -Inf, NaN -- in chunks
// of 0..70 floats starting anywhere; the floats past a chunk are not written.
TEST(Math, ExpNonposChunkMatchesScalar) {
  std::vector<float> x;
  for (uint64_t u = 0x80000000ull; u <= 0xffffffffull; u += 127) x.push_back(bf((uint32_t)u));
  for (float s : {0.f, -0.f, -INFINITY, NAN, -NAN, -FLT_MAX, -1e-45f, -104.0f, -103.97f, -87.34f, -1.0e30f, -86.0f})
    x.push_back(s);
  const int64_t n = (int64_t)x.size();
  std::vector<float> e(x.size(), 7.0f);
  for (int64_t i = 0, len = 0; i < n; i += len) {
    len = std::min<int64_t>(n - i, (i / 3) % 71);
    tw_cpu::exp_nonpos_chunk(e.data() + i, x.data() + i, len);
    if (len == 0) len = 1, e[i] = tw_cpu::exp(x[i]);
  }
  long bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    volatile float xi = x[i];
    const float want = tw_cpu::exp(xi);
    if (fb(e[i]) != fb(want) && !(std::isnan(e[i]) && std::isnan(want)) && bad++ < 5)
      ADD_FAILURE() << "exp_nonpos_chunk(" << x[i] << ") = " << e[i] << ", exp " << want;
  }
  EXPECT_EQ(bad, 0);
  std::vector<float> c(40, 1.0f), src(40, -2.0f);
  tw_cpu::exp_nonpos_chunk(c.data() + 3, src.data() + 3, 21);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(c[i], i >= 3 && i < 24 ? tw_cpu::exp(-2.0f) : 1.0f) << i;
}

// exp_chunk / exp_nonpos_chunk on ordinary rows (a softmax's x - max: every lane in AVX2's vector range,
// which the dense sweep above seldom gives a whole vector of): chunks of 0..70 floats at every
// alignment mod 8, all in range, and with one lane out of range
// (NaN, -Inf, -1e30, -100, 89, a subnormal result) at every position of a 64-float chunk: exp() bit
// for bit, nothing past the chunk written.
TEST(Math, ExpChunkOrdinaryRowsMatchScalar) {
  std::mt19937 g(32);
  std::uniform_real_distribution<float> u(-80.0f, 0.0f);
  std::vector<float> x(80), want(80), got(80), gotn(80);
  auto check = [&](int off, int len, const char* what) {
    std::fill(got.begin(), got.end(), 7.0f);
    std::fill(gotn.begin(), gotn.end(), 7.0f);
    tw_cpu::exp_chunk(got.data() + off, x.data() + off, len);
    tw_cpu::exp_nonpos_chunk(gotn.data() + off, x.data() + off, len);
    for (int i = 0; i < 80; ++i) {
      volatile float xi = x[i];
      const float w = i >= off && i < off + len ? tw_cpu::exp(xi) : 7.0f;
      const bool nan = std::isnan(w);
      if (!(fb(got[i]) == fb(w) || (nan && std::isnan(got[i]))))
        ADD_FAILURE() << what << " exp_chunk off " << off << " len " << len << " [" << i << "] " << x[i] << ": " << got[i] << " want " << w;
      if (x[i] <= 0.0f || std::isnan(x[i]) || i < off || i >= off + len)
        if (!(fb(gotn[i]) == fb(w) || (nan && std::isnan(gotn[i]))))
          ADD_FAILURE() << what << " exp_nonpos_chunk off " << off << " len " << len << " [" << i << "] " << x[i];
    }
  };
  for (int off = 0; off < 8; ++off)
    for (int len = 0; off + len <= 72 && len <= 70; ++len) {
      for (float& v : x) v = u(g);
      check(off, len, "in range");
    }
  for (float bad : {NAN, -INFINITY, -1.0e30f, -100.0f, 89.0f, -87.5f})
    for (int off : {0, 3})
      for (int pos = 0; pos < 64; ++pos) {
        for (float& v : x) v = u(g);
        x[off + pos] = bad;
        check(off, 64, "one lane out");
      }
}

// exp_chunk / exp_nonpos_chunk / exp2_chunk at the edges of every form (session 33, h-avx2exp33: on
// AVX2 a group of 4 vectors whose values are all in the one-multiply form's range takes it, any other
// group the branch-free two-factor form, a short tail a zero-padded vector): every float class -- +-0,
// subnormals, the fast range's bounds and the overflow / underflow / zero thresholds +-1 ulp, the
// clamps, ties x = k + 1/2 for exp2, +-Inf, NaNs of both signs with payloads (quiet and signalling)
// -- at every position of a chunk of ordinary values, in chunks of every length 1..67 at every
// alignment mod 8: exp() / exp2() bit for bit (NaN for NaN), nothing past the chunk written.
TEST(Math, ExpChunkEdgesMatchScalar) {
  auto ulps = [](std::vector<float> at) {
    std::vector<float> v;
    for (float a : at) v.insert(v.end(), {std::nextafter(a, -INFINITY), a, std::nextafter(a, INFINITY)});
    return v;
  };
  std::vector<float> edges = ulps({0.f, -0.f, 1e-45f, -1e-45f, 1.17549421e-38f, -1.17549421e-38f, FLT_MIN, -FLT_MIN,
                                   -86.f, 88.f, -87.3365447f, 88.7228394f, -103.972076f, -104.f, -176.f, 89.f, -125.f,
                                   127.f, -126.f, -149.f, -150.f, 128.f, 129.f, -254.f, FLT_MAX, -FLT_MAX, -1e30f});
  for (float t : {0.5f, 1.5f, -0.5f, -2.5f, -125.5f, -149.5f, 126.5f, 127.5f, INFINITY, -INFINITY})
    edges.push_back(t);
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7fc001ffu, 0xffc001ffu, 0x7f800001u, 0xff8001ffu, 0x7fffffffu})
    edges.push_back(bf(nan));
  std::mt19937 g(33);
  std::uniform_real_distribution<float> neg(-80.f, 0.f), any(-80.f, 80.f), two(-120.f, 120.f);
  std::vector<float> x(80), e(80), en(80), e2(80);
  long bad = 0;
  auto check = [&](int off, int len) {
    std::fill(e.begin(), e.end(), 7.f);
    std::fill(en.begin(), en.end(), 7.f);
    std::fill(e2.begin(), e2.end(), 7.f);
    tw_cpu::exp_chunk(e.data() + off, x.data() + off, len);
    tw_cpu::exp_nonpos_chunk(en.data() + off, x.data() + off, len);
    tw_cpu::exp2_chunk(e2.data() + off, x.data() + off, len);
    for (int i = 0; i < 80; ++i) {
      volatile float xi = x[i];
      const bool in = i >= off && i < off + len;
      const float w = in ? tw_cpu::exp(xi) : 7.f, w2 = in ? tw_cpu::exp2(xi) : 7.f;
      auto same = [](float a, float b) { return fb(a) == fb(b) || (std::isnan(a) && std::isnan(b)); };
      const bool nonpos = !in || !(x[i] > 0.f);  // exp_nonpos_chunk's domain: <= 0, -Inf, NaN
      if ((!same(e[i], w) || (nonpos && !same(en[i], w)) || !same(e2[i], w2)) && bad++ < 8)
        ADD_FAILURE() << "off " << off << " len " << len << " [" << i << "] x " << x[i] << " (0x" << std::hex
                      << fb(x[i]) << std::dec << "): exp_chunk " << e[i] << " exp_nonpos_chunk " << en[i]
                      << " exp " << w << "; exp2_chunk " << e2[i] << " exp2 " << w2;
    }
  };
  for (int off = 0; off < 8; ++off)  // ordinary rows: every length, every alignment
    for (int len = 1; len <= 67 && off + len <= 80; ++len)
      for (auto* d : {&neg, &any, &two}) {
        for (float& v : x) v = (*d)(g);
        check(off, len);
      }
  for (float edge : edges)  // one edge value at every position of a 67-float chunk (groups, vector, tail)
    for (int off : {0, 5})
      for (int pos = 0; pos < 67; ++pos) {
        for (float& v : x) v = pos % 2 ? neg(g) : any(g);
        x[off + pos] = edge;
        check(off, 67);
      }
  EXPECT_EQ(bad, 0);
}

// The lane folds of the row reductions (simd.h fold_sum / fold_max / fold_min): max and min are
// the lanes' max and min wherever they sit (lane permutations, infinities, -0 vs +0 by value);
// the sum is the pairwise grouping by halves, exact on small integers and checked bit for bit
// against that grouping on random values.
TEST(Simd, FoldLanes) {
  using tw_cpu::simd::kVF;
  using tw_cpu::simd::vf;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 100.0f);
  for (int trial = 0; trial < 2000; ++trial) {
    vf v;
    float lanes[kVF];
    for (int i = 0; i < kVF; ++i) {
      float x = nd(rng);
      if (trial % 7 == 1 && i == trial % kVF) x = -INFINITY;
      if (trial % 11 == 2 && i == (trial / 3) % kVF) x = INFINITY;
      if (trial % 5 == 3) x = std::nearbyint(x);
      lanes[i] = x;
      v[i] = x;
    }
    float mx = -INFINITY, mn = INFINITY;
    for (float x : lanes) mx = std::max(mx, x), mn = std::min(mn, x);
    EXPECT_EQ(tw_cpu::simd::fold_max(v), mx);
    EXPECT_EQ(tw_cpu::simd::fold_min(v), mn);
    float pw[kVF];
    std::copy(lanes, lanes + kVF, pw);
    for (int h = kVF / 2; h >= 1; h /= 2)
      for (int i = 0; i < h; ++i) pw[i] = pw[i] + pw[i + h];
    const float got = tw_cpu::simd::fold_sum(v);
    EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(pw[0])) << got << " vs " << pw[0];
    if (trial % 5 == 3 && std::isfinite(pw[0])) {  // integers: exact in any order
      double exact = 0;
      for (float x : lanes) exact += x;
      EXPECT_EQ((double)got, exact);
    }
  }
}

// The row pipeline's full chunks with streaming stores: stream_chunk (n floats, each vector
// reloaded from the buffer) and stream_chunk64 (64 floats from registers, one asm statement)
// write exactly the chunk's floats, bit for bit (NaN payloads, -0, subnormals), at every
// vector-aligned place of a row, and nothing around it; values computed into the buffer just
// before the call (as the generated code does, so g++ may keep them in registers).
TEST(Simd, StreamChunks) {
  using tw_cpu::simd::kVecBytes;
  constexpr int kN = 64, kRow = 4 * kN + 3 * 16;
  alignas(64) float row[kRow + 64];
  const uint32_t specials[] = {0x7fc01234u, 0x80000000u, 0x00000001u, 0x7f800000u, 0xff800000u};
  for (int variant = 0; variant < 2; ++variant) {
    for (int at = 0; at + kN <= kRow; at += kVecBytes / 4) {
      for (float& x : row) x = -7.5f;
      alignas(64) float buf[kN];
      for (int i = 0; i < kN; ++i) buf[i] = static_cast<float>(at * 100 + i) * 0.37f;
      for (int k = 0; k < 5; ++k) buf[(at + 13 * k) % kN] = std::bit_cast<float>(specials[k]);
      float want[kN];
      std::memcpy(want, buf, sizeof(want));
      if (variant == 0)
        tw_cpu::simd::stream_chunk(row + at, buf, kN);
      else
        tw_cpu::simd::stream_chunk64(row + at, buf);
      tw_cpu::simd::stream_fence();
      for (int j = 0; j < kRow + 64; ++j) {
        const float w = j >= at && j < at + kN ? want[j - at] : -7.5f;
        ASSERT_EQ(std::bit_cast<uint32_t>(row[j]), std::bit_cast<uint32_t>(w))
            << (variant ? "stream_chunk64" : "stream_chunk") << " at " << at << ", element " << j;
      }
    }
  }
}

}  // namespace

// tw_cpu::gemm_zero_terms (defined in the gemm runtime library, gemm_zero.h): after a gemm on the
// live part of zero-padded operands, C equals C + the full product: NaN exactly where a live inf
// or NaN meets a padding zero (or the live product itself gives NaN), the finite values the live
// product's, and +0 where the product wrote nothing into a -0 C. Per dtype, both layouts of each
// operand, live parts that cut rows, cols and k on either side.
template <class T>
void zero_terms_case(bool ta, bool tb, int am0, int am1, int ak0, int ak1, int bk0, int bk1, int bn0, int bn1,
                     uint32_t seed) {
  const int M = 6, N = 7, K = 9;
  std::mt19937 g(seed);
  // op(A) M x K and op(B) K x N, zero outside the live rects, some inf / NaN inside
  std::vector<float> a((size_t)M * K, 0.f), b((size_t)K * N, 0.f);
  auto val = [&] {
    const int u = std::uniform_int_distribution<int>(0, 9)(g);
    return u == 0 ? INFINITY : u == 1 ? NAN : u == 2 ? -INFINITY : std::uniform_real_distribution<float>(-1.f, 1.f)(g);
  };
  for (int i = am0; i < am1; ++i)
    for (int k = ak0; k < ak1; ++k) a[(size_t)i * K + k] = std::uniform_int_distribution<int>(0, 7)(g) ? 0.5f : val();
  for (int k = bk0; k < bk1; ++k)
    for (int j = bn0; j < bn1; ++j) b[(size_t)k * N + j] = std::uniform_int_distribution<int>(0, 7)(g) ? -0.25f : val();
  // storage (transposed when ta / tb), ld padded by 3
  const long lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 3, ldc = N + 2;
  std::vector<T> A((size_t)(ta ? K : M) * lda), B((size_t)(tb ? N : K) * ldb);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) A[ta ? (size_t)k * lda + i : (size_t)i * lda + k] = tw_cpu::from_f32<T>(a[(size_t)i * K + k]);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j) B[tb ? (size_t)j * ldb + k : (size_t)k * ldb + j] = tw_cpu::from_f32<T>(b[(size_t)k * N + j]);
  auto at_a = [&](int i, int k) { return A.data() + (ta ? (size_t)k * lda + i : (size_t)i * lda + k); };
  auto at_b = [&](int k, int j) { return B.data() + (tb ? (size_t)j * ldb + k : (size_t)k * ldb + j); };
  std::vector<float> C((size_t)M * ldc, -0.0f);
  // the trimmed product: live rows x live cols over the k both have
  const int ki0 = std::max(ak0, bk0), ki1 = std::min(ak1, bk1);
  if (am1 > am0 && bn1 > bn0 && ki1 > ki0)
    tw_cpu::gemm<T, T, float>(am1 - am0, bn1 - bn0, ki1 - ki0, at_a(am0, ki0), lda, ta, at_b(ki0, bn0), ldb, tb,
                              C.data() + (size_t)am0 * ldc + bn0, ldc, /*accumulate=*/true);
  tw_cpu::gemm_zero_terms((int64_t)M, (int64_t)N, (int64_t)K, at_a(am0, ak0), lda, ta, am0, am1, ak0, ak1,
                          at_b(bk0, bn0), ldb, tb, bk0, bk1, bn0, bn1, C.data(), ldc);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double full = 0.0;  // -0 + (+0 + the terms): the full product from +0
      bool nan = false;
      for (int k = 0; k < K; ++k) {
        const double t = (double)tw_cpu::to_f32(tw_cpu::from_f32<T>(a[(size_t)i * K + k])) *
                         (double)tw_cpu::to_f32(tw_cpu::from_f32<T>(b[(size_t)k * N + j]));
        nan = nan || std::isnan(t);
        full += t;
      }
      const float got = C[(size_t)i * ldc + j];
      SCOPED_TRACE("i " + std::to_string(i) + " j " + std::to_string(j));
      if (nan || std::isnan(full)) {
        EXPECT_TRUE(std::isnan(got)) << got;
      } else if (std::isinf(full)) {
        EXPECT_EQ(got, (float)full);
      } else {
        EXPECT_FALSE(std::isnan(got) || std::isinf(got)) << got;
        EXPECT_NEAR(got, full, 1e-2 * (1 + std::fabs(full)));
      }
      const bool wrote = i >= am0 && i < am1 && j >= bn0 && j < bn1 && ki1 > ki0;
      if (!wrote && !nan && !std::isnan(full)) EXPECT_FALSE(std::signbit(got)) << "a -0 C past the product is +0";
    }
}
template <class T>
void zero_terms_cases(uint32_t seed) {
  struct Live { int am0, am1, ak0, ak1, bk0, bk1, bn0, bn1; };
  const Live cases[] = {{0, 6, 0, 9, 0, 9, 0, 7},   // nothing trimmed
                        {0, 3, 0, 9, 0, 9, 0, 7},   // A's rows cut (a varlen tail)
                        {0, 6, 0, 9, 0, 9, 2, 5},   // B's cols cut on both sides
                        {0, 6, 0, 5, 0, 9, 0, 7},   // k: A lacks the last 4
                        {1, 4, 2, 9, 0, 6, 0, 4},   // all of it
                        {0, 0, 0, 0, 0, 9, 0, 7},   // A has no live element
                        {0, 6, 0, 9, 3, 3, 0, 7}};  // B has none
  for (const Live& l : cases)
    for (int t = 0; t < 4; ++t) {
      SCOPED_TRACE("case am " + std::to_string(l.am0) + ".." + std::to_string(l.am1) + " bn " + std::to_string(l.bn0) +
                   ".." + std::to_string(l.bn1) + " t " + std::to_string(t));
      zero_terms_case<T>(t & 1, t & 2, l.am0, l.am1, l.ak0, l.ak1, l.bk0, l.bk1, l.bn0, l.bn1, seed++);
    }
}
TEST(GemmZeroTerms, F32) { zero_terms_cases<float>(31000); }
TEST(GemmZeroTerms, F16) { zero_terms_cases<f16>(32000); }
TEST(GemmZeroTerms, BF16) { zero_terms_cases<bf16>(33000); }

// A packing buffer that cannot be allocated (out of memory, ulimit -v) is an AllocError the
// runtime reports at the kernel (a plain-C entry point returns 3), not a trap; the scratch
// stays usable afterwards.
TEST(Gemm, ScratchOutOfMemoryThrows) {
  for (bool huge : {false, true}) {
    tw_cpu::detail::Scratch s(huge);
    const size_t want = SIZE_MAX / 4;
    try {
      s.get(want);
      FAIL() << "an allocation of " << want << " bytes succeeded";
    } catch (const tw_cpu::AllocError& e) {
      EXPECT_GT(e.bytes, want);
    }
    EXPECT_EQ(s.cap, 0u);
    EXPECT_EQ(s.ptr, nullptr);
    float* p = static_cast<float*>(s.get(1000 * sizeof(float)));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    p[999] = 1.0f;
  }
}
