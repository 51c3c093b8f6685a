"""Session 30 (h-window2): a document mask's partial blocks, the blocks a document's edge cuts, on
both targets. At 16 x 16 blocks and S 45 with documents of 13, 20 and 12 tokens, the edges at 13
and 33 cut a diagonal block into two triangles (0, 0) and (2, 2), a block below it into a strip
of columns (1, 0: rows 16..31 see keys 13..15), one into a single row (2, 1: row 32 sees keys
16..31) and one into a 1 x 3 corner (2, 0: row 32 sees keys 13..15): each applies its mask tile
(1); the diagonal block inside one document is a band (3).
cpu and ascend910b (simulated, the checker on) against float64 and torch SDPA with the bool mask.

And bench/masked_ceiling.py's estimate of tighter computed regions for such blocks
(`region_pairs`, not built: docs/performance.md "Session 30: the document's partial blocks"):
its `band` form is the gemm runtime's band rule (`computed_pairs`) block by block, and each
tighter form computes no more than the looser one and at least the visible pairs. numpy only."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "examples")]
try:
    import masked_attention as ma
    import masked_ceiling as mc
    import run as bench_run
finally:
    del sys.path[:2]

S, BS = 45, 16


def documents(s, lengths):
    """causal inside each packed document of the given lengths (the last one takes the rest)"""
    doc = np.searchsorted(np.cumsum(lengths), np.arange(s), side="right")
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    return (j <= i) & (doc[:, None] == doc[None, :])


def prefill(target):
    mask = documents(S, [13, 20])
    q, k, v, _ = ma.inputs(1, 4, 2, S, S, 32, seed=30)  # GQA: 2 query heads per kv head
    kern = ma.attention_prefill(1, 4, 2, S, S, 32, mask="bool", block_M=BS, block_N=BS, target=target)
    tables = ma.prefill_blocks(mask, BS, BS, target)
    return kern(q, k, v, mask, *tables, np.full((1,), S, np.int32)), mask, tables[0], (q, k, v)


def test_document_edges_cut_blocks():
    blocks = ma.prefill_blocks(documents(S, [13, 20]), BS, BS)[0]
    cut = [(0, 0), (2, 2)]  # cut by an edge into two triangles: the mask tile
    assert all(blocks[b] == 1 for b in cut)
    # cut to a rectangle (session 31, h-rect: the band met with the block's rectangle is exact) or
    # inside one document (its band): no mask tile
    assert all(blocks[b] == 3 for b in [(1, 0), (2, 0), (2, 1), (1, 1)]) and not np.triu(blocks, 1).any()


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_document_partial_blocks_on_both_targets(target):
    torch = pytest.importorskip("torch")
    out, mask, _, (q, k, v) = prefill(target)
    assert_close(out, ma.reference(q, k, v, mask))
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v)),
                                                           attn_mask=torch.from_numpy(mask), enable_gqa=True)
    assert_close(out, ref.numpy())  # every row sees its own key: no NaN row in SDPA
    if target == "ascend910b":
        assert_close(out, prefill("cpu")[0], atol=1e-6, rtol=1e-5)


def test_region_estimate_band_form_is_the_runtime_rule():
    rng = np.random.default_rng(1)  # two documents' edges in 600 tokens: 10 blocks cut a head
    vis = bench_run.mask_pattern(np, rng, "document", 600)
    bm = bn = 64
    _, _, _, bands, rects = ma.prefill_blocks(vis, bm, bn)
    whole = ma.dense_blocks(600, 600, bm, bn)[4]  # the blocks that apply their mask tile without rectangles
    blocks = ma.band_exact(vis, ma.block_mask(vis, bm, bn), bands, whole, bm, bn)
    nvis, forms = mc.region_forms(np, vis, blocks, bands, bm, bn)
    assert nvis > 0 and (blocks == 1).sum() == 10
    only = np.where(blocks == 1, 1, 0)  # computed_pairs over the same blocks
    assert tuple(forms["band"]) == mc.computed_pairs(np, only, bands, bm, bn, 14, 32)
    for g in (0, 1):  # Q K^T, P V: each form within the looser one, and at least the visible pairs
        assert forms["band"][g] >= forms["rect"][g] >= forms["exact"][g] >= nvis
        assert forms["band"][g] >= forms["rows16"][g] >= forms["exact"][g]
