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


def mod_blocks(rows, period):
    """Block cid's AIV vid reads 32 rows of X at ((cid + t * 8) % period) * 64 + vid * 32 (8
    blocks, t in a loop of ceildiv(8 - cid, 8) = 1 iteration) into rows cid * 64 + vid * 32 of Y:
    the modulo bounds the read window (session 14: `%` and `ceildiv` in the range reasoning, and
    loop variables over bounded extents, as in map_grid's `by = (blk / 2) % 2`)."""
    @T.prim_func
    def main(X: T.Tensor((rows, 64), "float32"), Y: T.Tensor((512, 64), "float32")):
        with T.Kernel(8, is_npu=True) as (cid, vid):
            a = T.alloc_UB((32, 64), "float32")
            with T.Scope("V"):
                for t in T.serial(T.ceildiv(8 - cid, 8)):
                    row = ((cid + t * 8) % period) * 64 + vid * 32
                    T.copy(X[row, 0], a)
                    T.set_flag("MTE2", "MTE3", 0)
                    T.wait_flag("MTE2", "MTE3", 0)
                    T.copy(a, Y[cid * 64 + vid * 32, 0])
                    T.set_flag("MTE3", "MTE2", 0)
                    T.wait_flag("MTE3", "MTE2", 0)
    return main


@pytest.mark.parametrize("rows,period,full", [(256, 4, True), (255, 4, False), (128, 2, True)])
def test_modulo_bounds_a_window(rows, period, full):
    prog = program(mod_blocks(rows, period))
    if full:  # rows (cid % period) * 64 + vid * 32 .. + 31 < rows: no tail handling, constant counts
        assert "Duplicate" not in prog and " pad" not in prog, prog
        assert prog.count("n_rows=32 row_bytes=256") == 2, prog
    else:  # the last window may be short by a row: the runtime test stays for the read
        assert "Duplicate" in prog and prog.count("n_rows=32 row_bytes=256") == 1, prog
    x = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
    prof = tw.compile(mod_blocks(rows, period), target="ascend910b", out_idx=[-1]).profile(x)
    assert prof["reports"] == []
    xp = np.zeros((period * 64, 64), np.float32)  # rows past X read zeros
    xp[:min(rows, period * 64)] = x[:period * 64]
    ref = np.concatenate([xp[(c % period) * 64:(c % period + 1) * 64] for c in range(8)])
    assert np.array_equal(np.asarray(prof.outputs), ref)
