"""Sliding windows in examples/masked_attention.py where the band's edges cross the column halves of
the cpu gemm runtime's micro-tiles (AVX-512: 14 x 32 tiles, halves of 16 columns; AVX2: 6 x 16,
halves of 8): Q K^T (c_band) computes a half strip with the one-vector micro-kernel when only
that half of a strip holds band columns in some rows. Windows of 1, 15, 16, 17, 31 and 33 keys,
as the window argument and as a bool mask tensor with its block tables; sequences that are not
a multiple of the block; seq_q != seq_kv; rows that see no key (0). Against float64, and the
kernel with the blocks' bands bit for bit against the same kernel with every band full (the
gemms then compute whole tiles: each score inside the band is the same chain of FMAs)."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import masked_attention as ma  # noqa: E402

WINDOWS = [1, 15, 16, 17, 31, 33]


def run_tensor(vis, B=1, H=2, KVH=1, D=64, seed=0, full_bands=False):
    """The kernel with a bool mask tensor `vis` and its block tables (with full_bands, every
    block's band full: whole tiles in both gemms), and the float64 reference."""
    sq, skv = vis.shape
    q, k, v, _ = ma.inputs(B, H, KVH, sq, skv, D, seed=seed)
    kern = ma.attention_prefill(B, H, KVH, sq, skv, D, "BHSD", False, None, "bool", False)
    blocks, pos, idx, bands, rects = ma.prefill_blocks(vis)
    if full_bands:  # the triangles (band_exact's 3) take their mask tile again (1)
        blocks, bands = np.where(blocks == 3, 1, blocks).astype(np.int32), ma.dense_blocks(sq, skv)[3]
    out = kern(q, k, v, vis, blocks, pos, idx, bands, rects, np.full((B,), skv, np.int32))
    return out, ma.reference(q, k, v, vis)


@pytest.mark.parametrize("window", WINDOWS)
def test_window_argument_matches_reference(window):
    # S 300: four whole 64-row blocks and a tail of 44 rows
    out, ref = ma.run(1, 2, 1, 300, 300, 64, causal=True, window=window)
    assert_close(out, ref)


@pytest.mark.parametrize("window", WINDOWS)
def test_window_mask_tensor_bitwise_against_whole_tiles(window):
    vis = ma.visibility(300, 300, True, window)
    out, ref = run_tensor(vis)
    whole, _ = run_tensor(vis, full_bands=True)
    assert_close(out, ref)
    assert np.array_equal(out, whole), "the bands changed a score inside them"


@pytest.mark.parametrize("sq,skv", [(200, 330), (330, 200), (65, 129), (1, 257)])
@pytest.mark.parametrize("window", [1, 16, 17, 33])
def test_window_with_seq_q_not_seq_kv(sq, skv, window):
    out, ref = ma.run(1, 2, 2, sq, skv, 64, causal=True, window=window)
    assert_close(out, ref)
    vis = ma.visibility(sq, skv, True, window)
    out, ref = run_tensor(vis, KVH=2)
    whole, _ = run_tensor(vis, KVH=2, full_bands=True)
    assert_close(out, ref)
    assert np.array_equal(out, whole)


@pytest.mark.parametrize("window", [15, 31])
def test_window_without_causal_both_band_edges_cross_a_tile(window):
    # no causal: a band j - i in (-window, skv - i) of 2 * window - 1 diagonals around each row
    # of the window mask below, both edges inside one block's tiles; rows from skv + window - 1
    # on see no key at all and give 0
    sq, skv = 330, 200
    out, ref = ma.run(1, 2, 1, sq, skv, 64, window=window)
    assert (out[:, :, skv + window - 1:] == 0).all()
    assert_close(out, ref)
    i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
    vis = np.abs(j - i) < window  # symmetric: the band's two edges in every partial block
    out, ref = run_tensor(vis)
    whole, _ = run_tensor(vis, full_bands=True)
    assert_close(out, ref)
    assert np.array_equal(out, whole)


def test_window_mask_tensor_with_hidden_rows():
    # a 17-key window with rows hidden entirely (a block's first row, mid-block, the tail's last)
    vis = ma.visibility(300, 300, True, 17)
    hidden = [0, 15, 16, 64, 100, 127, 299]
    vis[hidden] = False
    out, ref = run_tensor(vis)
    assert (out[:, :, hidden] == 0).all()
    assert_close(out, ref)
    whole, _ = run_tensor(vis, full_bands=True)
    assert np.array_equal(out, whole)
