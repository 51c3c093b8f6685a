// serial_maps: serial loop nests that are element-wise maps -> T.Parallel (see serial_maps.h).
#include "target/ascend/serial_maps.h"

#include <algorithm>
#include <set>

#include "ir/functor.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

// Indices that are the nest's variables in nest order, a unit dim of the tile indexed by 0 aside (y[0, i, j]
// of a (1, m, n) tile is y[i, j]: review35 R2, a unit dim must not change what lowers).
bool at_vars(const ir::BufferNode& b, const std::vector<ir::Expr>& idx, const std::vector<ir::Var>& vars) {
  size_t k = 0;
  for (size_t d = 0; d < idx.size(); ++d) {
    auto e = ir::as_const_int(b.shape[d]);
    auto x = ir::as_const_int(idx[d]);
    if (e && *e == 1 && x && *x == 0) continue;
    if (k == vars.size() || idx[d].get() != vars[k++].get()) return false;
  }
  return k == vars.size();
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
    if (st->buffer->scope == ir::Scope::global || !at_vars(*st->buffer, st->indices, vars)) return false;
    written.insert(st->buffer.get());
    stores = true;
  }
  bool ok = stores;
  ir::for_each_expr(body, [&](const ir::Expr& e) {
    if (e->kind != ir::ExprKind::Load) return;
    auto* ld = static_cast<const ir::LoadNode*>(e.get());
    if (ld->buffer->scope == ir::Scope::global || !at_some_vars(ld->indices, vars) ||
        (written.count(ld->buffer.get()) && !at_vars(*ld->buffer, ld->indices, vars)))
      ok = false;
  });
  return ok;
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
// not taken. An index that is a map variable is inside the tile; one free of the map, of loads and of the
// bound lets (lower_if: values of tiles) is read by every lane alike, selected only under a condition free
// of the map (`if n < 16: y[i] = x[n]`: x[where(n < 16, n, 0)], a scalar still).
struct GuardIndices : ir::Mutator {
  GuardIndices(ir::Expr c, bool taken_on_true, bool c_free, const std::vector<ir::Var>& v, const std::vector<ir::Expr>& k,
               const std::vector<ir::Var>& b)
      : cond(std::move(c)), then(taken_on_true), free(c_free), vars(v), keep(k), bound(b) {}
  ir::Expr cond;
  bool then;
  bool free;  // cond is the same on every lane
  const std::vector<ir::Var>& vars;
  const std::vector<ir::Expr>& keep;  // the if's stored elements: inside the tile wherever the map runs
  const std::vector<ir::Var>& bound;
  using ir::Mutator::mutate;
  ir::Expr mutate(const ir::Expr& e) override {
    if (std::any_of(keep.begin(), keep.end(), [&](const ir::Expr& k) { return ir::structural_equal(e, k); })) return e;
    ir::Expr x = ir::Mutator::mutate(e);
    if (x->kind != ir::ExprKind::Load) return x;
    auto* ld = static_cast<const ir::LoadNode*>(x.get());
    std::vector<ir::Expr> idx = ld->indices;
    bool changed = false;
    for (auto& d : idx) {
      bool loads = false;
      ir::for_each_expr(d, [&](const ir::Expr& y) {
        loads = loads || y->kind == ir::ExprKind::Load ||
                std::any_of(bound.begin(), bound.end(), [&](const ir::Var& v) { return y.get() == v.get(); });
      });
      const bool var = std::any_of(vars.begin(), vars.end(), [&](const ir::Var& v) { return d.get() == v.get(); });
      if (var || (!loads && !on_vars(d, vars) && !free)) continue;
      ir::Expr zero = ir::int_imm(0, d->dtype, d->span);
      d = then ? ir::select(cond, d, zero, d->span) : ir::select(cond, zero, d, d->span);
      changed = true;
    }
    return changed ? ir::load(ld->buffer, idx, ld->span) : x;
  }
};

// The int32 tile reads of an arm made a select, where the arm computes int32 +, - or *: the lanes that do
// not take the arm read 1 (hunt31 F1: `if a[i] % 2 == 1: y[i] = a[i] * 3 + 1` overflowed, a report, for an
// even a[i] the arm never computes on cpu; 1 divides, multiplies and adds harmlessly); a bound let (lower_if)
// is such a read. A read inside an index is GuardIndices'.
struct GuardOperands : ir::Mutator {
  GuardOperands(ir::Expr c, bool taken_on_true, const std::vector<ir::Var>& b)
      : cond(std::move(c)), then(taken_on_true), bound(b) {}
  ir::Expr cond;
  bool then;
  const std::vector<ir::Var>& bound;
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
    const bool let = std::any_of(bound.begin(), bound.end(), [&](const ir::Var& v) { return e.get() == v.get(); });
    if (e->kind != ir::ExprKind::Load && !let) return ir::Mutator::mutate(e);
    if (e->dtype != ir::DType(ir::DTypeCode::i32)) return e;
    ir::Expr one = ir::int_imm(1, e->dtype, e->span);
    return then ? ir::select(cond, e, one, e->span) : ir::select(cond, one, e, e->span);
  }
};

ir::Expr guard_arm(const ir::Expr& v, const ir::Expr& c, bool then, bool free, const std::vector<ir::Var>& vars,
                   const std::vector<ir::Expr>& keep, const std::vector<ir::Var>& bound) {
  ir::Expr g = GuardOperands::needed(v) ? GuardOperands(c, then, bound).mutate(v) : v;
  return GuardIndices(c, then, free, vars, keep, bound).mutate(g);
}

bool reads(const ir::Expr& e, const ir::BufferNode* b) {
  bool r = false;
  ir::for_each_expr(e, [&](const ir::Expr& x) {
    r = r || (x->kind == ir::ExprKind::Load && static_cast<const ir::LoadNode*>(x.get())->buffer.get() == b);
  });
  return r;
}

// null for a let (lower_arm, lower_if: a bound value among the stores)
const ir::StoreNode* store_of(const ir::Stmt& s) { return s->kind == ir::StmtKind::Store ? ir::as<ir::StoreNode>(s) : nullptr; }
ir::Expr element(const ir::StoreNode* s) { return ir::load(s->buffer, s->indices, s->span); }

// The lets in scope of an if's statements (the map body's before it, its arms'): their values substituted
// where they are used (as legalize_vector does), so computed there (lower_arm and lower_if check what they
// read).
struct Lets {
  std::vector<std::pair<ir::Var, ir::Expr>> subst;
  std::set<const ir::VarNode*> stated;  // the map body's lets: statements before the if (ifs_as_selects)
  void add(const ir::LetNode* l) { subst.push_back({l->var, ir::substitute(l->value, subst)}); }
};

bool uses_var(const ir::Stmt& s, const ir::VarNode* v) {
  bool used = false;
  ir::for_each_expr(s, [&](const ir::Expr& x) { used = used || x.get() == v; });
  return used;
}

// not e; an integer comparison its opposite (`j >= 7` -> `j < 7`: an index mask stays one; a float one keeps
// the not, NaN compares false both ways)
ir::Expr negate(const ir::Expr& e) {
  auto* b = e->kind == ir::ExprKind::Binary ? static_cast<const ir::BinaryNode*>(e.get()) : nullptr;
  static const std::pair<ir::BinOp, ir::BinOp> opposite[] = {{ir::BinOp::EQ, ir::BinOp::NE}, {ir::BinOp::NE, ir::BinOp::EQ},
                                                             {ir::BinOp::LT, ir::BinOp::GE}, {ir::BinOp::GE, ir::BinOp::LT},
                                                             {ir::BinOp::GT, ir::BinOp::LE}, {ir::BinOp::LE, ir::BinOp::GT}};
  if (b && b->a->dtype.is_int() && b->b->dtype.is_int())
    for (const auto& [op, to] : opposite)
      if (b->op == op) return ir::binary(to, b->a, b->b, e->span);
  return ir::unary(ir::UnOp::Not, e, e->span);
}

// The statements a nested if's lowering emitted (lower_arm): their values are guarded along the whole path of
// conditions already (lower_if_as' `path`), stored as they are by the ifs around it; and the bound conditions
// and paths whose values differ between elements of the map (not a select of the same lane everywhere).
struct Guarded {
  std::set<ir::Stmt> stmts;
  std::set<const ir::VarNode*> varying;
  bool count(const ir::Stmt& x) const { return stmts.count(x) > 0; }
  bool varies(const ir::Expr& e, const std::vector<ir::Var>& vars) const {
    bool v = on_vars(e, vars);
    ir::for_each_expr(e, [&](const ir::Expr& x) { v = v || varying.count(static_cast<const ir::VarNode*>(x.get())); });
    return v;
  }
};

bool lower_if(const ir::Stmt& s, const std::vector<ir::Var>& vars, const Lets& lets, std::vector<ir::Stmt>& out,
              vec::Names& names, const ir::Expr& path, Guarded& guarded);

// The statements of an if's arm as stores and bound lets, in order, lets substituted (lower_if); false for
// anything but stores, lets and ifs. A let used after a store of the arm wrote a tile its value reads is
// bound where the arm binds it (elifcond33: `t = y[i] * 2.0; y[i] = 1.0; z[i] = t`), a let statement
// `t_N` the later uses read, as a nested if's bound condition is (lower_if).
bool lower_arm(const ir::Stmt& arm, const std::vector<ir::Var>& vars, Lets lets, std::vector<ir::Stmt>& out,
               vec::Names& names, const ir::Expr& path, Guarded& guarded) {
  if (!arm) return true;
  struct Own {
    ir::Var var;
    ir::Expr value;
    size_t at;  // its place in out
    bool stale;
  };
  std::vector<Own> own;
  for (const auto& s : ir::stmts_of(arm)) {
    if (s->kind == ir::StmtKind::Let) {
      lets.add(ir::as<ir::LetNode>(s));
      own.push_back({ir::as<ir::LetNode>(s)->var, lets.subst.back().second, out.size(), false});
      continue;
    }
    for (auto& l : own) {
      if (!l.stale || !uses_var(s, l.var.get())) continue;
      const ir::Var v = ir::var(names.fresh(l.var->name), l.var->dtype, l.var->span);
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(l.at), std::make_shared<ir::LetNode>(v, l.value, l.var->span));
      for (auto& m : own) m.at += m.at > l.at;
      for (auto& [x, value] : lets.subst)
        if (x.get() == l.var.get()) value = v;
      l.stale = false, l.value = v;
    }
    const size_t from = out.size();
    if (s->kind == ir::StmtKind::Store) {
      out.push_back(lets.subst.empty() ? s : ir::substitute(s, lets.subst));
    } else if (s->kind == ir::StmtKind::Seq ? !lower_arm(s, vars, lets, out, names, path, guarded)
                                            : s->kind != ir::StmtKind::If || !lower_if(s, vars, lets, out, names, path, guarded)) {
      return false;
    }
    for (auto& l : own)
      for (size_t k = from; k < out.size(); ++k)
        l.stale = l.stale || (store_of(out[k]) && reads(l.value, store_of(out[k])->buffer.get()));
  }
  return true;
}

// Arms whose stores are one select each per element (lower_if): no element stored twice in an arm, and no
// value reading a tile the if stores but at its own element (so every value reads the tiles as they were
// before the if, in any order).
bool one_select_per_element(const std::vector<ir::Stmt>& t, const std::vector<ir::Stmt>& e) {
  std::vector<ir::Stmt> all = t;
  all.insert(all.end(), e.begin(), e.end());
  if (std::any_of(all.begin(), all.end(), [](const ir::Stmt& x) { return !store_of(x); })) return false;  // in order
  for (const auto& x : all) {
    const ir::Expr own = element(store_of(x));
    bool other = false;
    ir::for_each_expr(store_of(x)->value, [&](const ir::Expr& r) {
      other = other || (r->kind == ir::ExprKind::Load && !ir::structural_equal(r, own) &&
                        std::any_of(all.begin(), all.end(), [&](const ir::Stmt& y) {
                          return static_cast<const ir::LoadNode*>(r.get())->buffer.get() == store_of(y)->buffer.get();
                        }));
    });
    if (other) return false;
  }
  for (const auto* arm : {&t, &e})
    for (size_t k = 0; k < arm->size(); ++k)
      for (size_t l = 0; l < k; ++l)
        if (ir::structural_equal(element(store_of((*arm)[k])), element(store_of((*arm)[l])))) return false;
  return true;
}

// An if in a map's innermost body (elif32; hunt30 F5 for one store in each arm) as stores of selects, the
// sequence the if's arms run on each element: every store of the then arm t[idx] = T.where(c, a, t[idx]),
// then every store of the else arm t[idx] = T.where(c, t[idx], b) (an element an arm does not store keeps
// its value: the read of t[idx] is the checker's uninitialised-read rule's), or, where the arms allow it
// (one_select_per_element), one store per element t[idx] = T.where(c, a, b), in any order (the stores of
// the tiles the condition reads last). An elif is an if in the else arm: nested selects, the inner
// condition chosen only where c is false. Both arms are evaluated, as T.where's, their reads at selected
// indices (GuardIndices, with c: nested ifs select at every level) and int32 operands (GuardOperands);
// lets substituted (Lets). A condition or a let in scope the if uses reading a tile that a store of the if
// before the last writes (evaluated at each store, it would see that store's value) is bound where the if is
// (`bind`, the second try: elifcond33): the condition a let statement `cond_N` before the stores, a let of
// the map body left a reference to its statement, an arm's let bound again (`t_N`), so legalize_vector
// computes each into a temporary tile before the store that clobbers what it reads (cpu's order: the
// condition is evaluated once, before either arm runs); bound lets, and those the arms bind (lower_arm, a
// nested if's), are read at indices and in int32 arithmetic as tiles are (guarded), and keep the stores in
// order. A condition free of the map (`if n > 2:` beside other statements or nested; the whole body, it goes
// around the map: ifs_as_selects) is a select of the same lane everywhere, its arms' map-free indices
// selected too (GuardIndices). Not lowered (false): an arm holding anything but stores, lets and ifs; in
// order, an element at a strided index stored twice.
bool lower_if_as(const ir::Stmt& s, const std::vector<ir::Var>& vars, const Lets& lets, std::vector<ir::Stmt>& out,
                 vec::Names& names, bool bind, const ir::Expr& path, Guarded& guarded) {
  auto* n = ir::as<ir::IfNode>(s);
  std::vector<ir::Stmt> t, e, res;
  std::vector<const ir::BufferNode*> stored;
  ir::for_each_stmt(s, [&](const ir::Stmt& x) {
    if (store_of(x)) stored.push_back(store_of(x)->buffer.get());
  });
  ir::Expr c = lets.subst.empty() ? n->cond : ir::substitute(n->cond, lets.subst);
  Lets scope = lets;  // the lets substituted
  std::vector<ir::Var> bound;  // lets read as tiles are: the bound ones, the arms'
  if (bind) {
    // a let of the map body stays a reference to its statement; an arm's (lower_arm: not stale here) is
    // bound again where the if is
    scope.subst.clear();
    for (const auto& l : lets.subst) {
      const bool clobbered =
          uses_var(s, l.first.get()) && std::any_of(stored.begin(), stored.end(), [&](const auto* b) { return reads(l.second, b); });
      if (clobbered && !lets.stated.count(l.first.get())) {
        const ir::Var v = ir::var(names.fresh(l.first->name), l.first->dtype, l.first->span);
        res.push_back(std::make_shared<ir::LetNode>(v, l.second, n->span));
        scope.subst.push_back({l.first, v});
        bound.push_back(v);
      } else if (clobbered) {
        bound.push_back(l.first);
      } else {
        scope.subst.push_back(l);
      }
    }
    const ir::Var cv = ir::var(names.fresh("cond"), n->cond->dtype, n->cond->span);
    res.push_back(std::make_shared<ir::LetNode>(cv, ir::substitute(n->cond, scope.subst), n->span));
    c = cv;
  }
  // A nested if (path: the ifs around it, the condition of the arm it is in) binds its condition, guarded along
  // the path, and the paths of its arms (path and c, path and not c) as lets (`cond_N`, `path_N`), guards its
  // arms' values with their path once and stores each element where the path to its arm is true, as the ifs
  // around it keep its statements (elif34: guarding a nested if's result again at every level around it, the
  // guards' conditions too, doubled the program with every arm of an int32 elif chain; each condition and
  // path is one let, legalize_vector computes one used again into a tile once).
  std::vector<ir::Expr> keep;
  ir::Expr path_t, path_e;
  const ir::Expr c_raw = c;
  // a let of a value of the elements (one free of the map stays an expression: a scalar, hoisted)
  auto bind_value = [&](const char* name, const ir::Expr& value) -> ir::Expr {
    if (!guarded.varies(value, vars)) return value;
    const ir::Var v = ir::var(names.fresh(name), n->cond->dtype, n->cond->span);
    res.push_back(std::make_shared<ir::LetNode>(v, value, n->span));
    guarded.varying.insert(v.get());
    return v;
  };
  if (path) {
    const bool free_path = !guarded.varies(path, vars);
    if (bind) {
      auto* l = ir::as<ir::LetNode>(res.back());
      res.back() = std::make_shared<ir::LetNode>(l->var, guard_arm(l->value, path, true, free_path, vars, keep, bound), n->span);
    } else {
      c = bind_value("cond", guard_arm(c, path, true, free_path, vars, keep, bound));
    }
    if (n->then_body) path_t = bind_value("path", ir::binary(ir::BinOp::And, path, c, n->span));
    if (n->else_body) path_e = bind_value("path", ir::binary(ir::BinOp::And, path, negate(c), n->span));
  }
  for (const auto& x : res)
    if (guarded.varies(ir::as<ir::LetNode>(x)->value, vars)) guarded.varying.insert(ir::as<ir::LetNode>(x)->var.get());
  if (!lower_arm(n->then_body, vars, scope, t, names, path ? path_t : c, guarded) ||
      !lower_arm(n->else_body, vars, scope, e, names, path ? path_e : negate(c), guarded))
    return false;
  for (const auto* arm : {&t, &e})
    for (const auto& s : *arm)
      if (store_of(s)) keep.push_back(element(store_of(s)));
      else bound.push_back(ir::as<ir::LetNode>(s)->var);
  // A nested if whose arms are one select per element needing no guard (no int32 arithmetic, no gathers:
  // elif32's float elif chains) stays a select on its own condition, merged into the selects of the ifs around
  // it (one store per element, no lets).
  const bool free_arms = path && !guarded.varies(c, vars) && !guarded.varies(path, vars);
  bool plain = path && !bind && one_select_per_element(t, e) &&
               ir::structural_equal(guard_arm(c_raw, path, true, !guarded.varies(path, vars), vars, keep, bound), c_raw);
  for (const auto* arm : {&t, &e})
    for (size_t k = 0; plain && k < arm->size(); ++k) {
      const ir::Expr& v = store_of((*arm)[k])->value;
      plain = ir::structural_equal(guard_arm(v, arm == &t ? path_t : path_e, true, free_arms, vars, keep, bound), v);
    }
  if (plain) res.clear(), c = c_raw;
  const ir::Expr P = plain ? nullptr : path;  // the path this if's stores are guarded and stored under
  const bool free = !guarded.varies(c, vars) && !(P && guarded.varies(P, vars));
  const size_t at_if = res.size();  // the bound lets before the stores
  auto guard = [&](const ir::Expr& v, bool then) {
    return P ? guard_arm(v, then ? path_t : path_e, true, free, vars, keep, bound) : guard_arm(v, c, then, free, vars, keep, bound);
  };
  auto value = [&](const ir::Stmt& x, bool then) {
    auto* s = store_of(x);
    return ir::cast(guard(s->value, then), s->buffer->dtype, s->span);
  };
  // an arm's let, its value guarded as the stores' are; a nested if's statements as they are
  auto let = [&](const ir::Stmt& x, bool then) {
    auto* l = ir::as<ir::LetNode>(x);
    res.push_back(guarded.count(x) ? x : std::make_shared<ir::LetNode>(l->var, guard(l->value, then), l->span));
  };
  // t[idx] = where(c, where(c2, a, t[idx]), t[idx]) (an arm's store under a nested if) is where(c and c2, a,
  // t[idx]); c not taken, c2 not taken alike (not c, not c2): one select, and index masks one mask
  // (bfloat16's masks have no nested form); under a path, where(path, where(c, a, b), t[idx]), the path to
  // the arm where one arm stores the element
  auto emit = [&](const ir::StoreNode* s, ir::Expr a, ir::Expr b) {
    const ir::Expr at = element(s);
    const bool then = ir::structural_equal(b, at);
    if (P) {
      const bool both = !then && !ir::structural_equal(a, at);
      const ir::Expr v = both ? ir::select(P, ir::select(c, a, b, s->span), at, s->span)
                              : ir::select(then ? path_t : path_e, then ? a : b, at, s->span);
      res.push_back(std::make_shared<ir::StoreNode>(s->buffer, s->indices, v, s->span));
      return;
    }
    const ir::Expr& x = then ? a : b;
    auto* in = x->kind == ir::ExprKind::Select ? static_cast<const ir::SelectNode*>(x.get()) : nullptr;
    ir::Expr cond = c;
    if (in && (then || ir::structural_equal(a, at)) && (ir::structural_equal(in->f, at) || ir::structural_equal(in->t, at))) {
      const bool in_then = ir::structural_equal(in->f, at);
      auto side = [&](const ir::Expr& e, bool taken) { return taken ? e : negate(e); };
      cond = ir::binary(ir::BinOp::And, side(c, then), side(in->cond, in_then), s->span);
      a = in_then ? in->t : in->f;
      b = at;
    }
    res.push_back(std::make_shared<ir::StoreNode>(s->buffer, s->indices, ir::select(cond, a, b, s->span), s->span));
  };
  // a nested if's store as it is (its path holds this if's arm)
  auto store = [&](const ir::Stmt& x, bool then) {
    if (guarded.count(x)) return res.push_back(x);
    auto* s = store_of(x);
    then ? emit(s, value(x, true), element(s)) : emit(s, element(s), value(x, false));
  };
  const bool one = one_select_per_element(t, e);
  if (one) {
    auto same = [](const ir::Stmt& x) {
      return [x](const ir::Stmt& y) { return ir::structural_equal(element(store_of(x)), element(store_of(y))); };
    };
    for (const auto& x : t) {
      auto y = std::find_if(e.begin(), e.end(), same(x));
      emit(store_of(x), value(x, true), y == e.end() ? element(store_of(x)) : value(*y, false));
    }
    for (const auto& y : e)
      if (std::none_of(t.begin(), t.end(), same(y))) emit(store_of(y), element(store_of(y)), value(y, false));
  } else {
    for (const auto& x : t) store_of(x) ? store(x, true) : let(x, true);
    for (const auto& y : e) store_of(y) ? store(y, false) : let(y, false);
    // an element stored twice at a strided index is not a vector store (select_instructions)
    for (size_t k = at_if; k < res.size(); ++k)
      for (size_t l = at_if; l < k; ++l)
        if (store_of(res[k]) && store_of(res[l]) && !at_vars(*store_of(res[k])->buffer, store_of(res[k])->indices, vars) &&
            ir::structural_equal(element(store_of(res[k])), element(store_of(res[l]))))
          return false;
  }
  auto read_again = [&](const ir::Stmt& x) {
    if (!store_of(x)) return false;
    const ir::BufferNode* b = store_of(x)->buffer.get();
    return reads(c, b) || std::any_of(scope.subst.begin(), scope.subst.end(), [&](const auto& l) {
             return reads(l.second, b) && uses_var(s, l.first.get());
           });
  };
  if (one) std::stable_partition(res.begin() + static_cast<std::ptrdiff_t>(at_if), res.end(), [&](const ir::Stmt& x) { return !read_again(x); });
  for (size_t k = 0; k + 1 < res.size(); ++k)
    if (read_again(res[k])) return false;
  // a path nothing reads (an arm of stores needing no guard) dropped
  for (const ir::Expr& p : {path_t, path_e}) {
    auto at = std::find_if(res.begin(), res.end(), [&](const ir::Stmt& x) { return !store_of(x) && p && ir::as<ir::LetNode>(x)->var.get() == p.get(); });
    if (at != res.end() && std::none_of(at + 1, res.end(), [&](const ir::Stmt& x) { return uses_var(x, static_cast<const ir::VarNode*>(p.get())); }))
      res.erase(at);
  }
  if (P) guarded.stmts.insert(res.begin(), res.end());
  // none: an if without stores does nothing
  if (std::any_of(res.begin(), res.end(), [](const ir::Stmt& x) { return store_of(x) != nullptr; }))
    out.insert(out.end(), res.begin(), res.end());
  return true;
}

// lower_if_as, binding the condition where it must be (bind)
bool lower_if(const ir::Stmt& s, const std::vector<ir::Var>& vars, const Lets& lets, std::vector<ir::Stmt>& out,
              vec::Names& names, const ir::Expr& path, Guarded& guarded) {
  return lower_if_as(s, vars, lets, out, names, false, path, guarded) || lower_if_as(s, vars, lets, out, names, true, path, guarded);
}

// An if, the whole body of a map, whose condition is free of the map and of the tiles the if stores: it goes
// around the map (ToParallel::selects), where cpu does not evaluate the arm it skips (hunt31 F1).
bool free_if(const ir::Stmt& s, const std::vector<ir::Var>& vars) {
  if (s->kind != ir::StmtKind::If) return false;
  const ir::Expr& c = ir::as<ir::IfNode>(s)->cond;
  bool free = !on_vars(c, vars);
  ir::for_each_stmt(s, [&](const ir::Stmt& x) { free = free && (x->kind != ir::StmtKind::Store || !reads(c, store_of(x)->buffer.get())); });
  return free;
}

// The items of a map's innermost body with its ifs lowered (lower_if); `if j < n` without an else, the
// whole body, on the innermost variable and a run-time bound free of the map and of loads, its arm stores,
// stays (select_instructions' runtime column count; a constant bound is an index mask).
bool ifs_as_selects(std::vector<ir::Stmt>& items, const std::vector<ir::Var>& vars, vec::Names& names) {
  if (items.size() == 1 && free_if(items[0], vars)) return false;
  if (items.size() == 1 && items[0]->kind == ir::StmtKind::If) {
    auto* n = ir::as<ir::IfNode>(items[0]);
    auto* lt = n->cond->kind == ir::ExprKind::Binary ? ir::as<ir::BinaryNode>(n->cond) : nullptr;
    bool loads = false;
    if (lt) ir::for_each_expr(lt->b, [&](const ir::Expr& y) { loads = loads || y->kind == ir::ExprKind::Load; });
    auto arm = ir::stmts_of(n->then_body);
    const bool stores = std::all_of(arm.begin(), arm.end(), [](const ir::Stmt& x) { return x->kind == ir::StmtKind::Store; });
    if (!n->else_body && lt && lt->op == ir::BinOp::LT && lt->a.get() == vars.back().get() && !loads &&
        !on_vars(lt->b, vars) && !ir::as_const_int(lt->b) && stores)
      return false;
  }
  std::vector<ir::Stmt> out;
  bool changed = false;
  Lets lets;
  for (const auto& it : items) {
    if (it->kind == ir::StmtKind::Let) lets.add(ir::as<ir::LetNode>(it)), lets.stated.insert(ir::as<ir::LetNode>(it)->var.get());
    Guarded guarded;
    const bool lowered = it->kind == ir::StmtKind::If && lower_if(it, vars, lets, out, names, nullptr, guarded);
    if (!lowered) out.push_back(it);
    changed = changed || lowered;
  }
  if (!changed || out.empty()) return false;  // a body of ifs without stores stays (an empty map's error)
  items = std::move(out);
  return true;
}

// `if c: for j in T.Parallel(n): A else: for j in T.Parallel(n): B` in a map's body (a row condition around
// the inner map, elifcond33) as `for j in T.Parallel(n): if c: A else: B`, an elif's arm first; null where
// the arms are not one T.Parallel loop each of the same extent (or none), or c reads a tile they store (each
// j would see the stores of the j before).
ir::Stmt sink_if(const ir::Stmt& s) {
  auto* n = ir::as<ir::IfNode>(s);
  auto inner = [](const ir::Stmt& arm) -> ir::Stmt {
    if (!arm) return nullptr;
    auto items = ir::stmts_of(arm);
    ir::Stmt x = items.size() == 1 && items[0]->kind == ir::StmtKind::If ? sink_if(items[0]) : nullptr;
    if (!x && items.size() == 1) x = items[0];
    if (!x || x->kind != ir::StmtKind::For || ir::as<ir::ForNode>(x)->for_kind != ir::ForKind::parallel) return nullptr;
    return x;
  };
  const ir::Stmt then_loop = inner(n->then_body), else_loop = inner(n->else_body);
  auto* t = then_loop ? ir::as<ir::ForNode>(then_loop) : nullptr;
  auto* e = else_loop ? ir::as<ir::ForNode>(else_loop) : nullptr;
  if ((n->then_body && !t) || (n->else_body && !e) || (!t && !e)) return nullptr;
  const ir::ForNode* f = t ? t : e;
  if (t && e && (!ir::structural_equal(t->extent, e->extent) || !ir::structural_equal(t->min, e->min))) return nullptr;
  bool clobbered = false;
  ir::for_each_stmt(s, [&](const ir::Stmt& x) {
    clobbered = clobbered || (x->kind == ir::StmtKind::Store && reads(n->cond, store_of(x)->buffer.get()));
  });
  if (clobbered) return nullptr;
  ir::Stmt body = !t ? std::make_shared<ir::IfNode>(negate(n->cond), e->body, nullptr, n->span)
                     : std::make_shared<ir::IfNode>(n->cond, t->body, e ? ir::substitute(e->body, {{e->var, t->var}}) : nullptr, n->span);
  return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages, body, f->span);
}

struct ToParallel : ir::Mutator {
  explicit ToParallel(const ir::Kernel& k) : names(k) {}
  vec::Names names;  // the bound conditions' lets (lower_if)
  using ir::Mutator::mutate;
  ir::Stmt mutate(const ir::Stmt& s) override {
    if (!s || s->kind != ir::StmtKind::For) return ir::Mutator::mutate(s);  // null: an if without else
    auto* f = ir::as<ir::ForNode>(s);
    if (f->for_kind == ir::ForKind::parallel) return selects(s, {});
    ir::Stmt nest = unit_loops(s);
    if (!is_map_nest(ir::as<ir::ForNode>(nest))) return ir::Mutator::mutate(s);
    return parallel(nest);
  }
  // simplify made a serial loop of extent 1 `let v = min` before its body (a (bm, 1) tile's
  // `for j in range(1)`, port34 F5): the lets of constants heading the nest's innermost body are
  // those loops again (the same program), so that the nest stores at its variables as written
  static ir::Stmt unit_loops(const ir::Stmt& s) {
    auto* f = ir::as<ir::ForNode>(s);
    auto inner = ir::stmts_of(f->body);
    ir::Stmt body;
    if (inner.size() == 1 && inner[0]->kind == ir::StmtKind::For &&
        ir::as<ir::ForNode>(inner[0])->for_kind == ir::ForKind::serial) {
      body = unit_loops(inner[0]);
    } else {
      size_t k = 0;
      while (k < inner.size() && inner[k]->kind == ir::StmtKind::Let &&
             ir::as_const_int(ir::as<ir::LetNode>(inner[k])->value))
        ++k;
      if (k == 0) return s;
      std::vector<ir::Stmt> rest(inner.begin() + static_cast<std::ptrdiff_t>(k), inner.end());
      body = std::make_shared<ir::SeqNode>(rest, f->body->span);
      for (size_t m = k; m-- > 0;) {
        auto* l = ir::as<ir::LetNode>(inner[m]);
        body = std::make_shared<ir::ForNode>(l->var, l->value, ir::int_imm(1, l->value->dtype, l->span),
                                             ir::ForKind::serial, 0, body, l->span);
      }
    }
    if (body == f->body) return s;
    return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages, body, s->span);
  }
  // a T.Parallel map with its ifs as selects (ifs_as_selects), and a body that is one if free of the map
  // (`if f[0] > 0:`, the same arm for every element: hunt31 F1) as that if around the map
  ir::Stmt selects(const ir::Stmt& s, std::vector<ir::Var> vars) {
    ir::Stmt m = selects_in(s, vars);
    if (m->kind != ir::StmtKind::For) return m;
    auto* f = ir::as<ir::ForNode>(m);
    vars.push_back(f->var);
    if (!free_if(f->body, vars)) return m;
    auto* n = ir::as<ir::IfNode>(f->body);
    vars.pop_back();
    auto loop = [&](const ir::Stmt& body) -> ir::Stmt {
      if (!body) return nullptr;
      return selects(std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages, body, m->span), vars);
    };
    return std::make_shared<ir::IfNode>(n->cond, loop(n->then_body), loop(n->else_body), n->span);
  }
  ir::Stmt selects_in(const ir::Stmt& s, std::vector<ir::Var> vars) {
    auto* f = ir::as<ir::ForNode>(s);
    vars.push_back(f->var);
    auto items = ir::stmts_of(f->body);
    ir::Stmt body;
    if (items.size() == 1 && items[0]->kind == ir::StmtKind::If)
      if (ir::Stmt sunk = sink_if(items[0])) items[0] = sunk;
    if (items.size() == 1 && items[0]->kind == ir::StmtKind::For && ir::as<ir::ForNode>(items[0])->for_kind == ir::ForKind::parallel) {
      body = selects(items[0], vars);
    } else {
      if (!ifs_as_selects(items, vars, names)) return s;
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
  return ToParallel(kernel).mutate_kernel(kernel);
}

}  // namespace tw::ascend
