"""Carried flags under conditions (issue 13 / Ascend trust, session 26).

Sets and waits of one SetFlag/WaitFlag id alternate, so each set must come after the wait that
consumed the flag's previous set. The simulator's checker now reports a set that is not ordered
(happens-before) after that wait, whatever the simulated timing. insert_sync places a loop- or
program-carried pair (an L1 buffer freed by MTE1 for the next step's MTE2 copy) whose accesses
all sit in one branch of an `if` inside that branch, so a program / iteration that skips the work
skips the wait and the set too; before, it ran the wait and then the set with nothing between
(h-fuzz13 F3: a T.Pipelined flash chain under a program's `if`; 37 of the 500 corpus programs: a
pipelined gemm whose K loop may run no time, c_band gemms). Each kernel runs on cpu and ascend910b
(checker on, no report) against a float64 reference; small integer inputs keep float32 sums exact.
Simulated results are a model's."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET

TARGETS = ["cpu", TARGET]


def run(kern, target, *args):
    """Runs in place (outputs are parameters); on ascend910b with the checker, asserting no report."""
    if target == "cpu":
        kern(*args)
    else:
        prof = kern.profile(*args)
        assert prof["reports"] == [], "\n".join(prof["reports"])


def ints(rng, shape, dtype="float16"):
    return rng.integers(-3, 4, shape).astype(dtype)


def gated_pipelined_gemm(M, N, K, bm, bn, bk):
    """C[rows of block by] = A B only where gate[by] > 0: a per-program `if` around the whole
    pipelined K loop (the L1 buffers' carried MTE1 -> MTE2 flags are the program loop's)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), gate: T.Tensor((M // bm,), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            if gate[by] > 0:
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[by * bm, k * bk], a)
                    T.copy(B[k * bk, bx * bn], b)
                    T.gemm(a, b, acc)
                T.copy(acc, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_pipelined_gemm_under_a_per_program_if(target):
    """60 row blocks on 24 cores, a random half of them gated off (several programs in a row skip
    the gemm on some cores); K has a tail step."""
    M, N, K, bm, bn, bk = 32 * 60, 32, 80, 32, 32, 32
    rng = np.random.default_rng(2601)
    a, b = ints(rng, (M, K)), ints(rng, (K, N))
    gate = (rng.random(M // bm) < 0.5).astype(np.int32)
    gate[:2] = [1, 0]
    c0 = np.full((M, N), 5.0, np.float32)
    c = c0.copy()
    run(tw.compile(gated_pipelined_gemm(M, N, K, bm, bn, bk), target=target), target, a, b, gate, c)
    ref = c0.astype(np.float64)
    for r in np.flatnonzero(gate):
        rows = slice(r * bm, (r + 1) * bm)
        ref[rows] = a[rows].astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def tensor_extent_gemm(M, N, K, bm, bn, bk):
    """C[block by] = A[:, :Ks[by]] B[:Ks[by], :]: a pipelined K loop whose trip count, read from a
    tensor, may be 0 (the accumulator is then the cleared tile)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Ks: T.Tensor((M // bm,), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(Ks[by] // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_loop_extent_from_a_tensor_may_be_zero(target):
    M, N, K, bm, bn, bk = 16 * 50, 32, 96, 16, 32, 32
    rng = np.random.default_rng(2602)
    a, b = ints(rng, (M, K)), ints(rng, (K, N))
    ks = rng.choice([0, 32, 64, 96], M // bm).astype(np.int32)
    ks[:3] = [0, 0, 96]
    c = np.zeros((M, N), np.float32)
    run(tw.compile(tensor_extent_gemm(M, N, K, bm, bn, bk), target=target), target, a, b, ks, c)
    ref = np.zeros((M, N))
    for r, kk in enumerate(ks):
        rows = slice(r * bm, (r + 1) * bm)
        ref[rows] = a[rows, :kk].astype(np.float64) @ b[:kk].astype(np.float64)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def nested_conditional_gemm(M, N, K, bm, bn, bk, outer):
    """Nested loops with a conditional body: for each of `outer` passes, a pipelined K loop whose
    steps run only where mask[by, i, k] is set (C = sum of the masked partial products, each a
    gemm into its own tile added on the vector cores: a mix kernel)."""
    steps = K // bk

    @T.prim_func
    def main(A: T.Tensor((outer, M, K), "float16"), B: T.Tensor((outer, K, N), "float16"),
             mask: T.Tensor((M // bm, outer, steps), "int32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bk, bn), "float16")
            s = T.alloc_fragment((bm, bn), "float32")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.fill(acc, 0)
            for i in T.serial(outer):
                for k in T.Pipelined(steps, num_stages=2):
                    if mask[by, i, k] > 0:
                        T.copy(A[i, by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], a)
                        T.copy(B[i, k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn], b)
                        T.gemm(a, b, s, clear_accum=True)
                        for r, j in T.Parallel(bm, bn):
                            acc[r, j] = acc[r, j] + s[r, j]
            T.copy(acc, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_nested_loops_with_a_conditional_body(target):
    M, N, K, bm, bn, bk, outer = 16 * 30, 16, 64, 16, 16, 16, 2
    rng = np.random.default_rng(2603)
    a, b = ints(rng, (outer, M, K)), ints(rng, (outer, K, N))
    mask = (rng.random((M // bm, outer, K // bk)) < 0.4).astype(np.int32)
    mask[0] = 0  # one program with no step at all
    c = np.zeros((M, N), np.float32)
    run(tw.compile(nested_conditional_gemm(M, N, K, bm, bn, bk, outer), target=target), target, a, b, mask, c)
    ref = np.zeros((M, N))
    for r in range(M // bm):
        rows = slice(r * bm, (r + 1) * bm)
        for i in range(outer):
            for k in np.flatnonzero(mask[r, i]):
                ks = slice(k * bk, (k + 1) * bk)
                ref[rows] += a[i, rows, ks].astype(np.float64) @ b[i, ks].astype(np.float64)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


# Fuzz corpus programs (tests/python/fuzz/grammar.py seeds) that the happens-before rule reported
# before the fix: pipelined gemms whose K loop may run no time (symbolic K), c_band gemms; the
# runner checks both targets against its float64 reference with the checker on.
CORPUS_SEEDS = [0, 45, 170, 210, 365, 375, 405, 425]


@pytest.mark.parametrize("seed", CORPUS_SEEDS)
def test_corpus_programs_that_set_a_flag_twice(seed):
    from fuzz import grammar, runner
    d = grammar.generate(seed)
    compiled = runner.Compiled()
    for target in ("cpu", TARGET):
        assert runner.run_target(d, target, compiled) == ("ok", None), target


def test_flash_chain_under_a_program_if():
    """h-fuzz13 F3 (fuzz/skip.py seed 810, reduced): S = Q K^T, P V over a 2-stage T.Pipelined loop of
    run-time trip count under `if bx * 16 < Lens[b]`; the happens-before rule reported its MTE1_MTE2
    flag (the program-carried pair of q's L1 buffer, now inside the `if`)."""
    from fuzz import runner, skip
    d = dict(skip.generate(810), B=30, NB=2, L=32, bn=16, dt_in="float16")
    compiled = runner.Compiled()
    for target in ("cpu", TARGET):
        assert runner.run_target(d, target, compiled) == ("ok", None), target


# llm fuzz stream seeds (tests/python/fuzz/llm.py) that the happens-before rule reported after the
# fix above (h-hb14b): flash attention with a split Cube/Vector skew (skew_cube_loops' k loop of
# ceildiv(N, 64) + 3 steps). The AIC's FIX -> MTE2 pair (FixPipe of S into the workspace, then the
# load of P) is relayed through MTE1 (FIX_MTE1, MTE1_MTE2); its set sits in `if k < ceildiv(N, 64)`
# and the pairs that order it back in `if k >= 3`: in the drain steps nothing ordered FIX's next
# SetFlag<FIX_MTE1> after MTE1's wait. Relayed pairs now get guards like plain ones. The runner
# checks cpu and ascend910b against its float64 reference with the checker on (no report).
LLM_SEEDS = [2785, 2810, 2850]


@pytest.mark.parametrize("seed", LLM_SEEDS)
def test_llm_attention_with_a_relayed_pair_under_ifs(seed):
    from fuzz import llm, runner
    d = llm.generate(seed)
    compiled = runner.Compiled()
    for target in ("cpu", TARGET):
        assert runner.run_target(d, target, compiled) == ("ok", None), target
