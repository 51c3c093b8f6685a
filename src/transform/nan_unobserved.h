// mark_nan_unobserved: find the float max/min reductions whose NaN rule no output can observe.
#pragma once

#include "tilewright/ir.h"

namespace tw::transform {

// A float T.reduce_max / T.reduce_min is NaN where a reduced element is (docs/language.md). A target
// whose instructions drop a NaN (ascend910b's Max / WholeReduceMax: undocumented, simulated as
// dropping it) pays a NaN flag per output for that rule (legalize_vector's flag_nan). This pass
// annotates `@nan_unobserved` the reductions for which the flag cannot change any output, proven
// on the kernel's dataflow (not on names): softmax's row max, consumed by exp(x - max) whose row
// sum divides every output, and flash attention's, whose rows reach the output only through the
// row sum and the P V gemm. A target may then reduce them without the flag.
//
// The proof. Take the first moment at which some candidate reduction R (the annotated set) gives,
// in a run where the candidates drop NaN, a different value than in the exact run: R's source
// holds a NaN in some row r, the same in both runs (nothing differed before). From there an
// abstract run tracks, for every tile whose first dim has R's row count, what holds for row r in
// the two runs: the values are the same (S), some element is NaN in both at a position that stays
// put through element-wise maps of the same index (N), every element is NaN in both (A: then also
// the same). R's destination is "may differ" (D), its source S + N. Through the statements:
// - maps: +, -, *, /, max, min, neg, exp, exp2, log, log2, sqrt, rsqrt, abs and float casts
//   propagate NaN: the result keeps N from an operand loaded at the store's own index (same
//   shape), A from an operand's row r anywhere, S when all operands have it; selects, comparisons
//   and other functions give S when all operands have it, else D;
// - a row reduction (sum, or an exact max/min) of a row with N is A; a candidate reduction gives D;
// - a gemm whose A operand row r has N is A in C's row r (NaN * b is NaN), accumulated A stays A;
// - loops run to a fixpoint (the values only lose properties), if-branches are joined;
// - a value that is not S may only move between tiles of R's rows along the row (the same row
//   index, no transposes, whole tiles): anything else, a data-dependent condition, a scalar read of
//   it, or a write of a value that is neither S nor A to a global tensor, fails the proof.
// A reduction is kept in the set when the run from every candidate's first difference ends with
// every global write S or A (the outputs equal, NaN where NaN). Candidates that fail with every
// other one exact are removed first; then, in program order (never by address: the result must not
// depend on the heap), a candidate that fails is removed and the rest proven again.
// Only kernels without expert-mode statements (core scopes, syncs).
//
// The annotation is a promise about values, so a pass that rebuilds the reduction keeps it
// (ir::Mutator, split_cube_vector, fold_exp2_scale).
ir::Kernel mark_nan_unobserved(const ir::Kernel& k);

}  // namespace tw::transform
