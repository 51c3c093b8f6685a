// Tests of the simulator's L2 residency model (src/target/ascend/simulator/l2_model.h): lines, not
// pages, miss on first touch; the capacity bounds what stays resident; writes allocate; hits
// refresh the LRU order; and the model agrees with a line-by-line reference on random accesses.
#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <random>
#include <set>
#include <string>

#include "target/ascend/simulator/l2_model.h"

namespace tw::ascend::sim {
namespace {

constexpr int64_t kLine = 512;
constexpr int64_t kSpace = int64_t{1} << 30;  // bytes of the GM tensor the rects lie in

Rect row(int64_t start, int64_t bytes) { return Rect{start, 1, bytes, bytes}; }

TEST(L2Model, FirstTouchMissesOnlyTheLinesItTouches) {
  L2Model l2(1 << 20, kLine);
  // 64 B inside one line: the whole line comes from HBM, nothing more (the old model made a
  // whole 64 KiB page resident here, so the next 127 lines "hit")
  EXPECT_EQ(l2.read(0, row(100, 64), kSpace), kLine);
  EXPECT_EQ(l2.read(0, row(0, kLine), kSpace), 0);             // the same line: a hit
  EXPECT_EQ(l2.read(0, row(kLine, 4 * kLine), kSpace), 4 * kLine);  // the next 4 lines: all miss
  EXPECT_EQ(l2.read(0, row(0, 5 * kLine), kSpace), 0);
  EXPECT_EQ(l2.read(1, row(0, kLine), kSpace), kLine);         // another tensor: its own lines
  EXPECT_EQ(l2.resident_bytes(), 6 * kLine);
}

TEST(L2Model, StridedRowsMissEachOfTheirLinesOnce) {
  L2Model l2(1 << 20, kLine);
  // 8 rows of 128 B, 4 KiB apart: 8 lines, not the 32 KiB they span
  EXPECT_EQ(l2.read(0, Rect{0, 8, 128, 4096}, kSpace), 8 * kLine);
  // rows 256 B apart share lines: 16 rows of 64 B over 8 lines
  EXPECT_EQ(l2.read(2, Rect{0, 16, 64, 256}, kSpace), 8 * kLine);
  // the column next to the first: same lines, all hits
  EXPECT_EQ(l2.read(0, Rect{128, 8, 128, 4096}, kSpace), 0);
}

TEST(L2Model, AWorkingSetBeyondCapacityKeepsMissing) {
  const int64_t cap = 64 * 1024;
  L2Model l2(cap, kLine);
  // half the capacity: the second pass hits entirely
  EXPECT_EQ(l2.read(0, row(0, cap / 2), kSpace), cap / 2);
  EXPECT_EQ(l2.read(0, row(0, cap / 2), kSpace), 0);
  // twice the capacity, streamed twice: LRU evicts each line before it is read again
  L2Model big(cap, kLine);
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t off = 0; off < 2 * cap; off += 4096)
      EXPECT_EQ(big.read(0, row(off, 4096), kSpace), 4096) << "pass " << pass << " offset " << off;
  EXPECT_LE(big.resident_bytes(), cap);
}

TEST(L2Model, WritesAllocateLinesThatLaterReadsHit) {
  L2Model l2(1 << 20, kLine);
  l2.write(3, row(0, 8 * kLine), kSpace);  // a workspace the Cube core wrote
  EXPECT_EQ(l2.read(3, row(0, 8 * kLine), kSpace), 0);
  EXPECT_EQ(l2.read(3, row(8 * kLine, kLine), kSpace), kLine);
}

TEST(L2Model, BytesOutsideTheTensorAreNotCounted) {
  L2Model l2(1 << 20, kLine);
  EXPECT_EQ(l2.read(0, row(-1024, 1024 + 10), 4096), kLine);  // only [0, 10) lies in the tensor
  EXPECT_EQ(l2.read(0, row(4000, 4096), 4096), kLine);        // only [4000, 4096)
  EXPECT_EQ(l2.read(0, row(8192, 512), 4096), 0);
}


// Written lines take part in the LRU like read ones: evicted least recently used first, and a
// line written again after its eviction is allocated again (a later read of it hits).
TEST(L2Model, WrittenLinesAreEvictedLikeReadOnes) {
  const int64_t page = 64 * kLine;
  L2Model l2(2 * page, kLine);  // room for two pages
  l2.write(0, row(0, page), kSpace);                      // page 0, written
  EXPECT_EQ(l2.read(0, row(page, page), kSpace), page);   // page 1, read
  EXPECT_EQ(l2.read(0, row(2 * page, page), kSpace), page);  // page 2 evicts page 0, the least recent
  EXPECT_EQ(l2.resident_bytes(), 2 * page);
  l2.write(0, row(0, kLine), kSpace);                     // allocated again: evicts page 1
  EXPECT_EQ(l2.read(0, row(0, kLine), kSpace), 0);
  EXPECT_EQ(l2.read(0, row(kLine, kLine), kSpace), kLine);  // the rest of page 0 went
  EXPECT_EQ(l2.read(0, row(page, kLine), kSpace), kLine);   // page 1 went
  EXPECT_EQ(l2.read(0, row(2 * page, page), kSpace), 0);    // page 2 stayed
  EXPECT_EQ(l2.resident_bytes(), page + 3 * kLine);
}

// ---------------------------------------------------------------------------------------------
// The model against a reference that spells out its rules one line at a time: a line missing
// from L2 costs a whole line from HBM and becomes resident (reads and writes alike); every touch
// of a page (64 lines) makes it the most recently used; after a line is added, whole pages are
// evicted least recently used first (never the page just touched) until the resident lines fit
// the capacity.

namespace reference {

class L2 {
 public:
  L2(int64_t capacity_bytes, int64_t line_bytes) : line_(line_bytes), cap_lines_(std::max<int64_t>(1, capacity_bytes / line_bytes)) {}
  int64_t touch(int space, const Rect& r, int64_t space_bytes) {
    int64_t added = 0;
    if (r.rows <= 0 || r.row_bytes <= 0 || space_bytes <= 0) return 0;
    for (int64_t i = 0; i < r.rows; ++i) {
      int64_t a = std::max<int64_t>(0, r.start + i * r.stride);
      int64_t e = std::min(space_bytes, r.start + i * r.stride + r.row_bytes);
      for (int64_t l = a / line_; a < e && l <= (e - 1) / line_; ++l) {
        Key k{space, l / 64};
        lru_.remove(k);
        lru_.push_front(k);
        if (!pages_[k].insert(l).second) continue;
        ++added;
        ++resident_;
        while (resident_ > cap_lines_ && lru_.back() != k) {
          resident_ -= static_cast<int64_t>(pages_[lru_.back()].size());
          pages_.erase(lru_.back());
          lru_.pop_back();
        }
      }
    }
    return added;
  }
  int64_t resident_bytes() const { return resident_ * line_; }

 private:
  using Key = std::pair<int, int64_t>;  // space, page
  int64_t line_, cap_lines_, resident_ = 0;
  std::map<Key, std::set<int64_t>> pages_;  // resident lines by page
  std::list<Key> lru_;                      // most recently used first
};

}  // namespace reference

// Random reads and writes (fixed seed): strided, overlapping, partly outside the tensor, empty
// (no rows, no bytes), zero and negative strides, in 4 tensors of odd sizes; capacities from one
// line to more than everything touched, with 512 B lines (a power of two) and 96 B lines.
TEST(L2Model, MatchesTheReferenceOnRandomAccesses) {
  for (int64_t line : {int64_t{512}, int64_t{96}}) {
    for (int64_t cap_lines : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{200}, int64_t{1000}, int64_t{100000}}) {
      std::mt19937_64 rng(static_cast<uint64_t>(line * 1000003 + cap_lines));
      auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
      const int64_t sizes[4] = {1, 700, 300 * line + 17, 5000 * line};
      L2Model model(cap_lines * line + uni(0, line - 1), line);
      reference::L2 ref(cap_lines * line + 0, line);
      for (int step = 0; step < 3000; ++step) {
        int space = static_cast<int>(uni(0, 3));
        int64_t size = sizes[space];
        Rect r{uni(-3 * line, size + line), uni(-1, 24), uni(-1, 3 * line), 0};
        int64_t kind = uni(0, 9);
        r.stride = kind == 0 ? 0 : kind == 1 ? -uni(1, 4 * line) : uni(1, 70 * line);
        bool write = uni(0, 3) == 0;
        std::string what = "line " + std::to_string(line) + " capacity " + std::to_string(cap_lines) + " step " +
                           std::to_string(step);
        int64_t want = ref.touch(space, r, size) * line;
        if (write) {
          model.write(space, r, size);
        } else {
          ASSERT_EQ(model.read(space, r, size), want) << what;
        }
        ASSERT_EQ(model.resident_bytes(), ref.resident_bytes()) << what;
      }
    }
  }
}

// A read that hits entirely changes nothing but the LRU order: which page goes first depends on it.
TEST(L2Model, HitsRefreshTheLeastRecentlyUsedOrder) {
  const int64_t page = 64 * kLine;
  L2Model l2(2 * page, kLine);  // room for two pages
  EXPECT_EQ(l2.read(0, row(0, page), kSpace), page);         // page 0
  EXPECT_EQ(l2.read(0, row(page, page), kSpace), page);      // page 1
  EXPECT_EQ(l2.read(0, row(0, kLine), kSpace), 0);           // hit: page 0 is now the most recent
  EXPECT_EQ(l2.read(0, row(2 * page, kLine), kSpace), kLine);  // page 2 evicts page 1, not page 0
  EXPECT_EQ(l2.read(0, row(0, page), kSpace), 0);
  EXPECT_EQ(l2.read(0, row(page, kLine), kSpace), kLine);
  EXPECT_EQ(l2.resident_bytes(), page + 2 * kLine);  // page 0, a line of page 2, a line of page 1
}

}  // namespace
}  // namespace tw::ascend::sim
