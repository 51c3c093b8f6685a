"""band_exact (examples/masked_attention.py): a partial block whose mask is exactly its band of
diagonals (a sliding window's or causal's triangles) is marked 3 in the block summary, and
attention_prefill computes its visibility from the band instead of reading its mask tile. Small
odd shapes: S 67 with a window of 5 (16 x 16 blocks: tails), a document edge inside a micro-tile
(such a block is not a band: it keeps its mask, 1), a fully masked row, a one-key document, an
additive mask. Against float64, and bit for bit against the same kernel with every 3 given back
as 1 (the mask tile applied: the unrestricted kernel), on cpu and ascend910b. (Session 28 measured
it and reverted it: the third branch was a fifth Cube -> Vector hand-off, 12 cross-core flag ids at
the bench's ascend shape; session 29: hand-offs in exclusive if arms share their ids.)"""
import pathlib
import re
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import masked_attention as ma  # noqa: E402

S = 67


def window(s, w):
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    return (j <= i) & (j > i - w)


def documents(s, lengths):
    """causal inside each packed document of the given lengths (the last one takes the rest)"""
    doc = np.searchsorted(np.cumsum(lengths), np.arange(s), side="right")
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    return (j <= i) & (doc[:, None] == doc[None, :])


def run(mask, target="cpu", bm=16, bn=16, B=1, H=2, KVH=1, D=24):
    sq, skv = mask.shape
    kind = "bool" if mask.dtype == np.bool_ else "additive"
    q, k, v, _ = ma.inputs(B, H, KVH, sq, skv, D, seed=sq)
    kern = ma.attention_prefill(B, H, KVH, sq, skv, D, "BHSD", False, None, kind, False, bm, bn, target=target)
    blocks, pos, idx, bands, rects = ma.prefill_blocks(mask, bm, bn, target)
    lens = np.full((B,), skv, np.int32)
    out = kern(q, k, v, mask, blocks, pos, idx, bands, rects, lens)
    plain = kern(q, k, v, mask, np.where(blocks == 3, 1, blocks).astype(np.int32), pos, idx, bands, rects, lens)
    vis = mask if kind == "bool" else mask > -np.inf
    ref = ma.reference(q, k, v, vis, None if kind == "bool" else mask.astype(np.float64))
    return out, plain, ref, blocks


def test_band_exact_classes():
    # window 5 at S 67 in 16 x 16 blocks: every partial block is a triangle (3), the tail blocks too
    b = ma.prefill_blocks(window(S, 5), 16, 16)[0]
    assert set(np.unique(b)) == {0, 3}
    # causal: full blocks below the diagonal (2), the diagonal ones triangles (3)
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    b = ma.prefill_blocks(j <= i, 16, 16)[0]
    np.testing.assert_array_equal(np.diag(b), 3)
    assert set(np.unique(b)) == {0, 2, 3}
    # a document edge at row / column 21 (inside block 1 and inside a 14-row micro-panel): block
    # (1, 1) holds two triangles, not its band: the mask stays (1); one-key documents (rows 40, 41)
    m = documents(S, [21, 19, 1, 1])
    b = ma.prefill_blocks(m, 16, 16)[0]
    assert b[1, 1] == 1 and b[0, 0] == 3 and b[2, 2] == 1
    # additive: 0 inside the band and -inf outside is a band; another value inside it is not
    add = np.where(window(S, 5), 0, -np.inf).astype(np.float32)
    assert set(np.unique(ma.prefill_blocks(add, 16, 16)[0])) == {0, 3}
    add[30, 29] = 0.5
    assert ma.prefill_blocks(add, 16, 16)[0][1, 1] == 1
    # a hand-written summary without 3 (block_mask's kernel) is unchanged: 3 only from band_exact
    assert 3 not in ma.block_mask(window(S, 5), 16, 16)


def masks():
    w = window(S, 5)
    w_row = w.copy()
    w_row[33] = False  # a row that sees no key (0), inside a triangle block
    return {"window5": w, "window5_hidden_row": w_row, "documents": documents(S, [21, 19, 1, 1]),
            "additive_window": np.where(w, 0, -np.inf).astype(np.float32)}


@pytest.mark.parametrize("name", list(masks()))
def test_band_blocks_bitwise_against_mask_tiles(name):
    out, plain, ref, blocks = run(masks()[name])
    assert (blocks == 3).any()
    assert_close(out, ref)
    assert np.array_equal(out, plain), "a band block's visibility differs from its mask tile's"
    if name == "window5_hidden_row":
        assert not out[:, :, 33].any()


def test_band_blocks_ascend_against_cpu():
    # the one kernel on both targets: ascend910b (simulated) against cpu and float64
    m = masks()["window5_hidden_row"]
    out, plain, ref, _ = run(m, "ascend910b")
    cpu, _, _, _ = run(m)
    assert_close(out, ref)
    assert_close(out, cpu, atol=1e-6, rtol=1e-5)
    assert np.array_equal(out, plain)


def test_bench_ascend_shape_fits_the_cross_core_flag_ids():
    # the bench's ascend shape (128 x 128 blocks, float16, D 128, more programs than AI Cores: the
    # programs' pacing flags too): the scores' hand-off in each of the three arms (mask tile, band,
    # full block) shares one pair of cross-core flag ids; every id within 0..10 (compile only)
    kern = ma.attention_prefill(1, 4, 4, 1024, 1024, 128, mask="bool", block_M=128, block_N=128,
                                dtype="float16", target="ascend910b")
    src = kern.get_source("ascendc")
    ids = {int(x) for x in re.findall(r"CrossCore(?:Set|Wait)Flag<[^>]*>\((\d+)\)", src)}
    assert ids and max(ids) <= 10, sorted(ids)
