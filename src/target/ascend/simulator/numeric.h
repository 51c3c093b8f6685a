// Number formats of the simulator: fp16 and bf16 conversions (round to nearest even) and the
// AscendC cast rounding modes. Written from the IEEE 754 definitions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "target/ascend/program.h"

namespace tw::ascend::sim::num {

inline uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  if (exp == 0x1f) return from_bits(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float v = static_cast<float>(man) * 5.9604644775390625e-08f;  // 2^-24
    return sign ? -v : v;
  }
  return from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t f32_to_f16(float f) {  // round to nearest even
  uint32_t x = bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
  if (ax < 0x38800000u) {  // below 2^-14: subnormal (exact scaling, nearbyint rounds to even)
    float v = from_bits(ax) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(v)));
  }
  uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

inline float bf16_to_f32(uint16_t h) { return from_bits(static_cast<uint32_t>(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Element load/store as double (for the generic, non-hot paths).
inline double load(const uint8_t* p, ir::DTypeCode t) {
  switch (t) {
    case ir::DTypeCode::f16: { uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
    case ir::DTypeCode::bf16: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
    case ir::DTypeCode::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case ir::DTypeCode::f64: { double v; std::memcpy(&v, p, 8); return v; }
    case ir::DTypeCode::i8: return static_cast<int8_t>(*p);
    case ir::DTypeCode::u8: case ir::DTypeCode::boolean: return *p;
    case ir::DTypeCode::i32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case ir::DTypeCode::i64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  }
  return 0;
}

// Neighbours of a 16-bit float pattern (for directed rounding).
inline uint16_t next_up16(uint16_t h) {  // towards +inf
  if (h == 0x8000u) return 1;
  return (h & 0x8000u) ? static_cast<uint16_t>(h - 1) : static_cast<uint16_t>(h + 1);
}
inline uint16_t next_down16(uint16_t h) {
  if (h == 0) return 0x8001u;
  return (h & 0x8000u) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
}

// An integer as a float whose bfloat16 rounding is the integer's (the printed tw_i2bf, ascendc_printer.cpp):
// its top 24 bits, the lowest one set when a bit shifted out is (round to odd), so float32 -> bfloat16 (8
// bits) rounds once; through a plain float32 conversion 2^25 + 2^17 + 1 would round twice (to 2^25).
inline float int_to_bf16_f32(int64_t x) {
  uint64_t a = x < 0 ? 0ull - static_cast<uint64_t>(x) : static_cast<uint64_t>(x), m = a;
  float p = 1.0f;
  while (m >= (1ull << 24)) {
    m = (m >> 1) | (m & 1ull);
    p *= 2.0f;
  }
  return x < 0 ? -(static_cast<float>(m) * p) : static_cast<float>(m) * p;
}

template <class ToBits, class ToF>
inline uint16_t round16(double v, RoundMode m, ToBits to_bits, ToF to_f) {
  uint16_t h = to_bits(static_cast<float>(v));
  if (m == RoundMode::None || m == RoundMode::Rint || std::isnan(v) || std::isinf(v)) return h;
  double hv = to_f(h);
  if (hv == v) return h;
  uint16_t lo = hv < v ? h : next_down16(h), hi = hv < v ? next_up16(h) : h;
  switch (m) {
    case RoundMode::Floor: return lo;
    case RoundMode::Ceil: return hi;
    case RoundMode::Trunc: return v > 0 ? lo : hi;
    case RoundMode::Round: {
      double dl = v - to_f(lo), dh = to_f(hi) - v;
      if (dl < dh) return lo;
      if (dh < dl) return hi;
      return v > 0 ? hi : lo;
    }
    case RoundMode::None: case RoundMode::Rint: return h;
  }
  return h;
}

inline double round_int(double v, RoundMode m) {
  switch (m) {
    case RoundMode::Rint: return std::nearbyint(v);
    case RoundMode::Floor: return std::floor(v);
    case RoundMode::Ceil: return std::ceil(v);
    case RoundMode::Round: return std::round(v);
    case RoundMode::None: case RoundMode::Trunc: return std::trunc(v);  // None / Trunc for integer targets
  }
  return std::trunc(v);
}

template <class I>
inline I saturate(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

// Whether the exact value v is representable in the integer type I (int32 vector arithmetic:
// dav-c220 does not document what Add/Sub/Mul/Adds/Muls give when the result leaves int32, so the
// simulator reports it instead of storing a guess; functional.cpp).
template <class I>
inline bool fits(double v) {
  return v >= static_cast<double>(std::numeric_limits<I>::min()) && v <= static_cast<double>(std::numeric_limits<I>::max());
}

// Stores v converted to t with rounding mode m (float targets: None = Rint).
inline void store(uint8_t* p, ir::DTypeCode t, double v, RoundMode m = RoundMode::Rint) {
  switch (t) {
    case ir::DTypeCode::f16: {
      uint16_t h = round16(v, m, f32_to_f16, f16_to_f32);
      std::memcpy(p, &h, 2);
      return;
    }
    case ir::DTypeCode::bf16: {
      uint16_t h = round16(v, m, f32_to_bf16, bf16_to_f32);
      std::memcpy(p, &h, 2);
      return;
    }
    case ir::DTypeCode::f32: {
      float f = static_cast<float>(v);
      if (m != RoundMode::None && m != RoundMode::Rint && static_cast<double>(f) != v && !std::isnan(v)) {
        float lo = static_cast<double>(f) < v ? f : std::nextafter(f, -INFINITY);
        float hi = static_cast<double>(f) < v ? std::nextafter(f, INFINITY) : f;
        if (m == RoundMode::Floor) f = lo;
        else if (m == RoundMode::Ceil) f = hi;
        else if (m == RoundMode::Trunc) f = v > 0 ? lo : hi;
        else if (m == RoundMode::Round) {
          double dl = v - lo, dh = hi - v;
          f = dl < dh ? lo : dh < dl ? hi : (v > 0 ? hi : lo);
        }
      }
      std::memcpy(p, &f, 4);
      return;
    }
    case ir::DTypeCode::f64: std::memcpy(p, &v, 8); return;
    case ir::DTypeCode::i8: { int8_t x = saturate<int8_t>(round_int(v, m)); std::memcpy(p, &x, 1); return; }
    case ir::DTypeCode::u8: case ir::DTypeCode::boolean: { uint8_t x = saturate<uint8_t>(round_int(v, m)); *p = x; return; }
    case ir::DTypeCode::i32: { int32_t x = saturate<int32_t>(round_int(v, m)); std::memcpy(p, &x, 4); return; }
    case ir::DTypeCode::i64: { int64_t x = saturate<int64_t>(round_int(v, m)); std::memcpy(p, &x, 8); return; }
  }
}

}  // namespace tw::ascend::sim::num
