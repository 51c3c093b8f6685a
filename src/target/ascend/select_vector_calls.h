// select_vector_calls: the vector instruction selection of the Ascend program.
//
// Replaces every high-level vector instruction (VecBinary, VecBinaryScalar, VecUnary, VecCast,
// VecDup, VecIndex, VecReduce, VecRowBroadcast, VecSelect over rows x cols operands) with the call-level instructions
// it prints as (VecCallL2, VecCallL0, WholeReduce, Brcb; program.h), plus the Program statements
// around them, so the AscendC printer prints them 1:1 and the simulator executes what is printed.
// Decisions (docs/ascend.md, "Vector calls"):
// - Level-2 (count = rows * cols) when every operand is contiguous (row_stride == cols, or one
//   row); else level-0: repeat = rows in chunks of <= 255 (a Program For with a Let of the chunk's
//   repeat when rows is not a constant <= 255), mask = cols in chunks of <= 256 B of elements (a
//   For likewise), block strides 1, repeat strides row_stride * bytes / 32 (a run-time row stride
//   only when provably a multiple of 32 B, else a located error).
// - Rows more than 255 blocks of 32 B apart (no uint8 repeat stride reaches the next row): a For
//   over the rows, one level-2 call per row (elementwise), or per row the repeats along the row
//   (repeat stride 8 blocks) and a call for the rest (row broadcast; row reduce: one partial per
//   repeat into the scratch area, then the partials reduced as a row reduce).
// - Scalar Sub is Adds(-s); scalar Div is Muls(1 / s) (one extra rounding against a true division).
// - Row reduce: WholeReduceSum/Max/Min when a row fits one repeat; wider rows (constant cols):
//   Sum reduces every column chunk into the scratch area, then the partial sums (a row reduce
//   itself, in stages when they are more than one repeat); Max/Min copy chunk
//   0 into one repeat-wide scratch row per row (Muls by 1), fold the other chunks into it with
//   Max/Min and reduce it once (float Max/Min write their results in chunks of 254 rows: an
//   8-byte aligned destination, WholeReduceMax.md). int32 rows (WholeReduce takes half/float
//   only): 64 rows at a time, each row's 32 B blocks folded into one with int32 Add/Max/Min, Brcb
//   spreading its 8 lanes over 8 blocks, which fold again, then a gather of 8 rows per dst block
//   (int_row_reduce). Column reduce: Muls(dst, row 0, 1), then
//   Add/Max/Min of each further row (a For over rows - 1).
// - Row broadcast: Brcb spreads the per-row values to one 32 B block per row in the
//   scratch area (calls of 255 repeats = 2040 rows), then a level-0 binary op reads that block
//   with block stride 0.
// - Select (VecSelect): per pass over contiguous elements (the whole tile when every operand is
//   contiguous, else a For over the rows), level-0 Compare / CompareScalar (one repeat per 256 B
//   of the compared type; calls of at most 252 repeats; a masked last repeat writes its bits at the
//   next 32 B boundary; the level-2 form needs 256 B multiples) into a bit mask in the scratch
//   area, a barrier, one level-2 Select / SelectScalar, or two (whole repeats, tail) when the
//   tail's bits do not follow on a 32 B boundary (constant shapes only).
// - And / Or (VecBinary, int32): one level-2 call on the int16 lanes (2 * count) over contiguous
//   operands, else one per row.
// - Index (VecIndex): one level-2 CreateVecIndex over contiguous rows, else one per row (a For,
//   firstValue first + r * cols).
// - PipeBarrier<PIPE_V> between the dependent calls of one expansion, and before an expansion that
//   reuses the scratch area (unless the statement just before is one).
// - Counts: an expansion whose rows or cols may be <= 0 is wrapped in If(rows > 0 && cols > 0);
//   one with a constant count <= 0 is dropped (no call).
// - The scratch area is one UB BufferDecl ("tw_vec_scratch", after the planned buffers of its core)
//   sized to the largest need (symbolic rows: as many as the buffer holding one value per row can
//   hold); it must fit the usable UB (target.ascend.ub_bytes). The core's UB pool
//   (Program::pool_bytes) grows to its end.
// Every narrowed field is range-checked here when it is a constant (a located ir::Error with a fix);
// run-time values are checked by the simulator (simulator/api_rules.h).
#pragma once

#include "target/ascend/program.h"
#include "target/registry.h"

namespace tw::ascend {

Program select_vector_calls(const Program& p, const target::Target& target);

}  // namespace tw::ascend
