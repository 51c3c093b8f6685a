"""Rows that exceed the AIV's UB (issue 13, "change only the target"; h-ubsplit12, docs/ascend.md
"Session 24: rows that exceed UB (h-ubsplit12)").

A kernel that runs on cpu runs unchanged on ascend910b when its block's tiles do not fit the UB
but each row is computed on its own: the compiler runs the block's rows in groups that fit
(split_rows; a note names the groups), max / min reductions across the rows merged group by group.
A body that is not row-wise stays a UB overflow whose hint names what the user can change (never a compiler temporary, never a tile whose shape is the
kernel's argument). Results are checked against float64 numpy with tilewright.testing.TOLERANCES
(per output dtype) and, for some, against cpu; the simulator's checker is on (run_checked). A
single row larger than the UB runs in column blocks since session 25 (test_ascend_widerow_s25.py).
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import load_example  # noqa: E402

ma = load_example("masked_attention")
rms_norm = load_example("rms_norm")
layer_norm = load_example("layer_norm")
softmax = load_example("softmax")

DTYPES = ["float32", "float16", "bfloat16"]


def _bottom_right(Sq, Skv, window=None):
    i, j = np.arange(Sq)[:, None] + (Skv - Sq), np.arange(Skv)[None, :]
    vis = j <= i
    if window is not None:
        vis &= j > i - window
    return vis


# hunt11a F4: the block tables at the block sizes of the ascend910b prefill figures. bool: the mask
# is compared in float16 (its float32 copy took 64 KiB); additive: msk, seen and plain are 192 KiB
# together, so the rows run in two groups, the block's any_seen / any_work merged across them.
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_prefill_blocks_128(kind):
    vis = _bottom_right(200, 300, window=100)
    mask = vis if kind == "bool" else np.where(vis, 0.0, -np.inf).astype(np.float32)
    got = ma.prefill_blocks(mask, 128, 128, TARGET)
    for g, want in zip(got, ma.prefill_blocks(mask, 128, 128, "cpu")):
        np.testing.assert_array_equal(g, want)
    k = ma.block_mask_kernel(200, 300, 128, 128, kind, target=TARGET)
    blocks = run_checked(k, mask)
    # the kernel's summary before band_exact (prefill_blocks marks a partial block that is exactly
    # its band 3: given back as 1)
    np.testing.assert_array_equal(blocks, np.where(got[0] == 3, 1, got[0]))
    # the bool kind runs all 128 rows at once again since session 35 (h-masktile35: its `inside`, an index
    # mask read by two stores, is no longer a float16 tile; session 34's tile ran 64 at a time, 19.18 -> 19.97 us)
    assert any("rows run 64 at a time" in n for n in k.notes) == (kind == "additive")


def _norm_case(op, N, dtype, M=11):
    rng = np.random.default_rng(N)
    x = randn((M, N), dtype, seed=rng)
    w = randn((N,), dtype, seed=rng)
    b = randn((N,), dtype, seed=rng)
    if op == "rms_norm":
        return rms_norm.rms_norm, (x, w), rms_norm.reference(x, w), 1.0
    if op == "layer_norm":
        return layer_norm.layer_norm, (x, w, b), layer_norm.reference(x, w, b), 1.0
    x = randn((M, N), dtype, scale=3.0, seed=rng)
    return softmax.softmax, (x,), softmax.reference(x), float(N)  # compared at N * y (values near 1)


# The examples at their default block_M (8) at Llama-7B / 13B hidden sizes and LLaMA's 11008 + 1;
# 11 rows: a block whose last rows are past M (the groups past M read 0 and store nothing).
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N", [4096, 5120, 11009])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm", "softmax"])
def test_norms_at_default_block_sizes(op, N, dtype):
    factory, args, ref, scale = _norm_case(op, N, dtype)
    k = factory(N, dtype=dtype, target=TARGET)
    y = run_checked(k, *args)
    atol, rtol = TOLERANCES[dtype]
    assert_close(np.asarray(y, np.float64) * scale, ref * scale, atol=atol, rtol=rtol, msg=f"{op} {N} {dtype}")


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_norms_split_match_cpu(op):
    # the split kernel against cpu (float32, 4096: 8 rows in groups of 4 / 2) and the note
    factory, args, _, _ = _norm_case(op, 4096, "float32")
    k = factory(4096, target=TARGET)
    assert any("rows run" in n and "at a time" in n for n in k.notes), k.notes
    y = run_checked(k, *args)
    np.testing.assert_allclose(y, factory(4096)(*args), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_vocabulary_row_32000(dtype):
    # one row per block (block_M=1): fits since h-ascnan11; unchanged by the row groups
    scale = 32000.0
    x = randn((2, 32000), dtype, scale=3.0, seed=np.random.default_rng(1))
    k = softmax.softmax(32000, block_M=1, dtype=dtype, target=TARGET)
    y = run_checked(k, x)
    atol, rtol = TOLERANCES[dtype]
    assert_close(np.asarray(y, np.float64) * scale, softmax.reference(x) * scale, atol=atol, rtol=rtol)


def test_softmax_16384_rows_one_at_a_time():
    # 8 rows of 64 KiB: one row per group (a capacity error before session 24)
    x = randn((9, 16384), "float32", scale=3.0, seed=np.random.default_rng(3))
    k = softmax.softmax(16384, target=TARGET)
    assert any("8 rows run 1 at a time" in n for n in k.notes), k.notes
    y = run_checked(k, x)
    assert_close(np.asarray(y, np.float64) * 16384, softmax.reference(x) * 16384, atol=TOLERANCES["float32"][0],
                 rtol=TOLERANCES["float32"][1])


@pytest.mark.parametrize("block_M", [1, 8])
def test_softmax_row_151936_runs_in_column_blocks(block_M):
    # one row of Qwen2's vocabulary is 594 KiB of float32: no row group fits. It was an error whose
    # hint named a column block length; since session 25 (split_cols) each row runs in column
    # blocks (test_ascend_widerow_s25.py has the other kernels, dtypes and widths); since session 26
    # the max and the sum share a pass (online rescaling: test_ascend_widerow_s26.py)
    k = softmax.softmax(151936, block_M=block_M, target=TARGET)
    assert any("each row of 151936 columns runs in" in n and "2 passes over the row" in n for n in k.notes), k.notes
    x = randn((3, 151936), "float32", scale=3.0, seed=np.random.default_rng(5))
    y = run_checked(k, x)
    assert_close(np.asarray(y, np.float64) * 151936, softmax.reference(x) * 151936, atol=TOLERANCES["float32"][0],
                 rtol=TOLERANCES["float32"][1])


R, N = 16, 4096


def rowwise_kernel(M, across):
    """16 x 4096 float32 tiles x and y (512 KiB): every row on its own, then (across) a statement
    that is not row-wise: the column sums of y."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), G: T.Tensor((T.ceildiv(M, R),), "float32"),
             Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, R)) as bx:
            x = T.alloc_fragment((R, N), "float32")
            y = T.alloc_fragment((R, N), "float32")
            s = T.alloc_fragment((R,), "float32")
            m = T.alloc_fragment((R,), "float32")
            g = T.alloc_fragment((1,), "float32")
            col = T.alloc_fragment((N,), "float32")
            T.copy(X[bx * R, 0], x)
            for i, j in T.Parallel(R, N):
                y[i, j] = x[i, j] * 2.0 + T.where(bx * R + i < M, 1.0, 0.5)
            T.reduce_sum(y, s, dim=1)
            for i, j in T.Parallel(R, N):
                y[i, j] = y[i, j] - s[i] / N
            T.reduce_max(y, m, dim=1)
            T.reduce_max(m, g)  # across the rows: merged group by group
            if across:
                T.reduce_sum(y, col, dim=0)
                for i, j in T.Parallel(R, N):
                    y[i, j] = y[i, j] + col[j]
                for _ in T.serial(2):  # (without this loop the columns run in blocks since session 26)
                    for i, j in T.Parallel(R, N):
                        y[i, j] = y[i, j] * 0.5
            T.copy(y, Y[bx * R, 0])
            T.copy(g, G[bx:bx + 1])

    return tw.compile(main, out_idx=[-1], target=TARGET)


def test_row_groups_merge_a_max_across_rows_with_nan():
    M = 37  # 3 blocks, the last with 5 rows: its rows past M read 0 (and take 0.5, as on cpu)
    k = rowwise_kernel(M, across=False)
    assert any("16 rows run" in n for n in k.notes), k.notes
    x = randn((M, N), "float32", seed=np.random.default_rng(2))
    x[29, 100] = np.nan  # a row of the second block's last group
    G = np.zeros(3, np.float32)
    y = run_checked(k, x, G)
    xp = np.zeros((48, N))
    xp[:M] = x
    yy = xp * 2.0 + np.where(np.arange(48) < M, 1.0, 0.5)[:, None]
    yy = yy - yy.sum(axis=1, keepdims=True) / N
    gref = np.array([yy[b * 16:(b + 1) * 16].max() for b in range(3)])
    assert_close(y, yy[:M], equal_nan=True)
    assert np.isnan(G[1]) and not np.isnan(G[0]) and not np.isnan(G[2])
    assert_close(G, gref, equal_nan=True)


def test_a_body_that_is_not_row_wise_is_an_error_naming_its_line():
    with pytest.raises(tw.TilewrightError) as e:
        rowwise_kernel(37, across=True)
    text = str(e.value)
    assert "UB overflow" in text
    assert ("the compiler runs a block's rows in groups that fit when every row is computed on its own, which "
            "line") in text
    # (session 30: the column sum itself is carried across row groups; the map after it reads every row's sum)
    assert "a statement on the rows after one that needs every row's result" in text


def test_the_smaller_tile_hint_keeps_a_weight_row():
    # a body that is not row-wise (a column sum): the hint halves the block's rows, not w (N,), whose
    # length is the kernel's N (hunt11a F4's "w 1024" for rms_norm's weight row)
    @T.prim_func
    def main(X: T.Tensor((64, N), "float32"), W: T.Tensor((N,), "float32"), Y: T.Tensor((64, N), "float32")):
        with T.Kernel(8) as bx:
            x = T.alloc_fragment((8, N), "float32")
            y = T.alloc_fragment((8, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            col = T.alloc_fragment((N,), "float32")
            T.copy(X[bx * 8, 0], x)
            T.copy(W, w)
            for i, j in T.Parallel(8, N):
                y[i, j] = x[i, j] * w[j]
            T.reduce_sum(y, col, dim=0)
            for i, j in T.Parallel(8, N):
                y[i, j] = y[i, j] + col[j]
            for _ in T.serial(2):  # (without this loop the columns run in blocks since session 26)
                for i, j in T.Parallel(8, N):
                    y[i, j] = y[i, j] * 0.5
            T.copy(y, Y[bx * 8, 0])

    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(main, out_idx=[-1], target=TARGET)
    assert e.value.hint.startswith("a smaller tile that fits: x 4x4096, y 4x4096, w 4096 ("), e.value.hint
    assert "prevents (a statement on the rows after one that needs every row's result)" in e.value.hint, e.value.hint
