#include "target/cpu/pipeline.h"

#include "target/cpu/codegen.h"
#include "transform/infer_grid.h"
#include "transform/pass_log.h"
#include "transform/simplify.h"

namespace tw::cpu {

LoweredCpu lower_cpu(const ir::Kernel& input) {
  transform::PassLog log(input);  // verifies the user's kernel: errors point at the user's lines
  // Tile-loop kernels (the seed's style) have no grid yet: find it before anything needs it.
  log.run("infer_grid", transform::infer_grid);
  // Fold index arithmetic (block offsets, tile extents) so codegen sees constants.
  log.run("simplify", transform::simplify);
  // Tile ops lower one-to-one to loops and micro-kernel calls; pipelined loops run serially
  // (no asynchronous copies on a CPU: hardware prefetch plays that role).
  std::string source = codegen_cpu(log.kernel());
  log.dump("codegen.cpp", source);
  return LoweredCpu{log.kernel(), std::move(source), log.stages()};
}

}  // namespace tw::cpu
