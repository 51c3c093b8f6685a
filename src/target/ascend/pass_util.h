// Small helpers shared by the Ascend passes and the instruction selection: literals (folded
// arithmetic is ir::arith) and the Tile IR scope -> Ascend memory map. (Buffer geometry and capacities:
// plan_memory.h; flag pairs: program.h.)
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "target/ascend/program.h"
#include "tilewright/ir.h"
#include "ir/arith.h"
#include "ir/functor.h"
#include "ir/printer.h"

namespace tw::ascend {

inline ir::Expr C(int64_t v) { return ir::int_imm(v); }
inline ir::Expr simp(const ir::Expr& e) { return ir::arith::simplify(e); }
inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
// A name quoted for an error message.
inline std::string q(const std::string& n) { return "'" + n + "'"; }

// The memory an Ascend tile scope lives in; nullopt for global / shared / fragment.
inline std::optional<Mem> mem_of(ir::Scope s) {
  switch (s) {
    case ir::Scope::L1: return Mem::L1;
    case ir::Scope::L0A: return Mem::L0A;
    case ir::Scope::L0B: return Mem::L0B;
    case ir::Scope::L0C: return Mem::L0C;
    case ir::Scope::UB: return Mem::UB;
    case ir::Scope::global: case ir::Scope::shared: case ir::Scope::fragment: return std::nullopt;
  }
  return std::nullopt;
}
// L1 / L0A / L0B / L0C: a memory of the Cube core.
inline bool is_cube_scope(ir::Scope s) { auto m = mem_of(s); return m && *m != Mem::UB; }

// A statement list as one statement (a single statement as itself).
inline ir::Stmt ir_seq(std::vector<ir::Stmt> body, const ir::Span& sp) {
  if (body.size() == 1) return body[0];
  return std::make_shared<ir::SeqNode>(std::move(body), sp);
}

// Scalar reads of GM tensors: e (or s) with each load equal to a key of `map` (the same buffer at
// the same indices) replaced by its variable (the loads a ScalarLoad or a let reads into a variable).
using ExprVarMap = std::vector<std::pair<ir::Var, ir::Expr>>;  // (variable, the load it replaces)
inline bool same_load(const ir::Expr& a, const ir::Expr& b) {
  if (a.get() == b.get()) return true;
  if (a->kind != ir::ExprKind::Load || b->kind != ir::ExprKind::Load) return false;
  auto* x = static_cast<const ir::LoadNode*>(a.get());
  auto* y = static_cast<const ir::LoadNode*>(b.get());
  return x->buffer == y->buffer && ir::print(a) == ir::print(b);
}
inline const ir::Var* find_load(const ExprVarMap& map, const ir::Expr& e) {
  for (const auto& [v, y] : map)
    if (same_load(y, e)) return &v;
  return nullptr;
}
struct ReplaceExprs : ir::Mutator {
  const ExprVarMap& map;
  explicit ReplaceExprs(const ExprVarMap& m) : map(m) {}
  using ir::Mutator::mutate;
  ir::Expr mutate(const ir::Expr& x) override {
    if (const ir::Var* v = find_load(map, x)) return *v;
    return ir::Mutator::mutate(x);
  }
};

// The value a reduction of kind k starts from in dtype t: 0, or the lowest / highest value (-inf / +inf
// for floats; the dtype's range for integers and bool).
inline ir::Expr reduce_identity(ir::ReduceKind k, ir::DType t, const ir::Span& sp) {
  const bool is_max = k == ir::ReduceKind::max;
  if (k == ir::ReduceKind::sum) return t.is_float() ? ir::float_imm(0.0, t, sp) : ir::int_imm(0, t, sp);
  if (t.is_float()) return ir::float_imm(is_max ? -INFINITY : INFINITY, t, sp);
  const bool is_unsigned = t.code == ir::DTypeCode::u8 || t.is_bool();
  const int bits = t.is_bool() ? 1 : t.bits();
  const int64_t lo = is_unsigned ? 0 : (bits >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1)));
  const int64_t hi = bits >= 64 ? std::numeric_limits<int64_t>::max()
                                : is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
  return ir::int_imm(is_max ? lo : hi, t, sp);
}

// The printed element reads of e whose value e always uses: not in an arm of a select (T.if_then_else /
// T.where) nor on the right side of `and` / `or`, which the expression may discard (guarded). A read
// that runs whatever the condition (a hoisted scalar load, a map's staged window) may then lie outside
// its tensor without an error of the program (review34 R1), so only the reads in `out` are checked per
// dimension (select_instructions' DimIndex, a staged window's checks: CopyNode::checked).
inline void unguarded_loads(const ir::Expr& e, std::unordered_set<std::string>& out, bool guarded = false) {
  if (guarded) return;  // (a guarded read's own indices are guarded too)
  std::unordered_set<const ir::ExprNode*> seen;  // each node once: nested math shares its arguments (passlog41)
  std::function<void(const ir::Expr&)> walk = [&](const ir::Expr& x) {
    if (!seen.insert(x.get()).second) return;
    switch (x->kind) {
      case ir::ExprKind::Load:
        out.insert(ir::print(x));
        for (const ir::Expr& i : ir::as<ir::LoadNode>(x)->indices) walk(i);
        return;
      case ir::ExprKind::Select: return walk(ir::as<ir::SelectNode>(x)->cond);  // (its arms are guarded)
      case ir::ExprKind::Binary: {
        auto* b = ir::as<ir::BinaryNode>(x);
        walk(b->a);
        if (b->op != ir::BinOp::And && b->op != ir::BinOp::Or) walk(b->b);
        return;
      }
      case ir::ExprKind::Unary: return walk(ir::as<ir::UnaryNode>(x)->a);
      case ir::ExprKind::Cast: return walk(ir::as<ir::CastNode>(x)->value);
      case ir::ExprKind::Call:
        for (const ir::Expr& a : ir::as<ir::CallNode>(x)->args) walk(a);
        return;
      default: return;
    }
  };
  walk(e);
}

}  // namespace tw::ascend
