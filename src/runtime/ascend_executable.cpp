#include "runtime/ascend_executable.h"

#include <chrono>
#include <cstdio>

#include "support/env.h"
#include "runtime/log.h"

#include "target/ascend/ascendc_printer.h"
#include "target/ascend/program_printer.h"

namespace tw::runtime {

AscendExecutable::AscendExecutable(ascend::LoweredAscend lowered, const target::Target& target)
    : program_(std::move(lowered.program)), project_(ascend::print_ascendc(*program_)), target_info_(target) {
  kernel_ = lowered.kernel;
  target_ = target.name;
  stages_ = std::move(lowered.stages);
  for (const auto& n : program_->notes) notes_.push_back({ir::format_error(n.message, n.span, "", "note"), n.span});
}

std::string AscendExecutable::source(std::string_view lang) const {
  if (lang == "ascend_program") return ascend::print_program(*program_);
  if (lang == "ascendc" || lang.empty()) return project_.kernel_cpp;
  if (lang == "ascendc_host") return project_.host_cpp;
  if (lang == "ascendc_cmake") return project_.cmake;
  if (lang == "ascendc_readme") return project_.readme;
  throw ir::Error("target '" + target_ + "' has no '" + std::string(lang) + "' source", {},
                  "choose one of: ascendc, ascendc_host, ascendc_cmake, ascendc_readme, ascend_program");
}

std::vector<std::pair<std::string, std::string>> AscendExecutable::ascendc_files() const {
  return project_.files();
}

std::shared_ptr<const ascend::sim::Result> AscendExecutable::simulate(const std::vector<Arg>& inputs,
                                                                      const std::vector<void*>& outputs,
                                                                      const Binding& binding,
                                                                      const ascend::sim::Options& options) const {
  const auto& params = kernel_->params;
  std::vector<ascend::sim::Arg> args(params.size());
  size_t in = 0, out = 0, out_spec = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const ir::Param& p = params[i];
    if (p.is_output) {
      const OutputSpec& spec = binding.outputs.at(out_spec++);
      int64_t n = 1;
      for (auto d : spec.shape) n *= d;
      args[i].data = static_cast<uint8_t*>(outputs.at(out++));
      args[i].bytes = n * spec.dtype.bytes();
    } else if (p.scalar) {
      const Arg& a = inputs.at(in++);
      args[i].scalar = std::holds_alternative<double>(a) ? std::get<double>(a) : static_cast<double>(std::get<int64_t>(a));
      if (std::holds_alternative<int64_t>(a)) args[i].int_scalar = std::get<int64_t>(a);
    } else {
      const TensorArg& t = std::get<TensorArg>(inputs.at(in++));
      int64_t n = 1;
      for (auto d : t.shape) n *= d;
      args[i].data = static_cast<uint8_t*>(t.data);
      args[i].bytes = n * t.dtype.bytes();
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  auto result = std::make_shared<const ascend::sim::Result>(
      ascend::sim::run(*program_, target_info_.ascend, std::move(args), binding.shape_vars, options));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char line[200];
  std::snprintf(line, sizeof line, "simulated kernel '%s' on %s: %.2f us simulated, %.2f s wall", kernel_->name.c_str(),
                target_.c_str(), result->time_us, s);
  log(LogLevel::info, line);
  return result;
}

void AscendExecutable::launch(const std::vector<Arg>& inputs, const std::vector<void*>& outputs,
                              const Binding& binding) const {
  launch(inputs, outputs, binding, nullptr);
}

void AscendExecutable::launch(const std::vector<Arg>& inputs, const std::vector<void*>& outputs,
                              const Binding& binding, const std::atomic<bool>* cancel) const {
  ascend::sim::Options options;
  options.cancel = cancel;
  auto r = simulate(inputs, outputs, binding, options);
  if (r->reports.empty()) return;
  // The simulator's checker found a bug in the kernel: its outputs cannot be trusted.
  std::string text;
  size_t shown = 0;
  for (const auto& rep : r->reports) {
    if (shown++ == 5) break;
    text += "\n" + rep.format();
  }
  size_t more = r->reports.size() + r->dropped_reports - std::min<size_t>(r->reports.size(), 5);
  if (more) text += "\n... and " + std::to_string(more) + " more report(s)";
  ir::Span where = r->reports.front().instrs.empty() ? kernel_->span : r->reports.front().instrs.front().span;
  throw ir::Error("the simulator found " + std::to_string(r->reports.size() + r->dropped_reports) +
                      " problem(s) in kernel '" + kernel_->name + "' on " + target_ + ":" + text,
                  where, "fix what the reports above name (synchronisation, addresses, int32 ranges); kernel.profile(...) "
                  "returns all reports");
}

std::shared_ptr<const Executable> compile_ascend(const ir::Kernel& kernel, const target::Target& target) {
  if (support::frozen())  // Ascend kernels are lowered on every compile: there is no cache to hit
    throw ir::Error("the kernel cache is frozen, but kernel '" + kernel->name + "' for " + target.name +
                        " is not compiled: compiling it now is refused",
                    kernel->span,
                    "precompile every kernel the service needs at start-up (tw.precompile(specs)) before "
                    "tw.freeze() / TW_FROZEN=1");
  return std::make_shared<AscendExecutable>(ascend::lower_ascend(kernel, target), target);
}

}  // namespace tw::runtime
