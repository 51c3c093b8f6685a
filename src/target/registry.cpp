#include "target/registry.h"

#include <algorithm>
#include <cctype>

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
    p.l2_tbps = 7.0;  // shared/ascend-910b.md "L2 ~ 7 TB/s" (one figure for B1-B4; uncertain)
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

namespace {
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

const Target& find_target(std::string_view name) {
  // Names are case-insensitive, so CANN's spellings (Ascend910B2, Ascend910B) work as they are.
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view key = lower;
  for (const auto& a : kAliases)
    if (a.alias == key) key = a.name;
  for (const auto& t : all_targets())
    if (t.name == key) return t;
  std::string best;
  size_t best_d = 4;  // suggest only close matches
  auto consider = [&](std::string_view cand) {
    size_t d = edit_distance(lower, cand);
    if (d < best_d) best_d = d, best = std::string(cand);
  };
  for (const auto& t : all_targets()) consider(t.name);
  for (const auto& a : kAliases) consider(a.alias);
  throw ir::Error("unknown target '" + std::string(name) + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"),
                  {}, "valid targets: " + target_names());
}

std::vector<std::pair<std::string, std::string>> target_aliases() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& a : kAliases) out.emplace_back(a.alias, a.name);
  return out;
}

}  // namespace tw::target
