"""Findings of the session 26 wide fuzzer stream (h-fuzz14, fuzz/wide.py; /work/fuzz14-findings.md).

F1 (fixed by h-hints14, session 26): a program-uniform condition read from a tensor (`if Lens[bx] > 0:`) around a row wider
than the UB stops the column blocks (split_cols): a UB capacity error on ascend910b whose hint names
the `if`; the same body without the `if` runs in column blocks. (The rows-in-groups sibling, fuzz13 F2,
is test_fuzz_findings_s25.py's.)

F2 (fixed): a copy of more than 4095 rows whose count is known only at run time (a window at a tensor's row
tail, min(R, M - g * R)) was one DataCopyPad call on ascend910b: the checker's "blockCount 4096" API rule
report. select_move_calls now issues it as calls of at most 4095 rows (the later ones under `if`).

F3 (fixed): a T.Pipelined loop whose staged UB tiles left no room for the vector calls' scratch (a row
reduction wider than one repeat) was a capacity error on ascend910b: the scratch's capacity error did not
say that tiles were staged, so lower_ascend did not retry with fewer stages (num_stages is a hint).

Each case is checked on cpu and ascend910b against float64, the checker on."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET

def row_max_kernel(N, gate):
    """Each of 2 programs stores the max of its row of N float32 (N past the UB: column blocks), under
    `if Lens[bx] > 0` (gate) or not."""
    @T.prim_func
    def main(X: T.Tensor((2, N), "float32"), Lens: T.Tensor((2,), "int32"), S: T.Tensor((2,), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((1, N), "float32")
            s = T.alloc_fragment((1,), "float32")
            if not gate or Lens[bx] > 0:
                T.copy(X[bx, 0], x)
                T.reduce_max(x, s, dim=1)
                T.copy(s, S[bx])
    return main


@pytest.mark.parametrize("target,gate", [("cpu", False), ("cpu", True), (TARGET, False),
                                         (TARGET, True)])
def test_f1_row_wider_than_ub_under_a_uniform_condition(target, gate):
    N = 65537
    rng = np.random.default_rng(26)
    x = (rng.integers(-8, 9, (2, N)) / 2.0).astype(np.float32)
    lens = np.array([1, 1], np.int32)
    kern = tw.compile(row_max_kernel(N, gate), target=target, out_idx=[-1])
    if target == "cpu":
        s = kern(x, lens)
    else:
        prof = kern.profile(x, lens)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        s = prof.outputs[0] if isinstance(prof.outputs, (list, tuple)) else prof.outputs
    np.testing.assert_array_equal(np.asarray(s), x.max(axis=1))


def tail_rows_kernel(M, R):
    """Program g maps rows g * R of X (R rows of 2 float32, the last program's a row tail) in place and
    stores them: a window of more than 4095 rows whose count is known only at run time."""
    @T.prim_func
    def main(X: T.Tensor((M, 2), "float32"), Y: T.Tensor((M, 2), "float32")):
        with T.Kernel(T.ceildiv(M, R)) as g:
            x = T.alloc_fragment((R, 2), "float32")
            T.copy(X[g * R, 0], x)
            for i, j in T.Parallel(R, 2):
                x[i, j] = x[i, j] * 2.0 + 1.0
            T.copy(x, Y[g * R, 0])
    return main


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("M,R", [(8191, 4096), (8192, 4096), (10500, 6000), (4098, 4097), (4000, 6000), (12001, 6000)])
def test_f2_copies_of_more_than_4095_rows_at_a_row_tail(target, M, R):
    """F2 (fixed): the copies' row count at the tail is min(R, M - g * R), more than 4095 for some programs:
    DataCopyPad's blockCount is 0..4095, so each is issued as calls of at most 4095 rows (was one call: the
    checker's "blockCount 4096" API rule report)."""
    rng = np.random.default_rng(M)
    x = (rng.integers(-8, 9, (M, 2)) / 2.0).astype(np.float32)
    kern = tw.compile(tail_rows_kernel(M, R), target=target, out_idx=[-1])
    if target == "cpu":
        y = kern(x)
    else:
        prof = kern.profile(x)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        y = prof.outputs[0] if isinstance(prof.outputs, (list, tuple)) else prof.outputs
    np.testing.assert_array_equal(np.asarray(y), x * 2.0 + 1.0)


def chunk_softmax_kernel(M, N, bm, bn, stages):
    """Softmax of exp(x / 4) * -1 over user-written T.Pipelined loops of column chunks of bm x bn float32
    (three passes: max, sum, scale and store through a float16 tile), the columns past N hidden (the
    fuzzer's `--stream wide` seed 2500 without its condition)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, bn), "float32")
            y = T.alloc_fragment((bm, bn), "float16")
            mx = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.fill(mx, -T.infinity("float32"))
            for c in T.Pipelined(T.ceildiv(N, bn), num_stages=stages):
                T.copy(X[bx * bm, c * bn], x)
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.exp(x[i, j] * 0.25) * -1.0
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.where(c * bn + j < N, x[i, j], -T.infinity("float32"))
                T.reduce_max(x, mx, dim=1, clear=False)
            T.fill(s, 0.0)
            for c in T.Pipelined(T.ceildiv(N, bn), num_stages=stages):
                T.copy(X[bx * bm, c * bn], x)
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.exp(x[i, j] * 0.25) * -1.0
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.where(c * bn + j < N, T.exp(x[i, j] - mx[i]), 0.0)
                T.reduce_sum(x, s, dim=1, clear=False)
            for c in T.Pipelined(T.ceildiv(N, bn), num_stages=stages):
                T.copy(X[bx * bm, c * bn], x)
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.exp(x[i, j] * 0.25) * -1.0
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.exp(x[i, j] - mx[i]) / s[i]
                for i, j in T.Parallel(bm, bn):
                    y[i, j] = x[i, j]
                T.copy(y, Y[bx * bm, c * bn])
    return main


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("M,N,bm,bn,stages", [(6, 29228, 2, 4096, 2), (5, 20001, 2, 4096, 3)])
def test_f3_pipelined_chunks_that_leave_no_vector_scratch_run_with_fewer_stages(target, M, N, bm, bn, stages):
    """F3 (fixed): the stages of a T.Pipelined loop of wide chunks filled the UB so that the vector calls'
    scratch (a row reduction wider than one repeat) did not fit: a capacity error on ascend910b with no
    retry (num_stages is a hint: the loop runs with fewer stages now, and a note says so)."""
    rng = np.random.default_rng(N)
    x = (rng.integers(-8, 9, (M, N)) / 2.0).astype(np.float16)
    z = -np.exp(x.astype(np.float64) * 0.25)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    ref = p / p.sum(axis=1, keepdims=True)
    kern = tw.compile(chunk_softmax_kernel(M, N, bm, bn, stages), target=target, out_idx=[-1])
    if target == "cpu":
        y = kern(x)
    else:
        prof = kern.profile(x)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        y = prof.outputs[0] if isinstance(prof.outputs, (list, tuple)) else prof.outputs
    # float16 output: its rounding, the float32 sum of N terms and the exponentials' arguments
    np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=2.0 ** -10 + 4 * 2.0 ** -24 * (N + 40),
                               atol=2.0 ** -24)
