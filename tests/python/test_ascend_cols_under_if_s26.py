"""Column blocks and row groups under a condition the same for every row and column (hunt14 F2, fuzz14 F1;
h-hints14, docs/ascend.md "Session 26: rows in groups under an `if` (h-hints14)").

A row wider than the UB runs in column blocks (split_cols); under `if Lens[bx] > 0` / `if Go[bx] > 0` /
`if bx < n` (a condition that reads no tile and nothing the block writes) it was the UB overflow. Now the
`if`, with the statements before and after it, is peeled (peel_uniform_if) and each branch split on its own.
Copies of the reproducers of /work/wt-fuzz14 test_fuzz_findings_s26.py::test_f1_row_wider_than_ub_under_a_uniform_condition
and /work/wt-hunt14 test_hunt_s26.py (test_masked_softmax_lengths's gated cases, test_f2_runtime_extent_hint_then_if),
passing here (the lead flips their xfails at merge). cpu and ascend910b (checker on) against float64.
"""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, randn

from ascend_util import TARGET, run_checked

TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    out = kernel(*args) if target == "cpu" else run_checked(kernel, *args)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _f64(x):
    return np.asarray(x, np.float64)


def _close(got, ref, tol, what):
    assert_close(_f64(got), ref, atol=tol[0], rtol=tol[1], msg=what)


# fuzz14 F1: each of 2 programs stores the max of its row of N float32 under `if Lens[bx] > 0`.
def row_max_kernel(N):
    @T.prim_func
    def main(X: T.Tensor((2, N), "float32"), Lens: T.Tensor((2,), "int32"), S: T.Tensor((2,), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((1, N), "float32")
            s = T.alloc_fragment((1,), "float32")
            if Lens[bx] > 0:
                T.copy(X[bx, 0], x)
                T.reduce_max(x, s, dim=1)
                T.copy(s, S[bx])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lens", [[1, 1], [0, 1]])
def test_fuzz14_f1_row_wider_than_ub_under_a_uniform_condition(target, lens):
    N = 65537
    rng = np.random.default_rng(26)
    x = (rng.integers(-8, 9, (2, N)) / 2.0).astype(np.float32)
    lens = np.array(lens, np.int32)
    s = np.full(2, -5.0, np.float32)
    kern = tw.compile(row_max_kernel(N), target=target)
    if target == "cpu":
        kern(x, lens, s)
    else:
        run_checked(kern, x, lens, s)
        assert any("column blocks" in n for n in kern.notes), kern.notes
    np.testing.assert_array_equal(s, np.where(lens > 0, x.max(axis=1), -5.0))


# hunt14 F2: the masked softmax of per-row lengths, a program's work gated by Go[bx] (else zeros).
@tw.jit(out_idx=[-1])
def masked_softmax_gated(N, block_M=1, dtype="float32"):
    M = T.symbolic("M")
    G = T.symbolic("G")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Lens: T.Tensor((M,), "int32"), Go: T.Tensor((G,), "int32"),
             Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            ln = T.alloc_fragment((block_M,), "int32")
            mx = T.alloc_fragment((block_M,), "float32")
            sm = T.alloc_fragment((block_M,), "float32")
            if Go[bx] > 0:
                T.copy(Lens[bx * block_M], ln)
                T.copy(X[bx * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.where(j < ln[i], x[i, j], -T.infinity("float32"))
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.exp(x[i, j] - mx[i])
                T.reduce_sum(x, sm, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] / sm[i]
                T.copy(x, Y[bx * block_M, 0])
            else:
                T.clear(x)
                T.copy(x, Y[bx * block_M, 0])

    return main


def _masked_softmax_ref(x, lens, go, block_M):
    xf = _f64(x)
    y = np.zeros_like(xf)
    for r, n in enumerate(lens):
        if go[r // block_M] > 0:
            e = np.exp(xf[r, :n] - xf[r, :n].max())
            y[r, :n] = e / e.sum()
    return y


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,dtype,block_M,lens,go", [
    (16, 8193, "float32", 8, [8193, 1, 4096, 4097, 17, 8192, 3, 5] * 2, [0, 1]),
    (3, 8193, "bfloat16", 1, [8193, 1, 2], [1, 0, 1]),
    (3, 65535, "float32", 1, [1, 65535, 32768], [1, 1, 0]),
    (2, 151936, "float16", 1, [151936, 1], [1, 0]),
    (3, 152064, "float32", 1, [76000, 1, 152064], [1, 1, 1]),
], ids=["16x8193-f32-bm8", "3x8193-bf16", "3x65535-f32", "2x151936-f16", "3x152064-f32"])
def test_hunt14_f2_masked_softmax_gated(M, N, dtype, block_M, lens, go, target):
    x = randn((M, N), dtype, scale=3.0, seed=N)
    ln, g = np.array(lens, np.int32), np.array(go, np.int32)
    (y,) = _run(masked_softmax_gated(N, block_M, dtype, target=target), target, x, ln, g)
    _close(_f64(y) * N, _masked_softmax_ref(x, ln, g, block_M) * N, TOLERANCES["float32"],
           f"masked softmax {M}x{N} {dtype} gated {target}")


@tw.jit(out_idx=[-1])
def first_n_rows_centered_if(N, dtype):
    """Rows below the scalar n centered by their max, the copy under `if bx < n` (block_M 1)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), n: T.int32, Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M) as bx:
            x = T.alloc_fragment((1, N), "float32")
            mx = T.alloc_fragment((1,), "float32")
            if bx < n:
                T.copy(X[bx, 0], x)
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(1, N):
                    x[i, j] = x[i, j] - mx[i]
                T.copy(x, Y[bx, 0])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,n,dtype", [(3, 65535, 2, "bfloat16"), (2, 151936, 1, "float32")])
def test_hunt14_f2_runtime_extent_hint_then_if(M, N, n, dtype, target):
    x = randn((M, N), dtype, seed=N + n)
    (y,) = _run(first_n_rows_centered_if(N, dtype, target=target), target, x, n)
    xf = _f64(x[:n])
    _close(y[:n], xf - xf.max(1, keepdims=True), TOLERANCES[dtype], f"first {n} rows (if) {M}x{N} {dtype} {target}")
