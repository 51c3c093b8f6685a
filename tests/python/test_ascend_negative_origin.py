"""Copies whose origin lies before row 0 of a tensor (issue 10, "no silent wrong answer"): a
window offset computed as bx * B - OFF (causal / sliding-window kernels) starts at a negative row
for the first blocks. On cpu the rows before row 0 read zeros (GM -> tile) and are not written
(tile -> GM); on ascend910b the GM <-> UB copies now skip those rows the same way (they read
and wrote GM before the tensor: a checker report). cpu vs ascend910b (checker on, zero reports)
vs numpy."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import TARGET, run_checked

M, N, B = 32, 16, 8


def shifted_load(off, dtype, target):
    """Y[bx*B + i] = X[bx*B - off + i] (zeros where that row is before row 0)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, B)) as bx:
            t = T.alloc_fragment((B, N), dtype)
            T.copy(X[bx * B - off, 0], t)
            T.copy(t, Y[bx * B, 0])
    return tw.compile(main, target=target, out_idx=[-1])


def shifted_store(off, dtype, target):
    """Y[bx*B - off + i] = X[bx*B + i] + 1 for rows >= 0 (the first block's rows before 0 dropped)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, B)) as bx:
            t = T.alloc_fragment((B, N), dtype)
            T.copy(X[bx * B, 0], t)
            for i, j in T.Parallel(B, N):
                t[i, j] = t[i, j] + 1
            T.copy(t, Y[bx * B - off, 0])
    return tw.compile(main, target=target, out_idx=[-1])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("off", [4, 8, 12])  # part of the first window, all of it, more than it
def test_load_from_a_negative_row_reads_zeros_there(off, dtype):
    x = (np.arange(M * N).reshape(M, N) % 251 + 1).astype(dtype)
    ref = np.zeros((M, N))
    for r in range(M):
        if 0 <= r - off < M:
            ref[r] = x[r - off]
    cpu = shifted_load(off, dtype, "cpu")(x)
    npu = run_checked(shifted_load(off, dtype, TARGET), x)
    assert np.array_equal(cpu.astype(np.float64), ref)
    assert np.array_equal(npu.astype(np.float64), ref)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("off", [4, 8])
def test_store_to_a_negative_row_drops_those_rows(off, dtype):
    x = (np.arange(M * N).reshape(M, N) % 251 + 1).astype(dtype)
    ref = x.astype(np.float64)[off:] + 1  # rows 0 .. M - off - 1 of Y; the rest is never written
    cpu = shifted_store(off, dtype, "cpu")(x)
    npu = run_checked(shifted_store(off, dtype, TARGET), x)
    assert np.array_equal(cpu[: M - off].astype(np.float64), ref)
    assert np.array_equal(npu[: M - off].astype(np.float64), ref)


def test_cube_side_copy_from_a_negative_row_is_reported_not_shifted():
    # GM -> L1 does not clip at row 0 yet: the simulator's checker reports the read before the
    # tensor (the data is never silently shifted)
    K = 16

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), W: T.Tensor((K, K), "float16"), C: T.Tensor((M, K), "float32")):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            a = T.alloc_shared((16, K), "float16")
            w = T.alloc_shared((K, K), "float16")
            c = T.alloc_fragment((16, K), "float32")
            T.clear(c)
            T.copy(A[bx * 16 - 8, 0], a)
            T.copy(W[0, 0], w)
            T.gemm(a, w, c)
            T.copy(c, C[bx * 16, 0])

    a = np.ones((M, K), np.float16)
    w = np.ones((K, K), np.float16)
    prof = tw.compile(main, target=TARGET, out_idx=[-1]).profile(a, w)
    assert any("out of bounds" in r and "GM tensor A" in r for r in prof["reports"]), prof["reports"]
