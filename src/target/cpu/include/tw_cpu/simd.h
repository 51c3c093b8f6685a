// tw_cpu/simd.h -- thin portable SIMD layer for the Tilewright CPU runtime headers.
//
// Uses GCC/Clang vector extensions plus a handful of __builtin_ia32_* builtins
// (no <immintrin.h>: it costs ~100-200 ms of parse time per kernel TU).
// The code path is chosen at compile time from the target feature macros:
//   __AVX512F__          -> 512-bit vectors (16 x f32)
//   __AVX__ / __AVX2__   -> 256-bit vectors (8 x f32), FMA3 if __FMA__
//   otherwise            -> 128-bit vectors (4 x f32), mul+add (portable fallback)
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "types.h"

#define TW_CPU_INLINE inline __attribute__((always_inline))

namespace tw_cpu {
namespace simd {

#if defined(__AVX512F__)
inline constexpr int kVecBytes = 64;
#elif defined(__AVX__)
inline constexpr int kVecBytes = 32;
#else
inline constexpr int kVecBytes = 16;
#endif
inline constexpr int kVF = kVecBytes / 4;  // f32 / i32 lanes per vector
// Streaming stores start at a cache line of the destination (64 bytes: what one write-combining
// buffer holds), not at a vector boundary: the bytes before it are stored as a head with ordinary
// stores (stream_copy, stream_values, the generated copy-outs' tw_h). With 32-byte vectors and
// numpy's arrays (16 B into a page) a row's chunks started halfway into a line, so every chunk
// began and ended with half a line, written by another chunk (in a row pipeline's rotated order,
// much later): the AVX2 softmax took 15-18% more time from memory, layer_norm 12-14%, rms_norm 6%
// (docs/performance.md "Session 36: ... (h-rows36)"). With AVX-512 a vector is a line: unchanged.
inline constexpr int kStreamBytes = 64;
// Whether a row pipeline's copy-out whose map reads a per-column operand (the norms' W, B) takes
// its rows in pairs (codegen.cpp, emit_row_pipeline, `if constexpr`): with AVX-512 layer_norm
// 8192x4096 took 13-16% less time from memory on a Zen 4 core (session 25, when the AVX2 build
// took 12% more); with AVX2 since the row pipeline's later changes layer_norm 15-17% and rms_norm
// 7-9% less (docs/performance.md "Session 34: ... (h-avx2rows34)"). SSE / portable: not measured,
// one row per step.
inline constexpr bool kPairRows = kVF >= 8;
// How far ahead of its reads (bytes) a fused map + row reduction that reads a tile's rows in place
// with no next-block prefetch (a copy inside a serial loop: the op zoo's frobenius, one program
// walking 64 MiB) prefetches into L2 (codegen.cpp emit_map_reduce). On the Intel server cores with
// AMX (Sapphire Rapids class) one core's read stream keeps too few misses in flight alone: such a
// loop took 7% less time with prefetcht1 4 KiB ahead, reaching numpy's sdot (docs/performance.md
// "Session 39: ... (h-rows39)"). Elsewhere (Zen 4, AVX2) not measured: none.
#if defined(__AMX_TILE__)
inline constexpr int kAheadBytes = 4096;
#else
inline constexpr int kAheadBytes = 0;
#endif

// How many pages ahead of the page a gemm reads in strips it prefetches the same strip of, for
// 32-bit pages (prefetch_gathers kTargetLead: paged decode's fp32 pages, 64 KiB at 8 kv heads x
// 128; the generated code's page index plus this). On the Intel server cores with AMX (Sapphire
// Rapids class) the next page: the fp32 decode took 0.88x the CPU time of 4 pages ahead (1 and 2
// threads, pages cold; 2 ahead 0.92x, 8 ahead 1.09x; docs/performance.md "Session 40: ...
// (h-decode40)"). Elsewhere the same page of the next step, 4 ahead: 1.06-1.07x faster than the
// next page on Zen 4 (session 19); AVX2 builds keep it (Zen 4's x86-64-v3 build among them).
#if defined(__AMX_TILE__)
inline constexpr int kSliceLead32 = 1;
#else
inline constexpr int kSliceLead32 = 4;
#endif

typedef float vf __attribute__((vector_size(kVecBytes)));
typedef int32_t vi __attribute__((vector_size(kVecBytes)));
// unaligned, aliasing-safe variants for loads/stores from user memory
typedef float vf_u __attribute__((vector_size(kVecBytes), aligned(4), may_alias));
typedef int32_t vi_u __attribute__((vector_size(kVecBytes), aligned(4), may_alias));
typedef float vf_a __attribute__((vector_size(kVecBytes), may_alias));
typedef int32_t vi_a __attribute__((vector_size(kVecBytes), may_alias));

TW_CPU_INLINE vf load(const float* p) { return *reinterpret_cast<const vf_a*>(p); }
TW_CPU_INLINE vf loadu(const float* p) { return *reinterpret_cast<const vf_u*>(p); }
TW_CPU_INLINE void store(float* p, vf v) { *reinterpret_cast<vf_a*>(p) = v; }
TW_CPU_INLINE void storeu(float* p, vf v) { *reinterpret_cast<vf_u*>(p) = v; }
// kVF bfloat16 / float16 values from p (unaligned), widened to float32 exactly as
// tw_cpu::convert<float> widens one (types.h to_f32, the same integer steps lane by lane: the same
// bits, NaN payloads included): the row reductions reading a bfloat16 / float16 tensor in place
// through a float32 tile's widening row view (view_rows) call the vector loads they call on floats.
typedef uint16_t vh_u __attribute__((vector_size(kVecBytes / 2), aligned(2), may_alias));
typedef uint32_t vu __attribute__((vector_size(kVecBytes)));
TW_CPU_INLINE vf loadu(const bf16* p) {
  vu x = __builtin_convertvector(*reinterpret_cast<const vh_u*>(p), vu);
  return reinterpret_cast<vf>(x << 16);
}
TW_CPU_INLINE vf loadu(const f16* p) {
  vu x = __builtin_convertvector(*reinterpret_cast<const vh_u*>(p), vu);
  vu sign = (x & 0x8000u) << 16;
  vu em = x & 0x7fffu;
  vu norm = (em << 13) + (112u << 23);                                                    // rebias 15 -> 127
  vu sub = reinterpret_cast<vu>(__builtin_convertvector(reinterpret_cast<vi>(em), vf) * 0x1p-24f);  // exact
  vu infnan = (em << 13) | 0x7f800000u;                                                   // keeps NaN payload
  vu r = em < 0x400u ? sub : (em >= 0x7c00u ? infnan : norm);
  return reinterpret_cast<vf>(r | sign);
}
TW_CPU_INLINE vi loadi(const int32_t* p) { return *reinterpret_cast<const vi_a*>(p); }
TW_CPU_INLINE vi loadui(const int32_t* p) { return *reinterpret_cast<const vi_u*>(p); }
TW_CPU_INLINE void storeui(int32_t* p, vi v) { *reinterpret_cast<vi_u*>(p) = v; }
// (vf{} + x would be a real add: 0 + -0 != -0 without -ffast-math)
#if defined(__AVX512F__)
#define TW_CPU_SPLAT(x) {x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}
#elif defined(__AVX__)
#define TW_CPU_SPLAT(x) {x, x, x, x, x, x, x, x}
#else
#define TW_CPU_SPLAT(x) {x, x, x, x}
#endif
TW_CPU_INLINE vf splat(float x) { return vf TW_CPU_SPLAT(x); }
TW_CPU_INLINE vi splati(int32_t x) { return vi TW_CPU_SPLAT(x); }
#undef TW_CPU_SPLAT

// a*b + c, fused where the target has FMA.
TW_CPU_INLINE vf fma(vf a, vf b, vf c) {
#if defined(__AVX512F__)
  return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4 /*CUR_DIRECTION*/);
#elif defined(__FMA__)
  return __builtin_ia32_vfmaddps256(a, b, c);
#else
  return a * b + c;
#endif
}

#if defined(__x86_64__) && (defined(__AVX512F__) || defined(__AVX__))
// One vector to a vector-aligned p with a non-temporal store (vmovntps). clang has no
// __builtin_ia32_movntps512 / 256; its __builtin_nontemporal_store emits the same instruction.
// With g++ an asm statement, so consecutive streaming stores stay in program order (ascending
// addresses in stream_copy / store_chunk / stream_chunk): g++ reorders the builtin's (0x40, 0x80,
// 0x00, 0xc0 within a 256-byte chunk), and in order the memory-bound row kernels ran 5-8% faster
// from memory on a Zen 4 core, layer_norm 15% on its AVX2 build (docs/performance.md, session 18).
// g++ then keeps stream_chunk's buffer in memory and reloads each vector before its store, which
// is what those kernels gain from (in order from registers they ran 12-16% slower, session 19);
// stream_chunk64 streams a chunk from registers in order, for the arithmetic-bound ones.
TW_CPU_INLINE void stream_store(float* p, vf v) {
#if defined(__clang__)
  __builtin_nontemporal_store(v, reinterpret_cast<vf*>(p));
#elif defined(__AVX512F__)
  asm volatile("vmovntps %1, %0" : "=m"(*reinterpret_cast<vf*>(p)) : "v"(v));
#else
  asm volatile("vmovntps %1, %0" : "=m"(*reinterpret_cast<vf*>(p)) : "x"(v));
#endif
}
#endif

// Copies `bytes` with non-temporal (streaming) stores where the target has them: for large
// outputs written once (the stores bypass the caches and skip the read-for-ownership, one
// third less memory traffic than a plain copy). Call stream_fence() after the last one.
TW_CPU_INLINE void stream_copy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__) && (defined(__AVX512F__) || defined(__AVX__))
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t head = (size_t)(-(uintptr_t)d) & (size_t)(kStreamBytes - 1);
  if (head > bytes) head = bytes;
  __builtin_memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= (size_t)kVecBytes; bytes -= kVecBytes, d += kVecBytes, s += kVecBytes) {
    stream_store(reinterpret_cast<float*>(d), loadu(reinterpret_cast<const float*>(s)));
  }
  __builtin_memcpy(d, s, bytes);
#else
  __builtin_memcpy(dst, src, bytes);
#endif
}
// n values value(0), ..., value(n - 1) of type T to dst with streaming stores: the rows of a large
// output written once whose dtype differs from its source's (a copy-out converting a float32 tile
// to a bfloat16 / float16 tensor, which stream_copy cannot take). The values go to an L1 chunk
// buffer (g++ vectorises the value loop as the plain `dst[i] = value(i)` loop it replaces), then
// stream_copy streams the chunk; the first chunk ends at dst's first cache line boundary
// (kStreamBytes), so the others start on one. The same bytes as the plain loop. Call stream_fence() after the last one.
template <class T, class F>
TW_CPU_INLINE void stream_values(T* dst, int64_t n, F value) {
  constexpr int64_t C = 1024 / (int64_t)sizeof(T);
  alignas(64) T buf[C];
  const int64_t h = (int64_t)(((size_t)(-(uintptr_t)dst) & (size_t)(kStreamBytes - 1)) / sizeof(T));
  for (int64_t j = 0, m = 0; j < n; j += m) {
    m = j == 0 && h > 0 ? h : C;
    if (m > n - j) m = n - j;
    for (int64_t i = 0; i < m; ++i) buf[i] = value(j + i);
    stream_copy(dst + j, buf, (size_t)m * sizeof(T));
  }
}
// The lanes of v combined into one value by halves (lane i with lane i + kVF/2, then with
// i + kVF/4, ...): log2(kVF) shuffles and vector operations instead of a chain of kVF scalar
// ones (a row reduction's last step: 20-30 cycles of a 128-wide row's ~40 on a Sapphire Rapids
// core). max / min: the same value in any grouping (the accumulators hold no NaN: a NaN element
// never replaces one); sum: a pairwise grouping of the lanes.
template <class F>
TW_CPU_INLINE float fold_lanes(vf v, F f) {
#if defined(__AVX512F__)
  v = f(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = f(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = f(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = f(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
#elif defined(__AVX__)
  v = f(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3));
  v = f(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5));
  v = f(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6));
#else
  v = f(v, __builtin_shufflevector(v, v, 2, 3, 0, 1));
  v = f(v, __builtin_shufflevector(v, v, 1, 0, 3, 2));
#endif
  return v[0];
}
TW_CPU_INLINE float fold_sum(vf v) { return fold_lanes(v, [](vf a, vf b) { return a + b; }); }
// max/min propagate NaN (any lane NaN gives NaN; docs/language.md T.reduce_*)
TW_CPU_INLINE float fold_max(vf v) { return fold_lanes(v, [](vf a, vf b) { return b != b ? b : (b > a ? b : a); }); }
TW_CPU_INLINE float fold_min(vf v) { return fold_lanes(v, [](vf a, vf b) { return b != b ? b : (b < a ? b : a); }); }

// Stores n floats of a (64-byte aligned) chunk buffer to dst: with streaming stores when `nt`
// and dst is vector aligned (the rows of a large output, see stream_copy), else ordinary stores.
// Generated map + copy-out fusions call it once per chunk of a row.
TW_CPU_INLINE void store_chunk(float* dst, const float* buf, int64_t n, bool nt) {
#if defined(__x86_64__) && (defined(__AVX512F__) || defined(__AVX__))
  if (nt && ((uintptr_t)dst & (uintptr_t)(kVecBytes - 1)) == 0) {
    int64_t i = 0;
    for (; i + kVF <= n; i += kVF) stream_store(dst + i, load(buf + i));
    __builtin_memcpy(dst + i, buf + i, (size_t)(n - i) * sizeof(float));
    return;
  }
#endif
  (void)nt;
  __builtin_memcpy(dst, buf, (size_t)n * sizeof(float));
}
// The same for a bfloat16 / float16 output (a map fused with a copy-out that converts its float32
// tile, fuse_map_copy_out): the n <= 64 values converted with tw_cpu::convert, as the separate
// copy converts them (the same bits), into an L1 chunk, stored with stream_copy when `nt` (dst
// vector aligned: the generated code starts its chunks at the row's first cache line boundary), else
// copied.
template <class T>
TW_CPU_INLINE void store_chunk(T* dst, const float* buf, int64_t n, bool nt) {
  alignas(64) T h[64];
  for (int64_t i = 0; i < n; ++i) h[i] = convert<T>(buf[i]);
  if (nt) stream_copy(dst, h, (size_t)n * sizeof(T));
  else __builtin_memcpy(dst, h, (size_t)n * sizeof(T));
}
// A full chunk of 64 values (the row pipeline's chunk) converted to T as store_chunk<T> converts
// them, stored to dst with streaming stores from the L1 chunk when `nt` (dst vector aligned: the
// pipeline's full chunks start at the row's first cache line boundary), else with ordinary ones: no
// memcpy call of a run-time size, which cost store_chunk<T> two library calls per chunk.
template <class T>
TW_CPU_INLINE void store_chunk64(T* dst, const float* buf, bool nt) {
  alignas(64) T h[64];
  for (int i = 0; i < 64; ++i) h[i] = convert<T>(buf[i]);
#if defined(__x86_64__) && (defined(__AVX512F__) || defined(__AVX__))
  if (nt) {
    for (size_t b = 0; b < sizeof h; b += kVecBytes)
      stream_store(reinterpret_cast<float*>(reinterpret_cast<char*>(dst) + b),
                   load(reinterpret_cast<const float*>(reinterpret_cast<const char*>(h) + b)));
    return;
  }
#endif
  (void)nt;
  __builtin_memcpy(dst, h, sizeof h);
}
// A full chunk of a row written with streaming stores: n floats (a multiple of kVF) from buf to
// dst, which is vector aligned (the row pipeline's full chunks), with no alignment test and no
// memcpy fallback.
TW_CPU_INLINE void stream_chunk(float* dst, const float* buf, int64_t n) {
#if defined(__x86_64__) && (defined(__AVX512F__) || defined(__AVX__))
  for (int64_t i = 0; i < n; i += kVF) stream_store(dst + i, load(buf + i));
#else
  __builtin_memcpy(dst, buf, (size_t)n * sizeof(float));
#endif
}
// A full chunk of 64 floats (256 bytes: the row pipeline's chunk) from buf to the vector-aligned
// dst with streaming stores from registers, in address order: one asm statement whose inputs are
// the chunk's vectors, so g++ computes them into registers and drops buf, where stream_chunk's
// per-vector asm statements keep buf in memory and reload each vector before its store. For
// the row pipelines with an arithmetic-bound pass (from memory on a Zen 4 core, TSC cycles per
// element: softmax 5-7% fewer on its AVX2 build, 3-6% natively; log_softmax 3-6% and 0-2%);
// the memory-bound norms ran 12-16% slower with it than with stream_chunk (docs/performance.md,
// session 19).
TW_CPU_INLINE void stream_chunk64(float* dst, const float* buf) {
#if defined(__x86_64__) && (defined(__AVX512F__) || defined(__AVX__)) && !defined(__clang__)
  struct Chunk {
    float f[64];
  };
#if defined(__AVX512F__)
  asm volatile("vmovntps %2, (%1)\n\tvmovntps %3, 64(%1)\n\tvmovntps %4, 128(%1)\n\tvmovntps %5, 192(%1)"
               : "=m"(*reinterpret_cast<Chunk*>(dst))
               : "r"(dst), "v"(load(buf)), "v"(load(buf + 16)), "v"(load(buf + 32)), "v"(load(buf + 48)));
#else
  asm volatile("vmovntps %2, (%1)\n\tvmovntps %3, 32(%1)\n\tvmovntps %4, 64(%1)\n\tvmovntps %5, 96(%1)\n\t"
               "vmovntps %6, 128(%1)\n\tvmovntps %7, 160(%1)\n\tvmovntps %8, 192(%1)\n\tvmovntps %9, 224(%1)"
               : "=m"(*reinterpret_cast<Chunk*>(dst))
               : "r"(dst), "x"(load(buf)), "x"(load(buf + 8)), "x"(load(buf + 16)), "x"(load(buf + 24)),
                 "x"(load(buf + 32)), "x"(load(buf + 40)), "x"(load(buf + 48)), "x"(load(buf + 56)));
#endif
#else
  stream_chunk(dst, buf, 64);
#endif
}
TW_CPU_INLINE void stream_fence() {
#if defined(__x86_64__)
  __builtin_ia32_sfence();
#endif
}

}  // namespace simd
}  // namespace tw_cpu
