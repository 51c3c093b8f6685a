"""RMSNorm: Y = X / sqrt(mean(X**2, axis=1) + eps) * W.

Usage: python examples/rms_norm.py [M N]
"""
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report


@tw.jit(out_idx=[-1])
def rms_norm(N, eps=1e-6, block_M=8, dtype="float32"):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * ss[i] * w[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


def reference(x, w, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w.astype(np.float64)


def check(M, N, dtype="float32"):
    rng = np.random.default_rng(0)
    x = randn((M, N), dtype, seed=rng)
    w = randn((N,), dtype, seed=rng)
    y = rms_norm(N, dtype=dtype)(x, w)
    return report(f"rms_norm {M}x{N} {dtype}", y, reference(x, w))


def main(argv):
    M, N = (int(x) for x in argv[:2]) if len(argv) >= 2 else (1000, 4097)
    finish(all([check(M, N), check(3, 1), check(37, 768, "float16"), check(37, 768, "bfloat16")]))


if __name__ == "__main__":
    main(sys.argv[1:])
