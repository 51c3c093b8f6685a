// tw_cpu/gemm_impl.h -- the gemm runtime: packing, micro-kernels and drivers behind tw_cpu::gemm
// (gemm.h). Compiled once per (compiler, flags, instruction set) as gemm_runtime.cpp into a
// shared library that the runtime keeps in its disk cache and loads once per process, so a
// kernel's translation unit includes only the declarations (gemm.h) and compiles in a fraction
// of the time. Tests that exercise the internals include this header directly.
//
//   C[M x N] = (accumulate ? C : 0) + op(A)[M x K] * op(B)[K x N]
//   op(A) = transA ? A^T (A stored K x M, row-major, lda >= M)
//                  : A   (A stored M x K, row-major, lda >= K); same for B.
//
// Supported (TA, TB, TC):
//   (float, float, float), (f16, f16, float), (bf16, bf16, float):
//       fp32 FMA accumulation, f16/bf16 widened to fp32 while packing (f16 always; bf16 on
//       targets without AVX512-BF16).
//   (bf16, bf16, float) on targets with AVX512-BF16 (__AVX512BF16__, e.g. -march=native on Zen 4
//       or Sapphire Rapids): the operands are packed as bf16 k pairs (one 32-bit element holds
//       k and k + 1 of a row of op(A) or a column of op(B); an odd K is padded with a zero pair
//       element) and the micro-kernel runs vdpbf16ps, two products per fp32 lane and
//       instruction: twice the FMA rate. Same blocking, caches and tails as the fp32 path (the
//       K block holds twice the k values, the same bytes). Numerics: the product of two bf16 is
//       exact in fp32; vdpbf16ps adds the two products of a pair into the fp32 accumulator one
//       after the other, each addition rounded to nearest even (MXCSR is not consulted), and it
//       treats subnormal inputs and results as zero (DAZ / FTZ): a bf16 below 2^-126 in
//       magnitude reads as 0, and an accumulator value below 2^-126 after adding a product
//       becomes 0 (e.g. 2^-70 * 2^-70 into a zero accumulator), where the widening path keeps
//       them. Otherwise the error bound is that of the fp32 path: one fp32
//       rounding per k (tests/cpp/test_cpu_runtime.cpp: Gemm.BF16PairsTight, BF16PairsDazFtz).
//   (bf16, bf16, float) and (int8_t, int8_t, int32_t) on targets with AMX (__AMX_TILE__,
//       __AMX_BF16__, __AMX_INT8__, e.g. -march=native on Sapphire Rapids) when the process has
//       tile permission: gemm_amx, TDPBF16PS / TDPBSSD on 16 x 64-byte tiles (see "AMX path" at
//       the end of this file: blocking, packing, numerics, the permission and its fallback).
//   (int8_t, int8_t, int32_t): exact int32 accumulation (wrap-around on overflow,
//       which needs K > ~130000 with extreme values).
//       * AVX512-VNNI: vpdpbusd (u8 x s8).  A is packed as u8 = a + 128 and the
//         result corrected by -128 * colsum(B) per column.
//       * AVX2: int16 pairs + vpmaddwd.   * otherwise: int32 multiply-add.
//
// Algorithm (Goto/BLIS style, written from scratch):
//   jc (NC cols) -> pc (KC deep, pack B panel kc x nc, NR-wide micro-panels)
//   -> ic (MC rows, pack A block mc x kc, MR-tall micro-panels) -> jr -> ir
//   -> register-blocked micro-kernel MR x NR with broadcast-FMA.
//   Packing pads with zeros, so the micro-kernel never reads out of bounds; row tails
//   use a micro-kernel of their own height (a remainder under 4 rows shares the last full
//   panel in two balanced ones: panel_rows), column tails go through a small stack tile; a
//   tail of at most NR / 4 columns runs ukr_f32_cols instead (panels' rows along the lanes).
//   An fp32 A read by one call only (not transposed, one row block, one K block: a_in_place)
//   is not packed: its micro-kernel (ukr_f32_ra) broadcasts from A's rows in place.
//   Skinny calls (M <= MR, fp32, B not transposed) skip B packing and stream B
//   straight from memory. GEMV calls (fp32: M <= 2, or M = 1 / N = 1 with any transposes) pack
//   nothing: gemm_path() picks row streaming or dot products along contiguous K, and an M = 1
//   strip (under 2048 columns) of wider rows shares whole-row products across blocks
//   (gemv_shared_rows).
//   Small-M calls (gemm_small: M <= 8 f16 / bf16, bf16 from 5 rows only off AMX; fp32 with a
//   tile-sized B, transposed or M > 2) pack nothing: B read in place, widened in registers (bf16
//   on AVX512-BF16 targets without AMX: vdpbf16ps on the pairs, with its DAZ / FTZ).
//   Scratch is thread_local, 64 B aligned, grown on demand.
#pragma once

#include "check.h"
#include "gemm.h"
#include "simd.h"
#include "types.h"

#include <errno.h>
#include <utility>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__AMX_TILE__) || (defined(__AVX512VNNI__) && defined(__AVX512F__))
#include <immintrin.h>
#endif

namespace tw_cpu {
namespace detail {

// Memory for the packed-operand arenas (tens of MiB, read all over by the micro-kernels):
// 2 MiB aligned and, on Linux, marked for transparent huge pages (the default THP mode is
// often "madvise"). With 4 KiB pages a 64 MiB packed B needs 16k TLB entries: the page walks
// cost about 3% of the gemm rate at 2048^3 and 4096^3. nullptr when out of memory. Never freed here:
// callers free with __builtin_free.
inline void* arena_alloc(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  bytes = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = nullptr;
  if (posix_memalign(&p, kHuge, bytes) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without THP the pages stay 4 KiB
#endif
  return p;
}

// ------------------------------------------------------------------ scratch
struct Scratch {
  char* raw = nullptr;
  char* ptr = nullptr;
  size_t cap = 0;
  bool huge = false;  // allocate with arena_alloc (large, long-lived buffers)
  Scratch() = default;
  explicit Scratch(bool h) : huge(h) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (raw) __builtin_free(raw);
  }
  void* get(size_t bytes) {
    if (bytes > cap) {
      if (raw) __builtin_free(raw);
      size_t c = bytes + bytes / 4 + 4096;
      raw = huge ? (char*)arena_alloc(c + 64) : (char*)__builtin_malloc(c + 64);
      if (!raw) {  // out of memory: an error at the kernel, not a signal (tw_cpu/check.h)
        ptr = nullptr;
        cap = 0;
        throw AllocError{c + 64};
      }
      ptr = (char*)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
      cap = c;
    }
    return ptr;
  }
};
// slot 0: packed A, slot 1: packed B, slot 2: int8 column corrections
inline Scratch& gemm_scratch(int slot) {
  static thread_local Scratch s[3];
  return s[slot];
}

// ------------------------------------------------ packed-A reuse across calls
// A tile program calls gemm once per K step on tiles of the same global A rows, and the
// blocks a thread runs one after another (same block row, next block column: the launcher's
// row-major block order) repeat exactly those calls. When the caller says A is `stable` (a
// view of a tensor the kernel never writes, see codegen's copy elision), its packed block is
// kept in a per-thread arena keyed by (pointer, leading dim, shape, transpose, element type)
// and reused. Every launch starts a new epoch (tw_grid calls new_launch()), which drops all
// entries: inputs may change between launches. The arena is a ring: when it is full, new blocks
// are placed from its start again and only the entries they overwrite are dropped (the oldest),
// so a block row whose A tiles need more than the arena (a large K: 256 x 16384 fp32 in 64-row
// blocks is 128 tiles of 35 KiB a row) still finds the tiles its previous block packed most
// recently. (Dropping every entry when full made each block row after the first re-pack up to
// 105 of its 128 tiles in the op zoo's large-K matmul: 827 packs a launch instead of 512.)
// The entries are a queue in placement order (oldest first), which is also their order around
// the ring, so the blocks a new one overwrites are always at its front: adding is O(1), no
// compaction. Lookups first try the entries right after the last one found (a tile program's
// next K step was packed right after the current one), and a miss whose key bucket holds no
// entry needs no scan (the first column block of a large-K row, whose tiles are all new: the
// scans and the compaction were a quarter of gemm_f32's own time in the op zoo's large-K matmul,
// session 19).
struct PackedCache {
  static constexpr int kEntries = 256;  // a power of two: the queue's ring of entries
  static constexpr int kBuckets = 1024;
  struct Entry {
    const void* p;
    long ld;
    int r, c, tag;
    size_t off, len;
  };
  size_t cap_floats;
  uint64_t epoch = 0;
  int head = 0, n = 0;  // the live entries: e[(head + i) % kEntries] for i < n, oldest first
  int hint = 0;         // the entry last found or added
  size_t used = 0;      // where the next block goes
  Entry e[kEntries];
  uint16_t count[kBuckets] = {};  // live entries per key bucket
  Scratch arena{true};
  explicit PackedCache(size_t cap) : cap_floats(cap) {}
  static int bucket(const void* p, int tag) {
    const uint64_t h = ((uint64_t)(uintptr_t)p >> 2) * 0x9E3779B97F4A7C15ull ^ (uint64_t)tag;
    return (int)(h >> 54);  // top 10 bits
  }
  bool same(const Entry& x, const void* p, long ld, int r, int c, int tag) const {
    return x.p == p && x.ld == ld && x.r == r && x.c == c && x.tag == tag;
  }
  // the ring index of the live entry with this key, or -1
  int locate(const void* p, long ld, int r, int c, int tag) {
    if (n == 0 || count[bucket(p, tag)] == 0) return -1;
    for (int d = 0; d < 2; ++d) {  // the last hit and the entry after it
      const int j = (hint + d) & (kEntries - 1);
      if (((j - head) & (kEntries - 1)) < n && same(e[j], p, ld, r, c, tag)) return hint = j;
    }
    for (int i = n - 1; i >= 0; --i) {
      const int j = (head + i) & (kEntries - 1);
      if (same(e[j], p, ld, r, c, tag)) return hint = j;
    }
    return -1;
  }
  void pop() {
    --count[bucket(e[head].p, e[head].tag)];
    head = (head + 1) & (kEntries - 1);
    --n;
  }
  // the packed block for this key if this launch already holds it (no insertion), else nullptr
  const float* find(const void* p, long ld, int r, int c, int tag) {
    if (epoch != __atomic_load_n(&g_launch_epoch, __ATOMIC_RELAXED)) return nullptr;
    const int j = locate(p, ld, r, c, tag);
    return j < 0 ? nullptr : (const float*)arena.get(cap_floats * sizeof(float)) + e[j].off;
  }
  // where find_or_add would place a new block of `floats` now (nullptr: not placed, or no arena yet)
  const float* next_place(size_t floats) const {
    floats = (floats + 15) / 16 * 16;
    if (!arena.ptr || floats > cap_floats / 4) return nullptr;
    return (const float*)arena.ptr + (used + floats > cap_floats ? 0 : used);
  }
  // the packed block for this key, or nullptr; *fresh = true when the caller must fill it
  float* find_or_add(const void* p, long ld, int r, int c, int tag, size_t floats, bool* fresh) {
    uint64_t ep = __atomic_load_n(&g_launch_epoch, __ATOMIC_RELAXED);
    if (ep != epoch) {
      epoch = ep;
      head = n = hint = 0;
      used = 0;
      __builtin_memset(count, 0, sizeof count);
    }
    const int j = locate(p, ld, r, c, tag);
    if (j >= 0) {
      *fresh = false;
      return (float*)arena.get(cap_floats * sizeof(float)) + e[j].off;
    }
    floats = (floats + 15) / 16 * 16;
    if (floats > cap_floats / 4) return nullptr;
    if (used + floats > cap_floats) {  // start over at the arena's start: the blocks from `used`
      while (n > 0 && e[head].off >= used) pop();  // to its end (the oldest) go first
      used = 0;
    }
    // drop the entries the new block overwrites (the oldest: the front), and the oldest one
    // when the table is full
    while (n > 0 && (n == kEntries || (e[head].off < used + floats && used < e[head].off + e[head].len))) pop();
    const int t = (head + n) & (kEntries - 1);
    e[t] = Entry{p, ld, r, c, tag, used, floats};
    ++n;
    ++count[bucket(p, tag)];
    hint = t;
    float* q = (float*)arena.get(cap_floats * sizeof(float)) + used;
    used += floats;
    *fresh = true;
    return q;
  }
};
inline PackedCache& packed_a_cache() {  // 8 MiB per thread, allocated on first use
  static thread_local PackedCache a(size_t(2) << 20);
  return a;
}

// ------------------------------------------- packed-B sharing across blocks
// A tile program's gemm on a B tile viewed in place in an input tensor (`b_stable`) packs the
// same (k step, column block) panel in every block row. With one K block and one column block
// per call (the tile case), the packed panel is kept for the rest of the launch in a process-wide
// arena (per kernel library) shared by all threads, and the blocks of the other rows read it
// directly: contiguous, in the layout the micro-kernel streams. Slots are claimed with a CAS
// on (epoch, state); a thread that finds a panel being filled by another thread packs its own
// private copy (no waiting). Entries of earlier launches are ignored (epoch mismatch); the
// launcher serialises launches, so a new epoch never reuses arena space still being read.
struct SharedPackedB {
  static constexpr int kSlots = 1 << 14;
  static constexpr int kProbe = 32;
  static constexpr size_t kCapFloats = size_t(18) << 20;  // 72 MiB of packed panels
  static constexpr uint64_t kEpochMask = uint64_t(0xffffff) << 40;
  struct Slot {
    uint64_t st;  // epoch << 2 | 1 (filling) / 2 (ready); accessed with atomics
    const void* p;
    long ld;
    int k, n, tag;
    size_t off;
    const void* p2;  // a second operand the entry depends on (gemv row products: A), or nullptr
    long ld2;
  };
  Slot slot[kSlots] = {};
  uint64_t alloc = 0;  // (epoch & 0xffffff) << 40 | floats used
  float* arena = nullptr;
  SharedPackedB() {
    arena = (float*)arena_alloc(kCapFloats * sizeof(float));
  }
  bool bump(uint64_t ep, size_t floats, size_t* off) {
    const uint64_t e = (ep << 40) & kEpochMask;
    uint64_t a = __atomic_load_n(&alloc, __ATOMIC_RELAXED);
    for (;;) {
      size_t used = (a & kEpochMask) == e ? (size_t)(a & ~kEpochMask) : 0;
      if (used + floats > kCapFloats) return false;
      if (__atomic_compare_exchange_n(&alloc, &a, e | (used + floats), true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
        *off = used;
        return true;
      }
    }
  }
  static uint64_t hash(const void* p, long ld, int k, int n, int tag, const void* p2) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull ^
                 (uint64_t)ld * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)(k * 131 + n * 7 + tag) ^
                 (uint64_t)(uintptr_t)p2 * 0x165667B19E3779F9ull;
    return h ^ (h >> 29);
  }
  static bool same_key(const Slot& s, const void* p, long ld, int k, int n, int tag, const void* p2,
                       long ld2) {
    return s.p == p && s.ld == ld && s.k == k && s.n == n && s.tag == tag && s.p2 == p2 && s.ld2 == ld2;
  }
  // The ready panel for this key in this launch, or nullptr (read-only: never claims a slot).
  const float* find(const void* p, long ld, int k, int n, int tag, const void* p2 = nullptr,
                    long ld2 = 0) const {
    if (!arena) return nullptr;
    const uint64_t ep = __atomic_load_n(&g_launch_epoch, __ATOMIC_RELAXED);
    const uint64_t h = hash(p, ld, k, n, tag, p2);
    for (int i = 0; i < kProbe; ++i) {
      const Slot& s = slot[(h + i) & (kSlots - 1)];
      uint64_t st = __atomic_load_n(&s.st, __ATOMIC_ACQUIRE);
      if ((st >> 2) != ep) return nullptr;  // acquire() would have claimed this slot
      if ((st & 3) == 2 && same_key(s, p, ld, k, n, tag, p2, ld2)) return arena + s.off;
    }
    return nullptr;
  }
  // where the next panel claimed in this launch would go (nullptr: the arena is full)
  const float* next_place(size_t floats) const {
    if (!arena) return nullptr;
    const uint64_t e = (__atomic_load_n(&g_launch_epoch, __ATOMIC_RELAXED) << 40) & kEpochMask;
    const uint64_t a = __atomic_load_n(&alloc, __ATOMIC_RELAXED);
    const size_t used = (a & kEpochMask) == e ? (size_t)(a & ~kEpochMask) : 0;
    return used + floats > kCapFloats ? nullptr : arena + used;
  }
  // Requests the first slot this key probes into L2: the table (1 MiB) is read at one slot per
  // lookup, a cache miss each (about a fifth of the driver's time in the op zoo's large-K
  // matmul), so a tile program's gemm asks for the slot of the K step after its next one, whose
  // lookup comes a call later.
  void prefetch(const void* p, long ld, int k, int n, int tag) const {
    __builtin_prefetch(&slot[hash(p, ld, k, n, tag, nullptr) & (kSlots - 1)], 0, 2);
  }
  // The shared panel for this key; *fill = true when the caller must pack it and then call
  // publish(). nullptr: pack privately (arena full, table crowded, or another thread is
  // filling this panel right now).
  float* acquire(const void* p, long ld, int k, int n, int tag, size_t floats, bool* fill,
                 Slot** out, const void* p2 = nullptr, long ld2 = 0) {
    if (!arena) return nullptr;
    const uint64_t ep = __atomic_load_n(&g_launch_epoch, __ATOMIC_RELAXED);
    const uint64_t h = hash(p, ld, k, n, tag, p2);
    for (int i = 0; i < kProbe; ++i) {
      Slot& s = slot[(h + i) & (kSlots - 1)];
      uint64_t st = __atomic_load_n(&s.st, __ATOMIC_ACQUIRE);
      if ((st >> 2) == ep) {
        if ((st & 3) == 2) {
          if (same_key(s, p, ld, k, n, tag, p2, ld2)) {
            *fill = false;
            return arena + s.off;
          }
          continue;
        }
        return nullptr;  // being filled (maybe this key): pack privately
      }
      // stale slot (earlier launch or never used): claim it
      if (!__atomic_compare_exchange_n(&s.st, &st, (ep << 2) | 1, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE)) {
        --i;  // someone else claimed it: look at it again
        continue;
      }
      size_t off = 0;
      bool ok = bump(ep, (floats + 15) / 16 * 16, &off);
      s.p = ok ? p : nullptr;  // unusable (arena full): a key nobody matches
      s.ld = ld;
      s.k = k;
      s.n = n;
      s.tag = ok ? tag : -1;
      s.off = off;
      s.p2 = p2;
      s.ld2 = ld2;
      if (!ok) {
        __atomic_store_n(&s.st, (ep << 2) | 2, __ATOMIC_RELEASE);
        return nullptr;
      }
      *fill = true;
      *out = &s;
      return arena + off;
    }
    return nullptr;
  }
  static void publish(Slot* s) {
    uint64_t st = __atomic_load_n(&s->st, __ATOMIC_RELAXED);
    __atomic_store_n(&s->st, (st & ~uint64_t(3)) | 2, __ATOMIC_RELEASE);
  }
};
inline SharedPackedB& shared_packed_b() {
  static SharedPackedB* b = new SharedPackedB();  // never destroyed (threads may still run)
  return *b;
}

// ------------------------------------------------------------ block sizes
#if defined(__AVX512F__)
inline constexpr int kMR = 14, kNV = 2;  // 14 x 32 fp32 tile, 28 zmm accumulators
inline constexpr int kKC = 256, kMC = 14 * 10, kNC = 1024;
#elif defined(__AVX__)
inline constexpr int kMR = 6, kNV = 2;   // 6 x 16 fp32 tile, 12 ymm accumulators
inline constexpr int kKC = 256, kMC = 6 * 24, kNC = 1024;
#else
inline constexpr int kMR = 4, kNV = 2;   // 4 x 8 fp32 tile (SSE2 / generic)
inline constexpr int kKC = 256, kMC = 4 * 32, kNC = 512;
#endif
#if defined(__AVX__) && !defined(__AVX512F__)
// AVX2: k steps per iteration of ukr_f32's main loop, after the k steps that carry a line of the
// next call's operands (pf2). A 6 x 16 step is 21 instructions for 12 FMAs (6 cycles at two FMAs
// a cycle); one k per iteration added a compare and branch on pf2, a loop compare and branch and
// three increments (the tile programs' fp32 gemm 1024^3 on the AVX2 proxy 1.15-1.18x faster,
// side by side: docs/performance.md "Session 16"). AVX-512's 14 x 32 step (28 FMAs) keeps one k.
// 16, not 8: with 8 the loop ran 7-8% slower when the runtime library happened to be loaded at
// some addresses (on a Zen 4 core, deterministic per load address, e.g. 101 against 109 GFLOP/s
// on L1/L2-resident operands); with 16 no load address measured was slow (docs/performance.md
// "Session 23: frobenius and the AVX2 gemms").
inline constexpr int kKU = 16;
#endif
inline constexpr int kVF = simd::kVF;
inline constexpr int kNR = kNV * kVF;
inline constexpr int kFirstSub = kMR > 8 ? 8 : kMR > 4 ? 4 : kMR > 2 ? 2 : 1;

// Row panels of an fp32 A block (packing and micro-kernel calls agree through panel_rows).
// A block of mc rows (mc <= kMC) has ceil(mc / kMR) panels, panel p stored at floats
// p * kMR * kw of the packed block (kMR x kw each, rows past its height zero-filled). Panel p
// holds rows [p * kMR, p * kMR + kMR) except at the end: a remainder of fewer than kSplitBelow
// rows after at least one full panel shares the last full panel's rows in two balanced panels
// (kMR + rem rows: 14 + 2 -> 8 + 8 on AVX-512), because a micro-kernel of fewer than 4 rows
// keeps too few accumulators in flight to cover the FMA latency (a 2 x 32 call runs at about
// half the FMA rate; a 128-row block was 9 x 14 + 2). Every height has its own micro-kernel
// (ukr_f32_rows), so any other remainder is one call.
inline constexpr int kSplitBelow = 4;
struct PanelRows {
  int r0, h;  // first row (within the block) and height
};
TW_CPU_INLINE PanelRows panel_rows(int mc, int p) {
  const int full = mc / kMR, rem = mc - full * kMR;
  if (rem > 0 && rem < kSplitBelow && full > 0 && p >= full - 1 && kMR + rem >= 2 * kSplitBelow - 1) {
    const int h1 = (kMR + rem + 1) / 2;
    if (p == full - 1) return PanelRows{p * kMR, h1};
    return PanelRows{(full - 1) * kMR + h1, kMR + rem - h1};
  }
  const int r0 = p * kMR;
  return PanelRows{r0, mc - r0 < kMR ? mc - r0 : kMR};
}

// bf16 with AVX512-BF16: k values per packed element of the (bf16, bf16 -> float) gemm. 2: the
// operands are packed as bf16 k pairs and the micro-kernel uses vdpbf16ps (see the header
// comment); 1 (every other type and target): widened to fp32 while packing.
#if defined(__AVX512BF16__) && defined(__AVX512F__)
#define TW_CPU_BF16_DP 1
// gemm_small's bf16 products by vdpbf16ps too (dp_small), except on AMX targets: on the Sapphire
// Rapids core it measured no faster for Q K^T and 1.18x slower for P V (docs/performance.md,
// session 15); on Zen 4 1.4-1.8x faster (session 17)
#if !defined(__AMX_TILE__)
#define TW_CPU_SMALL_DP 1
#endif
template <class T>
inline constexpr int kPairK = same<T, bf16> ? 2 : 1;
#else
template <class T>
inline constexpr int kPairK = 1;
#endif

// The packed-operand caches' key tag of an A or B block: element type, transpose and packed
// layout (widened, bf16 k pairs, or AMX tiles: gemm_amx's blocks)
template <class T>
inline int packed_tag(bool trans, bool amx) {
  return (int)sizeof(T) * 2 + (trans ? 1 : 0) + (amx ? 32 : kPairK<T> == 2 ? 16 : 0);
}

template <class T>
TW_CPU_INLINE float ld32(const T* p) {
  return to_f32(*p);
}

// ------------------------------------------------ 8-wide helpers for packing
// (always 8 x f32 = 32 bytes; the compiler splits them on SSE-only targets).
// Passed by reference only, to stay clear of vector-ABI differences.
typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint16_t v8h_u __attribute__((vector_size(16), aligned(2), may_alias));

TW_CPU_INLINE void load8(const float* p, v8f& o) { o = *reinterpret_cast<const v8f_u*>(p); }
TW_CPU_INLINE void load8(const bf16* p, v8f& o) {
  v8u x = __builtin_convertvector(*reinterpret_cast<const v8h_u*>(p), v8u);
  o = (v8f)(x << 16);
}
#if defined(__F16C__)
// vcvtph2ps (F16C: x86-64-v3, every AVX-512 core): exact, as to_f32(f16) for every input
// (subnormals widened exactly, MXCSR.DAZ does not apply to half inputs); a NaN stays a NaN (a
// signalling one comes back quiet). One instruction per 8 elements instead of ~12 (the
// integer form below), which is most of the cost of packing f16 operands
typedef short v8s_u __attribute__((vector_size(16), aligned(2), may_alias));
TW_CPU_INLINE void load8(const f16* p, v8f& o) { o = __builtin_ia32_vcvtph2ps256(*reinterpret_cast<const v8s_u*>(p)); }
#else
TW_CPU_INLINE void load8(const f16* p, v8f& o) {  // vector form of to_f32(f16)
  v8u x = __builtin_convertvector(*reinterpret_cast<const v8h_u*>(p), v8u);
  v8u em = x & 0x7fffu;
  v8u sign = (x & 0x8000u) << 16;
  v8u norm = (em << 13) + (112u << 23);
  v8f subf = __builtin_convertvector((v8i)em, v8f) * 0x1p-24f;
  v8u infnan = (em << 13) | 0x7f800000u;
  v8u r = em < 0x400u ? (v8u)subf : (em >= 0x7c00u ? infnan : norm);
  o = (v8f)(r | sign);
}
#endif
TW_CPU_INLINE void store8(float* p, const v8f& v) { *reinterpret_cast<v8f_u*>(p) = v; }

// in-place 8x8 transpose: x[t][c] -> x[c][t]
TW_CPU_INLINE void transpose8(v8f (&x)[8]) {
  v8f t[8], u[8];
  for (int q = 0; q < 4; ++q) {
    t[2 * q] = __builtin_shufflevector(x[2 * q], x[2 * q + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[2 * q + 1] = __builtin_shufflevector(x[2 * q], x[2 * q + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int h = 0; h < 2; ++h) {
    v8f* tt = t + 4 * h;
    v8f* uu = u + 4 * h;
    uu[0] = __builtin_shufflevector(tt[0], tt[2], 0, 1, 8, 9, 4, 5, 12, 13);
    uu[1] = __builtin_shufflevector(tt[0], tt[2], 2, 3, 10, 11, 6, 7, 14, 15);
    uu[2] = __builtin_shufflevector(tt[1], tt[3], 0, 1, 8, 9, 4, 5, 12, 13);
    uu[3] = __builtin_shufflevector(tt[1], tt[3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int c = 0; c < 4; ++c) {
    x[c] = __builtin_shufflevector(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    x[c + 4] = __builtin_shufflevector(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// bf16 k pairs as one 32-bit packed element, the operand layout of vdpbf16ps: low half k,
// high half k + 1 (hi == nullptr: the zero that pads an odd K). Returned as a float holding
// those bits (the packed buffers are float arrays; the micro-kernel only moves them).
typedef uint32_t u32_a __attribute__((may_alias));
TW_CPU_INLINE float bf16_pair(const bf16* lo, const bf16* hi) {
  const uint32_t u = (uint32_t)lo->bits | (hi ? (uint32_t)hi->bits << 16 : 0u);
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
// d[j] = pair (r0[j], r1[j]) for j < n: two rows of k interleaved (r1 == nullptr: zeros)
inline void pair_rows(const bf16* __restrict r0, const bf16* __restrict r1, int n, float* d) {
  u32_a* w = reinterpret_cast<u32_a*>(d);
  const uint16_t* a = &r0->bits;
  if (r1) {
    const uint16_t* b = &r1->bits;
    for (int j = 0; j < n; ++j) w[j] = (uint32_t)a[j] | (uint32_t)b[j] << 16;
  } else {
    for (int j = 0; j < n; ++j) w[j] = a[j];
  }
}
// 8 packed elements from p: G = 1 widened to fp32, G = 2 eight bf16 k pairs (16 bf16) as is
template <int G, class T>
TW_CPU_INLINE void load8w(const T* p, v8f& o) {
  if constexpr (G == 1) load8(p, o);
  else __builtin_memcpy(&o, p, sizeof(o));
}

// dst[k*P + i] = src[i*ld + k] for i < r (r <= P), zeros for r <= i < P, k < kc; with G = 2
// (bf16 k pairs) the packed element k is the pair (2k, 2k + 1) and there are (kc + 1) / 2 of them.
// Works in 8x8 blocks; when P is not a multiple of 8 the last row group's stores spill
// up to 7 floats into the next k row (or past the panel end: buffers carry slack),
// which is why groups are processed from the highest one down.
template <int P, int G = 1, class T>
inline void pack_transpose(const T* src, long ld, int r, int kc, float* dst) {
  constexpr int NG = (P + 7) / 8;
  const int kw = (kc + G - 1) / G;
  const int k8 = kc / (8 * G) * 8;
  for (int g = NG - 1; g >= 0; --g) {
    const int i0 = g * 8;
    for (int k0 = 0; k0 < k8; k0 += 8) {
      v8f x[8];
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) {
        if (i0 + t < r) load8w<G>(src + (long)(i0 + t) * ld + G * k0, x[t]);
        else x[t] = v8f{};
      }
      transpose8(x);
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) store8(dst + (long)(k0 + t) * P + i0, x[t]);
    }
  }
  for (int k = k8; k < kw; ++k)
    for (int i = 0; i < P; ++i) {
      float& d = dst[(long)k * P + i];
      if (i >= r) d = 0.0f;
      else if constexpr (G == 1) d = to_f32(src[(long)i * ld + k]);
      else d = bf16_pair(src + (long)i * ld + 2 * k, 2 * k + 1 < kc ? src + (long)i * ld + 2 * k + 1 : nullptr);
    }
}
inline constexpr int kPackSlack = 16;  // floats of slack after packed buffers

// ------------------------------------------------------------ fp32 packing
// every cache line of [p, p + bytes) requested into L2 (prefetcht1): L1 holds what is being
// computed on, and rows far apart fall into few L1 sets
TW_CPU_INLINE void prefetch_l2(uintptr_t p, long bytes) {
  for (uintptr_t l = p & ~(uintptr_t)63; l < p + (uintptr_t)bytes; l += 64)
    __builtin_prefetch((const char*)l, 0, 2);
}

// The rows of up to two strided source ranges (segments) requested into L2 a cache line at a
// time. For a tile program's next K step, whose A or B tile this call does not pack but the next
// call will: its rows lie far apart in the source (64 rows of 512 bytes 64 KiB apart for the op
// zoo's large-K A tile), a pattern the hardware prefetchers do not follow, so packing them on
// demand waits on memory. spread() shares the lines out over the call's micro-kernel calls, so
// that the whole range is requested by the end of the gemm call; take() hands a call its share,
// which the micro-kernel requests one line per k step (kRowsInKernel) instead of all before the
// call: a prefetch that misses holds a fill buffer until its line arrives, and ~50 of them issued
// at once (a 32 KiB key tile over one flash call's 10 micro-kernel calls) stalled on the buffers
// (45% of gemm_f32's samples in masked prefill's window kernel on a Sapphire Rapids core sat behind
// those bursts: docs/performance.md "Session 41: the merged tree, quiet; the gemm's spread row prefetch").
// Elsewhere (AVX2, Zen 4: not measured) step() requests a call's share at once before it, as
// before. Addresses are integers: a range may lie past the operand (the last K step's "next" tile).
struct RowsPrefetch {
  struct Seg {
    uintptr_t row;  // the first byte of the segment's current row
    long ld, bytes;
    int rows;  // rows left, the current one included
  };
  Seg seg[2];
  int nseg = 0;  // seg[0] is walked, then seg[1]
  uintptr_t q = 0, end = 0;  // the next line; past the current row's last line
  long left = 0, per = 0;  // lines not yet handed out; per micro-kernel call
  long due = 0;  // lines the calls so far were given and did not take (a skipped tile's, a short call's)
  void add(uintptr_t b, long ld_bytes, int nrows, long row_bytes) {
    if (nrows <= 0 || row_bytes <= 0 || nseg == 2) return;
    seg[nseg++] = Seg{b, ld_bytes, row_bytes, nrows};
    for (int r = 0; r < nrows; ++r) {
      const uintptr_t a = b + (uintptr_t)((long)r * ld_bytes);
      left += (long)(((a + (uintptr_t)row_bytes + 63) >> 6) - (a >> 6));
    }
    if (nseg == 1) start_row();
  }
  void spread(long steps) { per = (left + steps - 1) / (steps > 0 ? steps : 1); }
  TW_CPU_INLINE void start_row() {
    q = seg[0].row & ~(uintptr_t)63;
    end = (seg[0].row + (uintptr_t)seg[0].bytes + 63) & ~(uintptr_t)63;
  }
  void next_row() {
    if (--seg[0].rows > 0) seg[0].row += (uintptr_t)seg[0].ld;
    else if (--nseg > 0) seg[0] = seg[1];
    else return;
    start_row();
  }
  // request the next line (only while lines are left: take() counted them)
  TW_CPU_INLINE void line() {
    __builtin_prefetch((const char*)q, 0, 2);
    q += 64;
    if (q == end) next_row();
  }
  // the lines the next micro-kernel call of kc k steps requests (one a step): its share and what
  // earlier calls left
  TW_CPU_INLINE long take(long kc) {
    due += per;
    long n = due < left ? due : left;
    if (n > kc) n = kc;
    due -= n;
    left -= n;
    return n;
  }
  void lines(long n) {
    for (; n > 0; --n) line();
  }
  // a call's share at once (where no micro-kernel takes it); everything left
  TW_CPU_INLINE void step() { lines(take(left)); }
  void finish() {
    const long n = left;
    left = 0;
    lines(n);
  }
};
#if defined(__AVX512F__) && !defined(__znver3__) && !defined(__znver4__)
inline constexpr bool kRowsInKernel = true;
#else
inline constexpr bool kRowsInKernel = false;
#endif

// A block: rows [0,mc), k [0,kc) of op(A) -> micro-panels of up to kMR rows (panel_rows:
// blocks of kMC rows, each split into its panels), layout Ap[panel][k][kMR], rows beyond a
// panel's height zero-filled. kPairK<T> == 2: element k of a row is the bf16 pair (2k, 2k + 1),
// (kc + 1) / 2 of them.
template <class T>
inline void pack_a_f32(int mc, int kc, const T* A, long lda, bool transA, float* Ap) {
  constexpr int G = kPairK<T>;
  const int kw = (kc + G - 1) / G;
  for (int p0 = 0; p0 < mc; p0 += kMR) {
    const int ib = p0 / kMC * kMC;  // the row block of this panel
    const PanelRows pr = panel_rows(mc - ib < kMC ? mc - ib : kMC, (p0 - ib) / kMR);
    const int i0 = ib + pr.r0, mr = pr.h;
    float* dst = Ap + (long)p0 * kw;
    if constexpr (G == 2) {
      if (transA) {  // rows 2k and 2k + 1 of A interleaved
        for (int k = 0; k < kw; ++k) {
          const T* s0 = A + (long)(2 * k) * lda + i0;
          float* d = dst + (long)k * kMR;
          pair_rows(s0, 2 * k + 1 < kc ? s0 + lda : nullptr, mr, d);
          for (int i = mr; i < kMR; ++i) d[i] = 0.0f;
        }
      } else {
        pack_transpose<kMR, 2>(A + (long)i0 * lda, lda, mr, kc, dst);
      }
    } else if (transA) {
      // op(A)(i,k) = A[k*lda + i]: rows of A are contiguous along i
      for (int k = 0; k < kc; ++k) {
        const T* src = A + (long)k * lda + i0;
        float* d = dst + (long)k * kMR;
        if (kMR >= 8 && mr == kMR) {  // two overlapping 8-wide copies
          v8f x, y;
          load8(src, x);
          load8(src + kMR - 8, y);
          store8(d, x);
          store8(d + kMR - 8, y);
        } else {
          for (int i = 0; i < mr; ++i) d[i] = ld32(src + i);
          for (int i = mr; i < kMR; ++i) d[i] = 0.0f;
        }
      }
    } else {
      // op(A)(i,k) = A[i*lda + k]: transpose while packing. The rows of the next panel are
      // fetched into L2 first: rows far apart (a tile of a wide matrix) are not followed by the
      // hardware prefetchers, and the transpose would wait on each line in turn.
      if (i0 + mr < mc && lda * (long)sizeof(T) >= 4096) {
        const int rn = mc - i0 - mr < kMR ? mc - i0 - mr : kMR;
        for (int i = 0; i < rn; ++i) prefetch_l2((uintptr_t)(A + (long)(i0 + mr + i) * lda), kc * (long)sizeof(T));
      }
      pack_transpose<kMR>(A + (long)i0 * lda, lda, mr, kc, dst);
    }
  }
}

// B panel: k [0,kc), cols [0,nc) of op(B) -> micro-panels of kNR cols,
// layout Bp[panel][k][kNR], cols beyond nc zero-filled. kPairK<T> == 2: element k of a column
// is the bf16 pair (2k, 2k + 1), (kc + 1) / 2 of them (a vector load: kVF columns x 2 k).
template <class T>
inline void pack_b_f32(int kc, int nc, const T* B, long ldb, bool transB, float* Bp) {
  constexpr int G = kPairK<T>;
  const int kw = (kc + G - 1) / G;
  if constexpr (G == 2) {
    if (!transB) {  // rows 2k and 2k + 1 of B interleaved, row pair by row pair
      const int lines = (int)((nc * sizeof(T) + 63) / 64);
      for (int k = 0; k < kw; ++k) {
        const T* s0 = B + (long)(2 * k) * ldb;
        const T* s1 = 2 * k + 1 < kc ? s0 + ldb : nullptr;
        if (2 * k + 8 < kc)
          for (int l = 0; l < lines; ++l) {
            __builtin_prefetch((const char*)(s0 + 8 * ldb) + 64 * l);
            __builtin_prefetch((const char*)(s0 + 9 * ldb) + 64 * l);
          }
        for (int j0 = 0; j0 < nc; j0 += kNR) {
          const int nr = nc - j0 < kNR ? nc - j0 : kNR;
          float* d = Bp + (long)j0 * kw + (long)k * kNR;
          pair_rows(s0 + j0, s1 ? s1 + j0 : nullptr, nr, d);
          for (int j = nr; j < kNR; ++j) d[j] = 0.0f;
        }
      }
      return;
    }
  }
  if (!transB) {
    // row by row (each row of B is read sequentially, which the hardware prefetchers follow
    // even for large ldb), scattered into the NR-wide micro-panels; software prefetch a few
    // rows ahead because B rows are usually far apart (a tile of a large tensor).
    const int nfull = nc / kNR * kNR;
    const int lines = (int)((nc * sizeof(T) + 63) / 64);
    for (int k = 0; k < kc; ++k) {
      const T* src = B + (long)k * ldb;
      if (k + 4 < kc)
        for (int l = 0; l < lines; ++l) __builtin_prefetch((const char*)(src + 4 * ldb) + 64 * l);
      for (int j0 = 0; j0 < nfull; j0 += kNR) {
        float* d = Bp + (long)j0 * kc + (long)k * kNR;
#pragma GCC unroll 4
        for (int j = 0; j < kNR; j += 8) {
          v8f x;
          load8(src + j0 + j, x);
          store8(d + j, x);
        }
      }
      if (nfull < nc) {
        float* d = Bp + (long)nfull * kc + (long)k * kNR;
        for (int j = nfull; j < nc; ++j) d[j - nfull] = ld32(src + j);
        for (int j = nc - nfull; j < kNR; ++j) d[j] = 0.0f;
      }
    }
    return;
  }
  for (int j0 = 0; j0 < nc; j0 += kNR) {
    int nr = nc - j0 < kNR ? nc - j0 : kNR;
    float* dst = Bp + (long)j0 * kw;
    if (!transB) {
      for (int k = 0; k < kc; ++k) {
        const T* src = B + (long)k * ldb + j0;
        float* d = dst + (long)k * kNR;
        if (nr == kNR) {
          for (int j = 0; j < kNR; j += 8) {
            v8f x;
            load8(src + j, x);
            store8(d + j, x);
          }
        } else {
          for (int j = 0; j < nr; ++j) d[j] = ld32(src + j);
          for (int j = nr; j < kNR; ++j) d[j] = 0.0f;
        }
      }
    } else {
      // op(B)(k,j) = B[j*ldb + k]. As for A's rows (pack_a_f32): the next micro-panel's rows are
      // fetched into L2 first when they lie far apart (packing a 128 x 128 tile of a 1024-wide
      // B.T measured 1.7-2.6x faster with it, side by side; the op zoo's matmul_transposed_b).
      if (j0 + nr < nc && ldb * (long)sizeof(T) >= 4096) {
        const int rn = nc - j0 - nr < kNR ? nc - j0 - nr : kNR;
        for (int i = 0; i < rn; ++i) prefetch_l2((uintptr_t)(B + (long)(j0 + nr + i) * ldb), kc * (long)sizeof(T));
      }
      pack_transpose<kNR, G>(B + (long)j0 * ldb, ldb, nr, kc, dst);
    }
  }
}

// ------------------------------------------------------- fp32 micro-kernel
// c + the two products of the bf16 pairs of a and b, lane by lane (vdpbf16ps)
#if defined(TW_CPU_BF16_DP)
TW_CPU_INLINE simd::vf dot_bf16(simd::vf c, simd::vf a, simd::vf b) {
#if defined(__clang__)
  __asm__("vdpbf16ps %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
  return c;
#elif __GNUC__ >= 13
  typedef __bf16 v32bf __attribute__((vector_size(64)));
  return __builtin_ia32_dpbf16ps_v16sf(c, (v32bf)a, (v32bf)b);
#else
  typedef short v32hi __attribute__((vector_size(64)));
  return __builtin_ia32_dpbf16ps_v16sf(c, (v32hi)a, (v32hi)b);
#endif
}
#endif

// The micro-kernels' write-back: C (+)= c on rows [0, R) x cols [0, nr), from accumulators of
// float (ukr_f32) or int32 (ukr_i8) lanes, NV vectors a row (kNV but in ukr_f32's one-vector
// band calls). A full strip (nr == NV * kVF) stores vectors; a partial one goes through a stack
// tile.
TW_CPU_INLINE simd::vf loadu_acc(const float* p) { return simd::loadu(p); }
TW_CPU_INLINE simd::vi loadu_acc(const int32_t* p) { return simd::loadui(p); }
TW_CPU_INLINE void storeu_acc(float* p, simd::vf v) { simd::storeu(p, v); }
TW_CPU_INLINE void storeu_acc(int32_t* p, simd::vi v) { simd::storeui(p, v); }

template <int R, class V, class T, int NV>
TW_CPU_INLINE void store_acc(const V (&c)[R][NV], T* __restrict C, long ldc, bool acc, int nr) {
  if (nr == NV * kVF) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      T* ci = C + (long)i * ldc;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        V x = c[i][v];
        if (acc) x += loadu_acc(ci + v * kVF);
        storeu_acc(ci + v * kVF, x);
      }
    }
  } else {
    alignas(64) T tmp[R][NV * kVF];
    // unrolled: a runtime index into c[][] would keep the accumulators in memory
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) storeu_acc(&tmp[i][v * kVF], c[i][v]);
    for (int i = 0; i < R; ++i) {
      T* ci = C + (long)i * ldc;
      if (acc)
        for (int j = 0; j < nr; ++j) ci[j] += tmp[i][j];
      else
        for (int j = 0; j < nr; ++j) ci[j] = tmp[i][j];
    }
  }
}

// C's R rows (W floats each) requested for writing: the micro-kernel reads and writes them at
// its end (a tile accumulator often lives in L2)
template <int R, int W = kNR>
TW_CPU_INLINE void prefetch_c(const float* C, long ldc) {
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    __builtin_prefetch(C + (long)i * ldc, 1);
    __builtin_prefetch(C + (long)i * ldc + W - 1, 1);
  }
}

// When ukr_f32 requests C's rows: kCLateK k steps before its end, or at its start (-1). On Zen 4
// (AVX-512 run as two 256-bit halves: a 14 x 32 k step takes 28 cycles, 16 of them ~450 cycles,
// enough for L2 or L3) C's lines fetched at the start were most likely evicted again by the
// operand streams before the write-back (14 rows of a power-of-two-wide C fall into one or two
// sets of the 8-way 32 KiB L1): fetched 16 k steps before the end, the tile programs' fp32 gemm
// ran 1-3% faster side by side (docs/performance.md "Session 17: the fp32 gemm on Zen 4"). g++ 12
// names Zen 4 znver3 (with AVX-512, which Zen 3 lacks), later compilers znver4. Elsewhere (Intel's
// 48 KiB 12-way L1, two 512-bit FMA pipes: half the cycles per k step; Zen 5) not measured, so
// unchanged. A prefetch only: results are the same either way.
// AVX2 (any -march without AVX-512; a 6 x 16 k step is 6 cycles, 16 of them ~100) requests them
// 16 k steps before the end too, in ukr_f32 and ukr_f32_ra (kRaLateK): flash attention's two
// gemms (acc_s written, acc_o read and written, both L2-resident) ran 0.7-1.4% faster on a Zen 4
// core at -march=x86-64-v3, the same for 16, 32 or 48 steps, each micro-kernel about half of it
// (docs/performance.md "Session 36: flash attention on AVX2, C's rows requested late").
// ukr_f32_ra on AVX-512 is unchanged (kRaLateK -1: not measured there).
#if (defined(__AVX512F__) && (defined(__znver3__) || defined(__znver4__))) || \
    (defined(__AVX__) && !defined(__AVX512F__))
inline constexpr long kCLateK = 16;
#else
inline constexpr long kCLateK = -1;
#endif
#if defined(__AVX512F__)
inline constexpr long kRaLateK = -1;
#else
inline constexpr long kRaLateK = kCLateK;
#endif

// Whether every fp32 micro-kernel call prefetches a packed B (bs == kNR; two lines a k step, 8 k
// ahead) or only a column strip's first row panel (`first`; ukr_f32_rows and ukr_f32_ra_rows pick
// the instance, kPfB): the later panels find the strip in L1. On a Sapphire Rapids-class Intel core
// (AVX-512, two 512-bit FMA pipes) those two prefetch uops a k step cost flash attention ~2% of its
// time (docs/performance.md "Session 39: flash attention on the Sapphire Rapids core"); the tile
// programs' fp32 gemm ran the same within the noise ("Session 40: the fp32 gemm on the Sapphire
// Rapids core"). Kept in every call on Zen 4 (tuned there, not re-measured) and AVX2 (its loop
// always prefetches), and for a B streamed in place (the skinny path, bs == ldb) and bf16 pairs
// (kDp, not measured) everywhere. A prefetch only: the same results.
#if defined(__AVX512F__) && !defined(__znver3__) && !defined(__znver4__)
inline constexpr bool kPackedBPrefetch = false;
#else
inline constexpr bool kPackedBPrefetch = true;
#endif

// The fp32 micro-kernels' start: the accumulators at zero, and C's rows requested unless kLate
// (ukr_f32 with kCLateK >= 0 requests them near its end instead).
template <int R, bool kLate = false, int NV>
TW_CPU_INLINE void start_acc(simd::vf (&c)[R][NV], const float* C, long ldc) {
  if constexpr (!kLate) prefetch_c<R, NV * kVF>(C, ldc);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) c[i][v] = simd::vf{};
}

// acc[R][NV * kVF] = sum_k A[k*as + i] * B[k*bs + j]; then C (+)= acc on [R x nr].
// kDp: A and B hold bf16 k pairs (kc of them) and each step is a vdpbf16ps instead of an FMA.
// NV: the column vectors, kNV (a whole kNR-wide strip), or 1 for the one half of a strip that
// a c_band needs (gemm_f32's band branch: B and C then point at that half, bs stays the strip's
// kNR); per element the same FMAs in the same k order either way, so the same result.
template <int R, bool kDp = false, int NV = kNV, bool kPfB = true>
__attribute__((noinline)) void ukr_f32(long kc, const float* __restrict A, long as,
                                       const float* __restrict B, long bs,
                                       float* __restrict C, long ldc, bool acc, int nr,
                                       const char* pf2 = nullptr, long pf2_lines = 0,
                                       RowsPrefetch* rw = nullptr, long rn = 0) {
  using simd::vf;
  // prefetch distance: packed B -> a few k ahead; streamed B -> two column strips
  // ahead on the same row (one full micro-kernel call of lead time).
  const long pfd = bs == kNR ? 8 * kNR : 2 * kNR;
  vf c[R][NV];
  start_acc<R, (kCLateK >= 0)>(c, C, ldc);

#if defined(__AVX__) && !defined(__AVX512F__)
  // AVX2: the k steps that carry a line of pf2 first, then the rest kKU at a time (the same
  // steps in the same order, so the same result as one k per iteration)
  (void)kDp;  // bf16 k pairs need AVX512-BF16
  if (rn) rw->lines(rn);  // (kRowsInKernel is false: the driver hands none)
  auto step = [&]() __attribute__((always_inline)) {
    vf b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < kNR * 4; v += 64) __builtin_prefetch(B + pfd + v / 4);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = simd::loadu(B + v * kVF);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      vf a = simd::splat(A[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[i][v] = simd::fma(a, b[v], c[i][v]);
    }
    A += as;
    B += bs;
  };
  const long kp = pf2_lines < kc ? pf2_lines : kc;
  long k = 0;
  for (; k < kp; ++k) {
    __builtin_prefetch(pf2 + 64 * k, 0, 2);
    step();
  }
  // C's rows requested kCLateK steps before the end (after the pf2 steps if they reach past it)
  const long k_c = kc > kCLateK ? kc - kCLateK : 0;
#pragma GCC unroll kKU
  for (; k < k_c; ++k) step();
  if constexpr (kCLateK >= 0) prefetch_c<R, NV * kVF>(C, ldc);
#pragma GCC unroll kKU
  for (; k < kc; ++k) step();
#else
  const long k_c = kCLateK < 0 ? -1 : kc > kCLateK ? kc - kCLateK : 0;  // C's rows requested (kCLateK)
  RowsPrefetch w = rn ? *rw : RowsPrefetch{};  // rn lines of the next tiles' rows, one a k step
  for (long k = 0; k < kc; ++k) {
    if (k == k_c) prefetch_c<R, NV * kVF>(C, ldc);
    vf b[NV];
    // software prefetch of B a few k ahead (matters when B is streamed unpacked; kPackedBPrefetch)
    if constexpr (kPfB)
#pragma GCC unroll 4
      for (int v = 0; v < kNR * 4; v += 64) __builtin_prefetch(B + pfd + v / 4);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = simd::loadu(B + v * kVF);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      vf a = simd::splat(A[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
#if defined(TW_CPU_BF16_DP)
        if constexpr (kDp) c[i][v] = dot_bf16(c[i][v], a, b[v]);
        else
#endif
          c[i][v] = simd::fma(a, b[v], c[i][v]);
      }
    }
    // one line per k of another range (the next call's operands, see NextPrefetch) into L2
    if (k < pf2_lines) __builtin_prefetch(pf2 + 64 * k, 0, 2);
    if (k < rn) w.line();
    A += as;
    B += bs;
  }
  if (rn) *rw = w;
#endif

  store_acc<R>(c, C, ldc, acc, nr);
}

// one micro-kernel call of mr rows (1 <= mr <= kMR): ukr_f32<mr>
template <bool kDp = false, int R = kMR, int NV = kNV>
TW_CPU_INLINE void ukr_f32_rows(int mr, long kc, const float* A, long as, const float* B, long bs,
                                float* C, long ldc, bool acc, int nr, const char* pf2 = nullptr,
                                long pf2_lines = 0, bool first = true, RowsPrefetch* rw = nullptr, long rn = 0) {
  if (mr == R) {
    if (kPackedBPrefetch || kDp || bs != kNR || first)
      ukr_f32<R, kDp, NV>(kc, A, as, B, bs, C, ldc, acc, nr, pf2, pf2_lines, rw, rn);
    else ukr_f32<R, kDp, NV, false>(kc, A, as, B, bs, C, ldc, acc, nr, pf2, pf2_lines, rw, rn);
  }
  else if constexpr (R > 1)
    ukr_f32_rows<kDp, R - 1, NV>(mr, kc, A, as, B, bs, C, ldc, acc, nr, pf2, pf2_lines, first, rw, rn);
}

// A column tail of nr <= kColTail columns (the op zoo's matmul 1025x369x741 in 128-column blocks
// ends every row of blocks in 113 = 7 x 16 + 1 columns on AVX2) costs ukr_f32 a whole kNR-wide
// strip per panel. ukr_f32_cols runs P panels of one such column at once with the panels' rows
// along the vector lanes instead: a panel's kMR rows of one k are contiguous in the packed A
// (kVF >= kMR; the lanes past them read the next k's rows or the packed buffer's slack,
// kPackSlack, and are dropped), so a k step is P loads and P FMAs (P chains in flight) where
// ukr_f32 spends kMR * kNV FMAs per panel. Per element the same FMAs in the same k order from
// zero, so the result is ukr_f32's bit for bit. ps: floats from one panel to the next; B: the
// column in the packed strip (stride kNR); pr: the P panels' rows (C + pr[p].r0 * ldc).
inline constexpr int kColTail = kNR / 4;
inline constexpr int kColPanels = 8;
static_assert(kVF >= kMR, "ukr_f32_cols keeps a panel's rows in one vector");

template <int P>
__attribute__((noinline)) void ukr_f32_cols(long kc, const float* __restrict A, long ps, const float* __restrict B,
                                            float* __restrict C, long ldc, const PanelRows* pr, bool acc) {
  using simd::vf;
  vf c[P];
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) c[p] = vf{};
  for (long k = 0; k < kc; ++k) {
    const vf b = simd::splat(B[k * kNR]);
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) c[p] = simd::fma(simd::loadu(A + p * ps + k * kMR), b, c[p]);
  }
  for (int p = 0; p < P; ++p) {
    alignas(64) float t[kVF];
    simd::storeu(t, c[p]);
    float* cp = C + (long)pr[p].r0 * ldc;
    for (int r = 0; r < pr[p].h; ++r) cp[r * ldc] = acc ? cp[r * ldc] + t[r] : t[r];
  }
}

template <int P = kColPanels>
TW_CPU_INLINE void ukr_f32_cols_n(int np, long kc, const float* A, long ps, const float* B, float* C, long ldc,
                                  const PanelRows* pr, bool acc) {
  if (np == P) ukr_f32_cols<P>(kc, A, ps, B, C, ldc, pr, acc);
  else if constexpr (P > 1) ukr_f32_cols_n<P - 1>(np, kc, A, ps, B, C, ldc, pr, acc);
}

// The same product with A read in place from R rows of a row-major fp32 matrix (A[i * lda + k],
// not transposed, not packed): the broadcasts load from R rows instead of one packed k row, in
// the same order, so the result is bit for bit that of ukr_f32 on the packed copy. Rows are
// addressed in groups of four from one pointer each (p, p + lda, p + 2 lda, p + 3 lda: base +
// index addressing, 6 registers for 14 rows). For an A that is read by one call only (a tile
// the kernel computes: flash attention's probabilities), packing it cost a transposing copy of
// the whole tile every call (gemm_f32: a_in_place).
template <int R, bool kPfB = true>
__attribute__((noinline)) void ukr_f32_ra(long kc, const float* __restrict A, long lda,
                                          const float* __restrict B, long bs,
                                          float* __restrict C, long ldc, bool acc, int nr,
                                          const char* pf2 = nullptr, long pf2_lines = 0,
                                          RowsPrefetch* rw = nullptr, long rn = 0) {
  using simd::vf;
  constexpr int NG = (R + 3) / 4;
  const float* a[NG];
#pragma GCC unroll 4
  for (int g = 0; g < NG; ++g) a[g] = A + (long)(4 * g) * lda;
  const long l2 = 2 * lda, l3 = 3 * lda;
  vf c[R][kNV];
  start_acc<R, (kRaLateK >= 0)>(c, C, ldc);

  const long pfd = bs == kNR ? 8 * kNR : 2 * kNR;  // B's prefetch distance, as in ukr_f32
  const long k_c = kRaLateK < 0 ? -1 : kc > kRaLateK ? kc - kRaLateK : 0;  // C's rows requested (kRaLateK)
  RowsPrefetch w = rn ? *rw : RowsPrefetch{};  // rn lines of the next tiles' rows, one a k step
  for (long k = 0; k < kc; ++k) {
    if constexpr (kRaLateK >= 0)
      if (k == k_c) prefetch_c<R, kNV * kVF>(C, ldc);
    vf b[kNV];
    if constexpr (kPfB)  // kPackedBPrefetch
#pragma GCC unroll 4
      for (int v = 0; v < kNR * 4; v += 64) __builtin_prefetch(B + pfd + v / 4);
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) b[v] = simd::loadu(B + v * kVF);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const float* p = a[i / 4] + k;
      const float x = i % 4 == 0 ? p[0] : i % 4 == 1 ? p[lda] : i % 4 == 2 ? p[l2] : p[l3];
      vf s = simd::splat(x);
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) c[i][v] = simd::fma(s, b[v], c[i][v]);
    }
    if (k < pf2_lines) __builtin_prefetch(pf2 + 64 * k, 0, 2);
    if (k < rn) w.line();
    B += bs;
  }
  if (rn) *rw = w;

  store_acc<R>(c, C, ldc, acc, nr);
}

// one in-place-A micro-kernel call of mr rows (1 <= mr <= kMR): ukr_f32_ra<mr>
template <int R = kMR>
TW_CPU_INLINE void ukr_f32_ra_rows(int mr, long kc, const float* A, long lda, const float* B, long bs,
                                   float* C, long ldc, bool acc, int nr, const char* pf2 = nullptr,
                                   long pf2_lines = 0, bool first = true, RowsPrefetch* rw = nullptr, long rn = 0) {
  if (mr == R) {
    if (kPackedBPrefetch || bs != kNR || first) ukr_f32_ra<R>(kc, A, lda, B, bs, C, ldc, acc, nr, pf2, pf2_lines, rw, rn);
    else ukr_f32_ra<R, false>(kc, A, lda, B, bs, C, ldc, acc, nr, pf2, pf2_lines, rw, rn);
  }
  else if constexpr (R > 1)
    ukr_f32_ra_rows<R - 1>(mr, kc, A, lda, B, bs, C, ldc, acc, nr, pf2, pf2_lines, first, rw, rn);
}

template <class TC>
inline void scale_zero(int M, int N, TC* C, long ldc) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) C[(long)i * ldc + j] = TC(0);
}

// Small M (1 or 2 rows), fp32, B not transposed: a GEMV-like loop, memory bound on B.
// k advances kGvK = 8 rows at a time and, for each group, one pass reads the 8 rows side by
// side from column 0 to n - 1: 8 concurrent sequential streams the hardware prefetchers follow
// (measured on Zen 4, N = K = 4096: 8 rows ~31 GB/s, 4 rows ~28, 16 rows ~28; 1 or 2 rows at a
// time are slower still even with prefetching, 21-26), plus a software prefetch into L2
// (prefetcht1) kGvPf floats (24 lines) ahead on each of them, which keeps more misses in flight
// than the hardware prefetchers alone: ~36-40 GB/s on one core where numpy's sgemv reads ~30
// (24-32 lines ahead measured best; 16 lines ~37, 64 ~37; prefetcht0 or prefetchnta instead
// ~23-27, slower than none). Every element of B is read exactly once, in address order within
// each row, and never packed. When all rows of B share one misalignment (numpy's arrays usually
// start 16 bytes into a cache line), the first vector of the pass is a partial one (masked on
// AVX-512) that ends on the 64-byte boundary, so the full vectors after it never split a cache
// line; the last, partial vector is masked too: head and tail stay inside the same in-order pass over
// each row (a separate pass over their columns would touch every row's first and last lines
// again, out of order). The partial sums are accumulated straight into C (R rows, L1/L2
// resident for the tile programs' fragments); both rows of A (R = 2) share each load of B.
inline constexpr int kGvK = 8;
inline constexpr int kGvPf = 24 * 64 / 4;  // prefetch distance in floats: 24 cache lines
inline constexpr int kLineVecs = simd::kVecBytes < 64 ? 64 / simd::kVecBytes : 1;  // vectors per cache line

// the first r lanes of p (0 < r <= kVF); the other lanes read as 0 and are never touched
TW_CPU_INLINE simd::vf gv_load_n(const float* p, int r) {
#if defined(__AVX512F__)
  return __builtin_ia32_loadups512_mask(p, simd::vf{}, (unsigned short)((1u << r) - 1u));
#else
  simd::vf v{};
  for (int l = 0; l < r; ++l) v[l] = p[l];
  return v;
#endif
}
TW_CPU_INLINE void gv_store_n(float* p, simd::vf v, int r) {
#if defined(__AVX512F__)
  __builtin_ia32_storeups512_mask(p, v, (unsigned short)((1u << r) - 1u));
#else
  for (int l = 0; l < r; ++l) p[l] = v[l];
#endif
}

// C[i][j .. j + r) += sum over q < G of A(k + q, i) * B[q][j .. j + r), i < R (r = kVF: a full
// vector, else the first r lanes); kPf: also prefetch pf + q * ldb for each q (none when pf is null)
template <int R, int G, bool kFull, bool kPf = false>
TW_CPU_INLINE void gv_step(int j, int r, const simd::vf (&a)[R][G], const float* __restrict b,
                           long ldb, float* __restrict C, long ldc, const float* pf = nullptr) {
  using simd::vf;
  vf x[R];
  for (int i = 0; i < R; ++i)
    x[i] = kFull ? simd::loadu(C + i * ldc + j) : gv_load_n(C + i * ldc + j, r);
  for (int q = 0; q < G; ++q) {
    if (kPf && (kLineVecs == 1 || pf)) __builtin_prefetch(pf + q * ldb, 0, 2);
    const vf bq = kFull ? simd::loadu(b + q * ldb + j) : gv_load_n(b + q * ldb + j, r);
    for (int i = 0; i < R; ++i) x[i] = simd::fma(a[i][q], bq, x[i]);
  }
  for (int i = 0; i < R; ++i) {
    if (kFull)
      simd::storeu(C + i * ldc + j, x[i]);
    else
      gv_store_n(C + i * ldc + j, x[i], r);
  }
}

// One pass over G rows of B (k .. k + G): head partial vector [0, p), full vectors [p, nm), tail
// partial vector [nm, n). The full vectors more than kGvPf columns before nm prefetch the same
// rows kGvPf columns ahead; the last kGvPf columns' worth prefetch, when `next` (the next group's
// rows, inside this call) is given, the first kGvPf columns of those rows instead. The
// prefetches never leave the columns of the call: with a block narrower than B the columns after
// them are another block's (one thread on half-width blocks: 33 GB/s stopping at nm against 32
// prefetching on, 36-38 wrapping to the next rows; whole rows 38 -> 39-40).
template <int R, int G>
TW_CPU_INLINE void gv_rows(int p, int nm, int n, const float* __restrict A, long ak, long ai,
                           const float* __restrict b, long ldb, float* __restrict C, long ldc,
                           const float* next) {
  simd::vf a[R][G];
  for (int i = 0; i < R; ++i)
    for (int q = 0; q < G; ++q) a[i][q] = simd::splat(A[q * ak + i * ai]);
  if (p > 0) gv_step<R, G, false>(0, p, a, b, ldb, C, ldc);
  const int npf = nm - kGvPf > p ? nm - kGvPf : p;
  int j = p;
  // one prefetch per 64-byte line and row: a vector narrower than a line (AVX2's 32 bytes)
  // prefetches on every kLineVecs-th step only (each 64 bytes of the range holds one address)
  for (; j < npf; j += kVF)
    gv_step<R, G, true, true>(j, kVF, a, b, ldb, C, ldc, (j - p) / kVF % kLineVecs ? nullptr : b + j + kGvPf);
  if (next)
    for (; j < nm; j += kVF)
      gv_step<R, G, true, true>(j, kVF, a, b, ldb, C, ldc, (j - npf) / kVF % kLineVecs ? nullptr : next + (j - npf));
  for (; j < nm; j += kVF) gv_step<R, G, true>(j, kVF, a, b, ldb, C, ldc);
  if (nm < n) gv_step<R, G, false>(nm, n - nm, a, b, ldb, C, ldc);
}

template <int R>
__attribute__((noinline)) void gemv_f32(int N, int K, const float* __restrict A, long lda,
                                        bool transA, const float* __restrict B, long ldb,
                                        float* __restrict C, long ldc, bool acc) {
  const long ak = transA ? lda : 1, ai = transA ? 1 : lda;
  if (!acc)
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < N; ++j) C[i * ldc + j] = 0.0f;
  // head columns up to B's first vector-size boundary (64 bytes with AVX-512) when every row
  // starts at the same offset from one: 0 < p < kVF
  constexpr uintptr_t kVB = simd::kVecBytes;
  const uintptr_t addr = (uintptr_t)B;
  int p = 0;
  if ((addr % kVB) && (addr & 3) == 0 && ((uintptr_t)ldb * 4) % kVB == 0)
    p = (int)((kVB - addr % kVB) / 4);
  if (p > N) p = N;
  const int nm = p + (N - p) / kVF * kVF;
  int k = 0;
  for (; k + kGvK <= K; k += kGvK) {
    const float* next = k + 2 * kGvK <= K ? B + (k + kGvK) * ldb : nullptr;
    gv_rows<R, kGvK>(p, nm, N, A + k * ak, ak, ai, B + k * ldb, ldb, C, ldc, next);
  }
  for (; k < K; ++k) gv_rows<R, 1>(p, nm, N, A + k * ak, ak, ai, B + k * ldb, ldb, C, ldc, nullptr);
}

// Dot products along contiguous K: out[r * os] (+)= sum_k rows[r * ld + k] * x[k] for r < n
// (x contiguous). The GEMV shapes whose long dimension is K-contiguous take it: M = 1 with B
// transposed (rows of B, stored N x K, against A's row) and N = 1 with A not transposed (rows of
// A against B's column). Four rows at a time, two vector accumulators each (8 independent FMA
// chains), the last partial vector masked on AVX-512 (scalar elsewhere); every element of the
// rows is read once, in address order, and nothing is packed. Each sum is accumulated from zero
// and then added to out (acc) or stored.
TW_CPU_INLINE float gv_hsum(simd::vf v) {
  float s = 0.0f;
  for (int l = 0; l < kVF; ++l) s += v[l];
  return s;
}
template <int R>
TW_CPU_INLINE void gv_dot_rows(int K, const float* __restrict rows, long ld,
                               const float* __restrict x, float* __restrict out, long os, bool acc) {
  using simd::vf;
  vf s0[R], s1[R];
  for (int r = 0; r < R; ++r) s0[r] = s1[r] = vf{};
  int k = 0;
  for (; k + 2 * kVF <= K; k += 2 * kVF) {
    const vf x0 = simd::loadu(x + k), x1 = simd::loadu(x + k + kVF);
    for (int r = 0; r < R; ++r) {
      s0[r] = simd::fma(simd::loadu(rows + r * ld + k), x0, s0[r]);
      s1[r] = simd::fma(simd::loadu(rows + r * ld + k + kVF), x1, s1[r]);
    }
  }
  if (k + kVF <= K) {
    const vf x0 = simd::loadu(x + k);
    for (int r = 0; r < R; ++r) s0[r] = simd::fma(simd::loadu(rows + r * ld + k), x0, s0[r]);
    k += kVF;
  }
#if defined(__AVX512F__)
  if (k < K) {
    const vf x0 = gv_load_n(x + k, K - k);
    for (int r = 0; r < R; ++r) s1[r] = simd::fma(gv_load_n(rows + r * ld + k, K - k), x0, s1[r]);
    k = K;
  }
#endif
  for (int r = 0; r < R; ++r) {
    float t = gv_hsum(s0[r] + s1[r]);
    for (int q = k; q < K; ++q) t += rows[r * ld + q] * x[q];
    out[r * os] = acc ? out[r * os] + t : t;
  }
}
__attribute__((noinline)) inline void gemv_dots(int n, int K, const float* __restrict rows, long ld,
                                                const float* __restrict x, float* __restrict out,
                                                long os, bool acc) {
  int r = 0;
  for (; r + 4 <= n; r += 4) gv_dot_rows<4>(K, rows + r * ld, ld, x, out + r * os, os, acc);
  for (; r < n; ++r) gv_dot_rows<1>(K, rows + r * ld, ld, x, out + r * os, os, acc);
}

// Which code path gemm_f32 takes for a call (fp32 only: f16/bf16 are widened while packing, so
// they always take `packed`). Chosen from the shape and transposes alone, before any packing:
//   gemv_rows  M <= 2, B not transposed: stream B's rows (gemv_f32), or N = 1 with A transposed
//              (C^T = B^T A^T: A's rows, stored K x M, streamed the same way, M outputs);
//   gemv_dots  M = 1 with B transposed, or N = 1 with A not transposed: dot products along
//              contiguous K (gemv_dots);
//   skinny     M <= kMR, B not transposed: B streamed into the micro-kernel unpacked;
//   packed     everything else (Goto/BLIS blocking, packed A and B).
enum class GemmPath { gemv_rows, gemv_dots, skinny, packed };
inline GemmPath gemm_path(int M, int N, bool transA, bool transB) {
  if (M <= 2 && !transB) return GemmPath::gemv_rows;
  if (M == 1) return GemmPath::gemv_dots;  // B transposed
  if (N == 1) return transA ? GemmPath::gemv_rows : GemmPath::gemv_dots;
  if (M <= kMR && !transB) return GemmPath::skinny;
  return GemmPath::packed;
}

// The GEMV calls that are not gemv_f32's own shape (M <= 2, B not transposed): M = 1 with B
// transposed and N = 1. A strided vector operand is gathered into a contiguous scratch buffer
// first (K floats); a strided output column of N = 1 with A transposed goes through one too.
inline void gemv_other(int M, int N, int K, const float* A, long lda, bool transA, const float* B,
                       long ldb, bool transB, float* C, long ldc, bool accumulate) {
  if (M == 1) {  // B transposed: C[0][j] = dot(row j of B, op(A)'s row)
    const float* x = A;
    if (transA && lda != 1) {
      float* t = (float*)gemm_scratch(0).get(sizeof(float) * (size_t)K);
      for (int k = 0; k < K; ++k) t[k] = A[(long)k * lda];
      x = t;
    }
    gemv_dots(N, K, B, ldb, x, C, 1, accumulate);
    return;
  }
  // N = 1: the vector is op(B)'s column, B[k * ldb] (not transposed) or B[k] (transposed)
  if (!transA) {
    const float* x = B;
    if (!transB && ldb != 1) {
      float* t = (float*)gemm_scratch(0).get(sizeof(float) * (size_t)K);
      for (int k = 0; k < K; ++k) t[k] = B[(long)k * ldb];
      x = t;
    }
    gemv_dots(M, K, A, lda, x, C, ldc, accumulate);
    return;
  }
  // A transposed (stored K x M): C[i] = sum_k A[k][i] b[k], A's rows streamed (gemv_f32 with the
  // vector as its one row of "A" and A as its "B"), into C directly when C's column is contiguous
  float* out = C;
  if (ldc != 1) {
    out = (float*)gemm_scratch(1).get(sizeof(float) * (size_t)M);
    if (accumulate)
      for (int i = 0; i < M; ++i) out[i] = C[(long)i * ldc];
  }
  gemv_f32<1>(M, K, B, transB ? 1 : ldb, !transB, A, lda, out, M, accumulate);
  if (ldc != 1)
    for (int i = 0; i < M; ++i) C[(long)i * ldc] = out[i];
}

// M = 1, B not transposed, on a strip of a wider matrix: a tile program's block that owns N
// columns of B's rows (b_width floats each, the strip starting at column b_col) and walks K in
// small steps. Streamed strip by strip, each call reads K rows of N * 4 bytes that lie ldb * 4
// bytes apart (the op zoo's 1x4096x4096 matvec in 128-column blocks: 512 bytes every 16 KiB),
// which neither the hardware prefetchers nor the TLB follow (measured: 3-10x slower than whole
// rows). When A and B are stable for the launch, the first call for a (k step, A) computes the
// product of A's row with B's whole rows (gemv_f32 over b_width columns: the contiguous stream)
// into the launch's shared arena (SharedPackedB, keyed by B's row start, ldb, K, b_width and
// A), and every call, that one included, adds its N columns of it into C. A call that finds the
// product being computed by another thread computes its own strip instead. Both compute each
// column's sum from zero with the same FMAs in the same k order (gemv_f32 is lane-wise), so the
// result does not depend on which thread computed what: C (+)= that sum, bit for bit.
//
// Only narrow strips share (N < kGvShareCols, gemv_shares_rows): a strip of 8 KiB or more per row
// streams at the whole-row rate on its own, and sharing it costs work, since a call that finds the
// product being filled computes its strip privately: two half-width blocks on two threads read
// 1.5 rows per row (one whole, one half) and ran at one core's rate (1/2048/64, 2 threads: 8.0 ->
// 10.7 GB/s side by side, load ~8). The last strip of the rows (b_col + N == b_width: a tail that
// may be narrower than the blocks before it) uses a product the other blocks left but never
// starts one: when they did not share (wide blocks), a whole-row product for its few columns
// would read all of B again.
inline constexpr long kGvShareCols = 2048;
inline bool gemv_shares_rows(int M, int N, bool a_stable, bool b_stable, long b_col, long b_width) {
  return M == 1 && a_stable && b_stable && b_col >= 0 && b_width >= 2L * N && N < kGvShareCols &&
         b_col + N <= b_width && b_width <= (1L << 24);
}
inline void gemv_shared_rows(int N, int K, const float* A, long lda, bool transA, const float* B,
                             long ldb, long b_col, long b_width, float* C, bool acc) {
  const float* row0 = B - b_col;
  constexpr int kTag = 64;  // distinct from the packed-B panels' tags (< 32)
  const int tag = kTag + (transA ? 1 : 0);
  bool fill = false;
  SharedPackedB::Slot* slot = nullptr;
  const float* prod =
      b_col + N == b_width
          ? shared_packed_b().find(row0, ldb, K, (int)b_width, tag, A, lda)
          : shared_packed_b().acquire(row0, ldb, K, (int)b_width, tag, (size_t)b_width + kPackSlack, &fill,
                                      &slot, A, lda);
  if (prod && fill) {
    gemv_f32<1>((int)b_width, K, A, lda, transA, row0, ldb, const_cast<float*>(prod), b_width, false);
    SharedPackedB::publish(slot);
  }
  if (prod) {
    prod += b_col;
  } else {
    float* t = (float*)gemm_scratch(1).get(sizeof(float) * ((size_t)N + kPackSlack));
    gemv_f32<1>(N, K, A, lda, transA, B, ldb, t, N, false);
    prod = t;
  }
  if (acc)
    for (int j = 0; j < N; ++j) C[j] += prod[j];
  else
    for (int j = 0; j < N; ++j) C[j] = prod[j];
}

// Whether gemm_f32 reads an fp32 A in place (ukr_f32_ra) instead of packing it: A not
// transposed (row-major rows to broadcast from), one row block and one K block (M <= kMC,
// K <= kKC: the packed copy would serve this call alone, so packing is a transposing copy of
// the whole of A per call; a stable A packed once into the per-thread cache is read from there
// instead, gemm_f32 decides that first), rows not a multiple of 4 KiB apart (every row's current
// line would fall into one L1 set: 14 rows in a 12-way set), and A's rows not overlapping C (a
// packed copy is taken before C is written; rows read in place are read again by the later
// column strips).
inline bool a_in_place(int M, int N, int K, const float* A, long lda, bool transA, const float* C,
                       long ldc) {
  if (transA || M > kMC || K > kKC || (lda * (long)sizeof(float)) % 4096 == 0) return false;
  const uintptr_t a0 = (uintptr_t)A, a1 = (uintptr_t)(A + (long)(M - 1) * lda + K);
  const uintptr_t c0 = (uintptr_t)C, c1 = (uintptr_t)(C + (long)(M - 1) * ldc + N);
  return a1 <= c0 || c1 <= a0;
}

// Calls of gemm_f32 on this thread that read A in place (tests look at it).
inline long& a_in_place_calls() {
  static thread_local long n = 0;
  return n;
}

// Up to two packed ranges fetched into L2 a few cache lines at a time: take() hands each
// full-height micro-kernel call a chunk, which it prefetches one line per k, so that the whole
// of them is requested by the end of the current gemm call.
struct NextPrefetch {
  const char* p[2];
  long lines[2];
  int n = 0;
  long per = 0;  // lines per step, all ranges together
  void add(const float* q, size_t floats) {
    if (!q || n == 2) return;  // two ranges at most
    p[n] = (const char*)q;
    lines[n] = (long)((floats * sizeof(float) + 63) / 64);
    ++n;
  }
  void spread(long steps) {
    long total = 0;
    for (int i = 0; i < n; ++i) total += lines[i];
    per = (total + steps - 1) / (steps > 0 ? steps : 1) + 1;  // + 1: chunks end at range ends
  }
  // the next chunk (up to `per` lines, within one range) for a micro-kernel call to fetch
  TW_CPU_INLINE const char* take(long* m) {
    if (n == 0) {
      *m = 0;
      return nullptr;
    }
    *m = lines[n - 1] < per ? lines[n - 1] : per;
    const char* q = p[n - 1];
    p[n - 1] = q + 64 * *m;
    lines[n - 1] -= *m;
    if (lines[n - 1] == 0) --n;
    return q;
  }
};

// A tile program's K walk as this thread sees it: a call whose A and B tiles are not the
// previous call's next K step (NextPrefetch's guess) starts a block, and its tiles are the
// block's first. When a call finds neither of its next K step's tiles packed (most likely the
// block's last K step), the next block is most likely the next column block of the same block
// row (the launcher's row-major order; the last one wraps to column 0: the next block row's, or
// the same row's first columns under a rotated 2-thread share), whose first call reads the A
// tile this block started with and the B panel beside this block's first: both packed already
// after the first block row, but read on demand from L3 by that call (1024^3 in 64/256/256
// blocks, 1 thread: the first K step's calls ran 1.5x slower per flop than the others).
struct BlockWalk {
  const void* next_a = nullptr;  // the previous call's next K step
  const void* next_b = nullptr;
  const void* a0 = nullptr;  // the current block's first tiles and depth
  const void* b0 = nullptr;
  int k0 = 0;
  long prefetches = 0;  // calls that fetched a next block's tiles (tests look at it)
  // A stable A tile holding whole rows (lda == K: no next K step) read by a run of calls (flash
  // attention's Q block against every key block): the run's A, its calls so far and the length
  // of the previous run, whose last calls fetch the next row block's source (see gemm_f32); a
  // new launch starts a new run (the same A may come back)
  const void* run_a = nullptr;
  uint64_t run_epoch = 0;
  int run_calls = 0, last_run = 0;
};
inline BlockWalk& block_walk() {
  static thread_local BlockWalk w;
  return w;
}

// ------------------------------------------------ small-M gemms, nothing packed
// gemm_small: C (+)= op(A) op(B) for M <= kSmallM rows (the tile programs' decode shapes: a few
// query heads against a page of keys, Q K^T with B transposed and P V with B not), reading B
// where it lies: nothing packed, every f16 / bf16 element of B widened to fp32 in registers as it
// is loaded, fp32 FMA accumulation (the same numerics as the widening packed
// path: exact products, one fp32 rounding per k). For such shapes the packed driver's cost is the
// packing itself: both operands packed per call (bf16: 4 x 64 x 128 and 4 x 128 x 64 at
// 2.9-3.8 us a call where the FMAs are ~0.4 us).
//   op(A) is read in place when it is fp32 and not transposed, else first widened / gathered into
//     fp32 rows (M x K, scratch slot 0: a few KiB, negligible next to B).
//   B not transposed (small_rows): B's rows streamed kSmNV vectors of columns at a time, each
//     element of op(A) broadcast; C's R x kSmNV block lives in registers over all of K.
//   B transposed (small_dots): dot products along the contiguous K of op(A)'s rows and B's rows,
//     R rows of A against 4 rows of B at a time (16 accumulators), each folded at the end.
//   bf16 is widened in halves (small_rows_split_block, small_dots_block): 2 kVF bf16 read as 32-bit
//     pairs, even elements x << 16, odd x & 0xffff0000 (1.10-1.13x per call in cache against a
//     widening load and shift per kVF; vdpbf16ps measured no faster on Sapphire Rapids:
//     docs/performance.md "Session 15"). With AVX512-BF16 and no AMX (Zen 4) and op(A) not
//     transposed, bf16 runs vdpbf16ps on the pairs in place instead (dp_small: the packed bf16
//     path's DAZ / FTZ numerics; paged decode bf16 1.4-1.8x faster there, "Session 17").
// Column and K tails use partial vectors (masked loads on AVX-512 fp32, a zero-filled widened
// copy otherwise); a zero-filled lane adds 0 * 0.
// The next call's B (the same strip of the next page: codegen's @prefetch_slices, passed as
// tw_cpu::gemm's next_b), requested into L2 a few cache lines per step of gemm_small's fp32 and
// vdpbf16ps loops (and the bf16 widening loops on AVX-512) rather than all before the call (the f16
// and AVX2 bf16 widening paths: all at the start): a prefetch that misses holds a miss buffer until its line arrives (on
// Zen 4 as a load does), so 64-128 prefetches issued at once stall the call's own loads behind
// them, where spread over the call they overlap its arithmetic (paged decode fp32 1.22x on Zen 4,
// one thread, pages cold: docs/performance.md "Issue 13, CPU", session 18). `rows` rows of `row_bytes` bytes,
// `ld` bytes apart; `steps`: how many times the loops call step() (an estimate: finish() issues
// whatever is left). prefetcht1: t0 and nta measured 0.85-0.88x of none on Zen 4.
struct StripPrefetch {
  const char* q = nullptr;  // the next line to request; null: nothing (left) to prefetch
  const char* row_end = nullptr;  // past the current row's last line
  long ld = 0, row_span = 0;  // bytes from a row's first line to past its last
  int rows_left = 0;
  long per = 0;  // bytes requested per step (whole lines)
  StripPrefetch() = default;
  StripPrefetch(const void* base, long ld_bytes, int rows, long row_bytes, long steps) {
    if (!base || rows <= 0 || row_bytes <= 0) return;
    const uintptr_t a = (uintptr_t)base;
    q = (const char*)(a & ~(uintptr_t)63);
    row_span = (long)(((a & 63) + row_bytes + 63) / 64) * 64;
    row_end = q + row_span;
    ld = ld_bytes;
    rows_left = rows;
    const long lines = (long)rows * (row_span / 64);
    per = 64 * (steps > 0 ? (lines + steps - 1) / steps : lines);
  }
  // the next `per` bytes' lines of the current row (fewer at its end), then on to the next row
  TW_CPU_INLINE void step() {
    if (!q) return;
    const char* e = q + per < row_end ? q + per : row_end;
    prefetch_l2((uintptr_t)q, e - q);
    q = e;
    if (q == row_end) {
      if (--rows_left == 0) {
        q = nullptr;
        return;
      }
      row_end += ld;
      q = row_end - row_span;
    }
  }
  void finish() {
    while (q) step();
  }
};
// all of a strip at once (the gemm paths other than gemm_small)
inline void prefetch_strip(const void* base, long ld_bytes, int rows, long row_bytes) {
  for (int r = 0; r < rows; ++r) prefetch_l2((uintptr_t)base + (uintptr_t)(r * ld_bytes), row_bytes);
}

inline constexpr int kSmallM = 8;
inline constexpr int kSmNV = 4;

// gemm_run's dispatch (gemm_runtime.cpp): f16 and bf16 gemms of 1 .. kSmallM rows take
// gemm_small (bf16 from 5 rows only where the AMX tile unit is not in use: amx_pays); fp32 ones
// when B has at most kSmallMaxB elements (a tile: within L2; larger products keep the cache
// blocking of the packed / skinny drivers) and B is transposed or M > 2 (M <= 2 with B not
// transposed is gemv_f32's). Measured per call against the packed driver (Sapphire Rapids, one
// thread, B in cache, 4 rows): bf16 4 x 16 x 128 with B transposed 2.7x, 4 x 128 x 16 2.5x,
// 4 x 64 x 128 1.4x, 4 x 128 x 64 2.6x; fp32 4 x 16 x 128 (B transposed) 4.5x, 4 x 128 x 16 1.3x;
// bf16 8 x 64 x 128 (B transposed) 0.77x the tile unit's speed, hence amx_pays first.
inline bool small_m_path(int M) { return M >= 1 && M <= kSmallM; }
inline constexpr long kSmallMaxB = 1L << 16;
inline bool small_f32_path(int M, int N, int K, bool transB) {
  return small_m_path(M) && (long)N * K <= kSmallMaxB && (transB || M > 2);
}

// x, kept in a register: g++ otherwise folds a vector loaded once and used by several FMAs back
// into each FMA as a memory operand (vfmadd231ps (mem)), one load per use instead of one per
// vector, and the small gemms' loops then issue 20 loads per 16 FMAs where 8 do (load-bound: the
// decode calls 1.28x faster with it, docs/performance.md "Issue 13, CPU", session 18)
TW_CPU_INLINE void held(simd::vf& x) {
#if defined(__x86_64__) && defined(__SSE2__)
  __asm__("" : "+v"(x));
#elif defined(__aarch64__)
  __asm__("" : "+w"(x));
#else
  (void)x;
#endif
}

typedef uint32_t vu32 __attribute__((vector_size(simd::kVecBytes)));
typedef int32_t vi32 __attribute__((vector_size(simd::kVecBytes)));

// kVF elements from p widened to fp32
TW_CPU_INLINE simd::vf ldw(const float* p) { return simd::loadu(p); }
TW_CPU_INLINE simd::vf ldw(const bf16* p) {
#if defined(__AVX512F__) && !defined(__clang__)  // one vpmovzxwd from memory (GCC's generic
                                                 // conversion splits it in halves; clang's does not)
  typedef short v16s_u __attribute__((vector_size(32), aligned(2), may_alias));
  typedef int v16s32 __attribute__((vector_size(64)));
  const v16s32 x = __builtin_ia32_pmovzxwd512_mask(*reinterpret_cast<const v16s_u*>(p), v16s32{}, (unsigned short)-1);
  return (simd::vf)(x << 16);
#else
  return simd::loadu(p);
#endif
}
TW_CPU_INLINE simd::vf ldw(const f16* p) {  // the vector form of to_f32(f16), as load8
#if defined(__AVX512F__) && defined(__F16C__)
  typedef short v16s_u __attribute__((vector_size(32), aligned(2), may_alias));
  return __builtin_ia32_vcvtph2ps512_mask(*reinterpret_cast<const v16s_u*>(p), simd::vf{}, (unsigned short)-1, 4);
#elif defined(__F16C__)
  static_assert(sizeof(simd::vf) == sizeof(v8f));
  v8f o;
  load8(p, o);
  return o;
#else
  return simd::loadu(p);  // the same integer steps as to_f32(f16), lane by lane
#endif
}
// the first r (0 < r <= kVF) elements from p widened, the other lanes 0 (nothing past p + r read)
template <class T>
TW_CPU_INLINE simd::vf ldw_n(const T* p, int r) {
  if constexpr (same<T, float>) {
    return gv_load_n(p, r);
  } else {
    alignas(64) float t[kVF] = {};
    for (int l = 0; l < r; ++l) t[l] = to_f32(p[l]);
    return simd::load(t);
  }
}

// bf16 split in halves: 2 kVF bf16 from p as one vector of 32-bit pairs; its low halves (the even
// elements 0, 2, .., 2 kVF - 2) widened are x << 16, its high halves (the odd ones) x & 0xffff0000:
// two plain vector operations where ldw takes a widening load and a shift per kVF elements
typedef uint32_t vu32_u __attribute__((vector_size(simd::kVecBytes), aligned(2), may_alias));
TW_CPU_INLINE vu32 ld_pairs(const bf16* p) { return *reinterpret_cast<const vu32_u*>(p); }
TW_CPU_INLINE simd::vf even_f32(vu32 x) { return (simd::vf)(x << 16); }
TW_CPU_INLINE simd::vf odd_f32(vu32 x) { return (simd::vf)(x & 0xffff0000u); }
// lanes of the even elements e and the odd ones o put back in order: the first kVF elements
// (zip_lo) and the next kVF (zip_hi)
template <size_t... I>
TW_CPU_INLINE simd::vf zip_lo(simd::vf e, simd::vf o, std::index_sequence<I...>) {
  return __builtin_shufflevector(e, o, (I % 2 ? kVF + I / 2 : I / 2)...);
}
template <size_t... I>
TW_CPU_INLINE simd::vf zip_hi(simd::vf e, simd::vf o, std::index_sequence<I...>) {
  return __builtin_shufflevector(e, o, (I % 2 ? kVF + kVF / 2 + I / 2 : kVF / 2 + I / 2)...);
}

// B not transposed, bf16: C[i][j0 .. j0 + 2 kVF V) for i < R, each 2 kVF columns of a row of B
// read as pairs and widened in halves (even and odd columns in their own accumulators, put back
// in column order once, at the end, then C added when accumulating)
template <int R, int V>
TW_CPU_INLINE void small_rows_split_block(int K, const float* __restrict A, long ak, long ai,
                                          const bf16* __restrict B, long ldb, float* __restrict C, long ldc,
                                          bool acc, StripPrefetch& pf) {
  using simd::vf;
  vf ce[R][V], co[R][V];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) ce[i][v] = co[i][v] = vf{};
  for (int k = 0; k < K; ++k) {
    pf.step();
    const bf16* b = B + (long)k * ldb;
    vf be[V], bo[V];
    for (int v = 0; v < V; ++v) {
      const vu32 x = ld_pairs(b + 2 * kVF * v);
      be[v] = even_f32(x);
      bo[v] = odd_f32(x);
    }
    for (int i = 0; i < R; ++i) {
      const vf a = simd::splat(A[(long)k * ak + i * ai]);
      for (int v = 0; v < V; ++v) {
        ce[i][v] = simd::fma(a, be[v], ce[i][v]);
        co[i][v] = simd::fma(a, bo[v], co[i][v]);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) {
      float* c = C + i * ldc + 2 * kVF * v;
      const vf lo = zip_lo(ce[i][v], co[i][v], std::make_index_sequence<kVF>{});
      const vf hi = zip_hi(ce[i][v], co[i][v], std::make_index_sequence<kVF>{});
      simd::storeu(c, acc ? simd::loadu(c) + lo : lo);
      simd::storeu(c + kVF, acc ? simd::loadu(c + kVF) + hi : hi);
    }
}

// C[i][j0 .. j0 + V * kVF) for i < R; kFull false: one partial vector of r columns (V = 1)
template <int R, int V, bool kFull, class T>
TW_CPU_INLINE void small_rows_block(int K, const float* __restrict A, long ak, long ai,
                                   const T* __restrict B, long ldb, float* __restrict C, long ldc,
                                   bool acc, int r, StripPrefetch& pf) {
  using simd::vf;
  vf c[R][V];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v)
      c[i][v] = !acc ? vf{} : kFull ? simd::loadu(C + i * ldc + v * kVF) : gv_load_n(C + i * ldc, r);
  for (int k = 0; k < K; ++k) {
    pf.step();
    const T* b = B + (long)k * ldb;
    vf bv[V];
    for (int v = 0; v < V; ++v) {
      bv[v] = kFull ? ldw(b + v * kVF) : ldw_n(b, r);
      held(bv[v]);
    }
    for (int i = 0; i < R; ++i) {
      const vf a = simd::splat(A[(long)k * ak + i * ai]);
      for (int v = 0; v < V; ++v) c[i][v] = simd::fma(a, bv[v], c[i][v]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) {
      if (kFull)
        simd::storeu(C + i * ldc + v * kVF, c[i][v]);
      else
        gv_store_n(C + i * ldc, c[i][v], r);
    }
}
template <int R, class T>
inline void small_rows(int N, int K, const float* A, long ak, long ai, const T* B, long ldb, float* C,
                       long ldc, bool acc, StripPrefetch& pf) {
  constexpr int V = R <= 4 ? kSmNV : kSmNV / 2;  // R x V accumulators: 16 at most
  int j = 0;
  if constexpr (same<T, bf16>)
    for (; j + V * kVF <= N; j += V * kVF)
      small_rows_split_block<R, V / 2>(K, A, ak, ai, B + j, ldb, C + j, ldc, acc, pf);
  for (; j + V * kVF <= N; j += V * kVF)
    small_rows_block<R, V, true>(K, A, ak, ai, B + j, ldb, C + j, ldc, acc, kVF, pf);
  for (; j + kVF <= N; j += kVF) small_rows_block<R, 1, true>(K, A, ak, ai, B + j, ldb, C + j, ldc, acc, kVF, pf);
  if (j < N) small_rows_block<R, 1, false>(K, A, ak, ai, B + j, ldb, C + j, ldc, acc, N - j, pf);
}

#if defined(__AVX512F__)
// the lanes of x and y summed pairwise by a step of the fold tree below: lane l of the result is
// x's or y's lanes I[l] + J[l] (indices into x then y, as __builtin_shufflevector)
template <int... I>
struct Lanes {};
template <int... I, int... J>
TW_CPU_INLINE simd::vf fold_step(simd::vf x, simd::vf y, Lanes<I...>, Lanes<J...>) {
  return __builtin_shufflevector(x, y, I...) + __builtin_shufflevector(x, y, J...);
}
// the 4 x 4 sums of s's lanes as one vector, lane 4 i + j the sum of s[i][j]: a transpose-and-add
// tree (30 shuffles, 15 adds) where folding each row's four vectors alone takes 32 shuffles and 20
// adds and leaves 16 scalars to extract
TW_CPU_INLINE simd::vf fold_4x4(const simd::vf (&s)[4][4]) {
  using simd::vf;
  // x's 256-bit halves added, then y's: lanes 0-7 x's partial sums, 8-15 y's
  auto h = [](vf x, vf y) {
    return fold_step(x, y, Lanes<0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23>{},
                     Lanes<8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31>{});
  };
  // two h results (x, y and z, w): 128-bit blocks 0-3 the partial sums of x, y, z, w
  auto q = [](vf a, vf b) {
    return fold_step(a, b, Lanes<0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27>{},
                     Lanes<4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31>{});
  };
  // in each 128-bit block: lanes 0, 1 a's 2 partial sums, lanes 2, 3 b's
  auto d = [](vf a, vf b) {
    return fold_step(a, b, Lanes<0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29>{},
                     Lanes<2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31>{});
  };
  // in each 128-bit block: a's two sums, then b's
  auto e = [](vf a, vf b) {
    return fold_step(a, b, Lanes<0, 2, 16, 18, 4, 6, 20, 22, 8, 10, 24, 26, 12, 14, 28, 30>{},
                     Lanes<1, 3, 17, 19, 5, 7, 21, 23, 9, 11, 25, 27, 13, 15, 29, 31>{});
  };
  vf u[4];  // u[j]: block i the partial sums of s[i][j]
  for (int j = 0; j < 4; ++j) u[j] = q(h(s[0][j], s[1][j]), h(s[2][j], s[3][j]));
  return e(d(u[0], u[1]), d(u[2], u[3]));
}
#endif

// C[i][j] (+)= the sum of s[i][j]'s lanes, i < R, j < J
template <int R, int J>
TW_CPU_INLINE void dots_store(const simd::vf (&s)[R][J], float* __restrict C, long ldc, bool acc) {
  using simd::vf;
#if defined(__AVX512F__)
  if constexpr (R == 4 && J == 4) {
    typedef float v4f __attribute__((vector_size(16)));
    const vf x = fold_4x4(s);
    const v4f row[4] = {__builtin_shufflevector(x, x, 0, 1, 2, 3), __builtin_shufflevector(x, x, 4, 5, 6, 7),
                        __builtin_shufflevector(x, x, 8, 9, 10, 11), __builtin_shufflevector(x, x, 12, 13, 14, 15)};
    for (int i = 0; i < 4; ++i) {
      v4f t = row[i];
      if (acc) {
        v4f c;
        __builtin_memcpy(&c, C + i * ldc, sizeof c);
        t += c;
      }
      __builtin_memcpy(C + i * ldc, &t, sizeof t);
    }
    return;
  }
#endif
  for (int i = 0; i < R; ++i) {
    float t[J];
#if defined(__AVX512F__)
    if constexpr (J == 4) {  // the four sums of row i folded together: 8 shuffles, 5 adds
      const vf x01 = __builtin_shufflevector(s[i][0], s[i][1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                     __builtin_shufflevector(s[i][0], s[i][1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
      const vf x23 = __builtin_shufflevector(s[i][2], s[i][3], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                     __builtin_shufflevector(s[i][2], s[i][3], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
      vf x = __builtin_shufflevector(x01, x23, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
             __builtin_shufflevector(x01, x23, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
      x += __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
      x += __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
      for (int j = 0; j < 4; ++j) t[j] = x[4 * j];
    } else
#endif
    {
      for (int j = 0; j < J; ++j) t[j] = simd::fold_sum(s[i][j]);
    }
    for (int j = 0; j < J; ++j) C[i * ldc + j] = acc ? C[i * ldc + j] + t[j] : t[j];
  }
}

// C[i][j] (+)= dot(A row i, B row j) for i < R, j < J: K contiguous in both
template <int R, int J, class TA, class TB>
TW_CPU_INLINE void small_dots_block(int K, const TA* __restrict A, long lda, const TB* __restrict B,
                                    long ldb, float* __restrict C, long ldc, bool acc, StripPrefetch& pf) {
  using simd::vf;
  vf s[R][J];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < J; ++j) s[i][j] = vf{};
  int k = 0;
  if constexpr (same<TB, bf16>)  // op(A)'s rows hold each 2 kVF k as the even ones, then the odd ones
    for (; k + 2 * kVF <= K; k += 2 * kVF) {
      pf.step();
      vf be[J], bo[J];
      for (int j = 0; j < J; ++j) {
        const vu32 x = ld_pairs(B + j * ldb + k);
        be[j] = even_f32(x);
        bo[j] = odd_f32(x);
      }
      for (int i = 0; i < R; ++i) {
        const vf ae = simd::loadu(A + i * lda + k), ao = simd::loadu(A + i * lda + k + kVF);
        for (int j = 0; j < J; ++j) s[i][j] = simd::fma(ao, bo[j], simd::fma(ae, be[j], s[i][j]));
      }
    }
  for (; k + kVF <= K; k += kVF) {
    pf.step();
    vf b[J];
    for (int j = 0; j < J; ++j) {
      b[j] = ldw(B + j * ldb + k);
      held(b[j]);
    }
    for (int i = 0; i < R; ++i) {
      vf a = ldw(A + i * lda + k);
      held(a);
      for (int j = 0; j < J; ++j) s[i][j] = simd::fma(a, b[j], s[i][j]);
    }
  }
  if (k < K) {
    vf b[J];
    for (int j = 0; j < J; ++j) b[j] = ldw_n(B + j * ldb + k, K - k);
    for (int i = 0; i < R; ++i) {
      const vf a = ldw_n(A + i * lda + k, K - k);
      for (int j = 0; j < J; ++j) s[i][j] = simd::fma(a, b[j], s[i][j]);
    }
  }
  dots_store<R, J>(s, C, ldc, acc);
}
template <int R, class TA, class TB>
inline void small_dots(int N, int K, const TA* A, long lda, const TB* B, long ldb, float* C, long ldc,
                       bool acc, StripPrefetch& pf) {
  int j = 0;
  for (; j + 4 <= N; j += 4) small_dots_block<R, 4>(K, A, lda, B + j * ldb, ldb, C + j, ldc, acc, pf);
  for (; j < N; ++j) small_dots_block<R, 1>(K, A, lda, B + j * ldb, ldb, C + j, ldc, acc, pf);
}

#if defined(TW_CPU_SMALL_DP)
// bf16 on AVX512-BF16 targets without AMX (Zen 4): vdpbf16ps on the bf16 pairs where they lie
// (dp_dots_block, dp_rows_block), two products per fp32 lane and instruction and no widening;
// the numerics of the packed bf16 path (the header comment: DAZ / FTZ, each of a pair's two
// additions rounded: the same one rounding per k as an FMA).
typedef short v32hi_dp __attribute__((vector_size(64)));
// 32 bf16 from p as one vector (its bits), or the first n < 32 and zeros (nothing past p + n read)
TW_CPU_INLINE simd::vf ld_bf16x32(const bf16* p) { return (simd::vf)ld_pairs(p); }
TW_CPU_INLINE simd::vf ld_bf16x32_n(const bf16* p, int n) {
#if defined(__clang__)  // clang's form of the builtin takes a vector pointer
  return (simd::vf)__builtin_ia32_loaddquhi512_mask((const v32hi_dp*)p, v32hi_dp{}, (unsigned)((1ull << n) - 1));
#else
  return (simd::vf)__builtin_ia32_loaddquhi512_mask((const short*)p, v32hi_dp{}, (unsigned)((1ull << n) - 1));
#endif
}
// C[i][j] (+)= dot(A row i, B row j) for i < R, j < J, K contiguous in both, 32 k per vdpbf16ps
template <int R, int J>
TW_CPU_INLINE void dp_dots_block(int K, const bf16* __restrict A, long lda, const bf16* __restrict B, long ldb,
                                 float* __restrict C, long ldc, bool acc, StripPrefetch& pf) {
  using simd::vf;
  vf s[R][J];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < J; ++j) s[i][j] = vf{};
  int k = 0;
  for (; k + 2 * kVF <= K; k += 2 * kVF) {
    pf.step();
    vf b[J];
    for (int j = 0; j < J; ++j) b[j] = ld_bf16x32(B + j * ldb + k);
    for (int i = 0; i < R; ++i) {
      const vf a = ld_bf16x32(A + i * lda + k);
      for (int j = 0; j < J; ++j) s[i][j] = dot_bf16(s[i][j], a, b[j]);
    }
  }
  if (k < K) {
    vf b[J];
    for (int j = 0; j < J; ++j) b[j] = ld_bf16x32_n(B + j * ldb + k, K - k);
    for (int i = 0; i < R; ++i) {
      const vf a = ld_bf16x32_n(A + i * lda + k, K - k);
      for (int j = 0; j < J; ++j) s[i][j] = dot_bf16(s[i][j], a, b[j]);
    }
  }
  dots_store<R, J>(s, C, ldc, acc);
}
// C[i][j0 .. j0 + 32 V) (+)= A[i][:] B[:, j0 ..] for i < R, B not transposed: rows k and k + 1 of
// B interleaved into pairs (vpunpcklwd / vpunpckhwd: per 128-bit lane, columns 0-3 and 4-7 of its
// 8), A's pair (a[i][k], a[i][k + 1]) broadcast; the columns put back in order at the end.
// kFull false: V = 1 and the first r < 32 columns only
template <int R, int V, bool kFull>
TW_CPU_INLINE void dp_rows_block(int K, const bf16* __restrict A, long lda, const bf16* __restrict B, long ldb,
                                 float* __restrict C, long ldc, bool acc, int r, StripPrefetch& pf) {
  using simd::vf;
  typedef short v32s __attribute__((vector_size(64)));
  vf lo[R][V], hi[R][V];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) lo[i][v] = hi[i][v] = vf{};
  for (int k = 0; k < K; k += 2) {
    pf.step();
    const bf16* b0 = B + (long)k * ldb;
    vf pl[V], ph[V];
    for (int v = 0; v < V; ++v) {
      const bf16* b = b0 + 2 * kVF * v;
      const v32s x = (v32s)(kFull ? ld_bf16x32(b) : ld_bf16x32_n(b, r));
      const v32s y = k + 1 >= K ? v32s{} : (v32s)(kFull ? ld_bf16x32(b + ldb) : ld_bf16x32_n(b + ldb, r));
      pl[v] = (vf)__builtin_shufflevector(x, y, 0, 32, 1, 33, 2, 34, 3, 35, 8, 40, 9, 41, 10, 42, 11, 43, 16, 48, 17,
                                          49, 18, 50, 19, 51, 24, 56, 25, 57, 26, 58, 27, 59);
      ph[v] = (vf)__builtin_shufflevector(x, y, 4, 36, 5, 37, 6, 38, 7, 39, 12, 44, 13, 45, 14, 46, 15, 47, 20, 52,
                                          21, 53, 22, 54, 23, 55, 28, 60, 29, 61, 30, 62, 31, 63);
    }
    for (int i = 0; i < R; ++i) {
      uint32_t u = A[i * lda + k].bits;  // the pair as one 32-bit element (a broadcast load)
      if (k + 1 < K) __builtin_memcpy(&u, A + i * lda + k, 4);
      const vf a = (vf)(vu32{} + u);
      for (int v = 0; v < V; ++v) {
        lo[i][v] = dot_bf16(lo[i][v], a, pl[v]);
        hi[i][v] = dot_bf16(hi[i][v], a, ph[v]);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) {
      float* c = C + i * ldc + 2 * kVF * v;
      const vf c0 = __builtin_shufflevector(lo[i][v], hi[i][v], 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
      const vf c1 = __builtin_shufflevector(lo[i][v], hi[i][v], 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
      if (kFull) {
        simd::storeu(c, acc ? simd::loadu(c) + c0 : c0);
        simd::storeu(c + kVF, acc ? simd::loadu(c + kVF) + c1 : c1);
      } else {
        const int r0 = r < kVF ? r : kVF;
        gv_store_n(c, acc ? gv_load_n(c, r0) + c0 : c0, r0);
        if (r > kVF) gv_store_n(c + kVF, acc ? gv_load_n(c + kVF, r - kVF) + c1 : c1, r - kVF);
      }
    }
}
// gemm_small's bf16 calls with op(A) not transposed on these targets: B transposed (dp_dots_block,
// R rows against 4 rows of B) or not (dp_rows_block, 64 or 32 columns at a time)
template <int R>
inline void dp_small(int N, int K, const bf16* A, long lda, const bf16* B, long ldb, bool transB, float* C, long ldc,
                     bool acc, StripPrefetch& pf) {
  int j = 0;
  if (transB) {
    for (; j + 4 <= N; j += 4) dp_dots_block<R, 4>(K, A, lda, B + j * ldb, ldb, C + j, ldc, acc, pf);
    for (; j < N; ++j) dp_dots_block<R, 1>(K, A, lda, B + j * ldb, ldb, C + j, ldc, acc, pf);
    return;
  }
  constexpr int V = R <= 4 ? 2 : 1;  // 2 R V accumulators: 16 at most
  for (; j + 2 * kVF * V <= N; j += 2 * kVF * V) dp_rows_block<R, V, true>(K, A, lda, B + j, ldb, C + j, ldc, acc, 0, pf);
  for (; j + 2 * kVF <= N; j += 2 * kVF) dp_rows_block<R, 1, true>(K, A, lda, B + j, ldb, C + j, ldc, acc, 0, pf);
  if (j < N) dp_rows_block<R, 1, false>(K, A, lda, B + j, ldb, C + j, ldc, acc, N - j, pf);
}
#endif

// rows [i, i + R) of C through f<R>(i), R = 4 while at least 4 are left, then the remainder
template <class F>
TW_CPU_INLINE void small_row_groups(int M, F&& f) {
  int i = 0;
  for (; i + 4 <= M; i += 4) f.template operator()<4>(i);
  switch (M - i) {
    case 3: f.template operator()<3>(i); break;
    case 2: f.template operator()<2>(i); break;
    case 1: f.template operator()<1>(i); break;
    default: break;
  }
}

template <class T>
__attribute__((noinline)) void gemm_small(int M, int N, int K, const T* A, long lda, bool transA,
                                          const T* B, long ldb, bool transB, float* C, long ldc,
                                          bool accumulate, const T* next_b = nullptr, long next_ldb = 0) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate) scale_zero(M, N, C, ldc);
    return;
  }
  // next_b's strip (op(B)'s shape, rows next_ldb apart) prefetched over the loops' steps: about
  // one step per kVF k (B transposed) or per k (not), per block of columns and group of 4 rows
  // (bf16 steps over pairs of k: 2 kVF k, or 2 k, except the widening rows' loop: per k)
  constexpr int G = same<T, bf16> ? 2 : 1;
#if defined(TW_CPU_SMALL_DP)
  const int Gr = same<T, bf16> && !transA ? 2 : 1;
#else
  constexpr int Gr = 1;
#endif
  const int groups = (M + 3) / 4;
  const long steps = transB ? (long)groups * (N / 4 + N % 4) * ((K + kVF - 1) / kVF / G)
                            : (long)groups * ((N + kSmNV * kVF - 1) / (kSmNV * kVF)) * K / Gr;
  StripPrefetch pf(next_b, next_ldb * (long)sizeof(T), transB ? N : K, (long)(transB ? K : N) * (long)sizeof(T),
                   steps);
#if defined(TW_CPU_SMALL_DP)
  if constexpr (same<T, bf16>)
    if (!transA) {
      small_row_groups(M, [&]<int R>(int i) {
        dp_small<R>(N, K, A + (long)i * lda, lda, B, ldb, transB, C + (long)i * ldc, ldc, accumulate, pf);
      });
      return pf.finish();
    }
#endif
  // f16 / bf16 widened: the strip all at the start on AVX2 builds (x86-64-v3 on Zen 4, bf16: the
  // spread 0.96x there, session 18) and for f16; bf16 on AVX-512 builds (the Sapphire Rapids form
  // of these shapes: the AMX tile unit takes no gemm of 4 rows) spreads it over the loops' steps
  // as the fp32 loops do: paged decode bf16 about 1.2x there, pages cold (docs/performance.md, session 39)
#if defined(__AVX512F__)
  if constexpr (same<T, f16>) pf.finish();
#else
  if constexpr (!same<T, float>) pf.finish();
#endif
  // op(A) as fp32 rows of K: in place for fp32 not transposed, else widened / gathered once into
  // scratch (M x K: at most kSmallM rows, so a few KiB), which the loops below then read as fp32
  // (a broadcast from memory per element, no conversion in the inner loops)
  const float* a;
  long ld;
  if constexpr (same<T, float>) {
    a = A;
    ld = lda;
  }
  if (!same<T, float> || transA) {
    float* w = (float*)gemm_scratch(0).get(sizeof(float) * ((size_t)M * K + kPackSlack));
    for (int i = 0; i < M; ++i) {
      float* wi = w + (long)i * K;
      int k = 0;
      if (!transA) {
        if constexpr (same<T, bf16>)  // small_dots' order: each 2 kVF k as the even ones, then the odd
          if (transB)
            for (; k + 2 * kVF <= K; k += 2 * kVF) {
              const vu32 x = ld_pairs(A + (long)i * lda + k);
              simd::storeu(wi + k, even_f32(x));
              simd::storeu(wi + k + kVF, odd_f32(x));
            }
        for (; k + kVF <= K; k += kVF) simd::storeu(wi + k, ldw(A + (long)i * lda + k));
        if (k < K) gv_store_n(wi + k, ldw_n(A + (long)i * lda + k, K - k), K - k);
      } else {
        for (; k < K; ++k) wi[k] = to_f32(A[(long)k * lda + i]);
        if constexpr (same<T, bf16>)
          if (transB)  // small_dots' order (above)
            for (int k0 = 0; k0 + 2 * kVF <= K; k0 += 2 * kVF) {
              float t[2 * kVF];
              for (int l = 0; l < 2 * kVF; ++l) t[l % 2 * kVF + l / 2] = wi[k0 + l];
              __builtin_memcpy(wi + k0, t, sizeof t);
            }
      }
    }
    a = w;
    ld = K;
  }
  if (!transB) {
    small_row_groups(M, [&]<int R>(int i) {
      small_rows<R>(N, K, a + i * ld, 1, ld, B, ldb, C + i * ldc, ldc, accumulate, pf);
    });
  } else {
    small_row_groups(M, [&]<int R>(int i) {
      small_dots<R>(N, K, a + i * ld, ld, B, ldb, C + i * ldc, ldc, accumulate, pf);
    });
  }
  pf.finish();
}

// T.gemm's band (gemm.h Band) on one micro-tile of gemm_f32: C's rows [r0, r0 + h) and columns
// [j0, j0 + nr), the K block [pc, pc + kc). skip: nothing of the tile is needed (c_band: no
// element of the band in it; a_band: op(A)'s rows are 0 over the whole K block); else [k0, k1)
// (within the block) holds every k where one of the rows may be non-zero (a_band), or the block,
// and [i0, i1) (within the tile) the rows to compute: c_band, those with an element of the band
// among the tile's columns (a diagonal crossing the tile leaves the rest of its rows outside:
// a shorter micro-kernel call over the same packed panel, the same sums in the same order);
// a_band, those that may hold a non-zero of op(A) (the others' product is 0). The band's
// rectangle clips both: c_band, the tile's columns to [col0, col1) and its rows to [row0, row1);
// a_band, the rows to [row0, row1) and the k to [col0, col1).
struct BandTile {
  bool skip;
  int k0, k1, i0, i1;
};
TW_CPU_INLINE BandTile band_tile(const Band& b, long r0, int h, long j0, int nr, long pc, int kc) {
  constexpr BandTile skip{true, 0, 0, 0, 0};
  if (b.kind == 2) {  // row i has a column j of [ja, jb) with lo <= j - i < hi: ja - hi < i <= jb - 1 - lo
    const long ja = j0 > b.col0 ? j0 : b.col0, jb = j0 + nr < b.col1 ? j0 + nr : b.col1;
    const long ia = ja - b.hi + 1, ib = jb - b.lo;
    long i0 = (ia > b.row0 ? ia : b.row0) - r0, i1 = (ib < b.row1 ? ib : b.row1) - r0;
    i0 = i0 < 0 ? 0 : i0;
    i1 = i1 > h ? h : i1;
    return ja >= jb || i0 >= i1 ? skip : BandTile{false, 0, kc, (int)i0, (int)i1};
  }
  const long ia = r0 > b.row0 ? r0 : b.row0, ib = r0 + h < b.row1 ? r0 + h : b.row1;  // a_band: the rows
  if (ia >= ib) return skip;
  long k0 = ia + b.lo, k1 = ib - 1 + b.hi;  // their bands, merged, within [col0, col1)
  k0 = (k0 > b.col0 ? k0 : b.col0) - pc;
  k1 = (k1 < b.col1 ? k1 : b.col1) - pc;
  k0 = k0 < 0 ? 0 : k0;
  k1 = k1 > kc ? kc : k1;
  return k0 >= k1 ? skip : BandTile{false, (int)k0, (int)k1, (int)(ia - r0), (int)(ib - r0)};
}

// c_band on one micro-tile of packed A (rows [r0, r0 + h), columns [j0, j0 + nr), not skipped):
// the rows each column half of the strip needs (band_tile on kVF columns each), computed with the
// one-vector micro-kernel (ukr_f32<R, kDp, 1>) where a row needs one half only. The right half's
// rows are the left's shifted down by kVF, so the rows split into left only [a0, b0), both
// [b0, a1) and right only [a1, b1); a one-half stretch of fewer than kSplitBelow rows is computed
// with both halves (a call of so few rows keeps too few accumulators in flight to be worth it).
// Per element the same FMAs in the same k order as the whole strip: inside the band C is the
// unbanded product bit for bit (the window's Q K^T: the diagonal block's and the oldest block's
// triangles, docs/performance.md "Session 24: the sliding window").
template <bool kDp>
TW_CPU_INLINE void band_halves(const Band& band, long r0, int h, long j0, int nr, long pc, int kc, int kwc,
                               const float* a, const float* bp, float* cp, long ldc, bool acc, const char* q,
                               long m, RowsPrefetch* rw, long rn, bool first) {
  const BandTile tl = band_tile(band, r0, h, j0, nr < kVF ? nr : kVF, pc, kc);
  const BandTile tr = nr > kVF ? band_tile(band, r0, h, j0 + kVF, nr - kVF, pc, kc) : BandTile{true, 0, 0, 0, 0};
  int a0 = tl.i0, a1 = tl.i1, b0 = tr.i0, b1 = tr.i1;
  if (tl.skip) a0 = a1 = b0;
  if (tr.skip) b0 = b1 = a1;
  if (!tl.skip && !tr.skip) {
    if (b0 - a0 < kSplitBelow) b0 = a0;
    if (b1 - a1 < kSplitBelow) a1 = b1;
  }
  // half: 0 both, 1 left, 2 right; the next calls' prefetch lines (q) and rows (rn of rw) go with
  // the first call
  auto call = [&](int i, int n, int half) {
    if (n <= 0) return;
    const int off = half == 2 ? kVF : 0;
    const int w = half == 0 ? nr : half == 1 ? (nr < kVF ? nr : kVF) : nr - kVF;
    const long lines = m < kwc ? m : kwc;
    if (half == 0)
      ukr_f32_rows<kDp>(n, kwc, a + i, kMR, bp + off, kNR, cp + (long)i * ldc + off, ldc, acc, w, q, lines, first,
                        rw, rn);
    else
      ukr_f32_rows<kDp, kMR, 1>(n, kwc, a + i, kMR, bp + off, kNR, cp + (long)i * ldc + off, ldc, acc, w, q, lines,
                                first, rw, rn);
    q = nullptr;
    m = 0;
    rn = 0;
  };
  call(a0, b0 - a0, 1);
  call(b0, a1 - b0, 0);
  call(a1, b1 - a1, 2);
  rw->lines(rn);  // no call (none of the tile's rows reach a diagonal)
}

template <class T>
void gemm_f32(int M, int N, int K, const T* A, long lda, bool transA, const T* B, long ldb,
              bool transB, float* C, long ldc, bool accumulate, bool a_stable,
              bool b_stable, long b_col = -1, long b_width = 0, Band band = Band{}) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate) scale_zero(M, N, C, ldc);
    return;
  }
  auto a_at = [&](int i, int k) { return transA ? A + (long)k * lda + i : A + (long)i * lda + k; };
  auto b_at = [&](int k, int j) { return transB ? B + (long)j * ldb + k : B + (long)k * ldb + j; };
  // G k values per packed element (2: bf16 pairs for vdpbf16ps); the K block KC holds kKC
  // packed elements either way, so the packed blocks keep their size in the caches
  constexpr int G = kPairK<T>;
  constexpr bool kDp = G == 2;
  constexpr int KC = kKC * G;
  auto kw = [](int kc) { return (kc + G - 1) / G; };

  const int kcmax = K < KC ? K : KC;
  const int mcmax = M < kMC ? M : kMC;
  const int ncmax = N < kNC ? N : kNC;
  const int mcpad = (mcmax + kMR - 1) / kMR * kMR;
  const int ncpad = (ncmax + kNR - 1) / kNR * kNR;
  float* Ap = (float*)gemm_scratch(0).get(sizeof(float) * ((size_t)mcpad * kw(kcmax) + kPackSlack));

  if constexpr (same<T, float>) {
    const GemmPath path = gemm_path(M, N, transA, transB);
    if (path == GemmPath::gemv_rows && M <= 2 && !transB) {
      if (gemv_shares_rows(M, N, a_stable, b_stable, b_col, b_width))
        gemv_shared_rows(N, K, A, lda, transA, B, ldb, b_col, b_width, C, accumulate);
      else if (M == 1) gemv_f32<1>(N, K, A, lda, transA, B, ldb, C, ldc, accumulate);
      else gemv_f32<2>(N, K, A, lda, transA, B, ldb, C, ldc, accumulate);
      return;
    }
    if (path != GemmPath::skinny && path != GemmPath::packed) {
      gemv_other(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, accumulate);
      return;
    }
  }
  // Skinny fast path: one row panel, fp32 B not transposed -> stream B directly
  // (packing it would cost as much memory traffic as the whole product).
  if constexpr (same<T, float>) {
    if (gemm_path(M, N, transA, transB) == GemmPath::skinny) {
      float* Bt = nullptr;  // packed copy of the ragged last column panel only
      int nfull = N / kNR * kNR;
      if (nfull < N) Bt = (float*)gemm_scratch(1).get(sizeof(float) * ((size_t)kcmax * kNR + kPackSlack));
      // short K blocks: each B row is then streamed sequentially across the j loop
      constexpr int kKCs = kKC;
      for (int pc = 0; pc < K; pc += kKCs) {
        int kc = K - pc < kKCs ? K - pc : kKCs;
        bool acc = accumulate || pc > 0;
        pack_a_f32(M, kc, a_at(0, pc), lda, transA, Ap);
        for (int j = 0; j < nfull; j += kNR)
          ukr_f32_rows(M, kc, Ap, kMR, b_at(pc, j), ldb, C + j, ldc, acc, kNR);
        if (Bt) {
          pack_b_f32(kc, N - nfull, b_at(pc, nfull), ldb, false, Bt);
          ukr_f32_rows(M, kc, Ap, kMR, Bt, kNR, C + nfull, ldc, acc, N - nfull);
        }
      }
      return;
    }
  }

  // a stable A with K <= KC (one K block): pack all of its rows once per launch and thread
  // (row blocks ic are multiples of kMR, so block ic starts at panel offset ic * kw(K))
  const int tag_a = packed_tag<T>(transA, false);
  const int tag_b = packed_tag<T>(transB, false);
  bool a_packed = false;
  bool a_filled = false;  // this call packed A into the cache (the next K step's is likely unpacked)
  // A B tile spanning every column of B (not transposed, ldb == N) means the grid has one column
  // block: no later block reads this A tile again, and keeping its packed copy would only stream
  // writes through the cache's 8 MiB arena (tall-skinny: 17.5 KiB of new lines per call)
  const bool a_reused = transB || ldb != N;
  if (a_stable && K <= KC && a_reused) {
    static_assert(kMC % kMR == 0, "row blocks must be whole micro-panels");
    bool fresh = false;
    const int mpad = (M + kMR - 1) / kMR * kMR;
    float* c = packed_a_cache().find_or_add(A, lda, M, K, tag_a,
                                           (size_t)mpad * kw(K) + kPackSlack, &fresh);
    if (c) {
      if (fresh) pack_a_f32(M, K, A, lda, transA, c);
      a_filled = fresh;
      Ap = c;
      a_packed = true;
    }
  }
  float* Bp = (float*)gemm_scratch(1).get(sizeof(float) * ((size_t)ncpad * kw(kcmax) + kPackSlack));
  // a stable B with one K block and one column block: share its packed panel across blocks
  float* Bshared = nullptr;
  bool b_filled = false;  // this call packed the shared panel (the next K step's is likely unpacked)
  if (b_stable && K <= KC && N <= kNC) {
    bool fill = false;
    SharedPackedB::Slot* slot = nullptr;
    float* q = shared_packed_b().acquire(B, ldb, K, N, tag_b,
                                         (size_t)ncpad * kw(K) + kPackSlack, &fill, &slot);
    if (q) {
      if (fill) {
        pack_b_f32(K, N, B, ldb, transB, q);
        SharedPackedB::publish(slot);
        b_filled = true;
      }
      Bshared = q;
    }
  }
  // A tile program walks K in a loop of small gemms: the next call's operands are most likely
  // the next K step of the same tiles (A + K columns, B + K rows). When they are already packed
  // (by an earlier block of this launch), fetch them into L2 during this call, spread over its
  // micro-kernel calls: streamed from L3 or memory on demand they cost 5-10% of the rate.
  // A wrong guess (the last K step) only costs a few prefetches of data nobody reads.
  NextPrefetch pf;
  const T* an = transA ? A + (long)K * lda : A + K;  // the next K step's tiles
  // B transposed with K its whole rows (ldb == K: flash attention's key tile) has no next K
  // step: the next call's tile is the rows right behind it (the next key block)
  const bool bk = !transB || ldb != K;
  const T* bn = transB ? (bk ? B + K : B + (long)N * ldb) : B + (long)K * ldb;
  if (a_packed) {
    const int mpad = (M + kMR - 1) / kMR * kMR;
    pf.add(packed_a_cache().find(an, lda, M, K, tag_a),
           (size_t)mpad * kw(K));
  }
  if (a_stable && !a_reused && !transA && lda == K) {
    // the tile holds whole rows of A (small K: tall-skinny) and the grid has one column block:
    // the rows right behind it in memory are the tile of the next block, whose packing from L3
    // or memory is latency-bound (16384x64x64 in 64-row blocks: with the change above, 46-51 ->
    // 67-84 GFLOP/s on one Zen 4 core under load; this prefetch alone 58-60)
    const uintptr_t next_rows = (uintptr_t)A + (uintptr_t)M * (uintptr_t)K * sizeof(T);
    pf.add((const float*)next_rows, (size_t)M * K * sizeof(T) / sizeof(float));
  }
  if (Bshared) {
    pf.add(shared_packed_b().find(bn, ldb, K, N, tag_b), (size_t)ncpad * kw(K));
    shared_packed_b().prefetch(transB ? bn + (bk ? K : (long)N * ldb) : bn + (long)K * ldb, ldb, K, N, tag_b);
  }
  BlockWalk& walk = block_walk();
  if (A != walk.next_a || B != walk.next_b) {  // not the previous call's next K step
    walk.a0 = A;
    walk.b0 = B;
    walk.k0 = K;
  }
  walk.next_a = an;
  walk.next_b = bn;
  if (pf.n == 0 && a_packed && Bshared && b_col >= 0 && !transB) {
    // B's columns are known (b_col): the next column block's first panel is at b0 + N or, past
    // the last full column block, at b0 - b_col (column 0); its depth is the block's first K
    const T* b0 = (const T*)walk.b0;
    const T* b1 = b_col + 2 * (long)N <= b_width ? b0 + N : b0 - b_col;
    const int k0 = walk.k0;
    pf.add(packed_a_cache().find(walk.a0, lda, M, k0, tag_a), (size_t)((M + kMR - 1) / kMR * kMR) * kw(k0));
    pf.add(shared_packed_b().find(b1, ldb, k0, N, tag_b), (size_t)ncpad * kw(k0));
    walk.prefetches += pf.n > 0;
  }
  // This call packed its A tile (B panel) into the cache: the next call most likely packs the
  // next K step's right after it. Fetch those lines too, so that the next pack's stores do not
  // wait on lines last written a whole ring ago (in memory or L3 by now).
  if (a_filled) {
    const size_t f = (size_t)((M + kMR - 1) / kMR * kMR) * kw(K);
    pf.add(packed_a_cache().next_place(f + kPackSlack), f);
  }
  if (b_filled) pf.add(shared_packed_b().next_place((size_t)ncpad * kw(K) + kPackSlack), (size_t)ncpad * kw(K));
  if (pf.n) pf.spread(((N + kNR - 1) / kNR) * ((M + kMR - 1) / kMR));  // the micro-kernel calls
  // fp32 A read in place by the micro-kernels instead of packed (a_in_place)
  bool a_direct = false;
  if constexpr (same<T, float>) a_direct = !a_packed && a_in_place(M, N, K, A, lda, transA, C, ldc);
  if (a_direct) ++a_in_place_calls();
  // This call packed A into the cache, so the next call (the next K step of the same rows) will
  // most likely pack the A tile right behind it: fetch its source rows during this call.
  // (The next tiles' source rows, A's here and B's below: one RowsPrefetch for both.)
  RowsPrefetch rp;
  const long pfa_steps = (long)((N + kNR - 1) / kNR) * ((M + kMR - 1) / kMR);
  const bool a_rows = a_packed && !transA && lda == K;  // whole rows: the next tile is the next rows
  if (a_filled && !a_rows) {
    const uintptr_t a0 = (uintptr_t)A, es = sizeof(T);
    if (transA) rp.add(a0 + (uintptr_t)K * lda * es, lda * (long)es, K, (long)M * es);
    else rp.add(a0 + (uintptr_t)K * es, lda * (long)es, M, (long)K * es);
  }
  if (a_rows) {
    // A run of calls on one such tile is most likely followed by a run on the next M rows, as
    // long as the previous run: that tile's source (in memory or L3, packed by the next run's
    // first call) is fetched a quarter per call over the last four calls, when the previous
    // run's length says they are the last (fetched earlier, the operand streams of the calls in
    // between would evict it from L2 again)
    const uint64_t ep = __atomic_load_n(&g_launch_epoch, __ATOMIC_RELAXED);
    if (A != walk.run_a || ep != walk.run_epoch) {
      walk.last_run = walk.run_calls;
      walk.run_a = A;
      walk.run_epoch = ep;
      walk.run_calls = 0;
    }
    const int left = walk.last_run - ++walk.run_calls;
    if (left >= 0 && left < 4) {
      const int r0 = M * (3 - left) / 4, r1 = M * (4 - left) / 4;
      const uintptr_t es = sizeof(T);  // integer addresses: the rows may lie past the operand
      rp.add((uintptr_t)A + (uintptr_t)(M + r0) * lda * es, lda * (long)es, r1 - r0, (long)K * es);
    }
  }
  rp.spread(pfa_steps);
  for (int jc = 0; jc < N; jc += kNC) {
    int nc = N - jc < kNC ? N - jc : kNC;
    for (int pc = 0; pc < K; pc += KC) {
      int kc = K - pc < KC ? K - pc : KC;
      const int kwc = kw(kc);
      bool acc = accumulate || pc > 0;
      if (Bshared) Bp = Bshared;
      else pack_b_f32(kc, nc, b_at(pc, jc), ldb, transB, Bp);
      // Software prefetch of the next B block to pack (rows pc+kc .. pc+2kc of these columns),
      // spread over the micro-kernel calls of the first row block. At the last K block this
      // runs past the operand: harmless (prefetches never fault) and, when the caller walks K
      // in a loop of small gemms (a tile program), exactly the B tile of its next call. Not
      // when this call found its panel shared and packed: the next one most likely is too
      // (fetched by NextPrefetch above); when this call packed it, the next one is likely not.
      // (Added to rp after what is left of A's rows, and requested by the end of this block's
      // first row block.)
      const long pfb_steps = (long)((nc + kNR - 1) / kNR) * ((mcmax + kMR - 1) / kMR);
      const bool pfb = (!transB && (!Bshared || b_filled)) || (!bk && b_filled);
      if (!transB && (!Bshared || b_filled))
        rp.add((uintptr_t)B + ((uintptr_t)(pc + kc) * ldb + jc) * sizeof(T), ldb * (long)sizeof(T), kc,
               (long)nc * sizeof(T));
      else if (!bk && b_filled)  // the next key tile's rows (bn), which the next call packs
        rp.add((uintptr_t)bn, ldb * (long)sizeof(T), N, (long)K * sizeof(T));
      if (pfb) rp.spread(pfb_steps);
      for (int ic = 0; ic < M; ic += kMC) {
        int mc = M - ic < kMC ? M - ic : kMC;
        const float* ap = Ap;
        if (a_packed) ap = Ap + (long)ic * kwc;
        else if (!a_direct) pack_a_f32(mc, kc, a_at(ic, pc), lda, transA, Ap);
        for (int jr = 0; jr < nc; jr += kNR) {
          int nr = nc - jr < kNR ? nc - jr : kNR;
          const float* bp = Bp + (long)jr * kwc;
          if (nr <= kColTail && !kDp && !band.kind && !a_direct) {  // a narrow column tail: ukr_f32_cols
            const int np = (mc + kMR - 1) / kMR;
            for (int p = 0; p < np; ++p) {  // the prefetches the panels' ukr_f32 calls would issue
              rp.step();
              long m = 0;
              const char* q = pf.take(&m);
              for (long l = 0; l < m && l < kwc; ++l) __builtin_prefetch(q + 64 * l, 0, 2);
            }
            PanelRows pr[kColPanels];
            for (int p0 = 0; p0 < np; p0 += kColPanels) {
              const int n = np - p0 < kColPanels ? np - p0 : kColPanels;
              for (int p = 0; p < n; ++p) pr[p] = panel_rows(mc, p0 + p);
              for (int j = 0; j < nr; ++j)
                ukr_f32_cols_n(n, kwc, ap + (long)p0 * kMR * kwc, (long)kMR * kwc, bp + j, C + (long)ic * ldc + jc + jr + j,
                               ldc, pr, acc);
            }
            continue;
          }
          bool first = true;  // the strip's first computed panel (it requests B: kPackedBPrefetch)
          for (int ir = 0; ir < mc; ir += kMR) {
            const PanelRows pr = panel_rows(mc, ir / kMR);
            if constexpr (!kRowsInKernel) rp.step();  // else the micro-kernel call takes its share
            long m = 0;
            const char* q = pf.take(&m);
            float* cp = C + (long)(ic + pr.r0) * ldc + jc + jr;
            int ks = 0, kn = kwc, i0 = 0, h = pr.h;  // the packed K range and the rows computed: all, but with a band
            if (band.kind) {
              const BandTile t = band_tile(band, ic + pr.r0, pr.h, jc + jr, nr, pc, kc);
              if (t.skip) {  // a_band overwriting C: the tile's product is 0; c_band: left unwritten
                if (!acc && band.kind == 1) scale_zero(pr.h, nr, cp, ldc);
                if constexpr (kRowsInKernel) rp.due += rp.per;  // its lines go with the next calls
                continue;
              }
              if (band.kind == 2 && !a_direct) {  // c_band on packed A: per column half (kVF columns)
                band_halves<kDp>(band, ic + pr.r0, pr.h, jc + jr, nr, pc, kc, kwc, ap + (long)ir * kwc, bp, cp, ldc,
                                 acc, q, m, &rp, kRowsInKernel ? rp.take(kwc) : 0, first);
                first = false;
                continue;
              }
              ks = t.k0 / G;
              kn = (t.k1 + G - 1) / G - ks;
              i0 = t.i0;
              h = t.i1 - t.i0;
              if (!acc && band.kind == 1) {  // a_band overwriting C: the rows outside the rectangle's are 0
                scale_zero(i0, nr, cp, ldc);
                scale_zero(pr.h - t.i1, nr, cp + (long)t.i1 * ldc, ldc);
              }
              cp += (long)i0 * ldc;
            }
            const long rn = kRowsInKernel ? rp.take(kn) : 0;
            const bool f = first;
            first = false;
            if constexpr (same<T, float>)
              if (a_direct) {
                ukr_f32_ra_rows(h, kn, (const float*)A + (long)(ic + pr.r0 + i0) * lda + pc + ks, lda,
                                bp + (long)ks * kNR, kNR, cp, ldc, acc, nr, q, m < kn ? m : kn, f, &rp, rn);
                continue;
              }
            ukr_f32_rows<kDp>(h, kn, ap + (long)ir * kwc + (long)ks * kMR + i0, kMR, bp + (long)ks * kNR, kNR,
                              cp, ldc, acc, nr, q, m < kn ? m : kn, f, &rp, rn);
          }
        }
      }
      if (pfb) rp.finish();  // what the calls could not take (at most a k step each)
    }
  }
  rp.finish();
}

// ================================================================ int8 path
// Packed element = one int32 holding kKG consecutive-k values of one row (A) or
// one column (B):  VNNI: 4 bytes (A as u8 = a+128, B as s8),  AVX2: 2 x int16,
// generic: 1 x int32.
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#define TW_CPU_I8_VNNI 1
inline constexpr int kKG = 4;
#elif defined(__AVX2__) && !defined(__AVX512F__)
#define TW_CPU_I8_MADDWD 1
inline constexpr int kKG = 2;
#else
inline constexpr int kKG = 1;
#endif
inline constexpr int kKCG = kKC;  // k-groups per K block

TW_CPU_INLINE simd::vi dot_i8(simd::vi c, simd::vi a, simd::vi b) {
#if defined(TW_CPU_I8_VNNI)
#if defined(__clang__)
  return __builtin_ia32_vpdpbusd512(c, a, b);
#else
  return __builtin_ia32_vpdpbusd_v16si(c, a, b);
#endif
#elif defined(TW_CPU_I8_MADDWD)
  typedef short v16hi __attribute__((vector_size(32)));
  return c + (simd::vi)__builtin_ia32_pmaddwd256((v16hi)a, (v16hi)b);
#else
  return c + a * b;
#endif
}

// pack kKG values (k, k+1, ...) into one int32; missing k (>= kend) are 0.
TW_CPU_INLINE int32_t group_i8(const int8_t* p, long stride, int nvalid, bool is_a) {
#if defined(TW_CPU_I8_VNNI)
  uint32_t r = 0;
  for (int t = 0; t < 4; ++t) {
    uint32_t v = t < nvalid ? (uint32_t)(uint8_t)p[t * stride] : 0u;
    if (is_a) v ^= 0x80u;  // u8 = a + 128 (padding: 0x80 -> value 0 ... times B=0)
    r |= v << (8 * t);
  }
  return (int32_t)r;
#elif defined(TW_CPU_I8_MADDWD)
  (void)is_a;
  uint32_t lo = (uint16_t)(int16_t)p[0];
  uint32_t hi = nvalid > 1 ? (uint32_t)(uint16_t)(int16_t)p[stride] : 0u;
  return (int32_t)(lo | (hi << 16));
#else
  (void)is_a; (void)stride; (void)nvalid;
  return (int32_t)p[0];
#endif
}

#if defined(TW_CPU_I8_VNNI)
TW_CPU_INLINE uint32_t word4(const int8_t* p) {  // 4 consecutive bytes as one word (any alignment)
  uint32_t w;
  __builtin_memcpy(&w, p, 4);
  return w;
}
// 4 rows of kNR = 32 bytes, ld bytes apart -> 32 words, word j = (r0[j], r1[j], r2[j], r3[j]):
// the VNNI group of column j (byte interleaves within 16-byte halves)
TW_CPU_INLINE void interleave4_rows(const int8_t* src, long ld, int32_t* d) {
  static_assert(kNR == 32, "two 16-column halves");
  for (int h = 0; h < 2; ++h) {
    const __m128i x0 = _mm_loadu_si128((const __m128i*)(src + 16 * h));
    const __m128i x1 = _mm_loadu_si128((const __m128i*)(src + ld + 16 * h));
    const __m128i x2 = _mm_loadu_si128((const __m128i*)(src + 2 * ld + 16 * h));
    const __m128i x3 = _mm_loadu_si128((const __m128i*)(src + 3 * ld + 16 * h));
    const __m128i a = _mm_unpacklo_epi8(x0, x1), b = _mm_unpackhi_epi8(x0, x1);
    const __m128i c = _mm_unpacklo_epi8(x2, x3), e = _mm_unpackhi_epi8(x2, x3);
    __m128i* o = (__m128i*)(d + 16 * h);
    _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(a, c));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(a, c));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(b, e));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(b, e));
  }
}
#endif

#if defined(TW_CPU_I8_MADDWD)
// AVX2: 16 int8 of a row sign-extended to int16 at once (vpmovsxbw). A pair group (k, k + 1) of
// one row or column is the int32 (int16 at k) | (int16 at k + 1) << 16, so 16 consecutive int8 of a
// row of A widened in order are its 8 groups, and two rows of B (k, k + 1) widened and interleaved
// element by element are the groups of 16 columns. The scalar group_i8 per pair held a third of a
// tile program's int8 gemm (1024^3 in 128/256/128 blocks, both operands packed every call: 29% of
// the samples against 59% in the micro-kernel, AVX2 proxy on a Zen 4 core, docs/performance.md
// "Session 17: the AVX2 paths on an AMD core").
typedef int8_t v16qs_u __attribute__((vector_size(16), aligned(1), may_alias));
typedef int16_t v16hs __attribute__((vector_size(32)));
typedef int16_t v16hs_u __attribute__((vector_size(32), aligned(1), may_alias));
TW_CPU_INLINE v16hs widen16_i8(const int8_t* p) {
  return __builtin_convertvector(*reinterpret_cast<const v16qs_u*>(p), v16hs);
}
#endif

// A block mc x kc (kc in k values) -> Ap[panel][g][kMR]
inline void pack_a_i8(int mc, int kc, const int8_t* A, long lda, bool transA, int32_t* Ap) {
  const int ng = (kc + kKG - 1) / kKG;
#if defined(TW_CPU_I8_MADDWD)
  if (!transA) {  // row by row: 16 k (8 groups) widened at once, stored down the panel's column
    for (int i0 = 0; i0 < mc; i0 += kMR) {
      const int mr = mc - i0 < kMR ? mc - i0 : kMR;
      int32_t* dst = Ap + (long)i0 * ng;
      for (int i = 0; i < kMR; ++i) {
        int32_t* d = dst + i;
        int g = 0;
        if (i < mr) {
          const int8_t* p = A + (long)(i0 + i) * lda;
          for (; 2 * g + 16 <= kc; g += 8) {
            alignas(32) int32_t t[8];
            *reinterpret_cast<v16hs_u*>(t) = widen16_i8(p + 2 * g);
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) d[(long)(g + q) * kMR] = t[q];
          }
          for (; g < ng; ++g) d[(long)g * kMR] = group_i8(p + 2 * g, 1, kc - 2 * g < 2 ? kc - 2 * g : 2, true);
        }
        for (; g < ng; ++g) d[(long)g * kMR] = 0;
      }
    }
    return;
  }
#endif
  const long sk = transA ? lda : 1, si = transA ? 1 : lda;  // element strides
  for (int i0 = 0; i0 < mc; i0 += kMR) {
    int mr = mc - i0 < kMR ? mc - i0 : kMR;
    int32_t* dst = Ap + (long)i0 * ng;
    for (int g = 0; g < ng; ++g) {
      int nvalid = kc - g * kKG < kKG ? kc - g * kKG : kKG;
      int32_t* d = dst + (long)g * kMR;
#if defined(TW_CPU_I8_VNNI)
      if (sk == 1 && nvalid == 4) {  // a row's 4 k of the group are one word: load, flip the signs
        for (int i = 0; i < mr; ++i) d[i] = (int32_t)(word4(A + (long)(i0 + i) * si + (long)g * 4) ^ 0x80808080u);
        for (int i = mr; i < kMR; ++i) d[i] = 0;
        continue;
      }
#endif
      for (int i = 0; i < mr; ++i)
        d[i] = group_i8(A + (long)(i0 + i) * si + (long)g * kKG * sk, sk, nvalid, true);
      for (int i = mr; i < kMR; ++i) d[i] = 0;
    }
  }
}

// B panel kc x nc -> Bp[panel][g][kNR]; corr[j] = 128 * sum_k B(k,j) (VNNI only)
inline void pack_b_i8(int kc, int nc, const int8_t* B, long ldb, bool transB, int32_t* Bp,
                      int32_t* corr) {
  const int ng = (kc + kKG - 1) / kKG;
  const long sk = transB ? 1 : ldb, sj = transB ? ldb : 1;
  for (int j0 = 0; j0 < nc; j0 += kNR) {
    int nr = nc - j0 < kNR ? nc - j0 : kNR;
    int32_t* dst = Bp + (long)j0 * ng;
    for (int g = 0; g < ng; ++g) {
      int nvalid = kc - g * kKG < kKG ? kc - g * kKG : kKG;
      int32_t* d = dst + (long)g * kNR;
      const int8_t* src = B + (long)g * kKG * sk + (long)j0 * sj;
#if defined(TW_CPU_I8_VNNI)
      if (nvalid == 4 && (transB || nr == kNR)) {
        if (transB) {  // a column's 4 k are one word
          for (int j = 0; j < nr; ++j) d[j] = (int32_t)word4(src + (long)j * sj);
          for (int j = nr; j < kNR; ++j) d[j] = 0;
        } else {
          interleave4_rows(src, sk, d);
        }
        continue;
      }
#endif
#if defined(TW_CPU_I8_MADDWD)
      static_assert(kNR == 16, "two rows of 16 int8 widen into one k-pair group of a B panel");
      if (!transB && nr == kNR) {  // rows 2g and 2g + 1 (or zero past K), interleaved
        const v16hs w0 = widen16_i8(src), w1 = nvalid > 1 ? widen16_i8(src + ldb) : v16hs{};
        *reinterpret_cast<v16hs_u*>(d) =
            __builtin_shufflevector(w0, w1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        *reinterpret_cast<v16hs_u*>(d + 8) =
            __builtin_shufflevector(w0, w1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        continue;
      }
#endif
      if (!transB && kKG == 1 && nr == kNR) {
        for (int j = 0; j < kNR; ++j) d[j] = src[j];
      } else {
        for (int j = 0; j < nr; ++j) d[j] = group_i8(src + (long)j * sj, sk, nvalid, false);
        for (int j = nr; j < kNR; ++j) d[j] = 0;
      }
    }
#if defined(TW_CPU_I8_VNNI)
    // 128 * the column sums, from the packed panel: vpdpbusd of bytes 1 (u8) with the packed B
    // (s8) adds a group's 4 values per column (padding is 0); the same int32 sums as adding the
    // values one by one (integer addition in any order)
    simd::vi s[kNV] = {};
    const simd::vi ones = simd::splati(0x01010101);
    for (int g = 0; g < ng; ++g)
      for (int v = 0; v < kNV; ++v) s[v] = dot_i8(s[v], ones, simd::loadi(dst + (long)g * kNR + v * kVF));
    for (int v = 0; v < kNV; ++v) simd::storeui(corr + j0 + v * kVF, s[v] * 128);
#else
    (void)corr;
#endif
  }
}

template <int R>
__attribute__((noinline)) void ukr_i8(long ng, const int32_t* __restrict A,
                                      const int32_t* __restrict B, int32_t* __restrict C,
                                      long ldc, bool acc, int nr, const int32_t* corr) {
  using simd::vi;
  vi c[R][kNV];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) c[i][v] = vi{};
#if defined(TW_CPU_I8_MADDWD)
  // two k groups per iteration: a k group is 2 x R x kNV vector ALU operations (vpmaddwd,
  // vpaddd) and an Intel core runs them on 3 ports only, shared with the loop's scalar counter
  // and pointer updates (micro-kernel on L1 operands, Sapphire Rapids at -march=x86-64-v3: 57-58
  // -> 59-61 GMAC/s, the exact mix's ceiling; docs/performance.md, "Session 16")
#pragma GCC unroll 2
#endif
  for (long g = 0; g < ng; ++g) {
    vi b[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) b[v] = simd::loadi(B + v * kVF);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      vi a = simd::splati(A[i]);
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) c[i][v] = dot_i8(c[i][v], a, b[v]);
    }
    A += kMR;
    B += kNR;
  }
#if defined(TW_CPU_I8_VNNI)
  vi cv[kNV];
  for (int v = 0; v < kNV; ++v) cv[v] = simd::loadi(corr + v * kVF);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) c[i][v] -= cv[v];
#else
  (void)corr;
#endif
  store_acc<R>(c, C, ldc, acc, nr);
}

template <int R>
TW_CPU_INLINE void ukr_i8_tail(int mr, long ng, const int32_t* A, const int32_t* B, int32_t* C,
                               long ldc, bool acc, int nr, const int32_t* corr) {
  if (mr >= R) {
    ukr_i8<R>(ng, A, B, C, ldc, acc, nr, corr);
    A += R;
    C += (long)R * ldc;
    mr -= R;
  }
  if constexpr (R > 1) {
    if (mr > 0) ukr_i8_tail<R / 2>(mr, ng, A, B, C, ldc, acc, nr, corr);
  }
}

// A stable A (B) with one K block is packed once per launch and reused from the packed-A cache
// (the shared packed-B arena, with B's column corrections stored after the panel) as gemm_f32
// does: a tile program's blocks of one row (column) otherwise repacked the same tile per call.
inline void gemm_i8(int M, int N, int K, const int8_t* A, long lda, bool transA, const int8_t* B,
                    long ldb, bool transB, int32_t* C, long ldc, bool accumulate, bool a_stable = false,
                    bool b_stable = false) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate) scale_zero(M, N, C, ldc);
    return;
  }
  constexpr int KCk = kKCG * kKG;  // K block in k values
  const int kcmax = K < KCk ? K : KCk;
  const int ngmax = (kcmax + kKG - 1) / kKG;
  const int mcmax = M < kMC ? M : kMC;
  const int ncmax = N < kNC ? N : kNC;
  const int mcpad = (mcmax + kMR - 1) / kMR * kMR;
  const int ncpad = (ncmax + kNR - 1) / kNR * kNR;
  int32_t* Ap = (int32_t*)gemm_scratch(0).get(sizeof(int32_t) * (size_t)mcpad * ngmax);
  int32_t* Bp = (int32_t*)gemm_scratch(1).get(sizeof(int32_t) * (size_t)ncpad * ngmax);
  int32_t* corr = (int32_t*)gemm_scratch(2).get(sizeof(int32_t) * (size_t)ncpad);
  auto a_at = [&](int i, int k) { return transA ? A + (long)k * lda + i : A + (long)i * lda + k; };
  auto b_at = [&](int k, int j) { return transB ? B + (long)j * ldb + k : B + (long)k * ldb + j; };
  // one K block (K <= KCk): a stable A packed whole (row blocks ic are multiples of kMR, so
  // block ic starts at panel offset ic * ngmax) and a stable B with one column block
  const int32_t* a_all = nullptr;
  const bool a_reused = transB || ldb != N;  // as in gemm_f32: one column block reads A once
  if (a_stable && K <= KCk && a_reused) {
    static_assert(kMC % kMR == 0, "row blocks must be whole micro-panels");
    static_assert(sizeof(int32_t) == sizeof(float), "the packed-A cache holds 4-byte elements");
    bool fresh = false;
    const size_t words = (size_t)((M + kMR - 1) / kMR * kMR) * ngmax;
    float* c = packed_a_cache().find_or_add(A, lda, M, K, packed_tag<int8_t>(transA, false), words + kPackSlack,
                                           &fresh);
    if (c) {
      if (fresh) pack_a_i8(M, K, A, lda, transA, (int32_t*)c);
      a_all = (const int32_t*)c;
    }
  }
  const int32_t* b_all = nullptr;  // the packed panel, then its ncpad column corrections
  if (b_stable && K <= KCk && N <= kNC) {
    bool fill = false;
    SharedPackedB::Slot* slot = nullptr;
    const size_t words = (size_t)ncpad * ngmax;
    float* q = shared_packed_b().acquire(B, ldb, K, N, packed_tag<int8_t>(transB, false),
                                         words + ncpad + kPackSlack, &fill, &slot);
    if (q) {
      if (fill) {
        pack_b_i8(K, N, B, ldb, transB, (int32_t*)q, (int32_t*)q + words);
        SharedPackedB::publish(slot);
      }
      b_all = (const int32_t*)q;
      corr = (int32_t*)q + words;
    }
  }
  for (int jc = 0; jc < N; jc += kNC) {
    int nc = N - jc < kNC ? N - jc : kNC;
    for (int pc = 0; pc < K; pc += KCk) {
      int kc = K - pc < KCk ? K - pc : KCk;
      int ng = (kc + kKG - 1) / kKG;
      bool acc = accumulate || pc > 0;
      if (b_all) Bp = (int32_t*)b_all;
      else pack_b_i8(kc, nc, b_at(pc, jc), ldb, transB, Bp, corr);
      for (int ic = 0; ic < M; ic += kMC) {
        int mc = M - ic < kMC ? M - ic : kMC;
        if (a_all) Ap = (int32_t*)a_all + (long)ic * ng;
        else pack_a_i8(mc, kc, a_at(ic, pc), lda, transA, Ap);
        for (int jr = 0; jr < nc; jr += kNR) {
          int nr = nc - jr < kNR ? nc - jr : kNR;
          const int32_t* bp = Bp + (long)jr * ng;
          for (int ir = 0; ir < mc; ir += kMR) {
            int mr = mc - ir < kMR ? mc - ir : kMR;
            int32_t* cp = C + (long)(ic + ir) * ldc + jc + jr;
            const int32_t* ap = Ap + (long)ir * ng;
            if (mr == kMR)
              ukr_i8<kMR>(ng, ap, bp, cp, ldc, acc, nr, corr + jr);
            else
              ukr_i8_tail<kFirstSub>(mr, ng, ap, bp, cp, ldc, acc, nr, corr + jr);
          }
        }
      }
    }
  }
}

// ================================================================ AMX path
// Targets with AMX (__AMX_TILE__, __AMX_BF16__, __AMX_INT8__: -march=native on Sapphire Rapids
// and later) run the (bf16, bf16 -> float) and (int8, int8 -> int32) packed gemms on the tile
// unit when the process may use it (amx_usable()). Eight tile registers of 16 rows x 64 bytes:
// tmm0..3 hold a 32 x 32 block of C (2 x 2 tiles of 16 x 16 fp32 / int32), tmm4..5 two A tiles
// (16 rows x 64 bytes of k: 32 bf16 or 64 int8 each), tmm6..7 two B tiles (16 rows of k groups
// x 16 columns: a k group is the 4 bytes of one column holding 2 bf16 or 4 int8 consecutive k).
// Each k step of 64 bytes: 4 tile loads, 4 tile products (TDPBF16PS / TDPBSSD, 16 x 16 x 32
// bf16 or 16 x 16 x 64 int8 multiply-adds each).
// Packing: B in 32-column panels of rows of k groups x 32 columns (128 bytes a row: the two B
// tiles side by side; bf16 through the existing k-pair packer pack_b_f32<bf16>, int8 as groups
// of 4 consecutive k), the k groups of a panel padded with zero rows to a multiple of 16. A into whole tiles: [16-row panel][64-byte k step][16 rows][64 bytes],
// zero-filled beyond the last row and k. int8 runs as plain s8 x s8 (TDPBSSD): no +128 offset,
// no column correction. A block of C is loaded into the accumulator tiles (accumulate or a
// later K block) and stored back with tile loads/stores when whole (32 x 32), through a 32 x 32
// stack tile otherwise (row and column tails).
// Tile state: the process asks the kernel for permission once (arch_prctl ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA; Linux >= 5.16); refused (or disabled by the runtime: TW_CPU_AMX=0, see
// amx_allow) -> the AVX-512 paths above. Each gemm call loads the tile configuration on its own
// thread (ldtilecfg) and releases the tiles (tilerelease) before it returns, so the tile state
// is never live outside a gemm call (no cost to other code's context switches / AVX-512 state).
// Numerics: bf16 as the AVX512-BF16 path (TDPBF16PS: each product of two bf16 is exact in fp32,
// each accumulation rounded to nearest even, MXCSR not consulted, input and output subnormals
// read / flushed as zero; the order of the accumulations inside one tile product is the
// implementation's), so the same one-rounding-per-k bound holds (Gemm.BF16PairsTight,
// BF16PairsDazFtz). int8: exact int32 (wrap-around on overflow, as above).
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AMX_INT8__) && \
    defined(TW_CPU_BF16_DP) && defined(TW_CPU_I8_VNNI) && defined(__linux__)
#define TW_CPU_AMX 1
static_assert(kNR == 32, "the AMX path reads 32-column B panels (two 16-column tiles)");
inline constexpr int kAmxKCB = 1024;  // K block: bytes of k per row (512 bf16, 1024 int8)
inline constexpr int kAmxMC = 256;    // rows per A block (multiple of 32)
inline constexpr int kAmxNC = 1024;   // columns per B block (multiple of 32)
#endif

// Whether this process uses the tile unit: the runtime's choice (amx_allow) and the kernel's
// permission, asked for once per process on first use (thread-safe).
inline int& amx_allowed_flag() {
  static int allowed = 1;  // accessed with atomics
  return allowed;
}
inline long amx_permission_errno() {  // 0: granted; else the errno of the refused request
#if defined(TW_CPU_AMX)
  static const long err = [] {
    // ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 (asm/prctl.h, the SDM's XSAVE state components)
    const long rc = syscall(SYS_arch_prctl, 0x1023L, 18L);
    return rc == 0 ? 0L : (long)errno;
  }();
  return err;
#else
  return ENOSYS;
#endif
}
inline bool amx_usable() {
#if defined(TW_CPU_AMX)
  return __atomic_load_n(&amx_allowed_flag(), __ATOMIC_RELAXED) && amx_permission_errno() == 0;
#else
  return false;
#endif
}
// Whether a bf16 gemm of M rows goes to the tile unit: not for M <= 4, which fills at most a
// quarter of a tile's 16 rows and pays the tile configuration and the 32 x 32 stack tile of the
// row tail on every call. Measured on a Sapphire Rapids core (one call, best of 5 x 5000): M = 4
// took 1.1-5.9x the AVX512-BF16 path's time at decode attention's shapes (4 x 16 x 128 with B
// transposed 1.8x, 4 x 128 x 16 5.9x, 4 x 64 x 128 1.1x) and 0.9-1.2x at 4 x 1024 x 1024; from
// M = 8 the tile unit is level or faster (0.83-1.16x at 8 rows, 0.59x at 16).
inline bool amx_pays(int M) { return M > 4; }
// allow = false: never use the tile unit in this process (never asks the kernel either): the
// AVX-512 paths, as when the permission is refused. true: use it when the permission is granted.
inline void amx_allow(bool allow) {
  __atomic_store_n(&amx_allowed_flag(), allow ? 1 : 0, __ATOMIC_RELAXED);
}

#if defined(TW_CPU_AMX)
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
// The tile configuration of this thread for the duration of a gemm call.
struct AmxScope {
  AmxScope() {
    static const AmxTileConfig cfg;
    _tile_loadconfig(&cfg);
  }
  ~AmxScope() { _tile_release(); }
};

// A block rows [0, mc), k [0, kc) of op(A) -> nkt whole tiles per 16-row panel (see above).
template <class T>
inline void pack_a_amx(int mc, int kc, const T* A, long lda, bool transA, char* Ap) {
  constexpr int E = 64 / (int)sizeof(T);  // elements per tile row
  const int nkt = (kc + E - 1) / E;
  const int mpad = (mc + 15) / 16 * 16;
  for (int i0 = 0; i0 < mpad; i0 += 16) {
    char* panel = Ap + (long)i0 * nkt * 64;
    for (int r = 0; r < 16; ++r) {
      const int i = i0 + r;
      if (i >= mc) {
        for (int t = 0; t < nkt; ++t) __builtin_memset(panel + ((long)t * 16 + r) * 64, 0, 64);
        continue;
      }
      if (!transA) {
        const T* src = A + (long)i * lda;
        for (int t = 0; t < nkt; ++t) {
          char* d = panel + ((long)t * 16 + r) * 64;
          const int n = kc - t * E < E ? kc - t * E : E;
          __builtin_memcpy(d, src + (long)t * E, (size_t)n * sizeof(T));
          if (n < E) __builtin_memset(d + n * sizeof(T), 0, (size_t)(E - n) * sizeof(T));
        }
      } else {
        for (int t = 0; t < nkt; ++t) {
          T* d = reinterpret_cast<T*>(panel + ((long)t * 16 + r) * 64);
          const int n = kc - t * E < E ? kc - t * E : E;
          for (int q = 0; q < n; ++q) d[q] = A[(long)(t * E + q) * lda + i];
          for (int q = n; q < E; ++q) d[q] = T{};
        }
      }
    }
  }
}

// B block k [0, kc), cols [0, nc) of op(B) -> 32-column panels of nkt * 16 rows of 128 bytes.
template <class T>
inline void pack_b_amx(int kc, int nc, const T* B, long ldb, bool transB, char* Bp) {
  constexpr int E = 64 / (int)sizeof(T);
  const int nkt = (kc + E - 1) / E;
  const int kg = (kc + (int)(4 / sizeof(T)) - 1) / (int)(4 / sizeof(T));  // k groups written
  for (int j0 = 0; j0 < nc; j0 += kNR) {
    const int nr = nc - j0 < kNR ? nc - j0 : kNR;
    char* panel = Bp + (long)j0 / kNR * nkt * 2048;
    const T* src = transB ? B + (long)j0 * ldb : B + j0;
    if constexpr (same<T, bf16>) {
      pack_b_f32<bf16>(kc, nr, src, ldb, transB, (float*)panel);
    } else {  // 4 consecutive k of a column per 32-bit element, s8 as is (no correction)
      const long sk = transB ? 1 : ldb, sj = transB ? ldb : 1;
      for (int g = 0; g < kg; ++g) {
        uint8_t* d = (uint8_t*)panel + (long)g * 128;
        const int nv = kc - 4 * g < 4 ? kc - 4 * g : 4;
        for (int q = 0; q < 4; ++q) {
          const int8_t* s = src + (long)(4 * g + q) * sk;
          if (q < nv)
            for (int j = 0; j < nr; ++j) d[4 * j + q] = (uint8_t)s[(long)j * sj];
          else
            for (int j = 0; j < nr; ++j) d[4 * j + q] = 0;
        }
        for (int j = nr; j < kNR; ++j) __builtin_memset(d + 4 * j, 0, 4);
      }
    }
    __builtin_memset(panel + (long)kg * 128, 0, (size_t)(nkt * 16 - kg) * 128);
  }
}

// C[P*16 x 32] (+)= A panels x B panel over nkt k steps; P = 1 or 2 row panels. C's row stride
// ldcb in bytes; acc: start from C, else from zero.
template <class T, int P>
__attribute__((noinline)) void ukr_amx(int nkt, const char* __restrict A, const char* __restrict B,
                                       char* C, long ldcb, bool acc, const char* next_c = nullptr) {
  const char* A1 = A + (long)nkt * 1024;
  // A tiles come from L2 (the A block, one 32-row panel per call): fetch them two k steps
  // ahead into L1 (measured ~10% over none; the last steps fetch the next call's panel)
  constexpr int kPfA = 2;
  if (acc) {
    _tile_loadd(0, C, ldcb);
    _tile_loadd(1, C + 64, ldcb);
    if constexpr (P == 2) {
      _tile_loadd(2, C + 16 * ldcb, ldcb);
      _tile_loadd(3, C + 16 * ldcb + 64, ldcb);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (P == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  for (int t = 0; t < nkt; ++t) {
    _tile_loadd(6, B, 128);
    _tile_loadd(7, B + 64, 128);
    if (kPfA) for (int l = 0; l < 1024; l += 64) { __builtin_prefetch(A + kPfA * 1024 + l); if (P == 2) __builtin_prefetch(A1 + kPfA * 1024 + l); }
    _tile_loadd(4, A, 64);
    if constexpr (same<T, bf16>) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
    } else {
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
    }
    if constexpr (P == 2) {
      _tile_loadd(5, A1, 64);
      if constexpr (same<T, bf16>) {
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      } else {
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
      }
      A1 += 1024;
    }
    // the next call's C block (its 32 rows x 128 bytes), a few lines per k step: a tile load
    // of C rows not in the cache waits on each of them
    if (next_c) {
      const int r0 = (int)((long)t * 32 / nkt), r1 = (int)((long)(t + 1) * 32 / nkt);
      for (int r = r0; r < r1; ++r) {
        __builtin_prefetch(next_c + r * ldcb, 1);
        __builtin_prefetch(next_c + r * ldcb + 64, 1);
      }
    }
    A += 1024;
    B += 2048;
  }
  _tile_stored(0, C, ldcb);
  _tile_stored(1, C + 64, ldcb);
  if constexpr (P == 2) {
    _tile_stored(2, C + 16 * ldcb, ldcb);
    _tile_stored(3, C + 16 * ldcb + 64, ldcb);
  }
}

// The packed gemm on the tile unit: T = bf16 (TC = float) or int8_t (TC = int32_t).
// A stable A (B) with one K block is packed once per launch and reused from the packed-A cache
// (the shared packed-B arena) as gemm_f32 does, under tags of their own (packed_tag, amx).
template <class T, class TC>
void gemm_amx(int M, int N, int K, const T* A, long lda, bool transA, const T* B, long ldb,
              bool transB, TC* C, long ldc, bool accumulate, bool a_stable, bool b_stable) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate) scale_zero(M, N, C, ldc);
    return;
  }
  constexpr int E = 64 / (int)sizeof(T);
  constexpr int KC = kAmxKCB / (int)sizeof(T);
  const int kcmax = K < KC ? K : KC;
  const int nktmax = (kcmax + E - 1) / E;
  const int mcpad = ((M < kAmxMC ? M : kAmxMC) + 31) / 32 * 32;
  const int ncpad = ((N < kAmxNC ? N : kAmxNC) + kNR - 1) / kNR * kNR;
  char* Ap = (char*)gemm_scratch(0).get((size_t)mcpad * nktmax * 64);
  char* Bp = (char*)gemm_scratch(1).get((size_t)ncpad / kNR * nktmax * 2048 + kPackSlack * 4);
  auto a_at = [&](int i, int k) { return transA ? A + (long)k * lda + i : A + (long)i * lda + k; };
  auto b_at = [&](int k, int j) { return transB ? B + (long)j * ldb + k : B + (long)k * ldb + j; };
  const char* a_all = nullptr;  // all M rows packed (K <= KC): block ic starts at row ic
  const bool a_reused = transB || ldb != N;  // as in gemm_f32: one column block reads A once
  if (a_stable && K <= KC && a_reused) {
    bool fresh = false;
    const size_t bytes = (size_t)(M + 15) / 16 * 16 * nktmax * 64;
    float* c = packed_a_cache().find_or_add(A, lda, M, K, packed_tag<T>(transA, true),
                                           bytes / 4 + kPackSlack, &fresh);
    if (c) {
      if (fresh) pack_a_amx(M, K, A, lda, transA, (char*)c);
      a_all = (const char*)c;
    }
  }
  const char* b_all = nullptr;  // the whole B packed (K <= KC, N <= NC), shared by the launch's blocks
  if (b_stable && K <= KC && N <= kAmxNC) {
    bool fill = false;
    SharedPackedB::Slot* slot = nullptr;
    float* q = shared_packed_b().acquire(B, ldb, K, N, packed_tag<T>(transB, true),
                                         (size_t)ncpad / kNR * nktmax * 2048 / 4 + kPackSlack, &fill, &slot);
    if (q) {
      if (fill) {
        pack_b_amx(K, N, B, ldb, transB, (char*)q);
        SharedPackedB::publish(slot);
      }
      b_all = (const char*)q;
    }
  }
  AmxScope tiles;
  alignas(64) TC tmp[32][32];
  for (int jc = 0; jc < N; jc += kAmxNC) {
    const int nc = N - jc < kAmxNC ? N - jc : kAmxNC;
    for (int pc = 0; pc < K; pc += KC) {
      const int kc = K - pc < KC ? K - pc : KC;
      const int nkt = (kc + E - 1) / E;
      const bool acc = accumulate || pc > 0;
      const char* bpk = b_all;
      if (!bpk) {
        pack_b_amx(kc, nc, b_at(pc, jc), ldb, transB, Bp);
        bpk = Bp;
      }
      for (int ic = 0; ic < M; ic += kAmxMC) {
        const int mc = M - ic < kAmxMC ? M - ic : kAmxMC;
        const char* apk = a_all ? a_all + (long)ic * nkt * 64 : Ap;
        if (!a_all) pack_a_amx(mc, kc, a_at(ic, pc), lda, transA, Ap);
        for (int jr = 0; jr < nc; jr += kNR) {
          const int nr = nc - jr < kNR ? nc - jr : kNR;
          const char* bp = bpk + (long)jr / kNR * nkt * 2048;
          for (int ir = 0; ir < mc; ir += 32) {
            const int mr = mc - ir < 32 ? mc - ir : 32;
            const char* ap = apk + (long)ir * nkt * 64;
            TC* cp = C + (long)(ic + ir) * ldc + jc + jr;
            if (mr == 32 && nr == 32) {
              const char* next = ir + 32 < mc ? (const char*)(cp + 32 * ldc) : nullptr;
              ukr_amx<T, 2>(nkt, ap, bp, (char*)cp, ldc * (long)sizeof(TC), acc, next);
              continue;
            }
            // row or column tail: through the stack tile
            for (int i = 0; i < 32; ++i)
              for (int j = 0; j < 32; ++j) tmp[i][j] = acc && i < mr && j < nr ? cp[(long)i * ldc + j] : TC(0);
            if (mr > 16) ukr_amx<T, 2>(nkt, ap, bp, (char*)tmp, sizeof(tmp[0]), true);
            else ukr_amx<T, 1>(nkt, ap, bp, (char*)tmp, sizeof(tmp[0]), true);
            for (int i = 0; i < mr; ++i)
              for (int j = 0; j < nr; ++j) cp[(long)i * ldc + j] = tmp[i][j];
          }
        }
      }
    }
  }
}
#endif  // TW_CPU_AMX

}  // namespace detail
}  // namespace tw_cpu

// Defined in gemm_runtime.cpp: the runtime's switch for the AMX path (TW_CPU_AMX), called once
// right after it loads the library; returns the line it logs.
extern "C" const char* tw_cpu_gemm_amx_setup(int allow);
