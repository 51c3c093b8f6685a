"""T.where on tile data (issue 13): the condition compares tile values (x > 0, mask[i, j] != 0,
x == y, with `and` / `or` / `not`, mixed with index conditions); the values are tiles or scalars.
cpu: plain C++ (vectorised selects); ascend910b: Compare / CompareScalar into a bit mask, then
Select (the simulator with the checker on: zero reports). Every case against a numpy reference with
fixed seeds, in float32, float16 and bfloat16, on odd shapes (tails, one element, empty). A
comparison with NaN is false (`!=`: true), as in numpy."""
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

from tilewright.testing import np_dtype  # noqa: E402
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]
DTYPES = ["float32", "float16", "bfloat16"]
NEG_INF = float("-inf")


def run(kernel, target, *inputs):
    return kernel(*inputs) if target == "cpu" else run_checked(kernel, *inputs)


def as_f64(x):
    return np.asarray(x).astype(np.float64)


def data(shape, dtype, seed, nan=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    if nan and x.size:
        x.flat[:: max(1, x.size // 5)] = np.nan
    return x.astype(np_dtype(dtype))


def elementwise(M, N, bm, bn, dtype, target, case, mask_dtype="uint8"):
    """Y = the case's T.where over bm x bn tiles of M x N inputs X, Z (dtype) and a mask tensor
    (M = 0: a symbolic row count, so an empty input can be passed)."""
    M = T.symbolic("M") if M == 0 else M

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype), Msk: T.Tensor((M, N), mask_dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), dtype)
            z = T.alloc_fragment((bm, bn), dtype)
            m = T.alloc_fragment((bm, bn), mask_dtype)
            y = T.alloc_fragment((bm, bn), dtype)
            T.copy(X[by * bm, bx * bn], x)
            T.copy(Z[by * bm, bx * bn], z)
            T.copy(Msk[by * bm, bx * bn], m)
            for i, j in T.Parallel(bm, bn):
                if case == "relu":
                    y[i, j] = T.where(x[i, j] > 0, x[i, j], 0)
                elif case == "masked_fill":
                    y[i, j] = T.where(m[i, j] != 0, x[i, j], NEG_INF)
                elif case == "tiles_both_sides":
                    y[i, j] = T.where(x[i, j] >= z[i, j], x[i, j] * 2, z[i, j])
                elif case == "scalar_first":
                    y[i, j] = T.where(x[i, j] < z[i, j], 1.5, z[i, j])
                elif case == "equal":
                    y[i, j] = T.where(x[i, j] == z[i, j], 0, x[i, j])
                elif case == "nested":
                    y[i, j] = T.where(x[i, j] > 0, T.where(z[i, j] > 0, x[i, j], z[i, j]), -1.0)
                elif case == "and_or":
                    y[i, j] = T.where((x[i, j] > 0 and z[i, j] < 0.5) or m[i, j] == 1, z[i, j], x[i, j])
                elif case == "not":
                    y[i, j] = T.where(not (x[i, j] > z[i, j]), x[i, j], 0.25)
                elif case == "data_and_index":
                    y[i, j] = T.where(bx * bn + j < 11 and x[i, j] > 0, x[i, j], 0)
                elif case == "nan_gt":
                    y[i, j] = T.where(x[i, j] > 0, x[i, j], z[i, j])
                elif case == "nan_ne":
                    y[i, j] = T.where(x[i, j] != x[i, j], 7.0, x[i, j])
                elif case == "if_then_else":
                    y[i, j] = T.if_then_else(x[i, j] <= z[i, j], z[i, j], x[i, j] - z[i, j])
                elif case == "mask_ne":
                    y[i, j] = T.where(m[i, j] != 0, x[i, j], z[i, j])
                else:  # "bool_mask": a bool mask value as the condition
                    y[i, j] = T.where(m[i, j], x[i, j], z[i, j])
            T.copy(y, Y[by * bm, bx * bn])
    return tw.compile(main, target=target, out_idx=[-1])


CASES = {  # numpy references on float64 x, z, mask and the global column index c
    "relu": lambda x, z, m, c: np.where(x > 0, x, 0),
    "masked_fill": lambda x, z, m, c: np.where(m != 0, x, -np.inf),
    "tiles_both_sides": lambda x, z, m, c: np.where(x >= z, x * 2, z),
    "scalar_first": lambda x, z, m, c: np.where(x < z, 1.5, z),
    "equal": lambda x, z, m, c: np.where(x == z, 0, x),
    "nested": lambda x, z, m, c: np.where(x > 0, np.where(z > 0, x, z), -1.0),
    "and_or": lambda x, z, m, c: np.where(((x > 0) & (z < 0.5)) | (m == 1), z, x),
    "not": lambda x, z, m, c: np.where(~(x > z), x, 0.25),
    "data_and_index": lambda x, z, m, c: np.where((c < 11) & (x > 0), x, 0),
    "if_then_else": lambda x, z, m, c: np.where(x <= z, z, x - z),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_where_on_data(case, dtype, target):
    M, N, bm, bn = 19, 40, 8, 16  # row and column tails
    k = elementwise(M, N, bm, bn, dtype, target, case)
    x, z = data((M, N), dtype, 1), data((M, N), dtype, 2)
    z.flat[::7] = x.flat[::7]  # some equal pairs
    m = (np.random.default_rng(3).random((M, N)) < 0.5).astype(np.uint8)
    got = as_f64(run(k, target, x, z, m))
    cols = np.broadcast_to(np.arange(N), (M, N))
    ref = CASES[case](as_f64(x), as_f64(z), as_f64(m), cols)
    ref = as_f64(ref.astype(np.float32).astype(np_dtype(dtype)))  # stored in dtype (selects copy; 2 * x is exact)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (5, 3, 4, 3), (0, 16, 8, 16), (2, 129, 2, 136)])
def test_where_odd_shapes(shape, target):
    M, N, bm, bn = shape
    k = elementwise(M, N, bm, bn, "float32", target, "tiles_both_sides")
    x, z = data((M, N), "float32", 4), data((M, N), "float32", 5)
    m = np.zeros((M, N), np.uint8)
    got = run(k, target, x, z, m)
    np.testing.assert_array_equal(as_f64(got), np.where(x >= z, 2 * as_f64(x), z))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_where_nan_compares_false(dtype, target):
    """x > 0 is false for NaN, x != x is true: NaN elements pick the other value."""
    M, N, bm, bn = 8, 32, 8, 32
    x, z = data((M, N), dtype, 6, nan=True), data((M, N), dtype, 7)
    m = np.zeros((M, N), np.uint8)
    assert np.isnan(x.astype(np.float32)).any()
    got = run(elementwise(M, N, bm, bn, dtype, target, "nan_gt"), target, x, z, m)
    np.testing.assert_array_equal(as_f64(got), np.where(as_f64(x) > 0, as_f64(x), as_f64(z)))
    got = run(elementwise(M, N, bm, bn, dtype, target, "nan_ne"), target, x, z, m)
    np.testing.assert_array_equal(as_f64(got), np.where(np.isnan(as_f64(x)), 7.0, as_f64(x)))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mask_dtype", ["int8", "uint8"])
def test_integer_mask_tiles(mask_dtype, target):
    M, N, bm, bn = 16, 64, 16, 64
    x, z = data((M, N), "float16", 8), data((M, N), "float16", 9)
    m = np.random.default_rng(10).integers(-2 if mask_dtype == "int8" else 0, 3, (M, N)).astype(mask_dtype)
    got = run(elementwise(M, N, bm, bn, "float16", target, "mask_ne", mask_dtype), target, x, z, m)
    np.testing.assert_array_equal(as_f64(got), np.where(m != 0, as_f64(x), as_f64(z)))


@pytest.mark.parametrize("target", TARGETS)
def test_bool_mask_tiles(target):
    """A bool mask tile as the condition (Ascend: its 0 / 1 bytes compared as uint8)."""
    M, N, bm, bn = 10, 24, 8, 16
    x, z = data((M, N), "float32", 13), data((M, N), "float32", 14)
    m = np.random.default_rng(15).random((M, N)) < 0.5
    got = run(elementwise(M, N, bm, bn, "float32", target, "bool_mask", "bool"), target, x, z, m)
    np.testing.assert_array_equal(got, np.where(m, x, z))


def bool_tile_vs_scalar_bool_kernel(form):
    @T.prim_func
    def main(X: T.Tensor((16, 64), "float32"), B: T.Tensor((16, 64), "bool"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((8, 64), "float32")
            b = T.alloc_fragment((8, 64), "bool")
            T.copy(X[bx * 8, 0], x)
            T.copy(B[bx * 8, 0], b)
            for i, j in T.Parallel(8, 64):
                if form == "scalar":
                    x[i, j] = T.where(b[i, j] != (bx > 0), x[i, j], 0)
                else:
                    x[i, j] = T.where(b[i, j] != (x[i, j] > 0), x[i, j], 0)
            T.copy(x, Y[bx * 8, 0])
    return main


def test_bool_tile_compared_with_a_scalar_bool_on_ascend():
    """A loaded bool tile compared with a scalar bool (a block-index condition): the scalar meets the
    mask's 0 / 1 bytes as a uint8 0 / 1 (session 28, hunt17 F3; it was the error below)."""
    x = data((16, 64), "float32", 21)
    m = np.random.default_rng(22).random((16, 64)) < 0.5
    got = run_checked(tw.compile(bool_tile_vs_scalar_bool_kernel("scalar"), target=TARGET, out_idx=[-1]), x, m)
    ref = np.where(m != (np.arange(16) >= 8)[:, None], x, 0)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(tw.compile(bool_tile_vs_scalar_bool_kernel("scalar"), out_idx=[-1])(x, m), ref)


def test_computed_bool_condition_error_on_ascend():
    """Only loaded bool tiles (and scalars) are masks on Ascend; a bool computed from tile data compared
    with one is an error whose hint names what to write instead."""
    with pytest.raises(TilewrightError, match="no bool vector arithmetic") as e:
        tw.compile(bool_tile_vs_scalar_bool_kernel("tile"), target=TARGET, out_idx=[-1])
    assert "T.where(m[i, j], ...)" in e.value.hint


def test_ascendc_prints_compare_and_select():
    src = elementwise(16, 64, 16, 64, "float32", TARGET, "masked_fill").get_source("ascendc")
    assert "CompareScalar(" in src and "CMPMODE::NE" in src
    assert "SELMODE::VSEL_TENSOR_SCALAR_MODE" in src
    src = elementwise(16, 64, 16, 64, "float32", TARGET, "tiles_both_sides").get_source("ascendc")
    assert "Compare(" in src and "CMPMODE::GE" in src and "SELMODE::VSEL_TENSOR_TENSOR_MODE" in src


# ---- masked softmax --------------------------------------------------------------------------

def masked_softmax(M, N, bm, dtype, mask_dtype, target):
    """Row softmax of S over the columns where Mask is true (bool) or nonzero (uint8); a fully
    masked row gives 0."""
    @T.prim_func
    def main(S: T.Tensor((M, N), dtype), Mask: T.Tensor((M, N), mask_dtype), P: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            s = T.alloc_fragment((bm, N), dtype)
            f = T.alloc_fragment((bm, N), "float32")
            msk = T.alloc_fragment((bm, N), mask_dtype)
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            T.copy(S[bx * bm, 0], s)
            T.copy(Mask[bx * bm, 0], msk)
            for i, j in T.Parallel(bm, N):
                if mask_dtype == "bool":
                    f[i, j] = T.where(msk[i, j], s[i, j], NEG_INF)
                else:
                    f[i, j] = T.where(msk[i, j] != 0, s[i, j], NEG_INF)
            T.reduce_max(f, mx, dim=1)
            for i in T.Parallel(bm):
                mx[i] = T.max(mx[i], -1.0e30)  # a fully masked row: exp(-inf - (-1e30)) = 0
            for i, j in T.Parallel(bm, N):
                f[i, j] = T.exp(f[i, j] - mx[i])
            T.reduce_sum(f, sm, dim=1)
            for i in T.Parallel(bm):
                sm[i] = T.where(sm[i] > 0, 1.0 / sm[i], 0.0)
            for i, j in T.Parallel(bm, N):
                s[i, j] = f[i, j] * sm[i]
            T.copy(s, P[bx * bm, 0])
    return tw.compile(main, target=target, out_idx=[-1])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mask_dtype", ["bool", "uint8"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_softmax(dtype, mask_dtype, target):
    M, N, bm = 20, 48, 8
    s = data((M, N), dtype, 11)
    mask = np.random.default_rng(12).random((M, N)) < 0.6
    mask[3] = False  # a fully masked row
    got = as_f64(run(masked_softmax(M, N, bm, dtype, mask_dtype, target), target, s, mask.astype(mask_dtype)))
    x = np.where(mask, as_f64(s), -np.inf)
    mx = np.maximum(x.max(axis=1, keepdims=True), -1e30)
    e = np.exp(x - mx)
    tot = e.sum(axis=1, keepdims=True)
    ref = np.where(tot > 0, e / np.where(tot > 0, tot, 1), 0)
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]  # the output's rounding
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    assert (got[3] == 0).all()


# ---- element counts that are not a multiple of a repeat ----------------------------------------

def where_counts_kernel(shape, dtype, target, in_place=False):
    """y = where(x > z, x, z) over one tile of 1-D `shape` (in place: x = where(x > 0, x, 0));
    y = where(x > z, x - z, z) over a 2-D one."""
    if len(shape) == 2:
        M, N = shape

        @T.prim_func
        def main2(X: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((M, N), dtype)
                z = T.alloc_fragment((M, N), dtype)
                y = T.alloc_fragment((M, N), dtype)
                T.copy(X[0, 0], x)
                T.copy(Z[0, 0], z)
                for i, j in T.Parallel(M, N):
                    y[i, j] = T.where(x[i, j] > z[i, j], x[i, j] - z[i, j], z[i, j])
                T.copy(y, Y[0, 0])
        return tw.compile(main2, target=target, out_idx=[-1])
    n = shape[0]

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Z: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), dtype)
            T.copy(X[0], x)
            if in_place:
                for i in T.Parallel(n):
                    x[i] = T.where(x[i] > 0, x[i], 0)
                T.copy(x, Y[0])
            else:
                z = T.alloc_fragment((n,), dtype)
                y = T.alloc_fragment((n,), dtype)
                T.copy(Z[0], z)
                for i in T.Parallel(n):
                    y[i] = T.where(x[i] > z[i], x[i], z[i])
                T.copy(y, Y[0])
    return tw.compile(main, target=target, out_idx=[-1])


def counts_data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(np_dtype(dtype))


# Compare writes 8 (float32) or 16 (float16) bytes of bit mask a repeat; Compare and Select address
# the mask 32 B aligned. Counts around a repeat (64 float32 elements) and past 252 repeats (the
# largest whole-32 B number of repeats in one call); 2-D tiles take the contiguous pass, or one pass
# per row when rows are padded.
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("shape", [(1,), (63,), (64,), (65,), (127,), (200,), (3, 65), (2, 200), (5, 1)])
def test_where_on_data_counts_cpu_vs_ascend(shape, dtype):
    x, z = counts_data(shape, dtype, 21), counts_data(shape, dtype, 22)
    z.flat[::5] = x.flat[::5]  # equal pairs pick z
    xf, zf = as_f64(x), as_f64(z)
    ref = np.where(xf > zf, xf, zf) if len(shape) == 1 else np.where(xf > zf, xf - zf, zf)
    ref = ref.astype(np_dtype(dtype) if dtype != "int32" else np.int32)
    got = {t: run(where_counts_kernel(shape, dtype, t), t, x, z) for t in TARGETS}
    np.testing.assert_array_equal(got["cpu"], ref)
    np.testing.assert_array_equal(got[TARGET], got["cpu"])


@pytest.mark.parametrize("dtype,n", [("float32", 252 * 64 + 65), ("float16", 252 * 128 + 129)])
def test_where_on_data_past_one_compare_call(dtype, n):
    x = counts_data((n,), dtype, 23)
    ref = np.where(as_f64(x) > 0, as_f64(x), 0).astype(np_dtype(dtype))
    got = {t: run(where_counts_kernel((n,), dtype, t, in_place=True), t, x, x) for t in TARGETS}
    np.testing.assert_array_equal(got["cpu"], ref)
    np.testing.assert_array_equal(got[TARGET], got["cpu"])
