#include "transform/pick_element.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

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

// j may be used anywhere in e but as a load's index it is j itself, in a tile dimension of extent
// cols (the element read at the clamped column is one the map read); e holds no integer division
// (nothing traps at a column the map's where would not have chosen)
bool pickable(const Expr& e, const VarNode* j, int64_t cols) {
  bool ok = true;
  for_each_expr(e, [&](const Expr& x) {
    if (x->kind == ExprKind::Binary) {
      auto* b = as<BinaryNode>(x);
      if (b->dtype.is_int() && (b->op == BinOp::FloorDiv || b->op == BinOp::CeilDiv || b->op == BinOp::Mod)) ok = false;
    }
    if (x->kind != ExprKind::Load) return;
    auto* l = as<LoadNode>(x);
    auto shape = l->buffer->const_shape();
    for (size_t d = 0; d < l->indices.size(); ++d) {
      if (!mentions(l->indices[d], j)) continue;
      if (l->buffer->scope == Scope::global || !shape || l->indices[d].get() != j || (*shape)[d] != cols) ok = false;
    }
  });
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
  // allowed null: a dry run that counts the statements of each p's groups (grouped_); else the
  // groups of the tiles in *allowed become their elements
  explicit Picker(const std::set<const BufferNode*>* allowed) : allowed_(allowed) {}

  Stmt mutate(const Stmt& s) override {
    Stmt m = Mutator::mutate(s);
    if (!m || m->kind != StmtKind::Seq) return m;
    const auto& body = as<SeqNode>(m)->body;
    std::vector<Stmt> out;
    bool changed = false;
    for (size_t k = 0; k < body.size(); ++k) {
      if (auto [r, used, p] = rewrite(body, k); r && !allowed_) {
        grouped_[p.get()].first = p;
        grouped_[p.get()].second += used;
        out.insert(out.end(), body.begin() + k, body.begin() + k + used);
        k += used - 1;
        continue;
      } else if (r && allowed_->count(p.get())) {
        removed_.insert(p.get());
        out.push_back(r);
        k += used - 1;
        changed = true;
        continue;
      }
      out.push_back(body[k]);
    }
    return changed ? std::make_shared<SeqNode>(out, m->span) : m;
  }
  using Mutator::mutate;

 private:
  // The loops of a map over the whole of p storing p at the loop variables, and its store; null if not.
  const StoreNode* map_of(const Stmt& map, const Buffer& p, std::vector<const ForNode*>& loops) {
    auto shape = p->const_shape();
    loops.clear();
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
    return st;
  }

  // body[k] the pick map, then maps that keep p where a condition holds (the +0.0 elsewhere: a row
  // in column blocks masks its last block's tail so), then the reduction: the per-row element and
  // how many statements it replaces, or null
  // (and p)
  std::tuple<Stmt, size_t, Buffer> rewrite(const std::vector<Stmt>& body, size_t k) {
    const Stmt& map = body[k];
    if (map->kind != StmtKind::For) return {};
    // the reduction: after the pick map and its masks
    size_t n = k + 1;
    const ReduceNode* r = nullptr;
    for (; n < body.size(); ++n)
      if (body[n]->kind == StmtKind::Reduce) {
        r = as<ReduceNode>(body[n]);
        break;
      } else if (body[n]->kind != StmtKind::For) {
        return {};
      }
    if (!r) return {};
    const Buffer& p = r->src;
    auto shape = p->const_shape();
    const DType acc = p->dtype.code == DTypeCode::f64 ? DType(DTypeCode::f64) : DType(DTypeCode::f32);
    if (r->reduce_kind != ReduceKind::sum || !shape || shape->empty() || shape->size() > 2 ||
        r->axis != static_cast<int>(shape->size()) - 1 || !p->dtype.is_float() || p->scope == Scope::global ||
        (!r->clear && p->dtype != acc))  // a merge adds in acc: p's dtype, so d's, is acc
      return {};
    const int64_t cols = shape->back();
    if (cols < 2) return {};
    std::vector<const ForNode*> loops;
    auto* st = map_of(map, p, loops);
    if (!st) return {};
    const Var& j = loops.back()->var;
    Expr v = st->value;
    std::optional<DType> through;  // a cast around the where
    if (v->kind == ExprKind::Cast) {
      through = v->dtype;
      v = as<CastNode>(v)->value;
    }
    if (v->kind != ExprKind::Select) return {};
    auto* sel = as<SelectNode>(v);
    if (!positive_zero(sel->f) || !sel->t->dtype.is_float() || sel->cond->kind != ExprKind::Binary) return {};
    auto* eq = as<BinaryNode>(sel->cond);
    if (eq->op != BinOp::EQ) return {};
    // j + off == s (either side; off free of j: a column block's start)
    Expr off, s;
    auto column = [&](const Expr& x) -> bool {
      if (is_var(x, j)) return off = int_imm(0, j->dtype, x->span), true;
      if (x->kind != ExprKind::Binary || as<BinaryNode>(x)->op != BinOp::Add) return false;
      auto* a = as<BinaryNode>(x);
      if (is_var(a->a, j) && !mentions(a->b, j.get())) return off = a->b, true;
      if (is_var(a->b, j) && !mentions(a->a, j.get())) return off = a->a, true;
      return false;
    };
    // (an int64 label, PyTorch's, widens the column: cast<int64>(j) == lab[i])
    auto unwiden = [](const Expr& x) {
      if (x->kind != ExprKind::Cast || !x->dtype.is_int()) return x;
      const Expr& v = as<CastNode>(x)->value;
      return v->dtype.is_int() && v->dtype.bytes() < x->dtype.bytes() ? v : x;
    };
    if (column(unwiden(eq->a))) s = eq->b;
    else if (column(unwiden(eq->b))) s = eq->a;
    if (s && s->dtype.is_int() && off->dtype.is_int() && s->dtype.bytes() > off->dtype.bytes()) {
      // a wider label: clamped in its dtype to [off - 1, off + cols] first (the same picks), then converted
      const DType w = s->dtype;
      Expr o = cast(off, w, s->span);
      s = cast(binary(BinOp::Min, binary(BinOp::Max, s, binary(BinOp::Sub, o, int_imm(1, w, s->span), s->span), s->span),
                      binary(BinOp::Add, o, int_imm(cols, w, s->span), s->span), s->span),
               off->dtype, s->span);
    }
    if (!s || !s->dtype.is_int() || s->dtype != off->dtype || mentions(s, j.get()) || !pickable(sel->t, j.get(), cols))
      return {};
    // the masks: p[i, j] = where(c, p[i, j], +0.0), each a condition on the column
    std::vector<Expr> masks;
    for (size_t m = k + 1; m < n; ++m) {
      std::vector<const ForNode*> ml;
      auto* ms = map_of(body[m], p, ml);
      if (!ms || ms->value->kind != ExprKind::Select) return {};
      auto* w = as<SelectNode>(ms->value);
      if (!positive_zero(w->f) || w->t->kind != ExprKind::Load || as<LoadNode>(w->t)->buffer != p) return {};
      for (size_t d = 0; d < ml.size(); ++d)
        if (!is_var(as<LoadNode>(w->t)->indices[d], ml[d]->var)) return {};
      std::vector<std::pair<Var, Expr>> same;
      for (size_t d = 0; d < ml.size(); ++d) same.emplace_back(ml[d]->var, loops[d]->var);
      Expr c = substitute(w->cond, same);
      bool reads_p = false;
      for_each_expr(c, [&](const Expr& x) { reads_p |= x->kind == ExprKind::Load && as<LoadNode>(x)->buffer == p; });
      if (reads_p || !pickable(c, j.get(), cols)) return {};
      masks.push_back(c);
    }
    // nothing the map reads is d (the new map writes d[i] while it reads), nor p beyond the masks' p[i, j]
    auto reads = [&](const Expr& x, const Buffer& b) {
      bool found = false;
      for_each_expr(x, [&](const Expr& y) { found |= y->kind == ExprKind::Load && as<LoadNode>(y)->buffer == b; });
      return found;
    };
    if (reads(sel->t, r->dst) || reads(s, r->dst) || reads(off, r->dst) || reads(sel->t, p) || reads(s, p)) return {};
    for (const auto& c : masks)
      if (reads(c, r->dst)) return {};
    // the element: the column k = s - off, s first clamped to [off - 1, off + cols] (no wrap)
    const Span& at = r->span;
    const DType it = s->dtype;
    const auto off0 = as_const_int(off);
    Expr kk = off0 && *off0 == 0 ? s
                                 : binary(BinOp::Sub,
                                          binary(BinOp::Min, binary(BinOp::Max, s, binary(BinOp::Sub, off, int_imm(1, it, at), at), at),
                                                 binary(BinOp::Add, off, int_imm(cols, it, at), at), at),
                                          off, at);
    Expr col = binary(BinOp::Min, binary(BinOp::Max, kk, int_imm(0, it, at), at), int_imm(cols - 1, it, at), at);
    if (col->dtype != j->dtype) col = cast(col, j->dtype, at);
    Expr elem = substitute(sel->t, {{j, col}});
    if (through && elem->dtype != *through) elem = cast(elem, *through, at);
    if (elem->dtype != p->dtype) elem = cast(elem, p->dtype, at);
    Expr inside = binary(BinOp::And, binary(BinOp::GE, kk, int_imm(0, it, at), at),
                         binary(BinOp::LT, kk, int_imm(cols, it, at), at), at);
    for (const auto& c : masks) inside = binary(BinOp::And, inside, substitute(c, {{j, col}}), at);
    Expr picked = select(inside, elem, float_imm(0.0, p->dtype, at), at);
    if (picked->dtype != acc) picked = cast(picked, acc, at);
    Expr value = binary(BinOp::Add, picked, float_imm(0.0, acc, at), at);
    Var i = shape->size() == 1 ? var(j->name + "_row", kIndexType, at) : loops[0]->var;
    if (!r->clear) value = binary(BinOp::Add, load(r->dst, {i}, at), value, at);
    Stmt store = std::make_shared<StoreNode>(r->dst, std::vector<Expr>{i}, value, at);
    Expr rows = shape->size() == 1 ? int_imm(1, kIndexType, at) : loops[0]->extent;
    return {std::make_shared<ForNode>(i, int_imm(0, kIndexType, at), rows, ForKind::parallel, 0, store, at), n - k + 1, p};
  }

  const std::set<const BufferNode*>* allowed_;

 public:
  std::map<const BufferNode*, std::pair<Buffer, size_t>> grouped_;  // (dry run) each p's groups' statements
  std::set<const BufferNode*> removed_;          // the picks' tiles, whose allocations go
};

// The statements that read or write b (loops, sequences and allocations not counted).
size_t uses(const Kernel& k, const Buffer& b) {
  size_t n = 0;
  for_each_stmt(k->body, [&](const Stmt& x) {
    if (x->kind == StmtKind::Seq || x->kind == StmtKind::For || x->kind == StmtKind::If ||
        x->kind == StmtKind::CoreScope || x->kind == StmtKind::Alloc)
      return;
    if (references(x, b)) ++n;
  });
  return n;
}

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
  // p read or written by its groups only (a row's column blocks in pairs run two or three groups on one p)
  Picker dry(nullptr);
  dry.mutate(k->body);
  std::set<const BufferNode*> allowed;
  for (const auto& [b, group] : dry.grouped_)
    if (uses(k, group.first) == group.second) allowed.insert(b);
  if (allowed.empty()) return k;
  Picker p(&allowed);
  Stmt body = p.mutate(k->body);
  if (body == k->body) return k;
  body = DropAllocs(p.removed_).mutate(body);
  return std::make_shared<KernelNode>(k->name, k->params, k->block_vars, k->grid, body, k->span, k->sub_block_var);
}

}  // namespace tw::transform
