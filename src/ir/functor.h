// Traversal helpers for the Tile IR: a read-only Visitor and a rebuilding Mutator.
// Override the hooks you need; the defaults walk every child. A Mutator returns the same pointer
// when nothing below a node changed, so untouched subtrees are shared, not copied.
#pragma once

#include "tilewright/ir.h"

namespace tw::ir {

class Visitor {
 public:
  virtual ~Visitor() = default;
  virtual void visit(const Expr& e);
  virtual void visit(const Stmt& s);
  virtual void visit_region(const Region& r);
  // Called for every buffer reference (loads, stores, regions, reduce operands, allocs).
  virtual void visit_buffer(const Buffer&) {}
};

class Mutator {
 public:
  virtual ~Mutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);
  virtual Region mutate_region(const Region& r);
  // Buffers are rewritten through this hook (e.g. to change a scope); default: unchanged.
  virtual Buffer mutate_buffer(const Buffer& b) { return b; }
  Kernel mutate_kernel(const Kernel& k);

 protected:
  std::vector<Expr> mutate_all(const std::vector<Expr>& v, bool& changed);
};

// Convenience: call fn on every expression / statement node, parents before children.
template <class F>
void for_each_stmt(const Stmt& s, F&& fn) {
  struct V : Visitor {
    F& f;
    explicit V(F& g) : f(g) {}
    void visit(const Stmt& st) override { if (st) f(st); Visitor::visit(st); }  // else_body may be null
    using Visitor::visit;
  } v(fn);
  v.visit(s);
}

// Node: a Stmt (every expression in it) or an Expr (it and its subexpressions).
template <class Node, class F>
void for_each_expr(const Node& s, F&& fn) {
  struct V : Visitor {
    F& f;
    explicit V(F& g) : f(g) {}
    void visit(const Expr& e) override { f(e); Visitor::visit(e); }
    using Visitor::visit;
  } v(fn);
  v.visit(s);
}

// Same tree: same kinds, dtypes, operators and constants (floats by bits: 0.0 != -0.0);
// variables and buffers by identity.
bool structural_equal(const Expr& a, const Expr& b);

// Sign analysis for index arithmetic: true when integer expression e is provably >= 0, given
// which variables are (var_nonneg). Constants, and sums, products, quotients, min of
// non-negative values, max with one non-negative side, mod by a positive constant or of a
// non-negative value by a non-negative divisor (a % 0 == a), widening integer casts of
// non-negative values and casts to uint8 are. Code generators use it to print plain / and % where
// Python's floor semantics give the same result.
template <class VarNonneg>
bool is_nonneg(const Expr& e, const VarNonneg& var_nonneg) {
  if (auto c = as_const_int(e)) return *c >= 0;
  switch (e->kind) {
    case ExprKind::Var: return var_nonneg(static_cast<const VarNode*>(e.get()));
    case ExprKind::Cast: {
      auto* c = static_cast<const CastNode*>(e.get());
      if (c->dtype.code == DTypeCode::u8) return true;  // wraps into [0, 255]
      // a strictly wider integer type keeps the value; an as-wide one only a value of its own dtype (a
      // same-dtype cast of arithmetic computed wider wraps, docs/language.md "Dtype conversions"; uint8
      // 200 cast to int8 is -56)
      const bool keeps = c->dtype.bits() > c->value->dtype.bits() ||
                         (c->dtype == c->value->dtype && !computed_wider(c->value));
      return c->dtype.is_int() && c->value->dtype.is_int() && keeps && is_nonneg(c->value, var_nonneg);
    }
    case ExprKind::Binary: {
      auto* b = static_cast<const BinaryNode*>(e.get());
      if (!b->dtype.is_int()) return false;
      switch (b->op) {
        case BinOp::Add:
        case BinOp::Mul:
        case BinOp::FloorDiv:
        case BinOp::CeilDiv:
        case BinOp::Min: return is_nonneg(b->a, var_nonneg) && is_nonneg(b->b, var_nonneg);
        case BinOp::Max: return is_nonneg(b->a, var_nonneg) || is_nonneg(b->b, var_nonneg);
        case BinOp::Mod: {  // a % 0 == a (docs/language.md): a positive constant divisor, or both >= 0
          auto d = as_const_int(b->b);
          return d ? *d > 0 || (*d == 0 && is_nonneg(b->a, var_nonneg))
                   : is_nonneg(b->a, var_nonneg) && is_nonneg(b->b, var_nonneg);
        }
        case BinOp::BitAnd: return is_nonneg(b->a, var_nonneg) || is_nonneg(b->b, var_nonneg);
        case BinOp::BitOr:
        case BinOp::BitXor: return is_nonneg(b->a, var_nonneg) && is_nonneg(b->b, var_nonneg);
        case BinOp::Shr: return b->dtype.code == DTypeCode::u8;  // wraps its operand into the type first
        case BinOp::Sub: case BinOp::Div: case BinOp::EQ: case BinOp::NE: case BinOp::LT: case BinOp::LE:
        case BinOp::GT: case BinOp::GE: case BinOp::And: case BinOp::Or: case BinOp::Shl:
          return false;
      }
      return false;
    }
    case ExprKind::IntImm: case ExprKind::FloatImm: case ExprKind::Unary: case ExprKind::Call:
    case ExprKind::Select: case ExprKind::Load:
      return false;
  }
  return false;  // not reached: the switch lists every enumerator
}

// Replace variables by expressions (by identity).
Expr substitute(const Expr& e, const std::vector<std::pair<Var, Expr>>& map);
Stmt substitute(const Stmt& s, const std::vector<std::pair<Var, Expr>>& map);

}  // namespace tw::ir
