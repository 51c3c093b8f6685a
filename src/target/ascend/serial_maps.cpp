// serial_maps: serial loop nests that are element-wise maps -> T.Parallel (see serial_maps.h).
#include "target/ascend/serial_maps.h"

#include <set>

#include "ir/functor.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

bool at_vars(const std::vector<ir::Expr>& idx, const std::vector<ir::Var>& vars) {
  if (idx.size() != vars.size()) return false;
  for (size_t d = 0; d < idx.size(); ++d)
    if (idx[d].get() != vars[d].get()) return false;
  return true;
}

// Indices that are some of the nest's variables in nest order (t[i, j], a row vector v[i], a column
// vector w[j]): the reads a vector map broadcasts.
bool at_some_vars(const std::vector<ir::Expr>& idx, const std::vector<ir::Var>& vars) {
  size_t k = 0;
  for (const auto& x : idx) {
    while (k < vars.size() && x.get() != vars[k].get()) ++k;
    if (k++ == vars.size()) return false;
  }
  return !idx.empty();
}

// A nest of serial loops from start 0 with constant extents that is an element-wise map
// (serial_maps.h: stores at the nest's variables, reads of the written tiles there too).
bool is_map_nest(const ir::ForNode* f) {
  std::vector<ir::Var> vars;
  ir::Stmt body;
  for (const ir::ForNode* l = f;;) {
    auto m = ir::as_const_int(l->min);
    if (l->for_kind != ir::ForKind::serial || !ir::as_const_int(l->extent) || !m || *m != 0) return false;
    vars.push_back(l->var);
    auto inner = ir::stmts_of(l->body);
    if (inner.size() == 1 && inner[0]->kind == ir::StmtKind::For) {
      l = ir::as<ir::ForNode>(inner[0]);
      continue;
    }
    body = l->body;
    break;
  }
  std::set<const ir::BufferNode*> written;
  bool stores = false;
  for (const auto& s : ir::stmts_of(body)) {
    if (s->kind == ir::StmtKind::Let) continue;
    if (s->kind != ir::StmtKind::Store) return false;
    auto* st = ir::as<ir::StoreNode>(s);
    if (st->buffer->scope == ir::Scope::global || !at_vars(st->indices, vars)) return false;
    written.insert(st->buffer.get());
    stores = true;
  }
  bool ok = stores;
  ir::for_each_expr(body, [&](const ir::Expr& e) {
    if (e->kind != ir::ExprKind::Load) return;
    auto* ld = static_cast<const ir::LoadNode*>(e.get());
    if (ld->buffer->scope == ir::Scope::global || !at_some_vars(ld->indices, vars) ||
        (written.count(ld->buffer.get()) && !at_vars(ld->indices, vars)))
      ok = false;
  });
  return ok;
}

struct ToParallel : ir::Mutator {
  using ir::Mutator::mutate;
  ir::Stmt mutate(const ir::Stmt& s) override {
    if (!s || s->kind != ir::StmtKind::For) return ir::Mutator::mutate(s);  // null: an if without else
    auto* f = ir::as<ir::ForNode>(s);
    if (!is_map_nest(f)) return ir::Mutator::mutate(s);
    return parallel(s);
  }
  static ir::Stmt parallel(const ir::Stmt& s) {
    if (s->kind != ir::StmtKind::For) return s;
    auto* f = ir::as<ir::ForNode>(s);
    return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, ir::ForKind::parallel, 0, parallel(f->body), s->span);
  }
};

}  // namespace

ir::Kernel serial_maps(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  return ToParallel{}.mutate_kernel(kernel);
}

}  // namespace tw::ascend
