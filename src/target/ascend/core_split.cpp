#include "target/ascend/core_split.h"

#include <algorithm>
#include <set>

#include "ir/functor.h"

namespace tw::ascend {

void TileAccess::visit(const ir::Expr& e) {
  if (e && e->kind == ir::ExprKind::Load) reads.insert(ir::as<ir::LoadNode>(e)->buffer.get());
  ir::Visitor::visit(e);
}

void TileAccess::visit(const ir::Stmt& s) {
  if (!s) return;
  using ir::StmtKind;
  switch (s->kind) {
    case StmtKind::Store: writes.insert(ir::as<ir::StoreNode>(s)->buffer.get()); break;
    case StmtKind::Copy:
      reads.insert(ir::as<ir::CopyNode>(s)->src.buffer.get());
      writes.insert(ir::as<ir::CopyNode>(s)->dst.buffer.get());
      break;
    case StmtKind::Gemm: {
      auto* g = ir::as<ir::GemmNode>(s);
      reads.insert(g->a.buffer.get());
      reads.insert(g->b.buffer.get());
      writes.insert(g->c.buffer.get());
      if (!g->clear) reads.insert(g->c.buffer.get());
      break;
    }
    case StmtKind::Fill: writes.insert(ir::as<ir::FillNode>(s)->dst.buffer.get()); break;
    case StmtKind::Reduce: {
      auto* r = ir::as<ir::ReduceNode>(s);
      reads.insert(r->src.get());
      writes.insert(r->dst.get());
      if (!r->clear) reads.insert(r->dst.get());
      break;
    }
    case StmtKind::Seq:
    case StmtKind::For:
    case StmtKind::If:
    case StmtKind::Let:
    case StmtKind::Alloc:
    case StmtKind::CoreScope:
    case StmtKind::Sync: break;  // their children are visited below
  }
  ir::Visitor::visit(s);
}

bool is_map(const ir::Stmt& s) {
  return s->kind == ir::StmtKind::For && ir::as<ir::ForNode>(s)->for_kind == ir::ForKind::parallel;
}

std::vector<ir::Stmt> flat_body(const ir::Stmt& body) {
  std::vector<ir::Stmt> flat;
  for (const auto& c : ir::stmts_of(body)) {
    if (c->kind == ir::StmtKind::Seq)
      for (const auto& d : ir::as<ir::SeqNode>(c)->body) flat.push_back(d);
    else
      flat.push_back(c);
  }
  return flat;
}

bool is_cross_sync(const ir::Stmt& x, ir::SyncKind k, const std::unordered_set<int>& ids) {
  if (x->kind != ir::StmtKind::Sync) return false;
  auto* y = ir::as<ir::SyncNode>(x);
  auto id = ir::as_const_int(y->id);
  return y->sync == k && id && ids.count(static_cast<int>(*id));
}

std::unordered_set<int> cross_flag_ids(const ir::Stmt& s, ir::SyncKind k, ir::AscendPipe p) {
  std::unordered_set<int> ids;
  ir::for_each_stmt(s, [&](const ir::Stmt& x) {
    if (x->kind != ir::StmtKind::Sync) return;
    auto* y = ir::as<ir::SyncNode>(x);
    auto id = ir::as_const_int(y->id);
    if (y->sync == k && y->pipe == p && id) ids.insert(static_cast<int>(*id));
  });
  return ids;
}

bool reuses_cross_ids(const std::vector<ir::Stmt>& flat) {
  std::set<std::pair<int, int64_t>> seen;  // (kind, id) of the statements before
  for (const auto& s : flat) {
    std::set<std::pair<int, int64_t>> mine;
    ir::for_each_stmt(s, [&](const ir::Stmt& x) {
      if (x->kind != ir::StmtKind::Sync) return;
      auto* y = ir::as<ir::SyncNode>(x);
      auto id = ir::as_const_int(y->id);
      if (id && (y->sync == ir::SyncKind::set_cross_flag || y->sync == ir::SyncKind::wait_cross_flag))
        mine.insert({static_cast<int>(y->sync), *id});
    });
    for (const auto& k : mine)
      if (!seen.insert(k).second) return true;
  }
  return false;
}

ir::Kernel rewrite_core_scope(const ir::Kernel& k, ir::CoreKind core, const CoreBodyRewrite& f) {
  if (!k->is_npu()) return k;
  std::vector<ir::Stmt> items = ir::stmts_of(k->body);
  size_t first_scope = items.size(), at = items.size();
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i]->kind != ir::StmtKind::CoreScope) continue;
    first_scope = std::min(first_scope, i);
    if (ir::as<ir::CoreScopeNode>(items[i])->core == core) at = i;
  }
  if (at == items.size()) return k;
  std::vector<ir::Stmt> allocs;
  const auto* scope = ir::as<ir::CoreScopeNode>(items[at]);
  items[at] = std::make_shared<ir::CoreScopeNode>(core, f(scope->body, allocs), items[at]->span);
  items.insert(items.begin() + static_cast<long>(first_scope), allocs.begin(), allocs.end());
  ir::Stmt body = std::make_shared<ir::SeqNode>(std::move(items), k->body->span);
  return std::make_shared<ir::KernelNode>(k->name, k->params, k->block_vars, k->grid, body, k->span, k->sub_block_var);
}

}  // namespace tw::ascend
