"""LayerNorm over rows: Y = (X - mean) / sqrt(var + eps) * W + B.

Usage: python examples/layer_norm.py [M N]
"""
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report


@tw.jit(out_idx=[-1])
def layer_norm(N, eps=1e-5, block_M=8, dtype="float32"):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            tmp = T.alloc_fragment((block_M, N), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            var = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                tmp[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
            T.reduce_sum(tmp, var, dim=1)
            for i in T.Parallel(block_M):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = (x[i, j] - mean[i]) * var[i] * W[j] + B[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


def reference(x, w, b, eps=1e-5):
    x = x.astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w.astype(np.float64) + b.astype(np.float64)


def check(M, N, dtype="float32"):
    rng = np.random.default_rng(0)
    x = randn((M, N), dtype, scale=2.0, seed=rng)
    w = randn((N,), dtype, seed=rng)
    b = randn((N,), dtype, seed=rng)
    y = layer_norm(N, dtype=dtype)(x, w, b)
    return report(f"layer_norm {M}x{N} {dtype}", y, reference(x, w, b))


def main(argv):
    M, N = (int(x) for x in argv[:2]) if len(argv) >= 2 else (1000, 4097)
    finish(all([check(M, N), check(5, 2), check(37, 768, "float16"), check(37, 768, "bfloat16")]))


if __name__ == "__main__":
    main(sys.argv[1:])
