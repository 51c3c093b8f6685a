// The cpu target's row for each elementwise math function (ir::MathFn, TW_MATH_FNS in ir.h): the
// C++ the code generator prints for a float32 argument (float16 and bfloat16 compute in float32)
// and for a float64 argument; $0 and $1 stand for the arguments. The float32 rows call the
// branch-free vectorisable functions of tw_cpu/math.h. `chunk`, where not null, is the function's
// form over a float32 chunk of a row (tw_cpu/math.h exp_chunk(dst, src, n)): the chunked row maps
// whose whole value is the call compute its argument into a local chunk, then call it; `nonpos`,
// where not null, the same for an argument proven <= 0 or NaN (a row's x - max: exp_nonpos_chunk,
// no upper clamp). A new MathFn is a -Wswitch warning here until it has its row.
#pragma once

#include "tilewright/ir.h"

namespace tw::cpu {

struct MathPattern {
  const char* f32;
  const char* f64;
  const char* chunk = nullptr;
  const char* nonpos = nullptr;
};

inline MathPattern math_pattern(ir::MathFn f) {
  switch (f) {
    case ir::MathFn::exp: return {"tw_cpu::exp($0)", "__builtin_exp($0)", "tw_cpu::exp_chunk", "tw_cpu::exp_nonpos_chunk"};
    case ir::MathFn::exp2: return {"tw_cpu::exp2($0)", "__builtin_exp2($0)", "tw_cpu::exp2_chunk"};
    case ir::MathFn::log: return {"tw_cpu::log($0)", "__builtin_log($0)"};
    case ir::MathFn::log2: return {"(tw_cpu::log($0) * 1.44269504088896341f)", "__builtin_log2($0)"};
    case ir::MathFn::sqrt: return {"tw_cpu::sqrt($0)", "__builtin_sqrt($0)"};
    case ir::MathFn::rsqrt: return {"tw_cpu::rsqrt($0)", "(1.0 / __builtin_sqrt($0))"};
    case ir::MathFn::abs: return {"__builtin_fabsf($0)", "__builtin_fabs($0)"};
    case ir::MathFn::tanh: return {"tw_cpu::tanh($0)", "__builtin_tanh($0)"};
    case ir::MathFn::erf: return {"tw_cpu::erf($0)", "__builtin_erf($0)"};
    case ir::MathFn::sigmoid: return {"tw_cpu::sigmoid($0)", "(1.0 / (1.0 + __builtin_exp(-($0))))"};
    case ir::MathFn::floor: return {"__builtin_floorf($0)", "__builtin_floor($0)"};
    case ir::MathFn::ceil: return {"__builtin_ceilf($0)", "__builtin_ceil($0)"};
    case ir::MathFn::pow: return {"__builtin_powf($0, $1)", "__builtin_pow($0, $1)"};
    case ir::MathFn::silu: return {"tw_cpu::silu($0)", "(($0) / (1.0 + __builtin_exp(-($0))))"};
    // one rounding: vfmadd where the target has FMA (g++ vectorises it), else libm's fmaf (exact, slow)
    case ir::MathFn::fma: return {"__builtin_fmaf($0, $1, $2)", "__builtin_fma($0, $1, $2)"};
    // float32: multiplies, adds and selects the ascend910b target writes out too (the same bits); NaN
    // beyond |x| = 400000 (tw_cpu/math.h sin_cos). float64: libm's
    case ir::MathFn::sin: return {"tw_cpu::sin($0)", "__builtin_sin($0)"};
    case ir::MathFn::cos: return {"tw_cpu::cos($0)", "__builtin_cos($0)"};
  }
  throw ir::Error("internal: math function #" + std::to_string(static_cast<int>(f)) + " has no cpu row");
}

}  // namespace tw::cpu
