// Target-independent part of an Executable: IR stages, argument checking, and compile()
// (the dispatch from the target table to a backend, with the in-memory cache).
#include <cstdint>
#include <map>
#include <mutex>
#include <sstream>

#include "ir/printer.h"
#include "runtime/ascend_executable.h"
#include "runtime/cpu_executable.h"
#include "runtime/disk_cache.h"
#include "target/registry.h"
#include "tilewright/runtime.h"

namespace tw {
namespace {

// DLPack's DLDeviceType names (dlpack.h), for errors.
std::string dlpack_device_name(int type) {
  switch (type) {
    case 1: return "cpu";
    case 2: return "cuda";
    case 3: return "cuda_host";
    case 4: return "opencl";
    case 7: return "vulkan";
    case 8: return "metal";
    case 9: return "vpi";
    case 10: return "rocm";
    case 11: return "rocm_host";
    case 12: return "ext_dev";
    case 13: return "cuda_managed";
    case 14: return "oneapi";
    case 15: return "webgpu";
    case 16: return "hexagon";
    case 17: return "maia";
    default: return "unknown";
  }
}

}  // namespace

std::vector<std::string> Executable::stage_names() const {
  std::vector<std::string> out;
  for (const auto& [name, text] : stages_) out.push_back(name);
  out.push_back("final");
  return out;
}

std::string Executable::ir(std::string_view stage) const {
  if (stage == "final") return stages_.back().second;
  for (const auto& [name, text] : stages_)
    if (name == stage) return text;
  std::string names;
  for (const auto& n : stage_names()) names += (names.empty() ? "" : ", ") + n;
  throw ir::Error("no IR stage '" + std::string(stage) + "' for kernel '" + kernel_->name + "'", {},
                  "stages are: " + names);
}

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << (s.size() == 1 ? ",)" : ")");
  return os.str();
}

std::string declared_shape(const ir::Buffer& b) {
  std::string out = "(";
  for (size_t i = 0; i < b->shape.size(); ++i) {
    const auto& d = b->shape[i];
    auto c = ir::as_const_int(d);
    out += (i ? ", " : "");
    out += c ? std::to_string(*c) : ir::print(d);
  }
  return out + (b->shape.size() == 1 ? ",)" : ")");
}

// Evaluates an integer shape expression given values for the shape variables bound so far.
std::optional<int64_t> eval_shape(const ir::Expr& e, const std::vector<ir::Var>& vars,
                                  const std::vector<std::optional<int64_t>>& vals) {
  if (auto c = ir::as_const_int(e)) return c;
  switch (e->kind) {
    case ir::ExprKind::Var:
      for (size_t i = 0; i < vars.size(); ++i)
        if (vars[i].get() == e.get()) return vals[i];
      return std::nullopt;
    case ir::ExprKind::Binary: {
      auto* b = static_cast<const ir::BinaryNode*>(e.get());
      auto x = eval_shape(b->a, vars, vals), y = eval_shape(b->b, vars, vals);
      if (!x || !y) return std::nullopt;
      auto folded = ir::binary(b->op, ir::int_imm(*x, ir::DTypeCode::i64), ir::int_imm(*y, ir::DTypeCode::i64));
      return ir::as_const_int(folded);
    }
    default: return std::nullopt;
  }
}

}  // namespace

Binding Executable::bind(const std::vector<Arg>& inputs) const {
  const auto& k = *kernel_;
  const ir::Span& where = k.span;
  std::vector<const ir::Param*> in_params;
  for (const auto& p : k.params)
    if (!p.is_output) in_params.push_back(&p);
  if (inputs.size() != in_params.size()) {
    std::string names;
    for (auto* p : in_params) names += (names.empty() ? "" : ", ") + p->name();
    throw ir::Error("kernel '" + k.name + "' takes " + std::to_string(in_params.size()) + " argument(s) (" + names +
                        "), got " + std::to_string(inputs.size()),
                    where, "outputs are allocated and returned by the kernel; pass only the inputs");
  }
  std::vector<ir::Var> vars = k.shape_vars();
  std::vector<std::optional<int64_t>> vals(vars.size());

  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Param& p = *in_params[i];
    const std::string who = "argument '" + p.name() + "' of kernel '" + k.name + "'";
    if (p.scalar) {
      ir::DType t = p.scalar->dtype;
      if (std::holds_alternative<TensorArg>(inputs[i]))
        throw ir::Error(who + " is a scalar of type " + std::string(t.name()) + ", got an array", where,
                        "pass a Python or numpy number");
      if (std::holds_alternative<double>(inputs[i]) && !t.is_float())
        throw ir::Error(who + " is an integer (" + std::string(t.name()) + "), got a float", where, "pass an int");
      if (std::holds_alternative<int64_t>(inputs[i]) && (t.is_int() || t.is_bool())) {
        int64_t v = std::get<int64_t>(inputs[i]);
        int64_t lo = t.is_bool() ? 0 : t.code == ir::DTypeCode::u8 ? 0 : -(int64_t(1) << (t.bits() - 1));
        int64_t hi = t.is_bool() ? 1 : t.code == ir::DTypeCode::u8 ? 255 : t.bits() == 64 ? INT64_MAX : (int64_t(1) << (t.bits() - 1)) - 1;
        if (v < lo || v > hi)
          throw ir::Error(who + " is " + std::string(t.name()) + ", but " + std::to_string(v) + " is out of its range [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "]",
                          where, "pass a value that fits, or declare the parameter with a wider type");
      }
      continue;
    }
    const ir::Buffer& b = p.buffer;
    if (!std::holds_alternative<TensorArg>(inputs[i]))
      throw ir::Error(who + " is a tensor " + std::string(b->dtype.name()) + declared_shape(b) + ", got a scalar",
                      where, "pass a numpy array or an object with __dlpack__");
    const TensorArg& t = std::get<TensorArg>(inputs[i]);
    if (t.device_type != 1)
      throw ir::Error(who + " is on device " + dlpack_device_name(t.device_type) + ":" + std::to_string(t.device_id) +
                          " (DLPack device type " + std::to_string(t.device_type) + "), but target '" + target_ +
                          "' runs on host memory",
                      where, "move the array to the CPU first (e.g. tensor.cpu())");
    if (t.dtype != b->dtype)
      throw ir::Error(who + " must have dtype " + std::string(b->dtype.name()) + ", got " + std::string(t.dtype.name()),
                      where, "convert it, e.g. a.astype(\"" + std::string(b->dtype.name()) + "\")");
    if (static_cast<int>(t.shape.size()) != b->ndim())
      throw ir::Error(who + " must have " + std::to_string(b->ndim()) + " dimension(s) " + declared_shape(b) +
                          ", got shape " + shape_str(t.shape),
                      where);
    for (int d = 0; d < b->ndim(); ++d) {
      const ir::Expr& dim = b->shape[d];
      if (dim->kind == ir::ExprKind::Var) {
        for (size_t v = 0; v < vars.size(); ++v) {
          if (vars[v].get() != dim.get()) continue;
          if (vals[v] && *vals[v] != t.shape[d])
            throw ir::Error(who + " has shape " + shape_str(t.shape) + ", but dimension " + std::to_string(d) + " is '" +
                                vars[v]->name + "', already bound to " + std::to_string(*vals[v]) +
                                " by an earlier argument",
                            where, "the arguments' shapes must agree on '" + vars[v]->name + "'");
          vals[v] = t.shape[d];
        }
      }
    }
    for (int d = 0; d < b->ndim(); ++d) {
      auto want = eval_shape(b->shape[d], vars, vals);
      if (want && *want != t.shape[d])
        throw ir::Error(who + " must have shape " + declared_shape(b) + ", got " + shape_str(t.shape) +
                            " (dimension " + std::to_string(d) + " should be " + std::to_string(*want) + ")",
                        where);
    }
    int64_t numel = 1;
    for (auto n : t.shape) numel *= n;
    if (!t.strides.empty() && numel > 0) {
      int64_t expect = 1;
      for (int d = b->ndim() - 1; d >= 0; --d) {
        if (t.shape[d] != 1 && t.strides[d] != expect)
          throw ir::Error(who + " is not contiguous (strides " + shape_str(t.strides) + " elements for shape " +
                              shape_str(t.shape) + ")",
                          where, "pass a C-contiguous array, e.g. numpy.ascontiguousarray(a)");
        expect *= t.shape[d];
      }
    }
    if (t.data == nullptr && numel > 0) throw ir::Error(who + " has a null data pointer", where);
  }

  Binding out;
  for (size_t v = 0; v < vars.size(); ++v) {
    if (!vals[v])
      throw ir::Error("shape variable '" + vars[v]->name + "' of kernel '" + k.name +
                          "' is not the dimension of any input, so it cannot be inferred",
                      vars[v]->span, "use it as a dimension of an input tensor, or make it a constant");
    out.shape_vars.push_back(*vals[v]);
  }
  for (const auto& p : k.params) {
    if (!p.is_output) continue;
    OutputSpec spec{p.buffer->dtype, {}};
    for (const auto& d : p.buffer->shape) spec.shape.push_back(*eval_shape(d, vars, vals));
    out.outputs.push_back(std::move(spec));
  }
  return out;
}

std::shared_ptr<const Executable> compile(const ir::Kernel& kernel, std::string_view target_name) {
  const target::Target& target = target::find_target(target_name);
  switch (target.kind) {
    case target::TargetKind::cpu: return runtime::compile_cpu(kernel, target);
    case target::TargetKind::ascend: return runtime::compile_ascend(kernel, target);
  }
  throw ir::Error("internal: unhandled target kind");
}

}  // namespace tw
