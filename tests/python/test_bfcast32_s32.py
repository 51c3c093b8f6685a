"""Session 32 (h-bfcast32): every conversion the language allows, on cpu and ascend910b (simulator, checker on:
`prof["reports"] == []`), against a numpy / ml_dtypes reference of docs/language.md "Dtype conversions and
rounding": float16 / bfloat16 arithmetic is computed in float32 and integer arithmetic exactly (int64), and a
T.cast, an annotated let or a store rounds (nearest even) / wraps / truncates that value once.

Each kernel is one form, for all 36 (source, destination) pairs of float32 / float16 / bfloat16 / int32 / int8 /
uint8 (row 6 * source + destination of Z): the value `x + x` of 32 edge values per source (ties to even of
float16 and bfloat16, NaN, +-inf, -0.0, overflow past float16 / bfloat16 / int8 / uint8, negative to unsigned,
2^24 + 1, 2^25 + 2^17 + 1 (float32 rounds it onto a bfloat16 tie: a second rounding), float32 and float16
subnormals: the simulator keeps them, as the chip's Cast documents no flush)
  a  stored into a tile of the destination dtype (a map), read back as float32
  b  T.cast(T.cast(x + x, dst), "float32") * 2.0 in a map (a cast used in float32 arithmetic)
  c  the same through a let in a T.serial loop (serial_maps makes it a map)
  s  the same on the scalar unit (the loop reads a[N - 1 - i]: not a map), of a T.where holding the let
  e  T.cast(T.cast(T.where(x > 0, x + x, x * 3), dst), "float32") * 2.0 in a map
  d  reduce_max of the converted values (4 x 8 tiles)
A float converted to an integer type is compared only where it is defined (truncated, inside the type's range:
out of range and NaN the targets differ by design, docs/language.md). Found by this probe and fixed: a T.cast to
bfloat16 inside a map did not round on ascend910b (b, c, e, d), int32 -> bfloat16 rounded twice above 2^24 on
ascend910b (a, b, c, s, e, d), a cast of a let in a map on ascend910b was a compile error ('no Cast for int32 ->
int64'), and a cast of a T.where holding a let's float32 / int64 value converted nothing on either target
(test_where_of_a_wide_let_converts).
"""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]
DT = ["float32", "float16", "bfloat16", "int32", "int8", "uint8"]
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int32": np.int32,
      "int8": np.int8, "uint8": np.uint8}
RANGE = {"int32": (-2**31, 2**31 - 1), "int8": (-128, 127), "uint8": (0, 255)}
N = 32
P = 36
FLOATS = [0.0, -0.0, 1.5, -2.5, 2.5, float("inf"), float("-inf"), float("nan"), 65504.0, 32760.0, 1024.5, 1025.5,
          128.5, 128.25, 129.5, 1.00390625, 1.01171875, 3 * 2.0**-26, 2.0**-25, 2.0**-130, 1e-40, 1.7e38, 300.0,
          -1.0, -129.0, 255.5, 127.75, 8388609.0, 16777216.0, 1e10, -0.75, 0.1]
INTS = {  # int32: |x| < 2^28 (x * 3 stays inside int32: a map's int32 overflow is the simulator's report)
    "int32": [0, 1, -1, 127, 128, -128, -129, 255, 256, -300, 2**24 + 1, 2**24 + 3, 2**25 + 2**17 + 1, 65519, 65520,
              32768, 2049, 2051, 257, 259, 2**27 + 1, -2**27 - 3, 50000003, 12345, -77, 2**28 - 1, -2**28,
              -(2**25 + 2**17 + 1), 33554435, 65793, 65792, -65793],
    "int8": [0, 1, -1, 127, -128, 100, -100, 64, -64, 3, 5, 7, -7, 50, -50, 63] * 2,
    "uint8": [0, 1, 255, 128, 127, 200, 64, 100, 3, 5, 250, 129, 63, 90, 254, 2] * 2,
}


def values(src):
    with np.errstate(over="ignore"):
        if src in INTS:
            return np.array(INTS[src], np.int64).astype(NP[src])
        return np.array(FLOATS, np.float64).astype(NP[src])


def wide(x, src, f):
    """f(x) as the language computes it: floats in float32, integers exactly (int64)."""
    if src in INTS:
        return f(x.astype(np.int64))
    with np.errstate(all="ignore"):
        return f(x.astype(np.float32)).astype(np.float32)


def convert(w, dst):
    """w converted to dst, and where that is defined (a float into an integer type: inside its range)."""
    with np.errstate(all="ignore"):
        if dst not in RANGE or w.dtype == np.int64:  # round to nearest even (ml_dtypes: once) / wrap
            return w.astype(NP[dst]), np.ones(w.shape, bool)
        lo, hi = RANGE[dst]
        t = np.trunc(w.astype(np.float64))
        ok = np.isfinite(t) & (t >= lo) & (t <= hi)
        return np.where(ok, t, 0).astype(NP[dst]), ok


def f32(y, scale=1.0):
    with np.errstate(all="ignore"):
        return y.astype(np.float32) * np.float32(scale)


def reference(form, src, dst):
    """Row 6 * src + dst of Z (float32) and where it is defined."""
    x = values(src)
    if form == "e":
        y, ok = convert(wide(x, src, lambda v: np.where(v > 0, v + v, v * 3)), dst)
        return f32(y, 2.0), ok
    y, ok = convert(wide(x, src, lambda v: v + v), dst)
    if form == "a":
        return f32(y), ok
    if form == "d":
        with np.errstate(invalid="ignore"):
            return f32(y).reshape(4, 8).max(axis=1), ok.reshape(4, 8).all(axis=1)
    return f32(y, 2.0), ok


@T.prim_func
def _form_b(F32: T.Tensor((N,), "float32"), F16: T.Tensor((N,), "float16"), BF16: T.Tensor((N,), "bfloat16"), I32: T.Tensor((N,), "int32"), I8: T.Tensor((N,), "int8"), U8: T.Tensor((N,), "uint8"), Z: T.Tensor((P, N), "float32")):
    with T.Kernel(1) as bx:
        f32 = T.alloc_fragment((N,), "float32")
        f16 = T.alloc_fragment((N,), "float16")
        bf16 = T.alloc_fragment((N,), "bfloat16")
        i32 = T.alloc_fragment((N,), "int32")
        i8 = T.alloc_fragment((N,), "int8")
        u8 = T.alloc_fragment((N,), "uint8")
        z = T.alloc_fragment((P, N), "float32")
        T.copy(F32, f32)
        T.copy(F16, f16)
        T.copy(BF16, bf16)
        T.copy(I32, i32)
        T.copy(I8, i8)
        T.copy(U8, u8)
        for i in T.Parallel(N):
            z[0, i] = T.cast(T.cast(f32[i] + f32[i], "float32"), "float32") * 2.0
            z[1, i] = T.cast(T.cast(f32[i] + f32[i], "float16"), "float32") * 2.0
            z[2, i] = T.cast(T.cast(f32[i] + f32[i], "bfloat16"), "float32") * 2.0
            z[3, i] = T.cast(T.cast(f32[i] + f32[i], "int32"), "float32") * 2.0
            z[4, i] = T.cast(T.cast(f32[i] + f32[i], "int8"), "float32") * 2.0
            z[5, i] = T.cast(T.cast(f32[i] + f32[i], "uint8"), "float32") * 2.0
            z[6, i] = T.cast(T.cast(f16[i] + f16[i], "float32"), "float32") * 2.0
            z[7, i] = T.cast(T.cast(f16[i] + f16[i], "float16"), "float32") * 2.0
            z[8, i] = T.cast(T.cast(f16[i] + f16[i], "bfloat16"), "float32") * 2.0
            z[9, i] = T.cast(T.cast(f16[i] + f16[i], "int32"), "float32") * 2.0
            z[10, i] = T.cast(T.cast(f16[i] + f16[i], "int8"), "float32") * 2.0
            z[11, i] = T.cast(T.cast(f16[i] + f16[i], "uint8"), "float32") * 2.0
            z[12, i] = T.cast(T.cast(bf16[i] + bf16[i], "float32"), "float32") * 2.0
            z[13, i] = T.cast(T.cast(bf16[i] + bf16[i], "float16"), "float32") * 2.0
            z[14, i] = T.cast(T.cast(bf16[i] + bf16[i], "bfloat16"), "float32") * 2.0
            z[15, i] = T.cast(T.cast(bf16[i] + bf16[i], "int32"), "float32") * 2.0
            z[16, i] = T.cast(T.cast(bf16[i] + bf16[i], "int8"), "float32") * 2.0
            z[17, i] = T.cast(T.cast(bf16[i] + bf16[i], "uint8"), "float32") * 2.0
            z[18, i] = T.cast(T.cast(i32[i] + i32[i], "float32"), "float32") * 2.0
            z[19, i] = T.cast(T.cast(i32[i] + i32[i], "float16"), "float32") * 2.0
            z[20, i] = T.cast(T.cast(i32[i] + i32[i], "bfloat16"), "float32") * 2.0
            z[21, i] = T.cast(T.cast(i32[i] + i32[i], "int32"), "float32") * 2.0
            z[22, i] = T.cast(T.cast(i32[i] + i32[i], "int8"), "float32") * 2.0
            z[23, i] = T.cast(T.cast(i32[i] + i32[i], "uint8"), "float32") * 2.0
            z[24, i] = T.cast(T.cast(i8[i] + i8[i], "float32"), "float32") * 2.0
            z[25, i] = T.cast(T.cast(i8[i] + i8[i], "float16"), "float32") * 2.0
            z[26, i] = T.cast(T.cast(i8[i] + i8[i], "bfloat16"), "float32") * 2.0
            z[27, i] = T.cast(T.cast(i8[i] + i8[i], "int32"), "float32") * 2.0
            z[28, i] = T.cast(T.cast(i8[i] + i8[i], "int8"), "float32") * 2.0
            z[29, i] = T.cast(T.cast(i8[i] + i8[i], "uint8"), "float32") * 2.0
            z[30, i] = T.cast(T.cast(u8[i] + u8[i], "float32"), "float32") * 2.0
            z[31, i] = T.cast(T.cast(u8[i] + u8[i], "float16"), "float32") * 2.0
            z[32, i] = T.cast(T.cast(u8[i] + u8[i], "bfloat16"), "float32") * 2.0
            z[33, i] = T.cast(T.cast(u8[i] + u8[i], "int32"), "float32") * 2.0
            z[34, i] = T.cast(T.cast(u8[i] + u8[i], "int8"), "float32") * 2.0
            z[35, i] = T.cast(T.cast(u8[i] + u8[i], "uint8"), "float32") * 2.0
        T.copy(z, Z)


@T.prim_func
def _form_a(F32: T.Tensor((N,), "float32"), F16: T.Tensor((N,), "float16"), BF16: T.Tensor((N,), "bfloat16"), I32: T.Tensor((N,), "int32"), I8: T.Tensor((N,), "int8"), U8: T.Tensor((N,), "uint8"), Z: T.Tensor((P, N), "float32")):
    with T.Kernel(1) as bx:
        f32 = T.alloc_fragment((N,), "float32")
        f16 = T.alloc_fragment((N,), "float16")
        bf16 = T.alloc_fragment((N,), "bfloat16")
        i32 = T.alloc_fragment((N,), "int32")
        i8 = T.alloc_fragment((N,), "int8")
        u8 = T.alloc_fragment((N,), "uint8")
        z = T.alloc_fragment((P, N), "float32")
        yf32 = T.alloc_fragment((N,), "float32")
        yf16 = T.alloc_fragment((N,), "float16")
        ybf16 = T.alloc_fragment((N,), "bfloat16")
        yi32 = T.alloc_fragment((N,), "int32")
        yi8 = T.alloc_fragment((N,), "int8")
        yu8 = T.alloc_fragment((N,), "uint8")
        T.copy(F32, f32)
        T.copy(F16, f16)
        T.copy(BF16, bf16)
        T.copy(I32, i32)
        T.copy(I8, i8)
        T.copy(U8, u8)
        for i in T.Parallel(N):
            yf32[i] = f32[i] + f32[i]
            yf16[i] = f32[i] + f32[i]
            ybf16[i] = f32[i] + f32[i]
            yi32[i] = f32[i] + f32[i]
            yi8[i] = f32[i] + f32[i]
            yu8[i] = f32[i] + f32[i]
        for i in T.Parallel(N):
            z[0, i] = yf32[i]
            z[1, i] = yf16[i]
            z[2, i] = ybf16[i]
            z[3, i] = yi32[i]
            z[4, i] = yi8[i]
            z[5, i] = yu8[i]
        for i in T.Parallel(N):
            yf32[i] = f16[i] + f16[i]
            yf16[i] = f16[i] + f16[i]
            ybf16[i] = f16[i] + f16[i]
            yi32[i] = f16[i] + f16[i]
            yi8[i] = f16[i] + f16[i]
            yu8[i] = f16[i] + f16[i]
        for i in T.Parallel(N):
            z[6, i] = yf32[i]
            z[7, i] = yf16[i]
            z[8, i] = ybf16[i]
            z[9, i] = yi32[i]
            z[10, i] = yi8[i]
            z[11, i] = yu8[i]
        for i in T.Parallel(N):
            yf32[i] = bf16[i] + bf16[i]
            yf16[i] = bf16[i] + bf16[i]
            ybf16[i] = bf16[i] + bf16[i]
            yi32[i] = bf16[i] + bf16[i]
            yi8[i] = bf16[i] + bf16[i]
            yu8[i] = bf16[i] + bf16[i]
        for i in T.Parallel(N):
            z[12, i] = yf32[i]
            z[13, i] = yf16[i]
            z[14, i] = ybf16[i]
            z[15, i] = yi32[i]
            z[16, i] = yi8[i]
            z[17, i] = yu8[i]
        for i in T.Parallel(N):
            yf32[i] = i32[i] + i32[i]
            yf16[i] = i32[i] + i32[i]
            ybf16[i] = i32[i] + i32[i]
            yi32[i] = i32[i] + i32[i]
            yi8[i] = i32[i] + i32[i]
            yu8[i] = i32[i] + i32[i]
        for i in T.Parallel(N):
            z[18, i] = yf32[i]
            z[19, i] = yf16[i]
            z[20, i] = ybf16[i]
            z[21, i] = yi32[i]
            z[22, i] = yi8[i]
            z[23, i] = yu8[i]
        for i in T.Parallel(N):
            yf32[i] = i8[i] + i8[i]
            yf16[i] = i8[i] + i8[i]
            ybf16[i] = i8[i] + i8[i]
            yi32[i] = i8[i] + i8[i]
            yi8[i] = i8[i] + i8[i]
            yu8[i] = i8[i] + i8[i]
        for i in T.Parallel(N):
            z[24, i] = yf32[i]
            z[25, i] = yf16[i]
            z[26, i] = ybf16[i]
            z[27, i] = yi32[i]
            z[28, i] = yi8[i]
            z[29, i] = yu8[i]
        for i in T.Parallel(N):
            yf32[i] = u8[i] + u8[i]
            yf16[i] = u8[i] + u8[i]
            ybf16[i] = u8[i] + u8[i]
            yi32[i] = u8[i] + u8[i]
            yi8[i] = u8[i] + u8[i]
            yu8[i] = u8[i] + u8[i]
        for i in T.Parallel(N):
            z[30, i] = yf32[i]
            z[31, i] = yf16[i]
            z[32, i] = ybf16[i]
            z[33, i] = yi32[i]
            z[34, i] = yi8[i]
            z[35, i] = yu8[i]
        T.copy(z, Z)


@T.prim_func
def _form_c(F32: T.Tensor((N,), "float32"), F16: T.Tensor((N,), "float16"), BF16: T.Tensor((N,), "bfloat16"), I32: T.Tensor((N,), "int32"), I8: T.Tensor((N,), "int8"), U8: T.Tensor((N,), "uint8"), Z: T.Tensor((P, N), "float32")):
    with T.Kernel(1) as bx:
        f32 = T.alloc_fragment((N,), "float32")
        f16 = T.alloc_fragment((N,), "float16")
        bf16 = T.alloc_fragment((N,), "bfloat16")
        i32 = T.alloc_fragment((N,), "int32")
        i8 = T.alloc_fragment((N,), "int8")
        u8 = T.alloc_fragment((N,), "uint8")
        z = T.alloc_fragment((P, N), "float32")
        T.copy(F32, f32)
        T.copy(F16, f16)
        T.copy(BF16, bf16)
        T.copy(I32, i32)
        T.copy(I8, i8)
        T.copy(U8, u8)
        for i in T.serial(N):
            wf32 = f32[i] + f32[i]
            z[0, i] = T.cast(T.cast(wf32, "float32"), "float32") * 2.0
            z[1, i] = T.cast(T.cast(wf32, "float16"), "float32") * 2.0
            z[2, i] = T.cast(T.cast(wf32, "bfloat16"), "float32") * 2.0
            z[3, i] = T.cast(T.cast(wf32, "int32"), "float32") * 2.0
            z[4, i] = T.cast(T.cast(wf32, "int8"), "float32") * 2.0
            z[5, i] = T.cast(T.cast(wf32, "uint8"), "float32") * 2.0
            wf16 = f16[i] + f16[i]
            z[6, i] = T.cast(T.cast(wf16, "float32"), "float32") * 2.0
            z[7, i] = T.cast(T.cast(wf16, "float16"), "float32") * 2.0
            z[8, i] = T.cast(T.cast(wf16, "bfloat16"), "float32") * 2.0
            z[9, i] = T.cast(T.cast(wf16, "int32"), "float32") * 2.0
            z[10, i] = T.cast(T.cast(wf16, "int8"), "float32") * 2.0
            z[11, i] = T.cast(T.cast(wf16, "uint8"), "float32") * 2.0
            wbf16 = bf16[i] + bf16[i]
            z[12, i] = T.cast(T.cast(wbf16, "float32"), "float32") * 2.0
            z[13, i] = T.cast(T.cast(wbf16, "float16"), "float32") * 2.0
            z[14, i] = T.cast(T.cast(wbf16, "bfloat16"), "float32") * 2.0
            z[15, i] = T.cast(T.cast(wbf16, "int32"), "float32") * 2.0
            z[16, i] = T.cast(T.cast(wbf16, "int8"), "float32") * 2.0
            z[17, i] = T.cast(T.cast(wbf16, "uint8"), "float32") * 2.0
            wi32 = i32[i] + i32[i]
            z[18, i] = T.cast(T.cast(wi32, "float32"), "float32") * 2.0
            z[19, i] = T.cast(T.cast(wi32, "float16"), "float32") * 2.0
            z[20, i] = T.cast(T.cast(wi32, "bfloat16"), "float32") * 2.0
            z[21, i] = T.cast(T.cast(wi32, "int32"), "float32") * 2.0
            z[22, i] = T.cast(T.cast(wi32, "int8"), "float32") * 2.0
            z[23, i] = T.cast(T.cast(wi32, "uint8"), "float32") * 2.0
            wi8 = i8[i] + i8[i]
            z[24, i] = T.cast(T.cast(wi8, "float32"), "float32") * 2.0
            z[25, i] = T.cast(T.cast(wi8, "float16"), "float32") * 2.0
            z[26, i] = T.cast(T.cast(wi8, "bfloat16"), "float32") * 2.0
            z[27, i] = T.cast(T.cast(wi8, "int32"), "float32") * 2.0
            z[28, i] = T.cast(T.cast(wi8, "int8"), "float32") * 2.0
            z[29, i] = T.cast(T.cast(wi8, "uint8"), "float32") * 2.0
            wu8 = u8[i] + u8[i]
            z[30, i] = T.cast(T.cast(wu8, "float32"), "float32") * 2.0
            z[31, i] = T.cast(T.cast(wu8, "float16"), "float32") * 2.0
            z[32, i] = T.cast(T.cast(wu8, "bfloat16"), "float32") * 2.0
            z[33, i] = T.cast(T.cast(wu8, "int32"), "float32") * 2.0
            z[34, i] = T.cast(T.cast(wu8, "int8"), "float32") * 2.0
            z[35, i] = T.cast(T.cast(wu8, "uint8"), "float32") * 2.0
        T.copy(z, Z)


@T.prim_func
def _form_s(F32: T.Tensor((N,), "float32"), F16: T.Tensor((N,), "float16"), BF16: T.Tensor((N,), "bfloat16"), I32: T.Tensor((N,), "int32"), I8: T.Tensor((N,), "int8"), U8: T.Tensor((N,), "uint8"), Z: T.Tensor((P, N), "float32")):
    with T.Kernel(1) as bx:
        f32 = T.alloc_fragment((N,), "float32")
        f16 = T.alloc_fragment((N,), "float16")
        bf16 = T.alloc_fragment((N,), "bfloat16")
        i32 = T.alloc_fragment((N,), "int32")
        i8 = T.alloc_fragment((N,), "int8")
        u8 = T.alloc_fragment((N,), "uint8")
        z = T.alloc_fragment((P, N), "float32")
        T.copy(F32, f32)
        T.copy(F16, f16)
        T.copy(BF16, bf16)
        T.copy(I32, i32)
        T.copy(I8, i8)
        T.copy(U8, u8)
        for i in T.serial(N):
            wf32 = f32[N - 1 - i] + f32[N - 1 - i]
            z[0, i] = T.cast(T.cast(T.where(wf32 > 0, wf32, wf32), "float32"), "float32") * 2.0
            z[1, i] = T.cast(T.cast(T.where(wf32 > 0, wf32, wf32), "float16"), "float32") * 2.0
            z[2, i] = T.cast(T.cast(T.where(wf32 > 0, wf32, wf32), "bfloat16"), "float32") * 2.0
            z[3, i] = T.cast(T.cast(T.where(wf32 > 0, wf32, wf32), "int32"), "float32") * 2.0
            z[4, i] = T.cast(T.cast(T.where(wf32 > 0, wf32, wf32), "int8"), "float32") * 2.0
            z[5, i] = T.cast(T.cast(T.where(wf32 > 0, wf32, wf32), "uint8"), "float32") * 2.0
            wf16 = f16[N - 1 - i] + f16[N - 1 - i]
            z[6, i] = T.cast(T.cast(T.where(wf16 > 0, wf16, wf16), "float32"), "float32") * 2.0
            z[7, i] = T.cast(T.cast(T.where(wf16 > 0, wf16, wf16), "float16"), "float32") * 2.0
            z[8, i] = T.cast(T.cast(T.where(wf16 > 0, wf16, wf16), "bfloat16"), "float32") * 2.0
            z[9, i] = T.cast(T.cast(T.where(wf16 > 0, wf16, wf16), "int32"), "float32") * 2.0
            z[10, i] = T.cast(T.cast(T.where(wf16 > 0, wf16, wf16), "int8"), "float32") * 2.0
            z[11, i] = T.cast(T.cast(T.where(wf16 > 0, wf16, wf16), "uint8"), "float32") * 2.0
            wbf16 = bf16[N - 1 - i] + bf16[N - 1 - i]
            z[12, i] = T.cast(T.cast(T.where(wbf16 > 0, wbf16, wbf16), "float32"), "float32") * 2.0
            z[13, i] = T.cast(T.cast(T.where(wbf16 > 0, wbf16, wbf16), "float16"), "float32") * 2.0
            z[14, i] = T.cast(T.cast(T.where(wbf16 > 0, wbf16, wbf16), "bfloat16"), "float32") * 2.0
            z[15, i] = T.cast(T.cast(T.where(wbf16 > 0, wbf16, wbf16), "int32"), "float32") * 2.0
            z[16, i] = T.cast(T.cast(T.where(wbf16 > 0, wbf16, wbf16), "int8"), "float32") * 2.0
            z[17, i] = T.cast(T.cast(T.where(wbf16 > 0, wbf16, wbf16), "uint8"), "float32") * 2.0
            wi32 = i32[N - 1 - i] + i32[N - 1 - i]
            z[18, i] = T.cast(T.cast(T.where(wi32 > 0, wi32, wi32), "float32"), "float32") * 2.0
            z[19, i] = T.cast(T.cast(T.where(wi32 > 0, wi32, wi32), "float16"), "float32") * 2.0
            z[20, i] = T.cast(T.cast(T.where(wi32 > 0, wi32, wi32), "bfloat16"), "float32") * 2.0
            z[21, i] = T.cast(T.cast(T.where(wi32 > 0, wi32, wi32), "int32"), "float32") * 2.0
            z[22, i] = T.cast(T.cast(T.where(wi32 > 0, wi32, wi32), "int8"), "float32") * 2.0
            z[23, i] = T.cast(T.cast(T.where(wi32 > 0, wi32, wi32), "uint8"), "float32") * 2.0
            wi8 = i8[N - 1 - i] + i8[N - 1 - i]
            z[24, i] = T.cast(T.cast(T.where(wi8 > 0, wi8, wi8), "float32"), "float32") * 2.0
            z[25, i] = T.cast(T.cast(T.where(wi8 > 0, wi8, wi8), "float16"), "float32") * 2.0
            z[26, i] = T.cast(T.cast(T.where(wi8 > 0, wi8, wi8), "bfloat16"), "float32") * 2.0
            z[27, i] = T.cast(T.cast(T.where(wi8 > 0, wi8, wi8), "int32"), "float32") * 2.0
            z[28, i] = T.cast(T.cast(T.where(wi8 > 0, wi8, wi8), "int8"), "float32") * 2.0
            z[29, i] = T.cast(T.cast(T.where(wi8 > 0, wi8, wi8), "uint8"), "float32") * 2.0
            wu8 = u8[N - 1 - i] + u8[N - 1 - i]
            z[30, i] = T.cast(T.cast(T.where(wu8 > 0, wu8, wu8), "float32"), "float32") * 2.0
            z[31, i] = T.cast(T.cast(T.where(wu8 > 0, wu8, wu8), "float16"), "float32") * 2.0
            z[32, i] = T.cast(T.cast(T.where(wu8 > 0, wu8, wu8), "bfloat16"), "float32") * 2.0
            z[33, i] = T.cast(T.cast(T.where(wu8 > 0, wu8, wu8), "int32"), "float32") * 2.0
            z[34, i] = T.cast(T.cast(T.where(wu8 > 0, wu8, wu8), "int8"), "float32") * 2.0
            z[35, i] = T.cast(T.cast(T.where(wu8 > 0, wu8, wu8), "uint8"), "float32") * 2.0
        T.copy(z, Z)


@T.prim_func
def _form_e(F32: T.Tensor((N,), "float32"), F16: T.Tensor((N,), "float16"), BF16: T.Tensor((N,), "bfloat16"), I32: T.Tensor((N,), "int32"), I8: T.Tensor((N,), "int8"), U8: T.Tensor((N,), "uint8"), Z: T.Tensor((P, N), "float32")):
    with T.Kernel(1) as bx:
        f32 = T.alloc_fragment((N,), "float32")
        f16 = T.alloc_fragment((N,), "float16")
        bf16 = T.alloc_fragment((N,), "bfloat16")
        i32 = T.alloc_fragment((N,), "int32")
        i8 = T.alloc_fragment((N,), "int8")
        u8 = T.alloc_fragment((N,), "uint8")
        z = T.alloc_fragment((P, N), "float32")
        T.copy(F32, f32)
        T.copy(F16, f16)
        T.copy(BF16, bf16)
        T.copy(I32, i32)
        T.copy(I8, i8)
        T.copy(U8, u8)
        for i in T.Parallel(N):
            z[0, i] = T.cast(T.cast(T.where(f32[i] > 0, f32[i] + f32[i], f32[i] * 3), "float32"), "float32") * 2.0
            z[1, i] = T.cast(T.cast(T.where(f32[i] > 0, f32[i] + f32[i], f32[i] * 3), "float16"), "float32") * 2.0
            z[2, i] = T.cast(T.cast(T.where(f32[i] > 0, f32[i] + f32[i], f32[i] * 3), "bfloat16"), "float32") * 2.0
            z[3, i] = T.cast(T.cast(T.where(f32[i] > 0, f32[i] + f32[i], f32[i] * 3), "int32"), "float32") * 2.0
            z[4, i] = T.cast(T.cast(T.where(f32[i] > 0, f32[i] + f32[i], f32[i] * 3), "int8"), "float32") * 2.0
            z[5, i] = T.cast(T.cast(T.where(f32[i] > 0, f32[i] + f32[i], f32[i] * 3), "uint8"), "float32") * 2.0
            z[6, i] = T.cast(T.cast(T.where(f16[i] > 0, f16[i] + f16[i], f16[i] * 3), "float32"), "float32") * 2.0
            z[7, i] = T.cast(T.cast(T.where(f16[i] > 0, f16[i] + f16[i], f16[i] * 3), "float16"), "float32") * 2.0
            z[8, i] = T.cast(T.cast(T.where(f16[i] > 0, f16[i] + f16[i], f16[i] * 3), "bfloat16"), "float32") * 2.0
            z[9, i] = T.cast(T.cast(T.where(f16[i] > 0, f16[i] + f16[i], f16[i] * 3), "int32"), "float32") * 2.0
            z[10, i] = T.cast(T.cast(T.where(f16[i] > 0, f16[i] + f16[i], f16[i] * 3), "int8"), "float32") * 2.0
            z[11, i] = T.cast(T.cast(T.where(f16[i] > 0, f16[i] + f16[i], f16[i] * 3), "uint8"), "float32") * 2.0
            z[12, i] = T.cast(T.cast(T.where(bf16[i] > 0, bf16[i] + bf16[i], bf16[i] * 3), "float32"), "float32") * 2.0
            z[13, i] = T.cast(T.cast(T.where(bf16[i] > 0, bf16[i] + bf16[i], bf16[i] * 3), "float16"), "float32") * 2.0
            z[14, i] = T.cast(T.cast(T.where(bf16[i] > 0, bf16[i] + bf16[i], bf16[i] * 3), "bfloat16"), "float32") * 2.0
            z[15, i] = T.cast(T.cast(T.where(bf16[i] > 0, bf16[i] + bf16[i], bf16[i] * 3), "int32"), "float32") * 2.0
            z[16, i] = T.cast(T.cast(T.where(bf16[i] > 0, bf16[i] + bf16[i], bf16[i] * 3), "int8"), "float32") * 2.0
            z[17, i] = T.cast(T.cast(T.where(bf16[i] > 0, bf16[i] + bf16[i], bf16[i] * 3), "uint8"), "float32") * 2.0
            z[18, i] = T.cast(T.cast(T.where(i32[i] > 0, i32[i] + i32[i], i32[i] * 3), "float32"), "float32") * 2.0
            z[19, i] = T.cast(T.cast(T.where(i32[i] > 0, i32[i] + i32[i], i32[i] * 3), "float16"), "float32") * 2.0
            z[20, i] = T.cast(T.cast(T.where(i32[i] > 0, i32[i] + i32[i], i32[i] * 3), "bfloat16"), "float32") * 2.0
            z[21, i] = T.cast(T.cast(T.where(i32[i] > 0, i32[i] + i32[i], i32[i] * 3), "int32"), "float32") * 2.0
            z[22, i] = T.cast(T.cast(T.where(i32[i] > 0, i32[i] + i32[i], i32[i] * 3), "int8"), "float32") * 2.0
            z[23, i] = T.cast(T.cast(T.where(i32[i] > 0, i32[i] + i32[i], i32[i] * 3), "uint8"), "float32") * 2.0
            z[24, i] = T.cast(T.cast(T.where(i8[i] > 0, i8[i] + i8[i], i8[i] * 3), "float32"), "float32") * 2.0
            z[25, i] = T.cast(T.cast(T.where(i8[i] > 0, i8[i] + i8[i], i8[i] * 3), "float16"), "float32") * 2.0
            z[26, i] = T.cast(T.cast(T.where(i8[i] > 0, i8[i] + i8[i], i8[i] * 3), "bfloat16"), "float32") * 2.0
            z[27, i] = T.cast(T.cast(T.where(i8[i] > 0, i8[i] + i8[i], i8[i] * 3), "int32"), "float32") * 2.0
            z[28, i] = T.cast(T.cast(T.where(i8[i] > 0, i8[i] + i8[i], i8[i] * 3), "int8"), "float32") * 2.0
            z[29, i] = T.cast(T.cast(T.where(i8[i] > 0, i8[i] + i8[i], i8[i] * 3), "uint8"), "float32") * 2.0
            z[30, i] = T.cast(T.cast(T.where(u8[i] > 0, u8[i] + u8[i], u8[i] * 3), "float32"), "float32") * 2.0
            z[31, i] = T.cast(T.cast(T.where(u8[i] > 0, u8[i] + u8[i], u8[i] * 3), "float16"), "float32") * 2.0
            z[32, i] = T.cast(T.cast(T.where(u8[i] > 0, u8[i] + u8[i], u8[i] * 3), "bfloat16"), "float32") * 2.0
            z[33, i] = T.cast(T.cast(T.where(u8[i] > 0, u8[i] + u8[i], u8[i] * 3), "int32"), "float32") * 2.0
            z[34, i] = T.cast(T.cast(T.where(u8[i] > 0, u8[i] + u8[i], u8[i] * 3), "int8"), "float32") * 2.0
            z[35, i] = T.cast(T.cast(T.where(u8[i] > 0, u8[i] + u8[i], u8[i] * 3), "uint8"), "float32") * 2.0
        T.copy(z, Z)


@T.prim_func
def _form_d(F32: T.Tensor((4, 8), "float32"), F16: T.Tensor((4, 8), "float16"), BF16: T.Tensor((4, 8), "bfloat16"), I32: T.Tensor((4, 8), "int32"), I8: T.Tensor((4, 8), "int8"), U8: T.Tensor((4, 8), "uint8"), Z: T.Tensor((P, 4), "float32")):
    with T.Kernel(1) as bx:
        f32 = T.alloc_fragment((4, 8), "float32")
        f16 = T.alloc_fragment((4, 8), "float16")
        bf16 = T.alloc_fragment((4, 8), "bfloat16")
        i32 = T.alloc_fragment((4, 8), "int32")
        i8 = T.alloc_fragment((4, 8), "int8")
        u8 = T.alloc_fragment((4, 8), "uint8")
        z = T.alloc_fragment((P, 4), "float32")
        f = T.alloc_fragment((4, 8), "float32")
        r = T.alloc_fragment((4,), "float32")
        T.copy(F32, f32)
        T.copy(F16, f16)
        T.copy(BF16, bf16)
        T.copy(I32, i32)
        T.copy(I8, i8)
        T.copy(U8, u8)
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f32[i, j] + f32[i, j], "float32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[0, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f32[i, j] + f32[i, j], "float16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[1, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f32[i, j] + f32[i, j], "bfloat16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[2, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f32[i, j] + f32[i, j], "int32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[3, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f32[i, j] + f32[i, j], "int8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[4, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f32[i, j] + f32[i, j], "uint8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[5, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f16[i, j] + f16[i, j], "float32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[6, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f16[i, j] + f16[i, j], "float16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[7, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f16[i, j] + f16[i, j], "bfloat16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[8, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f16[i, j] + f16[i, j], "int32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[9, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f16[i, j] + f16[i, j], "int8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[10, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(f16[i, j] + f16[i, j], "uint8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[11, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(bf16[i, j] + bf16[i, j], "float32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[12, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(bf16[i, j] + bf16[i, j], "float16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[13, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(bf16[i, j] + bf16[i, j], "bfloat16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[14, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(bf16[i, j] + bf16[i, j], "int32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[15, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(bf16[i, j] + bf16[i, j], "int8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[16, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(bf16[i, j] + bf16[i, j], "uint8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[17, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i32[i, j] + i32[i, j], "float32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[18, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i32[i, j] + i32[i, j], "float16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[19, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i32[i, j] + i32[i, j], "bfloat16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[20, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i32[i, j] + i32[i, j], "int32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[21, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i32[i, j] + i32[i, j], "int8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[22, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i32[i, j] + i32[i, j], "uint8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[23, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i8[i, j] + i8[i, j], "float32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[24, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i8[i, j] + i8[i, j], "float16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[25, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i8[i, j] + i8[i, j], "bfloat16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[26, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i8[i, j] + i8[i, j], "int32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[27, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i8[i, j] + i8[i, j], "int8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[28, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(i8[i, j] + i8[i, j], "uint8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[29, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(u8[i, j] + u8[i, j], "float32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[30, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(u8[i, j] + u8[i, j], "float16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[31, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(u8[i, j] + u8[i, j], "bfloat16"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[32, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(u8[i, j] + u8[i, j], "int32"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[33, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(u8[i, j] + u8[i, j], "int8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[34, i] = r[i]
        for i, j in T.Parallel(4, 8):
            f[i, j] = T.cast(T.cast(u8[i, j] + u8[i, j], "uint8"), "float32")
        T.reduce_max(f, r, dim=1)
        for i in T.Parallel(4):
            z[35, i] = r[i]
        T.copy(z, Z)


FORMS = {"a": _form_a, "b": _form_b, "c": _form_c, "s": _form_s, "e": _form_e, "d": _form_d}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", list(FORMS))
def test_conversions(form, target):
    args = [values(s).reshape(4, 8) if form == "d" else values(s) for s in DT]
    if form == "s":  # the kernel reads a[N - 1 - i]
        args = [a[::-1].copy() for a in args]
    k = tw.compile(FORMS[form], target=target, out_idx=[-1])
    z = k(*args) if target == "cpu" else run_checked(k, *args)
    bad = []
    for a, src in enumerate(DT):
        for b, dst in enumerate(DT):
            want, ok = reference(form, src, dst)
            got = z[6 * a + b].astype(np.float64)
            w = want.astype(np.float64)
            same = ((got == w) & (np.signbit(got) == np.signbit(w))) | (np.isnan(got) & np.isnan(w)) | ~ok
            bad += [f"{src} -> {dst} [{i}]: {got[i]!r}, want {w[i]!r}" for i in np.nonzero(~same)[0]]
    assert not bad, "\n".join(bad[:40])


@T.prim_func
def _wide_lets(A: T.Tensor((16,), "float16"), B: T.Tensor((16,), "bfloat16"), U: T.Tensor((32,), "uint8"),
               I: T.Tensor((16,), "int32"), Z: T.Tensor((11,), "float32")):
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((16,), "float16")
        b = T.alloc_fragment((16,), "bfloat16")
        u = T.alloc_fragment((32,), "uint8")
        n = T.alloc_fragment((16,), "int32")
        z = T.alloc_fragment((11,), "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.copy(U, u)
        T.copy(I, n)
        h = a[0] * a[1]  # 90000: the let holds float32
        g = b[0] + b[1]  # 257
        w = u[0] - u[1]  # -247: the let holds int64
        z[0] = T.cast(T.where(h > 0, h, a[2]), "float16")  # rounded: inf
        z[1] = T.cast(T.where(g > 0, g, b[2]), "bfloat16")  # 256
        z[2] = T.cast(T.where(w < 0, w, 0), "uint8")  # 9
        z[3] = T.cast(T.where(g > 0, T.where(h > 0, g, g), b[2]), "bfloat16")  # nested: 256
        hb: T.bfloat16 = T.where(h > 0, h, a[2])  # an annotated let converts the same way: 90112
        z[4] = hb
        z[5] = T.where(h > 0, h, a[2])  # no conversion: 90000
        z[6] = T.cast(n[0], "bfloat16")  # the scalar unit rounds once: 2^25 + 2^18
        z[7] = T.cast(n[1], "bfloat16")  # -(2^25 + 2^18)
        z[8] = T.cast(n[2], "bfloat16")  # 2^16 + 257: 66048
        z[9] = T.cast(T.where(w > 0, w, n[3]), "int8")  # 65921 wraps: -127
        q = n[4] * n[5] + n[6]  # int64 2^60 + 2^52 + 1: through double, 2^60 + 2^52, a tie, then 2^60
        z[10] = T.cast(q, "bfloat16")  # rounded once: 2^60 + 2^53
        T.copy(z, Z)


@pytest.mark.parametrize("target", TARGETS)
def test_where_of_a_wide_let_converts(target):
    a = np.zeros(16, np.float16)
    a[0], a[1], a[2] = 300, 300, 1
    b = np.zeros(16, ml_dtypes.bfloat16)
    b[0], b[1], b[2] = 256, 1, 3
    u = np.zeros(32, np.uint8)
    u[0], u[1] = 3, 250
    n = np.zeros(16, np.int32)
    n[:7] = [2**25 + 2**17 + 1, -(2**25 + 2**17 + 1), 2**16 + 257, 65921, 2**30, 2**30 + 2**22, 1]
    k = tw.compile(_wide_lets, target=target, out_idx=[-1])
    z = k(a, b, u, n) if target == "cpu" else run_checked(k, a, b, u, n)
    assert z.tolist() == [float("inf"), 256.0, 9.0, 256.0, 90112.0, 90000.0, 2.0**25 + 2.0**18,
                          -(2.0**25 + 2.0**18), 66048.0, -127.0, 2.0**60 + 2.0**53]
