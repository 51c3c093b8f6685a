// vector_util: see vector_util.h.
#include "target/ascend/vector_util.h"

#include "ir/functor.h"
#include "ir/printer.h"
#include "target/ascend/pass_util.h"

namespace tw::ascend::vec {

bool small_int(ir::DType t) { return t == ir::DType(ir::DTypeCode::i8) || t == ir::DType(ir::DTypeCode::u8); }

ir::DType compute_type(ir::DType t) {
  return t == ir::DType(ir::DTypeCode::bf16) || t == ir::DType(ir::DTypeCode::f16) || small_int(t)
             ? ir::DType(ir::DTypeCode::f32)
             : t;
}

Names::Names(const ir::Kernel& k) {
  ir::for_each_stmt(k->body, [&](const ir::Stmt& s) {
    if (s->kind == ir::StmtKind::Alloc) names_.insert(as<ir::AllocNode>(s)->buffer->name);
    if (s->kind == ir::StmtKind::For) names_.insert(as<ir::ForNode>(s)->var->name);
    if (s->kind == ir::StmtKind::Let) names_.insert(as<ir::LetNode>(s)->var->name);
  });
  for (const auto& p : k->params) names_.insert(p.name());
  for (const auto& v : k->block_vars) names_.insert(v->name);
}

std::string Names::fresh(const std::string& base) {
  for (int i = 0;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (names_.insert(n).second) return n;
  }
}

ir::Var Names::fresh_var(const std::string& base, const ir::Span& sp) { return ir::var(fresh(base), ir::kIndexType, sp); }

ir::Var Names::var(const std::string& base, const ir::Span& sp) {
  return ir::var(names_.insert(base).second ? base : fresh(base), ir::kIndexType, sp);
}

ir::Buffer Names::ub(const ir::Buffer& owner, const std::string& suffix, ir::DType t, const std::vector<int64_t>& shape,
                     const ir::Span& sp, std::vector<ir::Stmt>& out) {
  std::vector<ir::Expr> sh;
  for (auto d : shape) sh.push_back(C(d));
  auto b = std::make_shared<ir::BufferNode>(fresh(owner->name + suffix), t, sh, ir::Scope::UB, sp);
  b->temp_of = owner->temp_of.empty() ? owner->name : owner->temp_of;
  out.push_back(std::make_shared<ir::AllocNode>(b, sp));
  return b;
}

ir::Stmt pfor(const ir::Var& v, int64_t extent, const ir::Stmt& body, const ir::Span& sp, ir::Expr user) {
  return std::make_shared<ir::ForNode>(v, C(0), C(extent), ir::ForKind::parallel, 0, body, sp, std::move(user));
}

std::string unused_index_hint(const std::string& buffer) {
  return "map over the dims the store uses (a value per row: for i in T.Parallel(M): " + buffer +
         "[i] = ...); to combine values along a dim use a reduction (T.reduce_sum / T.reduce_max)";
}

std::optional<VectorMap> vector_map(const ir::Stmt& s) {
  if (!s || s->kind != ir::StmtKind::For || as<ir::ForNode>(s)->for_kind != ir::ForKind::parallel) return std::nullopt;
  VectorMap m;
  const ir::ForNode* cur = as<ir::ForNode>(s);
  while (true) {
    auto e = ir::as_const_int(cur->extent);
    auto mn = ir::as_const_int(cur->min);
    if (!e || !mn || *mn != 0) return std::nullopt;
    m.vars.push_back(cur->var);
    m.ext.push_back(*e);
    m.user.push_back(cur->user_extent);
    const ir::Stmt& b = cur->body;
    if (b && b->kind == ir::StmtKind::For && as<ir::ForNode>(b)->for_kind == ir::ForKind::parallel) {
      cur = as<ir::ForNode>(b);
      continue;
    }
    m.body = b;
    break;
  }
  m.items = ir::stmts_of(m.body);
  bool vector_code = m.vars.size() <= 2 && !m.items.empty();
  for (const auto& it : m.items) {
    if (it->kind != ir::StmtKind::Store && it->kind != ir::StmtKind::Let) vector_code = false;
    if (it->kind == ir::StmtKind::Store && as<ir::StoreNode>(it)->buffer->scope != ir::Scope::UB) vector_code = false;
  }
  if (vector_code)
    ir::for_each_expr(m.body, [&](const ir::Expr& x) {
      if (x->kind == ir::ExprKind::Load) {
        ir::Scope sc = as<ir::LoadNode>(x)->buffer->scope;
        if (sc != ir::Scope::UB && sc != ir::Scope::global) vector_code = false;
      }
    });
  if (!vector_code || int64_element_map(m.items)) return std::nullopt;
  return m;
}

bool int64_element_map(const std::vector<ir::Stmt>& items) {
  const ir::DType i64{ir::DTypeCode::i64};
  for (const auto& it : items) {
    if (it->kind != ir::StmtKind::Store) return false;
    auto* st = as<ir::StoreNode>(it);
    if (st->buffer->dtype != i64 || st->buffer->scope != ir::Scope::UB) return false;
    bool scalar_unit = true;
    ir::for_each_expr(st->value, [&](const ir::Expr& x) {
      const bool load = x->kind == ir::ExprKind::Load;
      scalar_unit = scalar_unit && x->kind != ir::ExprKind::Call &&
                    !(load && (as<ir::LoadNode>(x)->buffer->scope != ir::Scope::UB || x->dtype == i64));
    });
    if (!scalar_unit) return false;
  }
  return !items.empty();
}

std::vector<int64_t> const_extents(const ir::Region& r) {
  std::vector<int64_t> e;
  for (const auto& x : r.extents) {
    auto c = ir::as_const_int(x);
    e.push_back(c ? *c : -1);
  }
  return e;
}

std::optional<ir::Stmt> region_map(const ir::Region& dst, const ir::Region& src, const ir::Span& sp,
                                   const std::function<ir::Expr(ir::Expr)>& f, Names& names) {
  using Dims = std::vector<std::pair<size_t, int64_t>>;
  // all: every dim; last: the non-unit dims and the last one
  auto dims = [](const ir::Region& r, bool all, bool last) {
    Dims d;
    for (size_t i = 0; i < r.extents.size(); ++i) {
      auto c = ir::as_const_int(r.extents[i]);
      if (!c) return std::optional<Dims>{};
      if (all || *c != 1 || (last && i + 1 == r.extents.size())) d.push_back({i, *c});
    }
    if (d.empty() && !r.extents.empty()) d.push_back({r.extents.size() - 1, 1});
    return std::optional<Dims>{d};
  };
  bool same = dst.extents.size() == src.extents.size();
  for (size_t i = 0; same && i < dst.extents.size(); ++i) {
    auto a = ir::as_const_int(dst.extents[i]), b = ir::as_const_int(src.extents[i]);
    same = a && b && *a == *b;
  }
  // (session 22) N-D regions of the same shape keep their last dim even when it is 1 (a (6, 2, 1)
  // tile: a serial loop over 6 around a (2, 1) map), so the map's column index is the last dim
  bool all = same && dst.extents.size() <= 2;
  auto dd = dims(dst, all, same), sd = dims(src, all, same);
  if (!dd || !sd || dd->size() != sd->size() || dd->empty()) return std::nullopt;
  for (size_t i = 0; i < dd->size(); ++i)
    if ((*dd)[i].second != (*sd)[i].second) return std::nullopt;
  // more than two non-unit dims: a serial loop over the leading ones around a 2-D map
  size_t lead = dd->size() > 2 ? dd->size() - 2 : 0;
  std::vector<ir::Var> vars;
  std::vector<int64_t> ext;
  for (auto& [d, e] : *dd) {
    vars.push_back(names.fresh_var(vars.size() < lead ? "w" : d + 1 == dst.extents.size() ? "j" : "i", sp));
    ext.push_back(e);
  }
  auto index = [&](const ir::Region& r, const Dims& d) {
    std::vector<ir::Expr> idx(r.starts.begin(), r.starts.end());
    for (size_t k = 0; k < d.size(); ++k) idx[d[k].first] = ir::arith::add(r.starts[d[k].first], vars[k]);
    return idx;
  };
  ir::Expr v = f(ir::load(src.buffer, index(src, *sd), sp));
  ir::Stmt body = std::make_shared<ir::StoreNode>(dst.buffer, index(dst, *dd), v, sp);
  for (size_t k = vars.size(); k-- > 0;)
    body = k >= lead ? pfor(vars[k], ext[k], body, sp)
                     : std::make_shared<ir::ForNode>(vars[k], C(0), C(ext[k]), ir::ForKind::serial, 0, body, sp);
  return body;
}

ir::Stmt cast_map(const ir::Region& dst, const ir::Region& src, const ir::Span& sp, Names& names) {
  auto m = region_map(dst, src, sp, [&](ir::Expr x) { return ir::cast(x, dst.buffer->dtype, sp); }, names);
  if (!m)
    throw ir::Error("copy " + ir::print(src) + " -> " + ir::print(dst) + " converts " +
                        std::string(src.buffer->dtype.name()) + " to " + std::string(dst.buffer->dtype.name()) +
                        " between regions of different shapes (or more than 2-D)",
                    sp, "copy between regions of the same rows x cols");
  return *m;
}

ir::Stmt rewrite_stmts(const ir::Stmt& body,
                       const std::function<std::optional<std::vector<ir::Stmt>>(const ir::Stmt&)>& f) {
  struct M : ir::Mutator {
    const std::function<std::optional<std::vector<ir::Stmt>>(const ir::Stmt&)>* f = nullptr;
    ir::Stmt mutate(const ir::Stmt& s) override {
      if (!s) return s;
      // a statement list in a statement list is spliced into it (ir::Mutator flattens nested Seqs)
      if (auto r = (*f)(s)) return r->size() == 1 ? (*r)[0] : std::make_shared<ir::SeqNode>(std::move(*r), s->span);
      return ir::Mutator::mutate(s);
    }
    using ir::Mutator::mutate;
  } m;
  m.f = &f;
  return m.mutate(body);
}

ir::Kernel with_body(const ir::Kernel& k, ir::Stmt body) {
  return std::make_shared<ir::KernelNode>(k->name, k->params, k->block_vars, k->grid, std::move(body), k->span,
                                          k->sub_block_var);
}

}  // namespace tw::ascend::vec
