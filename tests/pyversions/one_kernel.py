"""One kernel on cpu and on ascend910b: the check tests/pyversions/run.sh runs per Python version."""
import sys, numpy as np, tilewright as tw, tilewright.language as T
@tw.jit(out_idx=[-1])
def add_one(N, block=256):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            t = T.alloc_fragment((block,), "float32")
            T.copy(A[bx * block], t)
            for i in T.Parallel(block):
                t[i] = t[i] + 1.0
            T.copy(t, B[bx * block])
    return main
a = np.arange(1000, dtype=np.float32)
tw.testing.assert_close(add_one(1000)(a), a + 1)
tw.testing.assert_close(add_one(1000, target="ascend910b")(a), a + 1)
print("PYTHON", sys.version.split()[0], "OK: import + one kernel on cpu and ascend910b")
