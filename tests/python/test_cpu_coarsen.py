"""Block coarsening on the CPU (src/transform/coarsen_grid.h; docs/performance.md, "Issue 16, CPU
reductions and tiny programs"): a 1-D grid of blocks whose tiles hold a few elements (softmax
over (M, 1) in blocks of 8 rows) is merged into programs of 32-64 blocks, so the vector loops
run across the merged rows. Rows are independent, so results must be bit-identical to the
unmerged kernel (a twin the pass leaves alone: it holds one more, larger tile) and match
float64 on tails (M not a multiple of the merged rows), one row, one column and no rows.

A grid axis over column blocks that together read whole rows (op zoo's reduce_mid) is merged
into one program over whole rows per value of the other axes, when at least 16 programs remain;
checked the same way (bit-identical to a twin the pass leaves alone, close to float64) at column
counts that are not a multiple of the block, one block, and B of 1, 3 and 37 (every pair of values of
kind, B and shape, not their product: tw_test_util.pairwise, session 23). The same for the
op zoo's argmax_mid, whose blocks walk B in a loop around a copy and a map (exact against numpy,
ties included), and kept out when a map value depends on the column index or the block."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
from op_zoo import log_softmax  # noqa: E402
from tw_test_util import pairwise  # noqa: E402


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


@tw.jit(out_idx=[-1])
def reduce_mid(A, B, C, kind, block_C, dtype="float32", twin=False):
    """bench/op_zoo.py's reduce_mid; twin=True adds an unused (1, 8) tile, which keeps the kernel
    out of coarsening (its tiles no longer share their last dimension)."""
    @T.prim_func
    def main(X: T.Tensor((A, B, C), dtype), Y: T.Tensor((A, C), dtype)):
        with T.Kernel(T.ceildiv(C, block_C), A) as (bx, by):
            x = T.alloc_fragment((B, block_C), dtype)
            s = T.alloc_fragment((block_C,), dtype)
            if twin:
                unused = T.alloc_fragment((1, 8), dtype)  # noqa: F841
            T.copy(X[by, 0:B, bx * block_C:(bx + 1) * block_C], x)
            if kind == "sum":
                T.reduce_sum(x, s, dim=0)
            elif kind == "max":
                T.reduce_max(x, s, dim=0)
            else:
                T.reduce_min(x, s, dim=0)
            T.copy(s, Y[by, bx * block_C])
    return main


@pytest.mark.parametrize("A,C,block_C,merged", [
    (64, 1024, 512, True),    # the op zoo's case: 2 half rows -> 1 whole row
    (16, 1000, 256, True),    # a tail block
    (17, 301, 64, True),      # 5 blocks, the last 45 columns
    (16, 200, 256, False),    # one block already
    (15, 1024, 512, False),   # 15 programs left: too few for the threads
    (64, 2048, 512, False),   # rows of 8 KiB: over 4 KiB
])
def test_column_blocks_merged_when_they_cover_rows(A, C, block_C, merged):
    k = reduce_mid(A, 3, C, "sum", block_C)
    blocks = -(-C // block_C)
    assert grid_of(k, "simplify") == f"grid(bx = {blocks}, by = {A}) {{"
    want = f"grid(bx = 1, by = {A}) {{" if merged else f"grid(bx = {blocks}, by = {A}) {{"
    assert grid_of(k, "coarsen_grid") == want
    assert grid_of(reduce_mid(A, 3, C, "sum", block_C, twin=True), "coarsen_grid") == f"grid(bx = {blocks}, by = {A}) {{"


# every pair of (kind, B, shape) values (tw_test_util.pairwise: 15 cases, not the 45 of the product)
@pytest.mark.parametrize("kind,B,shape", pairwise(["sum", "max", "min"], [1, 3, 37],
                                                   [(16, 1000, 256), (17, 301, 64), (20, 1024, 512), (16, 7, 2),
                                                    (16, 1, 1)]))
def test_merged_column_blocks_are_bit_identical_and_match_float64(kind, B, shape):
    A, C, block_C = shape
    rng = np.random.default_rng(A * 1000 + B * 10 + C)
    x = rng.standard_normal((A, B, C)).astype(np.float32)
    k = reduce_mid(A, B, C, kind, block_C)
    assert grid_of(k, "coarsen_grid") == f"grid(bx = 1, by = {A}) {{"  # merged, or one block already
    got = k(x)
    assert got.shape == (A, C)
    np.testing.assert_array_equal(got, reduce_mid(A, B, C, kind, block_C, twin=True)(x))
    red = {"sum": np.sum, "max": np.max, "min": np.min}[kind]
    np.testing.assert_allclose(got, red(x.astype(np.float64), axis=1), rtol=1e-5, atol=1e-6 + 2.4e-7 * B)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_merged_column_blocks_other_dtypes(dtype):
    A, B, C, block_C = 16, 5, 300, 128
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((A, B, C)) * 100).astype(dtype)
    k = reduce_mid(A, B, C, "sum", block_C, dtype=dtype)
    assert grid_of(k, "coarsen_grid") == f"grid(bx = 1, by = {A}) {{"
    got = k(x)
    np.testing.assert_array_equal(got, reduce_mid(A, B, C, "sum", block_C, dtype=dtype, twin=True)(x))
    if dtype == "int32":
        np.testing.assert_array_equal(got, x.sum(axis=1, dtype=np.int32))
    else:
        np.testing.assert_allclose(got, x.sum(axis=1), rtol=1e-12, atol=1e-9)


@tw.jit(out_idx=[-1])
def argmax_mid(A, B, C, block_C, twin=False, use_column=False, use_bx=False):
    """bench/op_zoo.py's argmax_mid (a loop over B around a copy and a map); twin=True adds an
    unused (1, 8) tile, which keeps the kernel out of coarsening. use_column / use_bx make a map
    value depend on the column index or the block (kept out: such a value changes with the merge)."""
    @T.prim_func
    def main(X: T.Tensor((A, B, C), "float32"), Y: T.Tensor((A, C), "int32")):
        with T.Kernel(T.ceildiv(C, block_C), A) as (bx, by):
            x = T.alloc_fragment((block_C,), "float32")
            best = T.alloc_fragment((block_C,), "float32")
            idx = T.alloc_fragment((block_C,), "int32")
            if twin:
                unused = T.alloc_fragment((1, 8), "float32")  # noqa: F841
            T.fill(best, -T.infinity("float32"))
            T.fill(idx, 0)
            for b in T.serial(B):
                T.copy(X[by, b, bx * block_C:(bx + 1) * block_C], x)
                for j in T.Parallel(block_C):
                    idx[j] = T.where(x[j] > best[j], b + (j if use_column else 0) + (bx if use_bx else 0), idx[j])
                    best[j] = T.max(best[j], x[j])
            T.copy(idx, Y[by, bx * block_C])
    return main


@pytest.mark.parametrize("A,C,block_C,merged", [
    (64, 1024, 256, True),    # the op zoo's case: 4 quarter rows -> 1 whole row
    (17, 301, 64, True),      # 5 blocks, the last 45 columns
    (16, 200, 256, False),    # one block already
    (15, 1024, 256, False),   # 15 programs left: too few for the threads
])
def test_column_blocks_with_loop_and_map_merged(A, C, block_C, merged):
    blocks = -(-C // block_C)
    want = f"grid(bx = 1, by = {A}) {{" if merged else f"grid(bx = {blocks}, by = {A}) {{"
    k = argmax_mid(A, 3, C, block_C)
    assert grid_of(k, "coarsen_grid") == want
    if merged:  # the map's column loop runs over the whole row
        assert f"for j in parallel(0, {blocks * block_C})" in k.get_ir("coarsen_grid")
    kept = f"grid(bx = {blocks}, by = {A}) {{"
    assert grid_of(argmax_mid(A, 3, C, block_C, twin=True), "coarsen_grid") == kept
    assert grid_of(argmax_mid(A, 3, C, block_C, use_column=True), "coarsen_grid") == kept
    assert grid_of(argmax_mid(A, 3, C, block_C, use_bx=True), "coarsen_grid") == kept


@pytest.mark.parametrize("B", [1, 3, 37])
@pytest.mark.parametrize("A,C,block_C", [(16, 1000, 256), (17, 301, 64), (16, 1024, 256), (16, 7, 2), (16, 1, 1)])
def test_merged_argmax_is_bit_identical_and_matches_numpy(B, A, C, block_C):
    rng = np.random.default_rng(A * 1000 + B * 10 + C)
    x = rng.standard_normal((A, B, C)).astype(np.float32)
    x[:, B // 2, ::5] = x[:, 0, ::5]  # ties: the first index wins
    k = argmax_mid(A, B, C, block_C)
    assert grid_of(k, "coarsen_grid") == f"grid(bx = 1, by = {A}) {{"  # merged, or one block already
    got = k(x)
    assert got.shape == (A, C) and got.dtype == np.int32
    np.testing.assert_array_equal(got, argmax_mid(A, B, C, block_C, twin=True)(x))
    np.testing.assert_array_equal(got, np.argmax(x, axis=1))
