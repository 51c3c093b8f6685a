"""Session 39, h-bounds39: integer + - * and unary - of data past int64 in the generated cpu C++ (first part), and
ascend910b's report of a map's store past its tensor under a condition in int32 / int8 / uint8 / bfloat16 (second).

h-chk38 made such arithmetic wrap modulo 2^64 (uint64_t) where a magnitude bound says it may leave
int64, but took every int64 variable for an index below 2^31: `c * c` of an int64 scalar parameter,
of an int64 read from a tensor (a let) or of a let past int32 (`h = a[0] * a[1]` of int32) stayed C's
undefined signed overflow, and g++ -O3 folded `c * c < 0` to false (x * x is non-negative when
overflow is undefined). Scalar parameters now bound by their dtype's range and lets of data by their
value's bound. Expected values are Python integers wrapped into int64 (docs/language.md: arithmetic
that leaves int64 wraps modulo 2^64), unchecked and under TW_BOUNDS_CHECK=1 (a child process).
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tw_test_util import bounds_checked_child  # noqa: E402

F = 12
C = 3037000500                       # C * C = 2^63 + 145474193: past int64, wraps negative
S = [-3037000501, -2**63]            # S[0] ** 2 wraps negative too; -S[1] wraps to S[1]
A = [1999999999, -2**31 + 1]          # h = A[0] * A[1], about -2^62: int32 values computed in int64


@T.prim_func
def _squares(Sd: T.Tensor((2,), "int64"), Ad: T.Tensor((2,), "int32"), c: T.int64, Y: T.Tensor((F,), "int64")):
    with T.Kernel(1) as bx:
        s = Sd[0]
        t = Sd[1]
        h = Ad[0] * Ad[1]
        q = h // 3
        y = T.alloc_fragment((F,), "int64")
        y[0] = c * c
        y[1] = T.if_then_else(c * c < 0, 1, 0)
        y[2] = s * s
        y[3] = T.if_then_else(s * s < 0, 1, 0)
        y[4] = h * h
        y[5] = T.if_then_else(h * h < 0, 1, 0)
        y[6] = -t
        y[7] = T.if_then_else(-t < 0, 1, 0)
        y[8] = q * Ad[0] * 2           # a quotient of a let past int32 keeps its bound (not int32's)
        y[9] = (Ad[0] * Ad[1] // 3) * Ad[0] * 2
        y[10] = c + t
        y[11] = t - c * 2
        T.copy(y, Y)


def _w64(v):
    return (v + 2**63) % 2**64 - 2**63


def _want():
    c, (s, t), (a0, a1) = C, S, A
    h = a0 * a1
    q = h // 3
    v = [c * c, None, s * s, None, h * h, None, -t, None, q * a0 * 2, (a0 * a1 // 3) * a0 * 2, c + t, t - c * 2]
    for i in (1, 3, 5, 7):
        v[i] = int(_w64(v[i - 1]) < 0)
    return [_w64(x) for x in v]


def _run():
    y = np.zeros(F, np.int64)
    tw.compile(_squares, target="cpu")(np.array(S, np.int64), np.array(A, np.int32), C, y)
    return y.tolist()


def test_data_past_int64_wraps():
    """The forms above against Python integers wrapped into int64; each sign test is true (g++ -O3 folded
    the first three to false before)."""
    assert _want()[1::2][:4] == [1, 1, 1, 1]
    assert _run() == _want()


def test_data_past_int64_wraps_checked(tmp_path):
    """The same under TW_BOUNDS_CHECK=1."""
    out = bounds_checked_child("import sys; sys.path.insert(0, sys.argv[1]); import test_bounds39_s39 as m; "
                               "print(m._run())", tmp_path)
    assert out[-1] == str(_want())


@T.prim_func
def _ascend_squares(Sd: T.Tensor((2,), "int64"), c: T.int64, Y: T.Tensor((8,), "int64")):
    with T.Kernel(1) as bx:
        s = Sd[0]
        y = T.alloc_fragment((8,), "int64")
        for j in T.Parallel(8):
            y[j] = T.if_then_else(c * c < 0, 1, 0) + T.if_then_else(s * s < 0, 2, 0)
        T.copy(y, Y)


def test_ascendc_prints_the_wrap_the_simulator_computes():
    """The AscendC printer names the same data (a scalar parameter, a GetValue): the printed `c * c` wraps on uint64_t
    as the simulator's int64 scalar unit computes it (it was C's signed overflow in the printed kernel)."""
    k = tw.compile(_ascend_squares, target="ascend910b")
    src = k.get_source()
    assert "(uint64_t)c * (uint64_t)c" in src and "(uint64_t)s * (uint64_t)s" in src, src
    y = np.zeros(8, np.int64)
    assert k.profile(np.array([S[0], 0], np.int64), C, y)["reports"] == []
    assert y.tolist() == [3] * 8


@T.prim_func
def _index(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):
    with T.Kernel(2) as bx:
        for i in T.Parallel(8):
            Y[bx * 8 + i] = X[bx * 8 + i] * 2.0


def test_index_arithmetic_keeps_its_form():
    """Block and loop indices stay index arithmetic: no wrapping uint64_t form in the generated code of a plain map."""
    k = tw.compile(_index, target="cpu")
    assert "((int64_t)((uint64_t)" not in k.get_source()
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    k(x, y)
    np.testing.assert_array_equal(y, x * 2)


# --- ascend910b: a map's store under a condition past its tensor, dtypes beyond float16 / float32 (h-bounds38's
# open item): the preload pair now for every dtype; int32's `where` blends with arithmetic (y * (1 - m) + v * m),
# whose Mul / Add lanes the simulator follows where a preloaded lane is multiplied by 1 or added to 0 (written.h).
# The kernels, arguments and numpy results are test_bounds38_s38's.

import test_bounds38_s38 as B38  # noqa: E402

# form, argument, dtype, the index and dimension reported (the index cpu under TW_BOUNDS_CHECK=1 reports)
OUTSIDE = [("data", 3, "int32", 8, 1), ("data", -3, "int32", -1, 1), ("else", 2, "int32", 8, 1),
           ("tensor", 3, "int32", 8, 1), ("data", 3, "int8", 8, 1), ("lower", 3, "bfloat16", 8, 1),
           ("big", 3, "uint8", 10, 1), ("inplace", 3, "int32", 8, 1), ("2d", (2, 0), "int32", 3, 0),
           ("2d", (0, 4), "int8", 8, 1)]
INSIDE = [("data", -2, "int32"), ("data", 0, "int32"), ("both", 3, "int32"), ("else", -3, "int8"),
          ("nested", -1, "bfloat16"), ("inplace", -1, "int32"), ("row", 1, "uint8"), ("2d", (-1, 0), "int32")]


@pytest.mark.parametrize("form, n, dtype, i, d", OUTSIDE, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in OUTSIDE])
def test_store_under_a_condition_past_the_tensor_is_reported(form, n, dtype, i, d):
    y, reports = B38._ascend(form, n, dtype)
    oob = [r for r in reports if "out of bounds" in r]
    assert len(oob) == 1 and f"a T.Parallel map stores index {i} of dimension {d} of tensor Y" in oob[0], reports
    assert y.astype(np.float64).tolist() == B38._want(form, n, dtype).tolist()


@pytest.mark.parametrize("form, n, dtype", INSIDE, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in INSIDE])
def test_stores_inside_are_silent_and_exact(form, n, dtype):
    y, reports = B38._ascend(form, n, dtype)
    assert reports == [] and y.astype(np.float64).tolist() == B38._want(form, n, dtype).tolist(), reports
