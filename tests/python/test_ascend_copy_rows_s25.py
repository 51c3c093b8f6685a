"""Session 25 (h-pipecol13), hunt13 F2: a copy between GM and UB (or UB and UB) of more than 4095
rows. DataCopyPad's / DataCopy's blockCount is 0..4095, so select_move_calls issues such a copy as
calls of at most 4095 rows, one after another on the copy's pipe (it was a compile error naming the
field). Checked on ascend910b (simulator, checker on) bit for bit against the input / cpu."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import TARGET, run_checked

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import moe  # noqa: E402


@tw.jit(out_idx=[-1])
def copy_through_tile(M, N, dtype):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), dtype)
            T.copy(A, a)
            T.copy(a, B)
    return main


@pytest.mark.parametrize("M", [4095, 4096, 6000, 8190, 8191])
def test_copy_of_many_rows_int32(M):
    """(M, 2) int32: 4096 and 6000 rows fit the UB (each row padded to 32 B) and were one copy of
    more than 4095 rows; 8190 = 2 x 4095 exactly; 8191 rows do not fit (run in groups of rows)."""
    a = np.arange(M * 2, dtype=np.int32).reshape(M, 2)
    assert np.array_equal(run_checked(copy_through_tile(M, 2, "int32", target=TARGET), a), a)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_copy_of_many_rows_tail_columns(dtype):
    """4097 rows of 3 elements (a burst that is not whole 32 B blocks, padded in UB): the second call's
    single row lands 4095 padded rows on."""
    a = (np.arange(4097 * 3) % 251 - 125).astype(tw.testing.np_dtype(dtype)).reshape(4097, 3)
    got = run_checked(copy_through_tile(4097, 3, dtype, target=TARGET), a)
    assert np.array_equal(np.asarray(got, np.float64), a.astype(np.float64))


@tw.jit
def strided_window(M):
    """Columns 1..2 of a (M, 5) float16 tensor (GM bursts of 4 B, 10 B apart) -> a (M, 2) tile,
    doubled, stored into columns 3..4 of a (M, 6) output (bursts 12 B apart). (A UB -> UB copy of
    more than 4095 rows cannot fit: two tiles of 4096 rows of 32 B overflow the UB.)"""
    @T.prim_func
    def main(A: T.Tensor((M, 5), "float16"), B: T.Tensor((M, 6), "float16")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, 2), "float16")
            T.copy(A[0:M, 1:3], a)
            for i, j in T.Parallel(M, 2):
                a[i, j] = a[i, j] * 2
            T.copy(a, B[0:M, 3:5])
    return main


def test_strided_window_of_many_rows():
    M = 4100
    a = (np.arange(M * 5) % 97).astype(np.float16).reshape(M, 5)
    for target in ("cpu", TARGET):
        b = np.full((M, 6), -1, np.float16)
        ref = b.copy()
        ref[:, 3:5] = 2 * a[:, 1:3]
        k = strided_window(M, target=target)
        k(a, b) if target == "cpu" else run_checked(k, a, b)
        assert np.array_equal(b, ref), target


def test_align_by_expert_4096_tokens():
    """hunt13 F2's reproducer: Mixtral's routing of a 4096-token prefill (8 experts, top-2), the
    counting sort bit-exact against cpu's (docs/llm-kernels.md says this size fits)."""
    rng = np.random.default_rng(16)
    ids = np.stack([rng.permutation(8)[:2] for _ in range(4096)]).astype(np.int32)
    got = run_checked(moe.align_by_expert(4096, 8, 2, 16, target=TARGET), ids)
    ref = moe.align_by_expert(4096, 8, 2, 16)(ids)
    counts = np.bincount(ids.ravel(), minlength=8)
    assert np.array_equal(np.sort(got[0][got[0] < 4096]), np.sort(np.repeat(np.arange(4096), 2)))
    assert (np.bincount(got[1][got[1] >= 0], minlength=8) * 16 >= counts).all()
    for a, b in zip(got, ref):
        assert np.array_equal(a, b)
