// split_rows: before/after Tile IR texts (the rules: split_rows.h).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/split_rows.h"
#include "cube_vector_kernels.h"

namespace tw::ascend {
namespace {

const std::string kHead = R"(kernel k(X: global float32[M, 4096], W: global float32[4096], Y: global float32[M, 4096] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 4096]
  alloc w: fragment float32[4096]
  alloc s: fragment float32[8]
  copy X[bx * 8:+8, 0:+4096] -> x
  copy W -> w
  reduce sum x -> s axis=1 clear=true
  for i in parallel(0, 8) {
    for j in parallel(0, 4096) {
      x[i, j] = x[i, j] * s[i] * w[j]
    }
  }
)";

// rms_norm's shape: the rows run 2 at a time as blocks of a 4 times longer grid; w's copy once per
// block; the tensor rows offset by the group.
TEST(SplitRows, RowWiseBodyRunsItsRowsAsBlocks) {
  RowSplit info;
  auto k = ir::parse_kernel(kHead + "  copy x -> Y[bx * 8:+8, 0:+4096]\n}\n", "rows.tw");
  EXPECT_EQ(ir::print(split_rows(k, 0, &info)), ir::print(k));  // step 0: unchanged
  EXPECT_EQ(info.rows, 8);
  EXPECT_EQ(info.steps, 4);  // 4, 3 (the last group clipped), 2, 1
  EXPECT_EQ(info.groups, (std::vector<int64_t>{4, 3, 2, 1}));
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.row_tiles, "x, s");
  const std::string got = ir::print(split_rows(k, 3, &info));
  EXPECT_EQ(info.group_rows, 2);
  EXPECT_TRUE(info.as_blocks);
  EXPECT_NE(got.find("grid(bx = ceildiv(M, 8) * 4)"), std::string::npos) << got;
  EXPECT_NE(got.find("alloc x: fragment float32[2, 4096]"), std::string::npos) << got;
  EXPECT_NE(got.find("alloc s: fragment float32[2]"), std::string::npos) << got;
  EXPECT_NE(got.find("alloc w: fragment float32[4096]"), std::string::npos) << got;
  EXPECT_NE(got.find("copy X[bx * 2:+2, 0:+4096] -> x"), std::string::npos) << got;
  EXPECT_NE(got.find("for i in parallel(0, 2)"), std::string::npos) << got;
  EXPECT_NE(got.find("copy x -> Y[bx * 2:+2, 0:+4096]"), std::string::npos) << got;
}

// hunt14 F4: a group size that does not divide R (8 rows in groups of 3: 3, 3, 2): the tensor
// rows of group bx % 3 start at (bx // 3) * 8 + (bx % 3) * 3 and are min(3, 8 - (bx % 3) * 3) many
// (a run-time extent: the last group's third row is not loaded, reads as 0, and is not stored);
// the maps and row reductions run on the whole 3-row tiles.
TEST(SplitRows, ClippedLastGroupRunsAsBlocks) {
  RowSplit info;
  auto k = ir::parse_kernel(kHead + "  copy x -> Y[bx * 8:+8, 0:+4096]\n}\n", "rows.tw");
  const std::string got = ir::print(split_rows(k, 2, &info));
  EXPECT_EQ(info.group_rows, 3);
  EXPECT_TRUE(info.as_blocks);
  EXPECT_NE(got.find("grid(bx = ceildiv(M, 8) * 3)"), std::string::npos) << got;
  EXPECT_NE(got.find("alloc x: fragment float32[3, 4096]"), std::string::npos) << got;
  EXPECT_NE(got.find("for i in parallel(0, 3, user=min(8 - bx % 3 * 3, 3))"), std::string::npos) << got;
  EXPECT_NE(got.find("copy X[bx // 3 * 8 + bx % 3 * 3:+min(3, 8 - bx % 3 * 3), 0:+4096] -> x"), std::string::npos) << got;
  EXPECT_NE(got.find("copy x -> Y[bx // 3 * 8 + bx % 3 * 3:+min(3, 8 - bx % 3 * 3), 0:+4096]"), std::string::npos) << got;
}

// The clipped group in a loop (a tensor store before the groups): 7 rows in groups of 4, 3.
TEST(SplitRows, ClippedLastGroupInALoop) {
  RowSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 4096], W: global float32[4096], Z: global float32[4096], Y: global float32[M, 4096] out)
    grid(bx = ceildiv(M, 7)) {
  alloc x: fragment float32[7, 4096]
  alloc w: fragment float32[4096]
  copy X[bx * 7:+7, 0:+4096] -> x
  copy W -> w
  atomic_add w -> Z
  for i in parallel(0, 7) {
    for j in parallel(0, 4096) {
      x[i, j] = x[i, j] * w[j]
    }
  }
  copy x -> Y[bx * 7:+7, 0:+4096]
}
)", "rows.tw");
  const std::string got = ir::print(split_rows(k, 1, &info));
  EXPECT_EQ(info.groups, (std::vector<int64_t>{4, 3, 2, 1}));
  EXPECT_EQ(info.group_rows, 4);
  EXPECT_FALSE(info.as_blocks);
  EXPECT_NE(got.find("for rg in serial(0, 2)"), std::string::npos) << got;
  EXPECT_NE(got.find("copy X[bx * 7 + rg * 4:+min(4, 7 - rg * 4), 0:+4096] -> x"), std::string::npos) << got;
  EXPECT_NE(got.find("copy x -> Y[bx * 7 + rg * 4:+min(4, 7 - rg * 4), 0:+4096]"), std::string::npos) << got;
}

// A max merged across the groups takes divisors of R only (a clipped group's zero rows would
// enter it): 7 rows in groups of 1.
TEST(SplitRows, MergedMaxTakesDivisorsOnly) {
  RowSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 4096], G: global float32[M] out)
    grid(bx = ceildiv(M, 7)) {
  alloc x: fragment float32[7, 4096]
  alloc m: fragment float32[7]
  alloc g: fragment float32[1]
  copy X[bx * 7:+7, 0:+4096] -> x
  reduce max x -> m axis=1 clear=true
  reduce max m -> g axis=0 clear=true
  copy g -> G[bx:+1]
}
)", "rows.tw");
  split_rows(k, 0, &info);
  EXPECT_EQ(info.groups, std::vector<int64_t>{1});
}

// A statement before the groups that stores into a tensor would run once per group as blocks
// (an atomic add too often): the groups run in a loop in each block instead.
TEST(SplitRows, TensorStoreBeforeTheGroupsKeepsThemInALoop) {
  RowSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 4096], W: global float32[4096], Z: global float32[4096], Y: global float32[M, 4096] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 4096]
  alloc w: fragment float32[4096]
  copy X[bx * 8:+8, 0:+4096] -> x
  copy W -> w
  atomic_add w -> Z
  for i in parallel(0, 8) {
    for j in parallel(0, 4096) {
      x[i, j] = x[i, j] * w[j]
    }
  }
  copy x -> Y[bx * 8:+8, 0:+4096]
}
)", "rows.tw");
  const std::string got = ir::print(split_rows(k, 1, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_FALSE(info.as_blocks);
  EXPECT_NE(got.find("for rg in serial(0, 2)"), std::string::npos) << got;
  EXPECT_NE(got.find("grid(bx = ceildiv(M, 8))"), std::string::npos) << got;
}

// A max across the rows into another tile: a loop over the groups in each block, the result
// filled with -inf before it and merged in it; its reader after the loop.
TEST(SplitRows, MaxAcrossRowsIsMergedInALoop) {
  RowSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 4096], G: global float32[M] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 4096]
  alloc m: fragment float32[8]
  alloc g: fragment float32[1]
  copy X[bx * 8:+8, 0:+4096] -> x
  reduce max x -> m axis=1 clear=true
  reduce max m -> g axis=0 clear=true
  copy g -> G[bx:+1]
}
)", "rows.tw");
  const std::string got = ir::print(split_rows(k, 1, &info));
  EXPECT_EQ(info.group_rows, 4);
  EXPECT_FALSE(info.as_blocks);
  EXPECT_NE(got.find("fill g = -inf"), std::string::npos) << got;
  EXPECT_NE(got.find("for rg in serial(0, 2)"), std::string::npos) << got;
  EXPECT_NE(got.find("reduce max m -> g axis=0 clear=false"), std::string::npos) << got;
  EXPECT_LT(got.find("for rg in serial(0, 2)"), got.find("copy g -> G[bx:+1]")) << got;
}

// A sum down the columns into a tile the rows' statements read before: not carried (the groups
// would read the running sum), unchanged, and why_not names it at its line.
TEST(SplitRows, ColumnSumIntoATileReadBeforeIsNotSplit) {
  RowSplit info;
  auto k = ir::parse_kernel(kHead + R"(  reduce sum x -> w axis=0 clear=true
  copy x -> Y[bx * 8:+8, 0:+4096]
}
)", "rows.tw");
  EXPECT_EQ(ir::print(split_rows(k, 1, &info)), ir::print(k));
  EXPECT_EQ(info.why_not, "a reduction across the rows into 'w', which other statements use before it");
  EXPECT_EQ(info.at.line, 14);
  EXPECT_EQ(info.group_rows, 0);
}

// Session 30: a sum across the rows is carried from group to group in row order: filled with -0.0
// before the groups, each group adding its rows one by one (the clipped last group its first
// 10 - rg * 4), the reader after the loop. Groups of any size (not divisors only).
TEST(SplitRows, SumAcrossRowsIsCarriedRowByRow) {
  RowSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[10, 8], Y: global float32[8] out)
    grid(bx = 1) {
  alloc x: fragment float32[10, 8]
  alloc r: fragment float32[8]
  copy X[0:+10, 0:+8] -> x
  reduce sum x -> r axis=0 clear=true
  copy r -> Y[0:+8]
}
)", "rows.tw");
  split_rows(k, 0, &info);
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.carried, "r");
  EXPECT_EQ(info.groups, (std::vector<int64_t>{5, 4, 3, 2, 1}));
  const std::string got = ir::print(split_rows(k, 2, &info));
  EXPECT_EQ(info.group_rows, 4);
  EXPECT_FALSE(info.as_blocks);
  const size_t fill = got.find("fill r = -0.0"), loop = got.find("for rg in serial(0, 3)");
  const size_t rows = got.find("for row in serial(0, min(10 - rg * 4, 4))"), add = got.find("r[j0] = r[j0] + x[row, j0]");
  const size_t store = got.find("copy r -> Y\n");
  ASSERT_NE(fill, std::string::npos) << got;
  ASSERT_NE(add, std::string::npos) << got;
  EXPECT_LT(fill, loop) << got;
  EXPECT_LT(loop, rows) << got;
  EXPECT_LT(rows, add) << got;
  EXPECT_LT(add, store) << got;
  EXPECT_NE(got.find("copy X[rg * 4:+min(4, 10 - rg * 4), 0:+8] -> x"), std::string::npos) << got;
  EXPECT_EQ(got.find("reduce sum"), std::string::npos) << got;
}

// Session 30: a logsumexp over dim 0: the max merged group by group (m_prev kept before), the sum
// of exp(x - m) rescaled to the new max before the group's rows are added (online); m + log(s)
// after the groups. A second reader of the exp tile keeps the body unsplit.
TEST(SplitRows, LogSumExpAcrossRowsIsOnline) {
  auto src = [](const std::string& extra) {
    return R"(kernel k(X: global float32[8, 16], Y: global float32[16] out, Z: global float32[8, 16] out)
    grid(bx = 1) {
  alloc x: fragment float32[8, 16]
  alloc m: fragment float32[16]
  alloc s: fragment float32[16]
  copy X[0:+8, 0:+16] -> x
  reduce max x -> m axis=0 clear=true
  for i in parallel(0, 8) {
    for j in parallel(0, 16) {
      x[i, j] = exp(x[i, j] - m[j])
    }
  }
  reduce sum x -> s axis=0 clear=true
)" + extra + R"(  for j in parallel(0, 16) {
    m[j] = m[j] + log(s[j])
  }
  copy m -> Y[0:+16]
}
)";
  };
  RowSplit info;
  const std::string got = ir::print(split_rows(ir::parse_kernel(src(""), "rows.tw"), 2, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.online, "m");
  EXPECT_EQ(info.groups, (std::vector<int64_t>{4, 2, 1}));  // divisors (the max merges)
  EXPECT_EQ(info.group_rows, 2);
  const size_t prev = got.find("m_prev[j0] = m[j0]"), merge = got.find("reduce max x -> m axis=0 clear=false");
  const size_t rescale = got.find("s[j0_1] = where(m_prev[j0_1] == -inf, 0.0, s[j0_1] * exp(m_prev[j0_1] - m[j0_1]))");
  const size_t ex = got.find("x[i, j] = exp(x[i, j] - m[j])"), add = got.find("s[j0_2] = s[j0_2] + x[row, j0_2]");
  const size_t after = got.find("m[j] = m[j] + log(s[j])");
  ASSERT_NE(rescale, std::string::npos) << got;
  EXPECT_LT(prev, merge) << got;
  EXPECT_LT(merge, ex) << got;
  EXPECT_LT(ex, rescale) << got;
  EXPECT_LT(rescale, add) << got;
  EXPECT_LT(add, after) << got;
  EXPECT_NE(add, std::string::npos) << got;
  EXPECT_LT(got.find("fill m = -inf"), got.find("for rg in serial(0, 4)")) << got;
  EXPECT_NE(got.find("fill s = -0.0"), std::string::npos) << got;
  // the exp tile (exp with each group's max) stored as well: not split
  split_rows(ir::parse_kernel(src("  copy x -> Z[0:+8, 0:+16]\n"), "rows.tw"), 0, &info);
  EXPECT_EQ(info.why_not, "a statement on the rows after one that needs every row's result (the exp of the running "
                          "max, a different max in each row group, may only be summed across the rows)");
}

// A float16 sum (clear=False) runs in a float32 tile r_acc, added into r after the groups as the
// unsplit form adds its float32 sum; an int8 sum is not carried (its sum wraps into int8).
TEST(SplitRows, HalfSumIsCarriedInFloat32) {
  auto src = [](const std::string& t) {
    return R"(kernel k(X: global )" + t + R"([10, 16], Y: global )" + t + R"([16] out)
    grid(bx = 1) {
  alloc x: fragment )" + t + R"([10, 16]
  alloc r: fragment )" + t + R"([16]
  copy Y[0:+16] -> r
  copy X[0:+10, 0:+16] -> x
  reduce sum x -> r axis=0 clear=false
  copy r -> Y[0:+16]
}
)";
  };
  RowSplit info;
  const std::string got = ir::print(split_rows(ir::parse_kernel(src("float16"), "rows.tw"), 1, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_NE(got.find("alloc r_acc: fragment float32[16]"), std::string::npos) << got;
  EXPECT_NE(got.find("fill r_acc = -0.0"), std::string::npos) << got;
  EXPECT_NE(got.find("r_acc[j0] = r_acc[j0] + cast<float32>(x[row, j0])"), std::string::npos) << got;
  const size_t store = got.find("r[j0_1] = cast<float16>(cast<float32>(r[j0_1]) + r_acc[j0_1])");
  ASSERT_NE(store, std::string::npos) << got;
  EXPECT_LT(store, got.find("copy r -> Y\n")) << got;
  split_rows(ir::parse_kernel(src("int8"), "rows.tw"), 0, &info);
  EXPECT_EQ(info.why_not,
            "a sum across the rows of the int8 tile 'x' into the int8 tile 'r' (carried across row groups for float or "
            "int32 sums only)");
}

// fuzz13 F2: a condition the same for every row (it reads a tensor the block does not write) runs
// whole in each group, its row statements rewritten; an `else` and a T.serial loop around too.
TEST(SplitRows, UniformIfRunsWholeInEachGroup) {
  RowSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 4096], L: global int32[8], Y: global float32[M, 4096] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 4096]
  for t in serial(0, 2) {
    if 0 < L[bx * 2 + t] {
      copy X[bx * 8:+8, 0:+4096] -> x
    } else {
      fill x = 0.0
    }
  }
  copy x -> Y[bx * 8:+8, 0:+4096]
}
)", "rows.tw");
  const std::string got = ir::print(split_rows(k, 3, &info));
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.group_rows, 2);
  EXPECT_TRUE(info.as_blocks);
  EXPECT_NE(got.find("alloc x: fragment float32[2, 4096]"), std::string::npos) << got;
  EXPECT_NE(got.find("if 0 < L[bx // 4 * 2 + t]"), std::string::npos) << got;
  EXPECT_NE(got.find("copy X[bx * 2:+2, 0:+4096] -> x"), std::string::npos) << got;
  EXPECT_NE(got.find("fill x = 0.0"), std::string::npos) << got;
  EXPECT_NE(got.find("copy x -> Y[bx * 2:+2, 0:+4096]"), std::string::npos) << got;
}

// A condition on a row tile differs between the groups: not split, the `if` named.
TEST(SplitRows, IfOnARowTileIsNotSplit) {
  RowSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 4096], Y: global float32[M, 4096] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 4096]
  copy X[bx * 8:+8, 0:+4096] -> x
  if 0.0 < x[0, 0] {
    copy x -> Y[bx * 8:+8, 0:+4096]
  }
}
)", "rows.tw");
  EXPECT_EQ(ir::print(split_rows(k, 1, &info)), ir::print(k));
  EXPECT_EQ(info.why_not.rfind("an `if` whose condition reads 'x', which the block writes", 0), 0u) << info.why_not;
  EXPECT_EQ(info.at.line, 5);
}

// A statement on another tile inside the `if` runs again in each group: an accumulation into it
// (not its first, whole write) would add once per group, so the body is not split.
TEST(SplitRows, AccumulationInsideTheIfIsNotSplit) {
  RowSplit info;
  auto k = ir::parse_kernel(R"(kernel k(X: global float32[M, 4096], L: global int32[8], Y: global float32[M, 4096] out)
    grid(bx = ceildiv(M, 8)) {
  alloc x: fragment float32[8, 4096]
  alloc w: fragment float32[4096]
  fill w = 0.0
  if 0 < L[bx] {
    for j in parallel(0, 4096) {
      w[j] = w[j] + 1.0
    }
    copy X[bx * 8:+8, 0:+4096] -> x
    copy x -> Y[bx * 8:+8, 0:+4096]
  }
}
)", "rows.tw");
  EXPECT_EQ(ir::print(split_rows(k, 1, &info)), ir::print(k));
  EXPECT_NE(info.why_not.find("(it would run again for each group)"), std::string::npos) << info.why_not;
  EXPECT_EQ(info.at.line, 7);
}

// hunt14 F5: a gemm whose A and C are row tiles is a row statement (row i of C is row i of A times B):
// the block's rows run in groups with the gemm, its K loop (T.Pipelined) whole in each group; B
// (w_s, whose leading dim K equals the 64 rows here) is no row tile and keeps its shape.
std::string gemm_row_bias() {  // the epilogue's bias per row (a 64-long tile of a 64-row block is a row tile)
  std::string in = testing::kGemmEpilogueInput;
  for (size_t i; (i = in.find("b_s[j]")) != std::string::npos;) in.replace(i, 6, "b_s[i]");
  in.replace(in.find("copy bias[bx * 64:+64]"), 22, "copy bias[by * 64:+64]");
  return in;
}

TEST(SplitRows, GemmOfRowTilesRunsInTheGroups) {
  RowSplit info;
  auto k = ir::parse_kernel(gemm_row_bias(), "gemm.tw");
  split_rows(k, 0, &info);
  EXPECT_EQ(info.rows, 64);
  EXPECT_EQ(info.why_not, "");
  EXPECT_EQ(info.row_tiles, "x_s, b_s, acc");
  const std::string got = ir::print(split_rows(k, 1, &info));
  EXPECT_EQ(info.group_rows, 32);
  EXPECT_TRUE(info.as_blocks);
  auto has = [&](const std::string& line) { EXPECT_NE(got.find(line), std::string::npos) << line << "\n" << got; };
  has("grid(bx = 4, by = 2)");
  has("alloc x_s: L1 float32[32, 64]");
  has("alloc w_s: L1 float32[64, 64]");
  has("alloc acc: fragment float32[32, 64]");
  has("for k in pipelined(0, 1, stages=2) {");
  has("gemm x_s, w_s -> acc trans_a=false trans_b=false clear=false");
  has("alloc b_s: UB float32[32]");
  has("for i in parallel(0, 32) {");
}

// A transposed A holds K in its rows: row i of C is a column of A, the body stays whole.
TEST(SplitRows, GemmWithATransposedIsNotRowWise) {
  std::string in = gemm_row_bias();
  in.replace(in.find("trans_a=false"), 13, "trans_a=true");
  RowSplit info;
  split_rows(ir::parse_kernel(in, "gemm.tw"), 0, &info);
  EXPECT_EQ(info.why_not, "a gemm whose A and C are not whole row tiles with A untransposed (row i of C from row i of A)");
}

}  // namespace
}  // namespace tw::ascend
