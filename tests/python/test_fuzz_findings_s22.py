"""Findings of the session 22 fuzzer run (h-fuzz10, /work/fuzz10-findings.md), each reduced to a
minimal kernel and checked on cpu and on ascend910b (simulator, checker on) against float64.
An open finding is a strict xfail: when its fix lands the test passes and the xfail must go."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import run_checked


@T.prim_func
def _gemm_first_n_rows(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32"),
                       Lens: T.Tensor((1,), "int32"), C: T.Tensor((16, 16), "float32")):
    with T.Kernel(1) as bx:
        a = T.alloc_shared((16, 16), "float32")
        b = T.alloc_shared((16, 16), "float32")
        acc = T.alloc_fragment((16, 16), "float32")
        n = Lens[0]
        cnt = T.min(16, n)
        T.clear(acc)
        T.copy(A[0:cnt, 0:16], a)     # the tile's rows past n are zero-filled (docs/language.md)
        T.copy(B, b)
        T.gemm(a, b, acc)
        T.copy(acc, C)


def _run(target, args):
    k = tw.compile(_gemm_first_n_rows, target=target, out_idx=[-1])
    return np.asarray(k(*args) if target == "cpu" else run_checked(k, *args), np.float64)


def _f1_case():
    A = np.ones((16, 16), np.float32)
    B = np.ones((16, 16), np.float32)
    B[3, 5] = np.inf
    a = np.where(np.arange(16)[:, None] < 15, A.astype(np.float64), 0.0)
    with np.errstate(invalid="ignore"):
        ref = a @ B.astype(np.float64)      # row 15: 0 * inf = NaN in column 5, 0 elsewhere
    return (A, B, np.array([15], np.int32)), ref


def _same(got, ref):
    return np.array_equal(got, ref, equal_nan=True)


def test_f1_gemm_zero_rows_times_inf_ascend():
    args, ref = _f1_case()
    assert np.isnan(ref[15, 5]) and _same(_run("ascend910b", args), ref)


def test_f1_gemm_zero_rows_times_inf_cpu():
    args, ref = _f1_case()
    assert _same(_run("cpu", args), ref)


def _d3_unit_last_dim(src_dt, tile_dt):
    @T.prim_func
    def k(A: T.Tensor((3, 16, 1), src_dt), B: T.Tensor((3, 16), tile_dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((3, 16, 1), tile_dt)
            r = T.alloc_fragment((3, 16), tile_dt)
            T.copy(A[0, 0, 0], x)          # a converting copy into a 3-D tile whose last dim is 1
            T.reduce_min(x, r, dim=2)
            T.copy(r, B[0, 0])
    return k


F2_CASES = [("int8", "float16"), ("float32", "float16"), ("int8", "float32")]


@pytest.mark.parametrize("src_dt,tile_dt", F2_CASES)
def test_f2_3d_unit_last_dim_convert_cpu(src_dt, tile_dt):
    a = (np.arange(48) % 7 - 3).reshape(3, 16, 1).astype(src_dt)
    out = tw.compile(_d3_unit_last_dim(src_dt, tile_dt), target="cpu", out_idx=[-1])(a)
    assert np.array_equal(np.asarray(out, np.float64), a[:, :, 0].astype(np.float64))


@pytest.mark.parametrize("src_dt,tile_dt", F2_CASES)
def test_f2_3d_unit_last_dim_convert_ascend(src_dt, tile_dt):
    a = (np.arange(48) % 7 - 3).reshape(3, 16, 1).astype(src_dt)
    out = run_checked(tw.compile(_d3_unit_last_dim(src_dt, tile_dt), target="ascend910b", out_idx=[-1]), a)
    assert np.array_equal(np.asarray(out, np.float64), a[:, :, 0].astype(np.float64))
