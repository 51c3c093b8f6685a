"""A GEMM with a fused bias + GELU epilogue: Y = gelu(X @ W + bias), GELU in its exact erf form
0.5 * v * (1 + erf(v / sqrt(2))), computed on the fp32 accumulator before the single store.

Usage: python examples/gelu_bias.py [M N K]
"""
import math
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report


@tw.jit(out_idx=[-1])
def gemm_bias_gelu(M, N, K, block_M=64, block_N=64, block_K=64, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, K), dtype), W: T.Tensor((K, N), dtype), bias: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            x_s = T.alloc_shared((block_M, block_K), dtype)
            w_s = T.alloc_shared((block_K, block_N), dtype)
            b_s = T.alloc_fragment((block_N,), "float32")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[by * block_M, k * block_K], x_s)
                T.copy(W[k * block_K, bx * block_N], w_s)
                T.gemm(x_s, w_s, acc)
            T.copy(bias[bx * block_N], b_s)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = T.gelu(acc[i, j] + b_s[j])
            T.copy(acc, Y[by * block_M, bx * block_N])

    return main


def reference(x, w, b):
    v = x.astype(np.float64) @ w.astype(np.float64) + b.astype(np.float64)
    erf = np.vectorize(math.erf)
    return 0.5 * v * (1.0 + erf(v / math.sqrt(2.0)))


def check(M, N, K, dtype="float32"):
    rng = np.random.default_rng(0)
    x = randn((M, K), dtype, scale=0.2, seed=rng)
    w = randn((K, N), dtype, scale=0.2, seed=rng)
    b = randn((N,), dtype, seed=rng)
    y = gemm_bias_gelu(M, N, K, dtype=dtype)(x, w, b)
    return report(f"gemm+bias+gelu {M}x{N}x{K} {dtype}", y, reference(x, w, b))


def main(argv):
    M, N, K = (int(x) for x in argv[:3]) if len(argv) >= 3 else (300, 200, 100)
    finish(all([check(M, N, K), check(M, N, K, "float16"), check(M, N, K, "bfloat16")]))


if __name__ == "__main__":
    main(sys.argv[1:])
