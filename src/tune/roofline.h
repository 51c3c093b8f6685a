// The roofline model of a kernel: the work it does (flops of its gemm tile ops) and the bytes its
// tile copies move to and from global memory, counted over its loops and launch grid; and where a
// time falls against a machine's peaks. The autotuner uses it to prune configurations whose
// lower bound is far from the best one's before timing them, and to report the winner.
#pragma once

#include <cstdint>
#include <optional>

#include "tilewright/ir.h"

namespace tw::tune {

struct Work {
  double flops = 0;             // 2*m*n*k per gemm tile op, times its trip count
  double global_bytes = 0;      // bytes of tile copies (and element stores) from/to global tensors
  double compulsory_bytes = 0;  // every tensor parameter read or written once (the least traffic)
};

// Counts the work of `kernel` (the IR after a target's pipeline, with its launch grid). nullopt
// when a loop extent, a region extent or the grid is not a compile-time constant.
std::optional<Work> estimate_work(const ir::Kernel& kernel);

// Lower bound on the run time in seconds: max(flops / peak_flops, compulsory_bytes / memory_bw,
// global_bytes / cache_bw). Tile copies re-read data that caches (the CPU's, the 910B's L2) keep,
// so their traffic is bounded by the cache's bandwidth; pass cache_bw = 0 to leave that term out.
double roofline_seconds(const Work& w, double peak_flops, double memory_bw, double cache_bw);

}  // namespace tw::tune
