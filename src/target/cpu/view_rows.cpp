// view_rows (see view_rows.h).
#include "target/cpu/view_rows.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "target/cpu/tile_facts.h"

namespace tw::cpu {

using namespace tw::ir;

namespace {

// A full-tile map whose body is several stores, one of them into t at [i, j], reading t only
// at [i, j] (log-softmax's `x[i, j] = x[i, j] - m[i]; e[i, j] = exp(x[i, j])`): it overwrites t
// too. Its statements up to t's store read t through the view; emit_store ends the view, so
// the later ones read the element just stored in the tile.
bool multi_store_map_overwrites(const Stmt& s, const Buffer& t) {
  if (!s || s->kind != StmtKind::For) return false;
  const auto& outer = *static_cast<const ForNode*>(s.get());
  if (outer.for_kind != ForKind::parallel || !outer.body || outer.body->kind != StmtKind::For) return false;
  const auto& inner = *static_cast<const ForNode*>(outer.body.get());
  if (inner.for_kind != ForKind::parallel || !inner.body || inner.body->kind != StmtKind::Seq) return false;
  auto shape = t->const_shape();
  auto mn0 = as_const_int(outer.min), mn1 = as_const_int(inner.min);
  auto e0 = as_const_int(outer.extent), e1 = as_const_int(inner.extent);
  if (t->scope == Scope::global || !shape || shape->size() != 2 || !mn0 || *mn0 != 0 || !mn1 || *mn1 != 0 || !e0 ||
      !e1 || (*shape)[0] != *e0 || (*shape)[1] != *e1)
    return false;
  auto at_ij = [&](const std::vector<Expr>& idx) {
    return idx.size() == 2 && is_var(idx[0], outer.var) && is_var(idx[1], inner.var);
  };
  int stores_into_t = 0;
  for (const auto& x : static_cast<const SeqNode*>(inner.body.get())->body) {
    if (x->kind != StmtKind::Store) return false;
    const auto& st = *static_cast<const StoreNode*>(x.get());
    if (st.buffer == t) {
      if (!at_ij(st.indices)) return false;
      ++stores_into_t;
    }
  }
  bool other_read = false;
  for_each_expr(inner.body, [&](const Expr& e) {
    if (e && e->kind == ExprKind::Load && static_cast<const LoadNode*>(e.get())->buffer == t &&
        !at_ij(static_cast<const LoadNode*>(e.get())->indices))
      other_read = true;
  });
  return stores_into_t == 1 && !other_read;
}

// The row views of the statements `top` (the kernel's top level, or the body of a serial loop),
// each with whether it widens (its copy converts a bfloat16 / float16 tensor into the float32
// tile); `allowed`: the tiles that may have one there (null: any).
void row_view_tiles_in(const std::vector<Stmt>& top, const std::unordered_set<const void*>& global_written,
                       const std::unordered_set<const void*>* allowed, std::unordered_map<const void*, bool>& out) {
  // candidates: tiles filled by a viewable copy at this level
  std::vector<std::pair<Buffer, bool>> cands;
  for (const auto& s : top)
    if (s->kind == StmtKind::Copy) {
      const auto& c = *static_cast<const CopyNode*>(s.get());
      if (viewable_copy(c, /*widening=*/true) && !global_written.count(c.src.buffer.get()) && (!allowed || allowed->count(c.dst.buffer.get())))
        cands.emplace_back(c.dst.buffer, c.src.buffer->dtype != c.dst.buffer->dtype);
    }
  for (const auto& [t, widens] : cands) {
    enum { none, view, tile } state = none;
    bool bad = false;
    for (const auto& s : top) {
      if (s->kind == StmtKind::Copy && static_cast<const CopyNode*>(s.get())->dst.buffer == t) {
        const auto& c = *static_cast<const CopyNode*>(s.get());
        if (state != none || !viewable_copy(c, /*widening=*/true)) bad = true;
        state = view;
        continue;
      }
      if (const StoreNode* st = full_tile_map(s); (st && st->buffer == t) || multi_store_map_overwrites(s, t)) {
        if (state == view) state = tile;
        continue;
      }
      // any other statement: reads of t are fine (loads, row reductions); writes are not, nor
      // copies / gemms reading t while the view is live
      for_each_stmt(s, [&](const Stmt& x) {
        switch (x->kind) {
          case StmtKind::Copy: {
            const auto& c = *static_cast<const CopyNode*>(x.get());
            bad |= c.dst.buffer == t || (c.src.buffer == t && state == view);
            break;
          }
          case StmtKind::Store: bad |= static_cast<const StoreNode*>(x.get())->buffer == t; break;
          case StmtKind::Fill: bad |= static_cast<const FillNode*>(x.get())->dst.buffer == t; break;
          case StmtKind::Reduce: {
            const auto& r = *static_cast<const ReduceNode*>(x.get());
            bad |= r.dst == t;  // a reduce of t over either axis reads it through the view
            // ... except over the first axis of a one-column tile: the reduce emitter takes that as a
            // contiguous row (inner extent 1), which a view of row stride ld is not (fuzz seed 26329)
            if (r.src == t && r.axis == 0) {
              auto sh = t->const_shape();
              bad |= !sh || sh->size() != 2 || (*sh)[1] == 1;
            }
            break;
          }
          case StmtKind::Gemm: {
            const auto& g = *static_cast<const GemmNode*>(x.get());
            bad |= g.a.buffer == t || g.b.buffer == t || g.c.buffer == t;
            break;
          }
          case StmtKind::Seq: case StmtKind::For: case StmtKind::If: case StmtKind::Let:
          case StmtKind::Alloc: case StmtKind::CoreScope: case StmtKind::Sync: break;  // no tile op
        }
      });
    }
    if (!bad && state != none) out[t.get()] = widens;
  }
}

std::unordered_map<const void*, bool> row_view_tiles(const Kernel& k) {
  std::unordered_map<const void*, bool> out;
  row_view_tiles_in(stmts_of(k->body), globals_written(k), nullptr, out);
  return out;
}

// The row views (row_view_tiles_in) of the bodies of serial loops, for their iteration-local tiles.
std::unordered_map<const void*, bool> loop_row_view_tiles(const Kernel& k) {
  std::unordered_map<const void*, bool> out;
  const std::unordered_set<const void*> global_written = globals_written(k);
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind != StmtKind::For) return;
    const auto& f = *static_cast<const ForNode*>(s.get());
    auto local = loop_local_tiles(k, f);
    if (!local.empty()) row_view_tiles_in(static_cast<const SeqNode*>(f.body.get())->body, global_written, &local, out);
  });
  return out;
}

}  // namespace

Kernel view_rows(const Kernel& k) {
  std::unordered_map<const void*, std::vector<int64_t>> args;
  for (const auto& [b, widens] : loop_row_view_tiles(k)) args[b] = {0, widens};
  for (const auto& [b, widens] : row_view_tiles(k)) args[b] = {1, widens};
  return annotate_tiles(k, "row_view", args);
}

}  // namespace tw::cpu
