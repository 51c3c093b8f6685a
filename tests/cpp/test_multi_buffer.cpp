// multi_buffer: stage copies of the tiles of pipelined / loading loops (golden before/after).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/multi_buffer.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string run(const char* text) {
  return ir::print(multi_buffer(ir::parse_kernel(text, "k.tw"), target::find_target("ascend910b2")));
}

TEST(MultiBuffer, PipelinedLoopGetsStagedTiles) {
  EXPECT_EQ(run(R"(kernel mm(A: global float16[128, 192], C: global float32[128, 128] out)
    grid(bx = 1) {
  alloc acc: L0C float32[128, 128]
  for k in pipelined(0, 3, stages=2) {
    alloc a: L1 float16[128, 64]
    copy A[0:+128, k * 64:+64] -> a
    let kk: int32 = k * 2
    gemm a, a -> acc trans_a=false trans_b=true clear=false
  }
  copy acc -> C
}
)"),
            R"(kernel mm(A: global float16[128, 192], C: global float32[128, 128] out)
    grid(bx = 1) {
  alloc acc: L0C float32[128, 128]
  alloc a: L1 float16[2, 128, 64]
  for k_o in serial(0, 2) {
    {
      copy A[0:+128, k_o * 2 * 64:+64] -> a[0:+1, 0:+128, 0:+64]
      let kk_s0: int32 = k_o * 2 * 2
      gemm a[0:+1, 0:+128, 0:+64], a[0:+1, 0:+128, 0:+64] -> acc trans_a=false trans_b=true clear=false
    }
    if k_o * 2 + 1 < 3 {
      copy A[0:+128, (k_o * 2 + 1) * 64:+64] -> a[1:+1, 0:+128, 0:+64]
      let kk_s1: int32 = (k_o * 2 + 1) * 2
      gemm a[1:+1, 0:+128, 0:+64], a[1:+1, 0:+128, 0:+64] -> acc trans_a=false trans_b=true clear=false
    }
  }
  copy acc -> C
}
)");
}

TEST(MultiBuffer, SerialLoopThatLoadsIsStagedWhenItFits) {
  EXPECT_EQ(run(R"(kernel v(X: global float32[64, 64], Y: global float32[64, 64] out)
    grid(bx = 1) {
  for r in serial(0, 4) {
    alloc x: UB float32[16, 64]
    copy X[r * 16:+16, 0:+64] -> x
    copy x -> Y[r * 16:+16, 0:+64]
  }
}
)"),
            R"(kernel v(X: global float32[64, 64], Y: global float32[64, 64] out)
    grid(bx = 1) {
  alloc x: UB float32[2, 16, 64]
  for r_o in serial(0, 2) {
    {
      copy X[r_o * 2 * 16:+16, 0:+64] -> x[0:+1, 0:+16, 0:+64]
      copy x[0:+1, 0:+16, 0:+64] -> Y[r_o * 2 * 16:+16, 0:+64]
    }
    {
      copy X[(r_o * 2 + 1) * 16:+16, 0:+64] -> x[1:+1, 0:+16, 0:+64]
      copy x[1:+1, 0:+16, 0:+64] -> Y[(r_o * 2 + 1) * 16:+16, 0:+64]
    }
  }
}
)");
}

}  // namespace
}  // namespace tw::ascend
