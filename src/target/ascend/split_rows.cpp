// split_rows: a block's body over groups of its rows when its tiles overflow UB (see split_rows.h).
#include "target/ascend/split_rows.h"

#include <map>
#include <utility>
#include <set>

#include "ir/functor.h"
#include "target/ascend/buffer_sets.h"
#include "target/ascend/pass_util.h"

namespace tw::ascend {

namespace {

bool is_tile(const ir::Buffer& b) { return b->scope != ir::Scope::global; }
bool is_tile_node(const ir::BufferNode* b) { return b->scope != ir::Scope::global; }

// The dim of a global tensor's copy region that holds the tile's rows: its first of constant
// extent other than 1, which must be R. -1 when there is none.
int tensor_row_dim(const ir::Region& r, int64_t rows) {
  for (size_t d = 0; d < r.extents.size(); ++d) {
    auto e = ir::as_const_int(r.extents[d]);
    if (!e) return -1;  // a run-time extent
    if (*e == 1) continue;
    return *e == rows ? static_cast<int>(d) : -1;
  }
  return -1;
}

struct Analysis {
  int64_t rows = 0;
  BufSet row_tiles;
  std::string why_not;
  ir::Span at;
  void fail(const std::string& why, const ir::Span& sp) {
    if (why_not.empty()) { why_not = why; at = sp; }
  }
};

bool touches_rows(const ir::Stmt& s, const BufSet& row_tiles) {
  BufSet r, w;
  reads_writes(s, r, w);
  ir::for_each_stmt(s, [&](const ir::Stmt& t) {
    if (t->kind == ir::StmtKind::Alloc) r.insert(ir::as<ir::AllocNode>(t)->buffer.get());
  });
  return meets(r, row_tiles) || meets(w, row_tiles);
}

// The outermost variable of a T.Parallel nest over the rows, when s is one; null otherwise.
const ir::ForNode* row_map(const ir::Stmt& s, int64_t rows) {
  if (s->kind != ir::StmtKind::For) return nullptr;
  auto* f = ir::as<ir::ForNode>(s);
  auto mn = ir::as_const_int(f->min), ext = ir::as_const_int(f->extent);
  if (f->for_kind != ir::ForKind::parallel || !mn || *mn != 0 || !ext || *ext != rows) return nullptr;
  return f;
}

bool uses_var(const ir::Expr& e, const ir::VarNode* v) {
  bool found = false;
  ir::for_each_expr(e, [&](const ir::Expr& x) { found |= x.get() == v; });
  return found;
}

// Whether e uses v other than as the row of a row tile's load: `x[i, lab[i]]` (a column chosen per
// row by a row tile) reads row i's own chunk, which each group keeps (RowRewrite rebases lab[i] too).
bool uses_row_outside_row_loads(const ir::Expr& e, const ir::VarNode* v, const BufSet& row_tiles) {
  struct V : ir::Visitor {
    const ir::VarNode* v;
    const BufSet& rows;
    bool found = false;
    V(const ir::VarNode* var, const BufSet& r) : v(var), rows(r) {}
    using ir::Visitor::visit;
    void visit(const ir::Expr& x) override {
      if (x.get() == v) found = true;
      if (x->kind == ir::ExprKind::Load) {
        auto* ld = static_cast<const ir::LoadNode*>(x.get());
        if (rows.count(ld->buffer.get()) && !ld->indices.empty() && ld->indices[0].get() == v) {
          for (size_t d = 1; d < ld->indices.size(); ++d) visit(ld->indices[d]);
          return;
        }
      }
      ir::Visitor::visit(x);
    }
  } vis(v, row_tiles);
  vis.visit(e);
  return vis.found;
}

// Checks one row statement (one that touches a row tile); records why it is not row-wise.
void check_row_stmt(const ir::Stmt& s, Analysis& a) {
  auto is_row = [&](const ir::Buffer& b) { return a.row_tiles.count(b.get()) > 0; };
  switch (s->kind) {
    case ir::StmtKind::Alloc: return;
    case ir::StmtKind::Copy: {
      auto* c = ir::as<ir::CopyNode>(s);
      for (const auto* r : {&c->src, &c->dst}) {
        if (is_row(r->buffer) && !whole(*r)) return a.fail("a copy of part of a row tile", s->span);
        if (is_tile(r->buffer) && !is_row(r->buffer)) return a.fail("a copy between a row tile and another tile", s->span);
        if (!is_tile(r->buffer) && tensor_row_dim(*r, a.rows) < 0)
          return a.fail("a copy whose tensor region does not hold the tile's rows in one dim", s->span);
      }
      return;
    }
    case ir::StmtKind::Fill:
      if (!whole(ir::as<ir::FillNode>(s)->dst)) a.fail("a fill of part of a row tile", s->span);
      return;
    case ir::StmtKind::Reduce: {
      auto* r = ir::as<ir::ReduceNode>(s);
      if (!is_row(r->src) || !is_row(r->dst) || r->axis == 0)
        a.fail("a reduction across the rows (T.reduce_" + std::string(ir::reducekind_name(r->reduce_kind)) + " of " +
                   q(r->src->name) + " into " + q(r->dst->name) + ")",
               s->span);
      return;
    }
    case ir::StmtKind::For: {
      auto* f = row_map(s, a.rows);
      if (!f) return a.fail("a loop that is not a T.Parallel map over the rows", s->span);
      const ir::VarNode* v = f->var.get();
      auto row_access = [&](const ir::Buffer& b, const std::vector<ir::Expr>& idx, const ir::Span& sp, bool store) {
        if (is_row(b)) {
          if (idx.empty() || idx[0].get() != v) return a.fail("a map that reads or writes another row of " + q(b->name), sp);
          for (size_t d = 1; d < idx.size(); ++d)
            if (uses_row_outside_row_loads(idx[d], v, a.row_tiles))
              return a.fail("a map that indexes " + q(b->name) + " by its row in another dim", sp);
        } else if (is_tile(b)) {
          if (store) return a.fail("a map over the rows that writes " + q(b->name) + ", a tile of other rows", sp);
          for (const auto& x : idx)
            if (uses_var(x, v)) return a.fail("a map that reads " + q(b->name) + " by its row", sp);
        } else if (store) {
          return a.fail("a map that stores into a global tensor", sp);
        }
      };
      ir::for_each_stmt(f->body, [&](const ir::Stmt& t) {
        if (t->kind == ir::StmtKind::Store) {
          auto* st = ir::as<ir::StoreNode>(t);
          row_access(st->buffer, st->indices, t->span, true);
        } else if (t->kind != ir::StmtKind::For && t->kind != ir::StmtKind::Seq && t->kind != ir::StmtKind::Let &&
                   t->kind != ir::StmtKind::If) {
          a.fail("a map holding a tile op", t->span);
        }
      });
      ir::for_each_expr(f->body, [&](const ir::Expr& e) {
        if (e->kind != ir::ExprKind::Load) return;
        auto* ld = static_cast<const ir::LoadNode*>(e.get());
        row_access(ld->buffer, ld->indices, e->span.line ? e->span : s->span, false);
      });
      return;
    }
    case ir::StmtKind::Gemm: {  // C[i, :] = A[i, :] B: row i of C from row i of A (the Cube's part, hunt14 F5)
      auto* g = ir::as<ir::GemmNode>(s);
      if (g->trans_a || g->band != ir::GemmBand::none || !is_row(g->a.buffer) || !is_row(g->c.buffer) ||
          !whole(g->a) || !whole(g->c) || is_row(g->b.buffer) || g->a.buffer->ndim() != 2 || g->c.buffer->ndim() != 2)
        a.fail("a gemm whose A and C are not whole row tiles with A untransposed (row i of C from row i of A)", s->span);
      return;
    }
    default: return a.fail("a " + std::string(ir::stmtkind_name(s->kind)) + " statement", s->span);
  }
}

// A loop that runs its iterations in order (T.serial, T.Pipelined: a gemm's K loop).
bool sequential(const ir::ForNode* f) {
  return f->for_kind == ir::ForKind::serial || f->for_kind == ir::ForKind::pipelined;
}

// An `if`, or a T.serial / T.Pipelined loop, that holds row statements runs whole in each group.
bool composite(const ir::Stmt& s) {
  return s->kind == ir::StmtKind::If || (s->kind == ir::StmtKind::For && sequential(ir::as<ir::ForNode>(s)));
}

// Checks an `if` / T.serial loop that runs whole in each group: its condition (range) is the same
// for every group (it reads no row tile and nothing the block writes: `if 0 < Lens[g]`), its row
// statements are row-wise, and its other statements give the same values when run again for each
// group: lets and copies / fills of a whole tile of other rows that nothing in it touched before (a
// loop's iteration writes it before reading it), reading no tensor the block writes, storing into
// no tensor. `seen`: the buffers the statements before s in the outermost such statement touch.
void check_composite(const ir::Stmt& s, Analysis& a, const BufSet& written, BufSet& seen) {
  const bool is_if = s->kind == ir::StmtKind::If;
  const std::string what = is_if ? "an `if`" : "a T.serial loop";
  auto uniform = [&](const ir::Expr& e, const char* part) {
    ir::for_each_expr(e, [&](const ir::Expr& x) {
      if (x->kind != ir::ExprKind::Load) return;
      auto* b = static_cast<const ir::LoadNode*>(x.get())->buffer.get();
      if (a.row_tiles.count(b) || written.count(b))
        a.fail(what + " whose " + part + " reads " + q(b->name) + ", which the block writes (a condition or range "
                   "the same for every row, e.g. on a tensor of lengths, lets the rows run in groups)",
               s->span);
    });
  };
  std::vector<std::vector<ir::Stmt>> lists;
  if (is_if) {
    auto* f = ir::as<ir::IfNode>(s);
    uniform(f->cond, "condition");
    lists.push_back(ir::stmts_of(f->then_body));
    if (f->else_body) lists.push_back(ir::stmts_of(f->else_body));
  } else {
    auto* f = ir::as<ir::ForNode>(s);
    uniform(f->min, "range");
    uniform(f->extent, "range");
    lists.push_back(ir::stmts_of(f->body));
  }
  const BufSet before = seen;
  for (const auto& list : lists) {
    BufSet here = before;  // the branches each start from what was touched before the `if`
    for (const auto& t : list) {
      if (t->kind == ir::StmtKind::Alloc) continue;
      BufSet r, w;
      reads_writes(t, r, w);
      if (composite(t)) {
        check_composite(t, a, written, here);
      } else if (touches_rows(t, a.row_tiles)) {
        check_row_stmt(t, a);
      } else {  // runs again for each group
        const std::string again = " inside " + what + " around the rows (it would run again for each group)";
        for (auto* b : by_name(r))
          if (!is_tile_node(b) && written.count(b)) a.fail("a statement reading " + q(b->name) + ", which the block writes," + again, t->span);
        if (t->kind == ir::StmtKind::Copy || t->kind == ir::StmtKind::Fill) {
          const ir::Region& d = t->kind == ir::StmtKind::Copy ? ir::as<ir::CopyNode>(t)->dst : ir::as<ir::FillNode>(t)->dst;
          if (!is_tile(d.buffer)) a.fail("a store into " + q(d.buffer->name) + again, t->span);
          else if (!whole(d) || here.count(d.buffer.get()))
            a.fail("a write of " + q(d.buffer->name) + " that is not its first, whole write" + again, t->span);
        } else if (t->kind != ir::StmtKind::Let) {
          a.fail("a " + std::string(ir::stmtkind_name(t->kind)) + " statement on other tiles" + again, t->span);
        }
      }
      for (auto* b : r) here.insert(b);
      for (auto* b : w) here.insert(b);
    }
    for (auto* b : here) seen.insert(b);
  }
}

// Rewrites a row statement for G-row tiles at row offset `off`.
struct RowRewrite : ir::Mutator {
  const std::map<const ir::BufferNode*, ir::Buffer>& tiles;
  int64_t rows, group;
  ir::Expr off;
  bool clipped = false;  // G does not divide R: the last group's tensor rows are min(G, R - off)
  const ir::VarNode* row_var = nullptr;  // the map's row (kept at row tiles' dim 0)
  ir::Var new_var;
  // Groups as blocks: the block index bx (substituted by bx' // k afterwards) and bx'; a tensor row
  // start bx * R becomes bx' * G (= (bx' // k) * R + (bx' % k) * G, which the simplifier does not
  // fold: the scalar unit would compute it at every use)
  const ir::VarNode* bx = nullptr;
  ir::Var bxn;
  BufSet row_set;
  RowRewrite(const std::map<const ir::BufferNode*, ir::Buffer>& t, int64_t r, int64_t g, ir::Expr o)
      : tiles(t), rows(r), group(g), off(std::move(o)) {
    for (const auto& [b, nb] : tiles) row_set.insert(b);
  }
  using ir::Mutator::mutate;

  ir::Buffer mutate_buffer(const ir::Buffer& b) override {
    auto it = tiles.find(b.get());
    return it == tiles.end() ? b : it->second;
  }
  bool is_row(const ir::Buffer& b) const { return tiles.count(b.get()) > 0; }
  std::vector<ir::Expr> row_indices(const std::vector<ir::Expr>& idx) {
    std::vector<ir::Expr> out{new_var};
    for (size_t d = 1; d < idx.size(); ++d) out.push_back(mutate(idx[d]));
    return out;
  }
  ir::Expr mutate(const ir::Expr& e) override {
    if (row_var && e.get() == row_var) return ir::binary(ir::BinOp::Add, new_var, off, e->span);
    if (row_var && e->kind == ir::ExprKind::Load) {
      auto* ld = static_cast<const ir::LoadNode*>(e.get());
      if (is_row(ld->buffer)) return ir::load(mutate_buffer(ld->buffer), row_indices(ld->indices), e->span);
    }
    return ir::Mutator::mutate(e);
  }
  ir::Stmt mutate(const ir::Stmt& s) override {
    if (!s) return s;
    if (row_var && s->kind == ir::StmtKind::Store) {
      auto* st = ir::as<ir::StoreNode>(s);
      if (is_row(st->buffer))
        return std::make_shared<ir::StoreNode>(mutate_buffer(st->buffer), row_indices(st->indices), mutate(st->value), s->span);
    }
    return ir::Mutator::mutate(s);
  }
  bool block_row(const ir::Expr& start) const {
    if (!bx || start->kind != ir::ExprKind::Binary) return false;
    auto* b = ir::as<ir::BinaryNode>(start);
    if (b->op != ir::BinOp::Mul) return false;
    auto r = ir::as_const_int(b->b);
    return b->a.get() == bx && r && *r == rows;
  }
  ir::Region region(const ir::Region& r) {
    ir::Region out = r;
    if (is_row(r.buffer)) {
      out.buffer = mutate_buffer(r.buffer);
      out.extents[0] = C(group);
    } else if (!is_tile(r.buffer)) {
      int d = tensor_row_dim(r, rows);
      out.starts[d] = !clipped && block_row(r.starts[d]) ? simp(ir::binary(ir::BinOp::Mul, bxn, C(group)))
                                                          : simp(ir::binary(ir::BinOp::Add, r.starts[d], off));
      // a run-time extent of bound G (docs/language.md "Run-time extents"): the rows past R are not
      // loaded (the tile's rows read as 0) and not stored
      out.extents[d] = clipped ? ir::binary(ir::BinOp::Min, C(group), simp(ir::binary(ir::BinOp::Sub, C(rows), off)))
                               : C(group);
    }
    return out;
  }
  ir::Stmt top(const ir::Stmt& s) {
    switch (s->kind) {
      case ir::StmtKind::Copy: {
        auto* c = ir::as<ir::CopyNode>(s);
        return std::make_shared<ir::CopyNode>(region(c->src), region(c->dst), s->span, c->atomic);
      }
      case ir::StmtKind::Fill: {
        auto* f = ir::as<ir::FillNode>(s);
        return std::make_shared<ir::FillNode>(region(f->dst), f->value, s->span);
      }
      case ir::StmtKind::If: {  // a condition the same for every group: its statements rewritten
        auto* f = ir::as<ir::IfNode>(s);
        return std::make_shared<ir::IfNode>(f->cond, list(f->then_body), f->else_body ? list(f->else_body) : nullptr,
                                            s->span);
      }
      case ir::StmtKind::For: {
        auto* f = ir::as<ir::ForNode>(s);
        if (sequential(f))  // a range the same for every group
          return std::make_shared<ir::ForNode>(f->var, f->min, f->extent, f->for_kind, f->num_stages, list(f->body), s->span);
        row_var = f->var.get();
        new_var = ir::var(f->var->name, f->var->dtype, f->var->span);
        auto body = mutate(f->body);
        row_var = nullptr;
        // the clipped group's rows past R are padding (ir.h ForNode::user_extent): a map's element reads of a
        // tensor there are clipped, not checked
        ir::Expr user = clipped ? simp(ir::binary(ir::BinOp::Min, C(group), ir::binary(ir::BinOp::Sub, C(rows), off)))
                                : nullptr;
        return std::make_shared<ir::ForNode>(new_var, f->min, C(group), f->for_kind, f->num_stages, body, s->span, user);
      }
      case ir::StmtKind::Gemm: {  // A's and C's rows: the group's (B whole)
        auto* g = ir::as<ir::GemmNode>(s);
        return std::make_shared<ir::GemmNode>(region(g->a), region(g->b), region(g->c), g->trans_a, g->trans_b, g->clear,
                                              s->span);
      }
      default: return mutate(s);  // a reduction, an alloc: its buffers
    }
  }
  // The statements of an `if`'s branch or a loop's body: those on rows rewritten, the others as they are.
  ir::Stmt list(const ir::Stmt& body) {
    std::vector<ir::Stmt> out;
    for (const auto& t : ir::stmts_of(body)) out.push_back(touches_rows(t, row_set) ? top(t) : t);
    return ir_seq(out, body->span);
  }
};

// A row map `t[i, j..] = exp(E - m[j..])` (one store; m indexed by the map's other variables in
// order, E reading none of `avoid`): m's buffer, t into *t; else null (an online max's exp).
ir::Buffer exp_of_max(const ir::Stmt& s, const BufSet& avoid, ir::Buffer* t) {
  std::vector<const ir::VarNode*> vars;
  ir::Stmt st = s;
  while (st->kind == ir::StmtKind::For) {
    auto* f = ir::as<ir::ForNode>(st);
    if (f->for_kind != ir::ForKind::parallel) return nullptr;
    vars.push_back(f->var.get());
    auto b = ir::stmts_of(f->body);
    if (b.size() != 1) return nullptr;
    st = b[0];
  }
  if (st->kind != ir::StmtKind::Store || vars.size() < 2) return nullptr;
  auto* store = ir::as<ir::StoreNode>(st);
  if (store->indices.size() != vars.size()) return nullptr;
  for (size_t d = 0; d < vars.size(); ++d)
    if (store->indices[d].get() != vars[d]) return nullptr;
  if (store->value->kind != ir::ExprKind::Call) return nullptr;
  auto* call = static_cast<const ir::CallNode*>(store->value.get());
  if (call->fn != ir::MathFn::exp || call->args[0]->kind != ir::ExprKind::Binary) return nullptr;
  auto* sub = ir::as<ir::BinaryNode>(call->args[0]);
  if (sub->op != ir::BinOp::Sub || sub->b->kind != ir::ExprKind::Load) return nullptr;
  auto* ml = static_cast<const ir::LoadNode*>(sub->b.get());
  if (ml->indices.size() + 1 != vars.size()) return nullptr;
  for (size_t d = 0; d < ml->indices.size(); ++d)
    if (ml->indices[d].get() != vars[d + 1]) return nullptr;
  bool clean = true;
  ir::for_each_expr(sub->a, [&](const ir::Expr& e) {
    if (e->kind == ir::ExprKind::Load && avoid.count(static_cast<const ir::LoadNode*>(e.get())->buffer.get())) clean = false;
  });
  if (!clean) return nullptr;
  *t = store->buffer;
  return ml->buffer;
}

}  // namespace

ir::Kernel split_rows(const ir::Kernel& kernel, int64_t step, RowSplit* out) {
  RowSplit info;
  Analysis a;
  auto body = ir::stmts_of(kernel->body);
  std::vector<ir::Stmt> allocs;  // the block's tiles, at its top or inside an `if` / loop
  ir::for_each_stmt(kernel->body, [&](const ir::Stmt& s) {
    if (s->kind == ir::StmtKind::Alloc) allocs.push_back(s);
  });
  BufSet read_any, written;  // what the block writes (which a condition the same for every group does not read)
  reads_writes(kernel->body, read_any, written);
  // A gemm's B operand (and a transposed A) holds K in its leading dim, not the block's rows: never
  // a row tile, even when K equals R.
  BufSet gemm_k;
  ir::for_each_stmt(kernel->body, [&](const ir::Stmt& s) {
    if (s->kind != ir::StmtKind::Gemm) return;
    auto* g = ir::as<ir::GemmNode>(s);
    gemm_k.insert(g->b.buffer.get());
    if (g->trans_a) gemm_k.insert(g->a.buffer.get());
  });
  // R: the leading dim of the largest tile of rank >= 2.
  int64_t biggest = 0;
  for (const auto& s : allocs) {
    auto& b = ir::as<ir::AllocNode>(s)->buffer;
    auto shape = b->const_shape();
    if (!shape || shape->size() < 2 || gemm_k.count(b.get())) continue;
    int64_t n = b->dtype.bytes();
    for (auto d : *shape) n *= d;
    if (n > biggest) {
      biggest = n;
      a.rows = (*shape)[0];
      info.widest = b->name;
      info.cols = n / b->dtype.bytes() / a.rows;
      info.row_bytes = n / a.rows;
    }
  }
  std::vector<ir::Buffer> row_bufs;
  for (const auto& s : allocs) {
    auto& b = ir::as<ir::AllocNode>(s)->buffer;
    auto shape = b->const_shape();
    if (a.rows > 1 && shape && !shape->empty() && (*shape)[0] == a.rows && !gemm_k.count(b.get())) {
      a.row_tiles.insert(b.get());
      row_bufs.push_back(b);
    }
  }
  info.rows = a.rows;
  for (const auto& b : row_bufs) info.row_tiles += (info.row_tiles.empty() ? "" : ", ") + b->name;
  if (a.rows <= 1) a.fail(a.rows == 1 ? "the block has one row" : "the block has no tile of rows", kernel->span);

  // Row statements; reductions across the rows into another tile (max / min: merged group by
  // group into it, which gives the same value in any order); the other statements run once before
  // the groups, or after them when they read such a reduction (or what such statements wrote).
  // Checked: no statement moves past one whose buffers it conflicts with.
  std::vector<ir::Stmt> once, per_group, after, fills, finish;
  BufSet row_reads, row_writes, late, after_reads, touched;  // late: the merged results and what reads them wrote
  bool once_writes_tensor = false;  // a statement before the groups stores into a tensor (once per block only)
  bool merged_minmax = false;       // a max / min merged across the groups (a clipped group's zero rows would enter it)
  std::map<const ir::StmtNode*, ir::Buffer> carried;  // a sum across the rows (in per_group) -> its running sum
  // online (a logsumexp / softmax over dim 0): a merged float max m read by one row map
  // `t = exp(E - m)` whose tile only a carried sum s reduces: m -> (t, s, m_prev)
  struct Online { ir::Buffer m, t, s, prev; ir::Span at; };
  std::map<const ir::BufferNode*, Online> online;
  BufSet clear_maxes;  // merged clearing float maxes (an online max's candidates)
  BufSet online_tiles;  // their exp tiles (read by their sum only)
  std::set<std::string> taken;  // the kernel's names (a running sum's tile gets a new one)
  for (const auto& p : kernel->params) taken.insert(p.name());
  for (const auto& s : allocs) taken.insert(ir::as<ir::AllocNode>(s)->buffer->name);
  auto is_row = [&](const ir::Buffer& b) { return a.row_tiles.count(b.get()) > 0; };
  for (const auto& s : body) {
    if (!a.why_not.empty()) break;
    if (s->kind == ir::StmtKind::Alloc) { once.push_back(s); continue; }
    BufSet r, w;
    reads_writes(s, r, w);
    if (s->kind == ir::StmtKind::Reduce) {
      auto* rd = ir::as<ir::ReduceNode>(s);
      if (is_row(rd->src) && rd->axis == 0 && !is_row(rd->dst) && is_tile(rd->dst)) {
        const ir::DType t = rd->dst->dtype, st = rd->src->dtype;
        // (a sum into its own running tile leaves dst as it is until after the groups: statements
        // before it may use dst)
        const bool own_acc = rd->reduce_kind == ir::ReduceKind::sum && (!rd->clear || !(t == ir::DType(ir::DTypeCode::f32) ||
                                                                                          t == ir::DType(ir::DTypeCode::i32)));
        if (!own_acc && (touched.count(rd->dst.get()) || row_reads.count(rd->dst.get())))
          a.fail("a reduction across the rows into " + q(rd->dst->name) + ", which other statements use before it", s->span);
        if (rd->reduce_kind == ir::ReduceKind::sum) {
          // carried: each group adds its rows one by one into the running sum (see the header)
          const ir::DType i32{ir::DTypeCode::i32}, f32{ir::DTypeCode::f32};
          const bool fl = t.is_float() && st.is_float(), in = t == i32 && st == i32;
          if (!fl && !in)
            a.fail("a sum across the rows of the " + std::string(st.name()) + " tile " + q(rd->src->name) + " into the " +
                       std::string(t.name()) + " tile " + q(rd->dst->name) +
                       " (carried across row groups for float or int32 sums only)",
                   s->span);
          const ir::DType ct = fl ? f32 : i32;
          ir::Buffer acc = rd->dst;
          if (own_acc) {  // the running sum in its own tile, stored into dst after the groups
            auto b = std::make_shared<ir::BufferNode>(*rd->dst);
            b->dtype = ct;
            b->name = rd->dst->name + "_acc";
            for (int i = 2; taken.count(b->name); ++i) b->name = rd->dst->name + "_acc" + std::to_string(i);
            taken.insert(b->name);
            acc = b;
            once.push_back(std::make_shared<ir::AllocNode>(acc, s->span));
            std::vector<ir::Var> vars;
            std::vector<ir::Expr> idx;
            for (size_t d = 0; d < rd->dst->shape.size(); ++d) {
              vars.push_back(ir::var("j" + std::to_string(d), ir::kIndexType, s->span));
              idx.push_back(vars.back());
            }
            ir::Expr v = ir::load(acc, idx, s->span);
            if (!rd->clear) {
              ir::Expr old = ir::load(rd->dst, idx, s->span);
              v = ir::binary(ir::BinOp::Add, t == ct ? old : ir::cast(old, ct, s->span), v, s->span);
            }
            ir::Stmt m = std::make_shared<ir::StoreNode>(rd->dst, idx, t == ct ? v : ir::cast(v, t, s->span), s->span);
            for (size_t d = vars.size(); d-- > 0;)
              m = std::make_shared<ir::ForNode>(vars[d], C(0), rd->dst->shape[d], ir::ForKind::parallel, 0, m, s->span);
            finish.push_back(m);
          }
          // -0.0: x + -0.0 is x for every x (+0.0 would turn a -0.0 first row into +0.0)
          fills.push_back(std::make_shared<ir::FillNode>(
              ir::full_region(acc), fl ? ir::float_imm(-0.0, ct, s->span) : ir::int_imm(0, ct, s->span), s->span));
          for (auto& [m, o] : online)
            if (o.t == rd->src) {  // the exp tile's sum: rescaled to each group's new max
              if (o.s || own_acc || rd->dst->shape.size() != o.prev->shape.size())
                a.fail("a sum across the rows of " + q(rd->src->name) + " that is not the one clearing float32 sum of "
                           "the exp of the max " + q(m->name) + " (an online max)",
                       s->span);
              o.s = rd->dst;
            }
          per_group.push_back(s);
          carried[s.get()] = acc;
          info.carried += (info.carried.empty() ? "" : ", ") + rd->dst->name;
        } else {
          ir::Expr identity = reduce_identity(rd->reduce_kind, t, s->span);
          if (!t.is_float()) a.fail("a reduction across the rows into the integer tile " + q(rd->dst->name), s->span);
          if (rd->clear) fills.push_back(std::make_shared<ir::FillNode>(ir::full_region(rd->dst), identity, s->span));
          per_group.push_back(std::make_shared<ir::ReduceNode>(rd->src, rd->dst, rd->reduce_kind, rd->axis, false, s->span));
          merged_minmax = true;
          if (rd->reduce_kind == ir::ReduceKind::max && rd->clear && t.is_float()) clear_maxes.insert(rd->dst.get());
        }
        row_reads.insert(rd->src.get());
        late.insert(rd->dst.get());
        touched.insert(rd->dst.get());
        continue;
      }
    }
    for (auto* b : r) touched.insert(b);
    for (auto* b : w) touched.insert(b);
    if (touches_rows(s, a.row_tiles)) {
      if (composite(s)) {
        BufSet seen;
        check_composite(s, a, written, seen);
      } else {
        check_row_stmt(s, a);
      }
      ir::Buffer t;
      const ir::Buffer mx = s->kind == ir::StmtKind::For ? exp_of_max(s, late, &t) : nullptr;
      const ir::BufferNode* m = mx.get();
      if (m && clear_maxes.count(m) && !online.count(m) && is_row(t) && !meets(w, after_reads)) {
        // an online max's exp: each group exps with the max so far, its sum rescaled (below)
        auto prev = std::make_shared<ir::BufferNode>(*m);
        prev->name = m->name + "_prev";
        for (int i = 2; taken.count(prev->name); ++i) prev->name = m->name + "_prev" + std::to_string(i);
        taken.insert(prev->name);
        once.push_back(std::make_shared<ir::AllocNode>(prev, s->span));
        online[m] = Online{mx, t, nullptr, prev, s->span};
        info.online += (info.online.empty() ? "" : ", ") + m->name;
        online_tiles.insert(t.get());
      } else if (meets(r, late) || meets(w, late) || meets(w, after_reads) || meets(r, online_tiles) ||
                 meets(w, online_tiles)) {
        a.fail("a statement on the rows after one that needs every row's result" +
                   std::string(meets(r, online_tiles) || meets(w, online_tiles)
                                   ? " (the exp of the running max, a different max in each row group, may only be summed "
                                     "across the rows)"
                                   : ""),
               s->span);
      }
      reads_writes(s, row_reads, row_writes);
      per_group.push_back(s);
      continue;
    }
    if (s->kind != ir::StmtKind::Let && s->kind != ir::StmtKind::Copy && s->kind != ir::StmtKind::Fill &&
        s->kind != ir::StmtKind::For && s->kind != ir::StmtKind::Reduce) {
      a.fail("a " + std::string(ir::stmtkind_name(s->kind)) + " statement", s->span);
    } else if (meets(r, late) || meets(w, late)) {  // after the groups
      if (s->kind == ir::StmtKind::Let) a.fail("a let that reads every row's result", s->span);
      BufSet rr = row_reads;  // (an online max, which its exp map reads, may change after the groups)
      for (const auto& [m, o] : online) rr.erase(m);
      if (meets(w, rr) || meets(w, row_writes) || meets(r, row_writes))
        a.fail("a statement that must run between the rows' statements", s->span);
      for (auto* b : w) late.insert(b);
      for (auto* b : r) after_reads.insert(b);
      after.push_back(s);
    } else {  // before the groups
      if (meets(w, row_reads) || meets(w, row_writes) || meets(r, row_writes) || meets(w, after_reads))
        a.fail("a statement that must run after the rows' statements before it", s->span);
      for (auto* b : w) once_writes_tensor |= b->scope == ir::Scope::global;
      once.push_back(s);
    }
  }
  const Online* unsummed = nullptr;  // the first in the source (`online` is in address order)
  for (const auto& [m, o] : online)
    if (!o.s && (!unsummed || std::pair(o.at.line, o.at.col) < std::pair(unsummed->at.line, unsummed->at.col)))
      unsummed = &o;
  if (unsummed)
    a.fail("an exp of the max across the rows into " + q(unsummed->m->name) + " whose tile " + q(unsummed->t->name) +
               " no sum across the rows reduces (the running max differs from row group to row group)",
           unsummed->at);
  info.why_not = a.why_not;
  info.at = a.at;
  // The group sizes, largest first: ceil(R / k) for k = 2, 3, ... groups; only the divisors of R
  // when a reduction merges across the groups (a clipped group's rows past R, zeros in the tile,
  // would enter it) or a row tile has more than 2 dims (a run-time extent is a copy's rows or columns).
  bool divisors_only = merged_minmax;
  for (const auto& b : row_bufs) divisors_only |= b->shape.size() > 2;
  for (int64_t k = 2; k <= a.rows; ++k) {
    const int64_t g = (a.rows + k - 1) / k;
    if ((divisors_only && a.rows % g != 0) || (!info.groups.empty() && info.groups.back() == g)) continue;
    info.groups.push_back(g);
  }
  info.steps = static_cast<int64_t>(info.groups.size());
  const int64_t g = step > 0 && step <= info.steps ? info.groups[step - 1] : 0;
  if (out) *out = info;
  if (step == 0 || !a.why_not.empty() || g == 0 || per_group.empty()) return kernel;

  std::map<const ir::BufferNode*, ir::Buffer> tiles;
  for (const auto& b : row_bufs) {
    auto shape = b->shape;
    shape[0] = C(g);
    auto nb = std::make_shared<ir::BufferNode>(*b);
    nb->shape = shape;
    tiles[b.get()] = nb;
  }
  const int64_t k = (a.rows + g - 1) / g;  // the groups (the last one clipped when G does not divide R)
  const bool clipped = a.rows % g != 0;
  if (out) out->group_rows = g;
  std::vector<ir::Stmt> out_body, loop;
  if (fills.empty() && after.empty() && !once_writes_tensor && !kernel->block_vars.empty()) {
    // Nothing merges across the groups: each group is a block of its own (the grid's first dim k
    // times longer, block bx' = bx * k + rg), which the cores run in parallel as they run blocks.
    const ir::Var& bx = kernel->block_vars[0];
    auto bxn = ir::var(bx->name, bx->dtype, bx->span);
    RowRewrite rw(tiles, a.rows, g, ir::binary(ir::BinOp::Mul, ir::binary(ir::BinOp::Mod, bxn, C(k)), C(g)));
    rw.clipped = clipped;
    rw.bx = bx.get();
    rw.bxn = bxn;
    for (const auto& s : once) out_body.push_back(s->kind == ir::StmtKind::Alloc ? rw.mutate(s) : s);
    for (const auto& s : per_group) out_body.push_back(rw.top(s));
    auto vars = kernel->block_vars;
    auto grid = kernel->grid;
    vars[0] = bxn;
    grid[0] = simp(ir::binary(ir::BinOp::Mul, grid[0], C(k)));
    auto body = ir::substitute(ir_seq(out_body, kernel->span), {{bx, ir::binary(ir::BinOp::FloorDiv, bxn, C(k))}});
    if (out) out->as_blocks = true;
    return std::make_shared<ir::KernelNode>(kernel->name, kernel->params, vars, grid, body, kernel->span,
                                            kernel->sub_block_var);
  }
  // A max / min merged across the groups (or no grid): the groups run one after the other.
  auto rg = ir::var("rg", ir::kIndexType, kernel->span);
  RowRewrite rw(tiles, a.rows, g, ir::binary(ir::BinOp::Mul, rg, C(g)));
  rw.clipped = clipped;
  for (const auto& s : once)
    out_body.push_back(s->kind == ir::StmtKind::Alloc ? rw.mutate(s) : s);
  for (const auto& s : fills) out_body.push_back(s);
  // a map over a buffer's elements: b[j..] = f(j..)
  auto over = [](const ir::Buffer& b, const ir::Span& sp, auto&& f) {
    std::vector<ir::Var> vars;
    std::vector<ir::Expr> idx;
    for (size_t d = 0; d < b->shape.size(); ++d) {
      vars.push_back(ir::var("j" + std::to_string(d), ir::kIndexType, sp));
      idx.push_back(vars.back());
    }
    ir::Stmt m = std::make_shared<ir::StoreNode>(b, idx, f(idx), sp);
    for (size_t d = vars.size(); d-- > 0;)
      m = std::make_shared<ir::ForNode>(vars[d], C(0), b->shape[d], ir::ForKind::parallel, 0, m, sp);
    return m;
  };
  for (const auto& s : per_group) {
    auto c = carried.find(s.get());
    if (c == carried.end()) {
      if (s->kind == ir::StmtKind::Reduce && online.count(ir::as<ir::ReduceNode>(s)->dst.get())) {
        // an online max: the max before this group kept in m_prev, then merged
        const ir::Buffer& m = ir::as<ir::ReduceNode>(s)->dst;
        const Online& o = online.at(m.get());
        loop.push_back(over(o.prev, s->span, [&](const std::vector<ir::Expr>& i) { return ir::load(m, i, s->span); }));
      }
      loop.push_back(rw.top(s));
      continue;
    }
    for (const auto& [mb, o] : online)
      if (o.s == ir::as<ir::ReduceNode>(s)->dst) {
        (void)mb;
        // the sum so far rescaled to the new max: s * exp(m_prev - m), or 0 while m_prev is -inf
        // (nothing but -inf seen: the terms so far are exp(-inf - -inf), NaN, where the unsplit sum,
        // whose max is at least m, adds 0 unless the whole column is -inf, and then the coming groups
        // add NaN again: split_cols' online rescale across column blocks likewise)
        const ir::Span& sp = s->span;
        const ir::Buffer& sb = o.s;
        const ir::Buffer& m = o.m;
        loop.push_back(over(sb, sp, [&](const std::vector<ir::Expr>& i) {
          auto mp = ir::load(o.prev, i, sp);
          auto scale = ir::call(ir::MathFn::exp, {ir::binary(ir::BinOp::Sub, mp, ir::load(m, i, sp), sp)}, sp);
          return ir::select(ir::binary(ir::BinOp::EQ, mp, ir::float_imm(-INFINITY, m->dtype, sp), sp),
                            ir::float_imm(0.0, sb->dtype, sp), ir::binary(ir::BinOp::Mul, ir::load(sb, i, sp), scale, sp), sp);
        }));
      }
    // a carried sum: the group's rows (the clipped group's first R - rg * G) added one by one into
    // the running sum, in row order: `for row: acc[j..] = acc[j..] + x[row, j..]`
    auto* rd = ir::as<ir::ReduceNode>(s);
    const ir::Span& sp = s->span;
    const ir::Buffer& acc = c->second;
    const ir::Buffer& src = tiles.at(rd->src.get());
    auto row = ir::var("row", ir::kIndexType, sp);
    std::vector<ir::Var> vars;
    std::vector<ir::Expr> idx, sidx{row};
    for (size_t d = 0; d < acc->shape.size(); ++d) {
      vars.push_back(ir::var("j" + std::to_string(d), ir::kIndexType, sp));
      idx.push_back(vars.back());
      sidx.push_back(vars.back());
    }
    ir::Expr x = ir::load(src, sidx, sp);
    if (src->dtype != acc->dtype) x = ir::cast(x, acc->dtype, sp);
    ir::Stmt m = std::make_shared<ir::StoreNode>(acc, idx, ir::binary(ir::BinOp::Add, ir::load(acc, idx, sp), x, sp), sp);
    for (size_t d = vars.size(); d-- > 0;)
      m = std::make_shared<ir::ForNode>(vars[d], C(0), acc->shape[d], ir::ForKind::parallel, 0, m, sp);
    const ir::Expr n = clipped ? simp(ir::binary(ir::BinOp::Min, C(g), ir::binary(ir::BinOp::Sub, C(a.rows), rw.off)))
                               : C(g);
    loop.push_back(std::make_shared<ir::ForNode>(row, C(0), n, ir::ForKind::serial, 0, m, sp));
  }
  out_body.push_back(std::make_shared<ir::ForNode>(rg, C(0), C(k), ir::ForKind::serial, 0,
                                                  ir_seq(loop, kernel->span), kernel->span));
  for (const auto& s : finish) out_body.push_back(s);
  for (const auto& s : after) out_body.push_back(s);
  return std::make_shared<ir::KernelNode>(kernel->name, kernel->params, kernel->block_vars, kernel->grid,
                                          ir_seq(out_body, kernel->span), kernel->span, kernel->sub_block_var);
}

}  // namespace tw::ascend
