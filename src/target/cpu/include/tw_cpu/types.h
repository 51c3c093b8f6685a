// tw_cpu/types.h -- storage types and conversions used by generated CPU kernels.
//
// All conversions are branch-free (selects only) so that loops calling them
// auto-vectorise at -O3.  They never depend on MXCSR DAZ/FTZ for correctness of
// f16/bf16 subnormals on the f16->f32 path (integer arithmetic is used there).
//
// Semantics:
//  * from_f32<f16>, from_f32<bf16>: IEEE round-to-nearest-even, overflow -> +-Inf,
//    subnormals rounded correctly, NaN -> quiet NaN (sign and top payload bits kept).
//  * to_f32(f16/bf16): exact.
//  * convert<To,From>: value conversion for every pair among
//    float, double, f16, bf16, int8_t, uint8_t, int32_t, int64_t, bool.
//      - to bool: (x != 0)  (NaN -> true).
//      - from bool: 0 / 1.
//      - floating -> integer: C++ truncation toward zero (static_cast).  NOT saturating:
//        out-of-range values and NaN are undefined behaviour in ISO C++; on x86 the
//        hardware produces the "integer indefinite" value (INT_MIN / INT64_MIN) for
//        32/64-bit targets, and the low bits of that for int8_t/uint8_t.
//      - integer -> integer: C++ static_cast (modular wrap-around).
//      - double -> f16/bf16: correctly rounded (RNE) via round-to-odd to float.
//      - int32 -> f16/bf16: via double (exact), round-to-odd to float, then RNE; int64: its
//        top 24 bits with a sticky last bit (round-to-odd to float), then RNE: rounded once.
//      - f16 <-> bf16: via float (exact widening, then RNE).
#pragma once

#include <stdint.h>

namespace tw_cpu {

struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};

// A bool in memory, read through its byte: g++ has no vector type for bool loads, so a loop that
// reads a bool tile or tensor (an attention mask) was never vectorised; a byte load and a compare
// are (any non-zero byte reads as true).
inline bool load_bool(const bool& b) { return *reinterpret_cast<const unsigned char*>(&b) != 0; }

namespace detail {
inline uint32_t fbits(float f) { return __builtin_bit_cast(uint32_t, f); }
inline float bitsf(uint32_t u) { return __builtin_bit_cast(float, u); }
inline uint64_t dbits(double f) { return __builtin_bit_cast(uint64_t, f); }
inline double bitsd(uint64_t u) { return __builtin_bit_cast(double, u); }
// branch-free bit select (c ? a : b); GCC does not if-convert selects whose arms
// contain FP arithmetic under the default -ftrapping-math, masks keep loops vectorisable.
inline uint32_t bsel(bool c, uint32_t a, uint32_t b) {
  uint32_t m = 0u - (uint32_t)c;
  return (a & m) | (b & ~m);
}
inline float fsel(bool c, float a, float b) { return bitsf(bsel(c, fbits(a), fbits(b))); }
inline double dsel(bool c, double a, double b) {
  uint64_t m = 0u - (uint64_t)c;
  return bitsd((dbits(a) & m) | (dbits(b) & ~m));
}

// int64 -> float with round-to-odd: the top 24 bits of |x|, the lowest set when a bit shifted out
// is (the AscendC printer's tw_i2bf, the simulator's num::int_to_bf16_f32 compute the same).
inline float i64_to_f32_odd(int64_t x) {
  uint64_t m = x < 0 ? 0ull - (uint64_t)x : (uint64_t)x;
  float p = 1.0f;
  while (m >= (1ull << 24)) {
    m = (m >> 1) | (m & 1ull);
    p *= 2.0f;
  }
  return x < 0 ? -((float)m * p) : (float)m * p;
}

// double -> float with round-to-odd (truncate, then set the sticky lsb if inexact).
// A subsequent RNE rounding to a format with <= 22 fraction bits is then correct.
inline float f64_to_f32_odd(double d) {
  float f = (float)d;
  uint32_t u = fbits(f);
  double back = (double)f;
  double ab = back < 0 ? -back : back, ad = d < 0 ? -d : d;
  u = ab > ad ? u - 1 : u;  // rounded away from zero -> step back toward zero
  float t = bitsf(u);
  u = ((double)t != d) ? (u | 1u) : u;
  return bitsf(u);
}
}  // namespace detail

// ----------------------------------------------------------------- to_f32
inline float to_f32(float x) { return x; }
inline float to_f32(double x) { return (float)x; }
inline float to_f32(int8_t x) { return (float)x; }
inline float to_f32(uint8_t x) { return (float)x; }
inline float to_f32(int32_t x) { return (float)x; }
inline float to_f32(int64_t x) { return (float)x; }
inline float to_f32(bool x) { return x ? 1.0f : 0.0f; }

inline float to_f32(bf16 h) { return detail::bitsf((uint32_t)h.bits << 16); }

inline float to_f32(f16 h) {
  using namespace detail;
  uint32_t x = h.bits;
  uint32_t sign = (x & 0x8000u) << 16;
  uint32_t em = x & 0x7fffu;
  uint32_t norm = (em << 13) + (112u << 23);                // rebias 15 -> 127
  uint32_t sub = fbits((float)(int32_t)em * 0x1p-24f);      // exact, em < 1024
  uint32_t infnan = (em << 13) | 0x7f800000u;               // keeps NaN payload
  uint32_t r = bsel(em < 0x400u, sub, bsel(em >= 0x7c00u, infnan, norm));
  return bitsf(r | sign);
}

// ----------------------------------------------------------------- from_f32
namespace detail {
inline uint16_t f32_to_f16_bits(float f) {
  uint32_t u = fbits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  // NaN: quiet, keep top payload bits
  uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  // normal half range (|f| >= 2^-14): RNE on the 13 dropped bits; carries into
  // the exponent produce the next binade / Inf (0x7c00) correctly.
  uint32_t norm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // subnormal half (|f| < 2^-14): let the FPU do RNE at ulp 2^-24 by adding 0.5.
  uint32_t sub = fbits(bitsf(a) + 0.5f) - 0x3f000000u;
  // bit selects, not ?: (g++ would move the float add into the last arm and then not
  // if-convert the loop around it without masked vector operations: AVX2, SSE2)
  uint32_t r = bsel(a > 0x7f800000u, nan,
                    bsel(a >= 0x47800000u, 0x7c00u,  // >= 65536 (incl. Inf)
                         bsel(a >= 0x38800000u, norm, sub)));
  return (uint16_t)(r | sign);
}
inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = fbits(f);
  uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rne);
}
}  // namespace detail

template <class T>
inline T from_f32(float x) {
  return static_cast<T>(x);
}
template <>
inline f16 from_f32<f16>(float x) {
  return f16{detail::f32_to_f16_bits(x)};
}
template <>
inline bf16 from_f32<bf16>(float x) {
  return bf16{detail::f32_to_bf16_bits(x)};
}
template <>
inline bool from_f32<bool>(float x) {
  return x != 0.0f;
}

// ----------------------------------------------------------------- convert
namespace detail {
template <class T>
inline constexpr bool is_half = false;
template <>
inline constexpr bool is_half<f16> = true;
template <>
inline constexpr bool is_half<bf16> = true;
template <class A, class B>
inline constexpr bool same = false;
template <class A>
inline constexpr bool same<A, A> = true;
}  // namespace detail

template <class To, class From>
inline To convert(From x) {
  if constexpr (detail::same<To, From>) {
    return x;
  } else if constexpr (detail::is_half<From>) {
    // exact widening to float, then float -> To
    return convert<To, float>(to_f32(x));
  } else if constexpr (detail::is_half<To>) {
    if constexpr (detail::same<From, float>) {
      return from_f32<To>(x);
    } else if constexpr (detail::same<From, bool>) {
      return from_f32<To>(x ? 1.0f : 0.0f);
    } else if constexpr (detail::same<From, int8_t> || detail::same<From, uint8_t>) {
      return from_f32<To>((float)x);  // exact in float
    } else if constexpr (detail::same<From, int64_t>) {
      return from_f32<To>(detail::i64_to_f32_odd(x));  // (double)x would round past 2^53
    } else {
      // double / int32: round-to-odd to float, then RNE
      return from_f32<To>(detail::f64_to_f32_odd((double)x));
    }
  } else if constexpr (detail::same<To, bool>) {
    return x != From(0);
  } else {
    return static_cast<To>(x);
  }
}

// ----------------------------------------------------------------- atomic_add
// *p += v, the read-add-write atomic with respect to other threads (T.atomic_add: the blocks of a
// launch run concurrently on the thread pool). int32: one fetch-add (wraps). float: a
// compare-and-swap loop on the bits (a float add, RNE); f16, bf16: the same on 16 bits, the sum
// taken in double and rounded once to the storage type (RNE). Relaxed order: the launch's join orders the adds before the caller reads the tensor.
// Which block adds first is not fixed, so float results can differ in the last bits between runs.
namespace detail {
typedef uint32_t __attribute__((may_alias)) u32_alias;
typedef uint16_t __attribute__((may_alias)) u16_alias;
template <class H>
inline void atomic_add_half(H* p, H v) {
  u16_alias* u = reinterpret_cast<u16_alias*>(p);
  uint16_t old = __atomic_load_n(u, __ATOMIC_RELAXED);
  for (;;) {
    uint16_t next = convert<H>((double)to_f32(H{old}) + (double)to_f32(v)).bits;  // exact sum, one rounding
    if (__atomic_compare_exchange_n(u, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
  }
}
}  // namespace detail
inline void atomic_add(int32_t* p, int32_t v) {
  __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
inline void atomic_add(float* p, float v) {
  detail::u32_alias* u = reinterpret_cast<detail::u32_alias*>(p);
  uint32_t old = __atomic_load_n(u, __ATOMIC_RELAXED);
  for (;;) {
    uint32_t next = detail::fbits(detail::bitsf(old) + v);
    if (__atomic_compare_exchange_n(u, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
  }
}
inline void atomic_add(f16* p, f16 v) { detail::atomic_add_half(p, v); }
inline void atomic_add(bf16* p, bf16 v) { detail::atomic_add_half(p, v); }

}  // namespace tw_cpu
