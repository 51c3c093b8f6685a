// The L2 residency model of the simulated 910B: which GM bytes are in L2 (so a read of them costs
// L2 bandwidth only) and which must come from HBM. Lines of AscendParams::l2_line_bytes become
// resident when first read or written; the capacity (AscendParams::l2_mib) is counted in
// resident lines; when it is exceeded, the least recently used group of 64 lines (one "page")
// is evicted. So the first touch of every line misses (not of a whole page), and a working set
// larger than the L2 keeps missing.
#pragma once

#include <cstdint>
#include <vector>

#include "target/ascend/simulator/machine.h"

namespace tw::ascend::sim {

class L2Model {
 public:
  L2Model(int64_t capacity_bytes, int64_t line_bytes);
  // Reads `r` (byte offsets within GM address space `space`, clipped to [0, space_bytes)):
  // returns the bytes that came from HBM (whole lines that were not resident) and makes every
  // line of `r` resident and most recently used.
  int64_t read(int space, const Rect& r, int64_t space_bytes);
  // Writes `r`: its lines become resident (write-allocate) and most recently used.
  void write(int space, const Rect& r, int64_t space_bytes);
  int64_t resident_bytes() const { return resident_lines_ * line_; }
  int64_t line_bytes() const { return line_; }

 private:
  static constexpr int kLinesPerPage = 64;  // one bit per line in Page::lines
  static constexpr int32_t kUnlinked = -2;  // Page::prev of a page not in the LRU list
  struct Page {
    uint64_t lines = 0;                           // resident lines of this page
    int32_t prev = kUnlinked, next = kUnlinked;   // LRU neighbours (pool ids); -1: none (head / tail)
  };
  int64_t touch(int space, const Rect& r, int64_t space_bytes);  // lines newly made resident
  uint64_t line_of(int64_t byte) const {  // byte >= 0
    return line_shift_ >= 0 ? static_cast<uint64_t>(byte) >> line_shift_ : static_cast<uint64_t>(byte / line_);
  }
  void apply(std::vector<int32_t>& slots, uint64_t page, uint64_t mask, int64_t& added);
  void make_recent(int32_t id);
  void unlink(Page& p);
  void evict_to_capacity(int32_t keep);
  int64_t line_;
  int line_shift_;  // log2(line_) when line_ is a power of two, else -1
  int64_t capacity_lines_;
  int64_t resident_lines_ = 0;
  std::vector<Page> pool_;
  std::vector<std::vector<int32_t>> slots_;  // [space][page] -> pool id or -1
  int32_t head_ = -1, tail_ = -1;            // most / least recently used
};

}  // namespace tw::ascend::sim
