// widen_scalars (session 30, h-widen2): the relational bounds of grid-stride loops (rules 1 and 2)
// and the ceildiv quotient cast back to its type (rule 3), each with a case the rule must not prove
// (the expression stays in int64). Before/after on program texts (program_parser.h).
#include <gtest/gtest.h>

#include <string>

#include "target/ascend/ascendc_printer.h"
#include "target/ascend/program_parser.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/widen_scalars.h"

namespace tw::ascend {
namespace {

// map_grid's loop over ceildiv(M, 8) row blocks of an int32 M on at most 48 cores.
const char* kHead = R"(ascend_kernel k AIV_ONLY blocks=min(48, ceildiv(M, 8)) workspace=0 block_idx=cid
  param 0 X: GM int32[M, 8]
  param 1 s: int32
  param 2 r: int32
  buffer u: AIV UB @0 +64 int32 ND
AIV:
)";

std::string widened(const std::string& body) {
  return print_program(widen_scalars(parse_program(std::string(kHead) + body, "k.prog")));
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

const char* kGrid = R"(  for t in range(ceildiv(ceildiv(M, 8) - cid, min(48, ceildiv(M, 8)))):
    blk = cid + t * min(48, ceildiv(M, 8))
    S ScalarStore u[0] <- t * min(48, ceildiv(M, 8)) int32
    S ScalarStore u[4] <- blk * 8 int32
    S ScalarStore u[8] <- blk * 2400 int32
)";

TEST(WidenScalars, GridStrideIndexStaysInt32) {
  std::string t = widened(kGrid);
  // rule 1: t * s < ceildiv(M, 8) - cid <= 2^28; rule 2: blk < ceildiv(M, 8) <= 2^28, so blk * 8 < 2^31
  // (the product with min(...) is not widened either way: tw_min returns int64_t)
  EXPECT_TRUE(has(t, "blk = cid + t * min(48, cast<int32>(ceildiv(cast<int64>(M), 8i64)))")) << t;
  EXPECT_TRUE(has(t, "u[4] <- blk * 8 int32")) << t;
  // a GM offset past 2^31 for more than ~4 GB of input: stays int64
  EXPECT_TRUE(has(t, "u[8] <- cast<int64>(blk) * 2400i64 int32")) << t;
}

TEST(WidenScalars, CeildivQuotientCastBack) {
  // rule 3: M + 8 - 1 may leave int32 (M up to 2^31 - 1): the sum in int64, the quotient (<= 2^28) back in int32
  std::string t = widened("  S ScalarStore u[0] <- ceildiv(M, 8) * 7 int32\n");
  EXPECT_TRUE(has(t, "u[0] <- cast<int32>(ceildiv(cast<int64>(M), 8i64)) * 7 int32")) << t;
  // the quotient of two int32 scalars reaches 2^31 (ceildiv(-2^31, -1)): stays int64
  t = widened("  S ScalarStore u[0] <- ceildiv(s, r) int32\n");
  EXPECT_TRUE(has(t, "u[0] <- ceildiv(cast<int64>(s), cast<int64>(r)) int32")) << t;
}

TEST(WidenScalars, StrideProductBelowTheDividend) {
  // rule 1: t * (d & 255) <= M - 1 (intervals: t up to 2^31 - 2, times 255)
  std::string t = widened(R"(  S ScalarLoad d <- u[0] int32
  for t in range(ceildiv(M, d & 255)):
    S ScalarStore u[4] <- t * (d & 255) int32
    S ScalarStore u[8] <- t * (d & 511) int32
)");
  EXPECT_TRUE(has(t, "u[4] <- t * (d & 255) int32")) << t;
  // another expression than the extent's divisor: intervals only
  EXPECT_TRUE(has(t, "u[8] <- cast<int64>(t) * cast<int64>(d & 511) int32")) << t;
  // a divisor that may be negative: ceildiv(x, s) with s < 0 runs for x < 0 with t * s > x
  t = widened(R"(  for t in range(ceildiv(M, s)):
    S ScalarStore u[0] <- t * s int32
)");
  EXPECT_TRUE(has(t, "u[0] <- cast<int64>(t) * cast<int64>(s) int32")) << t;
}

TEST(WidenScalars, GridStrideNeedsTheExtentsBase) {
  // blk = cid + 1 + t * s reaches ceildiv(M, 8) = 2^28: blk * 8 may be 2^31, stays int64
  std::string t = widened(R"(  for t in range(ceildiv(ceildiv(M, 8) - cid, min(48, ceildiv(M, 8)))):
    blk = cid + 1 + t * min(48, ceildiv(M, 8))
    S ScalarStore u[0] <- blk * 8 int32
)");
  EXPECT_TRUE(has(t, "u[0] <- cast<int64>(blk) * 8i64 int32")) << t;
}

TEST(WidenScalars, StrideNeedsAnInvariantExtent) {
  // the body assigns a variable of the extent (the divisor's d, reloaded): the product is bounded
  // by intervals only. Unchanged (d kept), rule 1 proves t * (d & 255) <= M - 1.
  const std::string text = std::string(kHead) + R"(  S ScalarLoad d <- u[0] int32
  for t in range(ceildiv(M, d & 255)):
    S ScalarLoad e <- u[4] int32
    S ScalarStore u[8] <- t * (d & 255) int32
)";
  std::string t = print_program(widen_scalars(parse_program(text, "k.prog")));
  EXPECT_TRUE(has(t, "u[8] <- t * (d & 255) int32")) << t;
  Program p = parse_program(text, "k.prog");
  // make the loop's load assign d itself (the text gives each load a new variable)
  auto& top = const_cast<Stmt&>(*p.aiv);
  const ir::Var d = std::get<ScalarLoad>(top.body.at(0)->instr.op).var;
  auto& loop_body = const_cast<Stmt&>(*top.body.at(1)->body.at(0));
  auto& load = const_cast<Stmt&>(*loop_body.body.at(0));
  std::get<ScalarLoad>(load.instr.op).var = d;
  t = print_program(widen_scalars(p));
  EXPECT_TRUE(has(t, "u[8] <- cast<int64>(t) * ")) << t;
}

// Session 31 (h-i32b): widen_scalars decides which `//`, `%` and ceildiv print with C's / and %
// (Program::c_divisions: a positive constant divisor, a dividend ir::is_nonneg proves >= 0 from the
// loop, block and shape indices and the lets of such values); the AscendC printer prints exactly those
// infix, the rest through the helpers (the simulator checks the marked ones: test_ascend_sim.cpp).
TEST(WidenScalars, CDivisionsAreTheProgramsDecision) {
  Program p = widen_scalars(parse_program(std::string(kHead) + R"(  for i in range(100):
    h = i + 5
    S ScalarStore u[0] <- i // 8 int32
    S ScalarStore u[4] <- (i - 3) // 8 int32
    S ScalarStore u[8] <- s % 8 int32
    S ScalarStore u[12] <- ceildiv(h, 8) int32
    S ScalarStore u[16] <- i % r int32
    S ScalarStore u[20] <- M // 8 int32
)", "k.prog"));
  EXPECT_EQ(p.c_divisions.size(), 4u);  // i // 8, ceildiv(h, 8), M // 8 and blocks' ceildiv(M, 8)
  p.pool(CoreType::AIV, Mem::UB) = 64;  // placed by hand (plan_memory's record)
  const std::string k = print_ascendc_kernel(p);
  for (const char* want : {"(i / 8)", "tw_floordiv((i - 3), 8)", "tw_floormod(s, 8)", "((h + 8 - 1) / 8)",
                           "tw_floormod(i, r)", "(M / 8)"})
    EXPECT_TRUE(has(k, want)) << want << " in\n" << k;
  // a program no widen_scalars ran on has no C divisions: every division through the helpers
  Program q = parse_program(std::string(kHead) + "  S ScalarStore u[0] <- M // 8 int32\n", "k.prog");
  q.pool(CoreType::AIV, Mem::UB) = 64;
  const std::string raw = print_ascendc_kernel(q);
  EXPECT_TRUE(has(raw, "tw_floordiv(M, 8)")) << raw;
}

}  // namespace
}  // namespace tw::ascend
