"""Prefill attention with masks: causal, sliding window, a boolean or additive mask tensor, padding
and packed variable-length sequences (`cu_seqlens`); grouped-query heads (GQA/MQA); BHSD and BSHD
layouts. Flash attention (online softmax, never the S x S matrix) as examples/flash_attention.py.

    O = softmax(Q K^T / sqrt(D) + M) V

with M[i, j] = 0 where query i may see key j and -inf elsewhere, as PyTorch's
`scaled_dot_product_attention(q, k, v, attn_mask, is_causal, enable_gqa=True)`:

- causal: key j visible to query i iff j <= i (top-left aligned, as SDPA's is_causal);
- window=w: also j > i - w (the w most recent keys including i itself: a sliding window);
- mask="bool": a (seq_q, seq_kv) bool tensor, True = visible (SDPA's bool attn_mask);
- mask="additive": a (seq_q, seq_kv) float32 tensor added to the scaled scores (-inf hides);
- with a mask tensor, its block tables (`prefill_blocks(mask, block_M, block_N)`, computed once and
  reused across heads and layers): the block summary, per (query block, key block) 0 = nothing
  visible (skipped), 1 = partial (the mask applied), 2 = all visible, nothing added (no mask work),
  3 = exactly its band of diagonals visible (a sliding window's or causal's triangles: the
  visibility computed from the band, the mask tile not read; `band_exact`), per query block the compacted list of its non-empty key blocks, which the key loop walks, and per
  block the band of diagonals holding its visible elements (`block_bands`) and the rectangle of
  rows and columns holding them (`block_rects`): 3 also marks a block visible exactly inside its
  band met with its rectangle (a document's edge cuts such a rectangle out of a block);
- kv_len: a (batch,) int32 tensor of valid key counts per sequence (padding on the right);
- varlen_attention: sequences packed along the token axis, [total_tokens, heads, head_dim], with
  cu_seqlens [num_seqs + 1] int32 (sequence b is tokens cu_seqlens[b] .. cu_seqlens[b + 1]).

A query row that sees no key at all gets 0 (as torch 2.15's SDPA; older torch gave NaN there). Heads: query head h reads kv
head h // (heads // kv_heads).

Usage: python examples/masked_attention.py [B H KVH S D]
"""
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report

LOG2E = 1.4426950408889634
FLT_LOWEST = -3.4028234663852886e38  # the most negative float32



def gqa_group(heads, kv_heads):
    """The query heads per kv head; an error at the factory's caller unless kv_heads divides heads
    (else the last heads would silently read a kv head past the cache)."""
    tw.require(kv_heads >= 1 and heads % kv_heads == 0, f"{heads} query heads cannot share {kv_heads} kv heads "
               "evenly (GQA needs the query heads to be a multiple of the kv heads)",
               hint="check the model's num_attention_heads and num_key_value_heads", skip=1)
    return heads // kv_heads


@tw.jit(out_idx=[-1])
def attention_prefill(batch, heads, kv_heads, seq_q, seq_kv, dim, layout="BHSD", causal=False, window=None,
                      mask=None, padded=False, block_M=64, block_N=64, dtype="float32"):
    """Blocks, KvPos, KvIdx: the mask tensor's block tables, `prefill_blocks(Mask, block_M, block_N)`
    (read only with a mask tensor; `dense_blocks(seq_q, seq_kv, block_M, block_N)` otherwise, or to
    compute every block with the mask applied). Blocks is the block summary (0 = nothing visible,
    1 = the mask is applied, 2 = no mask work, 3 = visible exactly inside the block's band met
    with its rectangle: no mask tile read, `band_exact`), KvIdx[qb, :] the key blocks with a visible element,
    in order, and KvPos[qb, kb] how many of them come before key block kb: the key loop of query
    block qb runs over KvIdx[qb, KvPos[qb, lo]:KvPos[qb, hi]] (lo .. hi: the key blocks causal,
    window and KvLen leave), so empty blocks cost nothing and the loop holds no `if` around the
    Cube's work (on ascend910b such an `if` stops the Cube / Vector pipelining).

    Bands[qb, kb] = (lo, hi): the diagonals (key - query, within the block) of the block's visible
    elements (`block_bands`), met with those causal and window leave: both gemms take that band
    (docs/language.md "Bands"), Q K^T as c_band (scores outside it are not needed: the mask pass
    sets them to -inf) and P V as a_band (P is exactly 0 outside it: exp2(-inf - m) = 0, so the
    skipped terms are 0 * V). On cpu the gemm runtime then computes each micro-tile of the score
    only over its rows that the band reaches (none: skipped) and trims each row panel's K range
    of P V (a sliding window's partial blocks are half hidden); the results are the same either way (ascend910b computes whole tiles).

    Rects[qb, kb] = (r0, r1, c0, c1): the rows r0 <= i < r1 and columns c0 <= j < c1 (within the
    block) holding the block's visible elements (`block_rects`): both gemms meet their band with it
    (T.gemm's rows / cols), so a block a document's edges cut to a rectangle computes that
    rectangle's rows and columns only."""
    group = gqa_group(heads, kv_heads)
    # scores in base 2 (exp2 below), except with an additive mask: there the scores stay in natural
    # units and each exp2 argument is scaled after the subtraction, so a mask of the most negative
    # float (HF transformers' torch.finfo(dtype).min) adds without overflowing to -inf: every key
    # that is not -inf stays visible, as in torch's scaled_dot_product_attention
    natural = mask == "additive"
    scale = (1.0 / dim) ** 0.5 * (1.0 if natural else LOG2E)
    neg_inf = float("-inf")

    def shape(s, h):
        return (batch, h, s, dim) if layout == "BHSD" else (batch, s, h, dim)

    mask_dtype = "bool" if mask == "bool" else "float32"

    @T.prim_func
    def main(Q: T.Tensor(shape(seq_q, heads), dtype), K: T.Tensor(shape(seq_kv, kv_heads), dtype),
             V: T.Tensor(shape(seq_kv, kv_heads), dtype), Mask: T.Tensor((seq_q, seq_kv), mask_dtype),
             Blocks: T.Tensor((T.ceildiv(seq_q, block_M), T.ceildiv(seq_kv, block_N)), "int32"),
             KvPos: T.Tensor((T.ceildiv(seq_q, block_M), T.ceildiv(seq_kv, block_N) + 1), "int32"),
             KvIdx: T.Tensor((T.ceildiv(seq_q, block_M), T.ceildiv(seq_kv, block_N)), "int32"),
             Bands: T.Tensor((T.ceildiv(seq_q, block_M), T.ceildiv(seq_kv, block_N), 2), "int32"),
             Rects: T.Tensor((T.ceildiv(seq_q, block_M), T.ceildiv(seq_kv, block_N), 4), "int32"),
             KvLen: T.Tensor((batch,), "int32"), Output: T.Tensor(shape(seq_q, heads), dtype)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch) as (bx, by, bz):
            q = T.alloc_shared((block_M, dim), dtype)
            k = T.alloc_shared((block_N, dim), dtype)
            v = T.alloc_shared((block_N, dim), dtype)
            msk = T.alloc_fragment((block_M, block_N), mask_dtype)
            acc_s = T.alloc_fragment((block_M, block_N), "float32")
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            rescale = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            logsum = T.alloc_fragment((block_M,), "float32")
            kv_head = by // group
            n_kv = KvLen[bz] if padded else seq_kv
            if layout == "BHSD":  # a Python constant: decided when the kernel is built
                T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q)
            else:
                T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, FLT_LOWEST)  # finite: exp2(m_prev - m) stays a number while a row has seen nothing,
            # and below every finite score (a row whose scores are all huge negative numbers still sees them)
            hi = T.ceildiv(n_kv, block_N)
            if causal:
                hi = T.min(hi, T.ceildiv((bx + 1) * block_M, block_N))
            lo = 0
            if window is not None:  # clamped to hi: with seq_q > seq_kv a query block can lie
                # wholly past the keys' window (its rows see no key: the loop is empty)
                lo = T.min(T.max(bx * block_M - window + 1, 0) // block_N, hi)
            first = lo  # no mask tensor (decided when the kernel is built): the key blocks lo .. hi
            last = hi
            if mask is not None:  # the non-empty ones among them: a stretch of the compacted list
                first = KvPos[bx, lo]
                last = KvPos[bx, hi]
            for t in T.serial(first, last):
                if mask is None:
                    kb = t
                    blk = 2
                else:
                    kb = KvIdx[bx, t]
                    blk = Blocks[bx, kb]  # 1 apply the mask, 2 all visible, 3 the band (0 never listed)
                # the block's band of diagonals d = j - i with a visible element (full: 1 - block_M
                # <= d < block_N): what causal and window leave, and the mask tensor's (Bands)
                off = bx * block_M - kb * block_N  # element (i, j): key - query = j - i - off
                d_lo = 1 - block_M
                d_hi = block_N
                if causal:
                    d_hi = T.min(d_hi, off + 1)
                if window is not None:
                    d_lo = T.max(d_lo, off - window + 1)
                if mask is not None:
                    d_lo = T.max(d_lo, Bands[bx, kb, 0])
                    # the mask's band and causal / window's may not meet (a block listed for rows
                    # that causal hides): then the empty band (d_lo, d_lo), nothing visible
                    d_hi = T.max(T.min(d_hi, Bands[bx, kb, 1]), d_lo)
                # the rows and columns of the block holding its visible elements (the mask's
                # rectangle: Rects; the whole block without a mask tensor)
                r0 = 0
                r1 = block_M
                c0 = 0
                c1 = block_N
                if mask is not None:
                    r0 = Rects[bx, kb, 0]
                    r1 = Rects[bx, kb, 1]
                    c0 = Rects[bx, kb, 2]
                    c1 = Rects[bx, kb, 3]
                if layout == "BHSD":
                    T.copy(K[bz, kv_head, kb * block_N:(kb + 1) * block_N, :], k)
                else:
                    T.copy(K[bz, kb * block_N:(kb + 1) * block_N, kv_head, :], k)
                T.gemm(q, k, acc_s, transpose_B=True, clear_accum=True, c_band=(d_lo, d_hi), rows=(r0, r1),
                       cols=(c0, c1))
                if blk == 1:  # a partial block: the mask's elements (-inf hides) and the rest
                    T.copy(Mask[bx * block_M:(bx + 1) * block_M, kb * block_N:(kb + 1) * block_N], msk)
                    for i, j in T.Parallel(block_M, block_N):
                        qi = bx * block_M + i
                        kj = kb * block_N + j
                        # keys past n_kv and rows past seq_q hidden too: the tile's elements past
                        # the mask's edge read as 0 (visible for an additive mask), and the bands
                        # (Bands, from the mask tensor) promise P = 0 outside them. Compared only
                        # where a block can hold such elements (decided when the kernel is built,
                        # as below: without padding or tails every listed element is inside)
                        visible = True
                        if padded or seq_kv % block_N:
                            visible = kj < n_kv
                        if seq_q % block_M:
                            visible = visible and qi < seq_q
                        if causal:
                            visible = visible and kj <= qi
                        if window is not None:
                            visible = visible and kj > qi - window
                        if mask == "bool":
                            visible = visible and msk[i, j]
                        s = acc_s[i, j] * scale
                        if mask == "additive":  # -inf hides: the score there is outside the band
                            visible = visible and msk[i, j] > neg_inf
                            s = s + msk[i, j]
                        acc_s[i, j] = T.where(visible, s, neg_inf)
                elif blk == 3:  # the mask is exactly the band met with the rectangle (band_exact):
                    # visible iff inside both, as causal's triangle, without reading the mask tile
                    # (the same `visible` as blk == 1 computes: causal and window are bands too,
                    # met in d_lo .. d_hi). The rectangle's ends met with the keys' and the
                    # queries' ends first (block scalars): six comparisons an element, not eight
                    r_end = T.min(r1, seq_q - bx * block_M)
                    c_end = T.min(c1, n_kv - kb * block_N)
                    for i, j in T.Parallel(block_M, block_N):
                        visible = j - i >= d_lo and j - i < d_hi and i >= r0 and i < r_end and j >= c0 and j < c_end
                        acc_s[i, j] = T.where(visible, acc_s[i, j] * scale, neg_inf)
                else:  # no mask tensor, or a block it shows whole: no mask work
                    for i, j in T.Parallel(block_M, block_N):
                        qi = bx * block_M + i
                        kj = kb * block_N + j
                        visible = True  # no key past n_kv in a key block: nothing to compare (decided when built)
                        if padded or seq_kv % block_N:
                            visible = kj < n_kv
                        if mask is not None and seq_q % block_M:  # rows past seq_q hidden: Bands
                            visible = visible and qi < seq_q  # (the mask's) holds rows < seq_q only
                        if causal:
                            visible = visible and kj <= qi
                        if window is not None:
                            visible = visible and kj > qi - window
                        acc_s[i, j] = T.where(visible, acc_s[i, j] * scale, neg_inf)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    if natural:
                        rescale[i] = T.exp2((m_prev[i] - m[i]) * LOG2E)
                    else:
                        rescale[i] = T.exp2(m_prev[i] - m[i])
                for i, d in T.Parallel(block_M, dim):
                    acc_o[i, d] = acc_o[i, d] * rescale[i]
                for i, j in T.Parallel(block_M, block_N):  # hidden: exp2(-inf) = 0
                    if natural:
                        acc_s[i, j] = T.exp2((acc_s[i, j] - m[i]) * LOG2E)
                    else:
                        acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * rescale[i] + row_sum[i]
                # the valid keys only (a run-time extent): v's rows past n_kv read as 0, so the
                # padding's values are never read and v needs no mask pass (the copy stays a view)
                cols = T.min(block_N, n_kv - kb * block_N)
                if layout == "BHSD":
                    T.copy(V[bz, kv_head, kb * block_N:kb * block_N + cols, :], v)
                else:
                    T.copy(V[bz, kb * block_N:kb * block_N + cols, kv_head, :], v)
                T.copy(acc_s, acc_s_cast)
                # P is 0 outside the band and outside the rectangle
                T.gemm(acc_s_cast, v, acc_o, a_band=(d_lo, d_hi), rows=(r0, r1), cols=(c0, c1))
            for i, d in T.Parallel(block_M, dim):  # a row that saw no key: 0 (a row that saw one has
                # logsum >= 1; a NaN or inf in its Q, K or V makes logsum NaN: NaN, as torch gives)
                acc_o[i, d] = T.where(logsum[i] == 0, 0, acc_o[i, d] / logsum[i])
            if layout == "BHSD":
                T.copy(acc_o, Output[bz, by, bx * block_M:(bx + 1) * block_M, :])
            else:
                T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


@tw.jit(out_idx=[-1])
def block_mask_kernel(seq_q, seq_kv, block_M=64, block_N=64, mask="bool"):
    """The block summary of a (seq_q, seq_kv) mask tensor for attention_prefill's `Blocks`: one
    int32 per (query block, key block), 0 = no element visible (the block is skipped), 2 = every
    element visible with nothing to add (bool: all True; additive: all 0; the block needs no mask
    work), 1 = otherwise (the mask is applied). Elements past the mask's edge do not count."""
    mask_dtype = "bool" if mask == "bool" else "float32"

    @T.prim_func
    def main(Mask: T.Tensor((seq_q, seq_kv), mask_dtype),
             Blocks: T.Tensor((T.ceildiv(seq_q, block_M), T.ceildiv(seq_kv, block_N)), "int32")):
        with T.Kernel(T.ceildiv(seq_q, block_M), T.ceildiv(seq_kv, block_N)) as (bx, by):
            msk = T.alloc_fragment((block_M, block_N), mask_dtype)
            seen = T.alloc_fragment((block_M, block_N), "float32")  # 1 where visible, 0 hidden or outside
            plain = T.alloc_fragment((block_M, block_N), "float32")  # 0 where visible with no work, else 1
            rows = T.alloc_fragment((block_M,), "float32")
            any_seen = T.alloc_fragment((1,), "float32")
            any_work = T.alloc_fragment((1,), "float32")
            code = T.alloc_fragment((1,), "int32")
            T.copy(Mask[bx * block_M:(bx + 1) * block_M, by * block_N:(by + 1) * block_N], msk)
            for i, j in T.Parallel(block_M, block_N):
                inside = bx * block_M + i < seq_q and by * block_N + j < seq_kv
                if mask == "bool":
                    vis = msk[i, j]
                    free = msk[i, j]
                else:  # -inf hides; 0 adds nothing
                    vis = msk[i, j] > float("-inf")
                    free = msk[i, j] == 0
                seen[i, j] = T.where(inside and vis, 1.0, 0.0)
                plain[i, j] = T.where(inside and not free, 1.0, 0.0)
            T.reduce_max(seen, rows, dim=1)
            T.reduce_max(rows, any_seen)
            T.reduce_max(plain, rows, dim=1)
            T.reduce_max(rows, any_work)
            for i in T.Parallel(1):
                code[i] = T.where(any_seen[i] == 0, 0, T.where(any_work[i] == 0, 2, 1))
            T.copy(code, Blocks[bx, by:by + 1])

    return main


def block_mask(mask, block_M=64, block_N=64, target="cpu"):
    """attention_prefill's `Blocks` for a bool or additive (float32) mask tensor, computed by
    block_mask_kernel on `target`: compute it once and reuse it across heads, layers and calls
    that share the mask (and the block sizes)."""
    mask = np.asarray(mask)
    kind = "bool" if mask.dtype == np.bool_ else "additive"
    return block_mask_kernel(*mask.shape, block_M, block_N, kind, target=target)(mask)


def block_lists(blocks):
    """The compacted per-query-block lists of a block summary (numpy; as FlexAttention's
    `kv_num_blocks` / `kv_indices`): KvIdx[qb, :n] = the key blocks kb with blocks[qb, kb] != 0 in
    increasing order (n of them; the rest of the row is 0, never read), and KvPos[qb, kb] = how many
    of them lie before key block kb (KvPos[qb, 0] = 0, KvPos[qb, -1] = n), so the non-empty blocks
    among key blocks lo .. hi are KvIdx[qb, KvPos[qb, lo]:KvPos[qb, hi]]. Both int32."""
    blocks = np.asarray(blocks)
    nz = blocks != 0
    pos = np.zeros((blocks.shape[0], blocks.shape[1] + 1), np.int32)
    np.cumsum(nz, axis=1, out=pos[:, 1:])
    order = np.argsort(~nz, axis=1, kind="stable").astype(np.int32)  # the non-empty first, in order
    idx = np.where(np.arange(blocks.shape[1]) < pos[:, -1:], order, 0).astype(np.int32)
    return pos, idx


def block_bands(mask, block_M=64, block_N=64):
    """attention_prefill's `Bands` for a bool or additive (float32) mask tensor (numpy): per
    (query block, key block) the int32 pair (lo, hi), lo <= j - i < hi the diagonals of the
    block's visible elements (i, j: row and column within the block; -inf hides); (0, 0) for a
    block with none. A sliding window's partial blocks are triangles: half their diagonals."""
    mask = np.asarray(mask)
    vis = mask if mask.dtype == np.bool_ else mask > -np.inf
    sq, skv = vis.shape
    nq, nk = -(-sq // block_M), -(-skv // block_N)
    pad = np.zeros((nq * block_M, nk * block_N), bool)
    pad[:sq, :skv] = vis
    pad = pad.reshape(nq, block_M, nk, block_N)
    d = (np.arange(block_N)[None, :] - np.arange(block_M)[:, None]).astype(np.int32)[None, :, None, :]
    lo = np.where(pad, d, block_N).min(axis=(1, 3))
    hi = np.where(pad, d + 1, 1 - block_M).max(axis=(1, 3))
    seen = pad.any(axis=(1, 3))
    return np.stack([np.where(seen, lo, 0), np.where(seen, hi, 0)], axis=-1).astype(np.int32)


def block_rects(mask, block_M=64, block_N=64):
    """attention_prefill's `Rects` for a bool or additive (float32) mask tensor (numpy): per (query
    block, key block) the int32 (r0, r1, c0, c1), r0 <= i < r1 and c0 <= j < c1 the rows and
    columns (within the block) with a visible element (-inf hides); (0, 0, 0, 0) for a block with
    none. A document's edges cut a rectangle out of the blocks they cross."""
    mask = np.asarray(mask)
    vis = mask if mask.dtype == np.bool_ else mask > -np.inf
    sq, skv = vis.shape
    nq, nk = -(-sq // block_M), -(-skv // block_N)
    pad = np.zeros((nq * block_M, nk * block_N), bool)
    pad[:sq, :skv] = vis
    pad = pad.reshape(nq, block_M, nk, block_N)
    rows, cols = pad.any(axis=3), pad.any(axis=1)  # (nq, block_M, nk), (nq, nk, block_N)
    r, c = np.arange(block_M)[None, :, None], np.arange(block_N)[None, None, :]
    out = [np.where(rows, r, block_M).min(axis=1), np.where(rows, r + 1, 0).max(axis=1),
           np.where(cols, c, block_N).min(axis=2), np.where(cols, c + 1, 0).max(axis=2)]
    seen = pad.any(axis=(1, 3))
    return np.stack([np.where(seen, x, 0) for x in out], axis=-1).astype(np.int32)


def band_exact(mask, blocks, bands, rects, block_M=64, block_N=64):
    """The block summary with each partial block (1) whose mask is exactly its band met with its
    rectangle marked 3 (numpy): every element inside both (`bands`: lo <= j - i < hi; `rects`:
    r0 <= i < r1, c0 <= j < c1) visible with nothing to add (bool True, additive 0) and every
    element outside them hidden (elements past the mask's edge do not count). attention_prefill
    computes such a block's visibility from the band and the rectangle, as it does causal's,
    instead of reading its mask tile: the same `visible` element by element, so the same result
    bit for bit. A sliding window's and a causal mask's partial blocks are such triangles, a
    document mask's blocks below the diagonal that a document's edges cut are rectangles; the
    diagonal blocks an edge cuts into two triangles are not."""
    mask, blocks, bands, rects = np.asarray(mask), np.asarray(blocks), np.asarray(bands), np.asarray(rects)
    vis = mask if mask.dtype == np.bool_ else mask > -np.inf
    free = mask if mask.dtype == np.bool_ else mask == 0
    sq, skv = vis.shape
    nq, nk = blocks.shape
    def tiles(a):
        pad = np.zeros((nq * block_M, nk * block_N), bool)
        pad[:sq, :skv] = a
        return pad.reshape(nq, block_M, nk, block_N)
    i, j = np.arange(block_M)[None, :, None, None], np.arange(block_N)[None, None, None, :]
    at = lambda x, t: x[..., t][:, None, :, None]  # noqa: E731  (nq, 1, nk, 1)
    inside = (j - i >= at(bands, 0)) & (j - i < at(bands, 1)) & (i >= at(rects, 0)) & (i < at(rects, 1)) & \
        (j >= at(rects, 2)) & (j < at(rects, 3))
    ok = np.where(inside, tiles(free), ~tiles(vis)) | ~tiles(np.ones((sq, skv), bool))
    return np.where((blocks == 1) & ok.all(axis=(1, 3)), 3, blocks).astype(np.int32)


def prefill_blocks(mask, block_M=64, block_N=64, target="cpu"):
    """attention_prefill's (Blocks, KvPos, KvIdx, Bands, Rects) for a mask tensor: its block summary
    (block_mask, on `target`, with the partial blocks that are exactly their band met with their
    rectangle marked 3: band_exact), the summary's compacted lists (block_lists), the blocks'
    bands (block_bands) and rectangles (block_rects). Compute once per mask and block sizes;
    reuse across heads, layers and calls."""
    bands, rects = block_bands(mask, block_M, block_N), block_rects(mask, block_M, block_N)
    blocks = band_exact(mask, block_mask(mask, block_M, block_N, target), bands, rects, block_M, block_N)
    return (blocks, *block_lists(blocks), bands, rects)


def dense_blocks(seq_q, seq_kv, block_M=64, block_N=64):
    """(Blocks, KvPos, KvIdx, Bands, Rects) listing every block as partial with every diagonal and
    the whole block: the mask applied everywhere, as a dense mask would be; also what to pass when
    the kernel has no mask tensor (then unread)."""
    blocks = np.ones((-(-seq_q // block_M), -(-seq_kv // block_N)), np.int32)
    bands = np.broadcast_to(np.array([1 - block_M, block_N], np.int32), blocks.shape + (2,)).copy()
    rects = np.broadcast_to(np.array([0, block_M, 0, block_N], np.int32), blocks.shape + (4,)).copy()
    return (blocks, *block_lists(blocks), bands, rects)


@tw.jit(out_idx=[-1])
def varlen_attention(total_tokens, num_seqs, heads, kv_heads, dim, max_seqlen, causal=False,
                     block_M=64, block_N=64, dtype="float32"):
    """Packed sequences: Q/K/V/Output [total_tokens, heads (kv_heads), dim]; program (bx, h, b)
    handles query rows bx * block_M .. of sequence b (nothing when past its length). Its copies take
    run-time extents (docs/language.md "Run-time extents"): it loads and stores only the rows of its
    sequence, so it runs unchanged on cpu and ascend910b."""
    # every sequence empty: tensors of size 0, no kernel (an error at the caller's line)
    tw.require(total_tokens >= 1 and max_seqlen >= 1,
               f"varlen_attention: total_tokens {total_tokens}, max_seqlen {max_seqlen}: every sequence is empty, "
               "there is nothing to compute (a kernel's tensor dimensions must be positive)",
               hint="skip the call when cu_seqlens[-1] == 0: the output is the empty np.empty((0, heads, dim), dtype)")
    group = gqa_group(heads, kv_heads)
    scale = (1.0 / dim) ** 0.5 * LOG2E
    neg_inf = float("-inf")

    @T.prim_func
    def main(Q: T.Tensor((total_tokens, heads, dim), dtype), K: T.Tensor((total_tokens, kv_heads, dim), dtype),
             V: T.Tensor((total_tokens, kv_heads, dim), dtype), CuSeqlens: T.Tensor((num_seqs + 1,), "int32"),
             Output: T.Tensor((total_tokens, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(max_seqlen, block_M), heads, num_seqs) as (bx, by, bz):
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
            kv_head = by // group
            start = CuSeqlens[bz]
            n = CuSeqlens[bz + 1] - start
            r0 = bx * block_M
            if r0 < n:
                # the rows of this sequence only (run-time extents): the rest of a tile reads as 0
                rows = T.min(block_M, n - r0)
                T.copy(Q[start + r0:start + r0 + rows, by, :], q)
                T.fill(acc_o, 0)
                T.fill(logsum, 0)
                T.fill(m, -1.0e30)
                hi = T.ceildiv(n, block_N)
                if causal:
                    hi = T.min(hi, T.ceildiv(r0 + block_M, block_N))
                for kb in T.serial(hi):
                    k0 = kb * block_N
                    cols = T.min(block_N, n - k0)  # the next sequence's keys are never read
                    T.copy(K[start + k0:start + k0 + cols, kv_head, :], k)
                    T.gemm(q, k, acc_s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(block_M, block_N):
                        visible = k0 + j < n  # the zero rows of k past the sequence score 0: hidden
                        if causal:
                            visible = visible and k0 + j <= r0 + i
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
                    T.copy(V[start + k0:start + k0 + cols, kv_head, :], v)  # rows past cols: zeros
                    T.copy(acc_s, acc_s_cast)
                    T.gemm(acc_s_cast, v, acc_o)
                for i, d in T.Parallel(block_M, dim):
                    acc_o[i, d] = acc_o[i, d] / logsum[i]
                T.copy(acc_o, Output[start + r0:start + r0 + rows, by, :])  # rows of this sequence only

    return main


def visibility(seq_q, seq_kv, causal=False, window=None, mask=None, kv_len=None):
    """(seq_q, seq_kv) bool: which keys each query sees (mask: a bool array, or None)."""
    i, j = np.arange(seq_q)[:, None], np.arange(seq_kv)[None, :]
    vis = np.ones((seq_q, seq_kv), bool)
    if causal:
        vis &= j <= i
    if window is not None:
        vis &= j > i - window
    if mask is not None:
        vis &= mask
    if kv_len is not None:
        vis &= j < kv_len
    return vis


def reference(q, k, v, vis=None, additive=None, layout="BHSD"):
    """float64 attention with GQA; vis: bool (seq_q, seq_kv) or (batch, seq_q, seq_kv); rows with
    no visible key give 0."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    if layout == "BSHD":
        q, k, v = (np.swapaxes(x, 1, 2) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if additive is not None:
        s = s + additive
    if vis is not None:
        vis = vis[:, None] if vis.ndim == 3 else vis
        s = np.where(vis, s, -np.inf)
    top = s.max(axis=-1, keepdims=True, initial=-np.inf)  # an empty sequence: no key
    w = np.exp(s - np.where(np.isfinite(top), top, 0))
    tot = w.sum(axis=-1, keepdims=True)
    o = np.where(tot > 0, (w / np.where(tot > 0, tot, 1)) @ v, 0)
    return np.swapaxes(o, 1, 2) if layout == "BSHD" else o


def inputs(B, H, KVH, Sq, Skv, D, layout="BHSD", dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    shp = (lambda s, h: (B, h, s, D)) if layout == "BHSD" else (lambda s, h: (B, s, h, D))
    return (randn(shp(Sq, H), dtype, seed=rng), randn(shp(Skv, KVH), dtype, seed=rng),
            randn(shp(Skv, KVH), dtype, seed=rng), rng)


def prefill_args(B, H, KVH, Sq, Skv, D, layout="BHSD", mask=None, padded=False, dtype="float32", seed=0,
                 target="cpu", summary=True, block_M=64, block_N=64):
    """Seeded inputs of attention_prefill (Q, K, V, Mask, Blocks, KvPos, KvIdx, Bands, Rects, KvLen): a
    random mask (bool: 70% visible; additive: 20% -inf), its block tables for these block sizes
    (summary=False: dense_blocks), random lengths 1 .. Skv when padded."""
    q, k, v, rng = inputs(B, H, KVH, Sq, Skv, D, layout, dtype, seed)
    m = rng.random((Sq, Skv)) < 0.7 if mask == "bool" else \
        np.where(rng.random((Sq, Skv)) < 0.2, -np.inf, rng.standard_normal((Sq, Skv))).astype(np.float32) \
        if mask == "additive" else np.zeros((Sq, Skv), np.float32)
    lens = rng.integers(1, Skv + 1, size=B).astype(np.int32) if padded else np.full(B, Skv, np.int32)
    tables = prefill_blocks(m, block_M, block_N, target) if summary and mask is not None else \
        dense_blocks(Sq, Skv, block_M, block_N)
    return (q, k, v, m, *tables, lens)


def tune_inputs(kernel, batch, heads, kv_heads, seq_q, seq_kv, dim, layout, mask, padded, dtype, block_M, block_N,
                **_):
    """`@tw.autotune(..., inputs=tune_inputs)` over attention_prefill: valid inputs for each
    configuration (the block tables depend on block_M and block_N; random int32 tables would be
    read as indices out of range)."""
    return prefill_args(batch, heads, kv_heads, seq_q, seq_kv, dim, layout, mask, padded, dtype,
                        target=kernel.target, block_M=block_M, block_N=block_N)


def run(B, H, KVH, Sq, Skv, D, layout="BHSD", causal=False, window=None, mask=None, padded=False,
        dtype="float32", seed=0, target="cpu", summary=True, **blocks):
    """Inputs, the kernel's output and the float64 reference of one configuration; summary=False
    passes dense_blocks (every block computed with the mask applied)."""
    kern = attention_prefill(B, H, KVH, Sq, Skv, D, layout, causal, window, mask, padded, dtype=dtype,
                             target=target, **blocks)
    args = prefill_args(B, H, KVH, Sq, Skv, D, layout, mask, padded, dtype, seed, target, summary, **blocks)
    q, k, v, m, lens = args[0], args[1], args[2], args[3], args[-1]
    out = kern(*args)
    vis = np.stack([visibility(Sq, Skv, causal, window, m if mask == "bool" else None, lens[b]) for b in range(B)])
    return out, reference(q, k, v, vis, m.astype(np.float64) if mask == "additive" else None, layout)


def run_varlen(seqlens, H, KVH, D, causal=False, dtype="float32", seed=0, target="cpu", **blocks):
    rng = np.random.default_rng(seed)
    cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
    total = int(cu[-1])
    q = randn((total, H, D), dtype, seed=rng)
    k, v = randn((total, KVH, D), dtype, seed=rng), randn((total, KVH, D), dtype, seed=rng)
    kern = varlen_attention(total, len(seqlens), H, KVH, D, max(seqlens), causal, dtype=dtype, target=target, **blocks)
    out = kern(q, k, v, cu)
    ref = np.zeros((total, H, D))
    for b, n in enumerate(seqlens):
        sl = slice(cu[b], cu[b + 1])
        seq = [x[sl].transpose(1, 0, 2)[None] for x in (q, k, v)]
        ref[sl] = reference(*seq, visibility(n, n, causal))[0].transpose(1, 0, 2)
    return out, ref


def main(argv):
    B, H, KVH, S, D = (int(x) for x in argv[:5]) if len(argv) >= 5 else (2, 4, 2, 200, 64)
    cases = [dict(causal=True), dict(causal=True, window=50), dict(mask="bool"), dict(mask="additive"),
             dict(padded=True, layout="BSHD"), dict(causal=True, dtype="float16")]
    ok = [report(f"prefill B={B} H={H}/{KVH} S={S} D={D} {c}", *run(B, H, KVH, S, S, D, **c)) for c in cases]
    ok.append(report(f"varlen {[S, 1, S // 3]} causal", *run_varlen([S, 1, S // 3], H, KVH, D, causal=True)))
    finish(all(ok))


if __name__ == "__main__":
    main(sys.argv[1:])
