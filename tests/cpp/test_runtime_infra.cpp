// Tests for the runtime infrastructure: env knobs, thread pool, toolchain, disk cache.
#include "runtime/disk_cache.h"
#include "runtime/log.h"
#include "runtime/thread_pool.h"
#include "runtime/toolchain.h"
#include "support/env.h"
#include "support/fork.h"
#include "support/interrupt.h"
#include "support/sha256.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace rt = tw::runtime;
namespace support = tw::support;
namespace fs = std::filesystem;

namespace {

// Sets/unsets environment variables for the scope of a test, restoring them afterwards.
class ScopedEnv {
public:
    void set(const char* name, const char* value) {
        save(name);
        if (value) setenv(name, value, 1);
        else unsetenv(name);
    }
    ~ScopedEnv() {
        for (auto& [name, old] : saved_) {
            if (old.first) setenv(name.c_str(), old.second.c_str(), 1);
            else unsetenv(name.c_str());
        }
    }

private:
    void save(const char* name) {
        if (saved_.count(name)) return;
        const char* v = getenv(name);
        saved_[name] = {v != nullptr, v ? v : ""};
    }
    std::map<std::string, std::pair<bool, std::string>> saved_;
};

class TempDir {
public:
    TempDir() {
        std::string t = (fs::temp_directory_path() / "tw-test-XXXXXX").string();
        std::vector<char> b(t.begin(), t.end());
        b.push_back('\0');
        if (!mkdtemp(b.data())) std::abort();
        path_ = b.data();
    }
    ~TempDir() {
        std::error_code ec;
        fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
        fs::remove_all(path_, ec);
    }
    const std::string& path() const { return path_; }
    std::string operator/(const std::string& s) const { return path_ + "/" + s; }

private:
    std::string path_;
};

void write_file(const std::string& path, const std::string& data) {
    std::ofstream out(path, std::ios::binary);
    out << data;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

unsigned mode_of(const std::string& p) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) return 0xffff;
    return st.st_mode & 07777;
}

void clear_tw_env(ScopedEnv& e) {
    for (const char* n : {"TW_CACHE_DIR", "TW_CACHE_DISABLE", "TW_CACHE_MAX_BYTES", "TW_DUMP_IR",
                          "TW_CXX", "CXX", "TW_NUM_THREADS", "TW_VERBOSE", "XDG_CACHE_HOME", "TW_CPU_ARCH"})
        e.set(n, nullptr);
}

template <class F>
std::string error_of(F f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "<no exception>";
}

}  // namespace

// ------------------------------------------------------------------ env

TEST(Env, Defaults) {
    ScopedEnv e;
    clear_tw_env(e);
    e.set("HOME", "/home/someone");
    support::Env v = support::read_env();
    EXPECT_EQ(v.cache_dir, "/home/someone/.cache/tilewright");
    EXPECT_FALSE(v.cache_disabled);
    EXPECT_EQ(v.cache_max_bytes, 2ull << 30);
    EXPECT_EQ(v.dump_ir_dir, "");
    EXPECT_EQ(v.cxx, "g++");
    EXPECT_EQ(v.num_threads, support::available_cpus());
    EXPECT_GE(v.num_threads, 1);
    EXPECT_FALSE(v.verbose);
    EXPECT_EQ(v.cpu_arch, "native");
}

TEST(Env, Overrides) {
    ScopedEnv e;
    clear_tw_env(e);
    e.set("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(support::read_env().cache_dir, "/xdg/tilewright");
    e.set("TW_CACHE_DIR", "/tmp/twc");
    e.set("TW_CACHE_DISABLE", "1");
    e.set("TW_CACHE_MAX_BYTES", "500M");
    e.set("TW_DUMP_IR", "/tmp/dump");
    e.set("CXX", "clang++");
    e.set("TW_NUM_THREADS", "3");
    e.set("TW_VERBOSE", "1");
    support::Env v = support::read_env();
    EXPECT_EQ(v.cache_dir, "/tmp/twc");
    EXPECT_TRUE(v.cache_disabled);
    EXPECT_EQ(v.cache_max_bytes, 500ull << 20);
    EXPECT_EQ(v.dump_ir_dir, "/tmp/dump");
    EXPECT_EQ(v.cxx, "clang++");
    EXPECT_EQ(v.num_threads, 3);
    EXPECT_TRUE(v.verbose);
    e.set("TW_CXX", "/opt/bin/g++-13");
    EXPECT_EQ(support::read_env().cxx, "/opt/bin/g++-13");  // TW_CXX beats CXX
    e.set("TW_CACHE_MAX_BYTES", "12345");
    EXPECT_EQ(support::read_env().cache_max_bytes, 12345u);
    e.set("TW_CACHE_DISABLE", "0");
    EXPECT_FALSE(support::read_env().cache_disabled);
    e.set("TW_CPU_ARCH", "x86-64-v3");
    EXPECT_EQ(support::read_env().cpu_arch, "x86-64-v3");
    // spaces or tabs around a number or a switch are ignored alike (api35: " 4" was a thread
    // count while " 1" was a malformed switch); only spaces is unset
    e.set("TW_NUM_THREADS", " 4\t");
    e.set("TW_VERBOSE", " 1");
    e.set("TW_CACHE_DISABLE", "on ");
    e.set("TW_CACHE_MAX_BYTES", "  7M ");
    e.set("TW_MEMORY_CACHE_MAX", " 9 ");
    support::Env w = support::read_env();
    EXPECT_EQ(w.num_threads, 4);
    EXPECT_TRUE(w.verbose);
    EXPECT_TRUE(w.cache_disabled);
    EXPECT_EQ(w.cache_max_bytes, 7ull << 20);
    EXPECT_EQ(w.memory_cache_max, 9);
    e.set("TW_VERBOSE", "  ");
    EXPECT_FALSE(support::read_env().verbose);
    e.set("TW_MEMORY_CACHE_MAX", nullptr);
}

TEST(Env, InvalidValuesNameTheVariable) {
    struct Case {
        const char* var;
        const char* value;
    };
    for (Case c : {Case{"TW_NUM_THREADS", "0"}, Case{"TW_NUM_THREADS", "four"},
                   Case{"TW_NUM_THREADS", "4x"}, Case{"TW_NUM_THREADS", "-2"},
                   Case{"TW_CACHE_MAX_BYTES", "lots"}, Case{"TW_CACHE_MAX_BYTES", "10Q"},
                   Case{"TW_CACHE_MAX_BYTES", "0"}, Case{"TW_CACHE_MAX_BYTES", "-5"},
                   Case{"TW_CACHE_MAX_BYTES", "99999999999999999999999"},
                   Case{"TW_CACHE_DISABLE", "maybe"}, Case{"TW_VERBOSE", "2"},
                   // a -march value is one word, never a flag or anything a shell would read
                   Case{"TW_CPU_ARCH", "-O0"}, Case{"TW_CPU_ARCH", "x86-64 -mavx512f"},
                   Case{"TW_CPU_ARCH", "haswell;rm"}, Case{"TW_CPU_ARCH", "../x"}}) {
        ScopedEnv e;
        clear_tw_env(e);
        e.set(c.var, c.value);
        try {
            support::read_env();
            ADD_FAILURE() << c.var << "=" << c.value << " was accepted";
        } catch (const std::invalid_argument& ex) {
            std::string msg = ex.what();
            EXPECT_NE(msg.find(c.var), std::string::npos) << msg;
            EXPECT_NE(msg.find(c.value), std::string::npos) << msg;
            EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
        }
    }
}

TEST(Env, ReadOnceAndStable) {
    const support::Env& a = support::env();
    const support::Env& b = support::env();
    EXPECT_EQ(&a, &b);
    EXPECT_GE(a.num_threads, 1);
}

// ------------------------------------------------------------------ thread pool

TEST(ThreadPool, EveryIndexExactlyOnce) {
    for (int size : {1, 2, 3, 4}) {
        rt::ThreadPool pool(size);
        EXPECT_EQ(pool.size(), size);
        for (int64_t n : {0, 1, 2, 3, 7, 100, 10007}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            pool.parallel_for(n, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
            for (int64_t i = 0; i < n; ++i)
                ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "size " << size << " n " << n;
        }
    }
}

TEST(ThreadPool, ThreadsRunContiguousSharesInOrder) {
    // Each thread starts with its own contiguous share (the caller the first one) and runs it
    // in increasing order, then takes the other shares' indices from their fronts, again in
    // increasing order. Checked on the order each thread ran its indices, which does not
    // depend on timing: index 0 waits until the worker has started, so both threads take part
    // however the machine schedules them; then each thread's sequence starts at its share's
    // front and has at most one descent per share it moves to (size - 1), whoever ran what.
    rt::ThreadPool pool(2);
    const int64_t n = 64;
    std::mutex mu;
    std::condition_variable cv;
    bool worker_started = false;
    std::map<std::thread::id, std::vector<int64_t>> ran;  // per thread, in the order run
    const auto caller = std::this_thread::get_id();
    pool.parallel_for(n, [&](int64_t i) {
        std::unique_lock<std::mutex> lock(mu);
        ran[std::this_thread::get_id()].push_back(i);
        if (std::this_thread::get_id() != caller) {
            worker_started = true;
            cv.notify_all();
        }
        if (i == 0)  // the worker is woken by the job; a minute covers any load
            EXPECT_TRUE(cv.wait_for(lock, std::chrono::minutes(1), [&] { return worker_started; }))
                << "the worker never joined";
    });
    ASSERT_EQ(ran.size(), 2u) << "both threads run indices";
    int64_t total = 0;
    for (const auto& [id, seq] : ran) {
        total += static_cast<int64_t>(seq.size());
        EXPECT_EQ(seq.front(), id == caller ? 0 : n / 2) << "a thread starts at its own share's front";
        int descents = 0;
        for (size_t k = 1; k < seq.size(); ++k) descents += seq[k] < seq[k - 1];
        EXPECT_LE(descents, 1) << "a share is run in increasing order, and only one other share is visited";
    }
    EXPECT_EQ(total, n);
    // The caller is blocked at index 0 until the worker starts, so the worker's share is
    // never stolen before the worker runs its front: its first index is n / 2 (above).
}

TEST(ThreadPool, IdleThreadsTakeOverOtherShares) {
    // All the work is in the caller's share: the worker, done with its own (instant) share,
    // must take indices of the caller's share, so the call takes about half the serial time.
    rt::ThreadPool pool(2);
    const int64_t n = 40;
    std::mutex mu;
    std::set<std::thread::id> slow_ids;
    pool.parallel_for(n, [&](int64_t i) {
        if (i >= n / 2) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::lock_guard<std::mutex> lock(mu);
        slow_ids.insert(std::this_thread::get_id());
    });
    EXPECT_EQ(slow_ids.size(), 2u) << "the worker did not help with the caller's share";
}

TEST(ThreadPool, RejectsBadSize) {
    EXPECT_THROW(rt::ThreadPool(0), std::invalid_argument);
}

TEST(ThreadPool, ManyBackToBackCalls) {
    rt::ThreadPool pool(3);
    std::atomic<int64_t> sum{0};
    for (int r = 0; r < 20000; ++r) pool.parallel_for(3, [&](int64_t i) { sum += i + 1; });
    EXPECT_EQ(sum.load(), 20000 * 6);
}

TEST(ThreadPool, UsesSeveralThreads) {
    rt::ThreadPool pool(3);
    std::mutex mu;
    std::set<std::thread::id> ids;
    pool.parallel_for(12, [&](int64_t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
    });
    EXPECT_GE(ids.size(), 2u);
    EXPECT_TRUE(ids.count(std::this_thread::get_id())) << "the caller participates";
}

TEST(ThreadPool, ExceptionIsRethrownAndPoolStaysUsable) {
    rt::ThreadPool pool(3);
    std::atomic<int> ran{0};
    try {
        pool.parallel_for(1000, [&](int64_t i) {
            ++ran;
            if (i == 5) throw std::runtime_error("block 5 failed");
            // The other blocks take ~100 ms in all, far longer than unwinding the exception.
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        });
        ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "block 5 failed");
    }
    EXPECT_LT(ran.load(), 500) << "no new indices are handed out after the failure";
    // Several failing indices: exactly one exception reaches the caller.
    EXPECT_THROW(pool.parallel_for(64, [](int64_t i) { throw std::out_of_range(std::to_string(i)); }),
                 std::out_of_range);
    std::atomic<int> count{0};
    pool.parallel_for(100, [&](int64_t) { ++count; });
    EXPECT_EQ(count.load(), 100);
}

TEST(ThreadPool, InterruptPollStopsHandingOutIndices) {
    // The caller polls about every 50 ms (the ticker's period); the poll sets cancel on its second
    // call: the 4000 indices of 1 ms (2 s on 2 threads, 4 s on 1) stop after about 100 ms, the pool
    // stays usable. Pool sizes 1 (the inline path) and 2.
    for (int size : {1, 2}) {
        rt::ThreadPool pool(size);
        rt::ThreadPool::Interrupt intr;
        std::atomic<int> polls{0}, ran{0};
        intr.poll = [&] {
            if (++polls >= 2) intr.cancel.store(true);
        };
        pool.parallel_for(4000, [&](int64_t) {
            ++ran;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }, &intr);
        EXPECT_GE(polls.load(), 2) << size;
        EXPECT_LT(ran.load(), 2000) << size << ": no new indices are handed out after cancel";
        if (size > 1) {  // the pool's threads load cancel before each index: set already, none runs
            rt::ThreadPool::Interrupt done;
            done.cancel.store(true);
            done.poll = [] {};
            std::atomic<int> none{0};
            pool.parallel_for(100, [&](int64_t) { ++none; }, &done);
            EXPECT_EQ(none.load(), 0);
        }
        std::atomic<int> count{0};
        pool.parallel_for(100, [&](int64_t) { ++count; });
        EXPECT_EQ(count.load(), 100) << size;
    }
}

TEST(ThreadPool, NestedCallsRunInline) {
    rt::ThreadPool pool(3);
    std::vector<std::atomic<int>> hits(16 * 16);
    pool.parallel_for(16, [&](int64_t i) {
        EXPECT_TRUE(rt::in_parallel_region());
        auto outer = std::this_thread::get_id();
        pool.parallel_for(16, [&](int64_t j) {
            EXPECT_EQ(std::this_thread::get_id(), outer);  // serial, same thread
            hits[static_cast<size_t>(i * 16 + j)]++;
        });
    });
    EXPECT_FALSE(rt::in_parallel_region());
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

// Would overflow a default 8 MiB thread stack. Not inlined: the frame must only exist when
// called (on a worker), not in the caller's frame on the main thread.
__attribute__((noinline)) void use_32mib_of_stack(char c) {
    volatile char big[32 << 20];
    big[0] = c;
    big[sizeof(big) - 1] = big[0];
}

TEST(ThreadPool, WorkersHaveLargeStacks) {
    rt::ThreadPool pool(3);
    auto main_id = std::this_thread::get_id();
    std::atomic<int> worker_calls{0};
    std::atomic<bool> small_stack{false};
    pool.parallel_for(24, [&](int64_t i) {
        if (std::this_thread::get_id() == main_id) {  // leave work for the workers
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            return;
        }
        pthread_attr_t attr;
        size_t stack = 0;
        pthread_getattr_np(pthread_self(), &attr);
        pthread_attr_getstacksize(&attr, &stack);
        pthread_attr_destroy(&attr);
        if (stack < rt::ThreadPool::kWorkerStackBytes) small_stack = true;
        use_32mib_of_stack(static_cast<char>(i));
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++worker_calls;
    });
    EXPECT_GT(worker_calls.load(), 0);
    EXPECT_FALSE(small_stack.load());
}

TEST(ThreadPool, ConcurrentCallersAreSerialised) {
    rt::ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t)
        callers.emplace_back([&] {
            for (int r = 0; r < 500; ++r) pool.parallel_for(10, [&](int64_t) { ++total; });
        });
    for (auto& t : callers) t.join();
    EXPECT_EQ(total.load(), 4 * 500 * 10);
}

TEST(ThreadPool, ChildAfterForkRunsSerially) {
    rt::ThreadPool pool(3);
    pool.parallel_for(8, [](int64_t) {});
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        int count = 0;
        pool.parallel_for(50, [&](int64_t) { ++count; });  // plain int: must be serial
        _exit(count == 50 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(ThreadPool, ForkedChildMakesItsOwnDefaultPool) {
    rt::ThreadPool* parent = &rt::default_pool();
    std::atomic<int> n{0};
    parent->parallel_for(8, [&](int64_t) { ++n; });
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(20);  // a hang ends as SIGALRM
        EXPECT_FALSE(parent->workers_here());
        rt::ThreadPool& own = rt::default_pool();
        std::atomic<int> count{0};
        own.parallel_for(1000, [&](int64_t) { ++count; });
        bool ok = &own != parent && own.workers_here() && own.size() == support::env().num_threads &&
                  count.load() == 1000 && &rt::default_pool() == &own;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_EQ(&rt::default_pool(), parent);
    EXPECT_TRUE(parent->workers_here());
}

TEST(ThreadPool, DefaultPoolSizeFollowsEnv) {
    EXPECT_EQ(rt::default_pool().size(), support::env().num_threads);
    std::atomic<int> n{0};
    rt::default_pool().parallel_for(5, [&](int64_t) { ++n; });
    EXPECT_EQ(n.load(), 5);
}

// Measures (does not assert) the cost of a minimal parallel launch.
TEST(ThreadPool, ReportOverhead) {
    for (int size : {2, support::available_cpus()}) {
        rt::ThreadPool pool(size);
        std::atomic<int64_t> sink{0};
        auto fn = [&](int64_t i) { sink.fetch_add(i, std::memory_order_relaxed); };
        for (int r = 0; r < 1000; ++r) pool.parallel_for(2, fn);  // warm up
        const int reps = 100000;
        auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) pool.parallel_for(2, fn);
        auto t1 = std::chrono::steady_clock::now();
        double hot = std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
        // Cold: workers have gone to sleep on the futex between calls.
        double cold = 0;
        const int cold_reps = 200;
        for (int r = 0; r < cold_reps; ++r) {
            std::this_thread::sleep_for(std::chrono::microseconds(500));
            auto c0 = std::chrono::steady_clock::now();
            pool.parallel_for(2, fn);
            cold += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - c0)
                        .count();
        }
        // Two indices of ~2 us each: shows whether both threads really share the work.
        auto spin2us = [&](int64_t) {
            auto s0 = std::chrono::steady_clock::now();
            while (std::chrono::steady_clock::now() - s0 < std::chrono::microseconds(2)) {
            }
        };
        auto w0 = std::chrono::steady_clock::now();
        const int wreps = 20000;
        for (int r = 0; r < wreps; ++r) pool.parallel_for(2, spin2us);
        double work = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - w0)
                          .count() / wreps;
        std::printf("[ overhead ] pool size %d: parallel_for(2, trivial) back-to-back %.2f us, "
                    "after 0.5 ms idle (workers asleep) %.2f us; parallel_for(2, 2us each) "
                    "%.2f us (serial 4 us)\n",
                    size, hot, cold / cold_reps, work);
    }
}

// ------------------------------------------------------------------ toolchain

TEST(Toolchain, HostCompilerIsFound) {
    const rt::CompilerInfo& c = rt::host_compiler();
    EXPECT_FALSE(c.path.empty());
    EXPECT_EQ(c.path[0], '/');
    EXPECT_FALSE(c.identity.empty());
    EXPECT_EQ(c.identity.find('\n'), std::string::npos);
    EXPECT_EQ(&c, &rt::host_compiler());
}

TEST(Toolchain, MissingCompilerSaysHowToFix) {
    std::string msg = error_of([] { rt::probe_compiler("tw-no-such-compiler-xyz"); });
    EXPECT_NE(msg.find("tw-no-such-compiler-xyz"), std::string::npos) << msg;
    EXPECT_NE(msg.find("TW_CXX"), std::string::npos) << msg;
    EXPECT_NE(msg.find("g++"), std::string::npos) << msg;
}

TEST(Toolchain, CpuFeaturesSortedAndConsistent) {
    std::string f = rt::cpu_features();
    EXPECT_EQ(f, rt::cpu_features());
    std::istringstream in(f);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    EXPECT_TRUE(std::is_sorted(words.begin(), words.end())) << f;
    EXPECT_EQ(std::set<std::string>(words.begin(), words.end()).size(), words.size()) << f;
#if defined(__x86_64__)
    __builtin_cpu_init();
    bool has = std::find(words.begin(), words.end(), "avx2") != words.end();
    EXPECT_EQ(has, static_cast<bool>(__builtin_cpu_supports("avx2"))) << f;
    has = std::find(words.begin(), words.end(), "avx512f") != words.end();
    EXPECT_EQ(has, static_cast<bool>(__builtin_cpu_supports("avx512f"))) << f;
#endif
    std::printf("[ features ] %s\n", f.c_str());
}

TEST(Toolchain, TargetCpuFeaturesFromTheCompiler) {
    EXPECT_EQ(rt::target_cpu_features("native"), rt::cpu_features());
#if defined(__x86_64__)
    // x86-64-v3: AVX2 + FMA + BMI2 + F16C, no AVX-512, no AMD-only instructions
    std::set<std::string> v3;
    {
        std::istringstream in(rt::target_cpu_features("x86-64-v3"));
        for (std::string w; in >> w;) v3.insert(w);
    }
    for (const char* f : {"avx", "avx2", "fma", "f16c", "bmi2", "sse4.2"}) EXPECT_TRUE(v3.count(f)) << f;
    for (const auto& f : v3) EXPECT_EQ(f.find("avx512"), std::string::npos) << f;
    EXPECT_FALSE(v3.count("amx-tile"));
    EXPECT_FALSE(v3.count("sse4a"));
    EXPECT_NE(rt::target_cpu_features("znver3").find("sse4a"), std::string::npos);  // AMD-only
    EXPECT_NE(rt::target_cpu_features("skylake-avx512").find("avx512f"), std::string::npos);
    // flags follow the target: 512-bit auto-vectorisation only for an AVX-512 target
    auto f = rt::default_compile_flags("x86-64-v3");
    EXPECT_NE(std::find(f.begin(), f.end(), "-march=x86-64-v3"), f.end());
    EXPECT_EQ(std::find(f.begin(), f.end(), "-mprefer-vector-width=512"), f.end());
    f = rt::default_compile_flags("skylake-avx512");
    EXPECT_NE(std::find(f.begin(), f.end(), "-mprefer-vector-width=512"), f.end());
    // what the host lacks: nothing of x86-64-v3 on any AVX2 host; made-up features always
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        EXPECT_EQ(rt::missing_cpu_features(rt::target_cpu_features("x86-64-v3")), "");
#endif
    EXPECT_EQ(rt::missing_cpu_features("avx9000 " + rt::cpu_features() + " zz-feature"), "avx9000 zz-feature");
    EXPECT_EQ(rt::missing_cpu_features(""), "");
}

TEST(Toolchain, UnknownCpuArchNamesTheKnobAndTheFix) {
    std::string msg = error_of([] { rt::target_cpu_features("no-such-cpu-9"); });
    EXPECT_NE(msg.find("'no-such-cpu-9'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("TW_CPU_ARCH"), std::string::npos) << msg;
    EXPECT_NE(msg.find("x86-64-v3"), std::string::npos) << msg;
    // a failed probe is not cached as a success
    EXPECT_EQ(error_of([] { rt::target_cpu_features("no-such-cpu-9"); }), msg);
}

TEST(Toolchain, DefaultFlags) {
    auto f = rt::default_compile_flags();
    for (const char* want : {"-O3", "-march=native", "-std=c++20", "-fPIC", "-shared", "-fno-plt"})
        EXPECT_NE(std::find(f.begin(), f.end(), want), f.end()) << want;
    // 512-bit auto-vectorisation exactly where the host has AVX-512F (the width of tw_cpu/simd.h)
    const std::string feats = " " + rt::cpu_features() + " ";
    const bool avx512 = feats.find(" avx512f ") != std::string::npos;
    EXPECT_EQ(std::find(f.begin(), f.end(), std::string("-mprefer-vector-width=512")) != f.end(), avx512);
}

TEST(Toolchain, CompileLoadAndCall) {
    TempDir d;
    fs::create_directories(d / "inc");
    write_file(d / "inc/tw_test_helper.h", "inline int tw_helper(int x) { return x * 3; }\n");
    write_file(d / "k.cpp",
               "#include \"tw_test_helper.h\"\n"
               "#include <cstdint>\n"
               "extern \"C\" int tw_test_fn(int a, int b) { return tw_helper(a) + b + TW_OFFSET; }\n"
               "extern \"C\" void tw_test_fill(float* p, int64_t n) {\n"
               "  for (int64_t i = 0; i < n; ++i) p[i] = float(i) * 0.5f; }\n");
    auto t0 = std::chrono::steady_clock::now();
    rt::CompileResult r =
        rt::compile_shared_object(d / "k.cpp", d / "k.so", {"-DTW_OFFSET=5"}, {d / "inc"});
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
    ASSERT_TRUE(r.ok) << r.log;
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.argv.front(), rt::host_compiler().path);
    EXPECT_EQ(r.argv.back(), d / "k.cpp");
    EXPECT_NE(std::find(r.argv.begin(), r.argv.end(), "-DTW_OFFSET=5"), r.argv.end());
    EXPECT_NE(std::find(r.argv.begin(), r.argv.end(), "-I" + (d / "inc")), r.argv.end());
    std::printf("[ compile  ] trivial .so in %.0f ms\n", ms);

    rt::SharedLibrary lib(d / "k.so");
    EXPECT_TRUE(lib.loaded());
    auto fn = lib.function<int (*)(int, int)>("tw_test_fn");
    EXPECT_EQ(fn(4, 1), 4 * 3 + 1 + 5);
    auto fill = lib.function<void (*)(float*, int64_t)>("tw_test_fill");
    std::vector<float> v(37);
    fill(v.data(), 37);
    EXPECT_EQ(v[36], 18.0f);

    std::string msg = error_of([&] { lib.symbol("no_such_symbol"); });
    EXPECT_NE(msg.find("no_such_symbol"), std::string::npos) << msg;
    EXPECT_EQ(lib.try_symbol("no_such_symbol"), nullptr);

    rt::SharedLibrary moved(std::move(lib));
    EXPECT_FALSE(lib.loaded());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(moved.function<int (*)(int, int)>("tw_test_fn")(0, 0), 5);
    rt::SharedLibrary assigned;
    assigned = std::move(moved);
    EXPECT_TRUE(assigned.loaded());
    EXPECT_EQ(assigned.path(), d / "k.so");
}

// A library linked against a shared library with a soname, which is loaded first through another
// path (as a verified cache entry or an artifact's /proc/self/fd path is): how a kernel library
// reaches the gemm runtime library. The dependency resolves to the loaded copy, not by a search.
TEST(Toolchain, LinkAgainstALoadedSharedLibraryBySoname) {
    TempDir d;
    fs::create_directories(d / "inc");
    write_file(d / "inc/tw_dep_helper.h", "inline int tw_dep_scale() { return 7; }\n");
    write_file(d / "dep.cpp", "#include \"tw_dep_helper.h\"\nint tw_dep_fn(int x) { return x * tw_dep_scale(); }\n");
    const std::string soname = "libtw_test_dep_" + std::to_string(getpid()) + ".so";
    rt::CompileResult o =
        rt::compile_shared_object(d / "dep.cpp", d / "dep_a.so", {"-Wl,-soname," + soname}, {d / "inc"});
    ASSERT_TRUE(o.ok) << o.log;
    write_file(d / "k.cpp", "int tw_dep_fn(int);\nextern \"C\" int tw_call(int x) { return tw_dep_fn(x) + 1; }\n");
    rt::CompileResult r = rt::compile_shared_object(d / "k.cpp", d / "k.so", {}, {}, {d / "dep_a.so"});
    ASSERT_TRUE(r.ok) << r.log;
    EXPECT_EQ(r.argv.back(), d / "dep_a.so");
    // not loaded yet and not on the search path: the library does not load
    std::string msg = error_of([&] { rt::SharedLibrary bad(d / "k.so"); });
    EXPECT_NE(msg.find(soname), std::string::npos) << msg;
    fs::rename(d / "dep_a.so", d / "dep_b.so");  // loaded under another path than the one linked
    rt::SharedLibrary dep(d / "dep_b.so");
    rt::SharedLibrary lib(d / "k.so");
    EXPECT_EQ(lib.function<int (*)(int)>("tw_call")(6), 43);
}

// SharedLibrary::from_fd loads the bytes open at the descriptor, whatever the path names by then;
// and the names /proc/self/fd/<n> glibc keeps (a library's first name, or an alias it adds when a
// file already loaded is opened again under such a name) never hand back the wrong library once
// the number is reused for another file.
TEST(Toolchain, LoadThroughTheVerifiedDescriptor) {
    TempDir d;
    for (int k : {1, 2}) {
        write_file(d / ("w" + std::to_string(k) + ".cpp"),
                   "extern \"C\" int tw_which() { return " + std::to_string(k) + "; }\n");
        rt::CompileResult r = rt::compile_shared_object(d / ("w" + std::to_string(k) + ".cpp"),
                                                        d / ("w" + std::to_string(k) + ".so"), {}, {});
        ASSERT_TRUE(r.ok) << r.log;
    }
    auto which = [](const rt::SharedLibrary& lib) { return lib.function<int (*)()>("tw_which")(); };
    // Verified (opened) w1.so, then w2.so renamed over its path before the load: w1 is loaded.
    int fd1 = open((d / "w1.so").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd1, 0);
    fs::copy_file(d / "w2.so", d / "w2copy.so");
    fs::rename(d / "w2copy.so", d / "w1.so");
    rt::SharedLibrary one = rt::SharedLibrary::from_fd(fd1, d / "w1.so");
    EXPECT_EQ(which(one), 1);
    EXPECT_EQ(one.path(), d / "w1.so");
    // The same file opened again (another descriptor) while loaded: glibc returns the loaded
    // library and keeps /proc/self/fd/<n2> as an alias of it. Closed, n2 is the next number open()
    // returns; the other file loaded through it must be the other file, not the alias's holder.
    int fd1b = fcntl(fd1, F_DUPFD_CLOEXEC, 0);
    ASSERT_GE(fd1b, 0);
    rt::SharedLibrary again = rt::SharedLibrary::from_fd(fd1b, d / "w1.so");
    EXPECT_EQ(which(again), 1);
    close(fd1b);
    int fd2 = open((d / "w2.so").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_EQ(fd2, fd1b);
    rt::SharedLibrary two = rt::SharedLibrary::from_fd(fd2, d / "w2.so");
    EXPECT_EQ(which(two), 2);
    // fd1's number, closed while w1 stays loaded under its name, is skipped the same way.
    close(fd1);
    close(fd2);
    int fd3 = open((d / "w1.so").c_str(), O_RDONLY | O_CLOEXEC);  // now w2's bytes (renamed over)
    ASSERT_EQ(fd3, fd1);
    rt::SharedLibrary three = rt::SharedLibrary::from_fd(fd3, d / "w1.so");
    EXPECT_EQ(which(three), 2);
    close(fd3);
    // A cache entry replaced between its verification (lookup_open) and its load: the bytes
    // verified are loaded (by path, the replacement would be).
    rt::DiskCache cache(d / "cache", 1 << 24);
    const std::string key = support::sha256_hex("toctou");
    fs::copy_file(d / "w2.so", d / "staged.so");  // w2's bytes: tw_which() == 2
    cache.publish(key, "kernel.so", d / "staged.so");
    auto hit = cache.lookup_open(key, "kernel.so");
    ASSERT_TRUE(hit);
    write_file(d / "w3.cpp", "extern \"C\" int tw_which() { return 3; }\n");
    ASSERT_TRUE(rt::compile_shared_object(d / "w3.cpp", d / "w3.so", {}, {}).ok);
    fs::rename(d / "w3.so", hit->path());
    rt::SharedLibrary verified = rt::SharedLibrary::from_fd(hit->fd(), hit->path());
    EXPECT_EQ(which(verified), 2);
    EXPECT_EQ(which(rt::SharedLibrary(hit->path())), 3);
    EXPECT_FALSE(cache.lookup_open(key, "kernel.so"));  // the replaced entry is a miss (and removed)

    std::string msg = error_of([&] { rt::SharedLibrary::from_fd(1 << 20, d / "w1.so"); });
    EXPECT_NE(msg.find("/proc/self/fd/1048576"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mount /proc"), std::string::npos) << msg;
}

TEST(Toolchain, CompileErrorIsReported) {
    TempDir d;
    write_file(d / "bad.cpp", "int f() { return undeclared_thing_xyz; }\n");
    rt::CompileResult r = rt::compile_shared_object(d / "bad.cpp", d / "bad.so", {}, {});
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.log.find("undeclared_thing_xyz"), std::string::npos) << r.log;
    EXPECT_NE(r.log.find("error"), std::string::npos) << r.log;
    EXPECT_FALSE(fs::exists(d / "bad.so"));
}

TEST(Toolchain, HugeCompilerOutputDoesNotDeadlock) {
    TempDir d;
    // 1000 errors: ~190 KB of g++'s messages, 1.5x the bound below; g++'s time grows with the square
    // of the count (3000: 3.0 CPU-s, 1000: 0.6 on a Sapphire Rapids core), the pipe's handling does not.
    std::string src;
    for (int i = 0; i < 1000; ++i) src += "int f" + std::to_string(i) + "() { return nope_" +
                                          std::to_string(i) + "; }\n";
    write_file(d / "many.cpp", src);
    rt::CompileResult r = rt::compile_shared_object(d / "many.cpp", d / "many.so", {}, {});
    EXPECT_FALSE(r.ok);
    EXPECT_GT(r.log.size(), 128u * 1024) << "expected more output than a pipe buffer";
    EXPECT_NE(r.log.find("nope_999"), std::string::npos);
}

TEST(Toolchain, RunProcessCapturesOutputAndStatus) {
    rt::ProcessResult p = rt::run_process({"head", "-c", "300000", "/dev/zero"});
    EXPECT_EQ(p.exit_code, 0);
    EXPECT_EQ(p.output.size(), 300000u);
    // Arguments are passed verbatim, never through a shell.
    p = rt::run_process({"echo", "a;b", "$HOME", "`x`"});
    EXPECT_EQ(p.output, "a;b $HOME `x`\n");
    p = rt::run_process({"false"});
    EXPECT_EQ(p.exit_code, 1);
    p = rt::run_process({"tw-no-such-program-xyz"});
    EXPECT_EQ(p.exit_code, -1);
    EXPECT_NE(p.error.find("tw-no-such-program-xyz"), std::string::npos);
}

// An interrupt (intr31; support/interrupt.h) ends a process that never returns, its whole process
// group (the shell's background child too, which keeps the pipe open), and throws Interrupted.
TEST(Toolchain, RunProcessEndsItsGroupWhenInterrupted) {
    TempDir d;
    const std::string pids = d / "pids";
    std::atomic<bool> returned{false};
    std::thread t([&] {  // once the shell has started its background child, until run_process returns
        auto started = [&] {
            std::error_code ec;
            return std::filesystem::file_size(pids, ec) > 0 && !ec;
        };
        while (!returned && !started())
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        while (!returned) {
            tw::support::interrupt_all();
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });
    auto t0 = std::chrono::steady_clock::now();
    bool interrupted = false;
    try {
        rt::run_process({"sh", "-c", "sleep 60 & echo $! > " + pids + "; sleep 60"});
    } catch (const tw::support::Interrupted&) {
        interrupted = true;
    }
    returned = true;
    t.join();
    EXPECT_TRUE(interrupted);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
    std::ifstream in(pids);
    pid_t bg = 0;
    ASSERT_TRUE(in >> bg);
    bool gone = false;  // SIGTERM was sent to the group: the background sleep ends (a zombie until init reaps it)
    for (int i = 0; i < 200 && !gone; ++i) {
        std::ifstream stat("/proc/" + std::to_string(bg) + "/stat");
        std::string pid, comm, state;
        gone = !(stat >> pid >> comm >> state) || state == "Z";
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(gone) << "the group's background process " << bg << " is still running";
    // A wait that begins after the interrupt is not interrupted.
    EXPECT_EQ(rt::run_process({"true"}).exit_code, 0);
}

TEST(Toolchain, LoadErrorsCarryDlerror) {
    TempDir d;
    std::string msg = error_of([&] { rt::SharedLibrary lib(d / "missing.so"); });
    EXPECT_NE(msg.find("missing.so"), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
    write_file(d / "junk.so", "not an elf file");
    msg = error_of([&] { rt::SharedLibrary lib(d / "junk.so"); });
    EXPECT_NE(msg.find("junk.so"), std::string::npos) << msg;
}

// ------------------------------------------------------------------ sha256

TEST(Sha256, Fips180Vectors) {
    EXPECT_EQ(support::sha256_hex(""),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(support::sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(support::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(support::sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalMatchesOneShot) {
    std::string data;
    for (int i = 0; i < 5000; ++i) data += static_cast<char>((i * 131) & 0xff);
    for (size_t chunk : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 127u, 1000u}) {
        support::Sha256 s;
        for (size_t off = 0; off < data.size(); off += chunk)
            s.update(std::string_view(data).substr(off, chunk));
        EXPECT_EQ(s.hex_digest(), support::sha256_hex(data)) << chunk;
    }
    // Lengths around the padding boundary.
    for (size_t n = 50; n < 70; ++n) {
        std::string a(n, 'x');
        support::Sha256 s;
        s.update(a.substr(0, n / 2));
        s.update(a.substr(n / 2));
        EXPECT_EQ(s.hex_digest(), support::sha256_hex(a));
    }
    TempDir d;
    write_file(d / "f", data);
    EXPECT_EQ(support::sha256_file_hex(d / "f"), support::sha256_hex(data));
}

// ------------------------------------------------------------------ disk cache

namespace {

std::string key_of(const std::string& s) { return support::sha256_hex(s); }

std::string stage(const TempDir& d, const std::string& name, const std::string& content) {
    std::string p = d / name;
    write_file(p, content);
    return p;
}

std::vector<std::string> list_dir(const std::string& p) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(p, ec)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST(DiskCache, PublishThenLookup) {
    TempDir d;
    rt::DiskCache cache(d / "cache", 1 << 20);
    std::string key = key_of("kernel-a");
    EXPECT_FALSE(cache.lookup(key, "kernel.so"));
    std::string staged = stage(d, "staged.so", "artefact bytes");
    std::string path = cache.publish(key, "kernel.so", staged);
    EXPECT_EQ(path, d / "cache/" + key.substr(0, 2) + "/" + key + "/kernel.so");
    EXPECT_FALSE(fs::exists(staged)) << "the staged file is consumed";
    EXPECT_EQ(read_file(path), "artefact bytes");
    std::string manifest = read_file(cache.entry_dir(key) + "/manifest");
    EXPECT_NE(manifest.find("size 14"), std::string::npos) << manifest;
    EXPECT_NE(manifest.find(support::sha256_hex("artefact bytes")), std::string::npos) << manifest;

    auto hit = cache.lookup(key, "kernel.so");
    ASSERT_TRUE(hit);
    EXPECT_EQ(*hit, path);
    rt::DiskCache other(d / "cache", 1 << 20);  // a fresh instance verifies the sha256
    EXPECT_EQ(other.lookup(key, "kernel.so"), path);
    EXPECT_FALSE(cache.lookup(key, "other.so"));
    EXPECT_FALSE(cache.lookup(key_of("kernel-b"), "kernel.so"));
    EXPECT_EQ(list_dir(d / "cache"), (std::vector<std::string>{".usage", key.substr(0, 2)}))
        << "no temp dirs left behind";
    EXPECT_EQ(read_file(d / "cache/.usage"), std::to_string(cache.total_bytes()) + "\n");
}

TEST(DiskCache, RejectsBadKeysAndNames) {
    TempDir d;
    rt::DiskCache cache(d / "cache", 1 << 20);
    std::string staged = stage(d, "s", "x");
    EXPECT_THROW(cache.lookup("../etc", "kernel.so"), std::invalid_argument);
    EXPECT_THROW(cache.lookup("a", "kernel.so"), std::invalid_argument);
    EXPECT_THROW(cache.lookup("abcd", "../x"), std::invalid_argument);
    EXPECT_THROW(cache.lookup("abcd", "manifest"), std::invalid_argument);
    EXPECT_THROW(cache.publish("ab/cd", "kernel.so", staged), std::invalid_argument);
    EXPECT_THROW(cache.publish("abcd", "k.so", d / "does-not-exist"), std::runtime_error);
    cache.publish("abcd", "k.so", staged);
    std::string msg = error_of([&] { cache.publish("abcd", "other.so", stage(d, "t", "y")); });
    EXPECT_NE(msg.find("already holds"), std::string::npos) << msg;
    EXPECT_EQ(cache.lookup("abcd", "k.so"), cache.entry_dir("abcd") + "/k.so");
}

TEST(DiskCache, CorruptEntriesAreMissesAndRemoved) {
    TempDir d;
    std::string dir = d / "cache";
    std::string key = key_of("k");
    {
        rt::DiskCache cache(dir, 1 << 20);
        std::string path = cache.publish(key, "kernel.so", stage(d, "s", "0123456789"));
        // Same size, different bytes: caught by the sha256 check of a fresh process/instance.
        write_file(path, "0123456780");
    }
    {
        rt::DiskCache cache(dir, 1 << 20);
        EXPECT_FALSE(cache.lookup(key, "kernel.so"));
        EXPECT_FALSE(fs::exists(cache.entry_dir(key)));
    }
    {
        rt::DiskCache cache(dir, 1 << 20);
        std::string path = cache.publish(key, "kernel.so", stage(d, "s", "0123456789"));
        EXPECT_TRUE(cache.lookup(key, "kernel.so"));
        write_file(path, "01234");  // truncated: caught by the size check even when verified
        EXPECT_FALSE(cache.lookup(key, "kernel.so"));
        EXPECT_FALSE(fs::exists(cache.entry_dir(key)));
    }
    {
        rt::DiskCache cache(dir, 1 << 20);
        cache.publish(key, "kernel.so", stage(d, "s", "0123456789"));
        fs::remove(cache.entry_dir(key) + "/manifest");  // partial entry
        EXPECT_FALSE(cache.lookup(key, "kernel.so"));
        EXPECT_FALSE(fs::exists(cache.entry_dir(key)));
    }
    {
        rt::DiskCache cache(dir, 1 << 20);
        cache.publish(key, "kernel.so", stage(d, "s", "0123456789"));
        write_file(cache.entry_dir(key) + "/manifest", "garbage\n");
        EXPECT_FALSE(cache.lookup(key, "kernel.so"));
        EXPECT_FALSE(fs::exists(cache.entry_dir(key)));
        // After removal, a new publish works.
        std::string p = cache.publish(key, "kernel.so", stage(d, "s", "fresh"));
        EXPECT_EQ(cache.lookup(key, "kernel.so"), p);
        EXPECT_EQ(read_file(p), "fresh");
    }
}

TEST(DiskCache, ConcurrentPublishersForkRace) {
    TempDir d;
    std::string dir = d / "cache";
    std::string key = key_of("raced");
    rt::DiskCache(dir, 1 << 20);  // create the directory
    const int kProcs = 8;
    std::string content(200000, 'z');
    std::vector<pid_t> pids;
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    for (int p = 0; p < kProcs; ++p) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            close(go[1]);
            rt::DiskCache cache(dir, 1 << 20);
            std::string staged = stage(d, "staged-" + std::to_string(p), content);
            char c;
            if (read(go[0], &c, 1) != 0) _exit(3);  // wait for the start signal (EOF)
            std::string path = cache.publish(key, "kernel.so", staged);
            bool ok = read_file(path) == content && cache.lookup(key, "kernel.so") == path;
            _exit(ok ? 0 : 1);
        }
        pids.push_back(pid);
    }
    close(go[0]);
    close(go[1]);  // start everybody at once
    for (pid_t pid : pids) {
        int status = 0;
        waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
    rt::DiskCache cache(dir, 1 << 20);
    auto hit = cache.lookup(key, "kernel.so");
    ASSERT_TRUE(hit);
    EXPECT_EQ(read_file(*hit), content);
    EXPECT_EQ(list_dir(dir), (std::vector<std::string>{".usage", key.substr(0, 2)})) << "no temp/trash left";
    EXPECT_EQ(read_file(dir + "/.usage"), std::to_string(cache.total_bytes()) + "\n") << "the winner's entry, once";
    EXPECT_EQ(list_dir(dir + "/" + key.substr(0, 2)), std::vector<std::string>{key});
    EXPECT_EQ(list_dir(cache.entry_dir(key)), (std::vector<std::string>{"kernel.so", "manifest"}));
}

TEST(DiskCache, ConcurrentPublishersThreadRace) {
    TempDir d;
    rt::DiskCache cache(d / "cache", 1 << 20);
    std::string key = key_of("raced-threads");
    const int kThreads = 8;
    std::vector<std::string> staged, results(kThreads);
    for (int t = 0; t < kThreads; ++t) staged.push_back(stage(d, "s" + std::to_string(t), "same"));
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            ++ready;
            while (ready.load() < kThreads) {
            }
            results[t] = cache.publish(key, "kernel.so", staged[t]);
        });
    for (auto& t : threads) t.join();
    for (auto& r : results) EXPECT_EQ(r, cache.entry_dir(key) + "/kernel.so");
    EXPECT_EQ(read_file(results[0]), "same");
    EXPECT_EQ(list_dir(d / "cache"), (std::vector<std::string>{".usage", key.substr(0, 2)}));
    EXPECT_EQ(read_file(d / "cache/.usage"), std::to_string(cache.total_bytes()) + "\n");
}

// A lookup (hit or miss) and a publish that keeps the cache under its limit cost the same however
// many entries there are: none of them visits the entries (issue 11: every compile used to scan
// the whole cache, twice once it was full). Only the first publish into a cache without a usage
// index (one written by an older version) measures it, once.
TEST(DiskCache, LookupAndPublishDoNotScanTheEntries) {
    TempDir d;
    std::string dir = d / "cache";
    const int kEntries = 5000;
    for (int i = 0; i < kEntries; ++i) {  // synthetic entries, as an older version left them
        std::string key = key_of("synthetic-" + std::to_string(i));
        std::string e = dir + "/" + key.substr(0, 2) + "/" + key;
        fs::create_directories(e);
        write_file(e + "/kernel.so", "0123456789");
        write_file(e + "/manifest", "tilewright-cache-manifest 2\nkey " + key + "\nname kernel.so\nsize 10\nsha256 " +
                                        support::sha256_hex("0123456789") + "\n");
    }
    rt::DiskCache cache(dir, uint64_t(1) << 30);
    cache.publish(key_of("first"), "kernel.so", stage(d, "s", "first"));
    EXPECT_EQ(cache.scanned_entries(), uint64_t(kEntries) + 1) << "no usage index yet: measured once";
    const uint64_t after_first = cache.scanned_entries();
    for (int i = 0; i < 50; ++i) {
        std::string key = key_of("new-" + std::to_string(i));
        EXPECT_FALSE(cache.lookup(key, "kernel.so"));
        std::string p = cache.publish(key, "kernel.so", stage(d, "s", std::string(100 + i, 'n')));
        EXPECT_EQ(cache.lookup(key, "kernel.so"), p);
        EXPECT_TRUE(cache.lookup(key_of("synthetic-" + std::to_string(i * 97)), "kernel.so"));
    }
    EXPECT_EQ(cache.scanned_entries(), after_first) << "50 misses, publishes and hits visited entries";
    rt::DiskCache other(dir, uint64_t(1) << 30);  // another process: the index is on disk
    other.publish(key_of("other"), "kernel.so", stage(d, "s", "other"));
    EXPECT_EQ(other.scanned_entries(), 0u);
    EXPECT_EQ(read_file(dir + "/.usage"), std::to_string(other.total_bytes()) + "\n");
}

// Over the limit, a publish scans and evicts down to 90% of it, so the next tenth of the limit is
// published without a scan: the visits per publish stay bounded by a constant, not by the number
// of entries. The cache never stays above its limit.
TEST(DiskCache, EvictionScansAreAmortised) {
    TempDir d;
    std::string dir = d / "cache";
    const std::string payload(1000, 'p');
    uint64_t entry_bytes;
    {
        rt::DiskCache probe(d / "probe", 1 << 20);
        probe.publish(key_of("probe"), "kernel.so", stage(d, "s", payload));
        entry_bytes = probe.total_bytes();
    }
    const int kRoom = 100, kPublishes = 600;
    rt::DiskCache cache(dir, kRoom * entry_bytes);
    int scans = 0;
    for (int i = 0; i < kPublishes; ++i) {
        uint64_t before = cache.scanned_entries();
        cache.publish(key_of("amortised-" + std::to_string(i)), "kernel.so", stage(d, "s", payload));
        if (cache.scanned_entries() != before) ++scans;
        if (i % 25 == 0) EXPECT_LE(cache.total_bytes(), cache.max_bytes()) << i;  // (a scan, not counted)
    }
    // The first publish measures the empty cache; once full, one eviction (of kRoom / 10 + 1
    // entries, down to 90%) per kRoom / 10 + 1 publishes.
    const int evictions = (kPublishes - kRoom) / (kRoom / 10 + 1);
    EXPECT_LE(scans, 1 + evictions + 1);
    EXPECT_GE(scans, evictions);
    EXPECT_LE(cache.total_bytes(), cache.max_bytes());
    EXPECT_GE(cache.entries(), size_t(kRoom * 9 / 10));
    EXPECT_EQ(read_file(dir + "/.usage"), std::to_string(cache.total_bytes()) + "\n");
}

// The usage index is a hint that only decides when to scan: missing or garbage, it is measured
// again; clear() zeroes it; processes publishing at once under its lock add up exactly.
TEST(DiskCache, UsageIndexRecoversAndAddsUpAcrossProcesses) {
    TempDir d;
    std::string dir = d / "cache";
    {
        rt::DiskCache cache(dir, 1 << 20);
        cache.publish(key_of("u1"), "kernel.so", stage(d, "s", "one"));
        write_file(dir + "/.usage", "garbage");
        cache.publish(key_of("u2"), "kernel.so", stage(d, "s", "two"));
        EXPECT_EQ(read_file(dir + "/.usage"), std::to_string(cache.total_bytes()) + "\n");
        fs::remove(dir + "/.usage");
        cache.publish(key_of("u3"), "kernel.so", stage(d, "s", "three"));
        EXPECT_EQ(read_file(dir + "/.usage"), std::to_string(cache.total_bytes()) + "\n");
        cache.clear();
        EXPECT_EQ(read_file(dir + "/.usage"), "0\n");
    }
    const int kProcs = 6, kEach = 30;
    std::vector<pid_t> pids;
    for (int p = 0; p < kProcs; ++p) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            rt::DiskCache cache(dir, 1 << 30);
            for (int i = 0; i < kEach; ++i) {
                std::string name = "p" + std::to_string(p) + "-" + std::to_string(i);
                cache.publish(key_of(name), "kernel.so", stage(d, name, std::string(50 + i * p, 'x')));
            }
            _exit(cache.scanned_entries() == 0 ? 0 : 1);
        }
        pids.push_back(pid);
    }
    for (pid_t pid : pids) {
        int status = 0;
        waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
    rt::DiskCache cache(dir, 1 << 30);
    EXPECT_EQ(cache.entries(), size_t(kProcs * kEach));
    EXPECT_EQ(read_file(dir + "/.usage"), std::to_string(cache.total_bytes()) + "\n");
}


// The bytes one entry of `payload` takes in a cache (its file and its directory's overhead), from a
// probe cache in d / "probe".
static uint64_t entry_bytes_of(const TempDir& d, const std::string& payload) {
    rt::DiskCache probe(d / "probe", 1 << 20);
    probe.publish(std::string(8, 'a'), "kernel.so", stage(d, "s", payload));
    return probe.total_bytes();
}

TEST(DiskCache, EvictsLeastRecentlyUsed) {
    TempDir d;
    std::string dir = d / "cache";
    const std::string payload(1000, 'p');
    auto key = [](char c) { return std::string(8, c); };
    auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); };

    const uint64_t entry_bytes = entry_bytes_of(d, payload);
    ASSERT_GT(entry_bytes, 1000u);
    rt::DiskCache cache(dir, 3 * entry_bytes + entry_bytes / 2);  // room for 3 entries
    cache.publish(key('a'), "kernel.so", stage(d, "s", payload));
    pause();
    cache.publish(key('b'), "kernel.so", stage(d, "s", payload));
    pause();
    cache.publish(key('c'), "kernel.so", stage(d, "s", payload));
    pause();
    ASSERT_TRUE(cache.lookup(key('a'), "kernel.so"));  // a becomes the most recently used
    pause();
    cache.publish(key('d'), "kernel.so", stage(d, "s", payload));  // evicts b (LRU)
    EXPECT_EQ(cache.total_bytes(), 3 * entry_bytes);
    EXPECT_TRUE(fs::exists(cache.entry_dir(key('a'))));
    EXPECT_FALSE(fs::exists(cache.entry_dir(key('b'))));
    EXPECT_TRUE(fs::exists(cache.entry_dir(key('c'))));
    EXPECT_TRUE(fs::exists(cache.entry_dir(key('d'))));

    rt::DiskCache small(dir, entry_bytes + entry_bytes / 2);  // room for 1 entry
    small.evict_to_limit();  // removes c, then a; keeps d (most recent)
    EXPECT_FALSE(fs::exists(cache.entry_dir(key('a'))));
    EXPECT_FALSE(fs::exists(cache.entry_dir(key('c'))));
    EXPECT_TRUE(fs::exists(cache.entry_dir(key('d'))));
    EXPECT_EQ(small.total_bytes(), entry_bytes);

    // An entry larger than the whole limit is still returned by publish (then evicted later).
    rt::DiskCache tiny(dir, 10);
    std::string p = tiny.publish(key('e'), "kernel.so", stage(d, "s", payload));
    EXPECT_TRUE(fs::exists(p));
    EXPECT_FALSE(fs::exists(cache.entry_dir(key('d'))));
}

// Session 23 (h-hunt11b F5, F11, F14 and the empty prefix directories): touch() orders an entry
// after the ones used before it; the cache directory removed under a running process is made
// again; removing an entry removes its emptied prefix directory; a file staged under a group- or
// world-writable umask is published with the cache's mode and is a hit.
TEST(DiskCache, TouchRemakeEmptyPrefixesAndUmask) {
    TempDir d;
    std::string dir = d / "cache";
    const std::string payload(1000, 'p');
    auto key = [](char c) { return std::string(8, c); };
    auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); };
    const uint64_t entry_bytes = entry_bytes_of(d, payload);
    rt::DiskCache cache(dir, 2 * entry_bytes + entry_bytes / 2);  // room for 2 entries
    cache.publish(key('a'), "kernel.so", stage(d, "s", payload));
    pause();
    cache.publish(key('b'), "kernel.so", stage(d, "s", payload));
    pause();
    cache.touch(key('a'));  // a is now the most recently used, without a lookup
    cache.touch(key('z'));  // absent: nothing happens
    pause();
    cache.publish(key('c'), "kernel.so", stage(d, "s", payload));  // evicts b
    EXPECT_TRUE(fs::exists(cache.entry_dir(key('a'))));
    EXPECT_FALSE(fs::exists(cache.entry_dir(key('b'))));
    EXPECT_FALSE(fs::exists(dir + "/bb")) << "the emptied prefix directory is removed with its last entry";

    fs::remove_all(dir);  // an operator's rm -rf under a running service
    EXPECT_TRUE(cache.lock(key('d')).held());
    cache.publish(key('d'), "kernel.so", stage(d, "s", payload));
    EXPECT_TRUE(cache.lookup(key('d'), "kernel.so"));
    struct stat st;
    ASSERT_EQ(stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);

    const mode_t old = umask(0);
    std::string staged = stage(d, "s", payload);
    chmod(staged.c_str(), 0666);
    cache.publish(key('e'), "kernel.so", staged);
    umask(old);
    ASSERT_EQ(stat((cache.entry_dir(key('e')) + "/kernel.so").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_TRUE(cache.lookup(key('e'), "kernel.so"));
}

// Removing an entry (remove, eviction, clear) also removes its prefix directory (the key's first
// two characters) once that is empty, and only then; a later publish under it recreates it.
TEST(DiskCache, RemovingTheLastEntryOfAPrefixRemovesItsDirectory) {
    TempDir d;
    const std::string dir = d / "cache";
    const std::string payload(1000, 'p');
    auto prefixes = [&] {
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(dir))
            if (e.path().filename().string()[0] != '.') names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    };
    rt::DiskCache cache(dir, 1 << 20);
    for (const char* key : {"aa000001", "aa000002", "bb000001"}) cache.publish(key, "kernel.so", stage(d, "s", payload));
    EXPECT_EQ(prefixes(), (std::vector<std::string>{"aa", "bb"}));
    cache.remove("aa000001");  // aa still holds aa000002
    EXPECT_EQ(prefixes(), (std::vector<std::string>{"aa", "bb"}));
    EXPECT_TRUE(cache.lookup("aa000002", "kernel.so"));
    cache.remove("aa000002");
    EXPECT_EQ(prefixes(), (std::vector<std::string>{"bb"}));
    EXPECT_FALSE(cache.lookup("aa000002", "kernel.so"));
    cache.remove("aa000003");  // no such entry, no such prefix: nothing happens
    EXPECT_EQ(prefixes(), (std::vector<std::string>{"bb"}));
    EXPECT_TRUE(fs::exists(cache.publish("aa000003", "kernel.so", stage(d, "s", payload))));  // aa recreated
    EXPECT_EQ(prefixes(), (std::vector<std::string>{"aa", "bb"}));
    rt::DiskCache(dir, 10).evict_to_limit();  // evicts both
    EXPECT_TRUE(prefixes().empty());
    for (const char* key : {"cc000001", "dd000001"}) cache.publish(key, "kernel.so", stage(d, "s", payload));
    cache.clear();
    EXPECT_TRUE(prefixes().empty());
    EXPECT_TRUE(fs::is_directory(dir));  // the cache directory itself stays
}

// Eviction keeps only the entries it removes in memory (a heap by age), not a list of all: it
// must still remove exactly the least recently used entries that bring the cache under its limit,
// oldest first, equal times ordered by path, whatever their sizes and the order they are read in.
TEST(DiskCache, EvictsExactlyTheOldestEntriesOverTheLimit) {
    TempDir d;
    std::string dir = d / "cache";
    rt::DiskCache cache(dir, uint64_t(1) << 30);
    struct Entry {
        std::string path;
        uint64_t bytes;
        time_t sec;
    };
    std::vector<Entry> all;
    uint64_t total = 0;
    for (int i = 0; i < 60; ++i) {
        std::string key = key_of("evict-" + std::to_string(i));
        cache.publish(key, "kernel.so", stage(d, "s", std::string(100 + (i * 37) % 500, 'p')));
        Entry e{cache.entry_dir(key), 0, 1000000 + (i * 7) % 25};  // 25 distinct times: ties by path
        for (const auto& f : fs::directory_iterator(e.path)) e.bytes += fs::file_size(f.path());
        struct timespec t[2] = {{e.sec, 0}, {e.sec, 0}};
        ASSERT_EQ(utimensat(AT_FDCWD, e.path.c_str(), t, 0), 0);
        total += e.bytes;
        all.push_back(e);
    }
    ASSERT_EQ(cache.total_bytes(), total);
    std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) {
        return a.sec != b.sec ? a.sec < b.sec : a.path < b.path;
    });
    for (uint64_t limit : {total - 1, total - total / 3, total / 10, uint64_t(0)}) {
        // expected: in age order, the oldest remaining entries go while the rest exceed the limit
        std::set<std::string> kept;
        uint64_t left = 0;
        for (const auto& e : all)
            if (fs::exists(e.path)) left += e.bytes;
        for (const auto& e : all) {
            if (!fs::exists(e.path)) continue;
            if (left > limit) left -= e.bytes;
            else kept.insert(e.path);
        }
        rt::DiskCache small(dir, limit);
        small.evict_to_limit();
        for (const auto& e : all)
            EXPECT_EQ(fs::exists(e.path), kept.count(e.path) == 1) << "limit " << limit << ": " << e.path;
        EXPECT_EQ(small.total_bytes(), left);
        EXPECT_EQ(small.entries(), kept.size());
    }
    EXPECT_EQ(cache.entries(), 0u);
}

TEST(DiskCache, DirectoriesArePrivate) {
    TempDir d;
    mode_t old = umask(022);
    std::string dir = d / "nested/cache";
    rt::DiskCache cache(dir, 1 << 20);
    std::string key = key_of("perm");
    cache.publish(key, "kernel.so", stage(d, "s", "x"));
    umask(old);
    EXPECT_EQ(mode_of(d / "nested"), 0700u);
    EXPECT_EQ(mode_of(dir), 0700u);
    EXPECT_EQ(mode_of(dir + "/" + key.substr(0, 2)), 0700u);
    EXPECT_EQ(mode_of(cache.entry_dir(key)), 0700u);
    EXPECT_EQ(mode_of(cache.entry_dir(key) + "/manifest") & 077, 0u);

    std::string shared = d / "shared";
    fs::create_directories(shared);
    chmod(shared.c_str(), 0777);
    std::string msg = error_of([&] { rt::DiskCache c(shared, 1 << 20); });
    EXPECT_NE(msg.find("writable by other users"), std::string::npos) << msg;
    EXPECT_NE(msg.find("TW_CACHE_DIR"), std::string::npos) << msg;
    chmod(shared.c_str(), 0770);
    EXPECT_THROW(rt::DiskCache(shared, 1 << 20), std::runtime_error);
    chmod(shared.c_str(), 0755);  // readable by others but not writable: accepted
    EXPECT_NO_THROW(rt::DiskCache(shared, 1 << 20));

    write_file(d / "afile", "x");
    EXPECT_THROW(rt::DiskCache(d / "afile", 1 << 20), std::runtime_error);
}

TEST(DiskCache, ManifestIsBoundToItsKey) {
    TempDir d;
    rt::DiskCache cache(d / "cache", 1 << 20);
    std::string a = key_of("a"), b = key_of("b");
    cache.publish(a, "kernel.so", stage(d, "sa", "library a"));
    cache.publish(b, "kernel.so", stage(d, "sb", "library b"));
    // Swap a's whole entry (artefact and manifest) in under b's key.
    fs::remove_all(cache.entry_dir(b));
    fs::copy(cache.entry_dir(a), cache.entry_dir(b));
    EXPECT_FALSE(cache.lookup(b, "kernel.so")) << "another key's entry must not be accepted";
    EXPECT_FALSE(fs::exists(cache.entry_dir(b)));
    EXPECT_TRUE(cache.lookup(a, "kernel.so"));
}

TEST(DiskCache, EveryLookupVerifiesTheContent) {
    TempDir d;
    rt::DiskCache cache(d / "cache", 1 << 20);
    std::string key = key_of("k");
    std::string path = cache.publish(key, "kernel.so", stage(d, "s", "0123456789"));
    ASSERT_TRUE(cache.lookup(key, "kernel.so"));
    {  // the same inode modified in place after this process verified it
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(3);
        f.put('X');
    }
    EXPECT_FALSE(cache.lookup(key, "kernel.so"));
    EXPECT_FALSE(fs::exists(cache.entry_dir(key)));
}

TEST(DiskCache, ArtefactMustBePrivateRegularFile) {
    TempDir d;
    rt::DiskCache cache(d / "cache", 1 << 20);
    std::string key = key_of("k");
    std::string path = cache.publish(key, "kernel.so", stage(d, "s", "0123456789"));
    chmod(path.c_str(), 0666);
    EXPECT_FALSE(cache.lookup(key, "kernel.so")) << "a world-writable artefact is not trusted";
    path = cache.publish(key, "kernel.so", stage(d, "s", "0123456789"));
    std::string real = d / "elsewhere";
    write_file(real, "0123456789");
    fs::remove(path);
    fs::create_symlink(real, path);
    EXPECT_FALSE(cache.lookup(key, "kernel.so")) << "a link is not followed";
}

TEST(DiskCache, ExistingDirectoryModeIsNeverChanged) {
    TempDir d;
    std::string shared = d / "shared";
    fs::create_directories(shared);
    chmod(shared.c_str(), 01777);
    EXPECT_THROW(rt::ensure_private_dir(shared, "cache directory"), std::runtime_error);
    EXPECT_EQ(mode_of(shared), 01777u);
    if (geteuid() == 0) {
        std::string other = d / "other";
        fs::create_directories(other);
        chmod(other.c_str(), 0700);
        ASSERT_EQ(chown(other.c_str(), 4242, 4242), 0);
        std::string msg = error_of([&] { rt::ensure_private_dir(other, "cache directory"); });
        EXPECT_NE(msg.find("owned by uid 4242"), std::string::npos) << msg;
    }
}

TEST(DiskCache, KeyLockSerialisesProcesses) {
    TempDir d;
    std::string dir = d / "cache";
    rt::DiskCache cache(dir, 1 << 20);
    std::string key = key_of("locked");
    std::string log = d / "log";
    const int kProcs = 4;
    std::vector<pid_t> pids;
    for (int p = 0; p < kProcs; ++p) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            rt::DiskCache c(dir, 1 << 20);
            int built = 0;
            if (!c.lookup(key, "kernel.so")) {
                auto lock = c.lock(key);
                if (!c.lookup(key, "kernel.so")) {  // the one that builds
                    usleep(100000);
                    c.publish(key, "kernel.so", stage(d, "s" + std::to_string(p), "built"));
                    built = 1;
                }
            }
            std::ofstream(log, std::ios::app) << built << "\n";
            _exit(0);
        }
        pids.push_back(pid);
    }
    for (pid_t pid : pids) {
        int st = 0;
        waitpid(pid, &st, 0);
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    std::string text = read_file(log);
    EXPECT_EQ(std::count(text.begin(), text.end(), '1'), 1) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), kProcs) << text;
    // A holder that dies leaves no stale lock.
    pid_t pid = fork();
    if (pid == 0) {
        auto lock = rt::DiskCache(dir, 1 << 20).lock(key_of("crash"));
        _exit(1);  // no destructor: the kernel releases the flock
    }
    int st = 0;
    waitpid(pid, &st, 0);
    auto lock = cache.lock(key_of("crash"));  // does not block
    EXPECT_TRUE(lock.held());
}

// A child process that takes a lock (`take`, run in the child: false = it could not) and then
// stops itself (SIGSTOP) holding it: a holder that makes no progress. end() kills it (the lock is
// then free); the destructor does too if the test did not.
class StoppedHolder {
 public:
  explicit StoppedHolder(const std::function<bool()>& take) {
    if (pipe(ready_) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      if (!take()) _exit(1);
      char c = 1;
      (void)!write(ready_[1], &c, 1);
      raise(SIGSTOP);
      _exit(0);
    }
    char c;
    ok_ = pid_ > 0 && read(ready_[0], &c, 1) == 1;
  }
  StoppedHolder(const StoppedHolder&) = delete;
  StoppedHolder& operator=(const StoppedHolder&) = delete;
  ~StoppedHolder() {
    end();
    close(ready_[0]);
    close(ready_[1]);
  }
  bool holding() const { return ok_; }  // the child took the lock and stopped
  void end() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }

 private:
  int ready_[2] = {-1, -1};
  pid_t pid_ = -1;
  bool ok_ = false;
};

TEST(DiskCache, UsageLockWaitIsBounded) {
    // The usage index is bookkeeping: a process stopped while it holds the index's lock must not
    // stall a publish (or clear) for longer than the bound, and a lookup never takes the lock.
    // Past the bound the index is not updated and a warning names it.
    TempDir d;
    std::string dir = d / "cache";
    rt::DiskCache cache(dir, 1 << 20, std::chrono::milliseconds(300));
    StoppedHolder holder([&] {
        int fd = open((dir + "/.usage").c_str(), O_RDWR | O_CREAT, 0600);
        return fd >= 0 && flock(fd, LOCK_EX) == 0;
    });
    ASSERT_TRUE(holder.holding());
    std::vector<std::string> warnings;
    rt::set_log_sink([&](rt::LogLevel level, const std::string& m) {
        if (level == rt::LogLevel::warning) warnings.push_back(m);
    });
    const std::string key = key_of("stalled");
    auto t0 = std::chrono::steady_clock::now();
    std::string path = cache.publish(key, "kernel.so", stage(d, "s", "0123456789"));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rt::set_log_sink({});
    EXPECT_LT(s, 4.0);  // the bound is 0.3 s; generous for a loaded machine, far below "forever"
    EXPECT_EQ(cache.lookup(key, "kernel.so"), path);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find(dir + "/.usage"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("continue or end that process"), std::string::npos) << warnings[0];
    cache.clear();  // also bounded; the entries are removed all the same
    EXPECT_EQ(cache.entries(), 0u);
    holder.end();
    // The holder died: the next publish holds the index and records a size again.
    cache.publish(key_of("after"), "kernel.so", stage(d, "s", "0123456789"));
    std::ifstream in(dir + "/.usage");
    uint64_t recorded = 0;
    ASSERT_TRUE(in >> recorded);
    EXPECT_EQ(recorded, cache.total_bytes());
}

TEST(DiskCache, KeyLockWaitIsBounded) {
    // A holder that makes no progress (here: stopped) must not hang the others: past the bound
    // the waiter gets a lock that is not held and builds the key itself.
    TempDir d;
    std::string dir = d / "cache";
    rt::DiskCache cache(dir, 1 << 20);
    const std::string key = key_of("stuck");
    StoppedHolder holder([&] {
        static auto held = rt::DiskCache(dir, 1 << 20).lock(key);  // kept while the child is stopped
        return held.held();
    });
    ASSERT_TRUE(holder.holding());
    auto lock = cache.lock(key, std::chrono::milliseconds(300));
    EXPECT_FALSE(lock.held());
    holder.end();
    auto free_lock = cache.lock(key, std::chrono::milliseconds(300));  // the holder died: the lock is free
    EXPECT_TRUE(free_lock.held());
}


// fork() while other threads hold Tilewright's locks (docs/testing.md, "fork"): the child gets
// them unlocked, whether held across work by a thread that does not exist in the child (made
// afresh) or a leaf lock some thread takes and drops all the time (the fork waits for it).
TEST(Fork, ChildGetsLocksOtherThreadsHeld) {
    auto& across = support::fork_safe_mutex();
    auto& leaf = support::fork_safe_mutex(/*leaf=*/true);
    std::mutex m;
    std::condition_variable cv;
    bool held = false, done = false;
    std::thread holder([&] {
        std::lock_guard<support::ForkSafeMutex> g(across);
        std::unique_lock<std::mutex> lk(m);
        held = true;
        cv.notify_all();
        cv.wait(lk, [&] { return done; });
    });
    {
        std::unique_lock<std::mutex> lk(m);
        cv.wait(lk, [&] { return held; });
    }
    std::atomic<bool> stop{false};
    std::atomic<long> rounds{0};
    std::thread churn([&] {
        while (!stop) {
            std::lock_guard<support::ForkSafeMutex> g(leaf);
            ++rounds;
        }
    });
    while (rounds.load() < 1000) std::this_thread::yield();
    const uint64_t generation = support::fork_generation();
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(20);  // a hang ends as SIGALRM
        across.lock();
        leaf.lock();
        _exit(support::fork_generation() == generation + 1 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_EQ(support::fork_generation(), generation);
    stop = true;
    churn.join();
    {
        std::lock_guard<std::mutex> lk(m);
        done = true;
    }
    cv.notify_all();
    holder.join();
    EXPECT_TRUE(leaf.try_lock());  // the parent's locks are as they were: free once released
    leaf.unlock();
    EXPECT_TRUE(across.try_lock());
    across.unlock();
}

// A cache key's lock held by another thread at the fork, and the child waiting for it: the
// child's copy of the holder's descriptor kept the flock (of the open file both copies share)
// after the holder unlinked and closed it, and the child, polling that same file, waited for
// its own copy for the key lock's whole bound. The holder unlocks before closing, and the child
// closes its copies of held locks at the fork.
TEST(Fork, CacheLockHeldAtForkIsFreeInTheChildOnceReleased) {
    TempDir d;
    std::string dir = d / "cache";
    rt::DiskCache cache(dir, 1 << 20);
    const std::string key = key_of("held at fork");
    std::mutex m;
    std::condition_variable cv;
    int stage = 0;  // 1: the thread holds the lock; 2: release it; 3: released
    std::thread holder([&] {
        auto lock = cache.lock(key);
        std::unique_lock<std::mutex> lk(m);
        stage = lock.held() ? 1 : -1;
        cv.notify_all();
        cv.wait(lk, [&] { return stage == 2; });
        { rt::DiskCache::KeyLock gone = std::move(lock); }
        stage = 3;
        cv.notify_all();
    });
    {
        std::unique_lock<std::mutex> lk(m);
        cv.wait(lk, [&] { return stage != 0; });
        ASSERT_EQ(stage, 1);
    }
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(20);
        rt::DiskCache child_cache(dir, 1 << 20);
        // Waits from before the release (the parent releases 0.3 s after the fork).
        auto lock = child_cache.lock(key, std::chrono::milliseconds(5000));
        _exit(lock.held() ? 0 : 1);
    }
    usleep(300000);
    {
        std::unique_lock<std::mutex> lk(m);
        stage = 2;
        cv.notify_all();
        cv.wait(lk, [&] { return stage == 3; });
    }
    holder.join();
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The write end of a pipe the parent reads to EOF (run_process: a compiler's output), open at a
// fork made by another thread: the child's copy kept the read from ending while the child lived
// (the parent's compile hung; with the child waiting for that compile's cache lock, both did).
// Registered descriptors are closed in the child.
TEST(Fork, ChildClosesItsCopyOfAPipeTheParentReadsToEof) {
    int out[2], go[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    ASSERT_EQ(pipe(go), 0);
    support::close_in_forked_child(out[0]);
    support::close_in_forked_child(out[1]);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(20);
        close(go[1]);
        char c;
        (void)!read(go[0], &c, 1);  // lives until the parent has seen EOF (or gave up)
        _exit(0);
    }
    close(go[0]);
    support::keep_in_forked_child(out[1]);
    close(out[1]);
    struct pollfd p = {out[0], POLLIN, 0};
    const int ready = poll(&p, 1, 5000);  // EOF at once when no copy of the write end is left
    char buf[16];
    const ssize_t n = ready == 1 ? read(out[0], buf, sizeof buf) : -1;
    char c = 1;
    (void)!write(go[1], &c, 1);
    int status = 0;
    waitpid(pid, &status, 0);
    support::keep_in_forked_child(out[0]);
    close(out[0]);
    close(go[1]);
    EXPECT_EQ(ready, 1);
    EXPECT_EQ(n, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}
