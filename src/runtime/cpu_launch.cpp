// launch_cpu: runs one launch of a compiled CPU kernel (tw_cpu/abi.h) on the thread pool.
#include "runtime/cpu_launch.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "runtime/thread_pool.h"
#include "runtime/unwritten.h"
#include "support/fork.h"
#include "support/interrupt.h"
#include "tw_cpu/check.h"
#include "tw_cpu/types.h"

namespace tw::runtime {

namespace {

// Scalar argument stored in the parameter's dtype.
struct ScalarSlot {
  alignas(8) unsigned char bytes[8];
};

ScalarSlot to_slot(const Arg& a, ir::DType t) {
  ScalarSlot s{};
  double d = std::holds_alternative<double>(a) ? std::get<double>(a) : static_cast<double>(std::get<int64_t>(a));
  int64_t i = std::holds_alternative<int64_t>(a) ? std::get<int64_t>(a) : static_cast<int64_t>(d);
  auto put = [&](auto v) { std::memcpy(s.bytes, &v, sizeof v); };
  switch (t.code) {
    case ir::DTypeCode::f16: put(tw_cpu::from_f32<tw_cpu::f16>(static_cast<float>(d))); break;
    case ir::DTypeCode::bf16: put(tw_cpu::from_f32<tw_cpu::bf16>(static_cast<float>(d))); break;
    case ir::DTypeCode::f32: put(static_cast<float>(d)); break;
    case ir::DTypeCode::f64: put(d); break;
    case ir::DTypeCode::i8: put(static_cast<int8_t>(i)); break;
    case ir::DTypeCode::i32: put(static_cast<int32_t>(i)); break;
    case ir::DTypeCode::i64: put(i); break;
    case ir::DTypeCode::u8: put(static_cast<uint8_t>(i)); break;
    case ir::DTypeCode::boolean: put(static_cast<bool>(i)); break;
  }
  return s;
}

// Whether this thread is inside launch_cpu.
thread_local bool t_launching = false;

// Blocks whose tiles need more than this run on a thread with a large stack, not the caller's.
constexpr int64_t kCallerStackTileBytes = int64_t(1) << 20;

// The launch lock, held across a launch: a forked child gets it unlocked (support/fork.h), since
// a thread of the parent inside a kernel call at the fork would hold it forever there.
support::ForkSafeMutex& launch_mutex() {
  static auto& mu = support::fork_safe_mutex();
  return mu;
}

// Runs launches whose tiles do not fit the caller's stack: one long-lived thread with the pool
// workers' stack size (64 MiB), started on first use and reused, so a launch costs two wake-ups
// rather than a thread creation, and the thread's stack pages and per-thread gemm caches
// (tw_cpu/gemm.h) stay warm between launches. Calls are serialised by its own mutex (launches
// are already serialised by launch_mutex). After fork() the child starts its own thread.
class BigStackThread {
 public:
  static BigStackThread& get() {
    static BigStackThread* t = nullptr;  // never destroyed (a worker may outlive static destructors)
    static auto& mu = support::fork_safe_mutex();  // a forked child gets it unlocked
    std::lock_guard<support::ForkSafeMutex> g(mu);
    // A forked child's copy has no thread (and its locks may be held): the child starts its own.
    if (!t || t->fork_generation_ != support::fork_generation()) t = new BigStackThread();
    return *t;
  }

  // Runs fn there; `poll`, if given, is called here about every 50 ms until fn has returned.
  template <class F>
  void run(F& fn, const std::function<void()>* poll) {
    std::lock_guard<std::mutex> one(call_);
    std::function<void()> job = [&fn] { fn(); };
    std::unique_lock<std::mutex> lk(m_);
    job_ = &job;
    error_ = nullptr;
    cv_.notify_all();
    while (!cv_.wait_for(lk, std::chrono::milliseconds(50), [this] { return job_ == nullptr; }))
      if (poll) {
        lk.unlock();
        (*poll)();
        lk.lock();
      }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  BigStackThread() : fork_generation_(support::fork_generation()) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, ThreadPool::kWorkerStackBytes);
    pthread_t t;
    int rc = pthread_create(&t, &attr, &BigStackThread::body, this);
    pthread_attr_destroy(&attr);
    if (rc != 0)  // its stack past RLIMIT_AS, a thread limit: an error, as the pool's (thread_pool.cpp)
      throw ir::Error("cannot start the thread that runs kernels with big tiles (" + std::string(std::strerror(rc)) +
                          ")",
                      {}, "raise the process's address-space / thread limits (ulimit -v, ulimit -u): that thread has "
                          "a 64 MiB stack, or use smaller tiles");
    pthread_detach(t);
  }
  static void* body(void* p) {
    auto* self = static_cast<BigStackThread*>(p);
    std::unique_lock<std::mutex> lk(self->m_);
    for (;;) {
      self->cv_.wait(lk, [self] { return self->job_ != nullptr; });
      std::function<void()>* job = self->job_;
      lk.unlock();
      std::exception_ptr error;
      try {
        (*job)();
      } catch (...) {
        error = std::current_exception();
      }
      lk.lock();
      self->error_ = error;
      self->job_ = nullptr;
      self->cv_.notify_all();
    }
  }

  const uint64_t fork_generation_;
  std::mutex call_, m_;
  std::condition_variable cv_;
  std::function<void()>* job_ = nullptr;
  std::exception_ptr error_;
};

}  // namespace

void launch_cpu(const CpuEntry& entry, const Signature& sig, const std::vector<Arg>& inputs,
                const std::vector<void*>& outputs, const Binding& binding) {
  const auto& params = sig.params;
  // The argument block lives on the stack for up to 16 parameters (no allocation per launch).
  constexpr size_t kInline = 16;
  void* ptr_buf[kInline];
  ScalarSlot slot_buf[kInline];
  std::vector<void*> ptr_heap;
  std::vector<ScalarSlot> slot_heap;
  void** ptrs = ptr_buf;
  ScalarSlot* scalars = slot_buf;
  if (params.size() > kInline) {
    ptr_heap.resize(params.size());
    slot_heap.resize(params.size());
    ptrs = ptr_heap.data();
    scalars = slot_heap.data();
  }
  size_t in = 0, out = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].is_output) {
      ptrs[i] = outputs.at(out++);
    } else if (params[i].is_scalar) {
      scalars[i] = to_slot(inputs.at(in++), params[i].dtype);
      ptrs[i] = scalars[i].bytes;
    } else {
      ptrs[i] = std::get<TensorArg>(inputs.at(in++)).data;
    }
  }
  TwArgs args{ptrs, binding.shape_vars.data()};
  // A launch's interrupt check runs Python's signal handlers on this thread (below): one that calls a
  // kernel would wait for the launch lock this thread holds, or (between blocks) restart the gemm
  // caches under the blocks still running.
  if (t_launching)
    throw ir::Error("kernel '" + sig.kernel + "' was called while this thread runs another kernel's launch (from a " +
                        "signal handler, which runs between that launch's blocks)",
                    sig.span, "call kernels after the handler has returned: have it set a flag, or raise");
  struct Launching {
    Launching() { t_launching = true; }
    ~Launching() { t_launching = false; }
  } launching;
  // Launches are serialised (the pool serialises their blocks anyway): tw_grid starts a new
  // epoch of the gemm runtime's packed-operand caches, whose shared arena must not be reused
  // while blocks of another launch still read it.
  std::unique_lock<support::ForkSafeMutex> serial;
  if (!in_parallel_region()) serial = std::unique_lock<support::ForkSafeMutex>(launch_mutex());
  int64_t ext[3] = {1, 1, 1};
  entry.grid(&args, ext);
  const int64_t e0 = ext[0], e1 = ext[1];
  int64_t total = 0;
  if (ext[0] > 0 && ext[1] > 0 && ext[2] > 0 &&
      (__builtin_mul_overflow(ext[0], ext[1], &total) || __builtin_mul_overflow(total, ext[2], &total)))
    throw ir::Error("the launch grid of kernel '" + sig.kernel + "' (" + std::to_string(ext[0]) + " x " +
                        std::to_string(ext[1]) + " x " + std::to_string(ext[2]) + ") has more than 2^63 blocks",
                    sig.span, "check the grid extents in T.Kernel (and the shapes they come from)");
  if (total <= 0) return;
  // Blocks run in row-major order (bx fastest) and the pool gives each thread a contiguous
  // share of them (runtime/thread_pool.h), i.e. whole rows of blocks. The rows of thread t's
  // share start at column t * e0 / threads (bx rotated, a bijection within every row), so the
  // threads begin on different columns: a gemm kernel's threads then pack different panels of
  // B in their first row (each packed panel is shared, see tw_cpu/gemm.h) instead of packing
  // the same ones at the same moment.
  const int64_t rows = total / e0;
  const int64_t threads = in_parallel_region() ? 1 : default_pool().size();
  auto run = [&](int64_t i) {
    const int64_t r = i / e0;
    int64_t bx = i % e0;
    if (threads > 1) bx = (bx + (r * threads / rows) * e0 / threads) % e0;
    entry.block(&args, bx, r % e1, r / e1);
  };
  // Interrupts (Ctrl-C from Python: support/interrupt.h) are checked between blocks, by the thread
  // that runs blocks for this one, or by this one while it waits for the big-stack thread.
  // No block is stopped inside: a single block runs to its end.
  std::optional<ThreadPool::Interrupt> interrupt;
  if (total > 1 && !in_parallel_region() && support::interrupt_check_installed()) {
    interrupt.emplace();
    interrupt->poll = [&i = *interrupt, epoch = support::interrupt_epoch()] {
      if (!i.cancel.load(std::memory_order_relaxed) && support::interrupt_requested(epoch))
        i.cancel.store(true, std::memory_order_relaxed);
    };
  }
  ThreadPool::Interrupt* intr = interrupt ? &*interrupt : nullptr;
  auto run_all = [&] {
    if (total == 1)
      run(0);
    else
      default_pool().parallel_for(total, run, intr);
  };
  // The caller's stack (often 8 MiB) may be too small for big tiles: run on a 64 MiB one.
  try {
    if (entry.tile_bytes > kCallerStackTileBytes && !in_parallel_region())
      BigStackThread::get().run(run_all, intr ? &intr->poll : nullptr);
    else
      run_all();
    if (intr && intr->cancel.load()) throw support::Interrupted{};
  } catch (const tw_cpu::BoundsError& e) {  // kernels built with TW_BOUNDS_CHECK=1 (tw_cpu/check.h)
    throw ir::Error("index " + std::to_string(e.index) + " is out of bounds for dimension " + std::to_string(e.dim) +
                        " of '" + e.buffer + "' (size " + std::to_string(e.extent) + ") in kernel '" + sig.kernel +
                        "'",
                    e.line > 0 ? ir::Span{sig.span.file, e.line, e.col} : sig.span,
                    "the access is outside the buffer for these arguments; guard it with an if, or fix the index");
  } catch (const tw_cpu::UninitError& e) {  // checked mode's written flags (tw_cpu/check.h)
    const std::string index = element_index(std::vector<int64_t>(e.shape, e.shape + e.rank), e.at);
    throw ir::Error(std::string("uninitialised read: element ") + index + " of tile '" + e.tile + "' is " + e.how +
                        " in kernel '" + sig.kernel + "', but no statement of this block wrote it (on cpu it holds " +
                        "whatever the stack held)",
                    e.line > 0 ? ir::Span{sig.span.file, e.line, e.col} : sig.span,
                    std::string("write every element of ") + e.tile + " before it leaves the block (T.clear / T.fill " +
                        "the tile first), or copy out only the written part");
  } catch (const tw_cpu::AllocError& e) {  // the gemm runtime's packing buffers (tw_cpu/gemm_impl.h Scratch)
    throw ir::Error("kernel '" + sig.kernel + "' could not allocate " + std::to_string(e.bytes) +
                        " bytes for its gemm's packed operands: the process is out of memory",
                    sig.span, "free memory (or raise the process's address-space limit, ulimit -v)");
  } catch (const tw_cpu::BandError& e) {  // T.gemm's band promise, verified in checked mode (tw_cpu/check.h)
    const ir::Span at = e.line > 0 ? ir::Span{sig.span.file, e.line, e.col} : sig.span;
    auto pair = [](int64_t lo, int64_t hi) { return "(" + std::to_string(lo) + ", " + std::to_string(hi) + ")"; };
    const std::string band = std::string(e.which) + "=" + pair(e.lo, e.hi);
    if (e.row < 0)
      throw ir::Error("gemm " + band + " in kernel '" + sig.kernel + "' has lo > hi", at,
                      std::string(e.which).find("band") != std::string::npos
                          ? "pass lo <= hi (the band is lo <= column - row < hi; (lo, lo) is empty)"
                          : "pass lo <= hi (the " + std::string(e.which) + " lo .. hi - 1; (lo, lo) is none)");
    char value[32];
    std::snprintf(value, sizeof value, "%.9g", e.value);
    const std::string what = "gemm " + band + " in kernel '" + sig.kernel + "' is broken: op(A)[" +
                             std::to_string(e.row) + ", " + std::to_string(e.col_k) + "] ('" + e.buffer + "') is " +
                             value + ", not 0, ";
    const int64_t d = e.col_k - e.row;
    if (d >= e.lo && d < e.hi)  // inside the band: outside the rectangle it is met with
      throw ir::Error(what + "outside the band's rows=" + pair(e.r0, e.r1) + " cols=" + pair(e.c0, e.c1), at,
                      "widen rows / cols to cover row " + std::to_string(e.row) + ", column " +
                          std::to_string(e.col_k) + ", or zero A there");
    throw ir::Error(what + "outside the band (k - i = " + std::to_string(d) + ")", at,
                    "widen the band to cover k - i = " + std::to_string(d) + ", or zero A there");
  }
}

void launch_cpu_checked(const CpuEntry& entry, const Signature& sig, const std::vector<Arg>& inputs,
                        const std::vector<void*>& outputs, const Binding& binding, const std::vector<bool>& written) {
  const size_t nout = std::min(outputs.size(), binding.outputs.size());
  std::vector<int64_t> numel(nout, 1);
  for (size_t o = 0; o < nout; ++o)
    for (int64_t d : binding.outputs[o].shape) numel[o] *= d;
  auto fill = [&](uint8_t byte) {
    for (size_t o = 0; o < nout; ++o)
      if (numel[o] > 0) std::memset(outputs[o], byte, static_cast<size_t>(numel[o] * binding.outputs[o].dtype.bytes()));
  };
  // whether element e of output o holds `byte` in each of its bytes
  auto holds = [&](size_t o, int64_t e, uint8_t byte) {
    const int es = binding.outputs[o].dtype.bytes();
    const auto* p = static_cast<const uint8_t*>(outputs[o]) + e * es;
    for (int b = 0; b < es; ++b)
      if (p[b] != byte) return false;
    return true;
  };
  // the inputs the kernel writes: their bytes before the first launch (from the lowest element to the highest)
  std::vector<std::pair<uint8_t*, std::vector<uint8_t>>> saved;
  for (size_t i = 0, in = 0; i < sig.params.size(); ++i) {
    if (sig.params[i].is_output) continue;
    const Arg& a = inputs.at(in++);
    if (i >= written.size() || !written[i] || !std::holds_alternative<TensorArg>(a)) continue;
    const TensorArg& t = std::get<TensorArg>(a);
    int64_t lo = 0, hi = 1, numel_in = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      numel_in *= t.shape[d];
      int64_t stride = 1;
      if (d < t.strides.size()) stride = t.strides[d];
      else for (size_t e = d + 1; e < t.shape.size(); ++e) stride *= t.shape[e];
      const int64_t span = (t.shape[d] - 1) * stride;
      (span < 0 ? lo : hi) += span;
    }
    if (numel_in <= 0 || !t.data) continue;
    const int es = t.dtype.bytes();
    auto* base = static_cast<uint8_t*>(t.data) + lo * es;
    saved.emplace_back(base, std::vector<uint8_t>(base, base + (hi - lo) * es));
  }
  tw_cpu::AddCheck* add = entry.add_check;
  auto run = [&](uint8_t byte) {  // a launch with the outputs filled with `byte`, its adds checking for it
    fill(byte);
    if (add) *add = tw_cpu::AddCheck{byte, 0, 0, 0, nullptr, 0};
    launch_cpu(entry, sig, inputs, outputs, binding);
  };
  run(0xA5);
  const bool add_candidate = add && add->hit;  // an add into a filled element (or onto a value of those bytes)
  std::vector<std::vector<bool>> candidate(nout);
  bool any = add_candidate;
  for (size_t o = 0; o < nout; ++o) {
    candidate[o].resize(static_cast<size_t>(std::max<int64_t>(numel[o], 0)));
    for (int64_t e = 0; e < numel[o]; ++e)
      if (holds(o, e, 0xA5)) candidate[o][static_cast<size_t>(e)] = true, any = true;
  }
  if (!any) return;
  for (auto& [base, bytes] : saved) std::memcpy(base, bytes.data(), bytes.size());
  run(0x5A);
  if (add_candidate && add->hit) {  // an element held both fills when an add reached it: nothing wrote it
    const tw_cpu::AddCheck hit = *add;
    for (size_t o = 0, p = 0; o < nout; ++o, ++p) {
      while (p < sig.params.size() && !sig.params[p].is_output) ++p;
      const auto* base = static_cast<const uint8_t*>(outputs[o]);
      const int64_t es = binding.outputs[o].dtype.bytes(), at = static_cast<const uint8_t*>(hit.at) - base;
      if (at < 0 || at >= numel[o] * es) continue;
      const UnwrittenText t = unwritten_add(p < sig.params.size() ? sig.params[p].name : "?", binding.outputs[o].shape,
                                            at / es, hit.count);
      throw ir::Error("unwritten output: " + t.message, hit.line > 0 ? ir::Span{sig.span.file, hit.line, hit.col} : sig.span,
                      t.hint);
    }
  }
  for (size_t o = 0, p = 0; o < nout; ++o, ++p) {
    while (p < sig.params.size() && !sig.params[p].is_output) ++p;
    int64_t first = -1, count = 0;
    for (int64_t e = 0; e < numel[o]; ++e)
      if (candidate[o][static_cast<size_t>(e)] && holds(o, e, 0x5A)) {
        if (first < 0) first = e;
        ++count;
      }
    if (count == 0) continue;
    const UnwrittenText t = unwritten_output(sig.kernel, p < sig.params.size() ? sig.params[p].name : "?",
                                             binding.outputs[o].shape, binding.outputs[o].dtype, first, count);
    throw ir::Error("unwritten output: " + t.message, sig.span, t.hint);
  }
}

}  // namespace tw::runtime
