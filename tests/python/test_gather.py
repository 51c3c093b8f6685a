"""Gathers along a tile axis (issue 13): a T.Parallel map reading a tile at a data-dependent index
(y[i, j] = x[i, idx[i, j]], y[j] = x[idx[j]], y[i] = x[i, label[i]]), at a strided index
(x[i, 2 * j + 1]), and interleaving stores (y[i, 2 * j] = a, y[i, 2 * j + 1] = b). cpu: plain
C++ (every tile index checked at run time); ascend910b: the vector Gather instruction on byte
offsets computed as int32 tile data (the simulator with the checker on: zero reports). Every
case against numpy with fixed seeds, in float32, float16, bfloat16 and int32, on odd shapes (row
and column tails, one element) with indices at both edges; an index outside the tile is a located
error on cpu and a located simulator report on Ascend."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

from ascend_util import TARGET, run_checked
from tilewright.testing import np_dtype
from tw_test_util import marked_line

TARGETS = ["cpu", TARGET]
THIS_FILE = __file__


def run(kernel, target, *inputs):
    return kernel(*inputs) if target == "cpu" else run_checked(kernel, *inputs)


def data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(np.float32).astype(np_dtype(dtype))


def indices(shape, n, seed):
    """Random indices in [0, n) with both edges present (when there is room)."""
    idx = np.random.default_rng(seed).integers(0, n, shape).astype(np.int32)
    if idx.size >= 2:
        idx.flat[0], idx.flat[-1] = 0, n - 1
    return idx


def rows_gather(M, N, K, bm, dtype, target, case="plain"):
    """Y[r, j] = X[r, f(I[r, j])] over bm-row tiles (M = 0: a symbolic row count)."""
    Ms = T.symbolic("M") if M == 0 else M

    @T.prim_func
    def main(X: T.Tensor((Ms, N), dtype), I: T.Tensor((Ms, K), "int32"), Y: T.Tensor((Ms, K), dtype)):
        with T.Kernel(T.ceildiv(Ms, bm)) as bx:
            x = T.alloc_fragment((bm, N), dtype)
            idx = T.alloc_fragment((bm, K), "int32")
            y = T.alloc_fragment((bm, K), dtype)
            T.copy(X[bx * bm, 0], x)
            T.copy(I[bx * bm, 0], idx)
            for i, j in T.Parallel(bm, K):
                if case == "plain":
                    y[i, j] = x[i, idx[i, j]]  # @rows
                elif case == "reversed":
                    y[i, j] = x[i, N - 1 - idx[i, j]]
                else:  # "clamped_shifted": an index computed from the tile and the column
                    y[i, j] = x[i, T.min(T.max(idx[i, j] + j - 3, 0), N - 1)]
            T.copy(y, Y[bx * bm, 0])
    return tw.compile(main, target=target, out_idx=[-1])


def ref_rows(x, idx, case):
    N, K = x.shape[1], idx.shape[1]
    if case == "reversed":
        idx = N - 1 - idx
    elif case == "clamped_shifted":
        idx = np.clip(idx + np.arange(K)[None, :] - 3, 0, N - 1)
    return np.take_along_axis(x, idx.astype(np.int64), 1)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("case", ["plain", "reversed", "clamped_shifted"])
def test_gather_rows(case, dtype, target):
    M, N, K, bm = 19, 37, 21, 8  # row tail, odd widths (padded UB rows)
    k = rows_gather(M, N, K, bm, dtype, target, case)
    x, idx = data((M, N), dtype, 1), indices((M, K), N, 2)
    got = run(k, target, x, idx)
    np.testing.assert_array_equal(np.asarray(got), ref_rows(x, idx, case))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (3, 5, 2, 4), (0, 16, 8, 8), (9, 130, 70, 4)])
def test_gather_rows_odd_shapes(shape, target):
    M, N, K, bm = shape
    k = rows_gather(M, N, K, bm, "float32", target)
    x, idx = data((M, N), "float32", 3), indices((M, K), N, 4)
    np.testing.assert_array_equal(run(k, target, x, idx), ref_rows(x, idx, "plain"))


def vector_gather(N, K, dtype, target):
    """Y[j] = X[I[j]] on 1-D tiles."""
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), I: T.Tensor((K,), "int32"), Y: T.Tensor((K,), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), dtype)
            idx = T.alloc_fragment((K,), "int32")
            y = T.alloc_fragment((K,), dtype)
            T.copy(X[0], x)
            T.copy(I[0], idx)
            for j in T.Parallel(K):
                y[j] = x[idx[j]] * 2
            T.copy(y, Y[0])
    return tw.compile(main, target=target, out_idx=[-1])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("nk", [(1, 1), (100, 3), (7, 300)])
def test_gather_vector(nk, dtype, target):
    N, K = nk
    x, idx = data((N,), dtype, 5), indices((K,), N, 6)
    got = run(vector_gather(N, K, dtype, target), target, x, idx)
    np.testing.assert_array_equal(np.asarray(got), (x[idx] * 2).astype(x.dtype))


def label_pick(M, N, bm, target):
    """Y[r] = X[r, L[r]]: a 1-D map over rows reading one element of each row (cross-entropy's
    label logit): one gather over the whole tile."""
    Ms = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((Ms, N), "float32"), L: T.Tensor((Ms,), "int32"), Y: T.Tensor((Ms,), "float32")):
        with T.Kernel(T.ceildiv(Ms, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            lab = T.alloc_fragment((bm,), "int32")
            y = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(L[bx * bm], lab)
            for i in T.Parallel(bm):
                y[i] = x[i, lab[i]] + 1
            T.copy(y, Y[bx * bm])
    return tw.compile(main, target=target, out_idx=[-1])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 1, 1), (13, 29, 8), (40, 3, 16)])
def test_gather_one_per_row(shape, target):
    M, N, bm = shape
    x, lab = data((M, N), "float32", 7), indices((M,), N, 8)
    got = run(label_pick(M, N, bm, target), target, x, lab)
    np.testing.assert_array_equal(got, x[np.arange(M), lab] + 1)


def strided(M, D, bm, dtype, target):
    """Y[r, j] = X[r, 2j + 1] - X[r, 2j] (strided reads), Z interleaves them back:
    Z[r, 2j] = X[r, 2j + 1], Z[r, 2j + 1] = X[r, 2j] * 3 (strided stores)."""
    half = D // 2

    @T.prim_func
    def main(X: T.Tensor((M, D), dtype), Y: T.Tensor((M, half), dtype), Z: T.Tensor((M, D), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, D), dtype)
            y = T.alloc_fragment((bm, half), dtype)
            z = T.alloc_fragment((bm, D), dtype)
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, half):
                a = x[i, 2 * j]
                b = x[i, 2 * j + 1]
                y[i, j] = b - a
                z[i, 2 * j] = b
                z[i, 2 * j + 1] = a * 3
            T.copy(y, Y[bx * bm, 0])
            T.copy(z, Z[bx * bm, 0])
    return tw.compile(main, target=target, out_idx=[-2, -1])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(1, 2, 1), (21, 64, 8), (5, 22, 4)])
def test_strided_reads_and_interleaving_stores(shape, dtype, target):
    M, D, bm = shape
    x = data((M, D), dtype, 9)
    y, z = run(strided(M, D, bm, dtype, target), target, x)
    x64 = x.astype(np.float64)
    a, b = x64[:, 0::2], x64[:, 1::2]
    ref_z = np.empty_like(x64)
    ref_z[:, 0::2], ref_z[:, 1::2] = b, a * 3
    cast = lambda v: v.astype(np.float32).astype(np_dtype(dtype)).astype(np.float64)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(z).astype(np.float64), cast(ref_z))
    tw.testing.assert_close(np.asarray(y).astype(np.float64), b - a, atol=0, rtol=1e-2 if dtype != "float32" else 1e-6)


def test_gather_out_of_range_is_located_on_cpu():
    k = rows_gather(8, 16, 8, 8, "float32", "cpu")
    idx = indices((8, 8), 16, 10)
    idx[3, 5] = 16
    with pytest.raises(TilewrightError) as ei:
        k(data((8, 16), "float32", 11), idx)
    assert (ei.value.file, ei.value.line) == (THIS_FILE, marked_line(THIS_FILE, "@rows")[0]), str(ei.value)


@pytest.mark.parametrize("bad", [16, -1])
def test_gather_out_of_range_is_a_located_report_on_ascend(bad):
    k = rows_gather(8, 16, 8, 8, "float32", TARGET)
    idx = indices((8, 8), 16, 12)
    idx[3, 5] = bad
    reports = k.profile(data((8, 16), "float32", 13), idx)["reports"]
    assert reports, "expected an out-of-bounds report"
    head = f"{THIS_FILE}:{marked_line(THIS_FILE, '@rows')[0]}:"
    assert reports[0].startswith(head) and "Gather srcOffset[5]" in reports[0], reports[0]
    assert "outside the tile's dimension" in reports[0], reports[0]


def test_scatter_is_a_located_error_on_ascend():
    @T.prim_func
    def scatter(X: T.Tensor((16,), "float32"), I: T.Tensor((16,), "int32"), Y: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((16,), "float32")
            idx = T.alloc_fragment((16,), "int32")
            y = T.alloc_fragment((16,), "float32")
            T.copy(X[0], x)
            T.copy(I[0], idx)
            T.clear(y)
            for j in T.Parallel(16):
                y[idx[j]] = x[j]  # @scatter
            T.copy(y, Y[0])
    with pytest.raises(TilewrightError) as ei:
        tw.compile(scatter, target=TARGET, out_idx=[-1])
    assert "(a scatter): Ascend has no scatter instruction" in ei.value.message
    assert ei.value.line == marked_line(THIS_FILE, "@scatter")[0]


def test_gather_of_int8_is_a_located_error_on_ascend():
    @T.prim_func
    def g8(X: T.Tensor((32,), "int8"), I: T.Tensor((32,), "int32"), Y: T.Tensor((32,), "int8")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((32,), "int8")
            idx = T.alloc_fragment((32,), "int32")
            y = T.alloc_fragment((32,), "int8")
            T.copy(X[0], x)
            T.copy(I[0], idx)
            for j in T.Parallel(32):
                y[j] = x[idx[j]]  # @g8
            T.copy(y, Y[0])
    with pytest.raises(TilewrightError) as ei:
        tw.compile(g8, target=TARGET, out_idx=[-1])
    assert "Gather takes 16- and 32-bit elements, not int8" in ei.value.message
    assert ei.value.line == marked_line(THIS_FILE, "@g8")[0]


def mixed(case, target):
    """rowidx: a per-row start plus the column (y[i, j] = x[i, r[i] + j]: offsets from a row
    vector and the iota); vec: a 2-D map gathering from a 1-D tile (every row reads the same one)."""
    @T.prim_func
    def main(X: T.Tensor((8, 40), "float32"), V: T.Tensor((40,), "float32"), I: T.Tensor((8, 16), "int32"),
             R: T.Tensor((8,), "int32"), Y: T.Tensor((8, 16), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, 40), "float32")
            v = T.alloc_fragment((40,), "float32")
            idx = T.alloc_fragment((8, 16), "int32")
            r = T.alloc_fragment((8,), "int32")
            y = T.alloc_fragment((8, 16), "float32")
            T.copy(X, x)
            T.copy(V, v)
            T.copy(I, idx)
            T.copy(R, r)
            for i, j in T.Parallel(8, 16):
                if case == "rowidx":
                    y[i, j] = x[i, r[i] + j]
                else:
                    y[i, j] = v[idx[i, j]] + x[i, j]
            T.copy(y, Y)
    return tw.compile(main, target=target, out_idx=[-1])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ["rowidx", "vec"])
def test_gather_row_start_and_vector_source(case, target):
    x, v = data((8, 40), "float32", 14), data((40,), "float32", 15)
    idx = indices((8, 16), 24, 16)
    r = idx[:, 0].copy()
    got = run(mixed(case, target), target, x, v, idx, r)
    ref = np.take_along_axis(x, r[:, None] + np.arange(16)[None, :], 1) if case == "rowidx" else v[idx] + x[:, :16]
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("target", TARGETS)
def test_gather_after_a_store_to_its_index_tile(target):
    """The map first rewrites the index tile, then two stores gather with it: the gather reads the
    new indices (it is not done once ahead of the stores)."""
    @T.prim_func
    def main(X: T.Tensor((8, 24), "float32"), I: T.Tensor((8, 16), "int32"), Y: T.Tensor((8, 16), "float32"),
             W: T.Tensor((8, 16), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, 24), "float32")
            idx = T.alloc_fragment((8, 16), "int32")
            y = T.alloc_fragment((8, 16), "float32")
            w = T.alloc_fragment((8, 16), "float32")
            T.copy(X, x)
            T.copy(I, idx)
            for i, j in T.Parallel(8, 16):
                idx[i, j] = 23 - idx[i, j]
                y[i, j] = x[i, idx[i, j]]
                w[i, j] = x[i, idx[i, j]] * 2
            T.copy(y, Y)
            T.copy(w, W)
    k = tw.compile(main, target=target, out_idx=[-2, -1])
    x, idx = data((8, 24), "float32", 17), indices((8, 16), 24, 18)
    y, w = run(k, target, x, idx)
    ref = np.take_along_axis(x, 23 - idx, 1)
    np.testing.assert_array_equal(y, ref)
    np.testing.assert_array_equal(w, ref * 2)
