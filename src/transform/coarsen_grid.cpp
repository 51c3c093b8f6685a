#include "transform/coarsen_grid.h"

#include <map>
#include <set>

#include "ir/functor.h"

namespace tw::transform {

namespace {

using namespace ir;

bool mentions(const Expr& e, const VarNode* v) {
  bool found = false;
  for_each_expr(e, [&](const Expr& x) { found |= x->kind == ExprKind::Var && x.get() == v; });
  return found;
}

bool is_const(const Expr& e, int64_t v) {
  auto c = as_const_int(e);
  return c && *c == v;
}

// Does the kernel qualify, and what do the merged blocks change? (See the header.)
struct Analysis {
  const VarNode* bx = nullptr;
  int64_t rows = -1;       // B: every tile's first dimension
  int64_t max_elems = 0;   // elements of the largest tile
  std::set<const BufferNode*> tiles;
  std::set<const VarNode*> row_vars;  // the row variable of every map
  std::vector<Buffer> tensors;        // tensors accessed at row bx * B

  // bx * B (bx when B is 1).
  bool is_row_offset(const Expr& e) const {
    if (rows == 1) return e->kind == ExprKind::Var && e.get() == bx;
    if (e->kind != ExprKind::Binary) return false;
    auto* b = as<BinaryNode>(e);
    if (b->op != BinOp::Mul) return false;
    auto var_times = [&](const Expr& v, const Expr& c) { return v->kind == ExprKind::Var && v.get() == bx && is_const(c, rows); };
    return var_times(b->a, b->b) || var_times(b->b, b->a);
  }

  bool is_whole_tile(const Region& r) const {
    if (!tiles.count(r.buffer.get())) return false;
    auto shape = *r.buffer->const_shape();
    for (size_t d = 0; d < shape.size(); ++d)
      if (!is_const(r.starts[d], 0) || !is_const(r.extents[d], shape[d])) return false;
    return true;
  }

  // A region of a tensor holding the rows of this block, the same shape as `tile`.
  bool is_block_rows(const Region& r, const Buffer& tile) {
    if (r.buffer->scope != Scope::global || r.starts.size() != static_cast<size_t>(tile->ndim())) return false;
    auto shape = *tile->const_shape();
    if (!is_row_offset(r.starts[0])) return false;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!is_const(r.extents[d], shape[d])) return false;
      if (d > 0 && mentions(r.starts[d], bx)) return false;
    }
    tensors.push_back(r.buffer);
    return true;
  }

  // An expression inside a map over rows `row`: tile accesses index their first dimension
  // with `row` only; no tensor accesses, no bx.
  bool map_expr_ok(const Expr& e, const VarNode* row) const {
    switch (e->kind) {
      case ExprKind::IntImm:
      case ExprKind::FloatImm: return true;
      case ExprKind::Var: return e.get() != row && e.get() != bx;
      case ExprKind::Binary: return map_expr_ok(as<BinaryNode>(e)->a, row) && map_expr_ok(as<BinaryNode>(e)->b, row);
      case ExprKind::Unary: return map_expr_ok(as<UnaryNode>(e)->a, row);
      case ExprKind::Cast: return map_expr_ok(as<CastNode>(e)->value, row);
      case ExprKind::Select: {
        auto* s = as<SelectNode>(e);
        return map_expr_ok(s->cond, row) && map_expr_ok(s->t, row) && map_expr_ok(s->f, row);
      }
      case ExprKind::Call:
        for (const auto& a : as<CallNode>(e)->args)
          if (!map_expr_ok(a, row)) return false;
        return true;
      case ExprKind::Load: {
        auto* l = as<LoadNode>(e);
        return tiles.count(l->buffer.get()) && indices_ok(l->indices, row);
      }
    }
    return false;
  }

  bool indices_ok(const std::vector<Expr>& idx, const VarNode* row) const {
    if (idx.empty() || idx[0]->kind != ExprKind::Var || idx[0].get() != row) return false;
    for (size_t d = 1; d < idx.size(); ++d)
      if (!map_expr_ok(idx[d], row)) return false;
    return true;
  }

  bool map_body_ok(const Stmt& s, const VarNode* row) const {
    switch (s->kind) {
      case StmtKind::Seq:
        for (const auto& c : as<SeqNode>(s)->body)
          if (!map_body_ok(c, row)) return false;
        return true;
      case StmtKind::For: {
        auto* f = as<ForNode>(s);
        return f->for_kind == ForKind::parallel && map_expr_ok(f->min, row) && map_expr_ok(f->extent, row) &&
               map_body_ok(f->body, row);
      }
      case StmtKind::Store: {
        auto* st = as<StoreNode>(s);
        return tiles.count(st->buffer.get()) && indices_ok(st->indices, row) && map_expr_ok(st->value, row);
      }
      case StmtKind::If: case StmtKind::Let: case StmtKind::Alloc: case StmtKind::Copy: case StmtKind::Gemm:
      case StmtKind::Fill: case StmtKind::Reduce: case StmtKind::CoreScope: case StmtKind::Sync:
        return false;
    }
    return false;  // not reached: the switch lists every enumerator
  }

  bool stmt_ok(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::Seq:
        for (const auto& c : as<SeqNode>(s)->body)
          if (!stmt_ok(c)) return false;
        return true;
      case StmtKind::Alloc: return true;  // checked before the walk
      case StmtKind::Copy: {
        auto* c = as<CopyNode>(s);
        bool src_tile = tiles.count(c->src.buffer.get()), dst_tile = tiles.count(c->dst.buffer.get());
        if (src_tile && dst_tile) return is_whole_tile(c->src) && is_whole_tile(c->dst);
        if (src_tile) return is_whole_tile(c->src) && is_block_rows(c->dst, c->src.buffer);
        if (dst_tile) return is_whole_tile(c->dst) && is_block_rows(c->src, c->dst.buffer);
        return false;
      }
      case StmtKind::Fill: {
        auto* f = as<FillNode>(s);
        return is_whole_tile(f->dst) && map_expr_ok(f->value, nullptr) && !mentions(f->value, bx);
      }
      case StmtKind::Reduce: {
        auto* r = as<ReduceNode>(s);
        return r->axis != 0 && tiles.count(r->src.get()) && tiles.count(r->dst.get());
      }
      case StmtKind::For: {
        auto* f = as<ForNode>(s);
        if (f->for_kind != ForKind::parallel || !is_const(f->min, 0) || !is_const(f->extent, rows)) return false;
        row_vars.insert(f->var.get());
        return map_body_ok(f->body, f->var.get());
      }
      case StmtKind::If: case StmtKind::Let: case StmtKind::Store: case StmtKind::Gemm:
      case StmtKind::CoreScope: case StmtKind::Sync:
        return false;
    }
    return false;  // not reached: the switch lists every enumerator
  }
};

// The grid covers exactly the rows of tensor dimension `d` in blocks of `rows`.
bool grid_covers(const Expr& grid, const Expr& d, int64_t rows) {
  auto g = as_const_int(grid), n = as_const_int(d);
  if (g && n) return *g == (*n + rows - 1) / rows;
  if (rows == 1) return structural_equal(grid, d);
  if (grid->kind != ExprKind::Binary) return false;
  auto* b = as<BinaryNode>(grid);
  return b->op == BinOp::CeilDiv && is_const(b->b, rows) && structural_equal(b->a, d);
}

class Widen : public Mutator {
 public:
  Widen(const Analysis& a, int64_t merged_rows, Var bx) : a_(a), rows_(merged_rows), bx_(std::move(bx)) {}

  Buffer mutate_buffer(const Buffer& b) override {
    if (!a_.tiles.count(b.get())) return b;
    auto it = widened_.find(b.get());
    if (it != widened_.end()) return it->second;
    auto shape = b->shape;
    shape[0] = int_imm(rows_, shape[0]->dtype, shape[0]->span);
    return widened_[b.get()] = buffer(b->name, b->dtype, shape, b->scope, b->span);
  }

  Region mutate_region(const Region& r) override {
    Region out{mutate_buffer(r.buffer), r.starts, r.extents};
    out.extents[0] = int_imm(rows_, r.extents[0]->dtype, r.extents[0]->span);
    if (r.buffer->scope == Scope::global)  // bx * B (checked) -> bx * B * F
      out.starts[0] = binary(BinOp::Mul, bx_, int_imm(rows_, bx_->dtype), r.starts[0]->span);
    return out;
  }

  Stmt mutate(const Stmt& s) override {
    if (s && s->kind == StmtKind::For && a_.row_vars.count(as<ForNode>(s)->var.get())) {
      auto* f = as<ForNode>(s);
      return std::make_shared<ForNode>(f->var, f->min, int_imm(rows_, f->extent->dtype, f->extent->span), f->for_kind,
                                       f->num_stages, Mutator::mutate(f->body), f->span);
    }
    return Mutator::mutate(s);
  }
  using Mutator::mutate;

 private:
  const Analysis& a_;
  int64_t rows_;
  Var bx_;
  std::map<const BufferNode*, Buffer> widened_;
};

// --- Column blocks merged into whole rows -----------------------------------------------------

// A grid axis bx over column blocks of width W (the reduce_mid pattern: Y[a, c] = sum_b X[a, b, c],
// grid (ceildiv(C, W), A), each program a (B, W) tile of X): every tile's last dimension is W, and
// every tensor is touched only by copies between a whole tile and the region whose last dimension
// starts at bx * W (W long) and whose other starts are free of bx.
struct ColumnAnalysis {
  const VarNode* bx = nullptr;
  int64_t width = -1;  // W: every tile's last dimension
  std::set<const BufferNode*> tiles;
  std::vector<Buffer> tensors;
  std::set<const VarNode*> column_vars;  // the column variable of every map

  bool is_column_offset(const Expr& e) const {
    if (width == 1) return e->kind == ExprKind::Var && e.get() == bx;
    if (e->kind != ExprKind::Binary) return false;
    auto* b = as<BinaryNode>(e);
    auto var_times = [&](const Expr& v, const Expr& c) { return v->kind == ExprKind::Var && v.get() == bx && is_const(c, width); };
    return b->op == BinOp::Mul && (var_times(b->a, b->b) || var_times(b->b, b->a));
  }

  bool is_whole_tile(const Region& r) const {
    if (!tiles.count(r.buffer.get())) return false;
    auto shape = *r.buffer->const_shape();
    for (size_t d = 0; d < shape.size(); ++d)
      if (!is_const(r.starts[d], 0) || !is_const(r.extents[d], shape[d])) return false;
    return true;
  }

  bool is_block_columns(const Region& r) {
    if (r.buffer->scope != Scope::global || r.starts.empty() || r.starts.size() != r.buffer->shape.size()) return false;
    const size_t last = r.starts.size() - 1;
    if (!is_column_offset(r.starts[last]) || !is_const(r.extents[last], width)) return false;
    for (size_t d = 0; d < last; ++d)
      if (mentions(r.starts[d], bx) || mentions(r.extents[d], bx)) return false;
    tensors.push_back(r.buffer);
    return true;
  }

  bool stmt_ok(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::Seq:
        for (const auto& c : as<SeqNode>(s)->body)
          if (!stmt_ok(c)) return false;
        return true;
      case StmtKind::Alloc: return true;  // checked before the walk
      case StmtKind::Copy: {
        auto* c = as<CopyNode>(s);
        if (c->atomic) return false;
        bool src_tile = tiles.count(c->src.buffer.get()), dst_tile = tiles.count(c->dst.buffer.get());
        if (src_tile && dst_tile) return is_whole_tile(c->src) && is_whole_tile(c->dst);
        if (src_tile) return is_whole_tile(c->src) && is_block_columns(c->dst);
        if (dst_tile) return is_whole_tile(c->dst) && is_block_columns(c->src);
        return false;
      }
      case StmtKind::Fill: {
        auto* f = as<FillNode>(s);
        return is_whole_tile(f->dst) && !mentions(f->value, bx);
      }
      case StmtKind::Reduce: {  // over a leading axis: the columns stay the last axis
        auto* r = as<ReduceNode>(s);
        return tiles.count(r->src.get()) && tiles.count(r->dst.get()) && r->src->ndim() >= 2 &&
               r->axis >= 0 && r->axis < r->src->ndim() - 1;
      }
      case StmtKind::For: {
        auto* f = as<ForNode>(s);
        if (f->for_kind == ForKind::parallel) return map_ok(s);
        // A loop every block runs alike (bounds free of bx): its body, checked as above, is
        // per column, so running it over the merged columns keeps each column's steps in order.
        return !mentions(f->min, bx) && !mentions(f->extent, bx) && stmt_ok(f->body);
      }
      case StmtKind::Let: {  // the same value in every block (such a loop over one step becomes one)
        bool loads = false;
        for_each_expr(as<LetNode>(s)->value, [&](const Expr& x) { loads |= x->kind == ExprKind::Load; });
        return !loads && !mentions(as<LetNode>(s)->value, bx);
      }
      case StmtKind::If: case StmtKind::Store: case StmtKind::Gemm:
      case StmtKind::CoreScope: case StmtKind::Sync:
        return false;
    }
    return false;  // not reached: the switch lists every enumerator
  }

  // A map (a nest of parallel loops) that is per column: one of its loops, over 0..W, is the
  // column variable c; every tile access has c as its last index and c appears nowhere else (a
  // value computed from c would change with the merged columns); no tensor accesses, no bx.
  bool map_ok(const Stmt& s) {
    const VarNode* col = nullptr;  // the last index of the first store
    for_each_stmt(s, [&](const Stmt& x) {
      if (!col && x->kind == StmtKind::Store) {
        const auto& idx = as<StoreNode>(x)->indices;
        if (!idx.empty() && idx.back()->kind == ExprKind::Var) col = as<VarNode>(idx.back());
      }
    });
    if (!col || !map_stmt_ok(s, col, false)) return false;
    column_vars.insert(col);
    return true;
  }

  bool map_stmt_ok(const Stmt& s, const VarNode* col, bool col_bound) const {
    switch (s->kind) {
      case StmtKind::Seq:
        for (const auto& c : as<SeqNode>(s)->body)
          if (!map_stmt_ok(c, col, col_bound)) return false;
        return true;
      case StmtKind::For: {
        auto* f = as<ForNode>(s);
        if (f->for_kind != ForKind::parallel || !map_expr_ok(f->min, col) || !map_expr_ok(f->extent, col)) return false;
        if (f->var.get() == col) {
          if (!is_const(f->min, 0) || !is_const(f->extent, width)) return false;
          col_bound = true;
        }
        return map_stmt_ok(f->body, col, col_bound);
      }
      case StmtKind::Store: {
        auto* st = as<StoreNode>(s);
        return col_bound && tiles.count(st->buffer.get()) && indices_ok(st->indices, col) && map_expr_ok(st->value, col);
      }
      case StmtKind::If: case StmtKind::Let: case StmtKind::Alloc: case StmtKind::Copy: case StmtKind::Gemm:
      case StmtKind::Fill: case StmtKind::Reduce: case StmtKind::CoreScope: case StmtKind::Sync:
        return false;
    }
    return false;  // not reached: the switch lists every enumerator
  }

  bool indices_ok(const std::vector<Expr>& idx, const VarNode* col) const {
    if (idx.empty() || idx.back()->kind != ExprKind::Var || idx.back().get() != col) return false;
    for (size_t d = 0; d + 1 < idx.size(); ++d)
      if (!map_expr_ok(idx[d], col)) return false;
    return true;
  }

  bool map_expr_ok(const Expr& e, const VarNode* col) const {
    switch (e->kind) {
      case ExprKind::IntImm:
      case ExprKind::FloatImm: return true;
      case ExprKind::Var: return e.get() != col && e.get() != bx;
      case ExprKind::Binary: return map_expr_ok(as<BinaryNode>(e)->a, col) && map_expr_ok(as<BinaryNode>(e)->b, col);
      case ExprKind::Unary: return map_expr_ok(as<UnaryNode>(e)->a, col);
      case ExprKind::Cast: return map_expr_ok(as<CastNode>(e)->value, col);
      case ExprKind::Select: {
        auto* s = as<SelectNode>(e);
        return map_expr_ok(s->cond, col) && map_expr_ok(s->t, col) && map_expr_ok(s->f, col);
      }
      case ExprKind::Call:
        for (const auto& a : as<CallNode>(e)->args)
          if (!map_expr_ok(a, col)) return false;
        return true;
      case ExprKind::Load: {
        auto* l = as<LoadNode>(e);
        return tiles.count(l->buffer.get()) && indices_ok(l->indices, col);
      }
    }
    return false;
  }
};

class WidenColumns : public Mutator {
 public:
  WidenColumns(const ColumnAnalysis& a, int64_t merged) : a_(a), width_(merged) {}

  Buffer mutate_buffer(const Buffer& b) override {
    if (!a_.tiles.count(b.get())) return b;
    auto it = widened_.find(b.get());
    if (it != widened_.end()) return it->second;
    auto shape = b->shape;
    shape.back() = int_imm(width_, shape.back()->dtype, shape.back()->span);
    return widened_[b.get()] = buffer(b->name, b->dtype, shape, b->scope, b->span);
  }

  Region mutate_region(const Region& r) override {
    Region out{mutate_buffer(r.buffer), r.starts, r.extents};
    out.extents.back() = int_imm(width_, r.extents.back()->dtype, r.extents.back()->span);
    if (r.buffer->scope == Scope::global)  // bx * W (checked) -> 0: the one merged block
      out.starts.back() = int_imm(0, r.starts.back()->dtype, r.starts.back()->span);
    return out;
  }

  Stmt mutate(const Stmt& s) override {
    if (s && s->kind == StmtKind::For && a_.column_vars.count(as<ForNode>(s)->var.get())) {
      auto* f = as<ForNode>(s);
      return std::make_shared<ForNode>(f->var, f->min, int_imm(width_, f->extent->dtype, f->extent->span), f->for_kind,
                                       f->num_stages, mutate(f->body), f->span);
    }
    return Mutator::mutate(s);
  }
  using Mutator::mutate;

 private:
  const ColumnAnalysis& a_;
  int64_t width_;
  std::map<const BufferNode*, Buffer> widened_;
};

ir::Kernel coarsen_columns(const ir::Kernel& k) {
  if (k->block_vars.size() < 2 || k->is_npu()) return k;
  // The tiles: constant shapes sharing their last dimension W.
  ColumnAnalysis base;
  int64_t tile_bytes = 0;
  bool tiles_ok = true;
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind != StmtKind::Alloc) return;
    const auto& b = as<AllocNode>(s)->buffer;
    auto shape = b->const_shape();
    if (!shape || shape->empty() || shape->back() < 1 || (base.width >= 0 && shape->back() != base.width)) {
      tiles_ok = false;
      return;
    }
    base.width = shape->back();
    int64_t n = b->dtype.bytes();
    for (int64_t d : *shape) n *= d;
    tile_bytes += n;
    base.tiles.insert(b.get());
  });
  if (!tiles_ok || base.tiles.empty()) return k;

  for (size_t axis = 0; axis < k->block_vars.size(); ++axis) {
    auto g = as_const_int(k->grid[axis]);
    if (!g || *g < 2) continue;
    int64_t programs = 1;  // after merging: the other axes
    bool programs_known = true;
    for (size_t o = 0; o < k->grid.size(); ++o) {
      if (o == axis) continue;
      auto e = as_const_int(k->grid[o]);
      if (!e) programs_known = false;
      else programs *= *e;
    }
    if (!programs_known || programs < kCoarsenMinPrograms) continue;
    const int64_t merged = *g * base.width;
    if (tile_bytes * *g > kCoarsenMaxColumnTileBytes) continue;
    ColumnAnalysis a = base;
    a.bx = k->block_vars[axis].get();
    if (!a.stmt_ok(k->body) || a.tensors.empty()) continue;
    bool rows_ok = true;  // the blocks cover whole rows of at most kCoarsenMaxRowBytes
    for (const auto& t : a.tensors) {
      auto d = as_const_int(t->shape.back());
      rows_ok &= d && (*d + a.width - 1) / a.width == *g && *d * t->dtype.bytes() <= kCoarsenMaxRowBytes;
    }
    if (!rows_ok) continue;
    WidenColumns w(a, merged);
    Stmt body = w.mutate(k->body);
    auto grid = k->grid;
    grid[axis] = int_imm(1, grid[axis]->dtype, grid[axis]->span);
    return std::make_shared<KernelNode>(k->name, k->params, k->block_vars, grid, body, k->span, k->sub_block_var);
  }
  return k;
}

}  // namespace

ir::Kernel coarsen_grid(const ir::Kernel& k) {
  if (k->block_vars.size() != 1 || k->is_npu()) return coarsen_columns(k);
  Analysis a;
  a.bx = k->block_vars[0].get();
  bool tiles_ok = true;
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind != StmtKind::Alloc) return;
    const auto& b = as<AllocNode>(s)->buffer;
    auto shape = b->const_shape();
    if (!shape || shape->empty() || (a.rows >= 0 && (*shape)[0] != a.rows) || (*shape)[0] < 1) {
      tiles_ok = false;
      return;
    }
    a.rows = (*shape)[0];
    int64_t n = 1;
    for (int64_t d : *shape) n *= d;
    a.max_elems = std::max(a.max_elems, n);
    a.tiles.insert(b.get());
  });
  if (!tiles_ok || a.tiles.empty() || a.max_elems > kCoarsenMaxTileElems || a.max_elems < 1) return k;
  if (!a.stmt_ok(k->body) || a.tensors.empty()) return k;
  for (const auto& t : a.tensors)
    if (!grid_covers(k->grid[0], t->shape[0], a.rows)) return k;

  int64_t factor = 1;
  while (factor * 2 <= kCoarsenMaxFactor && a.max_elems * factor * 2 <= kCoarsenMergedTileElems) factor *= 2;
  if (auto g = as_const_int(k->grid[0]))
    while (factor > 1 && factor / 2 >= *g) factor /= 2;  // no more merged rows than the grid has
  if (factor == 1) return k;

  const int64_t merged = a.rows * factor;
  Widen w(a, merged, k->block_vars[0]);
  Stmt body = w.mutate(k->body);
  const Expr& d = a.tensors[0]->shape[0];
  Expr grid;
  if (auto n = as_const_int(d))
    grid = int_imm((*n + merged - 1) / merged, k->grid[0]->dtype, k->grid[0]->span);
  else
    grid = binary(BinOp::CeilDiv, d, int_imm(merged, d->dtype), k->grid[0]->span);
  return std::make_shared<KernelNode>(k->name, k->params, k->block_vars, std::vector<Expr>{grid}, body, k->span,
                                      k->sub_block_var);
}

}  // namespace tw::transform
