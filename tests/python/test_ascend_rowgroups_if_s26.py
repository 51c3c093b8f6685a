"""Rows in groups under a condition the same for every row (fuzz13 F2; h-hints14, docs/ascend.md
"Session 26: rows in groups under an `if` (h-hints14)").

A block of R rows of 4 columns (a UB row takes 32 B) overflows the AIV's UB on ascend910b; the
compiler runs its rows in groups (split_rows). Under `if 0 < Lens[g]` (a condition that reads no row
and nothing the block writes), an `if` / `else`, nested ifs and a T.serial loop around, the `if`
runs whole in each group. Each case: every float dtype of X, a tensor whose rows are not a multiple
of R (the last block's tail), both branches taken and not taken; Y is updated in place (rows
whose branch stores nothing keep their -7); the values are halves in [-4, 4], so every result is
exact in every dtype: cpu and ascend910b (checker on) must equal the float64 reference exactly.
"""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

from ascend_util import TARGET, run_checked

R, C = 4000, 4          # two float32 (4000, 4) tiles: 256000 B of UB (196352 B on ascend910b)
DTYPES = ["float32", "float16", "bfloat16"]


def _gated(M, dt, form):
    """Y rows of block g (R rows, the last one a tail) from X, under `form`'s condition on Lens."""
    nb = (M + R - 1) // R

    if form == "if":
        @T.prim_func
        def main(X: T.Tensor((M, C), dt), Lens: T.Tensor((nb,), "int32"), Y: T.Tensor((M, C), dt)):
            with T.Kernel(nb) as g:
                x = T.alloc_fragment((R, C), "float32")
                y = T.alloc_fragment((R, C), "float32")
                if 0 < Lens[g]:
                    T.copy(X[g * R:(g + 1) * R, :], x)
                    for i, j in T.Parallel(R, C):
                        y[i, j] = x[i, j] * 2.0 + 1.0
                    T.copy(y, Y[g * R:(g + 1) * R, :])
    elif form == "else":
        @T.prim_func
        def main(X: T.Tensor((M, C), dt), Lens: T.Tensor((nb,), "int32"), Y: T.Tensor((M, C), dt)):
            with T.Kernel(nb) as g:
                x = T.alloc_fragment((R, C), "float32")
                y = T.alloc_fragment((R, C), "float32")
                T.copy(X[g * R:(g + 1) * R, :], x)
                if 0 < Lens[g]:
                    for i, j in T.Parallel(R, C):
                        y[i, j] = x[i, j] * 2.0 + 1.0
                else:
                    for i, j in T.Parallel(R, C):
                        y[i, j] = 0.0 - x[i, j] - 3.0
                T.copy(y, Y[g * R:(g + 1) * R, :])
    elif form == "nested":
        @T.prim_func
        def main(X: T.Tensor((M, C), dt), Lens: T.Tensor((nb,), "int32"), Y: T.Tensor((M, C), dt)):
            with T.Kernel(nb) as g:
                x = T.alloc_fragment((R, C), "float32")
                y = T.alloc_fragment((R, C), "float32")
                if 0 < Lens[g]:
                    T.copy(X[g * R:(g + 1) * R, :], x)
                    if Lens[g] < 2:
                        for i, j in T.Parallel(R, C):
                            y[i, j] = x[i, j] * 2.0 + 1.0
                    else:
                        for i, j in T.Parallel(R, C):
                            y[i, j] = 0.0 - x[i, j] - 3.0
                    T.copy(y, Y[g * R:(g + 1) * R, :])
    elif form == "weight":   # a tile of other rows copied inside the `if`: it runs again in each group
        @T.prim_func
        def main(X: T.Tensor((M, C), dt), Lens: T.Tensor((nb,), "int32"), Y: T.Tensor((M, C), dt)):
            with T.Kernel(nb) as g:
                x = T.alloc_fragment((R, C), "float32")
                y = T.alloc_fragment((R, C), "float32")
                w = T.alloc_fragment((C,), "float32")
                if 0 < Lens[g]:
                    T.copy(X[0, :], w)
                    T.copy(X[g * R:(g + 1) * R, :], x)
                    for i, j in T.Parallel(R, C):
                        y[i, j] = x[i, j] * 2.0 + w[j]
                    T.copy(y, Y[g * R:(g + 1) * R, :])
    else:  # "loop": a T.serial loop around the `if`, two row blocks per program
        assert form == "loop"

        @T.prim_func
        def main(X: T.Tensor((M, C), dt), Lens: T.Tensor((_lens_len(M, form),), "int32"), Y: T.Tensor((M, C), dt)):
            with T.Kernel((nb + 1) // 2) as g:
                x = T.alloc_fragment((R, C), "float32")
                y = T.alloc_fragment((R, C), "float32")
                for t in T.serial(2):
                    if 0 < Lens[g * 2 + t]:  # (0 past the last block)
                        T.copy(X[(g * 2 + t) * R:(g * 2 + t + 1) * R, :], x)
                        for i, j in T.Parallel(R, C):
                            y[i, j] = x[i, j] * 2.0 + 1.0
                        T.copy(y, Y[(g * 2 + t) * R:(g * 2 + t + 1) * R, :])
    return main


def _lens_len(M, form):
    nb = (M + R - 1) // R
    return 2 * ((nb + 1) // 2) if form == "loop" else nb


def _reference(x, lens, form):
    x = x.astype(np.float64)
    y = np.full(x.shape, -7.0)
    for b, n in enumerate(lens):
        rows = slice(b * R, (b + 1) * R)
        f = x[rows] * 2 + 1
        g = -x[rows] - 3
        if form in ("if", "loop"):
            y[rows] = f if n > 0 else y[rows]
        elif form == "weight":
            y[rows] = x[rows] * 2 + x[0] if n > 0 else y[rows]
        elif form == "else":
            y[rows] = f if n > 0 else g
        else:  # nested
            y[rows] = (f if n < 2 else g) if n > 0 else y[rows]
    return y


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("form,lens", [
    ("if", [1, 0, 3]), ("if", [0, 2, 0]),
    ("else", [1, 0, 0]), ("else", [0, 5, 1]),
    ("nested", [1, 2, 0]), ("nested", [0, 0, 1]),
    ("weight", [1, 0, 1]),
    ("loop", [0, 1, 1]), ("loop", [1, 0, 0]),
])
def test_rows_grouped_under_uniform_condition(form, lens, dt):
    M = 3 * R - 5   # the last block's rows: a tail of R - 5
    rng = np.random.default_rng(26)
    x = (rng.integers(-8, 9, (M, C)) / 2.0).astype(np_dtype(dt))
    ref = _reference(x, lens, form)
    lens = np.array(lens + [0] * (_lens_len(M, form) - len(lens)), np.int32)
    for target in ("cpu", TARGET):
        y = np.full((M, C), -7.0, np_dtype(dt))
        k = tw.compile(_gated(M, dt, form), target=target)
        if target == "cpu":
            k(x, lens, y)
        else:
            run_checked(k, x, lens, y)
            assert any("rows run" in n and "at a time" in n for n in k.notes), k.notes
        np.testing.assert_array_equal(y.astype(np.float64), ref, err_msg=f"{form} {target}")


def test_condition_on_a_row_tile_stays_the_error():
    """A condition that reads a row tile (different for each group) does not run in groups: the UB
    overflow stays, its hint naming the `if`'s line and why."""
    @T.prim_func
    def main(X: T.Tensor((R, C), "float32"), Y: T.Tensor((R, C), "float32")):
        with T.Kernel(1) as g:
            x = T.alloc_fragment((R, C), "float32")
            y = T.alloc_fragment((R, C), "float32")
            T.copy(X, x)
            if x[0, 0] > 0:
                for i, j in T.Parallel(R, C):
                    y[i, j] = x[i, j] * 2.0
                T.copy(y, Y)
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(main, target=TARGET)
    assert "UB overflow" in str(e.value)
    assert "an `if` whose condition reads 'x', which the block writes" in (e.value.hint or ""), e.value.hint


def _gated_with_max(M, dt):
    """The column max of the block's rows (a max across the rows: merged group by group, so the groups run
    in a loop in each block) next to an `if` on Lens."""
    nb = (M + R - 1) // R

    @T.prim_func
    def main(X: T.Tensor((M, C), dt), Lens: T.Tensor((nb,), "int32"), Y: T.Tensor((M, C), dt),
             Mx: T.Tensor((nb, C), "float32")):
        with T.Kernel(nb) as g:
            x = T.alloc_fragment((R, C), "float32")
            y = T.alloc_fragment((R, C), "float32")
            mx = T.alloc_fragment((C,), "float32")
            T.copy(X[g * R:(g + 1) * R, :], x)
            T.reduce_max(x, mx, dim=0)
            if 0 < Lens[g]:
                for i, j in T.Parallel(R, C):
                    y[i, j] = x[i, j] * 2.0 + 1.0
                T.copy(y, Y[g * R:(g + 1) * R, :])
            T.copy(mx, Mx[g, :])
    return main


@pytest.mark.parametrize("dt", DTYPES)
def test_rows_grouped_in_a_loop_under_uniform_condition(dt):
    M = 3 * R - 5
    rng = np.random.default_rng(27)
    x = (rng.integers(-8, 9, (M, C)) / 2.0).astype(np_dtype(dt))
    lens = np.array([2, 0, 1], np.int32)
    ref = _reference(x, lens, "if")
    pad = np.zeros((3 * R, C))
    pad[:M] = x.astype(np.float64)
    ref_mx = pad.reshape(3, R, C).max(axis=1)  # the tail's rows past M read as 0
    for target in ("cpu", TARGET):
        y = np.full((M, C), -7.0, np_dtype(dt))
        mx = np.zeros((3, C), np.float32)
        k = tw.compile(_gated_with_max(M, dt), target=target)
        if target == "cpu":
            k(x, lens, y, mx)
        else:
            run_checked(k, x, lens, y, mx)
            assert any("the groups in a loop in each block" in n for n in k.notes), k.notes
        np.testing.assert_array_equal(y.astype(np.float64), ref, err_msg=target)
        np.testing.assert_array_equal(mx.astype(np.float64), ref_mx, err_msg=target)
