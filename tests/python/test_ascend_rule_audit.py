"""Session 15's rule audit of the Ascend simulator against the facts docs (docs/ascend.md "Enforced
API rules"): LoadData2D's ifTranspose is documented for uint16/int16/half only, so a bfloat16 gemm
whose operands need the transposing load (transpose_A, or a K x N B) transposes its fractals through
a half view (the same bits; before, the AscendC named LoadData<bfloat16_t> with ifTranspose, not a
documented form). The simulator reports a transposing LoadData2D of any other type and an Mmad whose
L0C destination is not on a 1 KiB boundary (tw_tests AscendSimApiRules.*). Each case runs on cpu and
on ascend910b (checker on: no reports) against float64, odd shapes with tails."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import randn

from ascend_util import TARGET, assert_close, run_checked


def gemm(M, N, K, bm, bn, bk, ta, tb, dtype):
    ash, bsh = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))
    at, bt = ((bk, bm) if ta else (bm, bk)), ((bn, bk) if tb else (bk, bn))

    @T.prim_func
    def main(A: T.Tensor(ash, dtype), B: T.Tensor(bsh, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared(at, dtype)
            b = T.alloc_shared(bt, dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                if ta:
                    T.copy(A[k * bk, by * bm], a)
                else:
                    T.copy(A[by * bm, k * bk], a)
                if tb:
                    T.copy(B[bx * bn, k * bk], b)
                else:
                    T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, acc, transpose_A=ta, transpose_B=tb)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (True, True), (False, True)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_transposing_loads_of_16_bit_gemms_are_half(dtype, ta, tb):
    M, N, K = 33, 17, 40
    rng = np.random.default_rng(0)
    a = randn((K, M) if ta else (M, K), dtype, seed=rng)
    b = randn((N, K) if tb else (K, N), dtype, seed=rng)
    A, B = a.astype(np.float64), b.astype(np.float64)
    ref = (A.T if ta else A) @ (B.T if tb else B)
    k = gemm(M, N, K, 32, 16, 16, ta, tb, dtype)
    cpu = tw.compile(k, target="cpu", out_idx=[-1])(a, b)
    npu_k = tw.compile(k, target=TARGET, out_idx=[-1])
    npu = run_checked(npu_k, a, b)
    # fp32 accumulation of exact 16-bit products: both targets within float32 sums of K terms
    assert_close(cpu, ref, (1e-4, 1e-5), "cpu")
    assert_close(npu, ref, (1e-4, 1e-5), "ascend")
    loads = [line for line in npu_k.get_source("ascendc").splitlines() if "LoadData(" in line]
    assert loads
    # A (M x K) and B^T (N x K in L1) load as they are; KxM A and KxN B need the transposing load
    transposed = ta or not tb
    assert any("ReinterpretCast<half>" in line for line in loads) == (transposed and dtype == "bfloat16"), loads
    assert not any("LoadData(" in line and "bfloat16_t" in line and "true" in line for line in loads)


def ub_copy(dtype, w):
    @T.prim_func
    def main(A: T.Tensor((16, 80), dtype), B: T.Tensor((16, 80), dtype)):
        with T.Kernel(1) as bx:
            t1 = T.alloc_fragment((16, 80), dtype)
            t2 = T.alloc_fragment((16, 80), dtype)
            T.copy(A, t1)
            T.fill(t2, 2)
            T.copy(t1[3:11, 0:w], t2[2:10, 0:w])
            T.copy(t2, B)
    return main


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bfloat16", "float16"])
@pytest.mark.parametrize("w", [1, 65, 80])
def test_ub_to_ub_copies_of_8_bit_tiles_go_through_float16(dtype, w):
    # the vector copy was an Adds(x, 0) on int8, which dav-c220 does not have (the new API rule
    # "the Vector core has no int8 form of this call" found it); now two exact Casts via float16
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    a = np.random.default_rng(4).integers(lo, hi + 1, (16, 80)).astype(tw.testing.np_dtype(dtype))
    if dtype in ("bfloat16", "float16"):
        a = np.random.default_rng(4).integers(-50, 50, (16, 80)).astype(tw.testing.np_dtype(dtype))
    ref = np.full((16, 80), 2.0)
    ref[2:10, :w] = a[3:11, :w].astype(np.float64)
    k = ub_copy(dtype, w)
    cpu = tw.compile(k, target="cpu", out_idx=[-1])(a)
    npu = run_checked(tw.compile(k, target=TARGET, out_idx=[-1]), a)
    assert_close(cpu, ref, (0, 0), "cpu")
    assert_close(npu, ref, (0, 0), "ascend")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fixpipe_of_a_row_window_of_the_accumulator(dtype):
    # acc[16:32, :] starts at row 16 of each L0C strip: the simulator's footprint of the Fixpipe
    # source was whole strips from that row (an out-of-bounds report for a valid copy); now the
    # mSize rows of each strip it reads
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"), C: T.Tensor((40, 50), dtype)):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((32, 32), "float16")
            b = T.alloc_shared((32, 32), "float16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, clear_accum=True)
            T.copy(acc[16:32, 0:32], C[3:19, 5:37])
    rng = np.random.default_rng(5)
    a, b = randn((32, 32), "float16", seed=rng), randn((32, 32), "float16", seed=rng)
    ref = np.zeros((40, 50))
    ref[3:19, 5:37] = (a.astype(np.float64) @ b.astype(np.float64))[16:32]
    tol = (1e-4, 1e-5) if dtype == "float32" else tw.testing.TOLERANCES[dtype]
    for target in ("cpu", TARGET):
        c = np.zeros((40, 50), tw.testing.np_dtype(dtype))
        k = tw.compile(main, target=target, out_idx=[])
        if target == "cpu":
            k(a, b, c)
        else:
            run_checked(k, a, b, c)
        assert_close(c, ref, tol, target)
