"""Session 33's hunt (h-hunt33, docs/testing.md "Session 33: hunt33"): session 32's new code (int32 vector-call
scalars past int32, clamped compares / max / min with them, 8-bit arithmetic computed in float32, lets
materialised before a store, if / elif in maps, int64 labels in the one-row pick, wide 16-bit rows) at users'
odd values, each kernel on cpu and on ascend910b (simulator, checker on: `prof["reports"] == []`) against
numpy / Python integers.

Each finding is a strict xfail on the target where it fails (it flips when fixed). All results here are exact
integers, so no tolerance is needed.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

TARGETS = ["cpu", TARGET]


def _w32(v):
    return ((np.asarray(v, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31


def _xfail(target, reason):
    """TARGETS with `target` a strict xfail for `reason` (a finding on that target)."""
    return [pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=reason)) if t == target else t for t in TARGETS]


# --------------------------------------------------------------------------- F1: 8-bit arithmetic past 2^24
R1, C1 = 2, 19


def _int8_to_int32(add):
    @T.prim_func
    def k(X: T.Tensor((R1, C1), "int8"), Z: T.Tensor((R1, C1), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R1, C1), "int8")
            z = T.alloc_fragment((R1, C1), "int32")
            T.copy(X, y)
            for i, j in T.Parallel(R1, C1):
                z[i, j] = y[i, j] * 20 + add  # past 2^24: not exact in float32
            T.copy(z, Z)
    return k


F1 = ("hunt33 F1: int8 map arithmetic past 2^24 stored into an int32 tile (`z = y * 20 + 2**24 + 1`, y int8) is "
      "computed in float32 on ascend910b and rounded silently (16777097 -> 16777096); docs/ascend.md promises a "
      "located error when a bound cannot keep the float32 value below 2^24 (legalize_vector's 8-bit bound)")


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f1_int8_arithmetic_past_2_24_into_int32(target):
    x = (np.arange(R1 * C1).reshape(R1, C1) * 7 % 255 - 127).astype(np.int8)
    add = 2 ** 24 + 1
    z = run_on(_int8_to_int32(add), target, [1], x)
    np.testing.assert_array_equal(z, _w32(x.astype(np.int64) * 20 + add))


# --------------------------------------------------------------------------- F2 / F3: an int64 let's `//`, `%`, nested max / min
N2 = 8
X2 = np.array([-2 ** 31, -70000, -5, -1, 0, 7, 65535, 2 ** 31 - 1], np.int32)


def _let_op(form):
    @T.prim_func
    def main(X: T.Tensor((N2,), "int32"), n: T.int32, s: T.int32, Y: T.Tensor((N2,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N2,), "int32")
            y = T.alloc_fragment((N2,), "int32")
            T.copy(X[0], x)
            a = n - s  # int64 (widen_scalars): past int32 at (2^31 - 1, -5)
            for j in T.Parallel(N2):
                if form == "floordiv":
                    y[j] = x[j] // a
                elif form == "mod":
                    y[j] = x[j] % a
                elif form == "rfloordiv":
                    y[j] = a // T.max(x[j], 1)
                else:  # "clamp": T.max with a, then T.min with n
                    y[j] = T.min(T.max(x[j], a), n)
            T.copy(y, Y[0])
    return main


def _let_op_want(form, n, s):
    a = n - s
    f = {"floordiv": lambda e: e // a, "mod": lambda e: e % a, "rfloordiv": lambda e: a // max(e, 1),
         "clamp": lambda e: min(max(e, a), n)}[form]
    return _w32([f(e) for e in X2.tolist()])


F2 = ("hunt33 F2: `x[j] // a`, `x[j] % a` and `a // x[j]` with an int64 let a = n - s past int32 (2^31 + 4) are "
      "silently wrong on ascend910b (-5 // a gives 0, not -1; -5 % a gives -5, not 2^31 - 1): the divisor is the "
      "static_cast<int32_t> of a (wrapped to -2^31 + 4), no report; cpu divides in int64")
F3 = ("hunt33 F3: `T.min(T.max(x[j], a), n)` with an int64 let a = 2^31 + 4 gives the wrapped a (-2^31 + 4) on "
      "ascend910b, not n (2^31 - 1), silently: h-ascint32 fixed a single T.max / T.min with such a scalar, the "
      "nested one still uses the wrapped a")


@pytest.mark.parametrize("form", ["floordiv", "mod", "rfloordiv"])
@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f2_int64_let_divisor_in_an_int32_map(target, form):
    n, s = 2 ** 31 - 1, -5
    np.testing.assert_array_equal(run_on(_let_op(form), target, [-1], X2, n, s), _let_op_want(form, n, s))


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f3_nested_max_min_with_an_int64_let(target):
    n, s = 2 ** 31 - 1, -5
    np.testing.assert_array_equal(run_on(_let_op("clamp"), target, [-1], X2, n, s), _let_op_want("clamp", n, s))


# --------------------------------------------------------------------------- F4: `a - x[j]` at x = INT32_MIN
def _rsub():
    @T.prim_func
    def main(X: T.Tensor((N2,), "int32"), a: T.int32, Y: T.Tensor((N2,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N2,), "int32")
            y = T.alloc_fragment((N2,), "int32")
            T.copy(X[0], x)
            for j in T.Parallel(N2):
                y[j] = a - x[j]
            T.copy(y, Y[0])
    return main


F4 = ("hunt33 F4: `y[j] = a - x[j]` (int32, a = -1) at x = -2^31 gives 2^31 - 1, inside int32, but ascend910b "
      "prints it as Muls(x, -1) then Adds(a) and the simulator reports `int32 overflow: int32 Muls gives 2147483648`: "
      "a report the program cannot avoid (its value fits); the lowering of a scalar minus a tile could avoid -x")


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f4_scalar_minus_int32_min_is_no_overflow(target):
    x = np.array([-2 ** 31, -2 ** 31 + 1, -5, -1, 0, 7, 100, 2 ** 31 - 1], np.int32)
    a = -1
    np.testing.assert_array_equal(run_on(_rsub(), target, [-1], x, a), _w32(a - x.astype(np.int64)))


# --------------------------------------------------------------------------- F5: a cast of scalar arithmetic plus the map index
def _cast_product_plus_index():
    @T.prim_func
    def k(n: T.int32, m: T.int32, Y: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((4,), "float32")
            for q in T.Parallel(4):
                y[q] = T.cast(n * m + q, "float32")  # n * m is int64 in the language
            T.copy(y, Y)
    return k


F5 = ("hunt33 F5: `y[q] = T.cast(n * m + q, \"float32\")` in a map with int32 parameters whose product leaves "
      "int32 (65536 * 65536) gives q (0, 1, 2, 3) on ascend910b, silently: the product becomes the int32 vector "
      "call's scalar (static_cast<int32_t>, wrapped to 0) and the index add runs in int32; cpu gives 2^32 + q "
      "rounded to float32. `T.cast(n * m, ...)` alone, a serial loop, T.fill and a let are right")


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascwrap33
def test_f5_cast_of_a_wide_product_plus_the_index(target):
    n, m = 65536, 65536
    want = (np.float64(n * m) + np.arange(4)).astype(np.float32)
    np.testing.assert_array_equal(run_on(_cast_product_plus_index(), target, [-1], n, m), want)


# --------------------------------------------------------------------------- F6: int64 labels' error names no working fix
def _label_mask(form):
    @T.prim_func
    def k(X: T.Tensor((4, 37), "float32"), L: T.Tensor((4,), "int64"), Q: T.Tensor((4, 37), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((2, 37), "float32")
            p = T.alloc_fragment((2, 37), "float32")
            lab = T.alloc_fragment((2,), "int64")
            T.copy(L[bx * 2], lab)
            T.copy(X[bx * 2, 0], x)
            for i, j in T.Parallel(2, 37):
                if form == "lt":
                    p[i, j] = T.where(j < lab[i], x[i, j], 0.0)
                else:  # the pick in a two-row map
                    p[i, j] = T.where(j == lab[i], x[i, j], 0.0)
            T.copy(p, Q[bx * 2, 0])
    return k


F6 = ("hunt33 F6: PyTorch's int64 labels in a several-row map (`j == lab[i]`) or in `j < lab[i]` are the error "
      "'conversion from int32 to int64: dav-c220 has no Cast' at the map's line with the hint 'compute the value "
      "in a dtype that has one (float16 / float32), or convert on the cpu target', which is no fix for labels; "
      "`T.copy(L, lab_int32)` is the same error. What works: `lab[i] = T.cast(L[r + i], \"int32\")` in a serial "
      "loop (the CHANGELOG's 'read the labels into an int32 tile'); the hint should say that")


@pytest.mark.xfail(strict=True, reason=F6)
@pytest.mark.parametrize("form", ["lt", "eq"])
def test_f6_int64_label_error_names_the_int32_read(form):
    import tilewright as tw
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(_label_mask(form), target=TARGET, out_idx=[-1])
    assert "T.cast(" in str(e.value) and "int32" in str(e.value).split("hint:")[-1]
