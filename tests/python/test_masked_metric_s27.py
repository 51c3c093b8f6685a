"""Session 27 (h-attn15): bench/run.py's masked prefill figure counts the scores the mask requires
(`required_scores`: inside each block's band of visible diagonals), not the visible pairs alone.
For the causal pattern, the sliding window and block-sparse masks the two counts are equal (the
goal per unmasked element is unchanged for them); for a random mask the count is the area of
its non-empty blocks' bands, checked here against a plain per-element count. numpy only."""
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


def brute_required(bands, sq, skv, bm, bn):
    """Per element: (i, j) counts when j - i (within its block) lies in its block's band."""
    n = 0
    for i in range(sq):
        for j in range(skv):
            lo, hi = bands[i // bm, j // bn]
            n += lo <= (j % bn) - (i % bm) < hi
    return n


# S 1 (one element), 17 (a tail block), 300 (several blocks and a tail); 64-wide blocks as the bench's
@pytest.mark.parametrize("S", [1, 17, 300])
@pytest.mark.parametrize("pattern", ["causal", "window", "blocksparse"])
def test_structured_masks_require_their_visible_pairs(pattern, S):
    vis = run.mask_pattern(np, np.random.default_rng(3), pattern, S)
    assert run.required_scores(np, ma.block_bands(vis), S, S) == int(vis.sum())


def test_random_mask_requires_its_bands_area():
    # small blocks, unequal sides, tails in both: a random mask at density 0.7 (as the bench's),
    # one query block hidden whole (its bands (0, 0): nothing required) and one row hidden
    rng = np.random.default_rng(4)
    sq, skv, bm, bn = 37, 29, 8, 16
    vis = rng.random((sq, skv)) < 0.7
    vis[8:16] = False
    vis[30] = False
    bands = ma.block_bands(vis, bm, bn)
    req = run.required_scores(np, bands, sq, skv, bm, bn)
    assert req == brute_required(bands, sq, skv, bm, bn)
    assert int(vis.sum()) < req <= (sq - 8) * skv
    assert run.required_scores(np, ma.block_bands(np.zeros((sq, skv), bool), bm, bn), sq, skv, bm, bn) == 0
