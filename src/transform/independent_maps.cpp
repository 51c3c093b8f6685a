#include "transform/independent_maps.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/functor.h"
#include "ir/printer.h"
#include "transform/affine.h"

namespace tw::transform {

using namespace tw::ir;

namespace {

// A loop variable of the map: its values lo .. lo + ext - 1 (ext < 0: not a constant).
struct MapVar {
  const VarNode* var;
  int64_t lo, ext;
};

// A guard of an access: an `if` condition (or its negation in the else branch) around it.
struct Guard {
  Expr cond;
  bool value;
};

struct Access {
  Buffer buffer;
  std::vector<Expr> written;  // the indices as the user wrote them (for the message)
  std::vector<Expr> indices;  // the map's lets substituted
  bool store;
  Span span;
  std::vector<int> scope;  // the map variables around it (indices into Map::vars)
  std::vector<Guard> guards;
  bool has_load = false;  // an index reads memory (a gather / scatter)
};

constexpr int64_t kMaxPoints = int64_t{1} << 20;  // per group of variables and side

bool reads_memory(const Expr& e) {
  bool r = false;
  for_each_expr(e, [&](const Expr& x) { r = r || x->kind == ExprKind::Load; });
  return r;
}

// The value of e at a point of the map's variables (`value` by variable, nullopt where unset), or
// nullopt when e uses anything else or is not integer arithmetic.
class Eval {
 public:
  Eval(const std::vector<MapVar>& vars, const std::vector<std::optional<int64_t>>& value) : vars_(vars), value_(value) {}
  std::optional<int64_t> operator()(const Expr& e) const {
    switch (e->kind) {
      case ExprKind::IntImm: return as<IntImmNode>(e)->value;
      case ExprKind::Var: {
        for (size_t k = 0; k < vars_.size(); ++k)
          if (vars_[k].var == e.get()) return value_[k];
        return std::nullopt;
      }
      case ExprKind::Binary: {
        auto* b = as<BinaryNode>(e);
        if (!b->a->dtype.is_int() && !b->a->dtype.is_bool()) return std::nullopt;
        auto x = (*this)(b->a);
        if (!x) return std::nullopt;
        if (b->op == BinOp::And && !*x) return 0;
        if (b->op == BinOp::Or && *x) return 1;
        auto y = (*this)(b->b);
        if (!y) return std::nullopt;
        if (b->op == BinOp::And || b->op == BinOp::Or) return *y != 0;
        return fold_int_binary(b->op, *x, *y, b->dtype);
      }
      case ExprKind::Unary: {
        auto* u = as<UnaryNode>(e);
        auto x = (*this)(u->a);
        if (!x || !(u->a->dtype.is_int() || u->a->dtype.is_bool())) return std::nullopt;
        switch (u->op) {
          case UnOp::Neg: return *x == INT64_MIN ? std::nullopt : std::optional<int64_t>(-*x);
          case UnOp::Not: return *x == 0;
          case UnOp::BitNot: return wrap_int(~*x, u->dtype);
        }
        return std::nullopt;
      }
      case ExprKind::Cast: {
        auto* c = as<CastNode>(e);
        auto x = (*this)(c->value);
        if (!x || !c->dtype.is_int() || !(c->value->dtype.is_int() || c->value->dtype.is_bool())) return std::nullopt;
        return wrap_int(*x, c->dtype);
      }
      case ExprKind::Select: {
        auto* s = as<SelectNode>(e);
        auto c = (*this)(s->cond);
        if (!c) return std::nullopt;
        return (*this)(*c ? s->t : s->f);
      }
      case ExprKind::FloatImm: case ExprKind::Call: case ExprKind::Load: return std::nullopt;
    }
    return std::nullopt;
  }

 private:
  const std::vector<MapVar>& vars_;
  const std::vector<std::optional<int64_t>>& value_;
};

// One dimension of an index: sum(coef * atom) over atoms of the map's variables alone (`map`, with
// the constant) plus an Affine free of them (`rest`); unknown when an atom mixes the two or reads
// memory while using the map's variables.
struct DimForm {
  bool known = true;
  Affine map;              // atoms of the map's variables (and constants) only; c = 0
  Affine rest;             // atoms free of the map's variables, with the constant
  std::vector<int> vars;   // the map variables `map` uses
};

class Checker {
 public:
  void run(const Stmt& s) {
    if (!s) return;
    if (s->kind == StmtKind::For && as<ForNode>(s)->for_kind == ForKind::parallel) {
      vars_.clear();
      accesses_.clear();
      lets_.clear();
      guards_.clear();
      walk(s, {});
      check();
      return;
    }
    for (const auto& c : children(s)) run(c);
  }

 private:
  static std::vector<Stmt> children(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::Seq: return as<SeqNode>(s)->body;
      case StmtKind::For: return {as<ForNode>(s)->body};
      case StmtKind::If: return {as<IfNode>(s)->then_body, as<IfNode>(s)->else_body};
      case StmtKind::CoreScope: return {as<CoreScopeNode>(s)->body};
      case StmtKind::Let: case StmtKind::Store: case StmtKind::Alloc: case StmtKind::Copy: case StmtKind::Gemm:
      case StmtKind::Fill: case StmtKind::Reduce: case StmtKind::Sync:
        return {};
    }
    return {};
  }

  Expr subst(const Expr& e) const {
    if (lets_.empty()) return e;
    std::vector<std::pair<Var, Expr>> m;
    for (const auto& [v, x] : lets_) m.push_back({v, x});
    return substitute(e, m);
  }

  // Every load in e (nested ones too) is an access at the current scope.
  void loads(const Expr& e, const std::vector<int>& scope) {
    if (!e) return;
    for_each_expr(e, [&](const Expr& x) {
      if (x->kind != ExprKind::Load) return;
      auto* l = as<LoadNode>(x);
      add(l->buffer, l->indices, false, x->span, scope);
    });
  }

  void add(const Buffer& b, const std::vector<Expr>& idx, bool store, const Span& sp, const std::vector<int>& scope) {
    Access a{b, idx, {}, store, sp, scope, guards_};
    for (const auto& i : idx) {
      a.indices.push_back(subst(i));
      a.has_load = a.has_load || reads_memory(a.indices.back());
    }
    accesses_.push_back(std::move(a));
  }

  void walk(const Stmt& s, std::vector<int> scope) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq: {
        size_t n = lets_.size();
        for (const auto& x : as<SeqNode>(s)->body) walk(x, scope);
        lets_.resize(n);
        return;
      }
      case StmtKind::For: {
        auto* f = as<ForNode>(s);
        loads(f->min, scope);
        loads(f->extent, scope);
        if (f->for_kind == ForKind::parallel) {
          auto lo = as_const_int(f->min), ext = as_const_int(f->extent);
          vars_.push_back({f->var.get(), lo.value_or(0), lo && ext ? *ext : -1});
          scope.push_back(static_cast<int>(vars_.size()) - 1);
        }
        walk(f->body, scope);
        return;
      }
      case StmtKind::If: {
        auto* n = as<IfNode>(s);
        loads(n->cond, scope);
        Expr c = subst(n->cond);
        guards_.push_back({c, true});
        walk(n->then_body, scope);
        guards_.back().value = false;
        walk(n->else_body, scope);
        guards_.pop_back();
        return;
      }
      case StmtKind::Let: {
        auto* n = as<LetNode>(s);
        loads(n->value, scope);
        lets_.push_back({n->var, subst(n->value)});
        return;
      }
      case StmtKind::Store: {
        auto* n = as<StoreNode>(s);
        for (const auto& i : n->indices) loads(i, scope);
        loads(n->value, scope);
        add(n->buffer, n->indices, true, s->span, scope);
        return;
      }
      case StmtKind::CoreScope: walk(as<CoreScopeNode>(s)->body, scope); return;
      case StmtKind::Alloc: case StmtKind::Copy: case StmtKind::Gemm: case StmtKind::Fill: case StmtKind::Reduce:
      case StmtKind::Sync:
        return;  // not in a map (the verifier's error)
    }
  }

  int var_index(const Expr& e) const {
    for (size_t k = 0; k < vars_.size(); ++k)
      if (vars_[k].var == e.get()) return static_cast<int>(k);
    return -1;
  }

  DimForm form(const Expr& e) const {
    DimForm d;
    Affine f = to_affine(e);
    d.rest.c = f.c;
    for (const auto& t : f.terms) {
      bool on_map = false, other = false;
      for_each_expr(t.atom, [&](const Expr& x) {
        if (x->kind == ExprKind::Load) other = true;
        if (x->kind != ExprKind::Var) return;
        int k = var_index(x);
        if (k < 0) {
          other = true;
          return;
        }
        on_map = true;
        if (std::find(d.vars.begin(), d.vars.end(), k) == d.vars.end()) d.vars.push_back(k);
      });
      if (on_map && other) d.known = false;
      (on_map ? d.map : d.rest).terms.push_back(t);
    }
    for (int k : d.vars)
      if (vars_[k].ext < 0) d.known = false;
    return d;
  }

  // The value of `f` (sum over atoms of the map's variables) at the point `val`.
  std::optional<int64_t> value(const Affine& f, const std::vector<std::optional<int64_t>>& val) const {
    Eval ev(vars_, val);
    int64_t sum = 0;
    for (const auto& t : f.terms) {
      auto x = ev(t.atom);
      if (!x || __builtin_mul_overflow(*x, t.coef, &*x) || __builtin_add_overflow(sum, *x, &sum)) return std::nullopt;
    }
    return sum;
  }

  // Whether the guards of `a` whose variables are all set in `val` hold there (a guard that uses anything else
  // is taken to hold: the conservative answer).
  bool guards_hold(const Access& a, const std::vector<std::optional<int64_t>>& val) const {
    Eval ev(vars_, val);
    for (const auto& g : a.guards) {
      auto c = ev(g.cond);
      if (c && (*c != 0) != g.value) return false;
    }
    return true;
  }

  struct Verdict {
    bool conflict = false;
    bool certain = true;
    std::vector<std::optional<int64_t>> p, q;  // a pair of iterations that conflict
  };

  // Do iterations p (of S) and q (of A), different in a variable of both, reach one element?
  Verdict compare(const Access& S, const Access& A) const {
    Verdict v;
    const size_t n = vars_.size();
    auto in = [](const std::vector<int>& s, int k) { return std::find(s.begin(), s.end(), k) != s.end(); };
    std::vector<int> shared;
    for (int k : S.scope)
      if (in(A.scope, k)) shared.push_back(k);
    // per dimension: the relation map_S(p) + d = map_A(q), or unknown
    struct Rel {
      Affine fs, fa;
      int64_t d;
    };
    std::vector<Rel> rels;
    std::vector<int> parent(n);
    for (size_t k = 0; k < n; ++k) parent[k] = static_cast<int>(k);
    auto find = [&](int k) {
      while (parent[k] != k) k = parent[k] = parent[parent[k]];
      return k;
    };
    const bool self = &S == &A;
    for (size_t k = 0; k < S.indices.size() && k < A.indices.size(); ++k) {
      DimForm s = form(S.indices[k]), a = form(A.indices[k]);
      Affine diff = combine(s.rest, a.rest, -1);
      if (!s.known || !a.known || !diff.is_const()) {
        if (self && S.has_load) return {};  // a scatter's own stores: the program's promise (the header)
        v.certain = false;  // anything else may meet
        continue;
      }
      if (s.vars.empty() && a.vars.empty()) {
        if (diff.c != 0) return {};  // different constants (columns 2 and 3): never the same element
        continue;
      }
      std::vector<int> vs = s.vars;
      vs.insert(vs.end(), a.vars.begin(), a.vars.end());
      for (int x : vs) parent[find(x)] = find(vs.front());
      rels.push_back({s.map, a.map, diff.c});
    }
    // the variables each relation's group holds, and the variables no relation constrains
    std::map<int, std::vector<size_t>> groups;  // root -> relations
    for (size_t r = 0; r < rels.size(); ++r) {
      int root = -1;
      for (const auto& t : rels[r].fs.terms) for_each_expr(t.atom, [&](const Expr& x) { if (var_index(x) >= 0 && root < 0) root = find(var_index(x)); });
      for (const auto& t : rels[r].fa.terms) for_each_expr(t.atom, [&](const Expr& x) { if (var_index(x) >= 0 && root < 0) root = find(var_index(x)); });
      groups[root].push_back(r);
    }
    v.p.assign(n, std::nullopt);
    v.q.assign(n, std::nullopt);
    for (int k : S.scope) v.p[k] = vars_[k].lo;
    for (int k : A.scope) v.q[k] = vars_[k].lo;
    bool differ = false;
    for (const auto& [root, rs] : groups) {
      std::vector<int> ps, qs;  // the group's variables around S, around A
      for (int k : S.scope) if (find(k) == root) ps.push_back(k);
      for (int k : A.scope) if (find(k) == root) qs.push_back(k);
      auto points = [&](const std::vector<int>& ks) {
        int64_t c = 1;
        for (int k : ks) c = std::min(kMaxPoints + 1, c * std::max<int64_t>(vars_[k].ext, 0));
        return c;
      };
      if (points(ps) > kMaxPoints || points(qs) > kMaxPoints) {  // too many to enumerate
        // one variable v of both, every relation c * v + d = c * v' (the same c): v' = v + d / c, one offset
        std::optional<int64_t> shift;
        bool linear = ps.size() == 1 && ps == qs;
        for (size_t r : rs) {
          const Affine &fs = rels[r].fs, &fa = rels[r].fa;
          linear = linear && fs.terms.size() == 1 && fa.terms.size() == 1 && fs.terms[0].coef == fa.terms[0].coef &&
                   var_index(fs.terms[0].atom) == ps[0] && var_index(fa.terms[0].atom) == ps[0] &&
                   rels[r].d % fs.terms[0].coef == 0 && (!shift || *shift == rels[r].d / fs.terms[0].coef);
          if (linear) shift = rels[r].d / fs.terms[0].coef;
        }
        if (linear && shift) {
          const int k = ps[0];
          if (*shift >= vars_[k].ext || -*shift >= vars_[k].ext) return {};  // the offset leaves the range
          v.p[k] = vars_[k].lo + std::max<int64_t>(0, -*shift);
          v.q[k] = *v.p[k] + *shift;
          differ = differ || *shift != 0;
          continue;
        }
        v.certain = false;  // may meet
        for (int k : ps) differ = differ || (in(qs, k) && vars_[k].ext >= 2);
        continue;
      }
      // every point p of the group: the elements (per relation) S reaches, and its values of the shared variables
      auto each = [&](const std::vector<int>& ks, std::vector<std::optional<int64_t>>& val, auto&& fn) {
        std::vector<int64_t> at(ks.size(), 0);
        while (true) {
          bool empty = false;
          for (size_t t = 0; t < ks.size(); ++t) {
            val[ks[t]] = vars_[ks[t]].lo + at[t];
            empty = empty || vars_[ks[t]].ext <= 0;
          }
          if (empty) return;
          fn();
          size_t t = 0;
          for (; t < ks.size(); ++t) {
            if (++at[t] < vars_[ks[t]].ext) break;
            at[t] = 0;
          }
          if (t == ks.size()) return;
        }
      };
      std::vector<std::optional<int64_t>> pv(n), qv(n);
      std::map<std::vector<int64_t>, std::vector<std::vector<std::optional<int64_t>>>> seen;
      bool unknown = false;
      each(ps, pv, [&] {
        if (!guards_hold(S, pv)) return;
        std::vector<int64_t> key;
        for (size_t r : rs) {
          auto x = value(rels[r].fs, pv);
          if (!x) return void(unknown = true);
          key.push_back(*x + rels[r].d);
        }
        auto& list = seen[key];
        if (list.size() < 2) list.push_back(pv);
      });
      bool pair = false, diff_here = false;
      std::vector<std::optional<int64_t>> wp, wq;
      if (!unknown)
        each(qs, qv, [&] {
          if (diff_here || !guards_hold(A, qv)) return;
          std::vector<int64_t> key;
          for (size_t r : rs) {
            auto x = value(rels[r].fa, qv);
            if (!x) return void(unknown = true);
            key.push_back(*x);
          }
          auto it = seen.find(key);
          if (it == seen.end()) return;
          for (const auto& p : it->second) {
            bool d = false;
            for (int k : ps) d = d || (in(qs, k) && p[k] != qv[k]);
            if (!pair || d) {
              wp = p, wq = qv;
              pair = true;
              diff_here = d;
            }
            if (d) break;
          }
        });
      if (unknown) {  // an atom the evaluator does not take: may meet
        v.certain = false;
        for (int k : ps) differ = differ || (in(qs, k) && vars_[k].ext >= 2);
        continue;
      }
      if (!pair) return {};  // this dimension's elements never meet
      for (int k : ps) v.p[k] = wp[k];
      for (int k : qs) v.q[k] = wq[k];
      if (diff_here && !differ) differ = true;
    }
    // a shared variable no relation constrains: iterations that differ in it reach the same elements
    if (!differ)
      for (int k : shared) {
        if (groups.count(find(k)) || !(vars_[k].ext >= 2 || vars_[k].ext < 0)) continue;
        differ = true;
        v.q[k] = vars_[k].lo + 1;
        if (vars_[k].ext < 0) v.certain = false;
        break;
      }
    v.conflict = differ;
    return v;
  }

  std::string iteration(const std::vector<std::optional<int64_t>>& val, const std::vector<int>& scope) const {
    std::string s = "(";
    for (size_t t = 0; t < scope.size(); ++t) {
      if (t) s += ", ";
      s += vars_[scope[t]].var->name + "=" + (val[scope[t]] ? std::to_string(*val[scope[t]]) : "?");
    }
    return s + ")";
  }

  static std::string text(const Access& a) { return print(load(a.buffer, a.written, a.span)); }

  void check() const {
    for (size_t s = 0; s < accesses_.size(); ++s) {
      const Access& S = accesses_[s];
      if (!S.store) continue;
      for (size_t t = 0; t < accesses_.size(); ++t) {
        const Access& A = accesses_[t];
        if (A.buffer.get() != S.buffer.get() || (A.store && t < s)) continue;
        Verdict v = compare(S, A);
        if (v.conflict) fail(S, A, v);
      }
    }
  }

  [[noreturn]] void fail(const Access& S, const Access& A, const Verdict& v) const {
    const std::string name = "'" + S.buffer->name + "'";
    const std::string rule =
        "; a map's iterations must not depend on each other (they run in no set order: one after another on cpu, "
        "a vector instruction over all of them at a time on Ascend)";
    std::string hint = "compute the result into another tile (y[...] = ... " + text(A) + " ...) and copy it back, or "
                       "T.copy(" + S.buffer->name + ", " + S.buffer->name + "_old) before the map and read " +
                       S.buffer->name + "_old in it";
    if (A.store) {
      std::string unused;  // the map's variables around the store that its indices do not use
      for (int k : S.scope) {
        bool used = false;
        for (const auto& i : S.indices) for_each_expr(i, [&](const Expr& x) { used = used || x.get() == vars_[k].var; });
        if (!used) unused += (unused.empty() ? "" : ", ") + vars_[k].var->name;
      }
      std::string what = &S != &A ? "the stores " + text(S) + " and " + text(A) + (v.certain ? " write" : " may write")
                         : "the store " + text(S) +
                               (unused.empty() ? "" : " (it does not use every loop index: not " + unused + ")") +
                               (v.certain ? " writes" : " may write");
      throw Error("T.Parallel map stores into " + name + " from several iterations at one element: " + what +
                      " the same element at iterations " + iteration(v.p, S.scope) + " and " + iteration(v.q, A.scope) +
                      rule,
                  A.span,
                  "map over the dims the store uses (a value per row: for i in T.Parallel(M): " + S.buffer->name +
                      "[i] = ...); to combine values along a dim use a reduction (T.reduce_sum / T.reduce_max)");
    }
    std::string why = v.certain ? " reads the element that iteration " + iteration(v.p, S.scope) + " stores"
                                : " may read an element another iteration stores (the compiler cannot prove it does not: "
                                  "an index computed from data, or not a function of the map's indices it can evaluate)";
    throw Error("T.Parallel map stores into " + name + " at " + text(S) + " and reads it at " + text(A) + ": iteration " +
                    iteration(v.q, A.scope) + why + rule,
                A.span, hint);
  }

  std::vector<MapVar> vars_;
  std::vector<Access> accesses_;
  std::vector<std::pair<Var, Expr>> lets_;
  std::vector<Guard> guards_;
};

}  // namespace

void check_independent_maps(const Kernel& kernel) { Checker().run(kernel->body); }

}  // namespace tw::transform
