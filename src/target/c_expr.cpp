#include "target/c_expr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "ir/functor.h"

namespace tw::target {

using ir::BinOp;
using ir::Error;
using ir::ExprKind;

std::string CExprPrinter::print(const ir::Expr& e) const {
  if (!e) throw Error(std::string("internal: a scalar expression given to the ") + d_.printer + " is missing");
  MemoScope scope(*this);
  if (e->kind == ExprKind::Binary && e->dtype.is_int())  // fold constant index arithmetic
    if (auto c = facts(e).cst) return c_int_literal(*c, d_);
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

const CExprPrinter::Facts& CExprPrinter::facts(const ir::Expr& e) const {
  if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second.second;
  Facts f = compute_facts(e);
  return memo_.emplace(e.get(), std::make_pair(e, f)).first->second.second;
}

CExprPrinter::Facts CExprPrinter::compute_facts(const ir::Expr& e) const {
  const int bits = e->dtype.is_int() ? e->dtype.bits() : 64;
  const long double range = std::ldexp(1.0L, e->dtype.code == ir::DTypeCode::u8 ? bits : bits - 1);
  Facts f{std::nullopt, range, false};
  // The children's facts first (each node once); a node with constant children folds as
  // ir::as_const_int does (which recurses only into the constant subtree).
  std::vector<const Facts*> kids;
  switch (e->kind) {
    case ExprKind::Cast: kids = {&facts(as<ir::CastNode>(e)->value)}; break;
    case ExprKind::Unary: kids = {&facts(as<ir::UnaryNode>(e)->a)}; break;
    case ExprKind::Binary: kids = {&facts(as<ir::BinaryNode>(e)->a), &facts(as<ir::BinaryNode>(e)->b)}; break;
    case ExprKind::Select:
      kids = {&facts(as<ir::SelectNode>(e)->cond), &facts(as<ir::SelectNode>(e)->t), &facts(as<ir::SelectNode>(e)->f)};
      break;
    case ExprKind::Call:
      for (const auto& a : as<ir::CallNode>(e)->args) kids.push_back(&facts(a));
      break;
    case ExprKind::IntImm: case ExprKind::FloatImm: case ExprKind::Var: case ExprKind::Load: break;
  }
  if (e->kind == ExprKind::IntImm) f.cst = as<ir::IntImmNode>(e)->value;
  else if ((e->kind == ExprKind::Cast || e->kind == ExprKind::Unary || e->kind == ExprKind::Binary) &&
           std::all_of(kids.begin(), kids.end(), [](const Facts* k) { return k->cst.has_value(); }))
    f.cst = ir::as_const_int(e);
  // index arithmetic: index variables and int32 literals combined by operators, which the
  // generated code's convention holds never overflows (its printing keeps C's signed arithmetic)
  if (f.cst) f.index = *f.cst >= INT32_MIN && *f.cst <= INT32_MAX;
  else if (e->kind == ExprKind::Var) f.index = e->dtype.is_int() && !data_var(*as<ir::VarNode>(e));
  else if (e->kind == ExprKind::Cast) f.index = e->dtype.is_int() && kids[0]->index;
  else if (e->kind == ExprKind::Unary) f.index = kids[0]->index;
  else if (e->kind == ExprKind::Binary) f.index = kids[0]->index && kids[1]->index;
  // the bound: integers are computed in int64 whatever their dtype (docs/language.md), so a
  // value of a narrower dtype is bounded by its dtype only where the code wraps it (a load, a
  // cast, a shift right); elsewhere by its operands
  const long double wide = std::ldexp(1.0L, 63);
  if (e->dtype.is_bool()) {
    f.mag = 1;
  } else if (f.cst) {
    f.mag = std::fabs(static_cast<long double>(*f.cst));
  } else if (e->kind == ExprKind::Var) {
    auto d = data_var(*as<ir::VarNode>(e));
    f.mag = d ? *d : bits == 64 ? std::ldexp(1.0L, 31) : range;  // an index variable: below 2^31
  } else if (e->kind == ExprKind::Cast) {
    if (as<ir::CastNode>(e)->value->dtype.is_int()) f.mag = std::min(range, kids[0]->mag);  // widened keeps it
  } else if (e->kind == ExprKind::Unary) {
    const auto op = as<ir::UnaryNode>(e)->op;
    f.mag = op == ir::UnOp::Neg ? kids[0]->mag : op == ir::UnOp::BitNot ? kids[0]->mag + 1 : range;
  } else if (e->kind == ExprKind::Select) {
    f.mag = std::max(kids[1]->mag, kids[2]->mag);
  } else if (e->kind == ExprKind::Call) {
    if (e->dtype.is_int() && as<ir::CallNode>(e)->fn == ir::MathFn::abs && kids.size() == 1) f.mag = kids[0]->mag;
  } else if (e->kind == ExprKind::Binary && e->dtype.is_int()) {
    const long double ma = kids[0]->mag, mb = kids[1]->mag;
    switch (as<ir::BinaryNode>(e)->op) {
      case BinOp::Add: case BinOp::Sub: f.mag = ma + mb; break;
      case BinOp::Mul: f.mag = ma * mb; break;
      case BinOp::Min: case BinOp::Max: f.mag = std::max(ma, mb); break;
      case BinOp::FloorDiv: case BinOp::CeilDiv: f.mag = ma; break;  // |a // b| <= |a| (a // 0 == 0)
      case BinOp::Mod: f.mag = std::max(ma, mb); break;               // below |b|, or a (a % 0 == a)
      // two's complement bits: inside the power of two above both
      case BinOp::BitAnd: case BinOp::BitOr: case BinOp::BitXor: f.mag = 2 * std::max(ma, mb); break;
      case BinOp::Shl: f.mag = wide; break;
      default: break;  // >> wraps its operand into the type first: the dtype's range
    }
  }
  return f;
}

std::optional<long double> CExprPrinter::data_bound(const ir::Expr& e) const {
  MemoScope scope(*this);
  const Facts& f = facts(e);
  return f.index ? std::nullopt : std::optional<long double>(f.mag);
}

std::string CExprPrinter::binary(const ir::BinaryNode& n) const {
  std::string a = print(n.a), b = print(n.b);
  auto infix = [&](const char* op) { return "(" + a + " " + op + " " + b + ")"; };
  // Integer + - * whose value may leave int64 (a product by a literal past int32, of three int32
  // values, of int64 values) wrap modulo 2^64 on uint64_t, never C's undefined signed overflow
  // (g++ -O3 derived loop bounds from it: checked mode's chk38 crash); the store's wrap into the
  // element type then gives the language's value. Index arithmetic (Facts::index) keeps C's form.
  auto arith = [&](const char* op) {
    if (!n.dtype.is_int()) return infix(op);
    const Facts &fa = facts(n.a), &fb = facts(n.b);
    if ((fa.index && fb.index) || (n.op == BinOp::Mul ? fa.mag * fb.mag : fa.mag + fb.mag) < std::ldexp(1.0L, 63))
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
    case ir::UnOp::Neg: {  // -INT64_MIN: wraps modulo 2^64 as + - * do (binary)
      const Facts& f = facts(n.a);
      if (n.dtype.is_int() && !f.index && f.mag >= std::ldexp(1.0L, 63)) return "((int64_t)(0 - (uint64_t)" + print(n.a) + "))";
      return "(-" + print(n.a) + ")";
    }
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
