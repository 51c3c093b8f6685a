"""Sliding windows in examples/masked_attention.py at the default 64 x 64 blocks, where the cpu gemm
runtime computes Q K^T only over the rows of each micro-tile that its band (c_band) reaches and P V
only over the k each row panel's band (a_band) reaches: windows of 1 .. 257 keys (the band's edges
at every offset from the micro-tiles' rows and columns), as the window argument and as a bool mask
tensor with its block tables, sequences that are not a multiple of the block, seq_q != seq_kv,
rows that see no key (0); against float64, and cpu against ascend910b (which computes whole
tiles) at small sizes."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import masked_attention as ma  # noqa: E402

WINDOWS = [1, 17, 63, 64, 65, 255, 256, 257]


def window_mask(sq, skv, window, causal=True):
    return ma.visibility(sq, skv, causal, window)


def run_tensor(vis, B=1, H=2, KVH=1, D=64, target="cpu", block_M=64, block_N=64, seed=0):
    """The kernel with a bool mask tensor `vis` and its block tables (Blocks, KvPos, KvIdx, Bands),
    and the float64 reference."""
    sq, skv = vis.shape
    q, k, v, _ = ma.inputs(B, H, KVH, sq, skv, D, seed=seed)
    kern = ma.attention_prefill(B, H, KVH, sq, skv, D, "BHSD", False, None, "bool", False,
                                block_M=block_M, block_N=block_N, target=target)
    out = kern(q, k, v, vis, *ma.prefill_blocks(vis, block_M, block_N, target), np.full((B,), skv, np.int32))
    return out, ma.reference(q, k, v, vis)


@pytest.mark.parametrize("window", WINDOWS)
def test_window_argument_matches_reference(window):
    # S 300: four whole 64-row blocks and a tail of 44 rows
    out, ref = ma.run(1, 2, 1, 300, 300, 64, causal=True, window=window)
    assert_close(out, ref)


@pytest.mark.parametrize("window", WINDOWS)
def test_window_mask_tensor_matches_reference(window):
    vis = window_mask(300, 300, window)
    out, ref = run_tensor(vis)
    assert_close(out, ref)


@pytest.mark.parametrize("sq,skv", [(200, 330), (330, 200), (65, 129), (1, 257)])
@pytest.mark.parametrize("window", [1, 65, 256])
def test_window_with_seq_q_not_seq_kv(sq, skv, window):
    out, ref = ma.run(1, 2, 2, sq, skv, 64, causal=True, window=window)
    assert_close(out, ref)
    out, ref = run_tensor(window_mask(sq, skv, window))
    assert_close(out, ref)


def test_window_without_causal_rows_past_the_keys_see_nothing():
    # no causal: row i sees keys i - window < j < skv; with more queries than keys the rows from
    # skv + window - 1 on see no key at all and give 0, in whole blocks and in a block's tail
    sq, skv, window = 330, 200, 17
    out, ref = ma.run(1, 2, 1, sq, skv, 64, window=window)
    assert (out[:, :, skv + window - 1:] == 0).all()
    assert_close(out, ref)
    vis = window_mask(sq, skv, window, causal=False)
    out, ref = run_tensor(vis)
    assert (out[:, :, skv + window - 1:] == 0).all()
    assert_close(out, ref)


def test_window_mask_tensor_with_hidden_rows():
    # a window with some rows hidden entirely (at a block's start, mid-block, at the tail)
    vis = window_mask(300, 300, 65)
    hidden = [0, 64, 100, 127, 299]
    vis[hidden] = False
    out, ref = run_tensor(vis)
    assert (out[:, :, hidden] == 0).all()
    assert_close(out, ref)


@pytest.mark.parametrize("window", [1, 17, 63, 64, 65])
def test_window_in_seventy_rows_on_cpu_and_ascend(window):
    # small blocks and sizes: ascend910b computes whole tiles (its lowering drops the bands), cpu
    # trims to the bands; both against float64 and each other
    vis = window_mask(70, 90, window)
    cpu, ref = run_tensor(vis, D=32, block_M=32, block_N=32)
    asc, _ = run_tensor(vis, D=32, block_M=32, block_N=32, target="ascend910b")
    assert_close(cpu, ref)
    assert_close(asc, ref)
    assert_close(cpu, asc)
