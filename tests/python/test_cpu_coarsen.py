"""Block coarsening on the CPU (src/transform/coarsen_grid.h; docs/performance.md, "Issue 16, CPU
reductions and tiny programs"): a 1-D grid of blocks whose tiles hold a few elements (softmax
over (M, 1) in blocks of 8 rows) is merged into programs of 32-64 blocks, so the vector loops
run across the merged rows. Rows are independent, so results must be bit-identical to the
unmerged kernel (a twin the pass leaves alone: it holds one more, larger tile) and match
float64 on tails (M not a multiple of the merged rows), one row, one column and no rows."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
from op_zoo import log_softmax  # noqa: E402


@tw.jit(out_idx=[-1])
def softmax(N, block_M=8, twin=False):
    """examples/softmax.py's kernel; twin=True adds an unused (block_M, 128) tile, which keeps
    the kernel out of coarsening (its largest tile is no longer tiny)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            if twin:
                unused = T.alloc_fragment((block_M, 128), "float32")  # noqa: F841
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])
    return main


def ref_softmax(x, log=False):
    s = x.astype(np.float64)
    s = s - s.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True)) if log else np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)


def grid_of(kernel, stage):
    return next(line.strip() for line in kernel.get_ir(stage).splitlines() if line.strip().startswith("grid("))


@pytest.mark.parametrize("N", [1, 3])
def test_narrow_softmax_blocks_are_merged(N):
    k, twin = softmax(N), softmax(N, twin=True)
    assert grid_of(k, "simplify") == "grid(bx = ceildiv(M, 8)) {"
    merged = 8 * (32 if N == 1 else 8)  # largest tile 8 or 24 elements; merged tiles <= 256
    assert grid_of(k, "coarsen_grid") == f"grid(bx = ceildiv(M, {merged})) {{"
    assert grid_of(twin, "coarsen_grid") == "grid(bx = ceildiv(M, 8)) {"


@pytest.mark.parametrize("N", [1, 3])
@pytest.mark.parametrize("M", [0, 1, 7, 8, 37, 256, 257, 4099])
def test_merged_softmax_is_bit_identical_and_matches_float64(M, N):
    x = (np.random.default_rng(M * 10 + N).standard_normal((M, N)) * 3).astype(np.float32)
    got = softmax(N)(x)
    assert got.shape == (M, N)
    np.testing.assert_array_equal(got, softmax(N, twin=True)(x))
    if M:
        np.testing.assert_allclose(got, ref_softmax(x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("M,N", [(37, 1), (4099, 5), (1, 2)])
def test_merged_log_softmax_matches_float64(M, N):
    # its first map writes two tiles: still one row per row
    x = (np.random.default_rng(M + N).standard_normal((M, N)) * 3).astype(np.float32)
    k = log_softmax(N)
    assert "ceildiv(M, 8)" not in grid_of(k, "coarsen_grid")
    np.testing.assert_allclose(k(x), ref_softmax(x, log=True), rtol=1e-6, atol=1e-6)
