// Runs the simulator's data effects (Machine::functional) on worker threads while the calling
// thread goes on scheduling, timing and checking. The results are the bits of running every
// data effect on the calling thread in the scheduler's order:
//   - each core's data effects run in order on one worker (core index mod workers): a core's own
//     memories (L1, L0A/B/C, UB) are touched by that worker only;
//   - GM (tensors and the workspace) is shared: before an instruction that touches GM is queued,
//     the queued instructions of the other workers whose GM bytes overlap it (one of the two
//     writing) are waited for, so every pair of conflicting accesses keeps the scheduler's order.
// Nothing the scheduler, the timing model or the checker decides reads data, so they never wait
// for the workers except through that rule and the queue bound.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "target/ascend/simulator/machine.h"

namespace tw::ascend::sim {

class FunctionalQueue {
 public:
  FunctionalQueue(Machine& m, int workers);
  ~FunctionalQueue();  // stops the workers (pending work is dropped: only after an error)
  FunctionalQueue(const FunctionalQueue&) = delete;
  FunctionalQueue& operator=(const FunctionalQueue&) = delete;

  // Queues r's data effect; `acc` is its access list (Machine::accesses).
  void submit(Core& c, const RInstr& r, const std::vector<Machine::Access>& acc);
  // Waits until every queued data effect ran; rethrows a worker's exception.
  void drain();

 private:
  struct Item { Core* core; RInstr r; uint64_t seq; };
  struct GmRange { uint64_t seq; int space; int64_t lo, hi; bool write; };
  struct Worker {
    std::thread thread;
    std::mutex mu;
    std::condition_variable work, done_cv;
    std::deque<Item> queue;
    uint64_t submitted = 0, done = 0;  // done: the seq of the last data effect that ran
    std::exception_ptr error;
    std::deque<GmRange> gm;            // GM ranges of its queued effects (calling thread only)
  };
  void loop(Worker& w);
  void wait_done(Worker& w, uint64_t seq);

  Machine& m_;
  int gm_spaces_;
  bool stop_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace tw::ascend::sim
