"""The ascend910b simulator's scalar unit computes what the printed AscendC (C++ on the scalar core)
computes (session 28, h-scast17), op family by op family, against the cpu target and numpy / Python.

Each kernel reads a tile element into a scalar (`e = t[i]`, the scalar unit's GetValue), computes on
the scalar unit and stores one element (SetValue); the printed text of the case is checked to be the
C++ that gives that value. One small shape per property; fixed inputs. Simulated results are a
model's, not an NPU's."""
import math

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET, run_checked

TARGETS = ["cpu", TARGET]


def run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


# ---- an integer cast inside an expression wraps (not only at the store) --------------------------

def narrow_kernel(n):
    @T.prim_func
    def narrow(X: T.Tensor((n,), "int32"), Y: T.Tensor((n, 3), "int32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n,), "int32")
            o = T.alloc_fragment((n, 3), "int32")
            T.copy(X, t)
            for i in T.serial(n):
                e = t[i]
                o[i, 0] = T.cast(e, "int8")       # widened back: the int8 value, wrapped
                o[i, 1] = T.cast(e, "uint8") + 0
                v: T.int8 = e + 100               # a let of a narrower type wraps too
                o[i, 2] = v
            T.copy(o, Y)
    return narrow


@pytest.mark.parametrize("target", TARGETS)
def test_integer_cast_in_expression_wraps(target):
    x = np.array([200, -1, 127, 300, -129, 5, 2**31 - 1], np.int32)
    k = tw.compile(narrow_kernel(x.size), out_idx=[1], target=target)
    with np.errstate(over="ignore"):   # 65504 * 3 is inf in float16
        ref = np.stack([x.astype(np.int8), x.astype(np.uint8), (x.astype(np.int64) + 100).astype(np.int8)], 1)
    np.testing.assert_array_equal(run(k, target, x), ref.astype(np.int32))
    if target != "cpu":
        src = k.get_source()
        assert "static_cast<int8_t>(" in src and "static_cast<uint8_t>(" in src, src


# ---- float -> integer: truncation toward zero; out of range / NaN saturate on ascend910b ------------

def f2i_kernel(n):
    @T.prim_func
    def f2i(X: T.Tensor((n,), "float32"), Y: T.Tensor((n, 3), "int32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n,), "float32")
            o = T.alloc_fragment((n, 3), "int32")
            T.copy(X, t)
            for i in T.serial(n):
                e = t[i]
                o[i, 0] = T.cast(e, "int8")
                o[i, 1] = T.cast(e, "uint8")
                o[i, 2] = T.cast(e, "int32")
            T.copy(o, Y)
    return f2i


def test_float_to_int_cast():
    inside = np.array([2.7, -2.7, 0.5, -0.5, 126.9], np.float32)   # every target: truncation
    outside = np.array([300.0, -1.0, np.nan, 3e9, -np.inf], np.float32)  # ascend910b: saturation
    x = np.concatenate([inside, outside])
    k = tw.compile(f2i_kernel(x.size), out_idx=[1], target=TARGET)
    got = run_checked(k, x)
    kc = tw.compile(f2i_kernel(inside.size), out_idx=[1], target="cpu")
    on_cpu = kc(inside)   # -2.7 is outside uint8's range: compared in the int8 / int32 columns only
    np.testing.assert_array_equal(on_cpu[:, [0, 2]], got[: inside.size, [0, 2]])
    np.testing.assert_array_equal(on_cpu[inside > -1, 1], got[: inside.size][inside > -1, 1])
    def sat(v, lo, hi):
        return 0 if math.isnan(v) else int(min(max(math.trunc(v) if math.isfinite(v) else v, lo), hi))
    ref = np.array([[sat(float(v), -128, 127), sat(float(v), 0, 255), sat(float(v), -2**31, 2**31 - 1)] for v in x])
    np.testing.assert_array_equal(got, ref.astype(np.int32))
    src = k.get_source()   # defined C++: tw_f2i, not a bare (undefined out of range) static_cast
    assert "tw_f2i(static_cast<float>(e), -128, 127)" in src and "int64_t tw_f2i(float x" in src, src


# ---- // and % with negative and zero divisors: Python floor semantics, never trapping ---------------

def divmod_kernel(n):
    @T.prim_func
    def divmod_(X: T.Tensor((n, 2), "int32"), Y: T.Tensor((n, 2), "int32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n, 2), "int32")
            o = T.alloc_fragment((n, 2), "int32")
            T.copy(X, t)
            for i in T.serial(n):
                a = t[i, 0]
                d = t[i, 1]
                o[i, 0] = a // d
                o[i, 1] = a % d
            T.copy(o, Y)
    return divmod_


@pytest.mark.parametrize("target", TARGETS)
def test_floor_divmod(target):
    x = np.array([[-7, 2], [7, -2], [-7, -2], [7, 0], [-2**31, -1], [5, 3], [0, -3]], np.int32)
    k = tw.compile(divmod_kernel(x.shape[0]), out_idx=[1], target=target)
    ref = []
    for a, d in x.tolist():
        ref.append([0 if d == 0 else a // d, a if d == 0 else a % d])
    ref = np.array(ref, np.int64).astype(np.int32)   # -2**31 // -1 wraps back into int32
    np.testing.assert_array_equal(run(k, target, x), ref)
    if target != "cpu":
        src = k.get_source()
        assert "tw_floordiv(" in src and "tw_floormod(" in src and "if (b == 0) return 0;" in src, src


def loop_div_kernel(n):
    @T.prim_func
    def loop_div(Y: T.Tensor((n, n), "int32")):
        with T.Kernel(1) as b:
            o = T.alloc_fragment((n, n), "int32")
            for i in T.serial(n):
                for j in T.serial(n):
                    o[i, j] = i // j + i % j    # j == 0: 0 + i, not a trap
            T.copy(o, Y)
    return loop_div


@pytest.mark.parametrize("target", TARGETS)
def test_nonnegative_divisor_that_may_be_zero(target):
    n = 3
    k = tw.compile(loop_div_kernel(n), out_idx=[0], target=target)
    ref = np.array([[(i // j + i % j) if j else i for j in range(n)] for i in range(n)], np.int32)
    np.testing.assert_array_equal(run(k, target), ref)
    if target != "cpu":
        src = k.get_source()   # the plain C++ `/` and `%` would divide by 0 on the chip
        assert "tw_floordiv(" in src and "tw_floormod(" in src, src


# ---- float scalar arithmetic: float32 per operation; a float16 let rounds to float16 -----------------

def float_kernel(n):
    @T.prim_func
    def flt(X: T.Tensor((n, 3), "float32"), Y: T.Tensor((n, 2), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n, 3), "float32")
            o = T.alloc_fragment((n, 2), "float32")
            T.copy(X, t)
            for i in T.serial(n):
                p = t[i, 0]
                q = t[i, 1]
                r = t[i, 2]
                o[i, 0] = (p + q - r) * 1024.0
                h: T.float16 = p * 3.0
                o[i, 1] = h
            T.copy(o, Y)
    return flt


@pytest.mark.parametrize("target", TARGETS)
def test_float_scalar_rounding(target):
    # 1 + 2**-24 is not a float32: (p + q - r) shows whether it was rounded before the subtraction
    # (a sum, not a product: g++ fuses p * q - r into an fma on the cpu target, docs/ascend.md)
    x = np.array([[1.0, 2**-24, 1.0], [1.1, 3.3, 0.25], [65504.0, 1.0, 0.0]], np.float32)
    k = tw.compile(float_kernel(x.shape[0]), out_idx=[1], target=target)
    f32 = np.float32
    with np.errstate(over="ignore"):   # 65504 * 3 is inf in float16
        ref = np.stack([((x[:, 0] + x[:, 1]) - x[:, 2]) * f32(1024.0),
                        (x[:, 0] * f32(3.0)).astype(np.float16).astype(np.float32)], 1)
    np.testing.assert_array_equal(run(k, target, x), ref)


# ---- int32 arithmetic: the targets compute integers in int64 (docs/language.md); the printed C++ -----
# ---- too since session 29 (widen_scalars; /work/scast17-findings.md F1) -------------------------------

def int32_product_kernel(n):
    @T.prim_func
    def product(X: T.Tensor((n, 2), "int32"), Y: T.Tensor((n,), "int32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n, 2), "int32")
            o = T.alloc_fragment((n,), "int32")
            T.copy(X, t)
            for i in T.serial(n):
                a = t[i, 0]
                c = t[i, 1]
                o[i] = (a * c) // 65536
            T.copy(o, Y)
    return product


@pytest.mark.parametrize("target", TARGETS)
def test_int32_product_in_int64(target):
    x = np.array([[100000, 100000], [-7, 3]], np.int32)
    k = tw.compile(int32_product_kernel(x.shape[0]), out_idx=[1], target=target)
    ref = (x[:, 0].astype(np.int64) * x[:, 1]) // 65536
    np.testing.assert_array_equal(run(k, target, x), ref.astype(np.int32))


def test_int32_product_printed_in_int64():
    # scast17 F1, fixed in session 29 (h-int64): widen_scalars casts an operand to int64
    src = tw.compile(int32_product_kernel(2), out_idx=[1], target=TARGET).get_source()
    assert "tw_floordiv((static_cast<int64_t>(a) * static_cast<int64_t>(c)), 65536)" in src, src
