"""Session 33 (h-maskblk33): examples/masked_attention.py's prefill at block shapes that are not
square (128 x 64: taller query blocks; 96 x 32: a query block that is not a whole number of the
cpu gemm's 14-row panels, narrow key blocks), which h-maskblk33 measured as candidates for the
masked prefill (docs/performance.md; 64 x 64 stayed the fastest) and a user's `@tw.autotune`
(`tune_inputs`) may pick: the mask tensor's block tables (`prefill_blocks`) at those shapes, the
kernel with them against float64 and bit for bit against the same kernel with every band_exact
block (3) given back as a mask-tile block (1).

Odd lengths (1: one element; 257: tails past 96 and 128 rows and 32 and 64 keys), a sliding window,
packed documents (edges off every grid), causal and a random mask; grouped-query heads (4 query
heads on 2 kv heads), padded keys (KvLen: random lengths, rows that see no key give 0), bool and
additive masks, the BSHD layout."""
import pathlib
import sys

import numpy as np
from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples")]
try:
    import masked_attention as ma
finally:
    del sys.path[:1]

from test_mask32_s32 import pattern  # noqa: E402  (the same masks: window 23, two documents, causal, random)


def run(s, bm, bn, names, mask_kind="bool", layout="BHSD", seed=33):
    """the kernel at bm x bn with padded keys and GQA, each mask in `names` (one compile), against
    float64 and against itself with band_exact's blocks given back as mask-tile blocks"""
    B, H, KVH, D = 2, 4, 2, 32
    kern = ma.attention_prefill(B, H, KVH, s, s, D, layout, mask=mask_kind, padded=True, block_M=bm, block_N=bn)
    q, k, v, rng = ma.inputs(B, H, KVH, s, s, D, layout, seed=seed)
    lens = np.array([s, rng.integers(1, s + 1)], np.int32)
    exact = 0
    for name in names:
        vis = pattern(name, s, rng)
        mask = vis if mask_kind == "bool" else \
            np.where(vis, np.where(np.arange(s)[None, :] < s // 2, 0.0, rng.standard_normal((s, s))),
                     -np.inf).astype(np.float32)
        tables = ma.prefill_blocks(mask, bm, bn)
        out = kern(q, k, v, mask, *tables, lens)
        plain = kern(q, k, v, mask, np.where(tables[0] == 3, 1, tables[0]).astype(np.int32), *tables[1:], lens)
        np.testing.assert_array_equal(out, plain)
        keep = np.stack([ma.visibility(s, s, mask=vis, kv_len=n) for n in lens])
        ref = ma.reference(q, k, v, keep, mask.astype(np.float64) if mask_kind == "additive" else None, layout)
        assert_close(out, ref, atol=1e-5, rtol=1e-5, msg=f"{name} at {bm} x {bn}")
        exact += int((tables[0] == 3).sum())
    return exact


def test_tall_blocks_bool_against_float64():
    assert run(257, 128, 64, ["window", "documents", "causal", "random"]) > 0  # band_exact blocks ran
    run(1, 128, 64, ["window", "random"])


def test_narrow_blocks_additive_bshd_against_float64():
    assert run(257, 96, 32, ["window", "documents", "causal", "random"], mask_kind="additive", layout="BSHD") > 0
