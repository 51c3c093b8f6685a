"""Session 31 (h-negzero): signed zeros in sums. A float sum starts from -0.0, IEEE's additive
identity (x + -0.0 is x bit for bit for every x), on every target: a sum of -0.0 values is -0.0, a
sum holding one +0.0 is +0.0, and a tile merged into a T.clear'd destination starts from the clear's
+0.0 (an empty loop of merges leaves +0.0). review30 R2: cpu started its sums from +0.0 (a sum of
-0.0 values was +0.0) where ascend910b gave -0.0.

The reference is numpy's sum with initial=-0.0: numpy's default np.sum starts from +0.0 (its reduce
machinery fills the identity 0 first), so np.sum of -0.0 values is +0.0 there; numpy's maintainers
call -0.0 the correct start (numpy PR 21218). Values are signed zeros: exact, compared bit for bit
(value and np.signbit). One shape per code path of the cpu reduction (docs/language.md
"T.reduce_sum"); each kernel runs on cpu and on ascend910b with the checker on."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

from ascend_util import TARGET, run_checked
from tw_test_util import unchecked_code_only


def on_both(kernel_of, *inputs):
    """{target: output} of kernel_of(target) run on cpu and on ascend910b (checker on)."""
    return {"cpu": kernel_of("cpu")(*inputs), TARGET: run_checked(kernel_of(TARGET), *inputs)}


def assert_bits(got, ref, what):
    got = np.asarray(got).astype(np.float32)
    assert np.array_equal(got, ref) and np.array_equal(np.signbit(got), np.signbit(ref)), (what, got, ref)


def zeros(shape, dtype):
    """-0.0 everywhere but the last element, +0.0: the last row's (and the last column's) sum is +0.0."""
    x = np.full(shape, -0.0, np.float32)
    x[-1, -1] = 0.0
    return x.astype(np_dtype(dtype))


@tw.jit(out_idx=[-1])
def tile_sum(R, N, dim, in_dt, dt):
    shape = (R,) if dim == 1 else (N,)

    @T.prim_func
    def main(X: T.Tensor((R, N), in_dt), Out: T.Tensor(shape, dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, N), dt)
            s = T.alloc_fragment(shape, dt)
            T.copy(X, x)
            T.reduce_sum(x, s, dim=dim)
            T.copy(s, Out)

    return main


# (R, N, dim, input dtype, tile dtype): the cpu paths of emit_reduce. Rows: float32 vectors with a
# scalar tail (37), short rows (5: one accumulator per row), one-element rows, blocked rows (4100 >
# 4096: blocks added in double); float16 read widened into a float32 tile; bfloat16 and float16
# tiles (float32 accumulators: 16 partial sums; a scalar sum). Columns: a row of accumulators, and
# blocked (260 > 256 rows: blocks added in double).
CASES = [
    (3, 37, 1, "float32", "float32"),
    (4, 5, 1, "float32", "float32"),
    (3, 1, 1, "float32", "float32"),
    (2, 4100, 1, "float32", "float32"),
    (3, 37, 1, "float16", "float32"),
    (3, 37, 1, "bfloat16", "bfloat16"),
    (2, 20, 1, "float16", "float16"),
    (3, 37, 0, "float32", "float32"),
    (260, 3, 0, "float32", "float32"),
]


@pytest.mark.parametrize("R,N,dim,in_dt,dt", CASES)
def test_sum_of_negative_zeros_is_negative_zero(R, N, dim, in_dt, dt):
    x = zeros((R, N), in_dt)
    ref = np.sum(x.astype(np.float32), axis=dim, initial=-0.0)
    assert np.signbit(ref).sum() == ref.size - 1  # -0.0 but the sum holding the +0.0
    for target, got in on_both(lambda t: tile_sum(R, N, dim, in_dt, dt, target=t), x).items():
        assert_bits(got, ref, target)


@tw.jit(out_idx=[-1])
def norm_like(N, block_M):
    """layer_norm's shape: mean = sum / N, t = x + mean (a map fused with its row sum), var = sum(t) / N,
    y = t + var (a map fused with its copy-out): the cpu target runs them as one row pipeline."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            t = T.alloc_fragment((block_M, N), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            var = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                t[i, j] = x[i, j] + mean[i]
            T.reduce_sum(t, var, dim=1)
            for i in T.Parallel(block_M):
                var[i] = var[i] / N
            for i, j in T.Parallel(block_M, N):
                x[i, j] = t[i, j] + var[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


@unchecked_code_only
def test_mean_inside_a_row_pipeline_keeps_the_sign():
    x = zeros((5, 67), "float32")  # 67 columns: a chunk of 64 and a tail; 5 rows: a tail block
    mean = np.sum(x, axis=1, initial=-0.0, keepdims=True) / np.float32(67)
    t = x + mean
    ref = t + np.sum(t, axis=1, initial=-0.0, keepdims=True) / np.float32(67)
    assert np.signbit(ref[:-1]).all() and not np.signbit(ref[-1]).any()
    k = norm_like(67, 4)
    assert "@row_pipeline" in k.get_source("c++") or "row pipeline" in k.get_source("c++")
    for target, got in on_both(lambda tg: norm_like(67, 4, target=tg), x).items():
        assert_bits(got, ref, target)


@tw.jit(out_idx=[-1])
def scaled_sum(R, N):
    """A map fused with its row sum, not in a pipeline (its sum is copied out, not the map's tile)."""

    @T.prim_func
    def main(X: T.Tensor((R, N), "float32"), Out: T.Tensor((R,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, N), "float32")
            t = T.alloc_fragment((R, N), "float32")
            s = T.alloc_fragment((R,), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(R, N):
                t[i, j] = x[i, j] * 2.0
            T.reduce_sum(t, s, dim=1)
            T.copy(s, Out)

    return main


@unchecked_code_only
def test_map_fused_with_its_row_sum_keeps_the_sign():
    x = zeros((2, 37), "float32")
    ref = np.sum(x * np.float32(2), axis=1, initial=-0.0)
    assert "fused with reduce_sum" in scaled_sum(2, 37).get_source("c++")
    for target, got in on_both(lambda t: scaled_sum(2, 37, target=t), x).items():
        assert_bits(got, ref, target)


@tw.jit(out_idx=[-1])
def chunked_sum(R, block_N):
    """Row sums merged chunk by chunk into a T.clear'd destination: the sum starts from the clear's +0.0."""
    N = T.symbolic("N")

    @T.prim_func
    def main(X: T.Tensor((R, N), "float32"), Out: T.Tensor((R,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, block_N), "float32")
            s = T.alloc_fragment((R,), "float32")
            T.clear(s)
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[0, k * block_N], x)
                T.reduce_sum(x, s, dim=1, clear=False)
            T.copy(s, Out)

    return main


@pytest.mark.parametrize("N", [0, 16])
def test_merged_sums_start_from_the_clear(N):
    """An empty dim (N = 0: no chunk) sums to +0.0, as np.sum([]); with chunks, +0.0 + (-0.0) is +0.0."""
    x = np.full((2, N), -0.0, np.float32)
    ref = np.zeros(2, np.float32)
    assert_bits(np.sum(x, axis=1), ref, "numpy")
    for target, got in on_both(lambda t: chunked_sum(2, 8, target=t), x).items():
        assert_bits(got, ref, target)
