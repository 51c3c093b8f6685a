// The Ascend target's row for each elementwise math function (ir::MathFn, TW_MATH_FNS in ir.h):
// the Vector unit's instruction that computes it, or none. Expert mode (T.exp(dst, src) and
// y = T.exp(x) maps) selects it here (lower_expert). The automatic mode's legalize_vector keeps
// exp/log/sqrt/abs and expands every other function (rsqrt too, for accuracy: Sqrt then Div) into
// those and arithmetic in its switch over MathFn (sigmoid,
// silu, tanh, erf, pow, ...). A new MathFn is a -Wswitch warning here until it has its row.
#pragma once

#include <cmath>
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

// The scalar unit's value of f(x) (f(x, y) for pow), in double: what the simulator computes for a
// math function in a scalar expression, and what fold_scalar_math folds a call of literals to (the
// printed AscendC has no scalar math: every call the Program keeps is on tile data).
inline double scalar_value(ir::MathFn f, double x, double y) {
  switch (f) {
    case ir::MathFn::exp: return std::exp(x);
    case ir::MathFn::exp2: return std::exp2(x);
    case ir::MathFn::log: return std::log(x);
    case ir::MathFn::log2: return std::log2(x);
    case ir::MathFn::sqrt: return std::sqrt(x);
    case ir::MathFn::rsqrt: return 1.0 / std::sqrt(x);
    case ir::MathFn::abs: return std::fabs(x);
    case ir::MathFn::tanh: return std::tanh(x);
    case ir::MathFn::erf: return std::erf(x);
    case ir::MathFn::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ir::MathFn::floor: return std::floor(x);
    case ir::MathFn::ceil: return std::ceil(x);
    case ir::MathFn::pow: return std::pow(x, y);
    case ir::MathFn::silu: return x / (1.0 + std::exp(-x));
  }
  return 0;
}

}  // namespace tw::ascend
