// expand_gemm: T.gemm on L1 tiles -> L0 loads + Mmads, clear folded into init (golden before/after).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/expand_gemm.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string run(const char* text) {
  return ir::print(expand_gemm(ir::parse_kernel(text, "k.tw"), target::find_target("ascend910b2")));
}

TEST(ExpandGemm, ClearFoldsIntoTheFirstMmad) {
  EXPECT_EQ(run(R"(kernel mm(A: global float16[256, 128], B: global float16[128, 256], C: global float16[256, 256] out)
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
)"),
            R"(kernel mm(A: global float16[256, 128], B: global float16[128, 256], C: global float16[256, 256] out)
    grid(bx = 2, by = 2) {
  alloc a: L1 float16[128, 64]
  alloc b: L1 float16[64, 128]
  alloc acc: L0C float32[128, 128]
  for k in serial(0, 2) {
    copy A[by * 128:+128, k * 64:+64] -> a
    copy B[k * 64:+64, bx * 128:+128] -> b
    {
      alloc a_l0: L0A float16[128, 64]
      alloc b_l0: L0B float16[64, 128]
      copy a -> a_l0
      copy b -> b_l0
      if k == 0 {
        gemm a_l0, b_l0 -> acc trans_a=false trans_b=false clear=true
      } else {
        gemm a_l0, b_l0 -> acc trans_a=false trans_b=false clear=false
      }
    }
  }
  copy acc -> C[by * 128:+128, bx * 128:+128]
}
)");
}

TEST(ExpandGemm, LongKIsSteppedThroughPingPongL0) {
  EXPECT_EQ(run(R"(kernel mm(A: global float16[128, 512], B: global float16[256, 512], C: global float32[128, 256] out)
    grid(bx = 1) {
  alloc a: L1 float16[128, 256]
  alloc b: L1 float16[256, 256]
  alloc acc: L0C float32[128, 256]
  copy A[0:+128, 0:+256] -> a
  copy B[0:+256, 0:+256] -> b
  gemm a, b -> acc trans_a=false trans_b=true clear=true
  copy acc -> C
}
)"),
            R"(kernel mm(A: global float16[128, 512], B: global float16[256, 512], C: global float32[128, 256] out)
    grid(bx = 1) {
  alloc a: L1 float16[128, 256]
  alloc b: L1 float16[256, 256]
  alloc acc: L0C float32[128, 256]
  copy A[0:+128, 0:+256] -> a
  copy B[0:+256, 0:+256] -> b
  {
    alloc a_l0: L0A float16[2, 128, 64]
    alloc b_l0: L0B float16[2, 256, 64]
    copy a[0:+128, 0:+64] -> a_l0[0:+1, 0:+128, 0:+64]
    copy b[0:+256, 0:+64] -> b_l0[0:+1, 0:+256, 0:+64]
    gemm a_l0[0:+1, 0:+128, 0:+64], b_l0[0:+1, 0:+256, 0:+64] -> acc trans_a=false trans_b=true clear=true
    copy a[0:+128, 64:+64] -> a_l0[1:+1, 0:+128, 0:+64]
    copy b[0:+256, 64:+64] -> b_l0[1:+1, 0:+256, 0:+64]
    gemm a_l0[1:+1, 0:+128, 0:+64], b_l0[1:+1, 0:+256, 0:+64] -> acc trans_a=false trans_b=true clear=false
    copy a[0:+128, 128:+64] -> a_l0[0:+1, 0:+128, 0:+64]
    copy b[0:+256, 128:+64] -> b_l0[0:+1, 0:+256, 0:+64]
    gemm a_l0[0:+1, 0:+128, 0:+64], b_l0[0:+1, 0:+256, 0:+64] -> acc trans_a=false trans_b=true clear=false
    copy a[0:+128, 192:+64] -> a_l0[1:+1, 0:+128, 0:+64]
    copy b[0:+256, 192:+64] -> b_l0[1:+1, 0:+256, 0:+64]
    gemm a_l0[1:+1, 0:+128, 0:+64], b_l0[1:+1, 0:+256, 0:+64] -> acc trans_a=false trans_b=true clear=false
  }
  copy acc -> C
}
)");
}

TEST(ExpandGemm, NonZeroFillIsAnError) {
  try {
    run(R"(kernel mm(A: global float16[16, 16], C: global float32[16, 16] out)
    grid(bx = 1) {
  alloc a: L1 float16[16, 16]
  alloc acc: L0C float32[16, 16]
  fill acc = 1.0
  copy A -> a
  gemm a, a -> acc trans_a=false trans_b=false clear=false
  copy acc -> C
}
)");
    ADD_FAILURE() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("fill of the gemm accumulator 'acc' with 1.0: on Ascend an ac"), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, 5);
    EXPECT_NE(e.hint().find("clear it (T.clear) and add the value in "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tw::ascend
