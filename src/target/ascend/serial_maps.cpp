// serial_maps: serial loop nests that are element-wise maps -> T.Parallel (see serial_maps.h).
#include "target/ascend/serial_maps.h"

#include <algorithm>
#include <set>

#include "ir/functor.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

bool at_vars(const std::vector<ir::Expr>& idx, const std::vector<ir::Var>& vars) {
  if (idx.size() != vars.size()) return false;
  for (size_t d = 0; d < idx.size(); ++d)
    if (idx[d].get() != vars[d].get()) return false;
  return true;
}

// Indices that are some of the nest's variables in nest order (t[i, j], a row vector v[i], a column
// vector w[j]): the reads a vector map broadcasts.
bool at_some_vars(const std::vector<ir::Expr>& idx, const std::vector<ir::Var>& vars) {
  size_t k = 0;
  for (const auto& x : idx) {
    while (k < vars.size() && x.get() != vars[k].get()) ++k;
    if (k++ == vars.size()) return false;
  }
  return !idx.empty();
}

// A nest of serial loops from start 0 with constant extents that is an element-wise map
// (serial_maps.h: stores at the nest's variables, reads of the written tiles there too).
bool is_map_nest(const ir::ForNode* f) {
  std::vector<ir::Var> vars;
  ir::Stmt body;
  for (const ir::ForNode* l = f;;) {
    auto m = ir::as_const_int(l->min);
    if (l->for_kind != ir::ForKind::serial || !ir::as_const_int(l->extent) || !m || *m != 0) return false;
    vars.push_back(l->var);
    auto inner = ir::stmts_of(l->body);
    if (inner.size() == 1 && inner[0]->kind == ir::StmtKind::For) {
      l = ir::as<ir::ForNode>(inner[0]);
      continue;
    }
    body = l->body;
    break;
  }
  std::set<const ir::BufferNode*> written;
  bool stores = false;
  for (const auto& s : ir::stmts_of(body)) {
    if (s->kind == ir::StmtKind::Let) continue;
    if (s->kind != ir::StmtKind::Store) return false;
    auto* st = ir::as<ir::StoreNode>(s);
    if (st->buffer->scope == ir::Scope::global || !at_vars(st->indices, vars)) return false;
    written.insert(st->buffer.get());
    stores = true;
  }
  bool ok = stores;
  ir::for_each_expr(body, [&](const ir::Expr& e) {
    if (e->kind != ir::ExprKind::Load) return;
    auto* ld = static_cast<const ir::LoadNode*>(e.get());
    if (ld->buffer->scope == ir::Scope::global || !at_some_vars(ld->indices, vars) ||
        (written.count(ld->buffer.get()) && !at_vars(ld->indices, vars)))
      ok = false;
  });
  return ok;
}

// The one store of an arm of an if (nullptr when the arm is anything else).
const ir::StoreNode* only_store(const ir::Stmt& arm) {
  if (!arm) return nullptr;
  auto items = ir::stmts_of(arm);
  return items.size() == 1 && items[0]->kind == ir::StmtKind::Store ? ir::as<ir::StoreNode>(items[0]) : nullptr;
}

// `if c: t[idx] = a else: t[idx] = b` in the innermost body of a T.Parallel map (both arms one store
// of the same element; without an else, b is t[idx] itself) is the store t[idx] = T.where(c, a, b)
// (hunt30 F5), when c depends on the map's variables (an if free of them belongs around the map,
// where cpu does not evaluate the arms it skips), and is not `if j < n` on the innermost variable
// without an else (select_instructions' runtime column count). Both arms are evaluated, as T.where's.
ir::Stmt if_as_select(const ir::Stmt& s, const std::vector<ir::Var>& vars) {
  if (s->kind != ir::StmtKind::If) return s;
  auto* n = ir::as<ir::IfNode>(s);
  const ir::StoreNode* a = only_store(n->then_body);
  const ir::StoreNode* b = n->else_body ? only_store(n->else_body) : nullptr;
  if (!a || (n->else_body && !b)) return s;
  auto* lt = n->cond->kind == ir::ExprKind::Binary ? ir::as<ir::BinaryNode>(n->cond) : nullptr;
  if (!b && lt && lt->op == ir::BinOp::LT && lt->a.get() == vars.back().get()) return s;
  bool uses = false;
  ir::for_each_expr(n->cond, [&](const ir::Expr& x) {
    uses = uses || x->kind == ir::ExprKind::Load ||
           std::any_of(vars.begin(), vars.end(), [&](const ir::Var& v) { return x.get() == v.get(); });
  });
  const ir::Expr at = ir::load(a->buffer, a->indices, a->span);
  if (!uses || (b && (b->buffer.get() != a->buffer.get() || !ir::structural_equal(at, ir::load(b->buffer, b->indices)))))
    return s;
  const ir::DType t = a->buffer->dtype;
  ir::Expr other = b ? ir::cast(b->value, t, b->span) : at;
  return std::make_shared<ir::StoreNode>(a->buffer, a->indices,
                                         ir::select(n->cond, ir::cast(a->value, t, a->span), other, a->span), a->span);
}

struct ToParallel : ir::Mutator {
  using ir::Mutator::mutate;
  ir::Stmt mutate(const ir::Stmt& s) override {
    if (!s || s->kind != ir::StmtKind::For) return ir::Mutator::mutate(s);  // null: an if without else
    auto* f = ir::as<ir::ForNode>(s);
    if (f->for_kind == ir::ForKind::parallel) return selects(s, {});
    if (!is_map_nest(f)) return ir::Mutator::mutate(s);
    return parallel(s);
  }
  // a T.Parallel map with its ifs as selects (if_as_select)
  static ir::Stmt selects(const ir::Stmt& s, std::vector<ir::Var> vars) {
    auto* f = ir::as<ir::ForNode>(s);
    vars.push_back(f->var);
    auto items = ir::stmts_of(f->body);
    ir::Stmt body;
    if (items.size() == 1 && items[0]->kind == ir::StmtKind::For && ir::as<ir::ForNode>(items[0])->for_kind == ir::ForKind::parallel) {
      body = selects(items[0], vars);
    } else {
      bool changed = false;
      for (auto& it : items) {
        ir::Stmt x = if_as_select(it, vars);
        changed = changed || x != it;
        it = x;
      }
      if (!changed) return s;
      body = items.size() == 1 ? items[0] : std::make_shared<ir::SeqNode>(items, f->body->span);
    }
    if (body == f->body) return s;
    return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages, body, s->span);
  }
  static ir::Stmt parallel(const ir::Stmt& s) {
    if (s->kind != ir::StmtKind::For) return s;
    auto* f = ir::as<ir::ForNode>(s);
    return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, ir::ForKind::parallel, 0, parallel(f->body), s->span);
  }
};

}  // namespace

ir::Kernel serial_maps(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  return ToParallel{}.mutate_kernel(kernel);
}

}  // namespace tw::ascend
