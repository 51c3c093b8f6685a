#include "transform/pick_element.h"

#include <cmath>
#include <optional>
#include <set>

#include "ir/functor.h"
#include "transform/tile_facts.h"

namespace tw::transform {

namespace {

using namespace ir;

bool mentions(const Expr& e, const VarNode* v) {
  bool found = false;
  for_each_expr(e, [&](const Expr& x) { found |= x.get() == v; });
  return found;
}

// e's j is read only as an index of a tile load in a dimension of extent cols, and e holds no
// integer division (the element read at the clamped column is one the map read, and nothing traps)
bool pickable(const Expr& e, const VarNode* j, int64_t cols) {
  bool ok = true;
  struct V : Visitor {
    const VarNode* j;
    int64_t cols;
    bool& ok;
    V(const VarNode* jj, int64_t c, bool& o) : j(jj), cols(c), ok(o) {}
    void visit(const Expr& x) override {
      if (!ok) return;
      if (x.get() == j) {  // reached outside a load's index
        ok = false;
        return;
      }
      if (x->kind == ExprKind::Binary) {
        auto* b = as<BinaryNode>(x);
        if (b->dtype.is_int() && (b->op == BinOp::FloorDiv || b->op == BinOp::CeilDiv || b->op == BinOp::Mod)) {
          ok = false;
          return;
        }
      }
      if (x->kind == ExprKind::Load) {
        auto* l = as<LoadNode>(x);
        auto shape = l->buffer->const_shape();
        if (l->buffer->scope == Scope::global || !shape) {
          ok = !mentions(x, j);
          return;
        }
        for (size_t d = 0; d < l->indices.size(); ++d) {
          if (l->indices[d].get() == j) {
            if ((*shape)[d] != cols) ok = false;
            continue;
          }
          visit(l->indices[d]);
        }
        return;
      }
      Visitor::visit(x);
    }
    using Visitor::visit;
  } v(j, cols, ok);
  v.visit(e);
  return ok;
}

bool positive_zero(const Expr& e) {
  if (e->kind == ExprKind::FloatImm) {
    double v = as<FloatImmNode>(e)->value;
    return v == 0.0 && !std::signbit(v);
  }
  if (e->kind == ExprKind::IntImm) return as<IntImmNode>(e)->value == 0;
  if (e->kind == ExprKind::Cast) return positive_zero(as<CastNode>(e)->value);
  return false;
}

class Picker : public Mutator {
 public:
  explicit Picker(const Kernel& k) : kernel_(k) {}

  Stmt mutate(const Stmt& s) override {
    Stmt m = Mutator::mutate(s);
    if (!m || m->kind != StmtKind::Seq) return m;
    const auto& body = as<SeqNode>(m)->body;
    std::vector<Stmt> out;
    bool changed = false;
    for (size_t k = 0; k < body.size(); ++k) {
      if (k + 1 < body.size())
        if (Stmt r = rewrite(body[k], body[k + 1])) {
          out.push_back(r);
          ++k;
          changed = true;
          continue;
        }
      out.push_back(body[k]);
    }
    return changed ? std::make_shared<SeqNode>(out, m->span) : m;
  }
  using Mutator::mutate;

 private:
  // map + reduction -> the per-row element, or null when they are not the pick
  Stmt rewrite(const Stmt& map, const Stmt& red) {
    if (red->kind != StmtKind::Reduce || map->kind != StmtKind::For) return nullptr;
    auto* r = as<ReduceNode>(red);
    const Buffer& p = r->src;
    auto shape = p->const_shape();
    if (r->reduce_kind != ReduceKind::sum || !r->clear || !shape || shape->empty() || shape->size() > 2 ||
        r->axis != static_cast<int>(shape->size()) - 1 || !p->dtype.is_float() || p->scope == Scope::global)
      return nullptr;
    const int64_t cols = shape->back();
    if (cols < 2) return nullptr;
    // the map: parallel loops from 0 over p's dims storing p at the loop variables
    std::vector<const ForNode*> loops;
    Stmt cur = map;
    while (cur && cur->kind == StmtKind::For && loops.size() < shape->size()) {
      auto* f = as<ForNode>(cur);
      loops.push_back(f);
      cur = f->body;
    }
    if (loops.size() != shape->size() || !cur || cur->kind != StmtKind::Store) return nullptr;
    for (size_t d = 0; d < loops.size(); ++d) {
      auto mn = as_const_int(loops[d]->min), ext = as_const_int(loops[d]->extent);
      if (loops[d]->for_kind != ForKind::parallel || !mn || *mn != 0 || !ext || *ext != (*shape)[d]) return nullptr;
    }
    auto* st = as<StoreNode>(cur);
    if (st->buffer != p || st->indices.size() != loops.size()) return nullptr;
    for (size_t d = 0; d < loops.size(); ++d)
      if (!is_var(st->indices[d], loops[d]->var)) return nullptr;
    const Var& j = loops.back()->var;
    Expr v = st->value;
    std::optional<DType> through;  // a cast around the where
    if (v->kind == ExprKind::Cast) {
      through = v->dtype;
      v = as<CastNode>(v)->value;
    }
    if (v->kind != ExprKind::Select) return nullptr;
    auto* sel = as<SelectNode>(v);
    if (!positive_zero(sel->f) || !sel->t->dtype.is_float() || sel->cond->kind != ExprKind::Binary) return nullptr;
    auto* eq = as<BinaryNode>(sel->cond);
    if (eq->op != BinOp::EQ) return nullptr;
    Expr s = is_var(eq->a, j) ? eq->b : is_var(eq->b, j) ? eq->a : nullptr;
    if (!s || !s->dtype.is_int() || mentions(s, j.get()) || !pickable(sel->t, j.get(), cols)) return nullptr;
    // p is read or written by these two statements only
    int uses = 0;
    for_each_stmt(kernel_->body, [&](const Stmt& x) {
      if (x->kind == StmtKind::Seq || x->kind == StmtKind::For || x->kind == StmtKind::If ||
          x->kind == StmtKind::CoreScope || x->kind == StmtKind::Alloc)
        return;
      if (references(x, p)) ++uses;
    });
    if (uses != 2) return nullptr;
    removed_.insert(p.get());
    // the element
    const Span& at = red->span;
    const DType acc = p->dtype.code == DTypeCode::f64 ? DType(DTypeCode::f64) : DType(DTypeCode::f32);
    Expr zero = int_imm(0, s->dtype, at);
    Expr col = binary(BinOp::Min, binary(BinOp::Max, s, zero, at), int_imm(cols - 1, s->dtype, at), at);
    if (col->dtype != j->dtype) col = cast(col, j->dtype, at);
    Expr elem = substitute(sel->t, {{j, col}});
    if (through && elem->dtype != *through) elem = cast(elem, *through, at);
    if (elem->dtype != p->dtype) elem = cast(elem, p->dtype, at);
    Expr inside = binary(BinOp::And, binary(BinOp::GE, s, zero, at), binary(BinOp::LT, s, int_imm(cols, s->dtype, at), at), at);
    Expr picked = select(inside, elem, float_imm(0.0, p->dtype, at), at);
    if (picked->dtype != acc) picked = cast(picked, acc, at);
    Expr value = binary(BinOp::Add, picked, float_imm(0.0, acc, at), at);
    if (shape->size() == 1) {  // d (1,): one row
      Var i = var(j->name + "_row", kIndexType, at);
      Stmt one = std::make_shared<StoreNode>(r->dst, std::vector<Expr>{i}, value, at);
      return std::make_shared<ForNode>(i, int_imm(0, kIndexType, at), int_imm(1, kIndexType, at), ForKind::parallel, 0,
                                       one, at);
    }
    const ForNode* row = loops[0];
    Stmt store = std::make_shared<StoreNode>(r->dst, std::vector<Expr>{row->var}, value, at);
    return std::make_shared<ForNode>(row->var, row->min, row->extent, ForKind::parallel, 0, store, row->span);
  }

  const Kernel& kernel_;

 public:
  std::set<const BufferNode*> removed_;  // the picks' tiles, whose allocations go
};

// drops the allocations of the tiles nothing references any more
struct DropAllocs : Mutator {
  const std::set<const BufferNode*>& gone;
  explicit DropAllocs(const std::set<const BufferNode*>& g) : gone(g) {}
  Stmt mutate(const Stmt& s) override {
    Stmt m = Mutator::mutate(s);
    if (!m || m->kind != StmtKind::Seq) return m;
    std::vector<Stmt> out;
    for (const auto& x : as<SeqNode>(m)->body)
      if (x->kind != StmtKind::Alloc || !gone.count(as<AllocNode>(x)->buffer.get())) out.push_back(x);
    return out.size() == as<SeqNode>(m)->body.size() ? m : std::make_shared<SeqNode>(out, m->span);
  }
  using Mutator::mutate;
};

}  // namespace

Kernel pick_element(const Kernel& k) {
  Picker p(k);
  Stmt body = p.mutate(k->body);
  if (body == k->body) return k;
  body = DropAllocs(p.removed_).mutate(body);
  return std::make_shared<KernelNode>(k->name, k->params, k->block_vars, k->grid, body, k->span, k->sub_block_var);
}

}  // namespace tw::transform
