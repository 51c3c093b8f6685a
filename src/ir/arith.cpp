#include "ir/arith.h"

#include <cmath>
#include <limits>

namespace tw::ir::arith {

namespace {



// ---------------------------------------------------------------------------------------------
// Constants


bool fits(int64_t v, DType t) {
  switch (t.code) {
    case DTypeCode::i8: return v >= -128 && v <= 127;
    case DTypeCode::u8: return v >= 0 && v <= 255;
    case DTypeCode::i32: return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    case DTypeCode::i64: return true;
    case DTypeCode::boolean: return v == 0 || v == 1;
    case DTypeCode::f16: case DTypeCode::bf16: case DTypeCode::f32: case DTypeCode::f64: return false;
  }
  return false;  // not reached: the switch lists every enumerator
}

std::optional<int64_t> eval_int(BinOp op, int64_t a, int64_t b, DType t = DTypeCode::i64) {
  return ir::fold_int_binary(op, a, b, t);
}

// Whether x is exactly representable in a float type with p significand bits, smallest normal
// exponent emin and largest finite value max (subnormals are conservatively refused).
bool exact_in(double x, int p, int emin, double max) {
  if (x == 0) return true;
  double m = std::fabs(x);
  if (m > max) return false;
  int e = 0;
  double frac = std::frexp(m, &e);  // m = frac * 2^e, frac in [0.5, 1)
  if (e - 1 < emin) return false;
  double scaled = std::ldexp(frac, p);
  return scaled == std::floor(scaled);
}

bool representable(double x, DType t) {
  if (!std::isfinite(x)) return t.is_float();
  switch (t.code) {
    case DTypeCode::f64: return true;
    case DTypeCode::f32: return static_cast<double>(static_cast<float>(x)) == x;
    case DTypeCode::f16: return exact_in(x, 11, -14, 65504.0);
    case DTypeCode::bf16: return exact_in(x, 8, -126, 3.3895313892515355e38);
    case DTypeCode::i8: case DTypeCode::i32: case DTypeCode::i64: case DTypeCode::u8: case DTypeCode::boolean:
      return false;
  }
  return false;  // not reached: the switch lists every enumerator
}

// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Rules. Each function receives already simplified operands.

bool is_commutative(BinOp op) { return op == BinOp::Add || op == BinOp::Mul || op == BinOp::Min || op == BinOp::Max; }
bool is_compare(BinOp op) { return op >= BinOp::EQ && op <= BinOp::GE; }

Expr make_binary(BinOp op, Expr a, Expr b, DType t, const Span& s) {
  return std::make_shared<BinaryNode>(op, std::move(a), std::move(b), t, s);
}

// x op c where x is `node` = (inner op2 c1): returns (inner, c1) when node has that shape.
bool split_const_rhs(const Expr& node, BinOp op2, Expr& inner, int64_t& c1) {
  if (node->kind != ExprKind::Binary) return false;
  auto* n = as<BinaryNode>(node);
  auto c = literal(n->b);
  if (n->op != op2 || !c || n->a->dtype != node->dtype) return false;
  inner = n->a;
  c1 = *c;
  return true;
}

Expr simplify_binary(BinOp op, Expr a, Expr b, DType t, const Span& s, const Expr& original) {
  auto keep = [&]() -> Expr {
    if (original) {
      auto* n = as<BinaryNode>(original);
      if (n->a == a && n->b == b) return original;
    }
    return make_binary(op, a, b, t, s);
  };
  auto ca = literal(a), cb = literal(b);

  if (op == BinOp::And || op == BinOp::Or) {
    if (ca && !cb) { std::swap(a, b); std::swap(ca, cb); }
    if (cb) {
      bool absorbing = (op == BinOp::And) ? *cb == 0 : *cb != 0;
      if (absorbing) return int_imm(op == BinOp::And ? 0 : 1, DTypeCode::boolean, s);
      return a;  // true and x = x, false or x = x
    }
    return keep();
  }
  if (is_compare(op)) {
    if (ca && cb && !a->dtype.is_float()) return int_imm(*eval_int(op, *ca, *cb), DTypeCode::boolean, s);
    return keep();
  }
  if (!t.is_int()) return keep();  // float math is left alone

  if (ca && cb) {
    if (auto r = eval_int(op, *ca, *cb, t); r && fits(*r, t)) return int_imm(*r, t, s);
    return keep();
  }
  if (ca && is_commutative(op)) {
    std::swap(a, b);
    std::swap(ca, cb);
  }
  const bool same_type = a->dtype == t;
  auto zero = [&] { return int_imm(0, t, s); };
  auto constant = [&](int64_t v, const Span& sp) { return int_imm(v, t, sp); };
  Expr x;
  int64_t c1 = 0;

  switch (op) {
    case BinOp::Add:
      if (cb && *cb == 0 && same_type) return a;
      if (cb && split_const_rhs(a, BinOp::Add, x, c1)) {  // (x + c1) + c2
        if (auto r = eval_int(BinOp::Add, c1, *cb); r && fits(*r, t))
          return simplify_binary(BinOp::Add, x, constant(*r, b->span), t, s, nullptr);
      }
      if (cb && split_const_rhs(a, BinOp::Sub, x, c1)) {  // (x - c1) + c2
        if (auto r = eval_int(BinOp::Sub, *cb, c1); r && fits(*r, t))
          return simplify_binary(BinOp::Add, x, constant(*r, b->span), t, s, nullptr);
      }
      break;
    case BinOp::Sub:
      if (cb && *cb == 0 && same_type) return a;
      if (structural_equal(a, b)) return zero();
      if (cb && split_const_rhs(a, BinOp::Add, x, c1)) {  // (x + c1) - c2
        if (auto r = eval_int(BinOp::Sub, c1, *cb); r && fits(*r, t))
          return simplify_binary(BinOp::Add, x, constant(*r, b->span), t, s, nullptr);
      }
      if (cb && split_const_rhs(a, BinOp::Sub, x, c1)) {  // (x - c1) - c2
        if (auto r = eval_int(BinOp::Add, c1, *cb); r && fits(*r, t))
          return simplify_binary(BinOp::Sub, x, constant(*r, b->span), t, s, nullptr);
      }
      break;
    case BinOp::Mul:
      if (cb && *cb == 1 && same_type) return a;
      if (cb && *cb == 0) return zero();
      if (cb && split_const_rhs(a, BinOp::Mul, x, c1)) {  // (x * c1) * c2
        if (auto r = eval_int(BinOp::Mul, c1, *cb); r && fits(*r, t))
          return simplify_binary(BinOp::Mul, x, constant(*r, b->span), t, s, nullptr);
      }
      break;
    case BinOp::FloorDiv:
    case BinOp::CeilDiv:
      if (cb && *cb == 1 && same_type) return a;
      break;
    case BinOp::Mod:
      if (cb && (*cb == 1 || *cb == -1)) return zero();
      break;
    case BinOp::Min:
    case BinOp::Max:
      if (structural_equal(a, b) && same_type) return a;
      break;
    case BinOp::Div: case BinOp::EQ: case BinOp::NE: case BinOp::LT: case BinOp::LE: case BinOp::GT:
    case BinOp::GE: case BinOp::And: case BinOp::Or: case BinOp::BitAnd: case BinOp::BitOr:
    case BinOp::BitXor: case BinOp::Shl: case BinOp::Shr:
      break;
  }
  return keep();
}

Expr simplify_unary(const UnaryNode* n, const Expr& a, const Expr& original) {
  auto c = literal(a);
  if (n->op == UnOp::Neg && n->dtype.is_int()) {
    if (c && *c != std::numeric_limits<int64_t>::min() && fits(-*c, n->dtype)) return int_imm(-*c, n->dtype, n->span);
    if (a->kind == ExprKind::Unary && as<UnaryNode>(a)->op == UnOp::Neg && as<UnaryNode>(a)->a->dtype == n->dtype)
      return as<UnaryNode>(a)->a;
  }
  if (n->op == UnOp::BitNot) {
    if (c && fits(~*c, n->dtype)) return int_imm(~*c, n->dtype, n->span);
    if (a->kind == ExprKind::Unary && as<UnaryNode>(a)->op == UnOp::BitNot && as<UnaryNode>(a)->a->dtype == n->dtype)
      return as<UnaryNode>(a)->a;
  }
  if (n->op == UnOp::Not) {
    if (c) return int_imm(*c == 0 ? 1 : 0, DTypeCode::boolean, n->span);
    if (a->kind == ExprKind::Unary && as<UnaryNode>(a)->op == UnOp::Not) return as<UnaryNode>(a)->a;
  }
  if (a == n->a) return original;
  return std::make_shared<UnaryNode>(n->op, a, n->dtype, n->span);
}

Expr simplify_cast(const CastNode* n, const Expr& v, const Expr& original) {
  const DType t = n->dtype;
  if (v->dtype == t && !computed_wider(v)) return v;  // a same-dtype cast of arithmetic wraps / rounds
  if (auto c = literal(v)) {  // int or bool literal
    if (t.is_int() && fits(*c, t)) return int_imm(*c, t, n->span);
    if (t.is_float() && representable(static_cast<double>(*c), t)) return float_imm(static_cast<double>(*c), t, n->span);
  }
  if (v->kind == ExprKind::FloatImm) {
    double x = as<FloatImmNode>(v)->value;
    if (t.is_float() && representable(x, t)) return float_imm(x, t, n->span);
    if (t.is_int() && std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9.0e18 &&
        fits(static_cast<int64_t>(x), t))
      return int_imm(static_cast<int64_t>(x), t, n->span);
  }
  if (v == n->value) return original;
  return std::make_shared<CastNode>(v, t, n->span);
}

}  // namespace

std::optional<int64_t> literal(const Expr& e) {
  if (e && e->kind == ExprKind::IntImm) return as<IntImmNode>(e)->value;
  return std::nullopt;
}

Expr Simplifier::mutate(const Expr& e) {
  if (!e) return e;
  switch (e->kind) {
    case ExprKind::Binary: {
      auto* n = as<BinaryNode>(e);
      return simplify_binary(n->op, mutate(n->a), mutate(n->b), n->dtype, n->span, e);
    }
    case ExprKind::Unary: {
      auto* n = as<UnaryNode>(e);
      return simplify_unary(n, mutate(n->a), e);
    }
    case ExprKind::Cast: {
      auto* n = as<CastNode>(e);
      return simplify_cast(n, mutate(n->value), e);
    }
    case ExprKind::Select: {
      auto* n = as<SelectNode>(e);
      Expr c = mutate(n->cond);
      Expr t = mutate(n->t), f = mutate(n->f);
      if (auto v = literal(c)) {
        Expr pick = *v ? t : f;
        if (pick->dtype == n->dtype) return pick;
      }
      if (structural_equal(t, f) && t->dtype == n->dtype) return t;
      if (c == n->cond && t == n->t && f == n->f) return e;
      return std::make_shared<SelectNode>(c, t, f, n->dtype, n->span);
    }
    case ExprKind::IntImm: case ExprKind::FloatImm: case ExprKind::Var: case ExprKind::Call:
    case ExprKind::Load:
      return Mutator::mutate(e);
  }
  return Mutator::mutate(e);  // not reached: the switch lists every enumerator
}

Expr simplify(const Expr& e) { return Simplifier().mutate(e); }

namespace {
Expr fold(BinOp op, const Expr& a, const Expr& b) { return simplify(binary(op, a, b)); }
}  // namespace

Expr add(const Expr& a, const Expr& b) { return fold(BinOp::Add, a, b); }
Expr sub(const Expr& a, const Expr& b) { return fold(BinOp::Sub, a, b); }
Expr mul(const Expr& a, const Expr& b) { return fold(BinOp::Mul, a, b); }
Expr floordiv(const Expr& a, const Expr& b) { return fold(BinOp::FloorDiv, a, b); }
Expr ceildiv(const Expr& a, const Expr& b) { return fold(BinOp::CeilDiv, a, b); }
Expr mod(const Expr& a, const Expr& b) { return fold(BinOp::Mod, a, b); }
Expr min(const Expr& a, const Expr& b) { return fold(BinOp::Min, a, b); }
Expr max(const Expr& a, const Expr& b) { return fold(BinOp::Max, a, b); }

namespace light {
namespace {
bool is(const Expr& e, int64_t v) {
  auto c = as_const_int(e);
  return c && *c == v;
}
}  // namespace
Expr add(const Expr& a, const Expr& b) {
  if (is(a, 0)) return b;
  if (is(b, 0)) return a;
  return binary(BinOp::Add, a, b);
}
Expr sub(const Expr& a, const Expr& b) { return is(b, 0) ? a : binary(BinOp::Sub, a, b); }
Expr mul(const Expr& a, const Expr& b) {
  if (is(a, 1)) return b;
  if (is(b, 1)) return a;
  if (is(a, 0) || is(b, 0)) return int_imm(0);
  return binary(BinOp::Mul, a, b);
}
Expr floordiv(const Expr& a, const Expr& b) { return binary(BinOp::FloorDiv, a, b); }
Expr ceildiv(const Expr& a, const Expr& b) { return binary(BinOp::CeilDiv, a, b); }
}  // namespace light

}  // namespace tw::ir::arith
