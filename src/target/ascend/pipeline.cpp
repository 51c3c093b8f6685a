#include "target/ascend/pipeline.h"

#include "target/ascend/lower_expert.h"
#include "target/ascend/program_printer.h"
#include "transform/pass_log.h"
#include "transform/simplify.h"

namespace tw::ascend {

LoweredAscend lower_ascend(const ir::Kernel& input, const target::Target& target) {
  transform::PassLog log(input);  // verifies the user's kernel: errors point at the user's lines
  if (!input->is_npu())
    throw ir::Error("kernel '" + input->name + "' is written for any target (no T.Kernel(..., is_npu=True)); "
                        "automatic compilation of such kernels for " + target.name + " is not built yet",
                    input->span,
                    "write the kernel in Ascend expert mode (T.Kernel(n, is_npu=True), T.Scope, T.alloc_L1/...; "
                    "see docs/ascend.md), or compile it for target=\"cpu\"");
  // Fold index arithmetic so instruction operands are constants where they can be.
  log.run("simplify", [](const ir::Kernel& k) { return transform::simplify(k); });
  // Expert mode: the user placed every buffer and wrote every flag; this only translates
  // tile ops to instructions and plans static addresses (see lower_expert.h).
  auto program = std::make_shared<const Program>(lower_expert(log.kernel(), target));
  log.dump("ascend_program.txt", print_program(*program));
  return LoweredAscend{log.kernel(), std::move(program), log.stages()};
}

}  // namespace tw::ascend
