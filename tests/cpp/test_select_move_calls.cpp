// Tests of select_move_calls (byte-level moves -> the AscendC calls they print as) and of the
// simulator's execution of those calls' fields. Programs are built directly in C++.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "target/ascend/program_parser.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/select_move_calls.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

using ir::DTypeCode;
using ir::Expr;

Expr C(int64_t v) { return ir::int_imm(v); }
ir::Span L(int line) {
  ir::Span s;
  s.file = "k.py";
  s.line = line;
  s.col = 3;
  return s;
}
const target::Target& b2() { return target::find_target("ascend910b2"); }

// A program with one tensor X (f16 64 x N or as given) and a few buffers of each memory.
struct Rig {
  Program p;
  ir::Var n = ir::var("n");
  int l1, l1f, l0a, l0b, l0bf, l0c, ub, ub2;
  explicit Rig(KernelType t = KernelType::MIX_1_2, DTypeCode x_dt = DTypeCode::f32) {
    p.name = "k";
    p.kernel_type = t;
    p.block_idx = ir::var("b");
    p.sub_block_idx = ir::var("v");
    p.block_dim = C(1);
    p.workspace_bytes = C(0);
    p.span = L(1);
    KernelParam x;
    x.name = "X", x.dtype = x_dt, x.shape = {C(64), C(64)};
    p.params.push_back(x);
    l1 = buf("l1", CoreType::AIC, Mem::L1, 0, 8192, DTypeCode::f16);
    l1f = buf("l1f", CoreType::AIC, Mem::L1, 8192, 16384, DTypeCode::f32);
    l0a = buf("l0a", CoreType::AIC, Mem::L0A, 0, 8192, DTypeCode::f16);
    l0b = buf("l0b", CoreType::AIC, Mem::L0B, 0, 8192, DTypeCode::f16);
    l0bf = buf("l0bf", CoreType::AIC, Mem::L0B, 8192, 16384, DTypeCode::f32);
    l0c = buf("l0c", CoreType::AIC, Mem::L0C, 0, 16384, DTypeCode::f32);
    ub = buf("ub", CoreType::AIV, Mem::UB, 0, 16384, DTypeCode::f32);
    ub2 = buf("ub2", CoreType::AIV, Mem::UB, 16384, 16384, DTypeCode::f32);
  }
  int buf(const char* name, CoreType c, Mem m, int64_t off, int64_t bytes, DTypeCode dt) {
    BufferDecl b;
    b.name = name, b.core = c, b.mem = m, b.offset = off, b.bytes = bytes, b.dtype = dt, b.span = L(1);
    p.buffers.push_back(b);
    return static_cast<int>(p.buffers.size() - 1);
  }
  LocalRef at(int b, int64_t off = 0) const { return LocalRef{b, C(off)}; }
  GmRef x(int64_t off = 0) const { return GmRef{0, C(off)}; }
  // One instruction on the AIC (Cube moves) or the AIV (UB moves), at line `line`.
  Program with(InstrOp op, int line, std::vector<StmtPtr> before = {}) const {
    Program q = p;
    bool aiv = pipe_of(op) == Pipe::V || pipe_of(op) == Pipe::MTE3 ||
               std::holds_alternative<CopyGmToUb>(op) || std::holds_alternative<DataCopyPadGmToUb>(op);
    before.push_back(instr(std::move(op), L(line)));
    (aiv ? q.aiv : q.aic) = seq(std::move(before));
    return q;
  }
};

// The statements of a program as print_program prints them.
std::string code(const Program& p) {
  std::string s = print_program(p);
  size_t at = s.find("\nAIC:\n");
  if (at == std::string::npos) at = s.find("\nAIV:\n");
  return s.substr(at + 1);
}

// before -> select_move_calls -> after, both as printed.
void expect_calls(const Program& before, const std::string& before_text, const std::string& after_text) {
  EXPECT_EQ(code(before), before_text);
  EXPECT_EQ(code(select_move_calls(before, b2())), after_text);
}

// select_move_calls(p) throws an ir::Error at `line` whose message contains `text`.
void expect_error(const Program& p, int line, const std::string& text) {
  try {
    select_move_calls(p, b2());
    ADD_FAILURE() << "expected an error containing: " << text;
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find(text), std::string::npos) << e.message();
    EXPECT_EQ(e.span().line, line);
  }
}

// --- selection ---------------------------------------------------------------------------------

TEST(SelectMoveCalls, FullTileHasNoFill) {
  Rig r;
  expect_calls(r.with(CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::f16, C(64), C(64), C(64), C(64), C(64)}, 5),
               "AIC:\n  MTE2 CopyGmToL1 l1[0] <- X[0] float16 rows=64 cols=64 src_row_stride=64 nz=64x64  @5\n",
               "AIC:\n  MTE2 DataCopyNd2Nz l1[0] <- X[0] float16 ndNum=1 nValue=64 dValue=64 srcNdMatrixStride=0 "
               "srcDValue=64 dstNzC0Stride=64 dstNzNStride=1 dstNzMatrixStride=0  @5\n");
}

TEST(SelectMoveCalls, TailsAreZeroedWithInitConstValueAndABarrier) {
  Rig r;
  // a symbolic row count: the fill is guarded by `rows < dst_rows`
  expect_calls(r.with(CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::f16, r.n, C(48), C(64), C(64), C(64)}, 6),
               "AIC:\n  MTE2 CopyGmToL1 l1[0] <- X[0] float16 rows=n cols=48 src_row_stride=64 nz=64x64  @6\n",
               "AIC:\n  if n < 64 or 48 < 64:\n"
               "    MTE2 InitConstValue l1[0] float16 repeatTimes=1 blockNum=64 * 64 * 2 // 32 dstGap=0 initValue=0  @6\n"
               "    MTE2 PipeBarrier<MTE2>  @6\n"
               "  MTE2 DataCopyNd2Nz l1[0] <- X[0] float16 ndNum=1 nValue=n dValue=48 srcNdMatrixStride=0 srcDValue=64 "
               "dstNzC0Stride=64 dstNzNStride=1 dstNzMatrixStride=0  @6\n");
}

// A window of 16 rows (a page) inside a 64-row Nz tile: its tail zeroing covers those rows of each
// of the 4 C0 strips (repeatTimes = strips, blockNum = window rows, dstGap = the other rows) and
// is guarded by rows < window rows; Nd2Nz keeps the tile's strip stride.
TEST(SelectMoveCalls, RowWindowTailZeroesItsRowsOfEachStrip) {
  Rig r;
  expect_calls(r.with(CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::f16, r.n, C(64), C(64), C(64), C(64), DTypeCode::f16, C(16)}, 8),
               "AIC:\n  MTE2 CopyGmToL1 l1[0] <- X[0] float16 rows=n cols=64 src_row_stride=64 window_rows=16 nz=64x64  @8\n",
               "AIC:\n  if n < 16:\n"
               "    MTE2 InitConstValue l1[0] float16 repeatTimes=64 * 2 // 32 blockNum=16 dstGap=64 - 16 initValue=0  @8\n"
               "    MTE2 PipeBarrier<MTE2>  @8\n"
               "  MTE2 DataCopyNd2Nz l1[0] <- X[0] float16 ndNum=1 nValue=n dValue=64 srcNdMatrixStride=0 srcDValue=64 "
               "dstNzC0Stride=64 dstNzNStride=1 dstNzMatrixStride=0  @8\n");
}

// A window that starts before row 0 of its tensor (skip_rows rows of it): the zero fill covers
// the whole tile from its origin, the Nd2Nz writes skip_rows Nz rows (32 B each) further in.
TEST(SelectMoveCalls, SkippedRowsLandFurtherIntoEachStrip) {
  Rig r;
  ir::Var s = ir::var("s");
  std::string after = code(select_move_calls(
      r.with(CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::f16, r.n, C(64), C(64), C(64), C(64), DTypeCode::f16, nullptr, s},
             7),
      b2()));
  EXPECT_NE(after.find("if n < 64:\n    MTE2 InitConstValue l1[0] float16"), std::string::npos) << after;
  EXPECT_NE(after.find("DataCopyNd2Nz l1[s * 32] <- X[0] float16 ndNum=1 nValue=n"), std::string::npos) << after;
}

// A window that starts before column 0 of its tensor (skip_cols columns, a multiple of C0; session
// 17): the zero fill covers the whole tile, the Nd2Nz writes skip_cols / C0 strips (dst_rows x 32 B
// each) further in; the program text carries the field and parses back.
TEST(SelectMoveCalls, SkippedColumnsLandWholeStripsFurtherIn) {
  Rig r;
  ir::Var s = ir::var("s");
  Program p = r.with(CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::f16, C(64), r.n, C(64), C(64), C(64), DTypeCode::f16,
                                nullptr, nullptr, s},
                     7);
  std::string after = code(select_move_calls(p, b2()));
  EXPECT_NE(after.find("if n < 64:\n    MTE2 InitConstValue l1[0] float16"), std::string::npos) << after;
  EXPECT_NE(after.find("DataCopyNd2Nz l1[s * 2 * 64] <- X[0] float16 ndNum=1 nValue=64 dValue=n"), std::string::npos)
      << after;
  std::string text = print_program(p);
  EXPECT_NE(text.find(" skip_cols=s nz=64x64"), std::string::npos) << text;
  // (constants: the rig's variables are not declared in the program text)
  std::string fixed = print_program(r.with(
      CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::f16, C(64), C(40), C(64), C(64), C(64), DTypeCode::f16, nullptr, nullptr,
                 C(16)},
      7));
  EXPECT_NE(fixed.find(" skip_cols=16 nz=64x64"), std::string::npos) << fixed;
  EXPECT_EQ(print_program(parse_program(fixed, "k.prog")), fixed);
}

// A window that starts before column 0 (GM -> UB): leftPadding places the data `left` elements
// into the 32 B block the destination points at; rightPadding and the UB gap count them.
TEST(SelectMoveCalls, LeftPaddingShiftsTheColumnsOfEachBurst) {
  Rig r;
  ir::Var left = ir::var("left");
  std::string after = code(select_move_calls(
      r.with(CopyGmToUb{r.x(), r.at(r.ub), DTypeCode::f32, C(4), C(20), C(256), C(64), true, left}, 9), b2()));
  EXPECT_NE(after.find("isPad leftPadding=left rightPadding=(ceildiv(left * 4 + 20, 32) * 32 - (left * 4 + 20)) // 4"),
            std::string::npos)
      << after;
  EXPECT_NE(after.find("dstStride=(64 - ceildiv(left * 4 + 20, 32) * 32) // 32"), std::string::npos) << after;
  // the program text carries it (printed only when set)
  std::string before = print_program(r.with(CopyGmToUb{r.x(), r.at(r.ub), DTypeCode::f32, C(1), C(20), C(256), C(64), true,
                                                       C(3)}, 9));
  EXPECT_NE(before.find("pad left=3"), std::string::npos) << before;
}

TEST(SelectMoveCalls, ConstantPartialTileIsZeroedUnguarded) {
  Rig r;
  std::string after = code(select_move_calls(
      r.with(CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::f16, C(20), C(64), C(64), C(32), C(64)}, 7), b2()));
  EXPECT_EQ(after.find("if "), std::string::npos) << after;
  EXPECT_NE(after.find("InitConstValue l1[0] float16 repeatTimes=1"), std::string::npos) << after;
  EXPECT_NE(after.find("PipeBarrier<MTE2>"), std::string::npos) << after;
}

TEST(SelectMoveCalls, SymbolicRowCountIsGuarded) {
  Rig r;
  expect_calls(r.with(CopyUbToGm{r.at(r.ub), r.x(), DTypeCode::f32, r.n, C(256), C(256), C(256)}, 8),
               "AIV:\n  MTE3 CopyUbToGm X[0] <- ub[0] float32 n_rows=n row_bytes=256 src_stride=256 dst_stride=256  @8\n",
               "AIV:\n  if n > 0:\n    MTE3 DataCopyPad X[0] <- ub[0] float32 blockCount=n blockLen=256 "
               "srcStride=(256 - ceildiv(256, 32) * 32) // 32 dstStride=256 - 256  @8\n");
}

// An empty count (docs/ascend.md "Empty counts"): Fixpipe's mSize / nSize are 1.. in CANN 8.5, so
// sizes that are not positive constants issue the call under `if (m > 0 and n > 0)`; DataCopyPad's
// blockLen and Nd2Nz's nValue / dValue take 0 (a NOP), so a run-time column count is not guarded.
TEST(SelectMoveCalls, RunTimeFixpipeSizesAreGuardedColumnCountsAreNot) {
  Rig r;
  expect_calls(r.with(Fixpipe{r.at(r.l0c), r.x(), DTypeCode::f32, DTypeCode::f32, r.n, C(48), C(32), C(64)}, 9),
               "AIC:\n  FIX Fixpipe X[0] <- l0c[0] float32->float32 m=n n=48 src_rows=32 dst_row_stride=64  @9\n",
               "AIC:\n  if n > 0:\n    FIX FixpipeV220 X[0] <- l0c[0] float32->float32 nSize=48 mSize=n srcStride=32 "
               "dstStride=64 quantPre=NoQuant ndNum=1  @9\n");
  std::string both = code(select_move_calls(
      r.with(Fixpipe{r.at(r.l0c), r.x(), DTypeCode::f32, DTypeCode::f32, r.n, r.n, C(32), C(64)}, 9), b2()));
  EXPECT_NE(both.find("if n > 0 and n > 0:"), std::string::npos) << both;
  std::string cols = code(select_move_calls(r.with(CopyUbToGm{r.at(r.ub), r.x(), DTypeCode::f32, C(2), r.n, C(256), C(256)}, 10), b2()));
  EXPECT_EQ(cols.find("if "), std::string::npos) << cols;
}

TEST(SelectMoveCalls, GmGapsAreBytesUbGapsAre32BBlocks) {
  Rig r;
  // 4 rows of 24 B: 40 B apart in GM (gap 16 B), 64 B apart in UB (the row rounds to 32 B, gap 1 block)
  CopyGmToUb in{r.x(), r.at(r.ub), DTypeCode::f32, C(4), C(24), C(40), C(64)};
  in.pad = true;
  expect_calls(r.with(in, 9),
               "AIV:\n  MTE2 CopyGmToUb ub[0] <- X[0] float32 n_rows=4 row_bytes=24 src_stride=40 dst_stride=64 pad  @9\n",
               "AIV:\n  MTE2 DataCopyPad ub[0] <- X[0] float32 blockCount=4 blockLen=24 srcStride=40 - 24 "
               "dstStride=(64 - 32) // 32 isPad leftPadding=0 rightPadding=(32 - 24) // 4 paddingValue=0  @9\n");
  expect_calls(r.with(CopyUbToGm{r.at(r.ub), r.x(), DTypeCode::f32, C(4), C(24), C(64), C(40)}, 10),
               "AIV:\n  MTE3 CopyUbToGm X[0] <- ub[0] float32 n_rows=4 row_bytes=24 src_stride=64 dst_stride=40  @10\n",
               "AIV:\n  MTE3 DataCopyPad X[0] <- ub[0] float32 blockCount=4 blockLen=24 "
               "srcStride=(64 - 32) // 32 dstStride=40 - 24  @10\n");
}

TEST(SelectMoveCalls, UbToUbIsInBlocksAndASingleRowHasNoGap) {
  Rig r;
  // rows of 64 B, 128 B apart in the source and 96 B in the destination: gaps of 2 and 1 blocks
  expect_calls(r.with(CopyUbToUb{r.at(r.ub), r.at(r.ub2), DTypeCode::f32, C(4), C(64), C(128), C(96)}, 11),
               "AIV:\n  V CopyUbToUb ub2[0] <- ub[0] float32 n_rows=4 row_bytes=64 src_stride=128 dst_stride=96  @11\n",
               "AIV:\n  V DataCopy ub2[0] <- ub[0] float32 blockCount=4 blockLen=64 // 32 srcStride=(128 - 64) // 32 "
               "dstStride=(96 - 64) // 32  @11\n");
  // one row: its strides are not used, the gaps are 0 (even with a stride shorter than the row)
  std::string one = code(select_move_calls(
      r.with(CopyUbToUb{r.at(r.ub), r.at(r.ub2), DTypeCode::f32, C(1), C(64), C(32), C(32)}, 12), b2()));
  EXPECT_NE(one.find("blockCount=1 blockLen=64 // 32 srcStride=0 dstStride=0"), std::string::npos) << one;
}

TEST(SelectMoveCalls, LoadL0IsALoopOfLoadData2DOverFractalRows) {
  Rig r;
  // 64 x 64 fp16 into L0A (Zz): 4 fractal rows of 4 fractals; source fractals 4 apart (strip of 64 rows)
  expect_calls(r.with(LoadL0{r.at(r.l1), r.at(r.l0a), DTypeCode::f16, C(64), C(0), C(0), C(64), C(64), false}, 13),
               "AIC:\n  MTE1 LoadL0 l0a[0] <- l1[0] float16 src_rows=64 window=(0, 0) dst=64x64  @13\n",
               "AIC:\n  for tw_i in range(64 // 16):\n"
               "    MTE1 LoadData2D l0a[tw_i * (64 // 16) * 512] <- l1[tw_i * 512] "
               "float16 startIndex=0 repeatTimes=64 // 16 srcStride=64 // 16 sid=0 dstGap=0  @13\n");
  // the transposing 16-bit load into L0B: source fractals one strip apart, each transposed
  std::string t = code(select_move_calls(
      r.with(LoadL0{r.at(r.l1), r.at(r.l0b), DTypeCode::f16, C(64), C(0), C(0), C(64), C(64), true}, 14), b2()));
  EXPECT_NE(t.find("srcStride=64 // 16 sid=0 dstGap=0 ifTranspose  @14"), std::string::npos) << t;
}

// The fewest LoadData2D calls the layouts allow: one per destination fractal column when there
// are fewer columns than rows, one call when the source runs through the destination in order.
TEST(SelectMoveCalls, LoadL0IssuesTheFewestLoadData2DCalls) {
  Rig r;
  // 64 x 32 fp16 into L0A (4 fractal rows of 2): 2 calls of 4 fractals (source fractals 1 apart,
  // destination fractals 2 apart: dstGap 1)
  expect_calls(r.with(LoadL0{r.at(r.l1), r.at(r.l0a), DTypeCode::f16, C(64), C(0), C(0), C(64), C(32), false}, 13),
               "AIC:\n  MTE1 LoadL0 l0a[0] <- l1[0] float16 src_rows=64 window=(0, 0) dst=64x32  @13\n",
               "AIC:\n  for tw_i in range(32 // 16):\n"
               "    MTE1 LoadData2D l0a[tw_i * 512] <- l1[tw_i * (64 // 16) * 512] "
               "float16 startIndex=0 repeatTimes=64 // 16 srcStride=1 sid=0 dstGap=1  @13\n");
  // one fractal row (16 x 64): one call of 4 fractals, one strip (64 // 16 = 4 fractals) apart
  expect_calls(r.with(LoadL0{r.at(r.l1), r.at(r.l0a), DTypeCode::f16, C(64), C(16), C(0), C(16), C(64), false}, 14),
               "AIC:\n  MTE1 LoadL0 l0a[0] <- l1[0] float16 src_rows=64 window=(16, 0) dst=16x64  @14\n",
               "AIC:\n  MTE1 LoadData2D l0a[0] <- l1[512] float16 startIndex=0 repeatTimes=4 srcStride=4 sid=0 "
               "dstGap=0  @14\n");
  // 300 fractals in one run: a call of 255 and one of 45 (repeatTimes is uint8)
  expect_calls(r.with(LoadL0{r.at(r.l1), r.at(r.l0a), DTypeCode::f16, C(16), C(0), C(0), C(16), C(16 * 300), false}, 15),
               "AIC:\n  MTE1 LoadL0 l0a[0] <- l1[0] float16 src_rows=16 window=(0, 0) dst=16x4800  @15\n",
               "AIC:\n  MTE1 LoadData2D l0a[0] <- l1[0] float16 startIndex=0 repeatTimes=255 srcStride=1 sid=0 dstGap=0  @15\n"
               "  MTE1 LoadData2D l0a[255 * 512] <- l1[255 * 512] float16 startIndex=0 repeatTimes=45 srcStride=1 sid=0 "
               "dstGap=0  @15\n");
}

TEST(SelectMoveCalls, ThirtyTwoBitTransposingLoadIsLoadData3DV2) {
  Rig r;
  expect_calls(r.with(LoadL0{r.at(r.l1f), r.at(r.l0bf), DTypeCode::f32, C(64), C(16), C(8), C(32), C(48), true}, 15),
               "AIC:\n  MTE1 LoadL0 l0bf[0] <- l1f[0] float32 src_rows=64 window=(16, 8) dst=32x48 transpose  @15\n",
               "AIC:\n  MTE1 LoadData3DV2 l0bf[0] <- l1f[0] float32 l1H=64 l1W=1 channelSize=8 + 48 kExtension=48 "
               "mExtension=32 kStartPt=8 mStartPt=16  @15\n");
  // 32-bit transposes exist only into L0B; 8-bit ones not at all
  expect_error(r.with(LoadL0{r.at(r.l1f), r.at(r.l0a), DTypeCode::f32, C(64), C(0), C(0), C(16), C(16), true}, 16), 16,
               "LoadL0 with transpose needs a 16-bit type");
}

TEST(SelectMoveCalls, FixpipeQuantPreFollowsTheDtypePair) {
  struct Case { DTypeCode src, dst; const char* quant; };
  for (Case c : {Case{DTypeCode::f32, DTypeCode::f16, "F322F16"}, Case{DTypeCode::f32, DTypeCode::bf16, "F322BF16"},
                 Case{DTypeCode::f32, DTypeCode::f32, "NoQuant"}, Case{DTypeCode::i32, DTypeCode::i32, "NoQuant"}}) {
    Rig r(KernelType::MIX_1_2, c.dst);
    Program p = r.with(Fixpipe{r.at(r.l0c), r.x(), c.src, c.dst, C(20), C(48), C(32), C(64), true}, 17);
    std::string want = "AIC:\n  FIX FixpipeV220 X[0] <- l0c[0] " + std::string(ir::DType(c.src).name()) + "->" +
                       std::string(ir::DType(c.dst).name()) + " nSize=48 mSize=20 srcStride=32 dstStride=64 quantPre=" +
                       c.quant + " reluEn ndNum=1  @17\n";
    EXPECT_EQ(code(select_move_calls(p, b2())), want);
  }
  Rig r(KernelType::MIX_1_2, DTypeCode::i8);
  expect_error(r.with(Fixpipe{r.at(r.l0c), r.x(), DTypeCode::f32, DTypeCode::i8, C(16), C(16), C(16), C(16), false}, 18),
               18, "Fixpipe from float32 to int8 has no quantPre mode");
}

TEST(SelectMoveCalls, ConstantFieldOverflowIsAnErrorAtTheLine) {
  Rig r;
  expect_error(r.with(CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::f16, C(16), C(64), C(70000), C(16), C(64)}, 20), 20,
               "Nd2NzParams.srcDValue = 70000 (elements) is outside 0..65535");
  expect_error(r.with(CopyUbToUb{r.at(r.ub), r.at(r.ub2), DTypeCode::f32, C(2), C(32) , C(32 * 70000), C(32)}, 22), 22,
               "DataCopyParams.srcStride = 69999 (32 B blocks) is outside 0..65535");
  expect_error(r.with(LoadL0{r.at(r.l1), r.at(r.l0a), DTypeCode::f16, C(4096), C(0), C(0), C(4096), C(16 * 256), false}, 23),
               23, "LoadData2DParams.repeatTimes = 256 (fractals per fractal row) is outside 0..255");
  expect_error(r.with(CopyUbToGm{r.at(r.ub), r.x(), DTypeCode::f32, C(4), C(64), C(32), C(64)}, 24), 24,
               "negative gap between rows");
  // an 8-bit fill: dav-c220 has no 8-bit InitConstValue
  expect_error(r.with(CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::i8, C(20), C(64), C(64), C(32), C(64), DTypeCode::i8}, 25),
               25, "no 8-bit InitConstValue");
}

// More than 4095 rows (a constant count; blockCount is 0..4095): calls of at most 4095 rows, each
// starting 4095 strides further on both sides (hunt13 F2).
TEST(SelectMoveCalls, MoreThan4095RowsAreSeveralCalls) {
  Rig r;
  std::string c = code(select_move_calls(r.with(CopyGmToUb{r.x(), r.at(r.ub), DTypeCode::f32, C(8191), C(4), C(4), C(32)}, 21), b2()));
  EXPECT_NE(c.find("DataCopyPad ub[0] <- X[0] float32 blockCount=4095 "), std::string::npos) << c;
  EXPECT_NE(c.find("DataCopyPad ub[4095 * 32] <- X[4095 * 4] float32 blockCount=4095 "), std::string::npos) << c;
  EXPECT_NE(c.find("DataCopyPad ub[8190 * 32] <- X[8190 * 4] float32 blockCount=1 "), std::string::npos) << c;
  c = code(select_move_calls(r.with(CopyUbToGm{r.at(r.ub), r.x(), DTypeCode::f32, C(4096), C(4), C(32), C(4)}, 22), b2()));
  EXPECT_NE(c.find("DataCopyPad X[4095 * 4] <- ub[4095 * 32] float32 blockCount=1 "), std::string::npos) << c;
  c = code(select_move_calls(r.with(CopyUbToUb{r.at(r.ub), r.at(r.ub2), DTypeCode::f32, C(4096), C(32), C(32), C(32)}, 23), b2()));
  EXPECT_NE(c.find("DataCopy ub2[4095 * 32] <- ub[4095 * 32] float32 blockCount=1 "), std::string::npos) << c;
}

// A run-time count (a tail's min(4097, M - r0)) whose UB tile holds more than 4095 rows: calls of
// min(n - 4095 i, 4095) rows, each guarded (a call with no rows is not issued) (hunt14 F1). A
// count whose tile holds at most 4095 rows stays one call.
TEST(SelectMoveCalls, RunTimeCountsOfMoreThan4095RowsAreSeveralGuardedCalls) {
  Rig r;
  r.p.buffers[r.ub].bytes = 4097 * 32;
  std::string c = code(select_move_calls(r.with(CopyGmToUb{r.x(), r.at(r.ub), DTypeCode::f32, r.n, C(12), C(12), C(32)}, 24), b2()));
  EXPECT_NE(c.find("if min(n, 4095) > 0:"), std::string::npos) << c;
  EXPECT_NE(c.find("DataCopyPad ub[0] <- X[0] float32 blockCount=min(n, 4095) "), std::string::npos) << c;
  EXPECT_NE(c.find("if min(n - 4095, 4095) > 0:"), std::string::npos) << c;
  EXPECT_NE(c.find("DataCopyPad ub[4095 * 32] <- X[4095 * 12] float32 blockCount=min(n - 4095, 4095) "), std::string::npos) << c;
  EXPECT_EQ(c.find("8190"), std::string::npos) << c;  // 4097 rows: two calls
  c = code(select_move_calls(r.with(CopyUbToGm{r.at(r.ub), r.x(), DTypeCode::f32, r.n, C(12), C(32), C(12)}, 25), b2()));
  EXPECT_NE(c.find("DataCopyPad X[4095 * 12] <- ub[4095 * 32] float32 blockCount=min(n - 4095, 4095) "), std::string::npos) << c;
  Rig small;  // 16384 B of 32 B rows: 512 rows, one call
  c = code(select_move_calls(small.with(CopyGmToUb{small.x(), small.at(small.ub), DTypeCode::f32, small.n, C(12), C(12), C(32)}, 26), b2()));
  EXPECT_EQ(c.find("4095"), std::string::npos) << c;
}

TEST(SelectMoveCalls, EveryByteLevelMoveIsReplaced) {
  Rig r;
  Program p = r.p;
  p.aic = seq({instr(CopyGmToL1{r.x(), r.at(r.l1), DTypeCode::f16, r.n, C(64), C(64), C(64), C(64)}, L(2)),
               instr(LoadL0{r.at(r.l1), r.at(r.l0a), DTypeCode::f16, C(64), C(0), C(0), C(64), C(64), false}, L(3)),
               instr(Fixpipe{r.at(r.l0c), r.x(), DTypeCode::f32, DTypeCode::f32, C(16), C(16), C(16), C(64), false}, L(4))});
  p.aiv = seq({instr(CopyGmToUb{r.x(), r.at(r.ub), DTypeCode::f32, r.n, C(64), C(64), C(64)}, L(5)),
               instr(CopyUbToUb{r.at(r.ub), r.at(r.ub2), DTypeCode::f32, r.n, C(64), C(64), C(64)}, L(6)),
               instr(CopyUbToGm{r.at(r.ub2), r.x(), DTypeCode::f32, r.n, C(64), C(64), C(64)}, L(7))});
  Program q = select_move_calls(p, b2());
  int byte_level = 0;
  std::function<void(const StmtPtr&)> walk = [&](const StmtPtr& s) {
    if (!s) return;
    if (s->kind == StmtKind::Instr && is_byte_level_move(s->instr.op)) ++byte_level;
    for (const auto& b : s->body) walk(b);
    walk(s->else_body);
  };
  walk(q.aic);
  walk(q.aiv);
  EXPECT_EQ(byte_level, 0) << print_program(q);
  // and the simulator refuses a byte-level move
  std::vector<float> x(64 * 64);
  try {
    sim::run(p, b2().ascend, {sim::Arg{reinterpret_cast<uint8_t*>(x.data()), static_cast<int64_t>(x.size() * 4)}});
    ADD_FAILURE() << "the simulator must refuse byte-level moves";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("run select_move_calls first"), std::string::npos) << e.message();
  }
}

// --- the simulator executes the fields ---------------------------------------------------------

sim::Arg arg(std::vector<float>& v) { return sim::Arg{reinterpret_cast<uint8_t*>(v.data()), static_cast<int64_t>(v.size() * 4)}; }

const sim::Report* find(const sim::Result& r, sim::ReportKind k, const std::string& text = "") {
  for (const auto& x : r.reports)
    if (x.kind == k && x.message.find(text) != std::string::npos) return &x;
  return nullptr;
}

// GM -> UB with paddings, then UB -> GM of the padded rows: the GM gaps are bytes, the UB gaps 32 B
// blocks, leftPadding / rightPadding elements of paddingValue surround each burst.
TEST(SimulateMoveCalls, DataCopyPadFieldsAsDocumented) {
  Rig r(KernelType::AIV_ONLY);
  KernelParam y;
  y.name = "Y", y.dtype = DTypeCode::f32, y.shape = {C(8)}, y.is_output = true;
  r.p.params.push_back(y);
  DataCopyPadGmToUb in{GmRef{0, C(0)}, r.at(r.ub), DTypeCode::f32, C(2), C(8), C(4), C(1), true, C(1), C(1), C(7)};
  DataCopyPadUbToGm out{r.at(r.ub), GmRef{1, C(0)}, DTypeCode::f32, C(2), C(16), C(1), C(0)};
  r.p.aiv = seq({instr(in, L(30)), instr(SetFlag{Pipe::MTE2, Pipe::MTE3, C(0)}, L(30)),
                 instr(WaitFlag{Pipe::MTE2, Pipe::MTE3, C(0)}, L(31)), instr(out, L(31))});
  std::vector<float> x(64 * 64), yv(8, -1.f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  sim::Options o;
  o.check = true;
  auto res = sim::run(r.p, b2().ascend, {arg(x), arg(yv)}, {}, o);
  EXPECT_TRUE(res.reports.empty()) << res.summary();
  // burst 0 reads X[0..1], burst 1 starts 8 + 4 bytes later: X[3..4]; UB bursts 32 + 32 B apart
  EXPECT_EQ(yv, (std::vector<float>{7, 0, 1, 7, 7, 3, 4, 7}));
}

// Empty counts as documented (docs/ascend.md "Empty counts"): DataCopyPad with blockLen 0 (the
// CANN 8.5 library's range 0..2097151; the 2026 docs: a NOP on A2/A3) and Nd2Nz with nValue or
// dValue 0 (0 in the documented ranges) do nothing and report nothing; Fixpipe with mSize or nSize 0
// (1.. in CANN 8.5) is an API rule report at the call's line.
TEST(SimulateMoveCalls, EmptyCountsAsDocumented) {
  sim::Options o;
  o.check = true;
  auto z = ir::var("z");
  {
    Rig r(KernelType::AIV_ONLY);
    KernelParam y;
    y.name = "Y", y.dtype = DTypeCode::f32, y.shape = {C(8)};  // the caller's (not out: nothing writes it)
    r.p.params.push_back(y);
    DataCopyPadGmToUb in{GmRef{0, C(0)}, r.at(r.ub), DTypeCode::f32, C(2), z, C(0), C(0), true, C(0), C(0), C(7)};
    DataCopyPadUbToGm out{r.at(r.ub), GmRef{1, C(0)}, DTypeCode::f32, C(2), z, C(0), C(0)};
    r.p.aiv = seq({let(z, C(0), L(29)), instr(in, L(30)), instr(SetFlag{Pipe::MTE2, Pipe::MTE3, C(0)}, L(30)),
                   instr(WaitFlag{Pipe::MTE2, Pipe::MTE3, C(0)}, L(31)), instr(out, L(31))});
    std::vector<float> x(64 * 64, 1.f), yv(8, -1.f);
    auto res = sim::run(r.p, b2().ascend, {arg(x), arg(yv)}, {}, o);
    EXPECT_TRUE(res.reports.empty()) << res.summary();
    EXPECT_EQ(yv, std::vector<float>(8, -1.f));  // nothing written
  }
  {
    Rig r(KernelType::AIC_ONLY);
    for (int zero_rows = 0; zero_rows < 2; ++zero_rows) {
      Expr nv = zero_rows ? Expr(z) : C(16), dv = zero_rows ? C(16) : Expr(z);
      DataCopyNd2Nz nd{GmRef{0, C(0)}, r.at(r.l1f), DTypeCode::f32, C(1), nv, dv, C(0), C(64), C(16), C(1), C(0)};
      std::vector<float> x(64 * 64, 1.f);
      auto res = sim::run(r.with(nd, 33, {let(z, C(0), L(33))}), b2().ascend, {arg(x)}, {}, o);
      EXPECT_TRUE(res.reports.empty()) << res.summary();
    }
    for (int zero_rows = 0; zero_rows < 2; ++zero_rows) {
      Expr m = zero_rows ? Expr(z) : C(16), n = zero_rows ? C(16) : Expr(z);
      FixpipeV220 f{r.at(r.l0c), GmRef{0, C(0)}, DTypeCode::f32, DTypeCode::f32, n, m, C(16), C(64),
                    QuantMode::NoQuant, false, C(1)};
      std::vector<float> x(64 * 64, 1.f);
      auto res = sim::run(r.with(f, 44, {let(z, C(0), L(44))}), b2().ascend, {arg(x)}, {}, o);
      const sim::Report* bad = find(res, sim::ReportKind::ApiRule,
                                    zero_rows ? "Fixpipe with mSize 0, nSize 16" : "Fixpipe with mSize 16, nSize 0");
      ASSERT_NE(bad, nullptr) << res.summary();
      EXPECT_EQ(bad->instrs.at(0).span.line, 44);
      EXPECT_NE(bad->message.find("guard it"), std::string::npos) << bad->message;
    }
  }
}

// InitConstValue writes repeatTimes x (blockNum blocks, then dstGap blocks skipped): its extent is
// (repeatTimes - 1) * (blockNum + dstGap) * 32 + blockNum * 32 bytes.
TEST(SimulateMoveCalls, InitConstValueExtentFollowsRepeatBlocksAndGap) {
  for (int64_t gap : {4, 5}) {
    Rig r(KernelType::AIC_ONLY);
    int small = r.buf("small", CoreType::AIC, Mem::L1, 32768, 256, DTypeCode::f16);
    r.p.aic = seq({instr(InitConstValue{r.at(small), DTypeCode::f16, C(2), C(2), C(gap), C(0)}, L(40))});
    std::vector<float> x(64 * 64);
    auto res = sim::run(r.p, b2().ascend, {arg(x)});
    const sim::Report* oob = find(res, sim::ReportKind::OutOfBounds);
    if (gap == 4) {
      EXPECT_EQ(oob, nullptr) << res.summary();  // (2 + 4) * 32 + 64 = 256 B
    } else {
      ASSERT_NE(oob, nullptr) << res.summary();
      EXPECT_NE(oob->message.find("writes bytes [0, 288)"), std::string::npos) << oob->message;
      EXPECT_EQ(oob->instrs.at(0).span.line, 40);
    }
  }
}

// LoadData2D reads repeatTimes fractals from startIndex, srcStride fractals apart (512 B each).
TEST(SimulateMoveCalls, LoadData2DSourceFollowsStartIndexAndSrcStride) {
  Rig r(KernelType::AIC_ONLY);
  LoadData2D ld{r.at(r.l1), r.at(r.l0a), DTypeCode::f16, C(1), C(4), C(5), C(0), C(0), false};
  std::vector<float> x(64 * 64);
  auto res = sim::run(r.with(ld, 41), b2().ascend, {arg(x)});
  const sim::Report* oob = find(res, sim::ReportKind::OutOfBounds);
  ASSERT_NE(oob, nullptr) << res.summary();  // fractals 1, 6, 11, 16 of the 8192 B (16 fractal) buffer
  EXPECT_NE(oob->message.find("reads bytes [512, 8704)"), std::string::npos) << oob->message;
}

// A runtime field beyond its width is the simulator's API rule report at the line.
TEST(SimulateMoveCalls, RuntimeFieldOverflowIsReported) {
  Rig r(KernelType::AIC_ONLY);
  auto rep = ir::var("rep");
  LoadData2D ld{r.at(r.l1), r.at(r.l0a), DTypeCode::f16, C(0), rep, C(0), C(0), C(0), false};
  Program p = r.with(ld, 42, {let(rep, C(300), L(42))});
  sim::Options o;
  o.check = true;
  std::vector<float> x(64 * 64);
  auto res = sim::run(p, b2().ascend, {arg(x)}, {}, o);
  const sim::Report* api = find(res, sim::ReportKind::ApiRule, "LoadData2DParams.repeatTimes = 300 is outside 0..255");
  ASSERT_NE(api, nullptr) << res.summary();
  EXPECT_EQ(api->instrs.at(0).span.line, 42);
}

TEST(SimulateMoveCalls, FixpipeQuantPreMustMatchTheTypes) {
  Rig r(KernelType::AIC_ONLY);
  FixpipeV220 f{r.at(r.l0c), GmRef{0, C(0)}, DTypeCode::f32, DTypeCode::f32, C(16), C(16), C(16), C(64),
                QuantMode::F322F16, false, C(1)};
  std::vector<float> x(64 * 64);
  auto res = sim::run(r.with(f, 43), b2().ascend, {arg(x)});
  const sim::Report* bad = find(res, sim::ReportKind::InvalidInstr, "quantPre F322F16 does not convert float32 to float32");
  ASSERT_NE(bad, nullptr) << res.summary();
  EXPECT_EQ(bad->instrs.at(0).span.line, 43);
}

// --- before / after texts (parse_program) ------------------------------------------------------

// One program with a byte-level move of each memory path, as text: the pass's output, printed, is
// the expected text (which parses back to itself).
TEST(SelectMoveCalls, BeforeAfterText) {
  const std::string header = R"(ascend_kernel k MIX_1_2 blocks=1 workspace=0 block_idx=b sub_block_idx=v
  param 0 X: GM float32[n, 64]
  buffer l1: AIC L1 @0 +8192 float16 Nz
  buffer ub: AIV UB @0 +16384 float32 ND
  buffer ub2: AIV UB @16384 +16384 float32 ND
)";
  const std::string before = header + R"(AIC:
  MTE2 CopyGmToL1 l1[0] <- X[0] float16 rows=n cols=48 src_row_stride=64 nz=64x64  @6
AIV:
  MTE2 CopyGmToUb ub[0] <- X[0] float32 n_rows=4 row_bytes=24 src_stride=40 dst_stride=64 pad  @9
  MTE3 CopyUbToGm X[0] <- ub[0] float32 n_rows=n row_bytes=256 src_stride=256 dst_stride=256  @8
  V CopyUbToUb ub2[0] <- ub[0] float32 n_rows=4 row_bytes=64 src_stride=128 dst_stride=96  @11
)";
  const std::string after = header + R"(AIC:
  if n < 64 or 48 < 64:
    MTE2 InitConstValue l1[0] float16 repeatTimes=1 blockNum=64 * 64 * 2 // 32 dstGap=0 initValue=0  @6
    MTE2 PipeBarrier<MTE2>  @6
  MTE2 DataCopyNd2Nz l1[0] <- X[0] float16 ndNum=1 nValue=n dValue=48 srcNdMatrixStride=0 srcDValue=64 dstNzC0Stride=64 dstNzNStride=1 dstNzMatrixStride=0  @6
AIV:
  MTE2 DataCopyPad ub[0] <- X[0] float32 blockCount=4 blockLen=24 srcStride=40 - 24 dstStride=(64 - 32) // 32 isPad leftPadding=0 rightPadding=(32 - 24) // 4 paddingValue=0  @9
  if n > 0:
    MTE3 DataCopyPad X[0] <- ub[0] float32 blockCount=n blockLen=256 srcStride=(256 - ceildiv(256, 32) * 32) // 32 dstStride=256 - 256  @8
  V DataCopy ub2[0] <- ub[0] float32 blockCount=4 blockLen=64 // 32 srcStride=(128 - 64) // 32 dstStride=(96 - 64) // 32  @11
)";
  Program p = parse_program(before, "k.prog");
  EXPECT_EQ(print_program(p), before);
  std::string got = print_program(select_move_calls(p, b2()));
  EXPECT_EQ(got, after);
  EXPECT_EQ(print_program(parse_program(got, "after.prog")), after);
}

// A fill dtype other than float16 (the 8-bit tiles' zeroing as half is the default) is part of the text.
TEST(SelectMoveCalls, BeforeAfterTextFillDtype) {
  const std::string header = R"(ascend_kernel k AIC_ONLY blocks=1 workspace=0 block_idx=b
  param 0 X: GM float32[n, 64]
  buffer l1f: AIC L1 @0 +16384 float32 Nz
AIC:
)";
  Program p = parse_program(header + "  MTE2 CopyGmToL1 l1f[0] <- X[0] float32 rows=n cols=64 src_row_stride=64 nz=64x64 fill=float32  @3\n");
  std::string got = print_program(select_move_calls(p, b2()));
  EXPECT_NE(got.find("MTE2 InitConstValue l1f[0] float32 repeatTimes=1"), std::string::npos) << got;
}

}  // namespace
}  // namespace tw::ascend
