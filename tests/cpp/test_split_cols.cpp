// split_cols: before/after Tile IR texts (the rules: split_cols.h).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/split_cols.h"

namespace tw::ascend {
namespace {

// softmax over 1000 columns with a weight row: max, then sum, then the stores.
const std::string kSoftmax = R"(kernel k(X: global float32[M, 1000], W: global float32[1000], Y: global float32[M, 1000] out)
    grid(bx = M) {
  alloc x: fragment float32[1, 1000]
  alloc w: fragment float32[1000]
  alloc m: fragment float32[1]
  alloc s: fragment float32[1]
  copy X[bx:+1, 0:+1000] -> x
  copy W -> w
  reduce max x -> m axis=1 clear=true
  for i in parallel(0, 1) {
    for j in parallel(0, 1000) {
      x[i, j] = exp(x[i, j] - m[i])
    }
  }
  reduce sum x -> s axis=1 clear=true
  for i in parallel(0, 1) {
    for j in parallel(0, 1000) {
      x[i, j] = where(j < 500, x[i, j] / s[i] * w[j], 0.0)
    }
  }
  copy x -> Y[bx:+1, 0:+1000]
}
)";

TEST(SplitCols, SoftmaxRunsInThreePhasesOfColumnBlocks) {
  ColSplit info;
  auto k = ir::parse_kernel(kSoftmax, "cols.tw");
  EXPECT_EQ(ir::print(split_cols(k, 0, &info)), ir::print(k));  // 0: the analysis only
  EXPECT_EQ(info.cols, 1000);
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.col_tiles, "x, w");
  const std::string got = ir::print(split_cols(k, 3, &info));
  EXPECT_EQ(info.block_cols, 384);  // ceil(1000 / 3) rounded up to 64
  EXPECT_EQ(info.blocks, 3);
  EXPECT_EQ(info.phases, 3);
  EXPECT_NE(got.find("alloc x: fragment float32[1, 384]"), std::string::npos) << got;
  EXPECT_NE(got.find("alloc w: fragment float32[384]"), std::string::npos) << got;
  EXPECT_NE(got.find("fill m = -inf"), std::string::npos) << got;
  EXPECT_NE(got.find("fill s = 0.0"), std::string::npos) << got;
  EXPECT_NE(got.find("copy X[bx:+1, col_blk * 384:+384] -> x"), std::string::npos) << got;
  EXPECT_NE(got.find("reduce max x -> m axis=1 clear=false"), std::string::npos) << got;
  EXPECT_NE(got.find("reduce sum x -> s axis=1 clear=false"), std::string::npos) << got;
  // the tail block (1000 = 2 x 384 + 232): the columns past N get the reduction's identity
  EXPECT_NE(got.find("< 1000, x[c0, c1], -inf)"), std::string::npos) << got;
  EXPECT_NE(got.find("where(j_2 + col_blk_2 * 384 < 500"), std::string::npos) << got;  // the column in the row
  EXPECT_NE(got.find("copy x -> Y[bx:+1, col_blk_2 * 384:+384]"), std::string::npos) << got;
  // w is loaded only in the phase that needs it (the stores)
  size_t first_w = got.find("copy W[");
  EXPECT_GT(first_w, got.find("reduce sum x")) << got;
}

// A row result changed after a map read it: recomputing the map block by block would read the new
// value; the body is not split and the reason names the map's line.
TEST(SplitCols, RowResultChangedBeforeTheRecomputeIsNotSplit) {
  ColSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 1000], S: global float32[M] out)
    grid(bx = M) {
  alloc x: fragment float32[1, 1000]
  alloc m: fragment float32[1]
  alloc s: fragment float32[1]
  copy X[bx:+1, 0:+1000] -> x
  reduce max x -> m axis=1 clear=true
  for i in parallel(0, 1) {
    for j in parallel(0, 1000) {
      x[i, j] = x[i, j] - m[i]
    }
  }
  for i in parallel(0, 1) {
    m[i] = m[i] * 2.0
  }
  reduce sum x -> s axis=1 clear=true
  copy s -> S[bx:+1]
}
)", "cols.tw");
  EXPECT_EQ(ir::print(split_cols(k, 3, &info)), ir::print(k));
  EXPECT_NE(info.why_not.find("would read 'm' after line"), std::string::npos) << info.why_not;
  EXPECT_EQ(info.at.line, 8);
}

}  // namespace
}  // namespace tw::ascend
