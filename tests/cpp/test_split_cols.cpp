// split_cols: before/after Tile IR texts (the rules: split_cols.h).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/split_cols.h"

namespace tw::ascend {
namespace {

// softmax over 1000 columns with a weight row: the max and the sum (online), then the stores.
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

TEST(SplitCols, SoftmaxRunsInTwoPhasesOfColumnBlocks) {
  ColSplit info;
  auto k = ir::parse_kernel(kSoftmax, "cols.tw");
  EXPECT_EQ(ir::print(split_cols(k, 0, &info)), ir::print(k));  // 0: the analysis only
  EXPECT_EQ(info.cols, 1000);
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.col_tiles, "x, w");
  const std::string got = ir::print(split_cols(k, 3, &info));
  EXPECT_EQ(info.block_cols, 384);  // ceil(1000 / 3) rounded up to 64
  EXPECT_EQ(info.blocks, 3);
  EXPECT_EQ(info.phases, 2);  // 3 before session 26: the max, the sum, the stores
  EXPECT_NE(got.find("alloc x: fragment float32[1, 384]"), std::string::npos) << got;
  EXPECT_NE(got.find("alloc w: fragment float32[384]"), std::string::npos) << got;
  EXPECT_NE(got.find("fill m = -inf"), std::string::npos) << got;
  EXPECT_NE(got.find("fill s = 0.0"), std::string::npos) << got;
  EXPECT_NE(got.find("copy X[bx:+1, col_blk * 384:+384] -> x"), std::string::npos) << got;
  EXPECT_NE(got.find("reduce max x -> m axis=1 clear=false"), std::string::npos) << got;
  EXPECT_NE(got.find("reduce sum x -> s axis=1 clear=false"), std::string::npos) << got;
  // online: the max before the block kept, merged, the sum rescaled to the new max, then exp
  const size_t prev = got.find("m_prev[r0] = m[r0]"), merge = got.find("reduce max x -> m axis=1 clear=false");
  const size_t rescale = got.find("s[r0_1] = where(m_prev[r0_1] == -inf, 0.0, s[r0_1] * exp(m_prev[r0_1] - m[r0_1]))");
  const size_t ex = got.find("x[i, j] = exp(x[i, j] - m[i])"), sum = got.find("reduce sum x -> s");
  EXPECT_NE(got.find("alloc m_prev: fragment float32[1]"), std::string::npos) << got;
  ASSERT_NE(rescale, std::string::npos) << got;
  EXPECT_LT(prev, merge) << got;
  EXPECT_LT(merge, rescale) << got;
  EXPECT_LT(rescale, ex) << got;
  EXPECT_LT(ex, sum) << got;
  EXPECT_EQ(got.find("copy X[", got.find("copy X[") + 1), got.find("copy X[", sum)) << got;  // one copy in the first phase
  // the tail block (1000 = 2 x 384 + 232): the columns past N get the reduction's identity
  EXPECT_NE(got.find("< 1000, x[c0, c1], -inf)"), std::string::npos) << got;
  EXPECT_NE(got.find("where(j_2 + col_blk_1 * 384 < 500"), std::string::npos) << got;  // the column in the row
  EXPECT_NE(got.find("copy x -> Y[bx:+1, col_blk_1 * 384:+384]"), std::string::npos) << got;
  // w is loaded only in the phase that needs it (the stores)
  size_t first_w = got.find("copy W[");
  EXPECT_GT(first_w, got.find("reduce sum x")) << got;
}

// The exp tile also stored: the stores need the final max, so the max keeps its own phase.
TEST(SplitCols, ExpTileReadByAStoreIsNotOnline) {
  ColSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 1000], E: global float32[M, 1000] out, S: global float32[M] out)
    grid(bx = M) {
  alloc x: fragment float32[1, 1000]
  alloc m: fragment float32[1]
  alloc s: fragment float32[1]
  copy X[bx:+1, 0:+1000] -> x
  reduce max x -> m axis=1 clear=true
  for i in parallel(0, 1) {
    for j in parallel(0, 1000) {
      x[i, j] = exp(x[i, j] - m[i])
    }
  }
  reduce sum x -> s axis=1 clear=true
  copy x -> E[bx:+1, 0:+1000]
  copy s -> S[bx:+1]
}
)", "cols.tw");
  const std::string got = ir::print(split_cols(k, 3, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.phases, 2);
  EXPECT_EQ(got.find("m_prev"), std::string::npos) << got;
}

// A log-sum-exp with a second reduction in the max's phase (cross-entropy's picked logit): one
// phase; a sum of exp(x - m) scaled by a tile the phase also reduces is not online (2 phases).
TEST(SplitCols, LogSumExpIsOnePhase) {
  const std::string head = R"(kernel k(X: global float32[M, 1000], S: global float32[M] out)
    grid(bx = M) {
  alloc x: fragment float32[1, 1000]
  alloc m: fragment float32[1]
  alloc s: fragment float32[1]
  alloc t: fragment float32[1]
  copy X[bx:+1, 0:+1000] -> x
  reduce max x -> m axis=1 clear=true
  reduce sum x -> t axis=1 clear=true
  for i in parallel(0, 1) {
    for j in parallel(0, 1000) {
)";
  const std::string tail = R"(
    }
  }
  reduce sum x -> s axis=1 clear=true
  for i in parallel(0, 1) {
    s[i] = m[i] + log(s[i]) - t[i]
  }
  copy s -> S[bx:+1]
}
)";
  ColSplit info;
  auto k = ir::parse_kernel(head + "      x[i, j] = exp(x[i, j] - m[i])" + tail, "cols.tw");
  std::string got = ir::print(split_cols(k, 3, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.phases, 1) << got;
  EXPECT_NE(got.find("s[r0_1] = where(m_prev[r0_1] == -inf"), std::string::npos) << got;
  auto k2 = ir::parse_kernel(head + "      x[i, j] = exp(x[i, j] - m[i]) * t[i]" + tail, "cols.tw");
  got = ir::print(split_cols(k2, 3, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.phases, 2) << got;
  EXPECT_EQ(got.find("m_prev"), std::string::npos) << got;
}

// A reduction across the rows of a column tile into a column tile (hunt14 F3: a sum over the
// sequence axis): each column on its own, run in its block; one phase, nothing carried.
TEST(SplitCols, ReductionAcrossTheRowsRunsInItsBlock) {
  ColSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 1000], Y: global float32[M, 1000] out)
    grid(bx = M) {
  alloc x: fragment float32[2, 1000]
  alloc col: fragment float32[1000]
  copy X[bx * 2:+2, 0:+1000] -> x
  reduce sum x -> col axis=0 clear=true
  copy col -> Y[bx:+1, 0:+1000]
}
)", "cols.tw");
  const std::string got = ir::print(split_cols(k, 3, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.phases, 1) << got;
  // no reduction along the columns: blocks are 32-byte multiples (ceil(1000 / 3) = 334 -> 336), not 64
  EXPECT_EQ(info.step, 8);
  EXPECT_NE(got.find("alloc col: fragment float32[336]"), std::string::npos) << got;
  EXPECT_NE(got.find("reduce sum x -> col axis=0 clear=true"), std::string::npos) << got;
  EXPECT_NE(got.find("copy col -> Y[bx:+1, col_blk * 336:+336]"), std::string::npos) << got;
}

// hunt14 F3 (session 29): a narrow tile summed across its rows runs in column blocks of one 32-byte
// block: 8 float32 columns, 16 when a copy reads a 16-bit tensor; a row reduction keeps 64.
TEST(SplitCols, NarrowReductionAcrossTheRowsRunsInBlocksOf32Bytes) {
  auto src = [](const std::string& dt) {
    return R"(kernel k(X: global )" + dt + R"([4097, 32], Y: global float32[32] out)
    grid(bx = 1) {
  alloc x: fragment float32[4097, 32]
  alloc col: fragment float32[32]
  copy X[0:+4097, 0:+32] -> x
  reduce sum x -> col axis=0 clear=true
  copy col -> Y[0:+32]
}
)";
  };
  ColSplit info;
  std::string got = ir::print(split_cols(ir::parse_kernel(src("float32"), "cols.tw"), 4, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.step, 8);
  EXPECT_EQ(info.blocks, 4);
  EXPECT_EQ(info.block_cols, 8);
  EXPECT_NE(got.find("alloc x: fragment float32[4097, 8]"), std::string::npos) << got;
  EXPECT_NE(got.find("copy X[0:+4097, col_blk * 8:+8] -> x"), std::string::npos) << got;
  EXPECT_NE(got.find("reduce sum x -> col axis=0 clear=true"), std::string::npos) << got;
  got = ir::print(split_cols(ir::parse_kernel(src("bfloat16"), "cols.tw"), 4, &info));
  EXPECT_EQ(info.step, 16);
  EXPECT_EQ(info.blocks, 2);
  EXPECT_NE(got.find("alloc x: fragment float32[4097, 16]"), std::string::npos) << got;
  // a reduction along the columns of a column tile: 64-column steps (one block of 64 >= 32: not split)
  auto row = ir::parse_kernel(R"(kernel k(X: global float32[4097, 32], Y: global float32[4097] out)
    grid(bx = 1) {
  alloc x: fragment float32[4097, 32]
  alloc r: fragment float32[4097]
  copy X[0:+4097, 0:+32] -> x
  reduce sum x -> r axis=1 clear=true
  copy r -> Y[0:+4097]
}
)", "cols.tw");
  split_cols(row, 4, &info);
  EXPECT_EQ(info.step, 64);
  EXPECT_EQ(info.block_cols, 0);
}

// review29 F2 (session 30): an 8-bit tensor's tile of 40 columns (step 32: one 32-byte block of
// int8) runs in 2 blocks, 32 columns and a tail of 8 (lower_ascend enters the split from step + 1
// columns, was 2 steps).
TEST(SplitCols, EightBitTensorOfFewerThanTwoStepsRunsInTwoBlocks) {
  auto k = ir::parse_kernel(R"(kernel k(X: global int8[1000, 40], Y: global int32[40] out)
    grid(bx = 1) {
  alloc x: fragment int32[1000, 40]
  alloc col: fragment int32[40]
  copy X[0:+1000, 0:+40] -> x
  reduce max x -> col axis=0 clear=true
  copy col -> Y[0:+40]
}
)", "cols.tw");
  ColSplit info;
  const std::string got = ir::print(split_cols(k, 2, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.step, 32);
  EXPECT_EQ(info.blocks, 2);
  EXPECT_EQ(info.block_cols, 32);
  EXPECT_NE(got.find("alloc x: fragment int32[1000, 32]"), std::string::npos) << got;
  EXPECT_NE(got.find("copy X[0:+1000, col_blk * 32:+32] -> x"), std::string::npos) << got;
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

// Two copies of the column tiles (session 27): each phase's blocks in pairs, the second block of
// a pair on the copies (x_b, w_b), the odd K's last block after the loop on the first copies; the
// running results (m, s, m_prev) stay one tile each. One copy: the loop over all K blocks.
TEST(SplitCols, TwoCopiesRunTheBlocksInPairs) {
  ColSplit info;
  auto k = ir::parse_kernel(kSoftmax, "cols.tw");
  const std::string one = ir::print(split_cols(k, 3, &info, 1));
  EXPECT_EQ(info.copies, 1);
  EXPECT_EQ(one.find("x_b"), std::string::npos) << one;
  EXPECT_NE(one.find("for col_blk in serial(0, 3)"), std::string::npos) << one;
  const std::string got = ir::print(split_cols(k, 3, &info, 2));
  EXPECT_EQ(info.copies, 2);
  EXPECT_EQ(info.blocks, 3);
  EXPECT_EQ(info.phases, 2);
  EXPECT_NE(got.find("alloc x_b: fragment float32[1, 384]"), std::string::npos) << got;
  EXPECT_NE(got.find("alloc w_b: fragment float32[384]"), std::string::npos) << got;
  EXPECT_EQ(got.find("m_b"), std::string::npos) << got;  // the running results: one tile each
  EXPECT_EQ(got.find("s_b"), std::string::npos) << got;
  EXPECT_EQ(got.find("m_prev_b"), std::string::npos) << got;
  // the first phase: the pair loop, block 2 col_blk on x, 2 col_blk + 1 on x_b, block 2 after it
  const size_t loop = got.find("for col_blk in serial(0, 1)");
  const size_t a = got.find("copy X[bx:+1, col_blk * 2 * 384:+384] -> x\n");
  const size_t b = got.find("copy X[bx:+1, (col_blk * 2 + 1) * 384:+384] -> x_b\n");
  const size_t tail = got.find("copy X[bx:+1, 2 * 384:+384] -> x\n");
  ASSERT_NE(loop, std::string::npos) << got;
  EXPECT_LT(loop, a) << got;
  EXPECT_LT(a, b) << got;
  EXPECT_LT(b, tail) << got;
  EXPECT_NE(got.find("reduce max x_b -> m axis=1 clear=false"), std::string::npos) << got;
  EXPECT_NE(got.find("reduce sum x_b -> s axis=1 clear=false"), std::string::npos) << got;
  // the stores: x_b's block to its own columns, the weight's copy in its block
  EXPECT_NE(got.find("copy x_b -> Y[bx:+1, (col_blk_1 * 2 + 1) * 384:+384]"), std::string::npos) << got;
  EXPECT_NE(got.find("copy W[(col_blk_1 * 2 + 1) * 384:+384] -> w_b"), std::string::npos) << got;
  EXPECT_NE(got.find("copy x -> Y[bx:+1, 2 * 384:+384]"), std::string::npos) << got;
  // an even K: pairs only
  const std::string even = ir::print(split_cols(k, 4, &info, 2));
  EXPECT_EQ(info.blocks, 4);
  EXPECT_NE(even.find("for col_blk in serial(0, 2)"), std::string::npos) << even;
  EXPECT_EQ(even.find("3 * 256"), std::string::npos) << even;
}

}  // namespace
}  // namespace tw::ascend
