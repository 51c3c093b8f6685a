"""argmax in the documented form (docs/language.md: reduce_max, T.where(x == best or x != x, j, N),
reduce_min) on rows wider than 255 blocks of 32 B (2040 int32 elements): the int32 row reduction
of ascend910b issues such rows one per call instead of a uint8 repeat stride of a row (issue 13,
the wide fuzz stream's seeds 2975-2979, session 27), and the blocks whose tiles overflow UB run
their rows in groups (split_rows). cpu and ascend910b (checker on, zero reports) against
np.argmax, exact: ties go to the first index, a row with a NaN gives its first NaN. One case per
width (a tail, a row just past 2040, two rows past 8 KiB) and block rows (one row, a few, a
grid tail, rows in groups). T.argmax is not part of the language: this form is the documented one."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET, run_checked


@tw.jit(out_idx=[-1])
def argmax_rows(M, N, bm):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), I: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            best = T.alloc_fragment((bm,), "float32")
            pick = T.alloc_fragment((bm, N), "int32")
            idx = T.alloc_fragment((bm,), "int32")
            T.copy(X[bx * bm, 0], x)
            T.reduce_max(x, best, dim=1)
            for i, j in T.Parallel(bm, N):
                pick[i, j] = T.where(x[i, j] == best[i] or x[i, j] != x[i, j], j, N)
            T.reduce_min(pick, idx, dim=1)
            T.copy(idx, I[bx * bm])
    return main


def data(M, N, seed):
    """Small integers (many ties per row); the max at the last column, a tie at the first and last
    columns, and a NaN row when there are rows enough."""
    x = np.random.default_rng(seed).integers(-3, 4, (M, N)).astype(np.float32)
    x[0, N - 1] = 9.0
    if M > 1:
        x[1, 0] = x[1, N - 1] = 9.0
    if M > 2:
        x[2, N // 2] = x[2, N - 3] = np.nan
    return x


# (N, bm, M): each width with one block row, a few rows and a grid tail (M not a multiple of bm),
# and rows in groups (38 rows overflow UB: split_rows)
CASES = [(2041, 1, 2), (2041, 3, 4), (2041, 38, 38), (3889, 2, 3), (3889, 4, 5), (3889, 38, 38),
         (8193, 2, 3), (8193, 3, 3)]


@pytest.mark.parametrize("N,bm,M", CASES)
def test_argmax_wide_rows(N, bm, M):
    x = data(M, N, N + bm)
    ref = np.argmax(x, axis=1).astype(np.int32)
    kern = argmax_rows(M, N, bm, target="cpu")
    np.testing.assert_array_equal(kern(x), ref)
    kern = argmax_rows(M, N, bm, target=TARGET)
    np.testing.assert_array_equal(run_checked(kern, x), ref)


@tw.jit(out_idx=[-1])
def int_row_reduce(M, N, op):
    @T.prim_func
    def main(X: T.Tensor((M, N), "int32"), Y: T.Tensor((M,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "int32")
            y = T.alloc_fragment((M,), "int32")
            T.copy(X[0, 0], x)
            if op == "sum":
                T.reduce_sum(x, y, dim=1)
            elif op == "max":
                T.reduce_max(x, y, dim=1)
            else:
                T.reduce_min(x, y, dim=1)
            T.copy(y, Y[0])
    return main


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_int32_row_reduce_wide_rows(op):
    """The int32 row reduction itself on rows 2041 elements apart (2048 padded: 256 blocks), 3 rows."""
    M, N = 3, 2041
    x = np.random.default_rng(7).integers(-1000, 1000, (M, N)).astype(np.int32)
    x[0, N - 1] = 5000  # the max at the tail
    x[1, N - 1] = -5000  # the min at the tail
    ref = {"sum": x.sum(axis=1), "max": x.max(axis=1), "min": x.min(axis=1)}[op].astype(np.int32)
    np.testing.assert_array_equal(int_row_reduce(M, N, op, target="cpu")(x), ref)
    np.testing.assert_array_equal(run_checked(int_row_reduce(M, N, op, target=TARGET), x), ref)
