// simplify: constant folding and algebraic identities on index expressions.
#pragma once

#include "tilewright/ir.h"

namespace tw::transform {

// Folds constants and applies identities that never change a program's meaning:
//  - integer arithmetic on constants: + - * floordiv ceildiv mod (floor semantics, as in
//    Python: -7 // 2 = -4, -7 % 2 = 1), min, max, negation, comparisons; a fold is skipped when
//    the result does not fit the dtype or divides by zero;
//  - integer identities: x+0, 0+x, x-0, x*1, 1*x, x*0, 0*x, x//1, ceildiv(x,1), x%1, x-x,
//    min(x,x), max(x,x); constants move right in + and *, and chains fold:
//    (x+c1)+c2, (x-c1)+c2, (x+c1)-c2, (x*c1)*c2;
//  - bool: not c, c and x, c or x, select(c, a, b) with constant c;
//  - casts of literals when the value is exactly representable in the target dtype
//    (int -> int, int/bool -> float, float -> float, integral float -> int); casts to the same dtype;
//  - statements: `if` with a constant condition becomes its branch (or nothing), a For with a
//    constant extent <= 0 disappears, a serial/unroll For of extent 1 becomes `let var = min`
//    followed by its body.
// Float arithmetic is left alone (x*0 is not 0 for NaN, x+0.0 is not x for -0.0).
// Every new node keeps the span and dtype of the node it replaces.
ir::Kernel simplify(const ir::Kernel& k);

}  // namespace tw::transform
