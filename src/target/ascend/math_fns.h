// The Ascend target's row for each elementwise math function (ir::MathFn, TW_MATH_FNS in ir.h):
// the Vector unit's instruction that computes it, or none. Expert mode (T.exp(dst, src) and
// y = T.exp(x) maps) selects it here (lower_expert). The automatic mode's legalize_vector keeps
// exp/log/sqrt/abs and expands every other function (rsqrt too, for accuracy: Sqrt then Div) into
// those and arithmetic in its switch over MathFn (sigmoid,
// silu, tanh, erf, pow, ...). A new MathFn is a -Wswitch warning here until it has its row.
#pragma once

#include <optional>

#include "target/ascend/program.h"
#include "tilewright/ir.h"

namespace tw::ascend {

inline std::optional<VecUnOp> vector_instruction(ir::MathFn f) {
  switch (f) {
    case ir::MathFn::exp: return VecUnOp::Exp;
    case ir::MathFn::log: return VecUnOp::Ln;
    case ir::MathFn::sqrt: return VecUnOp::Sqrt;
    case ir::MathFn::rsqrt: return VecUnOp::Rsqrt;
    case ir::MathFn::abs: return VecUnOp::Abs;
    case ir::MathFn::exp2: case ir::MathFn::log2: case ir::MathFn::tanh: case ir::MathFn::erf:
    case ir::MathFn::sigmoid: case ir::MathFn::floor: case ir::MathFn::ceil: case ir::MathFn::pow:
    case ir::MathFn::silu:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace tw::ascend
