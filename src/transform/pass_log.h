// Runs the passes of a target pipeline and keeps the IR after each one: for
// kernel.get_ir(stage) / kernel.stages, for TW_DUMP_IR=<dir>, and to verify the IR between passes.
// A Tile IR stage is kept as its (immutable) kernel and printed only when asked for (get_ir, or
// TW_DUMP_IR): a compile prints no IR. The text of an IR whose expressions share sub-expressions
// (a DAG) can be exponentially longer than the IR (hunt40 F6: three nested T.sin took 100 s of
// CPU to print after every pass).
// Tile IR passes are checked by ir::verify; the passes of a lower IR a target lowers the kernel to
// (the Ascend Program) are run with that IR's own check, which also gives the stage's text.
//
// Stage names are unique: a pass run a second time (simplify) is recorded as "simplify_2".
// TW_DUMP_IR=<dir> writes <dir>/<kernel>-<hash of the input IR>/<target>/NN_<stage>.tir (Tile
// IR) or NN_<stage>.txt (a lower IR), NN the stage's position in the pipeline, then the target's
// artefacts (dump()) numbered after the last stage.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tilewright/ir.h"

namespace tw::transform {

// A stage's IR: a Tile IR kernel (printed on demand: stage_text) or a lower IR's text.
using StageIr = std::variant<ir::Kernel, std::string>;
using Stages = std::vector<std::pair<std::string, StageIr>>;
std::string stage_text(const StageIr& ir);

class PassLog {
 public:
  // `target` names the dump folder (TW_DUMP_IR/<kernel>-<hash>/<target>).
  PassLog(const ir::Kernel& input, const std::string& target);
  // Applies pass to the current kernel, verifies the result and records it as `name`.
  template <class Pass>
  const ir::Kernel& run(const std::string& name, Pass&& pass) {
    kernel_ = pass(kernel_);
    record(name);
    return kernel_;
  }
  // Applies pass to `in` (the current kernel, or a lower IR the target produced from it) and
  // records the result as stage `name`: check(result, stage name) verifies it (an error naming the
  // pass) and returns its text.
  template <class In, class Pass, class Check>
  auto run(const std::string& name, const In& in, Pass&& pass, Check&& check) {
    auto out = pass(in);
    std::string stage = unique_name(name);
    record_text(stage, check(out, stage));
    return out;
  }
  const ir::Kernel& kernel() const { return kernel_; }
  // Writes a non-IR artefact of the pipeline (e.g. the generated C++) next to the IR dumps.
  void dump(const std::string& name, const std::string& text) const;
  // (stage name, IR) in pipeline order; the first is "input".
  const Stages& stages() const { return stages_; }

 private:
  void record(const std::string& name);
  void record_text(const std::string& stage, std::string text);
  std::string unique_name(const std::string& name) const;
  void write(size_t index, const std::string& file, const std::string& text) const;
  std::string dump_dir_;  // TW_DUMP_IR/<kernel>-<hash of the input IR>/<target>, or empty
  ir::Kernel kernel_;
  Stages stages_;
};

}  // namespace tw::transform
