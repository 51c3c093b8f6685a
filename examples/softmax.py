"""Row softmax: Y[i, :] = exp(X[i, :] - max) / sum(exp(X[i, :] - max)). Any number of rows (a
symbolic dimension), rows of any length (a compile-time constant, so one tile holds a row block).

Usage: python examples/softmax.py [M N]
"""
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report


@tw.jit(out_idx=[-1])
def softmax(N, block_M=8, dtype="float32"):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


def reference(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def check(M, N, dtype="float32"):
    rng = np.random.default_rng(0)
    x = randn((M, N), dtype, scale=3.0, seed=rng)
    y = softmax(N, dtype=dtype)(x)
    return report(f"softmax {M}x{N} {dtype}", y, reference(x), atol=1e-6 if dtype == "float32" else None)


def main(argv):
    M, N = (int(x) for x in argv[:2]) if len(argv) >= 2 else (1000, 4097)
    finish(all([check(M, N), check(M, 1), check(37, N, "float16"), check(37, 300, "bfloat16")]))


if __name__ == "__main__":
    main(sys.argv[1:])
