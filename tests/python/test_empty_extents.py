"""Empty run-time extents (docs/ascend.md "Empty counts"): a varlen batch with sequences of length
0, paged decode with a context length 0, and T.min slices whose count is 0 or negative, on cpu
and ascend910b (the simulator's checker on: no reports) against float64 references; and the calls
the AscendC takes for an empty count: Fixpipe's mSize / nSize are 1.. in CANN 8.5, so a Fixpipe
whose sizes are not constants is issued under `if (m > 0 && n > 0)`; DataCopyPad's blockLen and
Nd2Nz's nValue / dValue take 0 (a NOP: the 2026 docs for A2/A3, the CANN 8.5 library's ranges), so
a run-time column count issues the call with 0."""
import os
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, randn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import masked_attention as ma  # noqa: E402
import paged_attention as pa  # noqa: E402
# these kernels leave an out_idx output's elements past a run-time extent unwritten on purpose: the
# simulator's `unwritten output` report is expected there (run_checked_partial), any other fails
from ascend_util import TARGET, run_checked_partial as run_checked  # noqa: E402

SMALL = dict(block_M=16, block_N=16)


@pytest.mark.parametrize("seqlens,causal", [([5, 0, 7, 0], False), ([0, 19, 0, 1], True)])
def test_varlen_with_empty_sequences(seqlens, causal):
    cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
    total = int(cu[-1])
    rng = np.random.default_rng(1)
    q = randn((total, 2, 16), "float32", seed=rng)
    k, v = randn((total, 1, 16), "float32", seed=rng), randn((total, 1, 16), "float32", seed=rng)
    ref = np.zeros((total, 2, 16))
    for b, n in enumerate(seqlens):
        if n:
            sl = slice(cu[b], cu[b + 1])
            seq = [x[sl].transpose(1, 0, 2)[None] for x in (q, k, v)]
            ref[sl] = ma.reference(*seq, ma.visibility(n, n, causal))[0].transpose(1, 0, 2)
    args = (total, len(seqlens), 2, 1, 16, max(seqlens), causal)
    cpu = ma.varlen_attention(*args, **SMALL)(q, k, v, cu)
    asc = run_checked(ma.varlen_attention(*args, target=TARGET, **SMALL), q, k, v, cu)
    assert_close(cpu, ref)
    assert_close(asc, ref)
    assert_close(asc, cpu)


def test_paged_decode_with_an_empty_context():
    # a context length 0: 0 on both targets, as vLLM's kernel and the split form give (session 22,
    # hunt10a F6: it was 0 / 0 = NaN rows; never garbage from pages the sequence does not own); the
    # other sequence is exact
    inputs = pa.make_inputs(2, 4, 2, 32, 8, 24, "float32", lens=[0, 9])
    q, kc, vc, bt, cl = inputs
    args = (2, 4, 2, 32, kc.shape[0], 8, bt.shape[1], "float32")
    cpu = pa.paged_decode(*args)(*inputs)
    asc = run_checked(pa.paged_decode(*args, target=TARGET), *inputs)
    for out in (cpu, asc):
        assert (out[0] == 0).all()
        assert_close(out, pa.reference(q, kc, vc, bt, cl))


def copy_and_gemm(M, K, N, bn, target, out_idx=(4, 5)):
    """Column block bx of C = A B with a run-time column count (B's columns: Nd2Nz dValue; C's:
    Fixpipe nSize) and of Y = X with the same count (DataCopyPad blockLen both ways)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), X: T.Tensor((M, N), "float32"),
             n: T.int32, C: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, bn), "float16")
            c = T.alloc_fragment((M, bn), "float32")
            x = T.alloc_fragment((M, bn), "float32")
            c0 = bx * bn
            cols = T.min(bn, n - c0)
            T.copy(A, a)
            T.copy(B[:, c0:c0 + cols], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, C[:, c0:c0 + cols])
            T.copy(X[:, c0:c0 + cols], x)
            T.copy(x, Y[:, c0:c0 + cols])
    return tw.compile(main, target=target, out_idx=list(out_idx) if out_idx else None)


def test_empty_counts_in_the_ascendc_and_on_both_targets():
    M, K, N, bn = 32, 32, 40, 16
    kern = copy_and_gemm(M, K, N, bn, TARGET)
    src = kern.get_source("ascendc")
    # every Fixpipe sits right under an `if (... > 0)` of its sizes
    fix = [m.start() for m in re.finditer(r"Fixpipe<", src)]
    assert fix
    for at in fix:
        block = src[:at].rsplit("FixpipeParamsV220", 1)[0].rstrip().rsplit("\n", 2)
        assert re.search(r"if \(.*> 0\) \{$", block[-2]) or re.search(r"if \(.*> 0\) \{$", block[-1]), block
    # the run-time blockLen / dValue are issued unguarded (0 is a NOP)
    lines = src.splitlines()
    pads = [i for i, line in enumerate(lines) if "DataCopyPad(" in line]
    assert len(pads) == 2 and all("static_cast<uint32_t>((tw_max(" in lines[i] for i in pads)
    assert not any(re.search(r"if \(.*> 0\) \{$", lines[i - 1]) for i in pads)
    assert re.search(r"tw_p\.dValue = tw_max", src)
    A, B = randn((M, K), "float16", seed=2), randn((K, N), "float16", seed=3)
    X = randn((M, N), "float32", seed=4)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    # C and Y passed in on cpu: at n <= 0 the kernel writes none of C (out_idx would return it unwritten, which
    # checked mode reports: TW_BOUNDS_CHECK=1)
    cpu = copy_and_gemm(M, K, N, bn, "cpu", out_idx=None)

    def on_cpu(n):
        C, Y = np.zeros((M, N), np.float32), np.zeros((M, N), np.float32)
        cpu(A, B, X, n, C, Y)
        return C, Y
    for n in [0, -5, 1, 17, 40]:
        k = max(0, min(n, N))
        for C, Y in (on_cpu(n), run_checked(kern, A, B, X, n)):
            np.testing.assert_allclose(np.asarray(C)[:, :k], ref[:, :k], atol=1e-2, rtol=1e-2)
            np.testing.assert_array_equal(np.asarray(Y)[:, :k], X[:, :k])


def test_mix_kernel_whose_vector_code_takes_no_hand_off():
    # Cube and vector code side by side with no tile handed between them (split_cube_vector): both
    # AIVs run the vector code whole and AIV 0 alone stores (was: both stored, a race the checker
    # reported, and both added with T.atomic_add: Y got 2 X)
    M, K, N, bn = 32, 32, 40, 16

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), X: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, bn), "float16")
            c = T.alloc_fragment((M, bn), "float32")
            x = T.alloc_fragment((M, bn), "float32")
            T.copy(A, a)
            T.copy(B[0, bx * bn], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, C[0, bx * bn])
            T.copy(X[0, bx * bn], x)
            T.copy(x, Y[0, bx * bn])
            T.atomic_add(Z[0, bx * bn], x)

    A, B = randn((M, K), "float16", seed=5), randn((K, N), "float16", seed=6)
    X = randn((M, N), "float32", seed=7)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    for target in ("cpu", TARGET):
        kern = tw.compile(main, target=target, out_idx=[3, 4])
        Z = np.zeros((M, N), np.float32)
        C, Y = run_checked(kern, A, B, X, Z) if target == TARGET else kern(A, B, X, Z)
        np.testing.assert_allclose(C, ref, atol=1e-2, rtol=1e-2)
        np.testing.assert_array_equal(Y, X)
        np.testing.assert_array_equal(Z, X)
