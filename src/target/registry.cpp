#include "target/registry.h"

#include "tilewright/ir.h"

namespace tw::target {

namespace {
struct Alias {
  std::string_view alias, name;
};
constexpr Alias kAliases[] = {{"ascend910b", "ascend910b2"}};

std::vector<Target> make_targets() {
  // Chip table: shared/ascend-910b.md "Chips". HBM bandwidth of 910B4 is about half (uncertain).
  auto ascend = [](std::string name, int aic, double mhz, double hbm_gib, double l2_mib, double hbm_tbps) {
    AscendParams p{};
    p.aic_cores = aic;
    p.aiv_cores = 2 * aic;
    p.clock_mhz = mhz;
    p.hbm_gib = hbm_gib;
    p.l2_mib = l2_mib;
    p.hbm_tbps = hbm_tbps;
    p.l2_tbps = 7.0;
    return Target{name, TargetKind::ascend, "Huawei Ascend " + name.substr(6) + " (simulated)", p};
  };
  return {
      Target{"cpu", TargetKind::cpu, "the host CPU: generated C++ compiled with the host compiler", {}},
      ascend("ascend910b1", 24, 1850, 64, 192, 1.6),
      ascend("ascend910b2", 24, 1800, 64, 192, 1.6),
      ascend("ascend910b3", 20, 1800, 64, 192, 1.6),
      ascend("ascend910b4", 20, 1500, 32, 96, 0.8),
  };
}
}  // namespace

const std::vector<Target>& all_targets() {
  static const std::vector<Target> targets = make_targets();
  return targets;
}

std::string target_names() {
  std::string out;
  for (const auto& t : all_targets()) out += (out.empty() ? "" : ", ") + t.name;
  out += " (aliases:";
  for (const auto& a : kAliases) out += " " + std::string(a.alias) + " -> " + std::string(a.name) + ";";
  out.back() = ')';
  return out;
}

const Target& find_target(std::string_view name) {
  for (const auto& a : kAliases)
    if (a.alias == name) name = a.name;
  for (const auto& t : all_targets())
    if (t.name == name) return t;
  throw ir::Error("unknown target '" + std::string(name) + "'", {}, "valid targets: " + target_names());
}

}  // namespace tw::target
