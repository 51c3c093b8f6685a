"""Mixture-of-experts routing: top-k gating, tokens grouped by expert, a grouped GEMM, and the
weighted combine back into token order.

    probs   = softmax(logits)                      logits [tokens, experts] (the router's output)
    ids, w  = top-k of probs per token, w renormalised to sum to 1 (ties: the lower expert id)
    out[t]  = sum_k w[t, k] * (x[t] @ W[ids[t, k]])  x [tokens, hidden], W [experts, hidden, ffn]

Four kernels, as a serving engine runs them:
1. `topk_gating`: per block of tokens, the softmax over experts, then k rounds of "take the best
   expert, hide it" (ids int32 [tokens, k], weights float32 [tokens, k]).
2. `align_by_expert`: a counting sort of the tokens * k (token, expert) pairs by expert, each
   expert's run padded to a multiple of block_M (vLLM's moe_align_block_size), so every row block
   of the grouped GEMM belongs to one expert: `rows` (the token of each sorted slot; `tokens` in
   padding slots), `block_expert` (the expert of each row block; -1 past the end) and `slot`
   ([tokens, k]: where each pair landed).
3. `grouped_gemm`: program (n block, row block) gathers its block_M token rows of x by `rows`
   (padding rows read as 0) and multiplies them with its expert's W on the matrix unit.
4. `combine`: out[t] = sum_k w[t, k] * Y[slot[t, k]] — a gather per token, so the result does not
   depend on the order in which experts finish (no atomic adds).
   `combine_atomic` is the scatter-add form beside it: program (n block, t, k) adds w[t, k] *
   Y[slot[t, k]] into out[t] with T.atomic_add (a token's k programs add into its row in any order:
   float results can differ in the last bits between runs; out, returned, starts at zero per call).

The serving form of step 3 (bench/ascend.py's MoE case): `gather_rows` permutes the tokens into the
sorted, padded order once (Xs[s] = x[rows[s]]), then `grouped_gemm_sorted` reads each row block as
one tile with a software-pipelined K loop. On the Ascend 910B each gathered row of `grouped_gemm` is
its own DataCopy into the L1 tile, which the matrix unit cannot keep up with (docs/llm-kernels.md).

Usage: python examples/moe.py [tokens hidden ffn experts top_k]
"""
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report


def padded_rows(tokens, experts, top_k, block_M):
    """Rows of the sorted, padded pair list in the worst case (each expert's run padded)."""
    return (-(-(tokens * top_k + experts * (block_M - 1)) // block_M)) * block_M


@tw.jit(out_idx=[1, 2])
def topk_gating(tokens, experts, top_k, block_M=16):
    tw.require(1 <= top_k <= experts, f"topk_gating: top_k {top_k} of {experts} experts: each token needs top_k "
               "distinct experts", hint="pass 1 <= top_k <= experts (the model's num_experts_per_tok)")
    @T.prim_func
    def main(Logits: T.Tensor((tokens, experts), "float32"), Ids: T.Tensor((tokens, top_k), "int32"),
             Weights: T.Tensor((tokens, top_k), "float32")):
        with T.Kernel(T.ceildiv(tokens, block_M)) as bx:
            p = T.alloc_fragment((block_M, experts), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            total = T.alloc_fragment((block_M,), "float32")
            pick = T.alloc_fragment((block_M, experts), "int32")
            first = T.alloc_fragment((block_M,), "int32")
            ids = T.alloc_fragment((block_M, top_k), "int32")
            w = T.alloc_fragment((block_M, top_k), "float32")
            kept = T.alloc_fragment((block_M,), "float32")
            T.fill(ids, 0)
            T.fill(w, 0)
            T.copy(Logits[bx * block_M:(bx + 1) * block_M, :], p)
            T.reduce_max(p, best, dim=1)
            for i, e in T.Parallel(block_M, experts):
                p[i, e] = T.exp(p[i, e] - best[i])
            T.reduce_sum(p, total, dim=1)
            for i, e in T.Parallel(block_M, experts):
                p[i, e] = p[i, e] / total[i]
            for kk in T.serial(top_k):
                T.reduce_max(p, best, dim=1)
                for i, e in T.Parallel(block_M, experts):  # the lowest expert id holding the best
                    # (or a NaN: a NaN row's best is NaN, which nothing equals; torch.topk takes NaN
                    # first too, and an id of `experts` would index past the expert weights)
                    pick[i, e] = T.where(p[i, e] == best[i] or p[i, e] != p[i, e], e, experts)
                T.reduce_min(pick, first, dim=1)
                for i in T.Parallel(block_M):  # column kk of the results
                    ids[i, kk] = first[i]
                    w[i, kk] = best[i]
                for i, e in T.Parallel(block_M, experts):  # hide it for the next round
                    p[i, e] = T.where(e == first[i], -1.0, p[i, e])
            T.reduce_sum(w, kept, dim=1)
            for i, kk in T.Parallel(block_M, top_k):
                w[i, kk] = w[i, kk] / kept[i]
            T.copy(ids, Ids[bx * block_M:(bx + 1) * block_M, :])
            T.copy(w, Weights[bx * block_M:(bx + 1) * block_M, :])

    return main


@tw.jit(out_idx=[1, 2, 3])
def align_by_expert(tokens, experts, top_k, block_M):
    n_rows = padded_rows(tokens, experts, top_k, block_M)
    n_blocks = n_rows // block_M

    @T.prim_func
    def main(Ids: T.Tensor((tokens, top_k), "int32"), Rows: T.Tensor((n_rows,), "int32"),
             BlockExpert: T.Tensor((n_blocks,), "int32"), Slot: T.Tensor((tokens, top_k), "int32")):
        with T.Kernel(1) as bx:
            count = T.alloc_fragment((experts,), "int32")
            start = T.alloc_fragment((experts + 1,), "int32")
            fill = T.alloc_fragment((experts,), "int32")
            rows = T.alloc_fragment((n_rows,), "int32")
            block_expert = T.alloc_fragment((n_blocks,), "int32")
            slot = T.alloc_fragment((tokens, top_k), "int32")
            T.fill(count, 0)
            T.fill(rows, tokens)          # padding slots: a token index past the end
            T.fill(block_expert, -1)      # row blocks past the last expert's run: nothing to do
            for t in T.serial(tokens):
                for kk in T.serial(top_k):
                    e = Ids[t, kk]
                    count[e] = count[e] + 1
            start[0] = 0
            for e in T.serial(experts):  # each run padded to a multiple of block_M
                start[e + 1] = start[e] + T.ceildiv(count[e], block_M) * block_M
                fill[e] = start[e]
                for b in T.serial(start[e] // block_M, start[e + 1] // block_M):
                    block_expert[b] = e
            for t in T.serial(tokens):
                for kk in T.serial(top_k):
                    e = Ids[t, kk]
                    rows[fill[e]] = t
                    slot[t, kk] = fill[e]
                    fill[e] = fill[e] + 1
            T.copy(rows, Rows)
            T.copy(block_expert, BlockExpert)
            T.copy(slot, Slot)

    return main


@tw.jit(out_idx=[4])
def grouped_gemm(tokens, hidden, ffn, experts, top_k, block_M=32, block_N=64, block_K=64, dtype="float32"):
    n_rows = padded_rows(tokens, experts, top_k, block_M)

    @T.prim_func
    def main(X: T.Tensor((tokens, hidden), dtype), W: T.Tensor((experts, hidden, ffn), dtype),
             Rows: T.Tensor((n_rows,), "int32"), BlockExpert: T.Tensor((n_rows // block_M,), "int32"),
             Y: T.Tensor((n_rows, ffn), "float32")):
        with T.Kernel(T.ceildiv(ffn, block_N), n_rows // block_M) as (bx, by):
            a = T.alloc_shared((block_M, block_K), dtype)
            b = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            e = BlockExpert[by]
            if e >= 0:
                T.clear(acc)
                for k in T.serial(T.ceildiv(hidden, block_K)):
                    for r in T.serial(block_M):  # gather the block's token rows
                        t = Rows[by * block_M + r]
                        if t < tokens:
                            T.copy(X[t, k * block_K:(k + 1) * block_K], a[r, :])
                        else:
                            T.fill(a[r, :], 0)
                    T.copy(W[e, k * block_K:(k + 1) * block_K, bx * block_N:(bx + 1) * block_N], b)
                    T.gemm(a, b, acc)
                T.copy(acc, Y[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])
            else:  # a block no expert uses: zeros, so that every row of Y (an out_idx output) is written
                T.clear(acc)
                T.copy(acc, Y[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])

    return main


@tw.jit(out_idx=[2])
def gather_rows(tokens, hidden, n_rows, block_R=8, block_H=4096, dtype="float32"):
    """Xs[s] = X[rows[s]] (0 for padding slots): the tokens in the sorted, padded order, so that a
    grouped GEMM reads each row block as one contiguous tile (what MoE serving stacks call the
    permute / init-routing step)."""
    @T.prim_func
    def main(X: T.Tensor((tokens, hidden), dtype), Rows: T.Tensor((n_rows,), "int32"),
             Xs: T.Tensor((n_rows, hidden), dtype)):
        with T.Kernel(T.ceildiv(hidden, block_H), T.ceildiv(n_rows, block_R)) as (bx, by):
            row = T.alloc_fragment((block_H,), dtype)
            for r in T.serial(block_R):
                s = by * block_R + r
                if s < n_rows:
                    t = Rows[s]
                    if t < tokens:
                        T.copy(X[t, bx * block_H:(bx + 1) * block_H], row)
                    else:
                        T.fill(row, 0)
                    T.copy(row, Xs[s, bx * block_H:(bx + 1) * block_H])

    return main


@tw.jit(out_idx=[3])
def grouped_gemm_sorted(n_rows, hidden, ffn, experts, block_M=128, block_N=256, block_K=64, num_stages=2,
                        dtype="float16", out_dtype="float16"):
    """The grouped GEMM on gathered rows (gather_rows): row block `by` of Xs times its expert's W,
    each A tile one contiguous copy, the K loop software-pipelined (T.Pipelined)."""
    @T.prim_func
    def main(Xs: T.Tensor((n_rows, hidden), dtype), W: T.Tensor((experts, hidden, ffn), dtype),
             BlockExpert: T.Tensor((n_rows // block_M,), "int32"), Y: T.Tensor((n_rows, ffn), out_dtype)):
        with T.Kernel(T.ceildiv(ffn, block_N), n_rows // block_M) as (bx, by):
            a = T.alloc_shared((block_M, block_K), dtype)
            b = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            e = BlockExpert[by]
            if e >= 0:
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(hidden, block_K), num_stages=num_stages):
                    T.copy(Xs[by * block_M:(by + 1) * block_M, k * block_K:(k + 1) * block_K], a)
                    T.copy(W[e, k * block_K:(k + 1) * block_K, bx * block_N:(bx + 1) * block_N], b)
                    T.gemm(a, b, acc)
                T.copy(acc, Y[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])
            else:  # a block no expert uses: zeros, so that every row of Y (an out_idx output) is written
                T.clear(acc)
                T.copy(acc, Y[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])

    return main


@tw.jit(out_idx=[3])
def combine(tokens, ffn, top_k, n_rows, block_N=256, dtype="float32"):
    @T.prim_func
    def main(Y: T.Tensor((n_rows, ffn), "float32"), Slot: T.Tensor((tokens, top_k), "int32"),
             Weights: T.Tensor((tokens, top_k), "float32"), Out: T.Tensor((tokens, ffn), dtype)):
        with T.Kernel(T.ceildiv(ffn, block_N), tokens) as (bx, t):
            y = T.alloc_fragment((block_N,), "float32")
            o = T.alloc_fragment((block_N,), "float32")
            T.fill(o, 0)
            for kk in T.serial(top_k):
                T.copy(Y[Slot[t, kk], bx * block_N:(bx + 1) * block_N], y)
                w = Weights[t, kk]
                for j in T.Parallel(block_N):
                    o[j] = o[j] + w * y[j]
            T.copy(o, Out[t, bx * block_N:(bx + 1) * block_N])

    return main


@tw.jit(out_idx=[-1])  # Out: written only by T.atomic_add, so it starts at zero on every call
def combine_atomic(tokens, ffn, top_k, n_rows, block_N=256, dtype="float32"):
    @T.prim_func
    def main(Y: T.Tensor((n_rows, ffn), "float32"), Slot: T.Tensor((tokens, top_k), "int32"),
             Weights: T.Tensor((tokens, top_k), "float32"), Out: T.Tensor((tokens, ffn), dtype)):
        with T.Kernel(T.ceildiv(ffn, block_N), tokens, top_k) as (bx, t, kk):
            y = T.alloc_fragment((block_N,), "float32")
            T.copy(Y[Slot[t, kk], bx * block_N:(bx + 1) * block_N], y)
            w = Weights[t, kk]
            for j in T.Parallel(block_N):
                y[j] = w * y[j]
            T.atomic_add(Out[t, bx * block_N:(bx + 1) * block_N], y)

    return main


def moe(x, logits, w, top_k, block_M=32, target="cpu", atomic_combine=False):
    """The four kernels in order; returns (out, ids, weights). atomic_combine: the scatter-add
    combine (combine_atomic) instead of the gather."""
    tokens, hidden = x.shape
    experts, _, ffn = w.shape
    dtype = str(x.dtype)
    ids, weights = topk_gating(tokens, experts, top_k, target=target)(logits)
    rows, block_expert, slot = align_by_expert(tokens, experts, top_k, block_M, target=target)(ids)
    y = grouped_gemm(tokens, hidden, ffn, experts, top_k, block_M=block_M, dtype=dtype, target=target)(
        x, w, rows, block_expert)
    combine_k = combine_atomic if atomic_combine else combine
    out = combine_k(tokens, ffn, top_k, rows.shape[0], dtype=dtype, target=target)(y, slot, weights)
    return out, ids, weights


def reference(x, logits, w, top_k):
    """float64: softmax, top-k (lower id first on ties), renormalised weights, weighted expert sum."""
    lg = logits.astype(np.float64)
    p = np.exp(lg - lg.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ids = np.argsort(-p, axis=1, kind="stable")[:, :top_k]
    wts = np.take_along_axis(p, ids, axis=1)
    wts /= wts.sum(axis=1, keepdims=True)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out = np.zeros((x.shape[0], w.shape[2]))
    for kk in range(top_k):
        out += wts[:, kk:kk + 1] * np.einsum("th,thf->tf", x64, w64[ids[:, kk]])
    return out, ids, wts


def inputs(tokens, hidden, ffn, experts, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    return (randn((tokens, hidden), dtype, seed=rng), randn((tokens, experts), seed=rng, scale=2.0),
            randn((experts, hidden, ffn), dtype, seed=rng, scale=hidden ** -0.5))


def check(tokens, hidden, ffn, experts, top_k, dtype="float32"):
    x, logits, w = inputs(tokens, hidden, ffn, experts, dtype)
    out, ids, weights = moe(x, logits, w, top_k)
    ref, ref_ids, ref_w = reference(x, logits, w, top_k)
    ok = bool((ids == ref_ids).all())
    print(f"  moe top-{top_k} ids {'match' if ok else 'DIFFER'}")
    scatter, _, _ = moe(x, logits, w, top_k, atomic_combine=True)
    return report(f"moe tokens={tokens} hidden={hidden} ffn={ffn} experts={experts} top-{top_k} {dtype}", out, ref) \
        and report("moe with the scatter-add combine (T.atomic_add)", scatter, ref) \
        and report("moe gate weights", weights, ref_w) and ok


def main(argv):
    shape = tuple(int(v) for v in argv[:5]) if len(argv) >= 5 else (100, 96, 80, 8, 2)
    finish(all([check(*shape), check(*shape, dtype="bfloat16")]))


if __name__ == "__main__":
    main(sys.argv[1:])
