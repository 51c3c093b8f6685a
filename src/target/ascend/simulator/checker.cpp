#include "target/ascend/simulator/checker.h"

#include <algorithm>

#include "target/ascend/program_printer.h"

namespace tw::ascend::sim {

Checker::Checker(Machine& m) : m_(m) {
  T_ = static_cast<int>(m.cores.size()) * kThreads;
  vcs_.assign(static_cast<size_t>(T_) * T_, 0);
  clock_.assign(T_, 0);
  s_version_.assign(m.cores.size(), 0);
  s_cur_.assign(m.cores.size(), -1);
  shadow_.resize(m.num_spaces());
  records_.push_back({nullptr, 0, 0});  // uid 0 = none
}

uint32_t Checker::record(const Core& c, const Instr* in, int64_t cycle) {
  records_.push_back({in, c.index, cycle});
  return static_cast<uint32_t>(records_.size() - 1);
}

ReportInstr Checker::describe(uint32_t uid) const {
  const Record& r = records_[uid];
  return m_.describe(m_.cores[r.core], r.in, r.cycle);
}

void Checker::begin(Core& c, Pipe p) { cur_clk_ = ++clock_[tid(c, p)]; }

int Checker::hold_s(Core& c) {
  int& cur = s_cur_[c.index];
  if (cur >= 0 && ssnaps_[cur].version == s_version_[c.index]) {
    ++ssnaps_[cur].refs;
    return cur;
  }
  if (cur >= 0) release_s(cur);  // S's clock changed since: the queued instructions keep theirs
  if (free_ssnaps_.empty()) {
    cur = static_cast<int>(ssnaps_.size());
    ssnaps_.emplace_back();
  } else {
    cur = free_ssnaps_.back();
    free_ssnaps_.pop_back();
  }
  SSnap& sn = ssnaps_[cur];
  const uint32_t* s = vc(tid(c, Pipe::S));
  sn.vc.assign(s, s + T_);
  sn.version = s_version_[c.index];
  sn.refs = 2;  // s_cur_ and the caller
  return cur;
}

void Checker::release_s(int id) {
  if (--ssnaps_[id].refs == 0) free_ssnaps_.push_back(id);
}

void Checker::join_issue(Core& c, RInstr& r) {
  if (r.s_snap == RInstr::kSJoined) return;
  int p = static_cast<int>(r.pipe);
  if (p > 0 && p < kNumPipes) {  // S knows itself; PIPE_ALL runs on S
    const uint32_t* s = r.s_snap >= 0 ? ssnaps_[r.s_snap].vc.data() : vc(tid(c, Pipe::S));
    uint32_t version = r.s_snap >= 0 ? ssnaps_[r.s_snap].version : s_version_[c.index];
    PipeState& ps = c.pipes[p];
    if (version > ps.s_version) {  // one pipe runs its instructions in issue order: versions only grow
      ps.s_version = version;
      uint32_t* d = vc(tid(c, r.pipe));
      for (int i = 0; i < T_; ++i) d[i] = std::max(d[i], s[i]);
    }
  }
  if (r.s_snap >= 0) release_s(r.s_snap);
  r.s_snap = RInstr::kSJoined;
}

void Checker::s_advanced(Core& c) { ++s_version_[c.index]; }

std::pair<int, uint32_t> Checker::tick(Core& c, Pipe p) {
  begin(c, p);
  int t = tid(c, p);
  return {t, clock_[t]};
}

bool Checker::knows(Core& c, Pipe p, int t, uint32_t clk) const {
  int me = tid(c, p);
  return me == t || clk <= vc(me)[t];  // the same pipe: the set queues behind the wait
}

std::pair<int, uint32_t> Checker::scalar_wait(Core& c) {
  int w = c.index * kThreads + kNumPipes;
  uint32_t clk = ++clock_[w];
  vc(tid(c, Pipe::S))[w] = clk;
  s_advanced(c);
  return {w, clk};
}

int Checker::new_snapshot() {
  if (free_snaps_.empty()) {
    snaps_.emplace_back();
    return static_cast<int>(snaps_.size()) - 1;
  }
  int id = free_snaps_.back();
  free_snaps_.pop_back();
  return id;
}

int Checker::snapshot(Core& c, Pipe p) {
  int t = tid(c, p);
  int id = new_snapshot();
  snaps_[id].assign(vc(t), vc(t) + T_);
  snaps_[id][t] = clock_[t];  // everything earlier on p is complete when the flag is set
  return id;
}

int Checker::join_snapshots(int a, int b) {
  for (int i = 0; i < T_; ++i) snaps_[a][i] = std::max(snaps_[a][i], snaps_[b][i]);
  free_snaps_.push_back(b);
  return a;
}

int Checker::clone(int snap) {
  if (snap < 0) return -1;
  int id = new_snapshot();
  snaps_[id] = snaps_[snap];
  return id;
}

void Checker::acquire(Core& c, Pipe p, int snap) {
  if (snap < 0) return;
  uint32_t* d = vc(tid(c, p));
  const auto& s = snaps_[snap];
  for (int i = 0; i < T_; ++i) d[i] = std::max(d[i], s[i]);
  free_snaps_.push_back(snap);
  if (p == Pipe::S) s_advanced(c);
}

void Checker::barrier(Core& c, Pipe p) {
  int t = tid(c, p);
  vc(t)[t] = clock_[t];
  if (p == Pipe::S) s_advanced(c);  // PipeBarrier<PIPE_S>: later issues know S's earlier work
}

void Checker::barrier_all(Core& c) {
  std::vector<uint32_t> j(T_, 0);
  for (int p = 0; p < kNumPipes; ++p) {
    int t = tid(c, static_cast<Pipe>(p));
    const uint32_t* v = vc(t);
    for (int i = 0; i < T_; ++i) j[i] = std::max(j[i], v[i]);
    j[t] = std::max(j[t], clock_[t]);
  }
  for (int p = 0; p < kNumPipes; ++p) std::copy(j.begin(), j.end(), vc(tid(c, static_cast<Pipe>(p))));
  s_advanced(c);
}

bool Checker::ordered(const Epoch& prev, int t) const {
  if (static_cast<int>(prev.tid) == t) {
    Pipe p = static_cast<Pipe>(t % kThreads);
    if (p == Pipe::M || p == Pipe::S) return true;  // in-order pipes (see checker.h)
    return prev.clk <= vc(t)[t];
  }
  return prev.clk <= vc(t)[prev.tid];
}

void Checker::conflict(Core& c, Pipe p, uint32_t uid, const Epoch& prev, bool prev_write, bool write, int space,
                       int64_t a, int64_t b) {
  int t = tid(c, p);
  bool same = static_cast<int>(prev.tid) == t;
  const Record& pr = records_[prev.uid];
  const Record& cr = records_[uid];
  uint64_t key = (reinterpret_cast<uintptr_t>(pr.in) * 1000003u) ^ reinterpret_cast<uintptr_t>(cr.in) ^ (same ? 7u : 0u);
  Pipe pp = static_cast<Pipe>(prev.tid % kThreads);
  const Core& pc = m_.cores[prev.tid / kThreads];
  std::string what = std::string(write ? "writes" : "reads") + " " + m_.space_name(space) + " bytes [" +
                     std::to_string(a) + ", " + std::to_string(b) + ")";
  std::string prevw = prev_write ? "written" : "read";
  if (same) {
    std::string msg = std::string(pipe_name(p)) + " instruction " + what + " " + prevw +
                      " by an earlier instruction of the same pipe; instructions of one pipe may overlap: add "
                      "PipeBarrier<PIPE_" + std::string(pipe_name(p)) + "> between them";
    m_.report(ReportKind::SamePipeHazard, msg, {describe(uid), describe(prev.uid)});
  } else {
    std::string hint;
    if (pc.index == c.index)
      hint = "add SetFlag<" + std::string(pipe_name(pp)) + "_" + std::string(pipe_name(p)) + "> after the first and WaitFlag<" +
             std::string(pipe_name(pp)) + "_" + std::string(pipe_name(p)) + "> before the second";
    else
      hint = "order them with CrossCoreSetFlag/CrossCoreWaitFlag";
    std::string msg = "data race: " + std::string(pipe_name(p)) + " on " + c.name + " " + what + " " + prevw +
                      " by " + std::string(pipe_name(pp)) + " on " + pc.name +
                      " with nothing ordering them (no flag, barrier or cross-core flag): " + hint;
    m_.report(ReportKind::Race, msg, {describe(uid), describe(prev.uid)});
  }
  (void)key;
}

void Checker::access_range(Core& c, Pipe p, uint32_t uid, int space, int64_t a, int64_t b, bool write, bool atomic) {
  if (a >= b) return;
  Shadow& s = shadow_[space];
  int t = tid(c, p);
  Epoch cur{static_cast<uint32_t>(t), cur_clk_, uid};
  // One search: the first segment at or after a, the segment across a split there; the segment
  // across b is split when the walk reaches it (the same segments as splitting at a and b first).
  auto it = s.upper_bound(a);
  if (it != s.begin()) {
    auto prev = std::prev(it);
    if (prev->first == a) {
      it = prev;
    } else if (prev->second.end > a) {
      Seg tail = prev->second;
      prev->second.end = a;
      it = s.emplace_hint(it, a, std::move(tail));
    }
  }
  // check and update every segment in [a, b), filling gaps
  int64_t pos = a;
  bool reported = false;
  thread_local std::vector<std::pair<int64_t, int64_t>> gaps;
  gaps.clear();
  while (it != s.end() && it->first < b) {
    if (it->first > pos) gaps.emplace_back(pos, it->first);
    if (it->second.end > b) {
      Seg tail = it->second;
      it->second.end = b;
      s.emplace_hint(std::next(it), b, std::move(tail));
    }
    Seg& g = it->second;
    if (!reported) {
      // One report per access: the unordered earlier write, else an unordered earlier read (a write).
      // A write whose only unordered write is its own pipe's (a same-pipe hazard) reports another
      // pipe's unordered read of the bytes first: that read followed the earlier write, so the flag
      // that orders this write after the read orders it after both (a PipeBarrier would not: L0
      // reloaded while the Mmad still reads it names M -> MTE1, session 21 hunt F1).
      const Epoch* hit = g.has_w && g.w.uid != uid && !ordered(g.w, t) ? &g.w : nullptr;
      bool hit_write = hit != nullptr;
      if (write && (!hit || static_cast<int>(hit->tid) == t))
        for (const Epoch& r : g.r)
          if (r.uid != uid && !ordered(r, t) && (!hit || static_cast<int>(r.tid) != t)) {
            hit = &r;
            hit_write = false;
            break;
          }
      if (hit) {
        conflict(c, p, uid, *hit, hit_write, write, space, std::max(a, it->first), std::min(b, g.end));
        reported = true;
      }
      if (!reported && !atomic)
        for (const Epoch& w : g.aw)
          if (w.uid != uid && !ordered(w, t)) {
            conflict(c, p, uid, w, true, write, space, std::max(a, it->first), std::min(b, g.end));
            reported = true;
            break;
          }
    }
    pos = g.end;
    if (atomic) {
      bool found = false;
      for (Epoch& w : g.aw)
        if (w.tid == cur.tid) {
          w = cur;
          found = true;
        }
      if (!found) g.aw.push_back(cur);
      ++it;
    } else if (!write) {
      bool found = false;
      for (Epoch& r : g.r)
        if (r.tid == cur.tid) {
          r = cur;
          found = true;
        }
      if (!found) g.r.push_back(cur);
      ++it;
    } else {
      it = s.erase(it);
    }
  }
  if (pos < b) gaps.emplace_back(pos, b);
  if (atomic) {
    for (auto [x, y] : gaps) s.emplace(x, Seg{y, Epoch{}, false, {}, {cur}});
  } else if (write) {
    s.emplace(a, Seg{b, cur, true, {}, {}});
  } else {
    for (auto [x, y] : gaps) s.emplace(x, Seg{y, Epoch{}, false, {cur}, {}});
  }
}

void Checker::access(Core& c, Pipe p, uint32_t uid, const Machine::Access& a) {
  const Rect& r = a.rect;
  if (r.rows <= 0 || r.row_bytes <= 0) return;
  if (r.rows == 1 || r.stride == r.row_bytes) {
    access_range(c, p, uid, a.space, r.start, r.start + (r.rows - 1) * r.stride + r.row_bytes, a.write, a.atomic);
    return;
  }
  for (int64_t i = 0; i < r.rows; ++i)
    access_range(c, p, uid, a.space, r.start + i * r.stride, r.start + i * r.stride + r.row_bytes, a.write, a.atomic);
}

}  // namespace tw::ascend::sim
