// The IR's height limit (kMaxIrHeight): a node that would root a taller tree is an Error when it
// is built, so no pass, printer or destructor recurses past the stack on IR from the builders.
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "tilewright/ir.h"

namespace tw::ir {
namespace {

Span L(int line) { return Span{"k.py", line, 5}; }

TEST(IrHeight, LeavesAndParentsCount) {
  Expr x = var("x", kIndexType);
  EXPECT_EQ(x->height, 1);
  Expr e = binary(BinOp::Add, x, binary(BinOp::Mul, x, int_imm(2)));
  EXPECT_EQ(e->height, 3);
  Buffer A = buffer("A", DTypeCode::f32, {int_imm(8)}, Scope::global);
  Stmt st = std::make_shared<StoreNode>(A, std::vector<Expr>{e}, float_imm(1.0), L(1));
  EXPECT_EQ(st->height, 4);  // the store counts its index expression
  Stmt sq = std::make_shared<SeqNode>(std::vector<Stmt>{st, st}, L(1));
  EXPECT_EQ(sq->height, 5);
  EXPECT_EQ(std::make_shared<SeqNode>(std::vector<Stmt>{}, L(1))->height, 1);
}

TEST(IrHeight, DeepExpressionChainIsAnError) {
  Expr e = var("x", kIndexType);
  int built = 0;
  try {
    for (; built < 100000; ++built) e = binary(BinOp::Add, e, int_imm(1), L(7));
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(err.message().find("nested more than 1000 levels deep"), std::string::npos) << err.message();
    EXPECT_EQ(err.span().line, 7);
  }
  EXPECT_EQ(built, kMaxIrHeight - 1);
  EXPECT_EQ(e->height, kMaxIrHeight);
  EXPECT_FALSE(print(e).empty());  // the tallest tree allowed prints
  // every expression kind checks, not only binary
  EXPECT_THROW(unary(UnOp::Neg, e), Error);
  EXPECT_THROW(cast(e, DTypeCode::i64), Error);
  EXPECT_THROW(select(binary(BinOp::LT, int_imm(0), int_imm(1)), e, e), Error);
  Buffer A = buffer("A", DTypeCode::f32, {int_imm(8)}, Scope::global);
  EXPECT_THROW(load(A, {e}), Error);
}

TEST(IrHeight, DeepStatementNestIsAnError) {
  Stmt s = std::make_shared<SeqNode>(std::vector<Stmt>{}, L(1));
  Var i = var("i", kIndexType);
  int built = 0;
  try {
    for (; built < 100000; ++built)
      s = built % 2 ? Stmt(std::make_shared<SeqNode>(std::vector<Stmt>{s}, L(2)))
                    : Stmt(std::make_shared<ForNode>(i, int_imm(0), int_imm(2), ForKind::serial, 0, s, L(3)));
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(err.message().find("nested more than 1000 levels deep"), std::string::npos) << err.message();
  }
  EXPECT_EQ(built, kMaxIrHeight - 1);
  // an expression inside a statement adds its height to the statement's
  Expr tall = var("x", kIndexType);
  for (int n = 0; n < 990; ++n) tall = binary(BinOp::Add, tall, int_imm(1));
  Stmt nest = std::make_shared<IfNode>(binary(BinOp::LT, tall, int_imm(3)),
                                       std::make_shared<SeqNode>(std::vector<Stmt>{}, L(1)), nullptr, L(1));
  for (int n = 0; n < 7; ++n) nest = std::make_shared<SeqNode>(std::vector<Stmt>{nest}, L(1));
  EXPECT_EQ(nest->height, 1000);
  EXPECT_THROW(std::make_shared<SeqNode>(std::vector<Stmt>{nest}, L(1)), Error);
}

}  // namespace
}  // namespace tw::ir
