#include "transform/nan_unobserved.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "ir/functor.h"

namespace tw::transform {

namespace {

using ir::as;
using ir::Buffer;
using ir::Expr;
using ir::ExprKind;
using ir::Stmt;
using ir::StmtKind;

// What holds for a tracked row in the two runs (see the header): bits that only get lost.
using Val = uint8_t;
constexpr Val kSame = 1, kNan = 2, kAll = 4;
constexpr Val C = kSame, H = kSame | kNan, P = kSame | kNan | kAll, D = 0;
Val join(Val a, Val b) { return a & b; }
// An operation that is NaN when an operand is: A from either operand (then also the same), N
// from either, S from both.
Val propagate(Val a, Val b) {
  Val all = (a | b) & kAll;
  Val nan = ((a | b) & kNan) | (all ? kNan : 0);
  Val same = ((a & b) & kSame) | (all ? kSame : 0);
  return all | nan | same;
}

struct Fail {};

class Prover {
 public:
  Prover(const ir::Kernel& k, const std::set<const ir::ReduceNode*>& cand) : k_(k), cand_(cand) {}

  // True when the run from R's first difference keeps every output the same (NaN where NaN).
  bool prove(const ir::ReduceNode* R) {
    rows_ = tracked_rows(R);
    if (rows_ <= 0) return false;
    std::vector<Level> path;
    if (!find_in(k_->body, nullptr, R, path)) return false;
    try {
      st_.clear();
      st_[R->src.get()] = H;
      st_[R->dst.get()] = D;
      // the rest of every enclosing body, innermost first; an enclosing loop then runs to its fixpoint
      for (size_t lv = path.size(); lv-- > 0;) {
        for (size_t i = path[lv].i + 1; i < path[lv].items.size(); ++i) exec(path[lv].items[i]);
        if (path[lv].loop) {
          if (as<ir::ForNode>(path[lv].loop)->for_kind == ir::ForKind::parallel) throw Fail{};
          exec(path[lv].loop);
        }
      }
      return true;
    } catch (const Fail&) {
      return false;
    }
  }

 private:
  const ir::Kernel& k_;
  const std::set<const ir::ReduceNode*>& cand_;
  int64_t rows_ = 0;
  std::map<const ir::BufferNode*, Val> st_;  // absent: C
  struct Par {
    const ir::VarNode* var;
    int64_t extent;
  };
  std::vector<Par> par_;  // the enclosing parallel loops (a map's), outermost first

  // The row count R tracks: its source's first dim, for a reduction over the last dim of a 2-D
  // tile into a 1-D tile of that many rows; 0 otherwise.
  static int64_t tracked_rows(const ir::ReduceNode* R) {
    auto s = R->src->const_shape(), d = R->dst->const_shape();
    if (!s || !d || s->size() != 2 || d->size() != 1 || R->axis != 1 || (*d)[0] != (*s)[0]) return 0;
    if (R->src->scope == ir::Scope::global || R->dst->scope == ir::Scope::global) return 0;
    return (*s)[0];
  }
  bool tracked(const Buffer& b) const {
    if (b->scope == ir::Scope::global) return false;
    auto s = b->const_shape();
    return s && !s->empty() && s->size() <= 2 && (*s)[0] == rows_;
  }
  Val get(const Buffer& b) const {
    auto it = st_.find(b.get());
    return it == st_.end() ? C : it->second;
  }
  void set(const Buffer& b, Val v) {
    if (!tracked(b) && !(v & kSame)) throw Fail{};  // a differing row where rows are not followed
    st_[b.get()] = v;
  }
  // The chain of bodies from the kernel body down to R: per level the body's statements, the
  // index of the one that holds (or is) R, and the loop whose body it is (null: the kernel's
  // body or an if branch).
  struct Level {
    std::vector<Stmt> items;
    size_t i;
    Stmt loop;
  };
  bool find_in(const Stmt& body, const Stmt& loop, const ir::ReduceNode* R, std::vector<Level>& path) {
    auto items = ir::stmts_of(body);
    for (size_t i = 0; i < items.size(); ++i) {
      const Stmt& s = items[i];
      path.push_back({items, i, loop});
      if (s.get() == R) return true;
      if (s->kind == StmtKind::For && find_in(as<ir::ForNode>(s)->body, s, R, path)) return true;
      if (s->kind == StmtKind::If) {
        auto* f = as<ir::IfNode>(s);
        if (find_in(f->then_body, nullptr, R, path)) return true;
        if (f->else_body && find_in(f->else_body, nullptr, R, path)) return true;
      }
      path.pop_back();
    }
    return false;
  }

  bool full_region(const ir::Region& r) const {
    auto s = r.buffer->const_shape();
    if (!s || s->size() != r.starts.size()) return false;
    for (size_t d = 0; d < s->size(); ++d) {
      auto a = ir::as_const_int(r.starts[d]), e = ir::as_const_int(r.extents[d]);
      if (!a || !e || *a != 0 || *e != (*s)[d]) return false;
    }
    return true;
  }
  static Val cast_to(Val v, ir::DType t) { return t.is_float() ? v : (v & kSame ? C : D); }

  void exec(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (const auto& x : as<ir::SeqNode>(s)->body) exec(x);
        return;
      case StmtKind::For: {
        auto* f = as<ir::ForNode>(s);
        if (f->for_kind == ir::ForKind::parallel) {
          auto c = ir::as_const_int(f->extent), m = ir::as_const_int(f->min);
          par_.push_back({f->var.get(), c && m && *m == 0 ? *c : -1});
          exec(f->body);
          par_.pop_back();
          return;
        }
        scalar(f->min);
        scalar(f->extent);
        for (;;) {  // to the fixpoint: values only lose bits, so this ends
          auto before = st_;
          exec(f->body);
          for (auto& [b, v] : st_) {
            auto it = before.find(b);
            v = join(v, it == before.end() ? C : it->second);
          }
          if (st_ == before) return;
        }
      }
      case StmtKind::If: {
        auto* f = as<ir::IfNode>(s);
        scalar(f->cond);
        auto before = st_;
        exec(f->then_body);
        auto then_st = st_;
        st_ = before;
        exec(f->else_body);
        for (auto& [b, v] : then_st) {
          auto it = st_.find(b);
          st_[b] = join(v, it == st_.end() ? C : it->second);
        }
        for (auto& [b, v] : st_)
          if (!then_st.count(b)) v = join(v, C);
        return;
      }
      case StmtKind::Let: scalar(as<ir::LetNode>(s)->value); return;
      case StmtKind::Alloc: st_.erase(as<ir::AllocNode>(s)->buffer.get()); return;
      case StmtKind::Store: store(as<ir::StoreNode>(s)); return;
      case StmtKind::Fill: {
        auto* f = as<ir::FillNode>(s);
        scalar(f->value);
        for (auto& e : f->dst.starts) scalar(e);
        if (f->dst.buffer->scope != ir::Scope::global) set(f->dst.buffer, full_region(f->dst) ? C : join(get(f->dst.buffer), C));
        return;
      }
      case StmtKind::Copy: copy(as<ir::CopyNode>(s)); return;
      case StmtKind::Gemm: gemm(as<ir::GemmNode>(s)); return;
      case StmtKind::Reduce: reduce(as<ir::ReduceNode>(s)); return;
      case StmtKind::CoreScope:
      case StmtKind::Sync: throw Fail{};
    }
    throw Fail{};
  }

  // A scalar expression (loop bound, condition, let, index): every tile it reads must be the same.
  void scalar(const Expr& e) {
    if (!e) return;
    ir::for_each_expr(e, [&](const Expr& x) {
      if (x->kind == ExprKind::Load && !(get(as<ir::LoadNode>(x)->buffer) & kSame)) throw Fail{};
    });
  }

  void copy(const ir::CopyNode* c) {
    for (auto& e : c->src.starts) scalar(e);
    for (auto& e : c->dst.starts) scalar(e);
    const Buffer& sb = c->src.buffer;
    const Buffer& db = c->dst.buffer;
    Val v = sb->scope == ir::Scope::global ? C : get(sb);
    if (db->scope == ir::Scope::global) {
      if (!(v & kSame)) throw Fail{};  // an output that may differ
      return;
    }
    bool along_rows = tracked(sb) && tracked(db) && full_region(c->src) && full_region(c->dst) &&
                      sb->const_shape() == db->const_shape();
    if (!along_rows) {
      if (!(v & kSame)) throw Fail{};
      v = C;
    }
    v = cast_to(v, db->dtype);
    set(db, along_rows || full_region(c->dst) ? v : join(get(db), v));
  }

  void gemm(const ir::GemmNode* g) {
    Val b = g->b.buffer->scope == ir::Scope::global ? C : get(g->b.buffer);
    if (!(b & kSame)) throw Fail{};
    Val a = g->a.buffer->scope == ir::Scope::global ? C : get(g->a.buffer);
    Val old = get(g->c.buffer);
    bool along_rows = !g->trans_a && tracked(g->a.buffer) && tracked(g->c.buffer) && full_region(g->a) &&
                      full_region(g->c) && g->a.buffer->ndim() == 2 && g->c.buffer->ndim() == 2;
    // a NaN in row r of A makes every element of C's row r NaN (NaN * b is NaN); not with a band,
    // whose terms outside it may be skipped and whose C outside it may be left unwritten
    bool nan_spreads = along_rows && g->band == ir::GemmBand::none;
    Val r;
    if (along_rows) r = a & kNan && nan_spreads ? P : a & kSame ? C : D;
    else if (a & kSame) r = C;
    else throw Fail{};
    if (!g->clear) r = propagate(old, r);
    if (g->band != ir::GemmBand::none || (!along_rows && !full_region(g->c))) r = join(old, r);
    set(g->c.buffer, r);
  }

  void reduce(const ir::ReduceNode* r) {
    Val s = get(r->src);
    bool along_rows = tracked(r->src) && tracked(r->dst) && r->src->ndim() == 2 && r->dst->ndim() == 1 && r->axis == 1;
    Val v;
    if (cand_.count(r)) {
      if (!along_rows) throw Fail{};
      v = D;
    } else if (!r->src->dtype.is_float()) {
      if (!along_rows && !(s & kSame)) throw Fail{};
      v = s & kSame ? C : D;
    } else if (along_rows) {
      v = s & kNan ? P : s & kSame ? C : D;  // a sum or an exact max / min of a row with a NaN is NaN
      if (!r->clear) v = propagate(get(r->dst), v);
    } else {
      if (!(s & kSame)) throw Fail{};
      v = r->clear ? C : join(get(r->dst), C);
    }
    set(r->dst, v);
  }

  // ---- maps

  const Par* par_of(const Expr& e) const {
    if (e->kind != ExprKind::Var) return nullptr;
    for (const auto& p : par_)
      if (p.var == e.get()) return &p;
    return nullptr;
  }
  // The store's indices are distinct parallel variables covering every element of b.
  bool covers(const Buffer& b, const std::vector<Expr>& idx) const {
    auto s = b->const_shape();
    if (!s || s->size() != idx.size()) return false;
    std::set<const ir::ExprNode*> seen;
    for (size_t d = 0; d < idx.size(); ++d) {
      const Par* p = par_of(idx[d]);
      if (!p || p->extent != (*s)[d] || !seen.insert(idx[d].get()).second) return false;
    }
    return true;
  }

  struct Ctx {
    const ir::VarNode* row;          // the map's row variable (row r of the tracked tiles), or null
    const std::vector<Expr>* idx;    // the store's indices
    const Buffer* dst;               // the stored tile (null: a global tensor)
  };

  Val eval(const Expr& e, const Ctx& c) {
    switch (e->kind) {
      case ExprKind::IntImm:
      case ExprKind::FloatImm:
      case ExprKind::Var: return C;
      case ExprKind::Load: {
        auto* l = as<ir::LoadNode>(e);
        for (auto& i : l->indices) scalar(i);
        if (l->buffer->scope == ir::Scope::global) return C;
        Val v = get(l->buffer);
        bool on_row = c.row && tracked(l->buffer) && !l->indices.empty() && l->indices[0]->kind == ExprKind::Var &&
                      l->indices[0].get() == c.row;
        if (!on_row) {
          if (!(v & kSame)) throw Fail{};
          return C;
        }
        // the NaN stays at the stored position only for the same index over the same shape
        bool same_place = c.dst && c.idx->size() == l->indices.size() && covers(l->buffer, l->indices) &&
                          (*c.dst)->const_shape() == l->buffer->const_shape();
        for (size_t d = 0; same_place && d < l->indices.size(); ++d)
          same_place = l->indices[d].get() == (*c.idx)[d].get();
        if (!same_place && !(v & kAll)) v &= kSame;
        return v;
      }
      case ExprKind::Binary: {
        auto* b = as<ir::BinaryNode>(e);
        Val x = eval(b->a, c), y = eval(b->b, c);
        switch (b->op) {
          case ir::BinOp::Add: case ir::BinOp::Sub: case ir::BinOp::Mul: case ir::BinOp::Div:
          case ir::BinOp::Max: case ir::BinOp::Min:
            if (e->dtype.is_float()) return propagate(x, y);
            break;
          default: break;
        }
        return (x & y & kSame) ? C : D;
      }
      case ExprKind::Unary: {
        auto* u = as<ir::UnaryNode>(e);
        Val x = eval(u->a, c);
        if (u->op == ir::UnOp::Neg && e->dtype.is_float()) return x;
        return x & kSame ? C : D;
      }
      case ExprKind::Call: {
        auto* f = as<ir::CallNode>(e);
        Val v = P;
        bool prop = f->args.size() == 1 && e->dtype.is_float();
        switch (f->fn) {
          case ir::MathFn::exp: case ir::MathFn::exp2: case ir::MathFn::log: case ir::MathFn::log2:
          case ir::MathFn::sqrt: case ir::MathFn::rsqrt: case ir::MathFn::abs: break;
          default: prop = false;
        }
        for (auto& a : f->args) v = prop ? eval(a, c) : (v & eval(a, c) & kSame ? C : D);
        return v;
      }
      case ExprKind::Cast: {
        auto* k = as<ir::CastNode>(e);
        Val v = eval(k->value, c);
        return k->value->dtype.is_float() ? cast_to(v, e->dtype) : (v & kSame ? C : D);
      }
      case ExprKind::Select: {
        auto* s = as<ir::SelectNode>(e);
        Val v = eval(s->cond, c) & eval(s->t, c) & eval(s->f, c);
        return v & kSame ? C : D;
      }
    }
    throw Fail{};
  }

  void store(const ir::StoreNode* s) {
    const Buffer& b = s->buffer;
    for (auto& i : s->indices) scalar(i);
    const bool global = b->scope == ir::Scope::global;
    // the row variable: the store's first index when it is a parallel variable over the tracked
    // rows; for a global tensor, the outermost parallel variable over them
    const ir::VarNode* row = nullptr;
    if (!global && tracked(b) && !s->indices.empty()) {
      if (const Par* p = par_of(s->indices[0]); p && p->extent == rows_) row = p->var;
    } else if (global) {
      for (const auto& p : par_)
        if (p.extent == rows_) {
          row = p.var;
          break;
        }
    }
    Ctx c{row, &s->indices, global ? nullptr : &b};
    Val v = eval(s->value, c);
    if (global) {
      if (!(v & kSame)) throw Fail{};
      return;
    }
    v = cast_to(v, b->dtype);
    if (!row && !(v & kSame)) throw Fail{};
    set(b, row && covers(b, s->indices) ? v : join(get(b), v));
  }
};

// Rebuilds the kernel with @nan_unobserved on the reductions in `keep`.
class Annotate : public ir::Mutator {
 public:
  explicit Annotate(const std::set<const ir::ReduceNode*>& keep) : keep_(keep) {}
  using ir::Mutator::mutate;
  Stmt mutate(const Stmt& s) override {
    if (s && s->kind == StmtKind::Reduce && keep_.count(as<ir::ReduceNode>(s)) &&
        !ir::find_annotation(s, "nan_unobserved"))
      return ir::with_annotation(s, {"nan_unobserved", {}});
    return ir::Mutator::mutate(s);
  }

 private:
  const std::set<const ir::ReduceNode*>& keep_;
};

}  // namespace

ir::Kernel mark_nan_unobserved(const ir::Kernel& k) {
  std::vector<const ir::ReduceNode*> order;  // the candidates in program order
  bool expert = k->is_npu();
  ir::for_each_stmt(k->body, [&](const Stmt& s) {
    if (s->kind == StmtKind::CoreScope || s->kind == StmtKind::Sync) expert = true;
    if (s->kind != StmtKind::Reduce) return;
    auto* r = as<ir::ReduceNode>(s);
    if (r->reduce_kind != ir::ReduceKind::sum && r->src->dtype.is_float()) order.push_back(r);
  });
  if (expert || order.empty()) return k;
  // Dropping one candidate can make another provable, so the order in which they are tried decides
  // the kept set: program order, never the set's (addresses: examples/moe.py's topk_gating compiled
  // to two Programs depending on what the process compiled before, h-determ35). A candidate that
  // fails with every other one exact fails in any set: those are dropped first, so they block no
  // other (topk_gating's softmax max is kept: its top-k rounds' max is not provable).
  std::set<const ir::ReduceNode*> cand;
  for (auto* r : order) {
    std::set<const ir::ReduceNode*> alone{r};
    if (Prover(k, alone).prove(r)) cand.insert(r);
  }
  for (bool changed = true; changed && !cand.empty();) {  // drop the unproven, prove the rest again
    changed = false;
    for (auto* r : order)
      if (cand.count(r) && !Prover(k, cand).prove(r)) {
        cand.erase(r);
        changed = true;
      }
  }
  if (cand.empty()) return k;
  return Annotate(cand).mutate_kernel(k);
}

}  // namespace tw::transform
