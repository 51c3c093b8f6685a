#include "transform/pass_log.h"

#include <filesystem>
#include <fstream>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/env.h"

namespace tw::transform {

PassLog::PassLog(const ir::Kernel& input) : kernel_(input) {
  ir::verify(kernel_);  // user errors are reported against the user's own program first
  record("input");
}

void PassLog::record(const std::string& name) {
  if (!stages_.empty()) ir::verify(kernel_);  // a pass that breaks the IR is a compiler bug; catch it here
  stages_.emplace_back(name, ir::print(kernel_));
  const std::string& dir = runtime::env().dump_ir_dir;
  if (dir.empty()) return;
  namespace fs = std::filesystem;
  fs::path out = fs::path(dir) / kernel_->name;
  fs::create_directories(out);
  char prefix[8];
  std::snprintf(prefix, sizeof prefix, "%02zu_", stages_.size() - 1);
  std::ofstream(out / (prefix + name + ".tir")) << stages_.back().second;
}

}  // namespace tw::transform
