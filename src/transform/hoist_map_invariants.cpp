#include "transform/hoist_map_invariants.h"

#include <set>
#include <string>

#include "ir/functor.h"

namespace tw::transform {

namespace {

using namespace ir;

struct Facts {
  bool with = false;     // mentions `with`
  bool without = false;  // mentions `without`
  bool costly = false;   // holds a math call or a division
  bool pure = true;      // loads only non-global buffers outside `written`
};

Facts facts(const Expr& e, const VarNode* with, const VarNode* without, const std::set<const BufferNode*>& written) {
  Facts f;
  for_each_expr(e, [&](const Expr& x) {
    switch (x->kind) {
      case ExprKind::Var:
        f.with |= x.get() == with;
        f.without |= x.get() == without;
        break;
      case ExprKind::Call: f.costly = true; break;
      case ExprKind::Binary: f.costly |= as<BinaryNode>(x)->op == BinOp::Div; break;
      case ExprKind::Load: {
        const auto& b = as<LoadNode>(x)->buffer;
        f.pure &= b->scope != Scope::global && !written.count(b.get());
        break;
      }
      case ExprKind::IntImm: case ExprKind::FloatImm: case ExprKind::Unary: case ExprKind::Cast:
      case ExprKind::Select:
        break;
    }
  });
  return f;
}

class Hoister : public Mutator {
 public:
  explicit Hoister(std::set<std::string> names) : names_(std::move(names)) {}

  Stmt mutate(const Stmt& s) override {
    if (!s || s->kind != StmtKind::For) return Mutator::mutate(s);
    auto* outer = as<ForNode>(s);
    auto rows = as_const_int(outer->extent);
    const Stmt& inner_stmt = outer->body;
    if (outer->for_kind != ForKind::parallel || !rows || *rows < 2 || !inner_stmt ||
        inner_stmt->kind != StmtKind::For)
      return Mutator::mutate(s);
    auto* inner = as<ForNode>(inner_stmt);
    auto cols = as_const_int(inner->extent);
    if (inner->for_kind != ForKind::parallel || !cols || *cols < 1) return Mutator::mutate(s);
    std::vector<const StoreNode*> stores;
    for (const auto& c : stmts_of(inner->body)) {
      if (c->kind != StmtKind::Store) return Mutator::mutate(s);
      stores.push_back(as<StoreNode>(c));
    }
    if (stores.empty()) return Mutator::mutate(s);
    row_ = outer->var.get();
    col_ = inner->var;
    cols_ = *cols;
    written_.clear();
    for (auto* st : stores) {
      if (st->buffer->scope == Scope::global) return Mutator::mutate(s);
      written_.insert(st->buffer.get());
    }
    hoisted_.clear();
    std::vector<Stmt> new_stores;
    for (auto* st : stores)
      new_stores.push_back(std::make_shared<StoreNode>(st->buffer, st->indices, rewrite(st->value), st->span));
    if (hoisted_.empty()) return s;

    std::vector<Stmt> out;
    for (auto& [tile, value] : hoisted_) {
      out.push_back(std::make_shared<AllocNode>(tile, value->span));
      Var c = var(fresh(col_->name), col_->dtype, inner->span);
      Expr v = substitute(value, {{col_, c}});
      Stmt st = std::make_shared<StoreNode>(tile, std::vector<Expr>{c}, v, value->span);
      out.push_back(std::make_shared<ForNode>(c, inner->min, inner->extent, ForKind::parallel, 0, st, inner->span));
    }
    Stmt body = std::make_shared<SeqNode>(new_stores, inner->body->span);
    Stmt in = std::make_shared<ForNode>(inner->var, inner->min, inner->extent, inner->for_kind, inner->num_stages,
                                        body, inner->span);
    out.push_back(std::make_shared<ForNode>(outer->var, outer->min, outer->extent, outer->for_kind,
                                            outer->num_stages, in, outer->span));
    return std::make_shared<SeqNode>(out, s->span);
  }
  using Mutator::mutate;

 private:
  Expr rewrite(const Expr& e) {
    return replace_invariants(e, col_.get(), row_, written_, [&](const Expr& x) { return load(tile_for(x), {col_}, x->span); });
  }

  Buffer tile_for(const Expr& e) {
    for (auto& [tile, value] : hoisted_)
      if (structural_equal(value, e)) return tile;
    Buffer t = buffer(fresh(col_->name + "_inv"), e->dtype, {int_imm(cols_)}, Scope::fragment, e->span);
    hoisted_.emplace_back(t, e);
    return t;
  }

  std::string fresh(const std::string& base) {
    for (int n = 0;; ++n) {
      std::string name = base + std::to_string(n);
      if (names_.insert(name).second) return name;
    }
  }

  std::set<std::string> names_;
  const VarNode* row_ = nullptr;
  Var col_;
  int64_t cols_ = 0;
  std::set<const BufferNode*> written_;
  std::vector<std::pair<Buffer, Expr>> hoisted_;
};

}  // namespace

Expr replace_invariants(const Expr& e, const VarNode* with, const VarNode* without,
                        const std::set<const BufferNode*>& written, const std::function<Expr(const Expr&)>& replace) {
  Facts f = facts(e, with, without, written);
  if (!f.without) {
    if (!f.with || !f.costly) return e;  // nothing below is worth replacing
    bool product = (e->kind == ExprKind::Binary && as<BinaryNode>(e)->op == BinOp::Mul) ||
                   (e->kind == ExprKind::Unary && as<UnaryNode>(e)->op == UnOp::Neg);
    if (!product && f.pure && (e->dtype.code == DTypeCode::f32 || e->dtype.code == DTypeCode::f64)) return replace(e);
  }
  struct Sub : Mutator {
    const std::function<Expr(const Expr&)>& rec;
    bool top = true;
    explicit Sub(const std::function<Expr(const Expr&)>& r) : rec(r) {}
    Expr mutate(const Expr& x) override {
      if (top) {  // e itself: rebuild its children
        top = false;
        return Mutator::mutate(x);
      }
      return rec(x);
    }
    using Mutator::mutate;
  };
  std::function<Expr(const Expr&)> rec = [&](const Expr& x) { return replace_invariants(x, with, without, written, replace); };
  Sub sub(rec);
  return sub.mutate(e);
}

ir::Kernel hoist_map_invariants(const ir::Kernel& k) {
  std::set<std::string> names;
  for (const auto& p : k->params) names.insert(p.name());
  for (const auto& v : k->block_vars) names.insert(v->name);
  for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind == StmtKind::Alloc) names.insert(as<AllocNode>(s)->buffer->name);
    if (s->kind == StmtKind::For) names.insert(as<ForNode>(s)->var->name);
    if (s->kind == StmtKind::Let) names.insert(as<LetNode>(s)->var->name);
  });
  Hoister h(std::move(names));
  Stmt body = h.mutate(k->body);
  if (body == k->body) return k;
  return std::make_shared<KernelNode>(k->name, k->params, k->block_vars, k->grid, body, k->span, k->sub_block_var);
}

}  // namespace tw::transform
