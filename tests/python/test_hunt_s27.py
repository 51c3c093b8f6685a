"""Session 27's hunt (h-hunt15, docs/testing.md "Session 27: the LLM kernels as users adapt them
(h-hunt15)"): the kernels of examples/ changed the way a user porting a model changes them —
paged decode with Gemma-2's logit softcap, ALiBi (vLLM's `slope * (pos - context_len + 1)`), a
sliding window and an int8 KV cache with a per-tensor scale; varlen prefill with separate query
and key `cu_seqlens` (chunked prefill: flash-attn's bottom-right causal); a W8A8 gemm with per-row
and per-column scales (SmoothQuant's epilogue) and its float16 output past 65504; dynamic per-token
int8 quantisation; vLLM's fused residual add + RMSNorm writing both inputs in place in bfloat16 —
each on cpu and on ascend910b (simulator, checker on: `prof["reports"] == []`) against float64 numpy
or exact integers. Sessions 23 and 25 (test_hunt_s23a.py, test_hunt_s25.py) already ran the examples
themselves at the brief's shapes (GQA 7, head dims 64-256, block sizes 1-128, context 0 / 1 / page
+- 1 / 1 and 4097, repeated pages, splits past the pages, empty varlen sequences, ties in MoE):
this file does not repeat them.

Tolerances (|got - ref| <= atol + rtol |ref|): tilewright.testing.TOLERANCES of the output dtype
(float32 1e-4 / 1e-4, float16 2e-3 / 2e-3, bfloat16 2e-2 / 1.6e-2); integer outputs (int8 codes)
and the bfloat16 residual (one rounding of an exact float32 sum) exactly; infinities at the same
places. Findings (F1.. of /work/hunt15-findings.md) are strict xfails naming the finding."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, np_dtype, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]
LOG2E = 1.4426950408889634
NEG = -1.0e30


def _run(kernel, target, *args):
    """Called on cpu; simulated with the checker on ascend910b (run_checked asserts no report)."""
    out = kernel(*args) if target == "cpu" else run_checked(kernel, *args)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _close(got, ref, dtype, what):
    atol, rtol = TOLERANCES[dtype]
    assert_close(np.asarray(got, np.float64), ref, atol=atol, rtol=rtol, msg=what)


def _fails(reason, raises=AssertionError):
    return pytest.mark.xfail(strict=True, raises=raises, reason=reason)


# --------------------------------------------------------------------------- paged decode variants
@tw.jit(out_idx=[-1])
def paged_variant(num_seqs, heads, kv_heads, dim, num_blocks, block_size, max_blocks, dtype="float16",
                  softcap=None, alibi=False, window=None, kv_scale=None):
    """examples/paged_attention.py's paged_decode (one page per step) as a user extends it:
    softcap: Gemma-2's `cap * tanh(s / cap)` on the scaled scores; alibi: `+ slope[head] * (pos -
    context_len + 1)` (vLLM); window: the last `window` keys only (pages before them not read);
    kv_scale: the cache is int8, dequantised as `int8 * kv_scale` into the query's dtype."""
    G = heads // kv_heads
    kdt = "int8" if kv_scale is not None else dtype
    scale = dim ** -0.5
    cache = (num_blocks, block_size, kv_heads, dim)

    @T.prim_func
    def main(Q: T.Tensor((num_seqs, heads, dim), dtype), K: T.Tensor(cache, kdt), V: T.Tensor(cache, kdt),
             Slopes: T.Tensor((heads,), "float32"), block_tables: T.Tensor((num_seqs, max_blocks), "int32"),
             context_lens: T.Tensor((num_seqs,), "int32"), Out: T.Tensor((num_seqs, heads, dim), dtype)):
        with T.Kernel(kv_heads, num_seqs) as (h, b):
            q = T.alloc_shared((G, dim), dtype)
            k = T.alloc_shared((block_size, dim), dtype)
            v = T.alloc_shared((block_size, dim), dtype)
            s = T.alloc_fragment((G, block_size), "float32")
            p = T.alloc_fragment((G, block_size), dtype)
            acc = T.alloc_fragment((G, dim), "float32")
            m = T.alloc_fragment((G,), "float32")
            m_prev = T.alloc_fragment((G,), "float32")
            rescale = T.alloc_fragment((G,), "float32")
            row_sum = T.alloc_fragment((G,), "float32")
            l = T.alloc_fragment((G,), "float32")
            sl = T.alloc_fragment((G,), "float32")
            if kv_scale is not None:
                k8 = T.alloc_fragment((block_size, dim), "int8")
                v8 = T.alloc_fragment((block_size, dim), "int8")
            T.copy(Q[b, h * G:(h + 1) * G, :], q)
            if alibi:
                T.copy(Slopes[h * G:(h + 1) * G], sl)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, NEG)
            n = context_lens[b]
            first = 0
            if window is not None:
                first = T.max(n - window, 0) // block_size
            for j in T.serial(first, T.ceildiv(n, block_size)):
                page = block_tables[b, j]
                if kv_scale is not None:
                    T.copy(K[page, :, h, :], k8)
                    for c, d in T.Parallel(block_size, dim):
                        k[c, d] = k8[c, d] * kv_scale
                else:
                    T.copy(K[page, :, h, :], k)
                T.gemm(q, k, s, transpose_B=True, clear_accum=True)
                for i, c in T.Parallel(G, block_size):
                    pos = j * block_size + c
                    x = s[i, c] * scale
                    if softcap is not None:
                        x = softcap * T.tanh(x / softcap)
                    if alibi:
                        x = x + sl[i] * (pos - n + 1)
                    visible = pos < n
                    if window is not None:
                        visible = visible and pos >= n - window
                    s[i, c] = T.where(visible, x * LOG2E, NEG)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(G):
                    rescale[i] = T.exp2(m_prev[i] - m[i])
                for i, d in T.Parallel(G, dim):
                    acc[i, d] = acc[i, d] * rescale[i]
                for i, c in T.Parallel(G, block_size):
                    s[i, c] = T.exp2(s[i, c] - m[i])
                T.reduce_sum(s, row_sum, dim=1)
                for i in T.Parallel(G):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                if kv_scale is not None:
                    T.copy(V[page, :, h, :], v8)
                    for c, d in T.Parallel(block_size, dim):
                        v[c, d] = T.where(j * block_size + c < n, v8[c, d] * kv_scale, 0)
                else:
                    T.copy(V[page, :, h, :], v)
                    for c, d in T.Parallel(block_size, dim):
                        v[c, d] = T.where(j * block_size + c < n, v[c, d], 0)
                T.copy(s, p)
                T.gemm(p, v, acc)
            for i, d in T.Parallel(G, dim):
                acc[i, d] = acc[i, d] / (l[i] + 1e-30)
            T.copy(acc, Out[b, h * G:(h + 1) * G, :])

    return main


def alibi_slopes(heads):
    """ALiBi's slopes for a power-of-two head count, 2^(-8 (i + 1) / heads) (exact in float32)."""
    return (2.0 ** (-8.0 * (np.arange(heads) + 1) / heads)).astype(np.float32)


def paged_inputs(num_seqs, heads, kv_heads, dim, block_size, lens, dtype, int8, seed=27):
    rng = np.random.default_rng(seed)
    max_blocks = max(1, -(-max(lens) // block_size))
    num_blocks = num_seqs * max_blocks + 2
    q = randn((num_seqs, heads, dim), dtype, seed=rng)
    shape = (num_blocks, block_size, kv_heads, dim)
    if int8:
        kc, vc = (rng.integers(-127, 128, shape).astype(np.int8) for _ in range(2))
    else:
        kc, vc = randn(shape, dtype, seed=rng), randn(shape, dtype, seed=rng)
    bt = rng.permutation(num_blocks)[:num_seqs * max_blocks].reshape(num_seqs, max_blocks).astype(np.int32)
    return q, kc, vc, bt, np.asarray(lens, np.int32)


def paged_reference(q, kc, vc, bt, cl, softcap=None, slopes=None, window=None, kv_scale=None):
    """float64 decode attention of each sequence's gathered keys with the variant's scores."""
    num_seqs, heads, dim = q.shape
    block_size, kv_heads = kc.shape[1], kc.shape[2]
    G = heads // kv_heads
    sc = 1.0 if kv_scale is None else kv_scale
    out = np.zeros(q.shape)
    for b in range(num_seqs):
        n = int(cl[b])
        if n == 0:
            continue
        pages = bt[b, :-(-n // block_size)]
        k = kc[pages].astype(np.float64).reshape(-1, kv_heads, dim)[:n] * sc
        v = vc[pages].astype(np.float64).reshape(-1, kv_heads, dim)[:n] * sc
        pos = np.arange(n)
        for hq in range(heads):
            s = k[:, hq // G] @ q[b, hq].astype(np.float64) / np.sqrt(dim)
            if softcap is not None:
                s = softcap * np.tanh(s / softcap)
            if slopes is not None:
                s = s + slopes[hq] * (pos - n + 1)
            if window is not None:
                s = np.where(pos >= n - window, s, -np.inf)
            w = np.exp(s - s.max())
            out[b, hq] = (w / w.sum()) @ v[:, hq // G]
    return out


PAGED = [
    # name, (seqs, heads, kv_heads, dim, block_size, lens, dtype), variant options
    ("softcap-g4-fp16", (2, 8, 2, 64, 16, [1, 40], "float16"), dict(softcap=0.5)),
    ("alibi-g2-fp32", (2, 4, 2, 32, 8, [9, 0], "float32"), dict(alibi=True)),
    ("window1-fp16", (2, 4, 1, 32, 8, [1, 20], "float16"), dict(window=1)),
    ("window9-bf16", (2, 4, 2, 32, 8, [8, 25], "bfloat16"), dict(window=9)),
    ("int8kv-fp16", (2, 4, 2, 64, 16, [16, 17], "float16"), dict(kv_scale=0.0078125)),
    ("int8kv-bf16", (1, 4, 1, 32, 8, [11], "bfloat16"), dict(kv_scale=0.0078125)),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,shape,opts", PAGED, ids=[c[0] for c in PAGED])
def test_paged_decode_variants(name, shape, opts, target):
    num_seqs, heads, kv_heads, dim, block_size, lens, dtype = shape
    q, kc, vc, bt, cl = paged_inputs(num_seqs, heads, kv_heads, dim, block_size, lens, dtype,
                                     opts.get("kv_scale") is not None)
    slopes = alibi_slopes(heads)
    kern = paged_variant(num_seqs, heads, kv_heads, dim, kc.shape[0], block_size, bt.shape[1], dtype,
                         target=target, **opts)
    out = _run(kern, target, q, kc, vc, slopes, bt, cl)[0]
    ref = paged_reference(q, kc, vc, bt, cl, opts.get("softcap"), slopes if opts.get("alibi") else None,
                          opts.get("window"), opts.get("kv_scale"))
    _close(out, ref, dtype, f"{name} {target}")


# --------------------------------------------------------------------------- chunked varlen prefill
@tw.jit(out_idx=[-1])
def varlen_chunked(total_q, total_k, num_seqs, heads, kv_heads, dim, max_q, causal=True, block_M=16,
                   block_N=16, dtype="float16"):
    """examples/masked_attention.py's varlen_attention with separate query and key cu_seqlens
    (flash-attn's varlen API): sequence b's n_q new queries are the last n_q of its n_k keys, so
    causal is bottom-right aligned (query i sees key j iff j <= i + n_k - n_q); a query that sees
    no key gives 0."""
    G = heads // kv_heads
    scale = dim ** -0.5 * LOG2E
    neg_inf = float("-inf")

    @T.prim_func
    def main(Q: T.Tensor((total_q, heads, dim), dtype), K: T.Tensor((total_k, kv_heads, dim), dtype),
             V: T.Tensor((total_k, kv_heads, dim), dtype), CuQ: T.Tensor((num_seqs + 1,), "int32"),
             CuK: T.Tensor((num_seqs + 1,), "int32"), Output: T.Tensor((total_q, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(max_q, block_M), heads, num_seqs) as (bx, by, bz):
            q = T.alloc_shared((block_M, dim), dtype)
            k = T.alloc_shared((block_N, dim), dtype)
            v = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), "float32")
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            rescale = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            logsum = T.alloc_fragment((block_M,), "float32")
            kv_head = by // G
            sq = CuQ[bz]
            nq = CuQ[bz + 1] - sq
            sk = CuK[bz]
            nk = CuK[bz + 1] - sk
            off = nk - nq
            r0 = bx * block_M
            if r0 < nq:
                rows = T.min(block_M, nq - r0)
                T.copy(Q[sq + r0:sq + r0 + rows, by, :], q)
                T.fill(acc_o, 0)
                T.fill(logsum, 0)
                T.fill(m, NEG)
                hi = T.ceildiv(nk, block_N)
                if causal:
                    hi = T.max(T.min(hi, T.ceildiv(r0 + block_M + off, block_N)), 0)
                for kb in T.serial(hi):
                    k0 = kb * block_N
                    cols = T.min(block_N, nk - k0)
                    T.copy(K[sk + k0:sk + k0 + cols, kv_head, :], k)
                    T.gemm(q, k, acc_s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(block_M, block_N):
                        visible = k0 + j < nk
                        if causal:
                            visible = visible and k0 + j <= r0 + i + off
                        acc_s[i, j] = T.where(visible, acc_s[i, j] * scale, neg_inf)
                    T.copy(m, m_prev)
                    T.reduce_max(acc_s, m, dim=1, clear=False)
                    for i in T.Parallel(block_M):
                        rescale[i] = T.exp2(m_prev[i] - m[i])
                    for i, d in T.Parallel(block_M, dim):
                        acc_o[i, d] = acc_o[i, d] * rescale[i]
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                    T.reduce_sum(acc_s, row_sum, dim=1)
                    for i in T.Parallel(block_M):
                        logsum[i] = logsum[i] * rescale[i] + row_sum[i]
                    T.copy(V[sk + k0:sk + k0 + cols, kv_head, :], v)
                    T.copy(acc_s, acc_s_cast)
                    T.gemm(acc_s_cast, v, acc_o)
                for i, d in T.Parallel(block_M, dim):
                    acc_o[i, d] = T.where(logsum[i] == 0, 0, acc_o[i, d] / logsum[i])
                T.copy(acc_o, Output[sq + r0:sq + r0 + rows, by, :])

    return main


def chunked_reference(q, k, v, cu_q, cu_k, causal):
    G = q.shape[1] // k.shape[1]
    out = np.zeros(q.shape)
    for b in range(len(cu_q) - 1):
        nq, nk = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        if nq == 0:
            continue
        qs = q[cu_q[b]:cu_q[b + 1]].astype(np.float64)
        ks = np.repeat(k[cu_k[b]:cu_k[b + 1]].astype(np.float64), G, axis=1)
        vs = np.repeat(v[cu_k[b]:cu_k[b + 1]].astype(np.float64), G, axis=1)
        s = np.einsum("ihd,jhd->hij", qs, ks) / np.sqrt(q.shape[2])
        if causal:
            vis = np.arange(nk)[None, :] <= np.arange(nq)[:, None] + nk - nq
            s = np.where(vis[None], s, -np.inf)
        top = s.max(axis=-1, keepdims=True) if nk else np.zeros(s.shape[:-1] + (1,))
        w = np.exp(s - np.where(np.isfinite(top), top, 0))
        tot = w.sum(axis=-1, keepdims=True)
        o = np.einsum("hij,jhd->ihd", np.where(tot > 0, w / np.where(tot > 0, tot, 1), 0), vs)
        out[cu_q[b]:cu_q[b + 1]] = o
    return out


CHUNKED = [
    # name, per-sequence (n_q, n_k), heads, kv_heads, dim, dtype, causal, blocks
    ("chunk-end-of-keys-fp16", [(5, 37), (1, 1), (20, 4)], 4, 2, 32, "float16", True, (16, 16)),  # 20 q > 4 k
    ("empty-query-seq-bf16", [(0, 9), (3, 3), (1, 20)], 2, 1, 64, "bfloat16", True, (16, 16)),
    ("noncausal-fp16", [(3, 50), (1, 0), (16, 16)], 4, 1, 40, "float16", False, (16, 32)),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,lens,heads,kv_heads,dim,dtype,causal,blocks", CHUNKED, ids=[c[0] for c in CHUNKED])
def test_varlen_chunked_prefill(name, lens, heads, kv_heads, dim, dtype, causal, blocks, target):
    rng = np.random.default_rng(27)
    cu_q = np.concatenate([[0], np.cumsum([a for a, _ in lens])]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum([b for _, b in lens])]).astype(np.int32)
    tq, tk = int(cu_q[-1]), int(cu_k[-1])
    q = randn((tq, heads, dim), dtype, seed=rng)
    k, v = randn((tk, kv_heads, dim), dtype, seed=rng), randn((tk, kv_heads, dim), dtype, seed=rng)
    kern = varlen_chunked(tq, tk, len(lens), heads, kv_heads, dim, max(a for a, _ in lens), causal, *blocks,
                          dtype=dtype, target=target)
    out = _run(kern, target, q, k, v, cu_q, cu_k)[0]
    _close(out, chunked_reference(q, k, v, cu_q, cu_k, causal), dtype, f"{name} {target}")


# --------------------------------------------------------------------------- quantisation epilogues
@tw.jit(out_idx=[-1])
def w8a8_gemm(M, N, K, block_M=32, block_N=32, block_K=32, out_dtype="float16", b_nk=True):
    """SmoothQuant's W8A8 gemm: int8 x int8 -> int32 on the matrix unit, then C = acc * Sa[m] * Sb[n]
    in float32, stored as out_dtype (float16: past 65504 -> inf). b_nk: B as a Linear layer's weight
    (N, K), multiplied with transpose_B; else (K, N), which ascend910b refuses for int8 (a located
    error naming transpose_B: the Cube's int8 L1 -> L0B load does not transpose)."""
    b_shape, b_tile = ((N, K), (block_N, block_K)) if b_nk else ((K, N), (block_K, block_N))

    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor(b_shape, "int8"), Sa: T.Tensor((M,), "float32"),
             Sb: T.Tensor((N,), "float32"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), "int8")
            b_s = T.alloc_shared(b_tile, "int8")
            acc = T.alloc_fragment((block_M, block_N), "int32")
            o = T.alloc_fragment((block_M, block_N), "float32")
            sa = T.alloc_fragment((block_M,), "float32")
            sb = T.alloc_fragment((block_N,), "float32")
            T.clear(acc)
            for kk in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, kk * block_K], a_s)
                if b_nk:
                    T.copy(B[bx * block_N, kk * block_K], b_s)
                else:
                    T.copy(B[kk * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=b_nk)
            T.copy(Sa[by * block_M:(by + 1) * block_M], sa)
            T.copy(Sb[bx * block_N:(bx + 1) * block_N], sb)
            for i, j in T.Parallel(block_M, block_N):
                o[i, j] = T.cast(acc[i, j], "float32") * sa[i] * sb[j]
            T.copy(o, C[by * block_M, bx * block_N])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,out_dtype,big", [(33, 40, 72, "bfloat16", False), (17, 32, 64, "float16", True),
                                                 (1, 16, 32, "float32", False)])
def test_w8a8_gemm_scales(M, N, K, out_dtype, big, target):
    """Per-row and per-column scales; big: scales that take some outputs past float16's 65504 (inf
    there on both targets: docs/language.md, overflow gives +-inf)."""
    rng = np.random.default_rng(27)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    sa = (rng.random(M) * 0.01 + (1.0 if big else 0.001)).astype(np.float32)
    sb = (rng.random(N) * 0.01 + (1.0 if big else 0.001)).astype(np.float32)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    out = _run(w8a8_gemm(M, N, K, out_dtype=out_dtype, target=target), target, a, np.ascontiguousarray(b.T), sa,
               sb)[0]
    got = np.asarray(out, np.float64)
    ref = acc.astype(np.float64) * sa[:, None].astype(np.float64) * sb[None, :].astype(np.float64)
    if big:
        with np.errstate(over="ignore"):
            inf = np.isinf((acc.astype(np.float32) * sa[:, None] * sb[None, :]).astype(np_dtype(out_dtype)))
        assert inf.any() and not inf.all()
        np.testing.assert_array_equal(np.isinf(got), inf, err_msg=f"{target}: inf places")
        np.testing.assert_array_equal(np.sign(got[inf]), np.sign(ref[inf]))
        got, ref = got[~inf], ref[~inf]
    _close(got, ref, out_dtype, f"w8a8 {M}x{N}x{K} {out_dtype} {target}")


def test_w8a8_gemm_with_b_as_k_by_n_is_a_located_error_on_ascend():
    """B stored (K, N) in int8: cpu runs it; ascend910b names the gemm's line and transpose_B."""
    with pytest.raises(tw.TilewrightError, match=r"test_hunt_s27.py:\d+.*(?s:.*)transpose_B=True"):
        w8a8_gemm(17, 32, 64, b_nk=False, target=TARGET)
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-128, 128, s).astype(np.int8) for s in ((17, 64), (64, 32)))
    out = w8a8_gemm(17, 32, 64, out_dtype="float32", b_nk=False)(a, b, np.ones(17, np.float32),
                                                                  np.ones(32, np.float32))
    np.testing.assert_array_equal(out, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32))


@tw.jit(out_idx=[1, 2])
def quant_rows(M, H, block_M=8, dtype="float16"):
    """Dynamic per-token int8 quantisation: Scale[m] = max|x[m, :]| / 127, Q = clamp(floor(x / Scale
    + 0.5), -128, 127) (round half up; clamped first, so both targets agree: docs/language.md)."""
    @T.prim_func
    def main(X: T.Tensor((M, H), dtype), Q: T.Tensor((M, H), "int8"), Scale: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, H), "float32")
            ax = T.alloc_fragment((block_M, H), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            sc = T.alloc_fragment((block_M,), "float32")
            qq = T.alloc_fragment((block_M, H), "int8")
            T.copy(X[bx * block_M:(bx + 1) * block_M, :], x)
            for i, j in T.Parallel(block_M, H):
                ax[i, j] = T.abs(x[i, j])
            T.reduce_max(ax, amax, dim=1)
            for i in T.Parallel(block_M):
                sc[i] = T.max(amax[i], 1e-8) / 127.0
            for i, j in T.Parallel(block_M, H):
                qq[i, j] = T.max(T.min(T.floor(x[i, j] / sc[i] + 0.5), 127.0), -128.0)
            T.copy(qq, Q[bx * block_M:(bx + 1) * block_M, :])
            T.copy(sc, Scale[bx * block_M:(bx + 1) * block_M])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,H,dtype", [(9, 72, "float16"), (17, 24, "float32")])
def test_dynamic_int8_quant(M, H, dtype, target):
    """Codes exact against numpy's float32 formula (a row of zeros included: scale 1e-8 / 127, codes 0)."""
    rng = np.random.default_rng(27)
    x = randn((M, H), dtype, seed=rng, scale=3.0)
    x[M // 2] = 0
    q, sc = _run(quant_rows(M, H, dtype=dtype, target=target), target, x)
    x32 = x.astype(np.float32)
    ref_sc = (np.maximum(np.abs(x32).max(axis=1), np.float32(1e-8)) / np.float32(127)).astype(np.float32)
    ref_q = np.clip(np.floor(x32 / ref_sc[:, None] + np.float32(0.5)), -128, 127).astype(np.int8)
    # the scales and the codes exactly (F1, fixed by h-div16: ascend910b's `/ 127` was a multiply by 1/127)
    np.testing.assert_array_equal(sc, ref_sc, err_msg=f"scales {target}")
    np.testing.assert_array_equal(q, ref_q, err_msg=f"codes {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_f1_division_by_a_scalar_is_correctly_rounded(target):
    @T.prim_func
    def divide(A: T.Tensor((64,), "float32"), S: T.Tensor((1,), "float32"), B: T.Tensor((64,), "float32"),
               C: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((64,), "float32")
            b = T.alloc_fragment((64,), "float32")
            c = T.alloc_fragment((64,), "float32")
            T.copy(A, a)
            s = S[0]
            for i in T.Parallel(64):
                b[i] = a[i] / 127.0
                c[i] = a[i] / s
            T.copy(b, B)
            T.copy(c, C)

    a = (np.random.default_rng(27).standard_normal(64) * 10).astype(np.float32)
    s = np.array([127.0], np.float32)
    b, c = _run(tw.compile(divide, out_idx=[2, 3], target=target), target, a, s)
    np.testing.assert_array_equal(b, a / np.float32(127.0), err_msg="x / 127.0")
    np.testing.assert_array_equal(c, a / s[0], err_msg="x / s")


@tw.jit
def fused_add_rms_norm(M, H, block_M=4, dtype="bfloat16", eps=1e-6):
    """vLLM's fused_add_rms_norm, in place: R = X + R (rounded once to dtype), X = rms_norm(R) * W."""
    @T.prim_func
    def main(X: T.Tensor((M, H), dtype), R: T.Tensor((M, H), dtype), W: T.Tensor((H,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, H), "float32")
            r = T.alloc_fragment((block_M, H), "float32")
            rb = T.alloc_fragment((block_M, H), dtype)
            sq = T.alloc_fragment((block_M, H), "float32")
            w = T.alloc_fragment((H,), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M:(bx + 1) * block_M, :], x)
            T.copy(R[bx * block_M:(bx + 1) * block_M, :], r)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, H):
                rb[i, j] = x[i, j] + r[i, j]
            T.copy(rb, r)
            for i, j in T.Parallel(block_M, H):
                sq[i, j] = r[i, j] * r[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / H + eps)
            for i, j in T.Parallel(block_M, H):
                x[i, j] = r[i, j] * ss[i] * w[j]
            T.copy(rb, R[bx * block_M:(bx + 1) * block_M, :])
            T.copy(x, X[bx * block_M:(bx + 1) * block_M, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,H,dtype", [(5, 72, "bfloat16")])
def test_fused_add_rms_norm_in_place(M, H, dtype, target):
    """The residual exactly (one rounding of the exact float32 sum: ml_dtypes' round to nearest
    even, with sums that fall on ties), the normalised rows within the dtype's tolerance."""
    rng = np.random.default_rng(27)
    x = randn((M, H), dtype, seed=rng)
    r = randn((M, H), dtype, seed=rng)
    # ties: x + r exactly halfway between two dtype values in some places
    x[0, :8] = np.array([1.0, 1.0, -1.0, 256.0, 3.0, 1.0, 2.0, 0.5], np_dtype(dtype))
    ulp = 2.0 ** (-7 if dtype == "bfloat16" else -10)
    r[0, :8] = np.array([ulp / 2, 3 * ulp / 2, -ulp / 2, 1.0, ulp * 3, ulp / 4, 2 * ulp / 2, ulp / 8],
                        np.float64).astype(np_dtype(dtype))
    w = randn((H,), dtype, seed=rng)
    xa, ra = x.copy(), r.copy()
    kern = fused_add_rms_norm(M, H, dtype=dtype, target=target)
    if target == "cpu":
        kern(xa, ra, w)
    else:
        prof = kern.profile(xa, ra, w)
        assert prof["reports"] == [], "\n".join(prof["reports"])
    r_new = (x.astype(np.float32) + r.astype(np.float32)).astype(np_dtype(dtype))
    np.testing.assert_array_equal(ra.astype(np.float32), r_new.astype(np.float32), err_msg=f"residual {target}")
    r64 = r_new.astype(np.float64)
    ref = r64 / np.sqrt((r64 ** 2).mean(axis=1, keepdims=True) + 1e-6) * w.astype(np.float64)
    _close(xa, ref, dtype, f"normed {target}")


# --------------------------------------------------------------------------- RoPE variants
@tw.jit(out_idx=[-2, -1])
def rope_qk_partial(tokens, heads, kv_heads, dim, rot, max_pos, block_M=16, dtype="float16"):
    """examples/rope.py's half-split rope as a user extends it: queries and keys of a GQA layer in
    one kernel (program (bx, h) rotates query head h, and key head h when h < kv_heads), and a
    partial rotary dimension (Phi-2, GPT-NeoX: the first `rot` of `dim` are rotated, the rest
    copied)."""
    half = rot // 2

    @T.prim_func
    def main(Xq: T.Tensor((tokens, heads, dim), dtype), Xk: T.Tensor((tokens, kv_heads, dim), dtype),
             Cos: T.Tensor((max_pos, half), "float32"), Sin: T.Tensor((max_pos, half), "float32"),
             Pos: T.Tensor((tokens,), "int32"), Yq: T.Tensor((tokens, heads, dim), dtype),
             Yk: T.Tensor((tokens, kv_heads, dim), dtype)):
        with T.Kernel(T.ceildiv(tokens, block_M), heads) as (bx, h):
            x = T.alloc_fragment((block_M, dim), "float32")
            y = T.alloc_fragment((block_M, dim), "float32")
            xk = T.alloc_fragment((block_M, dim), "float32")
            yk = T.alloc_fragment((block_M, dim), "float32")
            c = T.alloc_fragment((block_M, half), "float32")
            s = T.alloc_fragment((block_M, half), "float32")
            for r in T.serial(block_M):
                if bx * block_M + r < tokens:
                    p = Pos[bx * block_M + r]
                    T.copy(Cos[p, :], c[r, :])
                    T.copy(Sin[p, :], s[r, :])
            T.copy(Xq[bx * block_M:(bx + 1) * block_M, h, :], x)
            for i, j in T.Parallel(block_M, half):
                y[i, j] = x[i, j] * c[i, j] - x[i, j + half] * s[i, j]
                y[i, j + half] = x[i, j + half] * c[i, j] + x[i, j] * s[i, j]
            if rot < dim:
                for i, j in T.Parallel(block_M, dim - rot):
                    y[i, rot + j] = x[i, rot + j]
            T.copy(y, Yq[bx * block_M:(bx + 1) * block_M, h, :])
            if h < kv_heads:
                T.copy(Xk[bx * block_M:(bx + 1) * block_M, h, :], xk)
                for i, j in T.Parallel(block_M, half):
                    yk[i, j] = xk[i, j] * c[i, j] - xk[i, j + half] * s[i, j]
                    yk[i, j + half] = xk[i, j + half] * c[i, j] + xk[i, j] * s[i, j]
                if rot < dim:
                    for i, j in T.Parallel(block_M, dim - rot):
                        yk[i, rot + j] = xk[i, rot + j]
                T.copy(yk, Yk[bx * block_M:(bx + 1) * block_M, h, :])

    return main


def rope_reference(x, cos, sin, pos, rot):
    x = x.astype(np.float64)
    half = rot // 2
    c = cos.astype(np.float64)[pos][:, None, :]
    s = sin.astype(np.float64)[pos][:, None, :]
    a, b = x[..., :half], x[..., half:rot]
    return np.concatenate([a * c - b * s, b * c + a * s, x[..., rot:]], axis=-1)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tokens,heads,kv_heads,dim,rot,dtype", [
    (5, 4, 1, 80, 32, "float16"),      # Phi-2: rotary 32 of 80
    (1, 2, 1, 128, 64, "float32"),     # one token, half rotated
])
def test_rope_qk_partial_rotary(tokens, heads, kv_heads, dim, rot, dtype, target):
    rng = np.random.default_rng(27)
    max_pos = 300
    inv = 10000.0 ** (-np.arange(0, rot, 2, dtype=np.float64) / rot)
    ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = np.array([299, 0, 7, 7, 150, 3, 2, 1, 0, 100, 250, 5, 6, 9, 8, 11, 299][:tokens], np.int32)
    xq, xk = randn((tokens, heads, dim), dtype, seed=rng), randn((tokens, kv_heads, dim), dtype, seed=rng)
    yq, yk = _run(rope_qk_partial(tokens, heads, kv_heads, dim, rot, max_pos, dtype=dtype, target=target),
                  target, xq, xk, cos, sin, pos)
    _close(yq, rope_reference(xq, cos, sin, pos, rot), dtype, f"q {target}")
    _close(yk, rope_reference(xk, cos, sin, pos, rot), dtype, f"k {target}")


# --------------------------------------------------------------------------- MoE gating variant
@tw.jit(out_idx=[2, 3])
def topk_sigmoid_bias(tokens, experts, top_k, block_M=8, scaling=2.5):
    """examples/moe.py's topk_gating as DeepSeek-V3 routes: scores = sigmoid(logits); the experts
    are picked by scores + Bias (ties: the lower expert id, as topk_gating), weighted by their
    scores without the bias, renormalised and multiplied by `scaling`."""
    @T.prim_func
    def main(Logits: T.Tensor((tokens, experts), "float32"), Bias: T.Tensor((experts,), "float32"),
             Ids: T.Tensor((tokens, top_k), "int32"), Weights: T.Tensor((tokens, top_k), "float32")):
        with T.Kernel(T.ceildiv(tokens, block_M)) as bx:
            sc = T.alloc_fragment((block_M, experts), "float32")
            sel = T.alloc_fragment((block_M, experts), "float32")
            hit = T.alloc_fragment((block_M, experts), "float32")
            pick = T.alloc_fragment((block_M, experts), "int32")
            bias = T.alloc_fragment((experts,), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            got = T.alloc_fragment((block_M,), "float32")
            first = T.alloc_fragment((block_M,), "int32")
            ids = T.alloc_fragment((block_M, top_k), "int32")
            w = T.alloc_fragment((block_M, top_k), "float32")
            kept = T.alloc_fragment((block_M,), "float32")
            T.copy(Logits[bx * block_M:(bx + 1) * block_M, :], sc)
            T.copy(Bias, bias)
            for i, e in T.Parallel(block_M, experts):
                sc[i, e] = T.sigmoid(sc[i, e])
                sel[i, e] = sc[i, e] + bias[e]
            for kk in T.serial(top_k):
                T.reduce_max(sel, best, dim=1)
                for i, e in T.Parallel(block_M, experts):
                    pick[i, e] = T.where(sel[i, e] == best[i], e, experts)
                T.reduce_min(pick, first, dim=1)
                for i, e in T.Parallel(block_M, experts):
                    hit[i, e] = T.where(e == first[i], sc[i, e], 0.0)
                T.reduce_sum(hit, got, dim=1)
                for i in T.Parallel(block_M):
                    ids[i, kk] = first[i]
                    w[i, kk] = got[i]
                for i, e in T.Parallel(block_M, experts):
                    sel[i, e] = T.where(e == first[i], -1.0e30, sel[i, e])
            T.reduce_sum(w, kept, dim=1)
            for i, kk in T.Parallel(block_M, top_k):
                w[i, kk] = w[i, kk] / kept[i] * scaling
            T.copy(ids, Ids[bx * block_M:(bx + 1) * block_M, :])
            T.copy(w, Weights[bx * block_M:(bx + 1) * block_M, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tokens,experts,top_k", [(11, 8, 2), (3, 5, 5)])
def test_topk_sigmoid_bias_routing(tokens, experts, top_k, target):
    """Ids exact against numpy's stable sort (logits on a 0.25 grid, so ties are exact and the rest
    apart by far more than sigmoid's rounding; one row all equal: ids 0..k-1), weights to 1e-5."""
    rng = np.random.default_rng(27)
    logits = (rng.integers(-12, 13, (tokens, experts)) * 0.25).astype(np.float32)
    logits[tokens // 2] = 0.5
    bias = (rng.integers(-2, 3, experts) * 0.125).astype(np.float32)
    ids, w = _run(topk_sigmoid_bias(tokens, experts, top_k, target=target), target, logits, bias)
    sc = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    ref_ids = np.argsort(-(sc + bias), axis=1, kind="stable")[:, :top_k]
    np.testing.assert_array_equal(ids, ref_ids, err_msg=f"ids {target}")
    rw = np.take_along_axis(sc, ref_ids, axis=1)
    rw = rw / rw.sum(axis=1, keepdims=True) * 2.5
    assert_close(np.asarray(w, np.float64), rw, atol=1e-5, rtol=1e-5, msg=f"weights {target}")


# --------------------------------------------------------------------------- several query tokens per sequence
@tw.jit(out_idx=[-1])
def paged_multi_token(num_seqs, qlen, heads, kv_heads, dk, dv, num_blocks, block_size, max_blocks, dtype="float16"):
    """paged_decode with `qlen` new tokens per sequence (speculative decoding's verification step;
    with dk != dv, MLA's absorbed decode: one latent cache, V its first dv columns). The query tile's
    rows are (token t, head g) at t * G + g; token t sees the keys before n - qlen + t + 1. The mask
    is written per token (`i // G` in the condition is a located error on ascend910b: not affine)."""
    G = heads // kv_heads
    R = qlen * G
    scale = dk ** -0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor((num_seqs, qlen, heads, dk), dtype),
             KV: T.Tensor((num_blocks, block_size, kv_heads, dk), dtype),
             BT: T.Tensor((num_seqs, max_blocks), "int32"), CL: T.Tensor((num_seqs,), "int32"),
             Out: T.Tensor((num_seqs, qlen, heads, dv), dtype)):
        with T.Kernel(kv_heads, num_seqs) as (h, b):
            q = T.alloc_shared((R, dk), dtype)
            k = T.alloc_shared((block_size, dk), dtype)
            v = T.alloc_shared((block_size, dv), dtype)
            s = T.alloc_fragment((R, block_size), "float32")
            p = T.alloc_fragment((R, block_size), dtype)
            acc = T.alloc_fragment((R, dv), "float32")
            m = T.alloc_fragment((R,), "float32")
            m_prev = T.alloc_fragment((R,), "float32")
            rescale = T.alloc_fragment((R,), "float32")
            row_sum = T.alloc_fragment((R,), "float32")
            l = T.alloc_fragment((R,), "float32")
            for t in T.serial(qlen):
                T.copy(Q[b, t, h * G:(h + 1) * G, :], q[t * G:(t + 1) * G, :])
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, NEG)
            n = CL[b]
            for j in T.serial(T.ceildiv(n, block_size)):
                page = BT[b, j]
                T.copy(KV[page, :, h, :], k)
                T.gemm(q, k, s, transpose_B=True, clear_accum=True)
                for t in T.serial(qlen):
                    for i, c in T.Parallel(G, block_size):
                        s[t * G + i, c] = T.where(j * block_size + c <= n - qlen + t, s[t * G + i, c] * scale, NEG)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(R):
                    rescale[i] = T.exp2(m_prev[i] - m[i])
                for i, d in T.Parallel(R, dv):
                    acc[i, d] = acc[i, d] * rescale[i]
                for i, c in T.Parallel(R, block_size):
                    s[i, c] = T.exp2(s[i, c] - m[i])
                T.reduce_sum(s, row_sum, dim=1)
                for i in T.Parallel(R):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                T.copy(KV[page, :, h, 0:dv], v)
                for c, d in T.Parallel(block_size, dv):
                    v[c, d] = T.where(j * block_size + c < n, v[c, d], 0)
                T.copy(s, p)
                T.gemm(p, v, acc)
            for i, d in T.Parallel(R, dv):
                acc[i, d] = acc[i, d] / (l[i] + 1e-30)
            for t in T.serial(qlen):
                T.copy(acc[t * G:(t + 1) * G, :], Out[b, t, h * G:(h + 1) * G, :])

    return main


def multi_token_reference(q, kv, bt, cl, dv):
    num_seqs, qlen, heads, dk = q.shape
    bs, kv_heads = kv.shape[1], kv.shape[2]
    G = heads // kv_heads
    out = np.zeros((num_seqs, qlen, heads, dv))
    for b in range(num_seqs):
        n = int(cl[b])
        k = kv[bt[b, :-(-n // bs)]].astype(np.float64).reshape(-1, kv_heads, dk)[:n]
        for t in range(qlen):
            for hq in range(heads):
                s = k[:n - qlen + t + 1, hq // G] @ q[b, t, hq].astype(np.float64) / np.sqrt(dk)
                w = np.exp(s - s.max())
                out[b, t, hq] = (w / w.sum()) @ k[:n - qlen + t + 1, hq // G, :dv]
    return out


F2 = ("F2: split_cube_vector's row split takes `for t in T.serial(qlen)` copying row t of a (qlen, N) "
      "hand-off tile for a row loop, then refuses the one-row map inside it (T.Parallel(1, N) at row t)")


MULTI = [
    ("spec4-g7-fp16", (2, 4, 7, 1, 64, 64, 16, [5, 33], "float16")),
    ("mla-576-512-g16-spec2-bf16", (1, 2, 16, 1, 576, 512, 16, [20], "bfloat16")),
    ("spec3-mha-fp32", (1, 3, 2, 2, 32, 32, 8, [9], "float32")),   # R = 3 rows: kept whole, runs
    ("spec2-mha-fp32", (1, 2, 2, 2, 32, 32, 8, [9], "float32")),   # R = 2: F2 on ascend910b
]


def _multi_token(name, shape, target):
    num_seqs, qlen, heads, kv_heads, dk, dv, bs, lens, dtype = shape
    rng = np.random.default_rng(27)
    mb = -(-max(lens) // bs)
    nb = num_seqs * mb + 2
    q = randn((num_seqs, qlen, heads, dk), dtype, seed=rng)
    kv = randn((nb, bs, kv_heads, dk), dtype, seed=rng)
    bt = rng.permutation(nb)[:num_seqs * mb].reshape(num_seqs, mb).astype(np.int32)
    cl = np.asarray(lens, np.int32)
    out = _run(paged_multi_token(num_seqs, qlen, heads, kv_heads, dk, dv, nb, bs, mb, dtype, target=target),
               target, q, kv, bt, cl)[0]
    _close(out, multi_token_reference(q, kv, bt, cl, dv), dtype, f"{name} {target}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,shape", MULTI, ids=[c[0] for c in MULTI])
def test_paged_multi_token_decode(name, shape, target):
    _multi_token(name, shape, target)


def test_f2_one_row_maps_in_a_token_loop():
    """FIXED on h-rowloop16 (unit loops in a row loop are inlined). Was: MHA (G = 1) with 2 or 4
    tokens: 'a T.Parallel loop whose first extent is not the row count
    2: the vector code is not row-local', whose hint asks for what the map does (row by row); G 2..16
    and odd token counts run."""
    _multi_token("spec2-mha-fp32", MULTI[-1][1], TARGET)


# --------------------------------------------------------------------------- int8 KV cache with per-token scales
@tw.jit(out_idx=[-1])
def paged_int8_token_scales(num_seqs, heads, kv_heads, dim, num_blocks, block_size, max_blocks, dtype="float16",
                            column=True):
    """paged_decode over an int8 cache with a scale per cached token and kv head (KS / VS [num_blocks,
    block_size, kv_heads]): page j's scales are the column KS[page, :, h]. column: read through a
    (block_size, 1) column tile and T.copy'd into the 1-D tile the maps use (ascend910b's form;
    cpu runs both); else copied into the 1-D tile directly (on ascend910b a located error whose
    hint names the column form)."""
    G = heads // kv_heads
    scale = dim ** -0.5 * LOG2E
    cache = (num_blocks, block_size, kv_heads, dim)
    scales = (num_blocks, block_size, kv_heads)

    @T.prim_func
    def main(Q: T.Tensor((num_seqs, heads, dim), dtype), K: T.Tensor(cache, "int8"), V: T.Tensor(cache, "int8"),
             KS: T.Tensor(scales, "float32"), VS: T.Tensor(scales, "float32"),
             BT: T.Tensor((num_seqs, max_blocks), "int32"), CL: T.Tensor((num_seqs,), "int32"),
             Out: T.Tensor((num_seqs, heads, dim), dtype)):
        with T.Kernel(kv_heads, num_seqs) as (h, b):
            q = T.alloc_shared((G, dim), dtype)
            k = T.alloc_shared((block_size, dim), dtype)
            v = T.alloc_shared((block_size, dim), dtype)
            k8 = T.alloc_fragment((block_size, dim), "int8")
            v8 = T.alloc_fragment((block_size, dim), "int8")
            ks = T.alloc_fragment((block_size,), "float32")
            vs = T.alloc_fragment((block_size,), "float32")
            col = T.alloc_fragment((block_size, 1), "float32")
            s = T.alloc_fragment((G, block_size), "float32")
            p = T.alloc_fragment((G, block_size), dtype)
            acc = T.alloc_fragment((G, dim), "float32")
            m = T.alloc_fragment((G,), "float32")
            m_prev = T.alloc_fragment((G,), "float32")
            rescale = T.alloc_fragment((G,), "float32")
            row_sum = T.alloc_fragment((G,), "float32")
            l = T.alloc_fragment((G,), "float32")
            T.copy(Q[b, h * G:(h + 1) * G, :], q)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, NEG)
            n = CL[b]
            for j in T.serial(T.ceildiv(n, block_size)):
                page = BT[b, j]
                T.copy(K[page, :, h, :], k8)
                if column:
                    T.copy(KS[page, :, h:h + 1], col)
                    T.copy(col, ks)
                else:
                    T.copy(KS[page, :, h], ks)
                for c, d in T.Parallel(block_size, dim):
                    k[c, d] = k8[c, d] * ks[c]
                T.gemm(q, k, s, transpose_B=True, clear_accum=True)
                for i, c in T.Parallel(G, block_size):
                    s[i, c] = T.where(j * block_size + c < n, s[i, c] * scale, NEG)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(G):
                    rescale[i] = T.exp2(m_prev[i] - m[i])
                for i, d in T.Parallel(G, dim):
                    acc[i, d] = acc[i, d] * rescale[i]
                for i, c in T.Parallel(G, block_size):
                    s[i, c] = T.exp2(s[i, c] - m[i])
                T.reduce_sum(s, row_sum, dim=1)
                for i in T.Parallel(G):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                T.copy(V[page, :, h, :], v8)
                if column:
                    T.copy(VS[page, :, h:h + 1], col)
                    T.copy(col, vs)
                else:
                    T.copy(VS[page, :, h], vs)
                for c, d in T.Parallel(block_size, dim):
                    v[c, d] = T.where(j * block_size + c < n, v8[c, d] * vs[c], 0)
                T.copy(s, p)
                T.gemm(p, v, acc)
            for i, d in T.Parallel(G, dim):
                acc[i, d] = acc[i, d] / (l[i] + 1e-30)
            T.copy(acc, Out[b, h * G:(h + 1) * G, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("heads,kv_heads,dim,block_size,lens,dtype", [
    (4, 2, 64, 16, [9, 33], "float16")])
def test_paged_int8_cache_per_token_scales(heads, kv_heads, dim, block_size, lens, dtype, target):
    """Scales powers of two (the dequantised keys exact in the dtype), compared with float64."""
    rng = np.random.default_rng(27)
    num_seqs = len(lens)
    mb = -(-max(lens) // block_size)
    nb = num_seqs * mb + 2
    q = randn((num_seqs, heads, dim), dtype, seed=rng)
    kc, vc = (rng.integers(-127, 128, (nb, block_size, kv_heads, dim)).astype(np.int8) for _ in range(2))
    ks, vs = ((2.0 ** rng.integers(-9, -5, (nb, block_size, kv_heads))).astype(np.float32) for _ in range(2))
    bt = rng.permutation(nb)[:num_seqs * mb].reshape(num_seqs, mb).astype(np.int32)
    cl = np.asarray(lens, np.int32)
    out = _run(paged_int8_token_scales(num_seqs, heads, kv_heads, dim, nb, block_size, mb, dtype, target=target),
               target, q, kc, vc, ks, vs, bt, cl)[0]
    ref = paged_reference(q, kc * ks[..., None].astype(np.float64), vc * vs[..., None].astype(np.float64), bt, cl)
    _close(out, ref, dtype, f"int8 cache per-token scales {target}")


def test_int8_cache_scale_column_into_a_1d_tile_names_the_column_form():
    """ascend910b: a strided column of a tensor copied into a 1-D tile is a located error whose hint
    gives the form test_paged_int8_cache_per_token_scales runs (a column tile, then T.copy)."""
    with pytest.raises(tw.TilewrightError, match=r"(?s)test_hunt_s27.py:\d+.*column of a tensor cannot fill.*"
                                                 r"T.copy that column tile into the 1-D tile"):
        paged_int8_token_scales(2, 4, 2, 64, 6, 16, 2, "float16", column=False, target=TARGET)
