"""T.copy of a global window whose column start is a run-time value (a scalar parameter) that may
be negative: the columns before column 0 read zeros (docs/language.md: a load reads zeros outside
the tensor). GM -> UB (DataCopyPad's leftPadding) is exact at every start. GM -> L1 (the Nd2Nz of a
gemm operand; session 20, h-negcol8) clips at run time in whole C0 strips only: a start that is a
multiple of C0 and a window wholly before the tensor are exact; a start inside a strip reads before
the row, and the simulator's checker reports it (it was silent when the read stayed inside the
allocation: B's rows k0 - 1, or a window wholly before the columns)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

from ascend_util import TARGET, run_checked

R, C, BK, BN = 24, 40, 16, 32
ACC = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32"}
C0 = {"float16": 16, "bfloat16": 16, "float32": 8, "int8": 32}


def window_copy(dtype, target, l1, operand="a"):
    """D = B[k0:k0 + BK, c0:c0 + BN] (zeros outside B) in ACC[dtype]: through a UB tile, or through an
    L1 tile times the identity on the Cube (the L1 tile is gemm operand A, its columns K, or B, its
    columns N; int8 only A: an int8 K x N operand needs a transposing load)."""
    acc = ACC[dtype]
    ne = BN if operand == "a" else BK

    @T.prim_func
    def main(B: T.Tensor((R, C), dtype), E: T.Tensor((ne, ne), dtype), k0: T.int32, c0: T.int32,
             D: T.Tensor((BK, BN), acc)):
        with T.Kernel(1) as bx:
            if l1:
                e = T.alloc_shared((ne, ne), dtype)
                b = T.alloc_shared((BK, BN), dtype)
                c = T.alloc_fragment((BK, BN), acc)
                T.copy(E, e)
                T.copy(B[k0:k0 + BK, c0:c0 + BN], b)
                if operand == "a":
                    T.gemm(b, e, c, transpose_B=True, clear_accum=True)
                else:
                    T.gemm(e, b, c, clear_accum=True)
                T.copy(c, D)
            else:
                t = T.alloc_fragment((BK, BN), dtype)
                o = T.alloc_fragment((BK, BN), acc)
                T.copy(B[k0:k0 + BK, c0:c0 + BN], t)
                for i, j in T.Parallel(BK, BN):
                    o[i, j] = T.cast(t[i, j], acc)
                T.copy(o, D)
    return tw.compile(main, target=target, out_idx=[-1])


def reference(b, k0, c0):
    p = np.zeros((R + 200, C + 200))
    p[100:100 + R, 100:100 + C] = b.astype(np.float64)
    return p[100 + k0:100 + k0 + BK, 100 + c0:100 + c0 + BN]


def inputs(dtype, n=BK):
    v = np.arange(R * C).reshape(R, C) % 113 + 1  # exact in every dtype, no zeros
    b = (v - 56 if dtype == "int8" else v).astype(np_dtype(dtype))
    return b, np.eye(n).astype(np_dtype(dtype))


# columns: inside the first 8 / 16 / 32 columns' block or strip (-1, -8, -30), whole strips (-16,
# -32), wholly before the tensor (-33, -40); rows before row 0 (-3, -20), past the end (40)
STARTS = [(0, 0), (3, 5), (0, -1), (0, -8), (2, -30), (-5, -4), (0, -16), (4, -32), (-3, 0), (0, -33),
          (6, -40), (-20, -33), (0, 40), (-3, -16)]
DTYPES = ["float16", "float32", "bfloat16", "int8"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_gm_to_ub_at_a_negative_run_time_column_start(dtype):
    b, e = inputs(dtype, BN)
    cpu, npu = window_copy(dtype, "cpu", False), window_copy(dtype, TARGET, False)
    for k0, c0 in STARTS:
        ref = reference(b, k0, c0)
        assert np.array_equal(cpu(b, e, k0, c0).astype(np.float64), ref), ("cpu", k0, c0)
        assert np.array_equal(run_checked(npu, b, e, k0, c0).astype(np.float64), ref), (TARGET, k0, c0)


def l1_exact(dtype, c0):
    return c0 >= 0 or -c0 % C0[dtype] == 0 or c0 + BN <= 0


L1_CASES = [(d, o) for d in DTYPES for o in ("a", "b") if (d, o) != ("int8", "b")]


@pytest.mark.parametrize("dtype,operand", L1_CASES)
def test_gm_to_l1_at_a_negative_run_time_column_start(dtype, operand):
    b, e = inputs(dtype, BN if operand == "a" else BK)
    cpu, npu = window_copy(dtype, "cpu", True, operand), window_copy(dtype, TARGET, True, operand)
    exact = [s for s in STARTS if l1_exact(dtype, s[1])]
    assert len(exact) >= 8
    for k0, c0 in exact:
        ref = reference(b, k0, c0)
        assert np.array_equal(cpu(b, e, k0, c0).astype(np.float64), ref), ("cpu", k0, c0)
        assert np.array_equal(run_checked(npu, b, e, k0, c0).astype(np.float64), ref), (TARGET, k0, c0)


@pytest.mark.parametrize("dtype,operand", L1_CASES)
def test_gm_to_l1_start_inside_a_strip_is_the_checkers_report(dtype, operand):
    # the part of a strip before column 0 cannot be clipped on the Nd2Nz path: the read before the
    # row is reported at the copy's line, never silently wrong (cpu is exact)
    b, e = inputs(dtype, BN if operand == "a" else BK)
    cpu, npu = window_copy(dtype, "cpu", True, operand), window_copy(dtype, TARGET, True, operand)
    inside = [s for s in STARTS if not l1_exact(dtype, s[1])]
    assert len(inside) >= 3
    for k0, c0 in inside:
        assert np.array_equal(cpu(b, e, k0, c0).astype(np.float64), reference(b, k0, c0)), ("cpu", k0, c0)
        reports = npu.profile(b, e, k0, c0)["reports"]
        assert reports and all("out of bounds" in r and "test_ascend_run_time_column_start.py" in r
                               for r in reports), (k0, c0, reports)
