// Small helpers shared by the Ascend passes and the instruction selection: index-expression
// builders and the Tile IR scope -> Ascend memory map. (Buffer geometry and capacities:
// plan_memory.h; flag pairs: program.h.)
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "target/ascend/program.h"
#include "tilewright/ir.h"
#include "ir/arith.h"

namespace tw::ascend {

inline ir::Expr C(int64_t v) { return ir::int_imm(v); }
inline ir::Expr simp(const ir::Expr& e) { return ir::arith::simplify(e); }
inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Expression builders that fold 0 and 1, so that the call fields stay readable in the program and
// in the printed AscendC (select_move_calls and the AscendC printer; `using fold::mul;` etc.).
namespace fold {
inline ir::Expr ci(int64_t v) { return ir::int_imm(v); }
inline bool is_const(const ir::Expr& e, int64_t v) {
  auto c = ir::as_const_int(e);
  return c && *c == v;
}
inline ir::Expr mul(ir::Expr a, ir::Expr b) {
  if (is_const(a, 1)) return b;
  if (is_const(b, 1)) return a;
  if (is_const(a, 0) || is_const(b, 0)) return ci(0);
  return ir::binary(ir::BinOp::Mul, std::move(a), std::move(b));
}
inline ir::Expr fdiv(ir::Expr a, ir::Expr b) { return ir::binary(ir::BinOp::FloorDiv, std::move(a), std::move(b)); }
inline ir::Expr cdiv(ir::Expr a, ir::Expr b) { return ir::binary(ir::BinOp::CeilDiv, std::move(a), std::move(b)); }
}  // namespace fold

// The memory an Ascend tile scope lives in; nullopt for global / shared / fragment.
inline std::optional<Mem> mem_of(ir::Scope s) {
  switch (s) {
    case ir::Scope::L1: return Mem::L1;
    case ir::Scope::L0A: return Mem::L0A;
    case ir::Scope::L0B: return Mem::L0B;
    case ir::Scope::L0C: return Mem::L0C;
    case ir::Scope::UB: return Mem::UB;
    default: return std::nullopt;
  }
}
// L1 / L0A / L0B / L0C: a memory of the Cube core.
inline bool is_cube_scope(ir::Scope s) { auto m = mem_of(s); return m && *m != Mem::UB; }

// A statement list as one statement (a single statement as itself).
inline ir::Stmt ir_seq(std::vector<ir::Stmt> body, const ir::Span& sp) {
  if (body.size() == 1) return body[0];
  return std::make_shared<ir::SeqNode>(std::move(body), sp);
}

}  // namespace tw::ascend
