#include "target/ascend/simulator/functional_queue.h"

#include <algorithm>
#include <utility>

namespace tw::ascend::sim {

namespace {
// Queued data effects per worker before the calling thread waits (bounds memory and the GM scan).
constexpr uint64_t kMaxQueued = 512;
// The lowest and highest byte + 1 of a rectangle (a negative row stride walks downwards).
std::pair<int64_t, int64_t> extent(const Rect& q) {
  if (q.rows > 1 && q.stride < 0) return {q.start + (q.rows - 1) * q.stride, q.start + q.row_bytes};
  return {q.start, q.end()};
}
}  // namespace

FunctionalQueue::FunctionalQueue(Machine& m, int workers)
    : m_(m), gm_spaces_(static_cast<int>(m.prog.params.size()) + 1) {
  for (int i = 0; i < workers; ++i) workers_.push_back(std::make_unique<Worker>());
  for (auto& w : workers_) w->thread = std::thread([this, p = w.get()] { loop(*p); });
}

FunctionalQueue::~FunctionalQueue() {
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lk(w->mu);
    stop_ = true;
    w->queue.clear();
  }
  for (auto& w : workers_) {
    w->work.notify_all();
    w->thread.join();
  }
}

void FunctionalQueue::loop(Worker& w) {
  while (true) {
    Item it;
    {
      std::unique_lock<std::mutex> lk(w.mu);
      w.work.wait(lk, [&] { return stop_ || !w.queue.empty(); });
      if (w.queue.empty()) return;  // stopped
      it = std::move(w.queue.front());
      w.queue.pop_front();
    }
    try {
      if (!w.error) m_.functional(*it.core, it.r);
    } catch (...) {
      w.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(w.mu);
      w.done = it.seq;
    }
    w.done_cv.notify_all();
  }
}

void FunctionalQueue::wait_done(Worker& w, uint64_t seq) {
  std::unique_lock<std::mutex> lk(w.mu);
  w.done_cv.wait(lk, [&] { return w.done >= seq; });
}

void FunctionalQueue::submit(Core& c, const RInstr& r, const std::vector<Machine::Access>& acc) {
  const size_t me = static_cast<size_t>(c.index) % workers_.size();
  // GM conflicts with the other workers' queued effects: wait for the last conflicting one
  for (const auto& a : acc) {
    if (a.space >= gm_spaces_ || a.rect.rows <= 0 || a.rect.row_bytes <= 0) continue;
    const auto [lo, hi] = extent(a.rect);
    for (size_t o = 0; o < workers_.size(); ++o) {
      if (o == me) continue;
      Worker& w = *workers_[o];
      uint64_t done;
      {
        std::lock_guard<std::mutex> lk(w.mu);
        done = w.done;
      }
      while (!w.gm.empty() && w.gm.front().seq <= done) w.gm.pop_front();
      uint64_t last = 0;
      for (const GmRange& g : w.gm)
        if (g.space == a.space && g.lo < hi && lo < g.hi && (g.write || a.write)) last = std::max(last, g.seq);
      if (last > done) wait_done(w, last);
    }
  }
  Worker& w = *workers_[me];
  uint64_t seq;
  {
    std::unique_lock<std::mutex> lk(w.mu);
    if (w.submitted - w.done >= kMaxQueued) w.done_cv.wait(lk, [&] { return w.submitted - w.done < kMaxQueued; });
    seq = ++w.submitted;
    w.queue.push_back(Item{&c, r, seq});
  }
  w.work.notify_one();
  for (const auto& a : acc) {
    if (a.space >= gm_spaces_ || a.rect.rows <= 0 || a.rect.row_bytes <= 0) continue;
    const auto [lo, hi] = extent(a.rect);
    w.gm.push_back(GmRange{seq, a.space, lo, hi, a.write});
  }
}

void FunctionalQueue::drain() {
  for (auto& w : workers_) {
    uint64_t n;
    {
      std::lock_guard<std::mutex> lk(w->mu);
      n = w->submitted;
    }
    wait_done(*w, n);
    w->gm.clear();
    if (w->error) std::rethrow_exception(w->error);
  }
}

}  // namespace tw::ascend::sim
