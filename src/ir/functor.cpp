#include "ir/functor.h"

#include <cstring>

namespace tw::ir {

namespace {
}  // namespace

// ---------------------------------------------------------------------------------------------
// Visitor

void Visitor::visit(const Expr& e) {
  if (!e) return;
  switch (e->kind) {
    case ExprKind::IntImm:
    case ExprKind::FloatImm:
    case ExprKind::Var: return;
    case ExprKind::Binary: visit(as<BinaryNode>(e)->a); visit(as<BinaryNode>(e)->b); return;
    case ExprKind::Unary: visit(as<UnaryNode>(e)->a); return;
    case ExprKind::Call: for (const auto& a : as<CallNode>(e)->args) visit(a); return;
    case ExprKind::Cast: visit(as<CastNode>(e)->value); return;
    case ExprKind::Select: {
      auto* n = as<SelectNode>(e);
      visit(n->cond); visit(n->t); visit(n->f);
      return;
    }
    case ExprKind::Load: {
      auto* n = as<LoadNode>(e);
      visit_buffer(n->buffer);
      for (const auto& i : n->indices) visit(i);
      return;
    }
  }
}

void Visitor::visit_region(const Region& r) {
  visit_buffer(r.buffer);
  for (const auto& e : r.starts) visit(e);
  for (const auto& e : r.extents) visit(e);
}

void Visitor::visit(const Stmt& s) {
  if (!s) return;
  switch (s->kind) {
    case StmtKind::Seq: for (const auto& c : as<SeqNode>(s)->body) visit(c); return;
    case StmtKind::For: {
      auto* n = as<ForNode>(s);
      visit(n->min); visit(n->extent); visit(n->body);
      if (n->user_extent) visit(n->user_extent);
      return;
    }
    case StmtKind::If: {
      auto* n = as<IfNode>(s);
      visit(n->cond); visit(n->then_body); visit(n->else_body);
      return;
    }
    case StmtKind::Let: visit(as<LetNode>(s)->value); return;
    case StmtKind::Store: {
      auto* n = as<StoreNode>(s);
      visit_buffer(n->buffer);
      for (const auto& i : n->indices) visit(i);
      visit(n->value);
      return;
    }
    case StmtKind::Alloc: visit_buffer(as<AllocNode>(s)->buffer); return;
    case StmtKind::Copy:
      visit_region(as<CopyNode>(s)->src), visit_region(as<CopyNode>(s)->dst);
      for (const Expr& e : as<CopyNode>(s)->used) visit(e);
      return;
    case StmtKind::Gemm: {
      auto* n = as<GemmNode>(s);
      visit_region(n->a); visit_region(n->b); visit_region(n->c);
      for (const Expr& e : {n->band_lo, n->band_hi, n->rows_lo, n->rows_hi, n->cols_lo, n->cols_hi})
        if (e) visit(e);
      return;
    }
    case StmtKind::Fill: visit_region(as<FillNode>(s)->dst); visit(as<FillNode>(s)->value); return;
    case StmtKind::Reduce: visit_buffer(as<ReduceNode>(s)->src); visit_buffer(as<ReduceNode>(s)->dst); return;
    case StmtKind::CoreScope: visit(as<CoreScopeNode>(s)->body); return;
    case StmtKind::Sync: visit(as<SyncNode>(s)->id); return;
  }
}

// ---------------------------------------------------------------------------------------------
// Mutator

std::vector<Expr> Mutator::mutate_all(const std::vector<Expr>& v, bool& changed) {
  std::vector<Expr> out;
  out.reserve(v.size());
  for (const auto& e : v) {
    out.push_back(mutate(e));
    changed |= out.back() != e;
  }
  return out;
}

Expr Mutator::mutate(const Expr& e) {
  if (!e) return e;
  switch (e->kind) {
    case ExprKind::IntImm:
    case ExprKind::FloatImm:
    case ExprKind::Var: return e;
    case ExprKind::Binary: {
      auto* n = as<BinaryNode>(e);
      auto a = mutate(n->a), b = mutate(n->b);
      if (a == n->a && b == n->b) return e;
      return std::make_shared<BinaryNode>(n->op, a, b, n->dtype, n->span);
    }
    case ExprKind::Unary: {
      auto* n = as<UnaryNode>(e);
      auto a = mutate(n->a);
      if (a == n->a) return e;
      return std::make_shared<UnaryNode>(n->op, a, n->dtype, n->span);
    }
    case ExprKind::Call: {
      auto* n = as<CallNode>(e);
      bool changed = false;
      auto args = mutate_all(n->args, changed);
      if (!changed) return e;
      return std::make_shared<CallNode>(n->fn, args, n->dtype, n->span);
    }
    case ExprKind::Cast: {
      auto* n = as<CastNode>(e);
      auto v = mutate(n->value);
      if (v == n->value) return e;
      return std::make_shared<CastNode>(v, n->dtype, n->span);
    }
    case ExprKind::Select: {
      auto* n = as<SelectNode>(e);
      auto c = mutate(n->cond), t = mutate(n->t), f = mutate(n->f);
      if (c == n->cond && t == n->t && f == n->f) return e;
      return std::make_shared<SelectNode>(c, t, f, n->dtype, n->span);
    }
    case ExprKind::Load: {
      auto* n = as<LoadNode>(e);
      bool changed = false;
      auto idx = mutate_all(n->indices, changed);
      auto b = mutate_buffer(n->buffer);
      if (!changed && b == n->buffer) return e;
      return std::make_shared<LoadNode>(b, idx, b->dtype, n->span);
    }
  }
  return e;
}

Region Mutator::mutate_region(const Region& r) {
  bool changed = false;
  Region out{mutate_buffer(r.buffer), mutate_all(r.starts, changed), mutate_all(r.extents, changed)};
  return out;
}

namespace {
bool same(const Region& a, const Region& b) {
  return a.buffer == b.buffer && a.starts == b.starts && a.extents == b.extents;
}
}  // namespace

Stmt Mutator::mutate(const Stmt& s) {
  if (!s) return s;
  switch (s->kind) {
    case StmtKind::Seq: {
      auto* n = as<SeqNode>(s);
      std::vector<Stmt> body;
      bool changed = false;
      for (const auto& c : n->body) {
        auto m = mutate(c);
        changed |= m != c;
        if (!m) continue;
        if (m->kind == StmtKind::Seq) {  // flatten nested sequences produced by passes
          for (const auto& x : as<SeqNode>(m)->body) body.push_back(x);
          changed = true;
        } else {
          body.push_back(m);
        }
      }
      if (!changed) return s;
      return std::make_shared<SeqNode>(body, n->span);
    }
    case StmtKind::For: {
      auto* n = as<ForNode>(s);
      auto mn = mutate(n->min), ext = mutate(n->extent);
      auto body = mutate(n->body);
      auto user = n->user_extent ? mutate(n->user_extent) : n->user_extent;
      if (mn == n->min && ext == n->extent && body == n->body && user == n->user_extent) return s;
      return std::make_shared<ForNode>(n->var, mn, ext, n->for_kind, n->num_stages, body, n->span, user);
    }
    case StmtKind::If: {
      auto* n = as<IfNode>(s);
      auto c = mutate(n->cond);
      auto t = mutate(n->then_body);
      auto e = mutate(n->else_body);
      if (c == n->cond && t == n->then_body && e == n->else_body) return s;
      return std::make_shared<IfNode>(c, t, e, n->span);
    }
    case StmtKind::Let: {
      auto* n = as<LetNode>(s);
      auto v = mutate(n->value);
      if (v == n->value) return s;
      return std::make_shared<LetNode>(n->var, v, n->span);
    }
    case StmtKind::Store: {
      auto* n = as<StoreNode>(s);
      bool changed = false;
      auto idx = mutate_all(n->indices, changed);
      auto v = mutate(n->value);
      auto b = mutate_buffer(n->buffer);
      if (!changed && v == n->value && b == n->buffer) return s;
      return std::make_shared<StoreNode>(b, idx, v, n->span);
    }
    case StmtKind::Alloc: {
      auto* n = as<AllocNode>(s);
      auto b = mutate_buffer(n->buffer);
      if (b == n->buffer) return s;
      return std::make_shared<AllocNode>(b, n->span);
    }
    case StmtKind::Copy: {
      auto* n = as<CopyNode>(s);
      auto a = mutate_region(n->src), b = mutate_region(n->dst);
      std::vector<Expr> used;
      bool same_used = true;
      for (const Expr& e : n->used) used.push_back(mutate(e)), same_used = same_used && used.back() == e;
      if (same(a, n->src) && same(b, n->dst) && same_used) return s;
      return std::make_shared<CopyNode>(a, b, n->span, n->atomic, n->checked, std::move(used), n->preload);
    }
    case StmtKind::Gemm: {
      auto* n = as<GemmNode>(s);
      auto a = mutate_region(n->a), b = mutate_region(n->b), c = mutate_region(n->c);
      auto opt = [&](const Expr& e) { return e ? mutate(e) : nullptr; };
      Expr lo = opt(n->band_lo), hi = opt(n->band_hi), r0 = opt(n->rows_lo), r1 = opt(n->rows_hi),
           c0 = opt(n->cols_lo), c1 = opt(n->cols_hi);
      if (same(a, n->a) && same(b, n->b) && same(c, n->c) && lo == n->band_lo && hi == n->band_hi &&
          r0 == n->rows_lo && r1 == n->rows_hi && c0 == n->cols_lo && c1 == n->cols_hi)
        return s;
      return std::make_shared<GemmNode>(a, b, c, n->trans_a, n->trans_b, n->clear, n->span, n->band, lo, hi, r0, r1,
                                        c0, c1);
    }
    case StmtKind::Fill: {
      auto* n = as<FillNode>(s);
      auto d = mutate_region(n->dst);
      auto v = mutate(n->value);
      if (same(d, n->dst) && v == n->value) return s;
      return std::make_shared<FillNode>(d, v, n->span);
    }
    case StmtKind::Reduce: {
      auto* n = as<ReduceNode>(s);
      auto a = mutate_buffer(n->src), b = mutate_buffer(n->dst);
      if (a == n->src && b == n->dst) return s;
      auto r = std::make_shared<ReduceNode>(a, b, n->reduce_kind, n->axis, n->clear, n->span);
      r->annotations = n->annotations;  // nan_unobserved: a promise about values, kept (mark_nan_unobserved)
      return r;
    }
    case StmtKind::CoreScope: {
      auto* n = as<CoreScopeNode>(s);
      auto b = mutate(n->body);
      if (b == n->body) return s;
      return std::make_shared<CoreScopeNode>(n->core, b, n->span);
    }
    case StmtKind::Sync: {
      auto* n = as<SyncNode>(s);
      auto i = mutate(n->id);
      if (i == n->id) return s;
      return std::make_shared<SyncNode>(n->sync, n->pipe, n->dst_pipe, n->mode, i, n->span);
    }
  }
  return s;
}

Kernel Mutator::mutate_kernel(const Kernel& k) {
  auto body = mutate(k->body);
  bool changed = body != k->body;
  auto grid = mutate_all(k->grid, changed);
  std::vector<Param> params = k->params;
  for (auto& p : params) {
    if (p.buffer) {
      auto b = mutate_buffer(p.buffer);
      changed |= b != p.buffer;
      p.buffer = b;
    }
  }
  if (!changed) return k;
  return std::make_shared<KernelNode>(k->name, params, k->block_vars, grid, body, k->span, k->sub_block_var);
}

// ---------------------------------------------------------------------------------------------
// Structural equality

bool structural_equal(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || a->dtype != b->dtype) return false;
  switch (a->kind) {
    case ExprKind::IntImm: return as<IntImmNode>(a)->value == as<IntImmNode>(b)->value;
    case ExprKind::FloatImm: {  // by bits: 0.0 and -0.0 differ (select folding keeps the sign)
      double x = as<FloatImmNode>(a)->value, y = as<FloatImmNode>(b)->value;
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    case ExprKind::Var: return false;  // identity, checked above
    case ExprKind::Binary: {
      auto *x = as<BinaryNode>(a), *y = as<BinaryNode>(b);
      return x->op == y->op && structural_equal(x->a, y->a) && structural_equal(x->b, y->b);
    }
    case ExprKind::Unary: {
      auto *x = as<UnaryNode>(a), *y = as<UnaryNode>(b);
      return x->op == y->op && structural_equal(x->a, y->a);
    }
    case ExprKind::Call: {
      auto *x = as<CallNode>(a), *y = as<CallNode>(b);
      if (x->fn != y->fn || x->args.size() != y->args.size()) return false;
      for (size_t i = 0; i < x->args.size(); ++i)
        if (!structural_equal(x->args[i], y->args[i])) return false;
      return true;
    }
    case ExprKind::Cast: return structural_equal(as<CastNode>(a)->value, as<CastNode>(b)->value);
    case ExprKind::Select: {
      auto *x = as<SelectNode>(a), *y = as<SelectNode>(b);
      return structural_equal(x->cond, y->cond) && structural_equal(x->t, y->t) && structural_equal(x->f, y->f);
    }
    case ExprKind::Load: {
      auto *x = as<LoadNode>(a), *y = as<LoadNode>(b);
      if (x->buffer != y->buffer || x->indices.size() != y->indices.size()) return false;
      for (size_t i = 0; i < x->indices.size(); ++i)
        if (!structural_equal(x->indices[i], y->indices[i])) return false;
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Substitution

namespace {
class Substituter : public Mutator {
 public:
  explicit Substituter(const std::vector<std::pair<Var, Expr>>& m) : map_(m) {}
  using Mutator::mutate;
  Expr mutate(const Expr& e) override {
    if (e && e->kind == ExprKind::Var) {
      for (const auto& [v, x] : map_)
        if (v.get() == e.get()) return x;
      return e;
    }
    return Mutator::mutate(e);
  }

 private:
  const std::vector<std::pair<Var, Expr>>& map_;
};
}  // namespace

Expr substitute(const Expr& e, const std::vector<std::pair<Var, Expr>>& map) { return Substituter(map).mutate(e); }
Stmt substitute(const Stmt& s, const std::vector<std::pair<Var, Expr>>& map) { return Substituter(map).mutate(s); }

}  // namespace tw::ir
