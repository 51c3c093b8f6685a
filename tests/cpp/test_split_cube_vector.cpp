// split_cube_vector: before/after tests (inputs: examples/gelu_bias.py and
// examples/flash_attention.py after infer_scope; texts in cube_vector_kernels.h).
#include <gtest/gtest.h>

#include "cube_vector_kernels.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "target/ascend/split_cube_vector.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string split(const std::string& text) {
  ir::Kernel k = ir::parse_kernel(text);
  ir::Kernel out = split_cube_vector(k, target::find_target("ascend910b2"));
  ir::verify(out);
  return ir::print(out);
}

// gemm + vector epilogue: L0C -> workspace -> both AIVs (32 rows each), reverse flag pre-set by
// the vector side and drained by the Cube.
TEST(SplitCubeVector, GemmEpilogue) {
  EXPECT_EQ(split(testing::kGemmEpilogueInput), testing::kGemmEpilogueSplit);
}

// Two gemms with softmax between (flash attention): three hand-offs (S, P, P V), the accumulating
// gemm into the vector-rescaled acc_o becomes a fresh L0C tile added on the vector side, the
// scores land in a tile of the loop body (acc_s_ub_in, staged by multi_buffer). (The software
// pipelining of both loops: test_skew_cube_loops.cpp, test_rotate_vector_loops.cpp.)
TEST(SplitCubeVector, AttentionTwoGemms) {
  EXPECT_EQ(split(testing::kAttentionInput), testing::kAttentionSplit);
}

TEST(SplitCubeVector, SingleUnitKernelUnchanged) {
  ir::Kernel k = ir::parse_kernel(testing::kOneUnitKernel);
  EXPECT_EQ(split_cube_vector(k, target::find_target("ascend910b2")), k);
}

}  // namespace
}  // namespace tw::ascend
