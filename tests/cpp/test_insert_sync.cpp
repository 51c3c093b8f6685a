// insert_sync: before/after golden tests on small programs, and the expert examples with their
// hand-written flags stripped, re-synchronised and run in the simulator with the checker.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "ir/parser.h"
#include "target/ascend/select_vector_calls.h"
#include "target/ascend/insert_sync.h"
#include "target/ascend/select_instructions.h"
#include "target/ascend/pipeline.h"
#include "target/ascend/plan_memory.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/select_move_calls.h"
#include "target/ascend/simulator/numeric.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"
#include "transform/simplify.h"

namespace tw::ascend {
namespace {

const target::Target& b2() { return target::find_target("ascend910b2"); }

// --- stripping and simulating ----------------------------------------------------------------

bool is_local_sync(const Instr& in) {
  return std::holds_alternative<SetFlag>(in.op) || std::holds_alternative<WaitFlag>(in.op) ||
         std::holds_alternative<PipeBarrier>(in.op);
}

bool empty(const StmtPtr& s) { return !s || (s->kind == StmtKind::Seq && s->body.empty()); }

// s without its flags and barriers (null when nothing is left); Ifs left empty disappear.
StmtPtr strip(const StmtPtr& s) {
  if (!s) return s;
  switch (s->kind) {
    case StmtKind::Seq: {
      std::vector<StmtPtr> body;
      for (const auto& c : s->body)
        if (auto x = strip(c)) body.push_back(x);
      return seq(std::move(body), s->span);
    }
    case StmtKind::For: return for_(s->var, s->value, strip(s->body.at(0)), s->span);
    case StmtKind::If: {
      auto t = strip(s->body.at(0)), e = strip(s->else_body);
      if (empty(t) && empty(e)) return nullptr;
      return if_(s->value, t ? t : seq({}), empty(e) ? nullptr : e, s->span);
    }
    case StmtKind::Instr: return is_local_sync(s->instr) ? nullptr : s;
    default: return s;
  }
}

// The program without SetFlag/WaitFlag/PipeBarrier (cross-core flags kept).
Program stripped(const Program& p) {
  Program q = p;
  q.aic = strip(p.aic);
  q.aiv = strip(p.aiv);
  return q;
}

// Number of T instructions.
template <class T>
int count(const StmtPtr& s) {
  if (!s) return 0;
  int n = s->kind == StmtKind::Instr && std::holds_alternative<T>(s->instr.op) ? 1 : 0;
  for (const auto& c : s->body) n += count<T>(c);
  return n + count<T>(s->else_body);
}
template <class T>
int count(const Program& p) { return count<T>(p.aic) + count<T>(p.aiv); }

struct SimRun {
  sim::Result result;
  std::vector<std::vector<uint8_t>> data;
};

// Runs p with seeded random inputs (every tensor parameter, the same for the same seed).
SimRun simulate(const Program& p, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  SimRun run;
  std::vector<sim::Arg> args;
  for (const auto& k : p.params) {
    int64_t n = 1;
    for (const auto& d : k.shape) n *= *ir::as_const_int(d);
    std::vector<uint8_t> bytes(n * k.dtype.bytes());
    for (int64_t i = 0; i < n; ++i) {
      float v = u(rng);
      if (k.dtype.bytes() == 2) {
        uint16_t h = sim::num::f32_to_f16(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      } else {
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      }
    }
    run.data.push_back(std::move(bytes));
  }
  for (auto& d : run.data) args.push_back(sim::Arg{d.data(), static_cast<int64_t>(d.size()), 0});
  sim::Options o;
  o.check = true;
  run.result = sim::run(select_move_calls(select_vector_calls(p, b2()), b2()), b2().ascend, args, {}, o);
  // The programs here test synchronisation: some move tiles no instruction computed (a Fixpipe of an
  // L0C tile without an Mmad), which the simulator's unwritten-bytes rule reports, and some store part of an
  // output (the unwritten-output rule, session 39); not theirs to test.
  auto& reps = run.result.reports;
  reps.erase(std::remove_if(reps.begin(), reps.end(),
                            [](const sim::Report& x) {
                              return x.kind == sim::ReportKind::UninitRead || x.kind == sim::ReportKind::UnwrittenOutput;
                            }),
             reps.end());
  return run;
}

std::string reports(const sim::Result& r) {
  std::string s;
  for (const auto& x : r.reports) s += x.format() + "\n";
  return s;
}

Program expert_program(const char* text) {
  // The expert pipeline up to select_move_calls: insert_sync works on the byte-level moves and on
  // call-level vector instructions (a program stripped of its sync after select_vector_calls).
  ir::Kernel k = transform::simplify(ir::parse_kernel(text, "expert.tw"));
  return select_vector_calls(plan_memory(select_instructions(k, b2()), b2(), /*reuse=*/false), b2());
}

// Hand-synced vs stripped + insert_sync: zero reports, identical results, simulated time.
void check_example(const char* name, const char* text, double max_ratio = 1.5) {
  Program hand = expert_program(text);
  Program aut = insert_sync(stripped(hand), b2());
  SimRun h = simulate(hand), a = simulate(aut);
  EXPECT_TRUE(h.result.reports.empty()) << name << " (hand):\n" << reports(h.result);
  EXPECT_TRUE(a.result.reports.empty()) << name << " (auto):\n" << reports(a.result) << print_program(aut);
  ASSERT_EQ(h.data.size(), a.data.size());
  for (size_t i = 0; i < h.data.size(); ++i) EXPECT_TRUE(h.data[i] == a.data[i]) << name << ": param " << i << " differs";
  std::printf("[insert_sync] %-14s hand %8lld cycles (%d set/wait, %d barriers)  auto %8lld cycles (%d set/wait, %d barriers)  ratio %.3f\n",
              name, static_cast<long long>(h.result.total_cycles), count<SetFlag>(hand), count<PipeBarrier>(hand),
              static_cast<long long>(a.result.total_cycles), count<SetFlag>(aut), count<PipeBarrier>(aut),
              static_cast<double>(a.result.total_cycles) / static_cast<double>(h.result.total_cycles));
  EXPECT_EQ(count<SetFlag>(aut), count<WaitFlag>(aut)) << name;
  EXPECT_LE(a.result.total_cycles, max_ratio * h.result.total_cycles) << name << "\n" << print_program(aut);
}

// --- small programs: before/after golden texts ----------------------------------------------

using ir::BinOp;
using ir::DTypeCode;
using ir::Expr;

Expr C(int64_t v) { return ir::int_imm(v); }
Expr F(double v) { return ir::float_imm(v); }
Expr add(Expr a, Expr b) { return ir::binary(BinOp::Add, std::move(a), std::move(b)); }
Expr mul(Expr a, Expr b) { return ir::binary(BinOp::Mul, std::move(a), std::move(b)); }
Expr mod(Expr a, Expr b) { return ir::binary(BinOp::Mod, std::move(a), std::move(b)); }

struct Builder {
  Program p;
  std::vector<std::vector<StmtPtr>> stack{{}};
  Builder(KernelType t, int gm_floats = 8192) {
    p.name = "k";
    p.kernel_type = t;
    p.block_idx = ir::var("block_idx");
    p.sub_block_idx = ir::var("sub_block_idx");
    p.block_dim = C(1);
    for (const char* n : {"X", "Y", "W"}) {
      KernelParam k;
      k.name = n;
      k.dtype = DTypeCode::f32;
      k.shape = {C(gm_floats)};
      k.is_output = n[0] != 'X';
      p.params.push_back(k);
    }
  }
  int buf(const char* name, Mem mem, int64_t offset, int64_t bytes, CoreType core = CoreType::AIV) {
    BufferDecl b;
    b.name = name, b.core = core, b.mem = mem, b.offset = offset, b.bytes = bytes, b.dtype = DTypeCode::f32;
    p.buffers.push_back(b);
    return static_cast<int>(p.buffers.size()) - 1;
  }
  void emit(InstrOp op) { stack.back().push_back(instr(std::move(op))); }
  template <class F>
  void loop(const ir::Var& v, int64_t extent, F body) {
    stack.emplace_back();
    body();
    auto b = seq(std::move(stack.back()));
    stack.pop_back();
    stack.back().push_back(for_(v, C(extent), b));
  }
  template <class F>
  void loop(const ir::Var& v, Expr extent, F body) {
    stack.emplace_back();
    body();
    auto b = seq(std::move(stack.back()));
    stack.pop_back();
    stack.back().push_back(for_(v, std::move(extent), b));
  }
  template <class F>
  void when(Expr cond, F body) {
    stack.emplace_back();
    body();
    auto b = seq(std::move(stack.back()));
    stack.pop_back();
    stack.back().push_back(if_(std::move(cond), b));
  }
  // 256 floats (1 KiB) moves and vector ops
  void load(int ub, Expr ub_off, Expr gm_off, int param = 0) {
    emit(CopyGmToUb{GmRef{param, std::move(gm_off)}, LocalRef{ub, std::move(ub_off)}, DTypeCode::f32, C(1), C(1024), C(1024), C(1024)});
  }
  void store(int ub, Expr ub_off, Expr gm_off, int param = 1) {
    emit(CopyUbToGm{LocalRef{ub, std::move(ub_off)}, GmRef{param, std::move(gm_off)}, DTypeCode::f32, C(1), C(1024), C(1024), C(1024)});
  }
  static VecOperand v(int b, Expr off) { return VecOperand{LocalRef{b, std::move(off)}, C(256)}; }
  void adds(int dst, Expr doff, int src, Expr soff) {
    emit(VecBinaryScalar{VecBinOp::Add, DTypeCode::f32, v(dst, std::move(doff)), v(src, std::move(soff)), F(1.0), C(1), C(256)});
  }
  void addv(int dst, int a, int b) {
    emit(VecBinary{VecBinOp::Add, DTypeCode::f32, v(dst, C(0)), v(a, C(0)), v(b, C(0)), C(1), C(256)});
  }
  void dup(int dst) { emit(VecDup{DTypeCode::f32, v(dst, C(0)), F(0.0), C(1), C(256)}); }
  Program aiv() {
    p.aiv = seq(std::move(stack.back()));
    return p;
  }
  Program aic() {
    p.aic = seq(std::move(stack.back()));
    return p;
  }
};

// The code part of the printed program (after the buffer lines).
std::string code(const Program& p) {
  std::string s = print_program(p);
  size_t at = s.find("\nAIC:\n");
  if (at == std::string::npos) at = s.find("\nAIV:\n");
  return s.substr(at + 1);
}

// insert_sync(before) printed == after, and the simulator's checker is silent on it.
void expect_sync(const Program& before, const std::string& after) {
  Program out = insert_sync(before, b2());
  EXPECT_EQ(code(out), after) << code(out);
  SimRun r = simulate(out);
  EXPECT_TRUE(r.result.reports.empty()) << reports(r.result);

}

TEST(InsertSync, StraightLineRawAcrossPipes) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024), y = b.buf("y", Mem::UB, 1024, 1024);
  b.load(x, C(0), C(0));
  b.adds(y, C(0), x, C(0));
  b.store(y, C(0), C(0));
  Program before = b.aiv();
  EXPECT_FALSE(simulate(before).result.reports.empty());  // the unsynchronised program races
  expect_sync(before, R"(AIV:
  MTE2 CopyGmToUb x[0] <- X[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
  MTE2 SetFlag<MTE2_V>(0)
  V WaitFlag<MTE2_V>(0)
  V Adds y[0]/256 <- x[0]/256, 1.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(0)
  MTE3 CopyUbToGm Y[0] <- y[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
)");
}

TEST(InsertSync, SamePipeRawGetsOneBarrier) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024), y = b.buf("y", Mem::UB, 1024, 1024), z = b.buf("z", Mem::UB, 2048, 1024),
      w = b.buf("w", Mem::UB, 3072, 1024);
  b.dup(x);
  b.adds(y, C(0), x, C(0));  // reads x: barrier
  b.adds(w, C(0), x, C(0));  // reads x too: covered by the same barrier
  b.adds(z, C(0), y, C(0));  // reads y: barrier
  b.store(z, C(0), C(0));
  b.store(w, C(0), C(1024));  // its own pair: the V -> MTE3 pair of z would hold it behind z's Adds
  expect_sync(b.aiv(), R"(AIV:
  V Duplicate x[0]/256 <- 0.0 float32 1x256
  V PipeBarrier<V>
  V Adds y[0]/256 <- x[0]/256, 1.0 float32 1x256
  V Adds w[0]/256 <- x[0]/256, 1.0 float32 1x256
  V SetFlag<V_MTE3>(1)
  V PipeBarrier<V>
  V Adds z[0]/256 <- y[0]/256, 1.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(0)
  MTE3 CopyUbToGm Y[0] <- z[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
  MTE3 WaitFlag<V_MTE3>(1)
  MTE3 CopyUbToGm Y[1024] <- w[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
)");
}

TEST(InsertSync, WarAcrossALoopIsPresetAndDrained) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024), y = b.buf("y", Mem::UB, 1024, 1024);
  auto i = ir::var("i");
  b.loop(i, 4, [&] {
    b.load(x, C(0), mul(i, C(1024)));
    b.adds(y, C(0), x, C(0));
    b.store(y, C(0), mul(i, C(1024)));
  });
  expect_sync(b.aiv(), R"(AIV:
  V SetFlag<V_MTE2>(0)
  MTE3 SetFlag<MTE3_V>(0)
  for i in range(4):
    MTE2 WaitFlag<V_MTE2>(0)
    MTE2 CopyGmToUb x[0] <- X[i * 1024] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
    MTE2 SetFlag<MTE2_V>(0)
    V WaitFlag<MTE2_V>(0)
    V WaitFlag<MTE3_V>(0)
    V Adds y[0]/256 <- x[0]/256, 1.0 float32 1x256
    V SetFlag<V_MTE3>(0)
    V SetFlag<V_MTE2>(0)
    MTE3 WaitFlag<V_MTE3>(0)
    MTE3 CopyUbToGm Y[i * 1024] <- y[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
    MTE3 SetFlag<MTE3_V>(0)
  MTE2 WaitFlag<V_MTE2>(0)
  V WaitFlag<MTE3_V>(0)
)");
}

TEST(InsertSync, DependenceOutOfAndIntoAnIf) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024), y = b.buf("y", Mem::UB, 1024, 1024);
  Expr first = ir::binary(BinOp::EQ, b.p.block_idx, C(0));
  b.dup(x);
  b.when(first, [&] { b.load(x, C(0), C(0)); });  // WAW after the Dup, RAW for the Adds
  b.adds(y, C(0), x, C(0));
  b.when(first, [&] { b.store(y, C(0), C(0)); });
  expect_sync(b.aiv(), R"(AIV:
  V Duplicate x[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE2>(0)
  MTE2 WaitFlag<V_MTE2>(0)
  if block_idx == 0:
    MTE2 CopyGmToUb x[0] <- X[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
  MTE2 SetFlag<MTE2_V>(0)
  V PipeBarrier<V>
  V WaitFlag<MTE2_V>(0)
  V Adds y[0]/256 <- x[0]/256, 1.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(0)
  if block_idx == 0:
    MTE3 CopyUbToGm Y[0] <- y[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
)");
}

// A wait due before an `if` whose branch has other work of the waiting pipe first sinks into
// the branches: before the instruction that needs it, and at the end of the other branch.
TEST(InsertSync, WaitSinksIntoTheIfThatNeedsIt) {
  Builder b(KernelType::AIV_ONLY);
  int w = b.buf("w", Mem::UB, 0, 1024), x = b.buf("x", Mem::UB, 1024, 1024);
  Expr first = ir::binary(BinOp::EQ, b.p.block_idx, C(0));
  b.load(w, C(0), C(0));
  b.dup(x);
  b.when(first, [&] {
    b.store(w, C(0), C(0));     // only needs the load
    b.store(x, C(0), C(1024));  // needs the Dup: its wait goes right before it
  });
  expect_sync(b.aiv(), R"(AIV:
  MTE2 CopyGmToUb w[0] <- X[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
  MTE2 SetFlag<MTE2_MTE3>(0)
  V Duplicate x[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  MTE3 WaitFlag<MTE2_MTE3>(0)
  if block_idx == 0:
    MTE3 CopyUbToGm Y[0] <- w[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
    MTE3 WaitFlag<V_MTE3>(0)
    MTE3 CopyUbToGm Y[1024] <- x[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
  else:
    MTE3 WaitFlag<V_MTE3>(0)
)");
}

// A set due after an `if` whose branch has more work of the setting pipe after the producer
// rises into the branches: right after the producer, and at the start of the other branch.
TEST(InsertSync, SetRisesIntoTheIfThatProducesIt) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024), z = b.buf("z", Mem::UB, 1024, 1024);
  Expr first = ir::binary(BinOp::EQ, b.p.block_idx, C(0));
  b.dup(z);
  b.when(first, [&] {
    b.dup(x);                   // what the store needs: the set follows it
    b.adds(z, C(0), z, C(0));  // more V work the store does not wait for
  });
  b.store(x, C(0), C(0));
  expect_sync(b.aiv(), R"(AIV:
  V Duplicate z[0]/256 <- 0.0 float32 1x256
  V PipeBarrier<V>
  if block_idx == 0:
    V Duplicate x[0]/256 <- 0.0 float32 1x256
    V SetFlag<V_MTE3>(0)
    V Adds z[0]/256 <- z[0]/256, 1.0 float32 1x256
  else:
    V SetFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(0)
  MTE3 CopyUbToGm Y[0] <- x[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
)");
}

// A loop whose statements sit under `if`s a drain iteration skips (the shape of a software-
// pipelined loop): x is stored (MTE3) under one `if` and updated (V) under another. The pairs
// are placed in the loop body (they run on every iteration, skipped `if`s or not), and the
// MTE3 -> V pair and the carried V -> MTE3 pair order each other's id reuse around the loop
// (insert_sync's reaches over two iterations), so neither needs a guard; the simulator's
// checker sees no flag set twice.
TEST(InsertSync, PairsAroundIfsOrderTheirOwnIdReuse) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024);
  auto k = ir::var("k");
  b.dup(x);
  b.loop(k, 4, [&] {
    b.when(ir::binary(BinOp::LT, k, C(3)), [&] { b.store(x, C(0), mul(k, C(1024))); });
    b.when(ir::binary(BinOp::GT, k, C(0)), [&] { b.adds(x, C(0), x, C(0)); });
  });
  expect_sync(b.aiv(), R"(AIV:
  V Duplicate x[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  V SetFlag<V_MTE3>(1)
  V PipeBarrier<V>
  MTE3 WaitFlag<V_MTE3>(0)
  for k in range(4):
    MTE3 WaitFlag<V_MTE3>(1)
    if k < 3:
      MTE3 CopyUbToGm Y[k * 1024] <- x[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
    MTE3 SetFlag<MTE3_V>(0)
    V PipeBarrier<V>
    V WaitFlag<MTE3_V>(0)
    if k > 0:
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
    V SetFlag<V_MTE3>(1)
  MTE3 WaitFlag<V_MTE3>(1)
)");
}

// x is stored (MTE3) and then updated (V) inside one `if` of a loop. The carried V -> MTE3 pair
// (the update before the next iteration's store) orders accesses that are all in the `if`: it
// goes into the `if` (session 26), wait before the store and set after the update, so the
// MTE3 -> V pair between them orders its set after its wait in every execution that runs them.
// (Left before and after the `if`, an iteration that skips it ran the wait and then the set with
// nothing ordering V after MTE3: it needed a guard, a round trip in every iteration.)
TEST(InsertSync, CarriedPairUnderAnIfGoesIntoIt) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024);
  auto k = ir::var("k");
  b.dup(x);
  b.loop(k, 4, [&] {
    b.when(ir::binary(BinOp::NE, k, C(2)), [&] {
      b.store(x, C(0), mul(k, C(1024)));
      b.adds(x, C(0), x, C(0));
    });
  });
  expect_sync(b.aiv(), R"(AIV:
  V Duplicate x[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  V SetFlag<V_MTE3>(1)
  MTE3 WaitFlag<V_MTE3>(0)
  for k in range(4):
    if k != 2:
      MTE3 WaitFlag<V_MTE3>(1)
      MTE3 CopyUbToGm Y[k * 1024] <- x[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE3 SetFlag<MTE3_V>(0)
      V WaitFlag<MTE3_V>(0)
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
      V SetFlag<V_MTE3>(1)
  MTE3 WaitFlag<V_MTE3>(1)
)");
}

// Guard pairs: x is stored (MTE3) and updated (V) under one `if` of a loop and updated again
// under another. The carried V -> MTE3 pair (the updates before the next iteration's store) cannot
// go into either `if`; the reverse MTE3 -> V pair that would order its id reuse sits in the first
// (the store -> second update dependence is implied by it), which an iteration may skip: a guard
// (MTE3 sets, V waits, right before the carried set) keeps V from setting V_MTE3 again before
// MTE3 consumed the previous set.
Program two_ifs() {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024);
  auto k = ir::var("k");
  b.dup(x);
  b.loop(k, 4, [&] {
    b.when(ir::binary(BinOp::NE, k, C(2)), [&] {
      b.store(x, C(0), mul(k, C(1024)));
      b.adds(x, C(0), x, C(0));
    });
    b.when(ir::binary(BinOp::NE, k, C(1)), [&] { b.adds(x, C(0), x, C(0)); });
  });
  return b.aiv();
}

TEST(InsertSync, CarriedPairAcrossTwoIfsGetsAGuard) {
  expect_sync(two_ifs(), R"(AIV:
  V Duplicate x[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  V SetFlag<V_MTE3>(1)
  V PipeBarrier<V>
  MTE3 WaitFlag<V_MTE3>(0)
  for k in range(4):
    MTE3 WaitFlag<V_MTE3>(1)
    if k != 2:
      MTE3 CopyUbToGm Y[k * 1024] <- x[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE3 SetFlag<MTE3_V>(0)
      V WaitFlag<MTE3_V>(0)
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
    V PipeBarrier<V>
    if k != 1:
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
    MTE3 SetFlag<MTE3_V>(1)
    V WaitFlag<MTE3_V>(1)
    V SetFlag<V_MTE3>(1)
  MTE3 WaitFlag<V_MTE3>(1)
)");
}

// A guard that finds no free event id is a PipeBarrier<ALL> where its set and wait would be:
// before the carried set it orders (after it, nothing ordered the set after the wait).
TEST(InsertSync, GuardWithoutAnIdIsAPipeAllBeforeTheSet) {
  target::Target small = b2();
  small.ascend.flag_event_ids = 3;
  Program p = insert_sync(two_ifs(), small);
  std::string text = code(p);
  EXPECT_EQ(text, R"(AIV:
  V Duplicate x[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  ALL PipeBarrier<ALL>
  V PipeBarrier<V>
  for k in range(4):
    MTE3 WaitFlag<V_MTE3>(0)
    if k != 2:
      MTE3 CopyUbToGm Y[k * 1024] <- x[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE3 SetFlag<MTE3_V>(0)
      V WaitFlag<MTE3_V>(0)
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
    V PipeBarrier<V>
    if k != 1:
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
    ALL PipeBarrier<ALL>
    V SetFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(0)
)") << text;
  SimRun r = simulate(p);
  EXPECT_TRUE(r.result.reports.empty()) << reports(r.result);
}

// Chains through an inner loop (session 27): two_ifs() with an inner loop between the `if`s that
// stores y (MTE3) and updates it (V) every step. The carried V -> MTE3 pair of x waits before
// the first `if` and sets after the second; the inner loop's MTE3 -> V pair, in its first step,
// orders MTE3 (past the carried wait) before V reaches the carried set. With a trip count that is
// provably >= 1 (here `k % 3 + 1`, from the value ranges) no guard is needed; with one that may
// be 0 (`k % 3`) the chain may not run and the guard stays.
Program chain_between_ifs(void (*middle)(Builder&, const ir::Var& k, int y)) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024), y = b.buf("y", Mem::UB, 1024, 1024);
  auto k = ir::var("k");
  b.dup(x);
  b.dup(y);
  b.loop(k, 4, [&] {
    b.when(ir::binary(BinOp::NE, k, C(2)), [&] {
      b.store(x, C(0), mul(k, C(1024)));
      b.adds(x, C(0), x, C(0));
    });
    middle(b, k, y);
    b.when(ir::binary(BinOp::NE, k, C(1)), [&] { b.adds(x, C(0), x, C(0)); });
  });
  return b.aiv();
}
// y stored (MTE3) at row r and updated (V): an MTE3 -> V pair.
void store_update(Builder& b, int y, Expr r) {
  b.store(y, C(0), add(C(4096), mul(std::move(r), C(1024))));
  b.adds(y, C(0), y, C(0));
}
Program inner_loop_between_ifs(Expr (*trips)(Expr)) {
  static Expr (*t)(Expr);
  t = trips;
  return chain_between_ifs([](Builder& b, const ir::Var& k, int y) {
    auto j = ir::var("j");
    b.loop(j, t(k), [&] { store_update(b, y, j); });
  });
}
// Does the carried V -> MTE3 set of x (the loop body's last line) have a guard right before it?
bool carried_set_guarded(const Program& p) {
  std::string s = code(p);
  size_t at = s.rfind("\n    V SetFlag<V_MTE3>");
  size_t prev = s.rfind("\n", at - 1);
  return s.compare(prev + 1, 22, "    V WaitFlag<MTE3_V>") == 0;
}

TEST(InsertSync, ChainThroughAnInnerLoopThatRunsOrdersTheCarriedSet) {
  Program p = inner_loop_between_ifs([](Expr k) { return add(mod(k, C(3)), C(1)); });
  Program out = insert_sync(p, b2());
  EXPECT_EQ(code(out), R"(AIV:
  V Duplicate x[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(1)
  V Duplicate y[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  V SetFlag<V_MTE3>(2)
  V SetFlag<V_MTE3>(3)
  V PipeBarrier<V>
  MTE3 WaitFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(1)
  for k in range(4):
    MTE3 WaitFlag<V_MTE3>(3)
    if k != 2:
      MTE3 CopyUbToGm Y[k * 1024] <- x[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE3 SetFlag<MTE3_V>(0)
      V WaitFlag<MTE3_V>(0)
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
    for j in range(k % 3 + 1):
      MTE3 WaitFlag<V_MTE3>(2)
      MTE3 CopyUbToGm Y[4096 + j * 1024] <- y[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE3 SetFlag<MTE3_V>(1)
      V WaitFlag<MTE3_V>(1)
      V Adds y[0]/256 <- y[0]/256, 1.0 float32 1x256
      V SetFlag<V_MTE3>(2)
    V PipeBarrier<V>
    if k != 1:
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
    V SetFlag<V_MTE3>(3)
  MTE3 WaitFlag<V_MTE3>(2)
  MTE3 WaitFlag<V_MTE3>(3)
)") << code(out);
  SimRun r = simulate(out);
  EXPECT_TRUE(r.result.reports.empty()) << reports(r.result);
}

TEST(InsertSync, ChainThroughAnInnerLoopThatMayNotRunKeepsTheGuard) {
  Program p = inner_loop_between_ifs([](Expr k) { return mod(k, C(3)); });
  Program out = insert_sync(p, b2());
  EXPECT_EQ(code(out), R"(AIV:
  V Duplicate x[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(1)
  V Duplicate y[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  V SetFlag<V_MTE3>(2)
  V SetFlag<V_MTE3>(3)
  V PipeBarrier<V>
  MTE3 WaitFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(1)
  for k in range(4):
    MTE3 WaitFlag<V_MTE3>(3)
    if k != 2:
      MTE3 CopyUbToGm Y[k * 1024] <- x[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE3 SetFlag<MTE3_V>(0)
      V WaitFlag<MTE3_V>(0)
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
    for j in range(k % 3):
      MTE3 WaitFlag<V_MTE3>(2)
      MTE3 CopyUbToGm Y[4096 + j * 1024] <- y[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE3 SetFlag<MTE3_V>(1)
      V WaitFlag<MTE3_V>(1)
      V Adds y[0]/256 <- y[0]/256, 1.0 float32 1x256
      V SetFlag<V_MTE3>(2)
    V PipeBarrier<V>
    if k != 1:
      V Adds x[0]/256 <- x[0]/256, 1.0 float32 1x256
    MTE3 SetFlag<MTE3_V>(2)
    V WaitFlag<MTE3_V>(2)
    V SetFlag<V_MTE3>(3)
  MTE3 WaitFlag<V_MTE3>(2)
  MTE3 WaitFlag<V_MTE3>(3)
)") << code(out);
  SimRun r = simulate(out);
  EXPECT_TRUE(r.result.reports.empty()) << reports(r.result);
}

// The chain's link in the first iteration of an inner loop of 2 steps, under an `if` taken there
// (`j < 1` holds for j = 0): no guard. Under `j > 0` (not taken in the first step) the guard stays.
TEST(InsertSync, ChainThroughAnIfTakenInTheFirstIterationOrdersTheCarriedSet) {
  Program taken = chain_between_ifs([](Builder& b, const ir::Var& k, int y) {
    auto j = ir::var("j");
    b.loop(j, 2, [&] { b.when(ir::binary(BinOp::LT, j, C(1)), [&] { store_update(b, y, add(k, j)); }); });
  });
  Program later = chain_between_ifs([](Builder& b, const ir::Var& k, int y) {
    auto j = ir::var("j");
    b.loop(j, 2, [&] { b.when(ir::binary(BinOp::GT, j, C(0)), [&] { store_update(b, y, add(k, j)); }); });
  });
  for (const Program* p : {&taken, &later}) {
    Program out = insert_sync(*p, b2());
    EXPECT_EQ(carried_set_guarded(out), p == &later) << code(out);
    SimRun r = simulate(out);
    EXPECT_TRUE(r.result.reports.empty()) << reports(r.result) << code(out);
  }
}

// An `if` / `else` with an MTE3 -> V link in both branches orders MTE3 before V whichever runs: no
// guard. With the link in one branch only the guard stays.
TEST(InsertSync, ChainThroughBothBranchesOfAnIfOrdersTheCarriedSet) {
  Program both = chain_between_ifs([](Builder& b, const ir::Var& k, int y) {
    b.stack.emplace_back();
    store_update(b, y, k);
    auto then_b = seq(std::move(b.stack.back()));
    b.stack.back().clear();
    store_update(b, y, add(k, C(1)));
    auto else_b = seq(std::move(b.stack.back()));
    b.stack.pop_back();
    b.stack.back().push_back(if_(ir::binary(BinOp::LT, k, C(2)), then_b, else_b));
  });
  Program one = chain_between_ifs([](Builder& b, const ir::Var& k, int y) {
    b.when(ir::binary(BinOp::LT, k, C(2)), [&] { store_update(b, y, k); });
  });
  for (const Program* p : {&both, &one}) {
    Program out = insert_sync(*p, b2());
    EXPECT_EQ(carried_set_guarded(out), p == &one) << code(out);
    SimRun r = simulate(out);
    EXPECT_TRUE(r.result.reports.empty()) << reports(r.result) << code(out);
  }
}

// Event-id sharing must see where emit() puts waits and sets (issue 13, paged decode with one
// page per step): the MTE2 -> V pair of ua (top of the body) and the one of uc (inside the `if`)
// looked ordered through the V -> MTE2 pair of ub, but that pair's wait sinks into the `if`,
// right before the load of ub, after the set of uc's pair: MTE2 could set the shared id twice
// before V's wait for ua (before the fix both pairs were MTE2_V(0)). A wait that sinks into the
// `if` at kid w and a set that rises into it are not ordered (wait_before_set), so the two pairs
// get their own ids. (The simulator's timing does not make this small program race; the golden
// text pins the ids.)
TEST(InsertSync, WaitSunkIntoAnIfDoesNotOrderASharedId) {
  Builder b(KernelType::AIV_ONLY);
  int ua = b.buf("ua", Mem::UB, 0, 1024), ub = b.buf("ub", Mem::UB, 1024, 1024), uc = b.buf("uc", Mem::UB, 2048, 1024),
      ud = b.buf("ud", Mem::UB, 3072, 1024), ue = b.buf("ue", Mem::UB, 4096, 1024);
  auto i = ir::var("i");
  b.loop(i, 4, [&] {
    b.load(ua, C(0), mul(i, C(1024)));
    b.adds(ub, C(0), ua, C(0));
    b.when(ir::binary(BinOp::LT, i, C(3)), [&] {
      b.load(uc, C(0), C(1024));
      b.adds(ud, C(0), uc, C(0));
      b.load(ub, C(0), C(2048));  // WAW on ub: the V -> MTE2 wait sinks to here
    });
    b.adds(ue, C(0), ua, C(0));
  });
  Program out = insert_sync(b.aiv(), b2());
  EXPECT_EQ(code(out), R"(AIV:
  V SetFlag<V_MTE2>(1)
  for i in range(4):
    MTE2 WaitFlag<V_MTE2>(1)
    MTE2 CopyGmToUb ua[0] <- X[i * 1024] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
    MTE2 SetFlag<MTE2_V>(0)
    V WaitFlag<MTE2_V>(0)
    V Adds ub[0]/256 <- ua[0]/256, 1.0 float32 1x256
    V SetFlag<V_MTE2>(0)
    if i < 3:
      MTE2 CopyGmToUb uc[0] <- X[1024] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE2 SetFlag<MTE2_V>(1)
      V WaitFlag<MTE2_V>(1)
      V Adds ud[0]/256 <- uc[0]/256, 1.0 float32 1x256
      MTE2 WaitFlag<V_MTE2>(0)
      MTE2 CopyGmToUb ub[0] <- X[2048] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
    else:
      MTE2 WaitFlag<V_MTE2>(0)
    V Adds ue[0]/256 <- ua[0]/256, 1.0 float32 1x256
    V SetFlag<V_MTE2>(1)
  MTE2 WaitFlag<V_MTE2>(1)
)") << code(out);
  SimRun r = simulate(out);
  EXPECT_TRUE(r.result.reports.empty()) << reports(r.result);
}

TEST(InsertSync, NestedLoopAccumulation) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024), acc = b.buf("acc", Mem::UB, 1024, 1024);
  auto i = ir::var("i"), j = ir::var("j");
  b.loop(i, 2, [&] {
    b.dup(acc);
    b.loop(j, 3, [&] {
      b.load(x, C(0), mul(add(mul(i, C(3)), j), C(1024)));
      b.addv(acc, acc, x);
    });
    b.store(acc, C(0), mul(i, C(1024)));
  });
  expect_sync(b.aiv(), R"(AIV:
  V SetFlag<V_MTE2>(0)
  MTE3 SetFlag<MTE3_V>(0)
  for i in range(2):
    V WaitFlag<MTE3_V>(0)
    V Duplicate acc[0]/256 <- 0.0 float32 1x256
    V PipeBarrier<V>
    for j in range(3):
      MTE2 WaitFlag<V_MTE2>(0)
      MTE2 CopyGmToUb x[0] <- X[(i * 3 + j) * 1024] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE2 SetFlag<MTE2_V>(0)
      V WaitFlag<MTE2_V>(0)
      V Add acc[0]/256 <- acc[0]/256, x[0]/256 float32 1x256
      V SetFlag<V_MTE2>(0)
    V SetFlag<V_MTE3>(0)
    MTE3 WaitFlag<V_MTE3>(0)
    MTE3 CopyUbToGm Y[i * 1024] <- acc[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
    MTE3 SetFlag<MTE3_V>(0)
  MTE2 WaitFlag<V_MTE2>(0)
  V WaitFlag<MTE3_V>(0)
)");
}

// Mmads accumulating into fewer than 10 L0C fractals need PipeBarrier<PIPE_M> between them (Mmad
// docs): one before the 32 x 32 accumulation (guarded by its init), none before 64 x 160 (40
// fractals), a run-time size check for a symbolic n.
TEST(InsertSync, ShortMmadAccumulationsGetAPipeMBarrier) {
  Builder b(KernelType::AIC_ONLY);
  int a0 = b.buf("a0", Mem::L0A, 0, 8192, CoreType::AIC), b0 = b.buf("b0", Mem::L0B, 0, 8192, CoreType::AIC);
  int c0 = b.buf("c0", Mem::L0C, 0, 40960, CoreType::AIC), c1 = b.buf("c1", Mem::L0C, 40960, 40960, CoreType::AIC);
  auto k = ir::var("k"), n = ir::var("n");
  auto mm = [&](int c, int64_t m, Expr nn) {
    b.emit(Mmad{LocalRef{a0, C(0)}, LocalRef{b0, C(0)}, LocalRef{c, C(0)}, DTypeCode::f16, DTypeCode::f32, C(m), std::move(nn),
                C(16), ir::binary(BinOp::EQ, k, C(0))});
  };
  b.loop(k, 3, [&] {
    mm(c0, 32, C(32));
    mm(c1, 64, C(160));
  });
  Program before = b.aic();
  Program out = insert_sync(before, b2());
  std::string s = code(out);
  EXPECT_EQ(s.find("PipeBarrier<M>"), s.rfind("PipeBarrier<M>")) << s;  // exactly one
  size_t bar = s.find("PipeBarrier<M>"), small = s.find("m=32 n=32"), big = s.find("m=64 n=160");
  ASSERT_NE(bar, std::string::npos) << s;
  EXPECT_LT(bar, small) << s;
  EXPECT_LT(small, big) << s;
  SimRun r = simulate(out);
  EXPECT_TRUE(r.result.reports.empty()) << reports(r.result);
  // without it, the simulator reports the missing barrier
  SimRun bare = simulate(before);
  bool reported = false;
  for (const auto& x : bare.result.reports) reported |= x.kind == sim::ReportKind::ApiRule;
  EXPECT_TRUE(reported) << reports(bare.result);

  Builder v(KernelType::AIC_ONLY);
  a0 = v.buf("a0", Mem::L0A, 0, 8192, CoreType::AIC), b0 = v.buf("b0", Mem::L0B, 0, 8192, CoreType::AIC);
  c0 = v.buf("c0", Mem::L0C, 0, 40960, CoreType::AIC);
  v.emit(Mmad{LocalRef{a0, C(0)}, LocalRef{b0, C(0)}, LocalRef{c0, C(0)}, DTypeCode::f16, DTypeCode::f32, C(16), n, C(16),
              ir::binary(BinOp::EQ, k, C(0))});
  std::string sv = code(insert_sync(v.aic(), b2()));
  EXPECT_NE(sv.find("ceildiv(n, 16)"), std::string::npos) << sv;
}

TEST(InsertSync, BuffersSharingBytesConflict) {
  Builder b(KernelType::AIV_ONLY);
  int a = b.buf("a", Mem::UB, 0, 1024), c = b.buf("c", Mem::UB, 0, 1024);  // c reuses a's bytes
  int d = b.buf("d", Mem::UB, 1024, 1024);
  b.dup(a);
  b.store(a, C(0), C(0));
  b.load(c, C(0), C(0), 0);  // overwrites a's bytes: after the store (MTE3 -> MTE2)
  b.load(d, C(0), C(1024), 0);
  b.addv(d, d, c);
  b.store(d, C(0), C(1024));  // V_MTE3 id 0 again: the first pair's wait is ordered before this set
  expect_sync(b.aiv(), R"(AIV:
  V Duplicate a[0]/256 <- 0.0 float32 1x256
  V SetFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(0)
  MTE3 CopyUbToGm Y[0] <- a[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
  MTE3 SetFlag<MTE3_MTE2>(0)
  MTE2 WaitFlag<MTE3_MTE2>(0)
  MTE2 CopyGmToUb c[0] <- X[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
  MTE2 CopyGmToUb d[0] <- X[1024] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
  MTE2 SetFlag<MTE2_V>(0)
  V WaitFlag<MTE2_V>(0)
  V Add d[0]/256 <- d[0]/256, c[0]/256 float32 1x256
  V SetFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(0)
  MTE3 CopyUbToGm Y[1024] <- d[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
)");
}

TEST(InsertSync, IllegalPairIsRelayed) {
  // AIC: FixPipe writes GM W, MTE2 reads it back: FIX -> MTE2 is not a legal pair on the AIC.
  Builder b(KernelType::AIC_ONLY);
  int c = b.buf("c", Mem::L0C, 0, 1024, CoreType::AIC), l1 = b.buf("l1", Mem::L1, 0, 512, CoreType::AIC);
  b.emit(Fixpipe{LocalRef{c, C(0)}, GmRef{2, C(0)}, DTypeCode::f32, DTypeCode::f16, C(16), C(16), C(16), C(16)});
  b.emit(CopyGmToL1{GmRef{2, C(0)}, LocalRef{l1, C(0)}, DTypeCode::f16, C(16), C(16), C(16), C(16), C(16)});
  expect_sync(b.aic(), R"(AIC:
  FIX Fixpipe W[0] <- c[0] float32->float16 m=16 n=16 src_rows=16 dst_row_stride=16
  FIX SetFlag<FIX_MTE1>(0)
  MTE1 WaitFlag<FIX_MTE1>(0)
  MTE1 SetFlag<MTE1_MTE2>(0)
  MTE2 WaitFlag<MTE1_MTE2>(0)
  MTE2 CopyGmToL1 l1[0] <- W[0] float16 rows=16 cols=16 src_row_stride=16 nz=16x16
)");
}

// Relayed pairs reuse their ids every iteration like any other pair (session 26, h-hb14b; llm
// fuzz seeds 2785-2859, skew_cube_loops' k loop, where the FIX -> MTE2 set sat in an `if` and the
// pairs that order it back sat in another one the drain iterations skip). FixPipe writes W[0]
// under `if k < 1`; under `if k >= 1` MTE2 reads W[0..] and FixPipe writes W[128]. The intra
// FIX -> MTE2 pair is relayed (FIX_MTE1, then MTE1_MTE2); the pairs that order FIX's next
// SetFlag<FIX_MTE1> after MTE1's wait, and MTE1's next SetFlag<MTE1_MTE2> after MTE2's wait, are
// all in the second `if`, which iteration 0 skips. guard_carried skipped relayed pairs: with the
// happens-before rule, flags set twice. Now the relay's waiting pipe MTE1 gets the body guard
// MTE1 -> FIX before the set (as q does for a plain pair), and its second flag the body guard
// MTE2 -> MTE1 before the wait point.
TEST(InsertSync, RelayedPairInALoopGetsABodyGuard) {
  Builder b(KernelType::AIC_ONLY);
  int c = b.buf("c", Mem::L0C, 0, 1024, CoreType::AIC), l1 = b.buf("l1", Mem::L1, 0, 1024, CoreType::AIC);
  auto k = ir::var("k");
  b.loop(k, 4, [&] {
    b.when(ir::binary(BinOp::LT, k, C(1)), [&] {
      b.emit(Fixpipe{LocalRef{c, C(0)}, GmRef{2, C(0)}, DTypeCode::f32, DTypeCode::f16, C(16), C(16), C(16), C(16)});
    });
    b.when(ir::binary(BinOp::GE, k, C(1)), [&] {
      b.emit(CopyGmToL1{GmRef{2, C(0)}, LocalRef{l1, C(0)}, DTypeCode::f16, C(32), C(16), C(16), C(32), C(16)});
      b.emit(Fixpipe{LocalRef{c, C(0)}, GmRef{2, C(128)}, DTypeCode::f32, DTypeCode::f16, C(16), C(16), C(16), C(16)});
    });
  });
  // The barrier orders Fixpipe W[128] of iteration k before Fixpipe W[0] of a later one (their bytes
  // overlap): no instruction runs between them on every path (the `if k < 1` has no else arm and
  // nothing before W[0]), so no chain stands for it; that the conditions never let W[0] follow
  // W[128] (k < 1 after k >= 1) is not an argument the pass makes (session 40, unwritten40 F1).
  expect_sync(b.aic(), R"(AIC:
  FIX SetFlag<FIX_MTE1>(1)
  for k in range(4):
    FIX PipeBarrier<FIX>
    if k < 1:
      FIX Fixpipe W[0] <- c[0] float32->float16 m=16 n=16 src_rows=16 dst_row_stride=16
    MTE1 SetFlag<MTE1_FIX>(0)
    FIX WaitFlag<MTE1_FIX>(0)
    MTE2 SetFlag<MTE2_MTE1>(0)
    MTE1 WaitFlag<MTE2_MTE1>(0)
    FIX SetFlag<FIX_MTE1>(0)
    MTE1 WaitFlag<FIX_MTE1>(0)
    MTE1 SetFlag<MTE1_MTE2>(0)
    MTE2 WaitFlag<MTE1_MTE2>(0)
    if k >= 1:
      MTE1 WaitFlag<FIX_MTE1>(1)
      MTE1 SetFlag<MTE1_MTE2>(1)
      MTE2 WaitFlag<MTE1_MTE2>(1)
      MTE2 CopyGmToL1 l1[0] <- W[0] float16 rows=32 cols=16 src_row_stride=16 nz=32x16
      MTE2 SetFlag<MTE2_MTE1>(1)
      MTE1 WaitFlag<MTE2_MTE1>(1)
      MTE1 SetFlag<MTE1_FIX>(1)
      FIX WaitFlag<MTE1_FIX>(1)
      FIX Fixpipe W[128] <- c[0] float32->float16 m=16 n=16 src_rows=16 dst_row_stride=16
      FIX SetFlag<FIX_MTE1>(1)
  MTE1 WaitFlag<FIX_MTE1>(1)
)");
}

// Twin relayed pairs (session 28, h-pipeall17; causal flash attention's two loads of P before the
// program's cross-core set). MTE2 reads W under `if j < 1` and under `if j > 0` of a loop; after
// the loop FixPipe writes W: two FIX-after-MTE2 dependences, relayed through MTE1, whose pairs set
// after the loop and wait before the FixPipe. Neither load is on every path to the FixPipe, so
// neither dependence implies the other; the second load is later than the first, which kept the
// two apart (a pair covered a dependence only when its a was not later than the pair's own).
// Both set and wait at the same places: one pair, one MTE2_MTE1 id; with one id per pipe pair
// (flag_event_ids 3) the second pair used to be a PipeBarrier<ALL>.
// With a second FixPipe between the two waits (twin_relays(true): the second load's pair waits
// before the second FixPipe) they are not interchangeable: one pair would hold the first FixPipe
// behind the second load. They keep two ids, and with one id a PIPE_ALL.
Program twin_relays(bool apart) {
  Builder b(KernelType::AIC_ONLY);
  int c = b.buf("c", Mem::L0C, 0, 1024, CoreType::AIC), l1a = b.buf("l1a", Mem::L1, 0, 1024, CoreType::AIC),
      l1b = b.buf("l1b", Mem::L1, 1024, 1024, CoreType::AIC);
  auto j = ir::var("j");
  auto load = [&](int l1, int64_t at) {
    b.emit(CopyGmToL1{GmRef{2, C(at)}, LocalRef{l1, C(0)}, DTypeCode::f16, C(16), C(16), C(16), C(16), C(16)});
  };
  auto fix = [&](int64_t at) {
    b.emit(Fixpipe{LocalRef{c, C(0)}, GmRef{2, C(at)}, DTypeCode::f32, DTypeCode::f16, C(16), C(16), C(16), C(16)});
  };
  b.loop(j, 2, [&] {
    b.when(ir::binary(BinOp::LT, j, C(1)), [&] { load(l1a, 0); });
    b.when(ir::binary(BinOp::GT, j, C(0)), [&] { load(l1b, apart ? 4096 : 0); });
  });
  fix(0);
  if (apart) fix(4096);
  return b.aic();
}

TEST(InsertSync, TwinRelayedPairsAreOnePair) {
  expect_sync(twin_relays(false), R"(AIC:
  for j in range(2):
    MTE2 PipeBarrier<MTE2>
    if j < 1:
      MTE2 CopyGmToL1 l1a[0] <- W[0] float16 rows=16 cols=16 src_row_stride=16 nz=16x16
    if j > 0:
      MTE2 CopyGmToL1 l1b[0] <- W[0] float16 rows=16 cols=16 src_row_stride=16 nz=16x16
  MTE2 SetFlag<MTE2_MTE1>(0)
  MTE1 WaitFlag<MTE2_MTE1>(0)
  MTE1 SetFlag<MTE1_FIX>(0)
  FIX WaitFlag<MTE1_FIX>(0)
  FIX Fixpipe W[0] <- c[0] float32->float16 m=16 n=16 src_rows=16 dst_row_stride=16
)");
  target::Target small = b2();
  small.ascend.flag_event_ids = 3;
  Program p = insert_sync(twin_relays(false), small);
  EXPECT_EQ(code(p).find("PipeBarrier<ALL>"), std::string::npos) << code(p);
  SimRun r = simulate(p);
  EXPECT_TRUE(r.result.reports.empty()) << reports(r.result);
}

TEST(InsertSync, RelayedPairsWaitedAtDifferentPlacesStayApart) {
  expect_sync(twin_relays(true), R"(AIC:
  for j in range(2):
    MTE2 PipeBarrier<MTE2>
    if j < 1:
      MTE2 CopyGmToL1 l1a[0] <- W[0] float16 rows=16 cols=16 src_row_stride=16 nz=16x16
    if j > 0:
      MTE2 CopyGmToL1 l1b[0] <- W[4096] float16 rows=16 cols=16 src_row_stride=16 nz=16x16
  MTE2 SetFlag<MTE2_MTE1>(0)
  MTE2 SetFlag<MTE2_MTE1>(1)
  MTE1 WaitFlag<MTE2_MTE1>(0)
  MTE1 SetFlag<MTE1_FIX>(0)
  FIX WaitFlag<MTE1_FIX>(0)
  FIX Fixpipe W[0] <- c[0] float32->float16 m=16 n=16 src_rows=16 dst_row_stride=16
  MTE1 WaitFlag<MTE2_MTE1>(1)
  MTE1 SetFlag<MTE1_FIX>(1)
  FIX WaitFlag<MTE1_FIX>(1)
  FIX Fixpipe W[4096] <- c[0] float32->float16 m=16 n=16 src_rows=16 dst_row_stride=16
)");
  target::Target small = b2();
  small.ascend.flag_event_ids = 3;
  Program p = insert_sync(twin_relays(true), small);
  EXPECT_NE(code(p).find("PipeBarrier<ALL>"), std::string::npos) << code(p);
  SimRun r = simulate(p);
  EXPECT_TRUE(r.result.reports.empty()) << reports(r.result);
}

TEST(InsertSync, HandWrittenFlagsAreAnInternalError) {
  Builder b(KernelType::AIV_ONLY);
  b.emit(PipeBarrier{Pipe::V});
  EXPECT_THROW(insert_sync(b.aiv(), b2()), ir::Error);
}

// Ping-pong halves `(i % 2) * half`: one flag per half, so loads of half 1 overlap with compute
// on half 0; the same loop on one buffer serialises.
Program ping_pong(bool halves) {
  Builder b(KernelType::AIV_ONLY, 16 * 256 * 16);
  int x = b.buf("x", Mem::UB, 0, 2 * 16384), y = b.buf("y", Mem::UB, 2 * 16384, 2 * 16384);
  auto i = ir::var("i");
  b.loop(i, 8, [&] {
    Expr off = halves ? mul(mod(i, C(2)), C(16384)) : C(0);
    b.emit(CopyGmToUb{GmRef{0, mul(i, C(16384))}, LocalRef{x, off}, DTypeCode::f32, C(16), C(1024), C(1024), C(1024)});
    b.emit(VecUnary{VecUnOp::Exp, DTypeCode::f32, Builder::v(y, off), Builder::v(x, off), C(16), C(256)});
    b.emit(CopyUbToGm{LocalRef{y, off}, GmRef{1, mul(i, C(16384))}, DTypeCode::f32, C(16), C(1024), C(1024), C(1024)});
  });
  return b.aiv();
}

TEST(InsertSync, PingPongHalvesGetOneFlagPerHalfAndOverlap) {
  Program two = insert_sync(ping_pong(true), b2()), one = insert_sync(ping_pong(false), b2());
  // The WARs V(i) -> MTE2(i+2) and MTE3(i) -> V(i+2) both follow from one MTE3 -> MTE2 flag per
  // half (V -> MTE3 -> MTE2 and MTE3 -> MTE2 -> V).
  EXPECT_EQ(code(two), R"(AIV:
  MTE3 SetFlag<MTE3_MTE2>(0)
  MTE3 SetFlag<MTE3_MTE2>(1)
  for i in range(8):
    MTE2 WaitFlag<MTE3_MTE2>(i % 2)
    MTE2 CopyGmToUb x[i % 2 * 16384] <- X[i * 16384] float32 n_rows=16 row_bytes=1024 src_stride=1024 dst_stride=1024
    MTE2 SetFlag<MTE2_V>(i % 2)
    V WaitFlag<MTE2_V>(i % 2)
    V Exp y[i % 2 * 16384]/256 <- x[i % 2 * 16384]/256 float32 16x256
    V SetFlag<V_MTE3>(i % 2)
    MTE3 WaitFlag<V_MTE3>(i % 2)
    MTE3 CopyUbToGm Y[i * 16384] <- y[i % 2 * 16384] float32 n_rows=16 row_bytes=1024 src_stride=1024 dst_stride=1024
    MTE3 SetFlag<MTE3_MTE2>(i % 2)
  MTE2 WaitFlag<MTE3_MTE2>(0)
  MTE2 WaitFlag<MTE3_MTE2>(1)
)") << code(two);
  SimRun r2 = simulate(two), r1 = simulate(one);
  EXPECT_TRUE(r2.result.reports.empty()) << reports(r2.result);
  EXPECT_TRUE(r1.result.reports.empty()) << reports(r1.result);
  EXPECT_TRUE(r1.data == r2.data);
  std::printf("[insert_sync] ping-pong: one buffer %lld cycles, two halves %lld cycles\n",
              static_cast<long long>(r1.result.total_cycles), static_cast<long long>(r2.result.total_cycles));
  EXPECT_LT(r2.result.total_cycles, r1.result.total_cycles);
}

// Row windows indexed by a loop variable (a page copied into rows r * page .. of a tile): copies
// of different iterations into disjoint rows need no PipeBarrier<MTE2> between them; rows that
// overlap from one iteration to the next (a step smaller than the rows) keep it.
Program row_windows(int64_t step) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 4096), y = b.buf("y", Mem::UB, 4096, 4096);
  auto r = ir::var("r");
  b.loop(r, 4, [&] {
    b.emit(CopyGmToUb{GmRef{0, mul(r, C(1024))}, LocalRef{x, mul(r, C(step))}, DTypeCode::f32, C(1), C(512), C(512), C(512)});
  });
  b.emit(VecUnary{VecUnOp::Exp, DTypeCode::f32, Builder::v(y, C(0)), Builder::v(x, C(0)), C(4), C(256)});
  b.store(y, C(0), C(0));
  return b.aiv();
}

TEST(InsertSync, DisjointRowWindowsOfALoopAreNotFenced) {
  Program apart = insert_sync(row_windows(1024), b2()), overlapping = insert_sync(row_windows(256), b2());
  EXPECT_EQ(code(apart), R"(AIV:
  for r in range(4):
    MTE2 CopyGmToUb x[r * 1024] <- X[r * 1024] float32 n_rows=1 row_bytes=512 src_stride=512 dst_stride=512
  MTE2 SetFlag<MTE2_V>(0)
  V WaitFlag<MTE2_V>(0)
  V Exp y[0]/256 <- x[0]/256 float32 4x256
  V SetFlag<V_MTE3>(0)
  MTE3 WaitFlag<V_MTE3>(0)
  MTE3 CopyUbToGm Y[0] <- y[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
)") << code(apart);
  EXPECT_EQ(count<PipeBarrier>(overlapping), 1) << code(overlapping);
  for (const Program* q : {&apart, &overlapping}) {
    SimRun run = simulate(*q);
    EXPECT_TRUE(run.result.reports.empty()) << reports(run.result);
  }
}

// A gathered row copied into row r of an Nz-like tile (4 strips of 4096 bytes, 32 bytes of each:
// the grouped GEMM's `a[r, :]` with block_M 128): the rows of iterations 0 .. 127 are disjoint, so
// no PipeBarrier<MTE2> between the copies (the proof compares every shift d = 1 .. extent - 1, up
// to extent x rows = 2^16); with 129 iterations, row 128 lands in the next strip, on row 0's
// bytes: the barrier stays, and without it the checker reports the same-pipe hazard.
Program strip_rows(int64_t rows) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 5 * 4096), y = b.buf("y", Mem::UB, 5 * 4096, 1024);
  auto r = ir::var("r");
  b.loop(r, rows, [&] {
    b.emit(CopyGmToUb{GmRef{0, mul(r, C(32))}, LocalRef{x, mul(r, C(32))}, DTypeCode::f32, C(4), C(32), C(32), C(4096)});
  });
  b.emit(VecUnary{VecUnOp::Exp, DTypeCode::f32, Builder::v(y, C(0)), Builder::v(x, C(0)), C(1), C(256)});
  b.store(y, C(0), C(0));
  return b.aiv();
}

TEST(InsertSync, GatheredRowsOfA128RowStripTileAreNotFenced) {
  Program apart = insert_sync(strip_rows(128), b2()), overlapping = insert_sync(strip_rows(129), b2());
  EXPECT_EQ(count<PipeBarrier>(apart), 0) << code(apart);
  EXPECT_EQ(count<PipeBarrier>(overlapping), 1) << code(overlapping);
  for (const Program* q : {&apart, &overlapping}) {
    SimRun run = simulate(*q);
    EXPECT_TRUE(run.result.reports.empty()) << reports(run.result);
  }
  // the checker's side: the copies of the unsynchronised program conflict only when rows overlap
  auto same_pipe = [](const SimRun& run) {
    int n = 0;
    for (const auto& x : run.result.reports) n += x.kind == sim::ReportKind::SamePipeHazard;
    return n;
  };
  EXPECT_EQ(same_pipe(simulate(strip_rows(128))), 0);
  EXPECT_GE(same_pipe(simulate(strip_rows(129))), 1) << reports(simulate(strip_rows(129)).result);
}

// The event-id budget comes from the target: with one usable id per pipe pair (flag_event_ids = 3,
// the top two kept free) the ping-pong halves cannot get one flag each; the pairs that do not
// fit become PipeBarrier<ALL> at their wait points. The result still runs clean, the same.
TEST(InsertSync, EventIdBudgetComesFromTheTarget) {
  target::Target small = b2();
  small.ascend.flag_event_ids = 3;
  Program p = insert_sync(ping_pong(true), small);
  std::string text = code(p);
  EXPECT_EQ(text.find("(1)"), std::string::npos) << text;
  EXPECT_EQ(text.find("(i % 2)"), std::string::npos) << text;
  EXPECT_NE(text.find("PipeBarrier<ALL>"), std::string::npos) << text;
  SimRun r = simulate(p), ref = simulate(insert_sync(ping_pong(true), b2()));
  EXPECT_TRUE(r.result.reports.empty()) << reports(r.result);
  EXPECT_TRUE(r.data == ref.data);
}

// Issues 13/16: T.Pipelined(num_stages=3) of a 128x256x64 fp16 gemm (multi_buffer unrolls by 6:
// three L1 copies, two L0 copies). Each L1 copy is freed twice per unrolled body: by an intra
// MTE1 -> MTE2 pair (step st to step st + 3) and by a carried one (step st + 3 to step st of the
// next body). Those two share an event id (may_share_carried), so the 12 MTE1 -> MTE2 pairs fit
// in 6 ids without a PipeBarrier<ALL> (before: 2 PIPE_ALLs per 3 steps); the checker is silent and
// the result equals the 2-stage kernel's bit for bit (same fp32 accumulation order).
std::string pipelined_gemm(int stages) {
  return R"(kernel k(A: global float16[128, 768], B: global float16[768, 256], C: global float32[128, 256] out)
    grid(bx = 1) {
  alloc a_s: shared float16[128, 64]
  alloc b_s: shared float16[64, 256]
  alloc acc: fragment float32[128, 256]
  fill acc = 0.0
  for k in pipelined(0, 12, stages=)" + std::to_string(stages) + R"() {
    copy A[0:+128, k * 64:+64] -> a_s
    copy B[k * 64:+64, 0:+256] -> b_s
    gemm a_s, b_s -> acc trans_a=false trans_b=false clear=false
  }
  copy acc -> C[0:+128, 0:+256]
}
)";
}

TEST(InsertSync, ThreeStagePipelineSharesCarriedIdsWithoutPipeAll) {
  auto three = lower_ascend(ir::parse_kernel(pipelined_gemm(3), "k.tw"), b2());
  auto two = lower_ascend(ir::parse_kernel(pipelined_gemm(2), "k.tw"), b2());
  std::string text = code(*three.program);
  EXPECT_EQ(text.find("PipeBarrier<ALL>"), std::string::npos) << text;
  std::set<std::string> ids;
  for (size_t at = 0; (at = text.find("SetFlag<MTE1_MTE2>(", at)) != std::string::npos; ++at)
    ids.insert(text.substr(at, text.find(')', at) - at));
  EXPECT_EQ(ids.size(), 6u) << text;  // 6 L1 tiles (A and B, 3 copies): one id each
  SimRun r3 = simulate(*three.program), r2 = simulate(*two.program);
  EXPECT_TRUE(r3.result.reports.empty()) << reports(r3.result);
  EXPECT_TRUE(r2.result.reports.empty()) << reports(r2.result);
  EXPECT_TRUE(r3.data == r2.data);
}

// --- the expert examples' Tile IR (input stage), dumped from examples/ascend/*.py ---------
// Each at two sizes: the `$(NAME)` fields are filled in by instantiate().

std::string instantiate(std::string text, std::initializer_list<std::pair<const char*, const char*>> fields) {
  for (auto [name, value] : fields) {
    std::string key = std::string("$(") + name + ")";
    for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
  }
  EXPECT_EQ(text.find("$("), std::string::npos) << text;
  return text;
}

// M x K @ K x N, KT K-tiles of 256.
const char* const k_gemm = R"IR(kernel main(A: global float16[$(M), $(K)], B: global float16[$(K), $(N)], C: global float16[$(M), $(N)] out)
    grid(cid = 4) sub_block(vid) {
  alloc A_L1: L1 float16[128, 256]
  alloc B_L1: L1 float16[256, 256]
  alloc A_L0: L0A float16[2, 128, 64]
  alloc B_L0: L0B float16[2, 64, 256]
  alloc C_L0: L0C float32[128, 256]
  scope C {
    sync set_flag(M, MTE1, 0)
    sync set_flag(M, MTE1, 1)
    sync set_flag(FIX, M, 0)
    for t in serial(0, ceildiv(4 - cid, 4)) {
      let tile: int32 = cid + t * 4
      let bx: int32 = tile // 2
      let by: int32 = tile % 2
      for k in serial(0, $(KT)) {
        copy A[bx * 128:+128, k * 256:+256] -> A_L1
        copy B[k * 256:+256, by * 256:+256] -> B_L1
        sync set_flag(MTE2, MTE1, 0)
        sync wait_flag(MTE2, MTE1, 0)
        for kk in serial(0, 4) {
          let s: int32 = (k * 4 + kk) % 2
          sync wait_flag(M, MTE1, s)
          copy A_L1[0:+128, kk * 64:+64] -> A_L0[s:+1, 0:+128, 0:+64]
          copy B_L1[kk * 64:+64, 0:+256] -> B_L0[s:+1, 0:+64, 0:+256]
          sync set_flag(MTE1, M, s)
          sync wait_flag(MTE1, M, s)
          if k == 0 and kk == 0 {
            sync wait_flag(FIX, M, 0)
          }
          if k == 0 and kk == 0 {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+256] -> C_L0 trans_a=false trans_b=false clear=true
          } else {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+256] -> C_L0 trans_a=false trans_b=false clear=false
          }
          sync set_flag(M, MTE1, s)
        }
        sync set_flag(MTE1, MTE2, 0)
        sync wait_flag(MTE1, MTE2, 0)
      }
      sync set_flag(M, FIX, 0)
      sync wait_flag(M, FIX, 0)
      copy C_L0 -> C[bx * 128:+128, by * 256:+256]
      sync set_flag(FIX, M, 0)
    }
    sync wait_flag(M, MTE1, 0)
    sync wait_flag(M, MTE1, 1)
    sync wait_flag(FIX, M, 0)
  }
}
)IR";

// R x C rows, padded to CP columns; T row groups of 16 per sub-block, TL = T - 1.
const char* const k_softmax = R"IR(kernel main(X: global float32[$(R), $(C)], Y: global float32[$(R), $(C)] out)
    grid(cid = $(G)) sub_block(vid) {
  alloc x: UB float32[16, $(CP)]
  alloc mx: UB float32[16]
  alloc sm: UB float32[16]
  scope V {
    let g: int32 = cid * 2 + vid
    sync set_flag(MTE3, V, 0)
    for t in serial(0, ceildiv($(TL) - g, $(T))) {
      let row: int32 = (g + t * $(T)) * 16
      sync wait_flag(MTE3, V, 0)
      fill x = -inf
      sync set_flag(V, MTE2, 0)
      sync wait_flag(V, MTE2, 0)
      copy X[row:+16, 0:+$(CP)] -> x
      sync set_flag(MTE2, V, 0)
      sync wait_flag(MTE2, V, 0)
      reduce max x -> mx axis=1 clear=true
      sync pipe_barrier(V)
      for i in parallel(0, 16) {
        for j in parallel(0, $(CP)) {
          x[i, j] = x[i, j] - mx[i]
        }
      }
      sync pipe_barrier(V)
      for i_1 in parallel(0, 16) {
        for j_1 in parallel(0, $(CP)) {
          x[i_1, j_1] = exp(x[i_1, j_1])
        }
      }
      sync pipe_barrier(V)
      reduce sum x -> sm axis=1 clear=true
      sync pipe_barrier(V)
      for i_2 in parallel(0, 16) {
        for j_2 in parallel(0, $(CP)) {
          x[i_2, j_2] = x[i_2, j_2] / sm[i_2]
        }
      }
      sync set_flag(V, MTE3, 0)
      sync wait_flag(V, MTE3, 0)
      copy x -> Y[row:+16, 0:+$(CP)]
      sync set_flag(MTE3, V, 0)
    }
    sync wait_flag(MTE3, V, 0)
  }
}
)IR";

// (M x K @ K x N + Bias) -> gelu through the workspace W (WR rows); G cores, NT tiles per core,
// TS / TS1 the tile stride terms, BX the row-tile division, NB column tiles, KT K-tiles.
const char* const k_mmgelu = R"IR(kernel main(A: global float16[$(M), $(K)], B: global float16[$(K), $(N)], Bias: global float32[$(N)], W: global float32[$(WR), 128], Y: global float16[$(M), $(N)] out)
    grid(cid = $(G)) sub_block(vid) {
  alloc A_L1: L1 float16[128, 256]
  alloc B_L1: L1 float16[256, 128]
  alloc A_L0: L0A float16[2, 128, 64]
  alloc B_L0: L0B float16[2, 64, 128]
  alloc C_L0: L0C float32[128, 128]
  alloc c: UB float32[64, 128]
  alloc u: UB float32[64, 128]
  alloc bt: UB float32[64, 128]
  alloc o: UB float16[64, 128]
  let n_t: int32 = $(NT)
  scope C {
    sync set_flag(M, MTE1, 0)
    sync set_flag(M, MTE1, 1)
    sync set_flag(FIX, M, 0)
    for t in serial(0, n_t) {
      let tile: int32 = cid + $(TS)
      let bx: int32 = tile$(BX)
      let by: int32 = tile % $(NB)
      let slot: int32 = t % 2
      for k in serial(0, $(KT)) {
        copy A[bx * 128:+128, k * 256:+256] -> A_L1
        copy B[k * 256:+256, by * 128:+128] -> B_L1
        sync set_flag(MTE2, MTE1, 0)
        sync wait_flag(MTE2, MTE1, 0)
        for kk in serial(0, 4) {
          let s: int32 = (k * 4 + kk) % 2
          sync wait_flag(M, MTE1, s)
          copy A_L1[0:+128, kk * 64:+64] -> A_L0[s:+1, 0:+128, 0:+64]
          copy B_L1[kk * 64:+64, 0:+128] -> B_L0[s:+1, 0:+64, 0:+128]
          sync set_flag(MTE1, M, s)
          sync wait_flag(MTE1, M, s)
          if k == 0 and kk == 0 {
            sync wait_flag(FIX, M, 0)
          }
          if k == 0 and kk == 0 {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+128] -> C_L0 trans_a=false trans_b=false clear=true
          } else {
            gemm A_L0[s:+1, 0:+128, 0:+64], B_L0[s:+1, 0:+64, 0:+128] -> C_L0 trans_a=false trans_b=false clear=false
          }
          sync set_flag(M, MTE1, s)
        }
        sync set_flag(MTE1, MTE2, 0)
        sync wait_flag(MTE1, MTE2, 0)
      }
      sync set_flag(M, FIX, 0)
      sync wait_flag(M, FIX, 0)
      if t >= 2 {
        sync wait_cross_flag(2 + slot, FIX)
      }
      copy C_L0 -> W[(cid * 2 + slot) * 128:+128, 0:+128]
      sync set_cross_flag(2, FIX, slot)
      sync set_flag(FIX, M, 0)
    }
    for j in unroll(0, 2) {
      if n_t - 2 + j >= 0 {
        sync wait_cross_flag(2 + (n_t - 2 + j) % 2)
      }
    }
    sync wait_flag(M, MTE1, 0)
    sync wait_flag(M, MTE1, 1)
    sync wait_flag(FIX, M, 0)
  }
  scope V {
    sync set_flag(V, MTE2, 0)
    sync set_flag(MTE3, V, 0)
    for t_1 in serial(0, n_t) {
      let tile_1: int32 = cid + $(TS1)
      let bx_1: int32 = tile_1$(BX)
      let by_1: int32 = tile_1 % $(NB)
      let slot_1: int32 = t_1 % 2
      sync wait_cross_flag(slot_1)
      sync wait_flag(V, MTE2, 0)
      copy W[(cid * 2 + slot_1) * 128 + vid * 64:+64, 0:+128] -> c
      copy Bias[by_1 * 128:+128] -> bt[0:+1, 0:+128]
      sync set_cross_flag(2, MTE2, 2 + slot_1)
      sync set_flag(MTE2, V, 0)
      sync wait_flag(MTE2, V, 0)
      copy bt[0:+1, 0:+128] -> bt[1:+1, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+2, 0:+128] -> bt[2:+2, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+4, 0:+128] -> bt[4:+4, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+8, 0:+128] -> bt[8:+8, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+16, 0:+128] -> bt[16:+16, 0:+128]
      sync pipe_barrier(V)
      copy bt[0:+32, 0:+128] -> bt[32:+32, 0:+128]
      sync pipe_barrier(V)
      for i in parallel(0, 64) {
        for j_1 in parallel(0, 128) {
          c[i, j_1] = c[i, j_1] + bt[i, j_1]
        }
      }
      sync pipe_barrier(V)
      for i_1 in parallel(0, 64) {
        for j_2 in parallel(0, 128) {
          u[i_1, j_2] = c[i_1, j_2] * c[i_1, j_2]
        }
      }
      sync pipe_barrier(V)
      for i_2 in parallel(0, 64) {
        for j_3 in parallel(0, 128) {
          u[i_2, j_3] = u[i_2, j_3] * c[i_2, j_3]
        }
      }
      sync pipe_barrier(V)
      for i_3 in parallel(0, 64) {
        for j_4 in parallel(0, 128) {
          u[i_3, j_4] = u[i_3, j_4] * 0.044715
        }
      }
      sync pipe_barrier(V)
      for i_4 in parallel(0, 64) {
        for j_5 in parallel(0, 128) {
          u[i_4, j_5] = u[i_4, j_5] + c[i_4, j_5]
        }
      }
      sync pipe_barrier(V)
      for i_5 in parallel(0, 64) {
        for j_6 in parallel(0, 128) {
          u[i_5, j_6] = u[i_5, j_6] * -1.5957691216057308
        }
      }
      sync pipe_barrier(V)
      for i_6 in parallel(0, 64) {
        for j_7 in parallel(0, 128) {
          u[i_6, j_7] = exp(u[i_6, j_7])
        }
      }
      sync pipe_barrier(V)
      for i_7 in parallel(0, 64) {
        for j_8 in parallel(0, 128) {
          u[i_7, j_8] = u[i_7, j_8] + 1.0
        }
      }
      sync pipe_barrier(V)
      for i_8 in parallel(0, 64) {
        for j_9 in parallel(0, 128) {
          c[i_8, j_9] = c[i_8, j_9] / u[i_8, j_9]
        }
      }
      sync pipe_barrier(V)
      sync wait_flag(MTE3, V, 0)
      for i_9 in parallel(0, 64) {
        for j_10 in parallel(0, 128) {
          o[i_9, j_10] = cast<float16>(c[i_9, j_10])
        }
      }
      sync set_flag(V, MTE2, 0)
      sync set_flag(V, MTE3, 0)
      sync wait_flag(V, MTE3, 0)
      copy o -> Y[bx_1 * 128 + vid * 64:+64, by_1 * 128:+128]
      sync set_flag(MTE3, V, 0)
    }
    sync wait_flag(V, MTE2, 0)
    sync wait_flag(MTE3, V, 0)
  }
}
)IR";

TEST(InsertSyncExamples, GemmTails) {
  check_example("gemm_tails", instantiate(k_gemm, {{"M", "200"}, {"K", "513"}, {"N", "300"}, {"KT", "3"}}).c_str());
}
TEST(InsertSyncExamples, GemmEven) {
  check_example("gemm_even", instantiate(k_gemm, {{"M", "256"}, {"K", "1024"}, {"N", "512"}, {"KT", "4"}}).c_str());
}
TEST(InsertSyncExamples, SoftmaxPadded) {
  check_example("softmax_pad", instantiate(k_softmax, {{"R", "100"}, {"C", "1027"}, {"G", "4"}, {"CP", "1032"}, {"TL", "7"}, {"T", "8"}}).c_str());
}
TEST(InsertSyncExamples, SoftmaxOneColumn) {
  check_example("softmax_col1", instantiate(k_softmax, {{"R", "5"}, {"C", "1"}, {"G", "1"}, {"CP", "8"}, {"TL", "1"}, {"T", "2"}}).c_str());
}
TEST(InsertSyncExamples, MatmulGeluSmall) {
  check_example("mmgelu_small", instantiate(k_mmgelu, {{"M", "50"}, {"K", "17"}, {"N", "33"}, {"WR", "256"}, {"G", "1"}, {"NT", "1 - cid"},
                                                           {"TS", "t"}, {"TS1", "t_1"}, {"BX", ""}, {"NB", "1"}, {"KT", "1"}}).c_str());
}
TEST(InsertSyncExamples, MatmulGeluTails) {
  check_example("mmgelu_tails", instantiate(k_mmgelu, {{"M", "300"}, {"K", "520"}, {"N", "260"}, {"WR", "2304"}, {"G", "9"},
                                                           {"NT", "ceildiv(9 - cid, 9)"}, {"TS", "t * 9"}, {"TS1", "t_1 * 9"},
                                                           {"BX", " // 3"}, {"NB", "3"}, {"KT", "3"}}).c_str());
}

// Session 29 (review29 F4): a carried dependence between the two arms of one `if`. x is read (V),
// loaded (MTE2) and read again in the `then` arm, loaded and read in the `else` arm; the second
// read in iteration k (then) and the load in k + 1 (else) need a V -> MTE2 pair (V_MTE2(1), set
// after the `if`, waited in the else arm). The then arm's load looked like a link on the path
// (the carried read -> that load, then MTE2 in order), but it runs in iteration k + 1 only when
// the then arm does: `between` now takes an instruction before b only on b's chain, one after a
// only on a's chain (before, no pair ordered them: the simulator reported the race).
// The stores of iterations k and k + 1 (1024-byte rows at 256-byte steps: they overlap) are ordered
// through y, which either arm rewrites (V, after the store read it: a flag) before the next store
// reads it (a flag): one instruction in each arm stands between them, and the pass takes one per
// arm (session 40, sync39 S1), so no PipeBarrier<MTE3>.
TEST(InsertSync, CarriedDependenceAcrossTheTwoArmsOfAnIf) {
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024);
  int y = b.buf("y", Mem::UB, 1024, 1024);
  int z = b.buf("z", Mem::UB, 2048, 1024);
  auto k = ir::var("k");
  b.loop(k, 4, [&] {
    b.stack.emplace_back();
    b.adds(z, C(0), x, C(0));
    b.load(x, C(0), mul(k, C(256)));
    b.adds(y, C(0), x, C(0));
    auto then_b = seq(std::move(b.stack.back()));
    b.stack.back().clear();
    b.load(x, C(0), mul(k, C(256)));
    b.addv(y, y, x);
    auto else_b = seq(std::move(b.stack.back()));
    b.stack.pop_back();
    b.stack.back().push_back(if_(ir::binary(BinOp::LT, k, C(2)), then_b, else_b));
    b.store(y, C(0), mul(k, C(256)));
  });
  expect_sync(b.aiv(), R"(AIV:
  MTE3 SetFlag<MTE3_V>(1)
  V SetFlag<V_MTE2>(1)
  V SetFlag<V_MTE2>(2)
  for k in range(4):
    if k < 2:
      V Adds z[0]/256 <- x[0]/256, 1.0 float32 1x256
      V SetFlag<V_MTE2>(0)
      MTE2 WaitFlag<V_MTE2>(0)
      MTE2 CopyGmToUb x[0] <- X[k * 256] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE2 SetFlag<MTE2_V>(1)
      V WaitFlag<MTE2_V>(1)
      V WaitFlag<MTE3_V>(1)
      V Adds y[0]/256 <- x[0]/256, 1.0 float32 1x256
      MTE2 WaitFlag<V_MTE2>(1)
    else:
      MTE2 WaitFlag<V_MTE2>(1)
      MTE2 WaitFlag<V_MTE2>(2)
      MTE2 CopyGmToUb x[0] <- X[k * 256] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
      MTE2 SetFlag<MTE2_V>(0)
      V WaitFlag<MTE2_V>(0)
      V WaitFlag<MTE3_V>(1)
      V Add y[0]/256 <- y[0]/256, x[0]/256 float32 1x256
      V SetFlag<V_MTE2>(2)
    MTE3 SetFlag<MTE3_V>(0)
    V WaitFlag<MTE3_V>(0)
    V SetFlag<V_MTE3>(0)
    V SetFlag<V_MTE3>(1)
    MTE2 SetFlag<MTE2_V>(2)
    V WaitFlag<MTE2_V>(2)
    V SetFlag<V_MTE2>(1)
    MTE3 WaitFlag<V_MTE3>(0)
    MTE3 WaitFlag<V_MTE3>(1)
    MTE3 CopyUbToGm Y[k * 256] <- y[0] float32 n_rows=1 row_bytes=1024 src_stride=1024 dst_stride=1024
    V SetFlag<V_MTE3>(2)
    MTE3 WaitFlag<V_MTE3>(2)
    MTE3 SetFlag<MTE3_V>(1)
  V WaitFlag<MTE3_V>(1)
  MTE2 WaitFlag<V_MTE2>(1)
  MTE2 WaitFlag<V_MTE2>(2)
)");
}

// A carried same-pipe GM write-after-write (Y[k * 256 bytes], 1024-byte rows) through an `if`
// (session 40): the store reads y, which the arms rewrite before the next store reads it. With an
// instruction on the chain in every arm (nested `if`s included) the chain orders the two stores:
// no barrier. With an arm that has none (it writes z instead), or no else arm, the barrier stays.
// Either way the checker is silent.
Program arms_program(int form) {  // 0: both arms write y; 1: the else arm writes z; 2: no else arm;
                                  // 3: the else arm is an `if` whose two arms write y
  Builder b(KernelType::AIV_ONLY);
  int x = b.buf("x", Mem::UB, 0, 1024), y = b.buf("y", Mem::UB, 1024, 1024), z = b.buf("z", Mem::UB, 2048, 1024);
  auto k = ir::var("k");
  b.loop(k, 4, [&] {
    b.load(x, C(0), mul(k, C(256)));
    b.stack.emplace_back();
    b.adds(y, C(0), x, C(0));
    auto then_b = seq(std::move(b.stack.back()));
    b.stack.back().clear();
    StmtPtr else_b;
    if (form == 3) {
      b.stack.emplace_back();
      b.addv(y, y, x);
      auto t2 = seq(std::move(b.stack.back()));
      b.stack.back().clear();
      b.adds(y, C(0), x, C(0));
      auto e2 = seq(std::move(b.stack.back()));
      b.stack.pop_back();
      b.stack.back().push_back(if_(ir::binary(BinOp::LT, k, C(3)), t2, e2));
    } else if (form != 2) {
      b.adds(form == 1 ? z : y, C(0), x, C(0));
    }
    else_b = seq(std::move(b.stack.back()));
    b.stack.pop_back();
    b.stack.back().push_back(if_(ir::binary(BinOp::LT, k, C(2)), then_b, else_b));
    b.store(y, C(0), mul(k, C(256)));
  });
  return b.aiv();
}

TEST(InsertSync, WriteAfterWriteThroughAnInstructionInEachArm) {
  for (int form = 0; form < 4; ++form) {
    Program out = insert_sync(arms_program(form), b2());
    const bool barrier = code(out).find("PipeBarrier<MTE3>") != std::string::npos;
    EXPECT_EQ(barrier, form == 1 || form == 2) << form << "\n" << code(out);
    SimRun r = simulate(out);
    EXPECT_TRUE(r.result.reports.empty()) << form << "\n" << reports(r.result);
  }
}

}  // namespace
}  // namespace tw::ascend
