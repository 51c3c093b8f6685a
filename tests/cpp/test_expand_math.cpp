// expand_math: before/after Tile IR texts. (The fp32 error bounds of the expansions, lowered and
// simulated: tests/cpp/test_legalize_vector.cpp, MathExpansionsWithinStatedBounds.)
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/expand_math.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string after(const std::string& text) {
  return ir::print(expand_math(ir::parse_kernel(text, "vec.tw"), target::find_target("ascend910b2")));
}

// float32: each function written with exp/log/sqrt/abs; pow by its constant exponents.
TEST(ExpandMath, Float32Expansions) {
  EXPECT_EQ(after(R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc y: UB float32[8, 64]
  alloc m: UB float32[8]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      y[i, j] = exp2(x[i, j]) + log2(x[i, j]) + rsqrt(x[i, j]) + sigmoid(x[i, j])
      y[i, j] = pow(x[i, j], 2.0) + pow(x[i, j], 3.0) + pow(x[i, j], -0.5) + pow(x[i, j], 1.0)
    }
  }
  for i_1 in parallel(0, 8) {
    m[i_1] = pow(m[i_1], 0.5) + pow(m[i_1], -1.0)
  }
}
)"), R"(kernel k(X: global float32[8, 64])
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  alloc y: UB float32[8, 64]
  alloc m: UB float32[8]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      y[i, j] = exp(x[i, j] * 0.6931471805599453) + log(x[i, j]) * 1.4426950408889634 + 1.0 / sqrt(x[i, j]) + 1.0 / (exp(-x[i, j]) + 1.0)
      y[i, j] = x[i, j] * x[i, j] + x[i, j] * x[i, j] * x[i, j] + 1.0 / sqrt(x[i, j]) + x[i, j]
    }
  }
  for i_1 in parallel(0, 8) {
    m[i_1] = sqrt(m[i_1]) + 1.0 / m[i_1]
  }
}
)");
}

// tanh and erf are computed in float32 (a float16 argument converted); a bfloat16 argument is computed
// in float32 too. The expansion's float32 value stands (hunt38 F3: a cast back to the call's 16-bit dtype
// rounded it where the value went on in float32); the store into the 16-bit tile converts it once.
TEST(ExpandMath, TanhErfInFloat32AndBfloat16KeepFloat32) {
  EXPECT_EQ(after(R"(kernel k(X: global float16[8, 64])
    grid(bx = 1) {
  alloc h: UB float16[8, 64]
  alloc b: UB bfloat16[8, 64]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      h[i, j] = tanh(h[i, j])
      h[i, j] = erf(h[i, j])
      b[i, j] = exp2(b[i, j])
    }
  }
}
)"), R"(kernel k(X: global float16[8, 64])
    grid(bx = 1) {
  alloc h: UB float16[8, 64]
  alloc b: UB bfloat16[8, 64]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      h[i, j] = (exp(min(max(cast<float32>(h[i, j]), -9.0), 9.0) * 2.0) - 1.0) / (exp(min(max(cast<float32>(h[i, j]), -9.0), 9.0) * 2.0) + 1.0)
      h[i, j] = (((((1.0 / (abs(cast<float32>(h[i, j])) * 0.3275911 + 1.0) * 1.061405429 + -1.453152027) * (1.0 / (abs(cast<float32>(h[i, j])) * 0.3275911 + 1.0)) + 1.421413741) * (1.0 / (abs(cast<float32>(h[i, j])) * 0.3275911 + 1.0)) + -0.284496736) * (1.0 / (abs(cast<float32>(h[i, j])) * 0.3275911 + 1.0)) + 0.254829592) * (1.0 / (abs(cast<float32>(h[i, j])) * 0.3275911 + 1.0)) * exp(cast<float32>(h[i, j]) * cast<float32>(h[i, j]) * -1.0) * -1.0 + 1.0) * min(max(cast<float32>(h[i, j]) * 1.2676506002282294e+30, -1.0), 1.0)
      b[i, j] = exp(cast<float32>(b[i, j]) * 0.6931471805599453)
    }
  }
}
)");
}

// Calls on scalars stay (scalar code), as do T.where conditions, lets of scalars, maps that are not
// vector code (a store into a global tensor) and calls without an expansion (floor, pow 4.0:
// legalize_vector reports them); lets of tile values are tile data.
TEST(ExpandMath, ScalarsConditionsAndUnsupportedStay) {
  EXPECT_EQ(after(R"(kernel k(X: global float32[8, 64], n: float32)
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      let s: float32 = exp2(n)
      let t: float32 = x[i, j] * s
      x[i, j] = where(j < 5, exp2(t) * sigmoid(n), 0.0)
      x[i, j] = floor(x[i, j]) + pow(x[i, j], 4.0)
    }
  }
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      X[i_1, j_1] = exp2(x[i_1, j_1])
    }
  }
}
)"), R"(kernel k(X: global float32[8, 64], n: float32)
    grid(bx = 1) {
  alloc x: UB float32[8, 64]
  for i in parallel(0, 8) {
    for j in parallel(0, 64) {
      let s: float32 = exp2(n)
      let t: float32 = x[i, j] * s
      x[i, j] = where(j < 5, exp(t * 0.6931471805599453) * sigmoid(n), 0.0)
      x[i, j] = floor(x[i, j]) + pow(x[i, j], 4.0)
    }
  }
  for i_1 in parallel(0, 8) {
    for j_1 in parallel(0, 64) {
      X[i_1, j_1] = exp2(x[i_1, j_1])
    }
  }
}
)");
}

}  // namespace
}  // namespace tw::ascend
