"""hunt32's int32 findings fixed (h-ascint32, docs/ascend.md "Session 32: hunt32's int32 findings fixed"):
an int32 vector call's scalar past int32 (a let `a = n - s` that widen_scalars computes in int64, a
constant past int32) converted by the simulator as the printed static_cast<int32_t> converts it (F2),
and T.max / T.min / comparisons of int32 data with such a scalar computed as the language does (F3).
Each kernel on cpu and on ascend910b (simulator, checker on: no report), against Python integers / int64
numpy wrapped at the store. All results are exact integers.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

TARGETS = ["cpu", TARGET]
N = 19  # not a multiple of 8 (a tail)
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1
X = np.array([I32_MIN, I32_MIN + 1, -70000, -5, -1, 0, 1, 7, 255, 256, 65535, 70000, 2 ** 24 + 1, 2 ** 30,
              I32_MAX - 1, I32_MAX, -2 ** 30, 100, -256], np.int32)
# (n, s): the let a = n - s just past either end of int32, far past it, inside it
LETS = [(I32_MAX, -5), (I32_MIN, 5), (I32_MAX, I32_MIN), (I32_MIN, I32_MAX), (3, 4), (70000, 1), (I32_MAX, 0)]


def _w32(v):
    return ((np.asarray(v, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31


def _let_kernel(form):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), n: T.int32, s: T.int32, Y: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), "int32")
            y = T.alloc_fragment((N,), "int32")
            T.copy(X[0], x)
            a = n - s
            if form == "fill":
                T.fill(y, a)
            else:
                for j in T.Parallel(N):
                    if form == "store":
                        y[j] = a
                    elif form == "add":  # printed Adds(y, x, static_cast<int32_t>(a)): the wrapped a
                        y[j] = x[j] + a
                    elif form == "and":
                        y[j] = x[j] & a
                    elif form == "xor":
                        y[j] = x[j] ^ a
                    elif form == "max":
                        y[j] = T.max(x[j], a)
                    elif form == "min":
                        y[j] = T.min(a, x[j])
                    elif form == "lt":
                        y[j] = T.where(x[j] < a, 1, 0)
                    elif form == "ge":
                        y[j] = T.where(x[j] >= a, 1, 0)
                    elif form == "eq":
                        y[j] = T.where(x[j] == a, 1, 0)
                    else:  # "gt_left": the scalar on the left
                        y[j] = T.where(a > x[j], 1, 0)
            T.copy(y, Y[0])

    return main


def _want(form, x, a):
    v = x.astype(np.int64)
    return _w32({"fill": 0 * v + a, "store": 0 * v + a, "and": v & a, "xor": v ^ a, "max": np.maximum(v, a),
                 "min": np.minimum(v, a), "lt": v < a, "ge": v >= a, "eq": v == a, "gt_left": a > v}[form])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["fill", "store", "and", "xor", "max", "min", "lt", "ge", "eq", "gt_left"])
def test_let_past_int32_as_an_int32_map_scalar(target, form):
    k = _let_kernel(form)
    for n, s in LETS:
        got = run_on(k, target, [-1], X, n, s)
        np.testing.assert_array_equal(got, _want(form, X, n - s), err_msg=f"{form} a = {n - s}")


def test_comparison_keys_at_the_ends_of_int32():
    """x == a at a = x's own extreme values and one past: the clamped split keeps == exact."""
    k = _let_kernel("eq")
    for n, s in [(I32_MAX, 0), (I32_MIN, 0), (I32_MAX, -1), (I32_MIN, 1)]:
        np.testing.assert_array_equal(run_on(k, TARGET, [-1], X, n, s), _want("eq", X, n - s))


@pytest.mark.parametrize("target", TARGETS)
def test_add_a_let_past_int32_without_a_report(target):
    """x + a with a = 2^31 + 4 and x in [0, 2^31 - 5]: the language's x + a is past int32 and wraps at the
    store; the printed Adds of the wrapped a stays inside int32 on the chip: no `int32 overflow` report."""
    x = np.array([0, 1, 5, 255, 70000, 2 ** 30, I32_MAX - 5, 12345, 3, 2 ** 24 + 1, 9, 11, 13, 100, 2, 4, 6, 8, 10],
                 np.int32)
    np.testing.assert_array_equal(run_on(_let_kernel("add"), target, [-1], x, I32_MAX, -5),
                                  _w32(x.astype(np.int64) + 2 ** 31 + 4))


def _const_kernel(form):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), "int32")
            y = T.alloc_fragment((N,), "int32")
            T.copy(X[0], x)
            for j in T.Parallel(N):
                if form == "max_hi":
                    y[j] = T.max(x[j], 3000000000)
                elif form == "max_lo":
                    y[j] = T.max(x[j], -3000000000)
                elif form == "min_hi":
                    y[j] = T.min(x[j], 3000000000)
                elif form == "min_lo":
                    y[j] = T.min(x[j], -3000000000)
                elif form == "lt_hi":
                    y[j] = T.where(x[j] < 3000000000, 1, 0)
                elif form == "gt_lo":
                    y[j] = T.where(x[j] > -3000000000, 1, 0)
                elif form == "or":  # 0x80000000 as a 32-bit mask
                    y[j] = x[j] | 0x80000000
                elif form == "cast_div":  # wrapped first: int32 on both targets
                    y[j] = T.cast(x[j] << 4, "int32") // 3
                elif form == "shr":  # `>>` wraps its operand first (docs/language.md)
                    y[j] = (x[j] << 8) >> 8
                elif form == "add_shl":  # + - * of an unstored shift, stored: wrapped at the store
                    y[j] = (x[j] << 4) + 7
                elif form == "or_div":  # refused: x | 2^31 is past int32 in int64
                    y[j] = (x[j] | (1 << 31)) // 2
                elif form == "add_lt":  # refused: x + 3000000000 compared unwrapped
                    y[j] = T.where(x[j] + 3000000000 > 0, 1, 0)
                else:  # "max_shl": x * 4 seen unwrapped (exact, or an overflow report)
                    y[j] = T.max(x[j] << 2, 0)
            T.copy(y, Y[0])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["max_hi", "max_lo", "min_hi", "min_lo", "lt_hi", "gt_lo", "or"])
def test_constant_past_int32_in_an_int32_map(target, form):
    v = X.astype(np.int64)
    c = 3000000000
    want = {"max_hi": np.maximum(v, c), "max_lo": np.maximum(v, -c), "min_hi": np.minimum(v, c),
            "min_lo": np.minimum(v, -c), "lt_hi": v < c, "gt_lo": v > -c, "or": v | 0x80000000}[form]
    np.testing.assert_array_equal(run_on(_const_kernel(form), target, [-1], X), _w32(want))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["cast_div", "shr", "add_shl"])
def test_wrapped_shift_forms_agree(target, form):
    v = X.astype(np.int64)
    want = {"cast_div": _w32(v << 4) // 3, "shr": _w32(v << 8) >> 8, "add_shl": (v << 4) + 7}[form]
    np.testing.assert_array_equal(run_on(_const_kernel(form), target, [-1], X), _w32(want))


def test_unwrapped_shift_by_a_constant_is_the_int64_value_or_a_report():
    """`T.max(x << 2, 0)` (the shift seen unwrapped) is x * 4 on ascend910b since session 34 (it was hunt32 F8's
    located error): exact where x * 4 fits in int32, the simulator's `int32 overflow` report where it does not."""
    fits = np.where(np.abs(X.astype(np.int64)) < 2 ** 29, X, 2 ** 29 - 1).astype(np.int32)  # the kernel's N values
    want = np.maximum(fits.astype(np.int64) << 2, 0)
    np.testing.assert_array_equal(run_on(_const_kernel("max_shl"), "cpu", [-1], fits), _w32(want))
    np.testing.assert_array_equal(run_on(_const_kernel("max_shl"), TARGET, [-1], fits), _w32(want))
    prof = tw.compile(_const_kernel("max_shl"), target=TARGET, out_idx=[-1]).profile(X)
    assert any("int32 overflow" in r and "test_ascint32_s32.py" in r for r in prof["reports"]), prof["reports"]


@pytest.mark.parametrize("form", ["or_div", "add_lt"])
def test_unwrapped_value_past_int32_is_a_located_error(form):
    v = X.astype(np.int64)
    want = {"or_div": (v | 2 ** 31) // 2, "add_lt": (v + 3000000000 > 0)}[form]
    np.testing.assert_array_equal(run_on(_const_kernel(form), "cpu", [-1], X), _w32(want))
    with pytest.raises(tw.TilewrightError, match=r"(?s)test_ascint32_s32.py:\d+.*may leave int32.*T.cast"):
        run_on(_const_kernel(form), TARGET, [-1], X)
