// The IR's height limit (kMaxIrHeight): a node that would root a taller tree is an Error when it
// is built, so no pass, printer or destructor recurses past the stack on IR from the builders.
// The IR's lists (the X-macros of ir.h): every name table names each enumerator once and parses
// back to it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "tilewright/ir.h"

namespace tw::ir {
namespace {

Span L(int line) { return Span{"k.py", line, 5}; }

// name(e) for every enumerator: distinct, non-empty, and parse(name(e)) == e where there is a parser.
template <class E, class Name, class Parse>
void expect_round_trip(Name name, Parse parse) {
  std::set<std::string> seen;
  for (E e : all_of<E>()) {
    std::string n(name(e));
    EXPECT_FALSE(n.empty());
    EXPECT_TRUE(seen.insert(n).second) << "duplicate name " << n;
    EXPECT_EQ(parse(n), std::optional<E>(e)) << n;
  }
  EXPECT_EQ(seen.size(), enum_count<E>);
}

TEST(IrLists, EveryNameTableRoundTrips) {
  expect_round_trip<Scope>(scope_name, parse_scope);
  expect_round_trip<BinOp>(binop_name, parse_binop);
  expect_round_trip<UnOp>(unop_name, parse_unop);
  expect_round_trip<MathFn>(mathfn_name, parse_mathfn);
  expect_round_trip<ForKind>(forkind_name, parse_forkind);
  expect_round_trip<ReduceKind>(reducekind_name, parse_reducekind);
  expect_round_trip<CoreKind>(corekind_name, parse_corekind);
  expect_round_trip<AscendPipe>(pipe_name, parse_pipe);
  expect_round_trip<SyncKind>(synckind_name, parse_synckind);
  expect_round_trip<DTypeCode>([](DTypeCode c) { return DType(c).name(); },
                               [](std::string_view n) -> std::optional<DTypeCode> {
                                 if (auto t = parse_dtype(n)) return t->code;
                                 return std::nullopt;
                               });
  // the node kinds are named after their enumerators
  EXPECT_EQ(exprkind_name(ExprKind::Load), "Load");
  EXPECT_EQ(stmtkind_name(StmtKind::CoreScope), "CoreScope");
  EXPECT_EQ(enum_count<ExprKind>, static_cast<size_t>(ExprKind::Load) + 1);
  EXPECT_EQ(enum_count<StmtKind>, static_cast<size_t>(StmtKind::Sync) + 1);
}

TEST(IrLists, MathFunctionFactsComeFromTheList) {
  EXPECT_EQ(mathfn_arity(MathFn::pow), 2);
  EXPECT_EQ(mathfn_arity(MathFn::exp), 1);
  EXPECT_TRUE(mathfn_takes_int(MathFn::abs));
  EXPECT_FALSE(mathfn_takes_int(MathFn::sqrt));
  EXPECT_EQ(mathfn_doc(MathFn::sigmoid), "1 / (1 + exp(-x))");
  // the builder checks the arity from the list
  Expr x = float_imm(1.0);
  EXPECT_THROW(call(MathFn::pow, {x}), Error);
  EXPECT_THROW(call(MathFn::exp, {x, x}), Error);
  EXPECT_EQ(call(MathFn::abs, {int_imm(3)})->dtype, DType(DTypeCode::i32));  // abs keeps an int type
  EXPECT_EQ(call(MathFn::exp, {int_imm(3)})->dtype, DType(DTypeCode::f32));
}

// The parser reads every operator of the list back (infix ones by their symbol and precedence,
// min/max/ceildiv as calls) to the node the printer printed: print(parse(print(k))) == print(k).
TEST(IrLists, EveryBinaryOperatorPrintsAndParsesBack) {
  Buffer A = buffer("A", kIndexType, {int_imm(4)}, Scope::global);
  Buffer P = buffer("P", DTypeCode::boolean, {int_imm(4)}, Scope::global);
  Buffer C = buffer("C", kIndexType, {int_imm(4)}, Scope::global);
  Buffer D = buffer("D", DTypeCode::boolean, {int_imm(4)}, Scope::global);
  std::vector<Stmt> body;
  for (BinOp op : all_of<BinOp>()) {
    bool logic = op == BinOp::And || op == BinOp::Or;
    const Buffer& in = logic ? P : A;
    Expr e = binary(op, load(in, {int_imm(0)}), load(in, {int_imm(1)}));
    body.push_back(std::make_shared<StoreNode>(e->dtype.is_bool() ? D : C, std::vector<Expr>{int_imm(2)}, e, Span{}));
    auto* n = as<BinaryNode>(e);  // (div converts int operands to float32)
    std::string a = print(n->a), b = print(n->b);
    if (binop_prec(op) == kCallPrec)
      EXPECT_EQ(print(e), std::string(binop_name(op)) + "(" + a + ", " + b + ")");
    else
      EXPECT_EQ(print(e), a + " " + std::string(binop_symbol(op)) + " " + b);
  }
  Var bx = var("bx");
  Kernel k = std::make_shared<KernelNode>(
      "ops", std::vector<Param>{{A, nullptr, false}, {P, nullptr, false}, {C, nullptr, true}, {D, nullptr, true}},
      std::vector<Var>{bx}, std::vector<Expr>{int_imm(1)}, std::make_shared<SeqNode>(body, Span{}), Span{});
  std::string text = print(k);
  EXPECT_EQ(print(parse_kernel(text)), text);
}

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
    // sequences of two statements: a loop body of one statement would be that statement (body_form)
    for (; built < 100000; ++built)
      s = built % 2 ? Stmt(std::make_shared<SeqNode>(std::vector<Stmt>{s, std::make_shared<SeqNode>(std::vector<Stmt>{}, L(2))}, L(2)))
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
