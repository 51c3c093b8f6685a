// The one table of compilation targets and their parameters.
#pragma once

#include <string>
#include <string_view>
#include <utility>
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

  // --- Simulator cost model (src/target/ascend/simulator/timing.*). Sources: ascend-910b.md;
  // "assumed" = not published, chosen to be plausible; change here only.
  // Cube: Mmad occupies M for overhead + ceil(m/16)*ceil(n/16)*ceil(k/k0) cycles (ascend-910b.md
  // "Cube"); its result is ready mmad_latency cycles later. Fitted to the published example
  // (fp16 m=128 n=256 k=512 in 8 Mmads: 4096 cycles of MACs, "4156 in theory" => 60 cycles of
  // pipeline latency; measured 4209-4225 => ~8 cycles of issue overhead per Mmad: 8*(512+8)+60 = 4220).
  int mmad_overhead_cycles = 8;
  int mmad_latency_cycles = 60;
  // Data moves: cycles = overhead + bytes / bytes_per_cycle (ascend-910b.md "Pipes and data paths").
  double l1_to_l0a_bytes_per_cycle = 256;  // docs; CANN config file says 512 (uncertain)
  double l1_to_l0b_bytes_per_cycle = 128;  // docs; CANN config file says 256 (uncertain)
  double fixpipe_bytes_per_cycle = 128;    // docs: L0C->L1 via FixPipe, fp32->fp16 (output bytes)
  double gm_read_bytes_per_cycle = 110;    // per core, MTE2 from GM: CANN config "L2 read 110" (units uncertain)
  double gm_write_bytes_per_cycle = 86;    // per core, FIX to GM: CANN config "L2 write 86" (units uncertain)
  double ub_to_gm_bytes_per_cycle = 64;    // per core, MTE3: CANN config "UB->GM 64" (units uncertain)
  double ub_to_ub_bytes_per_cycle = 256;   // assumed: one 256 B vector repeat per cycle
  int move_overhead_cycles = 24;           // assumed: per-instruction setup of an MTE/FIX move
  int local_move_overhead_cycles = 8;      // assumed: L1->L0 per stream of back-to-back LoadData calls
  double init_const_bytes_per_cycle = 256;  // assumed: InitConstValue fill of L1 (MTE2)
  int gm_latency_cycles = 300;             // assumed: GM access latency (not occupying the pipe)
  // GM: every byte moved to or from GM costs L2 bandwidth (l2_tbps, shared by all cores); a read
  // of a line that is not resident in L2 also costs HBM bandwidth (hbm_tbps, shared by all cores)
  // for the whole line, and every written byte is written back to HBM (simulator/l2_model.h).
  // Residency: lines of l2_line_bytes, up to l2_mib of them, least recently used evicted first.
  int l2_line_bytes = 512;                 // not published: assumed = the GM access granularity the
                                           // AscendC docs advise aligning moves to (512 B, ascend-910b.md)
  int gm_bandwidth_bucket_cycles = 256;    // simulation granularity of bandwidth sharing (not a chip figure)
  // Kernel start. Neither figure is published for the 910B (docs/performance.md "Simulator
  // calibration" shows the fit and the residuals).
  double launch_overhead_us = 10.0;        // calibrated: fitted to torch_npu gemm 1024^3 fp16 at 28% of peak
                                           // (launch until the first core starts; also 2048^3 at 71%)
  int block_start_cycles = 500;            // assumed: each block's start on its core (arguments, scalar
                                           // set-up); the gemm curve cannot separate it from the launch
  // Vector (per AIV, ascend-910b.md "Vector", A2/A3 throughput tables).
  double vec_bytes_per_cycle = 256;        // Add/Sub/Mul/Max/Min/Adds/Muls/Abs/Relu/Reciprocal/Rsqrt/Duplicate: 128 fp16 / 64 fp32
  double vec_transcendental_elems_per_cycle = 32;  // Exp, Ln, Sqrt, Div
  double vec_cast_elems_per_cycle = 64;    // Cast (32-bit)
  double vec_reduce_cycles_per_repeat = 7; // WholeReduce: 128 fp16 / 64 fp32 per 7 cycles
  double vec_gather_elems_per_cycle = 5;   // Gather (A2/A3 throughput table, ascend-910b.md "Vector")
  int vec_overhead_cycles = 6;             // assumed: per vector instruction issue/drain
  // Scalar unit and queues.
  int scalar_issue_cycles = 1;             // assumed: scalar cycles to issue one instruction
  // GlobalTensor::GetValue: the scalar unit reads GM through its per-core DataCache (64 B lines,
  // GlobalTensor docs); a read of a cached line costs the hit figure, a miss gm_latency_cycles.
  int scalar_dcache_line_bytes = 64;       // docs (Scalar读写数据 guide)
  int scalar_dcache_hit_cycles = 4;        // assumed: a scalar load that hits the DataCache
  // LocalTensor::GetValue / SetValue: one UB element read or written by the scalar unit. Not
  // published (the SetValue docs only warn that bulk use is slow); assumed equal to a DataCache hit.
  int scalar_ub_access_cycles = 4;         // assumed
  int pipe_queue_depth = 32;               // assumed: instructions a pipe queue holds before the scalar stalls
  int flag_latency_cycles = 2;             // assumed: SetFlag -> WaitFlag release
  int cross_flag_latency_cycles = 50;      // assumed: CrossCoreSetFlag -> waiting core
  int flag_event_ids = 8;                  // SetFlag/WaitFlag event ids 0..7 (docs)
  int cross_flag_ids = 11;                 // cross-core flag ids 0..10 on A2/A3 (CrossCoreSetFlag docs)
  int cross_flag_max_pending = 15;         // counter saturates: more unconsumed sets hang (docs)
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
// Names are case-insensitive (CANN writes Ascend910B2); an unknown name suggests the closest one.
const Target& find_target(std::string_view name);
// (alias, target name) pairs.
std::vector<std::pair<std::string, std::string>> target_aliases();
// "cpu, ascend910b1, ... (alias ascend910b -> ascend910b2)"
std::string target_names();

}  // namespace tw::target
