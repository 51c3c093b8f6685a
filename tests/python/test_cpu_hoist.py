"""Per-column subexpressions of 2-D maps computed once per column on the CPU
(src/transform/hoist_map_invariants.h): batch norm's rsqrt(var[j] + eps) was computed for every
row. The hoisted kernel must give the same bits as the same map with one row per block (where
nothing is hoisted) and match float64, on odd shapes."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
from op_zoo import batchnorm  # noqa: E402  (M, C, eps, block_M)


def test_batchnorm_scale_is_computed_once_per_column():
    ir = batchnorm(37, 301).get_ir("hoist_map_invariants")
    assert "j_inv0[j0] = rsqrt(var[j0] + 1e-05)" in ir
    assert "rsqrt" not in ir[ir.index("for i in parallel(0, 8)"):]
    assert "rsqrt" in batchnorm(37, 301, block_M=1).get_ir("hoist_map_invariants")  # one row: left alone


@pytest.mark.parametrize("M,C", [(37, 301), (8, 1), (1, 7), (64, 1024)])
def test_hoisted_batchnorm_bits_and_float64(M, C):
    rng = np.random.default_rng(M + C)
    x, mean, g, b = (rng.standard_normal(s).astype(np.float32) for s in ((M, C), C, C, C))
    var = (rng.random(C) + 0.5).astype(np.float32)
    got = batchnorm(M, C)(x, mean, var, g, b)
    np.testing.assert_array_equal(got, batchnorm(M, C, block_M=1)(x, mean, var, g, b))
    ref = (x.astype(np.float64) - mean) / np.sqrt(var.astype(np.float64) + 1e-5) * g + b
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@tw.jit(out_idx=[-1])
def add_product(M, C, block_M=8):
    """x + exp(v[j]) * w[j]: g++ fuses the product with the add (an fma), so only exp(v[j]) may
    be hoisted; hoisting the product would round it first and change the bits."""
    @T.prim_func
    def main(X: T.Tensor((M, C), "float32"), V: T.Tensor((C,), "float32"), W: T.Tensor((C,), "float32"),
             Y: T.Tensor((M, C), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, C), "float32")
            v = T.alloc_fragment((C,), "float32")
            w = T.alloc_fragment((C,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(V, v)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, C):
                x[i, j] = x[i, j] + T.exp(v[j]) * w[j]
            T.copy(x, Y[bx * block_M, 0])
    return main


def test_products_feeding_adds_keep_their_bits():
    M, C = 37, 301
    rng = np.random.default_rng(3)
    x, v, w = (rng.standard_normal(s).astype(np.float32) for s in ((M, C), C, C))
    k = add_product(M, C)
    ir = k.get_ir("hoist_map_invariants")
    assert "j_inv0[j0] = exp(v[j0])\n" in ir
    assert "x[i, j] = x[i, j] + j_inv0[j] * w[j]" in ir
    got = k(x, v, w)
    np.testing.assert_array_equal(got, add_product(M, C, block_M=1)(x, v, w))
    np.testing.assert_allclose(got, x + np.exp(v.astype(np.float64)) * w, rtol=1e-5, atol=1e-5)
