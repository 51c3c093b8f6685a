"""Session 30, h-ascfix (docs/ascend.md "Session 30: the hunter's ascend findings (h-ascfix)"): the ascend910b fixes
of hunt30's F1-F5 and F9 (/work/hunt30-findings.md; their first reproducers are in test_hunt_s30.py), each on cpu and
on ascend910b (simulator, checker on: `prof["reports"] == []`) against numpy, at the smallest shapes that show them.

Tolerances: every result here is exact (selects, maxima, integers; exp is compared with float32's exp to 2 ulp on
ascend910b, whose Exp is the simulator's float32 one)."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]
_LINES = open(__file__).read().splitlines()


def _line(tag):
    return next(i for i, s in enumerate(_LINES, 1) if s.endswith(tag))


def _run(prim, target, out_idx, *args):
    k = tw.compile(prim, target=target, out_idx=out_idx)
    return k(*args) if target == "cpu" else run_checked(k, *args)


# --------------------------------------------------------------------------- F2: a gather index that wrapped
@T.prim_func
def _gather2d(X: T.Tensor((3, 5), "float32"), I: T.Tensor((3, 4), "int32"), Y: T.Tensor((3, 4), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((3, 5), "float32")
        idx = T.alloc_fragment((3, 4), "int32")
        y = T.alloc_fragment((3, 4), "float32")
        T.copy(X, x)
        T.copy(I, idx)
        for i, j in T.Parallel(3, 4):
            y[i, j] = x[i, idx[i, j]]  # @GATHER2D
        T.copy(y, Y)


@T.prim_func
def _flat_gather(X: T.Tensor((6, 3), "float32"), L: T.Tensor((6,), "int32"), Y: T.Tensor((6,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((6, 3), "float32")
        lab = T.alloc_fragment((6,), "int32")
        y = T.alloc_fragment((6,), "float32")
        T.copy(X, x)
        T.copy(L, lab)
        for i in T.Parallel(6):
            y[i] = x[lab[i], 1]  # @FLAT
        T.copy(y, Y)


def test_gather_rows_in_range_and_past_2_30():
    """A row gather: in-range indices give x's elements (the clamp leaves them as they are); 2^30 + 1, -2^30 + 1 and
    -2^31 (which wrapped to a valid byte offset) are the checker's report at the gather's line."""
    x = np.arange(15, dtype=np.float32).reshape(3, 5) * 1.5 - 4
    idx = np.array([[0, 4, 2, 1], [3, 3, 0, 4], [4, 0, 1, 2]], np.int32)
    k = tw.compile(_gather2d, target=TARGET, out_idx=[-1])
    want = np.take_along_axis(x, idx, 1)
    assert np.array_equal(run_checked(k, x, idx), want)
    for bad in (2 ** 30 + 1, -2 ** 30 + 1, -2 ** 31):
        b = idx.copy()
        b[1, 2] = bad
        reports = k.profile(x, b)["reports"]
        assert reports and f":{_line('# @GATHER2D')}: out of bounds" in reports[0], (bad, reports)


def test_flat_gather_row_past_2_30():
    """A flat gather (a 1-D map reading rows of a 2-D tile at data indices): row * pitch wrapped for a row index of
    2^30 (pitch 8); the row is clamped to [-1, rows] first."""
    x = np.arange(18, dtype=np.float32).reshape(6, 3)
    lab = np.array([5, 0, 3, 3, 1, 2], np.int32)
    k = tw.compile(_flat_gather, target=TARGET, out_idx=[-1])
    assert np.array_equal(run_checked(k, x, lab), x[lab, 1])
    for bad in (2 ** 30, 2 ** 29 + 1, -2 ** 31):
        b = lab.copy()
        b[4] = bad
        reports = k.profile(x, b)["reports"]
        assert reports and f":{_line('# @FLAT')}: out of bounds" in reports[0], (bad, reports)


# --------------------------------------------------------------------------- F1: compound values down a column
@T.prim_func
def _column_exp(A: T.Tensor((7,), "float32"), C: T.Tensor((7, 3), "float32")):
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((7,), "float32")
        c = T.alloc_fragment((7, 3), "float32")
        T.copy(A, a)
        T.clear(c)
        for i in T.Parallel(7):
            c[i, 0] = T.exp(a[i]) * 2.0 + 1.0
            c[i, 2] = T.min(a[i] * 2.0, 1.0)
        T.copy(c, C)


@pytest.mark.parametrize("target", TARGETS)
def test_column_store_of_exp_and_min(target):
    a = np.array([-3.0, -0.25, 0.0, 0.5, 1.0, 2.0, np.nan], np.float32)
    got = _run(_column_exp, target, [-1], a)
    want = np.stack([np.exp(a) * 2 + 1, np.zeros(7, np.float32), np.minimum(a * 2, 1)], 1).astype(np.float32)
    assert np.array_equal(got[:, 1:], want[:, 1:], equal_nan=True)
    np.testing.assert_array_max_ulp(got[:6, 0], want[:6, 0], maxulp=2)
    assert np.isnan(got[6, 0])


# --------------------------------------------------------------------------- F5: if / else inside a map
@T.prim_func
def _if_index_2d(X: T.Tensor((2, 5), "float32"), Y: T.Tensor((2, 5), "float32"), Z: T.Tensor((2, 5), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((2, 5), "float32")
        y = T.alloc_fragment((2, 5), "float32")
        T.copy(X, x)
        for i, j in T.Parallel(2, 5):
            if j < 3:
                y[i, j] = x[i, j] * 2.0
            else:
                y[i, j] = -1.0
        for i, j in T.Parallel(2, 5):
            if x[i, j] < 0.0:
                x[i, j] = 0.0
        T.copy(y, Y)
        T.copy(x, Z)


@pytest.mark.parametrize("target", TARGETS)
def test_if_else_on_an_index_and_if_without_else(target):
    """hunt30 F5: `if j < 3: .. else: ..` over a 2-D map, and `if x < 0: x = 0` (no else), were "empty T.Parallel
    map" / "an if inside a map" on ascend910b; serial_maps makes each the select it is."""
    x = np.array([[-1.0, 2.0, -3.0, 4.0, 5.0], [0.5, -0.5, 7.0, -8.0, -0.0]], np.float32)
    y, z = _run(_if_index_2d, target, [-2, -1], x)
    assert np.array_equal(y, np.where(np.arange(5) < 3, x * 2, -1.0))
    assert np.array_equal(z, np.where(x < 0, 0, x)) and np.array_equal(np.signbit(z), np.signbit(np.where(x < 0, 0, x)))


def test_if_free_of_the_map_goes_around_it():
    """An if whose condition does not depend on the map (n a scalar parameter) goes around the map on
    ascend910b (hunt31 F1; session 30: an error naming T.where and the if around the map): as a select it
    would read what cpu skips."""
    @T.prim_func
    def inv_if(W: T.Tensor((8,), "float32"), n: T.int32, Y: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            w = T.alloc_fragment((8,), "float32")
            y = T.alloc_fragment((4,), "float32")
            T.copy(W, w)
            T.clear(y)
            for i in T.Parallel(4):
                if n < 8:
                    y[i] = w[i] + 1.0
            T.copy(y, Y)
    w = np.arange(8, dtype=np.float32)
    k = tw.compile(inv_if, target=TARGET, out_idx=[-1])
    assert run_checked(k, w, 3).tolist() == (w[:4] + 1).tolist()
    assert run_checked(k, w, 9).tolist() == [0.0] * 4


# --------------------------------------------------------------------------- F4: hints for dtypes the Vector core lacks
@pytest.mark.parametrize("dtype,fix", [("bool", 'T.cast(x, "int32")'), ("int64", "int32"), ("float64", "float32")])
def test_vector_dtype_hint_names_the_fix(dtype, fix):
    @T.prim_func
    def arith(A: T.Tensor((4, 8), dtype), C: T.Tensor((4, 8), "int32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((4, 8), dtype)
            c = T.alloc_fragment((4, 8), "int32")
            T.copy(A, a)
            for i, j in T.Parallel(4, 8):
                c[i, j] = a[i, j] + a[i, j] + 1
            T.copy(c, C)
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(arith, target=TARGET, out_idx=[-1])
    assert fix in e.value.hint and "cpu target" in e.value.hint, e.value.hint


# --------------------------------------------------------------------------- F9: the line of a hoisted scalar read
@T.prim_func
def _where_read(W: T.Tensor((8,), "float32"), n: T.int32, Y: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        w = T.alloc_fragment((8,), "float32")
        y = T.alloc_fragment((8,), "float32")
        T.copy(W, w)
        for j in T.Parallel(8):
            y[j] = T.where(n < 8, w[n], 0.0) + w[j]  # @WREAD
        T.copy(y, Y)


def test_hoisted_scalar_read_is_reported_at_its_line():
    """hunt30 F9: the map reads w[n] once, before it, on the scalar unit; n = 8 was reported at the `for` line."""
    w = np.arange(8, dtype=np.float32) * 10
    k = tw.compile(_where_read, target=TARGET, out_idx=[-1])
    assert np.array_equal(run_checked(k, w, 3), w + w[3])
    reports = k.profile(w, 8)["reports"]
    assert reports and f":{_line('# @WREAD')}: out of bounds" in reports[0], reports
