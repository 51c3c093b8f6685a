"""The loop index as a value, int32 T.where on tile data, and argmax / argmin in the natural form
(issue 13). On ascend910b the index of a T.Parallel map used as a value is a CreateVecIndex vector
(int32) with adds and muls for offset forms; an int32 T.where on a condition on tile data selects
exactly (legalize_vector's select_int32: through float32 below 2^24, else an int32 0/1 mask and
x * m + y * (1 - m)); argmax is max, then the lowest index holding it (T.where(x == max, j, big),
then min), ties to the lowest index as numpy. Every case on cpu and in the simulator with the
checker on (zero reports), against numpy, exact for ids, on odd shapes (tails, one element)."""
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]


def run(kernel, target, *inputs):
    return kernel(*inputs) if target == "cpu" else run_checked(kernel, *inputs)


@tw.jit(out_idx=[-1])
def index_values(M, N, bm, bn, case):
    """Y[r, c] = an expression of the tile's map indices i, j (int32), plus the block offsets."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), "int32")
            y = T.alloc_fragment((bm, bn), "int32")
            T.copy(X[by * bm, bx * bn], x)
            for i, j in T.Parallel(bm, bn):
                if case == "col":
                    y[i, j] = j
                elif case == "row":
                    y[i, j] = i
                elif case == "flat":
                    y[i, j] = i * bn + j
                elif case == "global":
                    y[i, j] = (by * bm + i) * N + bx * bn + j
                elif case == "mixed":
                    y[i, j] = x[i, j] * 2 + j - 3 * i
            T.copy(y, Y[by * bm, bx * bn])
    return main


def index_ref(M, N, bm, bn, case, x):
    r, c = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
    i, j = r % bm, c % bn
    return {"col": j, "row": i, "flat": i * bn + j, "global": r * N + c, "mixed": x * 2 + j - 3 * i}[case]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ["col", "row", "flat", "global", "mixed"])
@pytest.mark.parametrize("M,N,bm,bn", [(16, 64, 8, 32), (13, 37, 8, 16), (1, 1, 1, 8)])
def test_loop_index_as_value(target, case, M, N, bm, bn):
    x = np.random.default_rng(M + N).integers(-1000, 1000, (M, N)).astype(np.int32)
    y = run(index_values(M, N, bm, bn, case, target=target), target, x)
    np.testing.assert_array_equal(y, index_ref(M, N, bm, bn, case, x))


@tw.jit(out_idx=[-1])
def index_1d(N, bn, dtype):
    """Y[c] = float(j) * X[c] + j: the index converted into a float map (1-D)."""
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            x = T.alloc_fragment((bn,), dtype)
            T.copy(X[bx * bn], x)
            for j in T.Parallel(bn):
                x[j] = x[j] * T.cast(j, dtype) + T.cast(bx * bn + j, dtype)
            T.copy(x, Y[bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_loop_index_in_float_maps(target, dtype):
    N, bn = 100, 64
    x = np.random.default_rng(0).standard_normal(N).astype(dtype)
    y = run(index_1d(N, bn, dtype, target=target), target, x)
    j = np.arange(N) % bn
    ref = x.astype(np.float64) * j + np.arange(N)
    # two rounded operations on values up to 64 * 4 + 100: an absolute bound of a few ulps there
    atol, rtol = (1e-4, 1e-5) if dtype == "float32" else (0.25, 2e-3)
    tw.testing.assert_close(y, ref, atol=atol, rtol=rtol)


@tw.jit(out_idx=[-1])
def int_where(M, N, bm, bn, case):
    """int32 T.where on a condition on float tile data."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "int32"),
             Y: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), "float32")
            a = T.alloc_fragment((bm, bn), "int32")
            b = T.alloc_fragment((bm, bn), "int32")
            y = T.alloc_fragment((bm, bn), "int32")
            T.copy(X[by * bm, bx * bn], x)
            T.copy(A[by * bm, bx * bn], a)
            T.copy(B[by * bm, bx * bn], b)
            for i, j in T.Parallel(bm, bn):
                if case == "tiles":
                    y[i, j] = T.where(x[i, j] > 0, a[i, j], b[i, j])
                elif case == "tile_scalar":
                    y[i, j] = T.where(x[i, j] <= 0.25, a[i, j], -7)
                elif case == "scalar_tile":
                    y[i, j] = T.where(x[i, j] != x[i, j], 123456789, b[i, j])
                elif case == "index_scalar":
                    y[i, j] = T.where(x[i, j] == 0.5, j, bn)
                elif case == "and":
                    y[i, j] = T.where(x[i, j] > -0.5 and x[i, j] < 0.5, a[i, j], b[i, j] + i)
            T.copy(y, Y[by * bm, bx * bn])
    return main


def int_where_ref(case, x, a, b, bm, bn):
    r, c = np.meshgrid(np.arange(x.shape[0]), np.arange(x.shape[1]), indexing="ij")
    i, j = r % bm, c % bn
    return {"tiles": np.where(x > 0, a, b), "tile_scalar": np.where(x <= 0.25, a, -7),
            "scalar_tile": np.where(np.isnan(x), 123456789, b), "index_scalar": np.where(x == 0.5, j, bn),
            "and": np.where((x > -0.5) & (x < 0.5), a, b + i)}[case]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ["tiles", "tile_scalar", "scalar_tile", "index_scalar", "and"])
@pytest.mark.parametrize("M,N,bm,bn", [(16, 64, 8, 32), (13, 37, 8, 16), (1, 1, 1, 8)])
def test_int32_where_on_tile_data(target, case, M, N, bm, bn):
    rng = np.random.default_rng(M * N)
    x = rng.standard_normal((M, N)).astype(np.float32)
    x.flat[::5] = 0.5
    x.flat[::7] = np.nan
    # full-range int32 values: the mask route must move every bit (no float32 rounding)
    a = rng.integers(np.iinfo(np.int32).min, np.iinfo(np.int32).max, (M, N), dtype=np.int64).astype(np.int32)
    b = rng.integers(np.iinfo(np.int32).min + bm, np.iinfo(np.int32).max - bm, (M, N), dtype=np.int64).astype(np.int32)
    a.flat[:3] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0][:a.size]
    y = run(int_where(M, N, bm, bn, case, target=target), target, x, a, b)
    np.testing.assert_array_equal(y, int_where_ref(case, x, a, b, bm, bn))


@tw.jit(out_idx=[-2, -1])
def arg_rows(M, N, bm, kind):
    """I[r] = argmax / argmin of X[r, :] (the lowest index of the extreme, as numpy), V[r] the value:
    the reduction, then T.where(x == best, j, N) and a min over the row."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), V: T.Tensor((M,), "float32"), I: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            best = T.alloc_fragment((bm,), "float32")
            pick = T.alloc_fragment((bm, N), "int32")
            idx = T.alloc_fragment((bm,), "int32")
            T.copy(X[bx * bm, 0], x)
            if kind == "argmax":
                T.reduce_max(x, best, dim=1)
            else:
                T.reduce_min(x, best, dim=1)
            for i, j in T.Parallel(bm, N):
                pick[i, j] = T.where(x[i, j] == best[i], j, N)
            T.reduce_min(pick, idx, dim=1)
            T.copy(best, V[bx * bm])
            T.copy(idx, I[bx * bm])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("M,N,bm", [(16, 64, 8), (13, 37, 8), (1, 1, 1), (9, 300, 8)])
def test_argmax_argmin_along_rows(target, kind, M, N, bm):
    rng = np.random.default_rng(M + N)
    x = rng.integers(-4, 5, (M, N)).astype(np.float32)  # few distinct values: many ties
    v, idx = run(arg_rows(M, N, bm, kind, target=target), target, x)
    ref = np.argmax(x, axis=1) if kind == "argmax" else np.argmin(x, axis=1)
    np.testing.assert_array_equal(idx, ref)
    np.testing.assert_array_equal(v, x[np.arange(M), ref])


@pytest.mark.parametrize("shape", [(5, 37, 301), (2, 3, 8), (1, 1, 1)])
def test_op_zoo_argmax_mid_on_ascend_matches_numpy_with_ties(shape):
    import op_zoo
    x = np.random.default_rng(7).integers(-3, 4, shape).astype(np.float32)  # ties along the axis
    got = run_checked(op_zoo.argmax_mid(*shape, target=TARGET), x)
    np.testing.assert_array_equal(got, np.argmax(x, axis=1))
    np.testing.assert_array_equal(op_zoo.argmax_mid(*shape, target="cpu")(x), np.argmax(x, axis=1))


@tw.jit(out_idx=[-1])
def index_where(M, N, bm, bn, case, dtype):
    """T.where on index conditions that are not an index mask (==, !=, `or`) or whose other value is
    a tile: compared on index vectors on Ascend."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), dtype)
            r = T.alloc_fragment((bm,), dtype)
            y = T.alloc_fragment((bm, bn), dtype)
            T.copy(X[by * bm, bx * bn], x)
            T.reduce_max(x, r, dim=1)
            for i, j in T.Parallel(bm, bn):
                if case == "eq_tiles":
                    y[i, j] = T.where(j == 3, r[i], x[i, j])
                elif case == "ne_scalar":
                    y[i, j] = T.where(i != j, x[i, j], 0)
                elif case == "or":
                    y[i, j] = T.where(i < 2 or j >= bn - 3, x[i, j], -1)
                elif case == "lt_tiles":
                    y[i, j] = T.where(bx * bn + j < 11, x[i, j], r[i])
                elif case == "index_and_data":
                    y[i, j] = T.where(j < 5 and x[i, j] > 0, x[i, j], r[i])
            T.copy(y, Y[by * bm, bx * bn])
    return main


def index_where_ref(case, x, bm, bn):
    M, N = x.shape
    rr, cc = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
    i, j = rr % bm, cc % bn
    r = np.zeros_like(x)
    for b0 in range(0, M, bm):
        for c0 in range(0, N, bn):
            blk = x[b0:b0 + bm, c0:c0 + bn]
            r[b0:b0 + bm, c0:c0 + bn] = blk.max(axis=1, keepdims=True)
    return {"eq_tiles": np.where(j == 3, r, x), "ne_scalar": np.where(i != j, x, 0),
            "or": np.where((i < 2) | (j >= bn - 3), x, -1), "lt_tiles": np.where(cc < 11, x, r),
            "index_and_data": np.where((j < 5) & (x > 0), x, r)}[case]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ["eq_tiles", "ne_scalar", "or", "lt_tiles", "index_and_data"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_index_conditions_selected_on_index_vectors(target, case, dtype):
    M, N, bm, bn = 16, 32, 8, 16  # whole tiles (the reference's per-tile max)
    x = np.random.default_rng(3).standard_normal((M, N)).astype(dtype)
    y = run(index_where(M, N, bm, bn, case, dtype, target=target), target, x)
    np.testing.assert_array_equal(y, index_where_ref(case, x, bm, bn))


@tw.jit(out_idx=[-1])
def index_into(M, N, bm, dtype):
    """Y = i * 3 + j - 50 (tile-relative indices) stored into a tile of `dtype` (8-bit tiles:
    computed in float32 and wrapped; bfloat16: converted)."""
    @T.prim_func
    def main(Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            y = T.alloc_fragment((bm, N), dtype)
            for i, j in T.Parallel(bm, N):
                y[i, j] = T.cast(i * 3 + j - 50, dtype)
            T.copy(y, Y[bx * bm, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "bfloat16", "float16", "float32", "int32"])
def test_index_values_into_every_dtype(target, dtype):
    from tilewright.testing import np_dtype
    M, N, bm = 37, 40, 16  # a tail block
    y = run(index_into(M, N, bm, dtype, target=target), target)
    r, c = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
    v = (r % bm) * 3 + c - 50
    if dtype in ("int8", "uint8"):
        ref = v.astype(np.int64).astype(np_dtype(dtype))  # wraps, as the language's conversion does
    else:
        ref = v.astype(np_dtype(dtype))
    np.testing.assert_array_equal(np.asarray(y).astype(np.float64), ref.astype(np.float64))


def test_index_values_in_row_chunks_on_ascend():
    """64-row bfloat16 tiles are computed in row chunks of float32 (legalize_vector): the row index
    becomes chunk offset + the chunk's own row index vector. An int8 tile in chunks: the int32
    index arithmetic is wrapped into int8 exactly in int32 (it was a located error "may reach 2^24"
    while the wrap went through float32 and the chunk offset had no static bound)."""
    M, N, bm = 70, 40, 64
    y = run_checked(index_into(M, N, bm, "bfloat16", target=TARGET))
    r, c = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
    np.testing.assert_array_equal(np.asarray(y).astype(np.float64), ((r % bm) * 3 + c - 50).astype(np.float64))
    y8 = run_checked(index_into(M, N, bm, "int8", target=TARGET))
    np.testing.assert_array_equal(np.asarray(y8), ((r % bm) * 3 + c - 50).astype(np.int64).astype(np.int8))
