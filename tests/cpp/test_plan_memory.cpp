// plan_memory: buffer placements of small expert-mode programs (parsed, lowered by select_instructions,
// then placed with and without reuse), the lifetime rules (disjoint lifetimes share, overlapping
// do not, loop-carried buffers keep their bytes for the whole loop), alignment, and the capacity
// error (buffers live at the peak, sizes, capacity, chip, a smaller tile, the biggest buffer's line).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "target/ascend/select_vector_calls.h"
#include "target/ascend/select_instructions.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/select_move_calls.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"

#include <cmath>
#include <vector>

namespace tw::ascend {
namespace {

const target::Target& chip() { return target::find_target("ascend910b2"); }

Program plan(const std::string& text, bool reuse) {
  return plan_memory(select_instructions(ir::parse_kernel(text, "mem.tw"), chip()), chip(), reuse);
}

// "name@offset" of every buffer, in declaration order.
std::string placement(const Program& p) {
  std::string s;
  for (const auto& b : p.buffers) s += (s.empty() ? "" : " ") + b.name + "@" + std::to_string(b.offset);
  return s;
}

// Bytes the placement uses in memory m.
int64_t used(const Program& p, Mem m) {
  int64_t u = 0;
  for (const auto& b : p.buffers)
    if (b.mem == m) u = std::max(u, b.offset + b.bytes);
  return u;
}

const char* kHead = "kernel k(X: global float32[128, 128], Y: global float32[128, 128] out)\n"
                    "    grid(cid = 1) sub_block(vid) {\n";

// A UB elementwise map dst = f(src) over 16x64 tiles.
std::string map16(const std::string& dst, const std::string& rhs) {
  return "    for i in parallel(0, 16) {\n      for j in parallel(0, 64) {\n        " + dst + "[i, j] = " + rhs +
         "\n      }\n    }\n";
}

// Straight-line code: a -> b -> c is a chain (each lives until the next one is computed), d
// comes after all of them. c and d reuse a's bytes; b overlaps both a and c so it does not.
TEST(PlanMemory, DisjointLifetimesShareOverlappingDoNot) {
  std::string text = std::string(kHead) +
                     "  alloc a: UB float32[16, 64]\n  alloc b: UB float32[16, 64]\n"
                     "  alloc c: UB float32[16, 64]\n  alloc d: UB float32[16, 64]\n"
                     "  scope V {\n"
                     "    copy X[0:+16, 0:+64] -> a\n" +
                     map16("b", "exp(a[i, j])") + map16("c", "b[i, j] * 2.0") +
                     "    copy c -> Y[0:+16, 0:+64]\n"
                     "    copy X[16:+16, 0:+64] -> d\n"
                     "    copy d -> Y[16:+16, 0:+64]\n"
                     "  }\n}\n";
  EXPECT_EQ(placement(plan(text, /*reuse=*/false)), "a@0 b@4096 c@8192 d@12288");
  Program p = plan(text, /*reuse=*/true);
  EXPECT_EQ(placement(p), "a@0 b@4096 c@0 d@0");
  EXPECT_EQ(used(p, Mem::UB), 8192);
}

// In a loop: t is redefined at the top of every iteration (its value never crosses iterations),
// s is read before it is written (its value flows from one iteration to the next: live for the
// whole loop), v is redefined in every iteration like t. t and v share; s shares with nobody,
// although s's accesses in program order come after t's last one. (The copies into t and v are
// provably full, k * 16 + 16 <= 64, so they come without a conditional zero fill of their tile.)
TEST(PlanMemory, LoopCarriedBufferIsNotReusedInsideTheLoop) {
  std::string text = std::string(kHead) +
                     "  alloc t: UB float32[16, 64]\n  alloc s: UB float32[16, 64]\n  alloc v: UB float32[16, 64]\n"
                     "  scope V {\n"
                     "    for k in serial(0, 4) {\n"
                     "      copy X[k * 16:+16, 0:+64] -> t\n"
                     "      copy t -> Y[k * 16:+16, 0:+64]\n" +
                     map16("s", "s[i, j] + 1.0") +
                     "      copy X[k * 16:+16, 64:+64] -> v\n"
                     "      copy v -> Y[k * 16:+16, 64:+64]\n"
                     "    }\n  }\n}\n";
  EXPECT_EQ(placement(plan(text, true)), "t@0 s@4096 v@0");
}

// A write under an `if` does not redefine the buffer on every iteration: c (written only when
// k == 0, read on every iteration) is live for the whole loop and keeps its bytes; a buffer used
// only at the end of the body would otherwise share with it.
TEST(PlanMemory, ConditionalWriteIsLoopCarried) {
  std::string text = std::string(kHead) +
                     "  alloc c: UB float32[16, 64]\n  alloc v: UB float32[16, 64]\n"
                     "  scope V {\n"
                     "    for k in serial(0, 4) {\n"
                     "      if k == 0 {\n        copy X[0:+16, 0:+64] -> c\n      }\n"
                     "      copy c -> Y[k * 16:+16, 0:+64]\n"
                     "      copy X[k * 16:+16, 64:+64] -> v\n"
                     "      copy v -> Y[k * 16:+16, 64:+64]\n"
                     "    }\n  }\n}\n";
  EXPECT_EQ(placement(plan(text, true)), "c@0 v@4096");
  // The same body with an unconditional write: c's value does not cross iterations, v shares.
  std::string plain = text;
  plain.replace(plain.find("if k == 0 {"), 11, "for z in serial(0, 1) {");
  EXPECT_EQ(placement(plan(plain, true)), "c@0 v@0");
}

// Branch-aware carried rule: a write under an `if` redefines the buffer for the reads inside the
// same branch (a software-pipelined body: `if k < n { load c; use c }`), so c's value does not
// cross iterations and v, used after the `if`, shares its bytes. A read in another branch
// (`if k > 0 { use c }`) may see the previous iteration's value: c is live for the whole loop.
TEST(PlanMemory, WriteInABranchCoversReadsInThatBranchOnly) {
  std::string same = std::string(kHead) +
                     "  alloc c: UB float32[16, 64]\n  alloc v: UB float32[16, 64]\n"
                     "  scope V {\n"
                     "    for k in serial(0, 4) {\n"
                     "      if k < 3 {\n        copy X[k * 16:+16, 0:+64] -> c\n"
                     "        copy c -> Y[k * 16:+16, 0:+64]\n      }\n"
                     "      copy X[k * 16:+16, 64:+64] -> v\n"
                     "      copy v -> Y[k * 16:+16, 64:+64]\n"
                     "    }\n  }\n}\n";
  EXPECT_EQ(placement(plan(same, true)), "c@0 v@0");
  std::string other = std::string(kHead) +
                      "  alloc c: UB float32[16, 64]\n  alloc v: UB float32[16, 64]\n"
                      "  scope V {\n"
                      "    for k in serial(0, 4) {\n"
                      "      if k > 0 {\n        copy c -> Y[k * 16:+16, 0:+64]\n      }\n"
                      "      if k < 3 {\n        copy X[k * 16:+16, 0:+64] -> c\n      }\n"
                      "      copy X[k * 16:+16, 64:+64] -> v\n"
                      "      copy v -> Y[k * 16:+16, 64:+64]\n"
                      "    }\n  }\n}\n";
  EXPECT_EQ(placement(plan(other, true)), "c@0 v@4096");
}

// The Cube side: double-buffered L1 operands (writes at a stage-indexed offset never redefine
// the whole buffer) and the L0C accumulator (Mmad with init = k == 0 reads it) are live for the
// whole k loop; z, used only after the loop, reuses a1's bytes; the implicit L0 operands of the
// gemm get their own memories. Offsets keep each memory's alignment.
TEST(PlanMemory, CubeLoopCarriedAndAfterLoopReuse) {
  const char* text = R"(kernel g(A: global float16[64, K], B: global float16[K, 64], C: global float32[64, 64] out)
    grid(cid = 1) sub_block(vid) {
  alloc a1: L1 float16[2, 64, 32]
  alloc b1: L1 float16[2, 32, 64]
  alloc z: L1 float16[64, 32]
  alloc c0: L0C float32[64, 64]
  alloc c1: L0C float32[64, 64]
  scope C {
    for k in serial(0, ceildiv(K, 32)) {
      copy A[0:+64, k * 32:+32] -> a1[k % 2:+1, 0:+64, 0:+32]
      copy B[k * 32:+32, 0:+64] -> b1[k % 2:+1, 0:+32, 0:+64]
      if k == 0 {
        gemm a1[k % 2:+1, 0:+64, 0:+32], b1[k % 2:+1, 0:+32, 0:+64] -> c0 clear=true
      } else {
        gemm a1[k % 2:+1, 0:+64, 0:+32], b1[k % 2:+1, 0:+32, 0:+64] -> c0 clear=false
      }
    }
    copy c0 -> C
    copy A[0:+64, 0:+32] -> z
    gemm z, b1[0:+1, 0:+32, 0:+64] -> c1 clear=true
    copy c1 -> C
  }
}
)";
  Program flat = plan(text, false);
  EXPECT_EQ(placement(flat), "a1@0 b1@8192 z@16384 c0@0 c1@16384 _gemm_L0A@0 _gemm_L0B@0");
  Program p = plan(text, true);
  // b1 is read after the loop too; z starts after the loop, where a1 is dead; c1 after c0's Fixpipe.
  EXPECT_EQ(placement(p), "a1@0 b1@8192 z@0 c0@0 c1@0 _gemm_L0A@0 _gemm_L0B@0");
  EXPECT_EQ(used(p, Mem::L1), 16384);
  for (const auto& b : p.buffers) EXPECT_EQ(b.offset % buffer_alignment(b.mem), 0) << b.name;
}

// Before/after program text: plan_memory changes the buffers' offsets and adds one `pool` line per
// core and memory (the end of its last buffer rounded up to 32 B: the TBuf the AscendC printer
// declares); the code is unchanged.
TEST(PlanMemory, RecordsThePoolOfEachCoreAndMemory) {
  const char* text = R"(kernel g(X: global float32[16, 24], Y: global float32[16, 24] out, A: global float16[64, 32], B: global float16[32, 40], C: global float32[64, 40] out)
    grid(cid = 1) sub_block(vid) {
  alloc a1: L1 float16[64, 32]
  alloc z: L1 float16[32, 40]
  alloc c0: L0C float32[64, 40]
  alloc u: UB float32[16, 24]
  alloc w: UB float32[1, 5]
  scope C {
    copy A -> a1
    copy B -> z
    gemm a1, z -> c0 clear=true
    copy c0 -> C
  }
  scope V {
    copy X -> u
    copy u -> Y
    copy X[0:+1, 0:+5] -> w
    copy w -> Y[0:+1, 0:+5]
  }
}
)";
  Program before = select_instructions(ir::parse_kernel(text, "mem.tw"), chip());
  Program after = plan_memory(before, chip(), /*reuse=*/false);
  std::string b = print_program(before), a = print_program(after);
  auto head = [](const std::string& t) { return t.substr(0, t.find("\nAIC:\n")); };
  auto code = [](const std::string& t) { return t.substr(t.find("\nAIC:\n")); };
  EXPECT_EQ(code(a), code(b));
  EXPECT_EQ(b.find("  pool "), std::string::npos) << b;
  std::string expected;
  for (const auto& d : after.buffers)
    expected += "  buffer " + d.name + ": " + std::string(core_type_name(d.core)) + " " + std::string(mem_name(d.mem)) + " @" +
                std::to_string(d.offset) + " +" + std::to_string(d.bytes) + " " + std::string(d.dtype.name()) + " " +
                std::string(format_name(d.format)) + "\n";
  std::string head_a = head(a);
  ASSERT_NE(head_a.find("  buffer "), std::string::npos) << a;
  EXPECT_EQ(head_a.substr(head_a.find("  buffer "), head_a.find("  pool ") - head_a.find("  buffer ")), expected);
  EXPECT_EQ(placement(after), "a1@0 z@4096 c0@0 u@0 w@1536 _gemm_L0A@0 _gemm_L0B@0");
  // L1: a1 64x32 f16 (4096 B) then z 32x40 in Nz (32 x 48 x 2 = 3072 B); L0A/L0B/L0C: the gemm's
  // operands and c0 (64 x 48 x 4); UB: u 16x24 f32 (1536 B) then w (20 B rounded to 32).
  EXPECT_EQ(head_a.substr(head_a.find("  pool ")),
            "  pool AIC L1 +7168\n  pool AIC L0A +4096\n  pool AIC L0B +3072\n  pool AIC L0C +12288\n  pool AIV UB +1568");
  EXPECT_EQ(print_program(plan_memory(after, chip(), /*reuse=*/false)), a);  // idempotent
}

// Mmad with a run-time init (k == 0) accumulates: acc is read before it is written in the body,
// so it keeps its bytes for the whole loop; tmp and tmp2 (init = true every iteration) share.
TEST(PlanMemory, MmadAccumulatorIsLoopCarried) {
  const char* text = R"(kernel g(A: global float16[64, 64], B: global float16[64, 64], C: global float32[64, 64] out)
    grid(cid = 1) sub_block(vid) {
  alloc a0: L0A float16[64, 64]
  alloc b0: L0B float16[64, 64]
  alloc acc: L0C float32[64, 64]
  alloc tmp: L0C float32[64, 64]
  alloc tmp2: L0C float32[64, 64]
  scope C {
    for k in serial(0, 4) {
      gemm a0, b0 -> tmp clear=true
      copy tmp -> C
      if k == 0 {
        gemm a0, b0 -> acc clear=true
      } else {
        gemm a0, b0 -> acc clear=false
      }
      copy acc -> C
      gemm a0, b0 -> tmp2 clear=true
      copy tmp2 -> C
    }
  }
}
)";
  EXPECT_EQ(placement(plan(text, true)), "a0@0 b0@0 acc@0 tmp@16384 tmp2@16384");
}

TEST(PlanMemory, AlignmentAndTileBytes) {
  EXPECT_EQ(buffer_alignment(Mem::L1), 32);
  EXPECT_EQ(buffer_alignment(Mem::L0A), 512);
  EXPECT_EQ(buffer_alignment(Mem::L0B), 512);
  EXPECT_EQ(buffer_alignment(Mem::L0C), 1024);
  EXPECT_EQ(buffer_alignment(Mem::UB), 32);
  ir::DType f16{ir::DTypeCode::f16}, f32{ir::DTypeCode::f32};
  EXPECT_EQ(tile_bytes(Mem::UB, f32, {5}), 32);                  // 20 B rounded up to 32
  EXPECT_EQ(tile_bytes(Mem::UB, f16, {3, 16}), 96);
  EXPECT_EQ(tile_bytes(Mem::UB, f32, {3, 5}), 3 * 8 * 4);  // rows padded to 32 B (select_instructions' layout)
  EXPECT_EQ(tile_bytes(Mem::L1, f16, {20, 40}), 32 * 48 * 2);    // Nz: rows to 16, cols to C0 = 16
  EXPECT_EQ(tile_bytes(Mem::L0A, f32, {20, 12}), 32 * 16 * 4);   // Zz: cols to C0 = 8
  EXPECT_EQ(tile_bytes(Mem::L0B, f32, {12, 20}), 16 * 32 * 4);   // Zn: rows to C0, cols to 16
  EXPECT_EQ(tile_bytes(Mem::L0C, f32, {2, 20, 20}), 2 * 32 * 32 * 4);
  // UB offsets are 32-byte aligned although the tile sizes are not multiples of 32 B.
  std::string text = std::string(kHead) +
                     "  alloc m: UB float32[5]\n  alloc n: UB float32[5]\n  alloc x: UB float32[5, 8]\n"
                     "  scope V {\n    fill m = 0.0\n    fill n = 1.0\n    fill x = 2.0\n"
                     "    copy m -> Y[0:+1, 0:+5]\n    copy n -> Y[1:+1, 0:+5]\n    copy x -> Y[0:+5, 0:+8]\n  }\n}\n";
  EXPECT_EQ(placement(plan(text, false)), "m@0 n@32 x@64");
  EXPECT_EQ(placement(plan(text, true)), "m@160 n@192 x@0");
}

// ---- what reuse saves on row-wise kernels ----

// An 8 x 1024 float32 row map in UB (one vector instruction per statement, as legalize_vector
// produces), followed by a V barrier.
std::string rowmap(const std::string& dst, const std::string& rhs) {
  return "      for i in parallel(0, 8) {\n        for j in parallel(0, 1024) {\n          " + dst + "[i, j] = " +
         rhs + "\n        }\n      }\n      sync pipe_barrier(V)\n";
}

// Runs a kernel Y = f(X) over a 64 x 1024 float32 X on the simulator; returns Y.
std::vector<float> run_rows(const Program& p, std::vector<float> x) {
  std::vector<float> y(x.size(), 0.0f);
  auto r = sim::run(select_move_calls(select_vector_calls(p, chip()), chip()), chip().ascend,
                    {sim::Arg{reinterpret_cast<uint8_t*>(x.data()), static_cast<int64_t>(x.size() * 4)},
                     sim::Arg{reinterpret_cast<uint8_t*>(y.data()), static_cast<int64_t>(y.size() * 4)}});
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  return y;
}

std::vector<float> test_input() {
  std::vector<float> x(64 * 1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(((i * 7919) % 1000) / 250.0 - 2.0);
  return x;
}

// Head and tail of a row-tile loop: 2 blocks x 4 tiles of 8 rows; the flags at the end order the
// next iteration's load after this one's store (the reused bytes are written again).
const char* kRowsHead = R"(kernel rows(X: global float32[64, 1024], Y: global float32[64, 1024] out) grid(cid = 2) sub_block(vid) {
  alloc x: UB float32[8, 1024]
)";
const char* kRowsLoop = R"(  scope V {
    for t in serial(0, 4) {
      let r0: int32 = cid * 32 + t * 8
      copy X[r0:+8, 0:+1024] -> x
      sync set_flag(MTE2, V, 0)
      sync wait_flag(MTE2, V, 0)
)";
std::string rows_tail(const std::string& out) {
  return "      sync set_flag(V, MTE3, 0)\n      sync wait_flag(V, MTE3, 0)\n      copy " + out +
         " -> Y[r0:+8, 0:+1024]\n      sync set_flag(MTE3, MTE2, 0)\n      sync wait_flag(MTE3, MTE2, 0)\n"
         "    }\n  }\n}\n";
}

// Softmax: x, x - max, exp, / sum: four 32 KiB tiles and two row vectors. With reuse at most two
// tiles are live at once: UB use halves (131136 B -> 65568 B), and the program, run with the
// reuse, computes softmax with no checker report.
TEST(PlanMemory, SoftmaxLikeReuseHalvesUB) {
  std::string text = std::string(kRowsHead) +
                     "  alloc m: UB float32[8]\n  alloc xm: UB float32[8, 1024]\n  alloc e: UB float32[8, 1024]\n"
                     "  alloc s: UB float32[8]\n  alloc z: UB float32[8, 1024]\n" + kRowsLoop +
                     "      reduce max x -> m axis=1 clear=true\n      sync pipe_barrier(V)\n" +
                     rowmap("xm", "x[i, j] - m[i]") + rowmap("e", "exp(xm[i, j])") +
                     "      reduce sum e -> s axis=1 clear=true\n      sync pipe_barrier(V)\n" +
                     rowmap("z", "e[i, j] / s[i]") + rows_tail("z");
  EXPECT_EQ(used(plan(text, false), Mem::UB), 131136);
  Program p = plan(text, true);
  EXPECT_EQ(used(p, Mem::UB), 65568);
  EXPECT_EQ(placement(p), "x@0 m@65536 xm@32768 e@0 s@65536 z@32768");
  std::vector<float> x = test_input(), y = run_rows(p, x);
  for (int r = 0; r < 64; ++r) {
    double mx = -1e300, sum = 0;
    for (int c = 0; c < 1024; ++c) mx = std::max(mx, double(x[r * 1024 + c]));
    for (int c = 0; c < 1024; ++c) sum += std::exp(double(x[r * 1024 + c]) - mx);
    for (int c = 0; c < 1024; ++c)
      ASSERT_NEAR(y[r * 1024 + c], std::exp(double(x[r * 1024 + c]) - mx) / sum, 1e-6) << r << "," << c;
  }
}

// RMS norm: x, x*x, its row sums, rsqrt(mean + eps), x * that: three 32 KiB tiles, two live at
// once (98336 B -> 65568 B with reuse); run with the reuse, it matches the float64 reference.
TEST(PlanMemory, RmsNormLikeReuseSavesATile) {
  std::string text = std::string(kRowsHead) +
                     "  alloc sq: UB float32[8, 1024]\n  alloc ss: UB float32[8]\n  alloc y: UB float32[8, 1024]\n" +
                     kRowsLoop + rowmap("sq", "x[i, j] * x[i, j]") +
                     "      reduce sum sq -> ss axis=1 clear=true\n      sync pipe_barrier(V)\n"
                     "      for i in parallel(0, 8) {\n        ss[i] = ss[i] * 0.0009765625\n      }\n"
                     "      sync pipe_barrier(V)\n"
                     "      for i in parallel(0, 8) {\n        ss[i] = ss[i] + 0.000001\n      }\n"
                     "      sync pipe_barrier(V)\n"
                     "      for i in parallel(0, 8) {\n        ss[i] = rsqrt(ss[i])\n      }\n"
                     "      sync pipe_barrier(V)\n" +
                     rowmap("y", "x[i, j] * ss[i]") + rows_tail("y");
  EXPECT_EQ(used(plan(text, false), Mem::UB), 98336);
  Program p = plan(text, true);
  EXPECT_EQ(used(p, Mem::UB), 65568);
  std::vector<float> x = test_input(), y = run_rows(p, x);
  for (int r = 0; r < 64; ++r) {
    double ss = 0;
    for (int c = 0; c < 1024; ++c) ss += double(x[r * 1024 + c]) * x[r * 1024 + c];
    double rs = 1.0 / std::sqrt(ss / 1024 + 1e-6);
    for (int c = 0; c < 1024; ++c) ASSERT_NEAR(y[r * 1024 + c], x[r * 1024 + c] * rs, 1e-5) << r << "," << c;
  }
}

// ---- capacity ----

void expect_error(const std::string& text, bool reuse, const std::string& msg, int line, const std::string& hint) {
  try {
    plan(text, reuse);
    ADD_FAILURE() << "expected an error containing '" << msg << "'";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find(msg), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, line) << e.what();
    EXPECT_EQ(e.span().file, "mem.tw") << e.what();
    EXPECT_NE(e.hint().find(hint), std::string::npos) << e.hint();
  }
}

// A 128x128 float32 map over one tile each: a -> b -> c -> d, each 64 KiB (four do not fit the
// 191.75 KiB UB, two do).
std::string map128(const std::string& dst, const std::string& rhs) {
  return "    for i in parallel(0, 128) {\n      for j in parallel(0, 128) {\n        " + dst + "[i, j] = " + rhs +
         "\n      }\n    }\n";
}

TEST(PlanMemory, ReuseFitsWhatBumpAllocationRejects) {
  std::string text = std::string(kHead) +
                     "  alloc a: UB float32[128, 128]\n  alloc b: UB float32[128, 128]\n"
                     "  alloc c: UB float32[128, 128]\n  alloc d: UB float32[128, 128]\n"
                     "  scope V {\n    copy X -> a\n" +
                     map128("b", "exp(a[i, j])") + map128("c", "b[i, j] * 2.0") + map128("d", "exp(c[i, j])") +
                     "    copy d -> Y\n  }\n}\n";
  expect_error(text, false,
               "UB overflow: a (128x128 float32, 65536 B), b (128x128 float32, 65536 B), c (128x128 float32, 65536 B), "
               "d (128x128 float32, 65536 B) need 262144 B but the AIV's UB on ascend910b2 holds 196352 B",
               3, "a smaller tile that fits: a 64x128, b 64x128, c 64x128, d 64x128 (131072 B)");
  Program p = plan(text, true);
  EXPECT_EQ(placement(p), "a@0 b@65536 c@0 d@65536");
  EXPECT_EQ(used(p, Mem::UB), 131072);
}

// With reuse the error names the buffers live together at the peak (not d, which comes later),
// the line where they are, and points at the biggest of them (b).
TEST(PlanMemory, CapacityErrorWithReuseNamesThePeak) {
  std::string text = std::string(kHead) +
                     "  alloc a: UB float32[128, 128]\n  alloc b: UB float32[128, 136]\n"
                     "  alloc c: UB float32[128, 128]\n  alloc d: UB float32[128, 128]\n"
                     "  scope V {\n    copy X -> a\n    copy X[0:+128, 0:+128] -> b[0:+128, 0:+128]\n" +
                     map128("c", "a[i, j] + b[i, j]") +
                     "    copy c -> Y\n    copy X -> d\n    copy d -> Y\n  }\n}\n";
  expect_error(text, true,
               "UB overflow: a (128x128 float32, 65536 B), b (128x136 float32, 69632 B), c (128x128 float32, 65536 B) "
               "are live together at line 12 and need 200704 B but the AIV's UB on ascend910b2 holds 196352 B",
               4, "a smaller tile that fits: a 64x128, b 64x136, c 64x128 (100352 B)");
}

TEST(PlanMemory, CubeCapacityError) {
  std::string text = std::string(kHead) + "  alloc a: L0A float16[256, 256]\n  scope C {\n  }\n}\n";
  expect_error(text, false,
               "L0A overflow: a (256x256 float16, 131072 B) need 131072 B but the AIC's L0A on ascend910b2 holds 65536 B",
               3, "a smaller tile that fits: a 128x256 (65536 B)");
}

}  // namespace
}  // namespace tw::ascend
