"""Session 27 (h-attn15): bench/run.py's masked prefill figure counts the scores the mask requires
(`required_scores`: inside each block's band of visible diagonals and an 8 x 8 sub-tile with a
visible element), not the visible pairs alone. For the causal pattern, the sliding window and
block-sparse masks the two counts are equal (the goal per unmasked element is unchanged for
them); for a random mask and a document mask the count is checked against a plain per-element
count. numpy only."""
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "examples")]
try:
    import masked_attention as ma
    import run
finally:
    del sys.path[:2]


def brute_required(vis, bands, bm, bn, g=8):
    """Per element: (i, j) counts when j - i (within its block) lies in its block's band and its
    g x g sub-tile holds a visible element."""
    n = 0
    sq, skv = vis.shape
    for i in range(sq):
        for j in range(skv):
            lo, hi = bands[i // bm, j // bn]
            tile = vis[i // g * g:(i // g + 1) * g, j // g * g:(j // g + 1) * g]
            n += bool(lo <= (j % bn) - (i % bm) < hi and tile.any())
    return n


# S 1 (one element), 17 (a tail block), 300 (several blocks and a tail); 64-wide blocks as the bench's
@pytest.mark.parametrize("S", [1, 17, 300])
@pytest.mark.parametrize("pattern", ["causal", "window", "blocksparse"])
def test_structured_masks_require_their_visible_pairs(pattern, S):
    vis = run.mask_pattern(np, np.random.default_rng(3), pattern, S)
    assert run.required_scores(np, vis, ma.block_bands(vis)) == int(vis.sum())


@pytest.mark.parametrize("pattern", ["random", "document"])
def test_scattered_and_document_masks_against_a_plain_count(pattern):
    # small blocks, unequal sides, tails in both: the bench's random mask (density 0.7) or packed
    # documents, one query block hidden whole (its bands (0, 0): nothing required) and one row
    rng = np.random.default_rng(4)
    sq, skv, bm, bn = 45, 37, 16, 16
    if pattern == "random":
        vis = rng.random((sq, skv)) < 0.7
    else:  # documents of 5 .. 13 tokens, causal inside each
        doc = np.searchsorted(np.cumsum(rng.integers(5, 14, size=sq)), np.arange(sq), side="right")
        vis = (np.arange(skv)[None, :] <= np.arange(sq)[:, None]) & (doc[:, None] == doc[None, :skv])
    vis[16:32] = False
    vis[40] = False
    bands = ma.block_bands(vis, bm, bn)
    req = run.required_scores(np, vis, bands, bm, bn)
    assert req == brute_required(vis, bands, bm, bn)
    assert int(vis.sum()) < req <= (sq - 16) * skv
    if pattern == "random":  # no 8 x 8 sub-tile is all hidden
        assert req > 0.9 * (sq - 17) * skv
    assert run.required_scores(np, np.zeros((sq, skv), bool), ma.block_bands(np.zeros((sq, skv), bool), bm, bn),
                               bm, bn) == 0


def test_document_pattern_is_causal_inside_packed_documents():
    S = 700
    vis = run.mask_pattern(np, np.random.default_rng(5), "document", S)
    assert np.array_equal(vis, np.tril(vis))  # causal
    first = np.argmax(vis, axis=1)  # each row sees the keys from its document's start to itself
    assert all(vis[i, first[i]:i + 1].all() and vis[i].sum() == i + 1 - first[i] for i in range(S))
    starts = np.unique(first)
    assert len(starts) >= 2 and np.all(np.diff(np.append(starts, S)) >= 100)  # documents of >= 100 tokens
    assert np.array_equal(vis, run.mask_pattern(np, np.random.default_rng(5), "document", S))
