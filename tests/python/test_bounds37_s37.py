"""Session 37's bounds checks of a T.Parallel map's element stores on ascend910b (h-bounds37, docs/testing.md
"Session 37: bounds37"), and port36 F4 (an error naming multi_buffer's loop variable in place of the user's).

h-bounds36 left three forms of a map's store past its tensor clipped without a report on ascend910b while cpu under
TW_BOUNDS_CHECK=1 reports them: (a) a staged store whose window lies wholly outside the tensor's rows (the copy out
moved no row and its call, which carried the check, was skipped), (b) an in-place map (its window's read, the
preload, was not checked), (c) a store under an `if` (the copy out writes the whole window, the preloaded
elements the condition skips included, so it cannot tell the user's stores from them: a guard bounding the index
is read here; any other condition in float16 / float32 since h-bounds38, test_bounds38_s38). The ascend
reports are compared with cpu's (the same kernels in one child process under TW_BOUNDS_CHECK=1), and the in-range
controls with numpy, the checker on.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402


def row_store():
    """(a) Y[n, j] = x[j]: a map storing a tensor row at a run-time row n (wholly outside Y's 2 rows at n >= 2)."""
    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), N: T.Tensor((1,), "int32"), Y: T.Tensor((2, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "float32")
            T.copy(X, x)
            n = N[0]
            for j in T.Parallel(8):
                Y[n, j] = x[j]
    return k


def in_place():
    """(b) Y[0, j + n] = Y[0, j + n] * 2: an in-place map at a run-time column offset."""
    @T.prim_func
    def k(N: T.Tensor((1,), "int32"), Y: T.Tensor((2, 8), "float32")):
        with T.Kernel(1) as bx:
            n = N[0]
            for j in T.Parallel(8):
                Y[0, j + n] = Y[0, j + n] * 2.0
    return k


def in_place_blocks(block=64):
    """(b) docs/language.md's first kernel in place with a symbolic N: the last block's map overhangs C (C alone: a
    read of another tensor at the same indices is reported since session 35)."""
    N = T.symbolic("N")

    @T.prim_func
    def k(C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = C[bx * block + i] * 2.0 + 1.0
    return k


def guarded(op):
    """(c) the guard idiom: Y[0, j + n] = x[j] under `j + n < 8` (right: no store outside at n >= 0), `j + n <= 8`
    (off by one), or `j + n >= 0 and j + n < 8` (both bounds: not read by the check, no report)."""
    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), N: T.Tensor((1,), "int32"), Y: T.Tensor((2, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "float32")
            T.copy(X, x)
            n = N[0]
            for j in T.Parallel(8):
                if op == "lt":
                    if j + n < 8:
                        Y[0, j + n] = x[j]
                elif op == "le":
                    if j + n <= 8:
                        Y[0, j + n] = x[j]
                else:
                    if j + n >= 0 and j + n < 8:
                        Y[0, j + n] = x[j]
    return k


def guard_lt():
    return guarded("lt")


def guard_le():
    return guarded("le")


def guard_both():
    return guarded("both")


def under_if():
    """(c) if x[j] > 2: Y[0, j + n] = x[j] (a data-dependent condition: open)."""
    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), N: T.Tensor((1,), "int32"), Y: T.Tensor((2, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "float32")
            T.copy(X, x)
            n = N[0]
            for j in T.Parallel(8):
                if x[j] > 2.0:
                    Y[0, j + n] = x[j]
    return k


X8 = np.arange(1, 9, dtype=np.float32)


def _args(name, n):
    y = np.arange(16, dtype=np.float32).reshape(2, 8) - 5
    if name == "in_place":
        return [np.array([n], np.int32), y]
    if name == "in_place_blocks":
        return [np.arange(n, dtype=np.float32)]
    return [X8, np.array([n], np.int32), y]


def _guarded_want(n):
    """Y after the guarded stores at offset n: the row's elements 0 <= j + n < 8 set to x[j]."""
    want = _args("guard_lt", n)[-1]
    for j in range(8):
        if 0 <= j + n < 8:
            want[0, j + n] = X8[j]
    return want


def _ascend(name, n):
    args = _args(name, n)
    prof = tw.compile(globals()[name](), target=TARGET).profile(*args)
    return args[-1], prof["reports"]


# name, argument past the tensor, what ascend910b and cpu report (cpu: "index I is out of bounds for dimension D")
OUTSIDE = [("row_store", 5, "stores index 5 of dimension 0 of tensor Y, which has 2", (5, 0)),
           ("row_store", -3, "stores index -3 of dimension 0 of tensor Y, which has 2", (-3, 0)),
           ("in_place", 3, "reads index 8 of dimension 1 of tensor Y, which has 8", (8, 1)),
           ("in_place", 9, "reads index 9 of dimension 1 of tensor Y, which has 8", (9, 1)),
           ("in_place_blocks", 100, "reads index 100 of dimension 0 of tensor C, which has 100", (100, 0)),
           ("guard_le", 3, "stores index 8 of dimension 1 of tensor Y, which has 8", (8, 1)),
           ("guard_lt", -2, "stores index -2 of dimension 1 of tensor Y, which has 8", (-2, 1))]


@pytest.mark.parametrize("name, n, what, cpu", OUTSIDE, ids=[f"{c[0]}-{c[1]}" for c in OUTSIDE])
def test_store_past_the_tensor_is_reported(name, n, what, cpu):
    y, reports = _ascend(name, n)
    oob = [r for r in reports if "out of bounds" in r]
    assert oob and f"a T.Parallel map {what}" in oob[0], reports
    assert "test_bounds37_s37.py:" in oob[0] and ("guard" in oob[0] or "clamp" in oob[0])  # the kernel's line, a hint
    if name == "row_store":  # the window moved no row: Y unchanged
        assert y.tolist() == _args(name, n)[-1].tolist()
    if name.startswith("guard"):  # the stores inside the row made, the others dropped
        assert y.tolist() == _guarded_want(n).tolist()


@pytest.mark.parametrize("name, n", [("row_store", 1), ("row_store", 0), ("in_place", 0),
                                     ("in_place_blocks", 128), ("in_place_blocks", 64)])
def test_in_range_controls_exact_and_silent(name, n):
    y, reports = _ascend(name, n)
    want = _args(name, n)[-1].astype(np.float64)
    if name == "row_store":
        want[n] = X8
    elif name == "in_place":
        want[0, n:n + 8] *= 2
    else:
        want = want * 2 + 1
    assert reports == [] and y.tolist() == want.tolist(), reports


@pytest.mark.parametrize("name, n", [("guard_lt", 3), ("guard_lt", 9), ("guard_le", 0), ("guard_le", 9),
                                     ("guard_both", -2), ("guard_both", 3)])
def test_guarded_stores_inside_are_silent_and_exact(name, n):
    y, reports = _ascend(name, n)
    assert reports == [] and y.tolist() == _guarded_want(n).tolist(), reports


def test_store_under_an_if_past_the_row_is_reported():
    """(c) closed by h-bounds38 (the simulator follows which UB elements still hold the preload's: test_bounds38_s38)."""
    _, reports = _ascend("under_if", 3)  # x[j] > 2 at j = 5..7: Y[0, 8..10]
    assert any("a T.Parallel map stores index 8 of dimension 1 of tensor Y" in r for r in reports), reports


def test_store_under_an_if_in_range_exact():
    y, reports = _ascend("under_if", 0)
    want = _args("under_if", 0)[-1]
    want[0] = np.where(X8 > 2, X8, want[0])
    assert reports == [] and y.tolist() == want.tolist(), reports


CHILD = r'''
import sys
sys.path.insert(0, sys.argv[1])
import tilewright as tw
import test_bounds37_s37 as B
kernels = {}
for name, n, _, _ in B.OUTSIDE + [("under_if", 3, None, None)]:
    if name not in kernels:  # one g++ compile per kernel
        kernels[name] = tw.compile(getattr(B, name)(), target="cpu")
    try:
        kernels[name](*B._args(name, n))
        print(name, n, "RAN")
    except tw.TilewrightError as e:
        print(name, n, e.message)
'''


def test_cpu_checked_reports_the_same_index(tmp_path):
    """The same kernels on cpu under TW_BOUNDS_CHECK=1 (read once per process: a child) report the index ascend910b
    reports (and (c)'s store, which ascend910b reports since h-bounds38)."""
    from tw_test_util import bounds_checked_child
    lines = bounds_checked_child(CHILD, tmp_path)
    for (name, n, _, (i, d)), ln in zip(OUTSIDE + [("under_if", 3, None, (8, 1))], lines):
        assert ln.startswith(f"{name} {n} index {i} is out of bounds for dimension {d}"), lines


# port36 F4 (fixed): an error at a statement of a loop that multi_buffer unrolls printed the loop's internal variable,
# S[bx * 4:+4, g_o * 2:+1] for the user's S[bx * bm:(bx + 1) * bm, g]; each copy now binds the user's variable in a
# let (docs/ascend.md "multi_buffer"), so the message names g (cpu runs the kernel: the 1-D tile into a column is
# an Ascend layout limit).
def group_scales(NG=3, bm=4):
    @T.prim_func
    def k(X: T.Tensor((bm, NG), "float32"), S: T.Tensor((bm, NG), "float32")):
        with T.Kernel(1) as bx:
            for g in T.serial(NG):
                x = T.alloc_fragment((bm,), "float32")
                T.copy(X[bx * bm:(bx + 1) * bm, g], x)
                for i in T.Parallel(bm):
                    x[i] = x[i] * 2.0
                T.copy(x, S[bx * bm:(bx + 1) * bm, g])
    return k


def test_f4_error_names_the_users_loop_variable():
    with pytest.raises(tw.TilewrightError, match="a column of a tensor cannot fill or come from a 1-D tile") as e:
        tw.compile(group_scales(), target=TARGET)
    assert "X[bx * 4:+4, g:+1]" in e.value.message and "g_o" not in e.value.message, e.value.message
    assert e.value.line > 0 and "shape (4, 1)" in e.value.hint
