// Target-independent part of an Executable: IR stages, argument checking, and compile()
// (the dispatch from the target table to a backend, with the in-memory cache).
#include <cstdint>
#include <map>
#include <mutex>

#include "ir/printer.h"
#include "runtime/ascend_executable.h"
#include "runtime/cpu_executable.h"
#include "runtime/disk_cache.h"
#include "target/registry.h"
#include "transform/pass_log.h"
#include "tilewright/runtime.h"

namespace tw {

std::vector<std::string> Executable::stage_names() const {
  std::vector<std::string> out;
  for (const auto& stage : stages_) out.push_back(stage.first);
  out.push_back("final");
  return out;
}

std::string Executable::ir(std::string_view stage) const {
  if (stage == "final") return transform::stage_text(stages_.back().second);
  for (const auto& [name, ir] : stages_)
    if (name == stage) return transform::stage_text(ir);
  std::string names;
  for (const auto& n : stage_names()) names += (names.empty() ? "" : ", ") + n;
  throw ir::Error("no IR stage '" + std::string(stage) + "' for kernel '" + kernel_->name + "'", {},
                  "stages are: " + names);
}

namespace {

// A dimension of a declared shape as a signature term list (empty when it is not an integer
// expression over constants and shape variables: such a dimension is not checked).
void to_rpn(const ir::Expr& e, const std::vector<ir::Var>& vars, std::vector<DimTerm>& out, bool& ok) {
  if (auto c = ir::as_const_int(e)) {
    out.push_back({DimTerm::Const, *c, {}});
    return;
  }
  switch (e->kind) {
    case ir::ExprKind::Var:
      for (size_t i = 0; i < vars.size(); ++i)
        if (vars[i].get() == e.get()) {
          out.push_back({DimTerm::Var, static_cast<int64_t>(i), {}});
          return;
        }
      ok = false;
      return;
    case ir::ExprKind::Binary: {
      auto* b = static_cast<const ir::BinaryNode*>(e.get());
      if (b->op == ir::BinOp::Shl || b->op == ir::BinOp::Shr) {  // their count depends on the type,
        ok = false;                                              // which the terms do not carry
        return;
      }
      to_rpn(b->a, vars, out, ok);
      to_rpn(b->b, vars, out, ok);
      out.push_back({DimTerm::Op, 0, b->op});
      return;
    }
    case ir::ExprKind::IntImm: case ir::ExprKind::FloatImm: case ir::ExprKind::Unary: case ir::ExprKind::Call:
    case ir::ExprKind::Cast: case ir::ExprKind::Select: case ir::ExprKind::Load:
      ok = false;
  }
}

}  // namespace

Signature signature_of(const ir::Kernel& kernel, std::string_view target) {
  const auto& k = *kernel;
  Signature sig;
  sig.kernel = k.name;
  sig.span = k.span;
  sig.target = std::string(target);
  std::vector<ir::Var> vars = k.shape_vars();
  // The printed AscendC holds a shape variable in its own dtype (static_cast<int32_t> of the
  // tiling field), the simulator in int64: a larger dimension would make the two disagree.
  const bool narrow = target::find_target(target).kind == target::TargetKind::ascend;
  for (const auto& v : vars) {
    const int bits = v->dtype.bits();
    const int64_t max = !narrow || bits >= 64 ? INT64_MAX : (int64_t(1) << (bits - 1)) - 1;
    sig.shape_vars.push_back({v->name, v->span, max});
  }
  for (const auto& p : k.params) {
    SignatureParam sp;
    sp.name = p.name();
    sp.is_output = p.is_output;
    sp.is_scalar = static_cast<bool>(p.scalar);
    if (p.scalar) {
      sp.dtype = p.scalar->dtype;
    } else {
      sp.dtype = p.buffer->dtype;
      for (const auto& d : p.buffer->shape) {
        SignatureDim dim;
        auto c = ir::as_const_int(d);
        dim.text = c ? std::to_string(*c) : ir::print(d);
        bool ok = true;
        to_rpn(d, vars, dim.rpn, ok);
        if (!ok) dim.rpn.clear();
        sp.shape.push_back(std::move(dim));
      }
    }
    sig.params.push_back(std::move(sp));
  }
  return sig;
}

const Signature& Executable::signature() const {
  std::call_once(signature_once_, [this] { signature_ = signature_of(kernel_, target_); });
  return signature_;
}

Binding Executable::bind(const std::vector<Arg>& inputs) const { return tw::bind(signature(), inputs); }

std::shared_ptr<const Executable> compile(const ir::Kernel& kernel, std::string_view target_name) {
  const target::Target& target = target::find_target(target_name);
  switch (target.kind) {
    case target::TargetKind::cpu: return runtime::compile_cpu(kernel, target);
    case target::TargetKind::ascend: return runtime::compile_ascend(kernel, target);
  }
  throw ir::Error("internal: unhandled target kind");
}

}  // namespace tw
