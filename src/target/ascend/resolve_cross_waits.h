// resolve_cross_waits: the mode of every CrossCoreWaitFlag (a program pass, the last of both
// pipelines: after select_move_calls).
//
// AscendC's CrossCoreWaitFlag<modeId, pipe>(id) names a mode, like the CrossCoreSetFlag it waits
// for; the program's wait has none until this pass (the simulator pairs sets and waits by id
// alone). Each wait gets the mode of the CrossCoreSetFlag with the same id (the same printed
// expression) in the code the kernel runs (AIC code, then AIV code; the last such set when there
// are several), or mode 2 (AIC <-> its AIVs, CrossCoreSetFlag's default) when no set has that id.
// Nothing else changes. The AscendC printer prints the mode this pass chose.
#pragma once

#include "target/ascend/program.h"

namespace tw::ascend {

Program resolve_cross_waits(const Program& program);

}  // namespace tw::ascend
