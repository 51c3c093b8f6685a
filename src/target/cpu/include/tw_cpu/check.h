// TW_BOUNDS_CHECK=1: kernels compiled in checked mode test every element index against its
// dimension and throw this on the first one outside; the runtime reports it as an error at the
// kernel's source line (runtime/cpu_launch.cpp). Kernel libraries include it at the top
// (runtime/cpu_library.cpp); only checked kernels use it.
#pragma once

#include <cstddef>
#include <cstdint>

#include <tw_cpu/types.h>

namespace tw_cpu {

struct BoundsError {
  int line, col;       // of the access in the kernel's source
  const char* buffer;  // the buffer's name (an identifier)
  int dim;             // which index
  int64_t index, extent;
};

[[noreturn]] __attribute__((noinline, cold)) inline void bounds_fail(int line, int col, const char* buffer, int dim,
                                                                    int64_t index, int64_t extent) {
  throw BoundsError{line, col, buffer, dim, index, extent};
}

// `i` when 0 <= i < n, else throws.
inline int64_t checked_index(int64_t i, int64_t n, int line, int col, const char* buffer, int dim) {
  if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(n)) [[unlikely]]
    bounds_fail(line, col, buffer, dim, i, n);
  return i;
}

// Checked mode's written flags: each tile has a byte per element beside it, clear at the tile's
// allocation and set by every statement that writes the element; an element read while its byte
// is clear, where its value leaves the block (copied or stored into a global tensor, used as an
// index, a condition or a loop bound), throws this. The runtime reports it as an `uninitialised
// read` at the kernel's source line (runtime/cpu_launch.cpp), as the ascend910b simulator does.
struct UninitError {
  int line, col;         // of the statement in the kernel's source
  const char* tile;      // the tile's name (an identifier)
  const char* how;       // where the value goes ("copied out to tensor Y", "read as an index", ...)
  const int64_t* shape;  // the tile's shape (rank dims)
  int rank;
  int64_t at;  // the element's linear index in the tile
};

// `at` when the element at of the tile with written flags w was written, else throws.
inline int64_t written_at(const uint8_t* w, int64_t at, int line, int col, const char* tile, const int64_t* shape,
                          int rank, const char* how) {
  if (!w[at]) [[unlikely]]
    throw UninitError{line, col, tile, how, shape, rank, at};
  return at;
}

// Checked mode's T.atomic_add into an out_idx output that other statements write too (one that
// only T.atomic_add writes starts at zero instead): the runtime fills the outputs with `fill` bytes
// before the launch (runtime/cpu_launch.cpp launch_cpu_checked), so an add into an element that
// still holds the fill in every byte adds onto memory nothing wrote. The launch goes on; the
// lowest such element and the first such add's line are kept, and the runtime confirms them with
// a second fill and reports an `unwritten output` at the add's line, as the ascend910b simulator
// does at the add (simulator/written.cpp). One per kernel of a library (tw_add_check), exported.
struct AddCheck {
  int fill;  // this launch's fill byte; -1: no check
  int hit;   // set by the first add into a filled element
  int line, col;    // of the first such add
  const void* at;   // the lowest element such an add found
  int64_t count;    // the adds into filled elements
};

template <class T>
inline void atomic_add_checked(T* p, T v, AddCheck& c, int line, int col) {
  if (c.fill >= 0) {
    const unsigned char* b = reinterpret_cast<const unsigned char*>(p);
    bool all = true;
    for (size_t i = 0; i < sizeof(T); ++i) all &= __atomic_load_n(b + i, __ATOMIC_RELAXED) == c.fill;
    if (all) [[unlikely]] {
      __atomic_fetch_add(&c.count, 1, __ATOMIC_RELAXED);
      if (!__atomic_exchange_n(&c.hit, 1, __ATOMIC_RELAXED)) c.line = line, c.col = col;
      const void* at = p;
      const void* cur = __atomic_load_n(&c.at, __ATOMIC_RELAXED);
      while ((!cur || at < cur) && !__atomic_compare_exchange_n(&c.at, &cur, at, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    }
  }
  atomic_add(p, v);
}

// The gemm runtime's packing buffers (tw_cpu/gemm_impl.h Scratch) could not be allocated: the
// process is out of memory or under an address-space limit. The runtime reports it as an error at
// the kernel (runtime/cpu_launch.cpp); a plain-C entry point returns 3 (runtime/cpu_library.cpp).
struct AllocError {
  size_t bytes;
};

// T.gemm's band promises (docs/language.md "Bands"), verified in checked mode: a band (or a
// rectangle's rows / cols) with lo > hi (row = -1), or an element of op(A) outside an a_band (or
// outside its rectangle, rows [r0, r1) x columns [c0, c1)) that is not exactly 0.
struct BandError {
  int line, col;      // of the gemm in the kernel's source
  const char* which;  // "a_band" / "c_band" / "rows" / "cols"
  const char* buffer; // A's name (an identifier)
  int64_t lo, hi;
  int64_t row, col_k;  // the element of op(A); row = -1: lo > hi
  double value;
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;  // the rectangle (a_band met with one: r0 < r1)
};

inline void check_band(int64_t lo, int64_t hi, int line, int col, const char* which, const char* buffer) {
  if (lo > hi) [[unlikely]]
    throw BandError{line, col, which, buffer, lo, hi, -1, -1, 0.0};
}

// The rectangle a band is met with (T.gemm's rows / cols), unlimited: every row or column.
inline constexpr int64_t kNoLimit = int64_t(1) << 40;

// a_band: op(A) (M x K, A transposed when trans) is exactly 0 wherever k - i lies outside [lo, hi)
// or (i, k) outside the rectangle [r0, r1) x [c0, c1).
template <class T>
void check_band_a(int64_t M, int64_t K, const T* A, int64_t lda, bool trans, int64_t lo, int64_t hi, int line,
                  int col, const char* buffer, int64_t r0 = 0, int64_t r1 = kNoLimit, int64_t c0 = 0,
                  int64_t c1 = kNoLimit) {
  check_band(lo, hi, line, col, "a_band", buffer);
  auto at = [&](int64_t i, int64_t k) { return to_f32(trans ? A[k * lda + i] : A[i * lda + k]); };  // exact
  auto computed = [&](int64_t i, int64_t k) { return k - i >= lo && k - i < hi && i >= r0 && i < r1 && k >= c0 && k < c1; };
  for (int64_t i = 0; i < M; ++i) {
    // A NaN the banded product takes makes every element of C's row i NaN, whatever op(A) holds outside the
    // band: the promise cannot change that row's result (a causal flash attention's NaN query row).
    bool nan_row = false;
    for (int64_t k = 0; k < K && !nan_row; ++k) nan_row = computed(i, k) && at(i, k) != at(i, k);
    if (nan_row) continue;
    for (int64_t k = 0; k < K; ++k) {
      if (computed(i, k)) continue;
      const float x = at(i, k);
      if (!(x == 0.0f)) [[unlikely]]
        throw BandError{line, col, "a_band", buffer, lo, hi, i, k, static_cast<double>(x), r0, r1, c0, c1};
    }
  }
}

// c_band: the gemm computed whole tiles; C's elements outside the band (j - i outside [lo, hi))
// or outside its rectangle [r0, r1) x [c0, c1) are unspecified, made visible: NaN (int32 C:
// -2^31), so that a later read shows in any check.
inline float band_poison(float) { return __builtin_nanf(""); }
inline int32_t band_poison(int32_t) { return INT32_MIN; }
template <class T>
void poison_outside_band(int64_t M, int64_t N, T* C, int64_t ldc, int64_t lo, int64_t hi, int64_t r0 = 0,
                         int64_t r1 = kNoLimit, int64_t c0 = 0, int64_t c1 = kNoLimit) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      if (j - i < lo || j - i >= hi || i < r0 || i >= r1 || j < c0 || j >= c1) C[i * ldc + j] = band_poison(T{});
}

}  // namespace tw_cpu
