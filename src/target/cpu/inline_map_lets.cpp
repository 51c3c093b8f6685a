// inline_map_lets (see inline_map_lets.h).
#include "target/cpu/inline_map_lets.h"

#include "ir/functor.h"
#include "target/cpu/tile_facts.h"

namespace tw::cpu {

using namespace tw::ir;

namespace {

// Does e hold a math call or a division (costly to compute twice)?
bool costly(const Expr& e) {
  bool c = false;
  for_each_expr(e, [&](const Expr& x) {
    c |= x->kind == ExprKind::Call || (x->kind == ExprKind::Binary && as<BinaryNode>(x)->op == BinOp::Div);
  });
  return c;
}

// How many times the statements / expression mention v.
int uses(const std::vector<Stmt>& rest, const VarNode* v) {
  int n = 0;
  for (const auto& s : rest)
    for_each_expr(s, [&](const Expr& x) { n += x.get() == v; });
  return n;
}

// The inner body of a 2-D parallel nest as lets then one store, with the lets substituted; null
// when it is not of that form or a let does not qualify (inline_map_lets.h).
Stmt inlined_body(const ForNode& inner) {
  std::vector<Stmt> body = stmts_of(inner.body);
  if (body.size() < 2 || body.back()->kind != StmtKind::Store) return nullptr;
  for (size_t i = 0; i + 1 < body.size(); ++i) {
    if (body[i]->kind != StmtKind::Let) return nullptr;
    const auto& let = *as<LetNode>(body[i]);
    if (let.var->dtype != let.value->dtype) return nullptr;
    std::vector<Stmt> rest(body.begin() + static_cast<std::ptrdiff_t>(i) + 1, body.end());
    if (costly(let.value) && uses(rest, let.var.get()) > 1) return nullptr;
    for (size_t k = i + 1; k < body.size(); ++k) body[k] = substitute(body[k], {{let.var, let.value}});
  }
  return body.back();
}

class Inliner : public Mutator {
 public:
  using Mutator::mutate;
  Stmt mutate(const Stmt& s) override {
    if (!s || s->kind != StmtKind::For) return Mutator::mutate(s);
    const auto& outer = *as<ForNode>(s);
    if (outer.for_kind != ForKind::parallel || !outer.body || outer.body->kind != StmtKind::For)
      return Mutator::mutate(s);
    const auto& inner = *as<ForNode>(outer.body);
    if (inner.for_kind != ForKind::parallel || !inner.body || inner.body->kind != StmtKind::Seq) return Mutator::mutate(s);
    Stmt store = inlined_body(inner);
    if (!store) return Mutator::mutate(s);
    Stmt in = std::make_shared<ForNode>(inner.var, inner.min, inner.extent, inner.for_kind, inner.num_stages, store,
                                        inner.span);
    Stmt out = std::make_shared<ForNode>(outer.var, outer.min, outer.extent, outer.for_kind, outer.num_stages, in,
                                         outer.span);
    return full_tile_map(out) ? out : Mutator::mutate(s);
  }
};

}  // namespace

Kernel inline_map_lets(const Kernel& k) { return Inliner().mutate_kernel(k); }

}  // namespace tw::cpu
