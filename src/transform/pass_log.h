// Runs the passes of a target pipeline and keeps the IR after each one: for
// kernel.get_ir(stage), for TW_DUMP_IR=<dir>, and to verify the IR between passes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tilewright/ir.h"

namespace tw::transform {

class PassLog {
 public:
  explicit PassLog(const ir::Kernel& input);
  // Applies pass to the current kernel, verifies the result and records it as `name`.
  template <class Pass>
  const ir::Kernel& run(const std::string& name, Pass&& pass) {
    kernel_ = pass(kernel_);
    record(name);
    return kernel_;
  }
  const ir::Kernel& kernel() const { return kernel_; }
  // Writes a non-IR artefact of the pipeline (e.g. the generated C++) next to the IR dumps.
  void dump(const std::string& name, const std::string& text) const;
  // (stage name, IR text) in pipeline order; the first is "input".
  const std::vector<std::pair<std::string, std::string>>& stages() const { return stages_; }

 private:
  void record(const std::string& name);
  void write(size_t index, const std::string& file, const std::string& text) const;
  std::string dump_dir_;  // TW_DUMP_IR/<kernel>-<hash of the input IR>, or empty
  ir::Kernel kernel_;
  std::vector<std::pair<std::string, std::string>> stages_;
};

}  // namespace tw::transform
