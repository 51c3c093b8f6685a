// A persistent pool of worker threads that runs the grid of a CPU kernel.
//
// parallel_for(n, fn) calls fn(i) once for every i in [0, n) and returns when all calls have
// finished. The calling thread participates. Each thread owns a contiguous share of [0, n)
// (the caller the first) and runs it in order; a thread that finishes its share takes the
// remaining indices of the others one at a time, so uneven blocks balance dynamically. Workers have a 64 MiB stack
// (generated kernels keep tiles on the stack) and sleep on a futex between calls after a
// short spin (~50 µs) that keeps back-to-back launches cheap.
//
// Semantics:
//  - Exceptions: the first exception thrown by fn is rethrown in the caller; once one is
//    thrown no new indices are handed out (calls already running finish).
//  - Interruption: with `interrupt`, the calling thread runs interrupt->poll (which may set
//    interrupt->cancel) about every 50 ms: between the indices it runs, when a ticker thread has
//    said 50 ms have passed (one relaxed load per index, no clock read), and while it waits for
//    the others. Every thread of the pool loads cancel (relaxed) before each index it takes (a
//    caller running alone, only after its own poll); once it is true no new indices are handed
//    out and parallel_for returns when the calls already running have finished.
//  - Nesting: parallel_for called from inside fn (on any pool) runs inline and serially.
//  - Concurrent callers from different threads are serialised (each gets the whole pool).
//  - After fork(), the child process has no workers: every pool runs inline and serially.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace tw::runtime {

class ThreadPool {
public:
    // n = total parallelism including the calling thread (n - 1 workers are started).
    // Throws std::invalid_argument if n < 1, std::runtime_error if a thread cannot start.
    explicit ThreadPool(int n);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const;
    // False in a process forked after the pool started (its workers are in the parent only):
    // parallel_for then runs every index on the caller.
    bool workers_here() const;
    struct Interrupt {
        std::atomic<bool> cancel{false};
        std::function<void()> poll;
    };
    void parallel_for(int64_t n, const std::function<void(int64_t)>& fn, Interrupt* interrupt = nullptr);

    // Stack size of worker threads, in bytes.
    static constexpr size_t kWorkerStackBytes = size_t(64) << 20;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// The process-wide pool, sized by env().num_threads (TW_NUM_THREADS). Created on first use
// and intentionally never destroyed (safe to use from other static destructors). A forked
// child makes its own on first use.
ThreadPool& default_pool();

// True while the current thread is executing inside a parallel_for (worker or caller).
bool in_parallel_region();

}  // namespace tw::runtime
