// infer_scope: the Ascend memory of each portable tile from its uses (golden before/after).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/infer_scope.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string run(const char* text) {
  return ir::print(infer_scope(ir::parse_kernel(text, "k.tw"), target::find_target("ascend910b2")));
}

TEST(InferScope, GemmTilesGoToL1AndL0C) {
  EXPECT_EQ(run(R"(kernel mm(A: global float16[256, 128], B: global float16[128, 256], C: global float16[256, 256] out)
    grid(bx = 2, by = 2) {
  alloc a: shared float16[128, 64]
  alloc b: shared float16[64, 128]
  alloc acc: fragment float32[128, 128]
  fill acc = 0.0
  for k in serial(0, 2) {
    copy A[by * 128:+128, k * 64:+64] -> a
    copy B[k * 64:+64, bx * 128:+128] -> b
    gemm a, b -> acc trans_a=false trans_b=false clear=false
  }
  copy acc -> C[by * 128:+128, bx * 128:+128]
}
)"),
            R"(kernel mm(A: global float16[256, 128], B: global float16[128, 256], C: global float16[256, 256] out)
    grid(bx = 2, by = 2) {
  alloc a: L1 float16[128, 64]
  alloc b: L1 float16[64, 128]
  alloc acc: L0C float32[128, 128]
  fill acc = 0.0
  for k in serial(0, 2) {
    copy A[by * 128:+128, k * 64:+64] -> a
    copy B[k * 64:+64, bx * 128:+128] -> b
    gemm a, b -> acc trans_a=false trans_b=false clear=false
  }
  copy acc -> C[by * 128:+128, bx * 128:+128]
}
)");
}

TEST(InferScope, VectorAndCopyOnlyTilesGoToUB) {
  EXPECT_EQ(run(R"(kernel sm(X: global float32[64, 32], Y: global float32[64, 32] out)
    grid(bx = 8) {
  alloc x: fragment float32[8, 32]
  alloc m: fragment float32[8]
  alloc t: shared float32[8, 32]
  copy X[bx * 8:+8, 0:+32] -> x
  reduce max x -> m axis=1 clear=true
  for i in parallel(0, 8) {
    for j in parallel(0, 32) {
      x[i, j] = x[i, j] - m[i]
    }
  }
  copy x -> t
  copy t -> Y[bx * 8:+8, 0:+32]
}
)"),
            R"(kernel sm(X: global float32[64, 32], Y: global float32[64, 32] out)
    grid(bx = 8) {
  alloc x: UB float32[8, 32]
  alloc m: UB float32[8]
  alloc t: UB float32[8, 32]
  copy X[bx * 8:+8, 0:+32] -> x
  reduce max x -> m axis=1 clear=true
  for i in parallel(0, 8) {
    for j in parallel(0, 32) {
      x[i, j] = x[i, j] - m[i]
    }
  }
  copy x -> t
  copy t -> Y[bx * 8:+8, 0:+32]
}
)");
}

TEST(InferScope, MixedTilesKeepTheirScope) {
  EXPECT_EQ(run(R"(kernel gb(X: global float16[64, 64], W: global float16[64, 64], Y: global float32[64, 64] out)
    grid(bx = 1) {
  alloc x: shared float16[64, 64]
  alloc w: shared float16[64, 64]
  alloc acc: fragment float32[64, 64]
  copy X -> x
  copy W -> w
  gemm x, w -> acc trans_a=false trans_b=false clear=true
  for i in parallel(0, 64) {
    for j in parallel(0, 64) {
      acc[i, j] = acc[i, j] * 2.0
    }
  }
  copy acc -> Y
}
)"),
            R"(kernel gb(X: global float16[64, 64], W: global float16[64, 64], Y: global float32[64, 64] out)
    grid(bx = 1) {
  alloc x: L1 float16[64, 64]
  alloc w: L1 float16[64, 64]
  alloc acc: fragment float32[64, 64]
  copy X -> x
  copy W -> w
  gemm x, w -> acc trans_a=false trans_b=false clear=true
  for i in parallel(0, 64) {
    for j in parallel(0, 64) {
      acc[i, j] = acc[i, j] * 2.0
    }
  }
  copy acc -> Y
}
)");
}

// A tile the kernel never uses is dropped (session 21, hunt9a F9): as a UB tile next to a gemm it
// made a Cube-only kernel look like it needed the Vector core, and split_cube_vector then found no
// vector code ("internal: ... found no code for one unit").
TEST(InferScope, UnusedTilesAreDropped) {
  EXPECT_EQ(run(R"(kernel mm(A: global float16[16, 16], C: global float32[16, 16] out)
    grid(bx = 1) {
  alloc c: fragment float32[16, 16]
  alloc a: shared float16[16, 16]
  alloc u: fragment float32[16, 16]
  alloc s: shared float16[16, 32]
  copy A -> a
  gemm a, a -> c trans_a=false trans_b=false clear=true
  copy c -> C
}
)"),
            R"(kernel mm(A: global float16[16, 16], C: global float32[16, 16] out)
    grid(bx = 1) {
  alloc c: L0C float32[16, 16]
  alloc a: L1 float16[16, 16]
  copy A -> a
  gemm a, a -> c trans_a=false trans_b=false clear=true
  copy c -> C
}
)");
}

}  // namespace
}  // namespace tw::ascend
