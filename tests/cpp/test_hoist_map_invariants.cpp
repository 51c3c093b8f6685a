// hoist_map_invariants: per-column subexpressions of 2-D maps computed once (golden before/after).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "transform/hoist_map_invariants.h"

namespace tw::transform {
namespace {

std::string run(const std::string& text) { return ir::print(hoist_map_invariants(ir::parse_kernel(text, "k.tw"))); }

// The per-column product exp(v) * rsqrt(v + eps) feeds an add (an fma for g++): its operands are
// hoisted, not the product; the two rsqrt(v[j] + eps) share one tile.
TEST(HoistMapInvariants, BatchNormScaleOncePerColumn) {
  EXPECT_EQ(run(R"(kernel bn(X: global float32[M, 16], V: global float32[16], Y: global float32[M, 16] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 16]
  alloc v: fragment float32[16]
  copy X[bx * 8:+8, 0:+16] -> x
  copy V[0:+16] -> v
  for i in parallel(0, 8) {
    for j in parallel(0, 16) {
      x[i, j] = x[i, j] * rsqrt(v[j] + 1e-05) + exp(v[j]) * rsqrt(v[j] + 1e-05)
    }
  }
  copy x -> Y[bx * 8:+8, 0:+16]
}
)"),
            R"(kernel bn(X: global float32[M, 16], V: global float32[16], Y: global float32[M, 16] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 16]
  alloc v: fragment float32[16]
  copy X[bx * 8:+8, 0:+16] -> x
  copy V -> v
  alloc j_inv0: fragment float32[16]
  for j0 in parallel(0, 16) {
    j_inv0[j0] = rsqrt(v[j0] + 1e-05)
  }
  alloc j_inv1: fragment float32[16]
  for j1 in parallel(0, 16) {
    j_inv1[j1] = exp(v[j1])
  }
  for i in parallel(0, 8) {
    for j in parallel(0, 16) {
      x[i, j] = x[i, j] * j_inv0[j] + j_inv1[j] * j_inv0[j]
    }
  }
  copy x -> Y[bx * 8:+8, 0:+16]
}
)");
}

TEST(HoistMapInvariants, LeavesOtherMapsAlone) {
  const char* cases[] = {
      // one row: nothing to save
      R"(kernel k(X: global float32[1, 16], Y: global float32[1, 16] out)
    grid(bx = 1) {
  alloc x: fragment float32[1, 16]
  alloc v: fragment float32[16]
  copy X[0:+1, 0:+16] -> x
  copy X[0:+1, 0:+16] -> v
  for i in parallel(0, 1) {
    for j in parallel(0, 16) {
      x[i, j] = x[i, j] * rsqrt(v[j])
    }
  }
  copy x -> Y[0:+1, 0:+16]
}
)",
      // cheap per-column parts (loads, adds) stay
      R"(kernel k(X: global float32[8, 16], Y: global float32[8, 16] out)
    grid(bx = 1) {
  alloc x: fragment float32[8, 16]
  alloc v: fragment float32[16]
  copy X[0:+8, 0:+16] -> x
  copy X[0:+1, 0:+16] -> v
  for i in parallel(0, 8) {
    for j in parallel(0, 16) {
      x[i, j] = x[i, j] * (v[j] + 1.0)
    }
  }
  copy x -> Y[0:+8, 0:+16]
}
)",
      // the column part reads a tile the map writes
      R"(kernel k(X: global float32[8, 16], Y: global float32[8, 16] out)
    grid(bx = 1) {
  alloc x: fragment float32[8, 16]
  alloc v: fragment float32[16]
  copy X[0:+8, 0:+16] -> x
  copy X[0:+1, 0:+16] -> v
  for i in parallel(0, 8) {
    for j in parallel(0, 16) {
      x[i, j] = x[i, j] * exp(v[j])
      v[j] = x[i, j]
    }
  }
  copy x -> Y[0:+8, 0:+16]
}
)",
      // float16 values are computed in float32 on the cpu: a float16 tile would round them
      R"(kernel k(X: global float16[8, 16], Y: global float16[8, 16] out)
    grid(bx = 1) {
  alloc x: fragment float16[8, 16]
  alloc v: fragment float16[16]
  copy X[0:+8, 0:+16] -> x
  copy X[0:+1, 0:+16] -> v
  for i in parallel(0, 8) {
    for j in parallel(0, 16) {
      x[i, j] = x[i, j] * exp(v[j])
    }
  }
  copy x -> Y[0:+8, 0:+16]
}
)",
  };
  for (const char* text : cases) {
    auto k = ir::parse_kernel(text, "k.tw");
    EXPECT_EQ(hoist_map_invariants(k), k) << text;
  }
}

}  // namespace
}  // namespace tw::transform
