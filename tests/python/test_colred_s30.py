"""Session 30 (h-colred2): reductions across the rows (`dim=0`) of a tile one 32-byte block wide and
taller than the UB on ascend910b. split_rows runs the rows in groups and carries the sum from group
to group, each group adding its rows one by one into the running sum (filled with -0.0): the same
float32 adds in the same order as the unsplit column reduction, so the result is bitwise the
float32 row-by-row sum (test_colred_s29.py shows the unsplit kernel computes exactly that). cpu and
ascend910b (simulated, checker on) agree with float64. Also review29 F2 (an 8-bit tensor's tile of
33..63 columns in column blocks of 32) and F3 (a sum over dim 0 and a max over dim 1 of S x 130).
"""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, randn

from ascend_util import TARGET, run_checked


@tw.jit(out_idx=[-1])
def col_sum(S, N, dtype="float32", tile="float32", acc="float32"):
    """Out[n] = sum over s of X[s, n]: one (S, N) block, x of dtype `tile`, the sum into `acc`."""

    @T.prim_func
    def main(X: T.Tensor((S, N), dtype), Out: T.Tensor((N,), acc)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((S, N), tile)
            res = T.alloc_fragment((N,), acc)
            T.copy(X[0:S, 0:N], x)
            T.reduce_sum(x, res, dim=0)
            T.copy(res, Out[0])

    return main


def _seq_sum(x):
    """float32 adds, row after row (np.add.accumulate is sequential)."""
    return np.add.accumulate(np.asarray(x, np.float32), axis=0, dtype=np.float32)[-1]


def _notes(k):
    return " | ".join(str(n) for n in k.notes)


def _both(make, *args):
    ka = make(TARGET)
    return make("cpu")(*args), run_checked(ka, *args), ka


@pytest.mark.parametrize("S, N", [(8193, 8), (8193, 1)])
def test_one_block_wide_sum_carried_bitwise(S, N):
    """8193 x 8 float32 (one 32-byte block wide) and an 8193 x 1 tile (rows padded to 32 B): 2 row
    groups of 4097 and 4096 rows (the second clipped), the sum carried: bitwise the float32
    row-by-row sum; cpu within the float32 sum's tolerance of float64."""
    x = randn((S, N), "float32", scale=2.0, seed=5)
    cpu, got, k = _both(lambda t: col_sum(S, N, target=t), x)
    notes = _notes(k)
    assert "4097 at a time" in notes and "into res carried" in notes, notes
    np.testing.assert_array_equal(got, _seq_sum(x))
    ref = np.asarray(x, np.float64).sum(0)
    for y in (got, cpu):
        assert_close(np.asarray(y, np.float64), ref, atol=1e-5 * S, rtol=1e-5)


@pytest.mark.parametrize("tile", ["float32", "float16"])
def test_half_input_float32_accumulator(tile):
    """A float16 tensor (8193 x 16: one 32-byte block of float16) into a float32 tile (the sum
    carried in res), or into a float16 tile summed into float16 (the language accumulates in float32
    and rounds once: the running sum in a float32 tile res_acc, rounded into res after the groups):
    bitwise the float32 row-by-row sum of the float16 values (rounded to float16)."""
    S, N = 8193, 16
    x = randn((S, N), "float16", scale=2.0, seed=6)
    cpu, got, k = _both(lambda t: col_sum(S, N, "float16", tile, tile, target=t), x)
    assert "into res carried" in _notes(k), _notes(k)
    np.testing.assert_array_equal(got, _seq_sum(x).astype(tile))
    assert_close(np.asarray(cpu, np.float64), np.asarray(x, np.float64).sum(0), atol=1e-5 * S,
                 rtol=1e-5 if tile == "float32" else TOLERANCES["float16"][1])


def test_one_row_tile():
    """A 1-row tile (fits: no split): the row itself on both targets."""
    x = randn((1, 8), "float32", seed=7)
    cpu, got, _ = _both(lambda t: col_sum(1, 8, target=t), x)
    np.testing.assert_array_equal(got, x[0])
    np.testing.assert_array_equal(cpu, x[0])


def test_int8_tensor_int32_sum_f2():
    """review29 F2: `T.copy(X_int8[0:1000, 40 cols], x_int32)` + reduce_sum dim 0 (226400 B with
    the int8 landing tile): rows in groups, the int32 sum carried; exact."""
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (1000, 40)).astype(np.int8)
    cpu, got, k = _both(lambda t: col_sum(1000, 40, "int8", "int32", "int32", target=t), x)
    assert "carried" in _notes(k), _notes(k)
    ref = x.astype(np.int64).sum(0)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(cpu, ref)


@tw.jit(out_idx=[-1])
def int8_col_max(S, N):
    """review29 F2: an int8 tensor's (S, N) tile in int32, a map, a max over dim 0 (an integer max
    is not merged across row groups): column blocks of 32 (one 32-byte block of int8) and a tail."""

    @T.prim_func
    def main(X: T.Tensor((S, N), "int8"), Out: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((S, N), "int32")
            res = T.alloc_fragment((N,), "int32")
            T.copy(X[0:S, 0:N], x)
            for i, j in T.Parallel(S, N):
                x[i, j] = x[i, j] * 3 - 5
            T.reduce_max(x, res, dim=0)
            T.copy(res, Out[0])

    return main


def test_int8_tensor_40_columns_in_blocks_of_32_f2():
    """1000 x 40: was a UB overflow (column blocks only from 64 columns); 32 + 8 now."""
    S, N = 1000, 40
    rng = np.random.default_rng(9)
    x = rng.integers(-128, 128, (S, N)).astype(np.int8)
    cpu, got, k = _both(lambda t: int8_col_max(S, N, target=t), x)
    assert "column blocks of 32" in _notes(k), _notes(k)
    ref = (x.astype(np.int64) * 3 - 5).max(0)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(cpu, ref)


@tw.jit(out_idx=[-2, -1])
def sum_and_row_max(S, N):
    """review29 F3: x (S, 130) float32 summed over dim 0 and maxed over dim 1."""

    @T.prim_func
    def main(X: T.Tensor((S, N), "float32"), Cs: T.Tensor((N,), "float32"), Rm: T.Tensor((S,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((S, N), "float32")
            cs = T.alloc_fragment((N,), "float32")
            rm = T.alloc_fragment((S,), "float32")
            T.copy(X[0:S, 0:N], x)
            T.reduce_sum(x, cs, dim=0)
            T.reduce_max(x, rm, dim=1)
            T.copy(cs, Cs[0])
            T.copy(rm, Rm[0])

    return main


def test_sum_dim0_and_max_dim1_f3():
    """S 700 (overflowed in 64-column blocks in session 29): the rows in groups, each group's row
    maxes its own, the column sum carried; bitwise the row-by-row sum, the maxes exact."""
    S, N = 700, 130
    x = randn((S, N), "float32", seed=10)
    ka = sum_and_row_max(S, N, target=TARGET)
    cs, rm = run_checked(ka, x)
    assert "into cs carried" in _notes(ka), _notes(ka)
    np.testing.assert_array_equal(cs, _seq_sum(x))
    np.testing.assert_array_equal(rm, x.max(1))
    ccs, crm = sum_and_row_max(S, N, target="cpu")(x)
    assert_close(np.asarray(ccs, np.float64), np.asarray(x, np.float64).sum(0), atol=1e-5 * S, rtol=1e-5)
    np.testing.assert_array_equal(crm, x.max(1))


@tw.jit(out_idx=[-1])
def col_lse(S, N):
    """Out[n] = log sum over s of exp(X[s, n]) (max, exp(x - max), sum, max + log(sum)), one block."""

    @T.prim_func
    def main(X: T.Tensor((S, N), "float32"), Out: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((S, N), "float32")
            m = T.alloc_fragment((N,), "float32")
            s = T.alloc_fragment((N,), "float32")
            T.copy(X[0:S, 0:N], x)
            T.reduce_max(x, m, dim=0)
            for i, j in T.Parallel(S, N):
                x[i, j] = T.exp(x[i, j] - m[j])
            T.reduce_sum(x, s, dim=0)
            for j in T.Parallel(N):
                m[j] = m[j] + T.log(s[j])
            T.copy(m, Out[0])

    return main


def test_logsumexp_over_dim0_online():
    """A logsumexp over dim 0 of 8192 x 8 float32 (one block wide): the rows in groups (divisors of
    8192: the merged max would see a clipped group's zero rows), the max merged, the sum rescaled
    by exp(m_prev - m) per group (online): another rounding than the unsplit kernel's, within the
    float32 tolerance of float64 (a column far below 0, a column whose max is in the second group,
    a column of -inf: NaN as unsplit, a column -inf in its first half only)."""
    S, N = 8192, 8
    x = randn((S, N), "float32", scale=3.0, seed=12)
    x[:, 1] -= 50.0  # a column far below 0
    x[S // 2 + 5, 2] = 80.0  # its max in the second group
    x[:, 3] = -np.inf  # exp(-inf - -inf): NaN, as unsplit (each group adds NaN again after the rescale's 0)
    x[: S // 2, 4] = -np.inf  # -inf in the first groups only: their NaN sum rescaled to 0
    cpu, got, k = _both(lambda t: col_lse(S, N, target=t), x)
    assert "into s carried" in _notes(k) and "online: the max m" in _notes(k), _notes(k)
    xf = np.asarray(x, np.float64)
    mx = xf.max(0)
    with np.errstate(invalid="ignore"):
        ref = mx + np.log(np.exp(xf - mx).sum(0))
    assert np.isnan(ref[3]) and np.isfinite(ref[4])
    for y in (got, cpu):
        atol, rtol = TOLERANCES["float32"]
        assert_close(np.asarray(y, np.float64), ref, atol=atol, rtol=rtol, equal_nan=True)
