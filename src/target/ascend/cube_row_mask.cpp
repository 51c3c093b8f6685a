// cube_row_mask: row masks of Cube operands as row-tail fills (see cube_row_mask.h).
#include "target/ascend/cube_row_mask.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/arith.h"
#include "ir/functor.h"
#include "target/ascend/vector_util.h"

namespace tw::ascend {

namespace {

using ir::BinOp;
using ir::Expr;
using ir::Stmt;

bool mentions(const Expr& e, const ir::VarNode* v) {
  bool found = false;
  ir::for_each_expr(e, [&](const Expr& x) { found = found || x.get() == v; });
  return found;
}

// A with e == c + A (A free of c): e is c, c + A, A + c or c - A (nested); nullopt otherwise.
std::optional<Expr> offset_of(const Expr& e, const ir::VarNode* c) {
  if (e.get() == c) return ir::int_imm(0, e->dtype);
  if (e->kind != ir::ExprKind::Binary) return std::nullopt;
  auto* b = ir::as<ir::BinaryNode>(e);
  bool in_a = mentions(b->a, c), in_b = mentions(b->b, c);
  if (b->op == BinOp::Add && in_a != in_b) {
    auto o = offset_of(in_a ? b->a : b->b, c);
    if (o) return ir::arith::add(*o, in_a ? b->b : b->a);
  }
  if (b->op == BinOp::Sub && in_a && !in_b) {
    auto o = offset_of(b->a, c);
    if (o) return ir::arith::sub(*o, b->b);
  }
  return std::nullopt;
}

// e such that `cond == keep` exactly when c < e (the rows kept are a prefix 0 .. e - 1), from an
// integer comparison of c + A with an expression free of c; nullopt for any other condition.
std::optional<Expr> kept_rows(const Expr& cond, const ir::VarNode* c, bool keep) {
  if (cond->kind == ir::ExprKind::Unary && ir::as<ir::UnaryNode>(cond)->op == ir::UnOp::Not)
    return kept_rows(ir::as<ir::UnaryNode>(cond)->a, c, !keep);
  if (cond->kind != ir::ExprKind::Binary) return std::nullopt;
  auto* b = ir::as<ir::BinaryNode>(cond);
  BinOp op = b->op;
  if (op != BinOp::LT && op != BinOp::LE && op != BinOp::GT && op != BinOp::GE) return std::nullopt;
  if (!b->a->dtype.is_int() || !b->b->dtype.is_int()) return std::nullopt;
  bool in_a = mentions(b->a, c), in_b = mentions(b->b, c);
  if (in_a == in_b) return std::nullopt;
  Expr lhs = in_a ? b->a : b->b, rhs = in_a ? b->b : b->a;
  auto flip = [](BinOp o) {  // x o y  ==  y flip(o) x
    return o == BinOp::LT ? BinOp::GT : o == BinOp::GT ? BinOp::LT : o == BinOp::LE ? BinOp::GE : BinOp::LE;
  };
  auto negate = [](BinOp o) {  // not (x o y)  ==  x negate(o) y
    return o == BinOp::LT ? BinOp::GE : o == BinOp::GE ? BinOp::LT : o == BinOp::LE ? BinOp::GT : BinOp::LE;
  };
  if (!in_a) op = flip(op);
  if (!keep) op = negate(op);
  if (op != BinOp::LT && op != BinOp::LE) return std::nullopt;  // a suffix of the rows is kept
  auto a = offset_of(lhs, c);
  if (!a) return std::nullopt;
  Expr e = ir::arith::sub(rhs, *a);  // c + A < R  <=>  c < R - A
  return op == BinOp::LT ? e : ir::arith::add(e, ir::int_imm(1, e->dtype));
}

bool is_constant(const Expr& e) {
  return e->kind == ir::ExprKind::IntImm || e->kind == ir::ExprKind::FloatImm;
}

struct RowMask {
  ir::Buffer tile;
  ir::Var row;
  Expr kept, value;
  int64_t rows = 0, cols = 0;
};

// The map of cube_row_mask.h, or nullopt.
std::optional<RowMask> row_mask(const Stmt& s) {
  if (s->kind != ir::StmtKind::For) return std::nullopt;
  auto* outer = ir::as<ir::ForNode>(s);
  if (outer->for_kind != ir::ForKind::parallel || !outer->body || outer->body->kind != ir::StmtKind::For)
    return std::nullopt;
  auto* inner = ir::as<ir::ForNode>(outer->body);
  if (inner->for_kind != ir::ForKind::parallel || !inner->body || inner->body->kind != ir::StmtKind::Store)
    return std::nullopt;
  for (const auto* f : {outer, inner}) {
    auto mn = ir::as_const_int(f->min);
    if (!mn || *mn != 0 || !ir::as_const_int(f->extent)) return std::nullopt;
  }
  auto* st = ir::as<ir::StoreNode>(inner->body);
  const ir::Buffer& v = st->buffer;
  if ((v->scope != ir::Scope::shared && v->scope != ir::Scope::fragment) || v->ndim() != 2 || st->indices.size() != 2)
    return std::nullopt;
  auto rows = ir::as_const_int(v->shape[0]), cols = ir::as_const_int(v->shape[1]);
  if (!rows || !cols) return std::nullopt;
  // the store's indices are the two loop variables, each loop covering its dim of the tile
  const ir::ForNode* row_loop = nullptr;
  for (const auto* f : {outer, inner}) {
    if (st->indices[0].get() == f->var.get()) row_loop = f;
  }
  if (!row_loop) return std::nullopt;
  const ir::ForNode* col_loop = row_loop == outer ? inner : outer;
  if (st->indices[1].get() != col_loop->var.get() || *ir::as_const_int(row_loop->extent) != *rows ||
      *ir::as_const_int(col_loop->extent) != *cols)
    return std::nullopt;
  if (st->value->kind != ir::ExprKind::Select) return std::nullopt;
  auto* sel = ir::as<ir::SelectNode>(st->value);
  auto is_self = [&](const Expr& e) {  // V[c, d]
    if (e->kind != ir::ExprKind::Load) return false;
    auto* l = ir::as<ir::LoadNode>(e);
    return l->buffer == v && l->indices.size() == 2 && l->indices[0] == st->indices[0] && l->indices[1] == st->indices[1];
  };
  bool keep;  // the select's value when its condition holds is V[c, d]
  Expr value = ir::arith::simplify(ir::cast(is_self(sel->t) ? sel->f : sel->t, v->dtype, s->span));
  if (is_self(sel->t) && !is_self(sel->f)) keep = true;
  else if (is_self(sel->f) && !is_self(sel->t)) keep = false;
  else return std::nullopt;
  if (!is_constant(value)) return std::nullopt;
  // dav-c220 has no 8-bit InitConstValue: 8-bit tiles are filled with 0 only (through a half view)
  if (v->dtype.bytes() == 1 && !(value->kind == ir::ExprKind::IntImm && *ir::as_const_int(value) == 0))
    return std::nullopt;
  const auto* c = row_loop->var.get();
  if (mentions(sel->cond, col_loop->var.get())) return std::nullopt;
  auto e = kept_rows(sel->cond, c, keep);
  if (!e) return std::nullopt;
  return RowMask{v, row_loop->var, *e, value, *rows, *cols};
}

// Tiles whose uses outside their row masks are all the Cube's: the A or B operand of a gemm (at
// least one), the destination of a copy from GM, a fill, the alloc.
std::unordered_set<const ir::BufferNode*> cube_only(const Stmt& body, const std::unordered_set<const ir::StmtNode*>& masks) {
  struct Uses : ir::Visitor {
    const std::unordered_set<const ir::StmtNode*>& skip;
    std::unordered_map<const ir::BufferNode*, int> refs, cube, gemms;
    explicit Uses(const std::unordered_set<const ir::StmtNode*>& m) : skip(m) {}
    void visit_buffer(const ir::Buffer& b) override { ++refs[b.get()]; }
    void visit(const Stmt& s) override {
      if (!s || skip.count(s.get())) return;
      switch (s->kind) {
        case ir::StmtKind::Alloc: ++cube[ir::as<ir::AllocNode>(s)->buffer.get()]; break;
        case ir::StmtKind::Fill: ++cube[ir::as<ir::FillNode>(s)->dst.buffer.get()]; break;
        case ir::StmtKind::Copy: {
          auto* c = ir::as<ir::CopyNode>(s);
          if (c->src.buffer->scope == ir::Scope::global && !c->atomic) ++cube[c->dst.buffer.get()];
          break;
        }
        case ir::StmtKind::Gemm: {
          auto* g = ir::as<ir::GemmNode>(s);
          for (const auto* b : {g->a.buffer.get(), g->b.buffer.get()}) {
            ++cube[b];
            ++gemms[b];
          }
          break;
        }
        default: break;
      }
      ir::Visitor::visit(s);
    }
    using ir::Visitor::visit;
  } u(masks);
  u.visit(body);
  std::unordered_set<const ir::BufferNode*> out;
  for (const auto& [b, n] : u.gemms)
    if (u.refs[b] == u.cube[b]) out.insert(b);
  return out;
}

}  // namespace

ir::Kernel cube_row_mask(const ir::Kernel& kernel, const target::Target& target) {
  (void)target;
  std::unordered_set<const ir::StmtNode*> masks;
  ir::for_each_stmt(kernel->body, [&](const Stmt& s) {
    if (row_mask(s)) masks.insert(s.get());
  });
  if (masks.empty()) return kernel;
  auto cube = cube_only(kernel->body, masks);
  Stmt body = vec::rewrite_stmts(kernel->body, [&](const Stmt& s) -> std::optional<std::vector<Stmt>> {
    if (!masks.count(s.get())) return std::nullopt;
    auto m = row_mask(s);
    if (!cube.count(m->tile.get())) return std::nullopt;
    const ir::Span& sp = s->span;
    ir::Region row{m->tile, {m->row, ir::int_imm(0)}, {ir::int_imm(1), ir::int_imm(m->cols)}};
    Stmt fill = std::make_shared<ir::FillNode>(std::move(row), m->value, sp);
    Stmt tail = std::make_shared<ir::IfNode>(ir::binary(BinOp::GE, m->row, m->kept, sp), fill, nullptr, sp);
    return std::vector<Stmt>{std::make_shared<ir::ForNode>(m->row, ir::int_imm(0), ir::int_imm(m->rows),
                                                           ir::ForKind::serial, 0, tail, sp)};
  });
  return vec::with_body(kernel, body);
}

}  // namespace tw::ascend
