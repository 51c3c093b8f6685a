"""Flash attention forward (online softmax), causal and non-causal, head dim 64 or 128:
O = softmax(Q K^T / sqrt(D) [+ causal mask]) V, never materialising the S x S score matrix.

Usage: python examples/flash_attention.py [B H S D]
"""
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report


@tw.jit(out_idx=[3])
def flash_attention(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, dtype="float32",
                    narrow_handoffs=False):
    """narrow_handoffs: the scores S = Q K^T and each key block's P V are copied into `dtype` tiles
    right after their gemms (T.copy(acc_s, acc_s16)), so the softmax reads scores rounded to dtype
    and P V is rounded before it is added: on ascend910b each Cube -> Vector hand-off then moves
    16-bit values (Fixpipe converts). Faster there, less exact; a float16 score above 65504 is inf
    (then NaN in the softmax). The default keeps them float32."""
    scale = (1.0 / dim) ** 0.5 * 1.4426950408889634  # 1/sqrt(D), in base 2 (exp2 below)
    shape = (batch, heads, seq_len, dim)
    neg_inf = -1.0e30  # finite "minus infinity": fully masked rows stay NaN-free
    masked = is_causal or seq_len % block_N != 0  # some score tile has keys to mask

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), "float32")
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            if narrow_handoffs:
                acc_s16 = T.alloc_fragment((block_M, block_N), dtype)  # the scores, rounded by the program
                s_tile = T.alloc_fragment((block_M, block_N), "float32")  # the softmax's tile
                acc_pv = T.alloc_fragment((block_M, dim), "float32")
                acc_pv16 = T.alloc_fragment((block_M, dim), dtype)  # P V, rounded by the program
            else:
                s_tile = acc_s
            acc_o = T.alloc_fragment((block_M, dim), "float32")
            scores_max = T.alloc_fragment((block_M,), "float32")
            scores_max_prev = T.alloc_fragment((block_M,), "float32")
            scores_scale = T.alloc_fragment((block_M,), "float32")
            scores_sum = T.alloc_fragment((block_M,), "float32")
            logsum = T.alloc_fragment((block_M,), "float32")
            if not masked:
                row_max = T.alloc_fragment((block_M,), "float32")

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, neg_inf)
            loop_range = T.min(T.ceildiv((bx + 1) * block_M, block_N), T.ceildiv(seq_len, block_N)) \
                if is_causal else T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(loop_range, num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                # causal: the scores above the diagonal (key > query) are not needed (the mask pass
                # hides them) and P is 0 there, so both gemms take the band of visible diagonals
                # (docs/language.md "Bands"): the diagonal blocks' hidden parts are skipped on cpu
                band = (1 - block_M, bx * block_M - k * block_N + 1) if is_causal else None
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, clear_accum=True, c_band=band)
                if narrow_handoffs:
                    T.copy(acc_s, acc_s16)  # the opt-in: a 16-bit hand-off on Ascend
                    T.copy(acc_s16, s_tile)
                T.copy(scores_max, scores_max_prev)
                if masked:
                    # the mask map right before the row max (and exp2 right before the row sum):
                    # the cpu target computes each pair as one pass over the score tile's rows
                    for i, j in T.Parallel(block_M, block_N):
                        if is_causal:
                            s_tile[i, j] = T.where(bx * block_M + i >= k * block_N + j, s_tile[i, j] * scale, neg_inf)
                        else:
                            s_tile[i, j] = T.where(k * block_N + j < seq_len, s_tile[i, j] * scale, neg_inf)
                    T.reduce_max(s_tile, scores_max, dim=1, clear=False)
                else:
                    # no key masked: the row max of the raw scores, scaled (on the cpu target a pass
                    # that only reads the tile), and the scale applied in exp2's argument
                    T.reduce_max(s_tile, row_max, dim=1)
                    for i in T.Parallel(block_M):
                        scores_max[i] = T.max(scores_max[i], row_max[i] * scale)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] - scores_max[i])
                if not narrow_handoffs:
                    for i, j in T.Parallel(block_M, dim):
                        acc_o[i, j] = acc_o[i, j] * scores_scale[i]
                for i, j in T.Parallel(block_M, block_N):
                    if masked:
                        s_tile[i, j] = T.exp2(s_tile[i, j] - scores_max[i])
                    else:
                        s_tile[i, j] = T.exp2(s_tile[i, j] * scale - scores_max[i])
                T.reduce_sum(s_tile, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
                T.copy(s_tile, acc_s_cast)
                if narrow_handoffs:
                    T.gemm(acc_s_cast, V_shared, acc_pv, clear_accum=True, a_band=band)
                    T.copy(acc_pv, acc_pv16)
                    for i, j in T.Parallel(block_M, dim):
                        acc_o[i, j] = acc_o[i, j] * scores_scale[i] + acc_pv16[i, j]
                else:
                    T.gemm(acc_s_cast, V_shared, acc_o, a_band=band)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] = acc_o[i, j] / logsum[i]
            T.copy(acc_o, Output[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


def reference(q, k, v, is_causal):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def check(B, H, S, D, is_causal, dtype="float32"):
    rng = np.random.default_rng(0)
    q, k, v = (randn((B, H, S, D), dtype, seed=rng) for _ in range(3))
    o = flash_attention(B, H, S, D, is_causal, dtype=dtype)(q, k, v)
    return report(f"flash_attention B={B} H={H} S={S} D={D} causal={is_causal} {dtype}", o, reference(q, k, v, is_causal), atol=2e-4 if dtype == "float32" else None)


def main(argv):
    B, H, S, D = (int(x) for x in argv[:4]) if len(argv) >= 4 else (1, 2, 300, 64)
    cases = [(B, H, S, D, False), (B, H, S, D, True), (1, 2, 257, 128, False), (1, 2, 257, 128, True),
             (1, 2, 256, 128, False), (1, 1, 130, 64, True, "float16"), (1, 1, 128, 64, False, "float16")]
    finish(all([check(*c) for c in cases]))


if __name__ == "__main__":
    main(sys.argv[1:])
