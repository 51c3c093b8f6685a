// Tests of parse_program (program_parser.h): print -> parse -> print is the identity for the
// program after every program pass of every golden example (tests/golden/tile_ir through
// lower_ascend; the hand-built goldens are checked in test_ascendc_printer.cpp) and for random
// programs; errors in the text are located at their line and column.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <variant>

#include "ir/parser.h"
#include "target/ascend/pipeline.h"
#include "target/ascend/program_parser.h"
#include "target/ascend/program_printer.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

namespace fs = std::filesystem;
using ir::DTypeCode;

std::string read(const fs::path& f) {
  std::ifstream in(f);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void expect_round_trip(const std::string& text, const std::string& what) {
  std::string again;
  try {
    again = print_program(parse_program(text, what));
  } catch (const ir::Error& e) {
    FAIL() << what << ": " << ir::format_error(e.message(), e.span(), e.hint()) << "\n" << text;
  }
  if (again == text) return;
  std::istringstream a(again), b(text);
  std::string la, lb;
  for (int line = 1; std::getline(b, lb); ++line)
    if (!std::getline(a, la) || la != lb) {
      ADD_FAILURE() << what << ": line " << line << " reprints differently\n  text:     " << lb << "\n  reprinted: " << la;
      return;
    }
  ADD_FAILURE() << what << ": the reprint has extra lines";
}

// Every Program stage of the automatic pipeline on every portable example.
TEST(ProgramParser, RoundTripsEveryStageOfEveryGoldenExample) {
  const fs::path dir = fs::path(TW_SOURCE_DIR) / "tests" / "golden" / "tile_ir";
  int programs = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".tir") continue;
    ir::Kernel k = ir::parse_kernel(read(entry.path()), entry.path().filename().string());
    LoweredAscend low = lower_ascend(k, target::find_target("ascend910b"));
    for (const auto& [stage, ir] : low.stages) {
      auto* text = std::get_if<std::string>(&ir);  // a Program stage; a Tile IR stage is its kernel
      if (!text) continue;
      expect_round_trip(*text, entry.path().stem().string() + " after " + stage);
      ++programs;
    }
    expect_round_trip(print_program(*low.program), entry.path().stem().string());
  }
  EXPECT_GE(programs, 7 * 5);  // 7 examples x 5 program passes
}

// Expert mode: the user's block and sub-block variables, lets, loops, flags and cross-core flags.
// Data-dependent selects (VecSelect, then Compare / CompareScalar / Select / SelectScalar calls)
// at every Program stage, with tile and scalar operands, a bool mask and a non-contiguous window.
TEST(ProgramParser, RoundTripsDataDependentSelects) {
  const char* text = R"(kernel sel(X: global float32[20, 48], M: global uint8[20, 48], B: global bool[20, 48], Y: global float32[20, 48] out)
    grid(bx = 1) {
  alloc x: fragment float32[20, 48]
  alloc z: fragment float32[20, 64]
  alloc m: fragment uint8[20, 48]
  alloc b: fragment bool[20, 48]
  copy X[0:+20, 0:+48] -> x
  copy M[0:+20, 0:+48] -> m
  copy B[0:+20, 0:+48] -> b
  for i in parallel(0, 20) {
    for j in parallel(0, 48) {
      z[i, j] = where(m[i, j] != 0 and x[i, j] < 0.5, x[i, j], -1e+30)
    }
  }
  for i in parallel(0, 20) {
    for j in parallel(0, 48) {
      x[i, j] = where(b[i, j] or x[i, j] >= z[i, j], z[i, j], x[i, j])
    }
  }
  copy x -> Y[0:+20, 0:+48]
}
)";
  ir::Kernel k = ir::parse_kernel(text, "sel.tir");
  LoweredAscend low = lower_ascend(k, target::find_target("ascend910b"));
  int programs = 0;
  for (const auto& [stage, ir] : low.stages) {
    auto* t = std::get_if<std::string>(&ir);
    if (!t) continue;
    expect_round_trip(*t, "sel after " + stage);
    ++programs;
  }
  EXPECT_GT(programs, 0);
  std::string final_text = print_program(*low.program);
  EXPECT_NE(final_text.find("L0 CompareScalar"), std::string::npos) << final_text;
  EXPECT_NE(final_text.find("L0 Compare "), std::string::npos) << final_text;
  EXPECT_NE(final_text.find("L2 SelectScalar"), std::string::npos) << final_text;
  EXPECT_NE(final_text.find("L2 Select "), std::string::npos) << final_text;
  expect_round_trip(final_text, "sel");
}

// An output only T.atomic_add writes starts at zero (api35): its parameter prints `out zeroed`
// and parses back so; an output with a plain copy too stays `out`.
TEST(ProgramParser, AnAccumulatedOutputIsMarkedZeroed) {
  const char* text = R"(kernel acc(X: global float32[4, 32], Y: global float32[1, 32] out, Z: global float32[4, 32] out)
    grid(bx = 4) {
  alloc x: fragment float32[1, 32]
  copy X[bx:+1, 0:+32] -> x
  atomic_add x -> Y[0:+1, 0:+32]
  copy x -> Z[bx:+1, 0:+32]
  atomic_add x -> Z[0:+1, 0:+32]
}
)";
  LoweredAscend low = lower_ascend(ir::parse_kernel(text, "acc.tir"), target::find_target("ascend910b"));
  ASSERT_EQ(low.program->params.size(), 3u);
  EXPECT_FALSE(low.program->params[0].zeroed);
  EXPECT_TRUE(low.program->params[1].zeroed);
  EXPECT_FALSE(low.program->params[2].zeroed);
  const std::string printed = print_program(*low.program);
  EXPECT_NE(printed.find("float32[1, 32] out zeroed"), std::string::npos) << printed;
  EXPECT_NE(printed.find("float32[4, 32] out\n"), std::string::npos) << printed;
  Program again = parse_program(printed, "acc");
  EXPECT_TRUE(again.params[1].zeroed);
  EXPECT_FALSE(again.params[2].zeroed);
  expect_round_trip(printed, "acc");
}

TEST(ProgramParser, RoundTripsAnExpertKernel) {
  const char* text = R"(kernel ex(X: global float32[N, 32], Y: global float32[N, 32] out, s: float32)
    grid(blk = ceildiv(N, 16)) sub_block(half) {
  alloc acc: L0C float32[16, 32]
  alloc t: UB float32[8, 32]
  for step in serial(0, 3) {
    let first: int32 = blk * 16 + half * 8
    scope V {
      sync wait_cross_flag(4)
      copy X[first:+8, 0:+32] -> t
      sync set_flag(MTE2, V, 1)
      sync wait_flag(MTE2, V, 1)
      for i in parallel(0, 8) {
        for j in parallel(0, 32) {
          t[i, j] = t[i, j] * s
        }
      }
      sync set_flag(V, MTE3, 2)
      sync wait_flag(V, MTE3, 2)
      copy t -> Y[first:+8, 0:+32]
    }
    scope C {
      sync set_cross_flag(2, FIX, 4)
    }
  }
}
)";
  ir::Kernel k = ir::parse_kernel(text, "ex.tir");
  LoweredAscend low = lower_ascend(k, target::find_target("ascend910b"));
  std::string printed = print_program(*low.program);
  EXPECT_NE(printed.find(" block_idx=blk sub_block_idx=half\n"), std::string::npos) << printed;
  expect_round_trip(printed, "expert");
  for (const auto& [stage, ir] : low.stages)
    if (auto* t = std::get_if<std::string>(&ir)) expect_round_trip(*t, "expert after " + stage);
}

// Random programs: every instruction kind, nested loops / ifs / lets, expressions over the variables
// in scope, names that meet the text's separators ('x' in AxB shapes, ' <- ', key=value).
class RandomProgram {
 public:
  explicit RandomProgram(unsigned seed) : rng_(seed) {}

  Program make() {
    p_.name = "fuzz";
    p_.kernel_type = KernelType::MIX_1_2;
    ir::Var M = ir::var("M"), N = ir::var("nx");
    p_.shape_vars = {M, N};
    KernelParam x{"X", true, DTypeCode::f32, {M, ir::int_imm(64)}, nullptr, false};
    KernelParam y{"Y", true, DTypeCode::f16, {ir::binary(ir::BinOp::Mul, M, ir::int_imm(2)), N}, nullptr, true};
    KernelParam sc{"s", false, DTypeCode::f32, {}, ir::var("s", DTypeCode::f32), false};
    KernelParam n{"x", false, DTypeCode::i32, {}, ir::var("x"), false};
    p_.params = {x, y, sc, n};
    p_.block_idx = ir::var("b");
    p_.sub_block_idx = ir::var("v");
    p_.block_dim = ir::binary(ir::BinOp::CeilDiv, M, ir::int_imm(16));
    p_.workspace_bytes = ir::int_imm(pick(2) ? 0 : 4096);
    const char* names[] = {"l1", "l0a", "l0b", "l0c", "ub", "ux", "x_ub"};
    Mem mems[] = {Mem::L1, Mem::L0A, Mem::L0B, Mem::L0C, Mem::UB, Mem::UB, Mem::UB};
    for (int i = 0; i < 7; ++i) {
      BufferDecl b;
      b.name = names[i], b.mem = mems[i], b.core = i < 4 ? CoreType::AIC : CoreType::AIV;
      b.offset = 512 * pick(8), b.bytes = 4096, b.dtype = i == 3 ? DTypeCode::f32 : DTypeCode::f16;
      b.format = i == 1 ? Format::Zz : i == 2 ? Format::Zn : i < 4 ? Format::Nz : Format::ND;
      p_.buffers.push_back(b);
    }
    scope_ = {M, N, p_.params[3].var, p_.block_idx};
    p_.aic = block(true, 0);
    scope_.push_back(p_.sub_block_idx);
    p_.aiv = block(false, 0);
    return p_;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  ir::Expr expr(int depth = 0) {
    if (depth >= 2 || pick(3) == 0)
      return pick(2) ? ir::Expr(scope_[pick(static_cast<int>(scope_.size()))]) : ir::int_imm(pick(300) - 20);
    static const ir::BinOp ops[] = {ir::BinOp::Add, ir::BinOp::Sub, ir::BinOp::Mul, ir::BinOp::FloorDiv,
                                    ir::BinOp::Mod, ir::BinOp::Min, ir::BinOp::Max, ir::BinOp::CeilDiv};
    return ir::binary(ops[pick(8)], expr(depth + 1), expr(depth + 1));
  }
  ir::Expr cond() {
    static const ir::BinOp cmp[] = {ir::BinOp::LT, ir::BinOp::EQ, ir::BinOp::GE, ir::BinOp::NE};
    ir::Expr c = ir::binary(cmp[pick(4)], expr(), expr());
    return pick(3) ? c : ir::binary(ir::BinOp::And, c, ir::binary(ir::BinOp::LE, expr(), expr()));
  }
  LocalRef loc(bool aic) { return LocalRef{aic ? pick(4) : 4 + pick(3), expr()}; }
  GmRef gm() { return GmRef{pick(3) - 1, expr()}; }  // X, Y or the workspace
  VecOperand vop() { return VecOperand{loc(false), expr()}; }
  ir::DType dt() {
    static const DTypeCode t[] = {DTypeCode::f16, DTypeCode::f32, DTypeCode::bf16, DTypeCode::i32, DTypeCode::i8};
    return t[pick(5)];
  }
  Pipe pipe() { return static_cast<Pipe>(pick(7)); }

  InstrOp cube() {
    switch (pick(13)) {
      case 0: return CopyGmToL1{gm(), loc(true), dt(), expr(), expr(), expr(), expr(), expr(), pick(2) ? DTypeCode::f16 : DTypeCode::f32,
                                pick(2) ? expr() : nullptr};  // window_rows: a window of rows, or the whole tile
      case 1: return LoadL0{loc(true), loc(true), dt(), expr(), expr(), expr(), expr(), expr(), pick(2) == 0};
      case 2: return Mmad{loc(true), loc(true), loc(true), dt(), dt(), expr(), expr(), expr(), cond()};
      case 3: return Fixpipe{loc(true), gm(), dt(), dt(), expr(), expr(), expr(), expr(), pick(2) == 0};
      case 4: return InitConstValue{loc(true), dt(), expr(), expr(), expr(), expr()};
      case 5: return DataCopyNd2Nz{gm(), loc(true), dt(), expr(), expr(), expr(), expr(), expr(), expr(), expr(), expr()};
      case 6: return LoadData2D{loc(true), loc(true), dt(), expr(), expr(), expr(), expr(), expr(), pick(2) == 0};
      case 7: {
        LoadData3DV2 l;
        l.src = loc(true), l.dst = loc(true), l.dtype = dt(), l.l1H = expr(), l.l1W = expr(), l.channelSize = expr();
        l.kExtension = expr(), l.mExtension = expr(), l.kStartPt = expr(), l.mStartPt = expr();
        return l;
      }
      case 8: return FixpipeV220{loc(true), gm(), dt(), dt(), expr(), expr(), expr(), expr(), static_cast<QuantMode>(pick(3)), pick(2) == 0, expr()};
      case 9: return SetFlag{Pipe::MTE2, Pipe::MTE1, expr()};
      case 10: return CrossCoreSetFlag{pick(3), pipe(), expr()};
      case 11: return FixpipeL1{loc(true), loc(true), dt(), dt(), expr(), expr(), expr(), expr(), static_cast<QuantMode>(pick(3))};
      default: return PipeBarrier{static_cast<Pipe>(pick(8))};
    }
  }
  InstrOp vector() {
    switch (pick(23)) {
      case 0: return CopyGmToUb{gm(), loc(false), dt(), expr(), expr(), expr(), expr(), pick(2) == 0};
      case 1: return CopyUbToGm{loc(false), gm(), dt(), expr(), expr(), expr(), expr()};
      case 2: return CopyUbToUb{loc(false), loc(false), dt(), expr(), expr(), expr(), expr()};
      case 3: return DataCopyPadGmToUb{gm(), loc(false), dt(), expr(), expr(), expr(), expr(), pick(2) == 0, expr(), expr(), expr()};
      case 4: return DataCopyPadUbToGm{loc(false), gm(), dt(), expr(), expr(), expr(), expr()};
      case 5: return DataCopyUbToUb{loc(false), loc(false), dt(), expr(), expr(), expr(), expr()};
      case 6: {  // the tensor-tensor ops: Add .. Min, And, Or
        int k = pick(8);
        VecBinOp op = k < 6 ? static_cast<VecBinOp>(k) : k == 6 ? VecBinOp::And : VecBinOp::Or;
        return VecBinary{op, dt(), vop(), vop(), vop(), expr(), expr()};
      }
      case 7: return VecBinaryScalar{static_cast<VecBinOp>(pick(6)), dt(), vop(), vop(), pick(2) ? expr() : ir::Expr(p_.params[2].var), expr(), expr()};
      case 8: return VecUnary{static_cast<VecUnOp>(pick(7)), dt(), vop(), vop(), expr(), expr()};
      case 9: return VecCast{dt(), dt(), static_cast<RoundMode>(pick(6)), vop(), vop(), expr(), expr()};
      case 10: return VecDup{dt(), vop(), ir::float_imm(0.5 * pick(5), DTypeCode::f32), expr(), expr()};
      case 11: return VecReduce{static_cast<ReduceOp>(pick(3)), pick(2) ? ReduceAxis::Row : ReduceAxis::Col, dt(), vop(), vop(), expr(), expr()};
      case 12: return VecRowBroadcast{static_cast<VecBinOp>(pick(6)), dt(), vop(), vop(), loc(false), expr(), expr()};
      case 13: case 14: {
        VecApi api = static_cast<VecApi>(pick(19));
        int n = vec_api_sources(api);
        LocalRef none{-1, nullptr};
        ir::DType t = dt(), st = api == VecApi::Cast ? dt() : t;
        ir::Expr scalar = vec_api_has_scalar(api) ? expr() : nullptr;
        RoundMode r = api == VecApi::Cast ? static_cast<RoundMode>(pick(6)) : RoundMode::None;
        LocalRef s0 = n >= 1 ? loc(false) : none, s1 = n == 2 ? loc(false) : none;
        if (pick(2)) return VecCallL2{api, t, st, loc(false), s0, s1, scalar, r, expr()};
        return VecCallL0{api, t, st, loc(false), s0, s1, scalar, r, expr(), expr(), expr(), n >= 1 ? expr() : nullptr,
                         n == 2 ? expr() : nullptr, expr(), n >= 1 ? expr() : nullptr, n == 2 ? expr() : nullptr};
      }
      case 15: return WholeReduce{static_cast<ReduceOp>(pick(3)), dt(), loc(false), loc(false), expr(), expr(), expr(), expr(), expr()};
      case 16: return Brcb{dt(), loc(false), loc(false), expr(), expr(), expr()};
      case 17: return WaitFlag{Pipe::MTE2, Pipe::V, expr()};
      case 18: return CrossCoreWaitFlag{expr(), pipe()};
      case 19: return VecIndex{dt(), vop(), expr(), expr(), expr()};
      case 20: {
        ir::DType t = dt();
        return VecCallL2{VecApi::CreateVecIndex, t, t, loc(false), LocalRef{-1, nullptr}, LocalRef{-1, nullptr}, expr(),
                         RoundMode::None, expr()};
      }
      case 21: return Gather{dt(), loc(false), loc(false), loc(false), expr(), expr(), expr()};
      default: return PipeBarrier{Pipe::V};
    }
  }
  StmtPtr block(bool aic, int depth) {
    std::vector<StmtPtr> body;
    size_t keep = scope_.size();
    for (int i = 0, n = 1 + pick(5); i < n; ++i) {
      int k = depth < 3 ? pick(8) : 3 + pick(5);
      // names that meet the text's separators; never one in scope (the printer does not
      // disambiguate a shadowed name in statement headers, and no pass shadows)
      static const char* vars[] = {"i", "xi", "nxx", "r_x", "xx", "row", "ix"};
      ir::Var v = ir::var(vars[pick(7)]);
      for (const auto& u : scope_)
        if (u->name == v->name) k = 3;
      for (const auto& q : p_.params)
        if (q.name == v->name) k = 3;
      if (k == 0) {
        ir::Expr ext = expr();
        scope_.push_back(v);
        body.push_back(for_(v, ext, block(aic, depth + 1)));
        scope_.pop_back();
      } else if (k == 1) {
        ir::Expr c = cond();
        StmtPtr t = block(aic, depth + 1);
        body.push_back(if_(c, t, pick(2) ? block(aic, depth + 1) : nullptr));
      } else if (k == 2) {
        body.push_back(let(v, expr()));
        scope_.push_back(v);
      } else {
        ir::Span sp;
        if (pick(2)) sp.file = "k.py", sp.line = 1 + pick(99), sp.col = 1;
        body.push_back(instr(aic ? cube() : vector(), sp));
      }
    }
    scope_.resize(keep);
    return seq(std::move(body));
  }

  std::mt19937 rng_;
  Program p_;
  std::vector<ir::Var> scope_;
};

TEST(ProgramParser, RoundTripsRandomPrograms) {
  for (unsigned seed = 0; seed < 200; ++seed) {
    Program p = RandomProgram(seed).make();
    expect_round_trip(print_program(p), "random program " + std::to_string(seed));
    if (HasFailure()) break;
  }
}

// ---- errors: located at the line and column of the text ----

const char* kHeader = R"(ascend_kernel k AIV_ONLY blocks=ceildiv(M, 16) workspace=0 block_idx=b
  param 0 X: GM float32[M, 64]
  param 1 s: float32
  buffer u: AIV UB @0 +4096 float32 ND
AIV:
)";

void expect_error(const std::string& body, const std::string& msg, int line, int col) {
  try {
    parse_program(std::string(kHeader) + body, "k.prog");
    ADD_FAILURE() << "expected an error containing '" << msg << "' for\n" << body;
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find(msg), std::string::npos) << e.what();
    EXPECT_EQ(e.span().file, "k.prog") << e.what();
    EXPECT_EQ(e.span().line, line) << e.what();
    EXPECT_EQ(e.span().col, col) << e.what();
  }
}

TEST(ProgramParser, ErrorsAreLocated) {
  // the header parses, and a correct body round-trips
  expect_round_trip(std::string(kHeader) + "  for r in range(M):\n    V L2 Muls u[r * 256] <- u[0], s float32 count=64  @3\n",
                    "header");
  expect_error("  MTE2 CopyGmToUb w[0] <- X[0] float32 n_rows=1 row_bytes=256 src_stride=256 dst_stride=256\n",
               "'w' is not a buffer of the program", 6, 19);
  expect_error("  MTE2 CopyGmToUb u[0] <- Z[0] float32 n_rows=1 row_bytes=256 src_stride=256 dst_stride=256\n",
               "'Z' is not a tensor parameter", 6, 27);
  expect_error("  V L2 Muls u[q * 4] <- u[0], s float32 count=64\n", "undefined variable 'q'", 6, 15);
  expect_error("  V L2 Muls u[0] <- u[0], s float32 cnt=64\n", "expected 'count='", 6, 37);
  expect_error("  V Transmogrify u[0]\n", "unknown instruction 'Transmogrify'", 6, 5);
  expect_error("  MTE3 L2 Muls u[0] <- u[0], s float32 count=64\n", "runs on pipe V, not MTE3", 6, 3);
  expect_error("  for r in range(4):\n      V PipeBarrier<V>\n", "unexpected indentation: expected 4 spaces", 7, 7);
  expect_error("  V L2 Muls u[0] <- u[0], s float32 count=64 extra\n", "unexpected 'extra'", 6, 46);
  expect_error("  V Add u[0]/64 <- u[0]/64, u[0]/64 float32 4by64\n", "expected ROWSxCOLS", 6, 45);
  expect_error("  V SetFlag<V_MTE9>(0)\n", "expected a pipe pair SRC_DST", 6, 13);
  expect_error("  r = (4 +\n", "expected an expression", 6, 11);
  expect_error("  for r in range(4)\n", "expected the line to end with '):'", 6, 20);
}

// Program::pool_bytes: one `pool CORE MEM +BYTES` line per non-zero pool, after the buffers.
TEST(ProgramParser, PoolLines) {
  std::string head = kHeader;
  auto with = [&](const std::string& pools) {
    std::string t = head;
    return t.insert(t.find("AIV:\n"), pools);
  };
  std::string text = with("  pool AIV UB +4096\n") + "  V PipeBarrier<V>\n";
  expect_round_trip(text, "pools");
  EXPECT_EQ(parse_program(text, "k.prog").pool(CoreType::AIV, Mem::UB), 4096);
  EXPECT_EQ(parse_program(text, "k.prog").pool(CoreType::AIC, Mem::UB), 0);
  for (const auto& [pools, msg] : std::vector<std::pair<std::string, std::string>>{
           {"  pool AIV GM +32\n", "GM has no pool"},
           {"  pool AIV UB +32\n  pool AIV UB +64\n", "the pool of AIV UB is declared twice"},
           {"  pool AIV UB 64\n", "expected '+'"}}) {
    try {
      parse_program(with(pools), "k.prog");
      ADD_FAILURE() << "expected an error containing '" << msg << "'";
    } catch (const ir::Error& e) {
      EXPECT_NE(e.message().find(msg), std::string::npos) << e.what();
      EXPECT_GE(e.span().line, 5) << e.what();
    }
  }
}

}  // namespace
}  // namespace tw::ascend
