"""examples/masked_attention.py: prefill attention with causal / sliding-window / bool / additive
masks, right padding and packed variable-length sequences, GQA/MQA/MHA, BHSD and BSHD, against a
float64 reference (and torch SDPA when installed), on odd shapes: one-token sequences, lengths that
are not multiples of the blocks, seq_q != seq_kv, rows that see no key (0)."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import masked_attention as ma  # noqa: E402

SMALL = dict(block_M=16, block_N=16)

MASKS = [dict(causal=True), dict(causal=True, window=5), dict(window=7), dict(mask="bool"), dict(mask="additive"),
         dict(padded=True), dict(causal=True, padded=True, mask="bool")]


@pytest.mark.parametrize("kw", MASKS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
@pytest.mark.parametrize("layout", ["BHSD", "BSHD"])
@pytest.mark.parametrize("heads", [(4, 2), (3, 1), (2, 2)], ids=["gqa", "mqa", "mha"])
def test_prefill_masks_match_reference(kw, layout, heads):
    out, ref = ma.run(2, *heads, 37, 37, 24, layout=layout, **kw, **SMALL)
    assert_close(out, ref)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_prefill_low_precision(dtype):
    out, ref = ma.run(1, 4, 2, 50, 50, 32, causal=True, window=9, dtype=dtype, **SMALL)
    assert_close(out, ref)


@pytest.mark.parametrize("sq,skv", [(1, 1), (1, 40), (40, 17), (33, 64)])
def test_prefill_odd_lengths(sq, skv):
    out, ref = ma.run(1, 2, 1, sq, skv, 16, mask="bool", **SMALL)
    assert_close(out, ref)
    out, ref = ma.run(1, 2, 1, sq, skv, 16, causal=True, **SMALL)
    assert_close(out, ref)


def test_rows_that_see_no_key_are_zero():
    # a bool mask hiding every key of some rows, and an additive mask of -inf rows
    q, k, v, _ = ma.inputs(1, 2, 2, 20, 20, 16)
    mask = np.ones((20, 20), bool)
    mask[[0, 7, 19]] = False
    kern = ma.attention_prefill(1, 2, 2, 20, 20, 16, "BHSD", False, None, "bool", False, **SMALL)
    out = kern(q, k, v, mask, *ma.prefill_blocks(mask, 16, 16), np.array([20], np.int32))
    assert (out[:, :, [0, 7, 19]] == 0).all()
    assert_close(out, ma.reference(q, k, v, mask))
    add = np.zeros((20, 20), np.float32)
    add[3] = -np.inf
    kern = ma.attention_prefill(1, 2, 2, 20, 20, 16, "BHSD", False, None, "additive", False, **SMALL)
    out = kern(q, k, v, add, *ma.prefill_blocks(add, 16, 16), np.array([20], np.int32))
    assert np.isfinite(out).all() and (out[:, :, 3] == 0).all()
    assert_close(out, ma.reference(q, k, v, None, add.astype(np.float64)))


def test_padding_is_never_read():
    # keys and values past each sequence's length hold NaN: they must not reach the output
    q, k, v, _ = ma.inputs(2, 2, 1, 30, 30, 16)
    lens = np.array([11, 30], np.int32)
    k, v = k.copy(), v.copy()
    k[0, :, 11:] = np.nan
    v[0, :, 11:] = np.nan
    kern = ma.attention_prefill(2, 2, 1, 30, 30, 16, "BHSD", False, None, None, True, **SMALL)
    out = kern(q, k, v, np.zeros((30, 30), np.float32), *ma.dense_blocks(30, 30, 16, 16), lens)  # no mask: unread
    assert np.isfinite(out).all()
    vis = np.stack([ma.visibility(30, 30, kv_len=n) for n in lens])
    assert_close(out, ma.reference(q, np.nan_to_num(k), np.nan_to_num(v), vis))


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_padding_with_a_mask_tensor_is_never_read(target):
    # a bool mask tensor with its tables and right padding: the V rows past each length (NaN, in a
    # tail of a key block and in whole blocks) come in through the run-time extent of the V copy
    # as zeros, the K rows' scores are hidden; the same on cpu and ascend910b
    q, k, v, rng = ma.inputs(2, 2, 1, 40, 40, 32)
    lens = np.array([21, 40], np.int32)
    k, v = k.copy(), v.copy()
    k[0, :, 21:] = np.nan
    v[0, :, 21:] = np.nan
    mask = rng.random((40, 40)) < 0.7
    kern = ma.attention_prefill(2, 2, 1, 40, 40, 32, "BHSD", False, None, "bool", True, target=target, **SMALL)
    out = kern(q, k, v, mask, *ma.prefill_blocks(mask, 16, 16), lens)
    assert np.isfinite(out).all()
    vis = np.stack([ma.visibility(40, 40, mask=mask, kv_len=n) for n in lens])
    assert_close(out, ma.reference(q, np.nan_to_num(k), np.nan_to_num(v), vis))


def test_value_blocks_are_read_in_place_on_cpu():
    # the V block is a gemm operand viewed in the V tensor (its copy takes the valid rows with a
    # run-time extent, so no mask pass writes the tile): no per-block copy or pack of a fresh tile
    for layout in ("BHSD", "BSHD"):
        src = ma.attention_prefill(1, 4, 2, 256, 256, 128, layout, mask="bool").get_source("c++")
        assert "elided: v is only read (by gemm), from V in place" in src
        assert "keeping the rows of v" not in src


@pytest.mark.parametrize("pattern", ["window", "causal"])
def test_long_odd_sequence_with_default_blocks(pattern):
    # S 2047 with the 64 x 64 blocks the benchmark uses: a tail block of 63 rows and keys, the
    # sliding window's partial and full blocks, the causal pattern given as a tensor
    S = 2047
    q, k, v, _ = ma.inputs(1, 2, 1, S, S, 32)
    vis = ma.visibility(S, S, causal=True, window=256 if pattern == "window" else None)
    kern = ma.attention_prefill(1, 2, 1, S, S, 32, mask="bool")
    out = kern(q, k, v, vis, *ma.prefill_blocks(vis), np.array([S], np.int32))
    assert_close(out, ma.reference(q, k, v, vis))


@pytest.mark.parametrize("seqlens", [[37], [1, 20, 5], [16, 16, 33]])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_per_sequence_reference(seqlens, causal):
    out, ref = ma.run_varlen(seqlens, 4, 2, 24, causal=causal, **SMALL)
    assert_close(out, ref)


def test_matches_torch_sdpa():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    q, k, v, rng = ma.inputs(2, 4, 2, 29, 29, 32)
    mask = rng.random((29, 29)) < 0.6
    mask[:, 0] = True  # every row sees a key (SDPA gives NaN for rows that see none)
    add = np.where(mask, rng.standard_normal((29, 29)), -np.inf).astype(np.float32)
    for kw, sd, m in [(dict(causal=True), dict(is_causal=True), np.zeros((29, 29), np.float32)),
                      (dict(mask="bool"), dict(attn_mask=torch.from_numpy(mask)), mask),
                      (dict(mask="additive"), dict(attn_mask=torch.from_numpy(add)), add)]:
        kern = ma.attention_prefill(2, 4, 2, 29, 29, 32, "BHSD", kw.get("causal", False), None, kw.get("mask"), False,
                                    **SMALL)
        out = kern(q, k, v, m, *ma.prefill_blocks(mask, 16, 16), np.full(2, 29, np.int32))
        ref = F.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v)), enable_gqa=True, **sd)
        assert_close(out, ref.numpy())


def test_is_compares_python_values_only():
    import tilewright as tw
    import tilewright.language as T

    with pytest.raises(tw.TilewrightError, match=r"test_masked_attention\.py:\d+:\d+: error: 'is' compares Python values only"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                if bx is None:
                    A[0] = 1.0
        tw.compile(bad)


# The same kernels unchanged on the Ascend 910B simulator (automatic pipeline): the differential
# guard between targets. BSHD windows, bool masks, padding and sliding windows included.
@pytest.mark.parametrize("kw", [dict(causal=True), dict(mask="bool", layout="BSHD"), dict(padded=True),
                                dict(causal=True, window=5), dict(mask="additive")],
                         ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
def test_prefill_on_ascend_matches_reference(kw):
    out, ref = ma.run(1, 2, 1, 40, 40, 32, target="ascend910b", block_M=16, block_N=16, **kw)
    assert_close(out, ref)
    cpu, _ = ma.run(1, 2, 1, 40, 40, 32, block_M=16, block_N=16, **kw)
    assert_close(out, cpu)


# varlen_attention on ascend910b: its copies take run-time extents (the rows of the sequence), so
# it runs unchanged; odd lengths, a one-token sequence, sequences longer than block_M (several row
# blocks and a K/V tail), GQA; against cpu and float64.
@pytest.mark.parametrize("seqlens,causal,dtype", [([20, 7], True, "float32"), ([1, 37, 16], False, "float32"),
                                                  ([33, 1, 5], True, "float16"), ([18], False, "bfloat16")],
                         ids=["20-7-causal", "1-37-16", "33-1-5-causal-fp16", "18-bf16"])
def test_varlen_on_ascend_matches_cpu_and_reference(seqlens, causal, dtype):
    out, ref = ma.run_varlen(seqlens, 4, 2, 32, causal=causal, dtype=dtype, target="ascend910b", **SMALL)
    assert_close(out, ref)
    cpu, _ = ma.run_varlen(seqlens, 4, 2, 32, causal=causal, dtype=dtype, **SMALL)
    assert_close(out, cpu)


def test_varlen_never_reads_the_next_sequence():
    # K and V rows of the other sequences hold NaN for a program of sequence 1: the run-time row
    # counts must keep them out (a whole-block load would read them into the tile)
    seqlens = [5, 19, 6]
    cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((30, h, 16)).astype(np.float32) for h in (2, 1, 1))
    for target in ("cpu", "ascend910b"):
        kern = ma.varlen_attention(30, 3, 2, 1, 16, 19, True, target=target, **SMALL)
        outs = []
        for poison in (False, True):
            kk, vv = k.copy(), v.copy()
            if poison:
                kk[cu[2]:], vv[cu[2]:] = np.nan, np.nan
                kk[:cu[1]], vv[:cu[1]] = np.nan, np.nan
            outs.append(kern(q, kk, vv, cu))
        ref = outs[0]
        assert np.isfinite(outs[1][cu[1]:cu[2]]).all(), target
        assert_close(outs[1][cu[1]:cu[2]], ref[cu[1]:cu[2]])


# A mask tensor alone (no causal, window or padding) with seq_kv a multiple of block_N: block
# classes 0, 1 and 2 mixed (2: the branch without the mask tensor), rows that see no key, one-row
# queries, on cpu and ascend910b against float64
@pytest.mark.parametrize("mask", ["bool", "additive"])
@pytest.mark.parametrize("sq,skv", [(1, 16), (33, 48), (40, 64)])
@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_mask_tensor_block_classes_mixed(mask, sq, skv, target):
    q, k, v, rng = ma.inputs(1, 2, 1, sq, skv, 16, seed=3)
    nq, nk = -(-sq // 16), skv // 16
    kind = rng.integers(0, 3, size=(nq, nk))  # 0 hidden, 1 a random pattern, 2 all visible
    kind[0, 0] = 2
    vis = np.kron(kind == 2, np.ones((16, 16), bool))[:sq] | (np.kron(kind == 1, np.ones((16, 16), bool))[:sq]
                                                            & (rng.random((sq, skv)) < 0.5))
    dark = sq // 2 + 1 if sq > 1 else None
    if dark is not None:
        vis[dark] = False  # a row that sees no key
    m = vis if mask == "bool" else np.where(vis, np.where(np.kron(kind == 2, np.ones((16, 16)))[:sq] > 0, 0.0,
                                                          rng.standard_normal((sq, skv))), -np.inf).astype(np.float32)
    tables = ma.prefill_blocks(m, 16, 16)
    assert (np.asarray(tables[0]) == 2).any()
    kern = ma.attention_prefill(1, 2, 1, sq, skv, 16, "BHSD", False, None, mask, False, target=target, **SMALL)
    out = kern(q, k, v, m, *tables, np.array([skv], np.int32))
    if dark is not None:
        assert (out[:, :, dark] == 0).all()
    ref = ma.reference(q, k, v, vis, None if mask == "bool" else np.where(vis, m, 0).astype(np.float64))
    assert_close(out, ref)


# A sliding window with a mask tensor when seq_q > seq_kv (h-hunt8's find, fixed by h-maskfix8): a
# query block wholly past the keys' window starts its key loop at lo = hi (no key: output 0), with
# causal too; bool and additive masks, cpu and ascend910b against float64.
@pytest.mark.parametrize("sq,skv,window,causal", [(33, 16, 1, False), (40, 17, 3, True), (65, 2, 33, False),
                                                  (17, 1, 1, True)])
@pytest.mark.parametrize("mask", ["bool", "additive"])
@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_window_with_a_mask_tensor_and_more_queries_than_keys(sq, skv, window, causal, mask, target):
    out, ref = ma.run(1, 2, 1, sq, skv, 16, window=window, causal=causal, mask=mask, target=target, **SMALL)
    assert_close(out, ref)


def test_varlen_with_every_sequence_empty_is_a_located_error():
    import tilewright as tw
    with pytest.raises(tw.TilewrightError, match="every sequence is empty") as e:
        ma.varlen_attention(0, 3, 2, 1, 16, 0)
    assert e.value.file == __file__ and "skip the call" in e.value.hint
