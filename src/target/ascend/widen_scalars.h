// widen_scalars: integer scalar arithmetic of the printed AscendC computed in int64, as the simulator
// and the cpu target compute it (docs/language.md: integers are computed in int64, wrapped on store).
// A program pass, the last of both pipelines (after resolve_cross_waits).
//
// The printed C++ computes `a * c` of two `int32_t` scalars in C++ `int`: undefined on overflow,
// where the language's value is the int64 product. This pass gives each integer +, -, * and unary -
// whose operands the printed code holds in a type narrower than 64 bits (int32 / int8 / uint8 / bool
// variables, loop indices and block indices are int32_t; a literal in the int32 range is an `int`)
// and whose result it cannot prove inside the int32 range a Cast to int64 of one operand (the
// non-literal one, the left one when both are not literals): the printer prints
// `(static_cast<int64_t>(a) * c)`, the simulator evaluates the same node (a no-op there: it computes
// in int64 already). The same for ceildiv's dividend (printed `(a + b - 1) / b` when both operands
// are non-negative). Shifts, min / max, // and % through their helpers already compute in int64.
// &, |, ^, ~ and << of a widened operand stay in int64 (the cpu target's value when it is compared or
// divided before a store; << with its count taken modulo the node's width first); >> wraps its
// widened operand back into the node's type, as the language defines it (session 29, h-review).
//
// The proof is interval arithmetic over the variables' ranges: a loop index over [0, extent - 1]
// (the extent's upper bound; int32_t range when unknown), the block index over [0, block_dim - 1]
// (int32_t range when block_dim is not bounded), the sub-block index over [0, 1], a let over its
// value's range (the dtype's range when the value may not fit: the let wraps), a scalar parameter
// and a ScalarLoad's variable over their dtype's range, a shape variable over [0, its dtype's max]
// (an int32 one is printed `const int32_t M = static_cast<int32_t>(tw_tiling->M)`). Index arithmetic over loop and block indices with constant extents (almost all
// of it) is proved and prints unchanged; a product with a runtime int32 scalar is widened.
// Relational bounds (session 30, h-widen2; proofs in widen_scalars.cpp): in
// `for t in range(ceildiv(x, s))` with s >= 0 and x, s not assigned in the body, `t * s` is in
// [0, x - 1] and, when x is `y - base`, `base + t * s` in [base, y - 1] (map_grid's grid-stride
// loop: the row block stays below ceildiv(M, 8)); a ceildiv whose dividend sum is widened is cast
// back to its type when its quotient fits there (ceildiv(M, 8) of an int32 M is in [0, 2^28]).
//
// C divisions (session 31, h-i32b): the pass also decides which `//`, `%` and ceildiv the printed C++
// computes with C's truncating `/` and `%` (ceildiv `(a + b - 1) / b`), where they equal the
// language's floor: a positive constant divisor and a dividend ir::is_nonneg proves >= 0 from the
// loop, block, sub-block and shape indices and the lets of such values (the AscendC printer's own
// rule until then). It records them in Program::c_divisions; the printer prints exactly those
// infix (the rest through tw_floordiv / tw_floormod / tw_ceildiv, in int64_t), and the simulator,
// reading the same set, reports one whose dividend is negative when it runs and checks the int ones
// as int arithmetic. The ranges above still take a division of int operands as held in int
// whichever form it prints (for the helpers: more widening than needed, never less).
#pragma once

#include "target/ascend/program.h"

namespace tw::ascend {

Program widen_scalars(const Program& program);

}  // namespace tw::ascend
