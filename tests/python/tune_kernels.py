"""A @tw.autotune kernel importable by name (the sweep's worker processes import it)."""
import tilewright as tw
import tilewright.language as T

CONFIGS = [tw.Config(block=64), tw.Config(block=256), tw.Config(block=1 << 20), tw.Config(block=1024)]


@tw.autotune(configs=CONFIGS, key=["n"])
@tw.jit(out_idx=[-1])
def add_one(n, block=256):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            t = T.alloc_fragment((block,), "float32")
            T.copy(A[bx * block], t)
            for i in T.Parallel(block):
                t[i] = t[i] + 1.0
            T.copy(t, B[bx * block])
    return main


@tw.autotune(configs=[tw.Config(block_M=64, block_N=64), tw.Config(block_M=128, block_N=256),
                      tw.Config(block_M=512, block_N=512)], key=["M", "N", "K"])
@tw.jit(out_idx=[-1])
def matmul(M, N, K, block_M=64, block_N=64, block_K=64, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * block_M, bx * block_N])
    return main
