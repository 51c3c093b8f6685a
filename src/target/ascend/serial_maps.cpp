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

bool on_vars(const ir::Expr& e, const std::vector<ir::Var>& vars) {
  bool u = false;
  ir::for_each_expr(e, [&](const ir::Expr& x) {
    u = u || std::any_of(vars.begin(), vars.end(), [&](const ir::Var& v) { return x.get() == v.get(); });
  });
  return u;
}

// The reads of an arm of an if made a select at an index that may leave the tile where the if does not
// take the arm (hunt31 F1: a gather x[i, lab[i]] under `if lab[i] != -100`, a shifted read x[j + 8] under
// `if j + 8 < n`): the index is selected too, index 0 (inside any non-empty dimension) where the arm is
// not taken. An index that is a map variable or free of the map and of loads is read by every lane alike.
struct GuardIndices : ir::Mutator {
  GuardIndices(ir::Expr c, bool taken_on_true, const std::vector<ir::Var>& v) : cond(std::move(c)), then(taken_on_true), vars(v) {}
  ir::Expr cond;
  bool then;
  const std::vector<ir::Var>& vars;
  using ir::Mutator::mutate;
  ir::Expr mutate(const ir::Expr& e) override {
    ir::Expr x = ir::Mutator::mutate(e);
    if (x->kind != ir::ExprKind::Load) return x;
    auto* ld = static_cast<const ir::LoadNode*>(x.get());
    std::vector<ir::Expr> idx = ld->indices;
    bool changed = false;
    for (auto& d : idx) {
      bool loads = false;
      ir::for_each_expr(d, [&](const ir::Expr& y) { loads = loads || y->kind == ir::ExprKind::Load; });
      const bool var = std::any_of(vars.begin(), vars.end(), [&](const ir::Var& v) { return d.get() == v.get(); });
      if (var || (!loads && !on_vars(d, vars))) continue;
      ir::Expr zero = ir::int_imm(0, d->dtype, d->span);
      d = then ? ir::select(cond, d, zero, d->span) : ir::select(cond, zero, d, d->span);
      changed = true;
    }
    return changed ? ir::load(ld->buffer, idx, ld->span) : x;
  }
};

// The int32 tile reads of an arm made a select, where the arm computes int32 +, - or *: the lanes that do
// not take the arm read 1 (hunt31 F1: `if a[i] % 2 == 1: y[i] = a[i] * 3 + 1` overflowed, a report, for an
// even a[i] the arm never computes on cpu; 1 divides, multiplies and adds harmlessly). A read inside an
// index is GuardIndices'.
struct GuardOperands : ir::Mutator {
  GuardOperands(ir::Expr c, bool taken_on_true) : cond(std::move(c)), then(taken_on_true) {}
  ir::Expr cond;
  bool then;
  static bool needed(const ir::Expr& v) {
    bool any = false;
    ir::for_each_expr(v, [&](const ir::Expr& x) {
      if (x->kind != ir::ExprKind::Binary || x->dtype != ir::DType(ir::DTypeCode::i32)) return;
      const ir::BinOp op = static_cast<const ir::BinaryNode*>(x.get())->op;
      any = any || op == ir::BinOp::Add || op == ir::BinOp::Sub || op == ir::BinOp::Mul;
    });
    return any;
  }
  using ir::Mutator::mutate;
  ir::Expr mutate(const ir::Expr& e) override {
    if (e->kind != ir::ExprKind::Load) return ir::Mutator::mutate(e);
    if (e->dtype != ir::DType(ir::DTypeCode::i32)) return e;
    ir::Expr one = ir::int_imm(1, e->dtype, e->span);
    return then ? ir::select(cond, e, one, e->span) : ir::select(cond, one, e, e->span);
  }
};

ir::Expr guard_arm(const ir::Expr& v, const ir::Expr& c, bool then, const std::vector<ir::Var>& vars) {
  ir::Expr g = GuardOperands::needed(v) ? GuardOperands(c, then).mutate(v) : v;
  return GuardIndices(c, then, vars).mutate(g);
}

// `if c: t[idx] = a else: t[idx] = b` in the innermost body of a T.Parallel map (both arms one store
// of the same element; without an else, b is t[idx] itself) is the store t[idx] = T.where(c, a, b)
// (hunt30 F5), when c depends on the map's variables (an if free of them belongs around the map,
// where cpu does not evaluate the arms it skips), and is not `if j < n` on the innermost variable
// without an else (select_instructions' runtime column count). Both arms are evaluated, as T.where's,
// their reads at selected indices (GuardIndices) and int32 operands (GuardOperands).
ir::Stmt if_as_select(const ir::Stmt& s, const std::vector<ir::Var>& vars) {
  if (s->kind != ir::StmtKind::If) return s;
  auto* n = ir::as<ir::IfNode>(s);
  const ir::StoreNode* a = only_store(n->then_body);
  const ir::StoreNode* b = n->else_body ? only_store(n->else_body) : nullptr;
  if (!a || (n->else_body && !b)) return s;
  auto* lt = n->cond->kind == ir::ExprKind::Binary ? ir::as<ir::BinaryNode>(n->cond) : nullptr;
  if (!b && lt && lt->op == ir::BinOp::LT && lt->a.get() == vars.back().get()) return s;
  // a condition on the map's variables (or on the tile the if stores, which the map changes); a load at
  // an index free of them (`if f[0] > 0`) is the same for every element (hunt31 F1)
  bool uses = on_vars(n->cond, vars);
  ir::for_each_expr(n->cond, [&](const ir::Expr& x) {
    uses = uses || (x->kind == ir::ExprKind::Load && static_cast<const ir::LoadNode*>(x.get())->buffer.get() == a->buffer.get());
  });
  const ir::Expr at = ir::load(a->buffer, a->indices, a->span);
  if (!uses || (b && (b->buffer.get() != a->buffer.get() || !ir::structural_equal(at, ir::load(b->buffer, b->indices)))))
    return s;
  const ir::DType t = a->buffer->dtype;
  ir::Expr other = b ? ir::cast(guard_arm(b->value, n->cond, false, vars), t, b->span) : at;
  ir::Expr value = ir::cast(guard_arm(a->value, n->cond, true, vars), t, a->span);
  return std::make_shared<ir::StoreNode>(a->buffer, a->indices, ir::select(n->cond, value, other, a->span), a->span);
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
  // a T.Parallel map with its ifs as selects (if_as_select), and a body that is one if free of the map
  // (`if f[0] > 0:`, the same arm for every element: hunt31 F1) as that if around the map
  static ir::Stmt selects(const ir::Stmt& s, std::vector<ir::Var> vars) {
    ir::Stmt m = selects_in(s, vars);
    if (m->kind != ir::StmtKind::For) return m;
    auto* f = ir::as<ir::ForNode>(m);
    vars.push_back(f->var);
    if (f->body->kind != ir::StmtKind::If) return m;
    auto* n = ir::as<ir::IfNode>(f->body);
    bool free = !on_vars(n->cond, vars);
    ir::for_each_stmt(f->body, [&](const ir::Stmt& x) {
      if (x->kind != ir::StmtKind::Store) return;
      const ir::BufferNode* b = ir::as<ir::StoreNode>(x)->buffer.get();
      ir::for_each_expr(n->cond, [&](const ir::Expr& e) {
        free = free && !(e->kind == ir::ExprKind::Load && static_cast<const ir::LoadNode*>(e.get())->buffer.get() == b);
      });
    });
    if (!free) return m;
    vars.pop_back();
    auto loop = [&](const ir::Stmt& body) -> ir::Stmt {
      if (!body) return nullptr;
      return selects(std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages, body, m->span), vars);
    };
    return std::make_shared<ir::IfNode>(n->cond, loop(n->then_body), loop(n->else_body), n->span);
  }
  static ir::Stmt selects_in(const ir::Stmt& s, std::vector<ir::Var> vars) {
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
