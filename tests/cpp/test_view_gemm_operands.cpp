// view_gemm_operands: which gemm operand tiles are read in place in their source tensor
// (before/after Tile IR text).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/cpu/view_gemm_operands.h"

namespace tw::cpu {
namespace {

std::string run(const std::string& text) { return ir::print(view_gemm_operands(ir::parse_kernel(text, "k.tw"))); }

// A one-tile-per-block matmul; `a_mark`, `b_mark` go before the operands' allocations, `gemm_a`
// is the gemm's A operand, `extra` comes last.
std::string matmul(const std::string& a_mark, const std::string& b_mark, const std::string& gemm_a = "a",
                   const std::string& extra = "", const std::string& c_param = "C: global float32[64, 48] out") {
  return R"(kernel mm(A: global float32[64, 32], B: global float32[32, 48], )" + c_param + R"()
    grid(bx = 2, by = 2) {
  )" + a_mark + R"(alloc a: shared float32[32, 32]
  )" + b_mark + R"(alloc b: shared float32[32, 24]
  alloc c: fragment float32[32, 24]
  copy A[bx * 32:+32, 0:+32] -> a
  copy B[0:+32, by * 24:+24] -> b
  gemm )" + gemm_a + R"(, b -> c trans_a=false trans_b=false clear=true
  copy c -> C[bx * 32:+32, by * 24:+24]
)" + extra + "}\n";
}

TEST(ViewGemmOperands, OperandsReadWholeAreLiveViews) {
  EXPECT_EQ(run(matmul("", "")), matmul("@gemm_view(1) ", "@gemm_view(1) "));
}

// A gemm reading part of a: a view without live extents (its padding is read).
TEST(ViewGemmOperands, PartlyReadOperandIsAViewWithoutLiveExtents) {
  const std::string part = "a[0:+32, 0:+16]";
  const std::string part_b = "b[0:+16, 0:+24]";
  std::string before = matmul("", "", part);
  before.replace(before.find("gemm a[0:+32, 0:+16], b"), std::string("gemm a[0:+32, 0:+16], b").size(),
                 "gemm " + part + ", " + part_b);
  std::string after = matmul("@gemm_view(0) ", "@gemm_view(0) ", part);
  after.replace(after.find("gemm a[0:+32, 0:+16], b"), std::string("gemm a[0:+32, 0:+16], b").size(),
                "gemm " + part + ", " + part_b);
  EXPECT_EQ(run(before), after);
}

TEST(ViewGemmOperands, LeavesOtherTilesAlone) {
  // a is read by something else than the gemm (a copy out): only b is a view
  EXPECT_EQ(run(matmul("", "", "a", "  copy a -> D[bx * 32:+32, 0:+32]\n",
                       "C: global float32[64, 48] out, D: global float32[64, 32] out")),
            matmul("", "@gemm_view(1) ", "a", "  copy a -> D[bx * 32:+32, 0:+32]\n",
                   "C: global float32[64, 48] out, D: global float32[64, 32] out"));
  // the kernel writes A (its data could change before the gemm): only b is a view
  EXPECT_EQ(run(matmul("", "", "a", "  copy c -> A[bx * 32:+32, 0:+24]\n")),
            matmul("", "@gemm_view(1) ", "a", "  copy c -> A[bx * 32:+32, 0:+24]\n"));
}

// The accumulator of a K loop, cleared, only gemm'd into and copied whole into a window of C:
// computed in place (@gemm_out(gemms)). `ab` goes before a's and b's allocations, `mark` before c's, `after` after the
// loop, before the copy-out; `out` is the copy-out's destination.
std::string k_loop(const std::string& ab, const std::string& mark, const std::string& after = "", const std::string& out = "C[bx * 32:+32, by * 24:+24]",
                   const std::string& c_dtype = "float32", const std::string& grid = "grid(bx = 2, by = 2)") {
  return R"(kernel mm(A: global float32[64, 32], B: global float32[32, 48], C: global )" + c_dtype + R"([64, 48] out)
    )" + grid + R"( {
  )" + ab + R"(alloc a: shared float32[32, 8]
  )" + ab + R"(alloc b: shared float32[8, 24]
  )" + mark + R"(alloc c: fragment float32[32, 24]
  fill c = 0.0
  for k in serial(0, 4) {
    copy A[bx * 32:+32, k * 8:+8] -> a
    copy B[k * 8:+8, by * 24:+24] -> b
    gemm a, b -> c trans_a=false trans_b=false clear=false
  }
)" + after + "  copy c -> " + out + "\n}\n";
}

TEST(ViewGemmOperands, ClearedAccumulatorCopiedOutIsComputedInPlace) {
  const std::string v = "@gemm_view(1) ";
  EXPECT_EQ(run(k_loop("", "")), k_loop(v, "@gemm_out(1) "));
}

TEST(ViewGemmOperands, AccumulatorLeftAloneWhereItMustBeATile) {
  // read by a map before its copy-out
  const std::string map = "  for i in parallel(0, 32) {\n    for j in parallel(0, 24) {\n      c[i, j] = c[i, j] * 2.0\n    }\n  }\n";
  const std::string v = "@gemm_view(1) ", w = "C[bx * 32:+32, by * 24:+24]";
  EXPECT_EQ(run(k_loop("", "", map)), k_loop(v, "", map));
  // a float16 destination (the copy converts)
  EXPECT_EQ(run(k_loop("", "", "", w, "float16")), k_loop(v, "", "", w, "float16"));
  // a window the blocks of bz share (it does not depend on bz)
  const std::string g3 = "grid(bx = 2, by = 2, bz = 2)";
  EXPECT_EQ(run(k_loop("", "", "", w, "float32", g3)), k_loop(v, "", "", w, "float32", g3));
  // windows of neighbouring blocks overlap (placed 16 rows apart, 32 rows tall)
  EXPECT_EQ(run(k_loop("", "", "", "C[bx * 16:+32, by * 24:+24]")), k_loop(v, "", "", "C[bx * 16:+32, by * 24:+24]"));
  // the destination is read too
  const std::string read_c = "  alloc d: fragment float32[32, 24]\n  copy C[bx * 32:+32, by * 24:+24] -> d\n";
  EXPECT_EQ(run(k_loop("", "", read_c)), k_loop(v, "", read_c));
}

}  // namespace
}  // namespace tw::cpu
