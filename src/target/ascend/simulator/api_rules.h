// api_rules: the documented AscendC API rules the simulator checks on every issued instruction,
// so that "the simulator passes it" covers the call the AscendC printer prints, not only the
// program's semantics. Each violated rule is an `API rule` report at the kernel source line.
//
// The rules and their sources (asc-devkit v8.5.0; docs/ascend.md "Enforced API rules" lists them):
// - Cast: half/bfloat16 -> float and int8/uint8 -> half accept only CAST_NONE (Cast.md table 4).
// - DataCopyPad / DataCopy(UB, UB): blockCount is 1..4095 (DataCopyPad docs); a count <= 0 means
//   "no call" (the printer guards it); the gaps between bursts are unsigned (rows must not overlap),
//   DataCopyParams fields are uint16 (32 B blocks).
// - Vector calls (the fields of VecCallL2 / VecCallL0 / WholeReduce / Brcb, checked directly):
//   level-2 count >= 1; level-0 mask 1..256 B / element size, repeatTimes and every block / repeat
//   stride (BinaryRepeatParams, UnaryRepeatParams, Duplicate, WholeReduce, BrcbRepeatParams) uint8;
//   Div/Exp/Ln/Sqrt/Rsqrt/Reciprocal and WholeReduce take half/float only.
// - Nd2NzParams: nValue <= 16384, dValue and srcDValue (uint16) <= 65535 elements.
// - InitConstValue has no int8/uint8 form on dav-c220 (a silent no-op).
// - Mmad: m, n, k <= 4095; m = 1 runs as GEMV (A read as ND); Mmads accumulating into the same
//   L0C need PipeBarrier<PIPE_M> between them when ceil(m/16) * ceil(n/16) < 10 (Mmad docs).
// - PipeBarrier<PIPE_S> is a hardware error (PipeBarrier docs).
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
