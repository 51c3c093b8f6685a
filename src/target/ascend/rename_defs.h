// RenameDefs: a copy of statements whose own variables (loop variables, lets) are fresh, so the copy
// can stand beside the original in one body (multi_buffer's unrolled iterations, split_cols' second
// column block of a pair). `vars` maps a variable to what replaces it: fill it before mutating to
// substitute (a loop index by the iteration's value); the defined variables are added as they are met.
#pragma once

#include <string>
#include <unordered_map>

#include "ir/functor.h"

namespace tw::ascend {

struct RenameDefs : ir::Mutator {
  std::unordered_map<const ir::VarNode*, ir::Expr> vars;
  std::string suffix;  // of the fresh variables' names
  explicit RenameDefs(std::string sfx = "") : suffix(std::move(sfx)) {}

  using ir::Mutator::mutate;
  ir::Var fresh(const ir::Var& v) {
    ir::Var n = ir::var(v->name + suffix, v->dtype, v->span);
    vars[v.get()] = n;
    return n;
  }
  ir::Expr mutate(const ir::Expr& e) override {
    if (e && e->kind == ir::ExprKind::Var) {
      auto it = vars.find(static_cast<const ir::VarNode*>(e.get()));
      return it == vars.end() ? e : it->second;
    }
    return ir::Mutator::mutate(e);
  }
  ir::Stmt mutate(const ir::Stmt& s) override {
    if (s && s->kind == ir::StmtKind::Let) {
      auto* n = ir::as<ir::LetNode>(s);
      ir::Expr v = mutate(n->value);
      return std::make_shared<ir::LetNode>(fresh(n->var), v, s->span);
    }
    if (s && s->kind == ir::StmtKind::For) {
      auto* n = ir::as<ir::ForNode>(s);
      ir::Expr mn = mutate(n->min), ext = mutate(n->extent);
      ir::Var v = fresh(n->var);
      ir::Expr user = n->user_extent ? mutate(n->user_extent) : nullptr;
      return std::make_shared<ir::ForNode>(v, mn, ext, n->for_kind, n->num_stages, mutate(n->body), s->span, user);
    }
    return ir::Mutator::mutate(s);
  }
};

}  // namespace tw::ascend
