// The Mmad micro-kernels (simulator/mmad_kernel.h) against a straightforward reference, bit for
// bit, on every code path this CPU runs: tails in m, n and k, init and accumulate, fp16 / bf16 /
// fp32 operand values (fp32 and tiny bf16 products are inexact in fp32, so a fused multiply-add
// would change bits), int8 operands with int32 wrap-around.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "target/ascend/simulator/mmad_kernel.h"
#include "target/ascend/simulator/numeric.h"

namespace tw::ascend::sim {
namespace {

struct Shape { int64_t m, n, k; };
const Shape kShapes[] = {{1, 1, 1}, {1, 16, 16}, {9, 31, 3}, {17, 33, 5}, {35, 47, 70}, {16, 48, 32}, {128, 256, 64}};

// C in L0C's Nz layout (strips of Mp rows, 16 columns), every element set (padding included).
template <class T>
struct Rig {
  Shape s;
  int64_t Mp, N1;
  std::vector<T> a, b, c;
  Rig(Shape sh, std::mt19937& g, T (*gen)(std::mt19937&)) : s(sh), Mp((sh.m + 15) / 16 * 16), N1((sh.n + 15) / 16) {
    a.resize(s.m * s.k), b.resize(N1 * s.k * 16), c.resize(N1 * Mp * 16);
    for (auto& v : a) v = gen(g);
    for (auto& v : b) v = gen(g);
    for (auto& v : c) v = gen(g);
  }
  T& at(std::vector<T>& v, int64_t i, int64_t j) { return v[(j / 16) * Mp * 16 + i * 16 + j % 16]; }
  // b's element (kk, j) in the column-block panels
  T bv(int64_t kk, int64_t j) const { return b[((j / 16) * s.k + kk) * 16 + j % 16]; }
  MmadPanels<T> panels(std::vector<T>& out, bool init, int64_t k_step = 1) const {
    MmadPanels<T> p;
    p.a = a.data(), p.b = b.data(), p.c = out.data();
    p.m = s.m, p.n = s.n, p.k = s.k, p.c_block = Mp * 16, p.init = init, p.k_step = k_step;
    return p;
  }
};

float ref_step(float acc, float x, float y) {
  volatile float prod = x * y;  // rounded to float32 on its own
  volatile float sum = acc + prod;
  return sum;
}
uint32_t ref_step(uint32_t acc, uint32_t x, uint32_t y) { return acc + x * y; }
float ref_prod(float x, float y) {
  volatile float prod = x * y;
  return prod;
}
uint32_t ref_prod(uint32_t x, uint32_t y) { return x * y; }
float ref_add(float x, float y) {
  volatile float sum = x + y;
  return sum;
}
uint32_t ref_add(uint32_t x, uint32_t y) { return x + y; }

// C[i][j] by the documented order: each K slice of k_step products summed in order, then added.
template <class T>
T ref_element(const Rig<T>& r, T acc, int64_t i, int64_t j, int64_t k_step) {
  for (int64_t k0 = 0; k0 < r.s.k; k0 += k_step) {
    T part = ref_prod(r.a[i * r.s.k + k0], r.bv(k0, j));
    for (int64_t kk = k0 + 1; kk < std::min(r.s.k, k0 + k_step); ++kk) part = ref_add(part, ref_prod(r.a[i * r.s.k + kk], r.bv(kk, j)));
    acc = ref_add(acc, part);
  }
  return acc;
}

template <class T>
void check_all(T (*gen)(std::mt19937&), const char* what) {
  std::mt19937 g(7);
  for (MmadIsa isa : mmad_isas_available())
    for (const Shape& s : kShapes)
      for (int64_t k_step : {1, 4, 16, 32})
        for (bool init : {true, false}) {
          Rig<T> r(s, g, gen);
          std::vector<T> want = r.c, got = r.c;
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) {
              T acc = init ? T{} : r.at(want, i, j);
              if (k_step == 1)  // the plain running sum, written independently of ref_element
                for (int64_t kk = 0; kk < s.k; ++kk) acc = ref_step(acc, r.a[i * s.k + kk], r.bv(kk, j));
              else
                acc = ref_element(r, acc, i, j, k_step);
              r.at(want, i, j) = acc;
            }
          mmad_panels(r.panels(got, init, k_step), isa);
          ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(T)), 0)
              << what << " on " << mmad_isa_name(isa) << ": m " << s.m << " n " << s.n << " k " << s.k
              << " k_step " << k_step << (init ? " init" : " accumulate") << " (C outside m x n must be untouched too)";
        }
}

float gen_f16(std::mt19937& g) {  // finite fp16 values, subnormals included
  uint16_t h;
  do h = static_cast<uint16_t>(g()); while ((h & 0x7c00u) == 0x7c00u);
  return num::f16_to_f32(h);
}
// bf16 values near the bottom of the range (2^-126 .. 2^-97) or near 1 (2^-22 .. 2^0): products
// of the two kinds fall among fp32's subnormals, where they are rounded.
float gen_bf16_tiny(std::mt19937& g) {
  uint32_t e = g() % 2 ? 1u + g() % 30u : 105u + g() % 23u;
  return num::bf16_to_f32(static_cast<uint16_t>((g() & 0x807fu) | (e << 7)));
}
float gen_f32(std::mt19937& g) { return std::normal_distribution<float>(0.f, 1.f)(g); }
uint32_t gen_i8(std::mt19937& g) { return static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(g()))); }
uint32_t gen_i32(std::mt19937& g) { return static_cast<uint32_t>(g()); }

TEST(MmadKernel, Fp16ValuesMatchTheReferenceBitForBit) { check_all<float>(gen_f16, "fp16"); }
TEST(MmadKernel, TinyBf16ProductsAreRoundedBeforeTheSum) { check_all<float>(gen_bf16_tiny, "bf16 tiny"); }
TEST(MmadKernel, Fp32ProductsAreRoundedNotFused) { check_all<float>(gen_f32, "fp32"); }

TEST(MmadKernel, Int8ProductsSumInInt32WithWrapAround) {
  check_all<uint32_t>(gen_i8, "int8");
  // int32 accumulators near the ends of the range wrap as the hardware's int32 adder
  std::mt19937 g(3);
  Rig<uint32_t> r({20, 40, 64}, g, gen_i8);
  for (auto& v : r.c) v = gen_i32(g);
  std::vector<uint32_t> want = r.c, got = r.c;
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t j = 0; j < 40; ++j) {
      uint32_t acc = r.at(want, i, j);
      for (int64_t kk = 0; kk < 64; ++kk) acc = ref_step(acc, r.a[i * 64 + kk], r.bv(kk, j));
      r.at(want, i, j) = acc;
    }
  mmad_panels(r.panels(got, false));
  EXPECT_EQ(want, got);
}

TEST(MmadKernel, BaselineIsAlwaysAvailableAndBestComesFirst) {
  auto isas = mmad_isas_available();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.back(), MmadIsa::Baseline);
  if (__builtin_cpu_supports("avx512f")) EXPECT_EQ(isas.front(), MmadIsa::Avx512);
}

}  // namespace
}  // namespace tw::ascend::sim
