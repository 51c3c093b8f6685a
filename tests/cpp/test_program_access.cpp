// program_access: the byte footprint of each instruction kind (regions as text: operand, offset,
// start, rows x row bytes, stride), with tails (min counts), strided rows, symbolic extents, and
// evaluate()'s numbers (constants, upper bounds, no rows, one row, level-0 rows).
#include <gtest/gtest.h>

#include <string>

#include "ir/arith.h"
#include "ir/printer.h"
#include "target/ascend/program_access.h"

namespace tw::ascend {
namespace {

using ir::Expr;
Expr K(int64_t v) { return ir::int_imm(v); }

// Buffers: 0 l1 (L1), 1 l0a (L0A), 2 l0b (L0B), 3 l0c (L0C), 4 u (UB), 5 v (UB); params X, Y.
Program program() {
  Program p;
  auto buf = [&](const char* name, Mem m, CoreType c) {
    BufferDecl d;
    d.name = name, d.mem = m, d.core = c, d.bytes = 65536, d.dtype = ir::DTypeCode::f16;
    p.buffers.push_back(d);
  };
  buf("l1", Mem::L1, CoreType::AIC);
  buf("l0a", Mem::L0A, CoreType::AIC);
  buf("l0b", Mem::L0B, CoreType::AIC);
  buf("l0c", Mem::L0C, CoreType::AIC);
  buf("u", Mem::UB, CoreType::AIV);
  buf("v", Mem::UB, CoreType::AIV);
  p.params.push_back(KernelParam{"X", true, ir::DTypeCode::f16, {}, {}, false});
  p.params.push_back(KernelParam{"Y", true, ir::DTypeCode::f16, {}, {}, true});
  return p;
}

const Program& prog() {
  static const Program p = program();
  return p;
}

std::string ex(const Expr& e) { return e ? ir::print(e) : "-"; }

// One line per region: "R UB u +off @start rows x row_bytes /stride" (GM: the param or "ws";
// level-0: "rows x mask(es B) blk B").
std::string text(const InstrAccess& a) {
  std::string s = std::string(pipe_name(a.pipe)) + ":";
  for (const Region& r : a.regions) {
    s += r.mode == AccessMode::Read ? " | R " : " | W ";
    s += std::string(mem_name(r.mem)) + " ";
    s += r.mem == Mem::GM ? (r.param < 0 ? std::string("ws") : prog().params[r.param].name) : prog().buffers[r.buffer].name;
    s += " +" + ex(r.offset) + " @" + ex(r.start) + " " + ex(r.rows) + " x ";
    s += r.row_bytes ? ex(r.row_bytes) : "mask " + ex(r.mask) + " (" + std::to_string(r.elem_bytes) + " B) blk " + ex(r.blk);
    s += " /" + ex(r.stride);
  }
  return s;
}

std::string access(const InstrOp& op) { return text(program_access(prog(), op)); }

LocalRef at(int buffer, int64_t off = 0) { return LocalRef{buffer, K(off)}; }
VecOperand vop(int buffer, int64_t off, int64_t row_stride) { return VecOperand{at(buffer, off), K(row_stride)}; }

// Constant values only.
std::optional<int64_t> constant(const Expr& e) { return ir::as_const_int(e); }

TEST(ProgramAccess, CopyGmToL1WritesTheWholeNzTile) {
  ir::Var n = ir::var("n");
  // a tail: min(n, 40) rows of the 48 x 64 tile; GM rows 256 elements apart
  CopyGmToL1 c{GmRef{0, K(128)}, at(0), ir::DTypeCode::f16, ir::arith::min(n, K(40)), K(64), K(256), K(48), K(64)};
  EXPECT_EQ(access(c),
            "MTE2: | R GM X +128 @0 min(n, 40) x 128 /512 | W L1 l1 +0 @0 1 x 6144 /0");
  InstrAccess a = program_access(prog(), c);
  Extent src = evaluate(a.regions[0], constant);
  EXPECT_FALSE(src.rows);  // a tail: not a constant
  EXPECT_FALSE(src.bytes);
  Extent dst = evaluate(a.regions[1], constant);
  EXPECT_EQ(dst.bytes, 6144);  // 48 * 64 * 2: the tail's zero fill covers the whole tile
}

TEST(ProgramAccess, CopyGmToUbBurstsAreWrittenUpTo32Bytes) {
  // 8 rows of 100 bytes, GM rows 400 B apart, UB rows 128 B apart: each UB burst is 128 B
  CopyGmToUb c{GmRef{-1, K(0)}, at(4, 64), ir::DTypeCode::f32, K(8), K(100), K(400), K(128), true};
  EXPECT_EQ(access(c), "MTE2: | R GM ws +0 @0 8 x 100 /400 | W UB u +64 @0 8 x 128 /128");
  InstrAccess a = program_access(prog(), c);
  EXPECT_EQ(evaluate(a.regions[0], constant).bytes, 7 * 400 + 100);
  EXPECT_EQ(evaluate(a.regions[1], constant).bytes, 7 * 128 + 128);
  // a symbolic burst length keeps the rounding in the formula
  ir::Var len = ir::var("len");
  c.row_bytes = len;
  EXPECT_EQ(access(c), "MTE2: | R GM ws +0 @0 8 x len /400 | W UB u +64 @0 8 x ceildiv(len, 32) * 32 /128");
}

TEST(ProgramAccess, CopiesOutOfAndWithinUb) {
  CopyUbToGm o{at(4), GmRef{1, K(32)}, ir::DTypeCode::f16, K(4), K(64), K(96), K(1024)};
  EXPECT_EQ(access(o), "MTE3: | R UB u +0 @0 4 x 64 /96 | W GM Y +32 @0 4 x 64 /1024");
  CopyUbToUb u{at(4), at(5, 32), ir::DTypeCode::f16, K(2), K(64), K(128), K(256)};
  EXPECT_EQ(access(u), "V: | R UB u +0 @0 2 x 64 /128 | W UB v +32 @0 2 x 64 /256");
  EXPECT_EQ(evaluate(program_access(prog(), u).regions[1], constant).bytes, 256 + 64);
}

TEST(ProgramAccess, LoadL0ReadsTheWindowsStrips) {
  // L1 Nz with strip height 64 (fp16, C0 = 16); the window starts at row 16, column 32 and is
  // 32 x 48: 3 strips (48 / 16) of 32 rows * 32 B, 64 * 32 B apart, from (32/16 * 64 + 16) * 32
  LoadL0 a{at(0), at(1), ir::DTypeCode::f16, K(64), K(16), K(32), K(32), K(48), false};
  EXPECT_EQ(access(a), "MTE1: | R L1 l1 +0 @4608 3 x 1024 /2048 | W L0A l0a +0 @0 1 x 3072 /0");
  // into L0B the window is transposed (L1 holds B^T): dst K x N = 32 x 48 reads 48 rows x 32 cols
  LoadL0 b = a;
  b.dst = at(2);
  EXPECT_EQ(access(b), "MTE1: | R L1 l1 +0 @4608 2 x 1536 /2048 | W L0B l0b +0 @0 1 x 3072 /0");
  b.transpose = true;  // L1 holds B (K x N): the window is dst_rows x dst_cols again
  EXPECT_EQ(access(b), "MTE1: | R L1 l1 +0 @4608 3 x 1024 /2048 | W L0B l0b +0 @0 1 x 3072 /0");
}

TEST(ProgramAccess, MmadReadsCOnlyWhenItMayAccumulate) {
  ir::Var k = ir::var("k");
  // m = 20, n = 24, k = 40 (fp16): Mp = 32, Np = 32, Kp = 48
  Mmad m{at(1), at(2), at(3), ir::DTypeCode::f16, ir::DTypeCode::f32, K(20), K(24), K(40), ir::int_imm(1, ir::DTypeCode::boolean)};
  EXPECT_EQ(access(m), "M: | R L0A l0a +0 @0 1 x 3072 /0 | R L0B l0b +0 @0 1 x 3072 /0 | W L0C l0c +0 @0 1 x 4096 /0");
  m.init = ir::binary(ir::BinOp::EQ, k, K(0));  // accumulates when k != 0
  EXPECT_EQ(access(m), "M: | R L0A l0a +0 @0 1 x 3072 /0 | R L0B l0b +0 @0 1 x 3072 /0 | R L0C l0c +0 @0 1 x 4096 /0 "
                       "| W L0C l0c +0 @0 1 x 4096 /0");
}

TEST(ProgramAccess, FixpipeReadsTheStripAndWritesStridedGmRows) {
  ir::Var t = ir::var("t");
  Fixpipe f{at(3), GmRef{1, ir::arith::mul(t, K(2))}, ir::DTypeCode::f32, ir::DTypeCode::f16, K(30), K(20), K(32), K(512)};
  EXPECT_EQ(access(f), "FIX: | R L0C l0c +0 @0 1 x 4096 /0 | W GM Y +t * 2 @0 30 x 40 /1024");
}

TEST(ProgramAccess, VectorOperandsUseTheirOwnElementSize) {
  ir::Var r = ir::var("r");
  Expr rows = ir::arith::min(r, K(8));  // a row tail
  VecCast c{ir::DTypeCode::f16, ir::DTypeCode::f32, RoundMode::Rint, vop(5, 0, 64), vop(4, 0, 64), rows, K(48)};
  EXPECT_EQ(access(c), "V: | R UB u +0 @0 min(r, 8) x 192 /256 | W UB v +0 @0 min(r, 8) x 96 /128");
  // an upper bound of the tail's rows bounds the bytes written
  auto ub = [](const Expr& e) -> std::optional<int64_t> {
    if (auto v = ir::as_const_int(e)) return v;
    if (e->kind == ir::ExprKind::Binary && ir::as<ir::BinaryNode>(e)->op == ir::BinOp::Min)
      return ir::as_const_int(ir::as<ir::BinaryNode>(e)->b);
    return std::nullopt;
  };
  EXPECT_EQ(evaluate(program_access(prog(), c).regions[0], ub).bytes, 7 * 256 + 192);
  EXPECT_FALSE(evaluate(program_access(prog(), c).regions[0], constant).bytes);

  VecBinary b{VecBinOp::Add, ir::DTypeCode::f32, vop(4, 0, 16), vop(4, 0, 16), vop(5, 64, 32), K(4), K(16)};
  EXPECT_EQ(access(b), "V: | R UB u +0 @0 4 x 64 /64 | R UB v +64 @0 4 x 64 /128 | W UB u +0 @0 4 x 64 /64");
  VecBinaryScalar bs{VecBinOp::Mul, ir::DTypeCode::f16, vop(4, 0, 16), vop(5, 0, 16), K(2), K(1), K(16)};
  EXPECT_EQ(access(bs), "V: | R UB v +0 @0 1 x 32 /32 | W UB u +0 @0 1 x 32 /32");
  VecUnary u{VecUnOp::Exp, ir::DTypeCode::f32, vop(4, 0, 8), vop(5, 0, 8), K(2), K(8)};
  EXPECT_EQ(access(u), "V: | R UB v +0 @0 2 x 32 /32 | W UB u +0 @0 2 x 32 /32");
  VecDup d{ir::DTypeCode::f32, vop(4, 32, 8), K(0), K(3), K(8)};
  EXPECT_EQ(access(d), "V: | W UB u +32 @0 3 x 32 /32");
}

TEST(ProgramAccess, ReduceAndRowBroadcastTouchOneElementPerRowOrColumn) {
  VecReduce row{ReduceOp::Sum, ReduceAxis::Row, ir::DTypeCode::f32, vop(5, 0, 8), vop(4, 0, 16), K(6), K(16)};
  EXPECT_EQ(access(row), "V: | R UB u +0 @0 6 x 64 /64 | W UB v +0 @0 1 x 24 /0");
  VecReduce col = row;
  col.axis = ReduceAxis::Col;
  EXPECT_EQ(access(col), "V: | R UB u +0 @0 6 x 64 /64 | W UB v +0 @0 1 x 64 /0");
  VecRowBroadcast rb{VecBinOp::Sub, ir::DTypeCode::f32, vop(4, 0, 16), vop(4, 0, 16), at(5, 32), K(6), K(16)};
  EXPECT_EQ(access(rb), "V: | R UB u +0 @0 6 x 64 /64 | R UB v +32 @0 1 x 24 /0 | W UB u +0 @0 6 x 64 /64");
}

TEST(ProgramAccess, CallLevelVectorInstructions) {
  VecCallL2 l2;
  l2.api = VecApi::Cast, l2.dtype = ir::DTypeCode::f16, l2.src_dtype = ir::DTypeCode::f32;
  l2.dst = at(5), l2.src0 = at(4), l2.src1 = LocalRef{-1, K(0)}, l2.count = K(100);
  EXPECT_EQ(access(l2), "V: | R UB u +0 @0 1 x 400 /0 | W UB v +0 @0 1 x 200 /0");
  VecCallL0 l0;
  l0.api = VecApi::Add, l0.dtype = l0.src_dtype = ir::DTypeCode::f32;
  l0.dst = at(4), l0.src0 = at(5), l0.src1 = at(5, 32);
  l0.mask = K(64), l0.repeat = K(3);
  l0.dst_blk = K(1), l0.src0_blk = K(2), l0.src1_blk = K(0);
  l0.dst_rep = K(8), l0.src0_rep = K(16), l0.src1_rep = K(0);
  EXPECT_EQ(access(l0), "V: | R UB v +0 @0 3 x mask 64 (4 B) blk 2 /512 | R UB v +32 @0 3 x mask 64 (4 B) blk 0 /0 "
                        "| W UB u +0 @0 3 x mask 64 (4 B) blk 1 /256");
  InstrAccess a = program_access(prog(), l0);
  // 64 floats = 8 blocks: contiguous 256 B; 2 blocks apart: 7 * 64 + 32; stride 0: one block
  EXPECT_EQ(evaluate(a.regions[2], constant).row_bytes, 256);
  EXPECT_EQ(evaluate(a.regions[2], constant).bytes, 2 * 256 + 256);
  EXPECT_EQ(evaluate(a.regions[0], constant).row_bytes, 7 * 64 + 32);
  EXPECT_EQ(evaluate(a.regions[1], constant).row_bytes, 32);
  EXPECT_EQ(evaluate(a.regions[1], constant).bytes, 32);  // repeat stride 0: the rows coincide

  WholeReduce w{ReduceOp::Max, ir::DTypeCode::f16, at(5), at(4), K(128), K(4), K(1), K(1), K(8)};
  EXPECT_EQ(access(w), "V: | R UB u +0 @0 4 x mask 128 (2 B) blk 1 /256 | W UB v +0 @0 4 x 2 /2");
  Brcb br{ir::DTypeCode::f32, at(5), at(4), K(2), K(1), K(8)};
  EXPECT_EQ(access(br), "V: | R UB u +0 @0 1 x 64 /0 | W UB v +0 @0 2 x mask 256 (1 B) blk 1 /256");
}

TEST(ProgramAccess, FlagsTouchNothingAndKeepTheirPipe) {
  EXPECT_EQ(access(SetFlag{Pipe::MTE2, Pipe::V, K(0)}), "MTE2:");
  EXPECT_EQ(access(WaitFlag{Pipe::MTE2, Pipe::V, K(0)}), "V:");
  EXPECT_EQ(access(PipeBarrier{Pipe::ALL}), "ALL:");
  EXPECT_EQ(access(CrossCoreSetFlag{2, Pipe::FIX, K(1)}), "FIX:");
  EXPECT_EQ(access(CrossCoreWaitFlag{K(1), Pipe::MTE2}), "MTE2:");
}

TEST(ProgramAccess, CallLevelMovesAreAnInternalError) {
  DataCopyUbToUb c{at(4), at(5), ir::DTypeCode::f16, K(1), K(1), K(0), K(0)};
  try {
    program_access(prog(), c);
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(std::string(e.what()).find("call-level move DataCopyUbToUb"), std::string::npos) << e.what();
  }
}

TEST(ProgramAccess, EvaluateNoRowsOneRowAndUnknowns) {
  Region r;
  r.start = K(0), r.rows = K(0), r.row_bytes = nullptr, r.stride = nullptr;
  EXPECT_FALSE(evaluate(r, constant).bytes);  // the row is not known
  r.row_bytes = K(96);
  EXPECT_EQ(evaluate(r, constant).bytes, 96);  // no rows count as one
  r.rows = K(1), r.stride = ir::var("s");
  EXPECT_EQ(evaluate(r, constant).bytes, 96);  // one row: its stride does not matter
  r.rows = K(3);
  EXPECT_FALSE(evaluate(r, constant).bytes);  // several rows need the stride
  r.stride = K(128);
  EXPECT_EQ(evaluate(r, constant).bytes, 2 * 128 + 96);
  r.rows = ir::var("n");
  EXPECT_FALSE(evaluate(r, constant).bytes);
}

}  // namespace
}  // namespace tw::ascend
