"""GEMM in the explicit style: C = A @ B with fp32 accumulation, fp16 and fp32 inputs.

Usage: python examples/gemm.py [M N K]
"""
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

from tilewright.testing import finish, randn, report


@tw.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=64, dtype="float16", accum_dtype="float32", num_stages=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tw.jit
def matmul_splitk(M, N, K, split_k, block_M=128, block_N=256, block_K=64, dtype="float16", num_stages=2,
                  trans_A=False):
    """Split-K GEMM for a large K and few output tiles: C (float32, zeroed by the caller) += A @ B.
    K is cut into split_k parts of k_part (a multiple of block_K); program (n block, m block, part)
    multiplies its part and adds the float32 partial into C with T.atomic_add. The parts add in any
    order: results can differ in the last bits between runs (docs/language.md "T.atomic_add").
    trans_A: A is given as its transpose, shape (K, M) (rows of M elements: on Ascend a GM->L1 copy
    reads rows at most 65535 elements apart, so an (M, K) A needs K <= 65535)."""
    k_part = -(-(-(-K // split_k)) // block_K) * block_K  # ceil(ceil(K / split_k) / block_K) * block_K
    a_shape, a_tile = ((K, M), (block_K, block_M)) if trans_A else ((M, K), (block_M, block_K))

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k) as (bx, by, bz):
            A_shared = T.alloc_shared(a_tile, dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(k_part // block_K, num_stages=num_stages):
                if trans_A:
                    T.copy(A[bz * k_part + k * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, bz * k_part + k * block_K], A_shared)
                T.copy(B[bz * k_part + k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_A=trans_A)
            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return main


def check(M, N, K, dtype, **blocks):
    rng = np.random.default_rng(0)
    a = randn((M, K), dtype, seed=rng)
    b = randn((K, N), dtype, seed=rng)
    c = matmul(M, N, K, dtype=dtype, **blocks)(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # the reference is exact; ours rounds once to the output dtype and accumulates in fp32
    return report(f"gemm {M}x{N}x{K} {dtype}", c, ref, atol=1e-5 * K, rtol=2e-3 if dtype != "float32" else 1e-5)


def check_splitk(M, N, K, split_k, dtype="float16", **blocks):
    rng = np.random.default_rng(1)
    a = randn((M, K), dtype, seed=rng)
    b = randn((K, N), dtype, seed=rng)
    c = np.zeros((M, N), np.float32)
    matmul_splitk(M, N, K, split_k, dtype=dtype, **blocks)(a, b, c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return report(f"split-K gemm {M}x{N}x{K} in {split_k} parts {dtype}", c, ref, atol=1e-5 * K, rtol=1e-5)


def main(argv):
    M, N, K = (int(x) for x in argv[:3]) if len(argv) >= 3 else (1000, 777, 513)
    ok = all([check(M, N, K, "float32"), check(M, N, K, "float16"), check_splitk(M, N, 4 * K, 5)])
    finish(ok)


if __name__ == "__main__":
    main(sys.argv[1:])
