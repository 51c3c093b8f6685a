// tw_cpu/gemm.h -- tile matmul for generated CPU kernels: the declarations only.
//
//   C[M x N] = (accumulate ? C : 0) + op(A)[M x K] * op(B)[K x N]
//   op(A) = transA ? A^T (A stored K x M, row-major, lda >= M)
//                  : A   (A stored M x K, row-major, lda >= K); same for B.
//   (TA, TB, TC) = (float, float, float), (f16, f16, float), (bf16, bf16, float) or
//   (int8_t, int8_t, int32_t). Numerics, algorithm and code paths: gemm_impl.h.
//
// The code lives in gemm_impl.h, compiled once per (compiler, flags, instruction set) from
// gemm_runtime.cpp into a shared library (libtw_gemm_<key>.so) that the runtime keeps in its
// disk cache, loads once per process before any kernel that calls gemm, and that every such
// kernel library names as a dependency (src/runtime/cpu_executable.cpp, "the gemm runtime
// library"). A kernel's translation unit only declares the entry points below: optimising the
// packing routines and micro-kernels in every kernel was over 90% of its compile time. The
// runtime's state (launch epoch, packed-operand caches, thread_local scratch) lives in that one
// library, so kernel libraries hold no STB_GNU_UNIQUE symbol and no thread_local destructor and
// are unmapped when they are unloaded (launches are serialised process-wide, cpu_launch.cpp).
#pragma once

#include "types.h"

namespace tw_cpu {

// A band of diagonals of a gemm (T.gemm's a_band / c_band, docs/language.md "Bands"): kind 1
// (a_band): op(A)[i][k] is 0 wherever k - i is outside [lo, hi), so the terms of those k are
// skipped (exact: each is 0 * B); kind 2 (c_band): only C[i][j] with lo <= j - i < hi are needed,
// the others may be left unwritten (their values unspecified after the call). Only a performance
// hint: computing everything is a valid result of either. The packed fp32 / f16 / bf16 path skips
// whole micro-tiles (c_band) or trims each micro-panel's K range (a_band); gemm_small, the GEMV
// paths and int8 compute everything. kind 0: no band. The band may be met with a rectangle of
// the same matrix (T.gemm's rows / cols): rows [row0, row1) and columns [col0, col1) of op(A)
// (kind 1: op(A) is also 0 outside them) or of C (kind 2: only C's elements inside them needed).
struct Band {
  static constexpr long kAll = 1L << 40;  // no limit (any index of a gemm is below it)
  int kind = 0;
  long lo = 0, hi = 0;
  long row0 = 0, row1 = kAll, col0 = 0, col1 = kAll;
};

namespace detail {

// The launch counter: packed operands cached by the gemm runtime belong to one launch.
// Defined in gemm_runtime.cpp (a definition here would make it a unique symbol of every kernel).
extern uint64_t g_launch_epoch;

// The entry points of the gemm runtime library (defined in gemm_runtime.cpp).
void gemm_run(int M, int N, int K, const float* A, long lda, bool transA, const float* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable, bool b_stable,
              long b_col, long b_width, const float* next_b = nullptr, long next_ldb = 0,
              Band band = Band{});
void gemm_run(int M, int N, int K, const f16* A, long lda, bool transA, const f16* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable, bool b_stable,
              long b_col, long b_width, const f16* next_b = nullptr, long next_ldb = 0,
              Band band = Band{});
void gemm_run(int M, int N, int K, const bf16* A, long lda, bool transA, const bf16* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable, bool b_stable,
              long b_col, long b_width, const bf16* next_b = nullptr, long next_ldb = 0,
              Band band = Band{});
void gemm_run(int M, int N, int K, const int8_t* A, long lda, bool transA, const int8_t* B,
              long ldb, bool transB, int32_t* C, long ldc, bool accumulate, bool a_stable,
              bool b_stable, long b_col, long b_width,
              const int8_t* next_b = nullptr, long next_ldb = 0, Band band = Band{});

}  // namespace detail

// C (M x N) += the terms a trimmed float gemm skipped (0 * inf, 0 * NaN, the +0 of a product that
// wrote nothing): op(A) is live on rows [am0, am1) x k [ak0, ak1) and zero elsewhere, A pointing
// at its element (am0, ak0); op(B) live on k [bk0, bk1) x cols [bn0, bn1), B at (bk0, bn0).
// Generated code calls it right after a gemm on operands trimmed at run time. Defined in the gemm
// runtime library (gemm_runtime.cpp; the code and why it is exact: gemm_zero.h).
void gemm_zero_terms(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, bool ta, int64_t am0,
                     int64_t am1, int64_t ak0, int64_t ak1, const float* B, int64_t ldb, bool tb, int64_t bk0,
                     int64_t bk1, int64_t bn0, int64_t bn1, float* C, int64_t ldc);
void gemm_zero_terms(int64_t M, int64_t N, int64_t K, const f16* A, int64_t lda, bool ta, int64_t am0,
                     int64_t am1, int64_t ak0, int64_t ak1, const f16* B, int64_t ldb, bool tb, int64_t bk0,
                     int64_t bk1, int64_t bn0, int64_t bn1, float* C, int64_t ldc);
void gemm_zero_terms(int64_t M, int64_t N, int64_t K, const bf16* A, int64_t lda, bool ta, int64_t am0,
                     int64_t am1, int64_t ak0, int64_t ak1, const bf16* B, int64_t ldb, bool tb, int64_t bk0,
                     int64_t bk1, int64_t bn0, int64_t bn1, float* C, int64_t ldc);

// Starts a new launch: drops packed operands cached by earlier launches (their data may
// have changed). Generated code calls it from tw_grid, which runs once before the blocks.
inline void new_launch() { __atomic_fetch_add(&detail::g_launch_epoch, 1, __ATOMIC_RELAXED); }

// a_stable: A's memory is not written during this launch (and A is not a scratch tile that is
// refilled between calls), so its packed form may be reused by later calls on this thread.
// b_stable: the same for B; its packed panel (one K block, one column block) is shared by all
// threads for the rest of the launch (SharedPackedB in gemm_impl.h), with the launcher's
// row-major block order.
// b_col, b_width: B's tile is columns [b_col, b_col + N) of rows b_width elements long (a view
// in place in a tensor; b_col = -1: unknown). With M = 1, both operands stable and a narrow strip,
// the product of A with B's whole rows is computed once per launch and shared by the blocks that
// own the other columns (gemv_shared_rows in gemm_impl.h): a whole-row stream instead of strips.
// next_b, next_ldb: the B of a later call (the same strip of the next page: codegen's
// @prefetch_slices), prefetched into L2 during this one (spread over gemm_small's loops, else all
// at the start); null: none. Only a hint: nothing is read from it.
// band: see Band above.
template <class TA, class TB, class TC>
inline void gemm(int M, int N, int K, const TA* A, long lda, bool transA, const TB* B, long ldb,
                 bool transB, TC* C, long ldc, bool accumulate, bool a_stable = false,
                 bool b_stable = false, long b_col = -1, long b_width = 0, const TB* next_b = nullptr,
                 long next_ldb = 0, Band band = Band{}) {
  static_assert(detail::same<TA, TB>, "tw_cpu::gemm: TA and TB must be the same type");
  static_assert(detail::same<TA, float> || detail::same<TA, f16> || detail::same<TA, bf16> ||
                    detail::same<TA, int8_t>,
                "tw_cpu::gemm: unsupported dtype combination");
  static_assert(detail::same<TA, int8_t> ? detail::same<TC, int32_t> : detail::same<TC, float>,
                "tw_cpu::gemm: float/f16/bf16 inputs need TC=float, int8 inputs TC=int32_t");
  detail::gemm_run(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable,
                   b_stable, b_col, b_width, next_b, next_ldb, band);
}

}  // namespace tw_cpu
