"""Session 26's hunt (h-hunt14, docs/testing.md "Session 26: change only the target at odd shapes
(h-hunt14)"): what sessions 24 and 25 added to ascend910b — rows in UB groups (split_rows), column
blocks for rows wider than the UB (split_cols), copies of more than 4095 rows, the user's 16-bit
hand-off after a gemm, pacing flags for conditional hand-offs, T.atomic_add after a gemm, float `%`
and integer ops, N-D windows — at users' odd shapes and dtypes, on cpu and on ascend910b (simulator,
checker on: `prof["reports"] == []`), each against float64 numpy or exact integers.

Kernels are written the way docs/language.md teaches: whole-row tiles, `T.reduce_*`, `T.Parallel`
maps, `T.ceildiv` grids whose last block is partial, scalar reads of per-program lengths.

Tolerances (|got - ref| <= atol + rtol |ref|): tilewright.testing.TOLERANCES of the output dtype
(float32 1e-4 / 1e-4, float16 2e-3 / 2e-3, bfloat16 2e-2 / 1.6e-2), except where a case states its
own: row / column sums of n float32 terms of size ~1 compare with atol 1e-5 * n (the float32 sum's
error grows with n); gemms with atol 1e-5 * K on float32 outputs (examples/gemm.py) and the output
dtype's tolerance plus that on 16-bit outputs; integer results and max / min / argmax exactly.

Long dims are full where the simulator is quick; rows of 151936 / 152064 use 1-3 rows on
ascend910b. Findings (F1.. of /work/hunt14-findings.md and docs/testing.md) are strict xfails
naming the finding; the rest guard what works."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, np_dtype, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# these kernels leave an out_idx output's elements past a run-time extent unwritten on purpose: the
# simulator's `unwritten output` report is expected there (run_checked_partial), any other fails
from ascend_util import TARGET, run_checked_partial as run_checked  # noqa: E402
from tw_test_util import unchecked_code_only  # noqa: E402

TARGETS = ["cpu", TARGET]
FLOATS = ["float32", "float16", "bfloat16"]


def _run(kernel, target, *args):
    """The outputs as a list: called on cpu; simulated with the checker on ascend910b
    (run_checked asserts prof["reports"] == [])."""
    out = kernel(*args) if target == "cpu" else run_checked(kernel, *args)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _f64(x):
    return np.asarray(x, np.float64)


def _close(got, ref, tol, what):
    if np.asarray(ref).dtype.kind in "iu":
        np.testing.assert_array_equal(np.asarray(got), ref, err_msg=what)
        return
    assert_close(_f64(got), ref, atol=tol[0], rtol=tol[1], msg=what)


def _fails(reason, raises=AssertionError):
    """The strict xfail of a finding: the test fails with `raises` (a wrong value: AssertionError)."""
    return pytest.mark.xfail(strict=True, raises=raises, reason=reason)


# ---------------------------------------------------------------------------------------------
# Kernels

@tw.jit(out_idx=[-2, -1])
def residual_rms_norm(N, block_M=8, dtype="float32", out_dtype="float16", eps=1e-6):
    """h = x + r (stored, the residual stream); y = h * rsqrt(mean(h^2) + eps) * w, cast to out_dtype."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), R: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype),
             H: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            r = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            y = T.alloc_fragment((block_M, N), out_dtype)
            T.copy(X[bx * block_M, 0], x)
            T.copy(R[bx * block_M, 0], r)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] + r[i, j]
            T.copy(x, H[bx * block_M, 0])
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                y[i, j] = x[i, j] * ss[i] * w[j]
            T.copy(y, Y[bx * block_M, 0])

    return main


@tw.jit(out_idx=[-1])
def row_reduce(N, op, block_M=8, dtype="float32"):
    """One row reduction (sum / max / min / logsumexp / argmax / argmin) per row, on the data's dtype
    widened to float32 (int32 kept for int32 sum / max / min / argmax)."""
    M = T.symbolic("M")
    acc = "int32" if dtype == "int32" else "float32"
    out_dt = "int32" if op in ("argmax", "argmin") else acc

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), out_dt)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), acc)
            res = T.alloc_fragment((block_M,), acc)
            T.copy(X[bx * block_M, 0], x)
            if op == "sum":
                T.reduce_sum(x, res, dim=1)
                T.copy(res, Out[bx * block_M])
            elif op == "max":
                T.reduce_max(x, res, dim=1)
                T.copy(res, Out[bx * block_M])
            elif op == "min":
                T.reduce_min(x, res, dim=-1)
                T.copy(res, Out[bx * block_M])
            elif op == "lse":
                e = T.alloc_fragment((block_M, N), "float32")
                s = T.alloc_fragment((block_M,), "float32")
                T.reduce_max(x, res, dim=1)
                for i, j in T.Parallel(block_M, N):
                    e[i, j] = T.exp(x[i, j] - res[i])
                T.reduce_sum(e, s, dim=1)
                for i in T.Parallel(block_M):
                    s[i] = res[i] + T.log(s[i])
                T.copy(s, Out[bx * block_M])
            else:
                pick = T.alloc_fragment((block_M, N), "int32")
                idx = T.alloc_fragment((block_M,), "int32")
                if op == "argmax":
                    T.reduce_max(x, res, dim=1)
                else:
                    T.reduce_min(x, res, dim=1)
                for i, j in T.Parallel(block_M, N):
                    pick[i, j] = T.where(x[i, j] == res[i], j, N)
                T.reduce_min(pick, idx, dim=1)
                T.copy(idx, Out[bx * block_M])

    return main


def _row_ref(x, op):
    if op == "sum":
        return x.astype(np.int64).sum(1).astype(np.int32) if x.dtype == np.int32 else _f64(x).sum(1)
    if op == "max":
        return x.max(1) if x.dtype == np.int32 else _f64(x).max(1)
    if op == "min":
        return x.min(1) if x.dtype == np.int32 else _f64(x).min(1)
    if op == "lse":
        xf = _f64(x)
        m = xf.max(1)
        return m + np.log(np.exp(xf - m[:, None]).sum(1))
    if op == "argmax":
        return np.argmax(x.astype(np.float32) if x.dtype != np.int32 else x, 1).astype(np.int32)
    return np.argmin(x.astype(np.float32) if x.dtype != np.int32 else x, 1).astype(np.int32)


def _row_tol(op, dtype, N):
    if op in ("max", "min", "argmax", "argmin"):
        return (0, 0)
    if op == "sum":
        return (1e-5 * max(N, 1), 1e-5)
    return TOLERANCES["float32"]


@tw.jit(out_idx=[-1])
def col_reduce(S, N, op, block_N=128, dtype="float32"):
    """A reduction along the middle axis of X (B, S, N): Out[b, n] = op over s of X[b, s, n];
    column windows of block_N with a tail (`T.ceildiv(N, block_N)`), the whole S in one tile."""
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
            elif op == "min":
                T.reduce_min(x, res, dim=0)
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


def _col_ref(x, op):
    xf = _f64(x)
    if op == "sum":
        return xf.sum(1)
    if op == "max":
        return xf.max(1)
    if op == "min":
        return xf.min(1)
    m = xf.max(1)
    return m + np.log(np.exp(xf - m[:, None, :]).sum(1))


@tw.jit(out_idx=[-1])
def masked_softmax_lens(N, block_M=1, dtype="float32", gate=True):
    """Row r's softmax over its first lens[r] columns (the rest 0). With `gate`, a program whose
    flag Go[bx] (read from a tensor) is 0 skips the work and writes zeros: conditional work."""
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
            if gate:
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
            else:
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

    return main


def _masked_softmax_ref(x, lens, go, block_M):
    xf = _f64(x)
    y = np.zeros_like(xf)
    for r, n in enumerate(lens):
        if go[r // block_M] > 0:
            e = np.exp(xf[r, :n] - xf[r, :n].max())
            y[r, :n] = e / e.sum()
    return y


@tw.jit(out_idx=[-1])
def scale_cast_rows(M, C, block_M, dtype, out_dtype):
    """A block of block_M rows (up to all of M: copies of more than 4095 rows) scaled, offset and cast."""
    @T.prim_func
    def main(X: T.Tensor((M, C), dtype), Y: T.Tensor((M, C), out_dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, C), "float32")
            y = T.alloc_fragment((block_M, C), out_dtype)
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, C):
                y[i, j] = x[i, j] * 0.5 - 1.0
            T.copy(y, Y[bx * block_M, 0])

    return main


@tw.jit(out_idx=[-1])
def gemm_handoff16(M, N, K, bm, bn, bk, dtype, hand="float16"):
    """C = relu(A @ B * 0.5 + bias) computed through the user's 16-bit hand-off (T.copy(acc, acc16)),
    tiles with tails in M, N and K."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), Bias: T.Tensor((N,), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), dtype)
            b = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            acc16 = T.alloc_fragment((bm, bn), hand)
            bias = T.alloc_fragment((bn,), "float32")
            out = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, acc)
            T.copy(acc, acc16)
            T.copy(Bias[bx * bn], bias)
            for i, j in T.Parallel(bm, bn):
                out[i, j] = T.max(acc16[i, j] * 0.5 + bias[j], 0.0)
            T.copy(out, C[by * bm, bx * bn])

    return main


@tw.jit()
def gemm_splitk_atomic(M, N, K, bm, bn, bk, splits, dtype):
    """Split-K: each of `splits` programs multiplies its share of the K steps and T.atomic_adds its
    partial into C (zeroed by the caller)."""
    steps = T.ceildiv(K, bk)
    per = T.ceildiv(steps, splits)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits) as (bx, by, s):
            a = T.alloc_shared((bm, bk), dtype)
            b = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for kk in T.serial(per):
                k = s * per + kk
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, acc)
            T.atomic_add(C[by * bm, bx * bn], acc)

    return main


@tw.jit(out_idx=[-1])
def int_chain(N, block_M=4):
    """int32 ops before and after a row sum: ((x // 3) % 7) ^ (x & 5), x << 1 >> 2; row sums added back."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "int32")
            s = T.alloc_fragment((block_M,), "int32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = ((x[i, j] // 3) % 7) ^ (x[i, j] & 5) + ((x[i, j] << 1) >> 2)
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - s[i] % 11
            T.copy(x, Y[bx * block_M, 0])

    return main


def _int_chain_ref(x):
    v = x.astype(np.int64)
    v = ((v // 3) % 7) ^ ((v & 5) + ((v << 1) >> 2))
    v = v.astype(np.int32).astype(np.int64)
    s = v.sum(1).astype(np.int32).astype(np.int64)
    return (v - (s % 11)[:, None]).astype(np.int32)


@tw.jit(out_idx=[-1])
def fmod_chain(N, block_M=4, dtype="float32", d=2.5):
    """y = (x % d) * w - mean over the row of (x % d): float % before and after a row sum."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] % d
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - s[i] / N
            T.copy(x, Y[bx * block_M, 0])

    return main


# ---------------------------------------------------------------------------------------------
# Row reductions along the last axis: odd row counts (blocks with tails, empty), odd widths (tails
# of the vector repeat, of UB column blocks), every dtype.

ROW_CASES = [
    # M     N       op       dtype       block_M
    (1,    1,      "sum",   "float32",  8),
    (3,    3,      "max",   "float16",  8),
    (7,    5,      "min",   "bfloat16", 8),
    (31,   17,     "lse",   "float32",  8),
    (33,   100,    "argmax", "float16", 8),
    (2,    257,    "argmin", "bfloat16", 1),
    (127,  1000,   "sum",   "bfloat16", 8),
    (7,    8193,   "lse",   "float16",  8),
    (3,    32000,  "argmax", "float32", 8),
    (3,    32001,  "sum",   "float32",  8),
    (2,    65535,  "max",   "bfloat16", 8),
    (2,    65535,  "lse",   "float32",  1),
    (1,    151936, "argmax", "bfloat16", 1),
    (2,    152064, "lse",   "bfloat16", 1),
    (2,    151936, "min",   "float16",  4),
    (0,    257,    "sum",   "float32",  8),
    (0,    151936, "max",   "float32",  1),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,op,dtype,block_M", ROW_CASES)
def test_row_reduce(M, N, op, dtype, block_M, target):
    x = randn((M, N), dtype, scale=3.0, seed=M * 7 + N)
    k = row_reduce(N, op, block_M, dtype, target=target)
    (got,) = _run(k, target, x)
    _close(got, _row_ref(x, op), _row_tol(op, dtype, N), f"{op} {M}x{N} {dtype} {target}")


INT_ROW_CASES = [
    (1, 1, "sum"), (3, 5, "max"), (7, 17, "min"), (33, 257, "argmax"), (31, 1000, "sum"),
    (3, 8193, "argmin"), (2, 65535, "sum"), (2, 151936, "max"), (2, 152064, "argmax"), (0, 3, "sum"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,op", INT_ROW_CASES)
def test_row_reduce_int32(M, N, op, target):
    x = np.random.default_rng(M + N).integers(-1000, 1000, (M, N)).astype(np.int32)
    k = row_reduce(N, op, 8, "int32", target=target)
    (got,) = _run(k, target, x)
    _close(got, _row_ref(x, op), (0, 0), f"int32 {op} {M}x{N} {target}")


# ---------------------------------------------------------------------------------------------
# Reductions along the middle axis: X (B, S, N) -> (B, N), column windows with tails.

COL_CASES = [
    # B  S     N      op     dtype       block_N
    (1,  1,    1,     "sum", "float32",  128),
    (2,  3,    17,    "max", "float16",  16),
    (3,  7,    100,   "min", "bfloat16", 64),
    (1,  31,   257,   "lse", "float32",  128),
    (2,  33,   1000,  "sum", "float16",  256),
    (1,  127,  129,   "lse", "bfloat16", 64),
    (1,  4097, 17,    "max", "float32",  16),   # a max across rows: merged over row groups
    (0,  5,    17,    "sum", "float32",  16),
    # hunt14 F3: the tile exceeds the UB and its reduction runs across the rows: column blocks of a
    # 32 B multiple (8 float32 columns; session 29, h-colred); the sum in row groups, carried (session 30,
    # h-colred2); the logsumexp in row groups, online (session 30); wider tiles since
    # h-online14 (session 26): F3's 3 x 65535 max and 2 x 32001 bfloat16 sum are test_ascend_widerow_s26.py's
    (1,  4097, 17,    "sum", "float32",  16),
    (1,  1000, 100,   "lse", "float32",  64),
]


def _col_params():
    return [pytest.param(*c, t) for c in COL_CASES for t in TARGETS]


@pytest.mark.parametrize("B,S,N,op,dtype,block_N,target", _col_params())
def test_middle_axis_reduce(B, S, N, op, dtype, block_N, target):
    x = randn((B, S, N), dtype, scale=2.0, seed=B + S + N)
    k = col_reduce(S, N, op, block_N, dtype, target=target)
    (got,) = _run(k, target, x)
    tol = (1e-5 * S, 1e-5) if op == "sum" else (0, 0) if op in ("max", "min") else TOLERANCES["float32"]
    _close(got, _col_ref(x, op), tol, f"middle-axis {op} {B}x{S}x{N} {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# Elementwise chains before and after a reduction: residual add + RMSNorm + cast (two stores).

RMS_CASES = [
    # M    N       block_M dtype       out
    (1,    1,      8,      "float32",  "float16"),
    (3,    5,      8,      "float16",  "float32"),
    (7,    100,    8,      "bfloat16", "bfloat16"),
    (33,   1000,   8,      "float32",  "bfloat16"),
    (31,   8193,   8,      "float16",  "float16"),
    (3,    32001,  8,      "bfloat16", "float32"),
    (2,    65535,  1,      "float32",  "float16"),
    (2,    151936, 1,      "float16",  "bfloat16"),
    (0,    100,    8,      "float32",  "float16"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,block_M,dtype,out", RMS_CASES)
def test_residual_rms_norm(M, N, block_M, dtype, out, target):
    rng = np.random.default_rng(M + N)
    x, r, w = randn((M, N), dtype, seed=rng), randn((M, N), dtype, seed=rng), randn((N,), dtype, seed=rng)
    k = residual_rms_norm(N, block_M, dtype, out, target=target)
    h, y = _run(k, target, x, r, w)
    href = _f64(x) + _f64(r)
    # the reference rounds h to the dtype as the kernel's stored H; y from the float32 h
    yref = href / np.sqrt((href * href).mean(1, keepdims=True) + 1e-6) * _f64(w)
    _close(h, href, TOLERANCES[dtype], f"h {M}x{N} {dtype} {target}")
    _close(y, yref, max(TOLERANCES[out], TOLERANCES[dtype]),
           f"rms {M}x{N} {dtype}->{out} {target}")


# ---------------------------------------------------------------------------------------------
# Conditional work: per-program lengths read from a tensor, with row groups and column blocks.

LENS_CASES = [
    # M   N       dtype       block_M  lens (>= 1)                 go (per program)
    (3,   1,      "float32",  1,  [1, 1, 1],                       [1, 0, 1]),
    (4,   17,     "float16",  1,  [17, 3, 1, 9],                   [1, 0, 1, 1]),
    (7,   100,    "bfloat16", 2,  [100, 1, 5, 99, 33, 2, 7],       [1, 1, 0, 1]),
    (16,  8193,   "float32",  8,  [8193, 1, 4096, 4097, 17, 8192, 3, 5] * 2, [0, 1]),
    (3,   8193,   "bfloat16", 1,  [8193, 1, 2],                    [1, 0, 1]),
    (3,   65535,  "float32",  1,  [1, 65535, 32768],               [1, 1, 0]),
    (2,   151936, "float16",  1,  [151936, 1],                     [1, 0]),
    (3,   152064, "float32",  1,  [76000, 1, 152064],              [1, 1, 1]),
]


# hunt14 F2 (fixed by h-hints14, session 26): an `if` on a tensor value around a body whose rows exceed the UB
# runs its rows in groups / its row in column blocks on ascend910b (was a UB overflow).


def _lens_params():
    out = []
    for c in LENS_CASES:
        M, N, dtype, block_M = c[:4]
        too_big = block_M * N * 4 > 196352 // 2     # the x tile alone is more than half the UB
        for gate in (False, True):
            for t in TARGETS:
                out.append(pytest.param(*c, gate, t, id=f"{M}x{N}-{dtype}-bm{block_M}-"
                                        f"{'gated' if gate else 'mask'}-{t}"))
    return out


@pytest.mark.parametrize("M,N,dtype,block_M,lens,go,gate,target", _lens_params())
def test_masked_softmax_lengths(M, N, dtype, block_M, lens, go, gate, target):
    x = randn((M, N), dtype, scale=3.0, seed=N)
    ln, g = np.array(lens, np.int32), np.array(go if gate else [1] * len(go), np.int32)
    k = masked_softmax_lens(N, block_M, dtype, gate, target=target)
    (y,) = _run(k, target, x, ln, g)
    # compared at N * y: values up to N (a row of one column)
    _close(_f64(y) * N, _masked_softmax_ref(x, ln, g, block_M) * N, TOLERANCES["float32"],
           f"masked softmax {M}x{N} {dtype} gate={gate} {target}")


# ---------------------------------------------------------------------------------------------
# Copies of more than 4095 rows, odd columns, casts; row groups of such blocks.

COPY_CASES = [
    # M     C   block_M dtype       out
    (4095, 1,  4095,   "float32",  "float16"),
    (4096, 3,  4096,   "float16",  "float32"),
    (4097, 5,  4097,   "bfloat16", "float32"),
    (8191, 17, 8191,   "float32",  "bfloat16"),
    (8191, 3,  4096,   "float16",  "float16"),
    (4097, 100, 4097,  "float32",  "float32"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,C,block_M,dtype,out", COPY_CASES)
def test_many_rows_scale_cast(M, C, block_M, dtype, out, target):
    x = randn((M, C), dtype, seed=M + C)
    k = scale_cast_rows(M, C, block_M, dtype, out, target=target)
    (y,) = _run(k, target, x)
    _close(y, _f64(x) * 0.5 - 1.0, TOLERANCES[out], f"scale/cast {M}x{C} {dtype}->{out} {target}")


# ---------------------------------------------------------------------------------------------
# gemm -> the user's 16-bit hand-off -> vector epilogue, odd M / N / K.

GEMM16_CASES = [
    # M     N     K     bm  bn  bk  dtype       hand
    (1,    1,    1,    16, 16, 32, "float16",  "float16"),
    (15,   17,   65,   16, 32, 32, "float16",  "float16"),
    (17,   15,   127,  32, 16, 64, "bfloat16", "bfloat16"),
    (65,   129,  17,   64, 64, 32, "float16",  "bfloat16"),
    (127,  65,   129,  64, 64, 64, "bfloat16", "float16"),
    (129,  127,  1000, 64, 128, 128, "float16", "float16"),
    (1000, 17,   15,   128, 32, 32, "float32", "float16"),
]


def _gemm_inputs(M, N, K, dtype, seed):
    rng = np.random.default_rng(seed)
    a = randn((M, K), dtype, seed=rng)
    b = randn((K, N), dtype, seed=rng)
    return a, b, _f64(a) @ _f64(b)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,bm,bn,bk,dtype,hand", GEMM16_CASES)
def test_gemm_handoff16_epilogue(M, N, K, bm, bn, bk, dtype, hand, target):
    a, b, ab = _gemm_inputs(M, N, K, dtype, M + N + K)
    bias = randn((N,), "float32", seed=K)
    k = gemm_handoff16(M, N, K, bm, bn, bk, dtype, hand, target=target)
    (c,) = _run(k, target, a, b, bias)
    ref = np.maximum(ab * 0.5 + _f64(bias), 0.0)
    # the hand-off rounds ab to `hand`: |error| <= atol + rtol 0.5 |ab| (TOLERANCES[hand]) plus the
    # float32 sum's 1e-5 * K; relu and the bias add no error of their own
    atol, rtol = TOLERANCES[hand]
    bound = atol + 1e-5 * K + rtol * 0.5 * np.abs(ab)
    err = np.abs(_f64(c) - ref)
    assert (err <= bound).all(), (f"gemm16 {M}x{N}x{K} {dtype}/{hand} {target}: {int((err > bound).sum())} "
                                  f"of {err.size} off, worst {err.max() if err.size else 0}")


# ---------------------------------------------------------------------------------------------
# T.atomic_add after a gemm: split-K with odd tiles.

ATOMIC_CASES = [
    # M    N    K     bm  bn  bk  splits dtype
    (1,   1,   1,    16, 16, 16, 1,  "float16"),
    (15,  17,  65,   16, 16, 16, 3,  "float16"),
    (17,  65,  129,  16, 32, 32, 4,  "bfloat16"),
    (127, 15,  1000, 64, 16, 64, 5,  "float16"),
    (65,  127, 17,   32, 64, 16, 2,  "float32"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,bm,bn,bk,splits,dtype", ATOMIC_CASES)
def test_gemm_splitk_atomic_add(M, N, K, bm, bn, bk, splits, dtype, target):
    a, b, ab = _gemm_inputs(M, N, K, dtype, M * N + K)
    c = np.zeros((M, N), np.float32)
    k = gemm_splitk_atomic(M, N, K, bm, bn, bk, splits, dtype, target=target)
    _run(k, target, a, b, c)
    _close(c, ab, (1e-5 * K, 1e-5), f"split-K atomic {M}x{N}x{K} s{splits} {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# Integer ops and float % around reductions, odd widths up to column blocks.

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N", [(1, 1), (3, 17), (7, 257), (5, 8193), (2, 65535)])
def test_int_chain_row_sum(M, N, target):
    x = np.random.default_rng(N).integers(-10000, 10000, (M, N)).astype(np.int32)
    (y,) = _run(int_chain(N, target=target), target, x)
    _close(y, _int_chain_ref(x), (0, 0), f"int chain {M}x{N} {target}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,dtype", [(1, 1, "float32"), (3, 17, "float16"), (7, 257, "bfloat16"),
                                       (5, 8193, "float32"), (2, 65535, "float16"), (1, 151936, "float32")])
def test_fmod_chain_row_mean(M, N, dtype, target):
    # multiples of 1/8 in [-32, 32): x % 2.5 is exact in float32 (the quotient's floor is exact)
    x = (np.random.default_rng(N).integers(-256, 256, (M, N)) / 8.0).astype(np_dtype(dtype))
    (y,) = _run(fmod_chain(N, dtype=dtype, target=target), target, x)
    m = np.mod(_f64(x), 2.5)
    ref = m - m.mean(1, keepdims=True)
    atol, rtol = TOLERANCES[dtype]
    _close(y, ref, (atol + 1e-6 * N, rtol), f"fmod chain {M}x{N} {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# T.Pipelined over column blocks with a carried column (a row prefix of the blocks' last columns),
# rows and columns with tails.

@tw.jit(out_idx=[-1])
def pipelined_carry(M, N, bm, bn, dtype, stages):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, bn), "float32")
            cy = T.alloc_fragment((bm,), "float32")
            T.clear(cy)
            for k in T.Pipelined(T.ceildiv(N, bn), num_stages=stages):
                T.copy(X[bx * bm, k * bn], x)
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = x[i, j] + cy[i]
                for i in T.Parallel(bm):
                    cy[i] = x[i, bn - 1]
                T.copy(x, Y[bx * bm, k * bn])

    return main


def _carry_ref(x, bn):
    xf = _f64(x)
    M, N = xf.shape
    y = np.zeros_like(xf)
    cy = np.zeros(M)
    for k0 in range(0, N, bn):
        blk = np.zeros((M, bn))
        w = min(bn, N - k0)
        blk[:, :w] = xf[:, k0:k0 + w]
        blk += cy[:, None]
        y[:, k0:k0 + w] = blk[:, :w]
        cy = blk[:, bn - 1]
    return y


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm,bn,dtype,stages", [
    (1, 1, 8, 8, "float32", 2), (3, 17, 8, 8, "float16", 2), (7, 100, 8, 32, "float32", 3),
    (33, 257, 16, 64, "float16", 2), (31, 1000, 8, 128, "float32", 1), (2, 8193, 8, 1024, "float32", 2),
    (17, 65, 16, 16, "bfloat16", 2),
])
def test_pipelined_column_carry(M, N, bm, bn, dtype, stages, target):
    # small integers: every sum exact in float32 and in the 16-bit output (|y| < 2048 for float16,
    # < 256 for bfloat16: the carries add at most N / bn * 3)
    hi = 2 if dtype == "bfloat16" else 4
    x = np.random.default_rng(N).integers(-hi, hi, (M, N)).astype(np_dtype(dtype))
    (y,) = _run(pipelined_carry(M, N, bm, bn, dtype, stages, target=target), target, x)
    _close(y, _carry_ref(x, bn), (0, 0), f"pipelined carry {M}x{N} {bm}x{bn} {dtype} s{stages} {target}")


# ---------------------------------------------------------------------------------------------
# N-D windows: BSHD -> BHSD relayout with a scale, odd S (tails) and head dims (rows not 32 B).

@tw.jit(out_idx=[-1])
def bshd_to_bhsd(B, S, H, D, bs, dtype):
    @T.prim_func
    def main(X: T.Tensor((B, S, H, D), dtype), Y: T.Tensor((B, H, S, D), dtype)):
        with T.Kernel(T.ceildiv(S, bs), H, B) as (sx, h, b):
            t = T.alloc_fragment((bs, D), "float32")
            T.copy(X[b, sx * bs:(sx + 1) * bs, h, :], t)
            for i, j in T.Parallel(bs, D):
                t[i, j] = t[i, j] * 2.0 + 1.0
            T.copy(t, Y[b, h, sx * bs:(sx + 1) * bs, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("B,S,H,D,bs,dtype", [
    (1, 1, 1, 1, 8, "float32"), (2, 17, 3, 3, 8, "float16"), (1, 33, 2, 5, 16, "bfloat16"),
    (3, 7, 5, 80, 4, "float32"), (1, 127, 1, 17, 32, "float16"), (1, 4097, 1, 3, 4097, "float32"),
])
def test_nd_window_relayout(B, S, H, D, bs, dtype, target):
    x = randn((B, S, H, D), dtype, seed=S * D)
    (y,) = _run(bshd_to_bhsd(B, S, H, D, bs, dtype, target=target), target, x)
    _close(y, _f64(x).transpose(0, 2, 1, 3) * 2.0 + 1.0, TOLERANCES[dtype],
           f"bshd->bhsd {B}x{S}x{H}x{D} bs{bs} {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# One row per program in a 1-D tile (the row as a vector), reduced into a (1,) tile.

@tw.jit(out_idx=[-2, -1])
def row_vec_stats(N, dtype):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M) as bx:
            x = T.alloc_fragment((N,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, :], x)
            for j in T.Parallel(N):
                x[j] = x[j] * x[j]
            T.reduce_sum(x, s)
            for j in T.Parallel(N):
                x[j] = x[j] / (s[0] + 1.0)
            T.copy(s, S[bx:bx + 1])
            T.copy(x, Y[bx, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,dtype", [(1, 1, "float32"), (3, 5, "float16"), (2, 1000, "bfloat16"),
                                       (2, 65535, "float32"), (1, 151936, "float16"), (0, 17, "float32")])
def test_row_vector_stats(M, N, dtype, target):
    x = randn((M, N), dtype, seed=N)
    s, y = _run(row_vec_stats(N, dtype, target=target), target, x)
    sq = _f64(x) ** 2
    sref = sq.sum(1)
    _close(s, sref, (1e-5 * N, 1e-5), f"row vector sum {M}x{N} {dtype} {target}")
    _close(y, sq / (sref[:, None] + 1.0), TOLERANCES[dtype], f"row vector scale {M}x{N} {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# Conditional hand-offs: a gemm -> 16-bit hand-off -> epilogue under `if Go[by] > 0` (a flag read
# from a tensor), many programs of which few work (the pacing flags of session 25), odd shapes.

@tw.jit(out_idx=[-1])
def gated_gemm16(M, N, K, bm, bn, hand, dtype="float16"):
    G = T.symbolic("G")

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), Go: T.Tensor((G,), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, K), dtype)
            b = T.alloc_shared((bn, K), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            acc16 = T.alloc_fragment((bm, bn), hand)
            out = T.alloc_fragment((bm, bn), "float32")
            if Go[by] > 0:
                T.copy(A[by * bm, 0], a)
                T.copy(B[bx * bn, 0], b)
                T.gemm(a, b, acc, transpose_B=True, clear_accum=True)
                T.copy(acc, acc16)
                for i, j in T.Parallel(bm, bn):
                    out[i, j] = acc16[i, j] * 2.0 - 1.0
                T.copy(out, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,bm,bn,hand,working", [
    (17, 15, 33, 16, 16, "float16", [0]),
    (1000, 17, 65, 16, 32, "bfloat16", [0, 31, 62]),         # 63 row blocks x 1, 3 work
    (6400, 15, 17, 16, 16, "float16", [3, 399]),             # 400 programs, 2 work
    (129, 1000, 15, 16, 128, "float16", [8]),                # 9 x 8 programs, the row tail works
])
@unchecked_code_only
def test_gated_gemm_handoff16_many_programs(M, N, K, bm, bn, hand, working, target):
    rng = np.random.default_rng(M + N)
    a = (rng.integers(-4, 5, (M, K)) / 4.0).astype(np.float16)
    b = (rng.integers(-4, 5, (N, K)) / 4.0).astype(np.float16)
    go = np.zeros(-(-M // bm), np.int32)
    go[working] = 1
    k = gated_gemm16(M, N, K, bm, bn, hand, target=target)
    # the output is allocated by the runtime: only the working rows are compared
    (c,) = _run(k, target, a, b, go)
    # multiples of 1/16 of magnitude <= K: exact in float32, so the hand-off's rounding to `hand` is
    # the same whatever the Cube's order: compared exactly
    ab = (_f64(a) @ _f64(b).T).astype(np.float32).astype(np_dtype(hand))
    rows = np.concatenate([np.arange(w * bm, min(M, (w + 1) * bm)) for w in working])
    _close(c[rows], _f64(ab[rows]) * 2.0 - 1.0, (0, 0), f"gated gemm16 {M}x{N}x{K} {hand} {target}")


# ---------------------------------------------------------------------------------------------
# Row groups (rows that exceed the UB run in groups, as blocks of the grid) in kernels that use the
# block index for more than the row start: a per-program scalar read, rows in reverse block order.

@tw.jit(out_idx=[-1])
def rows_scaled(N, block_M, dtype, reverse):
    M = T.symbolic("M")
    G = T.symbolic("G")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Sc: T.Tensor((G,), "float32"), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            sc = Sc[bx]
            r0 = (T.ceildiv(M, block_M) - 1 - bx) * block_M if reverse else bx * block_M
            T.copy(X[r0, 0], x)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = sc * T.rsqrt(ss[i] / N + 1.0)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * ss[i]
            T.copy(x, Y[r0, 0])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("M,N,block_M,dtype", [
    (16, 8193, 8, "float32"), (13, 4097, 8, "float16"), (7, 32000, 4, "bfloat16"), (33, 5000, 32, "float32"),
])
def test_row_groups_block_index_uses(M, N, block_M, dtype, reverse, target):
    rng = np.random.default_rng(N)
    x = randn((M, N), dtype, seed=rng)
    nb = -(-M // block_M)
    sc = (np.arange(nb) + 1).astype(np.float32)
    (y,) = _run(rows_scaled(N, block_M, dtype, reverse, target=target), target, x, sc)
    xf = _f64(x)
    blk = np.arange(M) // block_M
    s = sc[nb - 1 - blk] if reverse else sc[blk]
    ref = xf * (s / np.sqrt((xf * xf).mean(1) + 1.0))[:, None]
    _close(y, ref, TOLERANCES[dtype], f"rows scaled {M}x{N} bm{block_M} {dtype} reverse={reverse} {target}")


# ---------------------------------------------------------------------------------------------
# Run-time row extents (`rows = T.min(block_M, n - r0)`, docs/language.md "Run-time extents") in
# blocks whose rows exceed the UB (row groups) or whose row exceeds it (column blocks).

@tw.jit(out_idx=[-1])
def first_n_rows_centered(N, block_M, dtype):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), n: T.int32, Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            r0 = bx * block_M
            rows = T.min(block_M, n - r0)
            T.copy(X[r0:r0 + rows, :], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - mx[i]
            T.copy(x[0:rows, :], Y[r0:r0 + rows, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,block_M,n,dtype", [
    (9, 17, 8, 9, "float32"), (20, 8193, 8, 13, "float32"), (16, 8193, 8, 0, "float16"),
    (3, 65535, 1, 2, "bfloat16"), (2, 151936, 1, 1, "float32"),
])
@unchecked_code_only
def test_runtime_row_extent_wide(M, N, block_M, n, dtype, target):
    x = randn((M, N), dtype, seed=N + n)
    if block_M == 1 and target == TARGET:
        # documented (docs/language.md "Run-time extents"): on ascend910b a run-time extent of bound 1
        # is an error whose hint is the `if` form (test_f2_runtime_extent_hint_then_if)
        with pytest.raises(tw.TilewrightError, match="guard the copy with an if"):
            first_n_rows_centered(N, block_M, dtype, target=target)
        return
    (y,) = _run(first_n_rows_centered(N, block_M, dtype, target=target), target, x, n)
    xf = _f64(x[:n])
    _close(y[:n], xf - xf.max(1, keepdims=True) if n else xf, TOLERANCES[dtype],
           f"first {n} rows {M}x{N} bm{block_M} {dtype} {target}")


@tw.jit(out_idx=[-1])
def first_n_rows_centered_if(N, dtype):
    """first_n_rows_centered at block_M 1 written as the error's hint says: the copy under `if`."""
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
@unchecked_code_only
def test_f2_runtime_extent_hint_then_if(M, N, n, dtype, target):
    x = randn((M, N), dtype, seed=N + n)
    (y,) = _run(first_n_rows_centered_if(N, dtype, target=target), target, x, n)
    xf = _f64(x[:n])
    _close(y[:n], xf - xf.max(1, keepdims=True), TOLERANCES[dtype], f"first {n} rows (if) {M}x{N} {dtype} {target}")


# hunt14 F1 (fixed): copies of more than 4095 rows whose count is known only at run time.

@tw.jit(out_idx=[-1])
def rows_plus_one(C, bm, M=None):
    MM = T.symbolic("M") if M is None else M

    @T.prim_func
    def main(X: T.Tensor((MM, C), "float32"), Y: T.Tensor((MM, C), "float32")):
        with T.Kernel(T.ceildiv(MM, bm)) as bx:
            t = T.alloc_fragment((bm, C), "float32")
            T.copy(X[bx * bm, 0], t)
            for i, j in T.Parallel(bm, C):
                t[i, j] = t[i, j] + 1.0
            T.copy(t, Y[bx * bm, 0])

    return main


@tw.jit(out_idx=[-1])
def first_rows_plus_one(C, bm):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, C), "float32"), n: T.int32, Y: T.Tensor((M, C), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            t = T.alloc_fragment((bm, C), "float32")
            r0 = bx * bm
            rows = T.min(bm, n - r0)
            T.copy(X[r0:r0 + rows, :], t)
            for i, j in T.Parallel(bm, C):
                t[i, j] = t[i, j] + 1.0
            T.copy(t[0:rows, :], Y[r0:r0 + rows, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form,M,C,bm,n", [
    ("tail", 5000, 3, 4097, None),        # blocks of 4097 rows, the last 903
    ("symbolic", 4097, 3, 4097, None),    # M symbolic: the count min(4097, M - r0) at run time
    ("symbolic", 9000, 5, 8190, None),    # 8190 = 2 x 4095, then a tail of 810
    ("runtime", 6000, 3, 4097, 4500),     # the user's T.min(4097, n - r0)
    ("runtime", 6000, 3, 4097, 4095),     # the second block copies nothing
])
@unchecked_code_only
def test_f1_runtime_count_above_4095_rows(form, M, C, bm, n, target):
    x = randn((M, C), "float32", seed=M + C)
    if form == "runtime":
        (y,) = _run(first_rows_plus_one(C, bm, target=target), target, x, n)
        _close(y[:n], _f64(x[:n]) + 1.0, TOLERANCES["float32"], f"first {n} rows + 1 {target}")
        return
    k = rows_plus_one(C, bm, M if form == "tail" else None, target=target)
    (y,) = _run(k, target, x)
    _close(y, _f64(x) + 1.0, TOLERANCES["float32"], f"{form} {M}x{C} bm{bm} + 1 {target}")


# ---------------------------------------------------------------------------------------------
# A reduction along the middle dim of a 3-D tile (bb, S, D) -> (bb, D), then a chain on the result.

@tw.jit(out_idx=[-1])
def mid3_reduce(S, D, bb, op, dtype):
    B = T.symbolic("B")

    @T.prim_func
    def main(X: T.Tensor((B, S, D), dtype), Out: T.Tensor((B, D), dtype)):
        with T.Kernel(T.ceildiv(B, bb)) as bx:
            x = T.alloc_fragment((bb, S, D), "float32")
            r = T.alloc_fragment((bb, D), "float32")
            T.copy(X[bx * bb:(bx + 1) * bb, :, :], x)
            if op == "sum":
                T.reduce_sum(x, r, dim=1)
            elif op == "max":
                T.reduce_max(x, r, dim=1)
            else:
                T.reduce_min(x, r, dim=1)
            for i, j in T.Parallel(bb, D):
                r[i, j] = r[i, j] * 0.5 + 1.0
            T.copy(r, Out[bx * bb, 0])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("B,S,D,bb,op,dtype", [
    (1, 1, 1, 2, "sum", "float32"), (3, 7, 17, 2, "max", "float16"), (5, 3, 100, 4, "min", "bfloat16"),
    (2, 33, 5, 1, "sum", "float16"), (7, 31, 257, 2, "max", "float32"), (0, 3, 5, 2, "sum", "float32"),
])
def test_middle_dim_of_3d_tile(B, S, D, bb, op, dtype, target):
    # small integers: sums exact, then * 0.5 + 1 exact in every dtype
    x = np.random.default_rng(S * D).integers(-8, 8, (B, S, D)).astype(np_dtype(dtype))
    (y,) = _run(mid3_reduce(S, D, bb, op, dtype, target=target), target, x)
    red = {"sum": np.sum, "max": np.max, "min": np.min}[op](_f64(x), axis=1)
    _close(y, red * 0.5 + 1.0, (0, 0), f"3-D middle {op} {B}x{S}x{D} bb{bb} {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# hunt14 F5: a gemm -> residual-add epilogue at 128 x 256 / 64 x 512 blocks overflows the UB by
# 256 B on ascend910b (three 64 KiB vector tiles per AIV); the hint names the compiler's `acc_ub`.

@tw.jit(out_idx=[-1])
def gemm_residual(M, N, K, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Rz: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, K), "float16")
            b = T.alloc_shared((K, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            r = T.alloc_fragment((bm, bn), "float32")
            out = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, 0], a)
            T.copy(B[0, bx * bn], b)
            T.gemm(a, b, acc, clear_accum=True)
            T.copy(Rz[by * bm, bx * bn], r)
            for i, j in T.Parallel(bm, bn):
                out[i, j] = acc[i, j] * 0.5 + r[i, j]
            T.copy(out, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("M,N,K,bm,bn", [(129, 257, 33, 128, 256), (65, 1000, 17, 64, 512)])
def test_f5_gemm_residual_epilogue(M, N, K, bm, bn, target):
    rng = np.random.default_rng(M + N)
    a = (rng.integers(-4, 5, (M, K)) / 4.0).astype(np.float16)
    b = (rng.integers(-4, 5, (K, N)) / 4.0).astype(np.float16)
    rz = rng.integers(-4, 5, (M, N)).astype(np.float32)
    (c,) = _run(gemm_residual(M, N, K, bm, bn, target=target), target, a, b, rz)
    # multiples of 1/16: exact in float32 in any order
    _close(c, (_f64(a) @ _f64(b)) * 0.5 + rz, (0, 0), f"gemm + residual {M}x{N}x{K} {bm}x{bn} {target}")


@pytest.mark.parametrize("M,N,K,bm,bn", [(129, 257, 33, 64, 256), (65, 1000, 17, 32, 512)])
def test_gemm_residual_epilogue_half_block(M, N, K, bm, bn):
    """F5's alternative: half the rows per block fits and matches cpu and float64 exactly."""
    rng = np.random.default_rng(M + N)
    a = (rng.integers(-4, 5, (M, K)) / 4.0).astype(np.float16)
    b = (rng.integers(-4, 5, (K, N)) / 4.0).astype(np.float16)
    rz = rng.integers(-4, 5, (M, N)).astype(np.float32)
    for target in TARGETS:
        (c,) = _run(gemm_residual(M, N, K, bm, bn, target=target), target, a, b, rz)
        _close(c, (_f64(a) @ _f64(b)) * 0.5 + rz, (0, 0), f"gemm + residual {M}x{N}x{K} {bm}x{bn} {target}")


# ---------------------------------------------------------------------------------------------
# Merging reductions (`clear=False` into a value the kernel set: a bias, a result changed by a map)
# with row groups and column blocks.

@tw.jit(out_idx=[-1])
def merged_reduce(M, N, block_M, op):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Bias: T.Tensor((M,), "float32"), Out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(Bias[bx * block_M], s)
            T.copy(X[bx * block_M, 0], x)
            if op == "sum":
                T.reduce_sum(x, s, dim=1, clear=False)
            elif op == "max":
                T.reduce_max(x, s, dim=1, clear=False)
            elif op == "min":
                T.reduce_min(x, s, dim=1, clear=False)
            else:  # max, changed by a map, then merged with the max of 2x
                T.reduce_max(x, s, dim=1)
                for i in T.Parallel(block_M):
                    s[i] = s[i] * 0.5 + 100.0
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] * 2.0
                T.reduce_max(x, s, dim=1, clear=False)
            T.copy(s, Out[bx * block_M])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["sum", "max", "min", "remerge"])
@pytest.mark.parametrize("M,N,block_M", [(3, 17, 8), (16, 8193, 8), (3, 65535, 1), (2, 151936, 1)])
def test_merged_reductions(M, N, block_M, op, target):
    rng = np.random.default_rng(N)
    x = rng.integers(-50, 50, (M, N)).astype(np.float32)      # integer sums: exact in float32
    bias = (rng.integers(-100, 100, M) * 30).astype(np.float32)
    xf = _f64(x)
    ref = {"sum": bias + xf.sum(1), "max": np.maximum(bias, xf.max(1)), "min": np.minimum(bias, xf.min(1)),
           "remerge": np.maximum(xf.max(1) * 0.5 + 100, 2 * xf.max(1))}[op]
    (got,) = _run(merged_reduce(M, N, block_M, op, target=target), target, x, bias)
    _close(got, ref, (0, 0), f"merged {op} {M}x{N} bm{block_M} {target}")


# ---------------------------------------------------------------------------------------------
# The row and column indices as values (an index mask from the block's row, `j % 3` as a weight)
# in row groups and column blocks, a row sum after; T.atomic_add of rows that exceed the UB.

@tw.jit(out_idx=[-2, -1])
def index_values(M, N, block_M, step):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = (T.where(j <= (bx * block_M + i) * step, x[i, j], 0.0) * T.cast(j % 3, "float32")
                           + T.cast(i, "float32"))
            T.reduce_sum(x, s, dim=1)
            T.copy(x, Y[bx * block_M, 0])
            T.copy(s, S[bx * block_M])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,block_M,step", [(13, 8193, 8, 700), (5, 65535, 2, 20000), (3, 151936, 1, 60000)])
def test_index_values_wide(M, N, block_M, step, target):
    x = np.random.default_rng(N).integers(-4, 4, (M, N)).astype(np.float32)
    r, j = np.arange(M)[:, None], np.arange(N)[None, :]
    y = np.where(j <= r * step, x, 0) * (j % 3) + (r % block_M)
    got_y, got_s = _run(index_values(M, N, block_M, step, target=target), target, x)
    _close(got_y, y.astype(np.float64), (0, 0), f"index values {M}x{N} {target}")
    _close(got_s, y.sum(1).astype(np.float64), (0, 0), f"index values' sums {M}x{N} {target}")


@tw.jit()
def atomic_rows(M, N, block_M):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            y = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                y[i, j] = x[i, j] * 2.0
            T.atomic_add(Y[bx * block_M, 0], y)

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,block_M", [(17, 8193, 8), (3, 65535, 2), (2, 151936, 1)])
def test_atomic_add_wide_rows(M, N, block_M, target):
    x = np.random.default_rng(N).integers(-8, 8, (M, N)).astype(np.float32)
    y = np.ones((M, N), np.float32)
    _run(atomic_rows(M, N, block_M, target=target), target, x, y)
    _close(y, 1.0 + 2.0 * _f64(x), (0, 0), f"atomic rows {M}x{N} bm{block_M} {target}")


# ---------------------------------------------------------------------------------------------
# float % and integer // % by a tile of divisors (negative, zero, +-inf, INT_MIN // -1), odd widths.

@tw.jit(out_idx=[2, 5, 6])
def mod_by_tile(M, N, block_M, dtype):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Yd: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype),
             I: T.Tensor((M, N), "int32"), J: T.Tensor((M, N), "int32"), Q: T.Tensor((M, N), "int32"),
             R: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            y = T.alloc_fragment((block_M, N), dtype)
            z = T.alloc_fragment((block_M, N), dtype)
            a = T.alloc_fragment((block_M, N), "int32")
            b = T.alloc_fragment((block_M, N), "int32")
            q = T.alloc_fragment((block_M, N), "int32")
            r = T.alloc_fragment((block_M, N), "int32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(Yd[bx * block_M, 0], y)
            T.copy(I[bx * block_M, 0], a)
            T.copy(J[bx * block_M, 0], b)
            for i, j in T.Parallel(block_M, N):
                z[i, j] = x[i, j] % y[i, j]
                q[i, j] = a[i, j] // b[i, j]
                r[i, j] = a[i, j] % b[i, j]
            T.copy(z, Z[bx * block_M, 0])
            T.copy(q, Q[bx * block_M, 0])
            T.copy(r, R[bx * block_M, 0])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,block_M,dtype", [(3, 17, 8, "float32"), (7, 100, 4, "float16"), (5, 257, 2, "bfloat16"),
                                               (2, 8193, 2, "float32"), (1, 65535, 1, "float16")])
def test_mod_by_tile(M, N, block_M, dtype, target):
    rng = np.random.default_rng(N)
    x = (rng.integers(-64, 64, (M, N)) / 4.0).astype(np_dtype(dtype))       # quotients by the divisors below exact
    y = np.array([0.5, -0.5, 2.0, -4.0, 1.0, -1.0, 8.0, 0.25, np.inf, -np.inf])[rng.integers(0, 10, (M, N))]
    y = y.astype(np_dtype(dtype))
    a = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    b = rng.integers(-7, 8, (M, N)).astype(np.int32)
    a[0, :3], b[0, :3] = [-2**31, 2**31 - 1, 5], [-1, 0, 0]                  # INT_MIN // -1 wraps; x // 0 == 0
    z, q, r = _run(mod_by_tile(M, N, block_M, dtype, target=target), target, x, y, a, b)
    zref = np.mod(_f64(x), _f64(y))
    a64, b64 = a.astype(np.int64), np.where(b == 0, 1, b).astype(np.int64)
    qref = np.where(b == 0, 0, a64 // b64)
    qref = ((qref + 2**31) % 2**32 - 2**31).astype(np.int32)
    rref = np.where(b == 0, a64, a64 % b64).astype(np.int32)
    _close(z, zref, (0, 0), f"x % y {M}x{N} {dtype} {target}")
    _close(q, qref, (0, 0), f"a // b {M}x{N} {target}")
    _close(r, rref, (0, 0), f"a % b {M}x{N} {target}")


def test_f1_split_run_time_count_ascendc_compiles(tmp_path):
    """The split copy's AscendC (blockCount `min(n - 4095, 4095)` under `if (... > 0)`) compiles against
    the stand-in headers (test_ascendc_compile.py's g++ -fsyntax-only)."""
    import shutil
    if shutil.which("g++") is None:
        pytest.skip("g++ not found")
    import test_ascendc_compile as tac
    src = first_rows_plus_one(3, 4097, target=TARGET).get_source("ascendc")
    assert src.count("DataCopyPad(") >= 4, src             # two calls in, two out
    rc, out = tac.compile_cpp(src, tmp_path)
    assert rc == 0 and out == "", out
