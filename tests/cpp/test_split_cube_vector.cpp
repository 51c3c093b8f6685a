// split_cube_vector: before/after tests (inputs: examples/gelu_bias.py and
// examples/flash_attention.py after infer_scope; texts in cube_vector_kernels.h).
#include <gtest/gtest.h>

#include <map>

#include "cube_vector_kernels.h"
#include "ir/functor.h"
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

// Paged decode (issue 13): the if that copies a page into V (handed to the Cube in the previous
// step: on both units) joins with the branch that copies nothing; the 1-row scores (odd) and the
// 8-row V (written a page at a time) stay whole on both AIVs; each AIV writes V and P into its own
// half of the workspace (twice the rows), the Cube reads AIV 0's half; only AIV 0 stores Out.
TEST(SplitCubeVector, PagedDecodeIfJoinAndWholeTiles) {
  std::string out = split(testing::kPagedDecodeInput);
  auto has = [&](const std::string& line) { EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out; };
  has("alloc v_ub: UB float16[8, 16]");
  has("alloc s_ub: UB float32[1, 8]");
  has("alloc ws_2: global float16[64, 16]");  // 2 blocks x 2 slots x 8 rows, x 2 AIVs
  has("copy v_ub -> ws_2[((b * 2 + h) % 2 * 2 + j_v % 2) * 8 + vid * 32:+8, 0:+16]");
  has("copy ws_2[((b * 2 + h) % 2 * 2 + j % 2) * 8:+8, 0:+16] -> v");
  has("if vid == 0 {");
}

// Hand-off tiles of an even row count are halved per AIV, each count on its own: the scores
// (2 rows: 1 per AIV) beside V (8 rows, written a page at a time: whole).
TEST(SplitCubeVector, RowCountsSplitEachOnTheirOwn) {
  std::string in = testing::kPagedDecodeInput;
  auto replace_all = [&](const std::string& a, const std::string& b) {
    for (size_t i = in.find(a); i != std::string::npos; i = in.find(a, i + b.size())) in.replace(i, a.size(), b);
  };
  // two query heads per kv head (G = 2): Q and Out get 2 heads per program
  replace_all("Q: global float16[1, 2, 16]", "Q: global float16[1, 4, 16]");
  replace_all("Out: global float16[1, 2, 16]", "Out: global float16[1, 4, 16]");
  replace_all("copy Q[b:+1, h:+1, 0:+16]", "copy Q[b:+1, h * 2:+2, 0:+16]");
  replace_all("-> Out[b:+1, h:+1, 0:+16]", "-> Out[b:+1, h * 2:+2, 0:+16]");
  replace_all("float16[1, 16]", "float16[2, 16]");
  replace_all("float32[1, 8]", "float32[2, 8]");
  replace_all("float16[1, 8]", "float16[2, 8]");
  replace_all("float32[1, 16]", "float32[2, 16]");
  replace_all("float32[1]", "float32[2]");
  replace_all("parallel(0, 1)", "parallel(0, 2)");
  std::string out = split(in);
  auto has = [&](const std::string& line) { EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out; };
  has("alloc s_ub: UB float32[1, 8]");   // 2 rows: one per AIV
  has("alloc acc_ub: UB float32[1, 16]");
  has("alloc v_ub: UB float16[8, 16]");  // whole
}

// A row loop (qk_rope_proj's table rows gathered by position into c[r, :]): split like the map's
// rows, each AIV copying the 32 rows it computes on; the condition on r gets the global row.
std::string with_row_loop(const std::string& body) {
  std::string in = testing::kGemmEpilogueInput;
  auto replace = [&](const std::string& a, const std::string& b) {
    size_t i = in.find(a);
    EXPECT_NE(i, std::string::npos) << a;
    in.replace(i, a.size(), b);
  };
  replace("  alloc acc: fragment float32[64, 64]\n", "  alloc acc: fragment float32[64, 64]\n  alloc c: UB float32[64, 64]\n");
  replace("  copy bias[bx * 64:+64] -> b_s\n", "  copy bias[bx * 64:+64] -> b_s\n  for r in serial(0, 64) {\n" + body + "  }\n");
  replace("* (1.0 + erf(", "* c[i, j] * (1.0 + erf(");
  return in;
}

TEST(SplitCubeVector, RowLoopSplitLikeTheMapRows) {
  std::string out = split(with_row_loop("    if by * 64 + r < 100 {\n      copy W[r:+1, 0:+64] -> c[r:+1, 0:+64]\n    }\n"));
  auto has = [&](const std::string& line) { EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out; };
  has("alloc c: UB float32[32, 64]");
  has("for r_v in serial(0, 32) {");
  has("if by * 64 + (r_v + vid * 32) < 100 {");
  has("copy W[r_v + vid * 32:+1, 0:+64] -> c[r_v:+1, 0:+64]");
  has("alloc acc_ub: UB float32[32, 64]");
}

// A one-row map inside the row loop (a token loop over (token, head) rows with one head, hunt15
// F2: `for i, c in T.Parallel(1, N): s[t + i, c]`): the unit loop is inlined, its row is r.
TEST(SplitCubeVector, RowLoopOneRowMapIsTheLoopsRow) {
  std::string out = split(with_row_loop(
      "    copy W[r:+1, 0:+64] -> c[r:+1, 0:+64]\n    for i in parallel(0, 1) {\n      for j in parallel(0, 64) {\n"
      "        if r < 40 {\n          c[r + i, j] = c[r + i, j] * 2.0\n        }\n      }\n    }\n"));
  auto has = [&](const std::string& line) { EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out; };
  has("for r_v in serial(0, 32) {");
  has("if r_v + vid * 32 < 40 {");
  has("c[r_v, j] = c[r_v, j] * 2.0");
}

// Session 33 (hunt33 F7): an element store or read of a row tile outside a map at a row other than
// the loop's own keeps the tile whole on both AIVs (it was this error; whole, the kernel runs right).
TEST(SplitCubeVector, RowLoopElementAtAnotherRowKeepsTheTileWhole) {
  std::string out = split(with_row_loop("    copy W[r:+1, 0:+64] -> c[r:+1, 0:+64]\n    c[63 - r, 0] = 1.0\n"));
  auto has = [&](const std::string& line) { EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out; };
  has("alloc c: UB float32[64, 64]");
  has("for r_v in serial(0, 64) {");
  has("c[63 - r_v, 0] = 1.0");
}

TEST(SplitCubeVector, RowLoopTouchingAnotherRowIsAnError) {
  std::string in = with_row_loop("    copy W[r:+1, 0:+64] -> c[r:+1, 0:+64]\n    for i in parallel(0, 1) {\n"
                                 "      for j in parallel(0, 64) {\n        c[63 - r + i, j] = 1.0\n      }\n    }\n");
  try {
    split(in);
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(std::string(e.what()).find("a loop over rows that accesses 'c' at other rows than the loop's own"),
              std::string::npos) << e.what();
  }
}

// The epilogue's map replaced by `body` (its lines at the kernel's indentation).
std::string with_epilogue(const std::string& body) {
  std::string in = testing::kGemmEpilogueInput;
  const std::string map =
      "  for i in parallel(0, 64) {\n    for j in parallel(0, 64) {\n"
      "      acc[i, j] = 0.5 * (acc[i, j] + b_s[j]) * (1.0 + erf((acc[i, j] + b_s[j]) * 0.7071067811865475))\n    }\n  }\n";
  size_t i = in.find(map);
  EXPECT_NE(i, std::string::npos);
  in.replace(i, map.size(), body);
  return in;
}
std::string epilogue_map(const std::string& value, const std::string& indent) {
  return indent + "for i in parallel(0, 64) {\n" + indent + "  for j in parallel(0, 64) {\n" + indent + "    acc[i, j] = " +
         value + "\n" + indent + "  }\n" + indent + "}\n";
}
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

// Session 29: hand-offs in the exclusive arms of one if / elif / else (the masked attention
// kernel's three kinds of block each hand the scores over) share one pair of cross-core flag ids
// and, slots of the same dtype and shape, one workspace: one pre-set of the reverse flag, one drain.
TEST(SplitCubeVector, ExclusiveArmsShareCrossCoreFlagIds) {
  std::string out = split(with_epilogue("  if bx < 1 {\n" + epilogue_map("acc[i, j] + b_s[j]", "    ") +
                                        "  } else {\n    if by < 1 {\n" + epilogue_map("acc[i, j] * 2.0", "      ") +
                                        "    } else {\n" + epilogue_map("acc[i, j] - b_s[j]", "      ") + "    }\n  }\n"));
  EXPECT_EQ(count(out, "alloc ws_"), 1u) << out;
  EXPECT_EQ(count(out, "sync set_cross_flag(2, FIX, 0)"), 3u) << out;   // one hand-off per arm, one id
  EXPECT_EQ(count(out, "sync wait_cross_flag(0, MTE2)"), 3u) << out;
  EXPECT_EQ(count(out, "sync wait_cross_flag(1, FIX)"), 4u) << out;     // 3 arms + the drain
  EXPECT_EQ(count(out, "sync set_cross_flag(2, MTE2, 1)"), 4u) << out;  // the pre-set + 3 arms
  EXPECT_EQ(count(out, "wait_cross_flag(2,"), 0u) << out;  // no second pair of ids
  EXPECT_EQ(count(out, ", 2)\n"), 0u) << out;
}

// Hand-offs that may both run (an if's arm, then the code after the if) keep their own ids.
TEST(SplitCubeVector, HandOffsAfterAnIfKeepTheirOwnIds) {
  std::string in = with_epilogue("  if bx < 1 {\n" + epilogue_map("acc[i, j] + b_s[j]", "    ") + "  }\n" +
                                 epilogue_map("acc[i, j] * 2.0", "  "));
  // the if's map writes a UB tile c: acc stays on the Cube after the if (on both units in one arm)
  const std::string first = "      acc[i, j] = acc[i, j] + b_s[j]";
  in.replace(in.find(first), first.size(), "      c[i, j] = acc[i, j] + b_s[j]");
  const std::string decl = "  alloc acc: fragment float32[64, 64]\n";
  in.replace(in.find(decl), decl.size(), decl + "  alloc c: UB float32[64, 64]\n");
  std::string out = split(in);
  EXPECT_EQ(count(out, "alloc ws_"), 2u) << out;
  EXPECT_EQ(count(out, "sync set_cross_flag(2, FIX, 0)"), 1u) << out;
  EXPECT_EQ(count(out, "sync set_cross_flag(2, FIX, 2)"), 1u) << out;
  EXPECT_EQ(count(out, "sync set_cross_flag(2, MTE2, 3)"), 2u) << out;  // its own pre-set and hand-off
}

// A Q tile the vector code writes once before the key loop (Q scaled after its copy) and the Cube
// reads in the loop is handed over once, before the loop, with one slot (handoff41); written again
// in the loop it is not loop-invariant and is handed over every iteration, two slots.
TEST(SplitCubeVector, LoopInvariantVectorTileHandedOverBeforeTheLoop) {
  auto with_scaled_q = [](bool in_loop_too) {
    std::string in = testing::kAttentionInput;
    auto sub = [&](const std::string& a, const std::string& b) { in.replace(in.find(a), a.size(), b); };
    sub("alloc Q_shared: L1", "alloc Q_shared: shared");
    const std::string map = "for q_i in parallel(0, 64) {\n    for q_d in parallel(0, 64) {\n"
                            "      Q_shared[q_i, q_d] = Q_shared[q_i, q_d] * 0.5\n    }\n  }\n";
    sub("  fill acc_o = 0.0\n", "  " + map + "  fill acc_o = 0.0\n");
    if (in_loop_too) sub("    gemm Q_shared, K_shared", "    " + map + "    gemm Q_shared, K_shared");
    return split(in);
  };
  std::string out = with_scaled_q(false);
  size_t send = out.find("copy Q_shared_ub -> ws_"), recv = out.find("] -> Q_shared\n");
  ASSERT_NE(send, std::string::npos) << out;
  ASSERT_NE(recv, std::string::npos) << out;
  EXPECT_LT(send, out.find("for k_v in")) << out;  // the vector side: before its loop
  EXPECT_LT(recv, out.find("for k in")) << out;    // the Cube side: before its loop
  EXPECT_EQ(count(out, "copy Q_shared_ub -> ws_"), 1u) << out;
  EXPECT_NE(out.find("alloc ws_0: global float32[256, 64]"), std::string::npos) << out;  // 4 blocks x 1 slot x 64 rows
  out = with_scaled_q(true);
  send = out.find("copy Q_shared_ub -> ws_");
  ASSERT_NE(send, std::string::npos) << out;
  EXPECT_GT(send, out.find("for k_v in")) << out;  // written in the loop: handed over in it
  EXPECT_EQ(count(out, "copy Q_shared_ub -> ws_"), 1u) << out;
}

TEST(SplitCubeVector, SingleUnitKernelUnchanged) {
  ir::Kernel k = ir::parse_kernel(testing::kOneUnitKernel);
  EXPECT_EQ(split_cube_vector(k, target::find_target("ascend910b2")), k);
}

// Every tile the pass makes of a user tile records it (BufferNode::part_of, which messages read):
// acc's Vector copy acc_ub holds each AIV's half of acc's rows, the Cube's acc all of it; a row
// tile halved between the AIVs keeps its name; a tile the pass leaves alone records nothing.
TEST(SplitCubeVector, PartOfNamesTheUserTileAndItsRowParts) {
  ir::Kernel k = ir::parse_kernel(with_row_loop("    copy W[r:+1, 0:+64] -> c[r:+1, 0:+64]\n"));
  ir::Kernel out = split_cube_vector(k, target::find_target("ascend910b2"));
  std::map<std::string, ir::TilePart> parts;
  ir::for_each_stmt(out->body, [&](const ir::Stmt& s) {
    if (s->kind != ir::StmtKind::Alloc) return;
    const ir::Buffer& b = ir::as<ir::AllocNode>(s)->buffer;
    parts[b->name + "@" + std::string(ir::scope_name(b->scope))] = b->part_of;
  });
  auto is = [&](const std::string& key, const std::string& tile, int64_t row_parts) {
    ASSERT_TRUE(parts.count(key)) << key;
    EXPECT_EQ(parts[key].tile, tile) << key;
    EXPECT_EQ(parts[key].row_parts, row_parts) << key;
  };
  is("acc_ub@UB", "acc", 2);
  is("acc@L0C", "acc", 1);
  is("c@UB", "c", 2);
  is("b_s@UB", "", 1);
}

}  // namespace
}  // namespace tw::ascend
