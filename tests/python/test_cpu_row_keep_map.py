"""A map that keeps its tile's rows where a row condition holds, `t[i, j] = T.where(p, t[i, j], e)`
with p not reading j (paged decode's mask of the value rows past the context): the CPU code
generator writes e only into the rows where p fails (docs/performance.md, "Issue 13, CPU").
Results against numpy on odd shapes (tail blocks, one row, one column), every float dtype, with
NaN in the rows kept (they stay NaN, bit for bit) and in the rows replaced (they become e); maps
whose condition reads the column, or whose kept value is not the tile itself, are emitted as
written and give the same answers."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import randn
from tw_test_util import unchecked_code_only


@tw.jit(out_idx=[-1])
def keep_rows(M, N, dtype, cond="row", bm=8):
    """Each block fills its tile with two copies (rows [0, h) and [h, bm): not a view), keeps the
    rows of its block below L[0] (cond "row"), or the elements with i + j < L[0] (cond "col"),
    writes -3 elsewhere, and copies the tile out."""
    h = bm // 2

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), L: T.Tensor((1,), "int32"), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_shared((bm, N), dtype)
            n = L[0]
            T.copy(X[bx * bm:bx * bm + h, :], x[0:h, :])
            T.copy(X[bx * bm + h:(bx + 1) * bm, :], x[h:bm, :])
            if cond == "row":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.where(bx * bm + i < n, x[i, j], -3.0)
            elif cond == "col":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.where(bx * bm + i + j < n, x[i, j], -3.0)
            else:  # the kept value is not the tile itself
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.where(bx * bm + i < n, x[i, j] * 2.0, -3.0)
            T.copy(x, Y[bx * bm, 0])
    return main


def expected(x, n, cond):
    M, N = x.shape
    i, j = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
    keep = i < n if cond != "col" else i + j < n
    kept = x if cond != "scaled" else (x.astype(np.float32) * 2).astype(x.dtype)
    return np.where(keep, kept, np.asarray(-3.0, x.dtype))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("M,N,n", [(13, 37, 9), (13, 37, 0), (13, 37, 13), (1, 1, 1), (1, 1, 0), (16, 128, 15),
                                   (17, 5, 17)])
@unchecked_code_only
def test_row_keep_map_matches_numpy(dtype, M, N, n):
    x = randn((M, N), dtype, seed=M * 1000 + N)
    x[::3, ::2] = np.nan  # NaN both in rows kept (stay NaN) and rows replaced (become -3)
    L = np.array([n], np.int32)
    k = keep_rows(M, N, dtype)
    got = k(x, L)
    want = expected(x, n, "row")
    np.testing.assert_array_equal(got.view(np.uint16 if x.itemsize == 2 else np.uint32)[:n],
                                  want.view(np.uint16 if x.itemsize == 2 else np.uint32)[:n])  # kept: bit for bit
    np.testing.assert_array_equal(got[n:], want[n:])
    src = k.get_source("c++")
    assert "map keeping the rows of x where the condition holds: only the others are written" in src


@pytest.mark.parametrize("cond", ["col", "scaled"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_maps_that_do_not_keep_rows_are_emitted_as_written(cond, dtype):
    M, N, n = 13, 37, 20
    x = randn((M, N), dtype, seed=7)
    x[::3, ::2] = np.nan
    k = keep_rows(M, N, dtype, cond)
    got = k(x, np.array([n], np.int32))
    np.testing.assert_array_equal(got, expected(x, n, cond))
    assert "map keeping the rows" not in k.get_source("c++")
