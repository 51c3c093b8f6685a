"""Kernels the benchmark needs beyond examples/: a GEMM whose output dtype differs from its input
dtype (fp16/bf16 inputs -> fp32, int8 -> int32) and a tiny kernel for the per-call overhead.

The fp32 GEMM, flash attention, softmax and the norms are the examples' own kernels
(examples/gemm.py, flash_attention.py, ...), imported by bench/run.py.
"""
import tilewright as tw
import tilewright.language as T


@tw.jit(out_idx=[-1])
def matmul_mixed(M, N, K, block_M=128, block_N=128, block_K=64, in_dtype="float16", out_dtype="float32",
                 accum_dtype="float32"):
    """C[M, N] (out_dtype) = A[M, K] @ B[K, N] (in_dtype), accumulated in accum_dtype: the same
    structure as examples/gemm.py, with a wider output."""

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tw.jit(out_idx=[-1])
def tiny_add(n=16):
    """B = A + 1 on n floats, one block: the kernel whose call cost is almost all overhead."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                B[i] = A[i] + 1.0

    return main
