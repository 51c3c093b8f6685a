"""N-D tiles on ascend910b (session 22, h-port10a; hunt9a F16, F3, F4): a T.Parallel map over a
tile of more than 2 dims, T.reduce_* over any axis of a 3-D / 4-D tile, and T.copy between a 1-D
tile and a 2-D window -- each on cpu and on ascend910b (simulator, checker on) against a float64
numpy reference, in float32 / float16 / int32 (bfloat16 where the op takes it), at odd shapes (one
element, tails, dims of 1). Inputs are small integers, so every result is exact (tolerance 0);
float16 sums of at most 2^11 / 8 terms of |x| <= 8 stay exact too. Where a form still cannot run on
ascend910b, the error is located and names the form that runs.

Coverage of the 3-D reduction: every value of each of its four axes (shape, dtype, axis, kind) and
every pair of values of any two of them (tw_test_util.pairwise: 20 cases a target), each on both
targets -- not their full product (162 a target; session 23, CI time)."""
import os
import sys
import pathlib

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import located, pairwise, small_ints  # noqa: E402

TARGETS = ["cpu", TARGET]
HERE = os.path.abspath(__file__)


def _run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def _exact(out, ref):
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64), np.asarray(ref, np.float64))


# ---------------------------------------------------------------------------------------------
# F16: a map over a 3-D / 4-D tile: x = x * sc[h] + d (a per-head scale, the column index as a
# value), and y = x + x * x over a 4-D tile (every dim a loop)

def map_3d(S, H, D, bs, dtype):
    @T.prim_func
    def main(X: T.Tensor((S, H, D), dtype), Sc: T.Tensor((H,), dtype), Y: T.Tensor((S, H, D), dtype)):
        with T.Kernel(T.ceildiv(S, bs)) as bx:
            x = T.alloc_fragment((bs, H, D), dtype)
            sc = T.alloc_fragment((H,), dtype)
            T.copy(X[bx * bs:(bx + 1) * bs, 0:H, 0:D], x)
            T.copy(Sc, sc)
            for s, h, d in T.Parallel(bs, H, D):
                x[s, h, d] = x[s, h, d] * sc[h] + d
            T.copy(x, Y[bx * bs:(bx + 1) * bs, 0:H, 0:D])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("S,H,D,bs,dtype", [(1, 1, 1, 1, "float32"), (13, 3, 16, 4, "float32"), (7, 2, 37, 8, "float16"),
                                             (5, 4, 8, 2, "int32"), (3, 1, 5, 4, "float16"), (2, 5, 1, 1, "int32")])
def test_map_over_3d_tile(S, H, D, bs, dtype, target):
    x, sc = small_ints((S, H, D), dtype, 1), small_ints((H,), dtype, 2)
    y = _run(tw.compile(map_3d(S, H, D, bs, dtype), target=target, out_idx=[2]), target, x, sc)
    _exact(y, x.astype(np.float64) * sc.astype(np.float64)[None, :, None] + np.arange(D)[None, None, :])


def map_4d(A, B, C, D, dtype):
    @T.prim_func
    def main(X: T.Tensor((A, B, C, D), dtype), Y: T.Tensor((A, B, C, D), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((A, B, C, D), dtype)
            y = T.alloc_fragment((A, B, C, D), dtype)
            T.copy(X, x)
            for a, b, c, d in T.Parallel(A, B, C, D):
                y[a, b, c, d] = x[a, b, c, d] + x[a, b, c, d] * x[a, b, c, d]
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,dtype", [((2, 3, 4, 5), "float32"), ((1, 2, 1, 17), "float16"), ((3, 1, 2, 8), "int32")])
def test_map_over_4d_tile(shape, dtype, target):
    x = small_ints(shape, dtype, 3)
    y = _run(tw.compile(map_4d(*shape, dtype), target=target, out_idx=[1]), target, x)
    xf = x.astype(np.float64)
    _exact(y, xf + xf * xf)


# ---------------------------------------------------------------------------------------------
# F3: T.reduce_sum / reduce_max / reduce_min over every axis of a 3-D tile (and of a 4-D one)

def reduce_nd(shape, dtype, dim, kind):
    out_shape = tuple(e for i, e in enumerate(shape) if i != dim)
    op = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min}[kind]

    @T.prim_func
    def main(X: T.Tensor(shape, dtype), Y: T.Tensor(out_shape, dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment(shape, dtype)
            y = T.alloc_fragment(out_shape, dtype)
            T.copy(X, x)
            op(x, y, dim=dim)
            T.copy(y, Y)
    return main


REDUCE_SHAPES = [(3, 13, 37), (5, 4, 16), (1, 7, 3), (4, 1, 9), (1, 1, 1), (6, 2, 1)]


# Every pair of (shape, dtype, axis, kind) values, each on both targets (20 cases a target, not
# the 162 of the full product: tw_test_util.pairwise)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,dtype,dim,kind", pairwise(REDUCE_SHAPES, ["float32", "float16", "int32"], [0, 1, 2],
                                                          ["sum", "max", "min"]))
def test_reduce_3d_tile(shape, dtype, dim, kind, target):
    x = small_ints(shape, dtype, 4, -8, 9)
    y = _run(tw.compile(reduce_nd(shape, dtype, dim, kind), target=target, out_idx=[1]), target, x)
    _exact(y, getattr(np, kind)(x.astype(np.float64), axis=dim))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dim", [0, 1, 2, 3])
@pytest.mark.parametrize("shape,dtype", [((2, 3, 5, 7), "float32"), ((3, 2, 1, 20), "bfloat16")])
def test_reduce_4d_tile(shape, dtype, dim, target):
    x = small_ints(shape, dtype, 5, -8, 9)
    y = _run(tw.compile(reduce_nd(shape, dtype, dim, "sum"), target=target, out_idx=[1]), target, x)
    _exact(y, x.astype(np.float64).sum(axis=dim))


# ---------------------------------------------------------------------------------------------
# F4: T.copy between a 1-D tile and a 2-D window, both directions; a window inside a wider tensor
# (rows apart in GM) whose rows are a multiple of 32 B; and the located error where they are not

def copy_1d_2d(R, C, W, dtype, how):
    @T.prim_func
    def store(X: T.Tensor((R * C,), dtype), Y: T.Tensor((R, W), dtype)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R * C,), dtype)
            T.copy(X, y)
            T.copy(y, Y[0:R, 0:C])  # @store

    @T.prim_func
    def load(X: T.Tensor((R, W), dtype), Y: T.Tensor((R * C,), dtype)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R * C,), dtype)
            T.copy(X[0:R, 0:C], y)  # @load
            T.copy(y, Y)
    return load if how == "load" else store


COPY_CASES = [(3, 8, "float32"), (5, 4, "float16"), (2, 3, "int32"), (1, 7, "float32"), (4, 1, "float16"),
              (1, 1, "int32"), (6, 16, "float16")]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("how", ["store", "load"])
@pytest.mark.parametrize("R,C,dtype", COPY_CASES)
def test_copy_1d_tile_and_whole_2d_window(R, C, dtype, how, target):
    x = small_ints(R * C, dtype, 6, -8, 9)
    k = tw.compile(copy_1d_2d(R, C, C, dtype, how), target=target, out_idx=[1])
    if how == "load":
        _exact(_run(k, target, x.reshape(R, C)), x)
    else:
        _exact(_run(k, target, x), x.reshape(R, C))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("R,C,W,dtype", [(3, 8, 11, "float32"), (2, 16, 20, "float16"), (5, 8, 9, "int32")])
def test_copy_1d_tile_and_2d_window_of_wider_rows(R, C, W, dtype, target):
    x = small_ints((R, W), dtype, 7, -8, 9)
    y = _run(tw.compile(copy_1d_2d(R, C, W, dtype, "load"), target=target, out_idx=[1]), target, x)
    _exact(y, x[:, :C].reshape(-1))


@pytest.mark.parametrize("how", ["store", "load"])
@pytest.mark.parametrize("R,C,W,dtype", [(3, 3, 5, "float32"), (2, 4, 7, "float16")])
def test_copy_1d_tile_and_misaligned_rows_is_located(R, C, W, dtype, how):
    located(lambda: tw.compile(copy_1d_2d(R, C, W, dtype, how), target=TARGET, out_idx=[1]), HERE, "@" + how,
            "not a multiple of 32 B", f"2-D tile of its shape, ({R}, {C})", "T.copy between that tile and the 1-D one")


# ---------------------------------------------------------------------------------------------
# UB -> UB: a 1-D tile and a window of a 2-D tile whose rows are not one run of UB (padded rows,
# or a window narrower than the tile): convert_copies' reshape gathers, both directions

def ub_reshape(R, C, W, r0, c0, s0, dtype):
    n = s0 + R * C

    @T.prim_func
    def main(X: T.Tensor((R + r0, W), dtype), V: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype),
             Z: T.Tensor((R + r0, W), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R + r0, W), dtype)
            v = T.alloc_fragment((n,), dtype)
            T.copy(X, x)
            T.copy(V, v)
            T.copy(x[r0:r0 + R, c0:c0 + C], v[s0:n])       # 2-D window -> 1-D
            T.copy(v, Y)
            T.copy(v[0:R * C], x[r0:r0 + R, c0:c0 + C])     # 1-D -> 2-D window
            T.copy(x, Z)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("R,C,W,r0,c0,s0,dtype", [(3, 5, 5, 0, 0, 0, "float32"), (4, 3, 3, 0, 0, 0, "float16"),
                                                  (2, 7, 7, 0, 0, 0, "int32"), (2, 5, 16, 1, 8, 8, "float32"),
                                                  (3, 8, 40, 2, 16, 16, "float16"), (2, 8, 10, 0, 0, 8, "int32")])
def test_ub_copy_between_1d_tile_and_2d_window(R, C, W, r0, c0, s0, dtype, target):
    x, v = small_ints((R + r0, W), dtype, 8, -8, 9), small_ints((s0 + R * C,), dtype, 9, -8, 9)
    k = tw.compile(ub_reshape(R, C, W, r0, c0, s0, dtype), target=target, out_idx=[2, 3])
    y, z = _run(k, target, x, v)
    y_ref = v.copy()
    y_ref[s0:] = x[r0:r0 + R, c0:c0 + C].reshape(-1)
    z_ref = x.copy()
    z_ref[r0:r0 + R, c0:c0 + C] = y_ref[:R * C].reshape(R, C)
    _exact(y, y_ref)
    _exact(z, z_ref)


# ---------------------------------------------------------------------------------------------
# GM <-> UB: a window of an N-D tile that is not one run of rows (x[1:3, 1:4, :] of a (4, 5, 16)
# tile): convert_copies' serial loop over its first non-unit dim, both directions

def sub_window(shape, lo, hi, dtype):
    win = tuple(b - a for a, b in zip(lo, hi)) + (shape[-1],)
    a0, a1, b0, b1 = lo[0], hi[0], lo[1], hi[1]
    c0, c1 = (lo[2], hi[2]) if len(lo) > 2 else (0, 1)
    N = shape[-1]

    def three():
        @T.prim_func
        def main(X: T.Tensor(shape, dtype), Y: T.Tensor(win, dtype), Z: T.Tensor(shape, dtype)):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment(shape, dtype)
                T.copy(X, x)
                T.copy(x[a0:a1, b0:b1, 0:N], Y)          # a store of the sub-window
                T.fill(x, 0)
                T.copy(Y, x[a0:a1, b0:b1, 0:N])          # a load into it
                T.copy(x, Z)
        return main

    def four():
        @T.prim_func
        def main(X: T.Tensor(shape, dtype), Y: T.Tensor(win, dtype), Z: T.Tensor(shape, dtype)):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment(shape, dtype)
                T.copy(X, x)
                T.copy(x[a0:a1, b0:b1, c0:c1, 0:N], Y)
                T.fill(x, 0)
                T.copy(Y, x[a0:a1, b0:b1, c0:c1, 0:N])
                T.copy(x, Z)
        return main
    return three() if len(shape) == 3 else four()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,lo,hi,dtype", [((4, 5, 16), (1, 1), (3, 4), "float32"), ((3, 6, 7), (0, 2), (3, 5), "float16"),
                                               ((5, 3, 8), (2, 0), (5, 2), "int32"),
                                               ((2, 3, 4, 8), (0, 1, 1), (2, 3, 3), "float32")])
def test_copy_of_an_nd_sub_window(shape, lo, hi, dtype, target):
    x = small_ints(shape, dtype, 10, -8, 9)
    y, z = _run(tw.compile(sub_window(shape, lo, hi, dtype), target=target, out_idx=[1, 2]), target, x)
    sl = tuple(slice(a, b) for a, b in zip(lo, hi))
    _exact(y, x[sl])
    z_ref = np.zeros_like(x)
    z_ref[sl] = x[sl]
    _exact(z, z_ref)
