// tw_cpu/gemm_runtime.cpp -- the gemm runtime library: the entry points declared in gemm.h.
// The runtime compiles this file once per (compiler, flags, instruction set) with the kernels'
// flags into a shared library, keeps it in its disk cache, loads it once per process and links
// every kernel library that calls gemm against it (src/runtime/cpu_executable.cpp). The
// per-instruction-set C++ tests compile it too.
#include "gemm_impl.h"

namespace tw_cpu {
namespace detail {

uint64_t g_launch_epoch = 1;

void gemm_run(int M, int N, int K, const float* A, long lda, bool transA, const float* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable, bool b_stable,
              long b_col, long b_width) {
  gemm_f32<float>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable, b_stable,
                  b_col, b_width);
}
void gemm_run(int M, int N, int K, const f16* A, long lda, bool transA, const f16* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable, bool b_stable,
              long /*b_col*/, long /*b_width*/) {
  gemm_f32<f16>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable, b_stable);
}
void gemm_run(int M, int N, int K, const bf16* A, long lda, bool transA, const bf16* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable, bool b_stable,
              long /*b_col*/, long /*b_width*/) {
  gemm_f32<bf16>(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate, a_stable, b_stable);
}
void gemm_run(int M, int N, int K, const int8_t* A, long lda, bool transA, const int8_t* B,
              long ldb, bool transB, int32_t* C, long ldc, bool accumulate, bool /*a_stable*/,
              bool /*b_stable*/, long /*b_col*/, long /*b_width*/) {
  gemm_i8(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate);
}

}  // namespace detail
}  // namespace tw_cpu
