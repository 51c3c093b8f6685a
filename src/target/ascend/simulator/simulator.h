// The Ascend 910B simulator: runs an Ascend program on a chosen chip, functionally (exact to the
// documented semantics) and with a timing model, and checks it (happens-before races, bounds,
// alignment, capacity, flag misuse, deadlock, never-written on-chip bytes reaching GM, output elements
// nothing wrote). See
// ascend-910b.md for the facts and target/registry.h (AscendParams) for every number of the cost
// model.
//
// Structure (one concern per file):
//   machine.*     core/pipe/flag state, the program interpreter and the scheduler
//   functional.*  data semantics of each instruction (layouts, conversions, arithmetic)
//   timing.*      per-instruction costs and the shared GM bandwidth model
//   checker.*     vector clocks, shadow memory intervals, reports
//   written.*     the written state of on-chip bytes (unwritten bytes reaching GM or a scalar)
//   trace.*       Chrome/Perfetto trace JSON and the text summary
//   numeric.h     fp16/bf16 conversions and rounding modes
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "target/ascend/program.h"
#include "target/registry.h"

namespace tw::ascend::sim {

// One argument per Program::params entry (same order): tensors give their host bytes (read and
// written in place), scalars their value.
struct Arg {
  uint8_t* data = nullptr;
  int64_t bytes = 0;
  double scalar = 0;
  std::optional<int64_t> int_scalar;  // an integer argument exactly (a double rounds past 2^53: hunt31 F3)
};

struct Options {
  bool functional = true;   // false: timing-only (no data is read or written)
  bool check = true;        // happens-before and memory checks
  bool trace = false;       // record per-instruction slices for the Chrome trace
  int max_reports = 64;     // reports beyond this are counted, not stored
  // Threads for a functional run, the calling one included: 0 = TW_NUM_THREADS (default: the
  // CPUs); 1 = every data effect on the calling thread. The results are the same bits for any
  // count (functional_queue.h).
  int threads = 0;
  // Polled between the scheduler's rounds (every 1024 simulated cycles of each core): once it is
  // true, run() stops and throws ir::Error. The output tensors then hold whatever the simulated
  // instructions had written so far (partial: not a result). Null: never cancelled.
  const std::atomic<bool>* cancel = nullptr;
};

enum class ReportKind : uint8_t {
  Race,               // conflicting accesses on different pipes/cores not ordered by flags
  SamePipeHazard,     // dependent accesses on one pipe without PipeBarrier
  OutOfBounds,        // GM outside its tensor, or on-chip outside its buffer/memory
  Misaligned,         // address/stride alignment of the memory
  Capacity,           // buffer larger than the memory
  IllegalFlagPair,    // SetFlag/WaitFlag pipe pair not in the docs' table
  FlagIdOutOfRange,   // event id outside 0..7 / cross id outside 0..10
  FlagSetTwice,       // SetFlag again before the matching WaitFlag
  UnmatchedSetFlag,   // flag still set when the kernel ends
  CrossFlagOverflow,  // more than 15 pending cross-core sets
  Deadlock,           // waits that can never be satisfied
  InvalidInstr,       // instruction not allowed on this core / kernel type, bad operands
  ApiRule,            // the printed AscendC call breaks a documented API rule (api_rules.h)
  IntOverflow,        // int32 arithmetic left int32: vector (dav-c220 does not document the result), or a scalar
                      // +, -, * or unary - the printed C++ computes in int (signed overflow: undefined behaviour)
  StaleDataCache,     // a scalar read of GM bytes a DMA wrote earlier in the run, without DataCacheCleanAndInvalid
  UninitRead,         // on-chip bytes no instruction of the block wrote reach GM or a scalar (written.h)
  NegativeDividend,   // a scalar `//`, `%` or ceildiv the printed C++ computes with C's truncating / and %
                      // (Program::c_divisions) met a negative dividend, where truncation and floor differ
  UnwrittenOutput,    // elements of an output the runtime allocated (out_idx) that no instruction wrote, or an
                      // atomic add into them (written.h)
};
std::string_view report_kind_name(ReportKind k);

struct ReportInstr {
  std::string text;       // printed instruction
  ir::Span span;          // kernel source line
  std::string core;       // "AIC 3", "AIV 7"
  int64_t cycle = 0;      // when it executed (simulated)
};

struct Report {
  ReportKind kind;
  std::string message;
  std::vector<ReportInstr> instrs;  // first = the instruction the report is about
  std::string format() const;       // multi-line, "file:line: kind: message" + instructions
};

struct TraceEvent {
  int core;      // index into Result::core_names
  uint8_t pipe;  // Pipe
  int64_t start, dur;
  const Instr* instr;  // null for waits
};

struct Result {
  int64_t total_cycles = 0;
  double time_us = 0;
  double clock_mhz = 0;
  int blocks = 0;
  KernelType kernel_type = KernelType::AIC_ONLY;
  int aic_used = 0, aiv_used = 0;  // physical cores that ran blocks
  int chip_aic = 0;
  // Busy cycles per pipe summed over the cores of each type, and as % of total * cores used.
  int64_t busy_cycles[2][kNumPipes] = {};
  double busy_pct[2][kNumPipes] = {};
  // Cube utilisation = MAC cycles (ceil(m/16)*ceil(n/16)*ceil(k/k0) per Mmad, no overhead)
  // summed over all AICs / (total_cycles * AICs of the chip): the fraction of the chip's peak
  // Cube throughput achieved. cube_busy is M-pipe busy (incl. overhead) / (total * AICs used).
  double cube_utilisation = 0;
  double cube_busy = 0;
  double flops = 0;       // 2*m*n*k summed over Mmads
  double tflops = 0;      // flops / time
  // Bytes over HBM (timing model): the lines GM reads found missing from L2, plus every byte written.
  double hbm_bytes = 0;
  int64_t instructions = 0;
  std::vector<Report> reports;
  int64_t dropped_reports = 0;
  std::vector<std::string> core_names;
  std::vector<TraceEvent> trace;
  std::shared_ptr<const Program> program;  // a (shallow) copy: keeps the instructions alive

  bool has(ReportKind k) const;
  std::string summary() const;                 // text summary (timing + reports)
  std::string trace_json() const;              // Chrome/Perfetto trace (one track per core x pipe)
  void write_trace(const std::string& path) const;
};

// Runs `program` on `chip`. shape_values binds Program::shape_vars in order.
// Throws ir::Error for malformed programs (wrong argument count, unbound variables).
Result run(const Program& program, const target::AscendParams& chip, std::vector<Arg> args,
           const std::vector<int64_t>& shape_values = {}, const Options& options = {});

}  // namespace tw::ascend::sim
