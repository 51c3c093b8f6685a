// legalize_vector: before/after IR texts for each rewrite, then the legalised kernels lowered
// (lower_expert) and run in the simulator against a float64 reference with zero checker reports.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/legalize_vector.h"
#include "target/ascend/lower_expert.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/simulator/numeric.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

const target::Target& b2() { return target::find_target("ascend910b2"); }

ir::Kernel legalize(const std::string& text) { return legalize_vector(ir::parse_kernel(text, "vec.tw"), b2()); }
std::string after(const std::string& text) { return ir::print(legalize(text)); }


// ---------------------------------------------------------------------------------------------
// Numerics: the legalised kernel, lowered and run in the simulator. The tests do not depend on
// the automatic pipeline's other passes: kernels are written in expert form (scope V), and a
// PipeBarrier<PIPE_ALL> after every instruction stands in for insert_sync.

StmtPtr serialize(const StmtPtr& s) {
  if (!s) return s;
  switch (s->kind) {
    case StmtKind::Instr: return seq({s, instr(PipeBarrier{Pipe::ALL}, s->span)}, s->span);
    case StmtKind::Let: return s;
    default: {
      auto n = std::make_shared<Stmt>(*s);
      for (auto& b : n->body) b = serialize(b);
      n->else_body = serialize(s->else_body);
      return n;
    }
  }
}

struct SimRun {
  sim::Result result;
  std::string ir;
};

SimRun simulate(const std::string& text, std::vector<sim::Arg> args, std::vector<int64_t> shapes) {
  ir::Kernel k = legalize(text);
  Program p = plan_memory(lower_expert(k, b2()), b2(), false);
  p.aiv = serialize(p.aiv);
  return SimRun{sim::run(p, b2().ascend, std::move(args), shapes), ir::print(k)};
}

template <class T>
sim::Arg arg(std::vector<T>& v) {
  return sim::Arg{reinterpret_cast<uint8_t*>(v.data()), static_cast<int64_t>(v.size() * sizeof(T))};
}
std::vector<float> randn(size_t n, float scale, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
std::vector<uint16_t> to16(const std::vector<float>& v, bool bf) {
  std::vector<uint16_t> o;
  for (float x : v) o.push_back(bf ? sim::num::f32_to_bf16(x) : sim::num::f32_to_f16(x));
  return o;
}
float from16(uint16_t h, bool bf) { return bf ? sim::num::bf16_to_f32(h) : sim::num::f16_to_f32(h); }

#define EXPECT_NO_REPORTS(r) EXPECT_TRUE((r).result.reports.empty()) << (r).result.summary() << (r).ir

// layer_norm as the example writes it (compound maps, row vectors, global W (fp16) and B read
// inside the map), N = 300 (rows are not whole 32 B blocks), M = 13 (a tail block).
TEST(LegalizeVectorNumerics, LayerNormOddShapes) {
  const int64_t M = 13, N = 300;
  std::string k = R"(kernel ln(X: global float32[M, 300], W: global float16[300], B: global float32[300], Y: global float32[M, 300] out)
    grid(cid = ceildiv(M, 8)) sub_block(vid) {
  alloc x: UB float32[8, 300]
  alloc tmp: UB float32[8, 300]
  alloc mean: UB float32[8]
  alloc var: UB float32[8]
  scope V {
    copy X[cid * 8:+8, 0:+300] -> x
    reduce sum x -> mean axis=1 clear=true
    for i in parallel(0, 8) {
      mean[i] = mean[i] / 300.0
    }
    for i_1 in parallel(0, 8) {
      for j in parallel(0, 300) {
        tmp[i_1, j] = (x[i_1, j] - mean[i_1]) * (x[i_1, j] - mean[i_1])
      }
    }
    reduce sum tmp -> var axis=1 clear=true
    for i_2 in parallel(0, 8) {
      var[i_2] = rsqrt(var[i_2] / 300.0 + 1e-05)
    }
    for i_3 in parallel(0, 8) {
      for j_1 in parallel(0, 300) {
        x[i_3, j_1] = (x[i_3, j_1] - mean[i_3]) * var[i_3] * cast<float32>(W[j_1]) + B[j_1]
      }
    }
    copy x -> Y[cid * 8:+8, 0:+300]
  }
}
)";
  auto x = randn(M * N, 2.0f, 1), wf = randn(N, 1.0f, 2), b = randn(N, 1.0f, 3);
  auto w = to16(wf, false);
  std::vector<float> y(M * N, 0);
  SimRun r = simulate(k, {arg(x), arg(w), arg(b), arg(y)}, {M});
  EXPECT_NO_REPORTS(r);
  for (int64_t i = 0; i < M; ++i) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < N; ++j) mu += x[i * N + j];
    mu /= N;
    for (int64_t j = 0; j < N; ++j) var += (x[i * N + j] - mu) * (x[i * N + j] - mu);
    var /= N;
    for (int64_t j = 0; j < N; ++j) {
      double ref = (x[i * N + j] - mu) / std::sqrt(var + 1e-5) * from16(w[j], false) + b[j];
      ASSERT_NEAR(y[i * N + j], ref, 1e-5 + 1e-5 * std::fabs(ref)) << i << "," << j << r.ir;
    }
  }
}

// Math functions without a vector instruction, each against the float64 function with the
// error bound stated in legalize_vector.h.
struct MathCase {
  const char* fn;
  float lo, hi;
  double (*ref)(double);
  double abs_tol, rel_tol;
};

TEST(LegalizeVectorNumerics, MathExpansionsWithinStatedBounds) {
  const MathCase cases[] = {
      {"exp2", -30.f, 30.f, [](double v) { return std::exp2(v); }, 0, 2.5e-6},
      {"log2", 1e-3f, 1e3f, [](double v) { return std::log2(v); }, 4e-7, 2.5e-7},
      {"sigmoid", -20.f, 20.f, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, 1e-7, 4e-7},
      {"tanh", -12.f, 12.f, [](double v) { return std::tanh(v); }, 3e-7, 0},
      {"erf", -6.f, 6.f, [](double v) { return std::erf(v); }, 4e-7, 0},
  };
  const int64_t R = 16, Cc = 72;
  for (const auto& c : cases) {
    std::string k = std::string("kernel f(X: global float32[16, 72], Y: global float32[16, 72] out) grid(cid = 1) sub_block(vid) {\n") +
                    "  alloc x: UB float32[16, 72]\n  scope V {\n    copy X -> x\n" +
                    "    for i in parallel(0, 16) {\n      for j in parallel(0, 72) {\n        x[i, j] = " + c.fn +
                    "(x[i, j])\n      }\n    }\n    copy x -> Y\n  }\n}\n";
    std::vector<float> x(R * Cc), y(R * Cc, 0);
    for (int64_t i = 0; i < R * Cc; ++i) x[i] = c.lo + (c.hi - c.lo) * static_cast<float>(i) / (R * Cc - 1);
    x[0] = c.lo;
    if (c.lo < 0) x[R * Cc / 2] = 0.f, x[R * Cc / 2 + 1] = 1e-9f, x[R * Cc / 2 + 2] = -1e-20f;
    SimRun r = simulate(k, {arg(x), arg(y)}, {});
    EXPECT_NO_REPORTS(r);
    double worst = 0;
    for (int64_t i = 0; i < R * Cc; ++i) {
      double ref = c.ref(x[i]), err = std::fabs(y[i] - ref);
      worst = std::max(worst, err / (c.abs_tol + c.rel_tol * std::fabs(ref)));
      ASSERT_LE(err, c.abs_tol + c.rel_tol * std::fabs(ref)) << c.fn << "(" << x[i] << ") = " << y[i] << " vs " << ref;
    }
    std::printf("[ math ] %-8s worst error / bound = %.2f\n", c.fn, worst);
  }
}

// gelu_bias's epilogue: v = acc + b[j] (a column vector), 0.5 v (1 + erf(v / sqrt 2)).
TEST(LegalizeVectorNumerics, GeluWithColumnBias) {
  const int64_t R = 32, Cc = 48;
  std::string k = R"(kernel g(A: global float32[32, 48], Bias: global float32[48], Y: global float32[32, 48] out)
    grid(cid = 1) sub_block(vid) {
  alloc acc: UB float32[32, 48]
  alloc b_s: UB float32[48]
  scope V {
    copy A -> acc
    copy Bias -> b_s
    for i in parallel(0, 32) {
      for j in parallel(0, 48) {
        acc[i, j] = 0.5 * (acc[i, j] + b_s[j]) * (1.0 + erf((acc[i, j] + b_s[j]) * 0.7071067811865475))
      }
    }
    copy acc -> Y
  }
}
)";
  auto a = randn(R * Cc, 2.0f, 4), b = randn(Cc, 1.0f, 5);
  std::vector<float> y(R * Cc, 0);
  SimRun r = simulate(k, {arg(a), arg(b), arg(y)}, {});
  EXPECT_NO_REPORTS(r);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < Cc; ++j) {
      double v = static_cast<double>(a[i * Cc + j]) + b[j], ref = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      ASSERT_NEAR(y[i * Cc + j], ref, 1e-6 + 1e-6 * std::fabs(v)) << i << "," << j;
    }
}

// Flash attention's masks over a loop of key blocks: the causal diagonal (row-dependent bounds,
// per-row loop) and the sequence tail (one bound for all rows, a runtime column count), with
// column bounds that are not on 32 B blocks.
TEST(LegalizeVectorNumerics, CausalAndTailMasks) {
  const int64_t G = 7, K = 3, R = 16, Cc = 40, S = 100;
  std::string k = R"(kernel m(X: global float32[3, 16, 40], Y: global float32[7, 3, 16, 40] out)
    grid(cid = 7) sub_block(vid) {
  alloc x: UB float32[16, 40]
  scope V {
    for k in serial(0, 3) {
      copy X[k:+1, 0:+16, 0:+40] -> x
      for i in parallel(0, 16) {
        for j in parallel(0, 40) {
          x[i, j] = where(cid * 16 + i >= k * 40 + j, x[i, j] * 0.5, -1e+30)
        }
      }
      for i_1 in parallel(0, 16) {
        for j_1 in parallel(0, 40) {
          x[i_1, j_1] = where(k * 40 + j_1 < 100, x[i_1, j_1], -2.0)
        }
      }
      copy x -> Y[cid:+1, k:+1, 0:+16, 0:+40]
    }
  }
}
)";
  auto x = randn(K * R * Cc, 1.0f, 6);
  std::vector<float> y(G * K * R * Cc, 0);
  SimRun r = simulate(k, {arg(x), arg(y)}, {});
  EXPECT_NO_REPORTS(r);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t kk = 0; kk < K; ++kk)
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < Cc; ++j) {
          float v = g * R + i >= kk * Cc + j ? x[(kk * R + i) * Cc + j] * 0.5f : -1e30f;
          if (!(kk * Cc + j < S)) v = -2.0f;
          ASSERT_EQ(y[((g * K + kk) * R + i) * Cc + j], v) << g << "," << kk << "," << i << "," << j;
        }
}

// Conversions on the way in and out (bfloat16 GM <-> float32 UB; float16 too), reduce with
// clear=False, a UB -> UB copy of rows that are not whole 32 B blocks.
TEST(LegalizeVectorNumerics, ConvertingCopiesAndMergingReduce) {
  for (bool bf : {true, false}) {
    const int64_t M = 11, N = 100;
    std::string t = bf ? "bfloat16" : "float16";
    std::string k = "kernel c(X: global " + t + "[M, 100], Y: global " + t + "[M, 100] out, Z: global " + t + R"([M] out)
    grid(cid = ceildiv(M, 8)) sub_block(vid) {
  alloc x: UB float32[8, 100]
  alloc x2: UB float32[8, 100]
  alloc m: UB float32[8]
  scope V {
    copy X[cid * 8:+8, 0:+100] -> x
    fill m = 0.5
    reduce max x -> m axis=1 clear=false
    copy x -> x2
    for i in parallel(0, 8) {
      for j in parallel(0, 100) {
        x[i, j] = x2[i, j] - m[i]
      }
    }
    copy x -> Y[cid * 8:+8, 0:+100]
    copy m -> Z[cid * 8:+8]
  }
}
)";
    auto xf = randn(M * N, 1.0f, 7);
    auto x = to16(xf, bf);
    std::vector<uint16_t> y(M * N, 0), z(M, 0);
    SimRun r = simulate(k, {arg(x), arg(y), arg(z)}, {M});
    EXPECT_NO_REPORTS(r);
    for (int64_t i = 0; i < M; ++i) {
      float mx = 0.5f;
      for (int64_t j = 0; j < N; ++j) mx = std::max(mx, from16(x[i * N + j], bf));
      ASSERT_EQ(from16(z[i], bf), from16(bf ? sim::num::f32_to_bf16(mx) : sim::num::f32_to_f16(mx), bf)) << i;
      for (int64_t j = 0; j < N; ++j) {
        float v = from16(x[i * N + j], bf) - mx;
        ASSERT_EQ(y[i * N + j], bf ? sim::num::f32_to_bf16(v) : sim::num::f32_to_f16(v)) << t << " " << i << "," << j;
      }
    }
  }
}

}  // namespace
}  // namespace tw::ascend
