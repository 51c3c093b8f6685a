"""Session 31's hunt (h-hunt31, docs/testing.md "Session 31: session 30's new paths at users' shapes
(h-hunt31)"): session 30's new code (dim-0 sums carried across row groups and the online logsumexp over
dim 0, one-row tiles' vector calls along the row, `x[i, lab[i]]` in row groups, if / else in a map as
T.where, integer abs, relational bounds for int64 widening, relayed sync flags, the uninitialised-read
report) reached the way a user writes kernels: odd row counts around the row-group size, wide rows with
odd tails, NaN / inf / -0.0, labels at 0 / last / -100, run-time loop bounds near the int32 limits,
T.Pipelined loops of 0..3 trips; each on cpu and on ascend910b (simulator, checker on:
`prof["reports"] == []`) against numpy / Python integers.

Findings (F1.. of /work/hunt31-findings.md) are strict xfails until the code they name is fixed (F1, F3, F5, F6,
F8 and F9 fixed by h-ascfix31, F2 and F7 by h-sem31: plain tests now): F1 an if / else in
a map evaluates a gather or shifted read it guards on ascend910b (serial_maps' T.where); F2 a scalar let converted to
its dtype on ascend910b only; F3 int64 scalar arguments past 2^53 rounded by the simulator; F5 a flat gather's column
past the row unreported; F6 abs of a uint8 difference in an element store; F7 `T.cast` to an expression's own dtype
converts nothing (both targets); F8 an if without else hides unwritten elements from the uninitialised-read report.
The forms docs/language.md names instead (select the index; cast an operand wider first) pass on both targets.
Tolerances: every result here is exact (integers, selects, sums of small halves), except the
cross-entropy cases (float32 log-sum-exp against float64: 1e-5 relative, 1e-5 absolute).
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
_run = run_on


def _w32(v):
    return ((v + 2 ** 31) % 2 ** 32) - 2 ** 31


# --------------------------------------------------------------------------- F1: if / else around a gather
XN, XB = 37, 4


@T.prim_func
def _xent_ignore(X: T.Tensor((6, XN), "float32"), L: T.Tensor((6,), "int32"), Y: T.Tensor((6,), "float32")):
    with T.Kernel(T.ceildiv(6, XB)) as bx:
        x = T.alloc_fragment((XB, XN), "float32")
        e = T.alloc_fragment((XB, XN), "float32")
        lab = T.alloc_fragment((XB,), "int32")
        mx = T.alloc_fragment((XB,), "float32")
        s = T.alloc_fragment((XB,), "float32")
        T.copy(X[bx * XB, 0], x)
        T.copy(L[bx * XB], lab)
        T.reduce_max(x, mx, dim=1)
        for i, j in T.Parallel(XB, XN):
            e[i, j] = T.exp(x[i, j] - mx[i])
        T.reduce_sum(e, s, dim=1)
        for i in T.Parallel(XB):
            if lab[i] == -100:  # PyTorch's ignore_index: cpu never reads x[i, -100]
                s[i] = 0.0
            else:
                s[i] = T.log(s[i]) + mx[i] - x[i, lab[i]]
        T.copy(s, Y[bx * XB])


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascfix31
def test_f1_guarded_gather_in_an_if_else(target):
    """cross_entropy with ignore_index = -100 (rows 1 and 4), labels at column 0 and the last column."""
    x = np.random.default_rng(3).standard_normal((6, XN)).astype(np.float32)
    lab = np.array([0, -100, XN - 1, 5, -100, 3], np.int32)
    y = _run(_xent_ignore, target, [-1], x, lab)
    np.testing.assert_allclose(y, _xent_ignore_ref(x, lab), rtol=1e-5, atol=1e-5)


@T.prim_func
def _xent_ignore_clamped(X: T.Tensor((6, XN), "float32"), L: T.Tensor((6,), "int32"), Y: T.Tensor((6,), "float32")):
    with T.Kernel(T.ceildiv(6, XB)) as bx:
        x = T.alloc_fragment((XB, XN), "float32")
        e = T.alloc_fragment((XB, XN), "float32")
        lab = T.alloc_fragment((XB,), "int32")
        mx = T.alloc_fragment((XB,), "float32")
        s = T.alloc_fragment((XB,), "float32")
        T.copy(X[bx * XB, 0], x)
        T.copy(L[bx * XB], lab)
        T.reduce_max(x, mx, dim=1)
        for i, j in T.Parallel(XB, XN):
            e[i, j] = T.exp(x[i, j] - mx[i])
        T.reduce_sum(e, s, dim=1)
        for i in T.Parallel(XB):  # the index selected, then the value: no read outside the row on either target
            s[i] = T.where(lab[i] == -100, 0.0, T.log(s[i]) + mx[i] - x[i, T.max(lab[i], 0)])
        T.copy(s, Y[bx * XB])


def _xent_ignore_ref(x, lab):
    x64 = x.astype(np.float64)
    m = x64.max(1)
    pick = x64[np.arange(len(lab)), np.where(lab < 0, 0, lab)]
    return np.where(lab == -100, 0.0, np.log(np.exp(x64 - m[:, None]).sum(1)) + m - pick)


@pytest.mark.parametrize("target", TARGETS)
def test_f1_the_documented_form_selects_the_index(target):
    """docs/language.md "Gathers": the form that runs on both targets today."""
    x = np.random.default_rng(3).standard_normal((6, XN)).astype(np.float32)
    lab = np.array([0, -100, XN - 1, 5, -100, 3], np.int32)
    y = _run(_xent_ignore_clamped, target, [-1], x, lab)
    np.testing.assert_allclose(y, _xent_ignore_ref(x, lab), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- F2: an int32 let leaving int32
@T.prim_func
def _let_i32(A: T.Tensor((4,), "int32"), n: T.int32, B: T.Tensor((4,), "int32")):
    with T.Kernel(1) as bx:
        t = T.alloc_fragment((4,), "int32")
        T.copy(A, t)
        a = n - 100
        t[0] = a // 2
        t[1] = (n - 100) // 2
        t[2] = abs(a)
        T.copy(t, B)


@pytest.mark.parametrize("target", [
    "cpu",
    TARGET,  # hunt31 F2, fixed by h-sem31 (a let whose value may leave its dtype gets an int64 variable)
])
def test_f2_int32_let_leaving_int32(target):
    """Integer scalar arithmetic is int64 until a store (docs/language.md "Operators"): a let is no store."""
    n = -2 ** 31
    got = _run(_let_i32, target, [-1], np.zeros(4, np.int32), n)
    a = n - 100
    assert got.tolist() == [_w32(a // 2), _w32(a // 2), _w32(abs(a)), 0]


@T.prim_func
def _let_u8(U: T.Tensor((32,), "uint8"), Z: T.Tensor((3,), "int32")):
    with T.Kernel(1) as bx:
        u = T.alloc_fragment((32,), "uint8")
        z = T.alloc_fragment((3,), "int32")
        T.copy(U, u)
        d = u[0] - u[1]
        e = u[0] * u[1]
        z[0] = d
        z[1] = e
        z[2] = T.where(d < 0, 1, 0)
        T.copy(z, Z)


@pytest.mark.parametrize("target", [
    "cpu",
    TARGET,  # hunt31 F2, fixed by h-sem31
])
def test_f2_uint8_let_of_a_difference(target):
    u = np.zeros(32, np.uint8)
    u[0], u[1] = 3, 250
    assert _run(_let_u8, target, [-1], u).tolist() == [-247, 750, 1]


# F3 (int64 arguments past 2^53) and F6 (abs of a uint8 difference): their reproducers are
# test_ascfix_s31.py's tests of the fix (the same values and more).


# --------------------------------------------------------------------------- F5: a flat gather's column past the row
@T.prim_func
def _pick_col(X: T.Tensor((4, 8), "float32"), I: T.Tensor((4,), "int32"), Y: T.Tensor((4,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((4, 8), "float32")
        ix = T.alloc_fragment((4,), "int32")
        y = T.alloc_fragment((4,), "float32")
        T.copy(X, x)
        T.copy(I, ix)
        for i in T.Parallel(4):
            y[i] = x[i, ix[i]]  # the cross_entropy pick
        T.copy(y, Y)


def test_f5_flat_gather_in_range_both_targets():
    """Labels at column 0 and the last column: x[i, ix[i]] on both targets."""
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    ix = np.array([0, 7, 3, 7], np.int32)
    for target in TARGETS:
        assert _run(_pick_col, target, [-1], x, ix).tolist() == x[np.arange(4), ix].tolist()


@pytest.mark.parametrize("bad", [[8, 0, 0, 0], [0, -1, 0, 0]])
def test_f5_flat_gather_column_past_the_row_is_reported(bad):
    """cpu: the documented error at the line; ascend910b: x[0, 8] read x[1, 0] (and x[1, -1] x[0, 7]) with no
    report."""
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    ix = np.array(bad, np.int32)
    with pytest.raises(tw.TilewrightError, match="out of bounds for dimension 1 of 'x'"):
        tw.compile(_pick_col, target="cpu", out_idx=[-1])(x, ix)
    prof = tw.compile(_pick_col, target=TARGET, out_idx=[-1]).profile(x, ix)
    assert any("out of bounds" in r for r in prof["reports"]), prof["reports"]


# --------------------------------------------------------------------------- F7: T.cast to the expression's own dtype
@T.prim_func
def _cast_own(X: T.Tensor((32,), "int8"), Z: T.Tensor((2,), "int32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((32,), "int8")
        z = T.alloc_fragment((2,), "int32")
        T.copy(X, x)
        z[0] = T.cast(x[0] << 4, "int8") >> 4  # >> wraps first anyway: -1
        z[1] = T.cast(x[0] << 4, "int8") // 16  # docs/language.md: "write T.cast(x << n, 'int8') to wrap it first"
        T.copy(z, Z)


# hunt31 F7, fixed by h-sem31: T.cast keeps a same-dtype cast over arithmetic computed wider
@pytest.mark.parametrize("target", TARGETS)
def test_f7_cast_to_the_own_dtype_wraps(target):
    x = np.zeros(32, np.int8)
    x[0] = 0x1F  # 0x1F << 4 = 496, wrapped into int8: -16
    assert _run(_cast_own, target, [-1], x).tolist() == [-1, -1]


# --------------------------------------------------------------------------- F8: if without else leaves rows unwritten
@T.prim_func
def _rows_if(X: T.Tensor((8, 16), "float32"), n: T.int32, Y: T.Tensor((8, 16), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((8, 16), "float32")
        y = T.alloc_fragment((8, 16), "float32")
        T.copy(X, x)
        for i, j in T.Parallel(8, 16):
            if i < n:  # rows n.. of y are never written, then copied out: a wrong kernel
                y[i, j] = x[i, j] * 2.0
        T.copy(y, Y)


def test_f8_if_without_else_leaving_rows_unwritten_is_reported():
    prof = tw.compile(_rows_if, target=TARGET, out_idx=[-1]).profile(np.ones((8, 16), np.float32), 3)
    assert any("uninitialised read" in r for r in prof["reports"]), prof["reports"]


@T.prim_func
def _cast_wider_first(X: T.Tensor((32,), "int8"), U: T.Tensor((32,), "uint8"), A: T.Tensor((16,), "float16"),
                      Z: T.Tensor((3,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((32,), "int8")
        u = T.alloc_fragment((32,), "uint8")
        a = T.alloc_fragment((16,), "float16")
        z = T.alloc_fragment((3,), "float32")
        T.copy(X, x)
        T.copy(U, u)
        T.copy(A, a)
        z[0] = T.cast(T.cast(x[0], "int32") << 4, "int8") // 16
        z[1] = T.cast(T.cast(u[0], "int32") - u[1], "uint8") // 2
        z[2] = T.cast(T.cast(a[0], "float32") * a[1], "float16") / 100.0
        T.copy(z, Z)


@pytest.mark.parametrize("target", TARGETS)
def test_f7_the_documented_form_casts_an_operand_first(target):
    """docs/language.md "Bitwise operators and shifts": a wider operand makes the cast a real conversion."""
    x, u, a = np.zeros(32, np.int8), np.zeros(32, np.uint8), np.zeros(16, np.float16)
    x[0], u[0], u[1], a[0], a[1] = 0x1F, 3, 250, 300, 300
    assert _run(_cast_wider_first, target, [-1], x, u, a).tolist() == [-1.0, 4.0, float("inf")]


# --------------------------------------------------------------------------- F1: a guarded shifted read
@T.prim_func
def _shift_if(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((64,), "float32")
        y = T.alloc_fragment((64,), "float32")
        T.copy(X, x)
        for j in T.Parallel(64):
            if j + 8 < 64:  # cpu never reads x[64..71]
                y[j] = x[j + 8] - x[j]
            else:
                y[j] = 0.0
        T.copy(y, Y)


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascfix31
def test_f1_guarded_shifted_read_in_an_if_else(target):
    x = np.arange(64, dtype=np.float32) ** 2 / 64
    ref = np.zeros(64, np.float32)
    ref[:56] = x[8:] - x[:56]
    np.testing.assert_array_equal(_run(_shift_if, target, [-1], x), ref)


# --------------------------------------------------------------------------- F9: an int64 id past int32 in a copy's start
@T.prim_func
def _emb(E: T.Tensor((8, 8), "float32"), Ids: T.Tensor((2,), "int64"), Y: T.Tensor((2, 8), "float32")):
    with T.Kernel(2) as bx:
        r = T.alloc_fragment((1, 8), "float32")
        row = Ids[bx]
        T.copy(E[row, 0], r)  # a source row outside E reads as zeros
        T.copy(r, Y[bx, 0])


@pytest.mark.parametrize("target", TARGETS)  # fixed by h-ascfix31
def test_f9_int64_row_id_past_int32_reads_zeros(target):
    e = np.arange(64, dtype=np.float32).reshape(8, 8) + 1
    y = _run(_emb, target, [-1], e, np.array([3, 2 ** 32 + 5], np.int64))
    assert y[0].tolist() == e[3].tolist() and y[1].tolist() == [0.0] * 8
