// Tests of the simulator's L2 residency model (src/target/ascend/simulator/l2_model.h): lines, not
// pages, miss on first touch; the capacity bounds what stays resident; writes allocate.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tw::ascend::sim
