#include "transform/check_bounds.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/printer.h"

namespace tw::transform {

using namespace tw::ir;

namespace {

struct Interval {
  int64_t lo, hi;
};

class BoundsChecker : public Visitor {
 public:
  explicit BoundsChecker(const Kernel& k) : k_(k) {
    for (size_t d = 0; d < k->block_vars.size() && d < k->grid.size(); ++d) {
      auto g = as_const_int(k->grid[d]);
      if (g && *g > 0) ranges_[k->block_vars[d].get()] = {0, *g - 1};
    }
  }

  void visit(const Stmt& s) override {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::If: {  // a guarded access may never run: not provable
        visit(as<IfNode>(s)->cond);
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
        auto mn = as_const_int(n->min), ext = as_const_int(n->extent);
        bool exact = mn && ext && *ext > 0 && *mn <= INT64_MAX - *ext;
        if (exact) ranges_[n->var.get()] = {*mn, *mn + *ext - 1};
        if (!exact) ++guarded_;  // may run zero times, or over an unknown range
        visit(n->body);
        if (!exact) --guarded_;
        ranges_.erase(n->var.get());
        return;
      }
      case StmtKind::Store: {
        auto* n = as<StoreNode>(s);
        check(n->buffer, n->indices, s->span);
        Visitor::visit(s);
        return;
      }
      default: Visitor::visit(s);
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
    if (e->kind == ExprKind::Load) {
      auto* n = as<LoadNode>(e);
      check(n->buffer, n->indices, e->span);
    }
    Visitor::visit(e);
  }

 private:
  void check(const Buffer& b, const std::vector<Expr>& indices, const Span& sp) {
    if (guarded_ > 0 || indices.size() != b->shape.size()) return;
    for (size_t d = 0; d < indices.size(); ++d) {
      auto dim = as_const_int(b->shape[d]);
      if (!dim) continue;
      std::unordered_set<const void*> seen;
      auto r = interval(indices[d], seen);
      if (!r || (r->lo >= 0 && r->hi < *dim)) continue;
      int64_t bad = r->lo < 0 ? r->lo : r->hi;
      throw Error("index " + print(indices[d]) + " of '" + b->name + "' reaches " + std::to_string(bad) +
                      ", outside dimension " + std::to_string(d) + " of size " + std::to_string(*dim) +
                      " (the index ranges over [" + std::to_string(r->lo) + ", " + std::to_string(r->hi) + "])",
                  sp.known() ? sp : k_->span,
                  "check the loop extents against the buffer's shape (e.g. T.Parallel extents in the tile's order)");
    }
  }

  // Exact interval of an affine index in which every variable occurs once, else nullopt.
  std::optional<Interval> interval(const Expr& e, std::unordered_set<const void*>& seen) {
    if (auto c = as_const_int(e)) return Interval{*c, *c};
    switch (e->kind) {
      case ExprKind::Var: {
        auto it = ranges_.find(e.get());
        if (it == ranges_.end() || !seen.insert(e.get()).second) return std::nullopt;
        return it->second;
      }
      case ExprKind::Cast: {
        auto* n = as<CastNode>(e);
        if (!n->dtype.is_int() || !n->value->dtype.is_int()) return std::nullopt;
        auto r = interval(n->value, seen);
        if (r && n->dtype.bytes() < 8) {  // narrowing may wrap: only exact when it fits
          int64_t lim = int64_t(1) << (8 * n->dtype.bytes() - 1);
          if (r->lo < -lim || r->hi >= lim) return std::nullopt;
        }
        return r;
      }
      case ExprKind::Binary: {
        auto* n = as<BinaryNode>(e);
        if (!n->dtype.is_int()) return std::nullopt;
        auto a = interval(n->a, seen);
        if (!a) return std::nullopt;
        auto b = interval(n->b, seen);
        if (!b) return std::nullopt;
        Interval r{};
        switch (n->op) {
          case BinOp::Add:
            if (__builtin_add_overflow(a->lo, b->lo, &r.lo) || __builtin_add_overflow(a->hi, b->hi, &r.hi))
              return std::nullopt;
            return r;
          case BinOp::Sub:
            if (__builtin_sub_overflow(a->lo, b->hi, &r.lo) || __builtin_sub_overflow(a->hi, b->lo, &r.hi))
              return std::nullopt;
            return r;
          case BinOp::Mul: {
            if (b->lo != b->hi) std::swap(a, b);
            if (b->lo != b->hi) return std::nullopt;  // a product of two variables: not affine
            int64_t x, y;
            if (__builtin_mul_overflow(a->lo, b->lo, &x) || __builtin_mul_overflow(a->hi, b->lo, &y))
              return std::nullopt;
            return Interval{std::min(x, y), std::max(x, y)};
          }
          case BinOp::FloorDiv: {
            if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
            auto lo = fold_int_binary(BinOp::FloorDiv, a->lo, b->lo);
            auto hi = fold_int_binary(BinOp::FloorDiv, a->hi, b->lo);
            if (!lo || !hi) return std::nullopt;
            return Interval{*lo, *hi};
          }
          default: return std::nullopt;
        }
      }
      default: return std::nullopt;
    }
  }

  const Kernel& k_;
  std::unordered_map<const void*, Interval> ranges_;
  int guarded_ = 0;
};

}  // namespace

void check_bounds(const Kernel& kernel) { BoundsChecker(kernel).visit(kernel->body); }

}  // namespace tw::transform
