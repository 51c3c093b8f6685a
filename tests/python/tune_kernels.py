"""A @tw.autotune kernel importable by name (the sweep's worker processes import it)."""
import os
import sys

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples"))
import gemm  # noqa: E402

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


# examples/gemm.py's matmul factory, tuned (worker processes import `gemm` by name: examples/ is
# on sys.path, which spawned workers inherit)
matmul = tw.autotune(configs=[tw.Config(block_M=64, block_N=64), tw.Config(block_M=128, block_N=256),
                              tw.Config(block_M=512, block_N=512)], key=["M", "N", "K"])(gemm.matmul)
