// Machine peaks for bench/run.py: FMA throughput and copy bandwidth, with 1..n threads.
//
// Compiled by bench/run.py with the host compiler (-O3 -march=native -shared -fPIC -pthread)
// into a temporary directory (cached by a hash of this file, the compiler and the flags) and
// called through ctypes. Not part of the library.
//
//   tw_peak_isa()                      "avx512", "avx2" or "scalar": the vector ISA the FMA loop uses
//   tw_peak_accumulators()             independent vector accumulators of the FMA loop
//   tw_peak_core_ghz(secs)             core clock (GHz) from a chain of dependent integer adds
//   tw_peak_fma_gflops(threads, secs)  fp32 GFLOP/s (2 flops per FMA lane) of all threads together,
//                                      best of short trials over about `secs`
//   tw_peak_copy_gbs(threads, bytes, nt, reps) GB/s (1e9) of a copy loop, bytes read + bytes
//                                      written, over two arrays of `bytes` each; nt=1 uses streaming
//                                      stores
//   tw_copy_probe_new(threads, bytes)  the same copy loop kept ready (two arrays of `bytes` on 2 MiB
//   tw_copy_probe_run(probe, nt)       pages, and a team of threads that sleeps between passes) so a
//   tw_copy_probe_read(probe)          caller can time single passes between its own calls: one pass
//   tw_copy_probe_free(probe)          of tw_copy_probe_run copies every byte once, one pass of
//                                      tw_copy_probe_read reads both arrays once (no stores: the
//                                      bytes a read-only kernel of tw_copy_probe_bytes reads); each
//                                      returns its seconds (release to the last chunk's end)
//   tw_copy_probe_read_sum(probe)      the sum of what the last read pass read (for tests)
//   tw_peak_read_gbs(threads, bytes, reps) GB/s (1e9) of that read pass over two arrays of `bytes`
//
// The passes are split the way the library's thread pool splits a grid (src/runtime/thread_pool.h):
// each thread starts on its contiguous share, in 2 MiB chunks, and a thread that finishes takes the
// remaining chunks of the others. With fixed halves (sessions 21-23) a pass took as long as its
// slower thread, so on a shared 2-core machine a pass in which another process held one core for a
// while read at about the 1-thread rate: the 2-thread interleaved copy's median was half its best
// (paged decode fp32, session 23: 33.1 against 65.2 GB/s), while the kernel it was the reference for
// balances such a pass over its pool. The arrays are madvised to 2 MiB pages (THP `madvise` is the
// common setting), as numpy madvises the arrays of the cases (4 MiB and more).
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

using clk = std::chrono::steady_clock;

double now() { return std::chrono::duration<double>(clk::now().time_since_epoch()).count(); }

// Runs fn(thread_index) on `threads` threads (the caller is thread 0), all released together
// after every thread has started. Returns the wall time from the release to the last finish.
template <class F>
double run_threads(int threads, F fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {}
      fn(t);
    });
  while (ready.load() != threads - 1) {}
  double t0 = now();
  go.store(true, std::memory_order_release);
  fn(0);
  for (auto& th : pool) th.join();
  return now() - t0;
}

#if defined(__AVX512F__)
constexpr const char* kIsa = "avx512";
constexpr int kLanes = 16;
using vec = __m512;
inline vec vset(float x) { return _mm512_set1_ps(x); }
inline vec vfma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
inline float vfirst(vec a) { return _mm512_cvtss_f32(a); }
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kIsa = "avx2";
constexpr int kLanes = 8;
using vec = __m256;
inline vec vset(float x) { return _mm256_set1_ps(x); }
inline vec vfma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vfirst(vec a) { return _mm256_cvtss_f32(a); }
#else
constexpr const char* kIsa = "scalar";
constexpr int kLanes = 1;
using vec = float;
inline vec vset(float x) { return x; }
inline vec vfma(vec a, vec b, vec c) { return a * b + c; }
inline float vfirst(vec a) { return a; }
#endif

// Independent accumulators: enough to cover FMA latency x FMA pipes on every current x86 core
// (2 pipes x 4 cycles = 8 on Zen 2-5 and Skylake, 2 x 5 = 10 on Haswell), and no more than fit
// in the vector registers together with the two constants: 16 ymm registers with AVX2 hold 12 +
// 2, 32 zmm registers with AVX-512 hold 24 + 2. (With 16 accumulators the AVX2 build spilled
// three of them to the stack every iteration, and the store-to-load latency of those chains,
// not the FMA pipes, bounded the loop: the probe read below the gemm on an AVX2 Zen 3.)
// acc = acc * 0.99999 + 1e-5 stays near 1 (no overflow, no denormals). Without -ffast-math the
// compiler may not reassociate the chains, so every FMA is executed.
#if defined(__AVX512F__)
constexpr int kAcc = 24;
#else
constexpr int kAcc = 12;
#endif

float fma_loop(long iters) {
  vec acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = vset(0.5f + 0.01f * i);
  const vec a = vset(0.99999f), b = vset(1e-5f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 32
    for (int i = 0; i < kAcc; ++i) acc[i] = vfma(acc[i], a, b);
  }
  float s = 0;
  for (int i = 0; i < kAcc; ++i) s += vfirst(acc[i]);
  return s;
}

volatile float g_sink;
volatile uint64_t g_one = 1;  // the adds' addend, unknown to the compiler

// `iters` x 8 dependent integer adds of a register: one per core clock cycle on every x86 core
// since the Pentium Pro (1-cycle ALU latency, and the chain forbids overlap), so iterations /
// seconds is the core clock actually running, turbo included (unlike the TSC, which ticks at a
// fixed rate). The addend is a register, not an immediate: Intel cores since Golden Cove (Alder
// Lake, Sapphire Rapids) fold chains of `add $imm, reg` at rename, several per cycle (an
// immediate chain read 4.7-9.2 GHz on a 2.2 GHz Sapphire Rapids; this one 2.17 GHz, and a chain of
// 3-cycle `imul`s 2.20 GHz).
void add_chain(long iters) {
#if defined(__x86_64__)
  uint64_t x = 0;
  const uint64_t one = g_one;
  for (long it = 0; it < iters; ++it)
    asm volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
                 "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
                 : "+r"(x)
                 : "r"(one));
  g_sink = (float)x;
#else
  (void)iters;
#endif
}

void copy_range(const float* __restrict src, float* __restrict dst, size_t n, bool nt) {
#if defined(__AVX512F__)
  size_t i = 0;
  if (nt) {
    for (; i + 64 <= n; i += 64) {
      __m512 a = _mm512_load_ps(src + i), b = _mm512_load_ps(src + i + 16);
      __m512 c = _mm512_load_ps(src + i + 32), d = _mm512_load_ps(src + i + 48);
      _mm512_stream_ps(dst + i, a); _mm512_stream_ps(dst + i + 16, b);
      _mm512_stream_ps(dst + i + 32, c); _mm512_stream_ps(dst + i + 48, d);
    }
    _mm_sfence();
  } else {
    for (; i + 64 <= n; i += 64) {
      __m512 a = _mm512_load_ps(src + i), b = _mm512_load_ps(src + i + 16);
      __m512 c = _mm512_load_ps(src + i + 32), d = _mm512_load_ps(src + i + 48);
      _mm512_store_ps(dst + i, a); _mm512_store_ps(dst + i + 16, b);
      _mm512_store_ps(dst + i + 32, c); _mm512_store_ps(dst + i + 48, d);
    }
  }
  for (; i < n; ++i) dst[i] = src[i];
#elif defined(__AVX2__)
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 a = _mm256_load_ps(src + i), b = _mm256_load_ps(src + i + 8);
    __m256 c = _mm256_load_ps(src + i + 16), d = _mm256_load_ps(src + i + 24);
    if (nt) {
      _mm256_stream_ps(dst + i, a); _mm256_stream_ps(dst + i + 8, b);
      _mm256_stream_ps(dst + i + 16, c); _mm256_stream_ps(dst + i + 24, d);
    } else {
      _mm256_store_ps(dst + i, a); _mm256_store_ps(dst + i + 8, b);
      _mm256_store_ps(dst + i + 16, c); _mm256_store_ps(dst + i + 24, d);
    }
  }
  if (nt) _mm_sfence();
  for (; i < n; ++i) dst[i] = src[i];
#else
  (void)nt;
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
#endif
}

// Sum of n floats (n a multiple of 64, as every chunk of a pass), 8 independent vector
// accumulators: the loads, not the adds, bound it (2 loads a cycle against 2 adds, add latency 3).
float read_range(const float* __restrict p, size_t n) {
#if defined(__AVX512F__)
  __m512 a[8];
  for (auto& x : a) x = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 128 <= n; i += 128)
    for (int j = 0; j < 8; ++j) a[j] = _mm512_add_ps(a[j], _mm512_load_ps(p + i + 16 * j));
  for (; i + 16 <= n; i += 16) a[0] = _mm512_add_ps(a[0], _mm512_load_ps(p + i));
  for (int j = 1; j < 8; ++j) a[0] = _mm512_add_ps(a[0], a[j]);
  alignas(64) float t[16];
  _mm512_store_ps(t, a[0]);
  float s = 0;
  for (float x : t) s += x;
  return s;
#elif defined(__AVX2__)
  __m256 a[8];
  for (auto& x : a) x = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 8; ++j) a[j] = _mm256_add_ps(a[j], _mm256_load_ps(p + i + 8 * j));
  for (int j = 1; j < 8; ++j) a[0] = _mm256_add_ps(a[0], a[j]);
  alignas(32) float t[8];
  _mm256_store_ps(t, a[0]);
  float s = 0;
  for (float x : t) s += x;
  return s;
#else
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // independent chains, as the vector forms
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  float s = 0;
  for (float x : a) s += x;
  return s;
#endif
}

// The iteration count for which run(iters) takes about `trial` seconds on one thread (from a
// timed run of at least trial / 2, growing `iters` from the given start).
template <class F>
long calibrate(F run, long iters, double trial) {
  for (;;) {
    double t0 = now();
    run(iters);
    double dt = now() - t0;
    if (dt > trial / 2) return std::max<long>(iters, (long)(iters * trial / dt));
    iters *= 4;
  }
}

// The least of `trials` results of time_one() (seconds).
template <class F>
double best_of(int trials, F time_one) {
  double best = 1e30;
  for (int r = 0; r < trials; ++r) best = std::min(best, time_one());
  return best;
}

// A team of threads - 1 workers (the caller is thread 0) that sleep between passes. run(fn) wakes
// them, releases every thread at once when all are awake, runs fn(t) on each, waits for every
// thread to leave fn and returns the release time (now()); the wake-up is before it. Its waits
// yield the core: a woken worker may be queued on the caller's core, and a caller spinning on it
// there held the core until its time slice ended.
struct Team {
  int threads;
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;
  bool quit = false;
  std::function<void(int)> job;
  std::atomic<int> ready{0}, done{0};
  std::atomic<bool> go{false};

  explicit Team(int n) : threads(n) {
    for (int t = 1; t < n; ++t)
      workers.emplace_back([this, t] {
        uint64_t seen = 0;
        for (;;) {
          {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return quit || generation != seen; });
            if (quit) return;
            seen = generation;
          }
          ready.fetch_add(1);
          while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
          job(t);
          done.fetch_add(1, std::memory_order_release);
        }
      });
  }
  ~Team() {
    {
      std::lock_guard<std::mutex> lock(mu);
      quit = true;
    }
    cv.notify_all();
    for (auto& w : workers) w.join();
  }
  template <class F>
  double run(F fn) {
    job = fn;
    ready.store(0);
    done.store(0);
    go.store(false);
    {
      std::lock_guard<std::mutex> lock(mu);
      ++generation;
    }
    cv.notify_all();
    while (ready.load() != threads - 1) std::this_thread::yield();
    const double t0 = now();
    go.store(true, std::memory_order_release);
    job(0);
    while (done.load(std::memory_order_acquire) != threads - 1) std::this_thread::yield();
    return t0;
  }
};

constexpr size_t kChunk = (size_t(2) << 20) / sizeof(float);  // floats per chunk: 2 MiB

struct CopyProbe {
  int threads;
  size_t per;  // floats per thread's share, a multiple of 64
  float* src;
  float* dst;
  size_t alloc_bytes;
  Team* team;
  std::vector<std::atomic<size_t>> next;  // per share: its next unclaimed chunk
  double read_sum = 0;                     // the last read pass's sum of both arrays
  CopyProbe(int n, size_t per_) : threads(n), per(per_), src(nullptr), dst(nullptr), alloc_bytes(0), team(nullptr), next(n) {}

  // fn(begin, count) over every float index once, split as the library's pool splits a grid: each
  // thread its own share's chunks first, then the others' remaining ones. Returns the seconds from
  // the release to the end of the last chunk: a worker that is not running when the others have
  // taken its chunks does not extend the pass (as a pool worker that wakes late does not extend a
  // call: it finds no index left).
  template <class F>
  double pass(F fn) {
    for (auto& x : next) x.store(0);
    const size_t chunks = (per + kChunk - 1) / kChunk;
    std::atomic<size_t> finished{0};
    double end = 0;  // written by the thread that finishes the last chunk, read after run()
    const double t0 = team->run([&](int t) {
      for (int k = 0; k < threads; ++k) {
        const int s = (t + k) % threads;
        for (size_t c; (c = next[s].fetch_add(1)) < chunks;) {
          const size_t b = s * per + c * kChunk;
          fn(b, std::min(kChunk, per - c * kChunk));
          if (finished.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks * threads) end = now();
        }
      }
    });
    return end - t0;
  }
};

float* alloc_big(size_t bytes) {
  void* p = std::aligned_alloc(size_t(2) << 20, bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p) madvise(p, bytes, MADV_HUGEPAGE);  // best effort: a kernel without THP keeps 4 KiB pages
#endif
  return static_cast<float*>(p);
}

}  // namespace

extern "C" {

const char* tw_peak_isa() { return kIsa; }

int tw_peak_lanes() { return kLanes; }

// The best of many short trials (about 4 ms each, `seconds` in all, at least 20) of `threads`
// threads each running the FMA loop: on a shared, noisy machine the least disturbed trial is the
// closest to what the hardware does.
double tw_peak_fma_gflops(int threads, double seconds) {
  if (threads < 1) threads = 1;
  const double trial = 0.004;  // short: on a shared machine some trials run undisturbed
  const long iters = calibrate([](long n) { g_sink = fma_loop(n); }, 1 << 16, trial);
  const double best = best_of(std::max(20, (int)(seconds / trial)), [&] {
    return run_threads(threads, [&](int) { g_sink = fma_loop(iters); });
  });
  return 2.0 * kLanes * kAcc * (double)iters * threads / best * 1e-9;
}

int tw_peak_accumulators() { return kAcc; }

// The core clock in GHz from a chain of dependent integer adds (1 cycle each), best of many
// 0.5 ms trials over about `seconds` on one thread; 0 where the probe does not exist (not x86-64).
// GFLOP/s / GHz is then the FMA flops per cycle the probe reached, a figure load does not bias
// much (both are best-of, and a disturbed trial is slower in both).
double tw_peak_core_ghz(double seconds) {
#if defined(__x86_64__)
  const double trial = 0.0005;  // short: on a shared machine some trials run undisturbed
  const long iters = calibrate(add_chain, 1 << 10, trial);
  const double best = best_of(std::max(20, (int)(seconds / trial)), [&] {
    double t0 = now();
    add_chain(iters);
    return now() - t0;
  });
  return 8.0 * (double)iters / best * 1e-9;
#else
  (void)seconds;
  return 0.0;
#endif
}


// Two arrays of about `bytes` each (rounded down to 64 floats per thread; allocated in whole 2 MiB
// pages), each thread's share first touched by the thread that starts on it. nullptr when out of
// memory.
void* tw_copy_probe_new(int threads, double bytes) {
  if (threads < 1) threads = 1;
  size_t n = (size_t)(bytes / sizeof(float)) / (64 * threads) * (64 * threads);
  if (n == 0) n = 64 * (size_t)threads;
  auto* p = new CopyProbe(threads, n / threads);
  const size_t huge = size_t(2) << 20;
  p->alloc_bytes = (n * sizeof(float) + huge - 1) / huge * huge;
  p->src = alloc_big(p->alloc_bytes);
  p->dst = alloc_big(p->alloc_bytes);
  if (!p->src || !p->dst) {
    std::free(p->src);
    std::free(p->dst);
    delete p;
    return nullptr;
  }
  p->team = new Team(threads);
  p->team->run([&](int t) {
    for (size_t i = t * p->per; i < (t + 1) * p->per; ++i) p->src[i] = (float)(i & 1023);
    std::memset(p->dst + t * p->per, 0, p->per * sizeof(float));
  });
  return p;
}

// Bytes one pass reads + writes (tw_copy_probe_run), or reads (tw_copy_probe_read).
double tw_copy_probe_bytes(void* probe) {
  auto* p = static_cast<CopyProbe*>(probe);
  return 2.0 * (double)(p->per * p->threads * sizeof(float));
}

// One copy pass, src to dst; seconds from the release to the end of the last chunk.
double tw_copy_probe_run(void* probe, int nt) {
  auto* p = static_cast<CopyProbe*>(probe);
  double dt = p->pass([&](size_t b, size_t n) { copy_range(p->src + b, p->dst + b, n, nt != 0); });
  g_sink = p->dst[p->per / 2];
  return dt;
}

// One read pass over both arrays (no stores); seconds from the release to the end of the last
// chunk. The sum of every element read is kept (tw_copy_probe_read_sum: what the tests check).
double tw_copy_probe_read(void* probe) {
  auto* p = static_cast<CopyProbe*>(probe);
  std::mutex mu;
  double total = 0;
  double dt = p->pass([&](size_t b, size_t n) {
    const double s = (double)read_range(p->src + b, n) + (double)read_range(p->dst + b, n);
    std::lock_guard<std::mutex> lock(mu);  // once per 2 MiB chunk
    total += s;
  });
  p->read_sum = total;
  return dt;
}

// The sum of the elements the last tw_copy_probe_read read (float sums per chunk).
double tw_copy_probe_read_sum(void* probe) { return static_cast<CopyProbe*>(probe)->read_sum; }

void tw_copy_probe_free(void* probe) {
  auto* p = static_cast<CopyProbe*>(probe);
  if (!p) return;
  delete p->team;
  std::free(p->src);
  std::free(p->dst);
  delete p;
}

// Copy `bytes` from one array to another (the pass split as tw_copy_probe_run splits it), best of
// `reps` after one untimed pass. Counts bytes read + bytes written.
double tw_peak_copy_gbs(int threads, double bytes, int nt, int reps) {
  if (reps < 1) reps = 1;
  void* p = tw_copy_probe_new(threads, bytes);
  if (!p) return -1.0;
  tw_copy_probe_run(p, nt);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) best = std::min(best, tw_copy_probe_run(p, nt));
  double gbs = tw_copy_probe_bytes(p) / best * 1e-9;
  tw_copy_probe_free(p);
  return gbs;
}

// Read two arrays of `bytes` each (tw_copy_probe_read), best of `reps` after one untimed pass.
// Counts the bytes read.
double tw_peak_read_gbs(int threads, double bytes, int reps) {
  if (reps < 1) reps = 1;
  void* p = tw_copy_probe_new(threads, bytes);
  if (!p) return -1.0;
  tw_copy_probe_read(p);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) best = std::min(best, tw_copy_probe_read(p));
  double gbs = tw_copy_probe_bytes(p) / best * 1e-9;
  tw_copy_probe_free(p);
  return gbs;
}

}  // extern "C"
