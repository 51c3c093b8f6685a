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

template <class F>
void for_each_expr(const Stmt& s, F&& fn) {
  struct V : Visitor {
    F& f;
    explicit V(F& g) : f(g) {}
    void visit(const Expr& e) override { f(e); Visitor::visit(e); }
    using Visitor::visit;
  } v(fn);
  v.visit(s);
}

// Same tree: same kinds, dtypes, operators and constants; variables and buffers by identity.
bool structural_equal(const Expr& a, const Expr& b);

// Replace variables by expressions (by identity).
Expr substitute(const Expr& e, const std::vector<std::pair<Var, Expr>>& map);
Stmt substitute(const Stmt& s, const std::vector<std::pair<Var, Expr>>& map);

}  // namespace tw::ir
