// alias_tile_copies (see alias_tile_copies.h).
#include "target/cpu/alias_tile_copies.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "target/cpu/tile_facts.h"
#include "transform/check_bounds.h"

namespace tw::cpu {

using namespace tw::ir;

namespace {

// Does statement s (a leaf or a compound one) write buffer b?
bool writes(const Stmt& s, const Buffer& b) {
  bool hit = false;
  for_each_stmt(s, [&](const Stmt& x) {
    switch (x->kind) {
      case StmtKind::Copy: hit |= as<CopyNode>(x)->dst.buffer == b; break;
      case StmtKind::Gemm: hit |= as<GemmNode>(x)->c.buffer == b; break;
      case StmtKind::Fill: hit |= as<FillNode>(x)->dst.buffer == b; break;
      case StmtKind::Reduce: hit |= as<ReduceNode>(x)->dst == b; break;
      case StmtKind::Store: hit |= as<StoreNode>(x)->buffer == b; break;
      case StmtKind::Seq: case StmtKind::For: case StmtKind::If: case StmtKind::Let:
      case StmtKind::Alloc: case StmtKind::CoreScope: case StmtKind::Sync: break;  // no tile write
    }
  });
  return hit;
}

// The whole of a global tensor of constant shape (its region at 0 with the tensor's extents)?
bool whole_tensor(const Region& r) {
  auto shape = r.buffer->const_shape();
  if (r.buffer->scope != Scope::global || !shape || r.starts.size() != shape->size()) return false;
  for (size_t d = 0; d < shape->size(); ++d) {
    auto st = as_const_int(r.starts[d]), ex = as_const_int(r.extents[d]);
    if (!st || *st != 0 || !ex || *ex != (*shape)[d]) return false;
  }
  return true;
}

// Does statement s read buffer b other than by a load (a copy, gemm or reduce taking it whole)?
bool reads_as_tile(const Stmt& s, const Buffer& b) {
  bool hit = false;
  for_each_stmt(s, [&](const Stmt& x) {
    switch (x->kind) {
      case StmtKind::Copy: hit |= as<CopyNode>(x)->src.buffer == b; break;
      case StmtKind::Gemm: hit |= as<GemmNode>(x)->a.buffer == b || as<GemmNode>(x)->b.buffer == b; break;
      case StmtKind::Reduce: hit |= as<ReduceNode>(x)->src == b; break;
      default: break;
    }
  });
  return hit;
}

// Does statement s load buffer b at an index the range analysis does not prove inside b (check_bounds'
// unproved accesses: a gather `u[idx[i]]`, a scalar parameter `u[i, n]`, a symbolic bound)? Such a load
// of a tile is bounds-checked against the tile's extents at run time; the global tensor the tile would
// alias is not checked in the same way, so such a tile keeps its copy (hunt30: `y[i] = x[i, n]` with n = 8
// of an 8-column tile read the tensor's next row, no error).
bool unproved_load(const Stmt& s, const Buffer& b, const std::unordered_set<const void*>& unproved) {
  bool hit = false;
  for_each_expr(s, [&](const Expr& e) {
    hit |= e && e->kind == ExprKind::Load && as<LoadNode>(e)->buffer == b && unproved.count(e.get());
  });
  return hit;
}

// The copy's destination when body[i] is such a copy (alias_tile_copies.h), else null.
const Buffer* aliasable(const Kernel& k, const std::vector<Stmt>& body, size_t i,
                        const std::unordered_set<const void*>& global_written,
                        const std::unordered_set<const void*>& unproved) {
  if (body[i]->kind != StmtKind::Copy) return nullptr;
  const auto& c = *as<CopyNode>(body[i]);
  const Buffer& t = c.src.buffer;
  const Buffer& u = c.dst.buffer;
  const bool global = t->scope == Scope::global;  // a whole tensor the kernel never writes
  if (c.atomic || t == u || t->dtype != u->dtype || !(global ? whole_tensor(c.src) : whole_tile(c.src)) ||
      !whole_tile(c.dst) || *t->const_shape() != *u->const_shape() || (global && global_written.count(t.get())))
    return nullptr;
  size_t last = i;
  std::unordered_set<const StmtNode*> readers;
  for (size_t j = i + 1; j < body.size(); ++j)
    if (references(body[j], u)) {
      if (writes(body[j], u) || (global && (reads_as_tile(body[j], u) || unproved_load(body[j], u, unproved)))) return nullptr;
      readers.insert(body[j].get());
      last = j;
    }
  std::unordered_set<const StmtNode*> allowed = readers;
  allowed.insert(body[i].get());
  bool param = false;
  for (const auto& p : k->params) param |= p.buffer == u;
  if (readers.empty() || param || referenced_except(k, allowed, u)) return nullptr;
  for (size_t j = i + 1; j <= last; ++j)
    if (writes(body[j], t)) return nullptr;
  return &u;
}

}  // namespace

Kernel alias_tile_copies(const Kernel& k) {
  std::unordered_map<const void*, Buffer> rename;  // u -> t
  std::unordered_set<const StmtNode*> drop;        // the copies and u's allocations
  std::unordered_set<const void*> kept;            // the t's: not renamed themselves
  const std::unordered_set<const void*> global_written = globals_written(k);
  std::unordered_set<const void*> unproved;
  try {
    unproved = transform::check_bounds(k);
  } catch (const Error&) {
    return k;  // an access out of bounds for certain: the code generator reports it at its line
  }
  for_each_seq(k, [&](const SeqNode& seq, const ForNode*) {
    for (size_t i = 0; i < seq.body.size(); ++i)
      if (const Buffer* u = aliasable(k, seq.body, i, global_written, unproved);
          u && !rename.count(u->get()) && !kept.count(u->get())) {
        const Buffer& t = as<CopyNode>(seq.body[i])->src.buffer;
        if (rename.count(t.get())) continue;  // one step at a time: t is itself renamed
        rename.emplace(u->get(), t);
        kept.insert(t.get());
        drop.insert(seq.body[i].get());
      }
  });
  if (rename.empty()) return k;
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind == StmtKind::Alloc && rename.count(as<AllocNode>(s)->buffer.get())) drop.insert(s.get());
  });
  struct M : Mutator {
    const std::unordered_map<const void*, Buffer>& rename;
    const std::unordered_set<const StmtNode*>& drop;
    M(const std::unordered_map<const void*, Buffer>& r, const std::unordered_set<const StmtNode*>& d)
        : rename(r), drop(d) {}
    using Mutator::mutate;
    Stmt mutate(const Stmt& s) override {
      if (s && drop.count(s.get())) return nullptr;
      Stmt m = Mutator::mutate(s);
      if (m && m != s)
        for (const auto& a : s->annotations) m = with_annotation(m, a);
      return m;
    }
    Buffer mutate_buffer(const Buffer& b) override {
      auto it = rename.find(b.get());
      return it == rename.end() ? b : it->second;
    }
  } mut(rename, drop);
  return mut.mutate_kernel(k);
}

}  // namespace tw::cpu
