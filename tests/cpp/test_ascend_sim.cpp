// Tests of the Ascend program and the 910B simulator: programs are built directly in C++.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "ir/functor.h"
#include "target/ascend/program.h"
#include "target/ascend/program_parser.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/select_move_calls.h"
#include "target/ascend/select_vector_calls.h"
#include "target/ascend/simulator/machine.h"
#include "target/ascend/simulator/numeric.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

using ir::BinOp;
using ir::DTypeCode;
using ir::Expr;

// --- a small builder ------------------------------------------------------------------------

Expr C(int64_t v) { return ir::int_imm(v); }
Expr add(Expr a, Expr b) { return ir::binary(BinOp::Add, std::move(a), std::move(b)); }
Expr sub(Expr a, Expr b) { return ir::binary(BinOp::Sub, std::move(a), std::move(b)); }
Expr mul(Expr a, Expr b) { return ir::binary(BinOp::Mul, std::move(a), std::move(b)); }
Expr mod(Expr a, Expr b) { return ir::binary(BinOp::Mod, std::move(a), std::move(b)); }
Expr fdiv(Expr a, Expr b) { return ir::binary(BinOp::FloorDiv, std::move(a), std::move(b)); }
Expr cdiv(Expr a, Expr b) { return ir::binary(BinOp::CeilDiv, std::move(a), std::move(b)); }
Expr min(Expr a, Expr b) { return ir::binary(BinOp::Min, std::move(a), std::move(b)); }
Expr eq(Expr a, Expr b) { return ir::binary(BinOp::EQ, std::move(a), std::move(b)); }
Expr r16(Expr a) { return mul(cdiv(std::move(a), C(16)), C(16)); }

ir::Span L(int line) {
  ir::Span s;
  s.file = "kernel.py";
  s.line = line;
  s.col = 5;
  return s;
}

struct Builder {
  Program p;
  std::vector<std::vector<StmtPtr>> stack{{}};
  explicit Builder(std::string name, KernelType t) {
    p.name = std::move(name);
    p.kernel_type = t;
    p.block_idx = ir::var("block_idx");
    p.sub_block_idx = ir::var("sub_block_idx");
    p.span = L(1);
  }
  int tensor(std::string name, DTypeCode dt, std::vector<int64_t> shape, bool out = false) {
    KernelParam k;
    k.name = std::move(name);
    k.dtype = dt;
    for (auto d : shape) k.shape.push_back(C(d));
    k.is_output = out;
    p.params.push_back(k);
    return static_cast<int>(p.params.size() - 1);
  }
  int buffer(std::string name, CoreType core, Mem mem, int64_t offset, int64_t bytes, DTypeCode dt, int line = 0) {
    BufferDecl b;
    b.name = std::move(name), b.core = core, b.mem = mem, b.offset = offset, b.bytes = bytes, b.dtype = dt;
    b.span = L(line);
    p.buffers.push_back(b);
    return static_cast<int>(p.buffers.size() - 1);
  }
  void emit(InstrOp op, int line) { stack.back().push_back(instr(std::move(op), L(line))); }
  void let(const ir::Var& v, Expr e) { stack.back().push_back(ascend::let(v, std::move(e))); }
  template <class F>
  void loop(const ir::Var& v, Expr extent, F body) {
    stack.emplace_back();
    body();
    auto b = seq(std::move(stack.back()));
    stack.pop_back();
    stack.back().push_back(for_(v, std::move(extent), b));
  }
  StmtPtr take() {
    auto s = seq(std::move(stack.back()));
    stack.back().clear();
    return s;
  }
  void set(Pipe s, Pipe d, Expr e, int line) { emit(SetFlag{s, d, std::move(e)}, line); }
  void wait(Pipe s, Pipe d, Expr e, int line) { emit(WaitFlag{s, d, std::move(e)}, line); }
};

LocalRef at(int buf, Expr off = C(0)) { return LocalRef{buf, std::move(off)}; }
GmRef gm(int param, Expr off) { return GmRef{param, std::move(off)}; }
VecOperand vo(int buf, int64_t stride, Expr off = C(0)) { return VecOperand{at(buf, std::move(off)), C(stride)}; }

const target::AscendParams& b2() { return target::find_target("ascend910b2").ascend; }
// Hand-built programs hold high-level vector instructions and byte-level moves: select the calls
// first, as the pipeline does.
Program calls(const Program& p) {
  const auto& t = target::find_target("ascend910b2");
  return select_move_calls(select_vector_calls(p, t), t);
}
sim::Result run_sim(const Program& p, const target::AscendParams& chip, std::vector<sim::Arg> args,
                    const std::vector<int64_t>& shape_values = {}, const sim::Options& options = {}) {
  return sim::run(calls(p), chip, std::move(args), shape_values, options);
}

// --- the fp16 GEMM: GM -> L1 (Nz) -> L0A/L0B (double buffered) -> Mmad -> Fixpipe -> GM --------

// C[M,N] (fp16) = A[M,K] (fp16) * B[K,N] (fp16), fp32 accumulation. Tiles bm x bn, k-step bk;
// `blocks` AI Cores take tiles round-robin. L1 and L0 are double buffered by the k step parity.
Program make_gemm(int64_t M, int64_t N, int64_t K, int64_t bm, int64_t bn, int64_t bk, int64_t blocks) {
  Builder b("gemm", KernelType::AIC_ONLY);
  int A = b.tensor("A", DTypeCode::f16, {M, K}), B = b.tensor("B", DTypeCode::f16, {K, N});
  int Cg = b.tensor("C", DTypeCode::f16, {M, N}, true);
  int64_t a_bytes = bm * bk * 2, b_bytes = bk * bn * 2;
  int a1 = b.buffer("a_l1", CoreType::AIC, Mem::L1, 0, 2 * a_bytes, DTypeCode::f16, 10);
  int b1 = b.buffer("b_l1", CoreType::AIC, Mem::L1, 2 * a_bytes, 2 * b_bytes, DTypeCode::f16, 11);
  int a0 = b.buffer("a_l0", CoreType::AIC, Mem::L0A, 0, 2 * a_bytes, DTypeCode::f16, 12);
  int b0 = b.buffer("b_l0", CoreType::AIC, Mem::L0B, 0, 2 * b_bytes, DTypeCode::f16, 13);
  int c0 = b.buffer("c_l0", CoreType::AIC, Mem::L0C, 0, bm * bn * 4, DTypeCode::f32, 14);
  int64_t MT = (M + bm - 1) / bm, NT = (N + bn - 1) / bn, KT = (K + bk - 1) / bk;
  b.p.block_dim = C(blocks);
  Expr bi = b.p.block_idx;
  auto it = ir::var("it"), kk = ir::var("kk"), tile = ir::var("tile"), tm = ir::var("tm"), tn = ir::var("tn");
  auto mv = ir::var("mv"), nv = ir::var("nv"), kv = ir::var("kv"), ping = ir::var("ping");
  b.set(Pipe::MTE1, Pipe::MTE2, C(0), 20);
  b.set(Pipe::MTE1, Pipe::MTE2, C(1), 20);
  b.set(Pipe::M, Pipe::MTE1, C(0), 21);
  b.set(Pipe::M, Pipe::MTE1, C(1), 21);
  b.loop(it, cdiv(sub(C(MT * NT), bi), C(blocks)), [&] {
    b.let(tile, add(bi, mul(it, C(blocks))));
    b.let(tm, fdiv(tile, C(NT)));
    b.let(tn, mod(tile, C(NT)));
    b.let(mv, min(C(bm), sub(C(M), mul(tm, C(bm)))));
    b.let(nv, min(C(bn), sub(C(N), mul(tn, C(bn)))));
    b.loop(kk, C(KT), [&] {
      b.let(ping, mod(kk, C(2)));
      b.let(kv, min(C(bk), sub(C(K), mul(kk, C(bk)))));
      b.wait(Pipe::MTE1, Pipe::MTE2, ping, 30);
      b.emit(CopyGmToL1{gm(A, mul(add(mul(mul(tm, C(bm)), C(K)), mul(kk, C(bk))), C(2))), at(a1, mul(ping, C(a_bytes))),
                        DTypeCode::f16, mv, kv, C(K), C(bm), C(bk)},
             31);
      b.emit(CopyGmToL1{gm(B, mul(add(mul(mul(kk, C(bk)), C(N)), mul(tn, C(bn))), C(2))), at(b1, mul(ping, C(b_bytes))),
                        DTypeCode::f16, kv, nv, C(N), C(bk), C(bn)},
             32);
      b.set(Pipe::MTE2, Pipe::MTE1, ping, 33);
      b.wait(Pipe::MTE2, Pipe::MTE1, ping, 33);
      b.wait(Pipe::M, Pipe::MTE1, ping, 34);
      b.emit(LoadL0{at(a1, mul(ping, C(a_bytes))), at(a0, mul(ping, C(a_bytes))), DTypeCode::f16, C(bm), C(0), C(0),
                    r16(mv), r16(kv), false},
             35);
      b.emit(LoadL0{at(b1, mul(ping, C(b_bytes))), at(b0, mul(ping, C(b_bytes))), DTypeCode::f16, C(bk), C(0), C(0),
                    r16(kv), r16(nv), true},
             36);
      b.set(Pipe::MTE1, Pipe::MTE2, ping, 37);
      b.set(Pipe::MTE1, Pipe::M, ping, 38);
      b.wait(Pipe::MTE1, Pipe::M, ping, 38);
      // accumulating into fewer than 10 fractals of L0C needs PipeBarrier<PIPE_M> (Mmad docs)
      b.stack.back().push_back(if_(ir::binary(BinOp::And, ir::binary(BinOp::GT, kk, C(0)),
                                              ir::binary(BinOp::LT, mul(cdiv(mv, C(16)), cdiv(nv, C(16))), C(10))),
                                   instr(PipeBarrier{Pipe::M}, L(39))));
      b.emit(Mmad{at(a0, mul(ping, C(a_bytes))), at(b0, mul(ping, C(b_bytes))), at(c0), DTypeCode::f16, DTypeCode::f32,
                  mv, nv, kv, eq(kk, C(0))},
             39);
      b.set(Pipe::M, Pipe::MTE1, ping, 40);
    });
    b.set(Pipe::M, Pipe::FIX, C(0), 42);
    b.wait(Pipe::M, Pipe::FIX, C(0), 42);
    b.emit(Fixpipe{at(c0), gm(Cg, mul(add(mul(mul(tm, C(bm)), C(N)), mul(tn, C(bn))), C(2))), DTypeCode::f32,
                   DTypeCode::f16, mv, nv, r16(mv), C(N), false},
           43);
    b.set(Pipe::FIX, Pipe::M, C(0), 44);
    b.wait(Pipe::FIX, Pipe::M, C(0), 44);
  });
  b.wait(Pipe::MTE1, Pipe::MTE2, C(0), 50);
  b.wait(Pipe::MTE1, Pipe::MTE2, C(1), 50);
  b.wait(Pipe::M, Pipe::MTE1, C(0), 51);
  b.wait(Pipe::M, Pipe::MTE1, C(1), 51);
  b.p.aic = b.take();
  return b.p;
}

std::vector<uint16_t> random_f16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = sim::num::f32_to_f16(d(rng));
  return v;
}

sim::Arg arg(std::vector<uint16_t>& v) { return sim::Arg{reinterpret_cast<uint8_t*>(v.data()), static_cast<int64_t>(v.size() * 2)}; }
sim::Arg arg(std::vector<float>& v) { return sim::Arg{reinterpret_cast<uint8_t*>(v.data()), static_cast<int64_t>(v.size() * 4)}; }

void check_gemm(int64_t M, int64_t N, int64_t K, const std::vector<uint16_t>& a, const std::vector<uint16_t>& bm,
                const std::vector<uint16_t>& c) {
  int bad = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k)
        ref += static_cast<double>(sim::num::f16_to_f32(a[i * K + k])) * sim::num::f16_to_f32(bm[k * N + j]);
      double got = sim::num::f16_to_f32(c[i * N + j]);
      if (std::fabs(got - ref) > 2e-3 * std::max(1.0, std::fabs(ref)) + 1e-3 && bad++ < 5)
        ADD_FAILURE() << "C[" << i << "][" << j << "] = " << got << ", expected " << ref;
    }
  EXPECT_EQ(bad, 0);
}

TEST(AscendProgram, PrinterShowsBuffersFlagsAndLines) {
  Program p = make_gemm(100, 70, 40, 64, 64, 32, 2);
  std::string text = print_program(p);
  EXPECT_NE(text.find("ascend_kernel gemm AIC_ONLY blocks=2"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer a_l0: AIC L0A @0 +8192 float16"), std::string::npos) << text;
  EXPECT_NE(text.find("MTE2 CopyGmToL1 a_l1["), std::string::npos) << text;
  EXPECT_NE(text.find("MTE1 WaitFlag<M_MTE1>(ping)  @34"), std::string::npos) << text;
  EXPECT_NE(text.find("M Mmad c_l0[0] <- a_l0["), std::string::npos) << text;
  EXPECT_NE(text.find("for kk in range(2):"), std::string::npos) << text;
}

TEST(AscendSim, MultiCoreGemmWithTailsMatchesReference) {
  const int64_t M = 200, N = 170, K = 150;  // tails in every dimension
  Program p = make_gemm(M, N, K, 64, 64, 32, 5);
  auto a = random_f16(M * K, 1), bm = random_f16(K * N, 2);
  std::vector<uint16_t> c(M * N, 0);
  auto r = run_sim(p, b2(), {arg(a), arg(bm), arg(c)});
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  check_gemm(M, N, K, a, bm, c);
  EXPECT_EQ(r.aic_used, 5);
  EXPECT_GT(r.total_cycles, 0);
  EXPECT_NEAR(r.flops, 2.0 * M * N * K, 1);
  EXPECT_GT(r.busy_pct[0][static_cast<int>(Pipe::M)], 0);
}

TEST(AscendSim, MoreBlocksThanCoresRunInWaves) {
  const int64_t M = 96, N = 96, K = 64;
  Program p = make_gemm(M, N, K, 16, 16, 32, 36);  // 36 blocks on 24 AICs
  auto a = random_f16(M * K, 3), bm = random_f16(K * N, 4);
  std::vector<uint16_t> c(M * N, 0);
  auto r = run_sim(p, b2(), {arg(a), arg(bm), arg(c)});
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  EXPECT_EQ(r.aic_used, 24);
  check_gemm(M, N, K, a, bm, c);
}

TEST(AscendSim, TimingOnlyModeGivesTheSameTimeWithoutTouchingData) {
  const int64_t M = 256, N = 256, K = 256;
  Program p = make_gemm(M, N, K, 128, 128, 64, 4);
  auto a = random_f16(M * K, 5), bm = random_f16(K * N, 6);
  std::vector<uint16_t> c(M * N, 0);
  auto full = run_sim(p, b2(), {arg(a), arg(bm), arg(c)});
  std::vector<uint16_t> c2(M * N, 0);
  sim::Options o;
  o.functional = false;
  o.check = false;
  auto t = run_sim(p, b2(), {arg(a), arg(bm), arg(c2)}, {}, o);
  EXPECT_EQ(t.total_cycles, full.total_cycles);
  EXPECT_EQ(c2, std::vector<uint16_t>(M * N, 0));
  EXPECT_NE(c, c2);
}

// Data effects on worker threads (functional_queue.h) give the bits of the calling thread alone,
// run after run and for any thread count: the multi-core gemm (waves, tails) ...
TEST(AscendSimThreads, GemmBitsAreTheSameForEveryThreadCount) {
  const int64_t M = 200, N = 170, K = 150;
  for (int64_t blocks : {5, 36}) {
    Program p = make_gemm(M, N, K, 32, 64, 32, blocks);
    auto a = random_f16(M * K, 11), bm = random_f16(K * N, 12);
    std::vector<uint16_t> want(M * N, 0);
    sim::Options one;
    one.threads = 1;
    auto r1 = run_sim(p, b2(), {arg(a), arg(bm), arg(want)}, {}, one);
    EXPECT_TRUE(r1.reports.empty()) << r1.summary();
    check_gemm(M, N, K, a, bm, want);
    for (int threads : {2, 3, 5, 8, 2}) {
      std::vector<uint16_t> got(M * N, 0);
      sim::Options o;
      o.threads = threads;
      auto r = run_sim(p, b2(), {arg(a), arg(bm), arg(got)}, {}, o);
      EXPECT_EQ(got, want) << threads << " threads, " << blocks << " blocks";
      EXPECT_EQ(r.total_cycles, r1.total_cycles);
      EXPECT_EQ(r.summary(), r1.summary());
    }
  }
}

// ... and a race on GM between cores: every block reads X, copies what it read to its row of Y,
// then overwrites X with its block index. What each block reads is decided by the scheduler's
// order; the workers must keep it (the race is reported, the same way for every count).
Program gm_relay(int64_t blocks) {
  Builder b("relay", KernelType::AIV_ONLY);
  int X = b.tensor("X", DTypeCode::f32, {8}, true), Y = b.tensor("Y", DTypeCode::f32, {blocks * 8}, true);
  int x = b.buffer("x", CoreType::AIV, Mem::UB, 0, 32, DTypeCode::f32, 10);
  int v = b.buffer("v", CoreType::AIV, Mem::UB, 32, 32, DTypeCode::f32, 11);
  b.p.block_dim = C(blocks);
  Expr bi = b.p.block_idx;
  b.emit(CopyGmToUb{gm(X, C(0)), at(x), DTypeCode::f32, C(1), C(32), C(32), C(32)}, 20);
  b.set(Pipe::MTE2, Pipe::V, C(0), 21);
  b.wait(Pipe::MTE2, Pipe::V, C(0), 21);
  b.emit(VecDup{DTypeCode::f32, vo(v, 8), bi, C(1), C(8)}, 22);
  b.set(Pipe::V, Pipe::MTE3, C(0), 23);
  b.wait(Pipe::V, Pipe::MTE3, C(0), 23);
  b.emit(CopyUbToGm{at(x), gm(Y, mul(bi, C(32))), DTypeCode::f32, C(1), C(32), C(32), C(32)}, 24);
  b.emit(CopyUbToGm{at(v), gm(X, C(0)), DTypeCode::f32, C(1), C(32), C(32), C(32)}, 25);
  b.p.aiv = b.take();
  return b.p;
}

TEST(AscendSimThreads, RacingGmAccessesKeepTheSchedulersOrder) {
  const int64_t blocks = 40;  // 40 AIVs, 2 waves on some
  Program p = gm_relay(blocks);
  std::vector<float> x1(8, -1.f), y1(blocks * 8, -2.f);
  sim::Options one;
  one.threads = 1;
  auto r1 = run_sim(p, b2(), {arg(x1), arg(y1)}, {}, one);
  ASSERT_TRUE(r1.has(sim::ReportKind::Race)) << r1.summary();
  int relayed = 0;  // rows that saw another block's write
  for (int64_t i = 0; i < blocks; ++i) relayed += y1[i * 8] >= 0;
  EXPECT_GT(relayed, 0);
  for (int threads : {2, 3, 4, 7}) {
    std::vector<float> x(8, -1.f), y(blocks * 8, -2.f);
    sim::Options o;
    o.threads = threads;
    auto r = run_sim(p, b2(), {arg(x), arg(y)}, {}, o);
    EXPECT_EQ(x, x1) << threads << " threads";
    EXPECT_EQ(y, y1) << threads << " threads";
    EXPECT_EQ(r.summary(), r1.summary());
  }
}

TEST(AscendSimThreads, NegativeThreadCountIsAnError) {
  Program p = gm_relay(2);
  std::vector<float> x(8), y(16);
  sim::Options o;
  o.threads = -1;
  try {
    run_sim(p, b2(), {arg(x), arg(y)}, {}, o);
    FAIL() << "no error";
  } catch (const ir::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Options::threads must be 0 (TW_NUM_THREADS) or a thread count >= 1"),
              std::string::npos) << e.what();
  }
}

// Options::cancel (intr31): polled between the scheduler's rounds. Set before the run: the run stops
// at once with an error naming the cancel; present but never set: the same result as without it.
TEST(AscendSim, CancelFlagStopsTheRunAndAnUnsetOneChangesNothing) {
  const int64_t M = 96, N = 80, K = 64;
  Program p = make_gemm(M, N, K, 32, 32, 32, 3);
  auto a = random_f16(M * K, 11), bm = random_f16(K * N, 12);
  std::vector<uint16_t> c(M * N, 0), c2(M * N, 0);
  std::atomic<bool> cancel{true};
  sim::Options o;
  o.cancel = &cancel;
  try {
    run_sim(p, b2(), {arg(a), arg(bm), arg(c)}, {}, o);
    FAIL() << "no error";
  } catch (const ir::Error& e) {
    EXPECT_NE(std::string(e.what()).find("was cancelled (Options::cancel)"), std::string::npos) << e.what();
  }
  cancel = false;
  auto with = run_sim(p, b2(), {arg(a), arg(bm), arg(c)}, {}, o);
  auto without = run_sim(p, b2(), {arg(a), arg(bm), arg(c2)});
  EXPECT_TRUE(with.reports.empty()) << with.summary();
  EXPECT_EQ(with.total_cycles, without.total_cycles);
  EXPECT_EQ(c, c2);
  check_gemm(M, N, K, a, bm, c);
}

// The documented Mmad example: fp16 m=128 n=256 k=512 in 8 steps of k=64; published measured
// 4209-4225 cycles (ascend-910b.md, "Cube").
Program mmad_example(int64_t blocks) {
  Builder b("mmad_example", KernelType::AIC_ONLY);
  int a0 = b.buffer("a", CoreType::AIC, Mem::L0A, 0, 128 * 64 * 2, DTypeCode::f16);
  int b0 = b.buffer("b", CoreType::AIC, Mem::L0B, 0, 64 * 256 * 2, DTypeCode::f16);
  int c0 = b.buffer("c", CoreType::AIC, Mem::L0C, 0, 128 * 256 * 4, DTypeCode::f32);
  b.p.block_dim = C(blocks);
  auto s = ir::var("s");
  b.loop(s, C(8), [&] {
    b.emit(Mmad{at(a0), at(b0), at(c0), DTypeCode::f16, DTypeCode::f32, C(128), C(256), C(64), eq(s, C(0))}, 5);
  });
  b.p.aic = b.take();
  return b.p;
}

TEST(AscendSim, MmadExampleMatchesPublishedCycles) {
  auto r = run_sim(mmad_example(1), b2(), {});
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  // the published cycles are the Mmad loop's, measured inside the kernel: without the launch
  // and the block's start (the kernel start costs, tested in KernelStartCostsAreCharged)
  const int64_t loop = r.total_cycles - std::llround(b2().launch_overhead_us * b2().clock_mhz) - b2().block_start_cycles;
  const double measured = (4209 + 4225) / 2.0;
  EXPECT_NEAR(static_cast<double>(loop), measured, 0.05 * measured) << r.summary();
  std::printf("[ mmad example ] simulated %lld cycles, published measured 4209-4225\n",
              static_cast<long long>(loop));
}

// The kernel launch overhead is paid once, the block start cost by every block on its core: 48
// blocks on the 24 AICs run in two waves, so two block starts lie on the critical path.
TEST(AscendSim, KernelStartCostsAreCharged) {
  target::AscendParams free_start = b2();
  free_start.launch_overhead_us = 0;
  free_start.block_start_cycles = 0;
  const int64_t launch = std::llround(b2().launch_overhead_us * b2().clock_mhz);  // 18000 at 1800 MHz
  ASSERT_GT(launch, 0);
  ASSERT_GT(b2().block_start_cycles, 0);
  for (int64_t blocks : {1, 24, 48}) {
    Program p = mmad_example(blocks);
    auto with = run_sim(p, b2(), {}), without = run_sim(p, free_start, {});
    EXPECT_TRUE(with.reports.empty()) << with.summary();
    int64_t waves = (blocks + 23) / 24;
    EXPECT_EQ(with.total_cycles - without.total_cycles,
              launch + waves * b2().block_start_cycles) << blocks << " blocks";
  }
}

// --- vector kernel: row softmax on UB ---------------------------------------------------------

Program make_softmax(int64_t R, int64_t Cc, int64_t rows_per_block, int line_overflow = 0) {
  Builder b("softmax", KernelType::AIV_ONLY);
  int X = b.tensor("X", DTypeCode::f32, {R, Cc}), Y = b.tensor("Y", DTypeCode::f32, {R, Cc}, true);
  int64_t Cp = (Cc + 7) / 8 * 8;  // row stride in UB: 32 B multiple
  int64_t tile = rows_per_block * Cp * 4;
  int x = b.buffer("x_ub", CoreType::AIV, Mem::UB, 0, line_overflow ? 200000 : tile, DTypeCode::f32, line_overflow);
  int mx = b.buffer("max_ub", CoreType::AIV, Mem::UB, tile, 256, DTypeCode::f32);
  int sm = b.buffer("sum_ub", CoreType::AIV, Mem::UB, tile + 256, 256, DTypeCode::f32);
  b.p.block_dim = C((R + rows_per_block - 1) / rows_per_block);
  Expr bi = b.p.block_idx;
  auto rv = ir::var("rv");
  b.let(rv, min(C(rows_per_block), sub(C(R), mul(bi, C(rows_per_block)))));
  auto cols = C(Cc);
  b.emit(CopyGmToUb{gm(X, mul(mul(bi, C(rows_per_block * Cc)), C(4))), at(x), DTypeCode::f32, rv, C(Cc * 4), C(Cc * 4),
                    C(Cp * 4)},
         60);
  b.set(Pipe::MTE2, Pipe::V, C(0), 61);
  b.wait(Pipe::MTE2, Pipe::V, C(0), 61);
  b.emit(VecReduce{ReduceOp::Max, ReduceAxis::Row, DTypeCode::f32, vo(mx, 1), vo(x, Cp), rv, cols}, 62);
  b.emit(PipeBarrier{Pipe::V}, 63);
  b.emit(VecRowBroadcast{VecBinOp::Sub, DTypeCode::f32, vo(x, Cp), vo(x, Cp), at(mx), rv, cols}, 64);
  b.emit(PipeBarrier{Pipe::V}, 65);
  b.emit(VecUnary{VecUnOp::Exp, DTypeCode::f32, vo(x, Cp), vo(x, Cp), rv, cols}, 66);
  b.emit(PipeBarrier{Pipe::V}, 67);
  b.emit(VecReduce{ReduceOp::Sum, ReduceAxis::Row, DTypeCode::f32, vo(sm, 1), vo(x, Cp), rv, cols}, 68);
  b.emit(PipeBarrier{Pipe::V}, 69);
  b.emit(VecRowBroadcast{VecBinOp::Div, DTypeCode::f32, vo(x, Cp), vo(x, Cp), at(sm), rv, cols}, 70);
  b.set(Pipe::V, Pipe::MTE3, C(0), 71);
  b.wait(Pipe::V, Pipe::MTE3, C(0), 71);
  b.emit(CopyUbToGm{at(x), gm(Y, mul(mul(bi, C(rows_per_block * Cc)), C(4))), DTypeCode::f32, rv, C(Cc * 4), C(Cp * 4),
                    C(Cc * 4)},
         72);
  b.p.aiv = b.take();
  return b.p;
}

TEST(AscendSim, SoftmaxRowsOnUbMatchesReference) {
  const int64_t R = 50, Cc = 100;
  Program p = make_softmax(R, Cc, 16);
  std::vector<float> x(R * Cc), y(R * Cc, 0);
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0, 3);
  for (auto& v : x) v = d(rng);
  auto r = run_sim(p, b2(), {arg(x), arg(y)});
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  EXPECT_EQ(r.aiv_used, 4);
  for (int64_t i = 0; i < R; ++i) {
    double mx = -1e30, s = 0;
    for (int64_t j = 0; j < Cc; ++j) mx = std::max(mx, static_cast<double>(x[i * Cc + j]));
    for (int64_t j = 0; j < Cc; ++j) s += std::exp(x[i * Cc + j] - mx);
    for (int64_t j = 0; j < Cc; ++j) ASSERT_NEAR(y[i * Cc + j], std::exp(x[i * Cc + j] - mx) / s, 1e-6) << i << "," << j;
  }
}

TEST(AscendSim, Fp16RoundingIsNearestEven) {
  using sim::num::f16_to_f32;
  using sim::num::f32_to_f16;
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.f), 0x7c00);                 // tie rounds to even (inf)
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);      // tie -> even
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);      // tie -> even (up)
  EXPECT_EQ(f32_to_f16(5.9604645e-08f), 0x0001);          // smallest subnormal
  EXPECT_EQ(f32_to_f16(2.9802322e-08f), 0x0000);          // half of it: tie to even (0)
  for (uint32_t h = 0; h < 0x7c00; ++h) ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h);
  EXPECT_EQ(sim::num::f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);  // tie -> even
  uint8_t buf[2];
  sim::num::store(buf, DTypeCode::f16, 1.0 + 1.0 / 4096, RoundMode::Ceil);
  uint16_t h;
  std::memcpy(&h, buf, 2);
  EXPECT_EQ(h, 0x3c01);
}

// --- the broken-kernel corpus ----------------------------------------------------------------

const sim::Report* find(const sim::Result& r, sim::ReportKind k) {
  for (const auto& x : r.reports)
    if (x.kind == k) return &x;
  return nullptr;
}

// AIV: GM -> UB copy, then an Abs on it, optionally with the MTE2 -> V flag.
Program small_vec(bool with_flag, int64_t ub_offset = 0, int64_t copy_rows = 4, Pipe set_src = Pipe::MTE2,
                  Pipe set_dst = Pipe::V) {
  Builder b("small", KernelType::AIV_ONLY);
  int X = b.tensor("X", DTypeCode::f32, {4, 64});
  int Y = b.tensor("Y", DTypeCode::f32, {4, 64}, true);
  int x = b.buffer("x_ub", CoreType::AIV, Mem::UB, 0, 4096, DTypeCode::f32);
  b.p.block_dim = C(1);
  b.emit(CopyGmToUb{gm(X, C(0)), at(x, C(ub_offset)), DTypeCode::f32, C(copy_rows), C(256), C(256), C(256)}, 80);
  if (with_flag) {
    b.set(set_src, set_dst, C(0), 81);
    b.wait(Pipe::MTE2, Pipe::V, C(0), 82);
  }
  b.emit(VecUnary{VecUnOp::Abs, DTypeCode::f32, vo(x, 64, C(ub_offset)), vo(x, 64, C(ub_offset)), C(4), C(64)}, 83);
  b.set(Pipe::V, Pipe::MTE3, C(0), 84);
  b.wait(Pipe::V, Pipe::MTE3, C(0), 84);
  b.emit(CopyUbToGm{at(x, C(ub_offset)), gm(Y, C(0)), DTypeCode::f32, C(4), C(256), C(256), C(256)}, 85);
  b.p.aiv = b.take();
  return b.p;
}

sim::Result run_small(const Program& p) {
  static std::vector<float> x(256, -1.f), y(256, 0);
  return run_sim(p, b2(), {arg(x), arg(y)});
}

TEST(AscendSimBroken, CorrectSmallKernelIsClean) {
  auto r = run_small(small_vec(true));
  EXPECT_TRUE(r.reports.empty()) << r.summary();
}

TEST(AscendSimBroken, MissingFlagIsARaceEvenWhenTimingHidesIt) {
  auto r = run_small(small_vec(false));
  const sim::Report* rep = find(r, sim::ReportKind::Race);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("V on AIV 0 reads AIV 0 UB bytes [0, 1024) written by MTE2"), std::string::npos)
      << rep->message;
  EXPECT_NE(rep->message.find("SetFlag<MTE2_V>"), std::string::npos) << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 83);
  EXPECT_EQ(rep->instrs.at(1).span.line, 80);
  EXPECT_NE(rep->format().find("kernel.py:83: race:"), std::string::npos) << rep->format();
}

TEST(AscendSimBroken, WrongFlagPair) {
  // SetFlag<MTE2_FIX> does not exist on the AIV; the WaitFlag<MTE2_V> then never returns.
  auto r = run_small(small_vec(true, 0, 4, Pipe::MTE2, Pipe::FIX));
  const sim::Report* rep = find(r, sim::ReportKind::IllegalFlagPair);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("MTE2 -> FIX is not a legal flag pair on the AIV"), std::string::npos) << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 81);
  const sim::Report* dl = find(r, sim::ReportKind::Deadlock);
  ASSERT_NE(dl, nullptr) << r.summary();
  EXPECT_EQ(dl->instrs.at(0).span.line, 82);
}

TEST(AscendSimBroken, MismatchedFlagPairDeadlocks) {
  auto r = run_small(small_vec(true, 0, 4, Pipe::MTE2, Pipe::MTE3));  // set MTE2_MTE3, wait MTE2_V
  const sim::Report* dl = find(r, sim::ReportKind::Deadlock);
  ASSERT_NE(dl, nullptr) << r.summary();
  EXPECT_NE(dl->message.find("WaitFlag<MTE2_V>(0)"), std::string::npos) << dl->message;
  EXPECT_EQ(dl->instrs.at(0).span.line, 82);
  EXPECT_NE(find(r, sim::ReportKind::UnmatchedSetFlag), nullptr) << r.summary();
}

TEST(AscendSimBroken, UbOverflow) {
  Program p = make_softmax(16, 64, 16, /*line_overflow=*/90);
  std::vector<float> x(16 * 64, 1.f), y(16 * 64);
  auto r = run_sim(p, b2(), {arg(x), arg(y)});
  const sim::Report* rep = find(r, sim::ReportKind::Capacity);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("buffer x_ub needs UB bytes [0, 200000) but UB has 196352 usable bytes"), std::string::npos)
      << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 90);
}

TEST(AscendSimBroken, MisalignedAddress) {
  auto r = run_small(small_vec(true, /*ub_offset=*/16));
  const sim::Report* rep = find(r, sim::ReportKind::Misaligned);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("address 16 in UB (buffer x_ub (UB)) is not 32-byte aligned"), std::string::npos)
      << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 80);
}

TEST(AscendSimBroken, OutOfBoundsCopy) {
  auto r = run_small(small_vec(true, 0, /*copy_rows=*/5));
  const sim::Report* rep = find(r, sim::ReportKind::OutOfBounds);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("source reads bytes [0, 1280) of GM tensor X, which has 1024 bytes"), std::string::npos)
      << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 80);
}

// GM -> UB of 4 rows of 3 floats (12 B) into rows 32 B apart, then the whole 32 B rows back to
// Y (4 x 8). row_bytes / dst_stride may be broken on purpose.
Program short_rows(bool pad, int64_t row_bytes = 12, int64_t out_stride = 32, int64_t blocks = 1) {
  Builder b("short_rows", KernelType::AIV_ONLY);
  int X = b.tensor("X", DTypeCode::f32, {4, 3});
  int Y = b.tensor("Y", DTypeCode::f32, {4, 8}, true);
  int x = b.buffer("x_ub", CoreType::AIV, Mem::UB, 0, 128, DTypeCode::f32);
  b.p.block_dim = C(blocks);
  // runtime values: broken ones reach the simulator (select_move_calls checks only constants)
  auto rb = ir::var("row_bytes"), os = ir::var("out_stride");
  b.let(rb, C(row_bytes));
  b.let(os, C(out_stride));
  CopyGmToUb in{gm(X, C(0)), at(x), DTypeCode::f32, C(4), rb, C(12), C(32)};
  in.pad = pad;
  b.emit(in, 70);
  b.set(Pipe::MTE2, Pipe::MTE3, C(0), 71);
  b.wait(Pipe::MTE2, Pipe::MTE3, C(0), 71);
  b.emit(CopyUbToGm{at(x), gm(Y, C(out_stride < 0 ? 96 : 0)), DTypeCode::f32, C(4), C(32), C(32), os}, 72);
  b.p.aiv = b.take();
  return b.p;
}

sim::Result run_short_rows(const Program& p, std::vector<float>& y) {
  std::vector<float> x(12, 1.f);
  y.assign(32, -5.f);
  return run_sim(p, b2(), {arg(x), arg(y)});
}

TEST(AscendSimBroken, DataCopyPadWritesDummyBytesUpTo32BUnlessPadded) {
  std::vector<float> y;
  for (bool pad : {false, true}) {
    auto r = run_short_rows(short_rows(pad), y);
    if (pad) {
      ASSERT_TRUE(r.reports.empty()) << r.summary();
    } else {  // copying out the unspecified bytes is reported (session 30), and they are garbage
      ASSERT_EQ(r.reports.size(), 1u) << r.summary();
      EXPECT_EQ(r.reports[0].kind, sim::ReportKind::UninitRead) << r.summary();
    }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 8; ++j) {
        float v = y[i * 8 + j];
        if (j < 3) EXPECT_EQ(v, 1.f);
        else if (pad) EXPECT_EQ(v, 0.f) << i << "," << j;         // zero padding
        else EXPECT_GT(std::fabs(v), 1e30f) << i << "," << j;     // garbage, not the UB's zeros
      }
  }
}

TEST(AscendSimBroken, NegativeSizeIsReportedNotExecuted) {
  std::vector<float> y;
  auto r = run_short_rows(short_rows(false, /*row_bytes=*/-144), y);
  const sim::Report* rep = find(r, sim::ReportKind::InvalidInstr);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("source has a negative size (4 rows of -144 bytes)"), std::string::npos) << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 70);
}

TEST(AscendSimBroken, NegativeStrideOutOfBoundsIsReported) {
  // rows walk downwards from byte 96 by 64 B: the last row starts at -96
  std::vector<float> y;
  auto r = run_short_rows(short_rows(true, 12, /*out_stride=*/-64), y);
  const sim::Report* rep = find(r, sim::ReportKind::OutOfBounds);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("destination writes bytes [-96, 128) of GM tensor Y"), std::string::npos) << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 72);
}

TEST(AscendSim, ZeroBlocksLaunchNothing) {
  std::vector<float> y;
  auto r = run_short_rows(short_rows(true, 12, 32, /*blocks=*/0), y);
  // no block writes the output, so all of it is an `unwritten output` (session 39), and nothing else
  ASSERT_EQ(r.reports.size(), 1u) << r.summary();
  EXPECT_EQ(r.reports[0].kind, sim::ReportKind::UnwrittenOutput) << r.summary();
  EXPECT_EQ(r.total_cycles, 0);
  EXPECT_EQ(r.instructions, 0);
  for (float v : y) EXPECT_EQ(v, -5.f);
}

// MIX: the AIC signals the AIVs `sets` times; the AIVs answer each signal. With `reply` the AIC
// also waits for an answer before each signal, first (no credit), so both sides wait: deadlock.
Program cross_kernel(int sets, bool reply) {
  Builder b("cross", KernelType::MIX_1_2);
  b.p.block_dim = C(1);
  auto i = ir::var("i"), j = ir::var("j");
  b.loop(i, C(sets), [&] {
    if (reply) b.emit(CrossCoreWaitFlag{C(1), Pipe::S}, 99);
    b.emit(CrossCoreSetFlag{2, Pipe::S, C(0)}, 100);
  });
  b.p.aic = b.take();
  b.loop(j, C(sets), [&] {
    b.emit(CrossCoreWaitFlag{C(0), Pipe::S}, 101);
    b.emit(CrossCoreSetFlag{2, Pipe::S, C(1)}, 102);
  });
  b.p.aiv = b.take();
  return b.p;
}

TEST(AscendSimBroken, CrossFlagOverflow) {
  auto r = run_sim(cross_kernel(20, false), b2(), {});
  const sim::Report* rep = find(r, sim::ReportKind::CrossFlagOverflow);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("cross-core flag 0 of AIV 0 has 16 pending sets"), std::string::npos) << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 100);
}

TEST(AscendSimBroken, CrossCoreDeadlock) {
  // Both sides wait first: the AIC for flag 1, the AIVs for flag 0.
  auto r = run_sim(cross_kernel(3, true), b2(), {});
  const sim::Report* rep = find(r, sim::ReportKind::Deadlock);
  ASSERT_NE(rep, nullptr) << r.summary();
  ASSERT_GE(rep->instrs.size(), 3u);
  EXPECT_EQ(rep->instrs[0].span.line, 99);
  EXPECT_EQ(rep->instrs[1].span.line, 101);
  EXPECT_NE(rep->message.find("AIC 0: S CrossCoreWaitFlag<S>(1)"), std::string::npos) << rep->message;
}

TEST(AscendSimBroken, SamePipeDependenceNeedsBarrier) {
  Program p = make_softmax(16, 64, 16);
  // drop the barrier between the subtraction and the exp (the one between the max reduction and
  // the row broadcast is not needed: the broadcast's calls start with a barrier before they reuse
  // the scratch area)
  auto body = std::const_pointer_cast<Stmt>(p.aiv);
  std::vector<StmtPtr> kept;
  for (auto& s : body->body)
    if (!(s->kind == StmtKind::Instr && s->instr.span.line == 65)) kept.push_back(s);
  body->body = kept;
  std::vector<float> x(16 * 64, 1.f), y(16 * 64);
  auto r = run_sim(p, b2(), {arg(x), arg(y)});
  const sim::Report* rep = find(r, sim::ReportKind::SamePipeHazard);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("PipeBarrier<PIPE_V>"), std::string::npos) << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 66);
  EXPECT_EQ(rep->instrs.at(1).span.line, 64);
}

// --- trace -----------------------------------------------------------------------------------

// Minimal JSON syntax check (objects, arrays, strings, numbers, literals).
struct Json {
  const std::string& s;
  size_t i = 0;
  void ws() { while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i; }
  bool value() {
    ws();
    if (i >= s.size()) return false;
    char c = s[i];
    if (c == '{') {
      ++i; ws();
      if (s[i] == '}') return ++i, true;
      while (true) {
        ws();
        if (!string()) return false;
        ws();
        if (s[i++] != ':') return false;
        if (!value()) return false;
        ws();
        if (s[i] == ',') { ++i; continue; }
        return s[i++] == '}';
      }
    }
    if (c == '[') {
      ++i; ws();
      if (s[i] == ']') return ++i, true;
      while (true) {
        if (!value()) return false;
        ws();
        if (s[i] == ',') { ++i; continue; }
        return s[i++] == ']';
      }
    }
    if (c == '"') return string();
    if (s.compare(i, 4, "true") == 0 || s.compare(i, 4, "null") == 0) return i += 4, true;
    if (s.compare(i, 5, "false") == 0) return i += 5, true;
    size_t st = i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || std::strchr("+-.eE", s[i]))) ++i;
    return i > st;
  }
  bool string() {
    if (s[i] != '"') return false;
    for (++i; i < s.size(); ++i) {
      if (s[i] == '\\') { ++i; continue; }
      if (s[i] == '"') return ++i, true;
    }
    return false;
  }
};

TEST(AscendSim, TraceIsValidJsonWithOneTrackPerCorePipe) {
  Program p = make_gemm(128, 128, 128, 64, 64, 64, 2);
  auto a = random_f16(128 * 128, 8), bm = random_f16(128 * 128, 9);
  std::vector<uint16_t> c(128 * 128);
  sim::Options o;
  o.trace = true;
  auto r = run_sim(p, b2(), {arg(a), arg(bm), arg(c)}, {}, o);
  std::string j = r.trace_json();
  Json parser{j};
  ASSERT_TRUE(parser.value()) << "invalid JSON near offset " << parser.i;
  parser.ws();
  EXPECT_EQ(parser.i, j.size());
  EXPECT_NE(j.find("\"name\":\"AIC 1\""), std::string::npos);
  EXPECT_NE(j.find("\"name\":\"Mmad\",\"cat\":\"M\",\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(j.find("\"line\":39"), std::string::npos);
  EXPECT_FALSE(r.trace.empty());
  std::string sum = r.summary();
  EXPECT_NE(sum.find("Cube utilisation"), std::string::npos) << sum;
  EXPECT_NE(sum.find("checker: no problems found"), std::string::npos) << sum;
}

// --- speed of the simulator itself (printed; tests never assert on timings) ------------------

TEST(AscendSimSpeed, Gemm1024CheckedWithArithmetic) {
  const int64_t n = 1024;
  Program p = make_gemm(n, n, n, 128, 256, 64, 24);
  auto a = random_f16(n * n, 10), bm = random_f16(n * n, 11);
  std::vector<uint16_t> c(n * n);
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_sim(p, b2(), {arg(a), arg(bm), arg(c)});
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  std::printf("[ speed ] 1024^3 fp16 gemm, 910B2, arithmetic + checking: %.2f s wall\n%s", s, r.summary().c_str());
  // spot check
  for (int64_t i : {0L, 517L, 1023L}) {
    double ref = 0;
    for (int64_t k = 0; k < n; ++k) ref += static_cast<double>(sim::num::f16_to_f32(a[i * n + k])) * sim::num::f16_to_f32(bm[k * n + 1000]);
    EXPECT_NEAR(sim::num::f16_to_f32(c[i * n + 1000]), ref, 2e-2);
  }
}

TEST(AscendSimSpeed, Gemm8192TimingOnly) {
  const int64_t n = 8192;
  Program p = make_gemm(n, n, n, 128, 256, 64, 24);
  sim::Options o;
  o.functional = false;
  o.check = false;
  std::vector<sim::Arg> args(3);
  for (auto& x : args) x.bytes = n * n * 2;
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_sim(p, b2(), args, {}, o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  std::printf("[ speed ] 8192^3 fp16 gemm, 910B2, timing only: %.2f s wall\n%s", s, r.summary().c_str());
}

// --- documented AscendC API rules (simulator/api_rules.h; issue 10) ---------------------------

// One AIV instruction on a small UB buffer pair (no data dependences, so only API rules report).
// `lets` bind variables first: a field computed from them is a runtime value (not checked by
// select_move_calls, checked by the simulator).
sim::Result run_aiv(const std::vector<std::pair<InstrOp, int>>& ops, int64_t ub_bytes = 65536,
                    const std::vector<std::pair<ir::Var, int64_t>>& lets = {}) {
  Builder b("rule", KernelType::AIV_ONLY);
  b.tensor("X", DTypeCode::f32, {64, 64});
  b.buffer("u0", CoreType::AIV, Mem::UB, 0, ub_bytes, DTypeCode::f32);
  b.buffer("u1", CoreType::AIV, Mem::UB, ub_bytes, 8192, DTypeCode::f32);
  b.p.block_dim = C(1);
  for (const auto& [v, value] : lets) b.let(v, C(value));
  for (const auto& [op, line] : ops) b.emit(op, line);
  b.p.aiv = b.take();
  static std::vector<float> x(64 * 64, 1.f);
  return run_sim(b.p, b2(), {arg(x)});
}

const sim::Report* api_report(const sim::Result& r, const std::string& text) {
  for (const auto& x : r.reports)
    if (x.kind == sim::ReportKind::ApiRule && x.message.find(text) != std::string::npos) return &x;
  return nullptr;
}

TEST(AscendSimApiRules, WideningCastAcceptsOnlyCastNone) {
  auto cast = [](RoundMode m) {
    return std::pair<InstrOp, int>{VecCast{DTypeCode::f32, DTypeCode::f16, m, vo(1, 64), vo(0, 64), C(4), C(64)}, 50};
  };
  auto bad = run_aiv({cast(RoundMode::Rint)});
  const sim::Report* rep = api_report(bad, "accepts only CAST_NONE");
  ASSERT_NE(rep, nullptr) << bad.summary();
  EXPECT_NE(rep->message.find("Cast from float16 to float32 with RoundMode::CAST_RINT"), std::string::npos) << rep->message;
  EXPECT_NE(rep->format().find("kernel.py:50: API rule:"), std::string::npos) << rep->format();
  EXPECT_TRUE(run_aiv({cast(RoundMode::None)}).reports.empty());
  EXPECT_EQ(cast_round_mode(DTypeCode::f32, DTypeCode::bf16), RoundMode::None);
  EXPECT_EQ(cast_round_mode(DTypeCode::f16, DTypeCode::i8), RoundMode::None);
  EXPECT_EQ(cast_round_mode(DTypeCode::f16, DTypeCode::f32), RoundMode::Rint);
  EXPECT_EQ(cast_round_mode(DTypeCode::i32, DTypeCode::f32), RoundMode::Trunc);
}

// hunt9b F11 (h-ascfix9d): a Cast int32_t -> half is vconv_deq on dav-c220 (Cast.md table 4: used with
// SetDeqScale; the round mode has no effect), scaled by a register Tilewright never sets: reported in
// any mode. float / half -> int32_t have no CAST_NONE form (dav_c220 vconv_impl: nothing issued).
TEST(AscendSimApiRules, Int32ToHalfDequantizesAndFloatToInt32NeedsAMode) {
  auto cast = [](DTypeCode dst, DTypeCode src, RoundMode m) {
    return std::pair<InstrOp, int>{VecCast{dst, src, m, vo(1, 64), vo(0, 64), C(4), C(64)}, 60};
  };
  for (RoundMode m : {RoundMode::None, RoundMode::Rint}) {
    auto deq = run_aiv({cast(DTypeCode::f16, DTypeCode::i32, m)});
    const sim::Report* rep = api_report(deq, "vconv_deq");
    ASSERT_NE(rep, nullptr) << deq.summary();
    EXPECT_NE(rep->format().find("kernel.py:60: API rule: Cast from int32 to float16: on dav-c220 this is vconv_deq"),
              std::string::npos) << rep->format();
  }
  EXPECT_TRUE(cast_dequantizes(DTypeCode::f16, DTypeCode::i32));
  EXPECT_FALSE(cast_dequantizes(DTypeCode::f32, DTypeCode::i32));
  EXPECT_FALSE(cast_dequantizes(DTypeCode::i32, DTypeCode::f16));
  for (DTypeCode src : {DTypeCode::f32, DTypeCode::f16}) {
    auto none = run_aiv({cast(DTypeCode::i32, src, RoundMode::None)});
    ASSERT_NE(api_report(none, "has no CAST_NONE form"), nullptr) << none.summary();
    // (the UB's 0x7B bytes as float32 are past int32: only the API rules are looked at)
    auto trunc = run_aiv({cast(DTypeCode::i32, src, RoundMode::Trunc)});
    for (const auto& r : trunc.reports) EXPECT_NE(r.kind, sim::ReportKind::ApiRule) << r.format();
  }
  EXPECT_TRUE(run_aiv({cast(DTypeCode::f32, DTypeCode::i32, RoundMode::Rint)}).reports.empty());
}

// dav-c220 has Casts for some pairs only; the others are chained (legalize_vector lowers them so,
// expert mode names the chain in its error).
TEST(AscendSimApiRules, CastPairsAndChains) {
  using D = DTypeCode;
  EXPECT_TRUE(cast_pair_available(D::f16, D::f32));
  EXPECT_TRUE(cast_pair_available(D::i32, D::bf16));
  EXPECT_FALSE(cast_pair_available(D::bf16, D::i32));
  EXPECT_FALSE(cast_pair_available(D::i8, D::f32));
  EXPECT_FALSE(cast_pair_available(D::i8, D::i32));
  EXPECT_FALSE(cast_pair_available(D::f16, D::i32));  // a dequantizing Cast (SetDeqScale), not a conversion
  EXPECT_TRUE(cast_pair_available(D::i32, D::f16));
  auto names = [](D dst, D src) {
    std::string out;
    for (ir::DType t : cast_chain(dst, src)) out += std::string(t.name()) + " ";
    return out;
  };
  EXPECT_EQ(names(D::i8, D::f32), "int32 float32 float16 int8 ");
  EXPECT_EQ(names(D::f32, D::u8), "float16 float32 ");
  EXPECT_EQ(names(D::f16, D::bf16), "float32 float16 ");
  EXPECT_EQ(names(D::bf16, D::i8), "float16 float32 bfloat16 ");
  EXPECT_EQ(names(D::f16, D::i32), "float32 float16 ");
  EXPECT_EQ(names(D::f32, D::f32), "");
  // every step of every chain between the vector dtypes is a Cast dav-c220 has (int -> int8 aside)
  for (D a : {D::f32, D::f16, D::bf16, D::i32, D::i8, D::u8})
    for (D b : {D::f32, D::f16, D::bf16, D::i32, D::i8, D::u8}) {
      if ((b == D::i8 || b == D::u8) && (a == D::i32 || a == D::i8 || a == D::u8)) continue;
      ir::DType prev = a;
      for (ir::DType t : cast_chain(b, a)) {
        EXPECT_TRUE(cast_pair_available(t, prev)) << ir::DType(a).name() << " -> " << ir::DType(b).name();
        prev = t;
      }
    }
}

// int32 vector arithmetic is exact while it fits; a result outside int32 is an `int32 overflow`
// report at the line (dav-c220 does not document wrap or saturation), not a stored guess. The UB
// starts as 0x7B bytes: int32 2071690107.
TEST(AscendSim, Int32OverflowIsAReport) {
  auto adds = [](int64_t v) {
    return std::pair<InstrOp, int>{
        VecBinaryScalar{VecBinOp::Add, DTypeCode::i32, vo(1, 64), vo(0, 64), ir::int_imm(v, DTypeCode::i32), C(4), C(64)},
        70};
  };
  EXPECT_TRUE(run_aiv({adds(75793540)}).reports.empty());  // 2071690107 + 75793540 = 2^31 - 1
  auto bad = run_aiv({adds(75793541)});
  ASSERT_EQ(bad.reports.size(), 1u) << bad.summary();
  EXPECT_EQ(bad.reports[0].kind, sim::ReportKind::IntOverflow);
  EXPECT_NE(bad.reports[0].format().find("kernel.py:70: int32 overflow: int32 Adds gives 2147483648"),
            std::string::npos)
      << bad.reports[0].format();
}

// Session 30 (h-i32guard): a scalar + - * or unary - of int32 values prints as C++ arithmetic in int, so
// a result outside int32 is signed overflow (undefined behaviour) where the simulator computes in int64;
// widen_scalars proves every such node stays in int32 or widens it, so the simulator checks the proof:
// a node that leaves int32 is an `int32 overflow` report at its line, naming the expression and the value.
// A cast to int32 wraps (the language's store) and int64 arithmetic is not checked.
// a_value: the let a's value; c_div: every `//`, `%` and ceildiv of f's expression is in
// Program::c_divisions (printed with C's / and %, as widen_scalars marks a provably non-negative one).
sim::Result run_scalar(const std::function<Expr(const Expr&)>& f, int64_t a_value = 2147483000, bool c_div = false) {
  Builder b("scalar", KernelType::AIV_ONLY);
  b.tensor("X", DTypeCode::f32, {64});
  b.p.block_dim = C(1);
  auto a = ir::var("a", DTypeCode::i32), r = ir::var("r", DTypeCode::i32);
  b.let(a, C(a_value));
  Expr e = f(a);
  if (c_div)
    ir::for_each_expr(e, [&](const Expr& x) {
      if (x->kind != ir::ExprKind::Binary) return;
      auto op = ir::as<ir::BinaryNode>(x)->op;
      if (op == BinOp::FloorDiv || op == BinOp::CeilDiv || op == BinOp::Mod) b.p.c_divisions.emplace(x.get(), x);
    });
  b.let(r, e);
  b.p.aiv = b.take();
  std::vector<float> x(64, 1.f);
  return sim::run(b.p, b2(), {arg(x)});
}

TEST(AscendSim, ScalarInt32OverflowIsAReport) {
  auto i32 = [](int64_t v) { return ir::int_imm(v, DTypeCode::i32); };
  auto bad = run_scalar([&](const Expr& a) { return ir::binary(BinOp::Add, a, i32(1000), L(33)); });
  ASSERT_EQ(bad.reports.size(), 1u) << bad.summary();
  EXPECT_EQ(bad.reports[0].kind, sim::ReportKind::IntOverflow);
  const std::string text = bad.reports[0].format();
  EXPECT_NE(text.find("kernel.py:33: int32 overflow: the scalar expression `a + 1000` (int32) is 2147484000"),
            std::string::npos) << text;
  EXPECT_NE(text.find("compiler bug"), std::string::npos) << text;
  // inside int32: no report (2147483000 + 647 = 2^31 - 1)
  EXPECT_TRUE(run_scalar([&](const Expr& a) { return ir::binary(BinOp::Add, a, i32(647), L(33)); }).reports.empty());
  // - and *, and unary - of a negative int32 sum
  auto neg = run_scalar([&](const Expr& a) { return ir::binary(BinOp::Sub, ir::unary(ir::UnOp::Neg, a, L(34)), i32(1000), L(35)); });
  ASSERT_EQ(neg.reports.size(), 1u) << neg.summary();
  EXPECT_NE(neg.reports[0].format().find("kernel.py:35:"), std::string::npos) << neg.reports[0].format();
  auto prod = run_scalar([&](const Expr& a) { return ir::binary(BinOp::Mul, a, i32(2), L(36)); });
  ASSERT_EQ(prod.reports.size(), 1u) << prod.summary();
  // int64 arithmetic cast back to int32 is the language's wrap (what widen_scalars prints): no report
  EXPECT_TRUE(run_scalar([&](const Expr& a) {
                return ir::cast(ir::binary(BinOp::Mul, ir::cast(a, DTypeCode::i64, L(37)), C(2), L(37)), DTypeCode::i32, L(37));
              }).reports.empty());
  // a literal outside int32 prints with LL: the C++ sum is long long, no report
  EXPECT_TRUE(run_scalar([&](const Expr& a) {
                return ir::cast(ir::binary(BinOp::Add, a, ir::int_imm(int64_t{1} << 32, DTypeCode::i32), L(38)), DTypeCode::i32, L(38));
              }).reports.empty());
}

// Session 31 (h-i32b): a `//`, `%` or ceildiv printed with C's truncating / and % (Program::c_divisions,
// widen_scalars' decision) reports a negative dividend at its line (truncation is not floor there); one
// printed through tw_floordiv / tw_floormod / tw_ceildiv does not. In int (int32 operands) it is checked
// as int arithmetic: ceildiv's sum a + b - 1, and the + - * above it.
TEST(AscendSim, CDivisionWithANegativeDividendIsAReport) {
  auto i32 = [](int64_t v) { return ir::int_imm(v, DTypeCode::i32); };
  auto op = [&](BinOp o, int line) { return [=](const Expr& a) { return ir::binary(o, a, i32(8), L(line)); }; };
  auto bad = run_scalar(op(BinOp::FloorDiv, 41), -5, true);
  ASSERT_EQ(bad.reports.size(), 1u) << bad.summary();
  EXPECT_EQ(bad.reports[0].kind, sim::ReportKind::NegativeDividend);
  const std::string text = bad.reports[0].format();
  EXPECT_NE(text.find("kernel.py:41: negative dividend: the scalar expression `a // 8` (int32) has the dividend -5 "
                      "here: the printed C++ computes it with C's `/`, which truncates toward zero (0) where the "
                      "language floors (-1)"),
            std::string::npos) << text;
  EXPECT_NE(text.find("compiler bug"), std::string::npos) << text;
  auto m = run_scalar(op(BinOp::Mod, 42), -5, true);  // C: -5, the language: 3
  ASSERT_EQ(m.reports.size(), 1u) << m.summary();
  EXPECT_NE(m.reports[0].format().find("kernel.py:42: negative dividend"), std::string::npos) << m.summary();
  EXPECT_NE(m.reports[0].format().find("truncates toward zero (-5) where the language floors (3)"), std::string::npos);
  auto c = run_scalar(op(BinOp::CeilDiv, 43), -12, true);  // C: (-12 + 7) / 8 = 0, the language: -1
  ASSERT_EQ(c.reports.size(), 1u) << c.summary();
  EXPECT_NE(c.reports[0].format().find("truncates toward zero (0) where the language floors (-1)"), std::string::npos);
  // a non-negative dividend: truncation is floor, no report; a negative one through the helpers: no report
  for (BinOp o : {BinOp::FloorDiv, BinOp::CeilDiv, BinOp::Mod}) {
    EXPECT_TRUE(run_scalar(op(o, 44), 5, true).reports.empty());
    EXPECT_TRUE(run_scalar(op(o, 44), -5, false).reports.empty());
  }
  // ceildiv in int: (a + 999) / 1000 with a = 2147483000 is int arithmetic past int32 (widen_scalars
  // widens such a dividend); the helper tw_ceildiv computes it in int64_t
  auto by1000 = [](const Expr& a) { return ir::binary(BinOp::CeilDiv, a, ir::int_imm(1000, DTypeCode::i32), L(45)); };
  auto sum = run_scalar(by1000, 2147483000, true);
  EXPECT_TRUE(run_scalar(by1000, 2147483000, false).reports.empty());
  ASSERT_EQ(sum.reports.size(), 1u) << sum.summary();
  EXPECT_EQ(sum.reports[0].kind, sim::ReportKind::IntOverflow);
  EXPECT_NE(sum.reports[0].format().find("`ceildiv(a, 1000)` (int32): its dividend sum `a + b - 1`, is 2147483999"),
            std::string::npos) << sum.summary();
  // the product above a C division of int operands is int arithmetic (checked); above tw_floordiv, int64_t
  auto prod = [&](const Expr& a) { return ir::binary(BinOp::Mul, ir::binary(BinOp::FloorDiv, a, i32(2), L(46)), i32(4), L(46)); };
  auto in_int = run_scalar(prod, 2147483000, true);
  ASSERT_EQ(in_int.reports.size(), 1u) << in_int.summary();
  EXPECT_EQ(in_int.reports[0].kind, sim::ReportKind::IntOverflow);
  EXPECT_TRUE(run_scalar(prod, 2147483000, false).reports.empty());
}

// The compiled scalar node: 40 bytes (56 in session 30; the checks' guard index shares `slot`).
TEST(AscendSim, CompiledScalarNodeIs40Bytes) { EXPECT_EQ(sizeof(sim::CNode), 40u); }

TEST(AscendSimApiRules, BurstCountIsOneTo4095AndZeroIsNoCall) {
  // 4096 rows of 4 B (X has 16 KiB): blockCount 4096 is out of range. A constant count is
  // select_move_calls' two calls (4095 rows and 1, session 25: no report), and so is a runtime count
  // whose UB tile holds more than 4095 rows (min(n, 4095) and min(n - 4095, 4095), hunt14 F1); a
  // DataCopyPad call whose blockCount is 4096 at run time is the simulator's report.
  auto copy = [](Expr n) { return CopyGmToUb{gm(0, C(0)), at(0), DTypeCode::f32, std::move(n), C(4), C(4), C(32)}; };
  auto two = run_aiv({{copy(C(4096)), 51}}, 131072);
  EXPECT_TRUE(two.reports.empty()) << two.summary();
  auto n = ir::var("n");
  auto two_rt = run_aiv({{copy(n), 51}}, 131072, {{n, 4096}});
  EXPECT_TRUE(two_rt.reports.empty()) << two_rt.summary();
  DataCopyPadGmToUb call{gm(0, C(0)), at(0), DTypeCode::f32, n, C(4), C(0), C(0), true, C(0), C(7), C(0)};
  auto big = run_aiv({{call, 51}}, 131072, {{n, 4096}});
  const sim::Report* rep = api_report(big, "blockCount 4096");
  ASSERT_NE(rep, nullptr) << big.summary();
  EXPECT_EQ(rep->instrs.at(0).span.line, 51);
  // a count <= 0 (the last AIV of a small M) is no call: select_move_calls guards it
  auto none = run_aiv({{CopyGmToUb{gm(0, C(0)), at(0), DTypeCode::f32, n, C(256), C(256), C(256)}, 52}}, 65536, {{n, -12}});
  EXPECT_TRUE(none.reports.empty()) << none.summary();
}

TEST(AscendSimApiRules, Level0RepeatStridesAreUint8) {
  // rows 4096 floats apart = 512 blocks of 32 B: no uint8 repeat stride reaches the next row, so
  // select_vector_calls issues one call per row (run-time strides that do not fit: the simulator's
  // API rule, SelectVectorCallsSim.RunTimeFieldOverflowIsAnApiRuleReport); every field in range
  EXPECT_TRUE(run_aiv({{VecUnary{VecUnOp::Abs, DTypeCode::f32, vo(0, 4096), vo(0, 4096), C(2), C(64)}, 53}}, 65536)
                  .reports.empty());
  // contiguous operands print the level-2 (count) form: no stride field
  EXPECT_TRUE(run_aiv({{VecUnary{VecUnOp::Abs, DTypeCode::f32, vo(0, 4096), vo(0, 4096), C(1), C(4096)}, 53}})
                  .reports.empty());
}

// Abs.md (Atlas A2): half / float only (hunt9b F6: the level-2 form's int32 check is a debug assert,
// so Abs<int32_t> compiles and issues vabs on int32 data): an API rule report at the line.
TEST(AscendSimApiRules, AbsTakesHalfOrFloatOnly) {
  auto abs = [](DTypeCode t) {
    return VecCallL2{VecApi::Abs, t, t, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{}, {}, RoundMode::None, C(64)};
  };
  for (DTypeCode t : {DTypeCode::f32, DTypeCode::f16}) {
    auto ok = run_aiv({{abs(t), 58}});
    EXPECT_EQ(api_report(ok, "Abs"), nullptr) << ok.summary();
  }
  auto r = run_aiv({{abs(DTypeCode::i32), 58}});
  const sim::Report* rep = api_report(r, "Abs (level-2) on int32: the API takes half or float only");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->format().find("kernel.py:58: API rule:"), std::string::npos) << rep->format();
  EXPECT_NE(rep->format().find("Max(x, Muls(x, -1))"), std::string::npos) << rep->format();
}

// Compare / Select (issue 13): the lowering's form (level-0 Compare into a 32 B aligned mask in the
// scratch area, level-2 Select) reports nothing; a level-2 Compare, an int32 Compare and a mask
// that is not 32 B aligned are API rule reports at the line.
TEST(AscendSimApiRules, CompareAndSelect) {
  const VecOperand none{LocalRef{}, C(0)};
  const ir::Expr zero = ir::float_imm(0.0, ir::DType(DTypeCode::f32));
  EXPECT_TRUE(run_aiv({{VecSelect{CmpMode::GT, DTypeCode::f32, DTypeCode::f32, vo(1, 64), vo(0, 64), none, vo(0, 64), none,
                                  zero, zero, C(4), C(64)}, 54}})
                  .reports.empty());
  EXPECT_TRUE(run_aiv({{VecSelect{CmpMode::NE, DTypeCode::f16, DTypeCode::f32, vo(1, 96), vo(0, 96), vo(0, 96),
                                  vo(1, 96), vo(1, 96), {}, {}, C(3), C(40)}, 54}})
                  .reports.empty());  // rows 96 apart: one pass per row
  VecCallL2 l2{VecApi::Compare, DTypeCode::f32, DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)},
               LocalRef{0, C(256)}, {}, RoundMode::None, C(64)};
  auto r = run_aiv({{l2, 55}});
  const sim::Report* rep = api_report(r, "level-2 (count) form needs count");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->format().find("kernel.py:55: API rule:"), std::string::npos) << rep->format();
  VecCallL0 i32{VecApi::Compare, DTypeCode::i32, DTypeCode::i32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{0, C(256)},
                {}, RoundMode::None, C(64), C(1), C(1), C(1), C(1), C(8), C(8), C(8)};
  r = run_aiv({{i32, 56}});
  EXPECT_NE(api_report(r, "takes half or float only"), nullptr) << r.summary();
  VecCallL2 sel{VecApi::SelectScalar, DTypeCode::f32, DTypeCode::f32, LocalRef{0, C(0)}, LocalRef{0, C(0)}, LocalRef{},
                zero, RoundMode::None, C(64)};
  sel.sel = LocalRef{1, C(8)};
  r = run_aiv({{sel, 57}});
  EXPECT_NE(api_report(r, "selMask must start 32 B aligned"), nullptr) << r.summary();
}

// CreateVecIndex (issue 13): the lowering's form (VecIndex: one level-2 call, or one per row of a
// tile whose rows are not contiguous) reports nothing; a destination that is not 32 B aligned, an
// element type the API does not take and the level-0 form are API rule reports at the line.
TEST(AscendSimApiRules, CreateVecIndex) {
  EXPECT_TRUE(run_aiv({{VecIndex{DTypeCode::i32, vo(1, 8), C(0), C(1), C(40)}, 60}}).reports.empty());
  EXPECT_TRUE(run_aiv({{VecIndex{DTypeCode::f32, vo(1, 16), C(3), C(4), C(10)}, 60}}).reports.empty());  // per row
  EXPECT_TRUE(run_aiv({{VecIndex{DTypeCode::f16, vo(1, 32), C(0), C(2), C(32)}, 60}}).reports.empty());
  VecCallL2 odd{VecApi::CreateVecIndex, DTypeCode::i32, DTypeCode::i32, LocalRef{1, C(8)}, {}, {}, C(0), RoundMode::None,
                C(16)};
  auto r = run_aiv({{odd, 61}});
  const sim::Report* rep = api_report(r, "dst must start 32 B aligned");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->format().find("kernel.py:61: API rule:"), std::string::npos) << rep->format();
  VecCallL2 u8{VecApi::CreateVecIndex, DTypeCode::u8, DTypeCode::u8, LocalRef{1, C(0)}, {}, {}, C(0), RoundMode::None,
               C(16)};
  r = run_aiv({{u8, 62}});
  EXPECT_NE(api_report(r, "takes int16/half/int32/float only"), nullptr) << r.summary();
  VecCallL0 l0{VecApi::CreateVecIndex, DTypeCode::i32, DTypeCode::i32, LocalRef{1, C(0)}, {}, {}, C(0), RoundMode::None,
               C(64), C(1), C(1), {}, {}, C(8), {}, {}};
  r = run_aiv({{l0, 63}});
  EXPECT_NE(api_report(r, "only the level-2 (count) form is modelled"), nullptr) << r.summary();
}

// int32 & and | (issue 13): And / Or on the int16 lanes of int32 buffers (program.h
// vec_api_lane_bytes). The lowering's forms (one level-2 call over contiguous rows, one per row of
// padded rows) report nothing; on any other dtype the call is an API rule report at the line (the
// API takes int16_t/uint16_t), and a level-0 mask counts 16-bit lanes (at most 128).
TEST(AscendSimApiRules, AndOrOnInt16LanesOfInt32) {
  EXPECT_TRUE(run_aiv({{VecBinary{VecBinOp::And, DTypeCode::i32, vo(1, 64), vo(0, 64), vo(0, 64), C(4), C(64)}, 64}})
                  .reports.empty());
  EXPECT_TRUE(run_aiv({{VecBinary{VecBinOp::Or, DTypeCode::i32, vo(1, 16), vo(0, 16), vo(1, 16), C(5), C(13)}, 64}})
                  .reports.empty());  // rows padded to 16 elements: one call per row
  VecCallL2 f32{VecApi::And, DTypeCode::f32, DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{0, C(256)},
                {}, RoundMode::None, C(128)};
  auto r = run_aiv({{f32, 65}});
  const sim::Report* rep = api_report(r, "takes int16_t/uint16_t lanes");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->format().find("kernel.py:65: API rule:"), std::string::npos) << rep->format();
  VecCallL0 wide{VecApi::Or, DTypeCode::i32, DTypeCode::i32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{0, C(256)},
                 {}, RoundMode::None, C(129), C(1), C(1), C(1), C(1), C(8), C(8), C(8)};
  EXPECT_FALSE(run_aiv({{wide, 66}}).reports.empty());
  wide.mask = C(128);
  EXPECT_TRUE(run_aiv({{wide, 66}}).reports.empty());
}

// Brcb's repeatTimes is uint8 (8 rows a repeat): a row broadcast over 2048 rows is two Brcb calls
// (2040 rows, then 8), every field in range.
TEST(AscendSimApiRules, BrcbOverMoreThan2040RowsIsSplit) {
  auto r = run_aiv({{VecRowBroadcast{VecBinOp::Add, DTypeCode::f32, vo(0, 8), vo(0, 8), at(1), C(2048), C(8)}, 54}});
  EXPECT_TRUE(r.reports.empty()) << r.summary();
}

TEST(AscendSimApiRules, PipeBarrierOnSIsAHardwareError) {
  auto r = run_aiv({{PipeBarrier{Pipe::S}, 56}});
  const sim::Report* rep = api_report(r, "PipeBarrier<PIPE_S> is a hardware error");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_EQ(rep->instrs.at(0).span.line, 56);
}

TEST(AscendSimApiRules, CrossCoreFlagIdsAre0To10) {
  auto r = run_aiv({{CrossCoreSetFlag{0, Pipe::V, C(11)}, 57}});
  const sim::Report* rep = find(r, sim::ReportKind::FlagIdOutOfRange);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("cross-core flag id 11 is out of range 0..10"), std::string::npos) << rep->message;
}

// AIC: one GM -> L1 copy and Mmads on small tiles.
struct CubeRig {
  Builder b{"cube", KernelType::AIC_ONLY};
  int A, l1, a0, b0, c0;
  CubeRig(int64_t cols = 64) {
    A = b.tensor("A", DTypeCode::f16, {64, cols});
    l1 = b.buffer("l1", CoreType::AIC, Mem::L1, 0, 65536, DTypeCode::f16);
    a0 = b.buffer("a0", CoreType::AIC, Mem::L0A, 0, 16384, DTypeCode::f16);
    b0 = b.buffer("b0", CoreType::AIC, Mem::L0B, 0, 16384, DTypeCode::f16);
    c0 = b.buffer("c0", CoreType::AIC, Mem::L0C, 0, 65536, DTypeCode::f32);
    b.p.block_dim = C(1);
  }
  Mmad mmad(int64_t m, int64_t n, bool init) {
    return Mmad{at(a0), at(b0), at(c0), DTypeCode::f16, DTypeCode::f32, C(m), C(n), C(16), ir::int_imm(init ? 1 : 0)};
  }
  sim::Result run(int64_t elems = 64 * 64) {
    b.p.aic = b.take();
    std::vector<uint16_t> a(static_cast<size_t>(elems), 0);
    return run_sim(b.p, b2(), {arg(a)});
  }
};

TEST(AscendSimApiRules, ShortMmadAccumulationsNeedAPipeMBarrier) {
  for (bool barrier : {false, true}) {
    CubeRig r;
    r.b.emit(r.mmad(32, 32, true), 60);
    if (barrier) r.b.emit(PipeBarrier{Pipe::M}, 61);
    r.b.emit(r.mmad(32, 32, false), 62);
    r.b.emit(r.mmad(64, 160, true), 63);   // 40 fractals: no barrier needed
    r.b.emit(r.mmad(64, 160, false), 64);
    auto res = r.run();
    const sim::Report* rep = api_report(res, "needs PipeBarrier<PIPE_M> between them");
    if (barrier) {
      EXPECT_EQ(rep, nullptr) << res.summary();
    } else {
      ASSERT_NE(rep, nullptr) << res.summary();
      EXPECT_NE(rep->message.find("ceil(m/16) * ceil(n/16) = 4 < 10"), std::string::npos) << rep->message;
      EXPECT_EQ(rep->instrs.at(0).span.line, 62);
      EXPECT_EQ(res.reports.size(), 1u) << res.summary();
    }
  }
}

TEST(AscendSimApiRules, MmadWithOneRowIsGemv) {
  CubeRig r;
  r.b.emit(r.mmad(1, 16, true), 65);
  auto res = r.run();
  ASSERT_NE(api_report(res, "m = 1 runs as GEMV"), nullptr) << res.summary();
}

// session 15's rule audit: no bfloat16 / 8-bit arithmetic on the AIV, no 8-bit Duplicate
TEST(AscendSimApiRules, VectorCallsHaveNoBf16Or8BitArithmetic) {
  auto call = [](VecApi api, DTypeCode t) {
    return VecCallL2{api, t, t, LocalRef{1, C(0)}, LocalRef{0, C(0)},
                     api == VecApi::Add ? LocalRef{0, C(256)} : LocalRef{}, C(1), RoundMode::None, C(64)};
  };
  for (auto [api, t, bad] : {std::tuple{VecApi::Add, DTypeCode::bf16, true}, std::tuple{VecApi::Muls, DTypeCode::i8, true},
                             std::tuple{VecApi::Duplicate, DTypeCode::u8, true}, std::tuple{VecApi::Add, DTypeCode::f16, false},
                             std::tuple{VecApi::Duplicate, DTypeCode::bf16, false}, std::tuple{VecApi::Add, DTypeCode::i32, false}}) {
    auto r = run_aiv({{call(api, t), 64}});
    const sim::Report* rep = api_report(r, "the Vector core has no");
    if (bad) {
      ASSERT_NE(rep, nullptr) << r.summary();
      EXPECT_NE(rep->format().find("kernel.py:64: API rule:"), std::string::npos) << rep->format();
    } else {
      EXPECT_EQ(rep, nullptr) << r.summary();
    }
  }
}

// session 15's rule audit: L0C is 64 B aligned in general, but an Mmad destination starts on a
// 1 KiB boundary (ascend-910b.md, buffer table); only the memory alignment (64 B) was checked
TEST(AscendSimApiRules, MmadDestinationStartsOnAKibibyte) {
  for (int64_t off : {0, 512, 2048, 64}) {
    CubeRig r;
    r.b.emit(Mmad{at(r.a0), at(r.b0), at(r.c0, C(off)), DTypeCode::f16, DTypeCode::f32, C(16), C(16), C(16),
                  ir::int_imm(1)},
             66);
    auto res = r.run();
    const sim::Report* rep = api_report(res, "the destination must start on a 1 KiB boundary");
    if (off % 1024 == 0) {
      EXPECT_EQ(rep, nullptr) << res.summary();
    } else {
      ASSERT_NE(rep, nullptr) << res.summary();
      EXPECT_NE(rep->message.find("Mmad writes L0C at address " + std::to_string(off)), std::string::npos)
          << rep->message;
      EXPECT_EQ(rep->instrs.at(0).span.line, 66);
    }
  }
}

// session 15's rule audit: LoadData2D's ifTranspose is documented for uint16/int16/half only
// (Load2D.md); select_move_calls transposes bfloat16 fractals through a half view
TEST(AscendSimApiRules, TransposingLoadData2DTakesHalf) {
  for (auto dt : {DTypeCode::f16, DTypeCode::bf16}) {
    CubeRig r;
    r.b.emit(LoadData2D{at(r.l1), at(r.a0), dt, C(0), C(1), C(1), C(0), C(0), true}, 67);
    auto res = r.run();
    const sim::Report* rep = api_report(res, "the transposing load is documented for uint16_t, int16_t and half only");
    if (dt == DTypeCode::f16) {
      EXPECT_EQ(rep, nullptr) << res.summary();
    } else {
      ASSERT_NE(rep, nullptr) << res.summary();
      EXPECT_EQ(rep->instrs.at(0).span.line, 67);
    }
  }
}

TEST(AscendSimApiRules, Int8InitConstValueIsANoOpOnTheDevice) {
  for (auto fill : {DTypeCode::i8, DTypeCode::f16}) {
    Builder b("cube", KernelType::AIC_ONLY);
    int A = b.tensor("A", DTypeCode::i8, {20, 64});
    int l1 = b.buffer("l1", CoreType::AIC, Mem::L1, 0, 32 * 64, DTypeCode::i8);
    b.p.block_dim = C(1);
    // 20 x 64 int8 rows into a 32 x 64 Nz tile: the tail rows are zeroed first
    b.emit(CopyGmToL1{gm(A, C(0)), at(l1), DTypeCode::i8, C(20), C(64), C(64), C(32), C(64), fill}, 66);
    b.p.aic = b.take();
    std::vector<uint16_t> a(20 * 64 / 2, 0);
    if (fill == DTypeCode::i8) {  // select_move_calls refuses it at the line
      try {
        calls(b.p);
        ADD_FAILURE() << "an 8-bit InitConstValue must be an error";
      } catch (const ir::Error& e) {
        EXPECT_NE(std::string(e.what()).find("no 8-bit InitConstValue"), std::string::npos) << e.what();
        EXPECT_EQ(e.span().line, 66);
      }
    } else {
      auto res = sim::run(calls(b.p), b2(), {arg(a)});
      EXPECT_TRUE(res.reports.empty()) << res.summary();
    }
  }
  // A call-level InitConstValue<int8> (hand-built) is the simulator's report, and does nothing.
  Builder b("cube", KernelType::AIC_ONLY);
  int l1 = b.buffer("l1", CoreType::AIC, Mem::L1, 0, 32 * 64, DTypeCode::i8);
  b.p.block_dim = C(1);
  b.emit(InitConstValue{at(l1), DTypeCode::i8, C(1), C(64), C(0), C(0)}, 67);
  b.p.aic = b.take();
  auto res = sim::run(b.p, b2(), {});
  const sim::Report* rep = api_report(res, "no 8-bit InitConstValue");
  ASSERT_NE(rep, nullptr) << res.summary();
  EXPECT_EQ(rep->instrs.at(0).span.line, 67);
}

TEST(AscendSimApiRules, Nd2NzSourceRowStrideIsUint16) {
  CubeRig c(70000);
  c.b.emit(CopyGmToL1{gm(c.A, C(0)), at(c.l1), DTypeCode::f16, C(16), C(64), C(70000), C(16), C(64)}, 67);
  try {
    c.run(64 * 70000);
    ADD_FAILURE() << "a constant srcDValue 70000 must be an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Nd2NzParams.srcDValue = 70000"), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, 67);
  }
  CubeRig r(70000);
  auto stride = ir::var("stride");
  r.b.let(stride, C(70000));
  r.b.emit(CopyGmToL1{gm(r.A, C(0)), at(r.l1), DTypeCode::f16, C(16), C(64), stride, C(16), C(64)}, 68);
  auto res = r.run(64 * 70000);
  const sim::Report* rep = api_report(res, "Nd2NzParams.srcDValue = 70000");
  ASSERT_NE(rep, nullptr) << res.summary();
  EXPECT_EQ(rep->instrs.at(0).span.line, 68);
}

// Sets and waits of one flag alternate: a SetFlag must be ordered (happens-before) after the
// WaitFlag that took the flag's previous set, whatever the simulated timing (session 26). Here
// MTE1 is busy with a long load, so in simulated time its second set comes after MTE2's wait and
// the timing rule sees nothing; on the chip MTE1 may get there first. With a flag from MTE2 to
// MTE1 between the wait and the set (chained), nothing is reported.
TEST(AscendSimChecker, SetNotOrderedAfterThePreviousWaitIsReported) {
  for (bool chained : {false, true}) {
    CubeRig r;
    r.b.set(Pipe::MTE1, Pipe::MTE2, C(1), 70);
    r.b.wait(Pipe::MTE1, Pipe::MTE2, C(1), 71);
    if (chained) {
      r.b.set(Pipe::MTE2, Pipe::MTE1, C(2), 72);
      r.b.wait(Pipe::MTE2, Pipe::MTE1, C(2), 73);
    }
    r.b.emit(LoadL0{at(r.l1), at(r.a0), DTypeCode::f16, C(64), C(0), C(0), C(64), C(128), false}, 74);
    r.b.set(Pipe::MTE1, Pipe::MTE2, C(1), 75);
    r.b.wait(Pipe::MTE1, Pipe::MTE2, C(1), 76);
    auto res = r.run();
    const sim::Report* rep = find(res, sim::ReportKind::FlagSetTwice);
    if (chained) {
      EXPECT_TRUE(res.reports.empty()) << res.summary();
      continue;
    }
    ASSERT_NE(rep, nullptr) << res.summary();
    EXPECT_EQ(res.reports.size(), 1u) << res.summary();
    EXPECT_NE(rep->message.find("is not ordered after the WaitFlag that took the previous set"), std::string::npos)
        << rep->message;
    EXPECT_EQ(rep->instrs.at(0).span.line, 71);  // the wait
    EXPECT_EQ(rep->instrs.at(1).span.line, 75);  // the set
  }
}

// A cross-core counter holds at most 15 unconsumed sets: the n-th set that reaches a core must be
// ordered (happens-before) after the CrossCoreWaitFlag that took set n - 15, whatever the simulated
// timing (session 27). Here the AIC loads a tile before each set (slow), the AIVs only wait (fast):
// in simulated time at most one set is pending, but nothing orders the AIC's 16th set after the
// AIVs' first wait, and on the chip the AIVs may be slower. With a reverse handshake (the AIVs
// answer each signal, the AIC waits for the answer before its next load), nothing is reported.
Program cross_producer_kernel(int sets, bool reply) {
  Builder b("cross_order", KernelType::MIX_1_2);
  int A = b.tensor("A", DTypeCode::f16, {64, 64});
  int l1 = b.buffer("l1", CoreType::AIC, Mem::L1, 0, 64 * 64 * 2, DTypeCode::f16);
  b.p.block_dim = C(1);
  auto i = ir::var("i"), j = ir::var("j");
  b.loop(i, C(sets), [&] {
    b.emit(CopyGmToL1{gm(A, C(0)), at(l1), DTypeCode::f16, C(64), C(64), C(64), C(64), C(64)}, 110);
    b.emit(PipeBarrier{Pipe::MTE2}, 111);
    b.emit(CrossCoreSetFlag{2, Pipe::MTE2, C(0)}, 112);
    if (reply) b.emit(CrossCoreWaitFlag{C(1), Pipe::S}, 113);
  });
  b.p.aic = b.take();
  b.loop(j, C(sets), [&] {
    b.emit(CrossCoreWaitFlag{C(0), Pipe::S}, 114);
    if (reply) b.emit(CrossCoreSetFlag{2, Pipe::S, C(1)}, 115);
  });
  b.p.aiv = b.take();
  return b.p;
}

TEST(AscendSimChecker, CrossSetsNotOrderedAfterTheirWaitsAreReported) {
  for (bool reply : {false, true}) {
    std::vector<uint16_t> a(64 * 64, 0);
    auto res = run_sim(cross_producer_kernel(20, reply), b2(), {arg(a)});
    if (reply) {
      EXPECT_TRUE(res.reports.empty()) << res.summary();
      continue;
    }
    // mode 2: the AIC's set reaches both AIVs of its AI Core; one report per (core, id)
    ASSERT_EQ(res.reports.size(), 2u) << res.summary();
    for (int k = 0; k < 2; ++k) {
      const sim::Report& rep = res.reports[k];
      EXPECT_EQ(rep.kind, sim::ReportKind::CrossFlagOverflow);
      EXPECT_NE(rep.message.find("the 16th CrossCoreSetFlag<2>(0) that reaches AIV " + std::to_string(k) +
                                 " is not ordered after the CrossCoreWaitFlag that took set 1"),
                std::string::npos)
          << rep.message;
      EXPECT_NE(rep.message.find("add a reverse handshake"), std::string::npos) << rep.message;
      ASSERT_EQ(rep.instrs.size(), 2u);
      EXPECT_EQ(rep.instrs[0].span.line, 114);  // the wait
      EXPECT_EQ(rep.instrs[1].span.line, 112);  // the set
    }
  }
}

// Mode 0: every AIV sets and every AIV's counter counts the group's sets (once all have set: the
// group set's knowledge is the join of its members'). AIV 0 loads, sets and waits each step; AIV 1
// sets 20 times before it waits at all. In simulated time AIV 0 is slow and AIV 1 takes each set as
// it comes, but nothing orders the group's 16th set after AIV 1's first wait (AIV 0 can run all its
// steps while AIV 1 has not reached its waits): AIV 1's counter is reported, AIV 0's is not. With
// AIV 1 also waiting each step, nothing is reported.
TEST(AscendSimChecker, CrossGroupSetsAreCheckedAgainstEachTargetsWaits) {
  for (bool lockstep : {false, true}) {
    Builder b("cross_group", KernelType::AIV_ONLY);
    int X = b.tensor("X", DTypeCode::f32, {64, 64});
    int x = b.buffer("x", CoreType::AIV, Mem::UB, 0, 64 * 64 * 4, DTypeCode::f32);
    b.p.block_dim = C(2);
    auto i = ir::var("i"), j = ir::var("j"), k = ir::var("k");
    b.loop(i, C(20), [&] {
      b.emit(CopyGmToUb{gm(X, C(0)), at(x), DTypeCode::f32, C(64), C(256), C(256), C(256)}, 120);
      b.emit(PipeBarrier{Pipe::MTE2}, 121);
      b.emit(CrossCoreSetFlag{0, Pipe::MTE2, C(3)}, 122);
      b.emit(CrossCoreWaitFlag{C(3), Pipe::S}, 123);
    });
    auto slow = b.take();
    if (lockstep) {
      b.loop(j, C(20), [&] {
        b.emit(CrossCoreSetFlag{0, Pipe::S, C(3)}, 124);
        b.emit(CrossCoreWaitFlag{C(3), Pipe::S}, 125);
      });
    } else {
      b.loop(j, C(20), [&] { b.emit(CrossCoreSetFlag{0, Pipe::S, C(3)}, 124); });
      b.loop(k, C(20), [&] { b.emit(CrossCoreWaitFlag{C(3), Pipe::S}, 125); });
    }
    auto fast = b.take();
    b.stack.back().push_back(if_(eq(b.p.block_idx, C(0)), slow, fast));
    b.p.aiv = b.take();
    std::vector<float> xs(64 * 64, 0.f);
    auto res = run_sim(b.p, b2(), {arg(xs)});
    if (lockstep) {
      EXPECT_TRUE(res.reports.empty()) << res.summary();
      continue;
    }
    ASSERT_EQ(res.reports.size(), 1u) << res.summary();
    const sim::Report& rep = res.reports[0];
    EXPECT_EQ(rep.kind, sim::ReportKind::CrossFlagOverflow);
    EXPECT_NE(rep.message.find("the 16th CrossCoreSetFlag<0>(3) that reaches AIV 1 is not ordered after"),
              std::string::npos)
        << rep.message;
    ASSERT_EQ(rep.instrs.size(), 2u);
    EXPECT_EQ(rep.instrs[0].span.line, 125);  // AIV 1's first wait
  }
}

// Issue time (session 28, checker.h): an instruction knows from the scalar unit what S knew when it
// ISSUED it; anything S learns later reaches it only through its own pipe. In the simulator a
// queued instruction (behind a WaitFlag of its pipe) runs when a set releases it, and within a core
// that set was issued after the instruction: so what S learned in between reaches it through that
// set, which must carry what S knew when IT was issued (these tests fail if a SetFlag does not).
// AIV: an MTE3 copy of x queued behind WaitFlag<V_MTE3> before MTE2 writes x and S waits for that
// write (MTE2_S). Released by a V set issued after S's wait: the copy is ordered after the write
// (on the chip it cannot start before V's set, which S issued after its wait). Released by a V set
// issued before the write: the copy runs first and MTE2's write races with its read.
TEST(AscendSimChecker, QueuedInstructionIsOrderedByTheSetThatReleasesIt) {
  for (bool release_after_wait : {true, false}) {
    Builder b("queued", KernelType::AIV_ONLY);
    int X = b.tensor("X", DTypeCode::f32, {4, 64});
    int Y = b.tensor("Y", DTypeCode::f32, {4, 64}, true);
    int x = b.buffer("x_ub", CoreType::AIV, Mem::UB, 0, 1024, DTypeCode::f32);
    b.p.block_dim = C(1);
    b.wait(Pipe::V, Pipe::MTE3, C(0), 200);
    b.emit(CopyUbToGm{at(x), gm(Y, C(0)), DTypeCode::f32, C(4), C(256), C(256), C(256)}, 201);
    if (!release_after_wait) b.set(Pipe::V, Pipe::MTE3, C(0), 202);
    b.emit(CopyGmToUb{gm(X, C(0)), at(x), DTypeCode::f32, C(4), C(256), C(256), C(256)}, 203);
    b.set(Pipe::MTE2, Pipe::S, C(1), 204);
    b.wait(Pipe::MTE2, Pipe::S, C(1), 205);
    if (release_after_wait) b.set(Pipe::V, Pipe::MTE3, C(0), 206);
    b.p.aiv = b.take();
    auto res = run_small(b.p);
    if (release_after_wait) {
      EXPECT_TRUE(res.reports.empty()) << res.summary();
      continue;
    }
    // the race, and (in the simulated order the copy ran first) the copy of x before anything wrote it
    ASSERT_EQ(res.reports.size(), 2u) << res.summary();
    ASSERT_NE(find(res, sim::ReportKind::UninitRead), nullptr) << res.summary();
    ASSERT_NE(find(res, sim::ReportKind::Race), nullptr) << res.summary();
    const sim::Report& rep = *find(res, sim::ReportKind::Race);
    EXPECT_NE(rep.message.find("MTE2 on AIV 0 writes AIV 0 UB bytes [0, 1024) read by MTE3"), std::string::npos)
        << rep.message;
    EXPECT_EQ(rep.instrs.at(0).span.line, 203);
    EXPECT_EQ(rep.instrs.at(1).span.line, 201);
  }
}

// Sets and waits of one flag alternate (session 26): the next SetFlag must be ordered after the
// WaitFlag that took the previous set. A set the scalar unit issues after it learned of that wait
// is (S issues nothing before its waits return), whatever the setting pipe did since. Before
// session 28 a SetFlag knew only what its pipe had joined from S at its last other instruction, and
// a WaitFlag on S published nothing, so both forms below were reported although the chip cannot set
// the flag twice; without the scalar unit's wait (MTE2_S) the set is still reported.
TEST(AscendSimChecker, SetIssuedAfterTheScalarUnitLearnedOfTheWaitIsOrdered) {
  // MTE3 -> MTE2 waited on MTE2; MTE2 tells S (MTE2_S); MTE3's next set is issued after S's wait
  for (bool told : {true, false}) {
    Builder b("set_after_s", KernelType::AIV_ONLY);
    b.tensor("X", DTypeCode::f32, {4, 64});
    b.tensor("Y", DTypeCode::f32, {4, 64});  // the caller's (not out: nothing writes it)
    b.p.block_dim = C(1);
    b.set(Pipe::MTE3, Pipe::MTE2, C(1), 210);
    b.wait(Pipe::MTE3, Pipe::MTE2, C(1), 211);
    if (told) {
      b.set(Pipe::MTE2, Pipe::S, C(2), 212);
      b.wait(Pipe::MTE2, Pipe::S, C(2), 213);
    }
    b.set(Pipe::MTE3, Pipe::MTE2, C(1), 214);
    b.wait(Pipe::MTE3, Pipe::MTE2, C(1), 215);
    b.p.aiv = b.take();
    auto res = run_small(b.p);
    if (told) {
      EXPECT_TRUE(res.reports.empty()) << res.summary();
      continue;
    }
    ASSERT_EQ(res.reports.size(), 1u) << res.summary();
    const sim::Report& rep = res.reports[0];
    EXPECT_EQ(rep.kind, sim::ReportKind::FlagSetTwice) << res.summary();
    EXPECT_NE(rep.message.find("SetFlag<MTE3_MTE2>(1) is not ordered after the WaitFlag"), std::string::npos)
        << rep.message;
    EXPECT_EQ(rep.instrs.at(0).span.line, 211);  // the wait
    EXPECT_EQ(rep.instrs.at(1).span.line, 214);  // the set
  }
  // A flag S waits for itself (MTE2_S, as before a GetValue of a copied tile): the next set is
  // issued after S's wait returned.
  Builder b("set_after_s_wait", KernelType::AIV_ONLY);
  b.tensor("X", DTypeCode::f32, {4, 64});
  b.tensor("Y", DTypeCode::f32, {4, 64});  // the caller's (not out: nothing writes it)
  b.p.block_dim = C(1);
  auto i = ir::var("i");
  b.loop(i, C(3), [&] {
    b.set(Pipe::MTE2, Pipe::S, C(0), 216);
    b.wait(Pipe::MTE2, Pipe::S, C(0), 217);
  });
  b.p.aiv = b.take();
  auto res = run_small(b.p);
  EXPECT_TRUE(res.reports.empty()) << res.summary();
}

// The cross-core counter rule (session 27) on a set queued before the scalar unit's wait and run
// after it. AIV 0 alone (mode 0): 15 sets fill its counter; the 16th is queued on MTE3 behind
// WaitFlag<V_MTE3>, then S takes one set. Released by a V set S issues after that wait, the 16th set
// is ordered after it (the counter never holds more than 15); released by a V set issued before the
// wait, it runs first and the counter holds 16 (the simulated-time rule reports it).
TEST(AscendSimChecker, CrossSetQueuedBeforeTheWaitIsOrderedByItsRelease) {
  for (bool release_after_wait : {true, false}) {
    Builder b("cross_queued", KernelType::AIV_ONLY);
    b.tensor("X", DTypeCode::f32, {4, 64});
    b.tensor("Y", DTypeCode::f32, {4, 64});  // the caller's (not out: nothing writes it)
    b.p.block_dim = C(1);
    auto i = ir::var("i"), j = ir::var("j");
    b.loop(i, C(15), [&] { b.emit(CrossCoreSetFlag{0, Pipe::MTE3, C(3)}, 220); });
    b.wait(Pipe::V, Pipe::MTE3, C(0), 221);
    b.emit(CrossCoreSetFlag{0, Pipe::MTE3, C(3)}, 222);
    if (!release_after_wait) b.set(Pipe::V, Pipe::MTE3, C(0), 223);
    b.emit(CrossCoreWaitFlag{C(3), Pipe::S}, 224);
    if (release_after_wait) b.set(Pipe::V, Pipe::MTE3, C(0), 225);
    b.loop(j, C(15), [&] { b.emit(CrossCoreWaitFlag{C(3), Pipe::S}, 226); });
    b.p.aiv = b.take();
    auto res = run_small(b.p);
    if (release_after_wait) {
      EXPECT_TRUE(res.reports.empty()) << res.summary();
      continue;
    }
    ASSERT_EQ(res.reports.size(), 1u) << res.summary();
    const sim::Report& rep = res.reports[0];
    EXPECT_EQ(rep.kind, sim::ReportKind::CrossFlagOverflow) << res.summary();
    EXPECT_NE(rep.message.find("cross-core flag 3 of AIV 0 has 16 pending sets"), std::string::npos) << rep.message;
    EXPECT_EQ(rep.instrs.at(0).span.line, 222);
  }
}

// TPipe's constructor sets M_MTE1 events 0..2 on the AIC (Program::tpipe_destroy).
TEST(AscendSimApiRules, TPipeEventsCollideWithoutDestroy) {
  for (bool destroy : {true, false}) {
    CubeRig r;
    r.b.p.tpipe_destroy = destroy;
    r.b.set(Pipe::M, Pipe::MTE1, C(1), 70);
    r.b.wait(Pipe::M, Pipe::MTE1, C(1), 71);
    auto res = r.run();
    const sim::Report* rep = find(res, sim::ReportKind::FlagSetTwice);
    if (destroy) {
      EXPECT_TRUE(res.reports.empty()) << res.summary();
    } else {
      ASSERT_NE(rep, nullptr) << res.summary();
      EXPECT_NE(rep->message.find("the earlier set is TPipe's constructor"), std::string::npos) << rep->message;
      EXPECT_EQ(rep->instrs.at(1).span.line, 71);
    }
  }
  // A kernel wait that takes the constructor's set leaves the destructor waiting forever.
  CubeRig r;
  r.b.p.tpipe_destroy = false;
  r.b.wait(Pipe::M, Pipe::MTE1, C(2), 72);
  auto res = r.run();
  const sim::Report* dl = find(res, sim::ReportKind::Deadlock);
  ASSERT_NE(dl, nullptr) << res.summary();
  EXPECT_NE(dl->message.find("TPipe's destructor waits for M_MTE1 event 2"), std::string::npos) << dl->message;
}

// WholeReduceSum adds adjacent pairs level by level, rounding every partial sum to the element
// type (fp16 saturating at 65504) — not one exact sum rounded once.
TEST(AscendSimApiRules, WholeReduceSumIsAPairwiseTreeRoundedPerStep) {
  Builder b("rsum", KernelType::AIV_ONLY);
  int X = b.tensor("X", DTypeCode::f16, {1, 32}), Y = b.tensor("Y", DTypeCode::f16, {1, 32}, true);
  int x = b.buffer("x", CoreType::AIV, Mem::UB, 0, 64, DTypeCode::f16);
  int y = b.buffer("y", CoreType::AIV, Mem::UB, 64, 64, DTypeCode::f16);
  b.p.block_dim = C(1);
  b.emit(CopyGmToUb{gm(X, C(0)), at(x), DTypeCode::f16, C(1), C(64), C(64), C(64)}, 80);
  b.set(Pipe::MTE2, Pipe::V, C(0), 81);
  b.wait(Pipe::MTE2, Pipe::V, C(0), 81);
  // y's other elements are copied out too: zero them (else an `uninitialised read` report)
  b.emit(VecDup{DTypeCode::f16, vo(y, 32), ir::float_imm(0.0, ir::DType(DTypeCode::f16)), C(1), C(32)}, 81);
  b.emit(PipeBarrier{Pipe::V}, 81);
  b.emit(VecReduce{ReduceOp::Sum, ReduceAxis::Row, DTypeCode::f16, vo(y, 1), vo(x, 32), C(1), C(4)}, 82);
  b.emit(VecReduce{ReduceOp::Sum, ReduceAxis::Row, DTypeCode::f16, vo(y, 1, C(32)), vo(x, 32, C(32)), C(1), C(2)}, 83);
  b.set(Pipe::V, Pipe::MTE3, C(0), 84);
  b.wait(Pipe::V, Pipe::MTE3, C(0), 84);
  b.emit(CopyUbToGm{at(y), gm(Y, C(0)), DTypeCode::f16, C(1), C(64), C(64), C(64)}, 85);
  b.p.aiv = b.take();
  using sim::num::f32_to_f16;
  std::vector<uint16_t> xs(32, 0), ys(32, 0);
  for (int i : {0, 1, 2, 3}) xs[i] = f32_to_f16(i == 0 ? 2048.f : 1.f);
  xs[16] = xs[17] = f32_to_f16(60000.f);
  auto r = run_sim(b.p, b2(), {arg(xs), arg(ys)});
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  // (2048 + 1 -> 2048) + (1 + 1) = 2050; one exact sum rounded once would give 2052
  EXPECT_EQ(sim::num::f16_to_f32(ys[0]), 2050.f);
  EXPECT_EQ(sim::num::f16_to_f32(ys[16]), 65504.f);  // saturates instead of inf
}

// Unsigned gap fields: a burst stride shorter than the burst would wrap.
TEST(AscendSimApiRules, OverlappingBurstsWrapTheGapField) {
  // rows 256 B long but 128 B apart in GM: the gap (srcStride) would be -128
  auto copy = [](Expr src_stride) {
    return CopyGmToUb{gm(0, C(0)), at(0), DTypeCode::f32, C(4), C(256), std::move(src_stride), C(256)};
  };
  EXPECT_THROW(run_aiv({{copy(C(128)), 58}}), ir::Error);  // a constant: select_move_calls refuses it
  auto s = ir::var("s");
  auto r = run_aiv({{copy(s), 58}}, 65536, {{s, 128}});
  const sim::Report* rep = api_report(r, "the gap field is unsigned");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("DataCopyExtParams.srcStride = -128"), std::string::npos) << rep->message;
  EXPECT_EQ(api_report(run_aiv({{copy(s), 58}}, 65536, {{s, 256}}), "the gap field"), nullptr);
}

// --- atomic add into GM (SetAtomicAdd / SetAtomicNone, T.atomic_add, issue 13) -------------------

// AIV_ONLY, `blocks` blocks: each loads X (8 fp32) into UB and adds it into Y (8 fp32) with an
// atomic UB -> GM copy (line 32): select_move_calls brackets it with SetAtomicAdd<float> /
// SetAtomicNone. `plain_after`: a plain copy of the tile into Z follows (line 33).
Program atomic_sum(int64_t blocks, bool plain_after = false) {
  Builder b("atomic_sum", KernelType::AIV_ONLY);
  // Y: the caller's accumulator (not out: an output only atomic adds write is `zeroed` by the compiler)
  int X = b.tensor("X", DTypeCode::f32, {8}), Y = b.tensor("Y", DTypeCode::f32, {8});
  int Z = b.tensor("Z", DTypeCode::f32, {blocks * 8}, true);
  int x = b.buffer("x", CoreType::AIV, Mem::UB, 0, 32, DTypeCode::f32, 10);
  b.p.block_dim = C(blocks);
  b.emit(CopyGmToUb{gm(X, C(0)), at(x), DTypeCode::f32, C(1), C(32), C(32), C(32)}, 30);
  b.set(Pipe::MTE2, Pipe::MTE3, C(0), 31);
  b.wait(Pipe::MTE2, Pipe::MTE3, C(0), 31);
  b.emit(CopyUbToGm{at(x), gm(Y, C(0)), DTypeCode::f32, C(1), C(32), C(32), C(32), true}, 32);
  if (plain_after) b.emit(CopyUbToGm{at(x), gm(Z, mul(b.p.block_idx, C(32))), DTypeCode::f32, C(1), C(32), C(32), C(32)}, 33);
  b.p.aiv = b.take();
  return b.p;
}

TEST(AscendSimAtomic, ManyCoresAddIntoTheSameBytesWithoutReports) {
  const int64_t blocks = 40;  // 40 AIVs, more than one wave on some
  std::vector<float> x = {1, 2, 3, 4, -5, 6.5f, 0, 8}, y(8, 100.f), z(blocks * 8, 0.f);
  for (int threads : {1, 3}) {
    std::fill(y.begin(), y.end(), 100.f);
    sim::Options o;
    o.threads = threads;
    auto r = run_sim(atomic_sum(blocks, true), b2(), {arg(x), arg(y), arg(z)}, {}, o);
    EXPECT_TRUE(r.reports.empty()) << r.summary();  // atomic adds of different cores do not race
    for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], 100.f + blocks * x[i]) << i;  // exact: small integers and halves
    for (int64_t i = 0; i < blocks * 8; ++i) ASSERT_EQ(z[i], x[i % 8]) << i;  // the plain copy after it writes
  }
  // the program brackets the copy with the mode; the printer prints the calls it holds
  std::string text = print_program(calls(atomic_sum(2)));
  EXPECT_NE(text.find("S SetAtomicAdd float32  @32"), std::string::npos) << text;
  EXPECT_NE(text.find("blockCount=1 blockLen=32 srcStride=0 dstStride=0 atomic  @32"), std::string::npos) << text;
  EXPECT_NE(text.find("S SetAtomicNone  @32"), std::string::npos) << text;
  EXPECT_EQ(print_program(parse_program(text)), text);
}

// Call-level programs written by hand: the mode left on, a copy marked atomic without the mode, a
// dtype that disagrees, and a plain read racing with the atomic writes.
TEST(AscendSimAtomic, ModeMisuseIsReportedAtTheLine) {
  auto program = [](bool set, bool reset, DTypeCode mode, bool mark) {
    Builder b("mode", KernelType::AIV_ONLY);
    // the caller's tensors (not out: an atomic add into a runtime-allocated output nothing wrote is reported)
    int X = b.tensor("X", DTypeCode::f32, {8}), Y = b.tensor("Y", DTypeCode::f32, {8});
    int Z = b.tensor("Z", DTypeCode::f32, {8});
    int x = b.buffer("x", CoreType::AIV, Mem::UB, 0, 32, DTypeCode::f32, 10);
    b.p.block_dim = C(1);
    b.emit(DataCopyPadGmToUb{gm(X, C(0)), at(x), DTypeCode::f32, C(1), C(32), C(0), C(0), false, C(0), C(0), C(0)}, 40);
    b.set(Pipe::MTE2, Pipe::MTE3, C(0), 41);
    b.wait(Pipe::MTE2, Pipe::MTE3, C(0), 41);
    if (set) b.emit(SetAtomic{ir::DType(mode)}, 42);
    b.emit(DataCopyPadUbToGm{at(x), gm(Y, C(0)), DTypeCode::f32, C(1), C(32), C(0), C(0), mark}, 43);
    if (reset) b.emit(SetAtomic{}, 44);
    b.emit(DataCopyPadUbToGm{at(x), gm(Z, C(0)), DTypeCode::f32, C(1), C(32), C(0), C(0)}, 45);
    b.p.aiv = b.take();
    return b.p;
  };
  auto run = [&](const Program& p, std::vector<float>& y, std::vector<float>& z) {
    std::vector<float> x(8, 2.f);
    return run_sim(p, b2(), {arg(x), arg(y), arg(z)});
  };
  std::vector<float> y(8, 1.f), z(8, 1.f);
  auto ok = run(program(true, true, DTypeCode::f32, true), y, z);
  EXPECT_TRUE(ok.reports.empty()) << ok.summary();
  EXPECT_EQ(y[0], 3.f);
  EXPECT_EQ(z[0], 2.f);
  // no SetAtomicNone: the plain copy at line 45 adds (as on the chip) and is reported; the block ends with it on
  y.assign(8, 1.f), z.assign(8, 1.f);
  auto left_on = run(program(true, false, DTypeCode::f32, true), y, z);
  const sim::Report* rep = api_report(left_on, "a plain copy into GM is issued while the atomic mode is on");
  ASSERT_NE(rep, nullptr) << left_on.summary();
  EXPECT_NE(rep->format().find("kernel.py:45"), std::string::npos) << rep->format();
  EXPECT_NE(api_report(left_on, "the block ends with the atomic mode on"), nullptr) << left_on.summary();
  EXPECT_EQ(z[0], 3.f);
  // marked atomic, no SetAtomicAdd: it overwrites (reported)
  y.assign(8, 1.f), z.assign(8, 1.f);
  auto unset = run(program(false, false, DTypeCode::f32, true), y, z);
  ASSERT_NE(api_report(unset, "issued without SetAtomicAdd"), nullptr) << unset.summary();
  EXPECT_EQ(y[0], 2.f);
  // the mode's dtype is not the data's
  auto wrong = run(program(true, true, DTypeCode::f16, true), y, z);
  ASSERT_NE(api_report(wrong, "SetAtomicAdd<float16> is on but the copy writes float32"), nullptr) << wrong.summary();
  // a dtype SetAtomicAdd does not have
  auto u8 = run(program(true, true, DTypeCode::u8, true), y, z);
  const sim::Report* bad = api_report(u8, "SetAtomicAdd<uint8>: the atomic add has int8, int16, half");
  ASSERT_NE(bad, nullptr) << u8.summary();
  EXPECT_NE(bad->format().find("kernel.py:42"), std::string::npos) << bad->format();
}

// --- scalar reads of GM (GlobalTensor::GetValue, issue 13) ---------------------------------------

// AIV: r = I[1] (ScalarLoad, pipe S), then row r of X (4 x 64 fp32) -> UB -> Y. With `write_i`, the
// kernel first writes I by DMA (UB -> GM on MTE3, ordered before the read by a flag): the scalar
// DataCache does not see that write, so the read is a `stale DataCache` report at its line.
Program gather_row(bool write_i) {
  Builder b("gather_row", KernelType::AIV_ONLY);
  int X = b.tensor("X", DTypeCode::f32, {4, 64});
  int I = b.tensor("I", DTypeCode::i32, {8}, write_i);
  int Y = b.tensor("Y", DTypeCode::f32, {64}, true);
  int x = b.buffer("x_ub", CoreType::AIV, Mem::UB, 0, 1024, DTypeCode::f32);
  b.p.block_dim = C(1);
  if (write_i) {
    b.emit(CopyGmToUb{gm(X, C(0)), at(x), DTypeCode::f32, C(1), C(32), C(32), C(32)}, 60);
    b.set(Pipe::MTE2, Pipe::MTE3, C(0), 61);
    b.wait(Pipe::MTE2, Pipe::MTE3, C(0), 61);
    b.emit(CopyUbToGm{at(x), gm(I, C(0)), DTypeCode::i32, C(1), C(32), C(32), C(32)}, 62);
    b.set(Pipe::MTE3, Pipe::S, C(0), 63);
    b.wait(Pipe::MTE3, Pipe::S, C(0), 63);
  }
  ir::Var r = ir::var("r", DTypeCode::i32);
  b.emit(ScalarLoad{r, gm(I, C(4)), DTypeCode::i32}, 64);
  b.emit(CopyGmToUb{gm(X, ir::binary(ir::BinOp::Mul, r, C(256))), at(x), DTypeCode::f32, C(1), C(256), C(256), C(256)}, 65);
  b.set(Pipe::MTE2, Pipe::MTE3, C(0), 66);
  b.wait(Pipe::MTE2, Pipe::MTE3, C(0), 66);
  b.emit(CopyUbToGm{at(x), gm(Y, C(0)), DTypeCode::f32, C(1), C(256), C(256), C(256)}, 67);
  b.p.aiv = b.take();
  return b.p;
}

TEST(AscendSimScalarLoad, ReadsTheElementAndUsesItAsAnOffset) {
  std::vector<float> x(256), y(64, 0);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i);
  std::vector<int32_t> idx = {0, 3, 0, 0, 0, 0, 0, 0};
  sim::Arg ia{reinterpret_cast<uint8_t*>(idx.data()), 32};
  auto r = run_sim(gather_row(false), b2(), {arg(x), ia, arg(y)});
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  for (int c = 0; c < 64; ++c) ASSERT_EQ(y[c], x[3 * 64 + c]) << c;
  // printed as GlobalTensor::GetValue on the element index, in the program text as a ScalarLoad
  std::string text = print_program(gather_row(false));
  EXPECT_NE(text.find("S ScalarLoad r <- I[4] int32  @64"), std::string::npos) << text;
  Program back = parse_program(text);
  EXPECT_EQ(print_program(back), text);
}

TEST(AscendSimScalarLoad, MissAndHitCosts) {
  // two reads of the same 64 B line: the first misses the DataCache (GM latency), the second hits
  Builder b("two_reads", KernelType::AIV_ONLY);
  int I = b.tensor("I", DTypeCode::i32, {16});
  b.p.block_dim = C(1);
  b.emit(ScalarLoad{ir::var("a", DTypeCode::i32), gm(I, C(0)), DTypeCode::i32}, 70);
  b.p.aiv = b.take();
  Program one = b.p;
  b.emit(ScalarLoad{ir::var("a", DTypeCode::i32), gm(I, C(0)), DTypeCode::i32}, 70);
  b.emit(ScalarLoad{ir::var("c", DTypeCode::i32), gm(I, C(60)), DTypeCode::i32}, 71);
  b.p.aiv = b.take();
  std::vector<int32_t> idx(16, 1);
  sim::Arg ia{reinterpret_cast<uint8_t*>(idx.data()), 64};
  auto r1 = run_sim(one, b2(), {ia});
  auto r2 = run_sim(b.p, b2(), {ia});
  EXPECT_TRUE(r1.reports.empty() && r2.reports.empty()) << r1.summary() << r2.summary();
  EXPECT_EQ(r2.total_cycles - r1.total_cycles, b2().scalar_dcache_hit_cycles);
  EXPECT_GE(r1.total_cycles, b2().gm_latency_cycles);
}

TEST(AscendSimScalarLoad, ReadOfGmWrittenByDmaIsStale) {
  std::vector<float> x(256, 1.f), y(64, 0);
  std::vector<int32_t> idx(8, 0);
  sim::Arg ia{reinterpret_cast<uint8_t*>(idx.data()), 32};
  auto r = run_sim(gather_row(true), b2(), {arg(x), ia, arg(y)});
  const sim::Report* rep = find(r, sim::ReportKind::StaleDataCache);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->format().find("kernel.py:64: stale DataCache: the scalar unit reads bytes [4, 8) of GM tensor I, "
                               "which a DMA wrote earlier in this kernel run"),
            std::string::npos)
      << rep->format();
  EXPECT_NE(rep->message.find("DataCacheCleanAndInvalid"), std::string::npos) << rep->message;
}

TEST(AscendSimScalarLoad, OutOfBoundsReadIsReported) {
  Builder b("oob", KernelType::AIV_ONLY);
  int I = b.tensor("I", DTypeCode::i32, {2});
  b.p.block_dim = C(1);
  b.emit(ScalarLoad{ir::var("a", DTypeCode::i32), gm(I, C(8)), DTypeCode::i32}, 72);
  b.p.aiv = b.take();
  std::vector<int32_t> idx(2, 1);
  auto r = run_sim(b.p, b2(), {sim::Arg{reinterpret_cast<uint8_t*>(idx.data()), 8}});
  const sim::Report* rep = find(r, sim::ReportKind::OutOfBounds);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_EQ(rep->instrs.at(0).span.line, 72);
}

// --- scalar reads and writes of UB (LocalTensor::GetValue / SetValue, issue 13) ------------------

// AIV: X (8 int32) -> UB; v = x[5] (GetValue); x[2] = v * 3 (SetValue); UB -> Y (after an MTE2 ->
// MTE3 flag). With `flags`, the MTE2 -> S and S -> MTE3 flags order the scalar unit against the
// DMA; without, the read, the write and the copy out are races.
Program ub_scalar(bool flags) {
  Builder b("ub_scalar", KernelType::AIV_ONLY);
  int X = b.tensor("X", DTypeCode::i32, {8});
  int Y = b.tensor("Y", DTypeCode::i32, {8}, true);
  int x = b.buffer("x_ub", CoreType::AIV, Mem::UB, 0, 32, DTypeCode::i32);
  b.p.block_dim = C(1);
  b.emit(CopyGmToUb{gm(X, C(0)), at(x), DTypeCode::i32, C(1), C(32), C(32), C(32)}, 80);
  b.set(Pipe::MTE2, Pipe::MTE3, C(1), 80);  // the copy out after the copy in (either way)
  if (flags) {
    b.set(Pipe::MTE2, Pipe::S, C(0), 81);
    b.wait(Pipe::MTE2, Pipe::S, C(0), 81);
  }
  ir::Var v = ir::var("v", DTypeCode::i32);
  b.emit(ScalarLoad{v, GmRef{}, DTypeCode::i32, at(x, C(20))}, 82);
  b.emit(ScalarStore{at(x, C(8)), ir::binary(ir::BinOp::Mul, v, C(3)), DTypeCode::i32}, 83);
  if (flags) {
    b.set(Pipe::S, Pipe::MTE3, C(0), 84);
    b.wait(Pipe::S, Pipe::MTE3, C(0), 84);
  }
  b.wait(Pipe::MTE2, Pipe::MTE3, C(1), 85);
  b.emit(CopyUbToGm{at(x), gm(Y, C(0)), DTypeCode::i32, C(1), C(32), C(32), C(32)}, 85);
  b.p.aiv = b.take();
  return b.p;
}

TEST(AscendSimUbScalar, GetValueSetValueWithFlags) {
  std::vector<int32_t> x = {0, 1, 2, 3, 4, 5, 6, 7}, y(8, 0);
  sim::Arg xa{reinterpret_cast<uint8_t*>(x.data()), 32}, ya{reinterpret_cast<uint8_t*>(y.data()), 32};
  auto r = run_sim(ub_scalar(true), b2(), {xa, ya});
  EXPECT_TRUE(r.reports.empty()) << r.summary();
  EXPECT_EQ(y, (std::vector<int32_t>{0, 1, 15, 3, 4, 5, 6, 7}));
  std::string text = print_program(ub_scalar(true));
  EXPECT_NE(text.find("S ScalarLoad v <- x_ub[20] int32  @82"), std::string::npos) << text;
  EXPECT_NE(text.find("S ScalarStore x_ub[8] <- v * 3 int32  @83"), std::string::npos) << text;
  EXPECT_EQ(print_program(parse_program(text)), text);
}

TEST(AscendSimUbScalar, MissingFlagsAreRacesAtTheLines) {
  std::vector<int32_t> x(8, 1), y(8, 0);
  sim::Arg xa{reinterpret_cast<uint8_t*>(x.data()), 32}, ya{reinterpret_cast<uint8_t*>(y.data()), 32};
  auto r = run_sim(ub_scalar(false), b2(), {xa, ya});
  std::string all = r.summary();
  EXPECT_NE(all.find("add SetFlag<MTE2_S> after the first and WaitFlag<MTE2_S> before the second"), std::string::npos) << all;
  EXPECT_NE(all.find("add SetFlag<S_MTE3> after the first and WaitFlag<S_MTE3> before the second"), std::string::npos) << all;
  bool at82 = false, at85 = false;
  for (const auto& rep : r.reports) {
    EXPECT_EQ(rep.kind, sim::ReportKind::Race) << rep.format();
    at82 |= rep.instrs.at(0).span.line == 82;
    at85 |= rep.instrs.at(0).span.line == 85;
  }
  EXPECT_TRUE(at82 && at85) << all;
}

// --- unwritten on-chip bytes reaching GM (issue 13, session 30: simulator/written.h) ------------

// AIV: X (4 x 5 float32, 20 B rows) -> UB tile x (rows 32 B apart) by DataCopyPad (isPad `pad`),
// then `out_elems` elements of each row -> Y. Without isPad a row's bytes 20..31 are unspecified.
Program pad_rows(bool pad, int64_t out_elems) {
  Builder b("pad_rows", KernelType::AIV_ONLY);
  int X = b.tensor("X", DTypeCode::f32, {4, 5});
  int Y = b.tensor("Y", DTypeCode::f32, {4, 8});  // the caller's (not out: written in part)
  int x = b.buffer("x", CoreType::AIV, Mem::UB, 0, 128, DTypeCode::f32);
  b.p.block_dim = C(1);
  b.emit(CopyGmToUb{gm(X, C(0)), at(x), DTypeCode::f32, C(4), C(20), C(20), C(32), pad}, 90);
  b.set(Pipe::MTE2, Pipe::MTE3, C(0), 91);
  b.wait(Pipe::MTE2, Pipe::MTE3, C(0), 91);
  b.emit(CopyUbToGm{at(x), gm(Y, C(0)), DTypeCode::f32, C(4), C(out_elems * 4), C(32), C(32)}, 92);
  b.p.aiv = b.take();
  return b.p;
}

std::vector<const sim::Report*> uninit_reports(const sim::Result& r) {
  std::vector<const sim::Report*> out;
  for (const auto& rep : r.reports)
    if (rep.kind == sim::ReportKind::UninitRead) out.push_back(&rep);
  return out;
}

TEST(AscendSimUninit, DataCopyPadMarksItsDataAndItsPadding) {
  std::vector<float> x(20, 1.f), y(32, 0.f);
  // the 5 elements each row loaded: no report
  auto ok = run_sim(pad_rows(false, 5), b2(), {arg(x), arg(y)});
  EXPECT_TRUE(ok.reports.empty()) << ok.summary();
  // a 6th element: bytes 20..23 of each row were never written (the burst's unspecified tail)
  auto bad = run_sim(pad_rows(false, 6), b2(), {arg(x), arg(y)});
  auto reps = uninit_reports(bad);
  ASSERT_EQ(reps.size(), 1u) << bad.summary();
  EXPECT_NE(reps[0]->format().find("kernel.py:92: uninitialised read: DataCopyPad copies 16 byte(s) that no "
                                   "instruction of this block wrote out to GM tensor Y: first bytes [20, 24) of "
                                   "tile x (UB), element(s) [5, 6) of row 0 of the copy (4 row(s) of 6 elements)"),
            std::string::npos)
      << reps[0]->format();
  EXPECT_NE(reps[0]->message.find("write every element of x before copying it out, or copy out only the written part"),
            std::string::npos);
  // isPad: rightPadding zeroes elements 5..7 of each row, which may then be copied out
  auto padded = run_sim(pad_rows(true, 8), b2(), {arg(x), arg(y)});
  EXPECT_TRUE(padded.reports.empty()) << padded.summary();
  EXPECT_EQ(y[7], 0.f);
}

// AIV: Duplicate `dup` elements of an 8-element row (a partial level-2 count), optionally staged
// through a second tile by a UB -> UB DataCopy, then 8 elements -> Y.
Program dup_part(int64_t dup, bool staged, int64_t blocks = 1, int64_t dup_blocks = 1) {
  Builder b("dup_part", KernelType::AIV_ONLY);
  int Y = b.tensor("Y", DTypeCode::f32, {blocks * 8}, true);
  int v = b.buffer("v", CoreType::AIV, Mem::UB, 0, 32, DTypeCode::f32);
  int w = b.buffer("w", CoreType::AIV, Mem::UB, 32, 32, DTypeCode::f32);
  b.p.block_dim = C(blocks);
  Expr bi = b.p.block_idx;
  b.stack.emplace_back();
  b.emit(VecDup{DTypeCode::f32, vo(v, 8), ir::float_imm(2.0, ir::DType(DTypeCode::f32)), C(1), C(dup)}, 94);
  auto fill = b.take();
  b.stack.pop_back();
  b.stack.back().push_back(if_(ir::binary(BinOp::LT, bi, C(dup_blocks)), fill));
  if (staged) {
    b.emit(PipeBarrier{Pipe::V}, 95);
    b.emit(CopyUbToUb{at(v), at(w), DTypeCode::f32, C(1), C(32), C(32), C(32)}, 95);
  }
  b.set(Pipe::V, Pipe::MTE3, C(0), 96);
  b.wait(Pipe::V, Pipe::MTE3, C(0), 96);
  b.emit(CopyUbToGm{at(staged ? w : v), gm(Y, mul(bi, C(32))), DTypeCode::f32, C(1), C(32), C(32), C(32)}, 97);
  b.p.aiv = b.take();
  return b.p;
}

TEST(AscendSimUninit, AVectorCallMarksTheElementsOfItsCount) {
  for (bool functional : {true, false}) {  // the rule needs no data: timing-only runs check it too
    sim::Options o;
    o.functional = functional;
    std::vector<float> y(8, 0.f);
    auto full = run_sim(dup_part(8, false), b2(), {arg(y)}, {}, o);
    EXPECT_TRUE(full.reports.empty()) << full.summary();
    auto part = run_sim(dup_part(5, false), b2(), {arg(y)}, {}, o);
    auto reps = uninit_reports(part);
    ASSERT_EQ(reps.size(), 1u) << part.summary();
    EXPECT_NE(reps[0]->format().find("kernel.py:97: uninitialised read: DataCopyPad copies 12 byte(s) that no "
                                     "instruction of this block wrote out to GM tensor Y: first bytes [20, 32) of "
                                     "tile v (UB), element(s) [5, 8) of row 0 of the copy"),
              std::string::npos)
        << reps[0]->format();
  }
}

TEST(AscendSimUninit, AUbToUbCopyCarriesTheSourceState) {
  std::vector<float> y(8, 0.f);
  auto full = run_sim(dup_part(8, true), b2(), {arg(y)});
  EXPECT_TRUE(full.reports.empty()) << full.summary();
  EXPECT_EQ(y[7], 2.f);
  auto part = run_sim(dup_part(5, true), b2(), {arg(y)});
  auto reps = uninit_reports(part);
  ASSERT_EQ(reps.size(), 1u) << part.summary();
  EXPECT_NE(reps[0]->message.find("first bytes [20, 32) of tile w (UB)"), std::string::npos) << reps[0]->format();
}

TEST(AscendSimUninit, EachBlockStartsUnwritten) {
  // 49 blocks on the 48 AIVs: AIV 0 runs blocks 0 and 48; only blocks 0..47 fill v, so block 48
  // copies out bytes block 0 wrote on the same core: reported (another mapping gives other data)
  const auto& chip = b2();
  ASSERT_EQ(chip.aiv_cores, 48);
  std::vector<float> y(49 * 8, 0.f);
  auto all = run_sim(dup_part(8, false, 49, 49), chip, {arg(y)});
  EXPECT_TRUE(all.reports.empty()) << all.summary();
  auto last = run_sim(dup_part(8, false, 49, 48), chip, {arg(y)});
  auto reps = uninit_reports(last);
  ASSERT_EQ(reps.size(), 1u) << last.summary();
  EXPECT_NE(reps[0]->format().find("AIV 0"), std::string::npos) << reps[0]->format();
}

// AIC: Mmad m x n (16 x 16: one L0C fractal strip) then Fixpipe of a 16 x `cols` window to GM.
TEST(AscendSimUninit, FixpipeOfColumnsNoMmadWrote) {
  for (int64_t cols : {16, 32}) {
    CubeRig r;
    int Cg = r.b.tensor("Cout", DTypeCode::f32, {16, 32}, true);
    r.b.emit(r.mmad(16, 16, true), 100);
    r.b.set(Pipe::M, Pipe::FIX, C(0), 101);
    r.b.wait(Pipe::M, Pipe::FIX, C(0), 101);
    r.b.emit(Fixpipe{at(r.c0), gm(Cg, C(0)), DTypeCode::f32, DTypeCode::f32, C(16), C(cols), C(16), C(32)}, 102);
    r.b.p.aic = r.b.take();
    std::vector<uint16_t> a(64 * 64, 0);
    std::vector<float> out(16 * 32, 0.f);
    auto res = run_sim(r.b.p, b2(), {arg(a), arg(out)});
    auto reps = uninit_reports(res);
    if (cols == 16) {
      EXPECT_TRUE(reps.empty()) << res.summary();
      continue;
    }
    ASSERT_EQ(reps.size(), 1u) << res.summary();
    EXPECT_NE(reps[0]->format().find("kernel.py:102: uninitialised read: Fixpipe stores 256 element(s) of tile c0 "
                                     "(L0C) that no Mmad of this block wrote into GM tensor Cout: first element (0, 16) "
                                     "of its 16 x 32 window (bytes [1024, 1028) of tile c0 (L0C))"),
              std::string::npos)
        << reps[0]->format();
  }
}

TEST(AscendSimUninit, GetValueOfAnUnwrittenElement) {
  Builder b("get", KernelType::AIV_ONLY);
  int X = b.tensor("X", DTypeCode::i32, {4});
  int x = b.buffer("x", CoreType::AIV, Mem::UB, 0, 32, DTypeCode::i32);
  b.p.block_dim = C(1);
  b.emit(CopyGmToUb{gm(X, C(0)), at(x), DTypeCode::i32, C(1), C(16), C(16), C(32)}, 104);
  b.set(Pipe::MTE2, Pipe::S, C(0), 105);
  b.wait(Pipe::MTE2, Pipe::S, C(0), 105);
  b.emit(ScalarLoad{ir::var("a", DTypeCode::i32), GmRef{}, DTypeCode::i32, at(x, C(12))}, 106);  // written
  b.emit(ScalarLoad{ir::var("c", DTypeCode::i32), GmRef{}, DTypeCode::i32, at(x, C(16))}, 107);  // not
  b.p.aiv = b.take();
  std::vector<int32_t> xs = {1, 2, 3, 4};
  sim::Arg xa{reinterpret_cast<uint8_t*>(xs.data()), 16};
  auto res = run_sim(b.p, b2(), {xa});
  auto reps = uninit_reports(res);
  ASSERT_EQ(reps.size(), 1u) << res.summary();
  EXPECT_NE(reps[0]->format().find("kernel.py:107: uninitialised read: GetValue reads bytes [16, 20) of tile x (UB), "
                                   "which no instruction of this block wrote"),
            std::string::npos)
      << reps[0]->format();
}

// Session 31 rule audit (h-audit31). Select in VSEL_TENSOR_TENSOR_MODE / VSEL_TENSOR_SCALAR_MODE
// keeps a temporary at UB byte 184 KiB on dav-c220 (Select.md: reserve 8 KB; dav_c220
// kernel_operator_vec_cmpsel_impl.h VselImpl, TMP_UB_OFFSET for __NPU_ARCH__ 2201): a Select issued
// while a UB buffer of the core lies there is an API rule report at its line; plan_memory and the
// vector calls' scratch area keep a selecting program below it.
TEST(AscendSimApiRules, SelectKeepsItsTemporaryAt184KiBFree) {
  const ir::Expr zero = ir::float_imm(0.0, ir::DType(DTypeCode::f32));
  auto sel = [&](VecApi api) {
    VecCallL2 s{api, DTypeCode::f32, DTypeCode::f32, LocalRef{0, C(0)}, LocalRef{0, C(0)},
                api == VecApi::Select ? LocalRef{0, C(256)} : LocalRef{}, api == VecApi::Select ? ir::Expr{} : zero,
                RoundMode::None, C(64)};
    s.sel = LocalRef{1, C(0)};
    return s;
  };
  // u1 (8192 B after u0) ends at 188416: below the temporary
  for (VecApi api : {VecApi::Select, VecApi::SelectScalar})
    EXPECT_EQ(api_report(run_aiv({{sel(api), 64}}, kSelectTmpUbOffset - 8192), "temporary"), nullptr);
  auto r = run_aiv({{sel(VecApi::SelectScalar), 65}}, kSelectTmpUbOffset - 4096);
  const sim::Report* rep = api_report(r, "Select (SELMODE::VSEL_TENSOR_SCALAR_MODE) uses UB bytes 188416..196607");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->format().find("kernel.py:65: API rule:"), std::string::npos) << rep->format();
  EXPECT_NE(rep->message.find("buffer 'u1' occupies bytes 184320..192511"), std::string::npos) << rep->message;
  r = run_aiv({{sel(VecApi::Select), 66}}, kSelectTmpUbOffset - 4096);
  EXPECT_NE(api_report(r, "Select (SELMODE::VSEL_TENSOR_TENSOR_MODE) uses UB bytes"), nullptr) << r.summary();
  // other calls do not use it
  VecCallL2 add{VecApi::Add, DTypeCode::f32, DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{0, C(256)},
                {}, RoundMode::None, C(64)};
  EXPECT_TRUE(run_aiv({{add, 67}}, kSelectTmpUbOffset - 4096).reports.empty());
  // the lowering's side: a program that selects may plan UB up to 184 KiB only
  Builder b("sel", KernelType::AIV_ONLY);
  b.p.aiv = b.take();
  EXPECT_EQ(usable_bytes(b.p, b2(), Mem::UB), b2().ub_bytes);
  b.emit(sel(VecApi::Select), 68);
  b.p.aiv = b.take();
  EXPECT_EQ(usable_bytes(b.p, b2(), Mem::UB), kSelectTmpUbOffset);
  EXPECT_EQ(usable_bytes(b.p, b2(), Mem::L1), b2().l1_bytes);
}

// Brcb.md (Atlas A2): dstBlkStride 0 is undefined, and the source and destination may not share
// memory; the lowering's Brcb (a row reduce's spread: source and destination apart in the scratch
// area, dstBlkStride 1) reports nothing.
TEST(AscendSimApiRules, BrcbStrideAndOverlap) {
  EXPECT_TRUE(run_aiv({{Brcb{DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, C(2), C(1), C(8)}, 70}}).reports.empty());
  auto r = run_aiv({{Brcb{DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, C(1), C(0), C(8)}, 71}});
  const sim::Report* rep = api_report(r, "Brcb with BrcbRepeatParams.dstBlkStride = 0");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->format().find("kernel.py:71: API rule:"), std::string::npos) << rep->format();
  // one repeat reads 8 floats at byte 32 and writes 8 blocks from byte 0: they overlap
  r = run_aiv({{Brcb{DTypeCode::f32, LocalRef{0, C(0)}, LocalRef{0, C(32)}, C(1), C(1), C(8)}, 72}});
  EXPECT_NE(api_report(r, "Brcb reads bytes 32..63 and writes bytes 0..255 of the same buffer"), nullptr) << r.summary();
  // the same buffer, apart: fine
  EXPECT_EQ(api_report(run_aiv({{Brcb{DTypeCode::f32, LocalRef{0, C(256)}, LocalRef{0, C(0)}, C(1), C(1), C(8)}, 73}}),
                       "Brcb"),
            nullptr);
}

// CrossCoreSetFlag(ISASI).md table 3: mode 1 (the two AIVs of an AI Core) needs a
// KERNEL_TYPE_MIX_AIC_1_1 / 1_2 kernel; a Vector-only kernel (printed KERNEL_TYPE_MIX_AIV_1_0, one AIV
// per block) syncs its AIVs with mode 0. Mode 1 there is an invalid instruction at its line.
TEST(AscendSimApiRules, CrossCoreMode1NeedsAMixedKernel) {
  EXPECT_TRUE(run_aiv({{CrossCoreSetFlag{0, Pipe::V, C(3)}, 74}, {CrossCoreWaitFlag{C(3), Pipe::S}, 75}}).reports.empty());
  auto r = run_aiv({{CrossCoreSetFlag{1, Pipe::V, C(3)}, 76}, {CrossCoreWaitFlag{C(3), Pipe::S}, 77}});
  const sim::Report* rep = find(r, sim::ReportKind::InvalidInstr);
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_NE(rep->message.find("cross-core flag mode 1 is not valid on the AIV of a AIV_ONLY kernel (CrossCoreSetFlag "
                              "docs, table 3: modes 1 and 2 need"),
            std::string::npos)
      << rep->message;
  EXPECT_EQ(rep->instrs.at(0).span.line, 76);
}

// Fixpipe L0C -> L1 (FixpipeL1, session 36): Mmad, then the converted tile into L1, then LoadData of it
// into L0A. The FIX -> MTE1 flag orders the load after the move (without it: a race); the dav_c220
// L0C -> L1 rules (nSize a multiple of 16, quantPre F322F16 / F322BF16) are API reports at the call's line.
TEST(AscendSimFixpipeL1, OrderedByFixMte1AndItsRules) {
  struct Case { bool flag; int64_t n; QuantMode q; const char* what; };
  for (const Case& k : {Case{true, 16, QuantMode::F322F16, nullptr}, Case{true, 16, QuantMode::F322BF16, nullptr},
                        Case{false, 16, QuantMode::F322F16, "race"},
                        Case{true, 24, QuantMode::F322F16, "nSize is a multiple of 16"},
                        Case{true, 16, QuantMode::NoQuant, "only F322F16 / F322BF16"}}) {
    CubeRig r;
    r.b.emit(r.mmad(16, 16, true), 100);
    r.b.set(Pipe::M, Pipe::FIX, C(0), 101);
    r.b.wait(Pipe::M, Pipe::FIX, C(0), 101);
    ir::DTypeCode to = k.q == QuantMode::F322BF16 ? DTypeCode::bf16 : DTypeCode::f16;
    r.b.emit(FixpipeL1{at(r.c0), at(r.l1), DTypeCode::f32, to, C(k.n), C(16), C(16), C(16), k.q}, 102);
    if (k.flag) {
      r.b.set(Pipe::FIX, Pipe::MTE1, C(0), 102);
      r.b.wait(Pipe::FIX, Pipe::MTE1, C(0), 103);
    }
    r.b.emit(LoadL0{at(r.l1), at(r.a0), to, C(16), C(0), C(0), C(16), C(16), false}, 103);
    auto res = r.run();
    if (!k.what) {
      EXPECT_TRUE(res.reports.empty()) << res.summary();
    } else if (std::string(k.what) == "race") {
      EXPECT_TRUE(res.has(sim::ReportKind::Race)) << res.summary();
    } else {
      const sim::Report* rep = api_report(res, k.what);
      ASSERT_NE(rep, nullptr) << res.summary();
      EXPECT_EQ(rep->instrs.at(0).span.line, 102) << rep->format();
    }
  }
}

}  // namespace
}  // namespace tw::ascend
