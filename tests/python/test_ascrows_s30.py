"""Wide rows' vector calls on ascend910b (issue 16; h-ascrows, docs/ascend.md "Session 30: the wide
rows' vector work (h-ascrows)").

select_vector_calls issues the calls of a tile with fewer rows than 256 B column chunks (one wide
row, a few rows: what a row in column blocks gives) along each row: a row broadcast (x - max[i],
x / sum[i]), a non-contiguous elementwise call and a row sum take one call per row instead of one
call of one repeat per 64-column chunk. The same instructions on the same elements: every result is
the column-chunk form's. Checked here at small odd shapes (a one-row tile with a 45-column tail, two
rows of 1000 columns, a 4-column tail after 64 whole repeats, a label at column 0 and at the last
column, a NaN row, no rows at all), each against float64 numpy at TOLERANCES of the dtype and against
cpu, the simulator's checker on (run_checked); and the printed AscendC of a one-row tile has one
call along the row, not a loop over its column chunks.
"""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import TOLERANCES, assert_close, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import load_example  # noqa: E402

import test_ascend_widerow_s25 as w25  # noqa: E402  (its cross_entropy: the label's logit by T.where)

softmax = load_example("softmax")
layer_norm = load_example("layer_norm")


def _both(factory, N, block_M, dtype, args):
    """(ascend910b outputs with the checker on, cpu outputs), on copies of args."""
    k = factory(N, block_M=block_M, dtype=dtype, target=TARGET)
    got = run_checked(k, *[a.copy() for a in args])
    cpu = factory(N, block_M=block_M, dtype=dtype, target="cpu")(*[a.copy() for a in args])
    return np.asarray(got, np.float64), np.asarray(cpu, np.float64)


@pytest.mark.parametrize("M, N, block_M, dtype", [
    (2, 301, 1, "float32"),    # one-row tiles, 4 whole repeats + a 45-column tail; row 1 has a NaN
    (1, 4100, 1, "bfloat16"),  # one row: 64 whole repeats + a 4-column tail, computed in float32
    (0, 301, 1, "float32"),    # no rows: no program runs
])
def test_softmax_one_row_tiles(M, N, block_M, dtype):
    x = randn((M, N), dtype, scale=3.0, seed=np.random.default_rng(N + M))
    if M > 1:
        x[1, 7] = np.nan
    got, cpu = _both(softmax.softmax, N, block_M, dtype, [x])
    ref = softmax.reference(x)
    atol, rtol = TOLERANCES[dtype]
    assert_close(got, ref, atol=atol, rtol=rtol, msg=f"softmax {M}x{N} {dtype}", equal_nan=True)
    assert_close(got, cpu, atol=atol, rtol=rtol, msg=f"softmax {M}x{N} {dtype} vs cpu", equal_nan=True)
    if M > 1:
        assert np.isnan(got[1]).all() and np.isnan(cpu[1]).all()


def test_layer_norm_two_rows_of_1000():
    # 2-row tiles of 1000 columns (16 chunks: along each row), M = 3: the last block has one row
    rng = np.random.default_rng(3)
    x, w, b = randn((3, 1000), "float32", scale=2.0, seed=rng), randn((1000,), "float32", seed=rng), \
        randn((1000,), "float32", seed=rng)
    got, cpu = _both(layer_norm.layer_norm, 1000, 2, "float32", [x, w, b])
    atol, rtol = TOLERANCES["float32"]
    ref = layer_norm.reference(x, w, b)
    assert_close(got, ref, atol=atol, rtol=rtol, msg="layer_norm 3x1000")
    assert_close(got, cpu, atol=atol, rtol=rtol, msg="layer_norm 3x1000 vs cpu")


def test_cross_entropy_labels_at_both_ends():
    # the label's logit picked by T.where(j == lab[i], ...) (an int32 row broadcast along the row):
    # labels at column 0, the last column (in the tail) and the middle
    N = 301
    rng = np.random.default_rng(5)
    x = randn((3, N), "float32", scale=3.0, seed=rng)
    lab = np.array([0, N - 1, 150], np.int32)
    got, cpu = _both(w25.cross_entropy, N, 1, "float32", [x, lab])
    xf = x.astype(np.float64)
    ref = w25._lse(xf) - xf[np.arange(3), lab]
    assert_close(got, ref, atol=1e-4, rtol=1e-5, msg="cross_entropy 3x301")
    assert_close(got, cpu, atol=1e-4, rtol=1e-5, msg="cross_entropy 3x301 vs cpu")


def test_one_row_broadcast_is_one_call_along_the_row():
    # x - max[i] on a 1 x 4100 float32 tile: one Sub of 64 repeats going along the row (repeat
    # stride 8 blocks, the max's block read with strides 0) and one for the 4-column tail, not a
    # loop of 65 one-repeat calls
    src = softmax.softmax(4100, block_M=1, target=TARGET).get_source()
    assert "for (int32_t tw_c_" not in src
    assert "64, 64, BinaryRepeatParams(1, 1, 0, 8, 8, 0)" in src
    assert "4, 1, BinaryRepeatParams(1, 1, 0, 8, 8, 0)" in src
