// resolve_cross_waits: the mode of every CrossCoreWaitFlag and the final kernel type (a program pass, the last of both
// pipelines: after select_move_calls).
//
// AscendC's CrossCoreWaitFlag<modeId, pipe>(id) names a mode, like the CrossCoreSetFlag it waits
// for; the program's wait has none until this pass (the simulator pairs sets and waits by id
// alone). Each wait gets the mode of the CrossCoreSetFlag with the same id (the same printed
// expression) in the code the kernel runs (AIC code, then AIV code; the last such set when there
// are several), or mode 2 (AIC <-> its AIVs, CrossCoreSetFlag's default) when no set has that id.
// It also gives the kernel its final type: an AIC_ONLY / AIV_ONLY kernel whose code has a cross-core
// flag (set or wait) becomes MIX_AIC_1_0 / MIX_AIV_1_0, the type AscendC requires for them
// (CrossCoreSetFlag docs); the cores that run are the same. Nothing else changes. The AscendC
// printer prints the modes and the type this pass chose.
#pragma once

#include "target/ascend/program.h"

namespace tw::ascend {

Program resolve_cross_waits(const Program& program);

}  // namespace tw::ascend
