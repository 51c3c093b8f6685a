// Tests of transform::simplify: constant folding and identities on index expressions.
#include <gtest/gtest.h>

#include "ir/arith.h"
#include "ir/printer.h"
#include "tilewright/ir.h"
#include "transform/simplify.h"

namespace tw {
namespace {

using namespace ir;
using transform::simplify;
Expr simplify_expr(const Expr& e) { return arith::simplify(e); }


Expr c(int64_t v, DType t = kIndexType) { return int_imm(v, t); }
Expr bin(BinOp op, Expr a, Expr b, Span s = {}) { return binary(op, std::move(a), std::move(b), std::move(s)); }

// simplify(before) prints as `after` does.
void expect_simplifies(const Expr& before, const Expr& after) {
  Expr r = simplify_expr(before);
  EXPECT_EQ(print(r), print(after)) << "before: " << print(before);
  EXPECT_EQ(r->dtype, after->dtype) << "before: " << print(before);
}

TEST(Simplify, FoldsIntegerConstants) {
  expect_simplifies(bin(BinOp::Add, c(2), c(3)), c(5));
  expect_simplifies(bin(BinOp::Mul, bin(BinOp::Sub, c(10), c(4)), c(7)), c(42));
  expect_simplifies(bin(BinOp::CeilDiv, c(1000), c(128)), c(8));
  expect_simplifies(bin(BinOp::FloorDiv, c(1000), c(128)), c(7));
  expect_simplifies(bin(BinOp::Mod, c(1000), c(128)), c(104));
  expect_simplifies(bin(BinOp::Min, c(3), c(-9)), c(-9));
  expect_simplifies(bin(BinOp::Max, c(3), c(-9)), c(3));
  expect_simplifies(unary(UnOp::Neg, c(5)), c(-5));
  expect_simplifies(bin(BinOp::LT, c(3), c(4)), c(1, DTypeCode::boolean));
  expect_simplifies(bin(BinOp::EQ, c(3), c(4)), c(0, DTypeCode::boolean));
}

// Bitwise operators and shifts fold with the semantics of ir.h (Python on the type's bits, shift
// counts modulo the width), without undefined behaviour for counts >= 64 or negative counts.
TEST(Simplify, FoldsBitwiseOperatorsAndShifts) {
  const DType i8 = DTypeCode::i8, u8 = DTypeCode::u8, i64 = DTypeCode::i64;
  expect_simplifies(bin(BinOp::BitAnd, c(12), c(10)), c(8));
  expect_simplifies(bin(BinOp::BitOr, c(12), c(10)), c(14));
  expect_simplifies(bin(BinOp::BitXor, c(12), c(10)), c(6));
  expect_simplifies(bin(BinOp::BitAnd, c(-1), c(-2147483647 - 1)), c(-2147483647 - 1));
  expect_simplifies(unary(UnOp::BitNot, c(5)), c(-6));
  expect_simplifies(unary(UnOp::BitNot, c(-128, i8)), c(127, i8));
  expect_simplifies(bin(BinOp::Shl, c(3), c(4)), c(48));
  expect_simplifies(bin(BinOp::Shl, c(1), c(32)), c(1));    // int32: the count is 32 % 32 = 0
  expect_simplifies(bin(BinOp::Shl, c(1), c(-1)), bin(BinOp::Shl, c(1), c(-1)));  // 1 << 31 leaves int32: kept
  expect_simplifies(bin(BinOp::Shl, c(1, i64), c(-1, i64)), c(INT64_MIN, i64));  // i64: -1 % 64 = 63
  expect_simplifies(bin(BinOp::Shl, c(5, i64), c(1000, i64)), c(5LL << (1000 % 64), i64));
  expect_simplifies(bin(BinOp::Shr, c(-7), c(1)), c(-4));   // arithmetic: floor(-7 / 2)
  expect_simplifies(bin(BinOp::Shr, c(-1), c(31)), c(-1));
  expect_simplifies(bin(BinOp::Shr, c(-1), c(-1)), c(-1));  // count 31
  expect_simplifies(bin(BinOp::Shr, c(200, u8), c(3, u8)), c(25, u8));
  expect_simplifies(bin(BinOp::Shr, c(-128, i8), c(9, i8)), c(-64, i8));  // count 9 % 8 = 1
  expect_simplifies(bin(BinOp::Shr, c(INT64_MIN, i64), c(64, i64)), c(INT64_MIN, i64));
  // a result outside the type stays an expression (wrapped only when stored)
  expect_simplifies(bin(BinOp::Shl, c(64, i8), c(1, i8)), bin(BinOp::Shl, c(64, i8), c(1, i8)));
  expect_simplifies(unary(UnOp::BitNot, c(0, u8)), unary(UnOp::BitNot, c(0, u8)));
  Var x = var("x");
  expect_simplifies(unary(UnOp::BitNot, unary(UnOp::BitNot, x)), x);
  EXPECT_EQ(fold_int_binary(BinOp::Shr, 255, 1, u8), 127);
  EXPECT_EQ(fold_int_binary(BinOp::Shr, -1, 1, u8), 127);  // -1 wraps to 255 first
  EXPECT_EQ(as_const_int(unary(UnOp::BitNot, c(7))), -8);
}

TEST(Simplify, BitwiseOperatorsNeedIntegers) {
  EXPECT_THROW(bin(BinOp::BitAnd, float_imm(1.0), float_imm(2.0)), Error);
  EXPECT_THROW(bin(BinOp::Shl, var("f", DTypeCode::f32), c(1)), Error);
  EXPECT_THROW(unary(UnOp::BitNot, var("f", DTypeCode::f16)), Error);
  EXPECT_THROW(bin(BinOp::BitOr, c(1, DTypeCode::boolean), c(0, DTypeCode::boolean)), Error);
}

TEST(Simplify, FloorSemanticsForNegativeNumbers) {
  // Python: -7 // 2 == -4, -7 % 2 == 1, 7 // -2 == -4, 7 % -2 == -1, ceil(-7 / 2) == -3.
  expect_simplifies(bin(BinOp::FloorDiv, c(-7), c(2)), c(-4));
  expect_simplifies(bin(BinOp::Mod, c(-7), c(2)), c(1));
  expect_simplifies(bin(BinOp::FloorDiv, c(7), c(-2)), c(-4));
  expect_simplifies(bin(BinOp::Mod, c(7), c(-2)), c(-1));
  expect_simplifies(bin(BinOp::Mod, c(-7), c(-2)), c(-1));
  expect_simplifies(bin(BinOp::CeilDiv, c(-7), c(2)), c(-3));
  expect_simplifies(bin(BinOp::CeilDiv, c(7), c(2)), c(4));
  expect_simplifies(bin(BinOp::FloorDiv, c(-8), c(2)), c(-4));
}

TEST(Simplify, LeavesUnsafeFoldsAlone) {
  Expr div0 = bin(BinOp::FloorDiv, c(7), c(0));
  EXPECT_EQ(simplify_expr(div0), div0);  // division by zero is not folded
  Expr mod0 = bin(BinOp::Mod, c(7), c(0));
  EXPECT_EQ(simplify_expr(mod0), mod0);
  Expr overflow = bin(BinOp::Mul, c(1 << 20), c(1 << 20));  // does not fit int32
  EXPECT_EQ(simplify_expr(overflow), overflow);
  Expr wide = bin(BinOp::Mul, c(1 << 20, DTypeCode::i64), c(1 << 20, DTypeCode::i64));
  expect_simplifies(wide, c(int64_t(1) << 40, DTypeCode::i64));
}

TEST(Simplify, SelectOfSignedZerosIsNotFolded) {
  Var x = var("x");
  Expr cond = bin(BinOp::LT, x, c(3));
  Expr s = select(cond, float_imm(0.0), float_imm(-0.0));  // the sign of zero matters
  EXPECT_EQ(print(simplify_expr(s)), print(s));
  expect_simplifies(select(cond, float_imm(1.5), float_imm(1.5)), float_imm(1.5));
}

TEST(Simplify, IntegerIdentities) {
  Var x = var("x"), y = var("y");
  expect_simplifies(bin(BinOp::Add, x, c(0)), x);
  expect_simplifies(bin(BinOp::Add, c(0), x), x);
  expect_simplifies(bin(BinOp::Sub, x, c(0)), x);
  expect_simplifies(bin(BinOp::Mul, x, c(1)), x);
  expect_simplifies(bin(BinOp::Mul, c(1), x), x);
  expect_simplifies(bin(BinOp::Mul, x, c(0)), c(0));
  expect_simplifies(bin(BinOp::Mul, c(0), x), c(0));
  expect_simplifies(bin(BinOp::FloorDiv, x, c(1)), x);
  expect_simplifies(bin(BinOp::CeilDiv, x, c(1)), x);
  expect_simplifies(bin(BinOp::Mod, x, c(1)), c(0));
  expect_simplifies(bin(BinOp::Sub, bin(BinOp::Mul, x, y), bin(BinOp::Mul, x, y)), c(0));
  expect_simplifies(bin(BinOp::Min, x, x), x);
  // Chains of constants.
  expect_simplifies(bin(BinOp::Add, bin(BinOp::Add, x, c(3)), c(4)), bin(BinOp::Add, x, c(7)));
  expect_simplifies(bin(BinOp::Add, bin(BinOp::Add, x, c(3)), c(-3)), x);
  expect_simplifies(bin(BinOp::Add, bin(BinOp::Sub, x, c(3)), c(5)), bin(BinOp::Add, x, c(2)));
  expect_simplifies(bin(BinOp::Sub, bin(BinOp::Add, x, c(3)), c(5)), bin(BinOp::Add, x, c(-2)));
  expect_simplifies(bin(BinOp::Sub, bin(BinOp::Sub, x, c(3)), c(5)), bin(BinOp::Sub, x, c(8)));
  expect_simplifies(bin(BinOp::Mul, bin(BinOp::Mul, x, c(4)), c(16)), bin(BinOp::Mul, x, c(64)));
  expect_simplifies(bin(BinOp::Add, c(3), bin(BinOp::Add, x, c(4))), bin(BinOp::Add, x, c(7)));
  // Folding inside: (x * (2 * 64)) + (0 * y)  ->  x * 128
  expect_simplifies(bin(BinOp::Add, bin(BinOp::Mul, x, bin(BinOp::Mul, c(2), c(64))), bin(BinOp::Mul, c(0), y)),
                    bin(BinOp::Mul, x, c(128)));
}

// The light builders fold the identities only: a formula keeps the form it was built in.
TEST(Simplify, LightBuildersFoldOnlyIdentities) {
  Var x = var("x"), y = var("y");
  EXPECT_EQ(arith::light::add(x, c(0)), Expr(x));
  EXPECT_EQ(arith::light::add(c(0), x), Expr(x));
  EXPECT_EQ(arith::light::sub(x, c(0)), Expr(x));
  EXPECT_EQ(arith::light::mul(c(1), x), Expr(x));
  EXPECT_EQ(arith::light::mul(x, c(1)), Expr(x));
  EXPECT_EQ(print(arith::light::mul(x, c(0))), "0");
  EXPECT_EQ(print(arith::light::mul(arith::light::mul(x, c(8)), c(128))), "x * 8 * 128");  // arith::mul: x * 1024
  EXPECT_EQ(print(arith::light::add(c(4096), arith::light::mul(x, y))), "4096 + x * y");
  EXPECT_EQ(print(arith::light::sub(x, x)), "x - x");
  EXPECT_EQ(print(arith::light::floordiv(x, c(1))), "x // 1");
  EXPECT_EQ(print(arith::light::ceildiv(c(64), c(16))), "ceildiv(64, 16)");
}

TEST(Simplify, KeepsSpansAndLeavesFloatMathAlone) {
  Var x = var("x"), f = var("f", DTypeCode::f32);
  Span s{"kern.py", 12, 9};
  Expr folded = simplify_expr(bin(BinOp::Add, c(40), c(2), s));
  EXPECT_EQ(folded->span.line, 12);
  EXPECT_EQ(folded->span.col, 9);
  Expr chain = simplify_expr(bin(BinOp::Add, bin(BinOp::Add, x, c(1)), c(2), s));
  EXPECT_EQ(chain->span.line, 12);

  Expr fz = bin(BinOp::Mul, f, float_imm(0.0));
  EXPECT_EQ(simplify_expr(fz), fz);  // NaN * 0 is NaN
  Expr fa = bin(BinOp::Add, f, float_imm(0.0));
  EXPECT_EQ(simplify_expr(fa), fa);  // -0.0 + 0.0 is +0.0
  Expr fc = bin(BinOp::Add, float_imm(1.0), float_imm(2.0));
  EXPECT_EQ(simplify_expr(fc), fc);
}

TEST(Simplify, CastsOfLiterals) {
  expect_simplifies(cast(c(3), DTypeCode::i64), c(3, DTypeCode::i64));
  expect_simplifies(cast(c(3), DTypeCode::f16), float_imm(3.0, DTypeCode::f16));
  expect_simplifies(cast(float_imm(1.5), DTypeCode::f16), float_imm(1.5, DTypeCode::f16));
  expect_simplifies(cast(float_imm(4.0), DTypeCode::i32), c(4));
  Expr inexact = cast(float_imm(0.1), DTypeCode::f16);  // rounds: left to the target's conversion
  EXPECT_EQ(simplify_expr(inexact), inexact);
  Expr truncating = cast(float_imm(2.5), DTypeCode::i32);
  EXPECT_EQ(simplify_expr(truncating), truncating);
  Expr narrowing = cast(c(300), DTypeCode::i8);
  EXPECT_EQ(simplify_expr(narrowing), narrowing);
  Expr big = cast(c((1 << 24) + 1), DTypeCode::f32);  // not exact in float32
  EXPECT_EQ(simplify_expr(big), big);
}

TEST(Simplify, SelectAndLogicWithConstants) {
  Var x = var("x"), y = var("y");
  Expr b = bin(BinOp::LT, x, y);
  expect_simplifies(select(bin(BinOp::LT, c(1), c(2)), x, y), x);
  expect_simplifies(select(bin(BinOp::GT, c(1), c(2)), x, y), y);
  expect_simplifies(bin(BinOp::And, bin(BinOp::LE, c(1), c(2)), b), b);
  expect_simplifies(bin(BinOp::And, b, bin(BinOp::GE, c(1), c(2))), c(0, DTypeCode::boolean));
  expect_simplifies(bin(BinOp::Or, b, bin(BinOp::NE, c(1), c(2))), c(1, DTypeCode::boolean));
  expect_simplifies(unary(UnOp::Not, bin(BinOp::EQ, c(1), c(2))), c(1, DTypeCode::boolean));
}

// Statements: a kernel before/after.
TEST(Simplify, KernelStatements) {
  Var n = var("n"), i = var("i"), j = var("j"), k = var("k");
  Buffer Y = buffer("Y", DTypeCode::f32, {n}, Scope::global);
  auto store = [&](Expr idx) {
    return std::make_shared<StoreNode>(Y, std::vector<Expr>{std::move(idx)}, float_imm(1.0), Span{});
  };
  auto loop = [](Var v, Expr mn, Expr ext, Stmt body) {
    return std::make_shared<ForNode>(v, mn, ext, ForKind::serial, 0, body, Span{"kern.py", 5, 3});
  };
  Stmt body = std::make_shared<SeqNode>(
      std::vector<Stmt>{
          // if 2 < 1: Y[0] = 1 else: Y[i*1 + 0] = 1
          std::make_shared<IfNode>(bin(BinOp::LT, c(2), c(1)), store(c(0)), store(bin(BinOp::Add, bin(BinOp::Mul, i, c(1)), c(0))),
                                   Span{}),
          // if 1 < 2 (no else) with a false condition: removed
          std::make_shared<IfNode>(bin(BinOp::GT, c(1), c(2)), store(c(1)), nullptr, Span{}),
          // extent 8 - 8 = 0: removed
          loop(j, c(0), bin(BinOp::Sub, c(8), c(8)), store(j)),
          // extent ceildiv(3, 4) = 1: let k = 2 + 3; Y[k] = 1
          loop(k, bin(BinOp::Add, c(2), c(3)), bin(BinOp::CeilDiv, c(3), c(4)), store(k)),
      },
      Span{});
  Kernel kern = std::make_shared<KernelNode>("stmts", std::vector<Param>{Param{Y, nullptr, true}}, std::vector<Var>{i},
                                             std::vector<Expr>{bin(BinOp::CeilDiv, c(100), c(10))}, body, Span{});
  Kernel r = simplify(kern);
  EXPECT_EQ(as_const_int(r->grid[0]), 10);
  EXPECT_EQ(r->grid[0]->kind, ExprKind::IntImm);
  ASSERT_EQ(r->body->kind, StmtKind::Seq);
  const auto& s = as<SeqNode>(r->body)->body;
  ASSERT_EQ(s.size(), 3u) << print(r);
  ASSERT_EQ(s[0]->kind, StmtKind::Store);
  EXPECT_EQ(as<StoreNode>(s[0])->indices[0], Expr(i));
  ASSERT_EQ(s[1]->kind, StmtKind::Let);
  EXPECT_EQ(as<LetNode>(s[1])->var, k);
  EXPECT_EQ(as_const_int(as<LetNode>(s[1])->value), 5);
  EXPECT_EQ(as<LetNode>(s[1])->value->kind, ExprKind::IntImm);
  EXPECT_EQ(s[1]->span.line, 5);  // the Let keeps the loop's span
  EXPECT_EQ(s[2]->kind, StmtKind::Store);

  // The same as text.
  std::string after = print(r);
  EXPECT_EQ(after.find("for "), std::string::npos) << after;
  EXPECT_EQ(after.find("if "), std::string::npos) << after;
  EXPECT_EQ(after,
            "kernel stmts(Y: global float32[n] out)\n"
            "    grid(i = 10) {\n"
            "  Y[i] = 1.0\n"
            "  let k: int32 = 5\n"
            "  Y[k] = 1.0\n"
            "}\n");
  // Nothing left to do: a second run changes nothing.
  EXPECT_EQ(simplify(r), r);
}

}  // namespace
}  // namespace tw
