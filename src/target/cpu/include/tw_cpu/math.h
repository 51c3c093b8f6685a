// tw_cpu/math.h -- scalar float math for generated CPU kernels.
//
// Every function is branch-free straight-line code (selects only, no libm calls,
// no errno), force-inlined, so that `for (i) y[i] = tw_cpu::exp(x[i]);` is
// auto-vectorised by g++/clang++ -O3.  Polynomial coefficients were fitted for this
// file (Chebyshev interpolation, see tests/cpp/test_cpu_runtime.cpp for the sweeps).
//
// Error bounds (asserted by the tests on dense sweeps against double libm; "ulp" bounds
// are relative errors, 1 ulp ~ 1.19e-7 relative).  Valid with the default
// round-to-nearest mode; with or without FMA (-march=x86-64 gets slightly larger
// rounding error, still within the bound):
//   exp(x)     rel <= 2.5e-7 for finite results (normal range; measured 1.63e-7 over every
//              float with FMA, 1.8e-7 without); subnormal results (x < -87.34) abs <= 2^-148 (two subnormal steps).
//              exp(x > 88.7228) = +Inf, exp(-Inf) = 0,
//              exp(x < -103.98) = 0, NaN -> NaN.
//   exp2(x)    rel <= 2.5e-7 for finite normal results, subnormal results abs <= 2^-148;
//              exp2(x >= 128) = +Inf,
//              exp2(x < -150) = 0, NaN -> NaN (2^x directly: no rounding of x * ln2).
//   log(x)     rel <= 2.5e-7 for x > 0 except near x = 1 where abs <= 1.5e-8 (hence
//              rel of log(x) itself is still <= 2.5e-7 there);
//              log(0) = -Inf, log(x<0) = NaN, log(+Inf) = +Inf, subnormals handled.
//   sqrt(x)    rel <= 1.2e-7 (<= 1 ulp, nearly always correctly rounded with FMA);
//              sqrt(+-0) = +-0, sqrt(+Inf) = +Inf, sqrt(x<0) = NaN, subnormals handled.
//   rsqrt(x)   rel <= 2.4e-7; rsqrt(0) = +Inf, rsqrt(+Inf) = 0, rsqrt(x<0) = NaN.
//   tanh(x)    abs <= 1.2e-7 everywhere and rel <= 2.5e-7 for |x| < 0.55 (odd, exact
//              sign, tanh(+-Inf) = +-1, tiny x -> x).
//   erf(x)     abs <= 2.0e-7 everywhere (odd, erf(+-Inf) = +-1); rel <= 2.5e-7 for
//              |x| < 1.
//   sigmoid(x) rel <= 3.6e-7 for x > -87 (result normal), abs <= 2^-148 below;
//              sigmoid(+Inf) = 1, sigmoid(-Inf) = 0.
//   silu(x)    x * sigmoid(x): rel <= 4.2e-7 for x > -87 (subnormal results: abs <= 2^-149),
//              abs <= 2^-141 below;
//              silu(+Inf) = +Inf, silu(-Inf) = NaN (-Inf * 0, as the formula gives on every
//              target).
//   sin(x), cos(x)  abs <= 1.53e-7 for |x| <= 400000 (measured over every float32 in the range:
//              1.527e-7 / 1.529e-7); rel <= 2.21 ulp for |x| <= pi (2.14 / 2.21), <= 8.7 ulp of
//              results >= 2^-12 over the whole range (the reduction's rounding, near |x| = 400000);
//              sin(+-0) = +-0; |x| > 400000, +-Inf and NaN -> NaN (see sin_cos below).
// All functions propagate NaN.
#pragma once

#include <stdint.h>

#include "simd.h"
#include "types.h"

namespace tw_cpu {
namespace detail {

TW_CPU_INLINE float fmadd(float a, float b, float c) {
#if defined(__FMA__) || defined(__AVX512F__)
  return __builtin_fmaf(a, b, c);  // single instruction, vectorisable
#else
  return a * b + c;  // no FMA hardware: never call libm fmaf
#endif
}
TW_CPU_INLINE float fabs_(float x) { return bitsf(fbits(x) & 0x7fffffffu); }
TW_CPU_INLINE float copysign_(float mag, float sgn) {
  return bitsf((fbits(mag) & 0x7fffffffu) | (fbits(sgn) & 0x80000000u));
}
inline constexpr float kInf = __builtin_inff();
inline constexpr float kNaN = __builtin_nanf("");

// A degree-5 polynomial 1 + x (c1 + x (c2 + x (c3 + x (c4 + x c5)))), evaluated by Horner's rule in
// fused multiply-adds (poly5; a vector form below for the chunk functions).
struct Poly5 {
  float c5, c4, c3, c2, c1;
};
// e^r for |r| <= ln2/2 (+ rounding): q fitted for the minimax relative error of the whole (9.2e-8
// before rounding; 1.63e-7 after, measured exhaustively over every float input of exp with a
// normal result).
inline constexpr Poly5 kExpPoly = {8.290272206e-03f, 4.189816117e-02f, 1.666763872e-01f, 4.999914765e-01f,
                                   9.999997020e-01f};
// 2^f for |f| <= 1/2: the same polynomial in f (e^r with r = f ln2: coefficient k is kExpPoly's
// times ln2^k, rounded once), so exp2 needs no reduction f -> f ln2 (a multiply and a fused
// multiply-add fewer per value). Measured over every float with a normal result: rel error
// 1.74e-7 with FMA, 1.98e-7 without.
inline constexpr Poly5 kExp2Poly = {1.326465863e-03f, 9.671566077e-03f, 5.550734699e-02f, 2.402224094e-01f,
                                    6.931470037e-01f};
TW_CPU_INLINE float poly5(float x, const Poly5& c) {
  float p = fmadd(c.c5, x, c.c4);
  p = fmadd(p, x, c.c3);
  p = fmadd(p, x, c.c2);
  p = fmadd(p, x, c.c1);
  return fmadd(p, x, 1.0f);
}

// 2^f * 2^n for |f| <= 1/2 and n in [-151, 129]: kExp2Poly, then 2^n applied in two factors (each
// a normal float), so subnormal and overflowing results round correctly.
TW_CPU_INLINE float exp2_scaled(float f, int32_t ni) {
  float p = poly5(f, kExp2Poly);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = bitsf((uint32_t)(n1 + 127) << 23);
  float s2 = bitsf((uint32_t)(n2 + 127) << 23);
  return (p * s1) * s2;
}

}  // namespace detail

// e^x: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, degree-5 polynomial (kExpPoly),
// result scaled by 2^n in two factors 2^n1 * 2^(n - n1), n1 ~ n/2.
// Written for the auto-vectoriser (g++ -O3; one AVX-512 vector costs 10 FMA-pipe and
// ~10 integer/add/select operations): the clamps are integer minimums on the bits (g++
// turns float min/max selects into compare + blend, as it must keep NaN), NaN is restored by
// one final select, 2^n1 is added into p's exponent field (p * 2^n1 is always a normal
// float: exact), and only the last multiply by 2^(n - n1) rounds (subnormal and overflowing
// results round once, correctly). n and n1 come from two fused multiply-adds with
// round-to-integer shifts whose low bits are n + 127 and n1: no float -> int conversions.
TW_CPU_INLINE float exp(float x) {
  using namespace detail;
  uint32_t u = fbits(x);
  u = u < 0xc2d00000u ? u : 0xc2d00000u;  // unsigned: x < -104, -Inf, -NaN -> -104
  // those (e^-104 < 2^-150 rounds to +0) give +0 by a select and compute e^0 meanwhile:
  // arithmetic that underflows costs a microcode assist per vector instruction on Intel cores
  // (~150 cycles: 11x the whole map when every lane is a softmax's masked -1e30)
  const bool zero = u == 0xc2d00000u;
  int32_t v = (int32_t)u;
  v = v < 0x42b20000 ? v : 0x42b20000;  // signed: x > 89, +Inf, +NaN -> 89 (negatives kept)
  float xc = fsel(zero, 0.0f, bitsf((uint32_t)v));  // in [-104, 89]: finite (NaN restored at the end)
  const float kShift = 12582912.0f + 127.0f;  // 1.5 * 2^23 + 127: fbits(t) low bits = n + 127
  const float kShift1 = 12582912.0f;          // fbits(t1) low bits = n1
  float t = fmadd(xc, 1.44269504088896341f, kShift);
  float t1 = fmadd(xc, 0.721347520444481705f, kShift1);  // log2(e) / 2 (exact halving)
  float n = t - kShift;
  float r = fmadd(n, -0.693145751953125f, xc);  // ln2 hi (16 bits): n*hi exact
  r = fmadd(n, -1.428606765330187e-06f, r);     // ln2 lo
  float p = poly5(r, kExpPoly);                  // in [0.7, 1.42]
  uint32_t e = fbits(t), e1 = fbits(t1);
  // n1 in [-76, 65], n - n1 in [-76, 65]: both powers are normal; the bits above the 9 low
  // ones (the shift constant's) leave through the top of the 32-bit shift
  float ps = bitsf(fbits(p) + (e1 << 23));  // p * 2^n1, exact
  float y = ps * bitsf((e - e1) << 23);     // * 2^(n - n1): the one rounding
  return fsel(x == x, fsel(zero, 0.0f, y), x);
}

// 2^x: x = n + f with n = round(x) (exact), 2^f by kExp2Poly on |f| <= 1/2, scaled by 2^n in two
// factors.
TW_CPU_INLINE float exp2(float x) {
  using namespace detail;
  float xc = fsel(x > 129.0f, 129.0f, x);
  // x <= -150 (2^x <= 2^-150 rounds to +0) by a select, computing 2^0 meanwhile: no underflow
  // in the arithmetic (see exp: a microcode assist per vector instruction on Intel cores, which
  // a causal or tail-masked softmax hits on every masked lane). NaN stays NaN.
  const bool zero = xc <= -150.0f;
  xc = fsel(zero, 0.0f, xc);
  const float kShift = 12582912.0f;  // 1.5 * 2^23: float add rounds to integer
  float t = xc + kShift;
  float n = t - kShift;
  int32_t ni = (int32_t)(fbits(t) - fbits(kShift));
  float f = xc - n;  // exact, |f| <= 0.5
  return fsel(zero, 0.0f, exp2_scaled(f, ni));
}

// exp / exp2 over a chunk of a row, d[i] = exp(s[i]) for i in [0, n) (d may be s). The generated
// row maps whose value is exp(...) or exp2(...) compute the argument into a local 64-float buffer
// and call this from it into the tile or the output: g++ keeps such a buffer, which does not
// escape, in registers, so the argument is never stored (softmax 7% fewer cycles on a Zen 4
// core, docs/performance.md "Session 21 ... (h-rows9)"; computed into the destination and
// transformed in place, each vector was stored twice and reloaded once). The
// same value as exp() / exp2() for every float, bit for bit (a NaN gives a NaN, quieted), on
// every target. On AVX-512 the vector form applies 2^n with vscalefps, which rounds once and
// gives the subnormal and overflowing results itself: 12 vector operations per 16 values instead
// of the ~25 of the auto-vectorised bit manipulation and selects (the upper clamp is one vminps,
// NaN kept as its second operand; the lanes that round to +0 are zeroed by vscalefps's mask, so
// nothing underflows there, see exp; a subnormal result still costs an assist, as in exp).
// With AVX2 + FMA (no vscalefps) two vector forms, both branch-free: for a group of 4 vectors whose
// values all have normal results (exp: x in [-86, 88], a softmax's x - max on ordinary data; exp2:
// x in [-125, 127]) exp()'s reduction and polynomial and p * 2^n in one multiply (exact there, as
// exp()'s two factors are), 13 vector operations per 8 values; any other group (NaN, +-Inf,
// subnormal, zero or overflowing results, a masked -1e30) the two-factor form, x clamped first, 2^n
// as two powers of two made from the shift's bits by integer operations, 16-17 operations per 8
// values and no underflowing arithmetic for -Inf / -1e30 (see scale_pow2). The range test is one
// integer maximum per vector and one compare per group, so the loop keeps the argument and result
// chunks in registers; session 32's form (one vector at a time, a scalar exp() per lane of an
// out-of-range vector) kept both in memory: the exp pass of softmax 9% fewer cycles on a Zen 4
// core at -march=x86-64-v3 (docs/performance.md "Session 33: the AVX2 exp pass (h-avx2exp33)").
// Elsewhere the scalar functions in an auto-vectorised loop.
//
// exp_nonpos_chunk(d, s, n): exp_chunk for values that are <= 0, -Inf or NaN (a row's x - max(x):
// the code generator calls it only where that is proven, docs/performance.md "Session 26 ...
// (h-rows14)"): the same bits as exp() for those values, without the upper clamp (AVX-512: one
// vminps fewer per 16 values; AVX2: the range test's signed maximum and the two-factor form's
// vminps). softmax's exp pass 2-3% fewer cycles in L2 on a Zen 4 core. A positive value may give a
// wrong result above 88 (no clamp).
namespace detail {
TW_CPU_INLINE simd::vf poly5(simd::vf x, const Poly5& c) {  // poly5 for kVF lanes
  using simd::splat;
  simd::vf p = simd::fma(x, splat(c.c5), splat(c.c4));
  p = simd::fma(p, x, splat(c.c3));
  p = simd::fma(p, x, splat(c.c2));
  p = simd::fma(p, x, splat(c.c1));
  return simd::fma(p, x, splat(1.0f));
}
}  // namespace detail
#if defined(__AVX512F__)
namespace detail {
typedef unsigned short mask16;
// the lanes x > lo or NaN (_CMP_NLE_UQ)
TW_CPU_INLINE mask16 live_lanes(simd::vf x, float lo) {
  return __builtin_ia32_cmpps512_mask(x, simd::splat(lo), 6 /*_CMP_NLE_UQ*/, (mask16)-1, 4 /*CUR_DIRECTION*/);
}
// min(hi, x) as vminps(hi, x): a NaN x is kept (the second operand). The dead lanes (x <= lo, -Inf,
// -1e30) compute on x as it is: large finite or infinite values, never a subnormal, and their
// result is zeroed by scalef_live's mask, which also keeps a masked-off underflow from costing a
// microcode assist (measured: lanes of -105 as fast as lanes of 0)
TW_CPU_INLINE simd::vf clamp_hi(simd::vf x, float hi) {
#if defined(__clang__)
  return __builtin_ia32_minps512(simd::splat(hi), x, 4);
#else  // (g++ turns the select `h < x ? h : x` into a compare and a masked move)
  return __builtin_ia32_minps512_mask(simd::splat(hi), x, simd::vf{}, (mask16)-1, 4);
#endif
}
TW_CPU_INLINE simd::vf scalef_live(simd::vf p, simd::vf n, mask16 live) {  // p * 2^n, rounded once; +0 off live
  return __builtin_ia32_scalefps512_mask(p, n, simd::vf{}, live, 4);
}
// e^x for 16 lanes: exp()'s reduction (n = round(x log2e) by one fused multiply-add with the
// round-to-integer shift, the two-part ln2) and polynomial, then p * 2^n by vscalefps
// (kClamp false: x <= 0, -Inf or NaN, exp_nonpos_chunk: the clamp changes nothing there)
template <bool kClamp = true>
TW_CPU_INLINE simd::vf exp_v(simd::vf x) {
  using simd::splat;
  const mask16 live = live_lanes(x, -104.0f);  // x <= -104 and -Inf: +0 (as exp's select)
  const simd::vf xc = kClamp ? clamp_hi(x, 89.0f) : x;
  const simd::vf sh = splat(12582912.0f);  // 1.5 * 2^23
  const simd::vf n = simd::fma(xc, splat(1.44269504088896341f), sh) - sh;
  simd::vf r = simd::fma(n, splat(-0.693145751953125f), xc);
  r = simd::fma(n, splat(-1.428606765330187e-06f), r);
  return scalef_live(poly5(r, kExpPoly), n, live);
}
// 2^x for 16 lanes: exp2()'s steps, 2^n by vscalefps. With AVX512DQ, f = x - round(x) is one
// vreduceps (imm 0: round to nearest even, as exp2's shift under the default rounding mode) and
// n = x - f: two operations instead of three. With kExp2Poly, a flash-attention score tile's
// exp2 + row sum pass takes 11% fewer cycles on a Zen 4 core (docs/performance.md "Session 17").
TW_CPU_INLINE simd::vf exp2_v(simd::vf x) {
  const mask16 live = live_lanes(x, -150.0f);  // x <= -150 and -Inf: +0 (as exp2's select)
  const simd::vf xc = clamp_hi(x, 129.0f);
#if defined(__AVX512DQ__)
#if defined(__clang__)
  const simd::vf f = __builtin_ia32_reduceps512_mask(xc, 0, simd::vf{}, (mask16)-1, 4);
#else
  const simd::vf f = __builtin_ia32_reduceps512_mask(xc, 0, simd::vf{}, (mask16)-1);
#endif
  const simd::vf n = xc - f;
#else
  const simd::vf sh = simd::splat(12582912.0f);
  const simd::vf n = (xc + sh) - sh;
  const simd::vf f = xc - n;
#endif
  return scalef_live(poly5(f, kExp2Poly), n, live);
}
template <class F>
TW_CPU_INLINE void apply_chunk(float* d, const float* s, int64_t n, F f) {
  int64_t i = 0;
  for (; i + simd::kVF <= n; i += simd::kVF) simd::storeu(d + i, f(simd::loadu(s + i)));
  if (i < n) {  // the last < 16 values: masked load and store
    const mask16 k = (mask16)((1u << (n - i)) - 1u);
    simd::vf v = __builtin_ia32_loadups512_mask(s + i, simd::vf{}, k);
    __builtin_ia32_storeups512_mask(d + i, f(v), k);
  }
}
}  // namespace detail
TW_CPU_INLINE void exp_chunk(float* d, const float* s, int64_t n) { detail::apply_chunk(d, s, n, detail::exp_v<true>); }
TW_CPU_INLINE void exp_nonpos_chunk(float* d, const float* s, int64_t n) {
  detail::apply_chunk(d, s, n, detail::exp_v<false>);
}
TW_CPU_INLINE void exp2_chunk(float* d, const float* s, int64_t n) { detail::apply_chunk(d, s, n, detail::exp2_v); }
#elif defined(__AVX2__) && defined(__FMA__)
namespace detail {
// min(hi, x) / max(lo, x) as vminps / vmaxps with x the second operand: a NaN x is kept
TW_CPU_INLINE simd::vf clamp_hi(simd::vf x, float hi) { return __builtin_ia32_minps256(simd::splat(hi), x); }
TW_CPU_INLINE simd::vf clamp_lo(simd::vf x, float lo) { return __builtin_ia32_maxps256(simd::splat(lo), x); }
// p * 2^n for 8 lanes, without branches, from t: the round-to-integer shift's sum whose low 9 bits
// are n + 254, n in [-254, 129]. 2^n in two factors 2^n1 * 2^(n - n1), n1 = floor(n / 2), each a
// power of two whose biased exponent (n1 + 127 = (n + 254) >> 1, and n - n1 + 127) comes from t's
// bits by two shifts, an and and a subtract (integer operations, off the multiply-add pipes):
// p * 2^n1 is exact for n >= -151 (a normal float), the second multiply the one rounding, so
// subnormal and overflowing results round once, correctly (exp() / exp2()'s bits: they split n
// elsewhere, the product is the same). n = -254 (the lower clamps below) gives two factors of +0:
// a +0 result by multiplying by zero, which neither underflows nor costs a microcode assist (a
// masked softmax lane, -Inf or -1e30 minus the row max); NaN stays NaN (p is NaN).
TW_CPU_INLINE simd::vf scale_pow2(simd::vf p, simd::vf t) {
  const simd::vu s1 = ((simd::vu)t << 22) & 0x7f800000u;  // bits 1..8 of n + 254: (n1 + 127) << 23
  const simd::vu s2 = ((simd::vu)t << 23) - s1;           // (n + 254 - n1 - 127) << 23, modulo 2^32
  return (p * (simd::vf)s1) * (simd::vf)s2;
}
// e^x for 8 lanes: exp()'s reduction (n = round(x log2e) by one fused multiply-add with the
// round-to-integer shift, the two-part ln2) and polynomial, x clamped to [-176, 89] first: x >= 89
// and +Inf give +Inf; x <= -104 gives +0 as exp's select does (x <= -176, -Inf and -1e30 among them,
// by the zero factors of n = -254; between, the product rounds to +0). 17 vector operations per 8
// values, 16 with kClamp false (x <= 0, -Inf or NaN, exp_nonpos_chunk: no upper clamp).
template <bool kClamp>
TW_CPU_INLINE simd::vf exp_v(simd::vf x) {
  using simd::splat;
  simd::vf xc = clamp_lo(x, -176.0f);
  if (kClamp) xc = clamp_hi(xc, 89.0f);
  const simd::vf sh = splat(12582912.0f + 254.0f);  // 1.5 * 2^23 + 254: fbits(t) low bits = n + 254
  const simd::vf t = simd::fma(xc, splat(1.44269504088896341f), sh);
  const simd::vf n = t - sh;
  simd::vf r = simd::fma(n, splat(-0.693145751953125f), xc);
  r = simd::fma(n, splat(-1.428606765330187e-06f), r);
  return scale_pow2(poly5(r, kExpPoly), t);
}
// 2^x for 8 lanes: exp2()'s n = round(x) by the shift's add, f = x - n, kExp2Poly; x clamped to
// [-254, 129] (x <= -150 gives +0 as exp2's select does, +Inf gives +Inf)
TW_CPU_INLINE simd::vf exp2_v(simd::vf x) {
  const simd::vf xc = clamp_lo(clamp_hi(x, 129.0f), -254.0f);
  const simd::vf sh = simd::splat(12582912.0f + 254.0f);
  const simd::vf t = xc + sh;
  return scale_pow2(poly5(xc - (t - sh), kExp2Poly), t);
}
// e^x for 8 lanes whose results are all normal floats (x in [-86, 88], NaN too): exp()'s n (the
// shift's low bits are n + 127 here), r and p, and p * 2^n in one multiply (exact there, as exp()'s
// two factors are): 13 vector operations per 8 values instead of exp_v's 17
TW_CPU_INLINE simd::vf exp_normal_v(simd::vf x) {
  using simd::splat;
  const simd::vf sh = splat(12582912.0f + 127.0f);
  const simd::vf t = simd::fma(x, splat(1.44269504088896341f), sh);
  const simd::vf n = t - sh;
  simd::vf r = simd::fma(n, splat(-0.693145751953125f), x);
  r = simd::fma(n, splat(-1.428606765330187e-06f), r);
  return poly5(r, kExpPoly) * (simd::vf)((simd::vu)t << 23);
}
// 2^x for 8 lanes whose results are all normal floats (x in [-125, 127], NaN too): exp2_v's n and
// f (the same shift: an even bias, so a tie x = k + 1/2 rounds as exp2()'s does) and p * 2^n in one
// multiply (exact there, as exp2()'s two factors are)
TW_CPU_INLINE simd::vf exp2_normal_v(simd::vf x) {
  const simd::vf sh = simd::splat(12582912.0f + 254.0f);
  const simd::vf t = x + sh;
  return poly5(x - (t - sh), kExp2Poly) * (simd::vf)(((simd::vu)t << 23) - 0x3f800000u);  // (n + 127) << 23
}
// g(v, k) on the vectors of a chunk, four at a time (v[0..k) in place), then one at a time; the last
// < 8 values through a zero-padded copy (AVX2's masked stores are slow on AMD cores)
template <class G>
TW_CPU_INLINE void apply_chunk(float* d, const float* s, int64_t n, G g) {
  int64_t i = 0;
  for (; i + 4 * simd::kVF <= n; i += 4 * simd::kVF) {
    simd::vf v[4];
    for (int q = 0; q < 4; ++q) v[q] = simd::loadu(s + i + q * simd::kVF);
    g(v, 4);
    for (int q = 0; q < 4; ++q) simd::storeu(d + i + q * simd::kVF, v[q]);
  }
  for (; i + simd::kVF <= n; i += simd::kVF) {
    simd::vf v = simd::loadu(s + i);
    g(&v, 1);
    simd::storeu(d + i, v);
  }
  if (i < n) {
    alignas(32) float b[simd::kVF] = {};
    __builtin_memcpy(b, s + i, (size_t)(n - i) * sizeof(float));
    simd::vf v = simd::load(b);
    g(&v, 1);
    simd::store(b, v);
    __builtin_memcpy(d + i, b, (size_t)(n - i) * sizeof(float));
  }
}
// normal(v[q]) on k vectors when all their values are in its range, else general(v[q]) (both vector
// code, so the generated row maps' 64-float argument and result chunks stay in registers). The range
// test: integer maxima of the bits, one or two per vector and one compare per group: unsigned, the
// values below the float of bits kLo (-Inf and the negative NaNs among them) have the largest bits;
// signed (kHi != 0), those above the float of bits kHi (+Inf, the positive NaNs). A NaN that
// passes gives NaN in normal too.
template <uint32_t kLo, int32_t kHi, class FN, class FG>
TW_CPU_INLINE void by_range(simd::vf* v, int k, FN normal, FG general) {
  using simd::vi;
  using simd::vu;
  vu lo = (vu)v[0];
  vi hi = (vi)v[0];
  for (int q = 1; q < k; ++q) {
    lo = lo > (vu)v[q] ? lo : (vu)v[q];
    if (kHi != 0) hi = hi > (vi)v[q] ? hi : (vi)v[q];
  }
  vi out = (vi)(lo > kLo);
  if (kHi != 0) out |= hi > kHi;
  typedef long long v4q __attribute__((vector_size(32)));
  if (__builtin_ia32_ptestz256((v4q)out, (v4q)out))
    for (int q = 0; q < k; ++q) v[q] = normal(v[q]);
  else
    for (int q = 0; q < k; ++q) v[q] = general(v[q]);
}
// exp_chunk (kClamp) / exp_nonpos_chunk: exp_normal_v for x in [-86, 88] (no upper bound without
// kClamp), else exp_v; exp2_chunk: exp2_normal_v for x in [-125, 127], else exp2_v
template <bool kClamp>
TW_CPU_INLINE void exp_group(simd::vf* v, int k) {
  by_range<0xc2ac0000u /* -86 */, kClamp ? 0x42b00000 /* 88 */ : 0>(v, k, exp_normal_v, exp_v<kClamp>);
}
TW_CPU_INLINE void exp2_group(simd::vf* v, int k) {
  by_range<0xc2fa0000u /* -125 */, 0x42fe0000 /* 127 */>(v, k, exp2_normal_v, exp2_v);
}
}  // namespace detail
TW_CPU_INLINE void exp_chunk(float* d, const float* s, int64_t n) { detail::apply_chunk(d, s, n, detail::exp_group<true>); }
TW_CPU_INLINE void exp_nonpos_chunk(float* d, const float* s, int64_t n) {
  detail::apply_chunk(d, s, n, detail::exp_group<false>);
}
TW_CPU_INLINE void exp2_chunk(float* d, const float* s, int64_t n) { detail::apply_chunk(d, s, n, detail::exp2_group); }
#else
TW_CPU_INLINE void exp_chunk(float* d, const float* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = tw_cpu::exp(s[i]);
}
TW_CPU_INLINE void exp_nonpos_chunk(float* d, const float* s, int64_t n) { exp_chunk(d, s, n); }
TW_CPU_INLINE void exp2_chunk(float* d, const float* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = tw_cpu::exp2(s[i]);
}
#endif

// natural log: x = 2^e * m, m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s), s = f/(2+f).
TW_CPU_INLINE float log(float x) {
  using namespace detail;
  uint32_t u0 = fbits(x);
  bool sub = u0 < 0x00800000u;  // +0 or positive subnormal
  float xs = fsel(sub, x * 0x1p23f, x);
  uint32_t u = fbits(xs);
  int32_t e = (int32_t)(u - 0x3f3504f3u) >> 23;  // so that m in [0.7071, 1.4142)
  float m = bitsf(u - ((uint32_t)e << 23));
  float ef = (float)(e - (sub ? 23 : 0));
  float f = m - 1.0f;  // exact (Sterbenz)
  float s = f / (2.0f + f);
  float z = s * s;
  float w = fmadd(z, 0.1111111111f, 0.1428571429f);
  w = fmadd(w, z, 0.2f);
  w = fmadd(w, z, 0.3333333333f);
  w = w * z;
  // log1p(f) = 2 atanh(s) = 2s (1 + s^2/3 + s^4/5 + ...); truncation error < 2e-9
  float l1 = fmadd(2.0f * s, w, 2.0f * s);
  float res = fmadd(ef, 0.693145751953125f, fmadd(ef, 1.428606765330187e-06f, l1));
  // specials via integer tests on the bits (if-converted, keeps the loop vectorisable)
  uint32_t ax = u0 & 0x7fffffffu;
  res = fsel(u0 == 0x7f800000u, kInf, res);
  res = fsel((u0 >> 31) != 0, kNaN, res);
  res = fsel(ax == 0u, -kInf, res);
  res = fsel(ax > 0x7f800000u, x, res);
  return res;
}

// sqrt without libm (a libm call with errno would block vectorisation):
// reciprocal-sqrt seed + 3 Newton steps, then one FMA residual correction.
TW_CPU_INLINE float sqrt(float x) {
  using namespace detail;
  bool sub = x < 0x1p-126f;
  float xs = fsel(sub, x * 0x1p24f, x);
  float y = bitsf(0x5f375a86u - (fbits(xs) >> 1));
  float hx = 0.5f * xs;
  y = y * fmadd(-hx * y, y, 1.5f);
  y = y * fmadd(-hx * y, y, 1.5f);
  y = y * fmadd(-hx * y, y, 1.5f);
  float s = xs * y;
  float d = fmadd(-s, s, xs);  // residual (exact with FMA)
  s = fmadd(0.5f * y, d, s);
  s = fsel(sub, s * 0x1p-12f, s);
  s = fsel(x == kInf, kInf, s);
  s = fsel(x == 0.0f, x, s);  // keeps -0
  s = fsel(x < 0.0f, kNaN, s);
  s = fsel(x != x, x, s);
  return s;
}

TW_CPU_INLINE float rsqrt(float x) { return 1.0f / tw_cpu::sqrt(x); }

TW_CPU_INLINE float sigmoid(float x) {
  using namespace detail;
  float e = tw_cpu::exp(-fabs_(x));  // in (0, 1], no overflow
  float s = 1.0f / (1.0f + e);
  return fsel(x >= 0.0f, s, fsel(x != x, x, e * s));
}

TW_CPU_INLINE float silu(float x) { return x * tw_cpu::sigmoid(x); }

TW_CPU_INLINE float tanh(float x) {
  using namespace detail;
  float ax = fabs_(x);
  // |x| < 0.55: x + x^3 P(x^2), P fitted (rel 4e-9)
  float z = ax * ax;
  float p = -6.610227840e-03f;
  p = fmadd(p, z, 2.130938867e-02f);
  p = fmadd(p, z, -5.390942883e-02f);
  p = fmadd(p, z, 1.333311373e-01f);
  p = fmadd(p, z, -3.333333201e-01f);
  float small = fmadd(ax * z, p, ax);
  // otherwise 1 - 2/(e^{2|x|} + 1), |x| clamped to 9.5 first (tanh(x) rounds to 1 from 9.02 on:
  // 2/(e^19 + 1) < 2^-25), so that e^{2|x|} = 2^n p(r) with n in [0, 28]: exp's reduction and
  // polynomial without its special cases (no overflow, no underflow, no NaN: restored at the
  // end), 2^n from the shift's low bits. With the general exp the map took 1.36-1.38x as long
  // on AVX2 (Sapphire Rapids, -march=x86-64-v3; the same error over a dense sweep)
  float ac = fsel(ax < 9.5f, ax, 9.5f);
  const float kShift = 12582912.0f + 127.0f;  // 1.5 * 2^23 + 127: fbits(t) low bits = n + 127
  float t = fmadd(ac, 2.88539008177792681f, kShift);  // 2 log2(e)
  float n = t - kShift;
  float r = fmadd(n, -0.693145751953125f, 2.0f * ac);  // ln2 hi (16 bits): n*hi exact
  r = fmadd(n, -1.428606765330187e-06f, r);           // ln2 lo
  // e^{2|x|} + 1 = p(r) * 2^n + 1 as one multiply-add (kernels are compiled with -ffp-contract=off:
  // written out; the product is exact, so the bits are those of the product and a sum)
  float big = 1.0f - 2.0f / fmadd(poly5(r, kExpPoly), bitsf(fbits(t) << 23), 1.0f);
  float res = fsel(ax < 0.55f, small, big);
  return fsel(x == x, copysign_(res, x), x);
}

TW_CPU_INLINE float erf(float x) {
  using namespace detail;
  float ax = fabs_(x);
  // |x| < 1: x P(x^2) (abs 1.3e-9)
  float z = ax * ax;
  float p = 7.875875049e-05f;
  p = fmadd(p, z, -8.016864283e-04f);
  p = fmadd(p, z, 5.189087423e-03f);
  p = fmadd(p, z, -2.685421201e-02f);
  p = fmadd(p, z, 1.128359472e-01f);
  p = fmadd(p, z, -3.761262667e-01f);
  p = fmadd(p, z, 1.128379166e+00f);
  float small = ax * p;
  // 1 <= |x| <= 4: 1 - exp(-x^2) Q(1/x - 0.625)  (Q = erfc(x) e^{x^2}, rel 5e-9);
  // beyond 4 erf rounds to 1.
  float ac = fsel(ax < 4.0f, ax, 4.0f);
  float uq = 1.0f / ac - 0.625f;
  float q = 2.503254323e-02f;
  q = fmadd(q, uq, -7.090389203e-03f);
  q = fmadd(q, uq, -2.661022418e-02f);
  q = fmadd(q, uq, 4.466035464e-02f);
  q = fmadd(q, uq, -4.697577546e-02f);
  q = fmadd(q, uq, 2.325842892e-02f);
  q = fmadd(q, uq, 4.376821965e-02f);
  q = fmadd(q, uq, -1.723935044e-01f);
  q = fmadd(q, uq, 3.822837582e-01f);
  q = fmadd(q, uq, 3.059529888e-01f);
  float big = fmadd(-tw_cpu::exp(-ac * ac), q, 1.0f);  // 1 - e^{-x^2} Q in one rounding
  float r = fsel(ax < 1.0f, small, big);
  r = fsel(x != x, x, r);
  return copysign_(r, x);
}

namespace detail {
// sin(x) (cos = false) or cos(x) (cos = true) in float32 multiplies, adds and selects only, each
// rounded on its own (no fused multiply-add, no floor): the ascend910b target writes the same
// operations in the same order as Vector instructions (target/ascend/expand_math.cpp), so both
// targets give the same bits. x = n pi + r with n an integer (sin) or an integer + 1/2 (cos),
// sin(x) = (-1)^n sin(r) and cos(x) = (-1)^(m + 1) sin(r) (n = m + 1/2), |r| <= pi/2 (+ rounding):
// - n by the round-to-integer shift 1.5 * 2^23 (x / pi - 1/2 for cos), its parity the same way;
// - r = x - n P1 - n P2 - n P3 - n P4 - n P5 (Cody-Waite): P1..P4 are pi's bits in pieces of 6
//   (truncated, all positive), so for |x| <= 400000 (|2n| < 2^18) each n Pk is exact and each
//   subtraction is exact where it cancels (Sterbenz), else rounds relative to r;
// - sin(r) = r + r^3 Q(r^2), Q of degree 3 fitted (relative error 4.9e-9 on |r| <= pi/2).
// |x| > 400000 (where the pieces' products stop being exact), +-Inf and NaN give NaN; sin(+-0) = +-0.
template <bool kCos>
TW_CPU_INLINE float sin_cos(float x) {
  const float kShift = 12582912.0f;  // 1.5 * 2^23
  float y = fsel(fabs_(x) <= 400000.0f, x, kNaN);
  float t = kCos ? (y * 0x1.45f306p-2f - 0.5f) + kShift : y * 0x1.45f306p-2f + kShift;  // 1 / pi
  float n = t - kShift;
  float h = (n * 0.5f + kShift) - kShift;       // n / 2 rounded to even: n - 2h is -1, 0 or 1
  float par = fabs_(n - h * 2.0f);              // n's parity
  float sign = kCos ? par * 2.0f - 1.0f : 1.0f - par * 2.0f;
  if (kCos) n = n + 0.5f;
  float r = y - n * 0x1.9p+1f;                  // pi in pieces: 3.125
  r = r - n * 0x1.08p-6f;
  r = r - n * 0x1.fp-12f;
  r = r - n * 0x1.a8p-18f;
  r = r - n * 0x1.110b46p-25f;
  float z = r * r;
  float q = 0x1.5e254p-19f * z + -0x1.9f77c8p-13f;
  q = q * z + 0x1.110fp-7f;
  q = q * z + -0x1.55554cp-3f;
  float s = (r + (r * z) * q) * sign;
  return kCos ? s : fsel(x == 0.0f, x, s);
}
}  // namespace detail

TW_CPU_INLINE float sin(float x) { return detail::sin_cos<false>(x); }
TW_CPU_INLINE float cos(float x) { return detail::sin_cos<true>(x); }

}  // namespace tw_cpu
