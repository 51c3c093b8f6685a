// Runtime API: compile a Tile IR kernel for a target and launch it on host memory.
// Used by the Python bindings and usable directly from C++.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tilewright/ir.h"
#include "tilewright/signature.h"

namespace tw {

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
  // Compile notes: what the compiler chose in place of what the kernel asked (a T.Pipelined loop
  // run with fewer stages than num_stages on Ascend), each "file:line:col: note: ..." with the
  // source line, and the kernel line it is about. The Python front end shows them as warnings.
  struct Note {
    std::string text;
    ir::Span span;
  };
  const std::vector<Note>& notes() const { return notes_; }

  // The calling convention (parameters, shape variables) without the IR; computed once.
  const Signature& signature() const;
  // Checks the inputs (the non-output parameters, in order) and binds the shape variables:
  // tw::bind(signature(), inputs). Throws ir::Error naming the parameter and the kernel's def line.
  Binding bind(const std::vector<Arg>& inputs) const;
  // Runs the kernel. `outputs` holds one data pointer per output parameter, allocated by the
  // caller as described by binding.outputs (dense row-major).
  virtual void launch(const std::vector<Arg>& inputs, const std::vector<void*>& outputs,
                      const Binding& binding) const = 0;

 protected:
  ir::Kernel kernel_;
  std::string target_;
  // (stage name, IR): a Tile IR kernel, printed when ir() asks for it, or a lower IR's text
  std::vector<std::pair<std::string, std::variant<ir::Kernel, std::string>>> stages_;
  std::vector<Note> notes_;

 private:
  mutable std::once_flag signature_once_;
  mutable Signature signature_;
};

// The signature of `kernel` (its parameters after lowering) as compiled for `target`.
Signature signature_of(const ir::Kernel& kernel, std::string_view target);

// Compiles `kernel` for `target` (see target/registry.h). Identical requests share one
// Executable in memory; compiled code is also cached on disk (TW_CACHE_DIR).
std::shared_ptr<const Executable> compile(const ir::Kernel& kernel, std::string_view target);

}  // namespace tw
