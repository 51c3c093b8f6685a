// split_cols: a block's rows in column blocks when one row overflows UB (see split_cols.h).
#include "target/ascend/split_cols.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/functor.h"
#include "target/ascend/buffer_sets.h"
#include "target/ascend/pass_util.h"

namespace tw::ascend {

namespace {

using Buf = const ir::BufferNode*;

struct Item {
  enum Kind { Row, Def, Reduce, Store } kind = Row;
  ir::Stmt s;
  size_t pos = 0;
  BufSet reads, writes;  // every buffer (column tiles, other tiles, tensors)
  BufSet full;           // the column tiles it writes whole without reading them
};

// Rewrites a column statement for column blocks of `cb` columns starting at `off`.
struct ColRewrite : ir::Mutator {
  const std::map<Buf, ir::Buffer>& tiles;
  int64_t cb;
  ir::Expr off;
  const ir::VarNode* col = nullptr;  // a map's column variable
  ir::Var new_col;
  ColRewrite(const std::map<Buf, ir::Buffer>& t, int64_t cb_, ir::Expr o) : tiles(t), cb(cb_), off(std::move(o)) {}
  using ir::Mutator::mutate;
  bool is_col(const ir::Buffer& b) const { return tiles.count(b.get()) > 0; }
  ir::Buffer mutate_buffer(const ir::Buffer& b) override {
    auto it = tiles.find(b.get());
    return it == tiles.end() ? b : it->second;
  }
  std::vector<ir::Expr> col_indices(const std::vector<ir::Expr>& idx) {
    std::vector<ir::Expr> out;
    for (size_t d = 0; d + 1 < idx.size(); ++d) out.push_back(mutate(idx[d]));
    out.push_back(new_col);
    return out;
  }
  ir::Expr mutate(const ir::Expr& e) override {
    if (col && e.get() == col) return ir::binary(ir::BinOp::Add, new_col, off, e->span);
    if (col && e->kind == ir::ExprKind::Load) {
      auto* ld = static_cast<const ir::LoadNode*>(e.get());
      if (is_col(ld->buffer)) return ir::load(mutate_buffer(ld->buffer), col_indices(ld->indices), e->span);
    }
    return ir::Mutator::mutate(e);
  }
  ir::Stmt mutate(const ir::Stmt& s) override {
    if (!s) return s;
    if (col && s->kind == ir::StmtKind::Store) {
      auto* st = ir::as<ir::StoreNode>(s);
      if (is_col(st->buffer))
        return std::make_shared<ir::StoreNode>(mutate_buffer(st->buffer), col_indices(st->indices), mutate(st->value), s->span);
    }
    if (col && s->kind == ir::StmtKind::For && ir::as<ir::ForNode>(s)->var.get() == col) {
      auto* f = ir::as<ir::ForNode>(s);
      return std::make_shared<ir::ForNode>(new_col, f->min, C(cb), f->for_kind, f->num_stages, mutate(f->body), s->span);
    }
    return ir::Mutator::mutate(s);
  }
  ir::Region region(const ir::Region& r) {
    ir::Region out = r;
    if (is_col(r.buffer)) return ir::full_region(mutate_buffer(r.buffer));
    if (r.buffer->scope == ir::Scope::global) {
      const size_t d = r.extents.size() - 1;
      out.starts[d] = simp(ir::binary(ir::BinOp::Add, r.starts[d], off));
      out.extents[d] = C(cb);
    }
    return out;
  }
  // A column statement (checked by the analysis) in the block.
  ir::Stmt top(const ir::Stmt& s, const ir::VarNode* map_col) {
    switch (s->kind) {
      case ir::StmtKind::Copy: {
        auto* c = ir::as<ir::CopyNode>(s);
        return std::make_shared<ir::CopyNode>(region(c->src), region(c->dst), s->span, c->atomic);
      }
      case ir::StmtKind::Fill: {
        auto* f = ir::as<ir::FillNode>(s);
        return std::make_shared<ir::FillNode>(region(f->dst), f->value, s->span);
      }
      case ir::StmtKind::For: {
        col = map_col;
        new_col = ir::var(map_col->name, map_col->dtype, map_col->span);
        auto out = mutate(s);
        col = nullptr;
        return out;
      }
      default: return s;
    }
  }
};

ir::Kernel split_cols_straight(const ir::Kernel& kernel, int64_t blocks, ColSplit* out);

}  // namespace

// An `if` the same for every column around the row's statements (peel_uniform_if): each branch
// (with the statements before and after the `if`) split as a body of its own, the same allocs so
// the same column blocks; the else branch's column tiles are the then branch's.
ir::Kernel split_cols(const ir::Kernel& kernel, int64_t blocks, ColSplit* out) {
  auto peeled = peel_uniform_if(kernel->body);
  if (!peeled) return split_cols_straight(kernel, blocks, out);
  auto sub = [&](const std::vector<ir::Stmt>& branch, ColSplit* info) {
    std::vector<ir::Stmt> b;
    for (const auto& s : peeled->front)
      if (s->kind == ir::StmtKind::Alloc) b.push_back(s);
    b.insert(b.end(), branch.begin(), branch.end());
    return split_cols(std::make_shared<ir::KernelNode>(kernel->name, kernel->params, kernel->block_vars, kernel->grid,
                                                       ir_seq(b, kernel->span), kernel->span, kernel->sub_block_var),
                      blocks, info);
  };
  ColSplit ti, ei;
  ir::Kernel tk = sub(peeled->then_body, &ti), ek = sub(peeled->else_body, &ei);
  ColSplit info = !ti.why_not.empty() ? ti : !ei.why_not.empty() ? ei : ti.block_cols > 0 || ei.block_cols == 0 ? ti : ei;
  info.phases = std::max(ti.phases, ei.phases);
  if (out) *out = info;
  if (blocks == 0 || !info.why_not.empty() || info.block_cols == 0) return kernel;
  struct SameTiles : ir::Mutator {  // the else branch's tiles: the then branch's of the same name
    std::map<std::string, ir::Buffer> by_name;
    using ir::Mutator::mutate;
    ir::Buffer mutate_buffer(const ir::Buffer& b) override {
      auto it = by_name.find(b->name);
      return b->scope == ir::Scope::global || it == by_name.end() ? b : it->second;
    }
  } same;
  std::vector<ir::Stmt> body, then_body, else_body;
  for (const auto& s : ir::stmts_of(tk->body)) {
    if (s->kind == ir::StmtKind::Alloc) {
      body.push_back(s);
      same.by_name[ir::as<ir::AllocNode>(s)->buffer->name] = ir::as<ir::AllocNode>(s)->buffer;
    } else {
      then_body.push_back(s);
    }
  }
  for (const auto& s : ir::stmts_of(ek->body))
    if (s->kind != ir::StmtKind::Alloc) else_body.push_back(same.mutate(s));
  for (const auto& s : peeled->front)
    if (s->kind == ir::StmtKind::Let) body.push_back(s);
  body.push_back(std::make_shared<ir::IfNode>(peeled->cond, ir_seq(then_body, peeled->span),
                                              else_body.empty() ? nullptr : ir_seq(else_body, peeled->span), peeled->span));
  return std::make_shared<ir::KernelNode>(kernel->name, kernel->params, kernel->block_vars, kernel->grid,
                                          ir_seq(body, kernel->span), kernel->span, kernel->sub_block_var);
}

namespace {

ir::Kernel split_cols_straight(const ir::Kernel& kernel, int64_t blocks, ColSplit* out) {
  ColSplit info;
  auto fail = [&](const std::string& why, const ir::Span& sp) {
    if (info.why_not.empty()) { info.why_not = why; info.at = sp; }
  };
  auto body = ir::stmts_of(kernel->body);
  // N: the last dim of the largest tile.
  int64_t biggest = 0;
  for (const auto& s : body) {
    if (s->kind != ir::StmtKind::Alloc) continue;
    auto& b = ir::as<ir::AllocNode>(s)->buffer;
    auto shape = b->const_shape();
    if (!shape || shape->empty()) continue;
    int64_t bytes = b->dtype.bytes();
    for (auto d : *shape) bytes *= d;
    if (bytes > biggest) { biggest = bytes; info.cols = shape->back(); }
  }
  const int64_t n = info.cols;
  std::vector<ir::Buffer> col_bufs;
  BufSet cols;
  for (const auto& s : body) {
    if (s->kind != ir::StmtKind::Alloc) continue;
    auto& b = ir::as<ir::AllocNode>(s)->buffer;
    auto shape = b->const_shape();
    if (n > 1 && shape && !shape->empty() && shape->back() == n) {
      col_bufs.push_back(b);
      cols.insert(b.get());
      info.col_tiles += (info.col_tiles.empty() ? "" : ", ") + b->name;
    }
  }
  if (n <= 1) fail("the block has no tile of columns", kernel->span);
  const int64_t cb = blocks > 0 ? round_up((n + blocks - 1) / blocks, 64) : round_up((n + 1) / 2, 64);
  const int64_t k = cb > 0 ? (n + cb - 1) / cb : 0;
  auto is_col = [&](const ir::Buffer& b) { return cols.count(b.get()) > 0; };

  std::map<Buf, ir::Buffer> tiles;
  for (const auto& b : col_bufs) {
    auto nb = std::make_shared<ir::BufferNode>(*b);
    nb->shape.back() = C(cb);
    tiles[b.get()] = nb;
  }
  ir::Var blk;  // each phase's loop variable (its own)
  ColRewrite rw(tiles, cb, nullptr);

  // Classify the statements.
  std::vector<Item> items;
  std::map<size_t, const ir::VarNode*> map_cols;  // a map's column variable, by position
  for (const auto& s : body) {
    Item it;
    it.s = s;
    it.pos = items.size();
    reads_writes(s, it.reads, it.writes);
    BufSet nm = named(s);
    if (s->kind == ir::StmtKind::Alloc || !meets(nm, cols)) {
      items.push_back(it);
      continue;
    }
    switch (s->kind) {
      case ir::StmtKind::Copy: {
        auto* c = ir::as<ir::CopyNode>(s);
        const bool src_col = is_col(c->src.buffer), dst_col = is_col(c->dst.buffer);
        for (const auto* r : {&c->src, &c->dst}) {
          if (is_col(r->buffer)) {
            if (!whole(*r)) fail("a copy of part of the column tile " + q(r->buffer->name), s->span);
          } else if (r->buffer->scope != ir::Scope::global) {
            fail("a copy between the column tile and " + q(r->buffer->name) + ", a tile of other columns", s->span);
          } else {
            auto e = ir::as_const_int(r->extents.back());
            if (!e || *e != n)
              fail("a copy whose tensor region does not hold the row's " + std::to_string(n) + " columns in its last dim", s->span);
          }
        }
        it.kind = dst_col ? Item::Def : Item::Store;
        if (dst_col && !(src_col && c->src.buffer == c->dst.buffer) && !c->atomic) it.full.insert(c->dst.buffer.get());
        if (dst_col && c->atomic) fail("an atomic add into a column tile", s->span);
        break;
      }
      case ir::StmtKind::Fill: {
        auto* f = ir::as<ir::FillNode>(s);
        if (!whole(f->dst)) fail("a fill of part of the column tile " + q(f->dst.buffer->name), s->span);
        it.kind = Item::Def;
        it.full.insert(f->dst.buffer.get());
        break;
      }
      case ir::StmtKind::Reduce: {
        auto* r = ir::as<ir::ReduceNode>(s);
        if (!is_col(r->src) || is_col(r->dst) || r->axis + 1 != static_cast<int>(r->src->shape.size()))
          fail("a reduction along a dim other than the columns (T.reduce_" + std::string(ir::reducekind_name(r->reduce_kind)) +
                   " of " + q(r->src->name) + " into " + q(r->dst->name) + ")",
               s->span);
        it.kind = Item::Reduce;
        break;
      }
      case ir::StmtKind::For: {
        // a T.Parallel map whose loop of extent N indexes the column tiles' last dim
        const ir::VarNode* j = nullptr;
        bool ok = true, cond = false;
        ir::for_each_stmt(s, [&](const ir::Stmt& t) {
          if (t->kind == ir::StmtKind::For && ir::as<ir::ForNode>(t)->for_kind != ir::ForKind::parallel) ok = false;
          if (t->kind == ir::StmtKind::If) cond = true;
          if (t->kind != ir::StmtKind::For && t->kind != ir::StmtKind::Seq && t->kind != ir::StmtKind::Let &&
              t->kind != ir::StmtKind::If && t->kind != ir::StmtKind::Store)
            ok = false;
          if (t->kind == ir::StmtKind::Store) {
            auto* st = ir::as<ir::StoreNode>(t);
            if (!is_col(st->buffer)) fail("a map over the columns that writes " + q(st->buffer->name) + ", which is not a column tile", t->span);
          }
        });
        if (!ok) { fail("a loop that is not a T.Parallel map", s->span); break; }
        auto col_index = [&](const ir::Buffer& b, const std::vector<ir::Expr>& idx, const ir::Span& sp) {
          if (!is_col(b)) return;
          if (idx.empty() || idx.back()->kind != ir::ExprKind::Var) return fail("a map that indexes the column tile " + q(b->name) + "'s columns by an expression", sp);
          auto* v = static_cast<const ir::VarNode*>(idx.back().get());
          if (j && v != j) return fail("a map that indexes the columns of " + q(b->name) + " by another variable", sp);
          j = v;
          for (size_t d = 0; d + 1 < idx.size(); ++d) {
            bool uses = false;
            ir::for_each_expr(idx[d], [&](const ir::Expr& x) { uses |= x.get() == v; });
            if (uses) return fail("a map that indexes " + q(b->name) + " by its column in another dim", sp);
          }
        };
        ir::for_each_stmt(s, [&](const ir::Stmt& t) {
          if (t->kind == ir::StmtKind::Store) {
            auto* st = ir::as<ir::StoreNode>(t);
            col_index(st->buffer, st->indices, t->span);
          }
        });
        ir::for_each_expr(s, [&](const ir::Expr& e) {
          if (e->kind != ir::ExprKind::Load) return;
          auto* ld = static_cast<const ir::LoadNode*>(e.get());
          col_index(ld->buffer, ld->indices, e->span.line ? e->span : s->span);
        });
        bool loop_found = false;
        ir::for_each_stmt(s, [&](const ir::Stmt& t) {
          if (t->kind != ir::StmtKind::For) return;
          auto* f = ir::as<ir::ForNode>(t);
          if (f->var.get() != j) return;
          auto mn = ir::as_const_int(f->min), ext = ir::as_const_int(f->extent);
          loop_found = mn && *mn == 0 && ext && *ext == n;
        });
        if (!loop_found) { fail("a map whose column index does not run over the row's " + std::to_string(n) + " columns", s->span); break; }
        map_cols[it.pos] = j;
        it.kind = Item::Def;
        if (!cond)
          for (auto* b : it.writes)
            if (!it.reads.count(b)) it.full.insert(b);
        break;
      }
      default:
        fail("a " + std::string(ir::stmtkind_name(s->kind)) + " statement on the column tiles", s->span);
    }
    items.push_back(it);
  }

  // Phases.
  std::vector<ir::Stmt> out_body;
  std::vector<size_t> pending;  // sinks (reductions, stores) of the open phase
  std::map<Buf, std::vector<size_t>> write_pos;  // non-column buffers: where they were written
  auto slice = [&]() {
    std::set<size_t> in;
    BufSet needed;
    std::set<size_t> sinks(pending.begin(), pending.end());
    for (size_t p = pending.empty() ? 0 : pending.back() + 1; p-- > 0;) {
      const Item& it = items[p];
      bool take = sinks.count(p) > 0;
      if (it.kind == Item::Def)
        for (auto* b : it.writes) take |= needed.count(b) > 0;
      if (!take) continue;
      in.insert(p);
      for (auto* b : it.full) needed.erase(b);
      for (auto* b : it.reads)
        if (cols.count(b)) needed.insert(b);
    }
    return in;
  };
  auto phase_rw = [&](BufSet& r, BufSet& w) {
    for (size_t p : slice()) {
      r.insert(items[p].reads.begin(), items[p].reads.end());
      w.insert(items[p].writes.begin(), items[p].writes.end());
    }
  };
  auto flush = [&]() {
    if (pending.empty()) return;
    auto in = slice();
    blk = ir::var("col_blk", ir::kIndexType, kernel->span);
    rw.off = ir::binary(ir::BinOp::Mul, blk, C(cb));
    // each statement replayed reads the non-column buffers as they were at its line
    for (size_t p : in) {
      for (auto* b : items[p].reads) {
        if (cols.count(b) || !write_pos.count(b)) continue;
        for (size_t w : write_pos.at(b)) {
          if (w <= p) continue;
          bool same_store = false;  // an in-place store (the same tensor region) of this phase
          if (items[w].kind == Item::Store && items[p].kind == Item::Def && items[p].s->kind == ir::StmtKind::Copy &&
              std::count(pending.begin(), pending.end(), w)) {
            auto* ld = ir::as<ir::CopyNode>(items[p].s);
            auto* st = ir::as<ir::CopyNode>(items[w].s);
            same_store = ld->src.buffer == st->dst.buffer && ld->src.starts.size() == st->dst.starts.size();
            for (size_t d = 0; same_store && d < ld->src.starts.size(); ++d)
              same_store = ir::structural_equal(ld->src.starts[d], st->dst.starts[d]);
          }
          if (!same_store)
            fail("a column tile recomputed block by block would read " + q(b->name) + " after line " +
                     std::to_string(items[w].s->span.line) + " changed it (each row block runs the statements " +
                     "from the tensors again; a GM workspace for the row is not made)",
                 items[p].s->span);
        }
      }
    }
    std::vector<ir::Stmt> loop;
    for (size_t p : in) {
      const Item& it = items[p];
      if (it.kind != Item::Reduce) {
        loop.push_back(rw.top(it.s, map_cols.count(p) ? map_cols.at(p) : nullptr));
        continue;
      }
      auto* r = ir::as<ir::ReduceNode>(it.s);
      auto id = reduce_identity(r->reduce_kind, r->dst->dtype, it.s->span);
      if (r->clear) out_body.push_back(std::make_shared<ir::FillNode>(ir::full_region(r->dst), id, it.s->span));
      const ir::Buffer& src = tiles.at(r->src.get());
      if (n % cb) {  // the last block's columns past N: the reduction's identity
        std::vector<ir::Var> vars;
        std::vector<ir::Expr> idx;
        for (size_t d = 0; d < src->shape.size(); ++d) {
          vars.push_back(ir::var("c" + std::to_string(d), ir::kIndexType, it.s->span));
          idx.push_back(vars.back());
        }
        auto inside = ir::binary(ir::BinOp::LT, ir::binary(ir::BinOp::Add, vars.back(), rw.off), C(n), it.s->span);
        auto val = reduce_identity(r->reduce_kind, src->dtype, it.s->span);
        ir::Stmt m = std::make_shared<ir::StoreNode>(
            src, idx, ir::select(inside, ir::load(src, idx, it.s->span), val, it.s->span), it.s->span);
        for (size_t d = vars.size(); d-- > 0;)
          m = std::make_shared<ir::ForNode>(vars[d], C(0), src->shape[d], ir::ForKind::parallel, 0, m, it.s->span);
        loop.push_back(m);
      }
      loop.push_back(std::make_shared<ir::ReduceNode>(src, r->dst, r->reduce_kind, r->axis, false, it.s->span));
    }
    out_body.push_back(std::make_shared<ir::ForNode>(blk, C(0), C(k), ir::ForKind::serial, 0,
                                                     ir_seq(loop, items[pending.front()].s->span),
                                                     items[pending.front()].s->span));
    ++info.phases;
    pending.clear();
  };
  for (const Item& it : items) {
    if (!info.why_not.empty()) break;
    const ir::Stmt& s = it.s;
    if (s->kind == ir::StmtKind::Alloc) {
      auto& b = ir::as<ir::AllocNode>(s)->buffer;
      out_body.push_back(is_col(b) ? std::make_shared<ir::AllocNode>(tiles.at(b.get()), s->span) : s);
      continue;
    }
    BufSet pr, pw;
    if (!pending.empty()) phase_rw(pr, pw);
    if (it.kind == Item::Row) {
      // runs now, before the open phase's loop, unless the phase's statements touch what it changes
      if (meets(it.writes, pr) || meets(it.writes, pw) || meets(it.reads, pw)) flush();
      out_body.push_back(s);
    } else {
      // a column statement reading what the open phase's reductions compute starts a new phase
      BufSet sink_w;
      for (size_t p : pending)
        if (items[p].kind == Item::Reduce) sink_w.insert(items[p].writes.begin(), items[p].writes.end());
      BufSet rd = it.reads;
      if (it.kind == Item::Reduce) rd.erase(ir::as<ir::ReduceNode>(s)->dst.get());
      if (meets(rd, sink_w)) flush();
      if (it.kind != Item::Def) pending.push_back(it.pos);
    }
    for (auto* b : it.writes)
      if (!cols.count(b)) write_pos[b].push_back(it.pos);
  }
  if (info.why_not.empty()) flush();
  if (out) *out = info;
  if (blocks == 0 || !info.why_not.empty() || k <= 1) return kernel;
  if (out) {
    out->block_cols = cb;
    out->blocks = k;
    out->block_bytes = biggest / n * cb;
  }
  return std::make_shared<ir::KernelNode>(kernel->name, kernel->params, kernel->block_vars, kernel->grid,
                                          ir_seq(out_body, kernel->span), kernel->span, kernel->sub_block_var);
}

}  // namespace
}  // namespace tw::ascend
