"""hunt14 F3 / F4 / F5 on ascend910b (session 27, h-fixes15; docs/ascend.md "Session 27: row groups
of any size, hints at the user's tiles (h-fixes15)").

F4: split_rows groups a block's rows by any size G (ceil(R / k) for k groups), the last group clipped
(its tensor copies a run-time extent min(G, R - off): rows past R not loaded, not stored), so a prime
row count runs in a few groups instead of one row at a time. Each kernel runs on cpu and ascend910b
(the simulator's checker on) against float64.
F5 (a) / F3: the UB overflow's hint names the user's tiles at the user's shapes (acc, not the Vector
core's `acc_ub` half), and shrinks a dim a reduction reduces last (a tile of fewer rows of a column sum
computes another sum): the hinted block sizes, applied, run and match float64.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    out = kernel(*args) if target == "cpu" else run_checked(kernel, *args)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _f64(x):
    return np.asarray(x, np.float64)


def _notes(kernel):
    return " | ".join(str(n) for n in kernel.notes)


# ---------------------------------------------------------------------------------------------
# F4: a prime / odd block row count runs in a few clipped groups.

@tw.jit(out_idx=[-1])
def rows_plus_one(C, bm):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, C), "float32"), Y: T.Tensor((M, C), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            t = T.alloc_fragment((bm, C), "float32")
            T.copy(X[bx * bm, 0], t)
            for i, j in T.Parallel(bm, C):
                t[i, j] = t[i, j] + 1.0
            T.copy(t, Y[bx * bm, 0])

    return main


@pytest.mark.parametrize("target", TARGETS)
def test_prime_block_rows_run_in_two_groups(target):
    """hunt14 F4's reproducer: (8191, 3) at block_M 8191 ran 8191 groups of 1 row; now 2 (4096 and a clipped
    4095), M = 8191 + 5: the second block is a tail of 5 rows inside its first group."""
    x = randn((8196, 3), "float32", seed=8191)
    k = rows_plus_one(3, 8191, target=target)
    (y,) = _run(k, target, x)
    np.testing.assert_array_equal(y, x + np.float32(1.0))
    if target != "cpu":
        assert "8191 rows run 4096 at a time" in _notes(k), _notes(k)


@tw.jit(out_idx=[-2, -1])
def residual_rms_norm(N, block_M):
    """Every row statement kind split_rows handles: copies in / out (two stores), a row map, a row
    reduction, a row-wise scalar map, a vector of the columns copied once (w)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), R: T.Tensor((M, N), "float32"), W: T.Tensor((N,), "float32"),
             H: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            r = T.alloc_fragment((block_M, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(R[bx * block_M, 0], r)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] + r[i, j]
            T.copy(x, H[bx * block_M, 0])
            for i, j in T.Parallel(block_M, N):
                r[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(r, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + 1e-6)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * ss[i] * w[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


@pytest.mark.parametrize("target", TARGETS)
def test_rms_rows_in_clipped_groups(target):
    """7 rows of 8193 float32 (32 KiB each: 3 row tiles of 7 overflow the UB): groups of 2 (2, 2, 2 and a
    clipped 1) before session 27 could only be 1 row (7 is prime); M = 10: the second block a tail of 3
    rows, its last groups past M."""
    N = 8193
    rng = np.random.default_rng(7)
    x, r, w = randn((10, N), "float32", seed=rng), randn((10, N), "float32", seed=rng), randn((N,), "float32", seed=rng)
    k = residual_rms_norm(N, 7, target=target)
    h, y = _run(k, target, x, r, w)
    href = _f64(x) + _f64(r)
    yref = href / np.sqrt((href * href).mean(1, keepdims=True) + 1e-6) * _f64(w)
    assert_close(_f64(h), href, atol=TOLERANCES["float32"][0], rtol=TOLERANCES["float32"][1], msg=f"h {target}")
    assert_close(_f64(y), yref, atol=TOLERANCES["float32"][0], rtol=TOLERANCES["float32"][1], msg=f"y {target}")
    if target != "cpu":
        m = re.search(r"the block's 7 rows run (\d+) at a time", _notes(k))
        assert m and int(m.group(1)) > 1, _notes(k)


# ---------------------------------------------------------------------------------------------
# F5 (a): the gemm -> residual epilogue's hint named acc at the user's rows; since session 28 the kernel
# runs in row groups (test_hunt_s26.py's F5 reproducer), and the hint at the user's tiles is checked on a
# kernel that still overflows (test_ascend_fixes_s28.py, A transposed).


# ---------------------------------------------------------------------------------------------
# F3 (narrow tiles): a column sum of more rows than fit proposes fewer columns, not fewer rows.

@tw.jit(out_idx=[-1])
def col_sum(S, N, block_N):
    B = T.symbolic("B")

    @T.prim_func
    def main(X: T.Tensor((B, S, N), "float32"), Out: T.Tensor((B, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), B) as (bx, b):
            x = T.alloc_fragment((S, block_N), "float32")
            res = T.alloc_fragment((block_N,), "float32")
            T.copy(X[b, 0:S, bx * block_N:(bx + 1) * block_N], x)
            T.reduce_sum(x, res, dim=0)
            T.copy(res, Out[b, bx * block_N])

    return main


@tw.jit(out_idx=[-1])
def col_center(S, N):
    """x - (the column sums) / S: the map after the sum reads every row's result (no row groups)."""

    @T.prim_func
    def main(X: T.Tensor((S, N), "float32"), Y: T.Tensor((S, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((S, N), "float32")
            m = T.alloc_fragment((N,), "float32")
            T.copy(X[0:S, 0:N], x)
            T.reduce_sum(x, m, dim=0)
            for i, j in T.Parallel(S, N):
                x[i, j] = x[i, j] - m[j] / S
            T.copy(x, Y[0:S, 0:N])

    return main


def test_column_sum_hint_keeps_the_reduced_rows():
    """hunt14 F3: 4097 x 16 float32 summed over its 4097 rows overflowed the UB; hunt14 saw the hint `x 2048x16`
    (another sum); session 27's hint halved the columns (x 4097x8: block_N 8), which keeps every sum; since
    session 29 (h-colred) the compiler runs it in column blocks of 8 itself (test_colred_s29.py), and the
    block_N 8 kernel runs (N = 17: two column windows and a tail of 1) on both targets. When only the reduced
    rows can shrink (8193 x 8: 8 float32 columns are one 32 B block), the hint says that fewer rows reduce part
    of the sum and names the loop that keeps it. Since session 30 (h-colred2) the 8193 x 8 sum runs in row groups
    with the sum carried (test_colred_s30.py); the hint is checked on a kernel that still overflows (a map after
    the sum reads every row's result)."""
    assert "carried from group to group" in _notes(col_sum(8193, 17, 8, target=TARGET))
    with pytest.raises(tw.TilewrightError) as e:
        col_center(8193, 8, target=TARGET)
    assert "x's rows 8193 -> 4096" in e.value.hint and "(the dim T.reduce_sum at line" in e.value.hint, e.value.hint
    assert "reducing each into the result with clear=False, computes the whole" in e.value.hint, e.value.hint
    x = randn((1, 4097, 17), "float32", seed=4097)
    ref = _f64(x).sum(1)
    for target in TARGETS:
        (got,) = _run(col_sum(4097, 17, 8, target=target), target, x)
        assert_close(_f64(got), ref, atol=1e-5 * 4097, rtol=1e-5, msg=f"column sum 4097x17 block_N 8 {target}")
