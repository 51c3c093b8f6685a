"""Session 29 (h-colred): reductions across the rows (`dim=0`) of a tile larger than the UB on
ascend910b (hunt14 F3). The columns of such a reduction are independent: split_cols runs the tile
in column blocks of one 32-byte block (8 float32 / 16 16-bit columns) when no statement reduces
along the columns, each column reduced in the same row order as the unsplit kernel, so the sum is
bitwise the one the chip model computes for the whole tile; cpu and ascend910b (simulated, checker
on) agree with float64. hunt14's reproducers (4097 x 16 sum, 1000 x 64 logsumexp) are
test_hunt_s26.py's test_middle_axis_reduce cases, on both targets.
"""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, randn

from ascend_util import TARGET, run_checked


@tw.jit(out_idx=[-1])
def col_reduce(S, N, op, block_N, dtype="float32"):
    """Out[n] = op over s of X[s, n]: a (S, block_N) float32 tile, column windows with a tail."""

    @T.prim_func
    def main(X: T.Tensor((S, N), dtype), Out: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N)) as bx:
            x = T.alloc_fragment((S, block_N), "float32")
            res = T.alloc_fragment((block_N,), "float32")
            T.copy(X[0:S, bx * block_N:(bx + 1) * block_N], x)
            if op == "sum":
                T.reduce_sum(x, res, dim=0)
            elif op == "max":
                T.reduce_max(x, res, dim=0)
            else:  # logsumexp over s
                e = T.alloc_fragment((S, block_N), "float32")
                s = T.alloc_fragment((block_N,), "float32")
                T.reduce_max(x, res, dim=0)
                for i, j in T.Parallel(S, block_N):
                    e[i, j] = T.exp(x[i, j] - res[j])
                T.reduce_sum(e, s, dim=0)
                for j in T.Parallel(block_N):
                    res[j] = res[j] + T.log(s[j])
            T.copy(res, Out[bx * block_N])

    return main


def _ref(x, op):
    xf = np.asarray(x, np.float64)
    if op == "sum":
        return xf.sum(0)
    if op == "max":
        return xf.max(0)
    m = xf.max(0)
    return m + np.log(np.exp(xf - m).sum(0))


def _close(got, ref, tol):
    atol, rtol = tol
    assert_close(np.asarray(got, np.float64), ref, atol=atol, rtol=rtol)


def _notes(k):
    return " | ".join(str(n) for n in k.notes)


def test_4097x16_sum_column_blocks_bitwise():
    """hunt14 F3's sum: 2 column blocks of 8 in session 29; since session 30 (h-colred2) 2 row
    groups with the sum carried (fewer vector calls); each column's sum in row order either way,
    bitwise the float32 row-by-row sum (what the unsplit VecReduce Col computes)."""
    S, N = 4097, 17
    x = randn((S, N), "float32", scale=2.0, seed=3)
    k = col_reduce(S, N, "sum", 16, target=TARGET)
    got = run_checked(k, x)
    assert "into res carried from group to group" in _notes(k), _notes(k)
    acc = x[0].astype(np.float32).copy()
    for r in range(1, S):  # float32 adds, row by row
        acc = (acc + x[r]).astype(np.float32)
    np.testing.assert_array_equal(got, acc)
    # the user's block_N 8 fits whole (no split): the same sums, bit for bit
    np.testing.assert_array_equal(run_checked(col_reduce(S, N, "sum", 8, target=TARGET), x), got)
    # cpu sums in its own order: float64 within the sum's tolerance
    for y in (got, col_reduce(S, N, "sum", 16, target="cpu")(x)):
        _close(y, _ref(x, "sum"), (1e-5 * S, 1e-5))


def test_tail_block_and_half_input():
    """A column count that is not a multiple of the block (40 = 3 blocks of 16, the last clipped;
    N 37: the tensor's tail too), a float16 tensor into float32 tiles: 16-column blocks."""
    S, N = 1500, 37
    x = randn((S, N), "float16", scale=2.0, seed=7)
    k = col_reduce(S, N, "sum", 40, "float16", target=TARGET)
    got = run_checked(k, x)
    assert "into res carried from group to group" in _notes(k), _notes(k)
    acc = x[0].astype(np.float32)
    for r in range(1, S):
        acc = (acc + x[r].astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(got, acc)


def test_bf16_sum():
    """A bfloat16 tensor into float32 tiles (the accumulator float32): blocks of 16 columns (session
    30: row groups, the sum carried), each column's sum in row order (bitwise the float32
    row-by-row sum); N 20 < block_N 32: a tail."""
    S, N = 1500, 20
    x = randn((S, N), "bfloat16", scale=2.0, seed=9)
    k = col_reduce(S, N, "sum", 32, "bfloat16", target=TARGET)
    got = run_checked(k, x)
    assert "into res carried from group to group" in _notes(k), _notes(k)
    xf = np.asarray(x, np.float32)
    acc = xf[0].copy()
    for r in range(1, S):
        acc = (acc + xf[r]).astype(np.float32)
    np.testing.assert_array_equal(got, acc)


def test_one_row():
    """A 1-row tile (fits whole: no split), 1 column of tail."""
    x = randn((1, 9), "float32", seed=11)
    for target in ("cpu", TARGET):
        k = col_reduce(1, 9, "lse", 8, target=target)
        got = k(x) if target == "cpu" else run_checked(k, x)
        _close(got, _ref(x, "lse"), TOLERANCES["float32"])
