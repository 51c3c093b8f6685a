// api_rules: the documented AscendC API rules the simulator checks on every issued instruction,
// so that "the simulator passes it" covers the call the AscendC printer prints, not only the
// program's semantics. Each violated rule is an `API rule` report at the kernel source line.
//
// The rules and their sources (asc-devkit v8.5.0; docs/ascend.md "Enforced API rules" lists them):
// - Cast: half/bfloat16 -> float and int8/uint8 -> half accept only CAST_NONE (Cast.md table 4).
// - Call-level moves (program.h; the fields as issued): every field fits its width and documented
//   range (a value outside would be truncated by the API): DataCopyPad / DataCopy(UB, UB) blockCount
//   1..4095 (a count <= 0 must not issue the call: select_move_calls guards it), gaps unsigned (rows
//   must not overlap), DataCopyPadExtParams paddings at most 32 B; Nd2NzParams uint16 with
//   nValue <= 16384; LoadData2DParams repeatTimes uint8, sid 0; LoadData3DParamsV2 and
//   FixpipeParamsV220 field widths; InitConstValueParams uint16 fields.
// - Vector calls (the fields of VecCallL2 / VecCallL0 / WholeReduce / Brcb, checked directly):
//   level-2 count >= 1; level-0 mask 1..256 B / element size, repeatTimes and every block / repeat
//   stride (BinaryRepeatParams, UnaryRepeatParams, Duplicate, WholeReduce, BrcbRepeatParams) uint8;
//   Div/Exp/Ln/Sqrt/Rsqrt/Reciprocal and WholeReduce take half/float only.
// - InitConstValue has no int8/uint8 form on dav-c220 (a silent no-op); its dtypes are half,
//   int16, uint16, bfloat16, float, int32, uint32.
// - Mmad: m, n, k <= 4095; m = 1 runs as GEMV (A read as ND); Mmads accumulating into the same
//   L0C need PipeBarrier<PIPE_M> between them when ceil(m/16) * ceil(n/16) < 10 (Mmad docs).
// - PipeBarrier<PIPE_S> is a hardware error (PipeBarrier docs).
// - Brcb: dstBlkStride 0 is undefined; source and destination do not share memory (Brcb.md).
// - Select modes 1/2 use UB at 184 KiB as a temporary (machine.cpp, program.h kSelectTmpUbOffset).
// - WholeReduceMax/Min on float need an 8-byte aligned destination (WholeReduceMax.md; the memory
//   checks require 32 B alignment of every other UB operand, the element size of WholeReduce's).
#pragma once

#include <string>
#include <vector>

#include "target/ascend/simulator/machine.h"

namespace tw::ascend::sim {

// Appends one message per rule `r` (issued in program order on its core) violates.
void check_api_rules(const RInstr& r, ApiRuleState& st, std::vector<std::string>& out);

}  // namespace tw::ascend::sim
