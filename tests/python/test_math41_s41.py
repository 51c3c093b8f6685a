"""Session 41, h-math41 (issue 13; docs/ascend.md "Session 41: math calls of one element"): math functions of
one element run on ascend910b where they were located errors. A call of a column's element in a one-row map
(T.exp(w[i, 0]) over T.Parallel(1, C): math40 M4) is computed on a one-element tile (lower_scalar_math); an element
store at a serial loop's row, s[0] = T.tanh(s[0] + x[r, 0]) (hunt40 F4), is a one-element vector map (its elements
start 32 B blocks: rows are padded); an element store whose elements do not start 32 B blocks (s[3] = T.exp(s[2]),
a tensor's element) computes the call on a one-element tile from the element the scalar unit reads. Both targets
against float64 with tests/python's tolerances (tw.testing.TOLERANCES); sin / cos the same bits on both.
"""
import math
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

FNS = {"exp": (T.exp, np.exp), "sin": (T.sin, np.sin), "tanh": (T.tanh, np.tanh)}


def _one_row(fn, C, c, k, dt, let):
    f = FNS[fn][0]

    @T.prim_func
    def main(X: T.Tensor((1, C), dt), Y: T.Tensor((1, C), dt)):
        with T.Kernel(1) as bx:
            w = T.alloc_fragment((1, C), dt)
            y = T.alloc_fragment((1, C), dt)
            T.copy(X, w)
            for i, j in T.Parallel(1, C):
                if let:  # the argument a let of the map (the front end folds the Python bool)
                    a = w[i, c] * k
                    y[i, j] = f(a) + w[i, j]
                else:
                    y[i, j] = f(w[i, c] * k) + w[i, j]
            T.copy(y, Y)
    return main


def _bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


@pytest.mark.parametrize("fn, C, c, k, dt, let", [("exp", 3, 0, 0.7, "float32", False),
                                                  ("sin", 4, 3, 123456.7, "float32", False),
                                                  ("tanh", 5, 2, 1.5, "float16", True),
                                                  ("sin", 17, 16, 0.5, "bfloat16", True)])
def test_call_of_a_column_element_in_a_one_row_map(fn, C, c, k, dt, let):
    # math40 M4 (fuzz scal's one-row column form); ("sin", 4, 3, 123456.7): seed 40208's kernel, which a fix in
    # legalize_vector computed partly on the scalar unit, silently wrong; let: the argument a let of the map
    nd = tw.testing.np_dtype(dt)
    x = (np.random.default_rng(41).uniform(-3, 3, (1, C))).astype(nd)
    got = {t: np.asarray(run_on(_one_row(fn, C, c, k, dt, let), t, [1], x.copy())) for t in ("cpu", TARGET)}
    X = x.astype(np.float64)
    arg = (X[:, c:c + 1] * np.float64(np.float32(k))).astype(np.float32).astype(np.float64)  # the float32 product
    ref = FNS[fn][1](arg) + X
    atol, rtol = tw.testing.TOLERANCES[dt]
    for t, y in got.items():
        tw.testing.assert_close(y.astype(np.float64), ref, atol=atol, rtol=rtol, msg=f"{t} {fn} {dt}")
    if fn == "sin":  # the same float32 operations on both targets
        np.testing.assert_array_equal(_bits(got["cpu"]), _bits(got[TARGET]))


def _running_tanh(dt, R, C):
    @T.prim_func
    def main(X: T.Tensor((R, C), dt), Y: T.Tensor((8,), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), dt)
            s = T.alloc_fragment((8,), dt)
            T.copy(X, x)
            T.clear(s)
            for r in T.serial(R):
                s[0] = T.tanh(s[0] + x[r, 0])
                s[3] = T.exp(x[r, 1] * 0.25)
            T.copy(s, Y)
    return main


@pytest.mark.parametrize("dt, R, C", [("float32", 3, 5), ("float16", 4, 3)])
def test_element_store_at_a_serial_loops_row(dt, R, C):
    # hunt40 F4: x[r, 0] starts a 32 B block for every r (UB rows are padded to 32 B): a one-element vector map;
    # s[3] (12 or 6 bytes into its block) and x[r, 1]: computed on a one-element tile
    nd = tw.testing.np_dtype(dt)
    x = np.random.default_rng(4).uniform(-1, 1, (R, C)).astype(nd)
    got = {t: np.asarray(run_on(_running_tanh(dt, R, C), t, [1], x.copy())) for t in ("cpu", TARGET)}
    rnd = (lambda v: float(np.float32(v))) if dt == "float32" else (lambda v: float(nd.type(v)))
    s0 = 0.0
    for r in range(R):
        s0 = rnd(math.tanh(s0 + float(x[r, 0])))
    ref = np.zeros(8)
    ref[0] = s0
    ref[3] = rnd(math.exp(float(x[R - 1, 1]) * 0.25))
    atol, rtol = tw.testing.TOLERANCES[dt]
    for t, y in got.items():
        tw.testing.assert_close(y.astype(np.float64), ref, atol=atol, rtol=rtol, msg=f"{t} {dt}")


def _unaligned(dt):
    @T.prim_func
    def main(X: T.Tensor((16,), dt), Y: T.Tensor((16,), dt)):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment((16,), dt)
            T.copy(X, s)
            s[3] = T.sin(s[3])
            s[5] = T.rsqrt(X[6]) + s[5]
            s[0] = T.cos(s[1])
            T.copy(s, Y)
    return main


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_element_stores_off_32_byte_blocks(dt):
    nd = tw.testing.np_dtype(dt)
    x = np.random.default_rng(7).uniform(0.25, 3, 16).astype(nd)
    got = {t: np.asarray(run_on(_unaligned(dt), t, [1], x.copy())) for t in ("cpu", TARGET)}
    X = x.astype(np.float64)
    ref = X.copy()
    ref[3] = np.sin(X[3])
    ref[5] = 1 / np.sqrt(X[6]) + X[5]
    ref[0] = np.cos(X[1])
    atol, rtol = tw.testing.TOLERANCES[dt]
    for t, y in got.items():
        tw.testing.assert_close(y.astype(np.float64), ref, atol=atol, rtol=rtol, msg=f"{t} {dt}")
    np.testing.assert_array_equal(_bits(got["cpu"])[[0, 3]], _bits(got[TARGET])[[0, 3]])  # sin, cos
