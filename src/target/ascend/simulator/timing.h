// The timing model: per-instruction costs (busy cycles on the pipe + latency until the result is
// visible) from AscendParams, and the GM bandwidth shared by all cores (HBM for the first touch
// of a page, L2 while it stays resident in an LRU of the L2 capacity).
#pragma once

#include <list>
#include <unordered_map>
#include <vector>

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

 private:
  // Moves `bytes` over GM starting at t at up to `rate` B/cycle; returns the end time.
  int64_t gm_transfer(int64_t t, double bytes, double miss_fraction, double rate);
  double miss_fraction(int space, const Rect& r, bool write);
  Machine& m_;
  const target::AscendParams& p_;
  double l2_per_bucket_, hbm_per_bucket_;
  std::vector<float> l2_used_, hbm_used_;
  // L2 residency LRU over (space, page)
  std::list<uint64_t> lru_;
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> resident_;
  size_t capacity_pages_;
  // Per core: when its last LoadData (2D) ends. A LoadData that starts right then continues the
  // same stream of fractal loads (the per-fractal-row calls of one L1 -> L0 move) and pays no
  // setup (local_move_overhead_cycles is per stream, as calibrated).
  std::unordered_map<int, int64_t> load2d_end_;
};

}  // namespace tw::ascend::sim
