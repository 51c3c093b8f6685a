"""Rows wider than the AIV's UB (issue 13; h-widerow13, docs/ascend.md "Session 25: rows wider than
UB (h-widerow13)").

Kernels written the way docs/language.md teaches, with whole-row tiles (softmax, log_softmax,
rms_norm, layer_norm, a cross-entropy / log-sum-exp over the vocabulary, argmax over it, row sums
and maxes), run on ascend910b unchanged when one row does not fit the UB: the compiler runs each
row in column blocks (split_cols; a note says how many). Every case is checked against float64
numpy with tilewright.testing.TOLERANCES of the output dtype (ids exactly) and against cpu, the
simulator's checker on (run_checked), at vocabulary widths with odd tails (49081, 100000, 151936
Qwen2, 152064), 1 / 3 / 8 rows, float32 / float16 / bfloat16 inputs, NaN / inf / -inf rows and
all-equal rows (argmax ties go to the lowest index, as numpy's).
"""
import pathlib
import sys
import warnings

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, np_dtype, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import load_example, pairwise  # noqa: E402

softmax = load_example("softmax")
rms_norm = load_example("rms_norm")
layer_norm = load_example("layer_norm")

DTYPES = ["float32", "float16", "bfloat16"]
WIDTHS = [49081, 65536, 100000, 151936, 152064]


@tw.jit(out_idx=[-1])
def log_softmax(N, block_M=1, dtype="float32"):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            e = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                e[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(e, s, dim=1)
            for i in T.Parallel(block_M):
                s[i] = mx[i] + T.log(s[i])
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - s[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


@tw.jit(out_idx=[-1])
def cross_entropy(N, block_M=1, dtype="float32"):
    """loss[r] = logsumexp(X[r, :]) - X[r, label[r]] (the label's logit picked with a map)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Lab: T.Tensor((M,), "int32"), L: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            pick = T.alloc_fragment((block_M, N), "float32")
            lab = T.alloc_fragment((block_M,), "int32")
            mx = T.alloc_fragment((block_M,), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            xl = T.alloc_fragment((block_M,), "float32")
            T.copy(Lab[bx * block_M], lab)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                pick[i, j] = T.where(j == lab[i], x[i, j], 0.0)
            T.reduce_sum(pick, xl, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(block_M):
                s[i] = mx[i] + T.log(s[i]) - xl[i]
            T.copy(s, L[bx * block_M])

    return main


@tw.jit(out_idx=[-1])
def argmax(N, block_M=1, dtype="float32"):
    """docs/language.md's argmax: the max, then the lowest index holding it (or the first NaN)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), I: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            pick = T.alloc_fragment((block_M, N), "int32")
            idx = T.alloc_fragment((block_M,), "int32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, best, dim=1)
            for i, j in T.Parallel(block_M, N):
                pick[i, j] = T.where(x[i, j] == best[i] or x[i, j] != x[i, j], j, N)
            T.reduce_min(pick, idx, dim=1)
            T.copy(idx, I[bx * block_M])

    return main


@tw.jit(out_idx=[-2, -1])
def row_sum_max(N, block_M=1, dtype="float32"):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), "float32"), Mx: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, s, dim=1)
            T.reduce_max(x, mx, dim=1)
            T.copy(s, S[bx * block_M])
            T.copy(mx, Mx[bx * block_M])

    return main


def _f64(x):
    return np.asarray(x, np.float64)


def _lse(x):
    m = x.max(axis=1)
    return m + np.log(np.exp(x - m[:, None]).sum(axis=1))


def _case(op, N, M, dtype, seed=0):
    """(factory, inputs, references, (atol, rtol) per output, out scale)."""
    rng = np.random.default_rng(seed + N + M)
    x = randn((M, N), dtype, scale=3.0, seed=rng)
    xf = _f64(x)
    f32 = TOLERANCES["float32"]
    if op == "softmax":
        # compared at N * y: values near 1; float16's smallest subnormal (2^-24) is 1e-2 / N at N
        # = 151936: y's rounding to it, N * 2^-25, is in the atol
        atol, rtol = TOLERANCES[dtype]
        if dtype == "float16":
            atol = max(atol, N * 2.0**-25)
        return softmax.softmax, (x,), [softmax.reference(x) * N], [(atol, rtol)], N
    if op == "log_softmax":
        return log_softmax, (x,), [xf - _lse(xf)[:, None]], [TOLERANCES[dtype]], 1
    if op == "rms_norm":
        w = randn((N,), dtype, seed=rng)
        return rms_norm.rms_norm, (x, w), [rms_norm.reference(x, w)], [TOLERANCES[dtype]], 1
    if op == "layer_norm":
        w, b = randn((N,), dtype, seed=rng), randn((N,), dtype, seed=rng)
        return layer_norm.layer_norm, (x, w, b), [layer_norm.reference(x, w, b)], [TOLERANCES[dtype]], 1
    if op == "cross_entropy":
        lab = rng.integers(0, N, M).astype(np.int32)
        lab[0] = N - 1  # the last column: in the tail block
        ref = _lse(xf) - xf[np.arange(M), lab]
        return cross_entropy, (x, lab), [ref], [(1e-4, 1e-5)], 1
    if op == "argmax":
        return argmax, (x,), [np.argmax(x.astype(np.float32), axis=1)], [(0, 0)], 1
    if op == "row_sum_max":
        return row_sum_max, (x,), [xf.sum(axis=1), xf.max(axis=1)], [(f32[0] * 30, 1e-5), (0, 0)], 1
    raise ValueError(op)


def _run(factory, N, dtype, target, inputs, block_M=None):
    kw = {} if block_M is None else {"block_M": block_M}
    k = factory(N, dtype=dtype, target=target, **kw)
    args = [a.copy() for a in inputs]
    out = k(*args) if target == "cpu" else run_checked(k, *args)
    return k, (list(out) if isinstance(out, (tuple, list)) else [out])


def _check(op, N, M, dtype, block_M=None):
    factory, inputs, refs, tols, scale = _case(op, N, M, dtype)
    k, got = _run(factory, N, dtype, TARGET, inputs, block_M)
    assert any("column blocks" in n for n in k.notes), k.notes
    _, cpu = _run(factory, N, dtype, "cpu", inputs, block_M)
    for g, c, ref, (atol, rtol) in zip(got, cpu, refs, tols):
        what = f"{op} {M}x{N} {dtype}"
        if ref.dtype.kind in "iu":
            np.testing.assert_array_equal(g, ref, err_msg=what)
            np.testing.assert_array_equal(c, ref, err_msg=what + " cpu")
            continue
        s = scale if op == "softmax" else 1
        assert_close(_f64(g) * s, ref, atol=atol, rtol=rtol, msg=what)
        assert_close(_f64(g) * s, _f64(c) * s, atol=atol, rtol=rtol, msg=what + " vs cpu")


OPS = ["softmax", "log_softmax", "rms_norm", "layer_norm", "cross_entropy", "argmax", "row_sum_max"]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tw.TilewrightWarning)
        yield


# test_ascend_widerow_s26.py's test_online_max_and_sum runs these (op, N, dtype) on 3 rows through
# _case / _run below and asserts the pass count too: every pair of (op, width, dtype) values of its
# five ops (the session-26 online max + sum), not their product
ONLINE_CASES = pairwise(["softmax", "log_softmax", "cross_entropy", "logsumexp", "layer_norm"],
                        [49081, 65536, 151936, 152064], DTYPES)
# every pair of (op, width, dtype) values (tw_test_util.pairwise: 35 rows, not the 105 of the
# product), less the 7 rows test_online_max_and_sum runs with the same kernel, shape, inputs and
# tolerances (session 27, h-citrim15: CI time)
THREE_ROW_CASES = [c for c in pairwise(OPS, WIDTHS, DTYPES) if c not in ONLINE_CASES]


@pytest.mark.parametrize("op,N,dtype", THREE_ROW_CASES)
def test_wide_rows_three_rows(op, N, dtype):
    _check(op, N, 3, dtype)


# every pair of (op, width, rows) values: 14 rows, not the 28 of the product
@pytest.mark.parametrize("op,N,M", pairwise(OPS, [49081, 151936], [1, 8]))
def test_wide_rows_one_and_eight_rows(op, N, M):
    # 8 rows in blocks of 8: the rows run one at a time (split_rows), each in column blocks
    _check(op, N, M, "float32", block_M=M)


def _special_rows(N, dtype):
    """Rows of NaN / inf / -inf and ties, placed in the first, a middle and the tail block."""
    x = randn((8, N), dtype, scale=2.0, seed=np.random.default_rng(N)).astype(np.float32)
    x[0, N - 1] = np.nan                      # a NaN in the tail block
    x[1, 30000] = np.inf
    x[2, :] = -np.inf
    x[3, :] = 7.0                             # all equal: argmax 0
    x[4, [100, 40000, N - 2]] = 300.0         # a tie across blocks: the lowest index
    x[5, [3, N - 3]] = np.nan                 # two NaNs: the first
    x[6, N - 1] = 250.0                       # the maximum in the tail block
    return x.astype(np_dtype(dtype))


# every pair of (op, width, dtype) values: 9 rows, not the 18 of the product
@pytest.mark.parametrize("op,N,dtype", pairwise(["softmax", "argmax", "row_sum_max"], [151936, 152064], DTYPES))
def test_wide_rows_nan_inf_and_ties(op, N, dtype):
    x = _special_rows(N, dtype)
    factory = {"softmax": softmax.softmax, "argmax": argmax, "row_sum_max": row_sum_max}[op]
    k, got = _run(factory, N, dtype, TARGET, (x,), block_M=1)
    assert any("column blocks" in n for n in k.notes), k.notes
    _, cpu = _run(factory, N, dtype, "cpu", (x,), block_M=1)
    xf = _f64(x)
    with np.errstate(invalid="ignore", over="ignore"):
        if op == "softmax":
            refs = [softmax.reference(x)]
        elif op == "argmax":
            refs = [np.argmax(x.astype(np.float32), axis=1)]
        else:
            refs = [xf.sum(axis=1), xf.max(axis=1)]
    for g, c, ref in zip(got, cpu, refs):
        if ref.dtype.kind in "iu":
            np.testing.assert_array_equal(g, ref)
            np.testing.assert_array_equal(c, ref)
            continue
        finite = np.isfinite(ref)
        np.testing.assert_array_equal(np.isnan(_f64(g)), np.isnan(ref))
        np.testing.assert_array_equal(np.isnan(_f64(c)), np.isnan(ref))
        np.testing.assert_array_equal(_f64(g)[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)])
        if op == "softmax":
            atol = max(TOLERANCES[dtype][0], N * 2.0**-25) if dtype == "float16" else TOLERANCES[dtype][0]
            assert_close(_f64(g)[finite] * N, ref[finite] * N, atol=atol, rtol=TOLERANCES[dtype][1])
        elif ref is refs[0]:
            assert_close(_f64(g)[finite], ref[finite], atol=3e-3, rtol=1e-5)
        else:
            np.testing.assert_array_equal(_f64(g)[finite], ref[finite])


def test_a_row_that_cannot_run_in_column_blocks_names_the_statement():
    # a serial loop over a whole-row tile: neither the rows in groups (one row does not fit) nor the
    # columns in blocks; the hint names the line. (Until session 26 this test used column sums,
    # T.reduce_sum(x, col, dim=0), which now run in column blocks: test_ascend_widerow_s26.py.)
    N = 151936

    @T.prim_func
    def main(X: T.Tensor((4, N), "float32"), Y: T.Tensor((4, N), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((2, N), "float32")
            T.copy(X[bx * 2, 0], x)
            for _ in T.serial(2):
                for i, j in T.Parallel(2, N):
                    x[i, j] = x[i, j] * 0.5
            T.copy(x, Y[bx * 2, 0])

    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(main, out_idx=[-1], target=TARGET)
    text = str(e.value)
    assert "UB overflow" in text, text
    assert "the compiler runs a row in column blocks when every statement allows, which line" in text, text
    assert "(a loop that is not a T.Parallel map)" in text, text


def test_a_row_result_changed_before_its_reuse_is_not_recomputed():
    # m changes after x = x - m reads it; recomputing x block by block for the sum would read the
    # new m: the body keeps the overflow and names the map
    N = 151936

    @T.prim_func
    def main(X: T.Tensor((4, N), "float32"), S: T.Tensor((4,), "float32")):
        with T.Kernel(4) as bx:
            x = T.alloc_fragment((1, N), "float32")
            m = T.alloc_fragment((1,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(1, N):
                x[i, j] = x[i, j] - m[i]
            for i in T.Parallel(1):
                m[i] = m[i] * 2.0
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(1):
                s[i] = s[i] + m[i]
            T.copy(s, S[bx])

    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(main, out_idx=[-1], target=TARGET)
    text = str(e.value)
    assert "UB overflow" in text, text
    assert "would read 'm' after line" in text and "a GM workspace for the row is not made" in text, text
