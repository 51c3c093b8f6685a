// tw::bind: checks a call's arguments against a kernel's Signature (tilewright/signature.h).
// The one implementation of the argument checks, used by compiled Executables and AOT artifacts.
#include "tilewright/signature.h"

#include <climits>
#include <optional>
#include <sstream>

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

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << (s.size() == 1 ? ",)" : ")");
  return os.str();
}

std::string declared_shape(const SignatureParam& p) {
  std::string out = "(";
  for (size_t i = 0; i < p.shape.size(); ++i) out += (i ? ", " : "") + p.shape[i].text;
  return out + (p.shape.size() == 1 ? ",)" : ")");
}

// Evaluates a dimension given the shape variables bound so far (nullopt if one is unbound).
// Operators fold exactly as the IR's integer arithmetic does (ir::binary on constants).
std::optional<int64_t> eval_dim(const SignatureDim& d, const std::vector<std::optional<int64_t>>& vals) {
  std::vector<int64_t> stack;
  for (const DimTerm& t : d.rpn) {
    switch (t.kind) {
      case DimTerm::Const: stack.push_back(t.value); break;
      case DimTerm::Var:
        if (t.value < 0 || t.value >= static_cast<int64_t>(vals.size()) || !vals[t.value]) return std::nullopt;
        stack.push_back(*vals[t.value]);
        break;
      case DimTerm::Op: {
        if (stack.size() < 2) return std::nullopt;
        int64_t y = stack.back();
        stack.pop_back();
        int64_t x = stack.back();
        stack.pop_back();
        auto folded = ir::as_const_int(
            ir::binary(t.op, ir::int_imm(x, ir::DTypeCode::i64), ir::int_imm(y, ir::DTypeCode::i64)));
        if (!folded) return std::nullopt;
        stack.push_back(*folded);
        break;
      }
    }
  }
  if (stack.size() != 1) return std::nullopt;
  return stack.back();
}

// What an input and an output must both be: in host memory ...
void check_on_host(const Signature& sig, const TensorArg& t, const std::string& who, const ir::Span& where,
                   const std::string& hint) {
  if (t.device_type != 1)
    throw ir::Error(who + " is on device " + dlpack_device_name(t.device_type) + ":" + std::to_string(t.device_id) +
                        " (DLPack device type " + std::to_string(t.device_type) + "), but target '" + sig.target +
                        "' runs on host memory",
                    where, hint);
}

// ... and dense row-major: one stride per dimension (or none), a data pointer unless empty. A C++
// caller can pass any of these wrong (h-hunt11b F12 / F23).
void check_dense(const TensorArg& t, const std::string& who, const ir::Span& where, const std::string& hint) {
  const int ndim = static_cast<int>(t.shape.size());
  if (!t.strides.empty() && static_cast<int>(t.strides.size()) != ndim)
    throw ir::Error(who + " has " + std::to_string(t.strides.size()) + " strides for " + std::to_string(ndim) +
                        " dimensions",
                    where, "pass one stride per dimension, or none for a dense row-major tensor");
  int64_t numel = 1, expect = 1;
  for (auto n : t.shape) numel *= n;
  for (int d = ndim - 1; d >= 0 && !t.strides.empty() && numel > 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expect)
      throw ir::Error(who + " is not contiguous (strides " + shape_str(t.strides) + " elements for shape " +
                          shape_str(t.shape) + ")",
                      where, hint);
    expect *= t.shape[d];
  }
  if (t.data == nullptr && numel > 0) throw ir::Error(who + " has a null data pointer", where);
}

}  // namespace

Binding bind(const Signature& sig, const std::vector<Arg>& inputs) {
  const ir::Span& where = sig.span;
  std::vector<const SignatureParam*> in_params;
  in_params.reserve(sig.params.size());
  for (const auto& p : sig.params)
    if (!p.is_output) in_params.push_back(&p);
  if (inputs.size() != in_params.size()) {
    std::string names;
    for (auto* p : in_params) names += (names.empty() ? "" : ", ") + p->name;
    throw ir::Error("kernel '" + sig.kernel + "' takes " + std::to_string(in_params.size()) + " argument(s) (" +
                        names + "), got " + std::to_string(inputs.size()),
                    where, "outputs are allocated and returned by the kernel; pass only the inputs");
  }
  std::vector<std::optional<int64_t>> vals(sig.shape_vars.size());

  for (size_t i = 0; i < inputs.size(); ++i) {
    const SignatureParam& p = *in_params[i];
    // Built only when an error is reported: this runs on every launch.
    auto who = [&] { return "argument '" + p.name + "' of kernel '" + sig.kernel + "'"; };
    if (p.is_scalar) {
      ir::DType t = p.dtype;
      if (std::holds_alternative<TensorArg>(inputs[i]))
        throw ir::Error(who() + " is a scalar of type " + std::string(t.name()) + ", got an array", where,
                        "pass a Python or numpy number");
      if (std::holds_alternative<double>(inputs[i]) && !t.is_float())
        throw ir::Error(who() + " is an integer (" + std::string(t.name()) + "), got a float", where, "pass an int");
      if (std::holds_alternative<int64_t>(inputs[i]) && (t.is_int() || t.is_bool())) {
        int64_t v = std::get<int64_t>(inputs[i]);
        int64_t lo = t.is_bool() ? 0 : t.code == ir::DTypeCode::u8 ? 0 : -(int64_t(1) << (t.bits() - 1));
        int64_t hi = t.is_bool() ? 1 : t.code == ir::DTypeCode::u8 ? 255 : t.bits() == 64 ? INT64_MAX : (int64_t(1) << (t.bits() - 1)) - 1;
        if (v < lo || v > hi)
          throw ir::Error(who() + " is " + std::string(t.name()) + ", but " + std::to_string(v) + " is out of its range [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "]",
                          where, "pass a value that fits, or declare the parameter with a wider type");
      }
      continue;
    }
    if (!std::holds_alternative<TensorArg>(inputs[i]))
      throw ir::Error(who() + " is a tensor " + std::string(p.dtype.name()) + declared_shape(p) + ", got a scalar",
                      where, "pass a numpy array or an object with __dlpack__");
    const TensorArg& t = std::get<TensorArg>(inputs[i]);
    check_on_host(sig, t, who(), where, "move the array to the CPU first (e.g. tensor.cpu())");
    if (t.dtype != p.dtype)
      throw ir::Error(who() + " must have dtype " + std::string(p.dtype.name()) + ", got " + std::string(t.dtype.name()),
                      where, "convert it, e.g. a.astype(\"" + std::string(p.dtype.name()) + "\")");
    const int ndim = static_cast<int>(p.shape.size());
    if (static_cast<int>(t.shape.size()) != ndim)
      throw ir::Error(who() + " must have " + std::to_string(ndim) + " dimension(s) " + declared_shape(p) +
                          ", got shape " + shape_str(t.shape),
                      where);
    for (int d = 0; d < ndim; ++d)  // a C++ caller can pass one (an int64 underflow): h-hunt11b F12
      if (t.shape[d] < 0)
        throw ir::Error(who() + " has a negative dimension: shape " + shape_str(t.shape), where,
                        "pass the tensor's real shape (every dimension >= 0)");
    for (int d = 0; d < ndim; ++d) {
      const auto& rpn = p.shape[d].rpn;
      if (rpn.size() != 1 || rpn[0].kind != DimTerm::Var) continue;
      const size_t v = static_cast<size_t>(rpn[0].value);
      if (v >= vals.size()) continue;
      if (vals[v] && *vals[v] != t.shape[d])
        throw ir::Error(who() + " has shape " + shape_str(t.shape) + ", but dimension " + std::to_string(d) + " is '" +
                            sig.shape_vars[v].name + "', already bound to " + std::to_string(*vals[v]) +
                            " by an earlier argument",
                        where, "the arguments' shapes must agree on '" + sig.shape_vars[v].name + "'");
      if (t.shape[d] > sig.shape_vars[v].max)
        throw ir::Error(who() + " has shape " + shape_str(t.shape) + ": dimension " + std::to_string(d) + " ('" +
                            sig.shape_vars[v].name + "') is " + std::to_string(t.shape[d]) + ", above " +
                            std::to_string(sig.shape_vars[v].max) + ", the largest value target '" + sig.target +
                            "' holds a shape variable in",
                        where, "split the call into parts of at most " + std::to_string(sig.shape_vars[v].max) +
                                   " along that dimension");
      vals[v] = t.shape[d];
    }
    for (int d = 0; d < ndim; ++d) {
      auto want = eval_dim(p.shape[d], vals);
      if (want && *want != t.shape[d])
        throw ir::Error(who() + " must have shape " + declared_shape(p) + ", got " + shape_str(t.shape) +
                            " (dimension " + std::to_string(d) + " should be " + std::to_string(*want) + ")",
                        where);
    }
    check_dense(t, who(), where, "pass a C-contiguous array, e.g. numpy.ascontiguousarray(a)");
  }

  Binding out;
  for (size_t v = 0; v < vals.size(); ++v) {
    if (!vals[v])
      throw ir::Error("shape variable '" + sig.shape_vars[v].name + "' of kernel '" + sig.kernel +
                          "' is not the dimension of any input, so it cannot be inferred",
                      sig.shape_vars[v].span, "use it as a dimension of an input tensor, or make it a constant");
    out.shape_vars.push_back(*vals[v]);
  }
  for (const auto& p : sig.params) {
    if (!p.is_output) continue;
    OutputSpec spec{p.dtype, {}};
    for (size_t d = 0; d < p.shape.size(); ++d) {
      auto n = eval_dim(p.shape[d], vals);
      if (!n)
        throw ir::Error("the shape " + declared_shape(p) + " of output '" + p.name + "' of kernel '" + sig.kernel +
                            "' cannot be computed from the inputs (dimension " + std::to_string(d) + ")",
                        where, "declare output dimensions as constants or expressions of the inputs' dimensions");
      spec.shape.push_back(*n);
    }
    out.outputs.push_back(std::move(spec));
  }
  return out;
}

void check_outputs(const Signature& sig, const Binding& binding, const std::vector<TensorArg>& outputs) {
  if (outputs.size() != binding.outputs.size())
    throw ir::Error("kernel '" + sig.kernel + "' has " + std::to_string(binding.outputs.size()) + " output(s), got " +
                        std::to_string(outputs.size()),
                    sig.span, "pass one output tensor per output parameter, or let the runtime allocate them");
  size_t o = 0;
  for (const auto& p : sig.params) {
    if (!p.is_output) continue;
    const OutputSpec& want = binding.outputs[o];
    const TensorArg& t = outputs[o++];
    auto who = [&] { return "output '" + p.name + "' of kernel '" + sig.kernel + "'"; };
    check_on_host(sig, t, who(), sig.span, "pass host memory");
    if (t.dtype != want.dtype)
      throw ir::Error(who() + " must have dtype " + std::string(want.dtype.name()) + ", got " +
                          std::string(t.dtype.name()),
                      sig.span, "allocate it with the dtype the kernel declares");
    if (t.shape != want.shape)
      throw ir::Error(who() + " must have shape " + shape_str(want.shape) + " for these inputs, got " +
                          shape_str(t.shape),
                      sig.span, "allocate it as bind(inputs).outputs describes");
    for (auto n : t.shape)
      if (n < 0)
        throw ir::Error(who() + " would have shape " + shape_str(want.shape) + " for these inputs: a negative dimension",
                        sig.span, "check the input shapes: the output's shape follows from them");
    check_dense(t, who(), sig.span, "pass a dense row-major array");
  }
}

}  // namespace tw
