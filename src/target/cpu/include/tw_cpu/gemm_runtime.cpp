// tw_cpu/gemm_runtime.cpp -- the gemm runtime library: the entry points declared in gemm.h.
// The runtime compiles this file once per (compiler, flags, instruction set) with the kernels'
// flags into a shared library, keeps it in its disk cache, loads it once per process and links
// every kernel library that calls gemm against it (src/runtime/cpu_executable.cpp). The
// per-instruction-set C++ tests compile it too.
#include "gemm_impl.h"
#include "gemm_zero.h"

#include <stdio.h>

// Five parts: 0 the library's own state (g_launch_epoch, the AMX setup) and the zero terms, 1-4
// one dtype's gemm_run each (float32, float16, bfloat16, int8). The runtime compiles the file as
// up to one translation unit per CPU, each with TW_GEMM_PARTS = the bit mask of its parts
// (kRuntimeParts in src/runtime/cpu_executable.cpp: their costs, the grouping), in parallel, and
// links the objects into the one library; without TW_GEMM_PARTS (the C++ tests) it is all five.
// gemm_impl.h's state (scratch, packed-operand caches) lives in inline functions' statics: one
// copy in the linked library whichever parts use it.
#if defined(TW_GEMM_PARTS)
#if TW_GEMM_PARTS < 1 || TW_GEMM_PARTS > 31
#error "TW_GEMM_PARTS is a mask of tw_cpu/gemm_runtime.cpp's parts 0 to 4"
#endif
#define TW_GEMM_PART(k) ((TW_GEMM_PARTS >> (k)) & 1)
#else
#define TW_GEMM_PART(k) 1
#endif

namespace tw_cpu {
namespace detail {

#if TW_GEMM_PART(0)
uint64_t g_launch_epoch = 1;
#endif

namespace {
// the paths other than gemm_small: next_b's strip (op(B)'s shape) prefetched all at once, first
template <class T>
void prefetch_next_b(int N, int K, const T* next_b, long next_ldb, bool transB) {
  if (next_b && N > 0 && K > 0)
    prefetch_strip(next_b, next_ldb * (long)sizeof(T), transB ? N : K, (long)(transB ? K : N) * (long)sizeof(T));
}
}  // namespace

#if TW_GEMM_PART(1)
void gemm_run(int M, int N, int K, const float* A, long lda, bool transA, const float* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable, bool b_stable,
              long b_col, long b_width, const float* next_b, long next_ldb, Band band) {
  // a few rows against a tile-sized B (within L2): gemm_small (gemm_impl.h). M <= 2 with B not
  // transposed stays gemv_f32's (rows streamed, whole-row products shared across blocks)
  if (small_f32_path(M, N, K, transB))
    return gemm_small<float>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, next_b, next_ldb);
  prefetch_next_b(N, K, next_b, next_ldb, transB);
  gemm_f32<float>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable, b_stable,
                  b_col, b_width, band);
}
#endif
#if TW_GEMM_PART(2)
void gemm_run(int M, int N, int K, const f16* A, long lda, bool transA, const f16* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable, bool b_stable,
              long /*b_col*/, long /*b_width*/, const f16* next_b, long next_ldb, Band band) {
  if (small_m_path(M))
    return gemm_small<f16>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, next_b, next_ldb);
  prefetch_next_b(N, K, next_b, next_ldb, transB);
  gemm_f32<f16>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable, b_stable, -1, 0, band);
}
#endif
#if TW_GEMM_PART(3)
void gemm_run(int M, int N, int K, const bf16* A, long lda, bool transA, const bf16* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable, bool b_stable,
              long /*b_col*/, long /*b_width*/, const bf16* next_b, long next_ldb, Band band) {
#if defined(TW_CPU_AMX)
  if (amx_usable() && amx_pays(M)) {
    prefetch_next_b(N, K, next_b, next_ldb, transB);
    return gemm_amx<bf16, float>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable, b_stable);
  }
#endif
  // up to 4 rows (more without the tile unit: up to kSmallM): gemm_small, nothing packed
  if (small_m_path(M))
    return gemm_small<bf16>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, next_b, next_ldb);
  prefetch_next_b(N, K, next_b, next_ldb, transB);
  gemm_f32<bf16>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable, b_stable, -1, 0, band);
}
#endif
#if TW_GEMM_PART(4)
void gemm_run(int M, int N, int K, const int8_t* A, long lda, bool transA, const int8_t* B,
              long ldb, bool transB, int32_t* C, long ldc, bool accumulate, bool a_stable,
              bool b_stable, long /*b_col*/, long /*b_width*/, const int8_t* next_b, long next_ldb, Band /*band*/) {
  prefetch_next_b(N, K, next_b, next_ldb, transB);
#if defined(TW_CPU_AMX)
  if (amx_usable()) return gemm_amx<int8_t, int32_t>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable, b_stable);
#endif
  gemm_i8(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable, b_stable);
}

#endif
}  // namespace detail

#if TW_GEMM_PART(0)
#define TW_ZERO_TERMS(T)                                                                                  \
  void gemm_zero_terms(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, bool ta, int64_t am0,   \
                       int64_t am1, int64_t ak0, int64_t ak1, const T* B, int64_t ldb, bool tb, int64_t bk0, \
                       int64_t bk1, int64_t bn0, int64_t bn1, float* C, int64_t ldc) {                     \
    detail::zero_terms<T>(M, N, K, A, lda, ta, am0, am1, ak0, ak1, B, ldb, tb, bk0, bk1, bn0, bn1, C, ldc); \
  }
TW_ZERO_TERMS(float)
TW_ZERO_TERMS(f16)
TW_ZERO_TERMS(bf16)
#undef TW_ZERO_TERMS
#endif

}  // namespace tw_cpu

#if TW_GEMM_PART(0)
// Called by the runtime right after it loads this library, before any gemm runs: allow = 0
// (TW_CPU_AMX=0) keeps the tile unit off for the process. Returns a line for the runtime's log
// saying which bf16 / int8 gemm path this process takes and why.
extern "C" __attribute__((visibility("default"))) const char* tw_cpu_gemm_amx_setup(int allow) {
  using namespace tw_cpu::detail;
  amx_allow(allow != 0);
#if defined(TW_CPU_AMX)
  if (!allow) return "gemm runtime: AMX disabled (TW_CPU_AMX=0): bf16 and int8 gemms use the AVX-512 paths";
  static char msg[200];
  const long err = amx_permission_errno();
  if (err == 0) return "gemm runtime: AMX tiles in use for bf16 (TDPBF16PS) and int8 (TDPBSSD) gemms";
  snprintf(msg, sizeof msg,
           "gemm runtime: the kernel refused AMX tile permission (arch_prctl ARCH_REQ_XCOMP_PERM: errno %ld): "
           "bf16 and int8 gemms use the AVX-512 paths", err);
  return msg;
#else
  return "gemm runtime: built without AMX (this instruction set has none)";
#endif
}
#endif
