// Facts about tiles shared by the passes of both targets (see tile_facts.h).
#include "transform/tile_facts.h"

#include "ir/functor.h"

namespace tw::transform {

using namespace tw::ir;

bool is_var(const Expr& e, const Var& v) { return e && e->kind == ExprKind::Var && e.get() == v.get(); }

bool references(const Stmt& s, const Buffer& b) {
  bool hit = false;
  auto reg = [&](const Region& r) { hit |= r.buffer == b; };
  for_each_stmt(s, [&](const Stmt& x) {
    switch (x->kind) {
      case StmtKind::Copy: reg(static_cast<const CopyNode*>(x.get())->src); reg(static_cast<const CopyNode*>(x.get())->dst); break;
      case StmtKind::Gemm: {
        const auto& g = *static_cast<const GemmNode*>(x.get());
        reg(g.a); reg(g.b); reg(g.c);
        break;
      }
      case StmtKind::Fill: reg(static_cast<const FillNode*>(x.get())->dst); break;
      case StmtKind::Reduce: {
        const auto& r = *static_cast<const ReduceNode*>(x.get());
        hit |= r.src == b || r.dst == b;
        break;
      }
      case StmtKind::Store: hit |= static_cast<const StoreNode*>(x.get())->buffer == b; break;
      case StmtKind::Seq: case StmtKind::For: case StmtKind::If: case StmtKind::Let:
      case StmtKind::Alloc: case StmtKind::CoreScope: case StmtKind::Sync: break;  // no tile op
    }
  });
  for_each_expr(s, [&](const Expr& e) {
    if (e && e->kind == ExprKind::Load) hit |= static_cast<const LoadNode*>(e.get())->buffer == b;
  });
  return hit;
}

bool referenced_outside(const Stmt& root, const Stmt& inside, const Buffer& t) {
  struct V : Visitor {
    const Stmt& in;
    const Buffer& t;
    bool hit = false;
    V(const Stmt& i, const Buffer& b) : in(i), t(b) {}
    void visit(const Stmt& s) override {
      if (!s || s.get() == in.get() || s->kind == StmtKind::Alloc) return;
      Visitor::visit(s);
    }
    using Visitor::visit;
    void visit_buffer(const Buffer& b) override { hit |= b == t; }
  } v(inside, t);
  v.visit(root);
  return v.hit;
}

bool whole_tile(const Region& r) {
  auto shape = r.buffer->const_shape();
  if (r.buffer->scope == Scope::global || !shape || r.starts.size() != shape->size()) return false;
  for (size_t d = 0; d < shape->size(); ++d) {
    auto st = as_const_int(r.starts[d]), ex = as_const_int(r.extents[d]);
    if (!st || *st != 0 || !ex || *ex != (*shape)[d]) return false;
  }
  return true;
}

// The tile a nest of parallel loops from 0 over all of its dims stores at the loop variables (in
// order) without reading it, or null.
static const Buffer* map_overwrite(const Stmt& s) {
  std::vector<const ForNode*> loops;
  Stmt cur = s;
  auto one = [](Stmt x) {  // a sequence of one statement is that statement
    while (x && x->kind == StmtKind::Seq && static_cast<const SeqNode*>(x.get())->body.size() == 1)
      x = static_cast<const SeqNode*>(x.get())->body[0];
    return x;
  };
  for (cur = one(cur); cur && cur->kind == StmtKind::For; cur = one(static_cast<const ForNode*>(cur.get())->body)) {
    loops.push_back(static_cast<const ForNode*>(cur.get()));
    if (loops.back()->for_kind != ForKind::parallel) return nullptr;
  }
  if (!cur || cur->kind != StmtKind::Store) return nullptr;
  const auto& st = *static_cast<const StoreNode*>(cur.get());
  auto shape = st.buffer->const_shape();
  if (st.buffer->scope == Scope::global || !shape || shape->size() != loops.size() ||
      st.indices.size() != loops.size())
    return nullptr;
  for (size_t d = 0; d < loops.size(); ++d) {
    auto mn = as_const_int(loops[d]->min), ex = as_const_int(loops[d]->extent);
    if (!mn || *mn != 0 || !ex || *ex != (*shape)[d] || !is_var(st.indices[d], loops[d]->var)) return nullptr;
  }
  bool reads = false;
  for_each_expr(cur, [&](const Expr& e) {
    if (e && e->kind == ExprKind::Load) reads |= static_cast<const LoadNode*>(e.get())->buffer == st.buffer;
  });
  return reads ? nullptr : &st.buffer;
}

std::unordered_set<const void*> loop_local_tiles(const Kernel& k, const ForNode& loop, bool maps) {
  std::unordered_set<const void*> out;
  if (loop.for_kind == ForKind::parallel) return out;
  const std::vector<Stmt> body = stmts_of(loop.body);
  for (size_t i = 0; i < body.size(); ++i) {
    const Stmt& s = body[i];
    const Region* full = nullptr;
    const Buffer* mapped = maps ? map_overwrite(s) : nullptr;
    if (s->kind == StmtKind::Copy) {
      const auto& c = *static_cast<const CopyNode*>(s.get());
      if (c.src.buffer != c.dst.buffer) full = &c.dst;
    } else if (s->kind == StmtKind::Fill) {
      full = &static_cast<const FillNode*>(s.get())->dst;
    }
    if (!mapped && (!full || !whole_tile(*full))) continue;
    const Buffer& t = mapped ? *mapped : full->buffer;
    if (out.count(t.get())) continue;
    bool earlier = false;
    for (size_t j = 0; j < i && !earlier; ++j) earlier = references(body[j], t);
    if (!earlier && !referenced_outside(k->body, loop.body, t)) out.insert(t.get());
  }
  return out;
}

// Calls f(buffer, atomic) for each statement that writes a global tensor (a copy, T.atomic_add,
// store, fill, reduce or gemm destination).
template <class F>
static void each_global_write(const Kernel& k, F f) {
  for_each_stmt(k->body, [&](const Stmt& s) {
    auto w = [&](const Buffer& b, bool atomic = false) {
      if (b && b->scope == Scope::global) f(b.get(), atomic);
    };
    switch (s->kind) {
      case StmtKind::Copy: {
        const auto& c = *static_cast<const CopyNode*>(s.get());
        w(c.dst.buffer, c.atomic);
        break;
      }
      case StmtKind::Store: w(static_cast<const StoreNode*>(s.get())->buffer); break;
      case StmtKind::Fill: w(static_cast<const FillNode*>(s.get())->dst.buffer); break;
      case StmtKind::Reduce: w(static_cast<const ReduceNode*>(s.get())->dst); break;
      case StmtKind::Gemm: w(static_cast<const GemmNode*>(s.get())->c.buffer); break;
      case StmtKind::Seq: case StmtKind::For: case StmtKind::If: case StmtKind::Let:
      case StmtKind::Alloc: case StmtKind::CoreScope: case StmtKind::Sync: break;  // no tile op
    }
  });
}

std::unordered_set<const void*> globals_written(const Kernel& k) {
  std::unordered_set<const void*> out;
  each_global_write(k, [&](const void* b, bool) { out.insert(b); });
  return out;
}

std::unordered_set<const void*> globals_accumulated(const Kernel& k) {
  std::unordered_set<const void*> added, stored;
  each_global_write(k, [&](const void* b, bool atomic) { (atomic ? added : stored).insert(b); });
  for (const void* b : stored) added.erase(b);
  return added;
}

}  // namespace tw::transform
