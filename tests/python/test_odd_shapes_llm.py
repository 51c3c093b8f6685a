"""Differential tests on users' odd shapes (session 20's hunt, h-hunt8; docs/testing.md): the LLM
examples as users call them, each case on cpu and on ascend910b (simulator, checker on) against
float64 numpy, and cpu against ascend910b. Cases picked from the hunt's 1100 drawn ones: mask
options combined (causal, window, bool / additive tensors, right padding with empty sequences,
GQA / MQA, BSHD / BHSD, block tables or dense), packed sequences with zero-length ones, MoE with
tied logits, experts without tokens and top-k = experts, split-KV decode with more splits than
pages, RoPE fused into a QK projection with odd hidden sizes, and `T.gemm` bands with run-time
bounds."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, randn, tolerance

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import masked_attention as ma  # noqa: E402
import moe  # noqa: E402
import paged_attention as pa  # noqa: E402
import rope  # noqa: E402
from ascend_util import TARGET, exact_values, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]


def call(kern, target, *args):
    return kern(*args) if target == "cpu" else run_checked(kern, *args)


def both(run):
    """run(target) -> (outputs, references, tolerances) on both targets: each against its
    reference, and cpu against ascend910b."""
    got = {}
    for target in TARGETS:
        outs, refs, tols = run(target)
        for i, (o, r, t) in enumerate(zip(outs, refs, tols)):
            assert_close(o, r, atol=t[0], rtol=t[1], msg=f"{target} output {i}")
        got[target] = outs
    for i, (a, b, t) in enumerate(zip(got["cpu"], got[TARGET], tols)):
        assert_close(a, b, atol=t[0], rtol=t[1], msg=f"cpu vs {TARGET} output {i}")


# --------------------------------------------------------------------------- masked attention
def sdpa(q, k, v, vis, additive, layout):
    """torch's scaled_dot_product_attention in float64 (enable_gqa) with the visibility as a
    float mask; rows that see no key: 0 (SDPA gives NaN there, the example 0)."""
    torch = pytest.importorskip("torch")
    t = [torch.from_numpy(x.astype(np.float64)) for x in (q, k, v)]
    if layout == "BSHD":
        t = [x.transpose(1, 2) for x in t]
    am = np.where(vis, 0.0, -np.inf)[:, None]
    if additive is not None:
        am = am + additive.astype(np.float64)[None, None]
    o = torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=torch.from_numpy(am), enable_gqa=True)
    o = (o.transpose(1, 2) if layout == "BSHD" else o).numpy()
    return np.nan_to_num(o, nan=0.0)


def prefill(B, heads, Sq, Skv, D, dtype, layout, causal, window, mask, lens, blocks, summary, seed=0):
    H, KVH = heads
    bm, bn = blocks

    def run(target):
        rng = np.random.default_rng(seed)
        q, k, v, _ = ma.inputs(B, H, KVH, Sq, Skv, D, layout, dtype, seed)
        # blocks of the mask at random empty, full or partial, one query row seeing nothing
        kind = rng.integers(0, 3, (-(-Sq // bm), -(-Skv // bn)))
        per = np.kron(kind, np.ones((bm, bn), int))[:Sq, :Skv]
        vis = np.where(per == 0, False, np.where(per == 2, True, rng.random((Sq, Skv)) < 0.6))
        vis[Sq // 2] = False
        if mask == "bool":
            m = vis
        elif mask == "additive":
            m = np.where(vis, np.where(per == 2, 0.0, rng.standard_normal((Sq, Skv))), -np.inf).astype(np.float32)
        else:
            m = np.zeros((Sq, Skv), np.float32)
        kv_len = np.array(lens if lens is not None else [Skv] * B, np.int32)
        kern = ma.attention_prefill(B, H, KVH, Sq, Skv, D, layout, causal, window, mask, lens is not None,
                                    block_M=bm, block_N=bn, dtype=dtype, target=target)
        tables = ma.prefill_blocks(m, bm, bn, target) if summary and mask else ma.dense_blocks(Sq, Skv, bm, bn)
        out = call(kern, target, q, k, v, m, *tables, kv_len)
        seen = np.stack([ma.visibility(Sq, Skv, causal, window, m if mask == "bool" else None, kv_len[b])
                         for b in range(B)])
        add = m if mask == "additive" else None
        ref = ma.reference(q, k, v, seen, None if add is None else add.astype(np.float64), layout)
        return [out, out], [ref, sdpa(q, k, v, seen, add, layout)], [tolerance(dtype)] * 2
    return run


PREFILL = [
    # B, (H, KVH), Sq, Skv, D, dtype, layout, causal, window, mask, kv lens, blocks, summary
    (2, (6, 2), 17, 33, 40, "bfloat16", "BSHD", True, 3, "bool", [0, 29], (16, 16), True),
    (1, (4, 2), 1, 65, 80, "float16", "BHSD", False, 15, "additive", None, (16, 32), True),
    (1, (3, 1), 65, 17, 8, "float32", "BHSD", True, None, "additive", None, (32, 16), False),
    (2, (2, 1), 33, 3, 128, "float32", "BSHD", False, 2, None, [3, 1], (16, 16), False),
    (1, (3, 3), 15, 15, 64, "float16", "BSHD", True, 1, "bool", [15], (64, 64), True),
    (2, (4, 2), 3, 2, 64, "bfloat16", "BHSD", False, None, "bool", [2, 0], (16, 16), True),
    (1, (1, 1), 129, 65, 40, "float32", "BHSD", True, 33, "additive", [60], (64, 32), True),
    (1, (2, 1), 2, 200, 8, "float16", "BSHD", False, None, "bool", None, (16, 64), True),
]


@pytest.mark.parametrize("case", PREFILL, ids=lambda c: "-".join(str(x) for x in c[2:10]))
def test_prefill_odd_shapes(case):
    both(prefill(*case))


@pytest.mark.parametrize("seqlens,heads,D,dtype,causal,blocks", [
    ([0, 17, 0, 1], (4, 2), 40, "bfloat16", True, (16, 16)),
    ([33, 0], (3, 1), 80, "float16", False, (16, 32)),
    ([2, 65, 3], (2, 2), 8, "float32", True, (32, 16)),
    ([0, 15], (3, 3), 128, "float32", False, (64, 64)),
])
def test_varlen_with_empty_sequences(seqlens, heads, D, dtype, causal, blocks):
    H, KVH = heads

    def run(target):
        rng = np.random.default_rng(len(seqlens))
        cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
        total = int(cu[-1])
        q = randn((total, H, D), dtype, seed=rng)
        k, v = randn((total, KVH, D), dtype, seed=rng), randn((total, KVH, D), dtype, seed=rng)
        kern = ma.varlen_attention(total, len(seqlens), H, KVH, D, max(seqlens), causal, block_M=blocks[0],
                                   block_N=blocks[1], dtype=dtype, target=target)
        out = call(kern, target, q, k, v, cu)
        ref = np.zeros((total, H, D))
        for b, n in enumerate(seqlens):
            if n:
                sl = slice(cu[b], cu[b + 1])
                seq = [x[sl].transpose(1, 0, 2)[None] for x in (q, k, v)]
                ref[sl] = ma.reference(*seq, ma.visibility(n, n, causal))[0].transpose(1, 0, 2)
        return [out], [ref], [tolerance(dtype)]
    both(run)


# --------------------------------------------------------------------------- MoE
@pytest.mark.parametrize("tokens,hidden,ffn,experts,top_k,dtype,block_M,atomic,logits", [
    (1, 17, 8, 4, 4, "float32", 8, False, "ties"),        # top-k = experts, one token
    (3, 129, 17, 3, 2, "float16", 16, False, "skewed"),   # expert 2 gets no token
    (17, 40, 40, 8, 1, "bfloat16", 32, True, "equal"),    # every logit equal: expert 0 for all
    (33, 8, 80, 2, 2, "float32", 16, True, "ties"),
    (15, 64, 17, 1, 1, "bfloat16", 8, False, "random"),   # one expert
])
def test_moe_odd_shapes(tokens, hidden, ffn, experts, top_k, dtype, block_M, atomic, logits):
    x, lg, w = moe.inputs(tokens, hidden, ffn, experts, dtype, seed=tokens)
    rng = np.random.default_rng(tokens + 1)
    if logits == "ties":
        lg = rng.integers(-1, 2, lg.shape).astype(np.float32)
    elif logits == "equal":
        lg = np.zeros_like(lg)
    elif logits == "skewed":
        lg = lg.copy()
        lg[:, :2] += 20.0
    ref, ref_ids, ref_w = moe.reference(x, lg, w, top_k)

    def run(target):
        ids, weights = call(moe.topk_gating(tokens, experts, top_k, target=target), target, lg)
        rows, bexp, slot = call(moe.align_by_expert(tokens, experts, top_k, block_M, target=target), target, ids)
        y = call(moe.grouped_gemm(tokens, hidden, ffn, experts, top_k, block_M=block_M, dtype=dtype, target=target),
                 target, x, w, rows, bexp)
        tol = tolerance(dtype)
        combine_k = moe.combine_atomic if atomic else moe.combine  # combine_atomic's out starts at zero (out_idx)
        out = call(combine_k(tokens, ffn, top_k, rows.shape[0], dtype=dtype, target=target), target, y, slot, weights)
        if atomic and dtype != "float32":  # one rounding per add, in any order
            tol = (tol[0] * top_k, tol[1] * top_k)
        return [out, ids, weights], [ref, ref_ids, ref_w], [tol, (0, 0), (1e-5, 1e-5)]
    both(run)


# --------------------------------------------------------------------------- paged decode
@pytest.mark.parametrize("num_seqs,heads,head_dim,block_size,max_context,dtype,num_splits,lens", [
    (2, (6, 2), 40, 3, 17, "bfloat16", 17, [1, 17]),     # more splits than pages: empty splits
    (1, (8, 1), 80, 1, 15, "float16", 5, [15]),          # one-slot pages
    (3, (3, 3), 8, 17, 33, "float32", 2, [17, 18, 1]),   # a length at a page edge and one past it
    (2, (4, 2), 128, 16, 65, "float32", None, [64, 65]),
    (1, (2, 1), 64, 32, 2, "bfloat16", 3, [2]),
])
def test_paged_decode_odd_shapes(num_seqs, heads, head_dim, block_size, max_context, dtype, num_splits, lens):
    H, KVH = heads
    inputs = pa.make_inputs(num_seqs, H, KVH, head_dim, block_size, max_context, dtype, seed=7, lens=lens)
    q, kc, vc, bt, cl = inputs
    nb, mb = kc.shape[0], bt.shape[1]

    def run(target):
        if num_splits is None:
            out = call(pa.paged_decode(num_seqs, H, KVH, head_dim, nb, block_size, mb, dtype, target=target), target,
                       q, kc, vc, bt, cl)
        else:
            part, lse = call(pa.paged_decode_split(num_seqs, H, KVH, head_dim, nb, block_size, mb, num_splits, dtype,
                                                   target=target), target, q, kc, vc, bt, cl)
            out = call(pa.combine_splits(num_seqs, H, num_splits, head_dim, dtype, target=target), target, part, lse)
        return [out], [pa.reference(*inputs)], [tolerance(dtype)]
    both(run)


# --------------------------------------------------------------------------- RoPE fused into QK
@pytest.mark.parametrize("tokens,hidden,heads,dim,interleaved,dtype,block_M,block_K,max_pos", [
    (1, 1, 2, 64, False, "float32", 16, 16, 17),
    (17, 3, 3, 128, True, "bfloat16", 32, 64, 4096),
    (33, 200, 1, 80, True, "float16", 16, 32, 1),
    (2, 129, 2, 64, False, "float16", 32, 16, 4096),
    (65, 17, 1, 40, True, "float32", 32, 32, 17),
])
def test_qk_rope_proj_odd_shapes(tokens, hidden, heads, dim, interleaved, dtype, block_M, block_K, max_pos):
    rng = np.random.default_rng(tokens)
    cos, sin = rope.tables(max_pos, dim)
    pos = rng.integers(0, max_pos, size=tokens).astype(np.int32)
    xs = randn((tokens, hidden), dtype, seed=rng)
    w = randn((hidden, heads * dim), dtype, seed=rng, scale=hidden ** -0.5)
    proj = (xs.astype(np.float64) @ w.astype(np.float64)).reshape(tokens, heads, dim)
    ref = rope.reference(proj, cos, sin, pos, interleaved)

    def run(target):
        kern = rope.qk_rope_proj(tokens, hidden, heads, dim, max_pos, interleaved, block_M=block_M, block_K=block_K,
                                 dtype=dtype, target=target)
        return [call(kern, target, xs, w, cos, sin, pos)], [ref], [tolerance(dtype)]
    both(run)


# --------------------------------------------------------------------------- T.gemm bands
def band_gemm(M, N, K, dtype, which, tb, blocks, lo, hi):
    """C = op(A) @ op(B) in tiles over a K loop, each gemm with the global band lo <= col - row < hi
    (run-time bounds read from a tensor) moved into the tile's coordinates."""
    bm, bn, bk = blocks
    acc = "int32" if dtype == "int8" else "float32"
    bsh = (N, K) if tb else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(bsh, dtype), Bd: T.Tensor((2,), "int32"),
             C: T.Tensor((M, N), acc)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), dtype)
            b = T.alloc_shared((bn, bk) if tb else (bk, bn), dtype)
            c = T.alloc_fragment((bm, bn), acc)
            T.clear(c)
            for ko in T.serial(T.ceildiv(K, bk)):
                T.copy(A[by * bm:(by + 1) * bm, ko * bk:(ko + 1) * bk], a)
                if tb:
                    T.copy(B[bx * bn:(bx + 1) * bn, ko * bk:(ko + 1) * bk], b)
                else:
                    T.copy(B[ko * bk:(ko + 1) * bk, bx * bn:(bx + 1) * bn], b)
                if which == "a":
                    off = ko * bk - by * bm
                    T.gemm(a, b, c, transpose_B=tb, a_band=(Bd[0] - off, Bd[1] - off))
                else:
                    off = bx * bn - by * bm
                    T.gemm(a, b, c, transpose_B=tb, c_band=(Bd[0] - off, Bd[1] - off))
            T.copy(c, C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
    return main


@pytest.mark.parametrize("M,N,K,dtype,which,tb,blocks,lo,hi", [
    (65, 15, 200, "float16", "a", False, (16, 16, 16), -3, 45),
    (17, 33, 129, "bfloat16", "c", True, (32, 32, 32), -20, 5),
    (33, 65, 3, "float32", "a", True, (16, 32, 64), 0, 2),
    (3, 2, 65, "int8", "c", True, (16, 16, 32), -1, 1),
    (15, 17, 33, "float16", "c", False, (64, 64, 64), 5, 5),   # an empty band
])
def test_gemm_bands_with_run_time_bounds(M, N, K, dtype, which, tb, blocks, lo, hi):
    rng = np.random.default_rng(M * N)
    opa = exact_values((M, K), dtype, rng)
    d = np.arange(K)[None, :] - np.arange(M)[:, None]
    if which == "a":  # the promise: op(A) is 0 outside the band
        opa = np.where((d >= lo) & (d < hi), opa, 0).astype(opa.dtype)
    opb = exact_values((K, N), dtype, rng)
    b = np.ascontiguousarray(opb.T) if tb else opb
    ref = opa.astype(np.float64) @ opb.astype(np.float64)
    inside = np.ones(ref.shape, bool)
    if which == "c":  # only C inside the band is promised
        dc = np.arange(N)[None, :] - np.arange(M)[:, None]
        inside = (dc >= lo) & (dc < hi)
    got = {}
    for target in TARGETS:
        kern = tw.compile(band_gemm(M, N, K, dtype, which, tb, blocks, lo, hi), target=target, out_idx=[3])
        out = call(kern, target, opa, b, np.array([lo, hi], np.int32))
        np.testing.assert_array_equal(out[inside], ref[inside], err_msg=target)
        got[target] = out[inside]
    np.testing.assert_array_equal(got["cpu"], got[TARGET])
