// check_bounds: provably out-of-bounds accesses are errors at their line; anything that may not
// run (under an if, in a select arm, in a loop of unknown trip count) or whose range is not exact
// is left alone.
#include <gtest/gtest.h>

#include "transform/check_bounds.h"

namespace tw::ir {
namespace {

Span L(int line) { return Span{"k.py", line, 3}; }
Expr c(int64_t v) { return int_imm(v); }
Expr add(Expr a, Expr b) { return binary(BinOp::Add, a, b); }
Expr mul(Expr a, Expr b) { return binary(BinOp::Mul, a, b); }

struct K {
  Buffer A = buffer("A", DTypeCode::f32, {c(1024)}, Scope::global, L(1));
  Buffer B = buffer("B", DTypeCode::f32, {c(1024)}, Scope::global, L(1));
  Var bx = var("bx", kIndexType, L(1)), i = var("i", kIndexType, L(2));
  Kernel make(Stmt body) {
    return std::make_shared<KernelNode>("k", std::vector<Param>{{A, nullptr, false}, {B, nullptr, true}},
                                        std::vector<Var>{bx}, std::vector<Expr>{c(4)}, body, L(1));
  }
  Stmt loop(Expr extent, Stmt body) {
    return std::make_shared<ForNode>(i, c(0), extent, ForKind::parallel, 0, body, L(2));
  }
  Stmt copy_at(Expr dst_index, int line = 3) {
    return std::make_shared<StoreNode>(B, std::vector<Expr>{dst_index}, load(A, {add(mul(bx, c(256)), i)}), L(line));
  }
};

std::string error_of(const Kernel& k, int* line) {
  try {
    transform::check_bounds(k);
  } catch (const Error& e) {
    *line = e.span().line;
    return e.message();
  }
  return "";
}

TEST(CheckBounds, InBoundsIsAccepted) {
  K k;
  EXPECT_NO_THROW(transform::check_bounds(k.make(k.loop(c(256), k.copy_at(add(mul(k.bx, c(256)), k.i))))));
}

TEST(CheckBounds, ConstantOffsetBeyondTheEnd) {
  K k;
  int line = 0;
  std::string msg = error_of(k.make(k.loop(c(256), k.copy_at(add(add(mul(k.bx, c(256)), k.i), c(1048576))))), &line);
  EXPECT_NE(msg.find("outside dimension 0 of size 1024"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1049599"), std::string::npos) << msg;  // 3*256 + 255 + 2^20
  EXPECT_EQ(line, 3);
}

TEST(CheckBounds, LoopOneTooLong) {
  K k;
  int line = 0;
  std::string msg = error_of(k.make(k.loop(c(257), k.copy_at(add(mul(k.bx, c(256)), k.i), 5))), &line);
  EXPECT_NE(msg.find("reaches 1024"), std::string::npos) << msg;
  EXPECT_EQ(line, 5);
}

TEST(CheckBounds, NegativeIndex) {
  K k;
  int line = 0;
  std::string msg = error_of(k.make(k.loop(c(256), k.copy_at(binary(BinOp::Sub, k.i, c(1))))), &line);
  EXPECT_NE(msg.find("reaches -1"), std::string::npos) << msg;
}

TEST(CheckBounds, GuardedOrInexactIsLeftAlone) {
  K k;
  Stmt oob = k.copy_at(add(add(mul(k.bx, c(256)), k.i), c(1048576)));
  // under an if
  EXPECT_NO_THROW(transform::check_bounds(
      k.make(k.loop(c(256), std::make_shared<IfNode>(binary(BinOp::LT, k.i, c(0)), oob, nullptr, L(3))))));
  // a loop that may not run
  Var n = var("n", kIndexType, L(1));
  EXPECT_NO_THROW(transform::check_bounds(k.make(k.loop(n, oob))));
  // the same variable twice (i - i is always 0: the interval would overestimate)
  EXPECT_NO_THROW(transform::check_bounds(
      k.make(k.loop(c(256), k.copy_at(add(binary(BinOp::Sub, k.i, k.i), c(1000)))))));
  // inside a select arm
  Stmt sel = std::make_shared<StoreNode>(
      k.B, std::vector<Expr>{c(0)},
      select(binary(BinOp::LT, k.i, c(0)), load(k.A, {add(k.i, c(5000))}), float_imm(0.0)), L(3));
  EXPECT_NO_THROW(transform::check_bounds(k.make(k.loop(c(256), sel))));
}

}  // namespace
}  // namespace tw::ir
