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
    case ir::MathFn::silu: case ir::MathFn::fma: case ir::MathFn::sin: case ir::MathFn::cos:
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
    case ir::MathFn::sin: return std::fabs(x) <= 400000 ? std::sin(x) : std::nan("");  // the range of the
    case ir::MathFn::cos: return std::fabs(x) <= 400000 ? std::cos(x) : std::nan("");  // vector form (expand_math)
    case ir::MathFn::fma:  // three operands: lower_scalar_math writes every T.fma as arithmetic (fma_as_mul_add)
      throw ir::Error("internal: T.fma reached the scalar unit's math");
  }
  return 0;
}

// T.fma(x, y, z), one rounding, on this target: of float16 / bfloat16 values, computed in float32
// as every half value is (docs/language.md), x * y is exact in float32 (11 + 11 or 8 + 8 significant
// bits), so the rounded product and the rounded sum are the one rounding of x * y + z: the value cpu's
// fmaf gives, bit for bit (bfloat16 but where the product leaves float32's normal range: beyond
// 2^128 or below 2^-126). lower_scalar_math applies it to every T.fma of an automatic-mode kernel, in maps
// and in scalar code. Of float32 values the Vector unit would need a single-rounding multiply-add,
// and the AscendC documentation this project follows says nothing of one's rounding
// (/work/shared/ascendc-api-facts.md: no MulAddDst / FusedMulAdd row): refused at the call, never
// computed as two roundings under fma's name.
inline ir::Expr fma_as_mul_add(const ir::CallNode& c) {
  const ir::Span& sp = c.span;
  const ir::DType t = c.dtype, f32(ir::DTypeCode::f32);
  if (t.code != ir::DTypeCode::f16 && t.code != ir::DTypeCode::bf16)
    throw ir::Error("T.fma of " + std::string(t.name()) +
                        " values is not supported on ascend910b: its Vector unit's multiply-add is not documented "
                        "as one rounding, and two roundings would give other bits than the cpu target's fma",
                    sp,
                    "write x * y + z (each operation rounded, the same bits on every target), or compute from "
                    "float16 / bfloat16 values (their fma is exact on ascend910b), or run the kernel on the cpu target");
  auto f = [&](const ir::Expr& e) { return ir::cast(e, f32, sp); };
  ir::Expr r = ir::binary(ir::BinOp::Add, ir::binary(ir::BinOp::Mul, f(c.args[0]), f(c.args[1]), sp), f(c.args[2]), sp);
  return ir::cast(r, t, sp);
}

}  // namespace tw::ascend
