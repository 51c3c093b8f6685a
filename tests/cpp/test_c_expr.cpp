// Tests of the shared scalar-C expression printer (src/target/c_expr.h): the rules both backends
// print with (operators, floor semantics, folding, literals) and the dialect switches, through a
// small test dialect whose hooks spell variables by name and refuse loads, calls and casts.
#include "target/c_expr.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>

namespace {

using namespace tw;
using namespace tw::ir;

struct TestPrinter final : target::CExprPrinter {
  explicit TestPrinter(target::CDialect d, std::set<std::string> nonneg = {}, std::map<std::string, long double> data = {})
      : CExprPrinter(d), nn(std::move(nonneg)), data(std::move(data)) {}
  std::set<std::string> nn;
  std::map<std::string, long double> data;  // the data variables and their bounds (data_var)
  std::string var(const VarNode& n) const override { return n.name; }
  bool nonneg_var(const VarNode* v) const override { return nn.count(v->name) > 0; }
  std::optional<long double> data_var(const VarNode& v) const override {
    auto it = data.find(v.name);
    return it == data.end() ? std::nullopt : std::optional<long double>(it->second);
  }
  std::string float_literal(double v, DType t) const override { return target::c_float_digits(v, t.code == DTypeCode::f64); }
  std::string load(const LoadNode& n) const override { throw Error("no loads", n.span); }
  std::string call(const CallNode& n) const override { throw Error("no calls", n.span); }
  std::string cast(const CastNode& n) const override { return "(T)" + print(n.value); }
};

constexpr target::CDialect kPlain{.paren_negative_ints = false, .has_udiv = false, .has_fmod = false, .printer = "test printer"};
constexpr target::CDialect kGuarded{.paren_negative_ints = true, .has_udiv = true, .has_fmod = true, .printer = "test printer"};

Expr bin(BinOp op, Expr a, Expr b) { return binary(op, std::move(a), std::move(b)); }

TEST(CExpr, FloorSemanticsUseHelpersUnlessBothOperandsAreNonNegative) {
  Var i = var("i"), j = var("j"), x = var("x");
  TestPrinter p(kPlain, {"i", "j"});
  // both non-negative: plain C++ only by a positive constant; j may be 0, and the helpers guard it
  // (without tw_udiv, as AscendC: x // 0 == 0 and x % 0 == x, never a trap; session 28, h-scast17)
  EXPECT_EQ(p.print(bin(BinOp::FloorDiv, i, int_imm(4))), "(i / 4)");
  EXPECT_EQ(p.print(bin(BinOp::Mod, i, int_imm(4))), "(i % 4)");
  EXPECT_EQ(p.print(bin(BinOp::CeilDiv, i, int_imm(4))), "((i + 4 - 1) / 4)");
  EXPECT_EQ(p.print(bin(BinOp::FloorDiv, i, j)), "tw_floordiv(i, j)");
  EXPECT_EQ(p.print(bin(BinOp::Mod, i, j)), "tw_floormod(i, j)");
  EXPECT_EQ(p.print(bin(BinOp::CeilDiv, i, j)), "tw_ceildiv(i, j)");
  EXPECT_EQ(p.print(bin(BinOp::FloorDiv, x, j)), "tw_floordiv(x, j)");
  EXPECT_EQ(p.print(bin(BinOp::Mod, i, x)), "tw_floormod(i, x)");
  EXPECT_EQ(p.print(bin(BinOp::CeilDiv, x, i)), "tw_ceildiv(x, i)");
}

TEST(CExpr, IntegerTrueDivisionIsAnInternalError) {
  // ir::binary makes `/` of integers a float32 division; a node built directly must not print as C++'s
  // integer `/` (the verifier rejects it too)
  Var i = var("i");
  TestPrinter p(kPlain);
  EXPECT_EQ(p.print(bin(BinOp::Div, i, int_imm(4))), "((T)i / (T)4)");
  try {
    p.print(std::make_shared<BinaryNode>(BinOp::Div, i, int_imm(4), i->dtype, Span{}));
    FAIL() << "expected an internal error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("internal: an integer true division '/' reached the test printer"),
              std::string::npos) << e.what();
  }
}

TEST(CExpr, ZeroGuardedDivisionOnlyForNonConstantDivisors) {
  Var i = var("i"), j = var("j");
  TestPrinter p(kGuarded, {"i", "j"});
  EXPECT_EQ(p.print(bin(BinOp::FloorDiv, i, j)), "tw_udiv(i, j)");
  EXPECT_EQ(p.print(bin(BinOp::Mod, i, j)), "tw_umod(i, j)");
  EXPECT_EQ(p.print(bin(BinOp::CeilDiv, i, j)), "tw_udiv(i + j - 1, j)");
  EXPECT_EQ(p.print(bin(BinOp::FloorDiv, i, int_imm(4))), "(i / 4)");
  EXPECT_EQ(p.print(bin(BinOp::Mod, i, int_imm(4))), "(i % 4)");
  EXPECT_EQ(p.print(bin(BinOp::CeilDiv, i, int_imm(4))), "((i + 4 - 1) / 4)");
}

TEST(CExpr, OperatorsAndLiterals) {
  Var i = var("i"), b = var("b", DType(DTypeCode::boolean));
  TestPrinter plain(kPlain), paren(kGuarded);
  EXPECT_EQ(plain.print(bin(BinOp::Add, i, int_imm(-3))), "(i + -3)");
  EXPECT_EQ(paren.print(bin(BinOp::Add, i, int_imm(-3))), "(i + (-3))");
  EXPECT_EQ(plain.print(int_imm(int64_t{1} << 40)), "1099511627776LL");
  EXPECT_EQ(paren.print(int_imm(-(int64_t{1} << 40))), "(-1099511627776LL)");
  EXPECT_EQ(plain.print(bin(BinOp::Mul, bin(BinOp::Add, int_imm(2), int_imm(3)), int_imm(7))), "35");  // folded
  EXPECT_EQ(plain.print(bin(BinOp::Min, i, int_imm(8))), "tw_min(i, 8)");
  EXPECT_EQ(plain.print(bin(BinOp::Max, i, int_imm(8))), "tw_max(i, 8)");
  EXPECT_EQ(plain.print(bin(BinOp::LE, i, int_imm(8))), "(i <= 8)");
  EXPECT_EQ(plain.print(bin(BinOp::And, b, int_imm(1, DType(DTypeCode::boolean)))), "(b && true)");
  EXPECT_EQ(plain.print(unary(UnOp::Neg, i)), "(-i)");
  EXPECT_EQ(plain.print(unary(UnOp::Not, b)), "(!b)");
  EXPECT_EQ(plain.print(select(b, i, int_imm(0))), "(b ? i : 0)");
  EXPECT_EQ(plain.print(cast(i, DType(DTypeCode::f32))), "(T)i");
}

TEST(CExpr, FloatModuloNeedsTwFmod) {
  Var x = var("x", DType(DTypeCode::f32)), y = var("y", DType(DTypeCode::f32));
  EXPECT_EQ(TestPrinter(kGuarded).print(bin(BinOp::Mod, x, y)), "tw_fmod(x, y)");
  try {
    TestPrinter(kPlain).print(bin(BinOp::Mod, x, y));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float modulo in a scalar expression is not supported by the test printer"),
              std::string::npos)
        << e.what();
  }
}

TEST(CExpr, MissingExpressionIsAnError) { EXPECT_THROW(TestPrinter(kPlain).print(Expr{}), Error); }

TEST(CExpr, NonNegativity) {
  Var i = var("i"), x = var("x");
  TestPrinter p(kPlain, {"i"});
  EXPECT_TRUE(p.nonneg(bin(BinOp::Mul, i, int_imm(3))));
  EXPECT_FALSE(p.nonneg(bin(BinOp::Add, i, x)));
  EXPECT_FALSE(p.nonneg(int_imm(-1)));
}

TEST(CExpr, FloatDigits) {
  EXPECT_EQ(target::c_float_digits(2.0, false), "2.0f");
  EXPECT_EQ(target::c_float_digits(0.5, true), "0.5");
  EXPECT_EQ(target::c_float_digits(1e20, false), "1e+20f");
  EXPECT_EQ(target::c_float_digits(-1.25, false), "-1.25f");
  EXPECT_EQ(target::c_nan(false), "__builtin_nanf(\"\")");
  EXPECT_EQ(target::c_nan(true), "__builtin_nan(\"\")");
}

// Bitwise operators and shifts without undefined behaviour: the left shift on uint64_t, the
// right shift on the value wrapped into its type, counts masked to the width.
TEST(CExpr, BitwiseOperatorsAndShifts) {
  Var x = var("x"), n = var("n"), u = var("u", DTypeCode::u8), w = var("w", DTypeCode::i8);
  TestPrinter p(kPlain);
  EXPECT_EQ(p.print(bin(BinOp::BitAnd, x, n)), "(x & n)");
  EXPECT_EQ(p.print(bin(BinOp::BitOr, x, n)), "(x | n)");
  EXPECT_EQ(p.print(bin(BinOp::BitXor, x, n)), "(x ^ n)");
  EXPECT_EQ(p.print(unary(UnOp::BitNot, x)), "(~x)");
  EXPECT_EQ(p.print(bin(BinOp::Shl, x, n)), "((int64_t)((uint64_t)x << (n & 31)))");
  EXPECT_EQ(p.print(bin(BinOp::Shr, x, n)), "((int64_t)(int32_t)x >> (n & 31))");
  EXPECT_EQ(p.print(bin(BinOp::Shl, x, int_imm(33))), "((int64_t)((uint64_t)x << 1))");
  EXPECT_EQ(p.print(bin(BinOp::Shr, x, int_imm(-1))), "((int64_t)(int32_t)x >> 31)");
  EXPECT_EQ(p.print(bin(BinOp::Shr, u, int_imm(9, DTypeCode::u8))), "((int64_t)(uint8_t)u >> 1)");
  EXPECT_EQ(p.print(bin(BinOp::Shr, w, int_imm(7, DTypeCode::i8))), "((int64_t)(int8_t)w >> 7)");
  EXPECT_EQ(p.print(bin(BinOp::BitXor, int_imm(6), int_imm(3))), "5");  // constants fold
}

// Integer + - * and unary - that may leave int64 wrap on uint64_t (h-chk38); index variables (below
// 2^31, combined without overflow by the generated code's convention) keep C's signed form, data
// variables (a target's data_var: a scalar parameter, a let of a tensor element) are bounded by what
// the target says (h-bounds39: an int64 parameter's c * c was C's undefined signed overflow).
TEST(CExpr, DataVariablesPastInt64Wrap) {
  Var i = var("i", DTypeCode::i64), j = var("j", DTypeCode::i64), c = var("c", DTypeCode::i64),
      s = var("s", DTypeCode::i32), h = var("h", DTypeCode::i32);
  TestPrinter p(kPlain, {}, {{"c", 0x1p63L}, {"s", 0x1p31L}, {"h", 0x1p62L}});
  EXPECT_EQ(p.print(bin(BinOp::Mul, i, j)), "(i * j)");              // index arithmetic
  EXPECT_EQ(p.print(bin(BinOp::Mul, c, c)), "((int64_t)((uint64_t)c * (uint64_t)c))");
  EXPECT_EQ(p.print(bin(BinOp::Add, c, i)), "((int64_t)((uint64_t)c + (uint64_t)i))");
  EXPECT_EQ(p.print(bin(BinOp::Mul, s, s)), "(s * s)");              // 2^62: inside int64
  EXPECT_EQ(p.print(bin(BinOp::Mul, bin(BinOp::Mul, s, s), s)), "((int64_t)((uint64_t)(s * s) * (uint64_t)s))");
  EXPECT_EQ(p.print(bin(BinOp::Mul, h, s)), "((int64_t)((uint64_t)h * (uint64_t)s))");  // a let past int32
  // a quotient is bounded by its dividend, not its dtype (h // 3 of an int32 let holding 2^62)
  EXPECT_EQ(p.print(bin(BinOp::Mul, bin(BinOp::FloorDiv, h, int_imm(3)), s)),
            "((int64_t)((uint64_t)tw_floordiv(h, 3) * (uint64_t)s))");
  EXPECT_EQ(p.print(unary(UnOp::Neg, c)), "((int64_t)(0 - (uint64_t)c))");  // -INT64_MIN
  EXPECT_EQ(p.print(unary(UnOp::Neg, s)), "(-s)");
}

TEST(CExpr, DeepExpressionsPrintInLinearTime) {
  // each node's facts once per print (the bound used to be recomputed at every level, with ir::as_const_int's
  // walk at each node of it: cubic in the depth); 999 levels, the IR's limit (kMaxIrHeight)
  Var i = var("i", DTypeCode::i64), c = var("c", DTypeCode::i64);
  TestPrinter p(kPlain, {}, {{"c", 0x1p63L}});
  Expr e = i;
  for (int k = 0; k < 998; ++k) e = bin(BinOp::Add, e, i);
  const std::string index = p.print(e);
  EXPECT_EQ(index.find("uint64_t"), std::string::npos);
  EXPECT_EQ(index.size(), 998 * 5 + 1 + 998);  // "(" + ... + " + i)" per level
  e = bin(BinOp::Add, e, c);
  EXPECT_EQ(p.print(e).rfind("((int64_t)((uint64_t)(", 0), 0u);
}

}  // namespace
