// The written state of on-chip memory (issue 13, session 30): one byte per byte of each core's L1,
// L0A, L0B, L0C and UB, set once an instruction of the current block wrote it. The chip's on-chip
// memories hold whatever an earlier block or kernel left (machine.h kPoisonByte), so bytes no
// instruction of the block wrote are stale; the rule reports them where they leave the core:
//
//  - a copy into GM (DataCopyPad UB -> GM, its blockLen bytes of each row; Fixpipe L0C -> GM, the
//    mSize x nSize elements it stores) of bytes never written: `uninitialised read`, at the copy's
//    line, naming the tile, the byte range and the element of the copy;
//  - a scalar read (LocalTensor::GetValue) of never-written UB bytes: the same report at the read.
//
// Writers mark exactly the bytes they write (the access lists of Machine::accesses, which the
// functional model writes): DataCopyPad GM -> UB its data and, with isPad, its padding elements
// (not the rest of the 32 B block, which the chip leaves unspecified); Nd2Nz, LoadData, Mmad (the
// whole fractals: m, n rounded up to 16), InitConstValue (not its 8-bit form, which writes
// nothing), vector calls by their masks, repeats and strides, Compare's bits, WholeReduce, Brcb,
// Gather, SetValue. DataCopy UB -> UB copies the source's state (a staged copy of unwritten bytes
// stays unwritten). Compute reads (vector calls, Mmad) of unwritten bytes are not reported: the
// padding lanes of a 32 B block, masked tails and fractal padding are read legitimately and their
// results never stored (docs/ascend.md "Session 30: unwritten tile bytes reaching GM"). A vector
// call's result is written whatever its operands held, except a Cast's: element i of its destination
// has element i of its source's state (a converting T.copy casts into a staging tile first, review30 R1).
//
// The preloaded state (session 38, h-bounds38): a byte of UB holds the preload's when the preload of a map's
// staged stores wrote it (program.h WindowCheck::preload: its copy in and the zero fill of its tail) and no
// other instruction wrote it since; a Select's lane takes the state of the lane it takes (as for written), a
// DataCopy UB -> UB copies it, a Cast's element its source element's, a Mul's / Add's / Sub's lane an operand
// lane's that passes through unchanged: multiplied by 1, added to 0, 0 subtracted from it (int32's `where`
// blends, y * (1 - m) + v * m; int8's wrap of the selected value, v - floor((v + 128) / 256) * 256; session 39),
// any other write clears it. The preload's copy out reports the first element
// of its window outside the tensor that does not hold the preload's: the map stored it (`out of bounds`, as
// cpu under TW_BOUNDS_CHECK=1 reports the store). Functional runs only (a Select's lanes are data).
//
// The outputs (session 39, h-unwritten39; robust38 F7): a tensor the runtime allocated for the kernel (an out_idx
// output, not `zeroed`) holds whatever the memory held, so each of its bytes gets a written byte too, set by
// every instruction that writes GM there (DataCopyPad UB -> GM plain or atomic, Fixpipe, SetValue: the access
// lists), over the whole run (any core, any block). An atomic add into bytes nothing wrote before adds into that
// garbage: `unwritten output` at the copy. When the run ends (finish), the first element of each output some
// byte of which nothing wrote is an `unwritten output` at the kernel's line (runtime/unwritten.h: cpu's checked
// mode reports the same element). Functional runs only: a timing-only run has no data, so a store whose
// place a scalar load of GM decides would be at another place.
//
// The state starts clear at each block (a block that relied on another block's bytes would get
// other data with another block-to-core mapping). Bytes two tiles share (plan_memory's reuse) are
// written by either: a tile that aliases bytes another tile wrote is not reported.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "target/ascend/simulator/machine.h"

namespace tw::ascend::sim {

class Written {
 public:
  explicit Written(Machine& m);
  // A block starts on core c: its memories are unwritten.
  void new_block(const Core& c);
  // The executed instruction r with its (validated) accesses: checks its reads that leave the
  // core, then marks its writes.
  void execute(Core& c, const RInstr& r, const std::vector<Machine::Access>& acc);
  // Unwritten bytes of `space` in rows of rect: how many, and the first one (row, byte) or -1.
  struct Gap {
    int64_t count = 0, row = -1, at = -1, len = 0;  // len: the first unwritten run's bytes
  };
  Gap find(int space, const Rect& rect);
  // The run ended: reports the outputs' elements nothing wrote.
  void finish();

 private:
  uint8_t* map(int space, int64_t end);
  void mark(int space, const Rect& rect);
  // the preloaded state of the bytes of rect: set (on) or cleared; kept(): [a, a + n) all preloaded
  void keep(int space, const Rect& rect, bool on);
  bool kept(int space, int64_t a, int64_t n) const;
  void check_kept(Core& c, const RInstr& r, const RDataCopy& x);
  void report(Core& c, const RInstr& r, std::string msg);
  void output_writes(Core& c, const RInstr& r, const std::vector<Machine::Access>& acc);

  Machine& m_;
  int first_ = 0;                              // the first on-chip space id (machine.h space_id)
  // per on-chip space: a byte is written in this block when it holds the space's generation, which
  // each block start advances (so a new block clears nothing; the map is zeroed once in 255 blocks)
  std::vector<std::vector<uint8_t>> bytes_;
  std::vector<uint8_t> gen_;
  std::vector<std::vector<uint8_t>> kept_;  // the preloaded state, as bytes_ (empty until a preload runs)
  bool any_kept_ = false;
  std::vector<std::vector<uint8_t>> out_;  // per parameter: an output's written bytes (1), empty if not tracked
  std::unordered_set<const Instr*> reported_;  // one report per instruction of the program
  std::unordered_set<const Instr*> atomic_reported_;  // output_writes' atomic adds into unwritten bytes, as reported_
  std::unordered_set<std::string> kept_reported_;  // check_kept's reports, once per text
};

}  // namespace tw::ascend::sim
