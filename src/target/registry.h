// The one table of compilation targets and their parameters.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tw::target {

enum class TargetKind { cpu, ascend };

// Parameters of an Ascend 910B chip (facts and sources: shared/ascend-910b.md). Every number the
// Ascend backend and simulator use is a named field here.
struct AscendParams {
  int aic_cores;             // Cube cores
  int aiv_cores;             // Vector cores (2 per AI Core)
  double clock_mhz;          // AI Core clock
  double hbm_gib;            // HBM capacity
  double l2_mib;             // L2 capacity
  double hbm_tbps;           // HBM bandwidth, TB/s (sources 1.5-1.8 for B1-B3; B4 uncertain)
  double l2_tbps;            // L2 bandwidth, TB/s
  int l1_bytes = 524032;     // usable L1 per AIC (512 KiB physical)
  int l0a_bytes = 65536;
  int l0b_bytes = 65536;
  int l0c_bytes = 131072;
  int ub_bytes = 196352;     // usable UB per AIV (192 KiB physical)
  int cube_fp16_macs_per_cycle = 4096;  // 16x16x16
  double peak_fp16_tflops() const { return aic_cores * cube_fp16_macs_per_cycle * 2.0 * clock_mhz * 1e6 / 1e12; }
};

struct Target {
  std::string name;
  TargetKind kind;
  std::string description;
  AscendParams ascend{};  // meaningful for kind == ascend
};

// All targets, in the order shown to users.
const std::vector<Target>& all_targets();
// Resolves a name or alias ("ascend910b" = ascend910b2). Throws ir::Error listing the valid
// names when unknown.
const Target& find_target(std::string_view name);
// "cpu, ascend910b1, ... (alias ascend910b -> ascend910b2)"
std::string target_names();

}  // namespace tw::target
