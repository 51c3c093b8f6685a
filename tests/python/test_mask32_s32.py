"""Session 32 (h-mask32): examples/masked_attention.py's band_exact blocks (Blocks == 3) meet the
rectangle's ends with the queries' and keys' ends as block scalars (r_end, c_end: six comparisons
an element, not eight), and the full blocks' branch compares nothing when no key block reaches
past n_kv: the same visibility, so the same result bit for bit as the untouched form, the mask
tile applied (every 3 given back as 1).

Lengths 1, 17, 64, 200, 257 (one element; tails past 16 and 64 rows; 64: whole 16-key blocks,
where the full blocks' branch compares nothing), masks whose partial blocks
are band_exact (a sliding window, packed documents, causal) and not (random), bool and additive
masks, float32 and float16, padded keys (KvLen), on cpu against the untouched form (bit for bit)
and float64; the same kernel on ascend910b (checker on) against cpu."""
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


def documents(s, lengths):
    """causal inside each packed document of the given lengths (the last one takes the rest)"""
    doc = np.searchsorted(np.cumsum(lengths), np.arange(s), side="right")
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    return (j <= i) & (doc[:, None] == doc[None, :])


def pattern(name, s, rng):
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    if name == "window":
        return (j <= i) & (j > i - 23)
    if name == "documents":
        return documents(s, [max(1, s // 3), max(1, s // 4)])
    if name == "causal":
        return j <= i
    return rng.random((s, s)) < 0.7


def check(s, name, bs, mask_kind="bool", dtype="float32", padded=False, seed=32):
    rng = np.random.default_rng(seed)
    vis = pattern(name, s, rng)
    # additive: 0 added on the left half's visible keys (blocks there can be band_exact), a random
    # number on the right half's
    left = np.arange(s)[None, :] < s // 2
    mask = vis if mask_kind == "bool" else \
        np.where(vis, np.where(left, 0.0, rng.standard_normal((s, s))), -np.inf).astype(np.float32)
    q, k, v, _ = ma.inputs(1, 2, 1, s, s, 32, dtype=dtype, seed=seed)
    lens = rng.integers(1, s + 1, size=1).astype(np.int32) if padded else np.full((1,), s, np.int32)
    kern = ma.attention_prefill(1, 2, 1, s, s, 32, mask=mask_kind, padded=padded, block_M=bs, block_N=bs,
                                dtype=dtype)
    tables = ma.prefill_blocks(mask, bs, bs)
    out = kern(q, k, v, mask, *tables, lens)
    # the untouched form: every band_exact block applies its mask tile
    blocks = np.where(tables[0] == 3, 1, tables[0]).astype(np.int32)
    plain = kern(q, k, v, mask, blocks, *tables[1:], lens)
    np.testing.assert_array_equal(out, plain)
    keep = ma.visibility(s, s, mask=vis, kv_len=lens[0])
    ref = ma.reference(q, k, v, keep, mask.astype(np.float64) if mask_kind == "additive" else None)
    tol = dict(atol=2e-3, rtol=2e-3) if dtype == "float16" else dict(atol=1e-5, rtol=1e-5)
    assert_close(out, ref, **tol)
    return tables[0]


@pytest.mark.parametrize("s", [1, 17, 64, 200, 257])
@pytest.mark.parametrize("name", ["window", "documents", "causal", "random"])
def test_band_exact_same_bits_as_mask_tile(s, name):
    blocks = check(s, name, 16)
    if name != "random" and s >= 17:
        assert (blocks == 3).any()  # the changed branch ran


def test_band_exact_64_blocks_additive_float16_padded():
    assert (check(200, "documents", 64) == 3).sum() >= 2
    assert (check(257, "window", 64, mask_kind="additive") == 3).any()
    check(200, "documents", 16, dtype="float16")
    check(257, "documents", 16, padded=True, seed=3)


def test_band_exact_on_ascend_against_cpu():
    """a sliding window of 40 keys at 16 x 16 blocks over whole key blocks (S 48): triangles (3)
    and full blocks that compare nothing; test_rect_s31 runs the documents' rectangles there"""
    from ascend_util import run_checked
    s, bs = 48, 16
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    mask = (j <= i) & (j > i - 40)
    q, k, v, _ = ma.inputs(1, 2, 1, s, s, 32, seed=7)
    outs = {}
    for target in ("cpu", "ascend910b"):
        kern = ma.attention_prefill(1, 2, 1, s, s, 32, mask="bool", block_M=bs, block_N=bs, target=target)
        tables = ma.prefill_blocks(mask, bs, bs, target)
        assert (tables[0] == 3).sum() >= 2 and (tables[0] == 2).any()
        args = (q, k, v, mask, *tables, np.full((1,), s, np.int32))
        outs[target] = run_checked(kern, *args) if target == "ascend910b" else kern(*args)
    outs = {t: o[0] if isinstance(o, (list, tuple)) else o for t, o in outs.items()}
    assert_close(outs["cpu"], ma.reference(q, k, v, mask))
    assert_close(outs["ascend910b"], outs["cpu"], atol=1e-6, rtol=1e-5)


def test_whole_key_blocks_with_a_query_tail():
    """seq_kv a multiple of block_N (the full blocks compare no key) with seq_q not one of block_M
    (their rows past seq_q still hidden), causal met with a random mask, against float64"""
    sq, skv, bs = 50, 64, 16
    rng = np.random.default_rng(1)
    mask = rng.random((sq, skv)) < 0.8
    mask[:, :bs] = True  # whole visible blocks
    q, k, v, _ = ma.inputs(1, 2, 1, sq, skv, 32, seed=2)
    kern = ma.attention_prefill(1, 2, 1, sq, skv, 32, causal=True, mask="bool", block_M=bs, block_N=bs)
    tables = ma.prefill_blocks(mask, bs, bs)
    assert (tables[0] == 2).any()
    out = kern(q, k, v, mask, *tables, np.full((1,), skv, np.int32))
    assert_close(out, ma.reference(q, k, v, ma.visibility(sq, skv, causal=True, mask=mask)))
