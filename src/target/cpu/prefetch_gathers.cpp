// prefetch_gathers (see prefetch_gathers.h).
#include "target/cpu/prefetch_gathers.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/arith.h"
#include "ir/functor.h"
#include "target/cpu/tile_facts.h"

namespace tw::cpu {

using namespace tw::ir;

namespace {

constexpr const char* kName = "prefetch_next";
constexpr const char* kSlices = "prefetch_slices";

// The bytes of r's longest contiguous run in its (dense, row-major) tensor: the innermost dims it
// covers whole and the extent of the next one (r's extents are constants or run-time extents,
// counted at their bound, here).
int64_t contiguous_run(const Region& r) {
  int64_t run = r.buffer->dtype.bytes();
  for (int d = r.buffer->ndim() - 1; d >= 0; --d) {
    auto e = extent_bound(r.extents[d]);
    auto n = as_const_int(r.buffer->shape[d]);
    run *= e ? *e : 1;
    if (!e || !n || *e != *n) break;
  }
  return run;
}

struct Walk {
  std::unordered_set<const void*> written;
  std::unordered_set<const void*> gemm_views;  // tiles with @gemm_view (view_gemm_operands)
  Stmt root;                                   // the kernel's body
  std::unordered_map<const VarNode*, Expr> lets;  // every let seen so far (variables are unique)
  std::vector<const ForNode*> loops;              // enclosing loops, outermost first
  struct Cond {
    Expr cond;
    size_t depth;  // loops around the if
  };
  std::vector<Cond> conds;
  std::unordered_map<const StmtNode*, Annotation> marks;

  // The variables e reads, through the lets they name (transitively), into vars; *load when it
  // reads memory. False when a read is of a tile or of a global tensor the kernel writes.
  bool closure(const Expr& e, std::unordered_set<const VarNode*>& vars, bool& load) {
    bool ok = true;
    for_each_expr(e, [&](const Expr& x) {
      if (!x) return;
      if (x->kind == ExprKind::Load) {
        const Buffer& b = static_cast<const LoadNode*>(x.get())->buffer;
        load = true;
        ok &= b->scope == Scope::global && !written.count(b.get());
      } else if (x->kind == ExprKind::Var) {
        auto* v = static_cast<const VarNode*>(x.get());
        if (!vars.insert(v).second) return;
        auto it = lets.find(v);
        if (it != lets.end()) ok &= closure(it->second, vars, load);
      }
    });
    return ok;
  }
  bool pure(const Expr& e) {
    std::unordered_set<const VarNode*> vars;
    bool load = false;
    return closure(e, vars, load);
  }

  void consider(const Stmt& s) {
    const auto& c = *as<CopyNode>(s);
    if (c.src.buffer->scope != Scope::global || c.dst.buffer->scope == Scope::global) return;
    std::unordered_set<const VarNode*> vars;
    bool load = false, ok = true;
    for (const auto& e : c.src.starts) ok &= closure(e, vars, load);
    if (!ok || !load) return;  // not a gather: the hardware prefetchers follow affine rows
    int64_t bytes = c.src.buffer->dtype.bytes();
    for (const auto& e : c.src.extents) {
      auto x = extent_bound(e);  // a run-time extent: its bound (the prefetch covers the bound)
      if (!x) return;
      bytes *= *x;
    }
    if (contiguous_run(c.src) >= kStreamedRun) return consider_slices(s, vars);  // streamed whole
    for (size_t i = 0; i < loops.size(); ++i) {
      const ForNode& L = *loops[i];
      if (L.for_kind == ForKind::parallel || !vars.count(L.var.get())) continue;
      int64_t trips = 1;
      bool fits = true;
      for (size_t j = i + 1; j < loops.size() && fits; ++j) {
        auto x = as_const_int(loops[j]->extent);
        fits = x && loops[j]->for_kind != ForKind::parallel && pure(loops[j]->min);
        if (fits) trips *= std::max<int64_t>(*x, 1);
        fits = fits && bytes * trips <= kPrefetchBudget;
      }
      for (const auto& cd : conds)
        if (cd.depth > i) fits = fits && pure(cd.cond);
      if (!fits || bytes * trips > kPrefetchBudget) continue;
      marks.emplace(s.get(), Annotation{kName, {static_cast<int64_t>(loops.size() - i)}});
      return;
    }
  }

  // A long gathered run read in place by gemms that each read a column strip of it (@prefetch_slices:
  // see prefetch_gathers.h for the rule).
  void consider_slices(const Stmt& s, const std::unordered_set<const VarNode*>& vars) {
    const auto& c = *as<CopyNode>(s);
    const Buffer& t = c.dst.buffer;
    if (!gemm_views.count(t.get()) || (c.src.buffer->dtype.bytes() != 2 && c.src.buffer->dtype.bytes() != 4) || t->ndim() != 2 || loops.empty()) return;
    const ForNode& L = *loops.back();
    if (L.for_kind == ForKind::parallel || !vars.count(L.var.get())) return;
    for (const auto& cd : conds)
      if (cd.depth == loops.size() && !pure(cd.cond)) return;
    int64_t tensor = c.src.buffer->dtype.bytes();
    for (const auto& d : c.src.buffer->shape) {
      auto n = as_const_int(d);
      tensor = n && tensor <= kL2ResidentTensor ? tensor * std::max<int64_t>(*n, 0) : kL2ResidentTensor + 1;
    }
    if (tensor <= kL2ResidentTensor) return;  // stays in L2 once read
    auto cols = as_const_int(t->shape[1]);
    int inside = 0, all = 0;
    bool strips = cols.has_value();
    auto count = [&](const Stmt& body, int& n) {
      for_each_stmt(body, [&](const Stmt& x) {
        if (x->kind != StmtKind::Gemm) return;
        const auto& g = *as<GemmNode>(x);
        for (const Region* r : {&g.a, &g.b}) {
          if (r->buffer != t) continue;
          ++n;
          auto e = as_const_int(r->extents[1]);
          strips = strips && e && *e < *cols;
        }
      });
    };
    count(L.body, inside);
    count(root, all);
    const int64_t lead = c.src.buffer->dtype.bytes() == 4 ? kTargetLead : 1;
    if (strips && inside > 0 && inside == all) marks.emplace(s.get(), Annotation{kSlices, {lead}});
  }

  void walk(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (const auto& c : as<SeqNode>(s)->body) walk(c);
        return;
      case StmtKind::For:
        loops.push_back(as<ForNode>(s));
        walk(as<ForNode>(s)->body);
        loops.pop_back();
        return;
      case StmtKind::If:
        conds.push_back({as<IfNode>(s)->cond, loops.size()});
        walk(as<IfNode>(s)->then_body);
        walk(as<IfNode>(s)->else_body);
        conds.pop_back();
        return;
      case StmtKind::Let: lets.emplace(as<LetNode>(s)->var.get(), as<LetNode>(s)->value); return;
      case StmtKind::Copy: consider(s); return;
      case StmtKind::Store: case StmtKind::Alloc: case StmtKind::Gemm: case StmtKind::Fill:
      case StmtKind::Reduce: case StmtKind::CoreScope: case StmtKind::Sync: return;
    }
  }
};

// The next iteration's skeleton of a loop body (next_iteration_prefetches): `sub` maps the
// loop's variable to var + 1 and each variable bound inside to its fresh copy.
struct Skeleton {
  std::vector<std::pair<Var, Expr>> sub;
  // next_page_slices: no loops, the copies @prefetch_slices, and every load of a let or a condition
  // read only where its indices lie inside its tensor (the next iteration may be past the loop)
  bool slices = false;

  Var fresh(const Var& v) {
    Var n = var(v->name + "_nx", v->dtype, v->span);
    sub.emplace_back(v, n);
    return n;
  }

  // The condition that every load of e (a load's indices first: they may load too) reads inside its
  // tensor (0 <= index < extent in each dim, left to right so `and` guards what follows); null
  // when e loads nothing.
  static Expr loads_inside(const Expr& e) {
    std::vector<const LoadNode*> loads;  // parents before children: reversed below
    for_each_expr(e, [&](const Expr& x) {
      if (x && x->kind == ExprKind::Load) loads.push_back(static_cast<const LoadNode*>(x.get()));
    });
    Expr all;
    for (auto it = loads.rbegin(); it != loads.rend(); ++it)
      for (size_t d = 0; d < (*it)->indices.size(); ++d) {
        Expr i = (*it)->indices[d], n = (*it)->buffer->shape[d];
        if (i->dtype != kIndexType) i = cast(i, kIndexType);
        if (n->dtype != kIndexType) n = cast(n, kIndexType);
        for (Expr c : {binary(BinOp::LE, int_imm(0), i), binary(BinOp::LT, i, n)})
          all = all ? binary(BinOp::And, all, c) : c;
      }
    return all;
  }

  // depth: the loops between the prefetching loop and s
  Stmt build(const Stmt& s, int64_t depth) {
    if (!s) return nullptr;
    switch (s->kind) {
      case StmtKind::Seq: {
        std::vector<Stmt> kept;
        for (const auto& c : as<SeqNode>(s)->body) {
          if (c->kind == StmtKind::Let) {
            const auto& l = *as<LetNode>(c);
            Expr value = substitute(l.value, sub);
            kept.push_back(std::make_shared<LetNode>(fresh(l.var), value, l.span));
          } else if (Stmt b = build(c, depth)) {
            kept.push_back(b);
          }
        }
        // only the lets that what follows them reads
        std::unordered_set<const void*> used;
        std::vector<Stmt> out;
        bool any = false;
        for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
          if ((*it)->kind == StmtKind::Let && !used.count(as<LetNode>(*it)->var.get())) continue;
          any |= (*it)->kind != StmtKind::Let;
          for_each_expr(*it, [&](const Expr& x) {
            if (x && x->kind == ExprKind::Var) used.insert(x.get());
          });
          // a let that loads: it and what follows it only where the loads are inside their tensors
          if (Expr g = slices && (*it)->kind == StmtKind::Let ? loads_inside(as<LetNode>(*it)->value) : nullptr) {
            out.insert(out.begin(), *it);
            out = {std::make_shared<IfNode>(g, std::make_shared<SeqNode>(std::move(out), s->span), nullptr, s->span)};
            continue;
          }
          out.insert(out.begin(), *it);
        }
        return any ? std::make_shared<SeqNode>(std::move(out), s->span) : nullptr;
      }
      case StmtKind::For: {
        const auto& f = *as<ForNode>(s);
        if (f.for_kind == ForKind::parallel || slices) return nullptr;
        Expr mn = substitute(f.min, sub), ext = substitute(f.extent, sub);
        Var v = fresh(f.var);
        Stmt body = build(f.body, depth + 1);
        return body ? std::make_shared<ForNode>(v, mn, ext, ForKind::serial, 0, body, f.span) : nullptr;
      }
      case StmtKind::If: {
        const auto& i = *as<IfNode>(s);
        Stmt t = build(i.then_body, depth), e = build(i.else_body, depth);
        if (!t && !e) return nullptr;
        Expr cond = substitute(i.cond, sub);
        if (Expr g = slices ? loads_inside(cond) : nullptr) {  // no else: it would run where the loads fail
          if (!t) return nullptr;
          cond = binary(BinOp::And, g, cond, i.span);
          e = nullptr;
        }
        return std::make_shared<IfNode>(cond, t, e, i.span);
      }
      case StmtKind::Copy: {
        const Annotation* a = find_annotation(s, slices ? kSlices : kName);
        if (!a || (!slices && (a->args.size() != 1 || a->args[0] != depth + 1))) return nullptr;
        const auto& c = *as<CopyNode>(s);
        auto region = [&](const Region& r) {
          Region o = r;
          for (auto& e : o.starts) e = substitute(e, sub);
          // a run-time extent's bound: the rows up to it inside the tensor are prefetched (a
          // prefetch reads nothing into the program; the copy itself still stops at the count)
          for (auto& e : o.extents)
            if (auto b = extent_bound(e)) e = int_imm(*b);
          return o;
        };
        Stmt n = std::make_shared<CopyNode>(region(c.src), region(c.dst), c.span);
        return with_annotation(n, *a);
      }
      case StmtKind::Let: case StmtKind::Store: case StmtKind::Alloc: case StmtKind::Gemm:
      case StmtKind::Fill: case StmtKind::Reduce: case StmtKind::CoreScope: case StmtKind::Sync:
        return nullptr;
    }
    return nullptr;
  }
};

}  // namespace

Kernel prefetch_gathers(const Kernel& k) {
  Walk w;
  w.written = globals_written(k);
  w.root = k->body;
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind == StmtKind::Alloc && find_annotation(s, "gemm_view")) w.gemm_views.insert(as<AllocNode>(s)->buffer.get());
  });
  w.walk(k->body);
  return annotate(k, w.marks);
}

Stmt next_iteration_prefetches(const ForNode& loop) {
  if (loop.for_kind == ForKind::parallel) return nullptr;
  bool any = false;
  for_each_stmt(loop.body, [&](const Stmt& s) { any |= s->kind == StmtKind::Copy && find_annotation(s, kName); });
  if (!any) return nullptr;
  Skeleton sk;
  Expr next = arith::add(loop.var, int_imm(1));
  sk.sub.emplace_back(loop.var, next);
  Stmt body = sk.build(loop.body, 0);
  if (!body) return nullptr;
  return std::make_shared<IfNode>(binary(BinOp::LT, next, arith::add(loop.min, loop.extent)), body, nullptr,
                                  loop.span);
}

Stmt next_page_slices(const ForNode& loop, const Expr& target_lead) {
  if (loop.for_kind == ForKind::parallel) return nullptr;
  bool any = false;
  for_each_stmt(loop.body, [&](const Stmt& s) { any |= s->kind == StmtKind::Copy && find_annotation(s, kSlices); });
  if (!any) return nullptr;
  // the least lead of the loop's copies (one substitution serves them all): a constant one when
  // there is one (1, the least the target's can be), else the target's
  int64_t lead = 0;
  for_each_stmt(loop.body, [&](const Stmt& s) {
    if (const Annotation* a = s->kind == StmtKind::Copy ? find_annotation(s, kSlices) : nullptr)
      if (a->args.at(0) != kTargetLead) lead = lead ? std::min(lead, a->args.at(0)) : a->args.at(0);
  });
  Skeleton sk;
  sk.slices = true;
  sk.sub.emplace_back(loop.var, arith::add(loop.var, lead ? int_imm(lead) : target_lead));
  return sk.build(loop.body, 0);
}

}  // namespace tw::cpu
