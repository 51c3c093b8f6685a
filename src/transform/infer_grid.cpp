#include "transform/infer_grid.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "transform/affine.h"

namespace tw::transform {

using namespace ir;

namespace {



// ---------------------------------------------------------------------------------------------
// Expression helpers


// Free variables of e with Let-bound variables replaced by their values; sets has_load when the
// value depends on memory contents.
void free_vars(const Expr& e, const LetMap& lets, std::unordered_set<const VarNode*>& out, bool& has_load) {
  struct V : Visitor {
    const LetMap& lets;
    std::unordered_set<const VarNode*>& out;
    bool& has_load;
    V(const LetMap& l, std::unordered_set<const VarNode*>& o, bool& h) : lets(l), out(o), has_load(h) {}
    using Visitor::visit;
    void visit(const Expr& x) override {
      if (!x) return;
      if (x->kind == ExprKind::Load) has_load = true;
      if (x->kind == ExprKind::Var) {
        auto it = lets.find(as<VarNode>(x));
        if (it != lets.end()) return visit(it->second);
        out.insert(as<VarNode>(x));
        return;
      }
      Visitor::visit(x);
    }
  } v(lets, out, has_load);
  v.visit(e);
}

// Replaces Let-bound variables by their values, recursively.
Expr expand_lets(const Expr& e, const LetMap& lets) {
  struct M : Mutator {
    const LetMap& lets;
    explicit M(const LetMap& l) : lets(l) {}
    using Mutator::mutate;
    Expr mutate(const Expr& x) override {
      if (x && x->kind == ExprKind::Var) {
        auto it = lets.find(as<VarNode>(x));
        return it == lets.end() ? x : mutate(it->second);
      }
      return Mutator::mutate(x);
    }
  } m(lets);
  return m.mutate(e);
}

// Compact text of an expression for error messages ("by*128 + 64").
std::string expr_str(const Expr& e) {
  if (!e) return "?";
  switch (e->kind) {
    case ExprKind::IntImm: return std::to_string(as<IntImmNode>(e)->value);
    case ExprKind::FloatImm: {
      std::ostringstream os;
      os << as<FloatImmNode>(e)->value;
      return os.str();
    }
    case ExprKind::Var: return as<VarNode>(e)->name;
    case ExprKind::Binary: {
      auto* b = as<BinaryNode>(e);
      auto is_sum = [](const Expr& x) {
        return x->kind == ExprKind::Binary &&
               (as<BinaryNode>(x)->op == BinOp::Add || as<BinaryNode>(x)->op == BinOp::Sub);
      };
      auto operand = [&](const Expr& x, bool tight) {
        std::string s = expr_str(x);
        return tight && is_sum(x) ? "(" + s + ")" : s;
      };
      switch (b->op) {
        case BinOp::Add: return operand(b->a, false) + " + " + operand(b->b, false);
        case BinOp::Sub: return operand(b->a, false) + " - " + operand(b->b, true);
        case BinOp::Mul: return operand(b->a, true) + "*" + operand(b->b, true);
        case BinOp::FloorDiv: return operand(b->a, true) + " // " + operand(b->b, true);
        case BinOp::Mod: return operand(b->a, true) + " % " + operand(b->b, true);
        case BinOp::Div: return operand(b->a, true) + " / " + operand(b->b, true);
        case BinOp::CeilDiv: case BinOp::Min: case BinOp::Max: case BinOp::EQ: case BinOp::NE: case BinOp::LT:
        case BinOp::LE: case BinOp::GT: case BinOp::GE: case BinOp::And: case BinOp::Or: case BinOp::BitAnd:
        case BinOp::BitOr: case BinOp::BitXor: case BinOp::Shl: case BinOp::Shr:
          break;
      }
      return std::string(binop_name(b->op)) + "(" + expr_str(b->a) + ", " + expr_str(b->b) + ")";
    }
    case ExprKind::Unary: {
      auto* u = as<UnaryNode>(e);
      return std::string(unop_symbol(u->op)) + expr_str(u->a);
    }
    case ExprKind::Cast: return expr_str(as<CastNode>(e)->value);
    case ExprKind::Load: {
      auto* l = as<LoadNode>(e);
      std::string s = l->buffer->name + "[";
      for (size_t i = 0; i < l->indices.size(); ++i) s += (i ? ", " : "") + expr_str(l->indices[i]);
      return s + "]";
    }
    case ExprKind::Call: case ExprKind::Select: return "<expr>";
  }
  return "<expr>";  // not reached: the switch lists every enumerator
}

// ---------------------------------------------------------------------------------------------
// Accesses to global buffers inside a loop body

struct Access {
  Buffer buffer;
  std::vector<Expr> starts, extents;
  bool write;
};

std::vector<Access> global_accesses(const Stmt& body) {
  std::vector<Access> out;
  auto add_region = [&](const Region& r, bool write) {
    if (r.buffer->scope == Scope::global) out.push_back({r.buffer, r.starts, r.extents, write});
  };
  auto add_point = [&](const Buffer& b, const std::vector<Expr>& idx, bool write) {
    if (b->scope != Scope::global) return;
    std::vector<Expr> ones(idx.size(), int_imm(1));
    out.push_back({b, idx, ones, write});
  };
  struct V : Visitor {
    decltype(add_region)& region;
    decltype(add_point)& point;
    V(decltype(add_region)& r, decltype(add_point)& p) : region(r), point(p) {}
    using Visitor::visit;
    void visit(const Expr& e) override {
      if (e && e->kind == ExprKind::Load) point(as<LoadNode>(e)->buffer, as<LoadNode>(e)->indices, false);
      Visitor::visit(e);
    }
    void visit(const Stmt& s) override {
      if (s) {
        switch (s->kind) {
          case StmtKind::Store: point(as<StoreNode>(s)->buffer, as<StoreNode>(s)->indices, true); break;
          case StmtKind::Copy:
            region(as<CopyNode>(s)->src, false);
            region(as<CopyNode>(s)->dst, true);
            break;
          case StmtKind::Gemm: {
            auto* g = as<GemmNode>(s);
            region(g->a, false);
            region(g->b, false);
            if (!g->clear) region(g->c, false);
            region(g->c, true);
            break;
          }
          case StmtKind::Fill: region(as<FillNode>(s)->dst, true); break;
          case StmtKind::Reduce: {
            auto* r = as<ReduceNode>(s);
            region(full_region(r->src), false);
            if (!r->clear) region(full_region(r->dst), false);
            region(full_region(r->dst), true);
            break;
          }
          case StmtKind::Seq: case StmtKind::For: case StmtKind::If: case StmtKind::Let: case StmtKind::Alloc:
          case StmtKind::CoreScope: case StmtKind::Sync:
            break;
        }
      }
      Visitor::visit(s);
    }
  } v(add_region, add_point);
  v.visit(body);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Per-iteration footprint of an access along one dimension, relative to loop var v:
//   start = stride*v + invariant + r,  r in [lo, hi - extent],  rows touched: [lo, hi) + ...

struct Footprint {
  bool ok = false;
  std::string why;       // when !ok: why this dimension does not separate iterations
  int64_t stride = 0;    // coefficient of v
  std::vector<Term> invariant;  // v-free, iteration-invariant terms
  int64_t lo = 0, hi = 0;       // [lo, hi): rows touched within one iteration, minus stride*v + invariant
};

struct LoopInfo {
  const VarNode* var;
  std::unordered_map<const VarNode*, std::pair<int64_t, int64_t>> inner_const;  // var -> [min, max]
  std::unordered_set<const VarNode*> inner_all;  // every For var bound inside the body
};

Footprint footprint(const Expr& start, const Expr& extent, const LoopInfo& L, const LetMap& lets) {
  Footprint fp;
  Affine ext = to_affine(extent, lets);
  if (!ext.is_const()) {
    fp.why = "its extent " + expr_str(extent) + " is not a constant";
    return fp;
  }
  Affine f = to_affine(start, lets);
  int64_t lo = f.c, hi = f.c;
  for (const auto& t : f.terms) {
    const VarNode* v = t.atom->kind == ExprKind::Var ? as<VarNode>(t.atom) : nullptr;
    if (v == L.var) {
      fp.stride = t.coef;
      continue;
    }
    if (v) {
      auto it = L.inner_const.find(v);
      if (it != L.inner_const.end()) {
        int64_t a = t.coef * it->second.first, b = t.coef * it->second.second;
        lo += std::min(a, b);
        hi += std::max(a, b);
        continue;
      }
      if (L.inner_all.count(v)) {
        fp.why = "it also moves with the inner loop '" + v->name + "', whose range is not constant";
        return fp;
      }
      fp.invariant.push_back(t);
      continue;
    }
    std::unordered_set<const VarNode*> fv;
    bool has_load = false;
    free_vars(t.atom, lets, fv, has_load);
    bool varies = has_load || fv.count(L.var);
    for (auto* x : fv) varies |= L.inner_all.count(x) > 0;
    if (varies) {
      fp.why = "it is not of the form k*" + L.var->name + " + c (" + expr_str(t.atom) + ")";
      return fp;
    }
    fp.invariant.push_back(t);
  }
  fp.lo = lo;
  fp.hi = hi + ext.c;
  if (fp.stride == 0) {
    fp.why = "it does not depend on '" + L.var->name + "'";
    return fp;
  }
  fp.ok = std::llabs(fp.stride) >= fp.hi - fp.lo;
  return fp;
}

bool same_terms(const std::vector<Term>& a, const std::vector<Term>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& t : a) {
    bool found = false;
    for (const auto& u : b) found |= u.coef == t.coef && structural_equal(u.atom, t.atom);
    if (!found) return false;
  }
  return true;
}

struct DimWords {
  std::string start, unit, size;  // "row start", "rows", "rows tall"
};
DimWords dim_words(int ndim, int d) {
  if (ndim == 2 && d == 0) return {"row start", "rows", "rows tall"};
  if (ndim == 2 && d == 1) return {"column start", "columns", "columns wide"};
  if (ndim == 1) return {"start", "elements", "elements long"};
  std::string along = "elements along dim " + std::to_string(d);
  return {"start along dim " + std::to_string(d), along, along};
}

struct Problem {
  std::string message, hint;  // empty message: no problem
};

// Why loop L cannot be a grid loop (empty message when it can).
Problem grid_loop_problem(const ForNode* loop, const LetMap& lets) {
  LoopInfo L;
  L.var = loop->var.get();
  for_each_stmt(loop->body, [&](const Stmt& s) {
    if (s->kind != StmtKind::For) return;
    auto* f = as<ForNode>(s);
    L.inner_all.insert(f->var.get());
    Affine mn = to_affine(f->min, lets), ext = to_affine(f->extent, lets);
    if (mn.is_const() && ext.is_const() && ext.c >= 1) L.inner_const[f->var.get()] = {mn.c, mn.c + ext.c - 1};
  });
  if (auto e = as_const_int(expand_lets(loop->extent, lets)); e && *e <= 1) return {};

  std::vector<Access> acc = global_accesses(loop->body);
  std::vector<Buffer> written;
  for (const auto& a : acc)
    if (a.write && std::find(written.begin(), written.end(), a.buffer) == written.end()) written.push_back(a.buffer);

  static const std::string kOverlapHint =
      "make the tile stride equal to the tile size, or move this loop inside the block";
  const std::string head = "loop '" + loop->var->name + "' cannot be a grid loop: ";
  for (const auto& buf : written) {
    std::vector<const Access*> writes, reads;
    for (const auto& a : acc)
      if (a.buffer == buf) (a.write ? writes : reads).push_back(&a);
    const int nd = buf->ndim();

    // A dimension along which all writes of buf, taken together, separate the iterations.
    int dim = -1;
    Footprint joint;
    for (int d = 0; d < nd && dim < 0; ++d) {
      Footprint j;
      bool ok = true;
      for (size_t i = 0; i < writes.size() && ok; ++i) {
        Footprint fp = footprint(writes[i]->starts[d], writes[i]->extents[d], L, lets);
        if (fp.stride == 0 || !fp.why.empty()) { ok = false; break; }
        if (i == 0) {
          j = fp;
        } else if (fp.stride != j.stride || !same_terms(fp.invariant, j.invariant)) {
          ok = false;
        } else {
          j.lo = std::min(j.lo, fp.lo);
          j.hi = std::max(j.hi, fp.hi);
        }
      }
      if (ok && std::llabs(j.stride) >= j.hi - j.lo) {
        dim = d;
        joint = j;
      }
    }

    if (dim < 0) {
      // Explain with the first write that cannot be separated on its own.
      for (const Access* w : writes) {
        std::string detail;
        bool any_dim_ok = false;
        for (int d = 0; d < nd && !any_dim_ok; ++d)
          any_dim_ok = footprint(w->starts[d], w->extents[d], L, lets).ok;
        if (any_dim_ok) continue;
        // Prefer a dimension that moves with the loop.
        for (int d = 0; d < nd && detail.empty(); ++d) {
          Footprint fp = footprint(w->starts[d], w->extents[d], L, lets);
          if (fp.stride == 0 || !fp.why.empty()) continue;
          DimWords words = dim_words(nd, d);
          auto ext = as_const_int(expand_lets(w->extents[d], lets));
          bool plain = ext && fp.hi - fp.lo == *ext;
          detail = words.start + " " + expr_str(w->starts[d]) + " advances by " + std::to_string(std::llabs(fp.stride)) +
                   (plain ? " but the tile is " + std::to_string(*ext) + " " + words.size
                          : " but one iteration covers " + std::to_string(fp.hi - fp.lo) + " " + words.unit);
        }
        for (int d = 0; d < nd && detail.empty(); ++d) {
          Footprint fp = footprint(w->starts[d], w->extents[d], L, lets);
          if (fp.why.find("does not depend") == std::string::npos)
            detail = dim_words(nd, d).start + " " + expr_str(w->starts[d]) + ": " + fp.why;
        }
        if (detail.empty()) detail = "no start of the tile depends on '" + loop->var->name + "': every iteration writes the same tile";
        return {head + "iterations write overlapping tiles of '" + buf->name + "' (" + detail + ")", kOverlapHint};
      }
      return {head + "iterations write overlapping tiles of '" + buf->name +
                  "' (its writes do not cut it into one tile per iteration)",
              kOverlapHint};
    }

    // Reads of a written buffer must stay inside this iteration's tile.
    for (const Access* r : reads) {
      Footprint fp = footprint(r->starts[dim], r->extents[dim], L, lets);
      bool inside = fp.why.empty() && fp.stride == joint.stride && same_terms(fp.invariant, joint.invariant) &&
                    fp.lo >= joint.lo && fp.hi <= joint.hi;
      if (inside) continue;
      std::string rd = buf->name + "[", wr = buf->name + "[";
      for (int d = 0; d < nd; ++d) {
        rd += (d ? ", " : "") + expr_str(r->starts[d]) + " : +" + expr_str(r->extents[d]);
        wr += (d ? ", " : "") + expr_str(writes[0]->starts[d]) + " : +" + expr_str(writes[0]->extents[d]);
      }
      return {head + "an iteration reads a tile of '" + buf->name + "' that other iterations write (reads " + rd +
                  "] but writes " + wr + "])",
              "read and write the same tile of '" + buf->name + "' in each iteration, or move this loop inside the block"};
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Loop nest

// Splits `s` into (leading Lets, the single For after them), or returns nullptr.
const ForNode* lets_then_for(const Stmt& s, std::vector<Stmt>& lets) {
  if (!s) return nullptr;
  if (s->kind == StmtKind::For) return as<ForNode>(s);
  if (s->kind != StmtKind::Seq) return nullptr;
  const auto& body = as<SeqNode>(s)->body;
  if (body.empty()) return nullptr;
  for (size_t i = 0; i + 1 < body.size(); ++i)
    if (body[i]->kind != StmtKind::Let) return nullptr;
  std::vector<Stmt> inner;
  const ForNode* f = lets_then_for(body.back(), inner);
  if (!f) return nullptr;
  lets.insert(lets.end(), body.begin(), body.end() - 1);
  lets.insert(lets.end(), inner.begin(), inner.end());
  return f;
}

bool depends_on_any(const Expr& e, const LetMap& lets, const std::vector<const VarNode*>& vars) {
  std::unordered_set<const VarNode*> fv;
  bool has_load = false;
  free_vars(e, lets, fv, has_load);
  if (has_load) return true;
  for (auto* v : vars)
    if (fv.count(v)) return true;
  return false;
}

std::string unused_name(const Kernel& k, const std::string& base) {
  std::unordered_set<std::string> names;
  for (const auto& p : k->params) names.insert(p.name());
  for (const auto& v : k->shape_vars()) names.insert(v->name);
  for_each_expr(k->body, [&](const Expr& e) {
    if (e->kind == ExprKind::Var) names.insert(as<VarNode>(e)->name);
  });
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind == StmtKind::For) names.insert(as<ForNode>(s)->var->name);
    if (s->kind == StmtKind::Let) names.insert(as<LetNode>(s)->var->name);
  });
  std::string n = base;
  for (int i = 1; names.count(n); ++i) n = base + "_" + std::to_string(i);
  return n;
}

}  // namespace

Kernel infer_grid(const Kernel& k) {
  if (!k->block_vars.empty()) return k;

  LetMap lets;
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind == StmtKind::Let) lets[as<LetNode>(s)->var.get()] = as<LetNode>(s)->value;
  });

  // The candidate nest: serial loops, each the only statement (after Lets) of its parent.
  std::vector<Stmt> hoisted;  // Lets of the kernel top level and between grid loops, in order
  std::vector<const ForNode*> nest;
  std::vector<const VarNode*> nest_vars;
  {
    std::vector<Stmt> pending;
    const ForNode* f = lets_then_for(k->body, pending);
    while (f && f->for_kind == ForKind::serial && nest.size() < 3) {
      if (depends_on_any(f->min, lets, nest_vars) || depends_on_any(f->extent, lets, nest_vars)) break;
      Problem problem = grid_loop_problem(f, lets);
      if (!problem.message.empty()) {
        if (nest.empty()) throw Error(problem.message, f->span, problem.hint);
        break;
      }
      nest.push_back(f);
      nest_vars.push_back(f->var.get());
      hoisted.insert(hoisted.end(), pending.begin(), pending.end());
      pending.clear();
      f = lets_then_for(f->body, pending);
    }
  }

  if (nest.empty()) {
    Var bx = var(unused_name(k, "bx"), kIndexType, k->span);
    return std::make_shared<KernelNode>(k->name, k->params, std::vector<Var>{bx},
                                        std::vector<Expr>{int_imm(1, kIndexType, k->span)}, k->body, k->span);
  }

  // New body: hoisted Lets, then the innermost grid loop's body, with v -> v + min.
  std::vector<Stmt> stmts = hoisted;
  const Stmt& inner = nest.back()->body;
  for (const auto& s : stmts_of(inner)) stmts.push_back(s);
  Stmt body = std::make_shared<SeqNode>(stmts, inner->span);
  std::vector<std::pair<Var, Expr>> shift;
  std::vector<Var> block_vars;
  std::vector<Expr> grid;
  for (auto it = nest.rbegin(); it != nest.rend(); ++it) {
    const ForNode* f = *it;
    Expr mn = expand_lets(f->min, lets);
    if (as_const_int(mn) != std::optional<int64_t>(0)) shift.emplace_back(f->var, binary(BinOp::Add, f->var, mn, f->span));
    block_vars.push_back(f->var);
    grid.push_back(expand_lets(f->extent, lets));
  }
  if (!shift.empty()) body = substitute(body, shift);
  return std::make_shared<KernelNode>(k->name, k->params, block_vars, grid, body, k->span);
}

}  // namespace tw::transform
