"""Porting from tilelang: get_kernel_source(), get_profiler().do_bench() and T.use_swizzle."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tw_test_util import load_example

seed_matmul = load_example("seed_matmul")


def test_get_kernel_source_and_profiler():
    k = seed_matmul.build(64, 64, 64)
    assert k.get_kernel_source() == k.get_source()
    assert k.get_profiler().do_bench(rep=5) > 0
    a, b = k.example_inputs()
    assert k.get_profiler().do_bench(a, b, rep=5, return_mode="min") > 0
    with pytest.raises(tw.TilewrightError, match="no arguments"):
        k.get_profiler(tensor_supply_type=1)


@tw.jit(out_idx=[-1])
def swizzled(M, N, order="row"):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 16)) as (bx, by):
            T.use_swizzle(panel_size=4, order=order)
            t = T.alloc_fragment((16, 16), "float32")
            T.copy(A[by * 16, bx * 16], t)
            for i, j in T.Parallel(16, 16):
                t[i, j] = t[i, j] + 1.0
            T.copy(t, B[by * 16, bx * 16])
    return main


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_use_swizzle_is_accepted_and_changes_nothing(target):
    x = tw.testing.randn((64, 48), seed=2)
    tw.testing.assert_close(swizzled(64, 48, target=target)(x), x + 1)


def test_use_swizzle_bad_order_is_an_error():
    with pytest.raises(tw.TilewrightError, match="order must be"):
        swizzled(64, 48, order="diagonal")
