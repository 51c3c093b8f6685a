// bench/paged_decode_ab.cpp: the harness of bench/paged_decode_ab.py (see its docstring). Loads
// variant libraries (the generated paged_decode_pages kernel compiled together with one gemm
// runtime), runs them beside a page-read probe in the kernel's order and a plain streaming read
// of the same bytes, on 1 or 2 persistent threads released together (a spin barrier: no wake-up
// in the timing), alternating every round. Per entry: wall time per call, the larger of the
// threads' CPU times (CLOCK_THREAD_CPUTIME_ID: what time slicing on a loaded machine does not
// inflate), the second thread's start after the first and the gap between the threads' ends.
//
//   paged_decode_ab ES THREADS ROUNDS PAGES LIB...   (ES 4 fp32, 2 bf16; PAGES cold | hot | seq | sorted)
//
// The bench's shapes (8 sequences, 32 / 8 heads, D 128, context 4096, page 16); the caches on
// 2 MiB pages (madvise) as numpy's are; cold: a shuffled block table over all pages and 64 MiB
// read between calls (past the L3); hot: every page number in 0-3 (in L2); seq: the pages in
// memory order (the hardware prefetchers' best case); sorted: cold's pages, each sequence's in
// ascending memory order (about 8 pages apart: an allocator handing out ascending free blocks). Thread t runs sequences [t * 8 / T,
// (t + 1) * 8 / T) in order, as the runtime's pool splits the 8 blocks.
#include <dlfcn.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tw_cpu/abi.h"
#include "tw_cpu/simd.h"

#if !defined(__AVX512F__)
#error "bench/paged_decode_ab.cpp reads with AVX-512 vectors: build it on an AVX-512 host (-march=native)"
#endif

namespace {

double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
double cpu_s() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

char* big_alloc(size_t bytes) {
  const size_t a = size_t(2) << 20;
  bytes = (bytes + a - 1) / a * a;
  char* p = static_cast<char*>(aligned_alloc(a, bytes));
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  madvise(p, bytes, MADV_HUGEPAGE);
  memset(p, 1, bytes);
  return p;
}

constexpr int NS = 8, NH = 32, KVH = 8, D = 128, BS = 16, CTX = 4096, MB = CTX / BS, NB = NS * MB + 3, W = KVH * D;

// T threads (the caller is thread 0) released together; per thread its CPU time and start / end
struct Pool {
  int n;
  std::vector<std::thread> th;
  std::atomic<int> gen{0}, done{0};
  std::atomic<bool> stop{false};
  std::function<void(int)> job;
  std::vector<double> cpu, t0, t1;
  double start = 0;
  explicit Pool(int n_) : n(n_), cpu(n_), t0(n_), t1(n_) {
    for (int t = 1; t < n; ++t)
      th.emplace_back([this, t] {
        for (int seen = 0;;) {
          while (gen.load(std::memory_order_acquire) == seen) {
            if (stop.load()) return;
            _mm_pause();
          }
          seen = gen.load();
          body(t);
          done.fetch_add(1);
        }
      });
  }
  void body(int t) {
    const double c = cpu_s();
    t0[t] = now_s() - start;
    job(t);
    t1[t] = now_s() - start;
    cpu[t] = cpu_s() - c;
  }
  double run(std::function<void(int)> f) {
    job = std::move(f);
    done = 0;
    start = now_s();
    gen.fetch_add(1, std::memory_order_release);
    body(0);
    while (done.load(std::memory_order_acquire) != n - 1) _mm_pause();
    return now_s() - start;
  }
  ~Pool() {
    stop = true;
    for (auto& x : th) x.join();
  }
};

// sequence b's pages in the kernel's order: per step of 4 pages the K pages' head strips (16 rows
// of D elements), then the V pages'; each pair of lines read with a prefetcht1 of the same lines
// of the page `lead` pages ahead in the same phase (the kernel's @prefetch_slices: lead 1 bf16, fp32
// tw_cpu::simd::kSliceLead32 of this host: 1 with AMX, else 4)
template <int ES>
__m512i probe_seq(const char* K, const char* V, const int32_t* bt, int lead) {
  constexpr long row = (long)W * ES, page = BS * row, strip = (long)D * ES;
  __m512i a0 = _mm512_setzero_si512(), a1 = a0;
  for (int j = 0; j < MB; j += 4)
    for (int ph = 0; ph < 2; ++ph) {
      const char* base = ph ? V : K;
      for (int jj = 0; jj < 4; ++jj) {
        const char* pg = base + (long)bt[j + jj] * page;
        const char* nx = base + (long)bt[std::min(j + jj + lead, MB - 1)] * page;
        for (int h = 0; h < KVH; ++h)
          for (int r = 0; r < BS; ++r)
            for (long o = r * row + h * strip; o < r * row + (h + 1) * strip; o += 128) {
              _mm_prefetch(nx + o, _MM_HINT_T1);
              _mm_prefetch(nx + o + 64, _MM_HINT_T1);
              a0 = _mm512_xor_si512(a0, _mm512_load_si512(pg + o));
              a1 = _mm512_xor_si512(a1, _mm512_load_si512(pg + o + 64));
            }
      }
    }
  return _mm512_xor_si512(a0, a1);
}
__m512i stream_read(const char* p, long bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (long o = 0; o < bytes; o += 256) {
    a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + o));
    a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + o + 64));
    a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + o + 128));
    a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + o + 192));
  }
  return _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
}
std::atomic<long long> sink{0};

// element i of an fp32 (es 4) or bf16 (es 2) array, as fp32
float out_f32_raw(const char* p, int es, long i) {
  if (es == 4) {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
  }
  const uint32_t b = uint32_t(reinterpret_cast<const uint16_t*>(p)[i]) << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}
float out_f32(const std::vector<char>& out, int es, long i) { return out_f32_raw(out.data(), es, i); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s ES(4|2) THREADS ROUNDS cold|hot|seq LIB...\n", argv[0]);
    return 2;
  }
  const int ES = atoi(argv[1]), T = atoi(argv[2]), R = atoi(argv[3]);
  const std::string pages = argv[4];
  if ((ES != 4 && ES != 2) || T < 1 || R < 1 || (pages != "cold" && pages != "hot" && pages != "seq" && pages != "sorted")) {
    fprintf(stderr, "bad arguments\n");
    return 2;
  }
  const long cache_bytes = (long)NB * BS * W * ES;
  char* K = big_alloc(cache_bytes);
  char* V = big_alloc(cache_bytes);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  auto fill = [&](char* c, long n) {
    for (long i = 0; i < n; ++i) {
      const float f = u(rng);
      uint32_t b;
      memcpy(&b, &f, 4);
      if (ES == 4)
        memcpy(c + 4 * i, &f, 4);
      else
        reinterpret_cast<uint16_t*>(c)[i] = uint16_t(b >> 16);
    }
  };
  fill(K, cache_bytes / ES);
  fill(V, cache_bytes / ES);
  std::vector<char> Q((long)NS * NH * D * ES);
  fill(Q.data(), NS * NH * D);
  std::vector<int32_t> perm(NB), bt(NS * MB), cl(NS, CTX);
  for (int i = 0; i < NB; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int i = 0; i < NS * MB; ++i) bt[i] = pages == "hot" ? i % 4 : pages == "seq" ? i : perm[i];
  if (pages == "sorted")  // each sequence's (random) pages in ascending memory order
    for (int b = 0; b < NS; ++b) std::sort(bt.begin() + b * MB, bt.begin() + (b + 1) * MB);

  struct Entry {
    std::string name;
    tw_grid_fn grid = nullptr;
    std::function<void(int)> f;
    std::vector<char> out;
    std::vector<double> wall, cpu, skew, gap;
  };
  const int nk = argc - 5;
  std::vector<Entry> es(nk + 2);  // never resized: the kernels' jobs point at their entries' out
  for (int i = 0; i < nk; ++i) {
    void* h = dlopen(argv[5 + i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    Entry& e = es[i];
    e.name = argv[5 + i];
    e.name = e.name.substr(e.name.rfind('/') + 1);
    e.grid = reinterpret_cast<tw_grid_fn>(dlsym(h, "tw_grid"));
    auto block = reinterpret_cast<tw_block_fn>(dlsym(h, "tw_block"));
    if (!e.grid || !block) {
      fprintf(stderr, "%s: no tw_grid / tw_block\n", argv[5 + i]);
      return 1;
    }
    e.out.assign(Q.size(), 0);
    e.f = [block, &Q, K, V, &bt, &cl, T, out = e.out.data()](int t) {
      void* params[6] = {Q.data(), K, V, bt.data(), cl.data(), out};
      const int64_t sv[1] = {0};
      const TwArgs args{params, sv};
      for (int b = t * NS / T; b < (t + 1) * NS / T; ++b) block(&args, b, 0, 0);
    };
  }
  const int lead = ES == 4 ? tw_cpu::simd::kSliceLead32 : 1;
  es[nk].name = "probe: the kernel's read order";
  es[nk].f = [&, lead, T](int t) {
    __m512i a = _mm512_setzero_si512();
    for (int b = t * NS / T; b < (t + 1) * NS / T; ++b)
      a = _mm512_xor_si512(a, ES == 4 ? probe_seq<4>(K, V, bt.data() + b * MB, lead)
                                      : probe_seq<2>(K, V, bt.data() + b * MB, lead));
    sink += _mm512_reduce_add_epi64(a);
  };
  const long total = 2L * NS * CTX * W * ES;
  char* S = big_alloc(total);
  es[nk + 1].name = "stream: the same bytes, contiguous";
  es[nk + 1].f = [&, T](int t) { sink += _mm512_reduce_add_epi64(stream_read(S + t * (total / T), total / T)); };
  const long fl = 64L << 20;
  char* F = big_alloc(fl);
  auto flush = [&, T](int t) { sink += _mm512_reduce_add_epi64(stream_read(F + t * (fl / T), fl / T)); };

  Pool pool(T);
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < nk + 2; ++k) {
      Entry& e = es[(k + r) % (nk + 2)];  // the order rotates every round
      if (pages != "hot") pool.run(flush);
      if (e.grid) {
        int64_t ext[3];
        e.grid(nullptr, ext);  // tw_cpu::new_launch
      }
      e.wall.push_back(pool.run(e.f));
      double c = 0, s = 0, e0 = 1e30, e1 = 0;
      for (int t = 0; t < T; ++t) {
        c = std::max(c, pool.cpu[t]);
        s = std::max(s, pool.t0[t]);
        e0 = std::min(e0, pool.t1[t]);
        e1 = std::max(e1, pool.t1[t]);
      }
      e.cpu.push_back(c);
      e.skew.push_back(s);
      e.gap.push_back(e1 - e0);
    }
  auto q = [](std::vector<double> x, double& mn, double& med) {
    std::sort(x.begin(), x.end());
    mn = x[0];
    med = x[x.size() / 2];
  };
  const double gb = (double)total / 1e9;
  printf("%s, %d thread(s), %d rounds, pages %s: %.1f MB of K and V per call; ms min / median\n",
         ES == 4 ? "fp32" : "bf16", T, R, pages.c_str(), gb * 1e3);
  for (auto& e : es) {
    double wn, wm, cn, cm, sn, sm, gn, gm;
    q(e.wall, wn, wm);
    q(e.cpu, cn, cm);
    q(e.skew, sn, sm);
    q(e.gap, gn, gm);
    printf("  %-40s wall %6.2f / %6.2f (%5.1f GB/s at min)  CPU per thread %6.2f / %6.2f (%5.1f GB/s)  start skew %.3f  end gap %.3f\n",
           e.name.c_str(), wn * 1e3, wm * 1e3, gb / wn, cn * 1e3, cm * 1e3, gb / T / cn, sm * 1e3, gm * 1e3);
  }
  // against the first kernel, per round (> 1: the first is faster)
  for (int i = 1; i < nk + 2; ++i) {
    std::vector<double> w, c;
    for (int r = 0; r < R; ++r) {
      w.push_back(es[i].wall[r] / es[0].wall[r]);
      c.push_back(es[i].cpu[r] / es[0].cpu[r]);
    }
    double wn, wm, cn, cm;
    q(w, wn, wm);
    q(c, cn, cm);
    printf("  %-40s / first: wall median %.3f (min %.3f), CPU median %.3f (min %.3f)\n", es[i].name.c_str(), wm, wn,
           cm, cn);
  }
  // every variant's output against float64 attention over the same pages (bench/run.py's check)
  std::vector<double> ref((long)NS * NH * D);
  auto elem = [&](const char* c, long i) { return (double)out_f32_raw(c, ES, i); };
  for (int b = 0; b < NS; ++b)
    for (int h = 0; h < NH; ++h) {
      const int g = h / (NH / KVH);
      std::vector<double> sc(CTX);
      double mx = -1e300;
      for (int t = 0; t < CTX; ++t) {
        const long row = ((long)bt[b * MB + t / BS] * BS + t % BS) * W + (long)g * D;
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += elem(Q.data(), ((long)b * NH + h) * D + d) * elem(K, row + d);
        sc[t] = dot / std::sqrt((double)D);
        mx = std::max(mx, sc[t]);
      }
      double sum = 0;
      for (int t = 0; t < CTX; ++t) sum += sc[t] = std::exp(sc[t] - mx);
      double* o = &ref[((long)b * NH + h) * D];
      for (int d = 0; d < D; ++d) o[d] = 0;
      for (int t = 0; t < CTX; ++t) {
        const long row = ((long)bt[b * MB + t / BS] * BS + t % BS) * W + (long)g * D;
        for (int d = 0; d < D; ++d) o[d] += sc[t] / sum * elem(V, row + d);
      }
    }
  for (int i = 0; i < nk; ++i) {
    double err = 0, diff = 0;
    for (long j = 0; j < NS * NH * D; ++j) {
      err = std::max(err, std::abs(out_f32(es[i].out, ES, j) - ref[j]));
      diff = std::max(diff, (double)std::abs(out_f32(es[i].out, ES, j) - out_f32(es[0].out, ES, j)));
    }
    printf("  %s: max error vs float64 %.3g, max |out - first's out| %.3g\n", es[i].name.c_str(), err, diff);
  }
  return sink.load() == 42 ? 3 : 0;
}
