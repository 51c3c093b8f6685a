// check_bounds: provably out-of-bounds accesses are errors at their line; anything that may not
// run (under an if, in a select arm, in a loop of unknown trip count) or whose range is not exact
// is left alone, and tile accesses not proved in bounds are returned (checked at run time).
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "transform/check_bounds.h"

namespace tw::ir {
namespace {

Span L(int line) { return Span{"k.py", line, 3}; }
Expr c(int64_t v) { return int_imm(v); }
Expr add(Expr a, Expr b) { return binary(BinOp::Add, a, b); }
Expr mul(Expr a, Expr b) { return binary(BinOp::Mul, a, b); }
Expr sub(Expr a, Expr b) { return binary(BinOp::Sub, a, b); }

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

// A fragment t (8 x 40) written at t[row, j] in a T.Parallel(8, 40) over (i, j): the fuzzer's
// seed 9001 (softmax with x[i * i * i, j]) and its relatives.
struct TileK {
  Buffer X = buffer("X", DTypeCode::f32, {c(8), c(40)}, Scope::global, L(1));
  Buffer t = buffer("t", DTypeCode::f32, {c(8), c(40)}, Scope::fragment, L(2));
  Var bx = var("bx", kIndexType, L(1)), i = var("i", kIndexType, L(3)), j = var("j", kIndexType, L(3));
  Kernel make(Stmt body) {
    Stmt all = std::make_shared<SeqNode>(std::vector<Stmt>{std::make_shared<AllocNode>(t, L(2)), body}, L(1));
    return std::make_shared<KernelNode>("k", std::vector<Param>{{X, nullptr, false}}, std::vector<Var>{bx},
                                        std::vector<Expr>{c(1)}, all, L(1));
  }
  Stmt par(Stmt body) {
    return std::make_shared<ForNode>(i, c(0), c(8), ForKind::parallel, 0,
                                     std::make_shared<ForNode>(j, c(0), c(40), ForKind::parallel, 0, body, L(3)), L(3));
  }
  Stmt store_row(Expr row, int line = 4) {
    return std::make_shared<StoreNode>(t, std::vector<Expr>{row, j}, load(X, {i, j}), L(line));
  }
  // check_bounds' unproved tile accesses of a kernel whose only store is `st`
  bool unproved(Stmt loop_body) {
    auto s = transform::check_bounds(make(par(loop_body)));
    return s.count(loop_body.get()) > 0;
  }
};

TEST(CheckBounds, CubeOfALoopVariableIsExact) {  // fuzz_mutate seed 9001
  TileK k;
  int line = 0;
  std::string msg = error_of(k.make(k.par(k.store_row(mul(mul(k.i, k.i), k.i), 7))), &line);
  EXPECT_NE(msg.find("of 't' reaches 343, outside dimension 0 of size 8"), std::string::npos) << msg;
  EXPECT_EQ(line, 7);
}

TEST(CheckBounds, MonotoneIndicesWithRepeatedVariablesAreProved) {
  TileK k;
  // i * i // 8 in [0, 6]; (i * 7) % 8 in [0, 7]; min(i * i, 7); max(i - 3, 0) * 2 - 1 + 1 ... all inside
  for (Expr row : {binary(BinOp::FloorDiv, mul(k.i, k.i), c(8)), binary(BinOp::Mod, mul(k.i, c(7)), c(8)),
                   binary(BinOp::Min, mul(k.i, k.i), c(7)), binary(BinOp::Max, sub(mul(k.i, k.i), c(60)), c(0)),
                   sub(c(7), k.i), binary(BinOp::FloorDiv, add(mul(k.i, k.i), k.i), c(10))}) {
    EXPECT_FALSE(k.unproved(k.store_row(row))) << print(row);
  }
}

TEST(CheckBounds, ExactRangesReportTheEndReached) {
  TileK k;
  int line = 0;
  // i * i - i: not monotone (i enters both ways), interval [-7, 49] is a bound only: no error
  EXPECT_EQ(error_of(k.make(k.par(k.store_row(sub(mul(k.i, k.i), k.i)))), &line), "");
  // 7 - i * i reaches -42 at i = 7
  std::string msg = error_of(k.make(k.par(k.store_row(sub(c(7), mul(k.i, k.i))))), &line);
  EXPECT_NE(msg.find("reaches -42"), std::string::npos) << msg;
  // (i * i) % 8 spans several periods: [0, 7], inside; i * i % 64 within one period: reaches 49
  EXPECT_EQ(error_of(k.make(k.par(k.store_row(binary(BinOp::Mod, mul(k.i, k.i), c(8))))), &line), "");
  msg = error_of(k.make(k.par(k.store_row(binary(BinOp::Mod, mul(k.i, k.i), c(64))))), &line);
  EXPECT_NE(msg.find("reaches 49"), std::string::npos) << msg;
}

TEST(CheckBounds, AlwaysOutsideIsAnErrorEvenWhenInexact) {
  TileK k;
  int line = 0;
  std::string msg = error_of(k.make(k.par(k.store_row(add(sub(k.i, k.i), c(100))))), &line);
  EXPECT_NE(msg.find("is always outside dimension 0 of size 8 (the index lies within [93, 107])"), std::string::npos)
      << msg;
}

TEST(CheckBounds, UnprovedTileAccessesAreReturned) {
  TileK k;
  // inexact and straddling the end: checked at run time
  EXPECT_TRUE(k.unproved(k.store_row(add(sub(k.i, k.i), c(5)))));
  // a scalar parameter: no range
  Var n = var("n", kIndexType, L(1));
  EXPECT_TRUE(k.unproved(k.store_row(n)));
  // provably out of bounds but under an if: no error, checked at run time
  Stmt st = k.store_row(mul(mul(k.i, k.i), k.i));
  Stmt guarded = std::make_shared<IfNode>(binary(BinOp::LT, k.i, c(2)), st, nullptr, L(4));
  auto s = transform::check_bounds(k.make(k.par(guarded)));
  EXPECT_TRUE(s.count(st.get()));
  // loads of tiles too
  Expr ld = load(k.t, {n, k.j});
  Stmt st2 = std::make_shared<StoreNode>(k.t, std::vector<Expr>{k.i, k.j}, ld, L(4));
  s = transform::check_bounds(k.make(k.par(st2)));
  EXPECT_TRUE(s.count(ld.get()));
  EXPECT_FALSE(s.count(st2.get()));  // t[i, j] is proved
}

TEST(CheckBounds, LoadedValuesRangeOverTheirDtype) {
  // t[min(max(L[i], 0), 7), j] with L int32: clamped into the 8 rows, proved (a cross-entropy
  // label gather); t[max(L[i], 0), j] is not; an int8 or uint8 value of L8 fits 300 rows as is.
  TileK k;
  Buffer lab_t = buffer("lab", DTypeCode::i32, {c(8)}, Scope::global, L(1));
  Expr lab = load(lab_t, {k.i});
  EXPECT_FALSE(k.unproved(k.store_row(binary(BinOp::Min, binary(BinOp::Max, lab, c(0)), c(7)))));
  EXPECT_TRUE(k.unproved(k.store_row(binary(BinOp::Max, lab, c(0)))));
  Buffer big = buffer("big", DTypeCode::f32, {c(300)}, Scope::fragment, L(1));
  for (DTypeCode t : {DTypeCode::u8, DTypeCode::i8}) {
    Buffer L8 = buffer("L8", t, {c(8)}, Scope::global, L(1));
    Expr idx = t == DTypeCode::u8 ? load(L8, {k.i}) : add(cast(load(L8, {k.i}), kIndexType), c(128));
    Stmt st = std::make_shared<StoreNode>(big, std::vector<Expr>{idx}, float_imm(0.0), L(4));
    EXPECT_TRUE(transform::check_bounds(k.make(k.par(st))).empty());
  }
}

TEST(CheckBounds, GlobalAccessesAreNotReturned) {
  K k;
  Var n = var("n", kIndexType, L(1));
  Stmt st = k.copy_at(n);
  EXPECT_TRUE(transform::check_bounds(k.make(k.loop(c(256), st))).empty());
}

TEST(CheckBounds, LoopsOfUnknownTripCountBoundTheirVariable) {
  // for r in range(bx + 1) with bx in [0, 3]: r in [0, 3], so t[r, j] on 8 rows is proved; the
  // loop may run zero times, so t[r + 6, j] (up to 9) is checked, not an error.
  TileK k;
  Var r = var("r", kIndexType, L(3));
  auto body = [&](Expr row) {
    return std::make_shared<ForNode>(r, c(0), add(k.bx, c(1)), ForKind::serial, 0,
                                     std::make_shared<ForNode>(k.j, c(0), c(40), ForKind::parallel, 0,
                                                               k.store_row(row), L(3)),
                                     L(3));
  };
  Kernel kern = std::make_shared<KernelNode>(
      "k", std::vector<Param>{{k.X, nullptr, false}}, std::vector<Var>{k.bx}, std::vector<Expr>{c(4)},
      std::make_shared<SeqNode>(std::vector<Stmt>{std::make_shared<AllocNode>(k.t, L(2)), body(r)}, L(1)), L(1));
  EXPECT_TRUE(transform::check_bounds(kern).empty());
  Stmt far = body(add(r, c(6)));
  Kernel kern2 = std::make_shared<KernelNode>(
      "k", std::vector<Param>{{k.X, nullptr, false}}, std::vector<Var>{k.bx}, std::vector<Expr>{c(4)},
      std::make_shared<SeqNode>(std::vector<Stmt>{std::make_shared<AllocNode>(k.t, L(2)), far}, L(1)), L(1));
  EXPECT_EQ(transform::check_bounds(kern2).size(), 1u);
}

TEST(CheckBounds, LetVariablesCarryTheirRange) {
  // row = i * i // 8 (a let): t[row, j] proved; row2 = i * i: t[row2, j] reaches 49
  TileK k;
  Var row = var("row", kIndexType, L(4));
  Stmt st = k.store_row(row, 5);
  Stmt body = std::make_shared<SeqNode>(
      std::vector<Stmt>{std::make_shared<LetNode>(row, binary(BinOp::FloorDiv, mul(k.i, k.i), c(8)), L(4)), st}, L(4));
  EXPECT_TRUE(transform::check_bounds(k.make(k.par(body))).empty());
  Stmt body2 = std::make_shared<SeqNode>(std::vector<Stmt>{std::make_shared<LetNode>(row, mul(k.i, k.i), L(4)), st},
                                         L(4));
  int line = 0;
  std::string msg = error_of(k.make(k.par(body2)), &line);
  EXPECT_NE(msg.find("reaches 49"), std::string::npos) << msg;
  EXPECT_EQ(line, 5);
}

TEST(CheckBounds, GemmRegionsOfTilesAreCheckedLikeAccesses) {
  // gemm does not clip: c[i * 8 : +8, 0 : +8] of a 16-row fragment for i in 0..2 reaches row 23
  Buffer a = buffer("a", DTypeCode::f32, {c(8), c(8)}, Scope::shared, L(1));
  Buffer b = buffer("b", DTypeCode::f32, {c(8), c(8)}, Scope::shared, L(1));
  Buffer cc = buffer("c", DTypeCode::f32, {c(16), c(8)}, Scope::fragment, L(1));
  Var i = var("i", kIndexType, L(2)), bx = var("bx", kIndexType, L(1)), n = var("n", kIndexType, L(1));
  auto kernel = [&](Expr start, Expr extent) {
    Stmt g = std::make_shared<GemmNode>(full_region(a), full_region(b), Region{cc, {start, c(0)}, {extent, c(8)}}, false,
                                        false, false, L(3));
    Stmt loop = std::make_shared<ForNode>(i, c(0), c(3), ForKind::serial, 0, g, L(2));
    std::vector<Stmt> body{std::make_shared<AllocNode>(a, L(1)), std::make_shared<AllocNode>(b, L(1)),
                           std::make_shared<AllocNode>(cc, L(1)), loop};
    return std::pair{std::make_shared<KernelNode>("k", std::vector<Param>{}, std::vector<Var>{bx},
                                                  std::vector<Expr>{c(1)}, std::make_shared<SeqNode>(body, L(1)), L(1)),
                     g};
  };
  int line = 0;
  std::string msg = error_of(kernel(mul(i, c(8)), c(8)).first, &line);
  EXPECT_NE(msg.find("region start i * 8 (extent 8) of 'c' reaches 23, outside dimension 0 of size 16"),
            std::string::npos) << msg;
  EXPECT_EQ(line, 3);
  auto [k1, g1] = kernel(mul(i, c(4)), c(8));  // rows 0..15: proved
  EXPECT_TRUE(transform::check_bounds(k1).empty());
  auto [k2, g2] = kernel(n, c(8));  // a scalar start: checked at run time
  EXPECT_TRUE(transform::check_bounds(k2).count(g2.get()));
}

}  // namespace
}  // namespace tw::ir
