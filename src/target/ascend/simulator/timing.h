// The timing model: per-instruction costs (busy cycles on the pipe + latency until the result is
// visible) from AscendParams, the kernel launch and block start costs, and the GM bandwidth
// shared by all cores: L2 bandwidth for every GM byte, HBM bandwidth for the lines L2Model says
// were not resident and for every written byte.
#pragma once

#include <unordered_map>
#include <vector>

#include "target/ascend/simulator/l2_model.h"
#include "target/ascend/simulator/machine.h"

namespace tw::ascend::sim {

struct Cost {
  int64_t busy = 0;       // cycles the pipe is occupied
  int64_t latency = 0;    // further cycles until the result is complete
  int64_t mac_cycles = 0; // Mmad: cycles of MAC work (for Cube utilisation)
  double flops = 0;
};

class Timing {
 public:
  Timing(Machine& m);
  // Cost of r starting at `start` (reserves GM bandwidth).
  Cost cost(Core& c, const RInstr& r, int64_t start);
  // The cycle at which the first core may start: the kernel launch overhead.
  int64_t launch() const;
  // The cycle at which a block that its core could start at `t` issues its first instruction.
  int64_t block_start(int64_t t) const;
  // The earliest end of the kernel the memory system allows: every bucket's reserved L2 and HBM
  // bytes moved at the full shared rates from the bucket's start (no kernel ends before its
  // transfers drained, so its bytes over HBM never exceed hbm_tbps times its time).
  int64_t drained() const;
  // Bytes read from HBM so far (whole lines missing from L2) and written back to it.
  double hbm_bytes() const { return hbm_bytes_; }

 private:
  // Moves `bytes` over GM starting at t at up to `rate` B/cycle, `hbm` of them (or more: whole
  // lines) also over HBM; returns the end time. No bucket of gm_bandwidth_bucket_cycles carries
  // more than the L2 / HBM bandwidth allows; inside a bucket a transfer runs at its share of it.
  int64_t gm_transfer(int64_t t, double bytes, double hbm, double rate);
  Machine& m_;
  const target::AscendParams& p_;
  double l2_per_bucket_, hbm_per_bucket_;
  std::vector<double> l2_used_, hbm_used_;
  L2Model l2_;
  double hbm_bytes_ = 0;
  double drained_ = 0;
  // Per core: when its last LoadData (2D) ends. A LoadData that starts right then continues the
  // same stream of fractal loads (the per-fractal-row calls of one L1 -> L0 move) and pays no
  // setup (local_move_overhead_cycles is per stream, as calibrated).
  std::unordered_map<int, int64_t> load2d_end_;
};

}  // namespace tw::ascend::sim
