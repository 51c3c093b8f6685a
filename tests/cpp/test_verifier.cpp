// Verifier: one well-formed kernel, then one broken kernel per check, each asserting the message
// and the source line of the offending node.
#include <gtest/gtest.h>

#include <limits>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tilewright/ir.h"

namespace tw::ir {
namespace {

Span L(int line) { return Span{"model.py", line, 5}; }
Expr c(int64_t v) { return int_imm(v); }
Expr mul(Expr a, Expr b) { return binary(BinOp::Mul, a, b); }
Stmt seq(std::vector<Stmt> b, Span s = L(2)) { return std::make_shared<SeqNode>(std::move(b), s); }
Region reg(Buffer b, std::vector<std::pair<Expr, int64_t>> dims) {
  Region r{b, {}, {}};
  for (auto& [s, e] : dims) {
    r.starts.push_back(s);
    r.extents.push_back(c(e));
  }
  return r;
}
Stmt loop(Var v, Expr ext, ForKind k, int stages, Stmt body, Span s) {
  return std::make_shared<ForNode>(v, c(0), ext, k, stages, body, s);
}
Stmt alloc(Buffer b, int line) { return std::make_shared<AllocNode>(b, L(line)); }
Stmt copy(Region a, Region b, int line) { return std::make_shared<CopyNode>(a, b, L(line)); }
Stmt gemm(Region a, Region b, Region cc, int line, bool ta = false, bool tb = false) {
  return std::make_shared<GemmNode>(a, b, cc, ta, tb, false, L(line));
}
Stmt store(Buffer b, std::vector<Expr> idx, Expr v, int line) {
  return std::make_shared<StoreNode>(b, std::move(idx), v, L(line));
}

// A: float16[M, 64], B: float16[64, N], C: float32[M, N] out, alpha: float32; grid (bx, by).
struct K {
  Var M = var("M", kIndexType, L(1)), N = var("N", kIndexType, L(1));
  Buffer A = buffer("A", DTypeCode::f16, {M, c(64)}, Scope::global, L(1));
  Buffer B = buffer("B", DTypeCode::f16, {c(64), N}, Scope::global, L(1));
  Buffer C = buffer("C", DTypeCode::f32, {M, N}, Scope::global, L(1));
  Var alpha = var("alpha", DTypeCode::f32, L(1));
  Var bx = var("bx", kIndexType, L(1)), by = var("by", kIndexType, L(1));
  Buffer A_s = buffer("A_s", DTypeCode::f16, {c(128), c(64)}, Scope::shared, L(3));
  Buffer B_s = buffer("B_s", DTypeCode::f16, {c(64), c(128)}, Scope::shared, L(4));
  Buffer C_f = buffer("C_f", DTypeCode::f32, {c(128), c(128)}, Scope::fragment, L(5));
  std::vector<Param> params() { return {{A, nullptr, false}, {B, nullptr, false}, {C, nullptr, true}, {nullptr, alpha, false}}; }
  Kernel make(std::vector<Stmt> extra) {
    std::vector<Stmt> body{alloc(A_s, 3), alloc(B_s, 4), alloc(C_f, 5)};
    for (auto& s : extra) body.push_back(s);
    return std::make_shared<KernelNode>("mm", params(), std::vector<Var>{bx, by},
                                        std::vector<Expr>{binary(BinOp::CeilDiv, N, c(128)), binary(BinOp::CeilDiv, M, c(128))},
                                        seq(body), L(1));
  }
  Region a_tile() { return reg(A, {{mul(by, c(128)), 128}, {c(0), 64}}); }
};

void expect_error(const Kernel& k, const std::string& msg, int line) {
  try {
    verify(k);
    ADD_FAILURE() << "expected a verifier error containing '" << msg << "' for\n" << print(k);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(msg), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, line) << e.what();
    EXPECT_EQ(e.span().file, "model.py") << e.what();
    EXPECT_FALSE(e.hint().empty()) << e.what();
  }
}

TEST(Verifier, AcceptsMatmulWithTailsAndInputWrites) {
  K k;
  auto kv = var("k", kIndexType, L(6));
  auto i = var("i", kIndexType, L(10)), j = var("j", kIndexType, L(10));
  auto t = var("t", DTypeCode::f32, L(11));
  Kernel kern = k.make({
      std::make_shared<FillNode>(full_region(k.C_f), float_imm(0.0), L(6)),
      loop(kv, c(1), ForKind::pipelined, 2,
           seq({copy(k.a_tile(), full_region(k.A_s), 7),
                copy(reg(k.B, {{c(0), 64}, {mul(k.bx, c(128)), 128}}), full_region(k.B_s), 8),
                gemm(full_region(k.A_s), full_region(k.B_s), full_region(k.C_f), 9)}),
           L(6)),
      loop(i, c(128), ForKind::parallel, 0,
           loop(j, c(128), ForKind::parallel, 0,
                seq({std::make_shared<LetNode>(t, mul(load(k.C_f, {i, j}), k.alpha), L(11)),
                     std::make_shared<IfNode>(binary(BinOp::LT, i, c(64)), store(k.C_f, {i, j}, t, 12), nullptr, L(12))}),
                L(10)),
           L(10)),
      // Global regions may extend past the tensor (tails); writing an input tensor is allowed.
      copy(full_region(k.C_f), reg(k.C, {{mul(k.by, c(128)), 128}, {mul(k.bx, c(128)), 128}}), 13),
      store(k.A, {c(0), c(0)}, float_imm(1.0, DTypeCode::f16), 14),
  });
  EXPECT_NO_THROW(verify(kern)) << print(kern);
  // The text form verifies too, and verifier errors on parsed text point into the text.
  Kernel parsed = parse_kernel(print(kern), "mm.tw");
  EXPECT_NO_THROW(verify(parsed));
}

TEST(Verifier, NamesMustBeIdentifiers) {
  // Names reach generated code and file names: a newline would end a // comment, a quote a string
  // literal, "../x" a TW_DUMP_IR path.
  K k;
  for (std::string bad : std::vector<std::string>{"mm\nint x;", "../x", "a\"b", "", "1st", std::string(300, 'a')}) {
    auto kernel = std::make_shared<KernelNode>(bad, k.params(), std::vector<Var>{k.bx, k.by},
                                               std::vector<Expr>{c(1), c(1)}, seq({}), L(1));
    expect_error(kernel, "kernel name '", 1);
  }
  Buffer bad_param = buffer("A\")", DTypeCode::f16, {c(64)}, Scope::global, L(1));
  auto kernel = std::make_shared<KernelNode>("mm", std::vector<Param>{{bad_param, nullptr, false}}, std::vector<Var>{},
                                             std::vector<Expr>{}, seq({}), L(1));
  expect_error(kernel, "parameter name 'A\")' is not an identifier", 1);
  auto T = buffer("t\n", DTypeCode::f32, {c(8)}, Scope::fragment, L(6));
  expect_error(k.make({alloc(T, 6)}), "buffer name 't\\x0a' is not an identifier", 6);
  auto i = var("i j", kIndexType, L(7));
  expect_error(k.make({loop(i, c(4), ForKind::serial, 0, seq({}), L(7))}), "loop name 'i j'", 7);
}

TEST(Verifier, ConstantIntegerDivisionByZero) {
  K k;
  for (BinOp op : {BinOp::FloorDiv, BinOp::Mod, BinOp::CeilDiv}) {
    Expr e = binary(op, k.by, binary(BinOp::Mul, c(0), c(5)));  // a constant 0, not a literal
    expect_error(k.make({store(k.C_f, {c(0), c(0)}, cast(e, DTypeCode::f32), 7)}), "integer division by zero", 7);
  }
}

TEST(Verifier, IntegerTrueDivisionIsAnInternalError) {
  // ir::binary makes `/` of integers a float32 division; a BinaryNode built directly with integer
  // operands would print as C++ integer `/` and be a float division in the ascend simulator.
  K k;
  EXPECT_EQ(binary(BinOp::Div, k.by, c(2))->dtype, DType(DTypeCode::f32));
  Expr e = std::make_shared<BinaryNode>(BinOp::Div, k.by, c(2), k.by->dtype, L(7));
  expect_error(k.make({store(k.C_f, {c(0), c(0)}, cast(e, DTypeCode::f32), 7)}), "internal: true division '/' on integers", 7);
}

TEST(Verifier, TileWhoseByteSizeWrapsIsRejected) {
  K k;
  // 2^40 * 2^40 float32 elements: the byte count wraps to 0 in 64 bits.
  auto T = buffer("T", DTypeCode::f32, {c(int64_t(1) << 40), c(int64_t(1) << 40)}, Scope::fragment, L(6));
  expect_error(k.make({alloc(T, 6)}), "is too large", 6);
}

TEST(Verifier, ConstantFolderNeverTraps) {
  // (x - x + INT64_MIN) // -1 once raised SIGFPE in as_const_int.
  const int64_t mn = std::numeric_limits<int64_t>::min();
  Expr e = binary(BinOp::FloorDiv, binary(BinOp::Add, int_imm(0, DTypeCode::i64), int_imm(mn, DTypeCode::i64)),
                  int_imm(-1, DTypeCode::i64));
  EXPECT_EQ(as_const_int(e), std::nullopt);
  EXPECT_EQ(as_const_int(binary(BinOp::Mod, int_imm(mn, DTypeCode::i64), int_imm(-1, DTypeCode::i64))), std::nullopt);
  EXPECT_EQ(as_const_int(binary(BinOp::Mul, int_imm(mn, DTypeCode::i64), int_imm(-1, DTypeCode::i64))), std::nullopt);
  EXPECT_EQ(as_const_int(binary(BinOp::Add, int_imm(std::numeric_limits<int64_t>::max(), DTypeCode::i64),
                                int_imm(1, DTypeCode::i64))),
            std::nullopt);
  EXPECT_EQ(as_const_int(unary(UnOp::Neg, int_imm(mn, DTypeCode::i64))), std::nullopt);
  EXPECT_EQ(as_const_int(binary(BinOp::FloorDiv, int_imm(-7, DTypeCode::i64), int_imm(2, DTypeCode::i64))), -4);
}

TEST(Verifier, VariableOutOfScope) {
  K k;
  auto i = var("i", kIndexType, L(6));
  expect_error(k.make({loop(i, c(4), ForKind::serial, 0, seq({}), L(6)), store(k.C_f, {i, c(0)}, float_imm(1.0), 7)}),
               "variable 'i' is used outside its scope", 7);
}

TEST(Verifier, BufferOutOfScope) {
  K k;
  auto T = buffer("T", DTypeCode::f32, {c(8)}, Scope::fragment, L(7));
  expect_error(k.make({std::make_shared<IfNode>(binary(BinOp::LT, k.bx, c(1)), seq({alloc(T, 7)}), nullptr, L(6)),
                       store(T, {c(0)}, float_imm(0.0), 8)}),
               "buffer 'T' is used outside its scope", 8);
}

TEST(Verifier, AllocOfGlobal) {
  K k;
  auto G = buffer("G", DTypeCode::f32, {c(8)}, Scope::global, L(6));
  expect_error(k.make({alloc(G, 6)}), "cannot alloc global buffer 'G'", 6);
}

TEST(Verifier, IndexRankMismatch) {
  K k;
  expect_error(k.make({store(k.C_f, {c(0)}, float_imm(1.0), 6)}), "'C_f' has 2 dimension(s) (shape 128x128) but is indexed with 1", 6);
}

TEST(Verifier, FloatIndex) {
  K k;
  Expr bad = std::make_shared<LoadNode>(k.C_f, std::vector<Expr>{float_imm(1.0), c(0)}, DTypeCode::f32, L(6));
  expect_error(k.make({store(k.C_f, {c(0), c(0)}, bad, 6)}), "index into 'C_f' must be an integer, got float32", 6);
}

TEST(Verifier, CopyShapeMismatch) {
  K k;
  auto T = buffer("T", DTypeCode::f16, {c(64), c(128)}, Scope::shared, L(6));
  expect_error(k.make({alloc(T, 6), copy(reg(k.A, {{c(0), 128}, {c(0), 64}}), full_region(T), 7)}),
               "copy shape mismatch: A[0:+128, 0:+64] is 128x64 but T[0:+64, 0:+128] is 64x128", 7);
}

TEST(Verifier, CopyNonConstantExtent) {
  K k;
  Region r{k.A, {c(0), c(0)}, {k.M, c(64)}};
  expect_error(k.make({copy(r, full_region(k.A_s), 6)}), "copy: extents must be constants, but A[0:+M, 0:+64] has extent M", 6);
}

// A run-time extent min(C, e) (ir.h): on a copy's tensor side its bound C stands for it; on a
// tile's side, or in another tile op, it is an error.
TEST(Verifier, CopyRunTimeExtent) {
  K k;
  Expr rows = binary(BinOp::Min, c(128), binary(BinOp::Sub, k.M, mul(k.by, c(128))));
  EXPECT_EQ(runtime_extent(rows)->bound, 128);
  EXPECT_EQ(extent_bound(binary(BinOp::Min, k.M, c(7))), 7);  // simplify puts the constant second
  EXPECT_FALSE(extent_bound(binary(BinOp::Max, k.M, c(7))));
  Region g{k.A, {mul(k.by, c(128)), c(0)}, {rows, c(64)}};
  EXPECT_NO_THROW(verify(k.make({copy(g, full_region(k.A_s), 6), copy(full_region(k.A_s), g, 7)})));
  expect_error(k.make({copy(Region{k.A_s, {c(0), c(0)}, {rows, c(64)}}, reg(k.A, {{c(0), 128}, {c(0), 64}}), 6)}),
               "copy: the extent min(128, M - by * 128) of tile 'A_s' is a run-time value", 6);
  expect_error(k.make({copy(Region{k.A, {c(0), c(0)}, {binary(BinOp::Min, c(256), k.M), c(64)}}, full_region(k.A_s), 6)}),
               "copy shape mismatch: A[0:+min(256, M), 0:+64] is 256x64 but A_s[0:+128, 0:+64] is 128x64", 6);
  // only a plain T.copy takes one: not T.atomic_add, not a gemm operand
  expect_error(k.make({std::make_shared<CopyNode>(full_region(k.A_s), g, L(8), true)}),
               "T.atomic_add: the extent min(128, M - by * 128) of A[by * 128:+min(128, M - by * 128), 0:+64] is a "
               "run-time value", 8);
  expect_error(k.make({gemm(Region{k.A_s, {c(0), c(0)}, {rows, c(64)}}, full_region(k.B_s), full_region(k.C_f), 9)}),
               "gemm: the extent min(128, M - by * 128) of A_s[0:+min(128, M - by * 128), 0:+64] is a run-time value", 9);
}

TEST(Verifier, GemmKMismatch) {
  K k;
  expect_error(k.make({gemm(full_region(k.A_s), full_region(k.A_s), full_region(k.C_f), 6)}),
               "gemm shape mismatch: K differs (64 vs 128): op(A) A_s[0:+128, 0:+64] is 128x64 (MxK), op(B) "
               "A_s[0:+128, 0:+64] is 128x64 (KxN), C C_f[0:+128, 0:+128] is 128x128 (MxN)",
               6);
}

TEST(Verifier, GemmTransposeMismatchN) {
  K k;
  auto Bt = buffer("Bt", DTypeCode::f16, {c(64), c(64)}, Scope::shared, L(6));
  expect_error(k.make({alloc(Bt, 6), gemm(full_region(k.A_s), full_region(Bt), full_region(k.C_f), 7, false, true)}),
               "gemm shape mismatch: N differs (64 vs 128)", 7);
}

TEST(Verifier, GemmAccumulatorScope) {
  K k;
  auto Cs = buffer("C_s", DTypeCode::f32, {c(128), c(128)}, Scope::shared, L(6));
  expect_error(k.make({alloc(Cs, 6), gemm(full_region(k.A_s), full_region(k.B_s), full_region(Cs), 7)}),
               "accumulator C 'C_s' must be a fragment (or L0C) buffer, got shared", 7);
}

TEST(Verifier, GemmAccumulatorDtype) {
  K k;
  auto Ch = buffer("C_h", DTypeCode::f16, {c(128), c(128)}, Scope::fragment, L(6));
  expect_error(k.make({alloc(Ch, 6), gemm(full_region(k.A_s), full_region(k.B_s), full_region(Ch), 7)}),
               "accumulator 'C_h' is float16 but float16 inputs accumulate in float32", 7);
}

TEST(Verifier, GemmInt8AccumulatesInInt32) {
  K k;
  auto Ai = buffer("A_i", DTypeCode::i8, {c(128), c(64)}, Scope::shared, L(6));
  auto Bi = buffer("B_i", DTypeCode::i8, {c(64), c(128)}, Scope::shared, L(6));
  expect_error(k.make({alloc(Ai, 6), alloc(Bi, 6), gemm(full_region(Ai), full_region(Bi), full_region(k.C_f), 7)}),
               "accumulator 'C_f' is float32 but int8 inputs accumulate in int32", 7);
}

TEST(Verifier, GemmOperandDtypes) {
  K k;
  auto Bf = buffer("B_f", DTypeCode::f32, {c(64), c(128)}, Scope::shared, L(6));
  expect_error(k.make({alloc(Bf, 6), gemm(full_region(k.A_s), full_region(Bf), full_region(k.C_f), 7)}),
               "A and B must have the same dtype, but 'A_s' is float16 and 'B_f' is float32", 7);
}

TEST(Verifier, ReduceAxisOutOfRange) {
  K k;
  auto r = buffer("r", DTypeCode::f32, {c(128)}, Scope::fragment, L(6));
  expect_error(k.make({alloc(r, 6), std::make_shared<ReduceNode>(k.C_f, r, ReduceKind::sum, 2, true, L(7))}),
               "reduce sum: axis 2 is out of range for 'C_f' of shape 128x128 (2 dims)", 7);
}

TEST(Verifier, ReduceShapeAndDtype) {
  K k;
  auto r = buffer("r", DTypeCode::f32, {c(64)}, Scope::fragment, L(6));
  expect_error(k.make({alloc(r, 6), std::make_shared<ReduceNode>(k.C_f, r, ReduceKind::max, 1, true, L(7))}),
               "reduce max: 'r' has shape 64 but reducing 'C_f' (128x128) over axis 1 gives 128", 7);
  K k2;
  auto h = buffer("h", DTypeCode::f16, {c(128)}, Scope::fragment, L(6));
  expect_error(k2.make({alloc(h, 6), std::make_shared<ReduceNode>(k2.C_f, h, ReduceKind::sum, 0, true, L(8))}),
               "reduce sum: 'C_f' is float32 but 'h' is float16", 8);
}

TEST(Verifier, NumStages) {
  K k;
  expect_error(k.make({loop(var("k", kIndexType, L(6)), c(4), ForKind::pipelined, 0, seq({}), L(6))}),
               "pipelined loop over 'k' needs num_stages >= 1, got 0", 6);
  K k2;
  expect_error(k2.make({loop(var("k", kIndexType, L(7)), c(4), ForKind::serial, 2, seq({}), L(7))}),
               "num_stages=2 is only valid for pipelined loops", 7);
}

TEST(Verifier, ParallelExtentMustBeConstant) {
  K k;
  expect_error(k.make({loop(var("i", kIndexType, L(6)), k.M, ForKind::parallel, 0, seq({}), L(6))}),
               "parallel loop over 'i' needs a constant extent, got M", 6);
}

TEST(Verifier, TileOpInsideParallelLoop) {
  K k;
  expect_error(k.make({loop(var("i", kIndexType, L(6)), c(4), ForKind::parallel, 0,
                            seq({copy(k.a_tile(), full_region(k.A_s), 7)}), L(6))}),
               "copy is not allowed inside a parallel loop", 7);
  K k2;
  expect_error(k2.make({loop(var("i", kIndexType, L(6)), c(4), ForKind::parallel, 0,
                             seq({loop(var("j", kIndexType, L(8)), c(4), ForKind::serial, 0, seq({}), L(8))}), L(6))}),
               "serial loop over 'j' is not allowed inside a parallel loop", 8);
}

TEST(Verifier, TileRegionOutOfBounds) {
  K k;
  expect_error(k.make({copy(reg(k.A, {{c(0), 128}, {c(0), 64}}), reg(k.A_s, {{c(64), 128}, {c(0), 64}}), 6)}),
               "region A_s[64:+128, 0:+64] is out of bounds of shared buffer 'A_s' (128x64): dim 0 covers 64..192", 6);
}

TEST(Verifier, GridShape) {
  K k;
  Kernel bad = std::make_shared<KernelNode>("mm", k.params(), std::vector<Var>{k.bx, k.by},
                                            std::vector<Expr>{c(4)}, seq({}), L(1));
  expect_error(bad, "kernel 'mm' has 2 block variable(s) but 1 grid extent(s)", 1);
  Kernel bad2 = std::make_shared<KernelNode>("mm", k.params(), std::vector<Var>{k.bx},
                                             std::vector<Expr>{float_imm(4.0, DTypeCode::f32, L(1))}, seq({}), L(1));
  expect_error(bad2, "grid extent must be an integer, got float32", 1);
}

TEST(Verifier, ScalarParamIsReadOnly) {
  K k;
  expect_error(k.make({std::make_shared<LetNode>(k.alpha, float_imm(2.0), L(6))}), "scalar parameter 'alpha' cannot be assigned", 6);
}

TEST(Verifier, StoreConversionAndTypes) {
  K k;
  auto m = buffer("m", DTypeCode::boolean, {c(4)}, Scope::fragment, L(6));
  expect_error(k.make({alloc(m, 6), store(m, {c(0)}, float_imm(1.0), 7)}), "cannot store a float32 value into bool buffer 'm'", 7);
  K k2;
  expect_error(k2.make({std::make_shared<IfNode>(k2.bx, seq({}), nullptr, L(9))}), "if condition must be bool, got int32 (bx)", 9);
  K k3;
  auto i = var("i", kIndexType, L(6));
  expect_error(k3.make({std::make_shared<ForNode>(i, c(0), float_imm(4.0, DTypeCode::f32, L(6)), ForKind::serial, 0, seq({}), L(6))}),
               "extent of loop 'i' must be an integer, got float32 (4.0)", 6);
}

TEST(Verifier, TensorParamMustBeGlobal) {
  K k;
  auto S = buffer("S", DTypeCode::f32, {c(4)}, Scope::shared, L(1));
  Kernel bad = std::make_shared<KernelNode>("mm", std::vector<Param>{{S, nullptr, false}}, std::vector<Var>{},
                                            std::vector<Expr>{}, seq({}), L(1));
  expect_error(bad, "tensor parameter 'S' must be in global memory, got shared", 1);
}

// Ascend expert mode -------------------------------------------------------------------------

// An expert-mode kernel with `body` (text) inside; verifier errors point into the text.
void expect_expert_error(const std::string& body, const std::string& msg, int line) {
  std::string text = "kernel e(A: global float16[64, 64], O: global float16[64, 64] out)\n"
                     "    grid(c = 2) sub_block(v) {\n"
                     "  alloc u: UB float16[64, 64]\n"
                     "  alloc l1: L1 float16[64, 64]\n" + body + "}\n";
  Kernel k = parse_kernel(text, "e.tw");
  try {
    verify(k);
    ADD_FAILURE() << "expected a verifier error containing '" << msg << "' for\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(msg), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, line) << e.what();
    EXPECT_EQ(e.span().file, "e.tw") << e.what();
    EXPECT_FALSE(e.hint().empty()) << e.what();
  }
}

TEST(Verifier, ExpertModeAcceptsLegalFlags) {
  const char* text = R"(kernel e(A: global float16[64, 64], O: global float16[64, 64] out)
    grid(c = 2) sub_block(v) {
  alloc u: UB float16[64, 64]
  alloc l1: L1 float16[64, 64]
  scope V {
    copy A[0:+64, 0:+64] -> u
    sync set_flag(MTE2, V, 0)
    sync wait_flag(MTE2, V, 0)
    sync set_flag(V, MTE3, v)
    sync wait_flag(V, MTE3, v)
    copy u -> O[0:+64, 0:+64]
    sync pipe_barrier(ALL)
    sync set_cross_flag(2, MTE3, 10)
  }
  scope C {
    sync wait_cross_flag(10)
    copy A[0:+64, 0:+64] -> l1
    sync set_flag(MTE2, MTE1, 7)
    sync wait_flag(MTE2, MTE1, 7)
    sync pipe_barrier(MTE1)
  }
})";
  EXPECT_NO_THROW(verify(parse_kernel(text, "e.tw")));
}

TEST(Verifier, ExpertModeFlagPairs) {
  expect_expert_error("  scope V {\n    sync set_flag(MTE2, MTE1, 0)\n  }\n", "Vector core (AIV) has no pipe MTE1", 6);
  expect_expert_error("  scope C {\n    sync set_flag(M, MTE3, 0)\n  }\n",
                      "M -> MTE3 is not a flag pair of the Cube core (AIC)", 6);
  expect_expert_error("  scope V {\n    sync wait_flag(V, V, 0)\n  }\n", "V -> V is not a flag pair", 6);
  expect_expert_error("  scope V {\n    sync set_flag(MTE2, V, 8)\n  }\n", "event id 8 is out of range 0..7", 6);
  expect_expert_error("  scope C {\n    sync pipe_barrier(V)\n  }\n", "Cube core (AIC) has no pipe V", 6);
  expect_expert_error("  scope V {\n    sync set_flag(ALL, V, 0)\n  }\n", "pipe ALL is only valid for T.pipe_barrier", 6);
  expect_expert_error("  scope V {\n    sync set_cross_flag(3, MTE3, 0)\n  }\n", "mode 3 is not 0, 1 or 2", 6);
  expect_expert_error("  scope V {\n    sync wait_cross_flag(11)\n  }\n", "flag id 11 is out of range 0..10", 6);
}

TEST(Verifier, ExpertModeScopes) {
  expect_expert_error("  sync pipe_barrier(V)\n", "outside T.Scope", 5);
  expect_expert_error("  scope C {\n    scope V {\n    }\n  }\n", "core scopes do not nest", 6);
  expect_expert_error("  scope C {\n    copy A[0:+64, 0:+64] -> u\n  }\n", "UB buffer 'u' is used in code that runs on the Cube core", 6);
  expect_expert_error("  scope V {\n    copy A[0:+64, 0:+64] -> l1\n  }\n", "L1 buffer 'l1' is used in code that runs on the Vector core", 6);
  expect_expert_error("  copy l1 -> u\n", "no data path L1 -> UB", 5);
  // Scopes and flags need an expert-mode kernel.
  Kernel k = parse_kernel("kernel p(A: global float16[64]) grid(b = 1) {\n  scope C {\n  }\n}\n", "p.tw");
  try {
    verify(k);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("only valid in an Ascend expert-mode kernel"), std::string::npos) << e.what();
    EXPECT_EQ(e.span().line, 2);
  }
}

TEST(Verifier, ErrorsOnParsedTextPointIntoTheText) {
  const char* text = R"(kernel k(A: global float32[64, 64] out) grid(b = 1) {
  alloc T: shared float32[32, 32]
  copy A[0:+64, 0:+64] -> T
})";
  Kernel k = parse_kernel(text, "k.tw");
  try {
    verify(k);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("copy shape mismatch: A[0:+64, 0:+64] is 64x64 but T[0:+32, 0:+32] is 32x32"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.span().file, "k.tw");
    EXPECT_EQ(e.span().line, 3);
    EXPECT_EQ(e.span().col, 3);
  }
}

}  // namespace
}  // namespace tw::ir
