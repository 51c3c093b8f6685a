"""Session 40, h-bounds40: ascend910b reports a map's store past its tensor whose window lies wholly outside a row's
columns or the tensor's rows (h-bounds39's F1 and F2), as cpu under TW_BOUNDS_CHECK=1 reports the store.

F1: a store `Y[0, j + n]` at a run-time column start of unknown sign is copied out by store_before_column_0 (a head
through the scalar unit, the rest from its 32 B block); where the window lies wholly past the row's columns (n = 9) or
before column 0 (n = -9), head and rest are both empty and no copy out ran, so its check did not either. A checked or
preload copy out now runs there with blockLen 0 (a NOP, docs/ascend.md "Empty counts") at a UB address on a block.
F2: a window wholly outside the tensor's rows (`Y[n, j]` at n = 5 or -3 of 2 rows) of a tile whose row is not whole
32 B blocks (8 int8, 8 float16, 5 float32) kept its `if (n > 0)`: the empty call's UB address skipped the row before
row 0 and left its block. The address now stays at the row (nothing moves) and the call is issued with blockCount 0.

Each dtype, the index against cpu's (one child process under TW_BOUNDS_CHECK=1), the stores inside against numpy
(float64), and right kernels whose windows lie wholly outside (the guard idiom, a condition no element meets): no
report. Kernels: test_bounds38_s38's make() (8 columns) and an odd width here (5 columns).
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import test_bounds38_s38 as B38  # noqa: E402
from ascend_util import TARGET  # noqa: E402
from tw_test_util import bounds_checked_child  # noqa: E402

W = 5  # the odd width: a row of 5 elements is not whole 32 B blocks in any dtype


def odd(axis, dtype):
    """Y[n, j] (axis "row") or Y[0, j + n] (axis "col") = x[j] for j < 5 where x[j] > c; N = [n, c], Y of 2 x 5."""
    @T.prim_func
    def k(X: T.Tensor((W,), dtype), N: T.Tensor((2,), "int32"), Y: T.Tensor((2, W), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((W,), dtype)
            T.copy(X, x)
            n = N[0]
            c = N[1]
            for j in T.Parallel(W):
                if x[j] > c:
                    if axis == "row":
                        Y[n, j] = x[j]
                    else:
                        Y[0, j + n] = x[j]
    return k


def _odd_args(n, c, dtype):
    t = tw.testing.np_dtype(dtype)
    return [np.arange(1, W + 1).astype(t), np.array([n, c], np.int32), (np.arange(2 * W).reshape(2, W) + 3).astype(t)]


def _odd_want(axis, n, c, dtype):
    x, _, y = (a.astype(np.float64) for a in _odd_args(n, c, dtype))
    for j in range(W):
        r, col = (n, j) if axis == "row" else (0, j + n)
        if x[j] > c and 0 <= r < 2 and 0 <= col < W:
            y[r, col] = x[j]
    return y


def _run(case):
    """(Y after the run, the reports) of one case: ("b38", form, n, dtype) or ("odd", axis, (n, c), dtype)."""
    src, form, n, dtype = case
    if src == "b38":
        return B38._ascend(form, n, dtype)
    args = _odd_args(*n, dtype)
    prof = tw.compile(odd(form, dtype), target=TARGET).profile(*args)
    return args[-1], prof["reports"]


def _want(case):
    src, form, n, dtype = case
    return B38._want(form, n, dtype) if src == "b38" else _odd_want(form, *n, dtype)


DTYPES = ["int32", "float32", "float16", "bfloat16", "int8", "uint8"]
# the case, the index and dimension reported (cpu: "index I is out of bounds for dimension D")
OUTSIDE = ([(("b38", "data", 9, t), 11, 1) for t in DTYPES] +      # F1: Y[0, 9..16], j = 2..7 store 11..16
           [(("b38", "data", -9, t), -7, 1) for t in DTYPES[:4]] +  # F1: Y[0, -9..-2] wholly before column 0
           [(("b38", "row", 5, t), 5, 0) for t in DTYPES[2:]] +     # F2: row 5 of 2, rows of 16 / 8 B
           [(("b38", "row", -3, t), -3, 0) for t in DTYPES[2:]] +
           [(("odd", "row", (4, 2), "float32"), 4, 0), (("odd", "row", (-1, 0), "int32"), -1, 0),
            (("odd", "col", (5, 3), "int8"), 8, 1), (("odd", "col", (-7, 1), "float16"), -6, 1)])
# right kernels: the windows wholly outside store nothing (no report), the others store inside (numpy's values)
INSIDE = ([("b38", "both", 9, t) for t in ("int32", "int8", "bfloat16")] +
          [("b38", "both", -9, t) for t in ("float32", "uint8")] +
          [("odd", "row", (n, 99), t) for n, t in ((5, "int8"), (-3, "float16"), (-1, "uint8"), (2, "float32"))] +
          [("odd", "col", (n, 99), t) for n, t in ((7, "bfloat16"), (-6, "int32"), (5, "uint8"))] +
          [("odd", "row", (1, 2), "int8"), ("odd", "col", (-2, 2), "float16"), ("odd", "col", (-1, 1), "int32"),
           ("b38", "data", -2, "bfloat16"), ("b38", "row", 1, "int8")])


def _id(case):
    src, form, n, dtype = case
    return f"{form}-{n[0]}-{n[1]}-{dtype}" if isinstance(n, tuple) else f"{form}-{n}-{dtype}"


@pytest.mark.parametrize("case, i, d", OUTSIDE, ids=[_id(c[0]) for c in OUTSIDE])
def test_store_wholly_outside_is_reported(case, i, d):
    y, reports = _run(case)
    oob = [r for r in reports if "out of bounds" in r]
    assert len(oob) == 1 and f"a T.Parallel map stores index {i} of dimension {d} of tensor Y" in oob[0], reports
    assert y.astype(np.float64).tolist() == _want(case).tolist()  # nothing stored outside, the rest unchanged


@pytest.mark.parametrize("case", INSIDE, ids=[_id(c) for c in INSIDE])
def test_right_kernels_are_silent_and_exact(case):
    y, reports = _run(case)
    assert reports == [] and y.astype(np.float64).tolist() == _want(case).tolist(), reports


# cpu's index per kernel form (the data, 1 .. 8, are exact in every dtype: the dtype does not move it); float32's
# kernels of test_bounds38_s38 (compiled once in a suite's cache) and two of the odd width
CPU = [(("b38", "data", 9, "float32"), 11, 1), (("b38", "data", -9, "float32"), -7, 1),
       (("b38", "row", 5, "float32"), 5, 0), (("b38", "row", -3, "float32"), -3, 0)] + OUTSIDE[-3:-1]

CHILD = r'''
import sys
sys.path.insert(0, sys.argv[1])
import tilewright as tw
import test_bounds40_s40 as B
for case, _, _ in B.CPU:
    src, form, n, dtype = case
    k = tw.compile(B.B38._kernel(form, dtype) if src == "b38" else B.odd(form, dtype), target="cpu")
    try:
        k(*(B.B38._args(form, n, dtype) if src == "b38" else B._odd_args(*n, dtype)))
        print("RAN")
    except tw.TilewrightError as e:
        print(e.message)
'''


def test_cpu_checked_reports_the_same_index(tmp_path):
    """cpu under TW_BOUNDS_CHECK=1 (read once per process: a child) reports the index ascend910b reports."""
    lines = bounds_checked_child(CHILD, tmp_path)
    assert len(lines) == len(CPU), lines
    for (case, i, d), ln in zip(CPU, lines):
        assert ln.startswith(f"index {i} is out of bounds for dimension {d}"), (case, lines)


def test_the_empty_copy_out_is_printed():
    """The printed AscendC is the simulator's program: F1's copy out also runs when the head is empty (the guard's
    `== 0`), F2's has no row-count guard (its blockCount max(n, 0), 0 a NOP)."""
    col = tw.compile(B38.make("data", "int32"), target=TARGET).get_source()
    assert col.count("DataCopyPad(Y_gm[") == 2 and ") == 0)) {" in col, col
    row = tw.compile(B38.make("row", "int8"), target=TARGET).get_source()
    stores = [ln for ln in row.splitlines() if "DataCopyPad(Y_gm[" in ln]
    assert len(stores) == 1 and "static_cast<uint16_t>(tw_max(" in stores[0], stores
    before = row[:row.index(stores[0])].rstrip().splitlines()[-1]
    assert not before.strip().startswith("if ("), before


@pytest.mark.parametrize("dtype, n", [("float16", -1), ("float16", -2), ("float32", -2), ("bfloat16", -2)])
def test_a_tile_copied_onto_itself_keeps_the_preload(dtype, n):
    """test_bounds38_s38's form "same" (`if x[j] > 2: Y[0, j + n] = Y[0, j + n]`). F4 (a false report): the folded
    `where(c, t[j], t[j])` of a float16 row (16 B) was an `x * 1` that cleared the preload state, so the window's
    elements before column 0, which the condition skips (x = 1, 2), were reported as stored; the self copy is now no
    instruction. cpu runs it clean (the elements it reads are inside)."""
    t = tw.testing.np_dtype(dtype)
    y = (np.arange(16).reshape(2, 8) - 5).astype(t)
    want = y.copy()
    k = tw.compile(B38.make("same", dtype), target=TARGET)
    assert k.profile(np.arange(1, 9).astype(t), np.array([n], np.int32), y)["reports"] == []
    assert y.tolist() == want.tolist() and "Muls(" not in k.get_source()


def test_inplace_store_of_the_read_value_past_the_tensor_is_reported():
    """bounds40 F3, fixed in session 41 (test_bounds41_s41: every dtype): the user's `+ z` with z == 0 is a store."""
    args = [np.arange(1, 9).astype(np.int32), np.array([3], np.int32), np.zeros((2, 8), np.int32)]
    reports = tw.compile(B38.make("add", "int32"), target=TARGET).profile(*args)["reports"]
    assert any("index 8 of dimension 1 of tensor Y" in r for r in reports), reports
