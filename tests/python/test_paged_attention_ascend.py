"""examples/paged_attention.py on the Ascend 910B simulator, by changing only the target: paged
decode (GQA / MQA / MHA, one and several pages per step, context lengths that end inside a page,
one token) and split-KV, each against the cpu target and a float64 reference with the testing
module's tolerance per dtype, with zero checker reports. (Issue 13; the simulator is slow in
functional mode: small shapes.)

What the cases exercise: cube_row_mask (the V mask `where(j * N + c < n, v, 0)` as an
InitConstValue of V's rows past the context in L1: V never goes through UB; bfloat16 runs), in
skew_cube_loops the split of the K / V page copies under `if j * P + jj < pages` (V's part moves to
the lagged half), in split_cube_vector odd row counts (MHA: one query row) kept whole on both
AIVs; in select_instructions the GM -> L1 copy of a page into rows jj * page .. of the key and
value tiles (an Nz row window)."""
import pathlib
import re
import sys

import numpy as np
import pytest

from tilewright.testing import TOLERANCES, assert_close, np_dtype

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests" / "python"))

import paged_attention as pa  # noqa: E402
from ascend_util import run_checked  # noqa: E402

# (num_seqs, num_heads, num_kv_heads, head_dim, block_size, max_context, lens, dtype, pages_per_step)
DECODE = [
    (2, 8, 2, 32, 8, 40, [9, 40], "float16", 4),     # GQA (G = 4), last step partly past the pages
    (2, 8, 2, 32, 8, 40, [9, 40], "float16", 2),     # two pages per step
    (2, 4, 1, 40, 8, 33, [1, 33], "float16", 2),     # MQA (G = 4); one token; head dim 40
    (2, 3, 3, 16, 5, 17, [17, 5], "float32", 2),     # MHA (G = 1: one query row), page size 5
    (1, 4, 2, 64, 16, 48, [37], "float32", 3),       # GQA (G = 2) float32, a partly used last step
    # one page per step (issue 13): the multi-buffered vector loop's halves, 4+ steps (more than
    # the Cube's lag of 3: the rotated vector loop keeps the two S slots moving), an odd count
    (2, 8, 2, 32, 8, 40, [9, 40], "float16", 1),     # GQA, 2 and 5 pages
    (2, 3, 3, 16, 5, 17, [17, 5], "float32", 1),     # MHA, page size 5, 4 and 1 pages
    # every page in one step (16 pages per step: more than the sequences have), bfloat16
    (2, 8, 2, 32, 8, 40, [9, 40], "float16", 16),    # GQA
    (2, 4, 1, 32, 8, 33, [1, 33], "bfloat16", 2),    # MQA bfloat16, one token
    (2, 3, 3, 16, 5, 17, [17, 4], "bfloat16", 4),    # MHA bfloat16, page size 5
    # head dim 40 in float32, 4 pages of 32 per step: Q K^T's L0 K steps are 32 + 8 (no multiple
    # of 16 divides 40; "no K step fits" until session 20, h-ascendk8)
    (2, 4, 1, 40, 32, 150, [33, 150], "float32", 4),
]


def ids(c):
    return f"{c[1]}h{c[2]}kv-d{c[3]}-p{c[4]}-{c[7]}-pps{c[8]}"


@pytest.mark.parametrize("case", DECODE, ids=ids)
def test_paged_decode_on_ascend(case):
    num_seqs, heads, kv_heads, dim, page, max_ctx, lens, dtype, pps = case
    inputs = pa.make_inputs(num_seqs, heads, kv_heads, dim, page, max_ctx, dtype, lens=lens)
    q, kc, vc, bt, cl = inputs
    args = (num_seqs, heads, kv_heads, dim, kc.shape[0], page, bt.shape[1], dtype)
    out = run_checked(pa.paged_decode(*args, pages_per_step=pps, target="ascend910b"), *inputs)
    assert out.dtype == q.dtype
    assert_close(out, pa.reference(*inputs))
    assert_close(out, pa.paged_decode(*args, pages_per_step=pps)(*inputs))


def test_paged_decode_on_ascend_never_reads_past_the_context():
    # NaN in every page outside the tables and in the slots past the length of a used page: the
    # masked V rows are zeroed before P V, so the output stays finite
    (q, kc, vc, bt, cl), _ = pa.run(2, 4, 2, 32, 8, 40, dtype="float16", lens=[9, 40])
    kc, vc = kc.copy(), vc.copy()
    used = {int(p) for b, n in enumerate(cl) for p in bt[b, :-(-int(n) // 8)]}
    for blk in set(range(kc.shape[0])) - used:
        kc[blk] = np.nan
        vc[blk] = np.nan
    kc[bt[0, 1], 1:] = np.nan
    vc[bt[0, 1], 1:] = np.nan
    kern = pa.paged_decode(2, 4, 2, 32, kc.shape[0], 8, bt.shape[1], "float16", target="ascend910b")
    out = run_checked(kern, q, kc, vc, bt, cl)
    assert np.isfinite(out.astype(np.float32)).all()
    assert_close(out, pa.reference(q, np.nan_to_num(kc), np.nan_to_num(vc), bt, cl))


def test_paged_decode_pages_is_a_clear_error_on_ascend():
    # the cpu form (one program per sequence, per-kv-head gemms into row slices of the score and
    # output fragments) is not supported by the Cube/Vector split: an error at the gemm's line
    # with the fix, never a crash or a silent fallback; paged_decode is the ascend910b form
    import tilewright as tw
    # (docs/ascend.md "Gemms into part of a fragment": what supporting it would take)
    with pytest.raises(tw.TilewrightError, match=r"paged_attention\.py:\d+:\d+: error: gemm accumulates into part of 'acc'") as e:
        pa.paged_decode_pages(2, 8, 2, 32, 2 * 5 + 3, 8, 5, "float16", target="ascend910b")
    assert "paged_decode does per kv head" in str(e.value)  # the hint names the form that runs there


# split-KV on ascend910b (partial outputs and base-2 log-sum-exp), combined on cpu
@pytest.mark.parametrize("case", [(2, 4, 2, 32, 8, 40, [9, 40], "float16", 2),
                                  (2, 8, 2, 32, 8, 40, [9, 40], "float16", 2),   # G = 4: 2 lse rows per AIV
                                  (1, 8, 1, 16, 8, 40, [33], "float32", 3),     # G = 8 (MQA)
                                  (2, 3, 3, 16, 5, 17, [17, 5], "float32", 3)], ids=lambda c: f"G{c[1] // c[2]}-{c[7]}-s{c[8]}")
def test_paged_decode_split_on_ascend(case):
    num_seqs, heads, kv_heads, dim, page, max_ctx, lens, dtype, splits = case
    inputs = pa.make_inputs(num_seqs, heads, kv_heads, dim, page, max_ctx, dtype, lens=lens)
    q, kc, vc, bt, cl = inputs
    args = (num_seqs, heads, kv_heads, dim, kc.shape[0], page, bt.shape[1], splits, dtype)
    part, lse = run_checked(pa.paged_decode_split(*args, target="ascend910b"), *inputs)
    part_cpu, lse_cpu = pa.paged_decode_split(*args)(*inputs)
    # float32 partials of `dtype` inputs (P rounded to `dtype` before P V): the inputs' tolerance
    atol, rtol = TOLERANCES[dtype]
    assert_close(part, part_cpu, atol=atol, rtol=rtol)
    live = lse_cpu > -1e29  # empty splits: about -1e30 on both (weight 0)
    assert_close(lse[live], lse_cpu[live], atol=atol, rtol=rtol)
    out = pa.combine_splits(num_seqs, heads, splits, dim, dtype)(part, lse)
    assert_close(out, pa.reference(*inputs))


# bfloat16 (issue 13): the V mask runs on the Cube (cube_row_mask: an InitConstValue of the rows
# past the context), so no bfloat16 vector arithmetic is needed; the scores and the softmax are fp32
@pytest.mark.parametrize("pps", [1, 4])
def test_paged_decode_bfloat16_on_ascend(pps):
    inputs = pa.make_inputs(2, 8, 2, 32, 8, 40, "bfloat16", lens=[9, 40])
    q, kc, vc, bt, cl = inputs
    args = (2, 8, 2, 32, kc.shape[0], 8, bt.shape[1], "bfloat16")
    out = run_checked(pa.paged_decode(*args, pages_per_step=pps, target="ascend910b"), *inputs)
    assert out.dtype == q.dtype
    assert_close(out, pa.reference(*inputs))
    assert_close(out, pa.paged_decode(*args, pages_per_step=pps)(*inputs))


# NaN in every cache slot the kernel must not read (pages outside the tables, slots past the length
# in a used page), per dtype and pages per step (1, 4, 16: a step of one page, several, all of
# them), with lengths of 1 token, a page minus one, a page plus one: the rows past the context are
# zeroed on the Cube before P V (0 * NaN would be NaN), so the output is finite and exact.
@pytest.mark.parametrize("dtype,pps", [("float16", 1), ("float16", 4), ("float16", 16),
                                       ("bfloat16", 4), ("bfloat16", 16), ("float32", 4)])
def test_paged_decode_nan_past_the_context_on_ascend(dtype, pps):
    num_seqs, heads, kv_heads, dim, page = 3, 8, 2, 32, 8
    lens = [1, page - 1, page + 1]
    inputs = pa.make_inputs(num_seqs, heads, kv_heads, dim, page, 4 * page, dtype, lens=lens)
    q, kc, vc, bt, cl = inputs
    kc, vc = kc.copy(), vc.copy()
    used = {int(p) for b, n in enumerate(cl) for p in bt[b, :-(-int(n) // page)]}
    for blk in set(range(kc.shape[0])) - used:
        kc[blk] = np.nan
        vc[blk] = np.nan
    for b, n in enumerate(cl):  # the slots past the length in the last used page
        last = bt[b, (int(n) - 1) // page]
        kc[last, (int(n) - 1) % page + 1:] = np.nan
        vc[last, (int(n) - 1) % page + 1:] = np.nan
    args = (num_seqs, heads, kv_heads, dim, kc.shape[0], page, bt.shape[1], dtype)
    out = run_checked(pa.paged_decode(*args, pages_per_step=pps, target="ascend910b"), q, kc, vc, bt, cl)
    assert np.isfinite(out.astype(np.float32)).all()
    assert_close(out, pa.reference(q, np.nan_to_num(kc), np.nan_to_num(vc), bt, cl))
    assert_close(out, pa.paged_decode(*args, pages_per_step=pps)(q, kc, vc, bt, cl))


def test_paged_decode_value_mask_runs_on_the_cube():
    # the V tile never goes through UB: no vector copy of the value cache, one Cube -> Vector and
    # one Vector -> Cube hand-off per step (S and P), V's tail rows zeroed by an InitConstValue
    kern = pa.paged_decode(2, 8, 2, 32, 10, 8, 5, "float16", pages_per_step=4, target="ascend910b")
    src = kern.get_source("ascendc")
    assert "InitConstValue" in src
    prog = kern.get_source("ascend_program")
    assert "v_kept_" in prog
    assert not re.search(r"\bv_(ub|in)\b", prog)


@pytest.mark.parametrize("pps", [4, 16])
def test_paged_decode_needs_no_pipe_all(pps):
    # bench/ascend.py's shape. The hand-off copies' slots `(b * 8 + h) % 24` are provably inside the
    # workspace (`%` range reasoning, session 18): their copies lose the `if count > 0` guards and
    # their UB accesses become exact, which splits the rotated vector loop's carried V -> MTE2
    # dependences into one per half; with their guards the MTE2 -> V ids ran out and insert_sync
    # put a PipeBarrier<PIPE_ALL> at the end of the loop (sessions 14 and 16 reverted `%` for it).
    # Now carried pairs of a pipe pair whose ids still run out merge (set at the later, wait at the
    # earlier slot), as the guarded program's whole-buffer accesses had them: no PIPE_ALL.
    B, H, KVH, D, page, ctx = 8, 32, 8, 128, 16, 1024
    k = pa.paged_decode(B, H, KVH, D, B * ctx // page, page, ctx // page, "float16", pages_per_step=pps,
                        target="ascend910b")
    prog = k.get_source("ascend_program")
    assert "PipeBarrier<ALL>" not in prog
    assert "if max(min(192 - " not in prog  # the hand-off guards are gone


def test_paged_decode_simulated_throughput_floor():
    # bench/ascend.py's case (timing-only simulation: deterministic): 8 sequences, 32 / 8 heads,
    # D 128, context 4096, page 16, fp16, 4 pages per step: 65.0% of the modelled HBM bandwidth
    # when written (V masked on the Cube, the page copies of a step unfenced); floor with a margin
    import tilewright as tw
    B, H, KVH, D, page, ctx = 8, 32, 8, 128, 16, 4096
    max_blocks = ctx // page
    q = np.zeros((B, H, D), np.float16)
    kc = np.zeros((B * max_blocks, page, KVH, D), np.float16)
    bt = np.arange(B * max_blocks, dtype=np.int32).reshape(B, max_blocks)
    cl = np.full((B,), ctx, np.int32)
    k = pa.paged_decode(B, H, KVH, D, B * max_blocks, page, max_blocks, "float16", pages_per_step=4,
                        target="ascend910b")
    t = k.profile(q, kc, kc, bt, cl, functional=False, check=False)["time_us"]
    hbm = tw._C.target_info("ascend910b")["hbm_tbps"] * 1e12
    pct = (2 * B * ctx * KVH * D * 2) / (t * 1e-6) / hbm * 100
    assert pct >= 60.0, pct

# combine_splits on ascend910b (issue 13: unchanged, only the target): part[sp, :] is a vector
# operand at a row the serial loop picks at run time (its UB address computed on the scalar unit),
# lse[i, sp] one element at a loop-variable column, read by the Vector core's scalar unit
# (ScalarLoad of UB, after the V -> S flag of the exp2 map that wrote it).
@pytest.mark.parametrize("num_seqs,heads,splits,dim,dtype", [
    (2, 3, 1, 64, "float32"), (2, 3, 3, 64, "float16"), (1, 2, 8, 128, "float32"), (3, 1, 3, 128, "float16"),
    (2, 2, 8, 64, "bfloat16")])
def test_combine_splits_on_ascend(num_seqs, heads, splits, dim, dtype):
    rng = np.random.default_rng(splits * dim)
    part = rng.standard_normal((num_seqs, heads, splits, dim)).astype(np.float32)
    lse = (4 * rng.standard_normal((num_seqs, heads, splits))).astype(np.float32)
    if splits > 1:
        lse[0, 0, -1] = -1e30  # an empty split: weight 0
    w = np.exp2(lse.astype(np.float64) - lse.max(-1, keepdims=True))
    ref = (w[..., None] * part).sum(2) / w.sum(-1)[..., None]
    out = run_checked(pa.combine_splits(num_seqs, heads, splits, dim, dtype, target="ascend910b"), part, lse)
    assert out.dtype == np_dtype(dtype)
    assert_close(out, ref)
    assert_close(out, pa.combine_splits(num_seqs, heads, splits, dim, dtype)(part, lse))


def test_split_kv_end_to_end_on_ascend():
    """paged_decode_split and combine_splits both on ascend910b, against float64."""
    inputs = pa.make_inputs(2, 8, 2, 32, 8, 40, "float16", lens=[9, 40])
    q, kc, vc, bt, cl = inputs
    args = (2, 8, 2, 32, kc.shape[0], 8, bt.shape[1], 3, "float16")
    part, lse = run_checked(pa.paged_decode_split(*args, target="ascend910b"), *inputs)
    out = run_checked(pa.combine_splits(2, 8, 3, 32, "float16", target="ascend910b"), part, lse)
    assert_close(out, pa.reference(*inputs))
