// The terms a trimmed T.gemm skips (float gemms only). The cpu target multiplies only the live
// part of its operands: a tile read in place with run-time extents (rows past a run-time count,
// a constant tail's rows past the tensor) and a global region clipped to its tensor. Past that
// part an operand is ZERO (docs/language.md "Run-time extents", "Tails", T.gemm), and a product
// of that zero with the other operand is not nothing: 0 * inf and 0 * NaN are NaN, and 0 * x is
// a signed zero (+0 unless x is negative or -0). This adds those skipped terms to C.
//
// Why one addition per element of C is exact: every skipped term is +0, -0 or NaN (a product
// with a zero factor is never +-inf), and tw_cpu::gemm adds to C a product it sums from +0 (so a
// zero product is +0: C + (+0 + term + ...), also what numpy's C + A @ B gives). The skipped terms
// summed from +0 give z = NaN if one of them is NaN, else +0, in any order. Then
// C + (live product) + z equals C + (full product): NaN stays NaN; a nonzero sum is unchanged by
// a zero; a zero live product is +0, and +0 + z = z. Where the trimmed product wrote nothing
// (rows / cols past the live ones), C + z is C + (full product) since every term was skipped: a
// -0 accumulator becomes +0 there, as with the full product.
//
// The code of the gemm runtime library (included by gemm_runtime.cpp only, as gemm_impl.h): a
// kernel's translation unit sees the declarations in gemm.h. Instantiated in every kernel that
// calls gemm, this template cost ~0.25 s of its cold compile (docs/performance.md "Session 23:
// cold compile").
#pragma once

#include <cstdint>

#include "types.h"

namespace tw_cpu {
namespace detail {

// C (M x N: the rows and cols of C that are kept; C's first element at C) += the skipped terms
// of op(A) (M x K) * op(B) (K x N). op(A) is live on rows [am0, am1) x k [ak0, ak1), zero
// elsewhere, A pointing at op(A)'s element (am0, ak0) (A^T when ta); op(B) live on k [bk0, bk1)
// x cols [bn0, bn1), B pointing at (bk0, bn0). The trimmed product computed the live rows x live
// cols over the k both have; every other term has a zero factor. Returns at once when nothing
// was trimmed (each range whole).
template <class T>
void zero_terms(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, bool ta, int64_t am0, int64_t am1,
                     int64_t ak0, int64_t ak1, const T* B, int64_t ldb, bool tb, int64_t bk0, int64_t bk1,
                     int64_t bn0, int64_t bn1, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0 || K <= 0) return;  // no C element, or no term
  // an operand with no live element is zero whole (its pointer is then never read)
  if (am1 <= am0 || ak1 <= ak0) am0 = am1 = ak0 = ak1 = 0;
  if (bk1 <= bk0 || bn1 <= bn0) bk0 = bk1 = bn0 = bn1 = 0;
  const int64_t ki0 = ak0 > bk0 ? ak0 : bk0, ki1 = ak1 < bk1 ? ak1 : bk1;  // the k both have
  const bool rows_all = am0 <= 0 && am1 >= M, cols_all = bn0 <= 0 && bn1 >= N;
  // only the k one operand has and the other lacks, each of them whole: every skipped term is
  // 0 * 0, and the product C + (+0 + ...) already holds its +0
  if (rows_all && cols_all && ak0 == bk0 && ak1 == bk1) return;
  // op(x)'s rect [r0, r1) x [c0, c1) (clamped to its live part) holds no inf / NaN; vectorizable
  // (independent lanes), the common case's only cost with the +0 below
  auto finite = [](const T* p, int64_t ld, bool trans, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (r1 <= r0 || c1 <= c0) return true;
    if (trans) { int64_t t0 = r0, t1 = r1; r0 = c0; r1 = c1; c0 = t0; c1 = t1; }  // the storage's rows, cols
    constexpr int kL = 64;  // 4 vectors of 16 (AVX-512) in flight: not bound by the add's latency
    float acc[kL] = {};
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = p + r * ld;
      int64_t c = c0;
      for (; c + kL <= c1; c += kL)
        for (int l = 0; l < kL; ++l) acc[l] += to_f32(row[c + l]) * 0.0f;
      for (; c + 16 <= c1; c += 16)
        for (int l = 0; l < 16; ++l) acc[l] += to_f32(row[c + l]) * 0.0f;
      for (; c < c1; ++c) acc[c & (kL - 1)] += to_f32(row[c]) * 0.0f;
    }
    float s = 0.0f;
    for (int l = 0; l < kL; ++l) s += acc[l];
    return s == 0.0f;
  };
  const int64_t ai0 = am0 > 0 ? am0 : 0, ai1 = am1 < M ? am1 : M, bj0 = bn0 > 0 ? bn0 : 0, bj1 = bn1 < N ? bn1 : N;
  const bool some_rows = ai1 > ai0, some_cols = bj1 > bj0;
  // the live values a zero of the other operand meets (offsets from the first live element)
  bool all_finite = true;
  const bool rows_out = !(ai0 == 0 && ai1 == M), cols_out = !(bj0 == 0 && bj1 == N);
  if (some_cols && rows_out)  // C's rows outside A's: 0 * B's live part
    all_finite = finite(B, ldb, tb, 0, bk1 - bk0, bj0 - bn0, bj1 - bn0);
  if (all_finite && some_rows && cols_out)  // C's cols outside B's: A's live part * 0
    all_finite = finite(A, lda, ta, ai0 - am0, ai1 - am0, 0, ak1 - ak0);
  if (all_finite && some_rows && some_cols)  // the k one has and the other lacks
    all_finite = finite(A, lda, ta, ai0 - am0, ai1 - am0, 0, (bk0 < ak1 ? bk0 : ak1) - ak0) &&
                 finite(A, lda, ta, ai0 - am0, ai1 - am0, (bk1 > ak0 ? bk1 : ak0) - ak0, ak1 - ak0) &&
                 finite(B, ldb, tb, 0, (ak0 < bk1 ? ak0 : bk1) - bk0, bj0 - bn0, bj1 - bn0) &&
                 finite(B, ldb, tb, (ak1 > bk0 ? ak1 : bk0) - bk0, bk1 - bk0, bj0 - bn0, bj1 - bn0);
  if (all_finite) {  // every skipped term is a zero: + (+0) where the product wrote nothing
    const bool wrote = ki1 > ki0;
    for (int64_t i = 0; i < M; ++i) {
      float* c = C + i * ldc;
      if (!wrote || i < ai0 || i >= ai1) {
        for (int64_t j = 0; j < N; ++j) c[j] += 0.0f;
      } else {
        for (int64_t j = 0; j < bj0; ++j) c[j] += 0.0f;
        for (int64_t j = bj1; j < N; ++j) c[j] += 0.0f;
      }
    }
    return;
  }
  // some inf / NaN meets a zero (rare): each C element's skipped terms summed
  // from +0: the sum over k in [k0, k1) and A's live k of A[i, k] * 0 (i live in A), and of 0 * B[k, j]
  auto row_a = [&](int64_t i, int64_t k0, int64_t k1) {
    float s = 0.0f;
    for (int64_t k = k0 > ak0 ? k0 : ak0, e = k1 < ak1 ? k1 : ak1; k < e; ++k)
      s += to_f32(ta ? A[(k - ak0) * lda + (i - am0)] : A[(i - am0) * lda + (k - ak0)]) * 0.0f;
    return s;
  };
  auto col_b = [&](float* z, int64_t j0, int64_t j1, int64_t k0, int64_t k1) {  // z[j - j0], j live in B
    for (int64_t j = j0; j < j1; ++j) z[j - j0] = 0.0f;
    for (int64_t k = k0 > bk0 ? k0 : bk0, e = k1 < bk1 ? k1 : bk1; k < e; ++k)
      for (int64_t j = j0; j < j1; ++j)
        z[j - j0] += 0.0f * to_f32(tb ? B[(j - bn0) * ldb + (k - bk0)] : B[(k - bk0) * ldb + (j - bn0)]);
  };
  constexpr int64_t kChunk = 256;
  float z_in[kChunk], z_all[kChunk];  // for C's cols j0 + q live in B: B's k not in A's, all of B's k
  for (int64_t j0 = 0; j0 < N; j0 += kChunk) {
    const int64_t j1 = j0 + kChunk < N ? j0 + kChunk : N;
    const int64_t l0 = bn0 > j0 ? bn0 : j0, l1 = bn1 < j1 ? bn1 : j1;  // B's live cols in the chunk
    if (l1 > l0) {
      col_b(z_in, l0, l1, 0, ak0);
      col_b(z_all, l0, l1, ak1, K);
      for (int64_t j = l0; j < l1; ++j) z_in[j - l0] += z_all[j - l0];
      col_b(z_all, l0, l1, 0, K);
    }
    for (int64_t i = 0; i < M; ++i) {
      float* c = C + i * ldc;
      if (i >= am0 && i < am1) {
        const float r_all = row_a(i, 0, K);  // C's cols outside B's live ones
        const float r_in = row_a(i, 0, bk0) + row_a(i, bk1, K);
        for (int64_t j = j0; j < j1; ++j) c[j] += j >= l0 && j < l1 ? r_in + z_in[j - l0] : r_all;
      } else {  // A's row i is zero: 0 * B's live values, else 0 * 0
        for (int64_t j = j0; j < j1; ++j) c[j] += j >= l0 && j < l1 ? z_all[j - l0] : 0.0f;
      }
    }
  }
}

}  // namespace detail
}  // namespace tw_cpu
