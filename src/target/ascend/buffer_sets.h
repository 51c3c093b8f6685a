// The buffers Tile IR statements read and write: shared by the passes that regroup a block's body
// (split_rows, split_cols).
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "ir/functor.h"
#include "tilewright/ir.h"

namespace tw::ascend {

using BufSet = std::set<const ir::BufferNode*>;

inline bool meets(const BufSet& a, const BufSet& b) {
  for (auto* x : a)
    if (b.count(x)) return true;
  return false;
}

// A set's buffers by name, for a message naming the first that fails: a BufSet's own order is
// the buffers' addresses, which differ from process to process (h-determ35).
inline std::vector<const ir::BufferNode*> by_name(const BufSet& s) {
  std::vector<const ir::BufferNode*> v(s.begin(), s.end());
  std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return v;
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

// The buffers a statement reads and writes (stores, copy and fill destinations, reduction results,
// gemm results write; loads, copy sources, atomic-add destinations, merged reductions, gemm operands
// and accumulating gemm results read); any other
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
      case ir::StmtKind::Gemm: {
        auto* g = ir::as<ir::GemmNode>(t);
        reads.insert(g->a.buffer.get());
        reads.insert(g->b.buffer.get());
        writes.insert(g->c.buffer.get());
        if (!g->clear) reads.insert(g->c.buffer.get());
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

// A body whose top level holds an `if` whose condition is the same for every row and column of the
// block (it reads no buffer the body writes and no variable of a let whose value does): the
// statements before and after it go into each branch, the allocs and the lets whose values read
// nothing the body writes stay in front: [allocs, lets; A; if c {T} else {E}; B] -> front [allocs,
// lets], branches {A; T; B} and {A; E; B} (no else: {A; B}). nullopt when the first `if` at the
// body's top level is not such an `if`, or there is none. (split_cols splits each branch.)
struct PeeledIf {
  std::vector<ir::Stmt> front;
  ir::Expr cond;
  std::vector<ir::Stmt> then_body, else_body;
  ir::Span span;
};
inline std::optional<PeeledIf> peel_uniform_if(const ir::Stmt& body) {
  BufSet reads, written;
  reads_writes(body, reads, written);
  std::set<const ir::VarNode*> varying;  // variables of lets whose values read what the body writes
  auto uniform = [&](const ir::Expr& e) {
    bool ok = true;
    ir::for_each_expr(e, [&](const ir::Expr& x) {
      if (x->kind == ir::ExprKind::Load && written.count(static_cast<const ir::LoadNode*>(x.get())->buffer.get())) ok = false;
      if (x->kind == ir::ExprKind::Var && varying.count(static_cast<const ir::VarNode*>(x.get()))) ok = false;
    });
    return ok;
  };
  PeeledIf out;
  std::vector<ir::Stmt> before, after;
  const ir::IfNode* found = nullptr;
  for (const auto& s : ir::stmts_of(body)) {
    if (found) {
      after.push_back(s);
    } else if (s->kind == ir::StmtKind::Alloc) {
      out.front.push_back(s);
    } else if (s->kind == ir::StmtKind::Let) {
      auto* l = ir::as<ir::LetNode>(s);
      if (uniform(l->value)) {
        out.front.push_back(s);
      } else {
        varying.insert(l->var.get());
        before.push_back(s);
      }
    } else if (s->kind == ir::StmtKind::If) {
      if (!uniform(ir::as<ir::IfNode>(s)->cond)) return std::nullopt;
      found = ir::as<ir::IfNode>(s);
    } else {
      before.push_back(s);
    }
  }
  if (!found) return std::nullopt;
  out.cond = found->cond;
  out.span = found->span;
  for (auto* branch : {&out.then_body, &out.else_body}) {
    *branch = before;
    const ir::Stmt& b = branch == &out.then_body ? found->then_body : found->else_body;
    if (b)
      for (const auto& s : ir::stmts_of(b)) branch->push_back(s);
    branch->insert(branch->end(), after.begin(), after.end());
  }
  return out;
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
