// view_gemm_operands (see view_gemm_operands.h).
#include "target/cpu/view_gemm_operands.h"

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


}  // namespace

Kernel view_gemm_operands(const Kernel& k) {
  const std::unordered_set<const void*> elidable = elidable_tiles(k);
  const std::unordered_set<const void*> live = live_extent_tiles(k, elidable);
  std::unordered_map<const void*, int64_t> args;
  for (const void* b : elidable) args[b] = live.count(b) ? 1 : 0;
  return annotate_tiles(k, "gemm_view", args);
}

}  // namespace tw::cpu
