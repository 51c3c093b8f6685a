// A/B of generated cpu kernels whose parameters are float32 tensors, the last one the output (softmax
// X -> Y, flash attention Q, K, V -> O), built from the same generated C++ against different runtime
// headers or -march values: each library's grid of blocks runs in turn, in an order rotated every
// round, next to a plain copy of the first tensor's bytes (memcpy), timed in thread CPU time (the
// machine may be shared); prints the median and min per variant, its ratio to the first variant
// (median of the per-round ratios) and the copy's time over its, and checks that every variant's
// output equals the first one's bit for bit (the header changes it compares must not change a
// result). The inputs are normal(0, 2) from a fixed generator. Every tensor is on 2 MiB pages, 16 B
// into the first (numpy's layout, which the bench's arrays have; -DAB_OFFSET=0: page-aligned). With
// TW_AB_PEAKS naming bench/peaks.cpp's library (bench/run.py build_peaks), the copy is its copy probe
// of the same bytes instead (tw_copy_probe_run, 1 thread: issue 16's "% of measured copy bandwidth"),
// and every time is the process's CPU time (the probe's pass runs on its team's thread).
//
//   TW_DUMP_IR=/tmp/d TW_CPU_ARCH=x86-64-v3 python -c '...compile the kernel...'   # its NN_codegen.cpp
//   g++ -O3 -march=x86-64-v3 -std=c++20 -fPIC -shared -I<include> k.cpp -o old.so    # (the flags of
//   g++ -O3 -march=x86-64-v3 -std=c++20 -fPIC -shared -I<include2> k.cpp -o new.so   #  docs/environment.md)
//   g++ -O2 bench/row_kernel_ab.cpp -o ab -ldl
//   (a kernel calling the gemm runtime: g++ -O3 -march=... -fPIC -shared <include>/tw_cpu/gemm_runtime.cpp
//    -o libtwgemm.so, link each kernel library with it and run with LD_LIBRARY_PATH set)
//   ./ab 8192 33554432,33554432 9 old.so new.so         # softmax 8192 x 4096: shape vars, tensor sizes
//   ./ab - 2097152,2097152,2097152,2097152 9 a.so b.so   # flash attention 1 x 8 x 2048 x 128: no shape vars
#include <dlfcn.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#ifndef AB_OFFSET
#define AB_OFFSET 16
#endif

typedef struct TwArgs {
  void* const* params;
  const int64_t* shape_vars;
} TwArgs;
typedef void (*grid_fn)(const TwArgs*, int64_t*);
typedef void (*block_fn)(const TwArgs*, int64_t, int64_t, int64_t);

static clockid_t g_clock = CLOCK_THREAD_CPUTIME_ID;
static double cpu_now() {
  timespec t;
  clock_gettime(g_clock, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The tensors as numpy holds large arrays (bench/run.py's): on 2 MiB pages (madvise; with transparent
// huge pages in "madvise" mode an unadvised array stays on 4 KiB pages, and the kernels read 1.4-1.9x
// slower from memory than on numpy's arrays: docs/performance.md, session 36), kOffset bytes into
// the first page (numpy's data offset).
static const size_t kOffset = AB_OFFSET;
static float* alloc_big(size_t bytes) {
  const size_t huge = size_t(1) << 21, all = (kOffset + bytes + huge - 1) / huge * huge;
  char* p = (char*)aligned_alloc(huge, all);
  if (!p) return nullptr;
#if defined(MADV_HUGEPAGE)
  madvise(p, all, MADV_HUGEPAGE);
#endif
  return (float*)(p + kOffset);
}

static std::vector<int64_t> ints(const char* s) {
  std::vector<int64_t> v;
  for (char* e; *s && *s != '-'; s = *e ? e + 1 : e) v.push_back(strtoll(s, &e, 10));
  return v;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s SHAPE_VARS|- TENSOR_SIZES ROUNDS lib.so [lib.so ...] (comma-separated lists)\n", argv[0]);
    return 2;
  }
  const std::vector<int64_t> shape = ints(argv[1]), sizes = ints(argv[2]);
  const int rounds = atoi(argv[3]);
  std::vector<float*> in;
  uint64_t s = 1;
  for (size_t k = 0; k + 1 < sizes.size(); ++k) {
    float* x = alloc_big((size_t)sizes[k] * 4);
    for (int64_t i = 0; i < sizes[k]; i += 2) {  // normal(0, 2) by Box-Muller from a fixed LCG
      auto u = [&] { s = s * 6364136223846793005ull + 1442695040888963407ull; return ((s >> 11) + 0.5) * 0x1p-53; };
      const double r = std::sqrt(-2 * std::log(u())), a = 2 * M_PI * u();
      x[i] = (float)(2 * r * std::cos(a));
      if (i + 1 < sizes[k]) x[i + 1] = (float)(2 * r * std::sin(a));
    }
    in.push_back(x);
  }
  const size_t n = (size_t)sizes.back();
  struct Lib {
    std::string name;
    grid_fn grid;
    block_fn block;
    float* y;
  };
  std::vector<Lib> libs;
  for (int k = 4; k < argc; ++k) {
    void* h = dlopen(argv[k], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    Lib l{argv[k], (grid_fn)dlsym(h, "tw_grid"), (block_fn)dlsym(h, "tw_block"),
          alloc_big(n * 4)};
    if (!l.grid || !l.block) {
      fprintf(stderr, "%s: no tw_grid / tw_block\n", argv[k]);
      return 1;
    }
    memset(l.y, 0, n * 4);
    libs.push_back(l);
  }
  const size_t cn = (size_t)sizes[0];
  float* cy = (float*)malloc(cn * 4);
  memset(cy, 0, cn * 4);
  void* probe = nullptr;
  double (*probe_run)(void*, int) = nullptr;
  if (const char* peaks = getenv("TW_AB_PEAKS")) {
    void* h = dlopen(peaks, RTLD_NOW | RTLD_LOCAL);
    auto probe_new = h ? (void* (*)(int, double))dlsym(h, "tw_copy_probe_new") : nullptr;
    probe_run = h ? (double (*)(void*, int))dlsym(h, "tw_copy_probe_run") : nullptr;
    if (!probe_new || !probe_run || !(probe = probe_new(1, (double)cn * 4))) {
      fprintf(stderr, "TW_AB_PEAKS=%s: no copy probe (%s)\n", peaks, h ? "symbols" : dlerror());
      return 1;
    }
    g_clock = CLOCK_PROCESS_CPUTIME_ID;
  }
  auto run = [&](const Lib& l) {
    std::vector<void*> params(in.begin(), in.end());
    params.push_back(l.y);
    const TwArgs a{params.data(), shape.data()};
    int64_t ext[3];
    l.grid(&a, ext);
    for (int64_t bz = 0; bz < ext[2]; ++bz)
      for (int64_t by = 0; by < ext[1]; ++by)
        for (int64_t bx = 0; bx < ext[0]; ++bx) l.block(&a, bx, by, bz);
  };
  for (const Lib& l : libs) run(l);
  for (size_t k = 1; k < libs.size(); ++k)
    if (memcmp(libs[k].y, libs[0].y, n * 4) != 0) {
      size_t i = 0;
      while (memcmp(libs[k].y + i, libs[0].y + i, 4) == 0) ++i;
      printf("DIFFERENT OUTPUT: %s [%zu] %.9g vs %.9g\n", libs[k].name.c_str(), i, libs[k].y[i], libs[0].y[i]);
    }
  const size_t V = libs.size() + 1;  // the last: the copy
  std::vector<std::vector<double>> t(V);
  for (int r = 0; r < rounds; ++r)
    for (size_t q = 0; q < V; ++q) {
      const size_t v = (q + r) % V;
      const double t0 = cpu_now();
      if (v < libs.size()) run(libs[v]);
      else if (probe) probe_run(probe, 1);
      else memcpy(cy, in[0], cn * 4);
      t[v].push_back(cpu_now() - t0);
    }
  const double cm = median(t[V - 1]);
  printf("output %zu floats, %d rounds, %s CPU time; copy of the first tensor (%s) median %.2f ms, min %.2f\n", n,
         rounds, probe ? "process" : "thread", probe ? "copy probe" : "memcpy", cm * 1e3,
         *std::min_element(t[V - 1].begin(), t[V - 1].end()) * 1e3);
  for (size_t v = 0; v < libs.size(); ++v) {
    std::vector<double> ratio(rounds);
    for (int r = 0; r < rounds; ++r) ratio[r] = t[v][r] / t[0][r];
    printf("%-40s median %7.2f ms  min %7.2f  / first %.3f (min %.3f)  copy/this %4.0f%%\n", libs[v].name.c_str(),
           median(t[v]) * 1e3, *std::min_element(t[v].begin(), t[v].end()) * 1e3, median(ratio),
           *std::min_element(ratio.begin(), ratio.end()), 100 * cm / median(t[v]));
  }
  return 0;
}
