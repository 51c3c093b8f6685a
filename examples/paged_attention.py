"""Paged-KV-cache decode attention in vLLM's layout, with grouped-query heads (GQA/MQA), and its
split-KV ("flash-decoding") variant with the combine step.

One new token per sequence attends to that sequence's cached keys and values, which live in
fixed-size pages of a shared cache (vLLM's block-table layout):

    query          [num_seqs, num_heads, head_dim]
    key_cache      [num_blocks, block_size, num_kv_heads, head_dim]   (value_cache: the same)
    block_tables   [num_seqs, max_blocks_per_seq]  int32: page j of sequence b is block_tables[b, j]
    context_lens   [num_seqs]                      int32: tokens of sequence b (0 .. max_blocks*block_size; 0: out 0)
    out            [num_seqs, num_heads, head_dim]

    out[b, h] = softmax(scale * q[b, h] . K_b^T) V_b,  K_b / V_b: the first context_lens[b] tokens of
    sequence b's pages, kv head h // (num_heads // num_kv_heads)   (scale = 1/sqrt(head_dim))

which is vLLM's `paged_attention` and PyTorch's `scaled_dot_product_attention(..., enable_gqa=True)`
on the gathered cache. One program per (kv head, sequence) handles the query heads of that kv
head together (a (G, head_dim) tile, G = num_heads // num_kv_heads: the cache is read once per
kv head), reading page numbers from the block table and walking only the sequence's pages
(online softmax, as examples/flash_attention.py), `pages_per_step` pages side by side per step
(one gemm over their keys). `paged_decode_pages` is the cpu form: one program per sequence over
all kv heads, reading each page whole (one contiguous block of kv_heads * head_dim columns)
rather than a head's strided rows of it (docs/llm-kernels.md: 2x faster on cpu; ascend910b runs
`paged_decode`). Cache slots past a sequence's length (the tail
of its last page) may hold anything, NaN included: their scores are masked and their values zeroed
before the P V product (0 * NaN would be NaN), as vLLM does. The split-KV variant gives each program a
range of pages (more programs when there are few sequences) and writes a partial output and its
log-sum-exp; the combine kernel merges the splits.

Usage: python examples/paged_attention.py [num_seqs num_heads num_kv_heads head_dim block_size max_context]
"""
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report

LOG2E = 1.4426950408889634
NEG_INF = -1.0e30  # finite "minus infinity": masked scores and empty splits stay NaN-free


def gqa_group(heads, kv_heads):
    """The query heads per kv head; an error at the factory's caller unless kv_heads divides heads
    (else the last heads would silently read a kv head past the cache)."""
    tw.require(kv_heads >= 1 and heads % kv_heads == 0, f"{heads} query heads cannot share {kv_heads} kv heads "
               "evenly (GQA needs the query heads to be a multiple of the kv heads)",
               hint="check the model's num_attention_heads and num_key_value_heads", skip=1)
    return heads // kv_heads


@tw.jit(out_idx=[5])
def paged_decode(num_seqs, num_heads, num_kv_heads, head_dim, num_blocks, block_size, max_blocks,
                 dtype="float32", pages_per_step=4):
    G = gqa_group(num_heads, num_kv_heads)
    scale = (1.0 / head_dim) ** 0.5 * LOG2E  # in base 2: exp2 below
    cache = (num_blocks, block_size, num_kv_heads, head_dim)
    N = pages_per_step * block_size  # keys per step: a few pages side by side in one tile

    @T.prim_func
    def main(Q: T.Tensor((num_seqs, num_heads, head_dim), dtype), K: T.Tensor(cache, dtype),
             V: T.Tensor(cache, dtype), block_tables: T.Tensor((num_seqs, max_blocks), "int32"),
             context_lens: T.Tensor((num_seqs,), "int32"), Out: T.Tensor((num_seqs, num_heads, head_dim), dtype)):
        with T.Kernel(num_kv_heads, num_seqs) as (h, b):
            q = T.alloc_shared((G, head_dim), dtype)
            k = T.alloc_shared((N, head_dim), dtype)
            v = T.alloc_shared((N, head_dim), dtype)
            s = T.alloc_fragment((G, N), "float32")
            p = T.alloc_fragment((G, N), dtype)
            acc = T.alloc_fragment((G, head_dim), "float32")
            m = T.alloc_fragment((G,), "float32")
            m_prev = T.alloc_fragment((G,), "float32")
            rescale = T.alloc_fragment((G,), "float32")
            row_sum = T.alloc_fragment((G,), "float32")
            l = T.alloc_fragment((G,), "float32")
            T.copy(Q[b, h * G:(h + 1) * G, :], q)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, NEG_INF)
            n = context_lens[b]
            pages = T.ceildiv(n, block_size)
            for j in T.serial(T.ceildiv(pages, pages_per_step)):
                for jj in T.serial(pages_per_step):  # this step's pages, gathered by the block table
                    if j * pages_per_step + jj < pages:
                        page = block_tables[b, j * pages_per_step + jj]
                        T.copy(K[page, :, h, :], k[jj * block_size:(jj + 1) * block_size, :])
                        T.copy(V[page, :, h, :], v[jj * block_size:(jj + 1) * block_size, :])
                T.gemm(q, k, s, transpose_B=True, clear_accum=True)
                for i, c in T.Parallel(G, N):
                    s[i, c] = T.where(j * N + c < n, s[i, c] * scale, NEG_INF)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(G):
                    rescale[i] = T.exp2(m_prev[i] - m[i])
                for i, d in T.Parallel(G, head_dim):
                    acc[i, d] = acc[i, d] * rescale[i]
                for i, c in T.Parallel(G, N):
                    s[i, c] = T.exp2(s[i, c] - m[i])
                T.reduce_sum(s, row_sum, dim=1)
                for i in T.Parallel(G):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                for c, d in T.Parallel(N, head_dim):  # slots past the length: never read
                    v[c, d] = T.where(j * N + c < n, v[c, d], 0)  # (stale data, even NaN)
                T.copy(s, p)
                T.gemm(p, v, acc)
            for i, d in T.Parallel(G, head_dim):  # a sequence of length 0: acc = l = 0 -> 0, as vLLM's and
                # the split form's (l >= 1 once a key is seen, and l + 1e-30 == l then; no max: a NaN in l
                # would need the NaN rule's fix-up, whose extra vector ops cost ascend910b a PIPE_ALL here)
                acc[i, d] = acc[i, d] / (l[i] + 1e-30)
            T.copy(acc, Out[b, h * G:(h + 1) * G, :])

    return main


@tw.jit(out_idx=[5])
def paged_decode_pages(num_seqs, num_heads, num_kv_heads, head_dim, num_blocks, block_size, max_blocks,
                       dtype="float32", pages_per_step=4):
    """The cpu form of `paged_decode`: one program per sequence covering all kv heads, so each
    page of the cache is read whole, one contiguous [block_size, kv_heads * head_dim] block (64 KiB
    fp32 at 16 x 8 x 128), instead of block_size rows of head_dim elements, kv_heads * head_dim
    apart, per (kv head, sequence) program. The caches are passed as
    `key_cache.reshape(num_blocks, block_size, -1)` (the same memory, a view: no copy). Per kv head
    h, the query heads h * G .. (h + 1) * G - 1 multiply the columns h * head_dim .. (h + 1) *
    head_dim - 1 of each page. A page's tiles `k` and `v` are only read by the gemms, so they are
    views of the cache (read in place, never copied: docs/language.md "Run-time extents"); the
    value page is copied with a run-time extent, the slots inside the length, so the slots past it
    read as 0 and need no mask pass (which would write the tile and force a copy). cpu only: on
    ascend910b the gemms into row slices of the score and output fragments are an error (use
    `paged_decode` there)."""
    G = gqa_group(num_heads, num_kv_heads)
    W = num_kv_heads * head_dim
    scale = (1.0 / head_dim) ** 0.5 * LOG2E
    cache = (num_blocks, block_size, W)
    N = pages_per_step * block_size

    @T.prim_func
    def main(Q: T.Tensor((num_seqs, num_heads, head_dim), dtype), K: T.Tensor(cache, dtype),
             V: T.Tensor(cache, dtype), block_tables: T.Tensor((num_seqs, max_blocks), "int32"),
             context_lens: T.Tensor((num_seqs,), "int32"), Out: T.Tensor((num_seqs, num_heads, head_dim), dtype)):
        with T.Kernel(num_seqs) as b:
            q = T.alloc_shared((num_heads, head_dim), dtype)
            k = T.alloc_shared((block_size, W), dtype)  # one page: read in place (a view)
            v = T.alloc_shared((block_size, W), dtype)
            s = T.alloc_fragment((num_heads, N), "float32")
            p = T.alloc_fragment((num_heads, N), dtype)
            acc = T.alloc_fragment((num_heads, head_dim), "float32")
            m = T.alloc_fragment((num_heads,), "float32")
            m_prev = T.alloc_fragment((num_heads,), "float32")
            rescale = T.alloc_fragment((num_heads,), "float32")
            row_sum = T.alloc_fragment((num_heads,), "float32")
            l = T.alloc_fragment((num_heads,), "float32")
            T.copy(Q[b, :, :], q)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, NEG_INF)
            n = context_lens[b]
            pages = T.ceildiv(n, block_size)
            for j in T.serial(T.ceildiv(pages, pages_per_step)):
                for jj in T.serial(pages_per_step):  # whole pages: all kv heads' keys
                    if j * pages_per_step + jj < pages:
                        page = block_tables[b, j * pages_per_step + jj]
                        T.copy(K[page, :, :], k)  # only read by the gemms: the page in place
                        for h in T.serial(num_kv_heads):
                            T.gemm(q[h * G:(h + 1) * G, :], k[:, h * head_dim:(h + 1) * head_dim],
                                   s[h * G:(h + 1) * G, jj * block_size:(jj + 1) * block_size],
                                   transpose_B=True, clear_accum=True)
                for i, c in T.Parallel(num_heads, N):  # keys past the length (pages past it too)
                    s[i, c] = T.where(j * N + c < n, s[i, c] * scale, NEG_INF)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(num_heads):
                    rescale[i] = T.exp2(m_prev[i] - m[i])
                for i, d in T.Parallel(num_heads, head_dim):
                    acc[i, d] = acc[i, d] * rescale[i]
                for i, c in T.Parallel(num_heads, N):
                    s[i, c] = T.exp2(s[i, c] - m[i])
                T.reduce_sum(s, row_sum, dim=1)
                for i in T.Parallel(num_heads):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                T.copy(s, p)
                for jj in T.serial(pages_per_step):
                    if j * pages_per_step + jj < pages:
                        page = block_tables[b, j * pages_per_step + jj]
                        # the slots inside the length only (a run-time extent): v's rows past it
                        # read as 0, so stale slots (even NaN) are never read and v stays a view
                        rows = T.min(block_size, n - (j * pages_per_step + jj) * block_size)
                        T.copy(V[page, 0:rows, :], v)
                        for h in T.serial(num_kv_heads):
                            T.gemm(p[h * G:(h + 1) * G, jj * block_size:(jj + 1) * block_size],
                                   v[:, h * head_dim:(h + 1) * head_dim], acc[h * G:(h + 1) * G, :])
            for i, d in T.Parallel(num_heads, head_dim):  # a sequence of length 0: 0
                acc[i, d] = acc[i, d] / (l[i] + 1e-30)
            T.copy(acc, Out[b, :, :])

    return main


@tw.jit(out_idx=[5, 6])
def paged_decode_split(num_seqs, num_heads, num_kv_heads, head_dim, num_blocks, block_size, max_blocks,
                       num_splits, dtype="float32"):
    """Split-KV: program (h, b, sp) handles pages [sp * P, (sp + 1) * P) of sequence b (P =
    ceil(max_blocks / num_splits)), writing its normalised partial output Part[b, head, sp, :] and
    log2-sum-exp Lse[b, head, sp] (base 2; an empty split writes 0 and about -1e30)."""
    G = gqa_group(num_heads, num_kv_heads)
    P = -(-max_blocks // num_splits)
    scale = (1.0 / head_dim) ** 0.5 * LOG2E
    cache = (num_blocks, block_size, num_kv_heads, head_dim)

    @T.prim_func
    def main(Q: T.Tensor((num_seqs, num_heads, head_dim), dtype), K: T.Tensor(cache, dtype),
             V: T.Tensor(cache, dtype), block_tables: T.Tensor((num_seqs, max_blocks), "int32"),
             context_lens: T.Tensor((num_seqs,), "int32"),
             Part: T.Tensor((num_seqs, num_heads, num_splits, head_dim), "float32"),
             Lse: T.Tensor((num_seqs, num_heads, num_splits), "float32")):
        with T.Kernel(num_kv_heads, num_seqs, num_splits) as (h, b, sp):
            q = T.alloc_shared((G, head_dim), dtype)
            k = T.alloc_shared((block_size, head_dim), dtype)
            v = T.alloc_shared((block_size, head_dim), dtype)
            s = T.alloc_fragment((G, block_size), "float32")
            p = T.alloc_fragment((G, block_size), dtype)
            acc = T.alloc_fragment((G, head_dim), "float32")
            m = T.alloc_fragment((G,), "float32")
            m_prev = T.alloc_fragment((G,), "float32")
            rescale = T.alloc_fragment((G,), "float32")
            row_sum = T.alloc_fragment((G,), "float32")
            l = T.alloc_fragment((G,), "float32")
            lse = T.alloc_fragment((G, 1), "float32")  # a column: copied into a column of Lse
            T.copy(Q[b, h * G:(h + 1) * G, :], q)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, NEG_INF)
            n = context_lens[b]
            first = sp * P
            for j in T.serial(first, T.min(first + P, T.ceildiv(n, block_size))):
                page = block_tables[b, j]
                T.copy(K[page, :, h, :], k)
                T.gemm(q, k, s, transpose_B=True, clear_accum=True)
                for i, c in T.Parallel(G, block_size):
                    s[i, c] = T.where(j * block_size + c < n, s[i, c] * scale, NEG_INF)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(G):
                    rescale[i] = T.exp2(m_prev[i] - m[i])
                for i, d in T.Parallel(G, head_dim):
                    acc[i, d] = acc[i, d] * rescale[i]
                for i, c in T.Parallel(G, block_size):
                    s[i, c] = T.exp2(s[i, c] - m[i])
                T.reduce_sum(s, row_sum, dim=1)
                for i in T.Parallel(G):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                T.copy(V[page, :, h, :], v)
                for c, d in T.Parallel(block_size, head_dim):  # slots past the length: never read
                    v[c, d] = T.where(j * block_size + c < n, v[c, d], 0)  # (stale data, even NaN)
                T.copy(s, p)
                T.gemm(p, v, acc)
            # an empty split: acc = 0, l = 0 -> output 0 and lse ~ -1e30 (weight 0 when combined)
            for i, d in T.Parallel(G, head_dim):
                acc[i, d] = acc[i, d] / T.max(l[i], 1e-30)
            for i, z in T.Parallel(G, 1):
                lse[i, z] = m[i] + T.log2(T.max(l[i], 1e-30))
            T.copy(acc, Part[b, h * G:(h + 1) * G, sp, :])
            T.copy(lse, Lse[b, h * G:(h + 1) * G, sp:sp + 1])

    return main


@tw.jit(out_idx=[2])
def combine_splits(num_seqs, num_heads, num_splits, head_dim, dtype="float32"):
    """Out[b, h] = sum_s w_s Part[b, h, s] / sum_s w_s with w_s = 2^(Lse[b, h, s] - max_s Lse)."""
    @T.prim_func
    def main(Part: T.Tensor((num_seqs, num_heads, num_splits, head_dim), "float32"),
             Lse: T.Tensor((num_seqs, num_heads, num_splits), "float32"),
             Out: T.Tensor((num_seqs, num_heads, head_dim), dtype)):
        with T.Kernel(num_heads, num_seqs) as (h, b):
            part = T.alloc_fragment((num_splits, head_dim), "float32")
            lse = T.alloc_fragment((1, num_splits), "float32")
            top = T.alloc_fragment((1,), "float32")
            total = T.alloc_fragment((1,), "float32")
            o = T.alloc_fragment((1, head_dim), "float32")
            T.copy(Part[b, h, :, :], part)
            T.copy(Lse[b, h:h + 1, :], lse)
            T.reduce_max(lse, top, dim=1)
            for i, sp in T.Parallel(1, num_splits):
                lse[i, sp] = T.exp2(lse[i, sp] - top[i])
            T.reduce_sum(lse, total, dim=1)
            T.fill(o, 0)
            for sp in T.serial(num_splits):
                for i, d in T.Parallel(1, head_dim):
                    o[i, d] = o[i, d] + part[sp, d] * (lse[i, sp] / total[i])
            T.copy(o, Out[b, h:h + 1, :])

    return main


def reference(q, key_cache, value_cache, block_tables, context_lens):
    """float64 decode attention over each sequence's gathered pages (vLLM's semantics)."""
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    out = np.zeros(q.shape, np.float64)
    for b in range(num_seqs):
        n = int(context_lens[b])
        if n == 0:  # no key: 0 (vLLM divides by exp_sum + 1e-6)
            continue
        pages = block_tables[b, :-(-n // block_size)]
        k = key_cache[pages].astype(np.float64).reshape(-1, num_kv_heads, head_dim)[:n]
        v = value_cache[pages].astype(np.float64).reshape(-1, num_kv_heads, head_dim)[:n]
        for h in range(num_heads):
            s = k[:, h // group] @ q[b, h].astype(np.float64) / np.sqrt(head_dim)
            w = np.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ v[:, h // group]
    return out


def page_view(cache):
    """A vLLM cache [num_blocks, block_size, kv_heads, head_dim] as the [num_blocks, block_size,
    kv_heads * head_dim] that `paged_decode_pages` takes: the same memory (a view)."""
    return cache.reshape(cache.shape[0], cache.shape[1], -1)


def make_inputs(num_seqs, num_heads, num_kv_heads, head_dim, block_size, max_context, dtype="float32",
                seed=0, lens=None):
    """Random inputs: each sequence's pages are distinct random blocks of a cache with a few spare
    blocks; context lengths random in [1, max_context] unless given."""
    rng = np.random.default_rng(seed)
    max_blocks = -(-max_context // block_size)
    num_blocks = num_seqs * max_blocks + 3
    q = randn((num_seqs, num_heads, head_dim), dtype, seed=rng)
    key_cache = randn((num_blocks, block_size, num_kv_heads, head_dim), dtype, seed=rng)
    value_cache = randn((num_blocks, block_size, num_kv_heads, head_dim), dtype, seed=rng)
    block_tables = rng.permutation(num_blocks)[:num_seqs * max_blocks].reshape(num_seqs, max_blocks).astype(np.int32)
    if lens is None:
        lens = rng.integers(1, max_context + 1, size=num_seqs)
    context_lens = np.asarray(lens, dtype=np.int32)
    return q, key_cache, value_cache, block_tables, context_lens


def run(num_seqs, num_heads, num_kv_heads, head_dim, block_size, max_context, dtype="float32",
        num_splits=None, target="cpu", pages=False, **kw):
    """Inputs and the kernel's output (split-KV with `num_splits`, then combined; the whole-page
    form `paged_decode_pages` with `pages`)."""
    q, kc, vc, bt, cl = make_inputs(num_seqs, num_heads, num_kv_heads, head_dim, block_size, max_context, dtype, **kw)
    num_blocks, max_blocks = kc.shape[0], bt.shape[1]
    if pages:
        out = paged_decode_pages(num_seqs, num_heads, num_kv_heads, head_dim, num_blocks, block_size, max_blocks,
                                 dtype, target=target)(q, page_view(kc), page_view(vc), bt, cl)
    elif num_splits is None:
        out = paged_decode(num_seqs, num_heads, num_kv_heads, head_dim, num_blocks, block_size, max_blocks,
                           dtype, target=target)(q, kc, vc, bt, cl)
    else:
        part, lse = paged_decode_split(num_seqs, num_heads, num_kv_heads, head_dim, num_blocks, block_size,
                                       max_blocks, num_splits, dtype, target=target)(q, kc, vc, bt, cl)
        out = combine_splits(num_seqs, num_heads, num_splits, head_dim, dtype, target=target)(part, lse)
    return (q, kc, vc, bt, cl), out


def check(*shape, dtype="float32", num_splits=None, target="cpu", pages=False):
    inputs, out = run(*shape, dtype=dtype, num_splits=num_splits, target=target, pages=pages)
    form = f" splits={num_splits}" if num_splits else " pages" if pages else ""
    return report(f"paged_decode {shape} {dtype}{form} {target}", out, reference(*inputs))


def main(argv):
    shape = tuple(int(x) for x in argv[:6]) if len(argv) >= 6 else (3, 8, 2, 64, 16, 300)
    cases = [dict(), dict(num_splits=4), dict(dtype="bfloat16"), dict(dtype="float16", num_splits=3),
             dict(pages=True), dict(dtype="bfloat16", pages=True)]
    finish(all([check(*shape, **c) for c in cases]))


if __name__ == "__main__":
    main(sys.argv[1:])
