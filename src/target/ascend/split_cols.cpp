// split_cols: a block's rows in column blocks when one row overflows UB (see split_cols.h).
#include "target/ascend/split_cols.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>

#include "ir/functor.h"
#include "target/ascend/buffer_sets.h"
#include "target/ascend/pass_util.h"
#include "target/ascend/rename_defs.h"
#include "target/ascend/vector_util.h"

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
  int64_t cb, n;  // the block's columns, the row's
  ir::Expr off;
  const ir::VarNode* col = nullptr;  // a map's column variable
  ir::Var new_col;
  ColRewrite(const std::map<Buf, ir::Buffer>& t, int64_t cb_, int64_t n_) : tiles(t), cb(cb_), n(n_) {}
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
      // the last block's columns past N are padding (ir.h ForNode::user_extent): the map's element reads of a
      // tensor there are clipped, not checked (hunt34 F3's check covers the user's columns only)
      ir::Expr user = n % cb ? simp(ir::binary(ir::BinOp::Min, C(cb), ir::binary(ir::BinOp::Sub, C(n), off))) : nullptr;
      return std::make_shared<ir::ForNode>(new_col, f->min, C(cb), f->for_kind, f->num_stages, mutate(f->body), s->span,
                                           user);
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
      case ir::StmtKind::Reduce: {  // across the rows: the block's columns
        auto* r = ir::as<ir::ReduceNode>(s);
        return std::make_shared<ir::ReduceNode>(mutate_buffer(r->src), mutate_buffer(r->dst), r->reduce_kind, r->axis, r->clear, s->span);
      }
      default: return s;
    }
  }
};

ir::Kernel split_cols_straight(const ir::Kernel& kernel, int64_t blocks, ColSplit* out, int64_t copies);

// N: the last dim of the largest tile (its bytes in *biggest).
int64_t row_cols(const std::vector<ir::Stmt>& body, int64_t* biggest) {
  int64_t n = 0;
  *biggest = 0;
  for (const auto& s : body) {
    if (s->kind != ir::StmtKind::Alloc) continue;
    auto& b = ir::as<ir::AllocNode>(s)->buffer;
    auto shape = b->const_shape();
    if (!shape || shape->empty()) continue;
    int64_t bytes = b->dtype.bytes();
    for (auto d : *shape) bytes *= d;
    if (bytes > *biggest) { *biggest = bytes; n = shape->back(); }
  }
  return n;
}

// Two copies with converting copies (split_cols.h): each copy between a tensor and a column tile
// of another dtype as convert_copies would lower it, made here so that its tile of the tensor's
// dtype is a column tile of its own (`x_bfloat16_0`): a copy into it and a cast map into the tile
// (loads), or a cast map into it and the copy (stores). moved: the column tiles the copies from
// and to the tensors then use (those tiles, and the tiles of copies that convert nothing); the
// kernel as it was (moved empty) when no copy converts.
ir::Kernel stage_conversions(const ir::Kernel& kernel, std::set<Buf>* moved) {
  auto body = ir::stmts_of(kernel->body);
  int64_t biggest = 0;
  const int64_t n = row_cols(body, &biggest);
  if (n <= 1) return kernel;
  vec::Names names(kernel);
  std::vector<ir::Stmt> out;
  bool converted = false;
  for (const auto& s : body) {
    const ir::CopyNode* c = s->kind == ir::StmtKind::Copy ? ir::as<ir::CopyNode>(s) : nullptr;
    const bool load = c && c->src.buffer->scope == ir::Scope::global && c->dst.buffer->scope != ir::Scope::global;
    const bool store = c && c->dst.buffer->scope == ir::Scope::global && c->src.buffer->scope != ir::Scope::global;
    const ir::Buffer* tile = load ? &c->dst.buffer : store ? &c->src.buffer : nullptr;
    auto shape = tile ? (*tile)->const_shape() : std::nullopt;
    if (!tile || c->atomic || !shape || shape->empty() || shape->back() != n || !whole(load ? c->dst : c->src)) {
      out.push_back(s);
      continue;
    }
    if (c->src.buffer->dtype == c->dst.buffer->dtype) {
      moved->insert(tile->get());
      out.push_back(s);
      continue;
    }
    converted = true;
    const ir::DType t = (load ? c->src : c->dst).buffer->dtype;
    auto stage = std::make_shared<ir::BufferNode>(**tile);
    stage->name = names.fresh((*tile)->name + "_" + std::string(t.name()));
    stage->dtype = t;
    moved->insert(stage.get());
    out.push_back(std::make_shared<ir::AllocNode>(stage, s->span));
    if (load) {
      out.push_back(std::make_shared<ir::CopyNode>(c->src, ir::full_region(stage), s->span));
      out.push_back(vec::cast_map(c->dst, ir::full_region(stage), s->span, names));
    } else {
      out.push_back(vec::cast_map(ir::full_region(stage), c->src, s->span, names));
      out.push_back(std::make_shared<ir::CopyNode>(ir::full_region(stage), c->dst, s->span));
    }
  }
  if (!converted) {
    moved->clear();
    return kernel;
  }
  return std::make_shared<ir::KernelNode>(kernel->name, kernel->params, kernel->block_vars, kernel->grid,
                                          ir_seq(out, kernel->span), kernel->span, kernel->sub_block_var);
}

// A column block's statements again (the pair loop's copies, an odd K's last block): the block
// index replaced, column tiles swapped for their second copies (`bufs`), the variables the
// statements define (map loops, lets) made fresh.
struct Replay : RenameDefs {
  const std::map<Buf, ir::Buffer>& bufs;
  explicit Replay(const std::map<Buf, ir::Buffer>& b) : bufs(b) {}
  ir::Buffer mutate_buffer(const ir::Buffer& b) override {
    auto it = bufs.find(b.get());
    return it == bufs.end() ? b : it->second;
  }
};

}  // namespace

// An `if` the same for every column around the row's statements (peel_uniform_if): each branch
// (with the statements before and after the `if`) split as a body of its own, the same allocs so
// the same column blocks; the else branch's column tiles are the then branch's.
ir::Kernel split_cols(const ir::Kernel& kernel, int64_t blocks, ColSplit* out, int64_t copies) {
  auto peeled = peel_uniform_if(kernel->body);
  if (!peeled) return split_cols_straight(kernel, blocks, out, copies);
  auto sub = [&](const std::vector<ir::Stmt>& branch, ColSplit* info) {
    std::vector<ir::Stmt> b;
    for (const auto& s : peeled->front)
      if (s->kind == ir::StmtKind::Alloc) b.push_back(s);
    b.insert(b.end(), branch.begin(), branch.end());
    return split_cols(std::make_shared<ir::KernelNode>(kernel->name, kernel->params, kernel->block_vars, kernel->grid,
                                                       ir_seq(b, kernel->span), kernel->span, kernel->sub_block_var),
                      blocks, info, copies);
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
  for (const auto& s : ir::stmts_of(ek->body)) {
    if (s->kind != ir::StmtKind::Alloc)
      else_body.push_back(same.mutate(s));
    else if (!same.by_name.count(ir::as<ir::AllocNode>(s)->buffer->name))
      body.push_back(s);  // a tile only the else branch makes (m_prev, a second copy)
  }
  for (const auto& s : peeled->front)
    if (s->kind == ir::StmtKind::Let) body.push_back(s);
  body.push_back(std::make_shared<ir::IfNode>(peeled->cond, ir_seq(then_body, peeled->span),
                                              else_body.empty() ? nullptr : ir_seq(else_body, peeled->span), peeled->span));
  return std::make_shared<ir::KernelNode>(kernel->name, kernel->params, kernel->block_vars, kernel->grid,
                                          ir_seq(body, kernel->span), kernel->span, kernel->sub_block_var);
}

namespace {

ir::Kernel split_cols_straight(const ir::Kernel& input, int64_t blocks, ColSplit* out, int64_t copies) {
  std::set<Buf> moved;  // two copies where copies convert: the tiles the copies use (only they get second copies)
  const ir::Kernel kernel = blocks > 0 && copies > 1 ? stage_conversions(input, &moved) : input;
  ColSplit info;
  auto fail = [&](const std::string& why, const ir::Span& sp) {
    if (info.why_not.empty()) { info.why_not = why; info.at = sp; }
  };
  auto body = ir::stmts_of(kernel->body);
  int64_t biggest = 0;
  info.cols = row_cols(body, &biggest);
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
  // The column step: 64 where a statement reduces a column tile along its columns (a block's
  // running reduction); else one 32-byte block of the narrowest dtype among the column tiles and
  // the tensors copied to / from them (8 float32, 16 16-bit columns): maps and reductions across
  // the rows keep every column on its own (session 29: a 4097 x 16 float32 dim-0 sum, 2 blocks of 8).
  int64_t step = 8;
  for (const auto& b : col_bufs) step = std::max<int64_t>(step, 32 / std::max<int64_t>(1, b->dtype.bytes()));
  ir::for_each_stmt(kernel->body, [&](const ir::Stmt& s) {
    if (s->kind == ir::StmtKind::Copy) {  // a converting copy's tensor side lands in a tile of its dtype
      auto* c = ir::as<ir::CopyNode>(s);
      if (cols.count(c->src.buffer.get()) || cols.count(c->dst.buffer.get()))
        for (const auto* b : {c->src.buffer.get(), c->dst.buffer.get()})
          step = std::max<int64_t>(step, 32 / std::max<int64_t>(1, b->dtype.bytes()));
    }
    if (s->kind != ir::StmtKind::Reduce) return;
    auto* r = ir::as<ir::ReduceNode>(s);
    if (cols.count(r->src.get()) && r->axis + 1 == static_cast<int>(r->src->shape.size())) step = 64;
  });
  info.step = step;
  int64_t cb = blocks > 0 ? round_up((n + blocks - 1) / blocks, step) : round_up((n + 1) / 2, step);
  // A row reduction halves its block's columns while the halves stay 32 B aligned, then folds the
  // rest one 256 B repeat per call (legalize_vector's halve_rows): Cb = 64 * 2^a * b (b odd) halves
  // down to b / 8 repeats of float32. Cb is rounded up to a b of at most 63 (at most 1/32 wider, at
  // most 8 repeats left): bfloat16 row_sum_max's 19008 columns (b = 297, 37 one-repeat Max calls
  // per block) -> 19456 (b = 19); float32 softmax's 15232 (b = 119) -> 15360 (b = 15).
  if (step == 64 && blocks > 0)
    for (;; cb += step) {
      int64_t b = cb / 64;
      while (b % 2 == 0) b /= 2;
      if (b <= 63) break;
    }
  const int64_t k = cb > 0 ? (n + cb - 1) / cb : 0;
  auto is_col = [&](const ir::Buffer& b) { return cols.count(b.get()) > 0; };

  std::map<Buf, ir::Buffer> tiles;
  for (const auto& b : col_bufs) {
    auto nb = std::make_shared<ir::BufferNode>(*b);
    nb->shape.back() = C(cb);
    tiles[b.get()] = nb;
  }
  ir::Var blk;  // each phase's loop variable (its own)
  ColRewrite rw(tiles, cb, n);
  std::set<std::string> taken;  // the kernel's names (a second copy's name is new)
  for (const auto& p : kernel->params) taken.insert(p.name());
  ir::for_each_stmt(kernel->body, [&](const ir::Stmt& s) {
    if (s->kind == ir::StmtKind::Alloc) taken.insert(ir::as<ir::AllocNode>(s)->buffer->name);
  });

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
        if (is_col(r->src) && is_col(r->dst) && r->axis + 1 < static_cast<int>(r->src->shape.size())) {
          // across the rows of a column tile into a column tile (a sum over the sequence axis): each
          // column on its own, computed in its block like a map
          it.kind = Item::Def;
          if (r->clear) it.full.insert(r->dst.get());
          break;
        }
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
        ir::for_each_expr(s, [&](const ir::Expr& e) {  // x[i, lab[i]]: one column per row, chosen at run time
          if (e->kind != ir::ExprKind::Load) return;
          auto* ld = static_cast<const ir::LoadNode*>(e.get());
          if (!is_col(ld->buffer) || ld->indices.empty()) return;
          bool run_time = false;
          ir::for_each_expr(ld->indices.back(), [&](const ir::Expr& x) { run_time |= x->kind == ir::ExprKind::Load; });
          if (run_time)
            fail("a map that reads the column tile " + q(ld->buffer->name) + " at a column chosen at run time (`" +
                     ld->buffer->name + "[i, lab[i]]`); a block of columns holds it or not: pick it with a map over the "
                     "columns, `p[i, j] = T.where(j == lab[i], " + ld->buffer->name + "[i, j], 0)`, and a T.reduce_sum of p, "
                     "which runs in column blocks",
                 e->span.line ? e->span : s->span);
        });
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

  // The one store of a nest of single-statement loops (each loop's variable into *vars), else null.
  auto map_store = [](ir::Stmt st, std::vector<const ir::VarNode*>* vars) -> const ir::StoreNode* {
    while (st->kind == ir::StmtKind::For) {
      auto* f = ir::as<ir::ForNode>(st);
      if (vars) vars->push_back(f->var.get());
      auto b = ir::stmts_of(f->body);
      if (b.size() != 1) return nullptr;
      st = b[0];
    }
    return st->kind == ir::StmtKind::Store ? ir::as<ir::StoreNode>(st) : nullptr;
  };
  // `sub` = `E - m[i..]` inside the map `store` over `vars`: m indexed by the store's leading indices
  // (m[i] belongs to row i), each a loop variable, and E reading none of `avoid`.
  auto row_shift = [](const ir::StoreNode* store, const std::vector<const ir::VarNode*>& vars,
                      const ir::BinaryNode* sub, const BufSet& avoid) {
    auto* ml = static_cast<const ir::LoadNode*>(sub->b.get());
    if (ml->indices.size() + 1 != store->indices.size() || vars.size() != store->indices.size()) return false;
    for (size_t d = 0; d < store->indices.size(); ++d)
      if (store->indices[d].get() != vars[d] || (d + 1 < store->indices.size() && ml->indices[d].get() != vars[d]))
        return false;
    bool clean = true;
    ir::for_each_expr(sub->a, [&](const ir::Expr& e) {
      if (e->kind == ir::ExprKind::Load && avoid.count(static_cast<const ir::LoadNode*>(e.get())->buffer.get())) clean = false;
    });
    return clean;
  };

  // A map `t[i.., j] = exp(E - m[i..])` (one store, E reading none of `avoid`): m's buffer, else null.
  auto exp_of_max = [&](const ir::Stmt& s, const BufSet& avoid, ir::Buffer* t) -> Buf {
    std::vector<const ir::VarNode*> vars;
    auto* store = map_store(s, &vars);
    if (!store) return nullptr;
    auto* call = store->value->kind == ir::ExprKind::Call ? static_cast<const ir::CallNode*>(store->value.get()) : nullptr;
    if (!call || call->fn != ir::MathFn::exp) return nullptr;
    auto* sub = call->args[0]->kind == ir::ExprKind::Binary ? static_cast<const ir::BinaryNode*>(call->args[0].get()) : nullptr;
    if (!sub || sub->op != ir::BinOp::Sub || sub->b->kind != ir::ExprKind::Load) return nullptr;
    if (!row_shift(store, vars, sub, avoid)) return nullptr;
    *t = store->buffer;
    return static_cast<const ir::LoadNode*>(sub->b.get())->buffer.get();
  };

  // A map over a row result `S[i..] = S[i..] / N` (the mean of a row sum): S's buffer, else null.
  auto mean_of_sum = [&](const ir::Stmt& s) -> Buf {
    auto* store = map_store(s, nullptr);
    if (!store) return nullptr;
    auto* div = store->value->kind == ir::ExprKind::Binary ? static_cast<const ir::BinaryNode*>(store->value.get()) : nullptr;
    if (!div || div->op != ir::BinOp::Div || div->a->kind != ir::ExprKind::Load) return nullptr;
    auto* ld = static_cast<const ir::LoadNode*>(div->a.get());
    if (ld->buffer != store->buffer || ir::print(div->a) != ir::print(ir::load(store->buffer, store->indices))) return nullptr;
    ir::Expr d = div->b;
    if (d->kind == ir::ExprKind::Cast) d = static_cast<const ir::CastNode*>(d.get())->value;
    auto ci = ir::as_const_int(d);
    const bool is_n = (ci && *ci == n) || (d->kind == ir::ExprKind::FloatImm && static_cast<const ir::FloatImmNode*>(d.get())->value == double(n));
    return is_n && store->buffer->dtype.is_float() ? store->buffer.get() : nullptr;
  };
  // A map `t[i.., j] = (E - S[i..]) * (E - S[i..])` (E reading none of `avoid`): t, else null.
  auto square_of = [&](const ir::Stmt& s, Buf S, const BufSet& avoid) -> ir::Buffer {
    std::vector<const ir::VarNode*> vars;
    auto* store = map_store(s, &vars);
    if (!store) return nullptr;
    auto* mul = store->value->kind == ir::ExprKind::Binary ? static_cast<const ir::BinaryNode*>(store->value.get()) : nullptr;
    if (!mul || mul->op != ir::BinOp::Mul || !ir::structural_equal(mul->a, mul->b) || mul->a->kind != ir::ExprKind::Binary) return nullptr;
    auto* sub = static_cast<const ir::BinaryNode*>(mul->a.get());
    if (sub->op != ir::BinOp::Sub || sub->b->kind != ir::ExprKind::Load) return nullptr;
    if (static_cast<const ir::LoadNode*>(sub->b.get())->buffer.get() != S) return nullptr;
    return row_shift(store, vars, sub, avoid) ? store->buffer : nullptr;
  };
  struct Swap : ir::Mutator {  // loads of one buffer read another
    Buf from;
    ir::Buffer to;
    ir::Buffer mutate_buffer(const ir::Buffer& b) override { return b.get() == from ? to : b; }
  };

  // Phases. A phase closes where a column statement reads what it reduces, except at `fuse`: there
  // a max m read only as `exp(x - m)` summed (an exp map's position), or a row sum's mean (the row
  // statement's position) whose squares are summed, continues the phase (see split_cols.h); `bad`
  // gets the positions whose phase breaks the rule; `triggers` the candidates of a plain build.
  std::vector<ir::Stmt> out_body;
  std::map<Buf, ir::Buffer> twins;  // a column tile's second copy (copies = 2), made at its first use
  std::set<std::string> twin_names;
  auto build = [&](const std::set<size_t>& fuse, std::vector<size_t>* triggers, std::set<size_t>* bad) {
    out_body.clear();
    twins.clear();
    twin_names.clear();
    info.phases = 0;
    std::vector<size_t> pending;  // sinks (reductions, stores) of the open phase
    size_t fused = SIZE_MAX;       // the open phase's fused break
    bool chan = false, chan_map = false;  // the fused break is a mean (and the map of its squares was met)
    std::vector<ir::Stmt> deferred;  // the mean's row statement: after the fused phase
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
    // The fused phase's online pairs: each max m (reduced before `t`) -> the sums of exp(x - m).
    auto online = [&](const std::set<size_t>& in, size_t t, std::map<Buf, std::vector<ir::Buffer>>& tied) {
      BufSet before;                // what the phase reduces before t
      std::map<Buf, size_t> maxes;  // its plain float maxes, by the reduction's position
      for (size_t p : pending) {
        if (p >= t || items[p].kind != Item::Reduce) continue;
        auto* r = ir::as<ir::ReduceNode>(items[p].s);
        before.insert(r->dst.get());
        if (r->reduce_kind == ir::ReduceKind::max && r->clear && r->dst->dtype.is_float()) maxes[r->dst.get()] = p;
      }
      for (size_t p : in) {
        if (p < t || !meets(items[p].reads, before)) continue;
        ir::Buffer tile;
        Buf m = map_cols.count(p) ? exp_of_max(items[p].s, before, &tile) : nullptr;
        if (!m || !maxes.count(m)) return false;
        bool summed = false;
        for (size_t u : in) {
          if (u <= p || !(items[u].reads.count(tile.get()) || items[u].writes.count(tile.get()))) continue;
          auto* r = items[u].kind == Item::Reduce ? ir::as<ir::ReduceNode>(items[u].s) : nullptr;
          if (!r || r->reduce_kind != ir::ReduceKind::sum || !r->clear || r->dst->dtype != m->dtype ||
              r->dst->const_shape() != m->const_shape())
            return false;
          for (size_t v : in)  // the sum is the running result of this phase alone
            if (v != u && (items[v].reads.count(r->dst.get()) || items[v].writes.count(r->dst.get()))) return false;
          tied[m].push_back(r->dst);
          summed = true;
        }
        if (!summed) return false;
      }
      for (const auto& [m, sums] : tied)
        for (size_t u : in)
          if (items[u].writes.count(m) && u != maxes.at(m)) return false;
      return !tied.empty();
    };
    // The fused mean's phase: S (the row sum the row statement at c divides by N), the map of the
    // squares (x - S)^2 after c, its tile's sum V; each read by nothing else in the phase.
    struct Chan { Buf S = nullptr; ir::Buffer sum, V; size_t map = 0; };
    auto chan_ok = [&](const std::set<size_t>& in, size_t c, Chan& out) {
      Buf S = mean_of_sum(items[c].s);
      BufSet before;
      bool summed = false;
      for (size_t p : pending) {
        if (p >= c || items[p].kind != Item::Reduce) continue;
        auto* r = ir::as<ir::ReduceNode>(items[p].s);
        before.insert(r->dst.get());
        if (r->dst.get() == S && r->reduce_kind == ir::ReduceKind::sum && r->clear) summed = true, out.sum = r->dst;
      }
      if (!S || !summed) return false;
      for (size_t p : in) {
        if (p < c || !meets(items[p].reads, before)) continue;
        ir::Buffer t = map_cols.count(p) && !out.S ? square_of(items[p].s, S, before) : nullptr;
        if (!t) return false;
        out.S = S;
        out.map = p;
        for (size_t u : in) {
          if (u <= p || !(items[u].reads.count(t.get()) || items[u].writes.count(t.get()))) continue;
          auto* r = items[u].kind == Item::Reduce ? ir::as<ir::ReduceNode>(items[u].s) : nullptr;
          if (out.V || !r || r->reduce_kind != ir::ReduceKind::sum || !r->clear || r->dst->dtype != S->dtype ||
              r->dst->const_shape() != S->const_shape())
            return false;
          for (size_t v : in)
            if (v != u && (items[v].reads.count(r->dst.get()) || items[v].writes.count(r->dst.get()))) return false;
          out.V = r->dst;
        }
      }
      for (size_t u : in)
        if (items[u].writes.count(S) && !(items[u].kind == Item::Reduce && ir::as<ir::ReduceNode>(items[u].s)->dst == out.sum))
          return false;
      return out.V != nullptr;
    };
    auto flush = [&]() {
      if (pending.empty()) return;
      auto in = slice();
      std::map<Buf, std::vector<ir::Buffer>> tied;
      Chan mean;
      if (fused != SIZE_MAX && !(chan ? chan_ok(in, fused, mean) : online(in, fused, tied))) {
        bad->insert(fused);
        mean = Chan{};
      }
      fused = SIZE_MAX;
      chan = chan_map = false;
      blk = ir::var("col_blk", ir::kIndexType, kernel->span);
      rw.off = ir::binary(ir::BinOp::Mul, blk, C(cb));
      // each statement replayed reads the non-column buffers as they were at its line
      for (size_t p : in) {
        for (auto* b : by_name(items[p].reads)) {
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
      // a map over a row result's elements: out[i..] = f(i..)
      auto row_map = [&](const ir::Buffer& b, const ir::Span& sp, auto&& f) {
        std::vector<ir::Var> vars;
        std::vector<ir::Expr> idx;
        for (size_t d = 0; d < b->shape.size(); ++d) {
          std::string name = "r";  // (not "r" + to_string: GCC 12's false -Wrestrict)
          name += std::to_string(d);
          vars.push_back(ir::var(name, ir::kIndexType, sp));
          idx.push_back(vars.back());
        }
        ir::Stmt m = f(idx);
        for (size_t d = vars.size(); d-- > 0;)
          m = std::make_shared<ir::ForNode>(vars[d], C(0), b->shape[d], ir::ForKind::parallel, 0, m, sp);
        return m;
      };
      // Chan et al.'s parallel variance: per block its sum sb, its mean mb = sb / nb and its M2 vb (the
      // user's map of squares with mb), merged into the running sum S (na columns so far) and M2 V:
      // V += vb + (mb - S / na)^2 * na * nb / (na + nb) (0 for the first block), S += sb.
      ir::Buffer blk_sum, blk_mean;
      auto fresh = [&](const ir::Buffer& like, const std::string& name, const ir::Span& sp) {
        auto b = std::make_shared<ir::BufferNode>(*like);
        b->name = name;
        out_body.push_back(std::make_shared<ir::AllocNode>(b, sp));
        return ir::Buffer(b);
      };
      auto chan_block = [&](const ir::ReduceNode* r, const ir::Buffer& src, const ir::Span& sp, std::vector<ir::Stmt>& loop) {
        const ir::DType f = r->dst->dtype;
        auto na = ir::cast(rw.off, f, sp);
        auto nb = ir::cast(n % cb ? simp(ir::binary(ir::BinOp::Min, C(cb), ir::binary(ir::BinOp::Sub, C(n), rw.off))) : C(cb), f, sp);
        if (r->dst.get() == mean.S) {
          blk_sum = fresh(r->dst, r->dst->name + "_blk_sum", sp);
          blk_mean = fresh(r->dst, r->dst->name + "_blk_mean", sp);
          loop.push_back(std::make_shared<ir::ReduceNode>(src, blk_sum, ir::ReduceKind::sum, r->axis, true, sp));
          loop.push_back(row_map(blk_sum, sp, [&](const std::vector<ir::Expr>& i) {
            return std::make_shared<ir::StoreNode>(blk_mean, i, ir::binary(ir::BinOp::Div, ir::load(blk_sum, i, sp), nb, sp), sp);
          }));
          return;
        }
        auto vb = fresh(r->dst, r->dst->name + "_blk", sp);
        loop.push_back(std::make_shared<ir::ReduceNode>(src, vb, ir::ReduceKind::sum, r->axis, true, sp));
        auto one = ir::float_imm(1.0, f, sp);
        auto inv_na = ir::binary(ir::BinOp::Div, one, ir::binary(ir::BinOp::Max, na, one, sp), sp);
        auto w = ir::binary(ir::BinOp::Div, ir::binary(ir::BinOp::Mul, na, nb, sp), ir::binary(ir::BinOp::Add, na, nb, sp), sp);
        const ir::Buffer& sum_buf = mean.sum;
        loop.push_back(row_map(vb, sp, [&](const std::vector<ir::Expr>& i) {
          auto d = ir::binary(ir::BinOp::Sub, ir::load(blk_mean, i, sp), ir::binary(ir::BinOp::Mul, ir::load(sum_buf, i, sp), inv_na, sp), sp);
          auto v = ir::binary(ir::BinOp::Add, ir::binary(ir::BinOp::Add, ir::load(r->dst, i, sp), ir::load(vb, i, sp), sp),
                              ir::binary(ir::BinOp::Mul, ir::binary(ir::BinOp::Mul, d, d, sp), w, sp), sp);
          return std::make_shared<ir::StoreNode>(r->dst, i, v, sp);
        }));
        loop.push_back(row_map(vb, sp, [&](const std::vector<ir::Expr>& i) {
          return std::make_shared<ir::StoreNode>(sum_buf, i, ir::binary(ir::BinOp::Add, ir::load(sum_buf, i, sp), ir::load(blk_sum, i, sp), sp), sp);
        }));
      };
      std::vector<ir::Stmt> loop;
      for (size_t p : in) {
        const Item& it = items[p];
        if (it.kind != Item::Reduce) {
          ir::Stmt st = it.s;
          if (mean.S && p == mean.map) {  // (x - mean)^2 with the block's own mean
            Swap sw;
            sw.from = mean.S;
            sw.to = blk_mean;
            st = sw.mutate(st);
          }
          loop.push_back(rw.top(st, map_cols.count(p) ? map_cols.at(p) : nullptr));
          continue;
        }
        auto* r = ir::as<ir::ReduceNode>(it.s);
        const ir::Span& sp = it.s->span;
        auto id = reduce_identity(r->reduce_kind, r->dst->dtype, sp);
        if (r->clear) out_body.push_back(std::make_shared<ir::FillNode>(ir::full_region(r->dst), id, sp));
        const ir::Buffer& src = tiles.at(r->src.get());
        if (n % cb) {  // the last block's columns past N: the reduction's identity
          std::vector<ir::Var> vars;
          std::vector<ir::Expr> idx;
          for (size_t d = 0; d < src->shape.size(); ++d) {
            vars.push_back(ir::var("c" + std::to_string(d), ir::kIndexType, sp));
            idx.push_back(vars.back());
          }
          auto inside = ir::binary(ir::BinOp::LT, ir::binary(ir::BinOp::Add, vars.back(), rw.off), C(n), sp);
          auto val = reduce_identity(r->reduce_kind, src->dtype, sp);
          ir::Stmt m = std::make_shared<ir::StoreNode>(src, idx, ir::select(inside, ir::load(src, idx, sp), val, sp), sp);
          for (size_t d = vars.size(); d-- > 0;)
            m = std::make_shared<ir::ForNode>(vars[d], C(0), src->shape[d], ir::ForKind::parallel, 0, m, sp);
          loop.push_back(m);
        }
        if (mean.S && (r->dst.get() == mean.S || r->dst == mean.V)) {
          chan_block(r, src, sp, loop);
          continue;
        }
        auto on = tied.find(r->dst.get());
        if (on == tied.end()) {
          loop.push_back(std::make_shared<ir::ReduceNode>(src, r->dst, r->reduce_kind, r->axis, false, sp));
          continue;
        }
        // online: the max before this block in m_prev; each tied sum s of exp(x - m_prev) rescaled
        // to the new max, s * exp(m_prev - m), or 0 while m_prev is -inf (nothing but -inf seen: the
        // terms so far are exp(-inf - -inf), NaN, where the unsplit kernel, whose max is at least m,
        // adds 0 unless the whole row is -inf, in which case the coming blocks add NaN again)
        const ir::Buffer& m = r->dst;
        auto prev = std::make_shared<ir::BufferNode>(*m);
        prev->name = m->name + "_prev";
        out_body.push_back(std::make_shared<ir::AllocNode>(prev, sp));
        loop.push_back(row_map(m, sp, [&](const std::vector<ir::Expr>& i) {
          return std::make_shared<ir::StoreNode>(prev, i, ir::load(m, i, sp), sp);
        }));
        loop.push_back(std::make_shared<ir::ReduceNode>(src, m, r->reduce_kind, r->axis, false, sp));
        for (const auto& s : on->second)
          loop.push_back(row_map(s, sp, [&](const std::vector<ir::Expr>& i) {
            auto mp = ir::load(prev, i, sp);
            auto scale = ir::call(ir::MathFn::exp, {ir::binary(ir::BinOp::Sub, mp, ir::load(m, i, sp), sp)}, sp);
            auto v = ir::select(ir::binary(ir::BinOp::EQ, mp, ir::float_imm(-INFINITY, m->dtype, sp), sp),
                                ir::float_imm(0.0, s->dtype, sp), ir::binary(ir::BinOp::Mul, ir::load(s, i, sp), scale, sp), sp);
            return std::make_shared<ir::StoreNode>(s, i, v, sp);
          }));
      }
      const ir::Span& lsp = items[pending.front()].s->span;
      ir::Stmt block = ir_seq(loop, lsp);
      if (copies < 2 || k < 2) {
        out_body.push_back(std::make_shared<ir::ForNode>(blk, C(0), C(k), ir::ForKind::serial, 0, block, lsp));
      } else {
        // two copies of the column tiles: blocks in pairs, the second on the copies (split_cols.h)
        const BufSet used = named(block);
        for (const auto& ob : col_bufs) {  // (in the kernel's order)
          const ir::Buffer& t = tiles.at(ob.get());
          if (!used.count(t.get()) || twins.count(t.get()) || (!moved.empty() && !moved.count(ob.get()))) continue;
          auto tw = std::make_shared<ir::BufferNode>(*t);
          std::string name = t->name + "_b";
          for (int i = 2; taken.count(name) || twin_names.count(name); ++i) name = t->name + "_b" + std::to_string(i);
          tw->name = name;
          twin_names.insert(name);
          twins[t.get()] = tw;
          out_body.push_back(std::make_shared<ir::AllocNode>(tw, t->span));
        }
        const std::map<Buf, ir::Buffer> none;
        auto copy_at = [&](const ir::Expr& c, const std::map<Buf, ir::Buffer>& bufs) {
          Replay r(bufs);
          r.vars[blk.get()] = c;
          return r.mutate(block);
        };
        ir::Var pair = ir::var(blk->name, blk->dtype, blk->span);
        auto two = ir::binary(ir::BinOp::Mul, pair, C(2), lsp);
        // block 2 col_blk's copies from the tensors, then block 2 col_blk + 1's, then the rest of
        // each: the two copies are live together (plan_memory places them apart) and the scalar
        // issues the second block's loads before the first block's vector work
        auto sa = ir::stmts_of(copy_at(two, none));
        auto sb = ir::stmts_of(copy_at(ir::binary(ir::BinOp::Add, two, C(1), lsp), twins));
        auto loads = [](const std::vector<ir::Stmt>& v) {
          size_t i = 0;
          while (i < v.size() && v[i]->kind == ir::StmtKind::Copy &&
                 ir::as<ir::CopyNode>(v[i])->src.buffer->scope == ir::Scope::global)
            ++i;
          return static_cast<std::ptrdiff_t>(i);
        };
        const auto na = loads(sa), nb = loads(sb);
        std::vector<ir::Stmt> both(sa.begin(), sa.begin() + na);
        both.insert(both.end(), sb.begin(), sb.begin() + nb);
        both.insert(both.end(), sa.begin() + na, sa.end());
        both.insert(both.end(), sb.begin() + nb, sb.end());
        out_body.push_back(std::make_shared<ir::ForNode>(pair, C(0), C(k / 2), ir::ForKind::serial, 0, ir_seq(both, lsp), lsp));
        if (k % 2) out_body.push_back(copy_at(C(k - 1), none));
      }
      ++info.phases;
      pending.clear();
      for (auto& d : deferred) out_body.push_back(d);
      deferred.clear();
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
        if (meets(it.writes, pr) || meets(it.writes, pw) || meets(it.reads, pw)) {
          if (fuse.count(it.pos) && fused == SIZE_MAX) {  // a mean: the phase goes on, the row statement after it
            fused = it.pos;
            chan = true;
            deferred.push_back(s);
            for (auto* b : it.writes)
              if (!cols.count(b)) write_pos[b].push_back(it.pos);
            continue;
          }
          if (triggers && mean_of_sum(s)) triggers->push_back(it.pos);
          flush();
        }
        out_body.push_back(s);
      } else {
        // a column statement reading what the open phase's reductions compute starts a new phase
        // (unless the break is fused)
        BufSet sink_w;
        for (size_t p : pending)
          if (items[p].kind == Item::Reduce) sink_w.insert(items[p].writes.begin(), items[p].writes.end());
        BufSet rd = it.reads;
        if (it.kind == Item::Reduce) rd.erase(ir::as<ir::ReduceNode>(s)->dst.get());
        if (meets(rd, sink_w)) {
          if (chan && !chan_map) {  // the map of squares of the fused mean's phase
            chan_map = true;
          } else if (fuse.count(it.pos) && fused == SIZE_MAX) {
            fused = it.pos;
          } else {
            if (triggers && it.kind == Item::Def && map_cols.count(it.pos)) triggers->push_back(it.pos);
            flush();
          }
        }
        if (it.kind != Item::Def) pending.push_back(it.pos);
      }
      for (auto* b : it.writes)
        if (!cols.count(b)) write_pos[b].push_back(it.pos);
    }
    if (info.why_not.empty()) flush();
  };
  // Unfused first; then the breaks at an exp map fused while each fused phase keeps the rule.
  std::vector<size_t> triggers;
  std::set<size_t> fuse, bad;
  build(fuse, &triggers, &bad);
  if (blocks > 0 && info.why_not.empty() && !triggers.empty()) {  // (the analysis needs only why_not)
    const auto plain = out_body;
    const int64_t plain_phases = info.phases;
    fuse.insert(triggers.begin(), triggers.end());
    for (;;) {
      bad.clear();
      build(fuse, nullptr, &bad);
      if (bad.empty() || !info.why_not.empty()) break;
      for (size_t t : bad) fuse.erase(t);
    }
    if (!info.why_not.empty()) {  // (not expected: the fused phases replay nothing the plain ones do not)
      info.why_not.clear();
      out_body = plain;
      info.phases = plain_phases;
    }
  }
  if (out) *out = info;
  if (blocks == 0 || !info.why_not.empty() || k <= 1) return input;
  if (out) {
    out->block_cols = cb;
    out->blocks = k;
    out->copies = copies < 2 ? 1 : 2;
    std::string doubled;  // the tiles with second copies (all, or the ones the copies use)
    bool all = true;
    for (const auto& ob : col_bufs) {
      auto t = twins.find(tiles.at(ob.get()).get());
      if (t == twins.end()) all = false;
      else doubled += (doubled.empty() ? "" : ", ") + tiles.at(ob.get())->name;
    }
    out->doubled = all ? "each" : doubled;
    out->block_bytes = biggest / n * cb;
  }
  return std::make_shared<ir::KernelNode>(kernel->name, kernel->params, kernel->block_vars, kernel->grid,
                                          ir_seq(out_body, kernel->span), kernel->span, kernel->sub_block_var);
}

}  // namespace
}  // namespace tw::ascend
