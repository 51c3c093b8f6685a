"""Session 25 (h-pipecol13): tile reads whose lowering depends on the tile's index rank, inside
T.Pipelined loops. multi_buffer gives every staged tile a leading stage index (x[i, 7] becomes
x[stage, i, 7]); a form that runs in a T.serial loop must run the same with num_stages=2 and 3, on
tiles allocated inside the loop and before it (staged too when their value lives within one
iteration). Each case runs on cpu and on ascend910b (simulator, checker on); values are small
integers and halves, so every result is exact in float16, bfloat16 and float32 and both targets
must equal the float64 reference exactly. fuzz12 F1 (a scan's carry column, cy[i] = x[i, 7]) was
the first: the column became a flat gather that select_instructions matched only on 2-D tiles."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import run_checked
from tw_test_util import pairwise

DTYPES = ["float16", "bfloat16", "float32"]
LOOPS = [0, 2, 3]  # 0: T.serial; else T.Pipelined(num_stages=n)
LOOP_IDS = ["serial", "stages2", "stages3"]
_PLACES = {False: "inside", True: "before"}


def _covering(*axes):
    """Every pair of values of any two axes (tw_test_util.pairwise; session 27, h-citrim15: CI time,
    not the full product). Each axis is {value: id}; a case's id joins its values' ids."""
    return [pytest.param(*(v for v, _ in row), id="-".join(i for _, i in row))
            for row in pairwise(*[list(a.items()) for a in axes])]


def _run(kernel_of, target, *args):
    k = tw.compile(kernel_of, target=target, out_idx=[-1])
    return np.asarray(k(*args) if target == "cpu" else run_checked(k, *args), np.float64)


def _halves(shape, dtype, seed):
    v = np.random.default_rng(seed).integers(-6, 7, shape) / 2.0
    return v.astype(tw.testing.np_dtype(dtype))


# --- the scan's carry (fuzz12 F1): cumsum along rows of 8 x 8 blocks, the carry a 1-D tile -------

def _scan(M, N, dtype, stages, before):
    NB = T.ceildiv(N, 8)

    @T.prim_func
    def k(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, 8)) as by:
            if before:
                x = T.alloc_fragment((8, 8), dtype)
            cy = T.alloc_fragment((8,), dtype)
            T.fill(cy, 0)
            if stages == 0:
                for k in T.serial(NB):
                    if not before:
                        x = T.alloc_fragment((8, 8), dtype)
                    T.copy(X[by * 8, k * 8], x)
                    for i in T.Parallel(8):
                        x[i, 0] = x[i, 0] + cy[i]
                    for j in T.serial(1, 8):
                        for i in T.Parallel(8):
                            x[i, j] = x[i, j] + x[i, j - 1]
                    for i in T.Parallel(8):
                        cy[i] = x[i, 7]
                    T.copy(x, Y[by * 8, k * 8])
            else:
                for k in T.Pipelined(NB, num_stages=stages):
                    if not before:
                        x = T.alloc_fragment((8, 8), dtype)
                    T.copy(X[by * 8, k * 8], x)
                    for i in T.Parallel(8):
                        x[i, 0] = x[i, 0] + cy[i]
                    for j in T.serial(1, 8):
                        for i in T.Parallel(8):
                            x[i, j] = x[i, j] + x[i, j - 1]
                    for i in T.Parallel(8):
                        cy[i] = x[i, 7]
                    T.copy(x, Y[by * 8, k * 8])
    return k


@pytest.mark.parametrize("before", [False, True], ids=["inside", "before"])
@pytest.mark.parametrize("stages", LOOPS, ids=LOOP_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scan_carry_column(dtype, stages, before):
    """cumsum of 15 x 24 rows (a row tail: 15 = 8 + 7) in 8 x 8 blocks, the carry the block's last
    column; exact (sums of at most 24 halves of magnitude <= 3 stay exact in float16 / bfloat16)."""
    M, N = 15, 24
    x = _halves((M, N), dtype, 1)
    ref = np.cumsum(x.astype(np.float64), axis=1)
    if dtype != "float32":
        ref = ref.astype(tw.testing.np_dtype(dtype)).astype(np.float64)
    for target in ("cpu", "ascend910b"):
        np.testing.assert_array_equal(_run(_scan(M, N, dtype, stages, before), target, x), ref, err_msg=target)


# --- a column of a staged tile into a 1-D tile, each block's column stored as a row of C --------

def _column(M, NB, dtype, stages, before, col):
    @T.prim_func
    def k(X: T.Tensor((M, NB * 8), dtype), C: T.Tensor((NB, M), dtype)):
        with T.Kernel(1) as by:
            if before:
                x = T.alloc_fragment((8, 8), dtype)
                cy = T.alloc_fragment((8,), dtype)
            if stages == 0:
                for k in T.serial(NB):
                    if not before:
                        x = T.alloc_fragment((8, 8), dtype)
                        cy = T.alloc_fragment((8,), dtype)
                    T.copy(X[0, k * 8], x)
                    for i in T.Parallel(8):
                        cy[i] = x[i, col]
                    T.copy(cy, C[k, 0])
            else:
                for k in T.Pipelined(NB, num_stages=stages):
                    if not before:
                        x = T.alloc_fragment((8, 8), dtype)
                        cy = T.alloc_fragment((8,), dtype)
                    T.copy(X[0, k * 8], x)
                    for i in T.Parallel(8):
                        cy[i] = x[i, col]
                    T.copy(cy, C[k, 0])
    return k


# every pair of (dtype, loop, placement, column) values: 10 cases, not the 54 of the product
@pytest.mark.parametrize("dtype,stages,before,col", _covering(
    {d: d for d in DTYPES}, dict(zip(LOOPS, LOOP_IDS)), _PLACES, {0: "col0", 5: "col5", 7: "col_last"}))
def test_column_of_staged_tile(dtype, stages, before, col):
    """C[k, i] = X[i, 8 k + col] for 7 rows (a row tail of the 8-row tile), 5 blocks (5 iterations:
    3 stages wrap around, 2 leave an odd last one)."""
    M, NB = 7, 5
    x = _halves((M, NB * 8), dtype, 2)
    ref = x.astype(np.float64)[:, col::8].T
    for target in ("cpu", "ascend910b"):
        np.testing.assert_array_equal(_run(_column(M, NB, dtype, stages, before, col), target, x), ref, err_msg=target)


def _column_3d(dtype, stages):
    """The column of a (1, 8, 8) tile (a leading unit dim the kernel wrote): the 2-D slice's column."""
    @T.prim_func
    def k(X: T.Tensor((8, 24), dtype), C: T.Tensor((3, 8), dtype)):
        with T.Kernel(1) as by:
            if stages == 0:
                for k in T.serial(3):
                    x = T.alloc_fragment((1, 8, 8), dtype)
                    cy = T.alloc_fragment((8,), dtype)
                    T.copy(X[0, k * 8], x[0, :, :])
                    for i in T.Parallel(8):
                        cy[i] = x[0, i, 6]
                    T.copy(cy, C[k, 0])
            else:
                for k in T.Pipelined(3, num_stages=stages):
                    x = T.alloc_fragment((1, 8, 8), dtype)
                    cy = T.alloc_fragment((8,), dtype)
                    T.copy(X[0, k * 8], x[0, :, :])
                    for i in T.Parallel(8):
                        cy[i] = x[0, i, 6]
                    T.copy(cy, C[k, 0])
    return k


@pytest.mark.parametrize("stages", LOOPS, ids=LOOP_IDS)
def test_column_of_3d_tile(stages):
    x = _halves((8, 24), "float32", 3)
    ref = x.astype(np.float64)[:, 6::8].T
    for target in ("cpu", "ascend910b"):
        np.testing.assert_array_equal(_run(_column_3d("float32", stages), target, x), ref, err_msg=target)


def _column_runtime(stages):
    """The column index a run-time scalar parameter c (x[i, c]): the flat gather's offsets use it."""
    @T.prim_func
    def k(X: T.Tensor((7, 40), "float32"), c: T.int32, C: T.Tensor((5, 7), "float32")):
        with T.Kernel(1) as by:
            if stages == 0:
                for k in T.serial(5):
                    x = T.alloc_fragment((8, 8), "float32")
                    cy = T.alloc_fragment((8,), "float32")
                    T.copy(X[0, k * 8], x)
                    for i in T.Parallel(8):
                        cy[i] = x[i, c]
                    T.copy(cy, C[k, 0])
            else:
                for k in T.Pipelined(5, num_stages=stages):
                    x = T.alloc_fragment((8, 8), "float32")
                    cy = T.alloc_fragment((8,), "float32")
                    T.copy(X[0, k * 8], x)
                    for i in T.Parallel(8):
                        cy[i] = x[i, c]
                    T.copy(cy, C[k, 0])
    return k


@pytest.mark.parametrize("c", [0, 5, 7])
@pytest.mark.parametrize("stages", LOOPS, ids=LOOP_IDS)
def test_column_at_run_time_index(stages, c):
    x = _halves((7, 40), "float32", 7)
    ref = x.astype(np.float64)[:, c::8].T
    for target in ("cpu", "ascend910b"):
        k = tw.compile(_column_runtime(stages), target=target, out_idx=[-1])
        got = np.asarray(k(x, c) if target == "cpu" else run_checked(k, x, c), np.float64)
        np.testing.assert_array_equal(got, ref, err_msg=target)


# --- siblings: other reads of a staged tile whose lowering depends on its indices -----------------

def _sibling(form, dtype, stages, before):
    """One 8 x 8 block per iteration of 3 (X 7 x 24: a row tail), the form's result stored to Y."""
    @T.prim_func
    def k(X: T.Tensor((7, 24), dtype), I: T.Tensor((8, 3), "int32"), Y: T.Tensor((8, 24), dtype)):
        with T.Kernel(1) as by:
            ix = T.alloc_fragment((8, 3), "int32")
            T.copy(I[0, 0], ix)
            if before:
                x = T.alloc_fragment((8, 8), dtype)
                y = T.alloc_fragment((8, 8), dtype)
                v = T.alloc_fragment((8,), dtype)
            for k in T.Pipelined(3, num_stages=stages):
                if not before:
                    x = T.alloc_fragment((8, 8), dtype)
                    y = T.alloc_fragment((8, 8), dtype)
                    v = T.alloc_fragment((8,), dtype)
                T.fill(x, 0)
                T.copy(X[0, k * 8], x)
                if form == "gather":  # a data-dependent column per row: x[i, ix[i, k]]
                    for i in T.Parallel(8):
                        v[i] = x[i, ix[i, k]]
                    for i, j in T.Parallel(8, 8):
                        y[i, j] = v[i]
                elif form == "row":  # one row of the tile as a 1-D tile
                    for j in T.Parallel(8):
                        v[j] = x[3, j]
                    for i, j in T.Parallel(8, 8):
                        y[i, j] = v[j]
                elif form == "rowvec":  # a row of the tile broadcast down the rows
                    for i, j in T.Parallel(8, 8):
                        y[i, j] = x[i, j] + x[2, j]
                elif form == "mask":  # an index mask
                    for i, j in T.Parallel(8, 8):
                        y[i, j] = T.if_then_else(j < 5, x[i, j], 0)
                elif form == "scalar":  # one element of the tile as a scalar
                    for i, j in T.Parallel(8, 8):
                        y[i, j] = x[i, j] * x[1, 2]
                elif form == "column_store":  # a column stored from another column
                    for i in T.Parallel(8):
                        x[i, 0] = x[i, 0] + x[i, 7]
                    T.copy(x, y)
                T.copy(y, Y[0, k * 8])
    return k


def _sibling_ref(form, x, ix):
    x8 = np.zeros((8, 24))
    x8[:7] = x
    y = np.zeros((8, 24))
    for k in range(3):
        b = x8[:, 8 * k:8 * k + 8]
        if form == "gather":
            r = np.repeat(b[np.arange(8), ix[:, k]][:, None], 8, axis=1)
        elif form == "row":
            r = np.repeat(b[3][None, :], 8, axis=0)
        elif form == "rowvec":
            r = b + b[2][None, :]
        elif form == "mask":
            r = np.where(np.arange(8)[None, :] < 5, b, 0)
        elif form == "scalar":
            r = b * b[1, 2]
        else:
            r = b.copy()
            r[:, 0] += b[:, 7]
        y[:, 8 * k:8 * k + 8] = r
    return y


# every pair of (form, dtype, stages, placement) values: 18 cases, not the 72 of the product
@pytest.mark.parametrize("form,dtype,stages,before", _covering(
    {f: f for f in ["gather", "row", "rowvec", "mask", "scalar", "column_store"]}, {"float16": "float16", "float32": "float32"},
    {1: "stages1", 2: "stages2", 3: "stages3"}, _PLACES))
def test_sibling_reads_of_staged_tile(form, dtype, stages, before):
    x = _halves((7, 24), dtype, 4)
    ix = np.random.default_rng(5).integers(0, 8, (8, 3)).astype(np.int32)
    ref = _sibling_ref(form, x.astype(np.float64), ix)
    for target in ("cpu", "ascend910b"):
        np.testing.assert_array_equal(_run(_sibling(form, dtype, stages, before), target, x, ix), ref, err_msg=target)


# --- float % on tiles (floor-mod, the result takes the divisor's sign as in Python / numpy) -------

def _mod_kernel(n, dtype, scalar=None):
    @T.prim_func
    def k(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(1) as b:
            a = T.alloc_fragment((n,), dtype)
            d = T.alloc_fragment((n,), dtype)
            T.copy(A[0], a)
            T.copy(B[0], d)
            if scalar is None:
                for i in T.Parallel(n):
                    a[i] = a[i] % d[i]
            else:
                for i in T.Parallel(n):
                    a[i] = a[i] % scalar
            T.copy(a, Y[0])
    return k


# (x, y) pairs whose float32 quotient, its floor and floor * y are exact: the result is numpy's exactly
_MOD_PAIRS = [(5.5, 2), (-5.5, 2), (5.5, -2), (-5.5, -2), (3, 1), (-3, 1), (7.25, -0.5), (-7.25, -0.5),
              (7.25, 0.5), (2.5, 1), (-2.5, 1), (-0.75, 1), (0.75, -1), (0, 1), (-0.0, 1), (0, -1), (4, 2),
              (-4, 2), (1.5, 2), (-1.5, 2), (123.5, 1), (100, 8), (-100, 8), (9, 4.5), (-9, 4.5),
              (3, np.inf), (-3, np.inf), (3, -np.inf), (-3, -np.inf), (0, np.inf),
              (np.inf, 2), (-np.inf, 2), (np.nan, 2), (2, np.nan), (4, 0), (-4, 0), (0, 0)]
_MOD_LARGE = {"float16": [(60000, 7), (-60000, 7), (65504, 1)], "bfloat16": [(9994240, 3), (-9994240, 3), (1e30, 2)],
              "float32": [(1e7, 3), (-1e7, 3), (16777215, 2), (1e30, 2), (-1e30, 4)]}


def _mod_ref(x, y, dtype):
    with np.errstate(all="ignore"):
        return np.remainder(x.astype(np.float32), y.astype(np.float32)).astype(tw.testing.np_dtype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_float_mod_tiles(dtype):
    """x % y of two tiles: negative operands, zero results, x % +-inf (x, or the divisor when the signs
    differ, as numpy; NaN on ascend910b before session 25), inf / NaN operands and a zero divisor
    (NaN), large magnitudes: cpu and ascend910b equal numpy (NaN where numpy's is)."""
    pairs = _MOD_PAIRS + _MOD_LARGE[dtype]
    npdt = tw.testing.np_dtype(dtype)
    x = np.array([p[0] for p in pairs], np.float64).astype(npdt)
    y = np.array([p[1] for p in pairs], np.float64).astype(npdt)
    ref = _mod_ref(x, y, dtype).astype(np.float64)
    for target in ("cpu", "ascend910b"):
        got = _run(_mod_kernel(len(pairs), dtype), target, x, y)
        np.testing.assert_array_equal(got, ref, err_msg=target)


@pytest.mark.parametrize("divisor", [1.0, -2.0, 0.5], ids=["1", "-2", "0.5"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_float_mod_scalar_divisor(dtype, divisor):
    """x % c (c a constant): the fractional part for c = 1 (x % 1.0 of negative x is 1 - frac), a
    negative divisor's sign, a power-of-two divisor; 33 elements (a tail of a 32 B block run)."""
    npdt = tw.testing.np_dtype(dtype)
    x = (np.random.default_rng(6).integers(-40, 41, 33) / 4.0).astype(npdt)
    ref = _mod_ref(x, np.full_like(x, divisor), dtype).astype(np.float64)
    for target in ("cpu", "ascend910b"):
        np.testing.assert_array_equal(_run(_mod_kernel(33, dtype, divisor), target, x, np.zeros_like(x)), ref,
                                      err_msg=target)


# Where x / y is not exact in float32 (0.3 % 0.1, 1e6 + 1 % 3.3, 1e30 % 7): numpy's exact remainder on both
# targets (session 25 open: ascend910b computed x - floor(x / y) * y; exact since session 26, h-ascnum14,
# test_ascnum_s26.py covers the whole float32 range).
def test_float_mod_inexact_quotient_ascend():
    x = np.array([0.3, -0.3, 1e6 + 1, 1e30, 100], np.float32)
    y = np.array([0.1, 0.1, 3.3, 7, 0.7], np.float32)
    np.testing.assert_array_equal(_run(_mod_kernel(5, "float32"), "ascend910b", x, y),
                                  _mod_ref(x, y, "float32").astype(np.float64))


def test_float_mod_inexact_quotient_cpu():
    x = np.array([0.3, -0.3, 1e6 + 1, 1e30, 100], np.float32)
    y = np.array([0.1, 0.1, 3.3, 7, 0.7], np.float32)
    np.testing.assert_array_equal(_run(_mod_kernel(5, "float32"), "cpu", x, y),
                                  _mod_ref(x, y, "float32").astype(np.float64))
