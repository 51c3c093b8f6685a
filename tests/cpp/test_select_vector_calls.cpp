// Tests of select_vector_calls (src/target/ascend/select_vector_calls.h): one high-level vector
// instruction in a small AIV program, the program text (print_program) before and after the pass,
// the located errors for constant fields that do not fit, and the simulator's execution of the
// call-level kinds (level-0 addressing, WholeReduce, Brcb) and its run-time field checks.
#include "target/ascend/select_vector_calls.h"

#include <cmath>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "target/ascend/program_printer.h"
#include "target/ascend/select_move_calls.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

using ir::BinOp;
using ir::DTypeCode;
using ir::Expr;

Expr C(int64_t v) { return ir::int_imm(v); }
ir::Span L(int line) {
  ir::Span s;
  s.file = "kernel.py";
  s.line = line;
  s.col = 5;
  return s;
}
const target::Target& b2() { return target::find_target("ascend910b2"); }

// An AIV-only program with UB buffers `a`, `b`, `c`, `v` (64 KiB, 64 KiB, 32 KiB, 1 KiB, fp32)
// and one shape variable `n`; `body` is its AIV code.
struct Prog {
  Program p;
  ir::Var n = ir::var("n");
  Prog() {
    p.name = "k";
    p.kernel_type = KernelType::AIV_ONLY;
    p.block_dim = C(1);
    p.block_idx = ir::var("bx");
    p.shape_vars = {n};
    int64_t off = 0;
    for (auto [name, bytes] : std::vector<std::pair<const char*, int64_t>>{{"a", 65536}, {"b", 65536}, {"c", 32768}, {"v", 1024}}) {
      BufferDecl d;
      d.name = name, d.core = CoreType::AIV, d.mem = Mem::UB, d.offset = off, d.bytes = bytes, d.dtype = DTypeCode::f32;
      p.buffers.push_back(d);
      off += bytes;
    }
  }
  static VecOperand op(int buf, Expr stride, Expr off = C(0)) { return VecOperand{LocalRef{buf, std::move(off)}, std::move(stride)}; }
  Prog& with(InstrOp i, int line = 7) {
    p.aiv = seq({instr(std::move(i), L(line))});
    return *this;
  }
  std::string code() const {  // the AIV code after the pass
    std::string s = print_program(select_vector_calls(p, b2()));
    return s.substr(s.find("AIV:\n") + 5);
  }
};

// ---------------------------------------------------------------------------------------------
// Before / after

TEST(SelectVectorCalls, BeforeTextIsTheHighLevelInstruction) {
  Prog g;
  g.with(VecBinary{VecBinOp::Add, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), Prog::op(2, C(64)), C(16), C(64)});
  std::string before = print_program(g.p);
  EXPECT_NE(before.find("V Add a[0]/64 <- b[0]/64, c[0]/64 float32 16x64  @7"), std::string::npos) << before;
}

TEST(SelectVectorCalls, ContiguousBinaryIsLevel2) {
  Prog g;
  g.with(VecBinary{VecBinOp::Add, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), Prog::op(2, C(64)), C(16), C(64)});
  EXPECT_EQ(g.code(), "  V L2 Add a[0] <- b[0], c[0] float32 count=1024  @7\n");
}

TEST(SelectVectorCalls, StridedBinaryIsLevel0) {
  Prog g;
  g.with(VecBinary{VecBinOp::Mul, DTypeCode::f32, Prog::op(0, C(128)), Prog::op(1, C(128)), Prog::op(2, C(64)), C(16), C(64)});
  EXPECT_EQ(g.code(), "  V L0 Mul a[0] <- b[0], c[0] float32 mask=64 repeat=16 blk=(1, 1, 1) rep=(16, 16, 8)  @7\n");
}

TEST(SelectVectorCalls, MoreThan255RowsConstant) {
  Prog g;
  g.with(VecUnary{VecUnOp::Exp, DTypeCode::f32, Prog::op(0, C(48)), Prog::op(1, C(48)), C(300), C(32)});
  EXPECT_EQ(g.code(),
            "  for tw_r in range(2):\n"
            "    tw_rep = min(300 - tw_r * 255, 255)\n"
            "    V L0 Exp a[tw_r * 48960] <- b[tw_r * 48960] float32 mask=32 repeat=tw_rep blk=(1, 1) rep=(6, 6)  @7\n");
}

TEST(SelectVectorCalls, SymbolicRowsAreChunkedAndGuarded) {
  Prog g;
  g.with(VecUnary{VecUnOp::Abs, DTypeCode::f32, Prog::op(0, C(48)), Prog::op(1, C(48)), g.n, C(32)});
  EXPECT_EQ(g.code(),
            "  if n > 0:\n"
            "    for tw_r in range(ceildiv(n, 255)):\n"
            "      tw_rep = min(n - tw_r * 255, 255)\n"
            "      V L0 Abs a[tw_r * 48960] <- b[tw_r * 48960] float32 mask=32 repeat=tw_rep blk=(1, 1) rep=(6, 6)  @7\n");
}

TEST(SelectVectorCalls, ColumnsWiderThanOneRepeat) {
  Prog g;
  g.with(VecBinary{VecBinOp::Max, DTypeCode::f32, Prog::op(0, C(128)), Prog::op(1, C(128)), Prog::op(2, C(128)), C(4), C(100)});
  EXPECT_EQ(g.code(),
            "  for tw_c in range(2):\n"
            "    tw_mask = min(100 - tw_c * 64, 64)\n"
            "    V L0 Max a[tw_c * 256] <- b[tw_c * 256], c[tw_c * 256] float32 mask=tw_mask repeat=4 blk=(1, 1, 1) rep=(16, 16, 16)  @7\n");
}

// x / s is Div by s Duplicated into one 32 B scratch block read with block and repeat stride 0
// (correctly rounded, as cpu's `/`; hunt15 F1); Muls by 1 / s only for a constant +-2^k (exact).
TEST(SelectVectorCalls, ScalarSubIsAddsOfTheNegationAndDivIsDivByADuplicatedBlock) {
  Prog g;
  g.with(VecBinaryScalar{VecBinOp::Sub, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), ir::float_imm(2.5), C(8), C(64)});
  EXPECT_EQ(g.code(), "  V L2 Adds a[0] <- b[0], -(2.5) float32 count=512  @7\n");
  g.with(VecBinaryScalar{VecBinOp::Div, DTypeCode::f16, Prog::op(0, C(128)), Prog::op(1, C(128)), ir::float_imm(3.0), C(8), C(64)});
  EXPECT_EQ(g.code(),
            "  V PipeBarrier<V>  @7\n"
            "  V L2 Duplicate tw_vec_scratch[0] <- cast<float16>(3.0) float16 count=16  @7\n"
            "  V PipeBarrier<V>  @7\n"
            "  V L0 Div a[0] <- b[0], tw_vec_scratch[0] float16 mask=64 repeat=8 blk=(1, 1, 0) rep=(8, 8, 0)  @7\n");
  // contiguous rows: along the flat run of 135 elements (two whole repeats, then 7; offsets in bytes)
  g.with(VecBinaryScalar{VecBinOp::Div, DTypeCode::f32, Prog::op(0, C(9)), Prog::op(1, C(9)), ir::float_imm(3.0), C(15), C(9)});
  EXPECT_EQ(g.code(),
            "  V PipeBarrier<V>  @7\n"
            "  V L2 Duplicate tw_vec_scratch[0] <- 3.0 float32 count=8  @7\n"
            "  V PipeBarrier<V>  @7\n"
            "  V L0 Div a[0] <- b[0], tw_vec_scratch[0] float32 mask=64 repeat=2 blk=(1, 1, 0) rep=(8, 8, 0)  @7\n"
            "  V L0 Div a[512] <- b[512], tw_vec_scratch[0] float32 mask=7 repeat=1 blk=(1, 1, 0) rep=(8, 8, 0)  @7\n");
  g.with(VecBinaryScalar{VecBinOp::Div, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), ir::float_imm(-0.25), C(8), C(64)});
  EXPECT_EQ(g.code(), "  V L2 Muls a[0] <- b[0], -4.0 float32 count=512  @7\n");
  // 2^-127 is not a normal float32: Div
  g.with(VecBinaryScalar{VecBinOp::Div, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), ir::float_imm(std::ldexp(1.0, 127)), C(1), C(8)});
  EXPECT_NE(g.code().find("Div"), std::string::npos) << g.code();
}

TEST(SelectVectorCalls, CastCarriesItsRoundMode) {
  Prog g;
  g.with(VecCast{DTypeCode::f16, DTypeCode::f32, RoundMode::Floor, Prog::op(0, C(64)), Prog::op(1, C(64)), C(8), C(64)});
  EXPECT_EQ(g.code(), "  V L2 Cast a[0] <- b[0] float32->float16 CAST_FLOOR count=512  @7\n");
  g.with(VecCast{DTypeCode::f16, DTypeCode::f32, RoundMode::Rint, Prog::op(0, C(128)), Prog::op(1, C(72)), C(8), C(72)});
  EXPECT_EQ(g.code(),
            "  for tw_c in range(2):\n"
            "    tw_mask = min(72 - tw_c * 64, 64)\n"
            "    V L0 Cast a[tw_c * 128] <- b[tw_c * 256] float32->float16 CAST_RINT mask=tw_mask repeat=8 blk=(1, 1) rep=(8, 9)  @7\n");
}

TEST(SelectVectorCalls, Duplicate) {
  Prog g;
  g.with(VecDup{DTypeCode::f32, Prog::op(0, C(64)), ir::float_imm(-1.5), C(4), C(48)});
  EXPECT_EQ(g.code(), "  V L0 Duplicate a[0] <- -1.5 float32 mask=48 repeat=4 blk=(1) rep=(8)  @7\n");
}

TEST(SelectVectorCalls, RowReduceNarrowIsOneWholeReduce) {
  Prog g;
  g.with(VecReduce{ReduceOp::Sum, ReduceAxis::Row, DTypeCode::f32, Prog::op(3, C(1)), Prog::op(0, C(64)), C(16), C(40)});
  EXPECT_EQ(g.code(), "  V WholeReduceSum v[0] <- a[0] float32 mask=40 repeat=16 dst_rep=1 src_blk=1 src_rep=8  @7\n");
}

TEST(SelectVectorCalls, RowReduceSumWideReducesChunksThroughScratch) {
  Prog g;
  g.with(VecReduce{ReduceOp::Sum, ReduceAxis::Row, DTypeCode::f32, Prog::op(3, C(1)), Prog::op(0, C(128)), C(16), C(100)});
  std::string all = print_program(select_vector_calls(g.p, b2()));
  EXPECT_NE(all.find("buffer tw_vec_scratch: AIV UB @164864 +512 uint8 ND\n"), std::string::npos) << all;
  EXPECT_NE(all.find("  pool AIV UB +165376\n"), std::string::npos) << all;  // the UB pool grows to the scratch area's end
  EXPECT_EQ(g.code(),
            "  V PipeBarrier<V>  @7\n"
            "  V WholeReduceSum tw_vec_scratch[0] <- a[0] float32 mask=64 repeat=16 dst_rep=8 src_blk=1 src_rep=16  @7\n"
            "  V WholeReduceSum tw_vec_scratch[4] <- a[256] float32 mask=36 repeat=16 dst_rep=8 src_blk=1 src_rep=16  @7\n"
            "  V PipeBarrier<V>  @7\n"
            "  V WholeReduceSum v[0] <- tw_vec_scratch[0] float32 mask=2 repeat=16 dst_rep=1 src_blk=1 src_rep=1  @7\n");
}

TEST(SelectVectorCalls, RowReduceMaxWideFoldsChunksThenOneWholeReduce) {
  Prog g;
  g.with(VecReduce{ReduceOp::Max, ReduceAxis::Row, DTypeCode::f32, Prog::op(3, C(1)), Prog::op(0, C(256)), C(4), C(200)});
  EXPECT_EQ(g.code(),
            "  V PipeBarrier<V>  @7\n"
            "  V L0 Muls tw_vec_scratch[0] <- a[0], 1.0 float32 mask=64 repeat=4 blk=(1, 1) rep=(8, 32)  @7\n"
            "  V PipeBarrier<V>  @7\n"
            "  V L0 Max tw_vec_scratch[0] <- tw_vec_scratch[0], a[256] float32 mask=64 repeat=4 blk=(1, 1, 1) rep=(8, 8, 32)  @7\n"
            "  V PipeBarrier<V>  @7\n"
            "  V L0 Max tw_vec_scratch[0] <- tw_vec_scratch[0], a[512] float32 mask=64 repeat=4 blk=(1, 1, 1) rep=(8, 8, 32)  @7\n"
            "  V PipeBarrier<V>  @7\n"
            "  V L0 Max tw_vec_scratch[0] <- tw_vec_scratch[0], a[768] float32 mask=8 repeat=4 blk=(1, 1, 1) rep=(8, 8, 32)  @7\n"
            "  V PipeBarrier<V>  @7\n"
            "  V WholeReduceMax v[0] <- tw_vec_scratch[0] float32 mask=64 repeat=4 dst_rep=1 src_blk=1 src_rep=8  @7\n");
}

TEST(SelectVectorCalls, FloatRowMaxOverMoreThan255RowsChunksBy254) {
  // float WholeReduceMax/Min need an 8-byte aligned destination: chunk k starts at row 254 k
  Prog g;
  g.with(VecReduce{ReduceOp::Max, ReduceAxis::Row, DTypeCode::f32, Prog::op(2, C(1)), Prog::op(0, C(40)), C(300), C(40)});
  EXPECT_EQ(g.code(),
            "  for tw_r in range(2):\n"
            "    tw_rep = min(300 - tw_r * 254, 254)\n"
            "    V WholeReduceMax c[tw_r * 1016] <- a[tw_r * 40640] float32 mask=40 repeat=tw_rep dst_rep=1 src_blk=1 "
            "src_rep=5  @7\n");
  // a sum has no such rule: 255
  g.with(VecReduce{ReduceOp::Sum, ReduceAxis::Row, DTypeCode::f32, Prog::op(2, C(1)), Prog::op(0, C(40)), C(300), C(40)});
  EXPECT_NE(g.code().find("min(300 - tw_r * 255, 255)"), std::string::npos) << g.code();
}

TEST(SelectVectorCalls, ColumnReduce) {
  Prog g;
  g.with(VecReduce{ReduceOp::Sum, ReduceAxis::Col, DTypeCode::f32, Prog::op(3, C(1)), Prog::op(0, C(64)), C(4), C(64)});
  EXPECT_EQ(g.code(),
            "  V L2 Muls v[0] <- a[0], 1.0 float32 count=64  @7\n"
            "  for tw_r in range(3):\n"
            "    V PipeBarrier<V>  @7\n"
            "    V L2 Add v[0] <- v[0], a[(tw_r + 1) * 256] float32 count=64  @7\n");
}

TEST(SelectVectorCalls, RowBroadcastIsBrcbThenBlockStrideZero) {
  Prog g;
  g.with(VecRowBroadcast{VecBinOp::Sub, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), LocalRef{3, C(0)}, C(16), C(64)});
  EXPECT_EQ(g.code(),
            "  V PipeBarrier<V>  @7\n"
            "  V Brcb tw_vec_scratch[0] <- v[0] float32 repeat=2 dst_blk=1 dst_rep=8  @7\n"
            "  V PipeBarrier<V>  @7\n"
            "  V L0 Sub a[0] <- b[0], tw_vec_scratch[0] float32 mask=64 repeat=16 blk=(1, 1, 0) rep=(8, 8, 1)  @7\n");
}

TEST(SelectVectorCalls, CountGuardIsAProgramIf) {
  Prog g;
  g.with(VecBinary{VecBinOp::Add, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), Prog::op(2, C(64)),
                   ir::binary(BinOp::Sub, g.n, C(16)), C(64)});
  EXPECT_EQ(g.code(), "  if n - 16 > 0:\n    V L2 Add a[0] <- b[0], c[0] float32 count=(n - 16) * 64  @7\n");
  // a constant count <= 0 is no call
  g.with(VecBinary{VecBinOp::Add, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(1, C(64)), Prog::op(2, C(64)), C(0), C(64)});
  EXPECT_EQ(g.code(), "");
}

TEST(SelectVectorCalls, ScratchReuseStartsWithABarrierUnlessOneIsThere) {
  Prog g;
  VecRowBroadcast bc{VecBinOp::Mul, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(0, C(64)), LocalRef{3, C(0)}, C(8), C(64)};
  g.p.aiv = seq({instr(bc, L(7)), instr(PipeBarrier{Pipe::V}, L(8)), instr(bc, L(9))});
  std::string code = g.code();
  EXPECT_EQ(code,
            "  V PipeBarrier<V>  @7\n"
            "  V Brcb tw_vec_scratch[0] <- v[0] float32 repeat=1 dst_blk=1 dst_rep=8  @7\n"
            "  V PipeBarrier<V>  @7\n"
            "  V L0 Mul a[0] <- a[0], tw_vec_scratch[0] float32 mask=64 repeat=8 blk=(1, 1, 0) rep=(8, 8, 1)  @7\n"
            "  V PipeBarrier<V>  @8\n"
            "  V Brcb tw_vec_scratch[0] <- v[0] float32 repeat=1 dst_blk=1 dst_rep=8  @9\n"
            "  V PipeBarrier<V>  @9\n"
            "  V L0 Mul a[0] <- a[0], tw_vec_scratch[0] float32 mask=64 repeat=8 blk=(1, 1, 0) rep=(8, 8, 1)  @9\n");
}

// Rows more than 255 blocks of 32 B apart: no uint8 repeat stride reaches the next row, so the
// calls go along each row (elementwise: one level-2 call per row).
TEST(SelectVectorCalls, RowsWiderThan255BlocksAreOneCallPerRow) {
  Prog g;
  // rows 4096 floats apart: 512 blocks
  g.with(VecUnary{VecUnOp::Relu, DTypeCode::f32, Prog::op(0, C(4096)), Prog::op(1, C(4096)), C(2), C(3000)}, 42);
  EXPECT_EQ(g.code(),
            "  for tw_row in range(2):\n"
            "    V L2 Relu a[tw_row * 16384] <- b[tw_row * 16384] float32 count=3000  @42\n");
}

// A symbolic row stride is used only when it is provably a whole number of 32 B blocks.
TEST(SelectVectorCalls, SymbolicRowStrideMustBeProvablyAWholeNumberOfBlocks) {
  Prog g;
  Expr padded = ir::binary(BinOp::Mul, ir::binary(BinOp::CeilDiv, g.n, C(8)), C(8));  // ceildiv(n, 8) * 8 floats
  g.with(VecUnary{VecUnOp::Abs, DTypeCode::f32, Prog::op(0, padded), Prog::op(1, padded), C(4), C(16)}, 44);
  EXPECT_EQ(g.code(),
            "  V L0 Abs a[0] <- b[0] float32 mask=16 repeat=4 blk=(1, 1) rep=(ceildiv(n, 8) * 32 // 32, "
            "ceildiv(n, 8) * 32 // 32)  @44\n");
  g.with(VecUnary{VecUnOp::Abs, DTypeCode::f32, Prog::op(0, g.n), Prog::op(1, C(16)), C(4), C(16)}, 45);
  try {
    select_vector_calls(g.p, b2());
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("the destination of this vector instruction has rows n * 4 B apart, a run-time value not "
                               "provably a multiple of 32 B"),
              std::string::npos)
        << e.message();
    EXPECT_NE(e.hint().find("ceildiv(n, 8) * 8"), std::string::npos) << e.hint();
    EXPECT_EQ(e.span().line, 45);
  }
}

TEST(SelectVectorCalls, ConstantFieldOverflowIsALocatedError) {
  Prog g;
  // rows not a whole number of 32 B blocks apart
  g.with(VecUnary{VecUnOp::Relu, DTypeCode::f32, Prog::op(0, C(20)), Prog::op(0, C(20)), C(2), C(16)}, 43);
  try {
    select_vector_calls(g.p, b2());
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("rows 80 B apart, not a multiple of 32 B"), std::string::npos) << e.message();
    EXPECT_EQ(e.span().line, 43);
  }
}

TEST(SelectVectorCalls, ScratchThatDoesNotFitTheUbIsALocatedError) {
  Prog g;
  g.p.buffers[0].bytes = 190000;  // the planned buffers fit the 196352 B of UB, the scratch does not
  g.p.buffers[3].offset = 190000;
  g.p.buffers[3].bytes = 4096;
  g.with(VecRowBroadcast{VecBinOp::Add, DTypeCode::f32, Prog::op(0, C(64)), Prog::op(0, C(64)), LocalRef{3, C(0)}, C(1024), C(64)}, 44);
  try {
    select_vector_calls(g.p, b2());
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("need 32768 B of UB scratch"), std::string::npos) << e.message();
    EXPECT_EQ(e.span().line, 44);
  }
}

// ---------------------------------------------------------------------------------------------
// The simulator executes the call-level kinds

// X (512 floats, X[i] = i) -> UB buffer a; c is filled with -1; `calls` run; Y = the first 512
// floats of c.
struct SimProg {
  Program p;
  std::vector<float> x, y;
  explicit SimProg(const std::vector<InstrOp>& calls, int line = 30) : x(512), y(512, 0.f) {
    for (int i = 0; i < 512; ++i) x[i] = static_cast<float>(i);
    p.name = "calls";
    p.kernel_type = KernelType::AIV_ONLY;
    p.block_dim = C(1);
    p.block_idx = ir::var("bx");
    for (const char* n : {"X", "Y"}) {
      KernelParam k;
      k.name = n, k.dtype = DTypeCode::f32, k.shape = {C(512)}, k.is_output = n[0] == 'Y';
      p.params.push_back(k);
    }
    for (int i = 0; i < 2; ++i) {
      BufferDecl d;
      d.name = i ? "c" : "a", d.core = CoreType::AIV, d.mem = Mem::UB, d.offset = i * 4096, d.bytes = 4096, d.dtype = DTypeCode::f32;
      p.buffers.push_back(d);
    }
    std::vector<StmtPtr> body{
        instr(CopyGmToUb{GmRef{0, C(0)}, LocalRef{0, C(0)}, DTypeCode::f32, C(1), C(2048), C(2048), C(2048)}, L(line)),
        instr(VecCallL2{VecApi::Duplicate, DTypeCode::f32, DTypeCode::f32, LocalRef{1, C(0)}, {}, {}, ir::float_imm(-1.0),
                        RoundMode::None, C(1024)},
              L(line)),
        instr(PipeBarrier{Pipe::ALL}, L(line))};
    for (const auto& c : calls) body.push_back(instr(c, L(line + 1)));
    body.push_back(instr(PipeBarrier{Pipe::ALL}, L(line + 2)));
    body.push_back(instr(CopyUbToGm{LocalRef{1, C(0)}, GmRef{1, C(0)}, DTypeCode::f32, C(1), C(2048), C(2048), C(2048)}, L(line + 2)));
    p.aiv = seq(body);
  }
  sim::Result run() {  // the moves are byte-level: select them, as the pipeline does
    return sim::run(select_move_calls(p, b2()), b2().ascend,
                    {sim::Arg{reinterpret_cast<uint8_t*>(x.data()), 2048}, sim::Arg{reinterpret_cast<uint8_t*>(y.data()), 2048}});
  }
};

const sim::Report* api_report(const sim::Result& r, const std::string& text) {
  for (const auto& rep : r.reports)
    if (rep.kind == sim::ReportKind::ApiRule && rep.message.find(text) != std::string::npos) return &rep;
  return nullptr;
}

TEST(SelectVectorCallsSim, Level0AddressingWithBlockAndRepeatStrides) {
  // repeat i, element e: dst c[16 i + e] = a[32 i + 16 (e / 8) + e % 8] (src0: block stride 2,
  // repeat stride 4) + a[8 i + e] (src1: block stride 1, repeat stride 1)
  SimProg s({VecCallL0{VecApi::Add, DTypeCode::f32, DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{0, C(0)}, {},
                       RoundMode::None, C(16), C(2), C(1), C(2), C(1), C(2), C(4), C(1)}});
  auto r = s.run();
  ASSERT_TRUE(r.reports.empty()) << r.summary();
  std::vector<float> want(512, -1.f);
  for (int i = 0; i < 2; ++i)
    for (int e = 0; e < 16; ++e) want[16 * i + e] = s.x[32 * i + 16 * (e / 8) + e % 8] + s.x[8 * i + e];
  EXPECT_EQ(s.y, want);
}

TEST(SelectVectorCallsSim, MaskedRepeatsWriteOnlyTheirFirstElements) {
  // Duplicate with mask 3 over 4 repeats 2 blocks apart: c[16 i + 0..2] = 7
  SimProg s({VecCallL0{VecApi::Duplicate, DTypeCode::f32, DTypeCode::f32, LocalRef{1, C(0)}, {}, {}, ir::float_imm(7.0),
                       RoundMode::None, C(3), C(4), C(1), C(0), C(0), C(2), C(0), C(0)}});
  auto r = s.run();
  ASSERT_TRUE(r.reports.empty()) << r.summary();
  std::vector<float> want(512, -1.f);
  for (int i = 0; i < 4; ++i)
    for (int e = 0; e < 3; ++e) want[16 * i + e] = 7.f;
  EXPECT_EQ(s.y, want);
}

TEST(SelectVectorCallsSim, WholeReduceAndBrcb) {
  SimProg s({WholeReduce{ReduceOp::Sum, DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, C(10), C(3), C(2), C(1), C(2)},
             WholeReduce{ReduceOp::Max, DTypeCode::f32, LocalRef{1, C(32)}, LocalRef{0, C(0)}, C(12), C(2), C(1), C(2), C(1)},
             Brcb{DTypeCode::f32, LocalRef{1, C(256)}, LocalRef{0, C(32)}, C(1), C(1), C(8)}});
  auto r = s.run();
  ASSERT_TRUE(r.reports.empty()) << r.summary();
  std::vector<float> want(512, -1.f);
  for (int i = 0; i < 3; ++i) {  // c[2 i] = sum a[16 i .. 16 i + 9]
    float sum = 0;
    for (int e = 0; e < 10; ++e) sum += s.x[16 * i + e];
    want[2 * i] = sum;
  }
  // c[8 + i] = max of a[8 i + 16 (e / 8) + e % 8], e < 12 (block stride 2)
  for (int i = 0; i < 2; ++i) want[8 + i] = s.x[8 * i + 16 + 3];
  for (int j = 0; j < 8; ++j)  // block j of c[64 ..] holds a[8 + j]
    for (int k = 0; k < 8; ++k) want[64 + 8 * j + k] = s.x[8 + j];
  EXPECT_EQ(s.y, want);
}

TEST(SelectVectorCallsSim, FloatWholeReduceMaxNeedsAnEightByteAlignedDestination) {
  SimProg s({WholeReduce{ReduceOp::Max, DTypeCode::f32, LocalRef{1, C(4)}, LocalRef{0, C(0)}, C(8), C(1), C(1), C(1), C(1)}}, 60);
  auto r = s.run();
  const sim::Report* rep = api_report(r, "WholeReduceMax on float writes its destination at byte 4 of its buffer");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_EQ(rep->instrs.at(0).span.line, 61);
  SimProg ok({WholeReduce{ReduceOp::Sum, DTypeCode::f32, LocalRef{1, C(4)}, LocalRef{0, C(0)}, C(8), C(1), C(1), C(1), C(1)}});
  auto r2 = ok.run();
  EXPECT_TRUE(r2.reports.empty()) << r2.summary();
}

TEST(SelectVectorCallsSim, RunTimeFieldOverflowIsAnApiRuleReport) {
  // field values computed at run time from the block index (0 on the one block)
  ir::Var bx = ir::var("bx");
  SimProg t({VecCallL0{VecApi::Abs, DTypeCode::f32, DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, {}, {},
                       RoundMode::None, C(8), C(1), C(1), C(1), C(0), ir::binary(BinOp::Add, bx, C(300)), C(1), C(0)}},
            50);
  t.p.block_idx = bx;
  auto r = t.run();
  const sim::Report* rep = api_report(r, "Abs (level-0) dstRepStride = 300: the field is uint8 (0..255)");
  ASSERT_NE(rep, nullptr) << r.summary();
  EXPECT_EQ(rep->instrs.at(0).span.line, 51);
  // a mask wider than one repeat and a level-2 count of 0
  SimProg m({VecCallL0{VecApi::Abs, DTypeCode::f32, DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, {}, {},
                       RoundMode::None, ir::binary(BinOp::Add, bx, C(65)), C(1), C(1), C(1), C(0), C(8), C(8), C(0)},
             VecCallL2{VecApi::Exp, DTypeCode::f32, DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, {}, {},
                       RoundMode::None, bx}});
  m.p.block_idx = bx;
  auto rm = m.run();
  EXPECT_NE(api_report(rm, "Abs (level-0) mask = 65: a level-0 mask selects 1..64 elements"), nullptr) << rm.summary();
  EXPECT_NE(api_report(rm, "Exp (level-2) with count 0"), nullptr) << rm.summary();
}

TEST(SelectVectorCallsSim, HighLevelKindsAreAnInternalError) {
  SimProg s({VecUnary{VecUnOp::Exp, DTypeCode::f32, Prog::op(1, C(64)), Prog::op(0, C(64)), C(1), C(64)}});
  try {
    s.run();
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("the simulator met the high-level vector instruction VecUnary: run select_vector_calls first"),
              std::string::npos)
        << e.message();
  }
}

// Gather (program.h): dst[e] = src element at byte srcBaseAddr + srcOffset[e]; offsets written
// here as int32 by Duplicate into c[512..] (bytes 2048..), the gather into c[0..].
InstrOp gather_offsets(int64_t bytes, int64_t n) {
  return VecCallL2{VecApi::Duplicate, DTypeCode::i32, DTypeCode::i32, LocalRef{1, C(2048)}, {}, {},
                   ir::int_imm(bytes, DTypeCode::i32), RoundMode::None, C(n)};
}

TEST(SelectVectorCallsSim, GatherReadsTheElementsAtItsByteOffsets) {
  SimProg s({gather_offsets(36, 8), PipeBarrier{Pipe::V},
             Gather{DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{1, C(2048)}, C(8), C(8), C(512)}});
  auto r = s.run();
  ASSERT_TRUE(r.reports.empty()) << r.summary();
  EXPECT_EQ(std::vector<float>(s.y.begin(), s.y.begin() + 8), std::vector<float>(8, 11.f));  // byte 8 + 36: element 11
}

TEST(SelectVectorCallsSim, GatherOutsideItsSourceIsReportedAtTheLine) {
  SimProg s({gather_offsets(64 * 4, 8), PipeBarrier{Pipe::V},
             Gather{DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{1, C(2048)}, C(0), C(8), C(64)}}, 40);
  auto r = s.run();
  ASSERT_FALSE(r.reports.empty());
  const sim::Report& rep = r.reports.at(0);
  EXPECT_EQ(rep.kind, sim::ReportKind::OutOfBounds) << r.summary();
  EXPECT_NE(rep.message.find("Gather srcOffset[0] = 256 (srcBaseAddr 0) addresses byte 256 of a source of 64 elements"),
            std::string::npos)
      << rep.message;
  EXPECT_EQ(rep.instrs.at(0).span.line, 41);
  SimProg odd({gather_offsets(6, 8), PipeBarrier{Pipe::V},
               Gather{DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{1, C(2048)}, C(0), C(8), C(64)}});
  auto r2 = odd.run();
  ASSERT_FALSE(r2.reports.empty());
  EXPECT_NE(r2.reports.at(0).message.find("not on an element"), std::string::npos) << r2.summary();
}

// srcBaseAddr is a uint32: a negative base (a hand-written or parsed Program) would address bytes
// before the source (before the UB for the first buffer: found by make sanitize's review). It is an
// invalid instruction, not executed.
TEST(SelectVectorCallsSim, GatherWithANegativeBaseIsInvalid) {
  SimProg s({gather_offsets(0, 8), PipeBarrier{Pipe::V},
             Gather{DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{1, C(2048)}, C(-4), C(8), C(64)}}, 70);
  auto r = s.run();
  ASSERT_FALSE(r.reports.empty());
  const sim::Report& rep = r.reports.at(0);
  EXPECT_EQ(rep.kind, sim::ReportKind::InvalidInstr) << r.summary();
  EXPECT_NE(rep.message.find("Gather srcBaseAddr -4 is negative (the field is uint32)"), std::string::npos) << rep.message;
  EXPECT_EQ(rep.instrs.at(0).span.line, 71);
  EXPECT_EQ(std::vector<float>(s.y.begin(), s.y.begin() + 8), std::vector<float>(8, -1.f));  // dst left as it was
}

TEST(SelectVectorCallsSim, GatherApiRules) {
  // the count form issues count / 64 repeats (float) as a uint8
  SimProg big({Gather{DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{1, C(2048)}, C(0), C(256 * 64), C(512)}});
  auto r = big.run();
  EXPECT_NE(api_report(r, "Gather count = 16384: the call issues count / 64 repeats as a uint8"), nullptr) << r.summary();
  // no 8-bit form; dst may not overlap src
  SimProg i8({Gather{DTypeCode::i8, LocalRef{1, C(0)}, LocalRef{0, C(0)}, LocalRef{1, C(2048)}, C(0), C(8), C(64)}});
  auto r8 = i8.run();
  ASSERT_FALSE(r8.reports.empty());
  EXPECT_NE(r8.reports.at(0).message.find("dav-c220 gathers int16/uint16/half/bfloat16/int32/uint32/float elements only"),
            std::string::npos)
      << r8.summary();
  SimProg same({gather_offsets(0, 8), PipeBarrier{Pipe::V},
                Gather{DTypeCode::f32, LocalRef{1, C(0)}, LocalRef{1, C(0)}, LocalRef{1, C(2048)}, C(0), C(8), C(64)}});
  auto rs = same.run();
  ASSERT_FALSE(rs.reports.empty());
  EXPECT_NE(rs.reports.at(0).message.find("Gather: dst overlaps src"), std::string::npos) << rs.summary();
}

}  // namespace
}  // namespace tw::ascend
