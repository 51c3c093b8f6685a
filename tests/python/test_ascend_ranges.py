"""Range reasoning in the Ascend lowering (issue 10): a GM <-> UB copy whose window provably lies
inside its tensor (its start bounded by the constant ranges of block, sub-block and loop
variables) gets no tail handling: no runtime short-copy test, no zero fill, constant row and
column counts. A window that may cross the end keeps them. Program text before/after, and both
run in the simulator (checker on: zero reports) with the right result."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import _C


def aiv_blocks(rows, block):
    """AIV vid copies its 32 rows of X to Y, `block` rows at a time: row = vid * 32 + k * block
    (block = 32: one iteration, `row = vid * 32`)."""
    @T.prim_func
    def main(X: T.Tensor((rows, 64), "float32"), Y: T.Tensor((rows, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((block, 64), "float32")
            with T.Scope("V"):
                for k in T.serial(32 // block):
                    row = vid * 32 + k * block
                    T.copy(X[row, 0], a)
                    T.set_flag("MTE2", "MTE3", 0)
                    T.wait_flag("MTE2", "MTE3", 0)
                    T.copy(a, Y[row, 0])
                    T.set_flag("MTE3", "MTE2", 0)
                    T.wait_flag("MTE3", "MTE2", 0)
    return main


def program(prim):
    return _C.ascend.select_instructions(prim.ir, "ascend910b")


@pytest.mark.parametrize("n", [32, 8])
def test_provably_full_copies_have_no_tail_handling(n):
    full = program(aiv_blocks(64, n))
    assert "Duplicate" not in full and "if " not in full and " pad" not in full, full
    assert full.count(f"n_rows={n} row_bytes=256") == 2, full
    # one row fewer: the last window may be short, the runtime test and the zero fill stay
    short = program(aiv_blocks(63, n))
    assert "Duplicate" in short and "if max(min(63 - " in short, short
    assert f"n_rows={n}" not in short, short


@pytest.mark.parametrize("block", [32, 8])
@pytest.mark.parametrize("rows", [64, 63])
def test_both_forms_copy_right_in_the_simulator(block, rows):
    x = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
    prof = tw.compile(aiv_blocks(rows, block), target="ascend910b", out_idx=[-1]).profile(x)
    assert prof["reports"] == []
    assert np.array_equal(np.asarray(prof.outputs), x)


def mod_rows(rows, m):
    """Step k of a run-time count n copies rows (k % m) * 32 .. + 32 of X into the same rows of Y:
    `%` by a positive constant lies in [0, m - 1] whatever k is (session 18; map_grid's
    `by = (blk / 2) % 2` is the same form)."""
    @T.prim_func
    def main(X: T.Tensor((rows, 64), "float32"), n: T.int32, Y: T.Tensor((rows, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((32, 64), "float32")
            with T.Scope("V"):
                for k in T.serial(n):
                    row = (k % m) * 32
                    T.copy(X[row, 0], a)
                    T.set_flag("MTE2", "MTE3", 0)
                    T.wait_flag("MTE2", "MTE3", 0)
                    T.copy(a, Y[row, 0])
                    T.set_flag("MTE3", "MTE2", 0)
                    T.wait_flag("MTE3", "MTE2", 0)
    return main


def test_modulo_by_a_constant_bounds_the_window():
    full = program(mod_rows(64, 2))  # rows 0 .. 63: inside
    assert "Duplicate" not in full and " pad" not in full, full
    assert full.count("n_rows=32 row_bytes=256") == 2, full
    short = program(mod_rows(63, 2))  # the second window has 31 rows
    assert "Duplicate" in short and "if max(min(63 - " in short, short


@pytest.mark.parametrize("rows,m", [(64, 2), (63, 2), (96, 3)])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_modulo_rows_copy_right_in_the_simulator(rows, m, n):
    x = np.random.default_rng(rows + n).standard_normal((rows, 64)).astype(np.float32)
    y = np.full((rows, 64), 7.0, np.float32)
    prof = tw.compile(mod_rows(rows, m), target="ascend910b").profile(x, n, y)
    assert prof["reports"] == []
    want = np.full((rows, 64), 7.0, np.float32)
    for k in range(n):
        r = (k % m) * 32
        want[r:r + 32] = x[r:r + 32]
    np.testing.assert_array_equal(y, want)
