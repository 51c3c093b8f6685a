#include "transform/pass_log.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/env.h"
#include "support/sha256.h"
#include "transform/check_bounds.h"
#include "transform/independent_maps.h"

namespace tw::transform {

PassLog::PassLog(const ir::Kernel& input, const std::string& target) : kernel_(input) {
  ir::verify(kernel_);  // user errors are reported against the user's own program first
  check_bounds(kernel_);  // accesses that certainly go out of bounds are compile-time errors
  check_independent_maps(kernel_);  // a T.Parallel map whose iterations depend on each other is one too
  const std::string& dir = support::env().dump_ir_dir;
  if (!dir.empty()) {  // one directory per distinct kernel, so two kernels named `main` do not collide
    std::string hash = support::sha256_hex(ir::print(kernel_)).substr(0, 8);
    dump_dir_ = (std::filesystem::path(dir) / (kernel_->name + "-" + hash) / target).string();
  }
  record("input");
}

std::string PassLog::unique_name(const std::string& name) const {
  auto taken = [&](const std::string& n) {
    for (const auto& stage : stages_)
      if (stage.first == n) return true;
    return false;
  };
  std::string out = name;
  for (int run = 2; taken(out); ++run) out = name + "_" + std::to_string(run);
  return out;
}

std::string stage_text(const StageIr& ir) {
  if (auto* k = std::get_if<ir::Kernel>(&ir)) return ir::print(*k);
  return std::get<std::string>(ir);
}

void PassLog::record(const std::string& name) {
  if (!stages_.empty()) ir::verify(kernel_);  // a pass that breaks the IR is a compiler bug; catch it here
  std::string stage = unique_name(name);
  stages_.emplace_back(stage, kernel_);
  if (!dump_dir_.empty()) write(stages_.size() - 1, stage + ".tir", ir::print(kernel_));
}

void PassLog::record_text(const std::string& stage, std::string text) {
  write(stages_.size(), stage + ".txt", text);
  stages_.emplace_back(stage, std::move(text));
}

void PassLog::dump(const std::string& name, const std::string& text) const { write(stages_.size(), name, text); }

void PassLog::write(size_t index, const std::string& file, const std::string& text) const {
  if (dump_dir_.empty()) return;
  // TW_DUMP_IR naming a file, a place that cannot be written or a full disk is the user's to fix:
  // an error at the kernel naming the variable, never a std::filesystem exception or a silently
  // missing dump.
  auto fail = [&](const std::string& why) {
    throw ir::Error("TW_DUMP_IR: cannot write the IR dump to '" + dump_dir_ + "': " + why, kernel_->span,
                    "set TW_DUMP_IR to a writable directory, or unset it");
  };
  std::error_code ec;
  std::filesystem::create_directories(dump_dir_, ec);
  if (ec) fail(ec.message());
  char prefix[8];
  std::snprintf(prefix, sizeof prefix, "%02zu_", index);
  std::ofstream out(std::filesystem::path(dump_dir_) / (prefix + file));
  out << text;
  out.close();
  if (!out) fail("writing " + std::string(prefix) + file + " failed");
}

}  // namespace tw::transform
