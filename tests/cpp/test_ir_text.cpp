// Printer golden texts, parser round trips and parse errors for the Tile IR text form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tilewright/ir.h"

namespace tw::ir {
namespace {

Span L(int line, int col = 1) { return Span{"kern.py", line, col}; }
Expr i32(int64_t v) { return int_imm(v); }
Expr f32(double v) { return float_imm(v); }
Expr add(Expr a, Expr b) { return binary(BinOp::Add, a, b); }
Expr sub(Expr a, Expr b) { return binary(BinOp::Sub, a, b); }
Expr mul(Expr a, Expr b) { return binary(BinOp::Mul, a, b); }
Stmt seq(std::vector<Stmt> b, Span s = {}) { return std::make_shared<SeqNode>(std::move(b), s); }
Region reg(Buffer b, std::vector<std::pair<Expr, int64_t>> dims) {
  Region r{b, {}, {}};
  for (auto& [s, e] : dims) {
    r.starts.push_back(s);
    r.extents.push_back(i32(e));
  }
  return r;
}
Stmt loop(Var v, Expr mn, Expr ext, ForKind k, int stages, Stmt body, Span s) {
  return std::make_shared<ForNode>(v, mn, ext, k, stages, body, s);
}

// C = alpha * A @ B with 128x128 tiles, a 3-stage pipelined K loop.
Kernel matmul_kernel() {
  auto M = var("M", kIndexType, L(1)), N = var("N", kIndexType, L(1)), K = var("K", kIndexType, L(1));
  auto A = buffer("A", DTypeCode::f16, {M, K}, Scope::global, L(1));
  auto B = buffer("B", DTypeCode::f16, {K, N}, Scope::global, L(1));
  auto C = buffer("C", DTypeCode::f32, {M, N}, Scope::global, L(1));
  auto alpha = var("alpha", DTypeCode::f32, L(1));
  auto bx = var("bx", kIndexType, L(2)), by = var("by", kIndexType, L(2));
  auto A_s = buffer("A_s", DTypeCode::f16, {i32(128), i32(32)}, Scope::shared, L(3));
  auto B_s = buffer("B_s", DTypeCode::f16, {i32(32), i32(128)}, Scope::shared, L(4));
  auto C_f = buffer("C_f", DTypeCode::f32, {i32(128), i32(128)}, Scope::fragment, L(5));
  auto k = var("k", kIndexType, L(7));
  auto i = var("i", kIndexType, L(11)), j = var("j", kIndexType, L(12));
  Stmt kloop = loop(k, i32(0), binary(BinOp::CeilDiv, K, i32(32)), ForKind::pipelined, 3,
                    seq({std::make_shared<CopyNode>(reg(A, {{mul(by, i32(128)), 128}, {mul(k, i32(32)), 32}}),
                                                    full_region(A_s), L(8)),
                         std::make_shared<CopyNode>(reg(B, {{mul(k, i32(32)), 32}, {mul(bx, i32(128)), 128}}),
                                                    full_region(B_s), L(9)),
                         std::make_shared<GemmNode>(full_region(A_s), full_region(B_s), full_region(C_f), false,
                                                    false, false, L(10))},
                        L(7)),
                    L(7));
  Stmt scale = loop(i, i32(0), i32(128), ForKind::parallel, 0,
                    seq({loop(j, i32(0), i32(128), ForKind::parallel, 0,
                              seq({std::make_shared<StoreNode>(C_f, std::vector<Expr>{i, j},
                                                               mul(load(C_f, {i, j}), alpha), L(13))},
                                  L(12)),
                              L(12))},
                        L(11)),
                    L(11));
  Stmt body = seq({std::make_shared<AllocNode>(A_s, L(3)), std::make_shared<AllocNode>(B_s, L(4)),
                   std::make_shared<AllocNode>(C_f, L(5)), std::make_shared<FillNode>(full_region(C_f), f32(0.0), L(6)),
                   kloop, scale,
                   std::make_shared<CopyNode>(full_region(C_f),
                                              reg(C, {{mul(by, i32(128)), 128}, {mul(bx, i32(128)), 128}}), L(14))},
                  L(2));
  std::vector<Param> params{{A, nullptr, false}, {B, nullptr, false}, {C, nullptr, true}, {nullptr, alpha, false}};
  return std::make_shared<KernelNode>("matmul", params, std::vector<Var>{bx, by},
                                      std::vector<Expr>{binary(BinOp::CeilDiv, N, i32(128)),
                                                        binary(BinOp::CeilDiv, M, i32(128))},
                                      body, L(1));
}

// Row softmax of 64-row blocks: reduce max, exp(x - max) in a parallel map, reduce sum, divide.
Kernel softmax_kernel() {
  auto N = var("N", kIndexType, L(20));
  auto X = buffer("X", DTypeCode::f32, {N, i32(256)}, Scope::global, L(20));
  auto Y = buffer("Y", DTypeCode::f32, {N, i32(256)}, Scope::global, L(20));
  auto bx = var("bx", kIndexType, L(21));
  auto X_f = buffer("X_f", DTypeCode::f32, {i32(64), i32(256)}, Scope::fragment, L(22));
  auto mx = buffer("row_max", DTypeCode::f32, {i32(64)}, Scope::fragment, L(23));
  auto sm = buffer("row_sum", DTypeCode::f32, {i32(64)}, Scope::fragment, L(24));
  auto i = var("i", kIndexType, L(27)), j = var("j", kIndexType, L(27));
  auto i2 = var("i", kIndexType, L(30)), j2 = var("j", kIndexType, L(30));  // same names, distinct vars
  auto map2 = [&](Var a, Var b, Stmt st, int line) {
    return loop(a, i32(0), i32(64), ForKind::parallel, 0,
                loop(b, i32(0), i32(256), ForKind::parallel, 0, st, L(line)), L(line));
  };
  Stmt body = seq(
      {std::make_shared<AllocNode>(X_f, L(22)), std::make_shared<AllocNode>(mx, L(23)),
       std::make_shared<AllocNode>(sm, L(24)),
       std::make_shared<CopyNode>(reg(X, {{mul(bx, i32(64)), 64}, {i32(0), 256}}), full_region(X_f), L(25)),
       std::make_shared<ReduceNode>(X_f, mx, ReduceKind::max, 1, true, L(26)),
       map2(i, j,
            std::make_shared<StoreNode>(X_f, std::vector<Expr>{i, j},
                                        call(MathFn::exp, {sub(load(X_f, {i, j}), load(mx, {i}))}), L(28)),
            27),
       std::make_shared<ReduceNode>(X_f, sm, ReduceKind::sum, 1, true, L(29)),
       map2(i2, j2,
            std::make_shared<StoreNode>(X_f, std::vector<Expr>{i2, j2},
                                        binary(BinOp::Div, load(X_f, {i2, j2}), load(sm, {i2})), L(31)),
            30),
       std::make_shared<CopyNode>(full_region(X_f), reg(Y, {{mul(bx, i32(64)), 64}, {i32(0), 256}}), L(32))},
      L(21));
  return std::make_shared<KernelNode>("softmax", std::vector<Param>{{X, nullptr, false}, {Y, nullptr, true}},
                                      std::vector<Var>{bx},
                                      std::vector<Expr>{binary(BinOp::CeilDiv, N, i32(64))}, body, L(20));
}

// Scalar control flow and expression forms: if/else, let, where, casts, math, literals of
// every flavour, operator precedence, a name that is a keyword.
Kernel misc_kernel() {
  auto n = var("n", kIndexType, L(40));
  auto X = buffer("X", DTypeCode::f16, {n}, Scope::global, L(40));
  auto Y = buffer("Y", DTypeCode::f32, {n}, Scope::global, L(40));
  auto flag = var("flag", DTypeCode::boolean, L(40));
  auto bx = var("bx", kIndexType, L(41));
  auto t = var("t", kIndexType, L(42));
  auto big = var("in", DTypeCode::i64, L(43));  // "in" is a keyword: printed renamed
  auto x = var("x", DTypeCode::f16, L(44));
  auto u = var("u", kIndexType, L(46));
  auto T_f = buffer("T_f", DTypeCode::f32, {i32(4)}, Scope::fragment, L(45));
  Expr idx = add(mul(bx, i32(4)), u);
  Expr xv = load(X, {idx});
  // where(x > 0, x * 1.5f16, -x) : f16
  Expr act = select(binary(BinOp::GT, xv, float_imm(0.0, DTypeCode::f16)),
                    mul(xv, float_imm(1.5, DTypeCode::f16)), unary(UnOp::Neg, xv));
  // (a + b) * c - -(2) ; floor/mod/min/max and precedence
  Expr arith = sub(mul(add(bx, i32(3)), binary(BinOp::FloorDiv, bx, i32(2))), unary(UnOp::Neg, i32(2)));
  Expr mixed = binary(BinOp::Min, binary(BinOp::Mod, arith, i32(-7)), binary(BinOp::Max, bx, i32(0)));
  Expr cond = binary(BinOp::Or,
                     binary(BinOp::And, binary(BinOp::LT, idx, n), unary(UnOp::Not, flag)),
                     binary(BinOp::EQ, binary(BinOp::LT, t, i32(1)), flag));
  Stmt then_body = seq(
      {std::make_shared<LetNode>(x, act, L(44)),
       std::make_shared<StoreNode>(
           T_f, std::vector<Expr>{u},
           binary(BinOp::Add, cast(call(MathFn::sqrt, {call(MathFn::abs, {x})}), DTypeCode::f32),
               mul(call(MathFn::pow, {cast(x, DTypeCode::f32), f32(0.1)}),
                   sub(f32(-0.0), float_imm(1e300, DTypeCode::f64))),
               L(47, 14)),
           L(47)),
       std::make_shared<StoreNode>(Y, std::vector<Expr>{idx}, load(T_f, {u}), L(48))},
      L(44));
  Stmt else_body = seq({std::make_shared<StoreNode>(
                           Y, std::vector<Expr>{idx},
                           select(flag, f32(std::numeric_limits<double>::infinity()),
                                  f32(-std::numeric_limits<double>::infinity())),
                           L(50))},
                       L(49));
  Stmt body = seq(
      {std::make_shared<LetNode>(t, mixed, L(42)),
       std::make_shared<LetNode>(big, add(cast(t, DTypeCode::i64), int_imm(1LL << 40, DTypeCode::i64)), L(43)),
       std::make_shared<AllocNode>(T_f, L(45)),
       loop(u, i32(0), i32(4), ForKind::unroll, 0,
            seq({std::make_shared<IfNode>(cond, then_body, else_body, L(46))}, L(46)), L(46)),
       loop(var("s", kIndexType, L(51)), i32(0), binary(BinOp::CeilDiv, n, i32(4)), ForKind::serial, 0,
            seq({std::make_shared<StoreNode>(
                    Y, std::vector<Expr>{bx},
                    cast(binary(BinOp::Div, float_imm(std::nan(""), DTypeCode::f16), float_imm(2.0, DTypeCode::f16)),
                         DTypeCode::f32),
                    L(52))}),
            L(51))},
      L(41));
  return std::make_shared<KernelNode>(
      "misc", std::vector<Param>{{X, nullptr, false}, {Y, nullptr, true}, {nullptr, flag, false}},
      std::vector<Var>{bx}, std::vector<Expr>{binary(BinOp::CeilDiv, n, i32(4))}, body, L(40));
}

// The statement tree's node kinds, nesting included: the printed text does not show whether a
// body is one statement or a sequence holding it, this does.
std::string tree(const Stmt& s) {
  if (!s) return "-";
  std::string out(stmtkind_name(s->kind));
  std::vector<Stmt> kids;
  switch (s->kind) {
    case StmtKind::Seq: kids = as<SeqNode>(s)->body; break;
    case StmtKind::For: kids = {as<ForNode>(s)->body}; break;
    case StmtKind::If: kids = {as<IfNode>(s)->then_body, as<IfNode>(s)->else_body}; break;
    case StmtKind::CoreScope: kids = {as<CoreScopeNode>(s)->body}; break;
    default: return out;
  }
  out += "(";
  for (size_t i = 0; i < kids.size(); ++i) out += (i ? " " : "") + tree(kids[i]);
  return out + ")";
}

void expect_round_trip(const Kernel& k) {
  std::string text = print(k);
  Kernel k2 = parse_kernel(text, "rt.tw");
  EXPECT_EQ(print(k2), text);
  EXPECT_EQ(tree(k2->body), tree(k->body)) << text;
  verify(k2);
  PrintOptions sp{true};
  std::string stext = print(k, sp);
  Kernel k3 = parse_kernel(stext, "rt.tw");
  EXPECT_EQ(print(k3, sp), stext);
  EXPECT_EQ(print(k3), text);
}


constexpr const char* kMatmulText = R"(kernel matmul(A: global float16[M, K], B: global float16[K, N], C: global float32[M, N] out, alpha: float32)
    grid(bx = ceildiv(N, 128), by = ceildiv(M, 128)) {
  alloc A_s: shared float16[128, 32]
  alloc B_s: shared float16[32, 128]
  alloc C_f: fragment float32[128, 128]
  fill C_f = 0.0
  for k in pipelined(0, ceildiv(K, 32), stages=3) {
    copy A[by * 128:+128, k * 32:+32] -> A_s
    copy B[k * 32:+32, bx * 128:+128] -> B_s
    gemm A_s, B_s -> C_f trans_a=false trans_b=false clear=false
  }
  for i in parallel(0, 128) {
    for j in parallel(0, 128) {
      C_f[i, j] = C_f[i, j] * alpha
    }
  }
  copy C_f -> C[by * 128:+128, bx * 128:+128]
}
)";

// Two distinct loop variables named i (and j): the second pair is renamed deterministically.
constexpr const char* kSoftmaxText = R"(kernel softmax(X: global float32[N, 256], Y: global float32[N, 256] out)
    grid(bx = ceildiv(N, 64)) {
  alloc X_f: fragment float32[64, 256]
  alloc row_max: fragment float32[64]
  alloc row_sum: fragment float32[64]
  copy X[bx * 64:+64, 0:+256] -> X_f
  reduce max X_f -> row_max axis=1 clear=true
  for i in parallel(0, 64) {
    for j in parallel(0, 256) {
      X_f[i, j] = exp(X_f[i, j] - row_max[i])
    }
  }
  reduce sum X_f -> row_sum axis=1 clear=true
  for i_1 in parallel(0, 64) {
    for j_1 in parallel(0, 256) {
      X_f[i_1, j_1] = X_f[i_1, j_1] / row_sum[i_1]
    }
  }
  copy X_f -> Y[bx * 64:+64, 0:+256]
}
)";

constexpr const char* kMiscText = R"(kernel misc(X: global float16[n], Y: global float32[n] out, flag: bool)
    grid(bx = ceildiv(n, 4)) {
  let t: int32 = min(((bx + 3) * (bx // 2) - -(2)) % -7, max(bx, 0))
  let in_1: int64 = cast<int64>(t) + 1099511627776i64
  alloc T_f: fragment float32[4]
  for u in unroll(0, 4) {
    if bx * 4 + u < n and not flag or (t < 1) == flag {
      let x: float16 = where(X[bx * 4 + u] > 0.0f16, X[bx * 4 + u] * 1.5f16, -X[bx * 4 + u])
      T_f[u] = cast<float64>(cast<float32>(sqrt(abs(x)))) + cast<float64>(pow(cast<float32>(x), 0.1)) * (-0.0f64 - 1e+300f64)
      Y[bx * 4 + u] = T_f[u]
    } else {
      Y[bx * 4 + u] = where(flag, inf, -inf)
    }
  }
  for s in serial(0, ceildiv(n, 4)) {
    Y[bx] = cast<float32>(nanf16 / 2.0f16)
  }
}
)";

// Spans: elided when equal to the enclosing node's; expression spans inside parentheses.
constexpr const char* kMiscSpansText = R"(@"kern.py":40:1 kernel misc(X: global float16[n], Y: global float32[n] out, flag: bool)
    grid(bx @41:1 = ceildiv(n, 4)) @41:1 {
  @42:1 let t: int32 = min(((bx + 3) * (bx // 2) - -(2)) % -7, max(bx, 0))
  @43:1 let in_1: int64 = cast<int64>(t) + 1099511627776i64
  @45:1 alloc T_f: fragment float32[4]
  @46:1 for u in unroll(0, 4) {
    if bx * 4 + u < n and not flag or (t < 1) == flag @44:1 {
      let x: float16 = where(X[bx * 4 + u] > 0.0f16, X[bx * 4 + u] * 1.5f16, -X[bx * 4 + u])
      @47:1 T_f[u] = (@47:14 cast<float64>(cast<float32>(sqrt(abs(x)))) + cast<float64>(pow(cast<float32>(x), 0.1)) * (-0.0f64 - 1e+300f64))
      @48:1 Y[bx * 4 + u] = T_f[u]
    } else {
      @50:1 Y[bx * 4 + u] = where(flag, inf, -inf)
    }
  }
  @51:1 for s in serial(0, ceildiv(n, 4)) {
    @52:1 Y[bx] = cast<float32>(nanf16 / 2.0f16)
  }
}
)";

TEST(IrText, GoldenMatmul) { EXPECT_EQ(print(matmul_kernel()), kMatmulText); }
TEST(IrText, GoldenSoftmax) { EXPECT_EQ(print(softmax_kernel()), kSoftmaxText); }
TEST(IrText, GoldenMisc) { EXPECT_EQ(print(misc_kernel()), kMiscText); }
TEST(IrText, GoldenMiscSpans) { EXPECT_EQ(print(misc_kernel(), PrintOptions{true}), kMiscSpansText); }

TEST(IrText, RoundTrip) {
  for (const auto& k : {matmul_kernel(), softmax_kernel(), misc_kernel()}) {
    verify(k);
    expect_round_trip(k);
  }
}

// One form for a body of one statement (ir::body_form): the statement itself, whether the IR
// comes from the text, from the front end (which builds it so) or from a node built with a
// sequence of one statement, so passes see the same tree whichever way a kernel was written.
TEST(IrText, OneStatementBodyIsTheStatement) {
  const char* text = R"(kernel one(X: global float32[16], Y: global float32[16] out)
    grid(b = 1) {
  alloc T: fragment float32[16]
  copy X -> T
  for i in parallel(0, 16) {
    T[i] = T[i] + 1.0
  }
  for i_1 in serial(0, 2) {
    for j in parallel(0, 16) {
      T[j] = T[j] * 2.0
    }
  }
  if b == 0 {
    copy T -> Y
  } else {
    fill T = 0.0
  }
  for i_2 in serial(0, 1) {
  }
  copy T -> Y
}
)";
  Kernel k = parse_kernel(text, "one.tw");
  verify(k);
  EXPECT_EQ(print(k), text);
  EXPECT_EQ(tree(k->body), "Seq(Alloc Copy For(Store) For(For(Store)) If(Copy Fill) For(Seq()) Copy)");
  expect_round_trip(k);

  // A kernel body of one statement, and a scope of one statement.
  Kernel e = parse_kernel(R"(kernel e(A: global float16[64], C: global float16[64] out)
    grid(cid = 1) sub_block(vid) {
  scope V {
    sync pipe_barrier(V)
  }
}
)");
  EXPECT_EQ(tree(e->body), "CoreScope(Sync)");
  expect_round_trip(e);

  // Built with sequences of one statement (nested too): the constructors keep the statement.
  Var i = var("i"), j = var("j");
  Buffer t = buffer("t", DTypeCode::f32, {i32(4)}, Scope::fragment);
  Stmt st = std::make_shared<StoreNode>(t, std::vector<Expr>{i}, f32(1), Span{});
  Stmt f = loop(i, i32(0), i32(4), ForKind::parallel, 0, seq({seq({st})}), {});
  EXPECT_EQ(tree(f), "For(Store)");
  Stmt c = std::make_shared<IfNode>(binary(BinOp::LT, j, i32(1)), seq({f}), seq({seq({st})}), Span{});
  EXPECT_EQ(tree(c), "If(For(Store) Store)");
  EXPECT_EQ(tree(std::make_shared<CoreScopeNode>(CoreKind::V, seq({st}), Span{})), "CoreScope(Store)");
  // Sequences of several statements, empty ones and one with an annotation stay as they are.
  EXPECT_EQ(tree(loop(i, i32(0), i32(4), ForKind::serial, 0, seq({st, st}), {})), "For(Seq(Store Store))");
  EXPECT_EQ(tree(loop(i, i32(0), i32(4), ForKind::serial, 0, seq({}), {})), "For(Seq())");
  EXPECT_EQ(tree(body_form(with_annotation(seq({st}), Annotation{"x", {}}))), "Seq(Store)");
  EXPECT_EQ(stmts_of(f).size(), 1u);
  EXPECT_EQ(stmts_of(seq({st, st})).size(), 2u);
  EXPECT_TRUE(stmts_of(nullptr).empty());
}

// The bitwise operators and shifts: Python's precedence, printed with the fewest parentheses and
// read back to the same tree.
TEST(IrText, BitwiseOperatorsRoundTrip) {
  std::unordered_map<std::string, Var> vars{{"a", var("a")}, {"b", var("b")}, {"c", var("c")}};
  for (const char* text : {"a | b ^ c & a << 1 + b", "(a | b) ^ c", "(a ^ b) & c", "(a & b) << c",
                           "a << b >> c", "a << (b >> c)", "(a << b) * c", "~a + ~(b * c)", "~-a", "-~a",
                           "~(a | b) == c", "~5 & -3", "a // b % c >> 2"}) {
    auto [e, end] = parse_expr_prefix(text, vars, L(1));
    EXPECT_EQ(end, std::string::npos) << text;
    EXPECT_EQ(print(e), text);
  }
  auto [e, end] = parse_expr_prefix("a | b ^ c & a << 1 + b", vars, L(1));
  ASSERT_EQ(e->kind, ExprKind::Binary);
  EXPECT_EQ(as<BinaryNode>(e)->op, BinOp::BitOr);
  auto* x = as<BinaryNode>(as<BinaryNode>(e)->b);
  EXPECT_EQ(x->op, BinOp::BitXor);
  auto* y = as<BinaryNode>(x->b);
  EXPECT_EQ(y->op, BinOp::BitAnd);
  EXPECT_EQ(as<BinaryNode>(y->b)->op, BinOp::Shl);
  EXPECT_EQ(as<BinaryNode>(as<BinaryNode>(y->b)->b)->op, BinOp::Add);
  EXPECT_THROW(parse_expr_prefix("1.0 & 2.0", vars, L(1)), Error);
}

// Ascend expert mode: sub-block variable, core scopes and every kind of synchronisation.
constexpr const char* kExpertText = R"(kernel ex(A: global float16[M, 64], C: global float16[M, 64] out)
    grid(cid = ceildiv(M, 64)) sub_block(vid) {
  alloc a_ub: UB float16[64, 64]
  alloc a_l1: L1 float16[64, 64]
  scope V {
    copy A[cid * 64:+64, 0:+64] -> a_ub
    sync set_flag(MTE2, V, 0)
    sync wait_flag(MTE2, V, 0)
    sync pipe_barrier(V)
    sync set_cross_flag(2, MTE3, vid + 1)
    sync wait_cross_flag(3)
    sync wait_cross_flag(4, MTE2)
  }
  scope C {
    copy A[cid * 64:+64, 0:+64] -> a_l1
    sync pipe_barrier(ALL)
  }
}
)";

TEST(IrText, ExpertModeRoundTrip) {
  Kernel k = parse_kernel(kExpertText, "ex.tw");
  EXPECT_TRUE(k->is_npu());
  EXPECT_EQ(k->sub_block_var->name, "vid");
  verify(k);
  EXPECT_EQ(print(k), kExpertText);
  expect_round_trip(k);
  auto* body = static_cast<const SeqNode*>(k->body.get());
  ASSERT_EQ(body->body[2]->kind, StmtKind::CoreScope);
  auto* v = static_cast<const CoreScopeNode*>(body->body[2].get());
  EXPECT_EQ(v->core, CoreKind::V);
  auto* vb = static_cast<const SeqNode*>(v->body.get());
  auto* cross = static_cast<const SyncNode*>(vb->body[4].get());
  EXPECT_EQ(cross->sync, SyncKind::set_cross_flag);
  EXPECT_EQ(cross->mode, 2);
  EXPECT_EQ(cross->pipe, AscendPipe::MTE3);
  auto* wait = static_cast<const SyncNode*>(vb->body[6].get());
  EXPECT_EQ(wait->pipe, AscendPipe::MTE2);
  // With spans: every node keeps its position.
  Kernel again = parse_kernel(print(k, PrintOptions{true}));
  EXPECT_EQ(print(again, PrintOptions{true}), print(k, PrintOptions{true}));
  EXPECT_EQ(again->sub_block_var->span.line, k->sub_block_var->span.line);
}

TEST(IrText, ExpertModeParseErrors) {
  auto err = [](const std::string& text) {
    try {
      parse_kernel(text, "e.tw");
    } catch (const Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  std::string head = "kernel e(A: global float16[64]) grid(c = 1) sub_block(v) {\n";
  EXPECT_NE(err(head + "  scope X { }\n}").find("expected a core kind (C or V)"), std::string::npos);
  EXPECT_NE(err(head + "  scope V { sync set_flag(MTE9, V, 0) }\n}").find("expected a pipe"), std::string::npos);
  EXPECT_NE(err(head + "  scope V { sync fence(V) }\n}").find("expected a synchronisation"), std::string::npos);
  EXPECT_NE(err(head + "  scope V { sync set_cross_flag(x, V, 0) }\n}").find("cross-core flag mode"), std::string::npos);
}

TEST(IrText, SpansSurviveRoundTrip) {
  Kernel k = parse_kernel(print(matmul_kernel(), PrintOptions{true}));
  EXPECT_EQ(k->span.file, "kern.py");
  EXPECT_EQ(k->span.line, 1);
  auto* body = static_cast<const SeqNode*>(k->body.get());
  EXPECT_EQ(body->span.line, 2);
  auto* kloop = static_cast<const ForNode*>(body->body[4].get());
  EXPECT_EQ(kloop->span.line, 7);
  auto* kbody = static_cast<const SeqNode*>(kloop->body.get());
  EXPECT_EQ(kbody->body[2]->kind, StmtKind::Gemm);
  EXPECT_EQ(kbody->body[2]->span.line, 10);
  EXPECT_EQ(kbody->body[2]->span.file, "kern.py");
  EXPECT_EQ(k->block_vars[1]->span.line, 2);
}

TEST(IrText, ParsedNodesPointIntoTheText) {
  Kernel k = parse_kernel(kMatmulText, "mm.tw");
  auto* body = static_cast<const SeqNode*>(k->body.get());
  auto* kloop = static_cast<const ForNode*>(body->body[4].get());
  EXPECT_EQ(kloop->span.file, "mm.tw");
  EXPECT_EQ(kloop->span.line, 7);
  EXPECT_EQ(kloop->span.col, 3);
  auto* gemm = static_cast<const SeqNode*>(kloop->body.get())->body[2].get();
  EXPECT_EQ(gemm->span.line, 10);
  EXPECT_EQ(gemm->span.col, 5);
  // Names resolve to the right objects: the tile the copy writes is the one the gemm reads.
  auto* copy = static_cast<const CopyNode*>(static_cast<const SeqNode*>(kloop->body.get())->body[0].get());
  EXPECT_EQ(copy->dst.buffer, static_cast<const GemmNode*>(gemm)->a.buffer);
  EXPECT_EQ(copy->dst.buffer, static_cast<const AllocNode*>(body->body[0].get())->buffer);
  EXPECT_EQ(copy->src.buffer, k->params[0].buffer);
  EXPECT_EQ(k->shape_vars().size(), 3u);
}

TEST(IrText, HandWrittenTextWithCommentsAndShadowing) {
  const char* text = R"(# a comment
kernel add_one(X: global float32[n: int64, 16], Y: global float32[n, 16] out) grid(b = n) {
  alloc T: fragment float32[16]
  copy X[b:+1, 0:+16] -> T   # unit dims are dropped for the shape check
  for i in parallel(0, 16) {
    let v: float32 = T[i] + 1
    T[i] = v
  }
  {
    let i: int32 = 3   # a new i in a nested block
    T[i] = 2.5e-1
  }
  copy T -> Y[b:+1, 0:+16]
}
)";
  Kernel k = parse_kernel(text, "add.tw");
  verify(k);
  EXPECT_EQ(k->shape_vars()[0]->dtype, DType(DTypeCode::i64));
  std::string printed = print(k);
  EXPECT_NE(printed.find("X: global float32[n: int64, 16]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("let v: float32 = T[i] + 1.0"), std::string::npos) << printed;
  EXPECT_NE(printed.find("let i_1: int32 = 3"), std::string::npos) << printed;
  EXPECT_NE(printed.find("T[i_1] = 0.25"), std::string::npos) << printed;
  EXPECT_EQ(print(parse_kernel(printed)), printed);
}

TEST(IrText, StandalonePrinters) {
  auto x = var("x", DTypeCode::f32);
  auto y = var("x", DTypeCode::f32);  // same name, different var
  EXPECT_EQ(print(binary(BinOp::Sub, x, binary(BinOp::Sub, y, f32(1.0)))), "x - (x_1 - 1.0)");
  EXPECT_EQ(print(binary(BinOp::Sub, binary(BinOp::Sub, x, y), f32(1.0))), "x - x_1 - 1.0");
  EXPECT_EQ(print(unary(UnOp::Neg, binary(BinOp::Mul, x, x))), "-(x * x)");
  EXPECT_EQ(print(float_imm(0.1)), "0.1");
  EXPECT_EQ(print(float_imm(1.0 / 3.0, DTypeCode::f64)), "0.3333333333333333f64");
  EXPECT_EQ(print(int_imm(std::numeric_limits<int64_t>::min(), DTypeCode::i64)), "-9223372036854775808i64");
  EXPECT_EQ(print(int_imm(1, DTypeCode::boolean)), "true");
  auto b = buffer("B", DTypeCode::f32, {i32(8)}, Scope::shared);
  EXPECT_EQ(print(Stmt(std::make_shared<FillNode>(full_region(b), f32(2.0), Span{}))), "fill B = 2.0\n");
  EXPECT_EQ(print(reg(b, {{i32(4), 4}})), "B[4:+4]");
}

TEST(IrText, FloatsRoundTripExactly) {
  for (double v : {0.1, 1.0 / 3.0, 1e-310, 6.02214076e23, -2.5, -0.0, 65504.0, 1.0000000000000002,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::infinity()}) {
    std::string text = "kernel f(Y: global float64[1] out) {\n  Y[0] = " + text::format_float(v) + "f64\n}\n";
    Kernel k = parse_kernel(text);
    ASSERT_EQ(k->body->kind, StmtKind::Store) << text;  // a body of one statement is that statement
    auto* st = static_cast<const StoreNode*>(k->body.get());
    ASSERT_EQ(st->value->kind, ExprKind::FloatImm) << text;
    double got = static_cast<const FloatImmNode*>(st->value.get())->value;
    EXPECT_EQ(std::memcmp(&got, &v, sizeof v), 0) << text;
  }
}

// Parse errors: message and position (line, col) in the text.
void expect_parse_error(const std::string& text, const std::string& msg, int line, int col) {
  try {
    parse_kernel(text, "bad.tw");
    ADD_FAILURE() << "expected a parse error containing '" << msg << "'";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(msg), std::string::npos) << e.what();
    EXPECT_EQ(e.span().file, "bad.tw");
    EXPECT_EQ(e.span().line, line) << e.what();
    EXPECT_EQ(e.span().col, col) << e.what();
  }
}

TEST(IrText, ParseErrors) {
  expect_parse_error("kernel k(A: global float32[4] out) {\n  A[0] = x + 1\n}\n", "undefined variable 'x'", 2, 10);
  expect_parse_error("kernel k(A: global float32[4] out) {\n  copy B -> A\n}\n", "undefined buffer 'B'", 2, 8);
  expect_parse_error("kernel k(A: global float33[4] out) {\n}\n", "expected a dtype, got 'float33'", 1, 20);
  expect_parse_error("kernel k(A: global float32[4] out) {\n  A[0] = 1.0\n", "missing '}'", 3, 1);
  expect_parse_error("kernel k(A: global float32[4] out) {\n  A[0] = 1 $ 2\n}\n", "unexpected character '$'", 2, 12);
  expect_parse_error("kernel k(A: global float32[4] out) {\n  if 1 < 2 < 3 {\n  }\n}\n", "comparisons do not chain", 2, 12);
  expect_parse_error("kernel k(A: global float32[4] out) {\n  if 1.5 and true {\n  }\n}\n", "'and' needs bool operands", 2, 10);
  expect_parse_error("kernel k(A: global float32[4] out) {\n  let for: int32 = 1\n}\n", "reserved word", 2, 7);
  expect_parse_error("kernel k(A: global float32[4] out) {\n  for i in loop(0, 4) {\n  }\n}\n", "expected a loop kind", 2, 12);
  expect_parse_error("kernel k(A: global float32[4] out) {\n  alloc T: shared float32[4]\n  alloc T: shared float32[4]\n}\n",
                     "'T' is already defined", 3, 9);
  expect_parse_error("kernel k(A: global float32[4] out) {\n  A[0] = 1.5i32\n}\n", "integer suffix", 2, 10);
  // Span-mode text still reports positions in the text, not the annotated spans.
  expect_parse_error("@\"src.py\":9:1 kernel k(A: global float32[4] out) {\n  @10:1 A[0] = (1.5 and true)\n}\n",
                     "needs bool operands", 2, 21);
}

}  // namespace
}  // namespace tw::ir

namespace tw::ir {
namespace {

TEST(IrText, ShapeVarDeclarationsRoundTrip) {
  auto M = var("M", DTypeCode::i64, Span{"a.py", 3, 7});
  auto n = var("n", kIndexType, Span{"a.py", 4, 9});  // scalar parameter also used in a shape
  auto A = buffer("A", DTypeCode::f32, {binary(BinOp::Mul, int_imm(2, DTypeCode::i64), M), n}, Scope::global,
                  Span{"a.py", 3, 1});
  auto body = std::make_shared<SeqNode>(std::vector<Stmt>{}, Span{"a.py", 5, 1});
  Kernel k = std::make_shared<KernelNode>("shapes", std::vector<Param>{{A, nullptr, true}, {nullptr, n, false}},
                                          std::vector<Var>{}, std::vector<Expr>{}, body, Span{"a.py", 2, 1});
  std::string text = print(k, PrintOptions{true});
  EXPECT_EQ(text, "@\"a.py\":2:1 kernel shapes(A @3:1: global float32[2i64 * M @3:7: int64, n @4:9] out, n: int32) @5:1 {\n}\n");
  Kernel k2 = parse_kernel(text);
  EXPECT_EQ(print(k2, PrintOptions{true}), text);
  EXPECT_EQ(k2->params[1].scalar, k2->shape_vars()[1]);
  EXPECT_EQ(k2->shape_vars()[0]->span.line, 3);
  EXPECT_EQ(k2->shape_vars()[0]->span.col, 7);
  verify(k2);
}

TEST(IrText, DeeplyNestedTextIsAnErrorNotAStackOverflow) {
  const std::string head = "kernel k(A: global float32[4] out) {\n";
  std::string parens = head + "  let a: int32 = " + std::string(100000, '(') + "1" + std::string(100000, ')') + "\n}\n";
  expect_parse_error(parens, "the text is nested more than 256 levels deep", 2, 16 + 257);
  std::string negs = head + "  let a: int32 = ";
  for (int n = 0; n < 100000; ++n) negs += "- ";
  expect_parse_error(negs + "x\n}\n", "nested more than 256 levels deep", 2, 16 + 2 * 255);
  std::string nots = head + "  if ";
  for (int n = 0; n < 100000; ++n) nots += "not ";
  expect_parse_error(nots + "true {\n  }\n}\n", "nested more than 256 levels deep", 2, 6 + 4 * 254);
  expect_parse_error(head + std::string(100000, '{') + std::string(100000, '}') + "\n}\n",
                     "nested more than 256 levels deep", 2, 257);
  // 250 levels parse
  EXPECT_NO_THROW(parse_kernel(head + "  let a: int32 = " + std::string(250, '(') + "1" + std::string(250, ')') +
                               "\n}\n"));
}

TEST(IrText, TruncatedTextThrowsCleanly) {
  std::string text = print(matmul_kernel(), PrintOptions{true});
  for (size_t n = 0; n < text.size(); n += 3) {
    try {
      parse_kernel(text.substr(0, n));
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace tw::ir
