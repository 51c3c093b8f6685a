#include "target/c_expr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "ir/functor.h"

namespace tw::target {

using ir::BinOp;
using ir::Error;
using ir::ExprKind;

std::string CExprPrinter::print(const ir::Expr& e) const {
  if (!e) throw Error(std::string("internal: a scalar expression given to the ") + d_.printer + " is missing");
  if (e->kind == ExprKind::Binary && e->dtype.is_int())  // fold constant index arithmetic
    if (auto c = ir::as_const_int(e)) return c_int_literal(*c, d_);
  switch (e->kind) {
    case ExprKind::IntImm: {
      auto* n = as<ir::IntImmNode>(e);
      if (n->dtype.is_bool()) return n->value ? "true" : "false";
      return c_int_literal(n->value, d_);
    }
    case ExprKind::FloatImm: return float_literal(as<ir::FloatImmNode>(e)->value, e->dtype);
    case ExprKind::Var: return var(*as<ir::VarNode>(e));
    case ExprKind::Binary: return binary(*as<ir::BinaryNode>(e));
    case ExprKind::Unary: return unary(*as<ir::UnaryNode>(e));
    case ExprKind::Call: return call(*as<ir::CallNode>(e));
    case ExprKind::Cast: return cast(*as<ir::CastNode>(e));
    case ExprKind::Select: return select(*as<ir::SelectNode>(e));
    case ExprKind::Load: return load(*as<ir::LoadNode>(e));
  }
  throw Error("internal: unknown expression kind " + std::to_string(static_cast<int>(e->kind)), e->span);
}

bool CExprPrinter::nonneg(const ir::Expr& e) const {
  return ir::is_nonneg(e, [this](const ir::VarNode* v) { return nonneg_var(v); });
}


std::string CExprPrinter::lazy_select(const ir::SelectNode& n) const {
  std::string c = print(n.cond), t = print(n.t), f = print(n.f);
  return "(" + c + " ? " + t + " : " + f + ")";
}

namespace {
// The C type of an integer dtype (the bitwise operators' casts).
const char* c_int_type(ir::DType t) {
  switch (t.code) {
    case ir::DTypeCode::i8: return "int8_t";
    case ir::DTypeCode::u8: return "uint8_t";
    case ir::DTypeCode::i32: return "int32_t";
    case ir::DTypeCode::i64: case ir::DTypeCode::boolean: case ir::DTypeCode::f16: case ir::DTypeCode::bf16:
    case ir::DTypeCode::f32: case ir::DTypeCode::f64:
      return "int64_t";
  }
  return "int64_t";  // not reached: the switch lists every enumerator
}
}  // namespace

long double CExprPrinter::magnitude(const ir::Expr& e) const {
  if (e->dtype.is_bool()) return 1;
  if (auto c = ir::as_const_int(e)) return std::fabs(static_cast<long double>(*c));
  const int bits = e->dtype.is_int() ? e->dtype.bits() : 64;
  const long double range = std::ldexp(1.0L, e->dtype.code == ir::DTypeCode::u8 ? bits : bits - 1);
  // an int64 variable is a block, loop or shape index or a scalar the language computes as one:
  // index arithmetic never overflows (the generated code's convention)
  if (e->kind == ExprKind::Var) return bits == 64 ? std::ldexp(1.0L, 31) : range;
  if (e->kind == ExprKind::Unary && as<ir::UnaryNode>(e)->op == ir::UnOp::Neg) return magnitude(as<ir::UnaryNode>(e)->a);
  if (auto* c = e->kind == ExprKind::Cast ? as<ir::CastNode>(e) : nullptr; c && c->value->dtype.is_int())
    return std::min(range, magnitude(c->value));  // an integer widened keeps its bound
  if (e->kind == ExprKind::Select) return std::max(magnitude(as<ir::SelectNode>(e)->t), magnitude(as<ir::SelectNode>(e)->f));
  if (e->kind != ExprKind::Binary) return range;
  auto* n = as<ir::BinaryNode>(e);
  if (n->op == BinOp::Add || n->op == BinOp::Sub) return magnitude(n->a) + magnitude(n->b);
  if (n->op == BinOp::Mul) return magnitude(n->a) * magnitude(n->b);
  if (n->op == BinOp::Min || n->op == BinOp::Max) return std::max(magnitude(n->a), magnitude(n->b));
  return range;
}

namespace {
// Index arithmetic: integer variables and literals inside int32 combined by operators, which the
// generated code's convention holds never overflows (its printing keeps C's signed arithmetic).
bool index_only(const ir::Expr& e) {
  if (auto c = ir::as_const_int(e)) return *c >= INT32_MIN && *c <= INT32_MAX;
  switch (e->kind) {
    case ExprKind::Var: return e->dtype.is_int();
    case ExprKind::Cast: return e->dtype.is_int() && index_only(as<ir::CastNode>(e)->value);
    case ExprKind::Unary: return index_only(as<ir::UnaryNode>(e)->a);
    case ExprKind::Binary: return index_only(as<ir::BinaryNode>(e)->a) && index_only(as<ir::BinaryNode>(e)->b);
    default: return false;
  }
}
}  // namespace

std::string CExprPrinter::binary(const ir::BinaryNode& n) const {
  std::string a = print(n.a), b = print(n.b);
  auto infix = [&](const char* op) { return "(" + a + " " + op + " " + b + ")"; };
  // Integer + - * whose value may leave int64 (a product by a literal past int32, of three int32
  // values, of int64 values) wrap modulo 2^64 on uint64_t, never C's undefined signed overflow
  // (g++ -O3 derived loop bounds from it: checked mode's chk38 crash); the store's wrap into the
  // element type then gives the language's value. Index arithmetic (index_only) keeps C's form.
  auto arith = [&](const char* op) {
    const long double ma = magnitude(n.a), mb = magnitude(n.b);
    if (!n.dtype.is_int() || (index_only(n.a) && index_only(n.b)) ||
        (n.op == BinOp::Mul ? ma * mb : ma + mb) < std::ldexp(1.0L, 63))
      return infix(op);
    return "((int64_t)((uint64_t)" + a + " " + op + " (uint64_t)" + b + "))";
  };
  auto fn = [&](const char* f) { return std::string(f) + "(" + a + ", " + b + ")"; };
  const bool ints = n.a->dtype.is_int() || n.a->dtype.is_bool();
  // The fast forms need both operands non-negative; with tw_udiv/tw_umod a divisor that is not a
  // positive constant is guarded against 0 (integer division never traps).
  const bool fast = ints && (n.op == BinOp::FloorDiv || n.op == BinOp::CeilDiv || n.op == BinOp::Mod) && c_division(n);
  const auto divisor = ints ? ir::as_const_int(n.b) : std::nullopt;
  // Without tw_udiv (AscendC) a divisor that may be 0 goes through tw_floordiv / tw_floormod, which guard it.
  const bool plain = divisor && *divisor > 0;
  // A shift count modulo the type's width (ir.h): a literal when the count is a constant.
  auto count = [&] {
    const int bits = n.dtype.is_int() ? n.dtype.bits() : 64;
    if (divisor) return std::to_string(ir::shift_count(*divisor, n.dtype));
    return "(" + b + " & " + std::to_string(bits - 1) + ")";
  };
  switch (n.op) {
    case BinOp::Add: return arith("+");
    case BinOp::Sub: return arith("-");
    case BinOp::Mul: return arith("*");
    case BinOp::Div:  // true division: float (ir::binary converts integer operands; the verifier rejects others)
      if (ints) throw Error(std::string("internal: an integer true division '/' reached the ") + d_.printer, n.span);
      return infix("/");
    case BinOp::FloorDiv:
      if (!fast || (!plain && !d_.has_udiv)) return fn("tw_floordiv");
      return plain ? infix("/") : fn("tw_udiv");
    case BinOp::CeilDiv:
      if (!fast || (!plain && !d_.has_udiv)) return fn("tw_ceildiv");
      return plain ? "((" + a + " + " + b + " - 1) / " + b + ")" : "tw_udiv(" + a + " + " + b + " - 1, " + b + ")";
    case BinOp::Mod:
      if (!ints) {
        if (!d_.has_fmod)
          throw Error(std::string("float modulo in a scalar expression is not supported by the ") + d_.printer, n.span);
        return fn("tw_fmod");
      }
      if (!fast || (!plain && !d_.has_udiv)) return fn("tw_floormod");
      return plain ? infix("%") : fn("tw_umod");
    case BinOp::Min: return fn(!ints && d_.has_fminmax ? "tw_fmin" : "tw_min");
    case BinOp::Max: return fn(!ints && d_.has_fminmax ? "tw_fmax" : "tw_max");
    case BinOp::EQ: return infix("==");
    case BinOp::NE: return infix("!=");
    case BinOp::LT: return infix("<");
    case BinOp::LE: return infix("<=");
    case BinOp::GT: return infix(">");
    case BinOp::GE: return infix(">=");
    case BinOp::And: return infix(eager_logic(n) ? "&" : "&&");
    case BinOp::Or: return infix(eager_logic(n) ? "|" : "||");
    case BinOp::BitAnd: return infix("&");
    case BinOp::BitOr: return infix("|");
    case BinOp::BitXor: return infix("^");
    // No undefined behaviour: the left shift on uint64_t (wrapping), the right shift on the value
    // wrapped into its type (arithmetic for signed types, as C++20 defines it; uint8 is >= 0).
    case BinOp::Shl: return "((int64_t)((uint64_t)" + a + " << " + count() + "))";
    case BinOp::Shr: return "((int64_t)(" + std::string(c_int_type(n.dtype)) + ")" + a + " >> " + count() + ")";
  }
  throw Error("internal: unknown binary operator " + std::to_string(static_cast<int>(n.op)), n.span);
}

std::string CExprPrinter::unary(const ir::UnaryNode& n) const {
  switch (n.op) {
    case ir::UnOp::Neg: return "(-" + print(n.a) + ")";
    case ir::UnOp::Not: return "(!" + print(n.a) + ")";
    case ir::UnOp::BitNot: return "(~" + print(n.a) + ")";
  }
  throw Error("internal: unknown unary operator " + std::to_string(static_cast<int>(n.op)), n.span);
}

std::string c_int_literal(int64_t v, const CDialect& d) {
  std::string s = std::to_string(v);
  if (v > INT32_MAX || v < INT32_MIN) s += "LL";
  return v < 0 && d.paren_negative_ints ? "(" + s + ")" : s;
}

std::string c_float_digits(double v, bool dbl) {
  char buf[64];
  std::snprintf(buf, sizeof buf, dbl ? "%.17g" : "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return dbl ? s : s + "f";
}

std::string c_nan(bool dbl) { return dbl ? "__builtin_nan(\"\")" : "__builtin_nanf(\"\")"; }

}  // namespace tw::target
