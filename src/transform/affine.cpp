#include "transform/affine.h"

#include "ir/functor.h"

namespace tw::transform {

using namespace ir;

namespace {

void add_term(Affine& f, const Expr& atom, int64_t coef) {
  for (auto it = f.terms.begin(); it != f.terms.end(); ++it) {
    if (structural_equal(it->atom, atom)) {
      it->coef += coef;
      if (it->coef == 0) f.terms.erase(it);
      return;
    }
  }
  if (coef != 0) f.terms.push_back({atom, coef});
}

}  // namespace

Affine combine(Affine a, const Affine& b, int64_t scale) {
  a.c += scale * b.c;
  for (const auto& t : b.terms) add_term(a, t.atom, scale * t.coef);
  return a;
}

Affine to_affine(const Expr& e, const LetMap& lets) {
  Affine f;
  switch (e->kind) {
    case ExprKind::IntImm: f.c = as<IntImmNode>(e)->value; return f;
    case ExprKind::Var: {
      auto it = lets.find(as<VarNode>(e));
      if (it != lets.end()) return to_affine(it->second, lets);
      add_term(f, e, 1);
      return f;
    }
    case ExprKind::Binary: {
      auto* b = as<BinaryNode>(e);
      if (!b->dtype.is_int()) break;
      if (b->op == BinOp::Add || b->op == BinOp::Sub) {
        return combine(to_affine(b->a, lets), to_affine(b->b, lets), b->op == BinOp::Add ? 1 : -1);
      }
      if (b->op == BinOp::Mul) {
        Affine x = to_affine(b->a, lets), y = to_affine(b->b, lets);
        if (y.is_const()) return combine(Affine{}, x, y.c);
        if (x.is_const()) return combine(Affine{}, y, x.c);
      }
      break;
    }
    case ExprKind::Unary: {
      auto* u = as<UnaryNode>(e);
      if (u->op == UnOp::Neg && u->dtype.is_int()) return combine(Affine{}, to_affine(u->a, lets), -1);
      break;
    }
    case ExprKind::Cast: {  // widening integer casts keep the value
      auto* c = as<CastNode>(e);
      if (c->dtype.is_int() && c->value->dtype.is_int() && c->dtype.bits() >= c->value->dtype.bits() &&
          c->value->dtype.code != DTypeCode::u8)
        return to_affine(c->value, lets);
      break;
    }
    case ExprKind::FloatImm: case ExprKind::Call: case ExprKind::Select: case ExprKind::Load: break;
  }
  if (auto v = as_const_int(e)) {
    f.c = *v;
    return f;
  }
  add_term(f, e, 1);
  return f;
}

}  // namespace tw::transform
