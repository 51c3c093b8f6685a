"""Findings of the session 24 fuzzer run (h-fuzz12, /work/fuzz12-findings.md): the seventeenth stream's
forms (tests/python/fuzz/llm2.py), each reduced and checked on cpu and on ascend910b (simulator, checker
on) against float64. An open finding is a strict xfail: when its fix lands the test passes, and the
xfail and its KNOWN_BUGS entry (fuzz/known.py) must go."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import run_checked


def _scan_rows(pipelined):
    """cumsum along the rows of 8 x 8 blocks walked by a block loop; the carry into the next block is
    the block's last scanned column, copied into a 1-D tile (``cy[i] = x[i, 7]``)."""
    M, N = 7, 19
    if pipelined:
        @T.prim_func
        def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(M, 8)) as by:
                x = T.alloc_fragment((8, 8), "float32")
                cy = T.alloc_fragment((8,), "float32")
                T.fill(cy, 0)
                for k in T.Pipelined(T.ceildiv(N, 8), num_stages=2):
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

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 8)) as by:
            x = T.alloc_fragment((8, 8), "float32")
            cy = T.alloc_fragment((8,), "float32")
            T.fill(cy, 0)
            for k in T.serial(T.ceildiv(N, 8)):
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


def _f1_check(target, pipelined):
    x = ((np.arange(7 * 19) * 7 % 9) - 4).astype(np.float32).reshape(7, 19) / 2
    k = tw.compile(_scan_rows(pipelined), target=target, out_idx=[-1])
    got = np.asarray(k(x) if target == "cpu" else run_checked(k, x), np.float64)
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.float64), axis=1))   # exact: halves


@pytest.mark.parametrize("pipelined", [False, True], ids=["serial", "pipelined"])
def test_f1_scan_carry_column_cpu(pipelined):
    _f1_check("cpu", pipelined)


def test_f1_scan_carry_column_serial_ascend():
    _f1_check("ascend910b", False)


# fuzz12 F1 (fixed by h-pipecol13, session 25): with T.Pipelined the column copy into the 1-D carry
# tile was "not a vector instruction" on ascend910b: multi_buffer's stage index made the column's
# flat gather 3-D, which select_instructions matched only on 2-D tiles (test_pipelined_columns_s25.py).
def test_f1_scan_carry_column_pipelined_ascend():
    _f1_check("ascend910b", True)
