#include "transform/check_bounds.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/functor.h"
#include "ir/printer.h"

namespace tw::transform {

using namespace tw::ir;

namespace {

// A sound interval of an integer expression over the iteration space. `exact`: the expression is
// monotone in each variable it uses, in the direction `dir` gives (+1 non-decreasing, -1
// non-increasing; sorted by variable), and every variable ranges exactly over its interval, so
// both ends are reached (at the corners of the iteration box).
struct Range {
  int64_t lo, hi;
  bool exact;
  std::vector<std::pair<const void*, int>> dir;
};

// The directions of a * sa combined with those of b * sb; a variable entering both ways makes
// the result inexact.
Range combine(int64_t lo, int64_t hi, const Range& a, int sa, const Range& b, int sb) {
  Range r{lo, hi, a.exact && b.exact, {}};
  size_t i = 0, j = 0;
  while (i < a.dir.size() || j < b.dir.size()) {
    if (j == b.dir.size() || (i < a.dir.size() && a.dir[i].first < b.dir[j].first)) {
      r.dir.emplace_back(a.dir[i].first, a.dir[i].second * sa), ++i;
    } else if (i == a.dir.size() || b.dir[j].first < a.dir[i].first) {
      r.dir.emplace_back(b.dir[j].first, b.dir[j].second * sb), ++j;
    } else {
      int da = a.dir[i].second * sa, db = b.dir[j].second * sb;
      if (da != db) r.exact = false;
      r.dir.emplace_back(a.dir[i].first, da), ++i, ++j;
    }
  }
  return r;
}

Range scaled(Range r, int s) {  // the directions of r * s (s = +1 or -1), bounds unchanged
  for (auto& d : r.dir) d.second *= s;
  return r;
}

// The values of an integer dtype.
std::pair<int64_t, int64_t> dtype_bounds(DType t) {
  switch (t.code) {
    case DTypeCode::i8: return {INT8_MIN, INT8_MAX};
    case DTypeCode::u8: return {0, UINT8_MAX};
    case DTypeCode::i32: return {INT32_MIN, INT32_MAX};
    case DTypeCode::f16: case DTypeCode::bf16: case DTypeCode::f32: case DTypeCode::f64: case DTypeCode::i64:
    case DTypeCode::boolean:
      return {INT64_MIN, INT64_MAX};
  }
  return {INT64_MIN, INT64_MAX};  // not reached: the switch lists every enumerator
}

std::string interval_text(int64_t lo, int64_t hi) {
  std::string s = "[";
  s += std::to_string(lo);
  s += ", ";
  s += std::to_string(hi);
  s += "]";
  return s;
}

class BoundsChecker : public Visitor {
 public:
  explicit BoundsChecker(const Kernel& k) : k_(k) {
    for (size_t d = 0; d < k->block_vars.size() && d < k->grid.size(); ++d) {
      auto g = as_const_int(k->grid[d]);
      if (g && *g > 0) vars_[k->block_vars[d].get()] = Range{0, *g - 1, true, {{k->block_vars[d].get(), 1}}};
    }
  }

  std::unordered_set<const void*> unproved;

  void visit(const Stmt& s) override {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::If: {  // a guarded access may never run: not provably out of bounds
        visit(as<IfNode>(s)->cond);
        // except a store both arms make (the same element, whichever arm runs: hunt40 F3): it runs where
        // the if does (an outer if's record stands)
        for (const void* st : both_arms(s)) both_.emplace(st, guarded_);
        ++guarded_;
        visit(as<IfNode>(s)->then_body);
        visit(as<IfNode>(s)->else_body);
        --guarded_;
        return;
      }
      case StmtKind::For: {
        auto* n = as<ForNode>(s);
        visit(n->min);
        visit(n->extent);
        const void* v = n->var.get();
        auto mn = as_const_int(n->min), ext = as_const_int(n->extent);
        bool exact = mn && ext && *ext > 0 && *mn <= INT64_MAX - *ext;
        if (exact) {
          vars_[v] = Range{*mn, *mn + *ext - 1, true, {{v, 1}}};
        } else {  // may run zero times, or over a range known only as a bound
          auto rmin = range(n->min), rext = range(n->extent);
          int64_t hi;
          if (rmin && rext && rext->hi >= 1 && !__builtin_add_overflow(rmin->hi, rext->hi - 1, &hi))
            vars_[v] = Range{rmin->lo, hi, false, {}};
          else
            vars_.erase(v);
          ++guarded_;
        }
        visit(n->body);
        if (!exact) --guarded_;
        vars_.erase(v);
        return;
      }
      case StmtKind::Let: {
        auto* n = as<LetNode>(s);
        visit(n->value);
        if (auto r = n->value->dtype.is_int() ? range(n->value) : std::nullopt)
          vars_[n->var.get()] = *r;
        return;
      }
      case StmtKind::Store: {
        auto* n = as<StoreNode>(s);
        const int guarded = guarded_;
        auto both = both_.find(s.get());
        if (both != both_.end()) guarded_ = both->second;
        check(s.get(), n->buffer, n->indices, nullptr, s->span, false, both != both_.end());
        guarded_ = guarded;
        Visitor::visit(s);
        return;
      }
      case StmtKind::Gemm: {  // the only tile op that does not clip its tile regions to their buffers
        auto* n = as<GemmNode>(s);
        for (const Region* r : {&n->a, &n->b, &n->c}) {
          if (r->buffer->scope != Scope::global) check(s.get(), r->buffer, r->starts, &r->extents, s->span);
          else check(r, r->buffer, r->starts, &r->extents, s->span, /*clips=*/true);  // reads 0 outside: legal
        }
        Visitor::visit(s);
        return;
      }
      case StmtKind::Seq: case StmtKind::Alloc: case StmtKind::Copy: case StmtKind::Fill: case StmtKind::Reduce:
      case StmtKind::CoreScope: case StmtKind::Sync:
        Visitor::visit(s);
    }
  }

  void visit(const Expr& e) override {
    if (!e) return;
    if (e->kind == ExprKind::Select) {  // only one arm's value is used
      auto* n = as<SelectNode>(e);
      visit(n->cond);
      ++guarded_;
      visit(n->t);
      visit(n->f);
      --guarded_;
      return;
    }
    if (e->kind == ExprKind::Binary && (as<BinaryNode>(e)->op == BinOp::And || as<BinaryNode>(e)->op == BinOp::Or)) {
      ++logic_;  // both operands are evaluated (cpu prints `or` as `|`, the simulator computes both): the hint says so
      Visitor::visit(e);
      --logic_;
      return;
    }
    if (e->kind == ExprKind::Load) {
      auto* n = as<LoadNode>(e);
      check(e.get(), n->buffer, n->indices, nullptr, e->span);
    }
    Visitor::visit(e);
  }

 private:
  // An element access buffer[indices], or (extents set) a region: indices are its starts, and
  // start + extent - 1 must be inside too. A region that clips (a global gemm operand: code
  // generation clips it, outside reads as 0) is never an error, only recorded when not proved.
  // both_arms: the store is one that both arms of an if make (reported as such)
  void check(const void* access, const Buffer& b, const std::vector<Expr>& indices, const std::vector<Expr>* extents,
             const Span& sp, bool clips = false, bool both_arms = false) {
    const bool tile = b->scope != Scope::global || clips;
    if (indices.size() != b->shape.size() || (extents && extents->size() != indices.size())) {
      if (tile) unproved.insert(access);  // the verifier reports it; never left unchecked
      return;
    }
    for (size_t d = 0; d < indices.size(); ++d) {
      auto dim = as_const_int(b->shape[d]);
      auto r = range(indices[d]);
      auto ext = extents ? extent_bound((*extents)[d]) : std::optional<int64_t>(1);  // a run-time extent: its bound
      // a region's last index: same directions, so still exact when the start is
      if (r && (!ext || *ext < 1 || __builtin_add_overflow(r->hi, *ext - 1, &r->hi))) r.reset();
      bool inside = dim && r && r->lo >= 0 && r->hi < *dim;
      if (!inside && tile) unproved.insert(access);
      if (inside || !dim || !r || guarded_ > 0 || clips) continue;
      bool outside = r->hi < 0 || r->lo >= *dim;
      if (!r->exact && !outside) continue;
      std::string what;
      if (r->exact) {
        int64_t bad = r->lo < 0 ? r->lo : r->hi;
        what = "reaches " + std::to_string(bad) + ", outside dimension " + std::to_string(d) + " of size " +
               std::to_string(*dim) + " (the index ranges over " + interval_text(r->lo, r->hi) + ")";
      } else {
        what = "is always outside dimension " + std::to_string(d) + " of size " + std::to_string(*dim) +
               " (the index lies within " + interval_text(r->lo, r->hi) + ")";
      }
      if (both_arms) what += "; the if and its else both store this element, so one of them always runs";
      std::string index = extents ? "region start " + print(indices[d]) + " (extent " + print((*extents)[d]) + ")"
                                  : "index " + print(indices[d]);
      // port37 F4: `if i == 0 or x[i] != x[i - 1]:` reads x[-1] (cpu prints `or` as `|`)
      throw Error(index + " of '" + b->name + "' " + what, sp.known() ? sp : k_->span,
                  logic_ > 0 ? "'and' / 'or' in a kernel evaluate both operands (no short circuit), so the read runs "
                               "even where the other operand decides: clamp the index (x[T.max(i - 1, 0)]) or test "
                               "the guard in an if around the read"
                             : "check the loop extents against the buffer's shape (e.g. T.Parallel extents in the "
                               "tile's order)");
    }
  }

  // The interval of an integer expression (see Range), or nullopt when unknown.
  std::optional<Range> range(const Expr& e) {
    if (!e) return std::nullopt;
    if (auto c = as_const_int(e)) return Range{*c, *c, true, {}};
    std::optional<Range> r = range_of_node(e);
    // A value outside its dtype may wrap (or not: cpu computes in int64): the bound is only
    // valid when it fits the dtype.
    if (r && e->dtype.is_int()) {
      auto [lo, hi] = dtype_bounds(e->dtype);
      if (r->lo < lo || r->hi > hi) return std::nullopt;
    }
    return r;
  }

  std::optional<Range> range_of_node(const Expr& e) {
    switch (e->kind) {
      case ExprKind::Var: {
        auto it = vars_.find(e.get());
        if (it == vars_.end()) return std::nullopt;
        return it->second;
      }
      case ExprKind::Cast: {
        auto* n = as<CastNode>(e);
        if (!n->dtype.is_int() || !n->value->dtype.is_int()) return std::nullopt;
        return range(n->value);
      }
      case ExprKind::Unary: {
        auto* n = as<UnaryNode>(e);
        if (n->op != UnOp::Neg || !n->dtype.is_int()) return std::nullopt;
        auto a = range(n->a);
        if (!a || a->lo == INT64_MIN) return std::nullopt;
        Range r = scaled(*a, -1);
        r.lo = -a->hi, r.hi = -a->lo;
        return r;
      }
      case ExprKind::Select: {  // either arm's value: the union, not exact
        auto* n = as<SelectNode>(e);
        if (!n->dtype.is_int()) return std::nullopt;
        auto t = range(n->t), f = range(n->f);
        if (!t || !f) return std::nullopt;
        return Range{std::min(t->lo, f->lo), std::max(t->hi, f->hi), false, {}};
      }
      case ExprKind::Binary: return range_of_binary(*as<BinaryNode>(e));
      case ExprKind::Load: {  // a value read from memory lies within its dtype: clamps prove
        if (!e->dtype.is_int()) return std::nullopt;  // T.min(T.max(label[i], 0), N - 1)
        auto [lo, hi] = dtype_bounds(e->dtype);
        return Range{lo, hi, false, {}};
      }
      case ExprKind::IntImm: case ExprKind::FloatImm: case ExprKind::Call: return std::nullopt;
    }
    return std::nullopt;  // not reached: the switch lists every enumerator
  }

  std::optional<Range> range_of_binary(const BinaryNode& n) {
    if (!n.dtype.is_int()) return std::nullopt;
    auto a = range(n.a);
    if (!a) return std::nullopt;
    auto b = range(n.b);
    if (!b) return std::nullopt;
    int64_t lo, hi;
    switch (n.op) {
      case BinOp::Add:
        if (__builtin_add_overflow(a->lo, b->lo, &lo) || __builtin_add_overflow(a->hi, b->hi, &hi))
          return std::nullopt;
        return combine(lo, hi, *a, 1, *b, 1);
      case BinOp::Sub:
        if (__builtin_sub_overflow(a->lo, b->hi, &lo) || __builtin_sub_overflow(a->hi, b->lo, &hi))
          return std::nullopt;
        return combine(lo, hi, *a, 1, *b, -1);
      case BinOp::Mul: {
        int64_t p[4];
        if (__builtin_mul_overflow(a->lo, b->lo, &p[0]) || __builtin_mul_overflow(a->lo, b->hi, &p[1]) ||
            __builtin_mul_overflow(a->hi, b->lo, &p[2]) || __builtin_mul_overflow(a->hi, b->hi, &p[3]))
          return std::nullopt;
        lo = *std::min_element(p, p + 4), hi = *std::max_element(p, p + 4);
        if (a->lo == a->hi) std::swap(a, b);
        if (b->lo == b->hi) {  // times a constant: a's directions, flipped by a negative factor
          if (b->lo == 0) return Range{0, 0, true, {}};
          Range r = scaled(*a, b->lo > 0 ? 1 : -1);
          r.lo = lo, r.hi = hi;
          return r;
        }
        // Both vary: monotone when each keeps one sign. a * b = (sa |a|) (sb |b|), and |a|, |b|
        // are non-negative with directions sa * dir(a), sb * dir(b).
        int sa = a->lo >= 0 ? 1 : a->hi <= 0 ? -1 : 0, sb = b->lo >= 0 ? 1 : b->hi <= 0 ? -1 : 0;
        if (sa == 0 || sb == 0) return Range{lo, hi, false, {}};
        Range r = scaled(combine(lo, hi, *a, sa, *b, sb), sa * sb);
        return r;
      }
      case BinOp::FloorDiv:
      case BinOp::CeilDiv: {  // by a non-zero constant: monotone, direction flipped by a negative one
        if (b->lo != b->hi || b->lo == 0) return std::nullopt;
        auto x = fold_int_binary(n.op, a->lo, b->lo), y = fold_int_binary(n.op, a->hi, b->lo);
        if (!x || !y) return std::nullopt;
        Range r = scaled(*a, b->lo > 0 ? 1 : -1);
        r.lo = std::min(*x, *y), r.hi = std::max(*x, *y);
        return r;
      }
      case BinOp::Mod: {  // by a positive constant: monotone within one period, else [0, c)
        if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
        int64_t c = b->lo;
        auto qlo = fold_int_binary(BinOp::FloorDiv, a->lo, c), qhi = fold_int_binary(BinOp::FloorDiv, a->hi, c);
        if (!qlo || !qhi) return std::nullopt;
        if (*qlo != *qhi) return Range{0, c - 1, false, {}};
        Range r = *a;
        r.lo = *fold_int_binary(BinOp::Mod, a->lo, c), r.hi = *fold_int_binary(BinOp::Mod, a->hi, c);
        return r;
      }
      case BinOp::Min:
        return combine(std::min(a->lo, b->lo), std::min(a->hi, b->hi), *a, 1, *b, 1);
      case BinOp::Max:
        return combine(std::max(a->lo, b->lo), std::max(a->hi, b->hi), *a, 1, *b, 1);
      case BinOp::Div: case BinOp::EQ: case BinOp::NE: case BinOp::LT: case BinOp::LE: case BinOp::GT:
      case BinOp::GE: case BinOp::And: case BinOp::Or:
      case BinOp::BitAnd: case BinOp::BitOr: case BinOp::BitXor: case BinOp::Shl: case BinOp::Shr:
        return std::nullopt;
    }
    return std::nullopt;  // not reached: the switch lists every enumerator
  }

  // The stores an if makes whichever arm runs: the straight-line stores of its then arm that its else arm
  // makes at the same indices (an else's if counts by the same rule: elif chains), both arms' of each pair.
  static std::vector<const void*> both_arms(const Stmt& s) {
    std::vector<const void*> out;
    auto* n = as<IfNode>(s);
    if (!n->else_body) return out;
    auto made = [](const Stmt& arm) {
      std::vector<const StoreNode*> st;
      for (const Stmt& x : stmts_of(arm)) {
        if (x->kind == StmtKind::Store) st.push_back(as<StoreNode>(x));
        if (x->kind == StmtKind::If)
          for (const void* y : both_arms(x)) st.push_back(static_cast<const StoreNode*>(y));
      }
      return st;
    };
    auto same = [](const StoreNode* a, const StoreNode* b) {
      if (a->buffer.get() != b->buffer.get() || a->indices.size() != b->indices.size()) return false;
      for (size_t d = 0; d < a->indices.size(); ++d)
        if (!structural_equal(a->indices[d], b->indices[d])) return false;
      return true;
    };
    const auto t = made(n->then_body), e = made(n->else_body);
    for (const StoreNode* a : t)
      for (const StoreNode* b : e)
        if (same(a, b)) out.push_back(a), out.push_back(b);
    return out;
  }

  const Kernel& k_;
  std::unordered_map<const void*, int> both_;  // a store both arms of an if make: the guard depth of that if
  std::unordered_map<const void*, Range> vars_;
  int guarded_ = 0;
  int logic_ = 0;  // inside an operand of and / or
};

}  // namespace

std::unordered_set<const void*> check_bounds(const Kernel& kernel) {
  BoundsChecker c(kernel);
  c.visit(kernel->body);
  return std::move(c.unproved);
}

}  // namespace tw::transform
