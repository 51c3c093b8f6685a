#include "target/ascend/resolve_cross_waits.h"

#include <map>
#include <string>

#include "ir/printer.h"

namespace tw::ascend {

namespace {

// id (printed) -> mode of the last CrossCoreSetFlag with that id, in program order.
// Also notes whether the code has any cross-core flag (set or wait), and the first set of mode 1 or 2.
void collect_set_modes(const StmtPtr& s, std::map<std::string, int>& modes, bool& cross, const Stmt*& paired) {
  if (!s) return;
  if (s->kind == StmtKind::Instr) {
    if (const auto* f = std::get_if<CrossCoreSetFlag>(&s->instr.op)) {
      modes[ir::print(f->id)] = f->mode;
      if (f->mode != 0 && !paired) paired = s.get();
    }
    cross = cross || std::holds_alternative<CrossCoreSetFlag>(s->instr.op) || std::holds_alternative<CrossCoreWaitFlag>(s->instr.op);
  }
  for (const auto& b : s->body) collect_set_modes(b, modes, cross, paired);
  collect_set_modes(s->else_body, modes, cross, paired);
}

StmtPtr with_wait_modes(const StmtPtr& s, const std::map<std::string, int>& modes) {
  if (!s) return s;
  auto out = std::make_shared<Stmt>(*s);
  for (auto& b : out->body) b = with_wait_modes(b, modes);
  out->else_body = with_wait_modes(s->else_body, modes);
  if (auto* w = s->kind == StmtKind::Instr ? std::get_if<CrossCoreWaitFlag>(&out->instr.op) : nullptr) {
    auto it = modes.find(ir::print(w->id));
    w->mode = it == modes.end() ? 2 : it->second;
  }
  return out;
}

}  // namespace

Program resolve_cross_waits(const Program& program) {
  Program p = program;
  std::map<std::string, int> modes;
  bool cross = false;
  const Stmt* paired = nullptr;
  if (runs_aic(p.kernel_type)) collect_set_modes(p.aic, modes, cross, paired);
  if (runs_aiv(p.kernel_type)) collect_set_modes(p.aiv, modes, cross, paired);
  // CrossCoreSetFlag modes 1 and 2 (the two AIVs of a core; the AIC and its AIVs) run only in mixed kernels
  // (CrossCoreSetFlag(ISASI).md, constraint table: KERNEL_TYPE_MIX_AIC_1_1 / MIX_AIC_1_2); a one-unit kernel has
  // one core type per block, so such a set has no partner on the device (h-audit31 F4).
  if (paired && (p.kernel_type == KernelType::AIC_ONLY || p.kernel_type == KernelType::AIV_ONLY))
    throw ir::Error("T.set_cross_flag mode " + std::to_string(std::get<CrossCoreSetFlag>(paired->instr.op).mode) +
                        " synchronises the units of one AI Core, but this kernel runs only on the " +
                        (p.kernel_type == KernelType::AIC_ONLY ? "Cube (AIC)" : "Vector (AIV)") +
                        " cores: the device runs modes 1 and 2 only in kernels with both a T.Scope(\"C\") and a "
                        "T.Scope(\"V\")",
                    paired->instr.span,
                    "use mode 0 (all cores of the one type), or give the kernel both scopes");
  if (cross && p.kernel_type == KernelType::AIC_ONLY) p.kernel_type = KernelType::MIX_AIC_1_0;
  if (cross && p.kernel_type == KernelType::AIV_ONLY) p.kernel_type = KernelType::MIX_AIV_1_0;
  p.aic = with_wait_modes(p.aic, modes);
  p.aiv = with_wait_modes(p.aiv, modes);
  return p;
}

}  // namespace tw::ascend
