// view_gemm_operands (see view_gemm_operands.h).
#include "target/cpu/view_gemm_operands.h"

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "target/cpu/tile_facts.h"

namespace tw::cpu {

using namespace tw::ir;

namespace {

struct ElideInfo {
  const CopyNode* copy = nullptr;
  int writes = 0;
  bool gemm_read = false;
  bool bad = false;
};

std::unordered_set<const void*> elidable_tiles(const Kernel& k) {
  std::unordered_map<const void*, ElideInfo> info;
  auto bad = [&](const Buffer& b) {
    if (b && b->scope != Scope::global) info[b.get()].bad = true;
  };
  for_each_stmt(k->body, [&](const Stmt& s) {
    switch (s->kind) {
      case StmtKind::Copy: {
        const auto& c = *static_cast<const CopyNode*>(s.get());
        bad(c.src.buffer);  // a tile read by a copy is read elsewhere
        const Buffer& d = c.dst.buffer;
        if (d->scope == Scope::global) break;
        ElideInfo& e = info[d.get()];
        e.writes++;
        e.copy = &c;
        if (!viewable_copy(c)) e.bad = true;
        break;
      }
      case StmtKind::Gemm: {
        const auto& g = *static_cast<const GemmNode*>(s.get());
        for (const Buffer* b : {&g.a.buffer, &g.b.buffer})
          if ((*b)->scope != Scope::global) info[b->get()].gemm_read = true;
        bad(g.c.buffer);
        break;
      }
      case StmtKind::Store: {
        const auto& st = *static_cast<const StoreNode*>(s.get());
        bad(st.buffer);
        break;
      }
      case StmtKind::Fill: {
        const auto& f = *static_cast<const FillNode*>(s.get());
        bad(f.dst.buffer);
        break;
      }
      case StmtKind::Reduce: {
        const auto& r = *static_cast<const ReduceNode*>(s.get());
        bad(r.src);
        bad(r.dst);
        break;
      }
      case StmtKind::Seq: case StmtKind::For: case StmtKind::If: case StmtKind::Let:
      case StmtKind::Alloc: case StmtKind::CoreScope: case StmtKind::Sync: break;  // no tile op
    }
  });
  for_each_expr(k->body, [&](const Expr& e) {
    if (e && e->kind == ExprKind::Load) bad(static_cast<const LoadNode*>(e.get())->buffer);
  });
  const std::unordered_set<const void*> global_written = globals_written(k);
  std::unordered_set<const void*> out;
  for (const auto& [b, e] : info)
    if (!e.bad && e.writes == 1 && e.gemm_read && e.copy && !global_written.count(e.copy->src.buffer.get()))
      out.insert(b);
  return out;
}

// Live extents of gemm operands: of the elidable tiles, those that every gemm reads whole. Past
// the part its copy filled from inside the source such a tile is zero, and no reader looks past
// it (the gemm multiplies only that part), so a masked copy whose source starts inside its
// tensor (a tail block) is elided too: the view points at the source's part, with live extents.
std::unordered_set<const void*> live_extent_tiles(const Kernel& k, const std::unordered_set<const void*>& elidable) {
  std::unordered_set<const void*> partial;
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind != StmtKind::Gemm) return;
    const auto& g = *static_cast<const GemmNode*>(s.get());
    for (const Region* r : {&g.a, &g.b}) {
      auto shape = r->buffer->const_shape();
      bool whole = shape && shape->size() == 2 && r->starts.size() == 2;
      for (size_t d = 0; whole && d < 2; ++d) {
        auto st = as_const_int(r->starts[d]), ex = as_const_int(r->extents[d]);
        whole = st && *st == 0 && ex && *ex == (*shape)[d];
      }
      if (!whole) partial.insert(r->buffer.get());
    }
  });
  std::unordered_set<const void*> out;
  for (const void* b : elidable)
    if (!partial.count(b)) out.insert(b);
  return out;
}


// A fill of a whole 2-D tile with zero (T.clear)?
bool clears_tile(const Stmt& s) {
  if (s->kind != StmtKind::Fill) return false;
  const auto& f = *as<FillNode>(s);
  const Buffer& t = f.dst.buffer;
  auto shape = t->const_shape();
  if (t->scope == Scope::global || !shape || shape->size() != 2 || !whole_tile(f.dst)) return false;
  const Expr& v = f.value;
  if (v->kind == ExprKind::IntImm) return as_const_int(v) == 0;
  return v->kind == ExprKind::FloatImm && as<FloatImmNode>(v)->value == 0.0 &&
         !std::signbit(as<FloatImmNode>(v)->value);
}

// Does the window start e place blocks apart along its dim: at most one block index b in it, in a
// term `b * s` (or `b`) with s >= extent added to terms without block indices? Records b.
bool window_term(const Kernel& k, const Expr& e, int64_t extent, std::unordered_set<const void*>& placed) {
  auto block_var = [&](const Expr& x) {
    for (const Var& b : k->block_vars)
      if (is_var(x, b)) return static_cast<const void*>(b.get());
    return static_cast<const void*>(nullptr);
  };
  auto has_block_var = [&](const Expr& x) {
    bool hit = false;
    for_each_expr(x, [&](const Expr& y) { hit |= y && block_var(y) != nullptr; });
    return hit;
  };
  std::vector<Expr> terms{e}, rest;
  const void* found = nullptr;
  while (!terms.empty()) {
    Expr t = terms.back();
    terms.pop_back();
    if (t->kind == ExprKind::Binary && as<BinaryNode>(t)->op == BinOp::Add) {
      terms.push_back(as<BinaryNode>(t)->a);
      terms.push_back(as<BinaryNode>(t)->b);
      continue;
    }
    if (!has_block_var(t)) continue;
    const void* b = block_var(t);
    int64_t s = 1;
    if (!b && t->kind == ExprKind::Binary && as<BinaryNode>(t)->op == BinOp::Mul) {
      const auto& m = *as<BinaryNode>(t);
      for (const auto& [v, f] : {std::pair{m.a, m.b}, std::pair{m.b, m.a}})
        if (block_var(v) && as_const_int(f)) {
          b = block_var(v);
          s = *as_const_int(f);
        }
    }
    if (!b || found || s < extent) return false;
    found = b;
  }
  if (found) placed.insert(found);
  return true;
}

// Accumulator tiles computed in place in their destination (view_gemm_operands.h, @gemm_out): in
// one sequence, a clear of tile t, then statements that reference t only as the whole C of gemms
// (reading neither t as A/B nor the destination), then a copy of the whole of t into a global
// region of t's dtype with contiguous rows that no other statement of the kernel references and
// that every block index of a grid of more than one block places a window apart (window_term:
// two blocks never share a window); t referenced nowhere else.
std::unordered_map<const void*, int64_t> out_tiles(const Kernel& k) {
  std::unordered_map<const void*, int64_t> out;
  for_each_seq(k, [&](const SeqNode& seq, const ForNode*) {
    for (size_t i = 0; i < seq.body.size(); ++i) {
      if (!clears_tile(seq.body[i])) continue;
      const Buffer& t = as<FillNode>(seq.body[i])->dst.buffer;
      std::unordered_set<const StmtNode*> allowed{seq.body[i].get()};
      const CopyNode* out_copy = nullptr;
      bool ok = true;
      for (size_t j = i + 1; ok && !out_copy && j < seq.body.size(); ++j) {
        const Stmt& s = seq.body[j];
        if (!references(s, t)) continue;
        if (s->kind == StmtKind::Copy && as<CopyNode>(s)->src.buffer == t) {
          out_copy = as<CopyNode>(s);
          allowed.insert(s.get());
          break;
        }
        for_each_stmt(s, [&](const Stmt& x) {
          if (x->kind == StmtKind::Gemm) {
            const auto& g = *as<GemmNode>(x);
            if (g.c.buffer == t) {
              ok = ok && whole_tile(g.c) && g.a.buffer != t && g.b.buffer != t;
              allowed.insert(x.get());
            }
          }
        });
      }
      if (!ok || !out_copy) continue;
      const CopyNode& c = *out_copy;
      const Buffer& g = c.dst.buffer;
      if (c.atomic || g->scope != Scope::global || g->dtype != t->dtype || !whole_tile(c.src)) continue;
      // the destination region: constant extents, the tile's two dims its last two non-unit ones
      // with the columns contiguous (the mirror of viewable_copy)
      auto shape = *t->const_shape();
      std::vector<int> nd;
      for (size_t d = 0; ok && d < c.dst.extents.size(); ++d) {
        auto e = as_const_int(c.dst.extents[d]);
        ok = e.has_value();
        if (ok && *e != 1) nd.push_back(static_cast<int>(d));
      }
      const int tnd = (shape[0] != 1) + (shape[1] != 1);
      if (!ok || static_cast<int>(nd.size()) != tnd) continue;
      if (shape[1] != 1 && nd.back() != static_cast<int>(c.dst.extents.size()) - 1) continue;
      if (tnd == 2 && (as_const_int(c.dst.extents[nd[0]]) != shape[0] || as_const_int(c.dst.extents[nd[1]]) != shape[1]))
        continue;
      if (tnd == 1 && as_const_int(c.dst.extents[nd[0]]) != (shape[0] != 1 ? shape[0] : shape[1])) continue;
      // no two blocks share a window: each block index of a grid of more than one block places it
      // along one dim, as a term `b * s` with s at least the window's extent there
      std::unordered_set<const void*> placed;
      for (size_t d = 0; ok && d < c.dst.starts.size(); ++d)
        ok = window_term(k, c.dst.starts[d], *as_const_int(c.dst.extents[d]), placed);
      for (size_t b = 0; ok && b < k->block_vars.size() && b < k->grid.size(); ++b) {
        auto n = as_const_int(k->grid[b]);
        if (!(n && *n == 1) && !placed.count(k->block_vars[b].get())) ok = false;
      }
      std::unordered_set<const StmtNode*> copy_only{out_copy};
      if (!ok || referenced_except(k, allowed, t) || referenced_except(k, copy_only, g)) continue;
      out[t.get()] = static_cast<int64_t>(allowed.size()) - 2;  // the gemms
    }
  });
  return out;
}

}  // namespace

Kernel view_gemm_operands(const Kernel& k) {
  const std::unordered_set<const void*> elidable = elidable_tiles(k);
  const std::unordered_set<const void*> live = live_extent_tiles(k, elidable);
  std::unordered_map<const void*, int64_t> args;
  for (const void* b : elidable) args[b] = live.count(b) ? 1 : 0;
  return annotate_tiles(annotate_tiles(k, "gemm_view", args), "gemm_out", out_tiles(k));
}

}  // namespace tw::cpu
