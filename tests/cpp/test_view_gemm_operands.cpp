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

}  // namespace
}  // namespace tw::cpu
