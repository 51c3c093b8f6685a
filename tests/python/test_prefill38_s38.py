"""Session 38 (h-prefill38): examples/masked_attention.py's mask-tile blocks (Blocks == 1) compare
the keys against n_kv and the rows against seq_q only where a block can hold elements past them
(padded keys, or a key or query tail: decided when the kernel is built, as the full blocks' branch
does); without padding or tails the map is the mask tile's select alone.

Whole blocks in both axes (the comparisons dropped), with seq_q != seq_kv, GQA, BSHD, bool and
additive masks (an additive mask's 0 and random values, -inf hiding), float32 and float16, against
float64; a key tail with an additive mask (the comparison kept: there the tile's columns past the
mask's edge read as 0, visible); the same kernel on ascend910b (checker on) against float64. Tails
and padding through these blocks are also test_mask32_s32's (random masks at S 17, 200, 257)."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples")]
try:
    import masked_attention as ma
finally:
    del sys.path[:1]


def case(sq, skv, bs, mask_kind="bool", layout="BHSD", dtype="float32", seed=38):
    """attention_prefill's arguments (2 query heads on 1 kv head, D 32) for a random mask with one
    whole visible block, and the float64 reference"""
    rng = np.random.default_rng(seed)
    vis = rng.random((sq, skv)) < 0.7
    vis[: min(sq, bs), : min(skv, bs)] = True  # one whole visible block (2) beside the partial ones (1)
    mask = vis if mask_kind == "bool" else \
        np.where(vis, np.where(rng.random((sq, skv)) < 0.5, 0.0, rng.standard_normal((sq, skv))), -np.inf).astype(np.float32)
    if mask_kind == "additive":
        mask[: min(sq, bs), : min(skv, bs)] = 0.0  # whole and adding nothing: no mask work (2)
    q, k, v, _ = ma.inputs(1, 2, 1, sq, skv, 32, layout=layout, dtype=dtype, seed=seed)
    tables = ma.prefill_blocks(mask, bs, bs)
    assert (tables[0] == 1).any() and (tables[0] == 2).any()  # the changed branch runs
    ref = ma.reference(q, k, v, vis, mask.astype(np.float64) if mask_kind == "additive" else None, layout)
    return (q, k, v, mask, *tables, np.full((1,), skv, np.int32)), ref


def check(sq, skv, bs, mask_kind="bool", layout="BHSD", dtype="float32"):
    args, ref = case(sq, skv, bs, mask_kind, layout, dtype)
    kern = ma.attention_prefill(1, 2, 1, sq, skv, 32, layout=layout, mask=mask_kind, block_M=bs, block_N=bs,
                                dtype=dtype)
    tol = dict(atol=2e-3, rtol=2e-3) if dtype == "float16" else dict(atol=1e-5, rtol=1e-5)
    assert_close(kern(*args), ref, **tol)


def test_mask_tile_blocks_without_tails():
    check(32, 96, 16, "bool")
    check(48, 64, 16, "additive", layout="BSHD", dtype="float16")


def test_mask_tile_blocks_with_a_key_tail():
    check(64, 50, 16, "additive")  # kj < n_kv kept: the tile's columns past the mask read as 0 (visible)


def test_mask_tile_blocks_on_ascend():
    from ascend_util import run_checked
    args, ref = case(32, 32, 16)
    kern = ma.attention_prefill(1, 2, 1, 32, 32, 32, mask="bool", block_M=16, block_N=16, target="ascend910b")
    out = run_checked(kern, *args)
    assert_close(out[0] if isinstance(out, (list, tuple)) else out, ref)
