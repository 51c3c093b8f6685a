"""Per-column subexpressions of 2-D maps computed once per column on the CPU
(src/transform/hoist_map_invariants.h): batch norm's rsqrt(var[j] + eps) was computed for every
row. The hoisted kernel must give the same bits as the same map with one row per block (where
nothing is hoisted) and match float64, on odd shapes."""
import pathlib
import sys

import numpy as np
import pytest

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
