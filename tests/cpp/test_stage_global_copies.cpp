// stage_global_copies: before/after Tile IR texts.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/stage_global_copies.h"
#include "target/registry.h"

namespace tw::ascend {

namespace {

std::string after(const std::string& text) {
  return ir::print(stage_global_copies(ir::parse_kernel(text, "copy.tw"), target::find_target("ascend910b2")));
}

// 8 x 3000 float32 -> float16: 16 KiB tiles of the source dtype hold one 3000-element row (a serial
// loop over the rows); 3 x 4 int8 -> int32 in one tile; an 8 x 0 copy is nothing.
TEST(StageGlobalCopies, GlobalToGlobalCopiesGoThroughFragmentTilesInChunks) {
  EXPECT_EQ(after(R"(kernel k(X: global float32[8, 3000], Y: global float16[8, 3000], A: global int8[3, 4], B: global int32[3, 4])
    grid(bx = 1) {
  copy X[0:+8, 0:+3000] -> Y[0:+8, 0:+3000]
  copy A -> B
  copy X[0:+8, 0:+0] -> Y[0:+8, 0:+0]
}
)"), R"(kernel k(X: global float32[8, 3000], Y: global float16[8, 3000], A: global int8[3, 4], B: global int32[3, 4])
    grid(bx = 1) {
  for k_0 in serial(0, 8) {
    alloc Y_stage_0: fragment float32[1, 3000]
    copy X[k_0:+1, 0:+3000] -> Y_stage_0
    copy Y_stage_0 -> Y[k_0:+1, 0:+3000]
  }
  alloc B_stage_0: fragment int8[3, 4]
  copy A -> B_stage_0
  copy B_stage_0 -> B
}
)");
}

// 1-D 10000 float32: chunks of 4096 (a loop of 2) and a tail of 1808.
TEST(StageGlobalCopies, TailsAfterTheWholeChunks) {
  EXPECT_EQ(after(R"(kernel k(X: global float32[10000], Y: global float32[10000])
    grid(bx = 1) {
  copy X -> Y
}
)"), R"(kernel k(X: global float32[10000], Y: global float32[10000])
    grid(bx = 1) {
  for k_0 in serial(0, 2) {
    alloc Y_stage_0: fragment float32[4096]
    copy X[k_0 * 4096:+4096] -> Y_stage_0
    copy Y_stage_0 -> Y[k_0 * 4096:+4096]
  }
  alloc Y_stage_1: fragment float32[1808]
  copy X[8192:+1808] -> Y_stage_1
  copy Y_stage_1 -> Y[8192:+1808]
}
)");
}

}  // namespace
}  // namespace tw::ascend
