"""examples/masked_attention.py's block tables of a mask tensor against numpy: the block summary
(`block_mask`: per (query block, key block) 0 = nothing visible, 1 = partial, 2 = all visible with
nothing to add) and its compacted lists (`block_lists`: per query block the non-empty key blocks in
order, KvIdx, and their prefix counts, KvPos); and attention_prefill walking them (empty blocks
never visited, full blocks without mask work) against float64, torch SDPA and `dense_blocks` (every
block computed), on cpu and ascend910b: odd shapes (tails of both block sizes), all-visible,
all-hidden, rows and query blocks that see nothing, fp32 / fp16 / bf16, causal / window / padding
on top of the mask, GQA."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import masked_attention as ma  # noqa: E402
from tw_test_util import unchecked_code_only


def summary_reference(mask, bm, bn):
    """numpy: 0 where no element of the block is visible, 2 where all are visible and add nothing
    (bool True; additive 0), 1 otherwise; blocks at the edge count only the elements inside."""
    vis = mask if mask.dtype == np.bool_ else mask > -np.inf
    free = mask if mask.dtype == np.bool_ else mask == 0
    nq, nk = -(-mask.shape[0] // bm), -(-mask.shape[1] // bn)
    out = np.empty((nq, nk), np.int32)
    for a in range(nq):
        for b in range(nk):
            blk = np.s_[a * bm:(a + 1) * bm, b * bn:(b + 1) * bn]
            out[a, b] = 0 if not vis[blk].any() else 2 if free[blk].all() else 1
    return out


def block_pattern(sq, skv, bm, bn, seed, additive=False):
    """A mask whose blocks are, at random, empty, full or partial (60% visible), with query row 3
    seeing nothing; additive: visible elements add 0 in full blocks and a normal value in partial
    ones, hidden ones -inf."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 3, (-(-sq // bm), -(-skv // bn)))
    kind[0, 0] = 1  # every kind present whatever the seed
    kind[-1, -1] = 2
    kind[0, -1] = 0
    per = np.kron(kind, np.ones((bm, bn), int))[:sq, :skv]
    vis = np.where(per == 0, False, np.where(per == 2, True, rng.random((sq, skv)) < 0.6))
    vis[min(3, sq - 1)] = False
    if not additive:
        return vis
    vals = np.where(per == 2, 0.0, rng.standard_normal((sq, skv)))
    return np.where(vis, vals, -np.inf).astype(np.float32)


SHAPES = [(37, 53, 16, 16), (64, 64, 16, 32), (1, 1, 16, 16), (5, 40, 8, 16), (33, 17, 16, 8)]


@pytest.mark.parametrize("additive", [False, True], ids=["bool", "additive"])
@pytest.mark.parametrize("sq,skv,bm,bn", SHAPES)
def test_summary_matches_numpy(sq, skv, bm, bn, additive):
    mask = block_pattern(sq, skv, bm, bn, seed=sq * skv, additive=additive)
    got = ma.block_mask(mask, bm, bn)
    assert got.dtype == np.int32 and got.shape == (-(-sq // bm), -(-skv // bn))
    np.testing.assert_array_equal(got, summary_reference(mask, bm, bn))


@pytest.mark.parametrize("sq,skv", [(37, 53), (16, 16)])
def test_summary_all_visible_and_all_hidden(sq, skv):
    shape = (-(-sq // 16), -(-skv // 16))
    np.testing.assert_array_equal(ma.block_mask(np.ones((sq, skv), bool), 16, 16), np.full(shape, 2))
    np.testing.assert_array_equal(ma.block_mask(np.zeros((sq, skv), bool), 16, 16), np.zeros(shape))
    np.testing.assert_array_equal(ma.block_mask(np.zeros((sq, skv), np.float32), 16, 16), np.full(shape, 2))
    np.testing.assert_array_equal(ma.block_mask(np.full((sq, skv), -np.inf, np.float32), 16, 16), np.zeros(shape))
    # an additive mask of finite non-zero values: every block visible but with work to do
    np.testing.assert_array_equal(ma.block_mask(np.full((sq, skv), 0.5, np.float32), 16, 16), np.ones(shape))


def test_summary_counts_only_elements_inside_the_mask():
    # tail blocks: the one element inside decides (the tile's rows and columns past the edge do not count)
    mask = np.zeros((17, 17), bool)
    mask[16, 16] = True
    np.testing.assert_array_equal(ma.block_mask(mask, 16, 16), [[0, 0], [0, 2]])
    mask[:16, :16] = True
    mask[16, 16] = False
    np.testing.assert_array_equal(ma.block_mask(mask, 16, 16), [[2, 0], [0, 0]])


def lists_reference(blocks):
    """A plain loop: per query block the key blocks with a non-zero summary, in order (the rest of
    the row 0), and the running count of them before each key block."""
    nq, nk = blocks.shape
    pos, idx = np.zeros((nq, nk + 1), np.int32), np.zeros((nq, nk), np.int32)
    for a in range(nq):
        n = 0
        for b in range(nk):
            pos[a, b] = n
            if blocks[a, b] != 0:
                idx[a, n] = b
                n += 1
        pos[a, nk] = n
    return pos, idx


@pytest.mark.parametrize("sq,skv,bm,bn", SHAPES + [(100, 300, 16, 16)])
def test_lists_match_numpy(sq, skv, bm, bn):
    mask = block_pattern(sq, skv, bm, bn, seed=sq + 3 * skv)
    blocks, pos, idx, _, _ = ma.prefill_blocks(mask, bm, bn)
    ref_pos, ref_idx = lists_reference(summary_reference(mask, bm, bn))
    assert pos.dtype == idx.dtype == np.int32
    np.testing.assert_array_equal(pos, ref_pos)
    np.testing.assert_array_equal(idx, ref_idx)
    for a in range(blocks.shape[0]):  # the listed blocks are exactly the non-empty ones
        np.testing.assert_array_equal(idx[a, :pos[a, -1]], np.flatnonzero(blocks[a]))


def test_lists_all_visible_all_hidden_and_an_empty_query_block():
    nq, nk = 3, 4  # (37, 53) in 16 x 16 blocks
    _, pos, idx, _, _ = ma.prefill_blocks(np.ones((37, 53), bool), 16, 16)
    np.testing.assert_array_equal(pos, np.tile(np.arange(nk + 1), (nq, 1)))
    np.testing.assert_array_equal(idx, np.tile(np.arange(nk), (nq, 1)))
    _, pos, idx, _, _ = ma.prefill_blocks(np.full((37, 53), -np.inf, np.float32), 16, 16)
    assert not pos.any() and not idx.any()  # nothing listed: every query block's loop is empty
    mask = block_pattern(37, 53, 16, 16, seed=9)
    mask[16:32] = False  # query block 1 sees nothing: its count is 0 at every key block
    blocks, pos, idx, _, _ = ma.prefill_blocks(mask, 16, 16)
    assert not pos[1].any() and not idx[1].any()
    np.testing.assert_array_equal(ma.dense_blocks(37, 53, 16, 16)[2], np.tile(np.arange(nk), (nq, 1)))
    # a list from a hand-written summary: the summary's kind is not the list's business, only != 0
    pos, idx = ma.block_lists(np.array([[0, 2, 0, 1], [1, 0, 0, 0]], np.int32))
    np.testing.assert_array_equal(pos, [[0, 0, 1, 1, 2], [0, 1, 1, 1, 1]])
    np.testing.assert_array_equal(idx, [[1, 3, 0, 0], [0, 0, 0, 0]])


def prefill(mask, B=2, H=4, KVH=2, D=24, layout="BHSD", tables=None, target="cpu", dtype="float32", **kw):
    sq, skv = mask.shape
    q, k, v, rng = ma.inputs(B, H, KVH, sq, skv, D, layout, dtype, seed=sq + skv)
    kind = "bool" if mask.dtype == np.bool_ else "additive"
    kern = ma.attention_prefill(B, H, KVH, sq, skv, D, layout, kw.get("causal", False), kw.get("window"), kind,
                                kw.get("padded", False), block_M=16, block_N=16, dtype=dtype, target=target)
    lens = kw.get("lens", np.full(B, skv, np.int32))
    tables = ma.prefill_blocks(mask, 16, 16, target) if tables is None else tables
    out = kern(q, k, v, mask, *tables, lens)
    vis = np.stack([ma.visibility(sq, skv, kw.get("causal", False), kw.get("window"),
                                  mask if kind == "bool" else None, lens[b]) for b in range(B)])
    ref = ma.reference(q, k, v, vis, mask.astype(np.float64) if kind == "additive" else None, layout)
    return out, ref, (q, k, v)


@pytest.mark.parametrize("additive", [False, True], ids=["bool", "additive"])
@pytest.mark.parametrize("layout", ["BHSD", "BSHD"])
@pytest.mark.parametrize("sq,skv", [(37, 53), (48, 48), (1, 20)])
def test_prefill_with_and_without_summary(sq, skv, layout, additive):
    mask = block_pattern(sq, skv, 16, 16, seed=7 + sq, additive=additive)
    out, ref, _ = prefill(mask, layout=layout)
    assert np.isfinite(out).all()
    assert_close(out, ref)
    assert (out[..., min(3, sq - 1), :] == 0).all() if layout == "BHSD" else (out[:, min(3, sq - 1)] == 0).all()
    dense, _, _ = prefill(mask, layout=layout, tables=ma.dense_blocks(sq, skv, 16, 16))
    assert_close(dense, ref)
    assert_close(out, dense, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kw", [dict(causal=True), dict(window=9), dict(causal=True, window=20),
                                dict(padded=True, lens=np.array([30, 7], np.int32))],
                         ids=["causal", "window", "causal-window", "padded"])
def test_summary_combines_with_the_other_masks(kw):
    mask = block_pattern(45, 45, 16, 16, seed=3)
    out, ref, _ = prefill(mask, **kw)
    assert_close(out, ref)


def test_a_query_block_that_sees_nothing_is_zero():
    mask = block_pattern(40, 40, 16, 16, seed=11)
    mask[16:32] = False  # the whole second query block: every one of its blocks is skipped
    assert (ma.block_mask(mask, 16, 16)[1] == 0).all()
    out, ref, _ = prefill(mask)
    assert (out[:, :, 16:32] == 0).all()
    assert_close(out, ref)


def test_skipped_blocks_are_never_read():
    # keys and values of blocks the summary skips hold NaN: they must not reach the output
    mask = np.ones((40, 40), bool)
    mask[:, 16:32] = False
    sq = skv = 40
    q, k, v, _ = ma.inputs(1, 2, 2, sq, skv, 16)
    k, v = k.copy(), v.copy()
    k[:, :, 16:32] = np.nan
    v[:, :, 16:32] = np.nan
    kern = ma.attention_prefill(1, 2, 2, sq, skv, 16, "BHSD", False, None, "bool", False, block_M=16, block_N=16)
    out = kern(q, k, v, mask, *ma.prefill_blocks(mask, 16, 16), np.array([skv], np.int32))
    assert np.isfinite(out).all()
    assert_close(out, ma.reference(q, np.nan_to_num(k), np.nan_to_num(v), mask))


@pytest.mark.parametrize("layout", ["BHSD", "BSHD"])
def test_cpu_prefetches_only_scattered_sources(layout):
    # the key blocks come from KvIdx (a gather): in BHSD a K / V block is 64 rows of 512 bytes in
    # one 32 KiB run, left to the hardware prefetchers (prefetch_gathers' kStreamedRun); in BSHD
    # with 2 kv heads its rows are 1 KiB apart, and the mask block's 64-byte rows 2048 apart:
    # those are prefetched one block ahead
    kern = ma.attention_prefill(1, 4, 2, 256, 256, 128, layout, mask="bool")
    src = kern.get_source("c++")
    blocks_prefetched = layout == "BSHD"
    assert ("prefetch the source of copy K -> k" in src) == blocks_prefetched
    assert ("prefetch the source of copy V -> v" in src) == blocks_prefetched
    assert "prefetch the source of copy Mask -> msk" in src
    q, k, v, rng = ma.inputs(1, 4, 2, 256, 256, 128, layout)
    mask = block_pattern(256, 256, 64, 64, seed=3)
    out = kern(q, k, v, mask, *ma.prefill_blocks(mask), np.array([256], np.int32))
    assert_close(out, ma.reference(q, k, v, mask, layout=layout))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("additive", [False, True], ids=["bool", "additive"])
def test_single_visible_elements(dtype, additive):
    # one visible key per query row (a random key: most blocks partial with a single element,
    # the rest empty), row 5 sees none: the output row is that key's value row, exactly as
    # softmax of one score gives (additive: the visible element adds a normal value, which
    # cancels), and 0 for row 5
    sq, skv = 45, 61
    rng = np.random.default_rng(4)
    key = rng.integers(0, skv, sq)
    vis = np.zeros((sq, skv), bool)
    vis[np.arange(sq), key] = True
    vis[5] = False
    mask = np.where(vis, rng.standard_normal((sq, skv)), -np.inf).astype(np.float32) if additive else vis
    blocks = ma.prefill_blocks(mask, 16, 16)[0]
    assert set(np.unique(blocks)) <= {0, 1} and (blocks == 1).any()
    out, ref, (q, k, v) = prefill(mask, dtype=dtype)
    assert_close(out, ref)
    want = np.repeat(v.astype(np.float32), 2, axis=1)[:, :, key]  # query head h reads kv head h // 2
    want[:, :, 5] = 0
    np.testing.assert_array_equal(out.astype(np.float32), want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_prefill_with_summary_low_precision(dtype):
    out, ref, _ = prefill(block_pattern(50, 50, 16, 16, seed=5), D=32, dtype=dtype)
    assert_close(out, ref)


def test_matches_torch_sdpa_with_summary():
    torch = pytest.importorskip("torch")
    mask = block_pattern(37, 53, 16, 16, seed=2)
    mask[:, 0] = True  # every row sees a key (SDPA gives NaN for rows that see none)
    out, _, (q, k, v) = prefill(mask)
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v)),
                                                           attn_mask=torch.from_numpy(mask), enable_gqa=True)
    assert_close(out, ref.numpy())


# The same kernels unchanged on the Ascend 910B simulator: the summary kernel bit-exact against cpu,
# the prefill reading it against cpu and float64.
@pytest.mark.parametrize("additive", [False, True], ids=["bool", "additive"])
def test_summary_on_ascend_matches_cpu(additive):
    mask = block_pattern(37, 53, 16, 16, seed=1, additive=additive)
    got = ma.block_mask(mask, 16, 16, target="ascend910b")
    np.testing.assert_array_equal(got, summary_reference(mask, 16, 16))


ASCEND_CASES = [dict(additive=False), dict(additive=True), dict(additive=False, causal=True),
                dict(additive=True, window=9), dict(additive=False, causal=True, window=20),
                dict(additive=False, padded=True, lens=np.array([30, 7], np.int32), B=2)]


@pytest.mark.parametrize("case", ASCEND_CASES, ids=["bool", "additive", "causal", "window", "causal-window", "padded"])
def test_prefill_with_lists_on_ascend(case):
    case = dict(case)
    mask = block_pattern(40, 45, 16, 16, seed=4, additive=case.pop("additive"))
    kw = dict(B=case.pop("B", 1), H=4, KVH=2, D=32, **case)  # GQA: 2 query heads per kv head
    out, ref, _ = prefill(mask, target="ascend910b", **kw)
    assert_close(out, ref)
    cpu, _, _ = prefill(mask, **kw)
    assert_close(out, cpu)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_prefill_with_lists_on_ascend_low_precision(dtype):
    mask = block_pattern(50, 50, 16, 16, seed=5)
    out, ref, _ = prefill(mask, B=1, H=2, KVH=1, D=32, dtype=dtype, target="ascend910b")
    assert_close(out, ref)
    cpu, _, _ = prefill(mask, B=1, H=2, KVH=1, D=32, dtype=dtype)
    assert_close(out, cpu)  # the tolerance of the dtype: the two targets round differently


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_matches_torch_sdpa_on_both_targets(target):
    torch = pytest.importorskip("torch")
    mask = block_pattern(37, 53, 16, 16, seed=6)
    mask[:, 0] = True  # every row sees a key (SDPA gives NaN for rows that see none)
    out, _, (q, k, v) = prefill(mask, B=1, H=4, KVH=2, D=32, target=target)
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v)),
                                                           attn_mask=torch.from_numpy(mask), enable_gqa=True)
    assert_close(out, ref.numpy())


def test_a_query_block_that_sees_nothing_is_zero_on_ascend():
    mask = block_pattern(40, 40, 16, 16, seed=11)
    mask[16:32] = False  # the second query block's list is empty: its loop runs no iteration
    out, ref, _ = prefill(mask, B=1, H=2, KVH=1, D=32, target="ascend910b")
    assert (out[:, :, 16:32] == 0).all()
    assert_close(out, ref)


def test_listed_blocks_keep_the_ascend_pipeline():
    """Simulated cycles are deterministic: an all-visible mask walked through its lists (the key
    block read from KvIdx, the kind from Blocks) costs about what the mask-free kernel does over
    the same blocks (the loop holds no `if` around the Cube's work; with one, the Cube and Vector
    work of successive blocks did not overlap: 80.5 us against 46.2 here), and the causal pattern
    as a mask tensor about what the causal kernel does."""
    B, H, S, D = 1, 4, 1024, 128
    q = np.zeros((B, H, S, D), np.float16)
    lens = np.full((B,), S, np.int32)
    kw = dict(block_M=128, block_N=128, dtype="float16", target="ascend910b")
    kern = ma.attention_prefill(B, H, H, S, S, D, mask="bool", **kw)
    dense = ma.dense_blocks(S, S, 128, 128)
    unused = np.zeros((S, S), np.float32)

    def us(k, m, tables):
        return k.profile(q, q, q, m, *tables, lens, functional=False, check=False)["time_us"]

    full = np.ones((S, S), bool)
    tril = np.tril(full)
    t_list = us(kern, full, ma.prefill_blocks(full, 128, 128))
    t_plain = us(ma.attention_prefill(B, H, H, S, S, D, **kw), unused, dense)
    t_tril = us(kern, tril, ma.prefill_blocks(tril, 128, 128))
    t_causal = us(ma.attention_prefill(B, H, H, S, S, D, causal=True, **kw), unused, dense)
    assert t_list < 1.1 * t_plain, (t_list, t_plain)
    assert t_tril < 1.1 * t_causal, (t_tril, t_causal)


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_all_hidden_mask_lists_nothing_and_gives_zeros(target):
    # every list empty: no query block runs an iteration; every row saw no key, so every row is 0
    mask = np.zeros((37, 40), bool)
    blocks, pos, idx, _, _ = ma.prefill_blocks(mask, 16, 16, target)
    assert not blocks.any() and not pos.any() and not idx.any()
    out, ref, _ = prefill(mask, B=1, H=2, KVH=1, D=32, target=target)
    assert (out == 0).all() and (ref == 0).all()


# ---------------------------------------------------------------------------------------------
# the blocks' bands (block_bands) and the gemms that take them (T.gemm's a_band / c_band)

def bands_reference(mask, bm, bn):
    """numpy, block by block: (min, max + 1) of j - i over the visible elements; (0, 0) if none."""
    vis = mask if mask.dtype == np.bool_ else mask > -np.inf
    nq, nk = -(-mask.shape[0] // bm), -(-mask.shape[1] // bn)
    out = np.zeros((nq, nk, 2), np.int32)
    for a in range(nq):
        for b in range(nk):
            i, j = np.nonzero(vis[a * bm:(a + 1) * bm, b * bn:(b + 1) * bn])
            if len(i):
                out[a, b] = (int((j - i).min()), int((j - i).max()) + 1)
    return out


def window_mask(sq, skv, w):
    i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
    return (j <= i) & (j > i - w)


@pytest.mark.parametrize("additive", [False, True], ids=["bool", "additive"])
@pytest.mark.parametrize("sq,skv,bm,bn", SHAPES)
def test_bands_match_numpy(sq, skv, bm, bn, additive):
    mask = block_pattern(sq, skv, bm, bn, seed=5 * sq + skv, additive=additive)
    bands = ma.prefill_blocks(mask, bm, bn)[3]
    assert bands.dtype == np.int32 and bands.shape == (-(-sq // bm), -(-skv // bn), 2)
    np.testing.assert_array_equal(bands, bands_reference(mask, bm, bn))
    w = window_mask(sq, skv, 7)
    np.testing.assert_array_equal(ma.block_bands(w, bm, bn), bands_reference(w, bm, bn))
    # dense_blocks: every diagonal of every block
    d = ma.dense_blocks(sq, skv, bm, bn)[3]
    assert (d[..., 0] == 1 - bm).all() and (d[..., 1] == bn).all()


@pytest.mark.parametrize("layout", ["BHSD", "BSHD"])
@pytest.mark.parametrize("sq,w", [(77, 20), (64, 16), (50, 1), (33, 100)])
def test_window_mask_with_bands_is_exact(sq, w, layout):
    # a sliding window as a bool tensor: its partial blocks are triangles, so the gemms skip micro
    # tiles (16 x 16 blocks: M = 16 > one micro panel, the packed path); the same as every diagonal
    # (dense bands) and as float64
    mask = window_mask(sq, sq, w)
    out, ref, _ = prefill(mask, layout=layout)
    assert_close(out, ref)
    t = ma.prefill_blocks(mask, 16, 16)
    # every band full: the triangles (band_exact's 3) take their mask tile again (1)
    whole, _, _ = prefill(mask, layout=layout, tables=(np.where(t[0] == 3, 1, t[0]), *t[1:3],
                                                        *ma.dense_blocks(sq, sq, 16, 16)[3:]))
    assert_close(out, whole, atol=1e-6, rtol=1e-5)


@unchecked_code_only
def test_bands_with_default_blocks():
    # 64 x 64 blocks (the bench's), the window as a mask tensor and as causal + window (the band
    # then from the formulas, Bands unread); the gemm calls carry the band
    S, w = 200, 40
    mask = window_mask(S, S, w)
    q, k, v, _ = ma.inputs(1, 2, 2, S, S, 32)
    kern = ma.attention_prefill(1, 2, 2, S, S, 32, "BHSD", False, None, "bool", False)
    out = kern(q, k, v, mask, *ma.prefill_blocks(mask), np.array([S], np.int32))
    assert_close(out, ma.reference(q, k, v, mask))
    causal = ma.attention_prefill(1, 2, 2, S, S, 32, "BHSD", True, w, None, False)
    out2 = causal(q, k, v, np.zeros((S, S), np.float32), *ma.dense_blocks(S, S), np.array([S], np.int32))
    assert_close(out2, ma.reference(q, k, v, mask))
    src = kern.get_source("c++")
    assert src.count("tw_cpu::Band{") == 2, "Q K^T (c_band) and P V (a_band) take the block's band"
    assert "tw_cpu::Band{2," in src and "tw_cpu::Band{1," in src


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_bands_on_both_targets(target):
    # ascend910b drops the bands (a hint: its Cube multiplies whole tiles); the same results
    mask = window_mask(40, 40, 12)
    out, ref, _ = prefill(mask, B=1, H=2, KVH=1, D=32, target=target)
    assert_close(out, ref)


def test_gemm_band_front_end_errors():
    import tilewright as tw
    import tilewright.language as T

    def build(kw):
        ab, cb = kw.get("a_band"), kw.get("c_band")

        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((32, 32), "float32")
                c = T.alloc_fragment((32, 32), "float32")
                T.copy(A, a)
                T.gemm(a, a, c, clear_accum=True, a_band=ab, c_band=cb)
                T.copy(c, C)
        return main

    with pytest.raises(tw.TilewrightError, match="a_band or c_band, not both"):
        build(dict(a_band=(0, 1), c_band=(0, 1)))
    with pytest.raises(tw.TilewrightError, match="must be a pair"):
        build(dict(c_band=3))
    assert "band_c=(-4, 5)" in build(dict(c_band=(-4, 5))).script()
    assert "band_a=(" not in build(dict(c_band=None)).script()


# Checked mode (TW_BOUNDS_CHECK=1, read once per process: a child) verifies the band promises:
# a_band's op(A) is exactly 0 outside the band, else a located error naming the element and the
# fix; lo > hi is a located error; c_band computes whole tiles and makes C outside the band NaN.
BAND_CHILD = '''
import sys
import numpy as np
import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype


def a_band_kernel(dt, trans):
    @T.prim_func
    def banded(A: T.Tensor((24, 40) if trans else (40, 24), dt), B: T.Tensor((24, 20), dt),
               Band: T.Tensor((2,), "int32"), C: T.Tensor((40, 20), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((24, 40) if trans else (40, 24), dt)
            b = T.alloc_shared((24, 20), dt)
            c = T.alloc_fragment((40, 20), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, transpose_A=trans, clear_accum=True, a_band=(Band[0], Band[1]))  # @a_band_gemm
            T.copy(c, C)
    return tw.compile(banded, out_idx=[-1])


def c_band_kernel(dt, cdt):
    @T.prim_func
    def banded(A: T.Tensor((40, 24), dt), B: T.Tensor((24, 20), dt), Band: T.Tensor((2,), "int32"),
               C: T.Tensor((40, 20), cdt)):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((40, 24), dt)
            b = T.alloc_shared((24, 20), dt)
            c = T.alloc_fragment((40, 20), cdt)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, clear_accum=True, c_band=(Band[0], Band[1]))  # @c_band_gemm
            T.copy(c, C)
    return tw.compile(banded, out_idx=[-1])


def inside(rows, cols, lo, hi):
    d = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    return (d >= lo) & (d < hi)


def attempt(kern, *args):
    try:
        return kern(*args)
    except tw.TilewrightError as e:
        print("ERR", type(e).__name__, e.line, e.message, "|", e.hint)
        return None


rng = np.random.default_rng(7)
band = np.array([-3, 5], np.int32)
for dt, trans in (("float32", False), ("float16", True), ("bfloat16", False)):
    kern = a_band_kernel(dt, trans)
    opa = rng.standard_normal((40, 24)) * inside(40, 24, -3, 5)
    b = rng.standard_normal((24, 20))
    a = np.ascontiguousarray(opa.T if trans else opa).astype(np_dtype(dt))
    bb = b.astype(np_dtype(dt))
    out = attempt(kern, a, bb, band)  # the promise holds: the product, no error
    a64 = a.astype(np.float64)
    ref = (a64.T if trans else a64) @ bb.astype(np.float64)
    print("KEPT", dt, out is not None and np.allclose(out, ref, rtol=1e-3, atol=1e-3))
    bad = a.copy()
    bad[(9, 2) if trans else (2, 9)] = 0.5  # op(A)[2, 9]: k - i = 7, outside [-3, 5)
    attempt(kern, bad, bb, band)
    attempt(kern, a, bb, np.array([4, 1], np.int32))
    nanrow = bad.copy()
    nanrow[(3, 2) if trans else (2, 3)] = np.nan  # inside the band, in the broken row: C's row 2 is NaN either way
    out = attempt(kern, nanrow, bb, band)
    rest = [r for r in range(40) if r != 2]
    print("NANROW", dt, out is not None and bool(np.isnan(out[2]).all()) and
          bool(np.allclose(out[rest], ref[rest], rtol=1e-3, atol=1e-3)))
    nanout = a.copy()
    nanout[(9, 2) if trans else (2, 9)] = np.nan  # a NaN outside the band only: the promise is broken
    attempt(kern, nanout, bb, band)

for dt, cdt in (("float32", "float32"), ("int8", "int32")):
    kern = c_band_kernel(dt, cdt)
    if dt == "int8":
        a = rng.integers(-5, 6, (40, 24)).astype(np.int8)
        b = rng.integers(-5, 6, (24, 20)).astype(np.int8)
    else:
        a = rng.standard_normal((40, 24)).astype(np.float32)
        b = rng.standard_normal((24, 20)).astype(np.float32)
    out = kern(a, b, np.array([-6, 3], np.int32))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    m = inside(40, 20, -6, 3)
    poison = np.isnan(out) if cdt == "float32" else out == np.iinfo(np.int32).min
    print("CBAND", cdt, bool(np.allclose(out[m], ref[m], rtol=1e-4, atol=1e-4)), bool(poison[~m].all()),
          bool(not poison[m].any()))
    attempt(kern, a, b, np.array([3, -6], np.int32))
print("DONE")
'''


def _checked_run(tmp_path, args, source=None):
    import os
    import subprocess
    from tw_test_util import suite_cache_dir
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_BOUNDS_CHECK": "1", "TW_CACHE_DIR": suite_cache_dir(tmp_path)})
    if source is not None:
        (tmp_path / "child.py").write_text(source)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=900)


def test_band_promises_in_checked_mode(tmp_path):
    p = _checked_run(tmp_path, [str(tmp_path / "child.py")], BAND_CHILD)
    assert p.returncode == 0, p.stderr
    out = p.stdout.strip().splitlines()
    assert out[-1] == "DONE", p.stdout
    lines = BAND_CHILD.splitlines()
    a_line = next(i for i, ln in enumerate(lines) if "@a_band_gemm" in ln) + 1
    c_line = next(i for i, ln in enumerate(lines) if "@c_band_gemm" in ln) + 1
    errs = [ln for ln in out if ln.startswith("ERR")]
    for dt in ("float32", "float16", "bfloat16"):
        assert f"KEPT {dt} True" in out, p.stdout
    broken = (f"ERR TilewrightError {a_line} gemm a_band=(-3, 5) in kernel 'banded' is broken: op(A)[2, 9] ('a') is 0.5, "
              "not 0, outside the band (k - i = 7) | widen the band to cover k - i = 7, or zero A there")
    assert errs.count(broken) == 3, p.stdout
    for dt in ("float32", "float16", "bfloat16"):  # a row holding a NaN inside the band is not checked
        assert f"NANROW {dt} True" in out, p.stdout
    assert errs.count(broken.replace("is 0.5,", "is nan,")) == 3, p.stdout
    empty = f"ERR TilewrightError {a_line} gemm a_band=(4, 1) in kernel 'banded' has lo > hi | pass lo <= hi"
    assert sum(e.startswith(empty) for e in errs) == 3, p.stdout
    assert "CBAND float32 True True True" in out and "CBAND int32 True True True" in out, p.stdout
    c_empty = f"ERR TilewrightError {c_line} gemm c_band=(3, -6) in kernel 'banded' has lo > hi | pass lo <= hi"
    assert sum(e.startswith(c_empty) for e in errs) == 2, p.stdout
    assert len(errs) == 11, p.stdout


def test_masked_attention_example_in_checked_mode(tmp_path):
    # every case of the example (causal, window, bool / additive masks, padding, varlen) with both
    # gemms' bands verified; S = 80: partial blocks and tails of the 64 x 64 blocks
    p = _checked_run(tmp_path, [str(ROOT / "examples" / "masked_attention.py"), "1", "2", "1", "80", "32"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip().splitlines()[-1] == "OK", p.stdout
