// Runtime API: compile a Tile IR kernel for a target and launch it on host memory.
// Used by the Python bindings and usable directly from C++.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tilewright/ir.h"

namespace tw {

// A tensor argument: a view of memory owned by the caller.
struct TensorArg {
  void* data = nullptr;
  ir::DType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty means dense row-major
  int device_type = 1;           // DLPack device type; 1 = CPU
  int device_id = 0;
};
// A scalar argument (converted to the parameter's dtype).
using Arg = std::variant<TensorArg, int64_t, double>;

struct OutputSpec {
  ir::DType dtype;
  std::vector<int64_t> shape;
};

// The result of checking the arguments of one call against the kernel's signature.
struct Binding {
  std::vector<int64_t> shape_vars;  // in KernelNode::shape_vars() order
  std::vector<OutputSpec> outputs;  // one per output parameter, in order
};

class Executable {
 public:
  virtual ~Executable() = default;

  const ir::Kernel& kernel() const { return kernel_; }  // IR after the last pass
  const std::string& target() const { return target_; }
  // Generated code: "c++" (cpu).
  virtual std::string source(std::string_view lang) const = 0;
  // IR text after a pipeline stage ("input", ..., "final"); throws listing the stage names.
  std::string ir(std::string_view stage) const;
  std::vector<std::string> stage_names() const;
  // True if the compiled code came from the on-disk cache rather than a compiler run.
  virtual bool from_disk_cache() const { return false; }

  // Checks the inputs (the non-output parameters, in order) and binds the shape variables.
  // Throws ir::Error naming the parameter and the kernel's def line.
  Binding bind(const std::vector<Arg>& inputs) const;
  // Runs the kernel. `outputs` holds one data pointer per output parameter, allocated by the
  // caller as described by binding.outputs (dense row-major).
  virtual void launch(const std::vector<Arg>& inputs, const std::vector<void*>& outputs,
                      const Binding& binding) const = 0;

 protected:
  ir::Kernel kernel_;
  std::string target_;
  std::vector<std::pair<std::string, std::string>> stages_;
};

// Compiles `kernel` for `target` (see target/registry.h). Identical requests share one
// Executable in memory; compiled code is also cached on disk (TW_CACHE_DIR).
std::shared_ptr<const Executable> compile(const ir::Kernel& kernel, std::string_view target);

}  // namespace tw
