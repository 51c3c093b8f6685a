// launch_cpu: runs one launch of a compiled CPU kernel (tw_cpu/abi.h) on the thread pool.
#include "runtime/cpu_launch.h"

#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>

#include "runtime/thread_pool.h"
#include "support/fork.h"
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

// Blocks whose tiles need more than this run on a thread with a large stack, not the caller's.
constexpr int64_t kCallerStackTileBytes = int64_t(1) << 20;

// The launch lock, held across a launch: a forked child gets it unlocked (support/fork.h), since
// a thread of the parent inside a kernel call at the fork would hold it forever there.
support::ForkSafeMutex& launch_mutex() {
  static auto& mu = support::fork_safe_mutex();
  return mu;
}

}  // namespace

void launch_cpu(const CpuEntry& entry, const Signature& sig, const std::vector<Arg>& inputs,
                const std::vector<void*>& outputs, const Binding& binding, const std::atomic<bool>* cancel) {
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
  auto run_all = [&] {
    if (total == 1)
      run(0);
    else
      default_pool().parallel_for(total, run, cancel);
  };
  // The caller's stack (often 8 MiB) may be too small for big tiles: run on a 64 MiB one.
  try {
    if (entry.tile_bytes > kCallerStackTileBytes && !in_parallel_region())
      run_on_launch_thread(run_all);
    else
      run_all();
  } catch (const tw_cpu::BoundsError& e) {  // kernels built with TW_BOUNDS_CHECK=1 (tw_cpu/check.h)
    throw ir::Error("index " + std::to_string(e.index) + " is out of bounds for dimension " + std::to_string(e.dim) +
                        " of '" + e.buffer + "' (size " + std::to_string(e.extent) + ") in kernel '" + sig.kernel +
                        "'",
                    e.line > 0 ? ir::Span{sig.span.file, e.line, e.col} : sig.span,
                    "the access is outside the buffer for these arguments; guard it with an if, or fix the index");
  } catch (const tw_cpu::UninitError& e) {  // checked mode's written flags (tw_cpu/check.h)
    std::string index;
    for (int64_t d = e.rank - 1, rest = e.at; d >= 0; --d) {
      index = std::to_string(rest % e.shape[d]) + (index.empty() ? "" : ", ") + index;
      rest /= e.shape[d];
    }
    throw ir::Error(std::string("uninitialised read: element [") + index + "] of tile '" + e.tile + "' is " + e.how +
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

}  // namespace tw::runtime
