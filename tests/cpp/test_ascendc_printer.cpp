// Tests of the AscendC printer (src/target/ascend/ascendc_printer.cpp).
//
// Three hand-built Ascend programs (an fp16 GEMM on the Cube with double buffering, a softmax on
// the Vector cores, a MIX matmul + bias + ReLU epilogue through a GM workspace with cross-core
// flags) are printed and compared with golden files in tests/golden/ascendc/
// (TW_UPDATE_GOLDEN=1 rewrites them). A program with every instruction kind must print; printing
// is deterministic; errors name the kernel source line.
//
// No CANN is available here: tests/python/test_ascendc_compile.py compiles every golden kernel and
// host launcher with `g++ -fsyntax-only` against tests/ascendc/include, declarations of the
// AscendC / ACL API with their documented signatures, overloads and struct field widths.
//
// Automatic pipeline: every portable example (tests/golden/tile_ir/<example>.tir, the Tile IR the
// example's kernel prints with get_ir("input") at small sizes with odd tails) is lowered with
// lower_ascend for ascend910b and printed; the project is compared with
// tests/golden/ascendc/auto_<example>_* (and so compiled like the hand-built programs).
#include "target/ascend/ascendc_printer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <regex>
#include <sstream>
#include <string>

#include "ir/parser.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/pipeline.h"
#include "target/ascend/resolve_cross_waits.h"
#include "target/ascend/program_parser.h"
#include "target/ascend/program_printer.h"
#include "target/ascend/select_move_calls.h"
#include "target/ascend/select_vector_calls.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

using ir::BinOp;
using ir::DTypeCode;
using ir::Expr;
using ir::Span;

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Builders

Span L(int line) { return Span{"kernel.py", line, 5}; }
Expr I(int64_t v) { return ir::int_imm(v); }
Expr F(double v) { return ir::float_imm(v); }
Expr operator+(const Expr& a, const Expr& b) { return ir::binary(BinOp::Add, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return ir::binary(BinOp::Sub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return ir::binary(BinOp::Mul, a, b); }
Expr operator%(const Expr& a, const Expr& b) { return ir::binary(BinOp::Mod, a, b); }
Expr fdiv(const Expr& a, const Expr& b) { return ir::binary(BinOp::FloorDiv, a, b); }
Expr cdiv(const Expr& a, const Expr& b) { return ir::binary(BinOp::CeilDiv, a, b); }
Expr min(const Expr& a, const Expr& b) { return ir::binary(BinOp::Min, a, b); }
Expr eq(const Expr& a, const Expr& b) { return ir::binary(BinOp::EQ, a, b); }
Expr ge(const Expr& a, const Expr& b) { return ir::binary(BinOp::GE, a, b); }
Expr gt(const Expr& a, const Expr& b) { return ir::binary(BinOp::GT, a, b); }

KernelParam tensor(std::string name, DTypeCode t, std::vector<Expr> shape, bool out = false) {
  KernelParam k;
  k.name = std::move(name);
  k.dtype = t;
  k.shape = std::move(shape);
  k.is_output = out;
  return k;
}
KernelParam scalar(const ir::Var& v) {
  KernelParam k;
  k.name = v->name;
  k.is_tensor = false;
  k.dtype = v->dtype;
  k.var = v;
  return k;
}
int buf(Program& p, std::string name, CoreType c, Mem m, int64_t off, int64_t bytes, DTypeCode t,
        std::vector<int64_t> shape, Format f, int line) {
  p.buffers.push_back(BufferDecl{std::move(name), c, m, off, bytes, t, std::move(shape), f, L(line)});
  p.pool(c, m) = std::max(p.pool(c, m), round_up(off + bytes, 32));  // placed by hand: the pool plan_memory would record
  return static_cast<int>(p.buffers.size()) - 1;
}
LocalRef at(int b, Expr off = I(0)) { return LocalRef{b, std::move(off)}; }
GmRef gm(int param, Expr off) { return GmRef{param, std::move(off)}; }
VecOperand vo(int b, Expr row_stride, Expr off = I(0)) { return VecOperand{at(b, std::move(off)), std::move(row_stride)}; }
StmtPtr ins(InstrOp op, int line) { return instr(std::move(op), L(line)); }

// C[M, N] (fp16) = A[M, K] (fp16) @ B[K, N] (fp16), fp32 accumulation in L0C, 128x128x64 tiles,
// L1 and L0 double-buffered (slot = k % 2), AIC only.
// The programs here are built with high-level vector instructions, byte-level moves and waits
// without a mode: select the calls and resolve the waits first, as the pipeline does.
Program calls(const Program& p) {
  const auto& t = target::find_target("ascend910b2");
  return resolve_cross_waits(select_move_calls(select_vector_calls(p, t), t));
}

Program gemm_program(bool select = true) {
  Program p;
  p.name = "gemm_fp16";
  p.kernel_type = KernelType::AIC_ONLY;
  p.span = L(10);
  auto M = ir::var("M"), N = ir::var("N"), K = ir::var("K");
  p.params = {tensor("A", DTypeCode::f16, {M, K}), tensor("B", DTypeCode::f16, {K, N}),
              tensor("C", DTypeCode::f16, {M, N}, true)};
  p.shape_vars = {M, N, K};
  p.block_dim = cdiv(M, I(128)) * cdiv(N, I(128));
  p.workspace_bytes = I(0);
  p.block_idx = ir::var("bid");
  int a1 = buf(p, "A_l1", CoreType::AIC, Mem::L1, 0, 32768, DTypeCode::f16, {2, 128, 64}, Format::Nz, 14);
  int b1 = buf(p, "B_l1", CoreType::AIC, Mem::L1, 32768, 32768, DTypeCode::f16, {2, 64, 128}, Format::Nz, 15);
  int a0 = buf(p, "A_l0a", CoreType::AIC, Mem::L0A, 0, 32768, DTypeCode::f16, {2, 128, 64}, Format::Zz, 16);
  int b0 = buf(p, "B_l0b", CoreType::AIC, Mem::L0B, 0, 32768, DTypeCode::f16, {2, 64, 128}, Format::Zn, 17);
  int c0 = buf(p, "C_l0c", CoreType::AIC, Mem::L0C, 0, 65536, DTypeCode::f32, {128, 128}, Format::Nz, 18);

  auto bid = p.block_idx;
  auto bm = ir::var("bm"), bn = ir::var("bn"), mt = ir::var("mt"), nt = ir::var("nt");
  auto k = ir::var("k"), kt = ir::var("kt"), s = ir::var("s"), nk = ir::var("nk");
  Expr slot = s * I(16384);
  StmtPtr body = seq({
      let(bm, fdiv(bid, cdiv(N, I(128))), L(12)),
      let(bn, bid % cdiv(N, I(128)), L(12)),
      let(mt, min(M - bm * I(128), I(128)), L(13)),
      let(nt, min(N - bn * I(128), I(128)), L(13)),
      let(nk, cdiv(K, I(64)), L(19)),
      for_(k, nk,
           seq({
               let(kt, min(K - k * I(64), I(64)), L(19)),
               let(s, k % I(2), L(19)),
               if_(ge(k, I(2)), ins(WaitFlag{Pipe::MTE1, Pipe::MTE2, s}, 20)),
               ins(CopyGmToL1{gm(0, (bm * I(128) * K + k * I(64)) * I(2)), at(a1, slot), DTypeCode::f16, mt, kt, K,
                              I(128), I(64)},
                   20),
               ins(CopyGmToL1{gm(1, (k * I(64) * N + bn * I(128)) * I(2)), at(b1, slot), DTypeCode::f16, kt, nt, N,
                              I(64), I(128)},
                   21),
               ins(SetFlag{Pipe::MTE2, Pipe::MTE1, s}, 21),
               ins(WaitFlag{Pipe::MTE2, Pipe::MTE1, s}, 22),
               if_(ge(k, I(2)), ins(WaitFlag{Pipe::M, Pipe::MTE1, s}, 22)),
               ins(LoadL0{at(a1, slot), at(a0, slot), DTypeCode::f16, I(128), I(0), I(0), I(128), I(64), false}, 22),
               ins(LoadL0{at(b1, slot), at(b0, slot), DTypeCode::f16, I(64), I(0), I(0), I(64), I(128), true}, 22),
               ins(SetFlag{Pipe::MTE1, Pipe::MTE2, s}, 22),
               ins(SetFlag{Pipe::MTE1, Pipe::M, s}, 22),
               ins(WaitFlag{Pipe::MTE1, Pipe::M, s}, 22),
               ins(Mmad{at(a0, slot), at(b0, slot), at(c0), DTypeCode::f16, DTypeCode::f32, mt, nt, kt, eq(k, I(0))},
                   22),
               ins(SetFlag{Pipe::M, Pipe::MTE1, s}, 22),
           }),
           L(19)),
      // drain the flags of the last (up to) two iterations
      ins(WaitFlag{Pipe::M, Pipe::MTE1, (nk - I(1)) % I(2)}, 23),
      ins(WaitFlag{Pipe::MTE1, Pipe::MTE2, (nk - I(1)) % I(2)}, 23),
      if_(ge(nk, I(2)), seq({ins(WaitFlag{Pipe::M, Pipe::MTE1, nk % I(2)}, 23),
                             ins(WaitFlag{Pipe::MTE1, Pipe::MTE2, nk % I(2)}, 23)})),
      ins(SetFlag{Pipe::M, Pipe::FIX, I(0)}, 23),
      ins(WaitFlag{Pipe::M, Pipe::FIX, I(0)}, 23),
      ins(Fixpipe{at(c0), gm(2, (bm * I(128) * N + bn * I(128)) * I(2)), DTypeCode::f32, DTypeCode::f16, mt, nt, I(128),
                  N, false},
          23),
  });
  p.aic = body;
  return select ? calls(p) : p;
}

// Y[M, 256] (fp16) = softmax(X * scale) along rows; 16 rows per AIV, computed in fp32.
Program softmax_program() {
  Program p;
  p.name = "softmax_rows";
  p.kernel_type = KernelType::AIV_ONLY;
  p.span = L(30);
  auto M = ir::var("M");
  auto scale = ir::var("scale", DTypeCode::f32);
  p.params = {tensor("X", DTypeCode::f16, {M, I(256)}), scalar(scale), tensor("Y", DTypeCode::f16, {M, I(256)}, true)};
  p.shape_vars = {M};
  p.block_dim = cdiv(M, I(16));
  p.workspace_bytes = I(0);
  p.block_idx = ir::var("bx");
  p.sub_block_idx = ir::var("sub");
  int x16 = buf(p, "x16", CoreType::AIV, Mem::UB, 0, 8192, DTypeCode::f16, {16, 256}, Format::ND, 32);
  int x = buf(p, "x", CoreType::AIV, Mem::UB, 8192, 16384, DTypeCode::f32, {16, 256}, Format::ND, 33);
  int mx = buf(p, "row_max", CoreType::AIV, Mem::UB, 24576, 64, DTypeCode::f32, {16}, Format::ND, 34);
  int sm = buf(p, "row_sum", CoreType::AIV, Mem::UB, 24640, 64, DTypeCode::f32, {16}, Format::ND, 35);
  auto r0 = ir::var("r0"), rt = ir::var("rt");
  Expr W = I(256);
  p.aiv = seq({
      let(r0, p.block_idx * I(16), L(36)),
      let(rt, min(M - r0, I(16)), L(36)),
      ins(CopyGmToUb{gm(0, r0 * W * I(2)), at(x16), DTypeCode::f16, rt, I(512), I(512), I(512)}, 37),
      ins(SetFlag{Pipe::MTE2, Pipe::V, I(0)}, 37),
      ins(WaitFlag{Pipe::MTE2, Pipe::V, I(0)}, 38),
      ins(VecCast{DTypeCode::f32, DTypeCode::f16, RoundMode::None, vo(x, W), vo(x16, W), I(16), W}, 38),
      ins(PipeBarrier{Pipe::V}, 39),
      ins(VecBinaryScalar{VecBinOp::Mul, DTypeCode::f32, vo(x, W), vo(x, W), scale, I(16), W}, 39),
      ins(PipeBarrier{Pipe::V}, 40),
      ins(VecReduce{ReduceOp::Max, ReduceAxis::Row, DTypeCode::f32, vo(mx, I(1)), vo(x, W), I(16), W}, 40),
      ins(PipeBarrier{Pipe::V}, 41),
      ins(VecRowBroadcast{VecBinOp::Sub, DTypeCode::f32, vo(x, W), vo(x, W), at(mx), I(16), W}, 41),
      ins(PipeBarrier{Pipe::V}, 42),
      ins(VecUnary{VecUnOp::Exp, DTypeCode::f32, vo(x, W), vo(x, W), I(16), W}, 42),
      ins(PipeBarrier{Pipe::V}, 43),
      ins(VecReduce{ReduceOp::Sum, ReduceAxis::Row, DTypeCode::f32, vo(sm, I(1)), vo(x, W), I(16), W}, 43),
      ins(PipeBarrier{Pipe::V}, 44),
      ins(VecRowBroadcast{VecBinOp::Div, DTypeCode::f32, vo(x, W), vo(x, W), at(sm), I(16), W}, 44),
      ins(PipeBarrier{Pipe::V}, 45),
      ins(VecCast{DTypeCode::f16, DTypeCode::f32, RoundMode::Rint, vo(x16, W), vo(x, W), I(16), W}, 45),
      ins(SetFlag{Pipe::V, Pipe::MTE3, I(0)}, 45),
      ins(WaitFlag{Pipe::V, Pipe::MTE3, I(0)}, 46),
      ins(CopyUbToGm{at(x16), gm(2, r0 * W * I(2)), DTypeCode::f16, rt, I(512), I(512), I(512)}, 46),
  });
  return calls(p);
}

// C[M, N] (fp16) = relu(A @ B + bias): the AIC computes a 128x128 fp32 tile into the GM workspace
// and raises cross-core flag 0; each AIV waits, adds the bias row to 64 rows, applies ReLU,
// casts and stores.
Program mixed_program() {
  Program p;
  p.name = "matmul_bias_relu";
  p.kernel_type = KernelType::MIX_1_2;
  p.span = L(50);
  auto M = ir::var("M"), N = ir::var("N"), K = ir::var("K");
  p.params = {tensor("A", DTypeCode::f16, {M, K}), tensor("B", DTypeCode::f16, {K, N}),
              tensor("bias", DTypeCode::f32, {N}), tensor("C", DTypeCode::f16, {M, N}, true)};
  p.shape_vars = {M, N, K};
  p.block_dim = cdiv(M, I(128)) * cdiv(N, I(128));
  p.workspace_bytes = p.block_dim * I(128 * 128 * 4);
  p.block_idx = ir::var("bid");
  p.sub_block_idx = ir::var("vid");
  int a1 = buf(p, "a_l1", CoreType::AIC, Mem::L1, 0, 16384, DTypeCode::f16, {128, 64}, Format::Nz, 52);
  int b1 = buf(p, "b_l1", CoreType::AIC, Mem::L1, 16384, 16384, DTypeCode::f16, {64, 128}, Format::Nz, 53);
  int a0 = buf(p, "a_l0a", CoreType::AIC, Mem::L0A, 0, 16384, DTypeCode::f16, {128, 64}, Format::Zz, 54);
  int b0 = buf(p, "b_l0b", CoreType::AIC, Mem::L0B, 0, 16384, DTypeCode::f16, {64, 128}, Format::Zn, 55);
  int c0 = buf(p, "acc_l0c", CoreType::AIC, Mem::L0C, 0, 65536, DTypeCode::f32, {128, 128}, Format::Nz, 56);
  int acc = buf(p, "acc_ub", CoreType::AIV, Mem::UB, 0, 32768, DTypeCode::f32, {64, 128}, Format::ND, 60);
  int bu = buf(p, "bias_ub", CoreType::AIV, Mem::UB, 32768, 512, DTypeCode::f32, {128}, Format::ND, 61);
  int out = buf(p, "out_ub", CoreType::AIV, Mem::UB, 33280, 16384, DTypeCode::f16, {64, 128}, Format::ND, 62);

  auto bid = p.block_idx, vid = p.sub_block_idx;
  auto bm = ir::var("bm"), bn = ir::var("bn"), mt = ir::var("mt"), nt = ir::var("nt"), k = ir::var("k"),
       kt = ir::var("kt");
  Expr tile_ws = bid * I(128 * 128 * 4);
  auto common = [&](int line) {
    return std::vector<StmtPtr>{let(bm, fdiv(bid, cdiv(N, I(128))), L(line)), let(bn, bid % cdiv(N, I(128)), L(line)),
                                let(mt, min(M - bm * I(128), I(128)), L(line)),
                                let(nt, min(N - bn * I(128), I(128)), L(line))};
  };
  std::vector<StmtPtr> aic = common(57);
  aic.push_back(for_(k, cdiv(K, I(64)),
                     seq({
                         let(kt, min(K - k * I(64), I(64)), L(58)),
                         if_(gt(k, I(0)), ins(WaitFlag{Pipe::MTE1, Pipe::MTE2, I(0)}, 58)),
                         ins(CopyGmToL1{gm(0, (bm * I(128) * K + k * I(64)) * I(2)), at(a1), DTypeCode::f16, mt, kt, K,
                                        I(128), I(64)},
                             58),
                         ins(CopyGmToL1{gm(1, (k * I(64) * N + bn * I(128)) * I(2)), at(b1), DTypeCode::f16, kt, nt, N,
                                        I(64), I(128)},
                             58),
                         ins(SetFlag{Pipe::MTE2, Pipe::MTE1, I(0)}, 58),
                         ins(WaitFlag{Pipe::MTE2, Pipe::MTE1, I(0)}, 59),
                         if_(gt(k, I(0)), ins(WaitFlag{Pipe::M, Pipe::MTE1, I(0)}, 59)),
                         ins(LoadL0{at(a1), at(a0), DTypeCode::f16, I(128), I(0), I(0), I(128), I(64), false}, 59),
                         ins(LoadL0{at(b1), at(b0), DTypeCode::f16, I(64), I(0), I(0), I(64), I(128), true}, 59),
                         ins(SetFlag{Pipe::MTE1, Pipe::MTE2, I(0)}, 59),
                         ins(SetFlag{Pipe::MTE1, Pipe::M, I(0)}, 59),
                         ins(WaitFlag{Pipe::MTE1, Pipe::M, I(0)}, 59),
                         ins(Mmad{at(a0), at(b0), at(c0), DTypeCode::f16, DTypeCode::f32, mt, nt, kt, eq(k, I(0))}, 59),
                         ins(SetFlag{Pipe::M, Pipe::MTE1, I(0)}, 59),
                     }),
                     L(58)));
  aic.push_back(ins(WaitFlag{Pipe::M, Pipe::MTE1, I(0)}, 60));
  aic.push_back(ins(WaitFlag{Pipe::MTE1, Pipe::MTE2, I(0)}, 60));
  aic.push_back(ins(SetFlag{Pipe::M, Pipe::FIX, I(0)}, 60));
  aic.push_back(ins(WaitFlag{Pipe::M, Pipe::FIX, I(0)}, 60));
  aic.push_back(
      ins(Fixpipe{at(c0), gm(-1, tile_ws), DTypeCode::f32, DTypeCode::f32, I(128), I(128), I(128), I(128), false}, 60));
  aic.push_back(ins(CrossCoreSetFlag{2, Pipe::FIX, I(0)}, 60));
  p.aic = seq(aic);

  auto rows = ir::var("rows");
  std::vector<StmtPtr> aiv = common(63);
  aiv.push_back(let(rows, min(mt - vid * I(64), I(64)), L(63)));
  aiv.push_back(ins(CrossCoreWaitFlag{I(0), Pipe::S}, 64));
  aiv.push_back(ins(CopyGmToUb{gm(-1, tile_ws + vid * I(64 * 128 * 4)), at(acc), DTypeCode::f32, I(64), I(512), I(512),
                               I(512)},
                    64));
  aiv.push_back(ins(CopyGmToUb{gm(2, bn * I(128 * 4)), at(bu), DTypeCode::f32, I(1), I(512), I(512), I(512)}, 65));
  aiv.push_back(ins(SetFlag{Pipe::MTE2, Pipe::V, I(0)}, 65));
  aiv.push_back(ins(WaitFlag{Pipe::MTE2, Pipe::V, I(0)}, 66));
  aiv.push_back(ins(VecBinary{VecBinOp::Add, DTypeCode::f32, vo(acc, I(128)), vo(acc, I(128)), vo(bu, I(0)), I(64), I(128)},
                    66));
  aiv.push_back(ins(PipeBarrier{Pipe::V}, 67));
  aiv.push_back(ins(VecUnary{VecUnOp::Relu, DTypeCode::f32, vo(acc, I(128)), vo(acc, I(128)), I(64), I(128)}, 67));
  aiv.push_back(ins(PipeBarrier{Pipe::V}, 68));
  aiv.push_back(
      ins(VecCast{DTypeCode::f16, DTypeCode::f32, RoundMode::Rint, vo(out, I(128)), vo(acc, I(128)), I(64), I(128)}, 68));
  aiv.push_back(ins(SetFlag{Pipe::V, Pipe::MTE3, I(0)}, 68));
  aiv.push_back(ins(WaitFlag{Pipe::V, Pipe::MTE3, I(0)}, 69));
  aiv.push_back(if_(gt(rows, I(0)),
                    ins(CopyUbToGm{at(out), gm(3, ((bm * I(128) + vid * I(64)) * N + bn * I(128)) * I(2)), DTypeCode::f16,
                                   rows, nt * I(2), I(256), N * I(2)},
                        69)));
  p.aiv = seq(aiv);
  return calls(p);
}

// One instruction of every kind (MIX: Cube kinds on the AIC, vector kinds on the AIV), with
// strided operands and symbolic sizes so the level-0 forms and loops are printed too.
Program all_kinds_program() {
  Program p;
  p.name = "all_kinds";
  p.kernel_type = KernelType::MIX_1_2;
  p.span = L(80);
  auto N = ir::var("N");
  p.params = {tensor("X", DTypeCode::f16, {I(64), N}), tensor("Y", DTypeCode::f32, {I(64), N}, true)};
  p.shape_vars = {N};
  p.block_dim = I(1);
  p.workspace_bytes = I(65536);
  p.block_idx = ir::var("b");
  p.sub_block_idx = ir::var("v");
  int l1 = buf(p, "l1", CoreType::AIC, Mem::L1, 0, 8192, DTypeCode::f16, {64, 64}, Format::Nz, 81);
  int la = buf(p, "l0a", CoreType::AIC, Mem::L0A, 0, 8192, DTypeCode::f16, {64, 64}, Format::Zz, 81);
  int lb = buf(p, "l0b", CoreType::AIC, Mem::L0B, 0, 8192, DTypeCode::f16, {64, 64}, Format::Zn, 81);
  int lc = buf(p, "l0c", CoreType::AIC, Mem::L0C, 0, 16384, DTypeCode::f32, {64, 64}, Format::Nz, 81);
  int l1f = buf(p, "l1f", CoreType::AIC, Mem::L1, 8192, 16384, DTypeCode::f32, {64, 64}, Format::Nz, 81);
  int lbf = buf(p, "l0bf", CoreType::AIC, Mem::L0B, 8192, 16384, DTypeCode::f32, {64, 64}, Format::Zn, 81);
  int u0 = buf(p, "u0", CoreType::AIV, Mem::UB, 0, 65536, DTypeCode::f32, {64, 256}, Format::ND, 82);
  int u1 = buf(p, "u1", CoreType::AIV, Mem::UB, 65536, 65536, DTypeCode::f32, {64, 256}, Format::ND, 82);
  int u2 = buf(p, "u2", CoreType::AIV, Mem::UB, 131072, 1024, DTypeCode::f32, {256}, Format::ND, 82);
  auto cols = ir::var("cols"), alpha = ir::var("alpha", DTypeCode::f32);
  p.params.push_back(scalar(alpha));
  p.aic = seq({
      ins(CopyGmToL1{gm(0, I(0)), at(l1), DTypeCode::f16, I(64), min(N, I(64)), N, I(64), I(64)}, 83),
      ins(SetFlag{Pipe::MTE2, Pipe::MTE1, I(0)}, 83),
      ins(WaitFlag{Pipe::MTE2, Pipe::MTE1, I(0)}, 84),
      ins(LoadL0{at(l1), at(la), DTypeCode::f16, I(64), I(0), I(0), I(64), I(64), false}, 84),
      ins(LoadL0{at(l1), at(lb), DTypeCode::f16, I(64), I(0), I(0), I(64), I(64), false}, 84),
      ins(LoadL0{at(l1f), at(lbf), DTypeCode::f32, I(64), I(0), I(0), I(64), I(64), true}, 84),
      ins(SetFlag{Pipe::MTE1, Pipe::M, I(0)}, 84),
      ins(WaitFlag{Pipe::MTE1, Pipe::M, I(0)}, 85),
      ins(Mmad{at(la), at(lb), at(lc), DTypeCode::f16, DTypeCode::f32, I(64), I(64), I(64), ir::int_imm(1, DTypeCode::boolean)},
          85),
      ins(SetFlag{Pipe::M, Pipe::FIX, I(0)}, 85),
      ins(WaitFlag{Pipe::M, Pipe::FIX, I(0)}, 86),
      ins(Fixpipe{at(lc), gm(-1, I(0)), DTypeCode::f32, DTypeCode::f32, I(64), I(64), I(64), I(64), true}, 86),
      ins(FixpipeL1{at(lc), at(l1), DTypeCode::f32, DTypeCode::f16, I(64), I(64), I(64), I(64), QuantMode::F322F16}, 86),
      ins(CrossCoreSetFlag{2, Pipe::FIX, I(3)}, 86),
      ins(PipeBarrier{Pipe::ALL}, 87),
  });
  Expr S = I(256);
  auto u2e = ir::var("u2e", DTypeCode::f32);
  p.aiv = seq({
      let(cols, min(N, I(200)), L(88)),
      ins(ScalarLoad{ir::var("x3", DTypeCode::f16), gm(0, I(6)), DTypeCode::f16}, 88),
      ins(CrossCoreWaitFlag{I(3), Pipe::S}, 88),
      ins(CopyGmToUb{gm(-1, p.sub_block_idx * I(8192)), at(u0), DTypeCode::f32, I(32), I(256), I(256), I(1024)}, 89),
      ins(SetFlag{Pipe::MTE2, Pipe::V, I(1)}, 89),
      ins(WaitFlag{Pipe::MTE2, Pipe::V, I(1)}, 90),
      ins(CopyUbToUb{at(u0), at(u1), DTypeCode::f32, I(32), I(1024), I(1024), I(1024)}, 90),
      ins(VecBinary{VecBinOp::Max, DTypeCode::f32, vo(u1, S), vo(u0, S), vo(u1, S), I(300), cols}, 91),
      ins(VecBinaryScalar{VecBinOp::Div, DTypeCode::f32, vo(u1, S), vo(u1, S), alpha, I(32), cols}, 92),
      ins(VecUnary{VecUnOp::Rsqrt, DTypeCode::f32, vo(u1, S), vo(u1, S), I(32), I(64)}, 93),
      ins(VecCast{DTypeCode::f16, DTypeCode::f32, RoundMode::Floor, vo(u0, I(128)), vo(u1, S), I(32), I(128)}, 94),
      ins(VecDup{DTypeCode::f32, vo(u1, S, I(512)), F(-1.5), I(4), I(48)}, 95),
      ins(VecReduce{ReduceOp::Min, ReduceAxis::Row, DTypeCode::f32, vo(u2, I(1)), vo(u1, S), I(32), I(40)}, 96),
      ins(VecReduce{ReduceOp::Sum, ReduceAxis::Col, DTypeCode::f32, vo(u2, I(1)), vo(u1, S), I(32), cols}, 97),
      ins(VecRowBroadcast{VecBinOp::Mul, DTypeCode::f32, vo(u1, S), vo(u1, S), at(u2), I(32), I(256)}, 98),
      ins(ScalarLoad{u2e, GmRef{}, DTypeCode::f32, at(u2, I(12))}, 98),
      ins(ScalarStore{at(u2, I(8)), ir::binary(ir::BinOp::Add, u2e, F(1.0)), DTypeCode::f32}, 98),
      ins(Gather{DTypeCode::f32, at(u1, I(1024)), at(u0), at(u2), I(0), I(64), I(256)}, 98),
      ins(SetFlag{Pipe::V, Pipe::MTE3, I(2)}, 98),
      ins(WaitFlag{Pipe::V, Pipe::MTE3, I(2)}, 99),
      ins(CopyUbToGm{at(u1), gm(1, p.sub_block_idx * I(32) * N * I(4)), DTypeCode::f32, I(32), N * I(4), I(1024), N * I(4),
                     /*atomic=*/true},
          99),
      ins(CrossCoreSetFlag{2, Pipe::MTE3, I(4)}, 99),
  });
  return calls(p);
}

// ---------------------------------------------------------------------------------------------
// Golden files and the syntax check

fs::path golden_dir() { return fs::path(TW_SOURCE_DIR) / "tests" / "golden" / "ascendc"; }
fs::path tile_ir_dir() { return fs::path(TW_SOURCE_DIR) / "tests" / "golden" / "tile_ir"; }

std::string read(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void write(const fs::path& f, const std::string& s) {
  std::ofstream out(f, std::ios::binary);
  out << s;
}

void check_golden(const std::string& file, const std::string& text) {
  fs::path f = golden_dir() / file;
  const char* upd = std::getenv("TW_UPDATE_GOLDEN");
  if (upd && std::string(upd) == "1") {
    write(f, text);
    return;
  }
  ASSERT_TRUE(fs::exists(f)) << f << " is missing; run with TW_UPDATE_GOLDEN=1 to create it";
  EXPECT_EQ(read(f), text) << "printed text differs from " << f << " (TW_UPDATE_GOLDEN=1 regenerates it)";
}

// p is built by hand, no widen_scalars ran on it: no division prints with C's / and %
// (Program::c_divisions is empty), every one through tw_floordiv / tw_floormod / tw_ceildiv.
void check_project(const std::string& tag, const Program& p) {
  std::string text = print_program(p);  // the program text reads back to itself (program_parser.h)
  EXPECT_EQ(print_program(parse_program(text, tag)), text) << tag;
  AscendCProject pr = print_ascendc(p);
  check_golden(tag + "_kernel.cpp", pr.kernel_cpp);
  check_golden(tag + "_host.cpp", pr.host_cpp);
  check_golden(tag + "_cmake.txt", pr.cmake);
  check_golden(tag + "_readme.txt", pr.readme);
}

// ---------------------------------------------------------------------------------------------
// Tests

TEST(AscendCPrinter, GemmGolden) { check_project("gemm_fp16", gemm_program()); }
TEST(AscendCPrinter, SoftmaxGolden) { check_project("softmax_rows", softmax_program()); }
TEST(AscendCPrinter, MixedGolden) { check_project("matmul_bias_relu", mixed_program()); }

TEST(AscendCPrinter, EveryInstrKindHasAnEmitter) {
  Program p = all_kinds_program();
  std::set<size_t> kinds;
  std::function<void(const StmtPtr&)> walk = [&](const StmtPtr& s) {
    if (!s) return;
    if (s->kind == StmtKind::Instr) kinds.insert(s->instr.op.index());
    for (const auto& b : s->body) walk(b);
    walk(s->else_body);
  };
  walk(p.aic);
  walk(p.aiv);
  // every kind but the nine high-level vector kinds and the six byte-level moves, which
  // select_vector_calls and select_move_calls replaced
  EXPECT_EQ(kinds.size(), std::variant_size_v<InstrOp> - 15) << "the all-kinds program must use every instruction kind";
  std::string k;
  ASSERT_NO_THROW(k = print_ascendc_kernel(p));
  for (const char* call : {"DataCopy(", "DataCopyPad(", "InitConstValue(", "LoadData(", "Mmad(", "Fixpipe<", "Max(",
                           "Muls(", "Rsqrt(", "Cast(", "Duplicate(", "Fixpipe<half, float, CFG_NZ>(", "WholeReduceMin(", "Add(", "Brcb(", "SetFlag<",
                           "Gather(u1[256], u0, u2.ReinterpretCast<uint32_t>(), static_cast<uint32_t>(0), static_cast<uint32_t>(64));",
                           "WaitFlag<", "PipeBarrier<PIPE_ALL>", "CrossCoreSetFlag<2, PIPE_FIX>(3)",
                           "CrossCoreWaitFlag<2, PIPE_MTE2>(3)", "SetAtomicAdd<float>();", "SetAtomicNone();", "for (int32_t tw_r_ = 0; tw_r_ < 2; ++tw_r_)",
                           "tw_c_ < tw_ceildiv(cols, 64)", "const half x3 = X_gm.GetValue(3);",
                           "const float u2e = u2.GetValue(3);", "u2.SetValue(2, static_cast<float>((u2e + 1.0f)));"})
    EXPECT_NE(k.find(call), std::string::npos) << "missing " << call << " in\n" << k;
  check_golden("all_kinds_kernel.cpp", k);
  EXPECT_EQ(print_program(parse_program(print_program(p), "all_kinds")), print_program(p));
  // the high-level vector kinds are select_vector_calls' input, never the printer's
  Program hl = p;
  hl.aiv = seq({instr(VecUnary{VecUnOp::Exp, DTypeCode::f32, vo(0, I(64)), vo(0, I(64)), I(1), I(64)}, L(12))});
  try {
    print_ascendc_kernel(hl);
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("internal: the AscendC printer met the high-level vector instruction VecUnary: run "
                               "select_vector_calls first"),
              std::string::npos)
        << e.message();
    EXPECT_EQ(e.span().line, 12);
  }
}

// The printer prints call-level moves only: a byte-level one is an internal error at its line.
TEST(AscendCPrinter, ByteLevelMovesNeedSelectMoveCalls) {
  Program p = gemm_program(/*select=*/false);
  try {
    print_ascendc_kernel(p);
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("run select_move_calls first"), std::string::npos) << e.message();
    EXPECT_TRUE(e.span().known());
  }
}

TEST(AscendCPrinter, EveryCallCarriesItsSourceLine) {
  std::string k = print_ascendc_kernel(gemm_program());
  EXPECT_NE(k.find("Mmad(C_l0c, A_l0a[(s * 8192)], B_l0b[(s * 8192)], tw_p);  // line 22"), std::string::npos) << k;
  EXPECT_NE(k.find("PIPE_MTE2>();  // line 20"), std::string::npos) << k;
}

TEST(AscendCPrinter, Deterministic) {
  for (auto make : std::vector<Program (*)()>{[] { return gemm_program(); }, softmax_program, mixed_program, all_kinds_program}) {
    AscendCProject a = print_ascendc(make()), b = print_ascendc(make());
    EXPECT_EQ(a.kernel_cpp, b.kernel_cpp);
    EXPECT_EQ(a.host_cpp, b.host_cpp);
    EXPECT_EQ(a.cmake, b.cmake);
    EXPECT_EQ(a.readme, b.readme);
  }
}

TEST(AscendCPrinter, NamesTheCannVersion) {
  AscendCProject pr = print_ascendc(mixed_program());
  for (const std::string* s : {&pr.kernel_cpp, &pr.host_cpp, &pr.cmake, &pr.readme})
    EXPECT_NE(s->find("CANN 8.3.RC1"), std::string::npos);
  EXPECT_NE(pr.kernel_cpp.find("KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2)"), std::string::npos);
  EXPECT_NE(pr.kernel_cpp.find("GetBlockIdx() / 2"), std::string::npos);
  EXPECT_NE(pr.host_cpp.find("ACLRT_LAUNCH_KERNEL(matmul_bias_relu)(block_dim, stream"), std::string::npos);
}

TEST(AscendCPrinter, FloorSemanticsForSignedIndexArithmetic) {
  Program p = softmax_program();
  auto t = ir::var("t");
  // (scale-free) index arithmetic on a possibly negative value must use the floor helpers
  p.aiv = seq({let(t, fdiv(p.block_idx - I(3), I(2)) + (p.block_idx - I(5)) % I(4), L(1)), p.aiv});
  std::string k = print_ascendc_kernel(p);
  EXPECT_NE(k.find("tw_floordiv((bx - 3), 2) + tw_floormod((bx - 5), 4)"), std::string::npos) << k;
}

TEST(AscendCPrinter, UnsupportedFixpipeNamesTheLine) {
  Program p = gemm_program(/*select=*/false);
  p.params[2].dtype = DTypeCode::i8;
  std::function<StmtPtr(const StmtPtr&)> fix = [&](const StmtPtr& s) -> StmtPtr {
    if (!s) return s;
    if (s->kind == StmtKind::Instr)
      if (auto* f = std::get_if<Fixpipe>(&s->instr.op)) {
        Fixpipe g = *f;
        g.dst_dtype = DTypeCode::i8;
        return instr(g, s->span);
      }
    auto c = std::make_shared<Stmt>(*s);
    for (auto& b : c->body) b = fix(b);
    return c;
  };
  p.aic = fix(p.aic);
  try {
    calls(p);  // select_move_calls finds no quantPre mode for the pair
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(e.message().find("Fixpipe from float32 to int8 has no quantPre mode"), std::string::npos) << e.message();
    EXPECT_EQ(e.span().line, 23);
  }
}

// ---------------------------------------------------------------------------------------------
// The automatic pipeline on every portable example

// The examples whose Tile IR is stored in tests/golden/tile_ir (see the header of each file for
// the example call and sizes).
const char* const kAutoExamples[] = {"seed_matmul", "gemm",      "softmax",        "rms_norm",
                                     "layer_norm",  "gelu_bias", "flash_attention"};

Program auto_program(const std::string& example) {
  fs::path f = tile_ir_dir() / (example + ".tir");
  std::string text = read(f);
  if (text.empty()) throw std::runtime_error("missing " + f.string());
  ir::Kernel k = ir::parse_kernel(text, f.filename().string());
  return *lower_ascend(k, target::find_target("ascend910b")).program;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

class AutoExample : public ::testing::TestWithParam<const char*> {};

TEST_P(AutoExample, Golden) {
  const std::string ex = GetParam();
  Program p = auto_program(ex);
  EXPECT_EQ(p.name, "auto_" + ex);
  check_project("auto_" + ex, p);
}

INSTANTIATE_TEST_SUITE_P(AscendCPrinter, AutoExample, ::testing::ValuesIn(kAutoExamples),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// The forms the automatic pipeline produces, each printed where it occurs.
TEST(AscendCPrinter, AutoFormsAreWhereExpected) {
  // fp32 gemm: the B tile (K x N in L1) reaches L0B through Load3Dv2, A through Load2D.
  std::string seed = print_ascendc_kernel(auto_program("seed_matmul"));
  EXPECT_EQ(count(seed, "LoadData3DParamsV2<float> tw_p;"), 2u) << seed;  // two multi-buffer stages
  EXPECT_NE(seed.find("tw_p.l1H = 64;"), std::string::npos);
  EXPECT_NE(seed.find("tw_p.mExtension = 64;"), std::string::npos);
  EXPECT_NE(seed.find("tw_p.kExtension = 128;"), std::string::npos);
  EXPECT_EQ(seed.find("LoadDataWithTranspose"), std::string::npos);
  // fp16 gemm: the transposing Load2D (16x16 fractals transpose in place).
  std::string gemm = print_ascendc_kernel(auto_program("gemm"));
  EXPECT_NE(gemm.find("tw_p.ifTranspose = true;"), std::string::npos) << gemm;
  EXPECT_EQ(gemm.find("LoadData3DParamsV2"), std::string::npos);
  // rms_norm: W[j] read by every row (column broadcast: source repeat stride 0); rows of 301 fp32
  // padded to 304 (38 blocks); a single-row GM->UB copy prints gap 0.
  std::string rms = print_ascendc_kernel(auto_program("rms_norm"));
  EXPECT_NE(rms.find("BinaryRepeatParams(1, 1, 1, 38, 38, 0)"), std::string::npos) << rms;
  EXPECT_NE(rms.find("DataCopyPad(w, W_gm, DataCopyExtParams{static_cast<uint16_t>(1), static_cast<uint32_t>(1204), "
                     "static_cast<uint32_t>(0), static_cast<uint32_t>(0), 0}"),
            std::string::npos)
      << rms;
  EXPECT_EQ(rms.find("static_cast<uint32_t>(-"), std::string::npos);
  // No V barrier printed twice in a row in any example.
  for (const char* ex : kAutoExamples) {
    std::string k = print_ascendc_kernel(auto_program(ex));
    std::istringstream in(k);
    std::string prev, line;
    while (std::getline(in, line)) {
      auto strip = [](const std::string& l) { return l.substr(0, l.find("  //")); };
      EXPECT_FALSE(strip(line).find("PipeBarrier<PIPE_V>();") != std::string::npos && strip(line) == strip(prev))
          << ex << ": " << line;
      prev = line;
    }
  }
  // flash attention (MIX): GM workspace hand-offs with cross-core flags both ways, the causal
  // mask with a runtime column count (its fill -1e30 scaled by ln 2: fold_exp2_scale turned the
  // scale and exp2 into one exp, as for the kernel the front end builds), event ids beyond 0.
  std::string fa = print_ascendc_kernel(auto_program("flash_attention"));
  EXPECT_NE(fa.find("KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2)"), std::string::npos);
  EXPECT_NE(fa.find("Fixpipe<float, float, CFG_ROW_MAJOR>(workspace_gm_f32["), std::string::npos) << fa;
  EXPECT_NE(fa.find("DataCopyPad(acc_s_ub_in, workspace_gm_f32["), std::string::npos) << fa;  // the staged landing tile
  EXPECT_GE(count(fa, "CrossCoreSetFlag<2, PIPE_FIX>("), 2u);
  EXPECT_GE(count(fa, "CrossCoreWaitFlag<2, PIPE_MTE2>("), 2u);
  EXPECT_NE(fa.find("Duplicate(acc_s_ub[((r_0_s0 * 64) + blk_0_s0)], static_cast<float>(-6.93147181e+29f), tw_max("),
            std::string::npos)
      << fa;
  EXPECT_TRUE(std::regex_search(fa, std::regex(R"(\bSetFlag<HardEvent::[A-Z0-9_]+>\([1-5]\);)"))) << fa;
  // layer_norm in bf16: converted on the way in and out (the AIV computes in fp32).
  std::string ln = print_ascendc_kernel(auto_program("layer_norm"));
  EXPECT_NE(ln.find("Cast("), std::string::npos);
  EXPECT_NE(ln.find("bfloat16_t"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Issue 10: the AscendC API rules the printed calls follow

// TPipe's constructor sets M_MTE1 events 0-2 on the AIC and its destructor waits for them:
// pipe.Destroy() right after the InitBuffer calls takes them before any kernel flag.
TEST(AscendCPrinter, TPipeIsDestroyedAfterInitBufferOnTheAic) {
  std::string k = print_ascendc_kernel(gemm_program());
  size_t destroy = k.find("pipe.Destroy();");
  ASSERT_NE(destroy, std::string::npos) << k;
  EXPECT_LT(k.rfind("pipe.InitBuffer("), destroy) << k;
  EXPECT_LT(destroy, k.find("SetFlag<")) << k;
  Program p = gemm_program();
  p.tpipe_destroy = false;
  EXPECT_EQ(print_ascendc_kernel(p).find("pipe.Destroy()"), std::string::npos);
  EXPECT_EQ(print_ascendc_kernel(softmax_program()).find("pipe.Destroy()"), std::string::npos);  // no AIC
}

// A row count that may be <= 0 (the last AIV of a small M) skips the call instead of wrapping to
// a blockCount of ~65000.
TEST(AscendCPrinter, CountsThatMayNotBePositiveGuardTheCall) {
  std::string k = print_ascendc_kernel(softmax_program());
  size_t g = k.find("if (rt > 0) {");
  ASSERT_NE(g, std::string::npos) << k;
  EXPECT_EQ(k.find("DataCopyPad(", g), k.find('\n', g) + 1 + k.substr(k.find('\n', g) + 1).find("DataCopyPad(")) << k;
  EXPECT_EQ(count(k, "if (rt > 0) {"), 2u) << k;        // the GM -> UB and the UB -> GM copy
  EXPECT_EQ(k.find("if (16 > 0)"), std::string::npos);  // constant counts are not guarded
}

// Cross-core flags in a one-core-type kernel need the MIX_*_1_0 kernel type (CrossCoreSetFlag docs).
TEST(AscendCPrinter, CrossCoreFlagsInAnAivOnlyKernelMakeItMixAiv10) {
  Program p = softmax_program();
  EXPECT_NE(print_ascendc_kernel(p).find("KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY)"), std::string::npos);
  p.aiv = seq({ins(CrossCoreSetFlag{0, Pipe::MTE3, I(1)}, 50), ins(CrossCoreWaitFlag{I(1), Pipe::S}, 51), p.aiv});
  std::string k = print_ascendc_kernel(resolve_cross_waits(p));
  EXPECT_NE(k.find("KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0)"), std::string::npos) << k;
  EXPECT_NE(k.find("CrossCoreWaitFlag<0, PIPE_MTE2>(1);"), std::string::npos) << k;  // the set's mode
}

// The printer prints the wait's mode; choosing it is resolve_cross_waits' decision.
TEST(AscendCPrinter, CrossCoreWaitNeedsResolvedMode) {
  Program p = softmax_program();
  p.aiv = seq({ins(CrossCoreSetFlag{0, Pipe::MTE3, I(1)}, 50), ins(CrossCoreWaitFlag{I(1), Pipe::S}, 51), p.aiv});
  try {
    print_ascendc_kernel(p);
    FAIL() << "expected an error";
  } catch (const ir::Error& e) {
    EXPECT_NE(std::string(e.what()).find("run resolve_cross_waits first"), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, 51);
  }
}

// 8-bit L1 tiles are zeroed through a 16-bit view (InitConstValue has no int8 form on dav-c220).
TEST(AscendCPrinter, InitConstValueUsesTheFillDtype) {
  Program p;
  p.name = "int8_tile";
  p.kernel_type = KernelType::AIC_ONLY;
  p.span = L(1);
  auto M = ir::var("M");
  p.params = {tensor("A", DTypeCode::i8, {M, I(64)})};
  p.shape_vars = {M};
  p.block_dim = I(1);
  p.workspace_bytes = I(0);
  p.block_idx = ir::var("bx");
  int l1 = buf(p, "a1", CoreType::AIC, Mem::L1, 0, 2048, DTypeCode::i8, {32, 64}, Format::Nz, 2);
  p.aic = seq({ins(CopyGmToL1{gm(0, I(0)), at(l1), DTypeCode::i8, min(M, I(32)), I(64), I(64), I(32), I(64), DTypeCode::f16}, 3)});
  std::string k = print_ascendc_kernel(calls(p));
  EXPECT_NE(k.find("InitConstValue(a1.ReinterpretCast<half>(), InitConstValueParams<half>{1, static_cast<uint16_t>(64), 0, "
                   "static_cast<half>(0)});  // line 3"),
            std::string::npos)
      << k;
  EXPECT_EQ(k.find("InitConstValueParams<int8_t>"), std::string::npos) << k;
}

// A float row max wider than one repeat folds the column chunks with Max into a repeat-wide row
// and reduces it once: no WholeReduceMax writes a partial at a 4-byte offset.
TEST(AscendCPrinter, WideRowMaxFoldsChunksBeforeOneWholeReduce) {
  std::string k = print_ascendc_kernel(softmax_program());
  EXPECT_NE(k.find("Muls(tw_vec_scratch_.ReinterpretCast<float>(), x, static_cast<float>(1.0f), 64, 16, UnaryRepeatParams(1, 1, 8, 32));"),
            std::string::npos)
      << k;
  EXPECT_NE(k.find("Max(tw_vec_scratch_.ReinterpretCast<float>(), tw_vec_scratch_.ReinterpretCast<float>(), x[192], 64, 16, "
                   "BinaryRepeatParams(1, 1, 1, 8, 8, 32));"),
            std::string::npos)
      << k;
  EXPECT_NE(k.find("WholeReduceMax(row_max, tw_vec_scratch_.ReinterpretCast<float>(), 64, 16, 1, 1, 8, ReduceOrder::ORDER_ONLY_VALUE);"),
            std::string::npos)
      << k;
  EXPECT_EQ(k.find("WholeReduceMax(tw_vec_scratch_"), std::string::npos) << k;
}

}  // namespace
}  // namespace tw::ascend
