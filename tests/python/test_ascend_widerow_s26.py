"""Rows wider than the AIV's UB with an online max + sum (issue 16; h-online14, docs/ascend.md
"Session 26: one pass for the max and the sum of wide rows (h-online14)").

split_cols runs a row that does not fit the UB in column blocks, in phases (session 25,
test_ascend_widerow_s25.py). Since session 26 a max m whose only reader is `exp(x - m)` summed
into s shares its pass with that sum: each block merges its max into m and rescales s by
exp(m_prev - m) (0 while m_prev is -inf). softmax and log_softmax take 2 passes over the row
instead of 3, a log-sum-exp and a cross-entropy 1 instead of 2. Every case is checked against
float64 numpy at tilewright.testing.TOLERANCES and against cpu, the simulator's checker on
(run_checked: reports == []), at widths 49081, 65536, 151936 (Qwen2), 152064, in float32 /
float16 / bfloat16, and on rows of NaN, +inf, all -inf, all equal, -inf in the first blocks, and
the maximum in the first, the last whole and the tail block.
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
from test_ascend_widerow_s25 import ONLINE_CASES, _case, _f64, _lse, _run, softmax  # noqa: E402
from tw_test_util import pairwise  # noqa: E402

DTYPES = ["float32", "float16", "bfloat16"]
WIDTHS = [49081, 65536, 151936, 152064]


@tw.jit(out_idx=[-1])
def logsumexp(N, block_M=1, dtype="float32"):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), L: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(block_M):
                s[i] = mx[i] + T.log(s[i])
            T.copy(s, L[bx * block_M])

    return main


@tw.jit(out_idx=[-2, -1])
def exp_and_sum(N, block_M=1, dtype="float32"):
    """exp(x - max) stored as well as summed: the stores need the final max, so the max keeps its
    own pass (the fusion's rule: the exp tile is read by the sum alone)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), E: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            T.copy(x, E[bx * block_M, 0])
            T.copy(s, S[bx * block_M])

    return main


PASSES = {"softmax": 2, "log_softmax": 2, "cross_entropy": 1, "logsumexp": 1, "layer_norm": 2}
assert {c[0] for c in ONLINE_CASES} == set(PASSES)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tw.TilewrightWarning)
        yield


def _passes(k):
    notes = [n for n in k.notes if "column blocks" in n]
    assert len(notes) == 1, k.notes
    return int(notes[0].split(" pass")[0].rsplit("; ", 1)[1])


def _lse_case(x):
    return logsumexp, (x,), [_lse(_f64(x))], [TOLERANCES["float32"]], 1


# every pair of (op, width, dtype) values (test_ascend_widerow_s25.ONLINE_CASES, tw_test_util.pairwise:
# 20 rows, not the 60 of the product; session 27, h-citrim15: CI time)
@pytest.mark.parametrize("op,N,dtype", ONLINE_CASES)
def test_online_max_and_sum(op, N, dtype):
    if op == "logsumexp":
        x = randn((3, N), dtype, scale=3.0, seed=np.random.default_rng(N + 3))
        factory, inputs, refs, tols, scale = _lse_case(x)
    else:
        factory, inputs, refs, tols, scale = _case(op, N, 3, dtype)
    k, got = _run(factory, N, dtype, TARGET, inputs)
    assert _passes(k) == PASSES[op], k.notes
    _, cpu = _run(factory, N, dtype, "cpu", inputs)
    what = f"{op} 3x{N} {dtype}"
    for g, c, ref, (atol, rtol) in zip(got, cpu, refs, tols):
        assert_close(_f64(g) * scale, ref, atol=atol, rtol=rtol, msg=what)  # (softmax's ref: scaled)
        assert_close(_f64(g) * scale, _f64(c) * scale, atol=atol, rtol=rtol, msg=what + " vs cpu")


def _special_rows(N, dtype):
    """NaN / +inf / -inf rows, ties and the maximum in the first, the last whole and the tail block
    (blocks of about 20000 columns at these widths)."""
    x = randn((11, N), dtype, scale=2.0, seed=np.random.default_rng(N + 7)).astype(np.float32)
    x[0, N - 1] = np.nan                 # a NaN in the tail block
    x[1, 4] = np.nan                     # a NaN in the first block
    x[2, 30000] = np.inf                 # +inf: NaN everywhere (inf - inf), as unsplit
    x[3, :] = -np.inf                    # all -inf: NaN (-inf - -inf), as unsplit
    x[4, :] = 7.0                        # all equal
    x[5, 3] = 60.0                       # the maximum in the first block
    x[6, N - 30000] = 60.0               # the maximum in the last whole block
    x[7, N - 2] = 60.0                   # the maximum in the tail block
    x[8, : N // 2] = -np.inf             # -inf in the first blocks: the rescale starts from -inf
    x[9, :] = -np.inf                    # one finite value, in the tail block
    x[9, N - 5] = 1.5
    x[10, : N - 100] = -1e4 if dtype == "float16" else -1e30  # a huge negative prefix
    return x.astype(np_dtype(dtype))


def _ref(op, x):
    xf = _f64(x)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if op == "softmax":
            return softmax.reference(x)
        lse = _lse(xf)
        return lse if op == "logsumexp" else xf - lse[:, None]


# every pair of (op, width, dtype) values: 9 rows, not the 18 of the product
@pytest.mark.parametrize("op,N,dtype", pairwise(["softmax", "log_softmax", "logsumexp"], [151936, 152064], DTYPES))
def test_online_special_rows(op, N, dtype):
    from test_ascend_widerow_s25 import log_softmax

    x = _special_rows(N, dtype)
    factory = {"softmax": softmax.softmax, "log_softmax": log_softmax, "logsumexp": logsumexp}[op]
    k, got = _run(factory, N, dtype, TARGET, (x,), block_M=1)
    assert _passes(k) == PASSES[op], k.notes
    _, cpu = _run(factory, N, dtype, "cpu", (x,), block_M=1)
    g, c, ref = _f64(got[0]), _f64(cpu[0]), _ref(op, x)
    out_dtype = "float32" if op == "logsumexp" else dtype
    atol, rtol = TOLERANCES[out_dtype]
    scale = N if op == "softmax" else 1
    if op == "softmax" and dtype == "float16":
        atol = max(atol, N * 2.0**-25)
    for got_, name in ((g, "ascend"), (c, "cpu")):
        np.testing.assert_array_equal(np.isnan(got_), np.isnan(ref), err_msg=f"{op} {dtype} {name}: NaN")
        inf = np.isinf(ref)
        np.testing.assert_array_equal(got_[inf], ref[inf], err_msg=f"{op} {dtype} {name}: inf")
        fin = np.isfinite(ref)
        assert_close(got_[fin] * scale, ref[fin] * scale, atol=atol, rtol=rtol, msg=f"{op} {N} {dtype} {name}")


def _ln_rows(N, dtype):
    """layer_norm rows: NaN / +inf / -inf, all equal (variance 0), a large mean with a small spread
    (the sum-of-squares form would cancel), one outlier in the first / tail block."""
    rng = np.random.default_rng(N + 9)
    x = randn((8, N), dtype, scale=2.0, seed=rng).astype(np.float32)
    x[0, N - 1] = np.nan
    x[1, 30000] = np.inf
    x[2, 7] = -np.inf
    x[3, :] = 7.0
    if dtype == "float32":  # mean 20, spread 0.1: E[x^2] - E[x]^2 would lose about 2^-24 * 400 / 0.01
        x[4, :] = 20.0 + randn((N,), "float32", scale=0.1, seed=rng)  # = 0.24% of the variance
    else:  # exact in 16 bits: 64, 64.5, 65
        x[4, :] = 64.0 + (np.arange(N) % 3) * 0.5
    x[5, 3] = 500.0
    x[6, N - 2] = 500.0
    x[7, :] = np.arange(N) % 5 - 2.0
    return x.astype(np_dtype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N", [151936, 152064])
def test_layer_norm_merged_variance_special_rows(N, dtype):
    from test_ascend_widerow_s25 import layer_norm

    x = _ln_rows(N, dtype)
    rng = np.random.default_rng(5)
    w, b = randn((N,), dtype, seed=rng), randn((N,), dtype, seed=rng)
    k, got = _run(layer_norm.layer_norm, N, dtype, TARGET, (x, w, b), block_M=1)
    assert _passes(k) == 2, k.notes
    _, cpu = _run(layer_norm.layer_norm, N, dtype, "cpu", (x, w, b), block_M=1)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = layer_norm.reference(x, w, b)
    atol, rtol = TOLERANCES[dtype]
    for got_, name in ((_f64(got[0]), "ascend"), (_f64(cpu[0]), "cpu")):
        np.testing.assert_array_equal(np.isnan(got_), np.isnan(ref), err_msg=f"layer_norm {dtype} {name}: NaN")
        fin = np.isfinite(ref)
        assert_close(got_[fin], ref[fin], atol=atol, rtol=rtol, msg=f"layer_norm {N} {dtype} {name}")


def test_exp_tile_read_by_a_store_keeps_the_max_pass():
    # the stores need exp(x - final max): the fusion's rule refuses, 2 passes as in session 25
    N = 151936
    x = randn((3, N), "float32", scale=3.0, seed=np.random.default_rng(11))
    x[1, N - 3] = 40.0  # the maximum in the tail block
    k, (e, s) = _run(exp_and_sum, N, "float32", TARGET, (x,))
    assert _passes(k) == 2, k.notes
    xf = _f64(x)
    ref_e = np.exp(xf - xf.max(axis=1, keepdims=True))
    assert_close(_f64(e), ref_e, atol=TOLERANCES["float32"][0], rtol=TOLERANCES["float32"][1])
    assert_close(_f64(s), ref_e.sum(axis=1), atol=TOLERANCES["float32"][0], rtol=TOLERANCES["float32"][1])


@tw.jit(out_idx=[-1])
def col_reduce(S, N, op, block_N=128, dtype="float32"):
    """hunt14 F3's kernel (/work/wt-hunt14 tests/python/test_hunt_s26.py): Out[b, n] = op over s
    of X[b, s, n], the whole S in one tile of block_N columns."""
    B = T.symbolic("B")

    @T.prim_func
    def main(X: T.Tensor((B, S, N), dtype), Out: T.Tensor((B, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), B) as (bx, b):
            x = T.alloc_fragment((S, block_N), "float32")
            res = T.alloc_fragment((block_N,), "float32")
            T.copy(X[b, 0:S, bx * block_N:(bx + 1) * block_N], x)
            if op == "sum":
                T.reduce_sum(x, res, dim=0)
            elif op == "max":
                T.reduce_max(x, res, dim=0)
            else:  # logsumexp over s
                e = T.alloc_fragment((S, block_N), "float32")
                s = T.alloc_fragment((block_N,), "float32")
                T.reduce_max(x, res, dim=0)
                for i, j in T.Parallel(S, block_N):
                    e[i, j] = T.exp(x[i, j] - res[j])
                T.reduce_sum(e, s, dim=0)
                for j in T.Parallel(block_N):
                    res[j] = res[j] + T.log(s[j])
            T.copy(res, Out[b, bx * block_N])

    return main


@pytest.mark.parametrize("B,S,N,op,dtype", [
    (2, 2, 32001, "sum", "bfloat16"),   # hunt14 F3's reproducers that are wide enough for column blocks
    (1, 3, 65535, "max", "float32"),
    (1, 3, 65535, "lse", "float32"),
    (2, 5, 151936, "sum", "float16"),
    (1, 4, 152064, "lse", "bfloat16"),
])
def test_reduction_across_rows_runs_in_column_blocks(B, S, N, op, dtype):
    # hunt14 F3: T.reduce_*(x, res, dim=0) of a tile larger than the UB: each column on its own,
    # so the columns run in blocks with nothing carried (no sum's order changes): one pass
    x = randn((B, S, N), dtype, scale=2.0, seed=np.random.default_rng(B + S + N))
    x[0, 0, N - 1] = 9.0  # the tail block
    k = col_reduce(S, N, op, N, dtype, target=TARGET)
    assert _passes(k) == 1, k.notes
    got = _f64(run_checked(k, x))
    cpu = _f64(col_reduce(S, N, op, N, dtype, target="cpu")(x))
    xf = _f64(x)
    if op == "sum":
        ref, tol = xf.sum(1), (1e-5 * S, 1e-5)
    elif op == "max":
        ref, tol = xf.max(1), (0, 0)
    else:
        m = xf.max(1)
        ref, tol = m + np.log(np.exp(xf - m[:, None, :]).sum(1)), TOLERANCES["float32"]
    assert_close(got, ref, atol=tol[0], rtol=tol[1], msg=f"{op} {B}x{S}x{N} {dtype}")
    assert_close(got, cpu, atol=tol[0], rtol=tol[1], msg=f"{op} {B}x{S}x{N} {dtype} vs cpu")
