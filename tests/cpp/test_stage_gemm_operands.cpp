// stage_gemm_operands: T.gemm on global tensors -> copies into tiles (golden before/after).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/stage_gemm_operands.h"
#include "target/registry.h"
#include "tilewright/ir.h"

namespace tw::ascend {
namespace {

std::string run(const char* text) {
  return ir::print(stage_gemm_operands(ir::parse_kernel(text, "k.tw"), target::find_target("ascend910b2")));
}

TEST(StageGemmOperands, GlobalOperandsGoThroughSharedTiles) {
  // A^T and B^T from slices of the tensors (one with a leading unit dim): each copied into a
  // shared tile of the slice's matrix shape, the gemm unchanged otherwise
  EXPECT_EQ(run(R"(kernel mm(A: global float16[40, 64], B: global float16[3, 48, 40], C: global float32[64, 48])
    grid(bx = 2, h = 3) {
  alloc acc: fragment float32[32, 48]
  gemm A[0:+40, bx * 32:+32], B[h:+1, 0:+48, 0:+40] -> acc trans_a=true trans_b=true clear=false
  copy acc -> C[bx * 32:+32, 0:+48]
}
)"),
            R"(kernel mm(A: global float16[40, 64], B: global float16[3, 48, 40], C: global float32[64, 48])
    grid(bx = 2, h = 3) {
  alloc acc: fragment float32[32, 48]
  alloc A_l1: shared float16[40, 32]
  alloc B_l1: shared float16[48, 40]
  copy A[0:+40, bx * 32:+32] -> A_l1
  copy B[h:+1, 0:+48, 0:+40] -> B_l1
  gemm A_l1, B_l1 -> acc trans_a=true trans_b=true clear=false
  copy acc -> C[bx * 32:+32, 0:+48]
}
)");
}

TEST(StageGemmOperands, BshdRegionsAreChunkedInTheirMatrixDims) {
  // BSHD operands (rows in dim 1, a unit head dim between them and the columns, ir.h
  // gemm_matrix_dims): K = 1000 is cut in A's dim 3 and in B's dim 1, the others kept
  EXPECT_EQ(run(R"(kernel mm(Q: global float16[2, 64, 3, 1000], V: global float16[2, 1000, 3, 64], C: global float32[64, 64])
    grid(h = 3) {
  alloc acc: fragment float32[64, 64]
  gemm Q[1:+1, 0:+64, h:+1, 0:+1000], V[1:+1, 0:+1000, h:+1, 0:+64] -> acc trans_a=false trans_b=false clear=true
  copy acc -> C
}
)"),
            R"(kernel mm(Q: global float16[2, 64, 3, 1000], V: global float16[2, 1000, 3, 64], C: global float32[64, 64])
    grid(h = 3) {
  alloc acc: fragment float32[64, 64]
  alloc Q_l1: shared float16[64, 256]
  alloc V_l1: shared float16[256, 64]
  fill acc = 0.0
  for k in pipelined(0, 4, stages=2) {
    copy Q[1:+1, 0:+64, h:+1, k * 256:+min(256, 1000 - k * 256)] -> Q_l1
    copy V[1:+1, k * 256:+min(256, 1000 - k * 256), h:+1, 0:+64] -> V_l1
    gemm Q_l1, V_l1 -> acc trans_a=false trans_b=false clear=false
  }
  copy acc -> C
}
)");
}

TEST(StageGemmOperands, LongKIsWalkedInPipelinedChunksWithARuntimeTail) {
  // (64 + 64) rows x 2 B = 256 B a K column: chunks of 256 (64 KiB), the last one 1000 - 768 = 232
  EXPECT_EQ(run(R"(kernel mm(A: global float16[64, 1000], B: global float16[1000, 64], C: global float32[64, 64])
    grid(bx = 1) {
  alloc acc: fragment float32[64, 64]
  gemm A, B -> acc trans_a=false trans_b=false clear=true
  copy acc -> C
}
)"),
            R"(kernel mm(A: global float16[64, 1000], B: global float16[1000, 64], C: global float32[64, 64])
    grid(bx = 1) {
  alloc acc: fragment float32[64, 64]
  alloc A_l1: shared float16[64, 256]
  alloc B_l1: shared float16[256, 64]
  fill acc = 0.0
  for k in pipelined(0, 4, stages=2) {
    copy A[0:+64, k * 256:+min(256, 1000 - k * 256)] -> A_l1
    copy B[k * 256:+min(256, 1000 - k * 256), 0:+64] -> B_l1
    gemm A_l1, B_l1 -> acc trans_a=false trans_b=false clear=false
  }
  copy acc -> C
}
)");
}

TEST(StageGemmOperands, GemmsOnTilesAreUnchanged) {
  const char* text = R"(kernel mm(A: global float16[16, 16], C: global float32[16, 16])
    grid(bx = 1) {
  alloc a: shared float16[16, 16]
  alloc acc: fragment float32[16, 16]
  copy A -> a
  gemm a, a -> acc trans_a=false trans_b=false clear=true
  copy acc -> C
}
)";
  EXPECT_EQ(run(text), ir::print(ir::parse_kernel(text, "k.tw")));
}

TEST(StageGemmOperands, OperandsPastL1AreAnErrorNamingTheFix) {
  // (2048 + 2048) float32 rows: 16 KiB a K column, two stages of a 16-column step fill L1
  try {
    run(R"(kernel mm(A: global float32[2048, 64], B: global float32[64, 2048], C: global float32[2048, 2048])
    grid(bx = 1) {
  alloc acc: fragment float32[2048, 2048]
  gemm A, B -> acc trans_a=false trans_b=false clear=true
  copy acc -> C
}
)");
    FAIL() << "no error";
  } catch (const ir::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("do not fit L1 (511 KiB) even in K steps of 16"), std::string::npos) << m;
    EXPECT_NE(m.find("gemm blocks of at most 256 rows and 256 columns"), std::string::npos) << m;
  }
}

TEST(StageGemmOperands, ATileOperandNeedsChunksDividingItsK) {
  // B global (256 float32 rows: 1 KiB a K column, chunks of at most 64), A a tile of K = 1000:
  // no multiple of 16 up to 64 divides 1000
  try {
    run(R"(kernel mm(A: global float32[16, 1000], B: global float32[1000, 256], C: global float32[16, 256])
    grid(bx = 1) {
  alloc a: shared float32[16, 1000]
  alloc acc: fragment float32[16, 256]
  copy A -> a
  gemm a, B -> acc trans_a=false trans_b=false clear=true
  copy acc -> C
}
)");
    FAIL() << "no error";
  } catch (const ir::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("no multiple of 16 up to it divides the tile's K of 1000"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace tw::ascend
