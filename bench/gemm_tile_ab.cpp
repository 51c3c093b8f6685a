// The fp32 (or int8 -> int32, or fp16 -> fp32) tile program of examples/gemm.py (after @gemm_out: per block, per K step one gemm_run
// on A and B tiles viewed in place, both stable, C computed in its window) replayed against one
// build of the gemm runtime, for side-by-side comparisons of gemm_impl.h variants in one process
// (bench/gemm_tile_ab.py compiles this file once per variant's include directory). Not a test.
//   g++ -O3 -march=native -mprefer-vector-width=512 -std=c++20 -fPIC -shared -fvisibility=hidden \
//       -I <include dir> bench/gemm_tile_ab.cpp -o variant.so -lpthread
// the runtime's own entry points (gemm_run, g_launch_epoch), built with this variant's headers
#include "tw_cpu/gemm_runtime.cpp"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <time.h>
#include <vector>

namespace {
struct Job {
  int M, N, K, bm, bn, bk, batch;
  const void *A, *B;
  void* C;
  int dtype;  // 0: fp32 operands and C; 1: int8 operands, int32 C; 2: fp16 operands, fp32 C; 3: bf16 operands, fp32 C
};
Job g_job;
int g_threads = 1;
bool g_hot = false;  // every call reads block (0, 0)'s first A tile and B panel (operands cached)
std::mutex g_mu;
std::condition_variable g_go, g_done;
long g_gen = 0;
int g_pending = 0;

// Thread t's share of the grid, as cpu_launch.cpp hands it out: blocks in row-major order (bx
// fastest), contiguous shares, each share's rows starting at column t * e0 / threads.
template <class T, class TC>
void run_share_t(int t) {
  const Job& j = g_job;
  const long e0 = (j.N + j.bn - 1) / j.bn, e1 = (j.M + j.bm - 1) / j.bm, total = e0 * e1 * j.batch;
  const long rows = total / e0;
  for (long i = total * t / g_threads; i < total * (t + 1) / g_threads; ++i) {
    const long r = i / e0, by = r % e1, bz = r / e1;
    long bx = i % e0;
    if (g_threads > 1) bx = (bx + (r * g_threads / rows) * e0 / g_threads) % e0;
    const T* A = (const T*)j.A + bz * j.M * (long)j.K;
    const T* B = (const T*)j.B + bz * j.K * (long)j.N;
    TC* C = (TC*)j.C + bz * j.M * (long)j.N + by * j.bm * (long)j.N + bx * j.bn;
    const int mm = j.M - by * j.bm < j.bm ? j.M - by * j.bm : j.bm;
    const int nn = j.N - bx * j.bn < j.bn ? j.N - bx * j.bn : j.bn;
    for (int k0 = 0; k0 < j.K; k0 += j.bk) {
      const int kc = j.K - k0 < j.bk ? j.K - k0 : j.bk;
      const T* a = g_hot ? A : A + by * j.bm * (long)j.K + k0;
      const T* b = g_hot ? B : B + (long)k0 * j.N + bx * j.bn;
      tw_cpu::detail::gemm_run(mm, nn, kc, a, j.K, false, b, j.N, false, C, j.N, k0 > 0, true, true,
                               bx * j.bn, j.N);
    }
  }
}
void run_share(int t) {
  if (g_job.dtype == 1) run_share_t<int8_t, int32_t>(t);
  else if (g_job.dtype == 2) run_share_t<tw_cpu::f16, float>(t);
  else if (g_job.dtype == 3) run_share_t<tw_cpu::bf16, float>(t);
  else run_share_t<float, float>(t);
}
void worker(int t) {
  long seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(g_mu);
      g_go.wait(l, [&] { return g_gen != seen; });
      seen = g_gen;
    }
    run_share(t);
    std::lock_guard<std::mutex> l(g_mu);
    if (--g_pending == 0) g_done.notify_all();
  }
}
}  // namespace

#define API extern "C" __attribute__((visibility("default")))
API void ab_setup(int threads, int hot) {
  static std::vector<std::thread> workers;
  g_threads = threads;
  g_hot = hot != 0;
  while ((int)workers.size() < threads - 1) {
    workers.emplace_back(worker, (int)workers.size() + 1);
    workers.back().detach();
  }
}
// One launch of the tile program: C[batch][M][N] = A[batch][M][K] B[batch][K][N] in bm/bn/bk blocks,
// fp32 (dtype 0), int8 operands with an int32 C (1), fp16 or bf16 operands with an fp32 C (2, 3: the
// 16-bit programs' fp32 accumulator tile, a final copy-out to 16 bits left out).
API void ab_launch(int M, int N, int K, int bm, int bn, int bk, int batch, const void* A, const void* B,
                   void* C, int dtype) {
  tw_cpu::new_launch();
  g_job = Job{M, N, K, bm, bn, bk, batch, A, B, C, dtype};
  if (g_threads > 1) {
    {
      std::lock_guard<std::mutex> l(g_mu);
      g_pending = g_threads - 1;
      ++g_gen;
    }
    g_go.notify_all();
  }
  run_share(0);
  if (g_threads > 1) {
    std::unique_lock<std::mutex> l(g_mu);
    g_done.wait(l, [] { return g_pending == 0; });
  }
}
