// The Ascend backend's Executable: lowers with the Ascend pipeline and runs the program in the
// 910B simulator (no NPU is needed). The same program prints as an AscendC project.
#pragma once

#include <memory>

#include "target/ascend/ascendc_printer.h"
#include "target/ascend/pipeline.h"
#include "target/ascend/simulator/simulator.h"
#include "target/registry.h"
#include "tilewright/runtime.h"

namespace tw::runtime {

class AscendExecutable final : public Executable {
 public:
  AscendExecutable(ascend::LoweredAscend lowered, const target::Target& target);

  // "ascendc" (kernel .cpp), "ascendc_host" (launcher), "ascendc_cmake", "ascendc_readme",
  // "ascend_program" (the lowered program, as text).
  std::string source(std::string_view lang) const override;
  // (file name, contents) of the AscendC project: kernel, host launcher, CMakeLists.txt, README.
  std::vector<std::pair<std::string, std::string>> ascendc_files() const;
  // Runs the simulator with arithmetic and checking; any checker report is an error.
  void launch(const std::vector<Arg>& inputs, const std::vector<void*>& outputs,
              const Binding& binding) const override;
  // The same, cancelled through `cancel` (ascend::sim::Options::cancel).
  void launch(const std::vector<Arg>& inputs, const std::vector<void*>& outputs, const Binding& binding,
              const std::atomic<bool>* cancel) const;
  // Runs the simulator with the given options and returns its full result (reports included,
  // not thrown).
  std::shared_ptr<const ascend::sim::Result> simulate(const std::vector<Arg>& inputs, const std::vector<void*>& outputs,
                                                      const Binding& binding, const ascend::sim::Options& options) const;

 private:
  std::shared_ptr<const ascend::Program> program_;
  // The AscendC project, printed when the kernel is compiled (session 37, h-printer37: a kernel the
  // simulator runs but the printer cannot print is a compile error, not a surprise at export; the
  // printing costs 0.4-0.8 ms, under 6% of a compile).
  ascend::AscendCProject project_;
  target::Target target_info_;
};

std::shared_ptr<const Executable> compile_ascend(const ir::Kernel& kernel, const target::Target& target);

}  // namespace tw::runtime
