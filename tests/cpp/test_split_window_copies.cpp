// split_window_copies: N-D windows into tiles with fewer dims (before/after Tile IR text), and
// ir::flattened_dims, the pairing rule the verifier and the pass share.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/cpu/split_window_copies.h"

namespace tw::cpu {
namespace {

std::string run(const std::string& text) { return ir::print(split_window_copies(ir::parse_kernel(text))); }
std::string same(const std::string& text) { return ir::print(ir::parse_kernel(text)); }

TEST(FlattenedDims, LeadingDimsFlattenIntoRows) {
  EXPECT_EQ(ir::flattened_dims({2, 8, 64}, {16, 64}), std::optional<size_t>(1));
  EXPECT_EQ(ir::flattened_dims({2, 3, 8, 64}, {48, 64}), std::optional<size_t>(2));
  EXPECT_EQ(ir::flattened_dims({2, 3, 8}, {48}), std::optional<size_t>(2));
  EXPECT_EQ(ir::flattened_dims({2, 8, 64}, {8, 64}), std::nullopt);   // 16 rows into 8
  EXPECT_EQ(ir::flattened_dims({2, 8, 64}, {16, 32}), std::nullopt);  // columns differ
  EXPECT_EQ(ir::flattened_dims({16, 64}, {16, 64}), std::nullopt);    // not wider
  EXPECT_EQ(ir::flattened_dims({-1, 8, 64}, {16, 64}), std::nullopt);  // unknown extent
  EXPECT_EQ(ir::flattened_dims({2, 8, 64}, {}), std::nullopt);
}

TEST(SplitWindowCopies, OneCopyPerOuterIndexBothWays) {
  const std::string before = R"(kernel k(X: global float32[5, 19, 32], Y: global float32[5, 19, 32] out)
    grid(bx = 3, by = 3) {
  alloc t: fragment float32[16, 32]
  copy X[by * 2:+2, bx * 8:+8, 0:+32] -> t
  copy t -> Y[by * 2:+2, bx * 8:+8, 0:+32]
}
)";
  const std::string after = R"(kernel k(X: global float32[5, 19, 32], Y: global float32[5, 19, 32] out)
    grid(bx = 3, by = 3) {
  alloc t: fragment float32[16, 32]
  for w0 in serial(0, 2) {
    copy X[by * 2 + w0:+1, bx * 8:+8, 0:+32] -> t[w0 * 8:+8, 0:+32]
  }
  for w0 in serial(0, 2) {
    copy t[w0 * 8:+8, 0:+32] -> Y[by * 2 + w0:+1, bx * 8:+8, 0:+32]
  }
}
)";
  EXPECT_EQ(run(before), same(after));
}

TEST(SplitWindowCopies, TwoOuterDimsRowMajor) {
  const std::string before = R"(kernel k(X: global float16[2, 1, 3, 4, 16], Y: global float16[24, 16] out)
    grid(bx = 1) {
  alloc t: shared float16[24, 16]
  copy X[0:+2, 0:+1, 0:+3, 0:+4, 0:+16] -> t
  copy t -> Y
}
)";
  const std::string after = R"(kernel k(X: global float16[2, 1, 3, 4, 16], Y: global float16[24, 16] out)
    grid(bx = 1) {
  alloc t: shared float16[24, 16]
  for w0 in serial(0, 2) {
    for w1 in serial(0, 3) {
      copy X[w0:+1, 0:+1, w1:+1, 0:+4, 0:+16] -> t[(w0 * 3 + w1) * 4:+4, 0:+16]
    }
  }
  copy t -> Y
}
)";
  EXPECT_EQ(run(before), same(after));
}

TEST(SplitWindowCopies, PairedCopiesAreLeftAlone) {
  const std::string text = R"(kernel k(X: global float32[4, 19, 3, 32], Y: global float32[4, 19, 3, 32] out)
    grid(bx = 3) {
  alloc t: fragment float32[8, 32]
  copy X[1:+1, bx * 8:+8, 2:+1, 0:+32] -> t
  copy t -> Y[1:+1, bx * 8:+8, 2:+1, 0:+32]
}
)";
  EXPECT_EQ(run(text), same(text));
}

}  // namespace
}  // namespace tw::cpu
