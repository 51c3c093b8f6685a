// fold_exp2_scale: exp2 over a scaled tile as one Exp (see fold_exp2_scale.h).
#include "target/ascend/fold_exp2_scale.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "ir/functor.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

using ir::Buffer;
using ir::DType;
using ir::Expr;
using ir::Scope;
using ir::Span;
using ir::Stmt;
using ir::Var;

//   W: X[i, j] = X[i, j] * K   (or where(c, X[i, j] * K, L))          over the whole tile
//   ... (X only read by row max-reductions R: X -> m)
//   E: X[i, j] = exp2(X[i, j] - m'[i])                                   over the whole tile
// becomes
//   W: X[i, j] = X[i, j] * (K ln 2)   (L ln 2)
//   R: t = rowmax(X); m = max(m, t / ln 2)   (m keeps its meaning: the max of X * K)
//   E: m2 = m' * ln 2; X[i, j] = exp(X[i, j] - m2[i])
struct Map2 {
  Buffer x;
  const ir::VarNode *i = nullptr, *j = nullptr;
  Expr value;
  int64_t rows = 0, cols = 0;
  Span span;
};

bool is_var(const Expr& e, const ir::VarNode* v) { return e && e->kind == ir::ExprKind::Var && as<ir::VarNode>(e) == v; }

// A 2-D map over the whole UB float tile it stores to, at [i, j].
std::optional<Map2> as_map2(const Stmt& s) {
  if (!s || s->kind != ir::StmtKind::For) return std::nullopt;
  auto* fi = as<ir::ForNode>(s);
  if (fi->for_kind != ir::ForKind::parallel || !fi->body || fi->body->kind != ir::StmtKind::For) return std::nullopt;
  auto* fj = as<ir::ForNode>(fi->body);
  if (fj->for_kind != ir::ForKind::parallel || !fj->body || fj->body->kind != ir::StmtKind::Store) return std::nullopt;
  auto* st = as<ir::StoreNode>(fj->body);
  auto r0 = ir::as_const_int(fi->min), c0 = ir::as_const_int(fj->min);
  auto r = ir::as_const_int(fi->extent), c = ir::as_const_int(fj->extent);
  auto sh = st->buffer->const_shape();
  if (!r0 || !c0 || *r0 != 0 || *c0 != 0 || !r || !c || !sh || sh->size() != 2 || (*sh)[0] != *r || (*sh)[1] != *c)
    return std::nullopt;
  if (st->buffer->scope != Scope::UB || !st->buffer->dtype.is_float() || st->indices.size() != 2) return std::nullopt;
  if (!is_var(st->indices[0], fi->var.get()) || !is_var(st->indices[1], fj->var.get())) return std::nullopt;
  return Map2{st->buffer, fi->var.get(), fj->var.get(), st->value, *r, *c, s->span};
}

bool is_elem(const Expr& e, const Map2& m) {  // X[i, j]
  if (!e || e->kind != ir::ExprKind::Load) return false;
  auto* l = as<ir::LoadNode>(e);
  return l->buffer.get() == m.x.get() && l->indices.size() == 2 && is_var(l->indices[0], m.i) &&
         is_var(l->indices[1], m.j);
}

// True when statement or expression n references buffer b.
template <class N>
bool mentions(const N& n, const Buffer& b) {
  struct V : ir::Visitor {
    const ir::BufferNode* b;
    bool hit = false;
    void visit_buffer(const Buffer& x) override { hit = hit || x.get() == b; }
    using ir::Visitor::visit;
  } v;
  v.b = b.get();
  v.visit(n);
  return v.hit;
}

// X[i, j] * K (either order): K, else nullopt.
std::optional<double> scaled_elem(const Expr& e, const Map2& m) {
  if (!e || e->kind != ir::ExprKind::Binary) return std::nullopt;
  auto* b = as<ir::BinaryNode>(e);
  if (b->op != ir::BinOp::Mul) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const Expr& x = side ? b->b : b->a;
    const Expr& k = side ? b->a : b->b;
    if (is_elem(x, m) && k && k->kind == ir::ExprKind::FloatImm) return as<ir::FloatImmNode>(k)->value;
  }
  return std::nullopt;
}

Var as_var(const Stmt& map, int level) {
  auto* fi = as<ir::ForNode>(map);
  return level == 0 ? fi->var : as<ir::ForNode>(fi->body)->var;
}

// The same two-level map with a new stored value.
Stmt remap2(const Stmt& map, const Expr& value) {
  auto* fi = as<ir::ForNode>(map);
  auto* fj = as<ir::ForNode>(fi->body);
  auto* st = as<ir::StoreNode>(fj->body);
  Stmt nst = std::make_shared<ir::StoreNode>(st->buffer, st->indices, value, st->span);
  Stmt nj = std::make_shared<ir::ForNode>(fj->var, fj->min, fj->extent, fj->for_kind, fj->num_stages, nst, fj->span,
                                         fj->user_extent);
  return std::make_shared<ir::ForNode>(fi->var, fi->min, fi->extent, fi->for_kind, fi->num_stages, nj, fi->span,
                                       fi->user_extent);
}

// E: X[i, j] = exp2(X[i, j] * K - m[i]) (K constant, either order; m a UB row vector of X's rows):
// K and the load of m, else nullopt.
struct ScaledExp2 {
  double K;
  const ir::LoadNode* m;
};
std::optional<ScaledExp2> as_scaled_exp2(const Map2& c) {
  if (c.value->kind != ir::ExprKind::Call) return std::nullopt;
  auto* call = as<ir::CallNode>(c.value);
  if (call->fn != ir::MathFn::exp2 || call->args.size() != 1 || call->args[0]->kind != ir::ExprKind::Binary)
    return std::nullopt;
  auto* sub = as<ir::BinaryNode>(call->args[0]);
  if (sub->op != ir::BinOp::Sub || !sub->b || sub->b->kind != ir::ExprKind::Load) return std::nullopt;
  auto K = scaled_elem(sub->a, c);
  auto* ml = as<ir::LoadNode>(sub->b);
  auto msh = ml->buffer->const_shape();
  if (!K || ml->buffer.get() == c.x.get() || ml->indices.size() != 1 || !is_var(ml->indices[0], c.i) || !msh ||
      msh->size() != 1 || (*msh)[0] != c.rows || ml->buffer->scope != Scope::UB)
    return std::nullopt;
  return ScaledExp2{*K, ml};
}

// exp2 with the scale in its argument, as flash attention writes it when no key is masked (the
// row max taken of the raw scores):
//   E: X[i, j] = exp2(X[i, j] * K - m[i])
// becomes
//   m2[i] = m[i] * ln 2;  X[i, j] = exp(X[i, j] * (K ln 2) - m2[i])
// Muls + Sub + Exp over the tile instead of Muls + Sub + Muls + Exp (expand_math's exp2).
std::vector<Stmt> fold_scaled_exp2(const std::vector<Stmt>& body, vec::Names& names) {
  std::vector<Stmt> out;
  for (const Stmt& s : body) {
    auto E = as_map2(s);
    auto se = E ? as_scaled_exp2(*E) : std::nullopt;
    if (!se) {
      out.push_back(s);
      continue;
    }
    const Span& sp = E->span;
    DType t = E->x->dtype;
    const double ln2 = M_LN2;
    Buffer m2 = names.ub(se->m->buffer, "_ln2", se->m->buffer->dtype, {E->rows}, sp, out);
    Var i = names.fresh_var("i", sp);
    Stmt sc = std::make_shared<ir::StoreNode>(
        m2, std::vector<Expr>{i},
        ir::binary(ir::BinOp::Mul, ir::load(se->m->buffer, {i}, sp), ir::float_imm(ln2, se->m->buffer->dtype, sp), sp),
        sp);
    out.push_back(vec::pfor(i, E->rows, sc, sp));
    Expr xk = ir::binary(ir::BinOp::Mul, ir::load(E->x, {ir::Expr(as_var(s, 0)), ir::Expr(as_var(s, 1))}, sp),
                         ir::float_imm(se->K * ln2, t, sp), sp);
    Expr ev = ir::call(ir::MathFn::exp, {ir::binary(ir::BinOp::Sub, xk, ir::load(m2, {se->m->indices[0]}, sp), sp)}, sp);
    out.push_back(remap2(s, ev));
  }
  return out;
}

std::vector<Stmt> fold_list(const std::vector<Stmt>& body, vec::Names& names) {
  std::vector<Stmt> out = body;
  const double ln2 = M_LN2;
  for (size_t w = 0; w < out.size(); ++w) {
    auto W = as_map2(out[w]);
    if (!W) continue;
    // W's value: X * K or where(c, X * K, L), c not reading X
    Expr wv = W->value;
    std::optional<double> K, L;
    Expr cond;
    if (wv->kind == ir::ExprKind::Select) {
      auto* sel = as<ir::SelectNode>(wv);
      K = scaled_elem(sel->t, *W);
      if (sel->f && sel->f->kind == ir::ExprKind::FloatImm) L = as<ir::FloatImmNode>(sel->f)->value;
      if (!K || !L || mentions(sel->cond, W->x)) continue;
      cond = sel->cond;
    } else {
      K = scaled_elem(wv, *W);
      if (!K) continue;
    }
    // find E, with only row max-reductions of X in between
    size_t e = w + 1;
    std::vector<size_t> reds;
    std::optional<Map2> E;
    const ir::BufferNode* mrow = nullptr;
    for (; e < out.size(); ++e) {
      if (auto c = as_map2(out[e]); c && c->x.get() == W->x.get()) {
        if (c->value->kind != ir::ExprKind::Call) break;
        auto* call = as<ir::CallNode>(c->value);
        if (call->fn != ir::MathFn::exp2 || call->args.size() != 1 || call->args[0]->kind != ir::ExprKind::Binary) break;
        auto* sub = as<ir::BinaryNode>(call->args[0]);
        if (sub->op != ir::BinOp::Sub || !is_elem(sub->a, *c) || !sub->b || sub->b->kind != ir::ExprKind::Load) break;
        auto* ml = as<ir::LoadNode>(sub->b);
        auto msh = ml->buffer->const_shape();
        if (ml->buffer.get() == W->x.get() || ml->indices.size() != 1 || !is_var(ml->indices[0], c->i) || !msh ||
            msh->size() != 1 || (*msh)[0] != c->rows || ml->buffer->scope != Scope::UB)
          break;
        mrow = ml->buffer.get();
        E = c;
        break;
      }
      if (!mentions(out[e], W->x)) continue;
      if (out[e]->kind == ir::StmtKind::Reduce) {
        auto* r = as<ir::ReduceNode>(out[e]);
        auto dsh = r->dst->const_shape();
        if (r->src.get() == W->x.get() && r->dst.get() != W->x.get() && r->reduce_kind == ir::ReduceKind::max &&
            r->axis == 1 && r->dst->scope == Scope::UB && dsh && dsh->size() == 1 && (*dsh)[0] == W->rows &&
            r->dst->dtype == W->x->dtype) {
          reds.push_back(e);
          continue;
        }
      }
      break;
    }
    if (!E || e >= out.size() || !mrow) continue;
    const Span& sp = W->span;
    DType t = W->x->dtype;
    auto fimm = [&](double v) { return ir::float_imm(v, t, sp); };
    // W'
    Expr xk = ir::binary(ir::BinOp::Mul, ir::load(W->x, {ir::Expr(as_var(out[w], 0)), ir::Expr(as_var(out[w], 1))}, sp),
                         fimm(*K * ln2), sp);
    Expr nv = cond ? ir::select(cond, xk, fimm(*L * ln2), sp) : xk;
    out[w] = remap2(out[w], nv);
    // R' and E'
    std::vector<Stmt> fixed;
    for (size_t k = 0; k < out.size(); ++k) {
      bool is_red = std::find(reds.begin(), reds.end(), k) != reds.end();
      if (k == e) {
        auto* call = as<ir::CallNode>(E->value);
        auto* sub = as<ir::BinaryNode>(call->args[0]);
        auto* ml = as<ir::LoadNode>(sub->b);
        std::vector<Stmt> pre;
        Buffer m2 = names.ub(ml->buffer, "_ln2", ml->buffer->dtype, {E->rows}, sp, pre);
        Var i = names.fresh_var("i", sp);
        Stmt sc = std::make_shared<ir::StoreNode>(
            m2, std::vector<Expr>{i}, ir::binary(ir::BinOp::Mul, ir::load(ml->buffer, {i}, sp), fimm(ln2), sp), sp);
        pre.push_back(vec::pfor(i, E->rows, sc, sp));
        for (auto& x : pre) fixed.push_back(x);
        Expr ev = ir::call(ir::MathFn::exp, {ir::binary(ir::BinOp::Sub, sub->a, ir::load(m2, {ml->indices[0]}, sp), sp)}, sp);
        fixed.push_back(remap2(out[k], ev));
        continue;
      }
      if (!is_red) {
        fixed.push_back(out[k]);
        continue;
      }
      auto* r = as<ir::ReduceNode>(out[k]);
      std::vector<Stmt> pre;
      Buffer tmp = names.ub(r->dst, "_scaled", r->dst->dtype, {W->rows}, sp, pre);
      for (auto& x : pre) fixed.push_back(x);
      auto red = std::make_shared<ir::ReduceNode>(r->src, tmp, ir::ReduceKind::max, 1, true, r->span);
      red->annotations = r->annotations;  // nan_unobserved: the max reaches dst only through an exact max
      fixed.push_back(std::move(red));
      Var i = names.fresh_var("i", r->span);
      Expr back = ir::binary(ir::BinOp::Mul, ir::load(tmp, {i}, r->span), fimm(1.0 / ln2), r->span);
      Expr v = r->clear ? back : ir::binary(ir::BinOp::Max, ir::load(r->dst, {i}, r->span), back, r->span);
      Stmt st = std::make_shared<ir::StoreNode>(r->dst, std::vector<Expr>{i}, v, r->span);
      fixed.push_back(vec::pfor(i, W->rows, st, r->span));
    }
    out = std::move(fixed);
  }
  return fold_scaled_exp2(out, names);
}

}  // namespace

ir::Kernel fold_exp2_scale(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  vec::Names names(kernel);
  struct M : ir::Mutator {
    vec::Names* names;
    ir::Stmt mutate(const ir::Stmt& x) override {
      ir::Stmt y = ir::Mutator::mutate(x);
      if (y && y->kind == ir::StmtKind::Seq) {
        auto* q = as<ir::SeqNode>(y);
        return std::make_shared<ir::SeqNode>(fold_list(q->body, *names), q->span);
      }
      return y;
    }
    using ir::Mutator::mutate;
  } m;
  m.names = &names;
  return vec::with_body(kernel, m.mutate(kernel->body));
}

}  // namespace tw::ascend
