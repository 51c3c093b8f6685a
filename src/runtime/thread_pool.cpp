#include "runtime/thread_pool.h"

#include "tilewright/ir.h"
#include "support/env.h"
#include "support/fork.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tw::runtime {
namespace {

thread_local bool t_in_parallel = false;

void futex_wait(std::atomic<uint32_t>* addr, uint32_t expected, const timespec* timeout = nullptr) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, timeout,
            nullptr, 0);
}

void futex_wake_one(std::atomic<uint32_t>* addr) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// How often an interruptible parallel_for polls (ThreadPool::Interrupt).
constexpr timespec kPollPeriod{0, 50 * 1000 * 1000};

// The ticker: a thread that sets g_poll_due every kPollPeriod while interruptible launches happen,
// so that the thread running blocks learns that it is time to poll from one relaxed load, not a
// clock read per block (20-100 ns on a KVM guest). Started by the first interruptible
// parallel_for; asleep (futex) once none has run for a second, woken by the next.
std::atomic<bool> g_poll_due{false};

class Ticker {
 public:
    // Held across an interruptible parallel_for.
    struct Launch {
        Ticker* t;
        Launch() : t(launch_started()) {}
        ~Launch() { t->active_.fetch_sub(1, std::memory_order_relaxed); }
        Launch(const Launch&) = delete;
        Launch& operator=(const Launch&) = delete;
    };

 private:
    static Ticker* launch_started() {
        Ticker* cur = g_ticker.load(std::memory_order_acquire);
        // A forked child's copy has no thread: the child starts its own.
        if (!cur || cur->fork_generation_ != support::fork_generation()) {
            static auto& mu = support::fork_safe_mutex();  // a forked child gets it unlocked
            std::lock_guard<support::ForkSafeMutex> g(mu);
            cur = g_ticker.load(std::memory_order_acquire);
            if (!cur || cur->fork_generation_ != support::fork_generation()) {
                cur = new Ticker();  // never destroyed (its thread may outlive static destructors)
                g_ticker.store(cur, std::memory_order_release);
            }
        }
        cur->active_.fetch_add(1, std::memory_order_relaxed);
        cur->launches_.fetch_add(1);  // seq_cst: before reading asleep_ (see body)
        if (cur->asleep_.load()) {
            cur->asleep_.store(0);
            futex_wake_one(&cur->asleep_);
        }
        return cur;
    }

    static inline std::atomic<Ticker*> g_ticker{nullptr};

    Ticker() : fork_generation_(support::fork_generation()) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, size_t(1) << 20);  // it only sleeps and stores (room for static TLS)
        int rc = pthread_create(&t, &attr, &Ticker::body, this);
        pthread_attr_destroy(&attr);
        if (rc != 0)  // a thread limit: an error, as the pool's
            throw ir::Error("cannot start the thread that times the interrupt checks of kernel launches (" +
                                std::string(std::strerror(rc)) + ")",
                            {}, "raise the process's thread limit (ulimit -u)");
        pthread_detach(t);
    }

    static void* body(void* p) {
        auto* self = static_cast<Ticker*>(p);
        uint64_t seen = self->launches_.load();
        int idle = 0;
        for (;;) {
            nanosleep(&kPollPeriod, nullptr);
            g_poll_due.store(true, std::memory_order_relaxed);
            const uint64_t now = self->launches_.load();
            idle = now == seen && self->active_.load() == 0 ? idle + 1 : 0;
            seen = now;
            if (idle < 20) continue;
            // Asleep until the next launch: it increments launches_ before reading asleep_, this
            // thread stores asleep_ before reading launches_ again (both seq_cst), so one of them
            // sees the other's store and no launch is missed. None is running (active_ was 0 and
            // launches_ has not changed since).
            self->asleep_.store(1);
            if (self->launches_.load() == seen)
                while (self->asleep_.load() == 1) futex_wait(&self->asleep_, 1);
            self->asleep_.store(0);
            seen = self->launches_.load();
            idle = 0;
        }
    }

    const uint64_t fork_generation_;
    std::atomic<uint64_t> launches_{0};  // interruptible parallel_fors started
    std::atomic<uint32_t> active_{0};     // and not ended
    std::atomic<uint32_t> asleep_{0};
};

// Whether the ticker said it is time to poll; clears it.
inline bool poll_due() {
    if (!g_poll_due.load(std::memory_order_relaxed)) return false;
    g_poll_due.store(false, std::memory_order_relaxed);
    return true;
}

void futex_wake_all(std::atomic<uint32_t>* addr) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// How long an idle thread spins before sleeping on the futex.
constexpr auto kSpin = std::chrono::microseconds(50);

// Spins until pred() or the spin budget runs out; returns pred().
template <class Pred>
bool spin_until(Pred pred) {
    auto start = std::chrono::steady_clock::now();
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (pred()) return true;
            cpu_relax();
        }
        if (std::chrono::steady_clock::now() - start > kSpin) return pred();
    }
}

}  // namespace

bool in_parallel_region() { return t_in_parallel; }

// Job protocol. `state` = (generation << 1) | open. The caller fills the job fields, then
// publishes an open state; a worker that sees a new open state registers in `active`, re-reads
// `state` and only runs the job if it is still the same open state. The caller closes the job
// (even state) and waits for `active` to drain, so no worker touches job fields afterwards.
struct ThreadPool::Impl {
    int size = 1;
    std::vector<pthread_t> threads;
    // The process the workers run in (support::fork_generation()): in a forked child they do
    // not exist, and whatever they or a caller held at the fork stays as it was.
    uint64_t fork_generation = support::fork_generation();
    bool forked() const { return fork_generation != support::fork_generation(); }

    std::mutex call_mutex;  // serialises concurrent external callers

    alignas(64) std::atomic<uint32_t> state{0};
    alignas(64) std::atomic<uint32_t> active{0};
    std::atomic<uint32_t> sleepers{0};        // workers asleep (or about to be) on `state`
    std::atomic<uint32_t> caller_waiting{0};  // caller asleep (or about to be) on `active`
    std::atomic<bool> stop{false};

    // Current job (valid while state is open): [0, n) cut into one contiguous range per thread
    // (thread t owns [t*n/size, (t+1)*n/size)). A thread runs its own range in order, then takes
    // the remaining indices of the other ranges one at a time from their fronts, so uneven
    // blocks and late or descheduled threads still balance. Contiguous ownership keeps the
    // blocks that share data on one thread: a gemm grid in row-major order gives each thread
    // whole block rows, so it packs each row of A once and nothing is packed twice.
    struct alignas(64) Range {
        std::atomic<int64_t> next{0};  // grows past end once exhausted (fetch_add by any thread)
        int64_t end = 0;
    };
    std::unique_ptr<Range[]> ranges;
    int64_t n = 0;
    const std::function<void(int64_t)>* fn = nullptr;
    Interrupt* interrupt = nullptr;
    std::atomic<bool> failed{false};
    std::mutex error_mutex;
    std::exception_ptr error;

    void hand_out_no_more() {
        for (int t = 0; t < size; ++t) ranges[t].next.store(ranges[t].end, std::memory_order_relaxed);
    }

    // Runs indices of range `r` until it is exhausted; false if fn threw or the job was cancelled
    // (stop everything).
    bool drain(Range& r, bool self_is_caller) {
        for (;;) {
            int64_t i = r.next.fetch_add(1, std::memory_order_relaxed);
            if (i >= r.end) return true;
            if (interrupt) {
                if (self_is_caller && poll_due()) interrupt->poll();
                if (interrupt->cancel.load(std::memory_order_relaxed)) {
                    hand_out_no_more();
                    return false;
                }
            }
            try {
                (*fn)(i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mutex);
                if (!error) error = std::current_exception();
                failed.store(true, std::memory_order_relaxed);
                hand_out_no_more();
                return false;
            }
        }
    }

    void run_indices(int self) {
        for (int d = 0; d < size; ++d)
            if (!drain(ranges[(self + d) % size], self == 0)) return;
    }

    void leave() {
        if (active.fetch_sub(1) == 1 && caller_waiting.load()) futex_wake_all(&active);
    }

    void worker_loop(int self) {
        t_in_parallel = true;
        // The state a fresh pool starts in: a worker scheduled late still joins the first job.
        uint32_t seen = 0;
        for (;;) {
            uint32_t s = seen;
            // stop is set before state changes, so checking it here covers a worker that
            // started after the pool was already told to stop.
            auto changed = [&] {
                return (s = state.load(std::memory_order_acquire)) != seen ||
                       stop.load(std::memory_order_acquire);
            };
            if (!spin_until(changed)) {
                sleepers.fetch_add(1);
                while (!changed()) futex_wait(&state, seen);
                sleepers.fetch_sub(1);
            }
            seen = s;
            if (stop.load(std::memory_order_acquire)) return;
            if (!(s & 1u)) continue;  // a closed job
            active.fetch_add(1);
            if (state.load() != s) {  // closed (or replaced) before we registered
                leave();
                continue;
            }
            run_indices(self);
            leave();
        }
    }

    void stop_workers() {
        if (forked()) return;  // the workers are not in this process
        stop.store(true, std::memory_order_release);
        state.fetch_add(2);  // a change every worker observes
        futex_wake_all(&state);
        for (pthread_t t : threads) pthread_join(t, nullptr);
        threads.clear();
    }

    struct Start {
        Impl* impl;
        int self;
    };
    std::vector<Start> starts;  // one per worker, alive as long as the pool

    static void* thread_main(void* arg) {
        auto* st = static_cast<Start*>(arg);
        st->impl->worker_loop(st->self);
        return nullptr;
    }

    void run(int64_t count, const std::function<void(int64_t)>& f, Interrupt* intr) {
        std::lock_guard<std::mutex> call_lock(call_mutex);
        fn = &f;
        interrupt = intr;
        n = count;
        for (int t = 0; t < size; ++t) {
            ranges[t].next.store(count * t / size, std::memory_order_relaxed);
            ranges[t].end = count * (t + 1) / size;
        }
        failed.store(false, std::memory_order_relaxed);
        error = nullptr;
        uint32_t gen = state.load(std::memory_order_relaxed) >> 1;
        state.store(((gen + 1) << 1) | 1u);  // open (seq_cst: ordered before reading sleepers)
        if (sleepers.load() != 0) futex_wake_all(&state);

        t_in_parallel = true;
        run_indices(0);
        t_in_parallel = false;

        state.store((gen + 1) << 1);  // close: no new worker may join
        if (!spin_until([&] { return active.load() == 0; })) {
            caller_waiting.store(1);
            for (uint32_t a; (a = active.load()) != 0;) {
                futex_wait(&active, a, interrupt ? &kPollPeriod : nullptr);
                if (interrupt && poll_due()) interrupt->poll();
            }
            caller_waiting.store(0);
        }
        fn = nullptr;
        interrupt = nullptr;
        if (failed.load(std::memory_order_relaxed)) {
            std::exception_ptr e = error;
            error = nullptr;
            std::rethrow_exception(e);
        }
    }
};

ThreadPool::ThreadPool(int n) : impl_(std::make_unique<Impl>()) {
    if (n < 1)
        throw std::invalid_argument("ThreadPool size must be >= 1, got " + std::to_string(n));
    impl_->size = n;
    impl_->ranges = std::make_unique<Impl::Range[]>(n);
    impl_->starts.reserve(n);  // no reallocation: workers keep pointers into it
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kWorkerStackBytes);
    for (int i = 1; i < n; ++i) {
        pthread_t t;
        impl_->starts.push_back(Impl::Start{impl_.get(), i});
        int rc = pthread_create(&t, &attr, &Impl::thread_main, &impl_->starts.back());
        if (rc != 0) {
            pthread_attr_destroy(&attr);
            impl_->stop_workers();
            throw std::runtime_error("ThreadPool: cannot start worker thread " + std::to_string(i) +
                                     " with a " + std::to_string(kWorkerStackBytes >> 20) +
                                     " MiB stack: " + std::strerror(rc) +
                                     "; lower TW_NUM_THREADS");
        }
        impl_->threads.push_back(t);
    }
    pthread_attr_destroy(&attr);
}

ThreadPool::~ThreadPool() {
    if (!impl_) return;
    impl_->stop_workers();
}

int ThreadPool::size() const { return impl_->size; }

bool ThreadPool::workers_here() const { return !impl_->forked(); }

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn, Interrupt* interrupt) {
    if (n <= 0) return;
    std::optional<Ticker::Launch> ticking;
    if (interrupt) ticking.emplace();
    // A pool made before a fork, used in the child (default_pool() makes the child its own):
    // its workers are not there, so the caller runs every index.
    if (n == 1 || impl_->size == 1 || t_in_parallel || impl_->forked()) {
        for (int64_t i = 0; i < n; ++i) {
            if (interrupt && poll_due()) {  // only poll sets cancel: one load per index
                interrupt->poll();
                if (interrupt->cancel.load(std::memory_order_relaxed)) return;
            }
            fn(i);
        }
        return;
    }
    impl_->run(n, fn, interrupt);
}

// One per process: a forked child makes its own on first use (the parent's workers are not in
// it). The parent's copy is left as it is (never destroyed: its workers and locks are not ours).
std::atomic<ThreadPool*> g_default_pool{nullptr};

ThreadPool& default_pool() {
    ThreadPool* pool = g_default_pool.load(std::memory_order_acquire);
    if (pool && pool->workers_here()) return *pool;
    static auto& mu = support::fork_safe_mutex();
    std::lock_guard<support::ForkSafeMutex> g(mu);
    pool = g_default_pool.load(std::memory_order_acquire);
    if (!pool || !pool->workers_here()) {
        int n = 0;
        try {
            n = support::env_num_threads();
        } catch (const std::invalid_argument& e) {
            throw ir::Error(e.what(), {}, "set TW_NUM_THREADS to the number of threads, or unset it (docs/environment.md)");
        }
        try {
            pool = new ThreadPool(n);  // never destroyed
        } catch (const std::runtime_error& e) {  // a worker's stack past RLIMIT_AS, a thread limit (h-hunt11b F16)
            throw ir::Error(e.what(), {}, "set TW_NUM_THREADS to fewer threads (each has a 64 MiB stack), or raise the "
                                          "process's address-space / thread limits (ulimit -v, ulimit -u)");
        }
        g_default_pool.store(pool, std::memory_order_release);
    }
    return *pool;
}

}  // namespace tw::runtime
