"""Rotary position embedding (RoPE), both conventions, and a QK projection with RoPE fused into
its epilogue.

    half-split (GPT-NeoX, Llama in Hugging Face):  x = [x1 | x2] (halves of head_dim D)
        out = [x1 cos - x2 sin | x2 cos + x1 sin]
    interleaved (GPT-J, Llama's original code):     pairs (x[2i], x[2i+1])
        out[2i] = x[2i] cos_i - x[2i+1] sin_i,  out[2i+1] = x[2i+1] cos_i + x[2i] sin_i

The rotation is computed into a float32 tile and converted to the output dtype by the copy out:
on ascend910b a map's write must start on a 32 B block, and the second half's start (D/2
elements in) is one for D a multiple of 16 in float32, while a 16-bit tile would need D a
multiple of 32 (head dims 80 and 112, Phi-2 and StableLM, are not).

with cos_i / sin_i = cos / sin(pos * base^(-2i/D)), i < D/2, read from tables Cos/Sin
[max_pos, D/2] at each token's position (positions [tokens] int32: any order, as in decode
batches). x is [tokens, heads, D]. `qk_rope_proj` computes X @ W (W [hidden, heads * D]) for a
block of tokens and one head on the matrix unit and rotates the accumulator before storing it:
the projection's output never goes through memory unrotated.

Usage: python examples/rope.py [tokens heads D]
"""
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report


def _pairs(dim):
    """RoPE rotates pairs of columns: an error at the factory's caller for an odd head dim (the
    last column would be left unwritten)."""
    tw.require(dim % 2 == 0, f"RoPE over a head dim of {dim}: the rotation pairs columns, so the dim must be even",
               hint="rotate an even number of columns: for a partial rotary dim, rotate the first rot columns "
               "(even) and copy the rest unchanged", skip=1)


@tw.jit(out_idx=[-1])
def rope(tokens, heads, dim, max_pos, interleaved=False, block_M=32, dtype="float32"):
    _pairs(dim)
    half = dim // 2

    @T.prim_func
    def main(X: T.Tensor((tokens, heads, dim), dtype), Cos: T.Tensor((max_pos, half), "float32"),
             Sin: T.Tensor((max_pos, half), "float32"), Pos: T.Tensor((tokens,), "int32"),
             Y: T.Tensor((tokens, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(tokens, block_M), heads) as (bx, h):
            x = T.alloc_fragment((block_M, dim), "float32")
            y = T.alloc_fragment((block_M, dim), "float32")  # converted to dtype by the copy out
            c = T.alloc_fragment((block_M, half), "float32")
            s = T.alloc_fragment((block_M, half), "float32")
            T.copy(X[bx * block_M:(bx + 1) * block_M, h, :], x)
            for r in T.serial(block_M):  # each token's row of the tables, by its position
                if bx * block_M + r < tokens:
                    p = Pos[bx * block_M + r]
                    T.copy(Cos[p, :], c[r, :])
                    T.copy(Sin[p, :], s[r, :])
            for i, j in T.Parallel(block_M, half):
                if interleaved:
                    a = x[i, 2 * j]
                    b = x[i, 2 * j + 1]
                    y[i, 2 * j] = a * c[i, j] - b * s[i, j]
                    y[i, 2 * j + 1] = b * c[i, j] + a * s[i, j]
                else:
                    a = x[i, j]
                    b = x[i, j + half]
                    y[i, j] = a * c[i, j] - b * s[i, j]
                    y[i, j + half] = b * c[i, j] + a * s[i, j]
            T.copy(y, Y[bx * block_M:(bx + 1) * block_M, h, :])

    return main


@tw.jit(out_idx=[-1])
def qk_rope_proj(tokens, hidden, heads, dim, max_pos, interleaved=False, block_M=32, block_K=64, dtype="float32"):
    """Out[t, h, :] = rope(X[t, :] @ W[:, h * dim:(h + 1) * dim]) at position Pos[t]."""
    _pairs(dim)
    half = dim // 2

    @T.prim_func
    def main(X: T.Tensor((tokens, hidden), dtype), W: T.Tensor((hidden, heads * dim), dtype),
             Cos: T.Tensor((max_pos, half), "float32"), Sin: T.Tensor((max_pos, half), "float32"),
             Pos: T.Tensor((tokens,), "int32"), Out: T.Tensor((tokens, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(tokens, block_M), heads) as (bx, h):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            w_s = T.alloc_shared((block_K, dim), dtype)
            acc = T.alloc_fragment((block_M, dim), "float32")
            y = T.alloc_fragment((block_M, dim), "float32")  # converted to dtype by the copy out
            c = T.alloc_fragment((block_M, half), "float32")
            s = T.alloc_fragment((block_M, half), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(hidden, block_K), num_stages=2):
                T.copy(X[bx * block_M, k * block_K], a_s)
                T.copy(W[k * block_K, h * dim], w_s)
                T.gemm(a_s, w_s, acc)
            for r in T.serial(block_M):
                if bx * block_M + r < tokens:
                    p = Pos[bx * block_M + r]
                    T.copy(Cos[p, :], c[r, :])
                    T.copy(Sin[p, :], s[r, :])
            for i, j in T.Parallel(block_M, half):  # the epilogue: rotate the accumulator
                if interleaved:
                    a = acc[i, 2 * j]
                    b = acc[i, 2 * j + 1]
                    y[i, 2 * j] = a * c[i, j] - b * s[i, j]
                    y[i, 2 * j + 1] = b * c[i, j] + a * s[i, j]
                else:
                    a = acc[i, j]
                    b = acc[i, j + half]
                    y[i, j] = a * c[i, j] - b * s[i, j]
                    y[i, j + half] = b * c[i, j] + a * s[i, j]
            T.copy(y, Out[bx * block_M:(bx + 1) * block_M, h, :])

    return main


def tables(max_pos, dim, base=10000.0):
    """cos / sin tables [max_pos, dim/2] (float32), computed in float64."""
    inv = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def reference(x, cos, sin, pos, interleaved=False):
    """float64 RoPE of x [tokens, heads, D] at positions pos."""
    x = x.astype(np.float64)
    c = cos.astype(np.float64)[pos][:, None, :]
    s = sin.astype(np.float64)[pos][:, None, :]
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, b * c + a * s
        return out
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def check(tokens, heads, dim, interleaved, dtype="float32", max_pos=4096, seed=0):
    rng = np.random.default_rng(seed)
    cos, sin = tables(max_pos, dim)
    pos = rng.integers(0, max_pos, size=tokens).astype(np.int32)
    x = randn((tokens, heads, dim), dtype, seed=rng)
    y = rope(tokens, heads, dim, max_pos, interleaved, dtype=dtype)(x, cos, sin, pos)
    kind = "interleaved" if interleaved else "half-split"
    ok = report(f"rope {kind} tokens={tokens} heads={heads} D={dim} {dtype}", y, reference(x, cos, sin, pos, interleaved))
    hidden = 96
    xs = randn((tokens, hidden), dtype, seed=rng)
    w = randn((hidden, heads * dim), dtype, seed=rng, scale=hidden ** -0.5)
    out = qk_rope_proj(tokens, hidden, heads, dim, max_pos, interleaved, dtype=dtype)(xs, w, cos, sin, pos)
    proj = (xs.astype(np.float64) @ w.astype(np.float64)).reshape(tokens, heads, dim)
    return report(f"qk projection + rope {kind} {dtype}", out, reference(proj, cos, sin, pos, interleaved)) and ok


def main(argv):
    tokens, heads, dim = (int(x) for x in argv[:3]) if len(argv) >= 3 else (77, 4, 64)
    finish(all([check(tokens, heads, dim, il) for il in (False, True)] + [check(tokens, heads, dim, True, "bfloat16")]))


if __name__ == "__main__":
    main(sys.argv[1:])
