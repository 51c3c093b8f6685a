"""Vector ops on UB rows more than 8160 B (255 blocks of 32 B) apart: a window of a wider tile,
whose rows no uint8 repeat stride reaches (docs/ascend.md, "Vector calls"). select_vector_calls
goes along each row instead (a level-2 call per row; row broadcast and row reduce with their
repeats along the row), and Brcb over more than 2040 rows is issued in calls of 2040. Expert-mode
kernels in the 910B simulator against float64 numpy, and the examples' softmax / rms_norm /
layer_norm (automatic pipeline) against numpy and the cpu target, all with zero checker reports.
(Each of these stopped with "the repeat stride ... is N, but the AscendC field is uint8" before.)"""
import importlib
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, randn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples"))


def wide_kernel(R, W, C, dtype):
    """x = X (R x C, rows of C elements: the reductions and broadcasts of whole tiles keep them 2-D),
    z = Z (R x W); y = x * 2; m, s = row max, row sum of y; y = y - m + s (row broadcasts); on the
    window z[:, :C] of the wider tile: z = z + y (strided operands), z = z * m (a strided row
    broadcast)."""
    @T.prim_func
    def main(X: T.Tensor((R, C), dtype), Z: T.Tensor((R, W), dtype), Y: T.Tensor((R, C), dtype),
             ZO: T.Tensor((R, W), dtype), S: T.Tensor((R,), dtype), M: T.Tensor((R,), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((R, C), dtype)
            z = T.alloc_UB((R, W), dtype)
            s = T.alloc_UB((R,), dtype)
            m = T.alloc_UB((R,), dtype)
            with T.Scope("V"):
                if vid == 0:
                    T.copy(X[0, 0], x)
                    T.copy(Z[0, 0], z)
                    T.set_flag("MTE2", "V", 0)
                    T.wait_flag("MTE2", "V", 0)
                    T.mul(x, x, 2.0)
                    T.pipe_barrier("V")
                    T.reduce_max(x, m, dim=1)
                    T.reduce_sum(x, s, dim=1)
                    T.pipe_barrier("V")
                    T.sub(x, x, m[:, None])
                    T.pipe_barrier("V")
                    T.add(x, x, s[:, None])
                    T.pipe_barrier("V")
                    T.add(z[0:R, 0:C], z[0:R, 0:C], x)
                    T.pipe_barrier("V")
                    T.mul(z[0:R, 0:C], z[0:R, 0:C], m[:, None])
                    T.set_flag("V", "MTE3", 0)
                    T.wait_flag("V", "MTE3", 0)
                    T.copy(x, Y[0, 0])
                    T.copy(z, ZO[0, 0])
                    T.copy(s, S[0])
                    T.copy(m, M[0])
    return main


@pytest.mark.parametrize("R,W,C,dtype", [
    (4, 4096, 3000, "float32"),    # rows 16384 B apart; 46 whole repeats + a tail of 56 per row
    (3, 3072, 2113, "float32"),    # an odd number (33) of whole repeats: float Max's aligned partials
    (2, 20480, 20000, "float16"),  # 156 whole repeats + 32; 157 partials: the partials in two stages
])
def test_wide_rows(R, W, C, dtype):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (R, C)).astype(dtype)
    z = rng.uniform(-1, 1, (R, W)).astype(dtype)
    k = tw.compile(wide_kernel(R, W, C, dtype), out_idx=[2, 3, 4, 5], target="ascend910b")
    p = k.profile(x, z)
    assert p["reports"] == []
    y, zo, s, m = (o.astype(np.float64) for o in p.outputs)
    x2 = x.astype(np.float64) * 2
    ref_m, ref_s = x2.max(axis=1), x2.sum(axis=1)
    tol = 1e-5 if dtype == "float32" else 3e-3
    np.testing.assert_array_equal(m, ref_m)          # max is exact
    np.testing.assert_allclose(s, ref_s, rtol=tol, atol=tol * np.sqrt(C))
    ref_y = x2 - ref_m[:, None] + s[:, None]         # from the kernel's own sums (rounded like it)
    np.testing.assert_allclose(y, ref_y, rtol=tol, atol=tol)
    ref_z = z.astype(np.float64)
    ref_z[:, :C] = (ref_z[:, :C] + y) * m[:, None]
    np.testing.assert_allclose(zo, ref_z, rtol=tol, atol=tol)


def test_row_broadcast_over_more_than_2040_rows():
    R, C = 2100, 8

    @T.prim_func
    def main(X: T.Tensor((R, C), "float32"), V: T.Tensor((R,), "float32"), Y: T.Tensor((R, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((R, C), "float32")
            v = T.alloc_UB((R,), "float32")
            with T.Scope("V"):
                if vid == 0:
                    T.copy(X[0, 0], x)
                    T.copy(V[0], v)
                    T.set_flag("MTE2", "V", 0)
                    T.wait_flag("MTE2", "V", 0)
                    T.mul(x, x, v[:, None])
                    T.set_flag("V", "MTE3", 0)
                    T.wait_flag("V", "MTE3", 0)
                    T.copy(x, Y[0, 0])

    rng = np.random.default_rng(8)
    x = rng.standard_normal((R, C)).astype(np.float32)
    v = rng.standard_normal(R).astype(np.float32)
    k = tw.compile(main, out_idx=[2], target="ascend910b")
    p = k.profile(x, v)
    assert p["reports"] == []
    np.testing.assert_array_equal(p.outputs, x * v[:, None])


# The automatic pipeline: the examples' row kernels with rows of more than 2040 float32 elements
# (their float32 tiles keep 2-D rows for the row reductions and broadcasts), against float64 numpy
# and the cpu target.
@pytest.mark.parametrize("name,M,N,dtype,block_M", [
    ("softmax", 5, 3000, "float32", 8),
    ("rms_norm", 7, 2113, "float32", 8),
    ("layer_norm", 3, 4100, "float16", 2),
])
def test_examples_with_wide_rows(name, M, N, dtype, block_M):
    mod = importlib.import_module(name)
    rng = np.random.default_rng(3)
    n_weights = {"softmax": 0, "rms_norm": 1, "layer_norm": 2}[name]
    inputs = [randn((M, N), dtype, scale=2.0, seed=rng)] + [randn((N,), dtype, seed=rng) for _ in range(n_weights)]
    factory = getattr(mod, name)
    p = factory(N, block_M=block_M, dtype=dtype, target="ascend910b").profile(*inputs)
    assert p["reports"] == []
    atol, rtol = TOLERANCES[dtype]
    tw.testing.assert_close(p.outputs, mod.reference(*inputs), atol=atol, rtol=rtol, msg=f"{name} {M}x{N} {dtype}")
    on_cpu = factory(N, block_M=block_M, dtype=dtype, target="cpu")(*inputs)
    tw.testing.assert_close(p.outputs, on_cpu, atol=atol, rtol=rtol, msg=f"{name} {M}x{N} {dtype}: ascend vs cpu")
