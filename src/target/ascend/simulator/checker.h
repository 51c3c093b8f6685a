// The checker: happens-before over (core, pipe) threads with vector clocks, and shadow memory as
// byte intervals per address space (each GM tensor, the workspace, each core's L1/L0A/L0B/L0C/UB).
//
// Edges: SetFlag -> matching WaitFlag; CrossCoreSetFlag -> matching CrossCoreWaitFlag;
// PipeBarrier<X> orders everything earlier on X before everything later on X; PIPE_ALL and a
// block's start order every pipe of the core; the scalar unit (S) orders its waits before every
// later-issued instruction. Instructions of one pipe are NOT ordered by issue order (a later one
// may start before an earlier one finished) except on M (Mmad accumulation chains are kept in
// order by the Cube; documented assumption). A conflicting access (write/any or any/write on
// overlapping bytes) whose previous access is not ordered before it is reported, whatever the
// simulated timing was. Atomic writes (SetAtomicAdd copies into GM) do not conflict with each
// other (the hardware adds them one at a time, in any order); they conflict with unordered plain
// reads and writes of the same bytes.
// Flags (Machine::try_execute, with tick / knows): sets and waits of one flag alternate, so a
// SetFlag whose pipe is not ordered after the WaitFlag that took the flag's previous set may, with
// other timing, set it twice (undefined): reported once per flag, whatever the simulated order.
// Cross-core counters (Machine::cross_set, with scalar_wait / snapshot_knows): a core's counter of
// one id holds at most 15 unconsumed sets, so the n-th set that reaches it must be ordered after
// the CrossCoreWaitFlag that took set n - 15 (a group set: the join of its members' sets); else,
// with a slower consumer, the counter overflows and the chip hangs. Reported once per (core, id).
// A cross-core wait, and a WaitFlag on S, block the scalar unit: its event is a thread of the
// core's own (the scalar unit's waits), which every later-issued instruction of the core knows, so
// that publishing it does not also order the scalar unit's earlier stores.
// Issue time (session 28): the scalar unit issues each instruction into its pipe's queue; what the
// instruction knows from the scalar unit is what S knew when it ISSUED it (a pipe's queue may drain
// long after, and S may have waited for more since), not what S knows when it runs. An instruction
// that runs at issue joins S's clock as it is; one queued behind a wait holds a snapshot of it
// (hold_s), shared by every instruction issued while S's clock does not change, and joins that when
// it runs (join_issue). Everything it learns after issue comes through its own pipe (a WaitFlag, a
// PipeBarrier), like any other instruction.
#pragma once

#include <utility>

#include <map>
#include <vector>

#include "target/ascend/simulator/machine.h"

namespace tw::ascend::sim {

class Checker {
 public:
  explicit Checker(Machine& m);
  // Threads per core: the pipes S..FIX, then the scalar unit's cross-core waits.
  static constexpr int kThreads = kNumPipes + 1;
  int tid(const Core& c, Pipe p) const { return c.index * kThreads + static_cast<int>(p); }
  // Records an executed instruction for reports; returns its uid (>= 1).
  uint32_t record(const Core& c, const Instr* in, int64_t cycle);
  const Core& record_core(uint32_t uid) const { return m_.cores[records_[uid].core]; }
  // An instruction of pipe p runs: ticks p's clock (its event).
  void begin(Core& c, Pipe p);
  // S's clock as the scalar unit issues an instruction that waits in its pipe's queue: a shared,
  // counted snapshot id for RInstr::s_snap.
  int hold_s(Core& c);
  // Before an instruction runs (or its wait is first tried): its pipe joins what S knew when it
  // issued the instruction (r.s_snap: a held snapshot, or kSNow for S's clock as it is now, the
  // instruction having been issued just now); releases the snapshot and marks r joined.
  void join_issue(Core& c, RInstr& r);
  void access(Core& c, Pipe p, uint32_t uid, const Machine::Access& a);
  int snapshot(Core& c, Pipe p);          // release (SetFlag): clock of p with p complete
  int join_snapshots(int a, int b);        // a := a v b (b released); returns a
  int clone(int snap);                     // a copy of snap
  int new_snapshot();                      // a free slot in snaps_ (reused after joins)
  void acquire(Core& c, Pipe p, int snap); // WaitFlag: join and release the snapshot
  void barrier(Core& c, Pipe p);
  void barrier_all(Core& c);
  void s_advanced(Core& c);                // S's clock changed (a new version for later issues)
  ReportInstr describe(uint32_t uid) const;
  // A wait's own event on pipe p: ticks p's clock; returns (thread, clock) for knows().
  std::pair<int, uint32_t> tick(Core& c, Pipe p);
  // Does pipe p of c know (happens-after) event clk of thread t?
  bool knows(Core& c, Pipe p, int t, uint32_t clk) const;
  // A CrossCoreWaitFlag, or a WaitFlag on S, took a set (the scalar unit waited): ticks the core's
  // wait thread and publishes it to S, so every later-issued instruction of the core knows it;
  // returns (thread, clock) for knows() / snapshot_knows().
  std::pair<int, uint32_t> scalar_wait(Core& c);
  // Does a released snapshot (a set's clock) know event clk of thread t?
  bool snapshot_knows(int snap, int t, uint32_t clk) const { return snap >= 0 && clk <= snaps_[snap][t]; }

 private:
  struct Epoch {
    uint32_t tid, clk, uid;
  };
  struct Seg {
    int64_t end;
    Epoch w;
    bool has_w;
    std::vector<Epoch> r;
    std::vector<Epoch> aw;  // atomic writes (SetAtomicAdd) since the last plain write: one per thread
  };
  using Shadow = std::map<int64_t, Seg>;
  struct Record {
    const Instr* in;
    int core;
    int64_t cycle;
  };
  bool ordered(const Epoch& prev, int t) const;
  void conflict(Core& c, Pipe p, uint32_t uid, const Epoch& prev, bool prev_write, bool write, int space,
                int64_t a, int64_t b);
  void access_range(Core& c, Pipe p, uint32_t uid, int space, int64_t a, int64_t b, bool write, bool atomic);
  uint32_t* vc(int t) { return &vcs_[static_cast<size_t>(t) * T_]; }
  const uint32_t* vc(int t) const { return &vcs_[static_cast<size_t>(t) * T_]; }

  Machine& m_;
  int T_;
  std::vector<uint32_t> vcs_, clock_;
  std::vector<uint32_t> s_version_;
  // Snapshots of S's clock held by queued instructions (hold_s / join_issue), counted; s_cur_[core]:
  // the one of S's current version, or -1.
  struct SSnap {
    std::vector<uint32_t> vc;
    uint32_t version = 0;
    int refs = 0;
  };
  void release_s(int id);
  std::vector<SSnap> ssnaps_;
  std::vector<int> free_ssnaps_, s_cur_;
  std::vector<std::vector<uint32_t>> snaps_;
  std::vector<int> free_snaps_;
  std::vector<Shadow> shadow_;
  std::vector<Record> records_;
  uint32_t cur_clk_ = 0;
};

}  // namespace tw::ascend::sim
