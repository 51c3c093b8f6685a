// The buffers Tile IR statements read and write: shared by the passes that regroup a block's body
// (split_rows, split_cols).
#pragma once

#include <set>

#include "ir/functor.h"
#include "tilewright/ir.h"

namespace tw::ascend {

using BufSet = std::set<const ir::BufferNode*>;

inline bool meets(const BufSet& a, const BufSet& b) {
  for (auto* x : a)
    if (b.count(x)) return true;
  return false;
}

// Every buffer a statement names.
inline BufSet named(const ir::Stmt& s) {
  struct V : ir::Visitor {
    BufSet out;
    void visit_buffer(const ir::Buffer& b) override { out.insert(b.get()); }
  } v;
  v.visit(s);
  return v.out;
}

// The buffers a statement reads and writes (stores, copy and fill destinations, reduction results
// write; loads, copy sources, atomic-add destinations and merged reductions read); any other
// statement kind reads and writes everything it names.
inline void reads_writes(const ir::Stmt& s, BufSet& reads, BufSet& writes) {
  bool other = false;
  ir::for_each_stmt(s, [&](const ir::Stmt& t) {
    switch (t->kind) {
      case ir::StmtKind::Store: writes.insert(ir::as<ir::StoreNode>(t)->buffer.get()); break;
      case ir::StmtKind::Copy: {
        auto* c = ir::as<ir::CopyNode>(t);
        reads.insert(c->src.buffer.get());
        writes.insert(c->dst.buffer.get());
        if (c->atomic) reads.insert(c->dst.buffer.get());
        break;
      }
      case ir::StmtKind::Fill: writes.insert(ir::as<ir::FillNode>(t)->dst.buffer.get()); break;
      case ir::StmtKind::Reduce: {
        auto* r = ir::as<ir::ReduceNode>(t);
        reads.insert(r->src.get());
        writes.insert(r->dst.get());
        if (!r->clear) reads.insert(r->dst.get());
        break;
      }
      case ir::StmtKind::Seq: case ir::StmtKind::For: case ir::StmtKind::If: case ir::StmtKind::Let:
      case ir::StmtKind::Alloc: break;
      default: other = true; break;
    }
  });
  ir::for_each_expr(s, [&](const ir::Expr& e) {
    if (e->kind == ir::ExprKind::Load) reads.insert(static_cast<const ir::LoadNode*>(e.get())->buffer.get());
  });
  if (other)
    for (auto* b : named(s)) reads.insert(b), writes.insert(b);
}

// A region that covers its whole (constant-shaped) buffer.
inline bool whole(const ir::Region& r) {
  auto shape = r.buffer->const_shape();
  if (!shape) return false;
  for (size_t d = 0; d < shape->size(); ++d) {
    auto s = ir::as_const_int(r.starts[d]);
    auto e = ir::as_const_int(r.extents[d]);
    if (!s || !e || *s != 0 || *e != (*shape)[d]) return false;
  }
  return true;
}

}  // namespace tw::ascend
