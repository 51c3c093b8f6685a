// stage_global_maps: maps that store into global tensors, staged through fragment tiles (see
// stage_global_maps.h).
#include "target/ascend/stage_global_maps.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/printer.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

using ir::Expr;
using ir::Stmt;

bool uses(const Expr& e, const ir::VarNode* v) {
  bool found = false;
  ir::for_each_expr(e, [&](const Expr& x) { found = found || x.get() == v; });
  return found;
}

bool reads_memory(const Expr& e) {
  bool found = false;
  ir::for_each_expr(e, [&](const Expr& x) { found = found || x->kind == ir::ExprKind::Load; });
  return found;
}

// A T.Parallel nest with constant extents: its loop variables (outer to inner), starts, extents, body.
struct Nest {
  std::vector<ir::Var> vars;
  std::vector<Expr> mins;
  std::vector<int64_t> ext;
  std::vector<Expr> user;  // per loop variable: a padded loop's user extent (ir.h ForNode::user_extent), else null
  Stmt body;
};

std::optional<Nest> nest_of(const Stmt& s) {
  if (s->kind != ir::StmtKind::For || ir::as<ir::ForNode>(s)->for_kind != ir::ForKind::parallel) return std::nullopt;
  Nest n;
  for (Stmt cur = s;;) {
    auto* f = ir::as<ir::ForNode>(cur);
    auto e = ir::as_const_int(f->extent);
    if (!e) return std::nullopt;  // the verifier's error
    n.vars.push_back(f->var);
    n.mins.push_back(f->min);
    n.ext.push_back(*e);
    n.user.push_back(f->user_extent);
    cur = f->body;
    if (!cur || cur->kind != ir::StmtKind::For || ir::as<ir::ForNode>(cur)->for_kind != ir::ForKind::parallel) {
      n.body = cur;
      return n;
    }
  }
}

// One dim of a global access: the map's loop variable it runs along (-1: none) and its start.
struct Dim {
  int var = -1;
  Expr start;
};

// An index serial_maps guarded for an if arm turned into a select (select(c, e, 0) or
// select(c, 0, e): index 0 where the arm is not taken, to stay inside a tile) is e: the staged tile
// holds e's element wherever the map runs, and the arm's value is not used where it is not taken.
Expr unguarded(const Expr& e) {
  if (e->kind != ir::ExprKind::Select) return e;
  auto* s = ir::as<ir::SelectNode>(e);
  if (ir::arith::literal(s->f) == 0) return s->t;
  if (ir::arith::literal(s->t) == 0) return s->f;
  return e;
}

// The dims of an access `indices` in the map: each index start + v, v + start, v - c or v, or
// free of the loop variables; nullopt for any other form (a data-dependent, strided or diagonal one).
std::optional<std::vector<Dim>> dims_of(const std::vector<Expr>& indices, const Nest& n) {
  std::vector<Dim> dims;
  std::vector<bool> used(n.vars.size(), false);
  for (const auto& written : indices) {
    const Expr e = unguarded(written);
    Dim d{-1, e};
    for (size_t k = 0; k < n.vars.size(); ++k) {
      const ir::VarNode* v = n.vars[k].get();
      if (e.get() == v) {
        d = {static_cast<int>(k), C(0)};
      } else if (e->kind == ir::ExprKind::Binary) {
        auto* b = ir::as<ir::BinaryNode>(e);
        if (b->op == ir::BinOp::Add && b->b.get() == v) d = {static_cast<int>(k), b->a};
        else if (b->op == ir::BinOp::Add && b->a.get() == v) d = {static_cast<int>(k), b->b};
        else if (b->op == ir::BinOp::Sub && b->a.get() == v) d = {static_cast<int>(k), simp(ir::arith::sub(C(0), b->b))};
      }
    }
    if (reads_memory(d.start)) return std::nullopt;
    for (const auto& v : n.vars)
      if (uses(d.start, v.get())) return std::nullopt;
    if (d.var >= 0) {
      if (used[d.var]) return std::nullopt;
      used[d.var] = true;
    }
    dims.push_back(d);
  }
  return dims;
}

// A global tensor's access in the map (each distinct one gets a tile per chunk, except stores of
// one tensor apart in dims free of the loop variables: they share the first one's tile, which spans
// the constant indices lo .. lo + width - 1 of those dims).
struct Access {
  ir::Buffer g;
  std::vector<Expr> indices;  // as written
  std::vector<Dim> dims;
  bool stored = false, preload = false;
  // a read the map always makes: its copy is checked (ir.h CopyNode::checked); a stored owner: every store into
  // its tile is one the map always makes (not under an `if`, no guarded index, no constants merged): its copy out
  // is checked (hunt35 F1)
  bool checked = false;
  size_t owner = 0;                  // the access whose tile this one uses (itself, or an earlier store)
  std::vector<int64_t> lo, width;    // an owner's: per dim, its tile's first constant index and count (1)
  ir::Buffer tile;                   // of the chunk being built
  std::vector<Expr> tile_index;      // its indices there
  std::vector<Expr> used;            // a stored owner's window's used extents in the chunk (ir.h CopyNode::used)
  // a store under `if`s whose conditions are all bounds `index < b` / `index <= b` on its indices (the guard idiom
  // `if j + n < N: Y[0, j + n] = ...`): per dim the end the guard stores before (null: unbounded); guarded: this
  // store is the only one into its tile, so the user's stores are the window's elements before those ends
  std::vector<Expr> guard_end;
  bool guarded = false;
  // a stored owner's copies are a preload pair (ir.h CopyNode::preload): the map may skip elements of its window
  // (a preload) and neither check above covers its stores (an in-place map's checked preload reports the window
  // as the read); the simulator follows a `where` lane by lane: a Select, its Casts, and int32's blend
  // y * (1 - m) + v * m (written.h)
  bool kept_check() const { return preload && !checked && !guarded; }
};

std::string access_text(const ir::Buffer& g, const std::vector<Expr>& idx) { return ir::print(ir::load(g, idx)); }

class StageMap {
 public:
  StageMap(const Nest& n, const ir::Span& sp, vec::Names& names) : n_(n), sp_(sp), names_(names) {}

  // nullopt: no store into a global tensor (legalize_vector stages the map's global reads) or a
  // statement a map does not hold (select_instructions reports it).
  std::optional<std::vector<Stmt>> run() {
    if (!collect_stores(n_.body, false)) return std::nullopt;
    if (acc_.empty()) return std::nullopt;
    collect_reads();
    std::vector<Stmt> out;
    for (auto e : n_.ext)
      if (e <= 0) return out;
    int64_t tiles = 0;  // the tiles' elements per element of the chunk
    for (size_t i = 0; i < acc_.size(); ++i) {
      int64_t w = 1;
      for (auto x : acc_[i].width) w *= x;
      tiles += acc_[i].owner == i ? w : 0;
    }
    int64_t per = 1;
    while (per * 2 * tiles <= kMapStageElems) per *= 2;
    const size_t rank = n_.ext.size();
    chunk_.resize(rank);
    for (size_t d = rank; d-- > 0;) {
      chunk_[d] = std::max<int64_t>(1, std::min(n_.ext[d], per));
      per = std::max<int64_t>(1, per / chunk_[d]);
    }
    // the tiles' UB bytes, rows padded to 32 B blocks (a (4096, 1) column tile takes 32 B a row):
    // the outermost dim of the chunk halved while they pass kMapStageElems float32
    for (size_t d = 0; d < rank && chunk_bytes() > kMapStageElems * 4;)
      if (chunk_[d] > 1) chunk_[d] = (chunk_[d] + 1) / 2;
      else ++d;
    emit(0, {}, {}, out);
    return out;
  }

 private:
  Access* find(const ir::Buffer& g, const std::vector<Expr>& idx) {
    for (auto& a : acc_)
      if (a.g == g) {
        bool same = a.indices.size() == idx.size();
        for (size_t d = 0; same && d < idx.size(); ++d) same = ir::structural_equal(a.indices[d], idx[d]);
        if (same) return &a;
      }
    return nullptr;
  }
  // b's window can share a's tile: the same loop variables and starts per dim, except dims free of
  // the loop variables at two constants (a's tile then spans both)
  static bool mergeable(const std::vector<Dim>& a, const std::vector<Dim>& b) {
    for (size_t d = 0; d < a.size(); ++d) {
      if (a[d].var != b[d].var) return false;
      if (ir::structural_equal(a[d].start, b[d].start)) continue;
      if (a[d].var >= 0 || !ir::arith::literal(a[d].start) || !ir::arith::literal(b[d].start)) return false;
    }
    return true;
  }
  const Access* stored(const ir::Buffer& g) const {
    for (const auto& a : acc_)
      if (a.g == g && a.stored) return &a;
    return nullptr;
  }

  bool collect_stores(const Stmt& s, bool in_if) {
    if (!s) return true;
    switch (s->kind) {
      case ir::StmtKind::Seq:
        for (const auto& x : ir::as<ir::SeqNode>(s)->body)
          if (!collect_stores(x, in_if)) return false;
        return true;
      case ir::StmtKind::If: {
        auto* f = ir::as<ir::IfNode>(s);
        conds_.push_back(f->cond);
        const bool then_ok = collect_stores(f->then_body, true);
        conds_.back() = nullptr;  // an else branch: its condition is not a bound the check reads
        const bool ok = then_ok && collect_stores(f->else_body, true);
        conds_.pop_back();
        return ok;
      }
      case ir::StmtKind::Let: return true;
      case ir::StmtKind::Store: break;
      default: return false;
    }
    auto* st = ir::as<ir::StoreNode>(s);
    if (st->buffer->scope != ir::Scope::global) return true;
    const std::string what = "T.Parallel store " + access_text(st->buffer, st->indices) + " into global tensor " +
                             q(st->buffer->name);
    for (const auto& i : st->indices)
      if (reads_memory(i))
        throw ir::Error(what + " at a data-dependent index (a scatter): Ascend has no scatter instruction", s->span,
                        "gather instead: compute each output element from the index of the element it reads");
    auto dims = dims_of(st->indices, n_);
    std::vector<int> order;
    if (dims)
      for (const auto& d : *dims)
        if (d.var >= 0) order.push_back(d.var);
    if (dims && order.size() < n_.vars.size())
      throw ir::Error(what + " does not use every loop index: several iterations write one element", s->span,
                      vec::unused_index_hint(st->buffer->name));
    if (!dims || !std::is_sorted(order.begin(), order.end()))
      throw ir::Error(what + ": on Ascend a map over global tensors is staged through UB tiles, which needs each "
                          "index to be (start + one loop variable), the loop variables in the map's order, or free of them",
                      s->span,
                      "store into a tile and copy it out: t = T.alloc_fragment(<map shape>, dtype); "
                      "for i, j in T.Parallel(...): t[i, j] = ...; T.copy(t, " + st->buffer->name + "[r0, c0])");
    Access* a = find(st->buffer, st->indices);
    if (!a) {
      size_t owner = acc_.size();
      for (size_t k = 0; k < acc_.size(); ++k) {
        const Access& o = acc_[k];
        if (o.g != st->buffer || !o.stored || o.owner != k) continue;
        if (!mergeable(o.dims, *dims))
          throw ir::Error(what + " and " + access_text(o.g, o.indices) + " in one map: a staged map stores windows of "
                              "a global tensor that differ only in constant indices (C[i, 0] and C[i, 1])",
                          s->span, "store each window in its own T.Parallel map, or into a tile copied out with T.copy");
        owner = k;
      }
      const bool plain = std::none_of(st->indices.begin(), st->indices.end(),
                                      [](const Expr& i) { return i->kind == ir::ExprKind::Select; });
      acc_.push_back({st->buffer, st->indices, *dims, true, false, !in_if && plain, owner, {}, {}, nullptr, {}});
      // serial_maps' form of a store under an `if`: Y[i] = where(c, v, Y[i])
      auto* w = st->value->kind == ir::ExprKind::Select ? ir::as<ir::SelectNode>(st->value) : nullptr;
      auto* old = w && w->f->kind == ir::ExprKind::Load ? ir::as<ir::LoadNode>(w->f) : nullptr;
      const bool kept = old && old->buffer == st->buffer && old->indices.size() == st->indices.size() &&
                        std::equal(old->indices.begin(), old->indices.end(), st->indices.begin(),
                                   [](const Expr& x, const Expr& y) { return ir::structural_equal(x, y); });
      if ((in_if || kept) && plain && owner == acc_.size() - 1) {
        std::vector<Expr> conds = conds_;
        if (kept) conds.push_back(w->cond);
        auto ends = guard_ends(*dims, conds);
        acc_.back().guarded = ends.has_value();
        if (ends) acc_.back().guard_end = std::move(*ends);
      }
      Access& o = acc_[owner];
      if (owner != acc_.size() - 1) o.checked = o.guarded = false;
      if (owner == acc_.size() - 1) {
        o.lo.assign(dims->size(), 0);
        o.width.assign(dims->size(), 1);
        for (size_t d = 0; d < dims->size(); ++d)
          if (auto c = ir::arith::literal((*dims)[d].start)) o.lo[d] = *c;
      } else {
        for (size_t d = 0; d < dims->size(); ++d) {
          if ((*dims)[d].var >= 0 || ir::structural_equal((*dims)[d].start, o.dims[d].start)) continue;
          const int64_t c = *ir::arith::literal((*dims)[d].start), hi = std::max(o.lo[d] + o.width[d] - 1, c);
          o.lo[d] = std::min(o.lo[d], c);
          o.width[d] = hi - o.lo[d] + 1;
        }
        o.preload = true;  // the elements between the constants: the tensor's
      }
      a = &acc_.back();
    } else {
      acc_[a->owner].guarded = false;  // a second store of the element (under another condition)
    }
    acc_[a->owner].preload = acc_[a->owner].preload || in_if;
    acc_[a->owner].checked = acc_[a->owner].checked && !in_if;
    return true;
  }

  // Per dim of a store's `dims`, the exclusive end that the enclosing `if`s (`conds`, with serial_maps' `where`
  // condition of a store that keeps the old element otherwise) bound its index by (null: none), when
  // every condition is a conjunction of `e < b`, `e <= b`, `b > e` or `b >= e` with e the store's index in a dim
  // (start + the same loop variable) and b free of the loop variables; nullopt otherwise (an else branch, any
  // other condition: the check would not know which elements the user stores).
  std::optional<std::vector<Expr>> guard_ends(const std::vector<Dim>& dims, const std::vector<Expr>& conds) const {
    std::vector<Expr> ends(dims.size());
    std::vector<Expr> terms;
    for (const auto& c : conds) {
      if (!c) return std::nullopt;
      terms.push_back(c);
    }
    while (!terms.empty()) {
      Expr t = terms.back();
      terms.pop_back();
      if (t->kind != ir::ExprKind::Binary) return std::nullopt;
      auto* b = ir::as<ir::BinaryNode>(t);
      if (b->op == ir::BinOp::And) {
        terms.push_back(b->a), terms.push_back(b->b);
        continue;
      }
      const bool lt = b->op == ir::BinOp::LT || b->op == ir::BinOp::GT;
      if (!lt && b->op != ir::BinOp::LE && b->op != ir::BinOp::GE) return std::nullopt;
      const bool flip = b->op == ir::BinOp::GT || b->op == ir::BinOp::GE;
      const Expr& e = flip ? b->b : b->a;
      const Expr& bound = flip ? b->a : b->b;
      auto ed = dims_of({e}, n_), bd = dims_of({bound}, n_);
      if (!ed || !bd || (*ed)[0].var < 0 || (*bd)[0].var >= 0) return std::nullopt;
      bool inner = false;  // a let of the map's body: not bound where the copy out reads the end
      ir::for_each_stmt(n_.body, [&](const Stmt& x) {
        inner = inner || (x->kind == ir::StmtKind::Let && uses(bound, ir::as<ir::LetNode>(x)->var.get()));
      });
      if (inner) return std::nullopt;
      size_t k = 0;
      while (k < dims.size() && !(dims[k].var == (*ed)[0].var &&
                                  ir::structural_equal(simp(dims[k].start), simp((*ed)[0].start))))
        ++k;
      if (k == dims.size()) return std::nullopt;
      Expr end = lt ? bound : simp(ir::arith::add(bound, C(1)));
      ends[k] = ends[k] ? simp(ir::binary(ir::BinOp::Min, ends[k], end)) : end;
    }
    return ends;
  }

  // The printed element reads the map makes whatever its conditions (not under an `if`, nor guarded in an
  // expression: pass_util.h unguarded_loads).
  static void unguarded_reads(const Stmt& s, bool in_if, std::unordered_set<std::string>& out) {
    if (!s) return;
    switch (s->kind) {
      case ir::StmtKind::Seq:
        for (const auto& x : ir::as<ir::SeqNode>(s)->body) unguarded_reads(x, in_if, out);
        return;
      case ir::StmtKind::If: {
        auto* f = ir::as<ir::IfNode>(s);
        unguarded_loads(f->cond, out, in_if);
        unguarded_reads(f->then_body, true, out), unguarded_reads(f->else_body, true, out);
        return;
      }
      case ir::StmtKind::Let: return unguarded_loads(ir::as<ir::LetNode>(s)->value, out, in_if);
      case ir::StmtKind::Store:
        for (const auto& i : ir::as<ir::StoreNode>(s)->indices) unguarded_loads(i, out, in_if);
        return unguarded_loads(ir::as<ir::StoreNode>(s)->value, out, in_if);
      default: return;
    }
  }

  void collect_reads() {
    std::unordered_set<std::string> unguarded;
    unguarded_reads(n_.body, false, unguarded);
    ir::for_each_expr(n_.body, [&](const Expr& x) {
      if (x->kind != ir::ExprKind::Load) return;
      auto* l = ir::as<ir::LoadNode>(x);
      if (l->buffer->scope != ir::Scope::global) return;
      const std::string what = "T.Parallel read " + access_text(l->buffer, l->indices) + " of global tensor " +
                               q(l->buffer->name);
      if (const Access* st = stored(l->buffer)) {
        Access* a = find(l->buffer, l->indices);
        if (!a)
          throw ir::Error(what + " in a map that stores " + access_text(st->g, st->indices) +
                              ": the map's iterations would read elements others write",
                          x->span, "write the result into another tensor (Y[i] = X[i + 1] ...), or map over a tile");
        acc_[a->owner].preload = true;
        // an in-place map (Y[j] = Y[j] * 2): the preload is the user's reads where every one is unguarded; a read in
        // a discarded arm (serial_maps' `C[k] = select(c, v, C[k])`, an `if`'s store) leaves the window unchecked
        acc_[a->owner].checked = acc_[a->owner].checked && unguarded.count(ir::print(x));
        return;
      }
      if (find(l->buffer, l->indices)) return;
      auto dims = dims_of(l->indices, n_);
      if (!dims)
        throw ir::Error(what + ": on Ascend a map over global tensors is staged through UB tiles, which needs each "
                            "index to be (start + one loop variable) or free of the loop variables (a data-dependent or "
                            "strided read is a gather from a tile)",
                        x->span,
                        "copy the rows it reads into a tile first (T.copy(" + l->buffer->name +
                            "[r0, 0], t)) and read the tile in the map: a gather along a tile's last dim runs");
      // checked: a read the map always makes, at indices serial_maps did not guard for an if arm (a
      // select(c, e, 0) index reads e's window only where c holds)
      const bool checked = unguarded.count(ir::print(x)) &&
                           std::none_of(l->indices.begin(), l->indices.end(),
                                        [](const Expr& i) { return i->kind == ir::ExprKind::Select; });
      acc_.push_back({l->buffer, l->indices, *dims, false, false, checked, acc_.size(), {}, {}, nullptr, {}});
    });
  }

  // the chunk at `origin` (one start per loop variable) of extents `shape`
  // the extents of acc_[i]'s tile for a chunk of extents `shape` (the dims of the map, the constant
  // indices its owner's tile spans, and after a dim of the map a dim of extent 1: a column window is
  // a column tile; one element when none)
  std::vector<int64_t> tile_extents(size_t i, const std::vector<int64_t>& shape) const {
    const Access& a = acc_[i];
    const Access& o = acc_[a.owner];
    std::vector<int64_t> e;
    for (size_t k = 0; k < a.dims.size(); ++k) {
      if (a.dims[k].var >= 0) e.push_back(shape[a.dims[k].var]);
      else if (!o.width.empty() && o.width[k] > 1) e.push_back(o.width[k]);
      else if (!e.empty()) e.push_back(1);
    }
    if (e.empty()) e.push_back(1);
    return e;
  }

  int64_t chunk_bytes() const {
    int64_t total = 0;
    for (size_t i = 0; i < acc_.size(); ++i) {
      if (acc_[i].owner != i) continue;
      auto e = tile_extents(i, chunk_);
      int64_t rows = 1;
      for (size_t k = 0; k + 1 < e.size(); ++k) rows *= e[k];
      total += rows * round_up(e.back() * acc_[i].g->dtype.bytes(), 32);
    }
    return total;
  }

  void leaf(const std::vector<Expr>& origin, const std::vector<int64_t>& shape, std::vector<Stmt>& out) {
    std::vector<ir::Var> local;
    std::vector<std::pair<ir::Var, Expr>> subst;
    for (size_t k = 0; k < n_.vars.size(); ++k) {
      local.push_back(names_.fresh_var(n_.vars[k]->name, n_.vars[k]->span));
      subst.emplace_back(n_.vars[k], simp(ir::arith::add(simp(ir::arith::add(n_.mins[k], origin[k])), local[k])));
    }
    std::vector<ir::Region> windows;
    for (size_t i = 0; i < acc_.size(); ++i) {
      Access& a = acc_[i];
      std::vector<Expr> sh, starts, extents, used;  // used: ir.h CopyNode::used, where a loop is padded
      bool padded = false;
      for (auto x : tile_extents(i, shape)) sh.push_back(C(x));
      a.tile_index.clear();
      const Access& o = acc_[a.owner];
      for (size_t k = 0; k < a.dims.size(); ++k) {
        const Dim& d = a.dims[k];
        if (d.var < 0 && !o.width.empty() && o.width[k] > 1) {  // a dim the owner's tile spans
          starts.push_back(C(o.lo[k]));
          extents.push_back(C(o.width[k]));
          used.push_back(extents.back());
          a.tile_index.push_back(C(*ir::arith::literal(d.start) - o.lo[k]));
          continue;
        }
        if (d.var < 0) {
          starts.push_back(d.start);
          extents.push_back(C(1));
          used.push_back(extents.back());
          if (!a.tile_index.empty()) a.tile_index.push_back(C(0));  // a dim of the tile after one of the map
          continue;
        }
        starts.push_back(simp(ir::arith::add(d.start, simp(ir::arith::add(n_.mins[d.var], origin[d.var])))));
        extents.push_back(C(shape[d.var]));
        const Expr& user = n_.user[d.var];  // the chunk's iterations before the user's extent
        used.push_back(user ? simp(ir::arith::sub(user, origin[d.var])) : extents.back());
        padded = padded || user;
        a.tile_index.push_back(local[d.var]);
      }
      if (a.tile_index.empty()) a.tile_index.push_back(C(0));
      windows.push_back({a.g, starts, extents});
      if (a.owner != i) {
        a.tile = o.tile;
        continue;
      }
      a.tile = ir::buffer(names_.fresh(a.g->name + "_stage"), a.g->dtype, sh, ir::Scope::fragment, sp_);
      out.push_back(std::make_shared<ir::AllocNode>(a.tile, sp_));
      // checked: a read the map always makes, or an in-place map's preload (a stored owner still checked with a
      // preload: every store and every read of its window one the map always makes, no constants merged)
      if (!a.stored || a.preload)
        out.push_back(std::make_shared<ir::CopyNode>(windows.back(), ir::full_region(a.tile), sp_, false, a.checked,
                                                     a.checked && padded ? used : std::vector<Expr>{},
                                                     a.stored && a.kept_check()));
      if (a.stored && a.guarded)  // the user's stores: the window's elements before the guard's ends
        for (size_t k = 0; k < a.dims.size(); ++k)
          if (a.guard_end[k]) {
            used[k] = simp(ir::binary(ir::BinOp::Min, used[k], simp(ir::arith::sub(a.guard_end[k], starts[k]))));
            padded = true;
          }
      if (a.stored) a.used = padded ? used : std::vector<Expr>{};
    }
    struct ToTiles : ir::Mutator {
      StageMap& m;
      explicit ToTiles(StageMap& s) : m(s) {}
      using ir::Mutator::mutate;
      Expr mutate(const Expr& e) override {
        if (e->kind == ir::ExprKind::Load && ir::as<ir::LoadNode>(e)->buffer->scope == ir::Scope::global) {
          auto* l = ir::as<ir::LoadNode>(e);
          Access* a = m.find(l->buffer, l->indices);
          return ir::load(a->tile, a->tile_index, e->span);
        }
        return ir::Mutator::mutate(e);
      }
      Stmt mutate(const Stmt& s) override {
        if (s->kind == ir::StmtKind::Store && ir::as<ir::StoreNode>(s)->buffer->scope == ir::Scope::global) {
          auto* st = ir::as<ir::StoreNode>(s);
          Access* a = m.find(st->buffer, st->indices);
          return std::make_shared<ir::StoreNode>(a->tile, a->tile_index, mutate(st->value), s->span);
        }
        return ir::Mutator::mutate(s);
      }
    } to_tiles(*this);
    Stmt body = ir::substitute(to_tiles.mutate(n_.body), subst);
    for (size_t k = n_.vars.size(); k-- > 0;) body = vec::pfor(local[k], shape[k], body, sp_);
    out.push_back(body);
    for (size_t i = 0; i < acc_.size(); ++i)
      if (acc_[i].stored && acc_[i].owner == i) {
        // checked where the map stores every element of the window itself (no preload: no `if`, no constants
        // merged, no read of the tensor; serial_maps' guarded store `C[k] = select(c, v, C[k])` reads it; an
        // in-place map's checked preload reports the window first, as cpu reports the read), or the elements
        // before a guard's ends (guard_ends: its used extents); else, where the map may skip elements of the
        // window (a preload), element by element (ir.h CopyNode::preload: the elements outside the tensor the map
        // stored)
        const bool chk = (acc_[i].checked && !acc_[i].preload) || acc_[i].guarded, kept = acc_[i].kept_check();
        out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(acc_[i].tile), windows[i], sp_, false, chk,
                                                     chk || kept ? acc_[i].used : std::vector<Expr>{}, kept));
      }
  }

  // dims d.. of the chunks, the dims before d placed at `origin` with extents `shape`
  void emit(size_t d, const std::vector<Expr>& origin, const std::vector<int64_t>& shape, std::vector<Stmt>& out) {
    if (d == n_.ext.size()) return leaf(origin, shape, out);
    const int64_t e = n_.ext[d], c = chunk_[d];
    auto at = [&](const Expr& off, int64_t len, std::vector<Stmt>& body) {
      auto o = origin;
      auto sh = shape;
      o.push_back(off);
      sh.push_back(len);
      emit(d + 1, o, sh, body);
    };
    if (c == e) return at(C(0), e, out);
    if (e / c > 1) {
      ir::Var k = names_.fresh_var("k", sp_);
      std::vector<Stmt> body;
      at(ir::arith::mul(k, C(c)), c, body);
      out.push_back(std::make_shared<ir::ForNode>(k, C(0), C(e / c), ir::ForKind::serial, 0, ir_seq(body, sp_), sp_));
    } else {
      at(C(0), c, out);
    }
    if (e % c) at(C(e / c * c), e % c, out);
  }

  const Nest& n_;
  ir::Span sp_;
  vec::Names& names_;
  std::vector<Access> acc_;
  std::vector<Expr> conds_;  // collect_stores: the conditions of the enclosing `if`s (null: an else branch)
  std::vector<int64_t> chunk_;
};

}  // namespace

ir::Kernel stage_global_maps(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  vec::Names names(kernel);
  ir::Stmt body = vec::rewrite_stmts(kernel->body, [&](const ir::Stmt& s) -> std::optional<std::vector<ir::Stmt>> {
    auto n = nest_of(s);
    if (!n) return std::nullopt;
    return StageMap(*n, s->span, names).run();
  });
  return vec::with_body(kernel, body);
}

}  // namespace tw::ascend
