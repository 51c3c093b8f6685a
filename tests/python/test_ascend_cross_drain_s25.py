"""Programs whose Cube <-> Vector hand-offs run no time (hunt13 F1, session 25).

A mix kernel passes tiles between the Cube and the vector cores through GM slots: the consumer
pre-sets one credit per slot at each program's start and the producer takes them back at its end.
When a program skips its hand-offs (`if r0 < n` false in varlen attention, an empty page range in a
flash-decoding split), nothing made the consumer wait for the producer, so a consumer running
through many such programs piled up credits: past 15 pending sets of one cross-core flag the
hardware hangs (the simulator's checker: "cross-core flag overflow"). The producer now tells the
consumer once per program that it has taken its credits back, and the consumer waits for that
before its next program. Each kernel is checked on cpu and ascend910b against a float64 reference
with the checker on (run_checked asserts no report). Simulated results are a model's."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET, run_checked

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import masked_attention as ma  # noqa: E402
import paged_attention as pa  # noqa: E402

TARGETS = ["cpu", TARGET]


def run(kernel, target, *args):
    out = kernel(*args) if target == "cpu" else run_checked(kernel, *args)
    return out


def last(out):
    return out[-1] if isinstance(out, (list, tuple)) else out


def test_varlen_one_short_sequence_many_empty_programs():
    """The model's maximum length as max_seqlen: 400 programs of 64 rows, one of them with a row (at
    most 15 empty programs per core were clean before; 400 on 24 cores overflowed)."""
    rng = np.random.default_rng(25)
    D = 64
    cu = np.array([0, 1], np.int32)
    q, k, v = (rng.standard_normal((1, 1, D)).astype(np.float32) for _ in range(3))
    kern = ma.varlen_attention(1, 1, 1, 1, D, 64 * 400, False, dtype="float32", target=TARGET)
    out = last(run_checked(kern, q, k, v, cu))
    np.testing.assert_allclose(out, v, rtol=1e-6, atol=1e-6)  # one key: the output is its value row


@pytest.mark.parametrize("target", TARGETS)
def test_paged_split_mostly_empty_splits(target):
    """Flash-decoding of a serving batch: 47 one-token sequences and one of 1000 tokens, 8 splits
    (384 programs, most with an empty page range), float16, against float64."""
    seqs, splits, D, page = 48, 8, 64, 16
    lens = [1] * 47 + [1000]
    q, kc, vc, bt, cl = pa.make_inputs(seqs, 1, 1, D, page, max(lens), "float16", seed=25, lens=lens)
    ks = pa.paged_decode_split(seqs, 1, 1, D, kc.shape[0], page, bt.shape[1], splits, "float16", target=target)
    part, lse = run(ks, target, q, kc, vc, bt, cl)
    comb = pa.combine_splits(seqs, 1, splits, D, "float16", target=target)
    out = last(run(comb, target, part, lse))
    ref = pa.reference(q, kc, vc, bt, cl)
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


def gated_gemm(M, N, K, bm, bn, bk):
    """gemm + a vector epilogue (one Cube -> Vector hand-off), run only for the row blocks whose gate
    is set: most programs skip both the gemm and the hand-off."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), gate: T.Tensor((M // bm,), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            y = T.alloc_fragment((bm, bn), "float32")
            if gate[by] > 0:
                T.clear(acc)
                for k in T.serial(T.ceildiv(K, bk)):
                    T.copy(A[by * bm, k * bk], a)
                    T.copy(B[k * bk, bx * bn], b)
                    T.gemm(a, b, acc)
                for i, j in T.Parallel(bm, bn):
                    y[i, j] = acc[i, j] * 2.0 + 1.0
                T.copy(y, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_gated_gemm_epilogue_most_programs_empty(target):
    """400 programs, 3 of them with work: the Cube -> Vector direction alone (the vector cores are the
    consumers that ran ahead)."""
    M, N, K, bm, bn, bk = 16 * 400, 16, 32, 16, 16, 32
    rng = np.random.default_rng(26)
    a = rng.integers(-3, 4, (M, K)).astype(np.float16)
    b = rng.integers(-3, 4, (K, N)).astype(np.float16)
    gate = np.zeros(M // bm, np.int32)
    gate[[0, 123, 399]] = 1
    c0 = np.full((M, N), 7.0, np.float32)
    kern = tw.compile(gated_gemm(M, N, K, bm, bn, bk), target=target)
    c = c0.copy()
    if target == "cpu":
        kern(a, b, gate, c)
    else:
        prof = kern.profile(a, b, gate, c)
        assert prof["reports"] == [], "\n".join(prof["reports"])  # the simulator writes c in place, as cpu does
    ref = c0.astype(np.float64)
    for r in np.flatnonzero(gate):
        rows = slice(r * bm, (r + 1) * bm)
        ref[rows] = (a[rows].astype(np.float64) @ b.astype(np.float64)) * 2.0 + 1.0
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def test_unconditional_hand_offs_get_no_end_of_program_handshake():
    """A hand-off that runs in every program (the plain gemm + epilogue) keeps the two flag ids per
    hand-off and no per-program handshake: its consumer waits for data in every program. A gated one
    gets a third id when a core runs more than one program (40 programs on 24 cores)."""
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 32), "float16"), C: T.Tensor((64, 32), "float32")):
        with T.Kernel(2, 4) as (bx, by):
            a = T.alloc_shared((16, 32), "float16")
            b = T.alloc_shared((32, 16), "float16")
            acc = T.alloc_fragment((16, 16), "float32")
            y = T.alloc_fragment((16, 16), "float32")
            T.clear(acc)
            T.copy(A[by * 16, 0], a)
            T.copy(B[0, bx * 16], b)
            T.gemm(a, b, acc)
            for i, j in T.Parallel(16, 16):
                y[i, j] = acc[i, j] + 1.0
            T.copy(y, C[by * 16, bx * 16])
    prog = tw.compile(main, target=TARGET).get_source("ascend_program")
    ids = {line.split("(")[-1].split(")")[0] for line in prog.splitlines() if "CrossCore" in line}
    assert ids == {"0", "1"}, prog
    gated = tw.compile(gated_gemm(16 * 40, 16, 32, 16, 16, 32), target=TARGET).get_source("ascend_program")
    ids = {line.split("(")[-1].split(")")[0] for line in gated.splitlines() if "CrossCore" in line}
    assert ids == {"0", "1", "2"}, gated
