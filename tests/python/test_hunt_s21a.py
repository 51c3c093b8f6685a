"""Session 21's from-scratch hunt (h-hunt9a, docs/testing.md "Session 21: ... (h-hunt9a)"): kernels a new
user writes from docs/language.md alone (not the examples, not the op zoo), each on cpu and on ascend910b
(simulator, checker on) against a float64 numpy reference, at odd shapes (one element, primes, tails,
empty dims, blocks that divide nothing, grids of one block). The defects found are strict xfails whose
reason names the finding (F1..F9 of the session's findings); the rest guard what works.

Tolerances: exact (0) wherever the inputs are small integers (sums, scans, gemms of exact_values,
argmax, int8 maps); math maps 1e-5 (float32), 1e-3 (float16), 8e-3 (bfloat16) absolute and relative."""
import math
import sys
import pathlib

import ml_dtypes
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, exact_values, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def _close(out, ref, atol=0.0, rtol=0.0):
    tw.testing.assert_close(np.asarray(out).astype(np.float64), np.asarray(ref, np.float64), atol=atol, rtol=rtol)


def _on_ascend_xfail(reason, raises=tw.TilewrightError):
    """The target list with ascend910b a strict xfail (a finding of this hunt)."""
    return ["cpu", pytest.param(TARGET, marks=pytest.mark.xfail(strict=True, reason=reason, raises=raises))]


TOL = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}


# ---------------------------------------------------------------------------------------------
# argmax / argmin along rows and along columns, ties to the lowest index (docs/language.md "The
# loop index as a value"), symbolic M (0 rows launch no block)

def argmax_rows(N, block, dtype):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Imax: T.Tensor((M,), "int32"), Imin: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, block)) as bx:
            x = T.alloc_fragment((block, N), dtype)
            best = T.alloc_fragment((block,), dtype)
            pick = T.alloc_fragment((block, N), "int32")
            idx = T.alloc_fragment((block,), "int32")
            T.copy(X[bx * block, 0], x)
            T.reduce_max(x, best, dim=1)
            for i, j in T.Parallel(block, N):
                pick[i, j] = T.where(x[i, j] == best[i], j, N)
            T.reduce_min(pick, idx, dim=1)
            T.copy(idx, Imax[bx * block])
            T.reduce_min(x, best, dim=1)
            for i, j in T.Parallel(block, N):
                pick[i, j] = T.where(x[i, j] == best[i], j, N)
            T.reduce_min(pick, idx, dim=1)
            T.copy(idx, Imin[bx * block])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,block,dtype", [(1, 1, 8, "float32"), (13, 37, 8, "float16"), (7, 300, 4, "bfloat16"),
                                             (0, 5, 8, "int32"), (33, 16, 32, "float32")])
def test_argmax_argmin_rows_with_ties(M, N, block, dtype, target):
    x = np.random.default_rng(0).integers(-3, 4, (M, N)).astype(np_dtype(dtype))
    imax, imin = _run(tw.compile(argmax_rows(N, block, dtype), target=target, out_idx=[1, 2]), target, x)
    if M:
        np.testing.assert_array_equal(imax, np.argmax(x.astype(np.float64), 1))
        np.testing.assert_array_equal(imin, np.argmin(x.astype(np.float64), 1))
    assert imax.shape == imin.shape == (M,)


def argmax_cols(M, N, bn, dtype):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), I: T.Tensor((N,), "int32"), V: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            x = T.alloc_fragment((M, bn), dtype)
            best = T.alloc_fragment((bn,), dtype)
            pick = T.alloc_fragment((M, bn), "int32")
            idx = T.alloc_fragment((bn,), "int32")
            T.copy(X[0, bx * bn], x)
            T.reduce_max(x, best, dim=0)
            for i, j in T.Parallel(M, bn):
                pick[i, j] = T.where(x[i, j] == best[j], i, M)
            T.reduce_min(pick, idx, dim=0)
            T.copy(idx, I[bx * bn])
            T.copy(best, V[bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bn,dtype", [(1, 1, 8, "float32"), (37, 13, 8, "bfloat16"), (5, 300, 64, "int32"),
                                          (3, 7, 16, "float16")])
def test_argmax_cols_with_ties(M, N, bn, dtype, target):
    x = np.random.default_rng(1).integers(-3, 4, (M, N)).astype(np_dtype(dtype))
    idx, val = _run(tw.compile(argmax_cols(M, N, bn, dtype), target=target, out_idx=[1, 2]), target, x)
    np.testing.assert_array_equal(idx, np.argmax(x.astype(np.float64), 0))
    _close(val, x.astype(np.float64).max(0))


# ---------------------------------------------------------------------------------------------
# cumsum along rows (a scan over columns: a map over a tile column, the element loop on Ascend)
# and along columns (a scan over rows: one vector Add per row)

def cumsum(M, N, b, dtype, axis):
    @T.prim_func
    def rows(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, b)) as bx:
            x = T.alloc_fragment((b, N), "float32")
            T.copy(X[bx * b, 0], x)
            for j in T.serial(1, N):
                for i in T.Parallel(b):
                    x[i, j] = x[i, j] + x[i, j - 1]
            T.copy(x, Y[bx * b, 0])

    @T.prim_func
    def cols(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, b)) as bx:
            x = T.alloc_fragment((M, b), "float32")
            T.copy(X[0, bx * b], x)
            for i in T.serial(1, M):
                for j in T.Parallel(b):
                    x[i, j] = x[i, j] + x[i - 1, j]
            T.copy(x, Y[0, bx * b])
    return rows if axis == 1 else cols


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,b,dtype", [(2, 2, 8, "float32"), (13, 37, 8, "float16"), (31, 7, 4, "int32"),
                                         (2, 129, 2, "bfloat16")])
@pytest.mark.parametrize("axis", [1, 0])
def test_cumsum(M, N, b, dtype, axis, target):
    x = np.random.default_rng(2).integers(-4, 5, (M, N)).astype(np_dtype(dtype))
    y = _run(tw.compile(cumsum(M, N, b, dtype, axis), target=target, out_idx=[1]), target, x)
    _close(y, np.cumsum(x.astype(np.float64), axis))


# ---------------------------------------------------------------------------------------------
# a two-pass sum: block partials, then one block sums the partials in chunks

def partial_sums(N, block, dtype):
    NB = T.ceildiv(N, block)

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), P: T.Tensor((NB,), "float32")):
        with T.Kernel(NB) as bx:
            x = T.alloc_fragment((block,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx * block], x)
            T.reduce_sum(x, s)
            T.copy(s, P[bx])
    return main


def final_sum(NB, block):
    @T.prim_func
    def main(P: T.Tensor((NB,), "float32"), S: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((1,), "float32")
            p = T.alloc_fragment((block,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.clear(acc)
            for k in T.serial(T.ceildiv(NB, block)):
                T.copy(P[k * block], p)
                T.reduce_sum(p, s)
                for i in T.Parallel(1):
                    acc[i] = acc[i] + s[i]
            T.copy(acc, S)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("N,block,fb,dtype", [(1, 8, 8, "float32"), (97, 16, 8, "bfloat16"), (1000, 64, 5, "int8"),
                                              (4099, 256, 64, "float32"), (7, 7, 1, "float16")])
def test_two_pass_sum(N, block, fb, dtype, target):
    x = np.random.default_rng(3).integers(-8, 9, N).astype(np_dtype(dtype))
    p = _run(tw.compile(partial_sums(N, block, dtype), target=target, out_idx=[1]), target, x)
    s = _run(tw.compile(final_sum(T.ceildiv(N, block), fb), target=target, out_idx=[1]), target, p)
    _close(s, [x.astype(np.float64).sum()])


# ---------------------------------------------------------------------------------------------
# int8 quantize (per-row scale, round half away from zero, clamp) and dequantize

def quantize(M, N, bm, bn, rounding):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32"), Q: T.Tensor((M, N), "int8")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), "float32")
            s = T.alloc_fragment((bm,), "float32")
            q = T.alloc_fragment((bm, bn), "int8")
            T.copy(X[by * bm, bx * bn], x)
            T.copy(S[by * bm], s)
            for i, j in T.Parallel(bm, bn):
                v = x[i, j] / s[i]
                if rounding == "floor":
                    r = T.floor(v + 0.5)                           # round half up
                else:
                    r = T.where(v >= 0, v + 0.5, v - 0.5)          # then the cast truncates
                q[i, j] = T.cast(T.min(T.max(r, -128.0), 127.0), "int8")
            T.copy(q, Q[by * bm, bx * bn])
    return main


def dequantize(M, N, bm, bn):
    @T.prim_func
    def main(Q: T.Tensor((M, N), "int8"), S: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            q = T.alloc_fragment((bm, bn), "int8")
            s = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, bn), "float32")
            T.copy(Q[by * bm, bx * bn], q)
            T.copy(S[by * bm], s)
            for i, j in T.Parallel(bm, bn):
                y[i, j] = T.cast(q[i, j], "float32") * s[i]
            T.copy(y, Y[by * bm, bx * bn])
    return main


QUANT_SHAPES = [(1, 1, 8, 32), (13, 37, 8, 32), (5, 300, 4, 64), (17, 64, 16, 64)]


def _quant_inputs(M, N):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((M, N)) * 100).astype(np.float32)
    x.flat[0] = 300.0                                     # clamps
    s = (np.abs(rng.standard_normal(M)) + 0.5).astype(np.float32)
    v = (x / s[:, None]).astype(np.float32).astype(np.float64)   # the float32 quotient both targets form
    return x, s, v


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm,bn", QUANT_SHAPES)
def test_quantize_int8(M, N, bm, bn, target):
    x, s, v = _quant_inputs(M, N)
    q = _run(tw.compile(quantize(M, N, bm, bn, "where"), target=target, out_idx=[2]), target, x, s)
    # a quotient within an ulp of .5 may round either way after the float32 add
    _close(q, np.clip(np.trunc(np.where(v >= 0, v + 0.5, v - 0.5)), -128, 127), atol=1)


@pytest.mark.parametrize("target", TARGETS)   # F1 fixed by h-ascfix9 (legalize_vector lowers floor)
def test_floor_quantize(target):
    x, s, v = _quant_inputs(13, 37)
    q = _run(tw.compile(quantize(13, 37, 8, 32, "floor"), target=target, out_idx=[2]), target, x, s)
    _close(q, np.clip(np.floor(v + 0.5), -128, 127), atol=1)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm,bn", QUANT_SHAPES)
def test_dequantize_int8(M, N, bm, bn, target):
    rng = np.random.default_rng(5)
    q = rng.integers(-128, 128, (M, N)).astype(np.int8)
    s = (np.abs(rng.standard_normal(M)) + 0.5).astype(np.float32)
    y = _run(tw.compile(dequantize(M, N, bm, bn), target=target, out_idx=[2]), target, q, s)
    _close(y, q.astype(np.float64) * s[:, None], rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# gemm with a per-channel scale / bias (+ relu) epilogue; M, N or K of 1, blocks dividing nothing

def gemm_epilogue(M, N, K, bm, bn, bk, dtype, relu):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), Sc: T.Tensor((N,), "float32"),
             Bi: T.Tensor((N,), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), dtype)
            b = T.alloc_shared((bk, bn), dtype)
            c = T.alloc_fragment((bm, bn), "float32")
            sc = T.alloc_fragment((bn,), "float32")
            bi = T.alloc_fragment((bn,), "float32")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, c)
            T.copy(Sc[bx * bn], sc)
            T.copy(Bi[bx * bn], bi)
            for i, j in T.Parallel(bm, bn):
                v = c[i, j] * sc[j] + bi[j]
                c[i, j] = T.max(v, 0.0) if relu else v
            T.copy(c, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,bm,bn,bk,dtype,relu", [
    (1, 1, 1, 16, 16, 16, "float16", False), (37, 1, 1, 16, 16, 16, "bfloat16", True),
    (1, 45, 17, 16, 32, 16, "float32", True), (13, 5, 1, 16, 16, 32, "float16", True),
    (33, 17, 70, 32, 16, 32, "bfloat16", False), (5, 300, 3, 16, 128, 16, "float32", False)])
def test_gemm_scale_bias_epilogue(M, N, K, bm, bn, bk, dtype, relu, target):
    rng = np.random.default_rng(6)
    a, b = exact_values((M, K), dtype, rng), exact_values((K, N), dtype, rng)
    sc = (rng.integers(-4, 5, N) / 4).astype(np.float32)
    bi = (rng.integers(-4, 5, N) / 4).astype(np.float32)
    ref = (a.astype(np.float64) @ b.astype(np.float64)) * sc + bi
    c = _run(tw.compile(gemm_epilogue(M, N, K, bm, bn, bk, dtype, relu), target=target, out_idx=[4]), target,
             a, b, sc, bi)
    _close(c, np.maximum(ref, 0) if relu else ref)


def gemm_global(M, N, K, bm, bn, dtype, tb):
    acc = "int32" if dtype == "int8" else "float32"
    bshape = (N, K) if tb else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(bshape, dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            c = T.alloc_fragment((bm, bn), acc)
            if tb:
                T.gemm(A[by * bm:(by + 1) * bm, 0:K], B[bx * bn:(bx + 1) * bn, 0:K], c, transpose_B=True,
                       clear_accum=True)
            else:
                T.gemm(A[by * bm:(by + 1) * bm, 0:K], B[0:K, bx * bn:(bx + 1) * bn], c, clear_accum=True)
            T.copy(c, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,bm,bn,dtype,tb", [
    (1, 1, 1, 16, 16, "float16", False), (1, 33, 7, 16, 32, "bfloat16", True), (19, 1, 40, 16, 16, "float32", False),
    (5, 5, 1, 32, 16, "int8", True), (40, 24, 3, 16, 16, "float32", True)])
def test_gemm_global_operands_of_one_row_col_or_k(M, N, K, bm, bn, dtype, tb, target):
    rng = np.random.default_rng(7)
    a, b = exact_values((M, K), dtype, rng), exact_values((K, N), dtype, rng)
    c = _run(tw.compile(gemm_global(M, N, K, bm, bn, dtype, tb), target=target, out_idx=[2]), target,
             a, np.ascontiguousarray(b.T) if tb else b)
    _close(c, a.astype(np.float64) @ b.astype(np.float64))


def gemm_k_loop(form):
    K = T.symbolic("K")

    @T.prim_func
    def main(A: T.Tensor((16, K), "float16"), B: T.Tensor((K, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((16, 16), "float32")
            a = T.alloc_shared((16, 32), "float16")
            b = T.alloc_shared((32, 16), "float16")
            T.clear(c)
            for k in T.serial(T.ceildiv(K, 32)):
                if form == "tiles":
                    T.copy(A[0, k * 32], a)
                    T.copy(B[k * 32, 0], b)
                    T.gemm(a, b, c)
                else:   # a and b stay unused (F9: an unused tile next to a gemm)
                    T.gemm(A[0:16, k * 32:(k + 1) * 32], B[k * 32:(k + 1) * 32, 0:16], c)
            T.copy(c, C)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["tiles", "global"])
@pytest.mark.parametrize("K", [1, 100])
def test_gemm_symbolic_k(K, form, target):
    rng = np.random.default_rng(8)
    a, b = exact_values((16, K), "float16", rng), exact_values((K, 16), "float16", rng)
    _close(_run(tw.compile(gemm_k_loop(form), target=target, out_idx=[2]), target, a, b),
           a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["tiles", "global"])
def test_gemm_k_zero_at_run_time(form, target):
    # F8 (fixed by h-ascfix9b in expand_gemm): ascend910b returned L0C garbage
    a, b = np.zeros((16, 0), np.float16), np.zeros((0, 16), np.float16)
    _close(_run(tw.compile(gemm_k_loop(form), target=target, out_idx=[2]), target, a, b), np.zeros((16, 16)))


def unused_tile_gemm():
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((16, 16), "float32")
            a = T.alloc_shared((16, 16), "float16")
            u = T.alloc_fragment((16, 16), "float32")     # never used  # noqa: F841
            T.copy(A, a)
            T.gemm(a, a, c, clear_accum=True)
            T.copy(c, C)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_unused_tile_next_to_a_gemm(target):
    # F9 (fixed by h-hunt9a in infer_scope): was "internal: split_cube_vector found no code for one unit"
    a = exact_values((16, 16), "float16", np.random.default_rng(9))
    _close(_run(tw.compile(unused_tile_gemm(), target=target, out_idx=[1]), target, a),
           a.astype(np.float64) @ a.astype(np.float64))


# ---------------------------------------------------------------------------------------------
# fused residual add + rmsnorm (writes the sum and the normalised rows), symbolic M

def residual_rmsnorm(N, bm, dtype, eps=1e-6):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), R: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype),
             H: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            r = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            sq = T.alloc_fragment((bm, N), "float32")
            ss = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(R[bx * bm, 0], r)
            T.copy(W, w)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] + r[i, j]
            T.copy(x, H[bx * bm, 0])
            for i, j in T.Parallel(bm, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(bm):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] * ss[i] * w[j]
            T.copy(x, Y[bx * bm, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm,dtype", [(1, 1, 8, "float32"), (13, 37, 8, "float16"), (0, 64, 4, "bfloat16"),
                                          (3, 1000, 2, "float32"), (33, 128, 16, "bfloat16")])
def test_residual_rmsnorm(M, N, bm, dtype, target):
    rng = np.random.default_rng(10)
    npd = np_dtype(dtype)
    x, r = rng.standard_normal((M, N)).astype(npd), rng.standard_normal((M, N)).astype(npd)
    w = rng.standard_normal(N).astype(npd)
    h = x.astype(np.float64) + r.astype(np.float64)       # exact in float32; normalised before rounding
    y = h / np.sqrt((h * h).mean(1, keepdims=True) + 1e-6) * w.astype(np.float64)
    hh, yy = _run(tw.compile(residual_rmsnorm(N, bm, dtype), target=target, out_idx=[3, 4]), target, x, r, w)
    _close(hh, h.astype(npd), TOL[dtype], TOL[dtype])
    _close(yy, y, 2 * TOL[dtype], 2 * TOL[dtype])


# ---------------------------------------------------------------------------------------------
# GELU-tanh written with T.tanh, and a softplus that does not overflow, at +-88, +-3e4, +-1e-7

def gelu_softplus(N, block, dtype):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block)) as bx:
            x = T.alloc_fragment((block, N), "float32")
            y = T.alloc_fragment((block, N), "float32")
            z = T.alloc_fragment((block, N), "float32")
            T.copy(X[bx * block, 0], x)
            for i, j in T.Parallel(block, N):
                v = x[i, j]
                y[i, j] = 0.5 * v * (1.0 + T.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
                z[i, j] = T.max(v, 0.0) + T.log(1.0 + T.exp(-T.abs(v)))
            T.copy(y, Y[bx * block, 0])
            T.copy(z, Z[bx * block, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,block,dtype", [(1, 1, 8, "float32"), (7, 37, 4, "float16"), (0, 16, 8, "float32"),
                                             (9, 300, 8, "bfloat16"), (3, 5, 2, "float32")])
def test_gelu_tanh_and_softplus(M, N, block, dtype, target):
    npd = np_dtype(dtype)
    x = np.linspace(-100, 100, M * N).reshape(M, N)
    if M * N > 8:
        x.flat[:8] = [88.0, -88.0, 1e-7, -1e-7, 20.0, -20.0, 3e4, -3e4]
    x = x.astype(npd)
    v = x.astype(np.float64)
    y = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    z = np.maximum(v, 0) + np.log1p(np.exp(-np.abs(v)))
    yy, zz = _run(tw.compile(gelu_softplus(N, block, dtype), target=target, out_idx=[1, 2]), target, x)
    _close(yy, y, TOL[dtype], TOL[dtype])
    _close(zz, z, TOL[dtype], TOL[dtype])


# ---------------------------------------------------------------------------------------------
# masked mean and a softmax over the first L[b] elements of each row (a length tensor)

def masked_mean(B, N, bn):
    @T.prim_func
    def main(X: T.Tensor((B, N), "float16"), L: T.Tensor((B,), "int32"), Y: T.Tensor((B,), "float32")):
        with T.Kernel(B) as b:
            x = T.alloc_fragment((1, bn), "float32")
            acc = T.alloc_fragment((1,), "float32")
            s = T.alloc_fragment((1,), "float32")
            n = L[b]
            T.clear(acc)
            for k in T.serial(T.ceildiv(N, bn)):
                T.copy(X[b, k * bn], x)
                for i, j in T.Parallel(1, bn):
                    x[i, j] = T.where(k * bn + j < n, x[i, j], 0.0)
                T.reduce_sum(x, s, dim=1)
                for i in T.Parallel(1):
                    acc[i] = acc[i] + s[i]
            for i in T.Parallel(1):
                acc[i] = acc[i] / T.max(T.cast(n, "float32"), 1.0)
            T.copy(acc, Y[b])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("B,N,bn", [(1, 1, 8), (5, 37, 16), (3, 300, 64), (7, 8, 8)])
def test_masked_mean_with_lengths(B, N, bn, target):
    rng = np.random.default_rng(11)
    x = rng.integers(-8, 9, (B, N)).astype(np.float16)
    L = rng.integers(0, N + 1, B).astype(np.int32)
    L[0], L[-1] = N, 0
    ref = [x[b, :L[b]].astype(np.float64).sum() / max(L[b], 1) for b in range(B)]
    _close(_run(tw.compile(masked_mean(B, N, bn), target=target, out_idx=[2]), target, x, L), ref, 1e-6, 1e-6)


def softmax_lengths(N, bm, dtype):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), L: T.Tensor((M,), "int32"), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            n = T.alloc_fragment((bm,), "int32")
            mx = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(L[bx * bm], n)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.where(j < n[i], x[i, j], -T.infinity("float32"))
            T.reduce_max(x, mx, dim=1)
            for i in T.Parallel(bm):
                mx[i] = T.max(mx[i], -1e30)            # a row with no element: exp(-inf) = 0, not NaN
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] / T.max(s[i], 1e-30)
            T.copy(x, Y[bx * bm, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm,dtype", [(1, 1, 8, "float32"), (13, 37, 8, "float16"), (0, 16, 8, "float32"),
                                          (5, 300, 4, "bfloat16")])
def test_softmax_with_lengths(M, N, bm, dtype, target):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((M, N)).astype(np_dtype(dtype))
    L = rng.integers(0, N + 1, M).astype(np.int32)
    if M:
        L[0] = 0
    ref = np.zeros((M, N))
    for r in range(M):
        if L[r]:
            e = np.exp(x[r, :L[r]].astype(np.float64) - x[r, :L[r]].astype(np.float64).max())
            ref[r, :L[r]] = e / e.sum()
    y = _run(tw.compile(softmax_lengths(N, bm, dtype), target=target, out_idx=[2]), target, x, L)
    _close(y, ref, TOL[dtype], TOL[dtype])


# ---------------------------------------------------------------------------------------------
# transposes through a tile: a transposing map (F2), and the identity-gemm form that runs

def transpose_map(M, N, bm, bn, dtype):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), dtype)
            y = T.alloc_fragment((bn, bm), dtype)
            T.copy(X[by * bm, bx * bn], x)
            for j, i in T.Parallel(bn, bm):
                y[j, i] = x[i, j]
            T.copy(y, Y[bx * bn, by * bm])
    return main


def test_transpose_map_on_cpu():
    for M, N, bm, bn, dtype in [(1, 1, 8, 8, "float32"), (13, 37, 8, 16, "int32"), (64, 3, 32, 8, "int8"),
                                (17, 17, 16, 16, "bfloat16")]:
        x = np.random.default_rng(13).integers(-100, 100, (M, N)).astype(np_dtype(dtype))
        np.testing.assert_array_equal(tw.compile(transpose_map(M, N, bm, bn, dtype), out_idx=[1])(x), x.T)


@pytest.mark.parametrize("dtype", ["float16", "int32"])   # F2 fixed by h-ascfix9 (the hint names I @ x^T)
def test_transpose_map_on_ascend(dtype):
    x = np.random.default_rng(13).integers(-100, 100, (13, 37)).astype(np_dtype(dtype))
    try:
        y = run_checked(tw.compile(transpose_map(13, 37, 8, 16, dtype), target=TARGET, out_idx=[1]), x)
    except tw.TilewrightError as e:
        # acceptable: the error names a form that runs (float types), or says there is none (int32)
        assert ("transpose_B" in (e.hint or "")) if dtype != "int32" else ("int32" in str(e)), str(e)
        return
    np.testing.assert_array_equal(y, x.T)


def transpose_gemm(M, N, bm, bn, dtype):
    acc = "int32" if dtype == "int8" else "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((N, M), acc)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_shared((bm, bn), dtype)
            e = T.alloc_shared((bn, bn), dtype)
            c = T.alloc_fragment((bn, bm), acc)
            T.copy(X[by * bm, bx * bn], x)
            for i, j in T.Parallel(bn, bn):
                e[i, j] = T.where(i == j, 1, 0)
            T.gemm(e, x, c, transpose_B=True, clear_accum=True)       # I @ x^T
            T.copy(c, Y[bx * bn, by * bm])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm,bn,dtype", [(1, 1, 16, 16, "float16"), (13, 37, 16, 32, "bfloat16"),
                                             (40, 3, 32, 16, "float32"), (13, 37, 16, 32, "int8")])
def test_transpose_through_an_identity_gemm(M, N, bm, bn, dtype, target):
    rng = np.random.default_rng(14)
    x = (rng.standard_normal((M, N)) if dtype == "float32" else rng.integers(-100, 100, (M, N))).astype(np_dtype(dtype))
    _close(_run(tw.compile(transpose_gemm(M, N, bm, bn, dtype), target=target, out_idx=[1]), target, x),
           x.astype(np.float64).T)


# ---------------------------------------------------------------------------------------------
# reductions over the first and the last axis of a 3-D tensor

def reduce_3d(B, M, N, bm, dtype, dim):
    oshape = (M, N) if dim == 0 else (B, M)
    dshape = (bm, N) if dim == 0 else (B, bm)

    @T.prim_func
    def main(X: T.Tensor((B, M, N), dtype), Y: T.Tensor(oshape, dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((B, bm, N), dtype)
            y = T.alloc_fragment(dshape, dtype)
            T.copy(X[0:B, bx * bm:(bx + 1) * bm, 0:N], x)
            T.reduce_sum(x, y, dim=dim)
            if dim == 0:
                T.copy(y, Y[bx * bm, 0])
            else:
                T.copy(y, Y[0:B, bx * bm:(bx + 1) * bm])
    return main


REDUCE_3D = [(3, 13, 37, 8, "float32"), (5, 4, 16, 4, "int32"), (2, 7, 300, 8, "bfloat16")]


@pytest.mark.parametrize("dim, target", [(0, "cpu"), (2, "cpu"), (2, TARGET)] + [  # dim=2 fixed by h-ascfix9
    pytest.param(0, TARGET, marks=pytest.mark.xfail(strict=True, raises=tw.TilewrightError, reason=(
        "F3: T.reduce_* over the first axis of a 3-D tile is an error on ascend910b (the hint names the "
        "serial loop adding 2-D tiles)")))])
@pytest.mark.parametrize("B,M,N,bm,dtype", REDUCE_3D)
def test_reduce_3d_tile(B, M, N, bm, dtype, dim, target):
    x = np.random.default_rng(15).integers(-8, 9, (B, M, N)).astype(np_dtype(dtype))
    _close(_run(tw.compile(reduce_3d(B, M, N, bm, dtype, dim), target=target, out_idx=[1]), target, x),
           x.astype(np.float64).sum(dim))


def reduce_3d_as_2d(B, M, N, bm, dtype, dim):
    @T.prim_func
    def first(X: T.Tensor((B, M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dtype)
            acc = T.alloc_fragment((bm, N), "int32" if dtype == "int32" else "float32")
            T.clear(acc)
            for b in T.serial(B):
                T.copy(X[b, bx * bm, 0], x)
                for i, j in T.Parallel(bm, N):
                    acc[i, j] = acc[i, j] + x[i, j]
            T.copy(acc, Y[bx * bm, 0])

    @T.prim_func
    def last(X: T.Tensor((B, M, N), dtype), Y: T.Tensor((B, M), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((B * bm, N), dtype)          # the N-D window's rows flattened
            y = T.alloc_fragment((B * bm,), dtype)
            y2 = T.alloc_fragment((B, bm), dtype)
            T.copy(X[0:B, bx * bm:(bx + 1) * bm, 0:N], x)
            T.reduce_sum(x, y, dim=1)
            for b, i in T.Parallel(B, bm):
                y2[b, i] = y[b * bm + i]                        # F4: the 1-D tile is not copied to a 2-D window
            T.copy(y2, Y[0:B, bx * bm:(bx + 1) * bm])
    return first if dim == 0 else last


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dim", [0, 2])
@pytest.mark.parametrize("B,M,N,bm,dtype", REDUCE_3D + [(1, 1, 1, 8, "float16")])
def test_reduce_3d_written_with_2d_tiles(B, M, N, bm, dtype, dim, target):
    x = np.random.default_rng(16).integers(-8, 9, (B, M, N)).astype(np_dtype(dtype))
    _close(_run(tw.compile(reduce_3d_as_2d(B, M, N, bm, dtype, dim), target=target, out_idx=[1]), target, x),
           x.astype(np.float64).sum(dim))


# ---------------------------------------------------------------------------------------------
# a 1-D tile to and from a 2-D window (docs/language.md T.copy's N-D rule)

def copy_1d_2d(R, C, dtype, how):
    @T.prim_func
    def store(X: T.Tensor((R * C,), dtype), Y: T.Tensor((R, C), dtype)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R * C,), dtype)
            T.copy(X, y)
            if how == "window":
                T.copy(y, Y[0:R, 0:C])
            else:
                for r in T.serial(R):
                    T.copy(y[r * C:(r + 1) * C], Y[r, 0:C])

    @T.prim_func
    def load(X: T.Tensor((R, C), dtype), Y: T.Tensor((R * C,), dtype)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R * C,), dtype)
            T.copy(X[0:R, 0:C], y)
            T.copy(y, Y)
    return load if how == "load" else store


@pytest.mark.parametrize("target", _on_ascend_xfail("F4: a copy between a 1-D tile and a 2-D window is an error on "
                                                    "ascend910b naming no working alternative"))
@pytest.mark.parametrize("how", ["window", "load"])
@pytest.mark.parametrize("R,C,dtype", [(3, 8, "float32"), (5, 4, "float16"), (2, 3, "int32")])
def test_copy_1d_tile_and_2d_window(R, C, dtype, how, target):
    x = np.random.default_rng(17).integers(-8, 9, R * C).astype(np_dtype(dtype))
    if how == "load":
        _close(_run(tw.compile(copy_1d_2d(R, C, dtype, how), target=target, out_idx=[1]), target, x.reshape(R, C)), x)
    else:
        _close(_run(tw.compile(copy_1d_2d(R, C, dtype, how), target=target, out_idx=[1]), target, x), x.reshape(R, C))


@pytest.mark.parametrize("R,C,dtype", [(3, 8, "float16"), (5, 4, "float32"), (2, 3, "int32")])
def test_copy_1d_tile_rows_to_2d(R, C, dtype):
    x = np.random.default_rng(18).integers(-8, 9, R * C).astype(np_dtype(dtype))
    _close(_run(tw.compile(copy_1d_2d(R, C, dtype, "rows"), target="cpu", out_idx=[1]), "cpu", x), x.reshape(R, C))


@pytest.mark.parametrize("R,C,dtype", [(3, 8, "float16"), (5, 4, "float32"), (2, 3, "int32")])
def test_copy_1d_tile_rows_to_2d_is_located_on_ascend(R, C, dtype):
    """F5 (h-ascfix9): row r of the 1-D tile starts r * C elements in, off a 32 B block for r = 1: a
    compile-time error at the copy's line naming the misaligned step and the 2-D tile that runs."""
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(copy_1d_2d(R, C, dtype, "rows"), target=TARGET, out_idx=[1])
    es = np.dtype(np_dtype(dtype)).itemsize
    assert f"starts {C * es} bytes into tile 'y' when r = 1" in str(e.value), str(e.value)
    assert e.value.source_line.strip().startswith("T.copy(y[r * C:(r + 1) * C]"), e.value.source_line
    assert "2-D tile" in (e.value.hint or ""), e.value.hint


# ---------------------------------------------------------------------------------------------
# bool and integer inputs: a bool mask tensor, uint8 pixels, int8 saturating / wrapping adds,
# int32 // and % by a per-column divisor (0 and negative included)

def bool_mask_rows(N, bm, xdt):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), xdt), Msk: T.Tensor((M, N), "bool"), S: T.Tensor((M,), "float32"),
             Cn: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            m = T.alloc_fragment((bm, N), "bool")
            c = T.alloc_fragment((bm, N), "int32")
            s = T.alloc_fragment((bm,), "float32")
            n = T.alloc_fragment((bm,), "int32")
            T.copy(X[bx * bm, 0], x)
            T.copy(Msk[bx * bm, 0], m)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.where(m[i, j], x[i, j], 0.0)
                c[i, j] = T.where(m[i, j], 1, 0)
            T.reduce_sum(x, s, dim=1)
            T.reduce_sum(c, n, dim=1)
            T.copy(s, S[bx * bm])
            T.copy(n, Cn[bx * bm])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm,xdt", [(1, 1, 8, "float32"), (13, 37, 8, "int8"), (0, 8, 8, "uint8"),
                                        (5, 300, 4, "int32"), (40, 33, 32, "float16")])
def test_bool_mask_rows(M, N, bm, xdt, target):
    rng = np.random.default_rng(19)
    x = rng.integers(0 if xdt == "uint8" else -8, 9, (M, N)).astype(np_dtype(xdt))
    m = rng.random((M, N)) < 0.4
    s, n = _run(tw.compile(bool_mask_rows(N, bm, xdt), target=target, out_idx=[2, 3]), target, x, m)
    _close(s, (x.astype(np.float64) * m).sum(1))
    _close(n, m.sum(1))


def threshold(P, C, bp, out):
    @T.prim_func
    def main(X: T.Tensor((P, C), "float32"), Y: T.Tensor((P, C), out)):
        with T.Kernel(T.ceildiv(P, bp)) as bx:
            x = T.alloc_fragment((bp, C), "float32")
            T.copy(X[bx * bp, 0], x)
            if out == "bool":
                b = T.alloc_fragment((bp, C), "bool")
                for i, j in T.Parallel(bp, C):
                    b[i, j] = x[i, j] > 200.0
                T.copy(b, Y[bx * bp, 0])
            else:
                u = T.alloc_fragment((bp, C), "uint8")
                for i, j in T.Parallel(bp, C):
                    u[i, j] = T.where(x[i, j] > 200.0, 1, 0)
                T.copy(u, Y[bx * bp, 0])
    return main


def uint8_to_bool(P, C, bp):
    @T.prim_func
    def main(X: T.Tensor((P, C), "uint8"), Y: T.Tensor((P, C), "bool")):
        with T.Kernel(T.ceildiv(P, bp)) as bx:
            u = T.alloc_fragment((bp, C), "uint8")
            T.copy(X[bx * bp, 0], u)
            T.copy(u, Y[bx * bp, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("P,C,bp", [(1, 3, 8), (37, 3, 16), (100, 40, 32)])
def test_threshold_into_uint8(P, C, bp, target):
    x = np.random.default_rng(20).integers(0, 256, (P, C)).astype(np.float32)
    np.testing.assert_array_equal(_run(tw.compile(threshold(P, C, bp, "uint8"), target=target, out_idx=[1]),
                                       target, x), (x > 200).astype(np.uint8))


@pytest.mark.parametrize("target", TARGETS)   # F6 fixed by h-ascfix9
@pytest.mark.parametrize("P,C,bp", [(1, 3, 8), (37, 3, 16)])
def test_bool_output_from_a_comparison(P, C, bp, target):
    x = np.random.default_rng(20).integers(0, 256, (P, C)).astype(np.float32)
    np.testing.assert_array_equal(_run(tw.compile(threshold(P, C, bp, "bool"), target=target, out_idx=[1]),
                                       target, x), x > 200)


@pytest.mark.parametrize("target", TARGETS)   # F6 fixed by h-ascfix9
@pytest.mark.parametrize("P,C,bp", [(1, 3, 8), (37, 3, 16)])
def test_uint8_to_bool_copy(P, C, bp, target):
    u = np.random.default_rng(21).integers(0, 3, (P, C)).astype(np.uint8)
    np.testing.assert_array_equal(_run(tw.compile(uint8_to_bool(P, C, bp), target=target, out_idx=[1]), target, u),
                                  u != 0)


def normalize_pixels(P, C, bp):
    @T.prim_func
    def main(X: T.Tensor((P, C), "uint8"), Mu: T.Tensor((C,), "float32"), Sd: T.Tensor((C,), "float32"),
             Y: T.Tensor((P, C), "float16")):
        with T.Kernel(T.ceildiv(P, bp)) as bx:
            x = T.alloc_fragment((bp, C), "float32")
            mu = T.alloc_fragment((C,), "float32")
            sd = T.alloc_fragment((C,), "float32")
            T.copy(X[bx * bp, 0], x)
            T.copy(Mu, mu)
            T.copy(Sd, sd)
            for i, j in T.Parallel(bp, C):
                x[i, j] = (x[i, j] / 255.0 - mu[j]) / sd[j]
            T.copy(x, Y[bx * bp, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("P,C,bp", [(1, 3, 8), (37, 3, 16), (100, 4, 32), (7, 1, 8)])
def test_normalize_uint8_pixels(P, C, bp, target):
    rng = np.random.default_rng(22)
    x = rng.integers(0, 256, (P, C)).astype(np.uint8)
    mu, sd = rng.random(C).astype(np.float32), (rng.random(C) + 0.5).astype(np.float32)
    y = _run(tw.compile(normalize_pixels(P, C, bp), target=target, out_idx=[3]), target, x, mu, sd)
    _close(y, (x / 255.0 - mu) / sd, 1e-3, 1e-3)


def int8_and_int32_ops(M, N, bm):
    @T.prim_func
    def main(A: T.Tensor((M, N), "int8"), B: T.Tensor((M, N), "int8"), D: T.Tensor((N,), "int32"),
             S: T.Tensor((M, N), "int8"), W: T.Tensor((M, N), "int8"), Q: T.Tensor((M, N), "int32"),
             R: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_fragment((bm, N), "int8")
            b = T.alloc_fragment((bm, N), "int8")
            ai = T.alloc_fragment((bm, N), "int32")
            d = T.alloc_fragment((N,), "int32")
            s = T.alloc_fragment((bm, N), "int8")
            w = T.alloc_fragment((bm, N), "int8")
            q = T.alloc_fragment((bm, N), "int32")
            r = T.alloc_fragment((bm, N), "int32")
            T.copy(A[bx * bm, 0], a)
            T.copy(B[bx * bm, 0], b)
            T.copy(D, d)
            T.copy(a, ai)
            for i, j in T.Parallel(bm, N):
                w[i, j] = a[i, j] + b[i, j]                                  # wraps
                q[i, j] = ai[i, j] // d[j]
                r[i, j] = ai[i, j] % d[j]
            for i, j in T.Parallel(bm, N):
                s[i, j] = T.cast(T.min(T.max(T.cast(a[i, j], "int32") + T.cast(b[i, j], "int32"), -128), 127), "int8")
            T.copy(s, S[bx * bm, 0])
            T.copy(w, W[bx * bm, 0])
            T.copy(q, Q[bx * bm, 0])
            T.copy(r, R[bx * bm, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm", [(1, 1, 8), (13, 37, 8), (40, 7, 32)])
def test_int8_saturating_and_wrapping_adds_int32_floor_div(M, N, bm, target):
    rng = np.random.default_rng(23)
    a, b = (rng.integers(-128, 128, (M, N)).astype(np.int8) for _ in range(2))
    d = rng.integers(-5, 6, N).astype(np.int32)
    a64, b64, d1 = a.astype(np.int64), b.astype(np.int64), np.where(d == 0, 1, d)
    outs = _run(tw.compile(int8_and_int32_ops(M, N, bm), target=target, out_idx=[3, 4, 5, 6]), target, a, b, d)
    refs = (np.clip(a64 + b64, -128, 127), (a64 + b64 + 128) % 256 - 128,
            np.where(d == 0, 0, a64 // d1), np.where(d == 0, a64, a64 % d1))     # x // 0 == 0, x % 0 == x
    for o, r in zip(outs, refs):
        np.testing.assert_array_equal(o, r)


# ---------------------------------------------------------------------------------------------
# NaN through T.max / T.min and reduce_max / reduce_min (F7)

def max_min_nan():
    @T.prim_func
    def main(X: T.Tensor((6, 4), "float32"), Y0: T.Tensor((6, 4), "float32"), Y1: T.Tensor((6, 4), "float32"),
             Y2: T.Tensor((6, 4), "float32"), Mx: T.Tensor((6,), "float32"), Mn: T.Tensor((6,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((6, 4), "float32")
            y0 = T.alloc_fragment((6, 4), "float32")
            y1 = T.alloc_fragment((6, 4), "float32")
            y2 = T.alloc_fragment((6, 4), "float32")
            mx = T.alloc_fragment((6,), "float32")
            mn = T.alloc_fragment((6,), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(6, 4):
                y0[i, j] = T.max(x[i, j], 0.0)
                y1[i, j] = T.max(0.0, x[i, j])
                y2[i, j] = T.min(x[i, j], 0.0)
            T.reduce_max(x, mx, dim=1)
            T.reduce_min(x, mn, dim=1)
            T.copy(y0, Y0)
            T.copy(y1, Y1)
            T.copy(y2, Y2)
            T.copy(mx, Mx)
            T.copy(mn, Mn)
    return main


def test_infinities_through_max_min_agree():
    x = np.array([[1, 2, 3, -1], [-np.inf] * 4, [np.inf, 1, 2, 3], [np.inf, -np.inf, 0, 0], [5, 4, 3, 2],
                  [-0.0, 0.0, -1, 1]], np.float32)
    for t in TARGETS:
        y0, y1, y2, mx, mn = _run(tw.compile(max_min_nan(), target=t, out_idx=[1, 2, 3, 4, 5]), t, x)
        for got, ref in [(y0, np.maximum(x, 0)), (y1, np.maximum(x, 0)), (y2, np.minimum(x, 0)), (mx, x.max(1)),
                         (mn, x.min(1))]:
            np.testing.assert_array_equal(got, ref)


@pytest.mark.xfail(strict=True, reason="F7: NaN through T.max / T.min and reduce_max / reduce_min: cpu follows "
                                       "numpy's rule (h-nan9), ascend910b's lowering leaves NaN to the chip's "
                                       "undocumented Max / Min rule (the simulator drops a NaN operand)")
def test_nan_through_max_min_same_on_both_targets():
    x = np.array([[np.nan, 1, 2, 3], [1, np.nan, -np.inf, 5], [1, 2, 3, np.nan], [np.nan] * 4, [0, 0, 0, 0],
                  [-1, np.nan, 1, 0]], np.float32)
    cpu, npu = (_run(tw.compile(max_min_nan(), target=t, out_idx=[1, 2, 3, 4, 5]), t, x) for t in TARGETS)
    for a, b in zip(cpu, npu):
        np.testing.assert_array_equal(a, b)          # NaN == NaN positions compare equal here


@pytest.mark.parametrize("target", TARGETS)  # F10: fixed by h-ascfix9c
def test_argmax_of_large_int32(target):
    x = np.array([[2 ** 24, 2 ** 24 + 1, 5, 2 ** 24 + 1], [2 ** 30, 2 ** 30 + 64, 2 ** 30 + 1, 0],
                  [-2 ** 31, -2 ** 31 + 1, -2 ** 31 + 3, -2 ** 31 + 2]], np.int32)
    imax, _ = _run(tw.compile(argmax_rows(4, 8, "int32"), target=target, out_idx=[1, 2]), target, x)
    np.testing.assert_array_equal(imax, np.argmax(x, 1))


# ---------------------------------------------------------------------------------------------
# the tile-loops style (docs/language.md "The tile-loops style"): its matmul_scale example

TL_M = tw.symbolic("M")
TL_N, TL_K, TL_BM, TL_BN, TL_BK = 24, 40, 8, 8, 16


def tile_loops_matmul(target, epilogue):
    def matmul_scale(A: tw.Tensor((TL_M, TL_K), "float16"), B: tw.Tensor((TL_K, TL_N), "float16"), s: float):
        out = tw.output((TL_M, TL_N), dtype="float32")
        for by in range(tw.ceildiv(TL_M, TL_BM)):
            for bx in range(tw.ceildiv(TL_N, TL_BN)):
                acc = tw.accumulator((TL_BM, TL_BN), dtype="float32")
                for k in range(tw.ceildiv(TL_K, TL_BK)):
                    a = tw.load(A, (by * TL_BM, k * TL_BK), (TL_BM, TL_BK))
                    b = tw.load(B, (k * TL_BK, bx * TL_BN), (TL_BK, TL_BN))
                    acc += tw.matmul(a, b)
                if epilogue:
                    for i in range(TL_BM):
                        for j in range(TL_BN):
                            acc[i, j] = acc[i, j] * s
                tw.store(out, (by * TL_BM, bx * TL_BN), acc)
        return out
    return tw.compile(matmul_scale, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M", [1, 13, 40])
def test_tile_loops_matmul(M, target):
    rng = np.random.default_rng(24)
    a, b = exact_values((M, TL_K), "float16", rng), exact_values((TL_K, TL_N), "float16", rng)
    _close(_run(tile_loops_matmul(target, False), target, a, b, 0.5), a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("target", TARGETS)  # F11: fixed by h-port10b (serial_maps)
@pytest.mark.parametrize("M", [1, 13])
def test_tile_loops_matmul_epilogue(M, target):
    rng = np.random.default_rng(24)
    a, b = exact_values((M, TL_K), "float16", rng), exact_values((TL_K, TL_N), "float16", rng)
    _close(_run(tile_loops_matmul(target, True), target, a, b, 0.5), 0.5 * (a.astype(np.float64) @ b.astype(np.float64)))


# ---------------------------------------------------------------------------------------------
# reductions of 8-bit and bool tiles: uint8 / int8 max, min, sum (wrapping), bool any / all (F12)

def reduce_rows(N, bm, dtype, op):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dtype)
            y = T.alloc_fragment((bm,), dtype)
            T.copy(X[bx * bm, 0], x)
            if op == "max":
                T.reduce_max(x, y, dim=1)
            elif op == "min":
                T.reduce_min(x, y, dim=1)
            else:
                T.reduce_sum(x, y, dim=1)
            T.copy(y, Y[bx * bm])
    return main


def _reduce_rows_case(M, N, bm, dtype, op, target):
    rng = np.random.default_rng(25)
    if dtype == "bool":
        x = rng.random((M, N)) < 0.9
    else:
        lo, hi = (0, 256) if dtype == "uint8" else (-128, 128)
        x = rng.integers(lo, hi, (M, N)).astype(np_dtype(dtype))
    x64 = x.astype(np.int64)
    ref = {"max": x64.max(1), "min": x64.min(1), "sum": x64.sum(1)}[op]
    ref = (ref + 128) % 256 - 128 if dtype == "int8" else ref % 256      # sums wrap into the dtype
    y = _run(tw.compile(reduce_rows(N, bm, dtype, op), target=target, out_idx=[1]), target, x)
    np.testing.assert_array_equal(y.astype(np.int64), ref)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["max", "min", "sum"])
@pytest.mark.parametrize("M,N,bm,dtype", [(13, 37, 8, "uint8"), (1, 1, 8, "int8"), (5, 300, 4, "int8")])
def test_reduce_of_8bit_tiles(M, N, bm, dtype, op, target):
    _reduce_rows_case(M, N, bm, dtype, op, target)


@pytest.mark.parametrize("target", TARGETS)  # F12: fixed by h-port10b
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("M,N,bm", [(13, 37, 8), (1, 1, 8)])
def test_reduce_of_a_bool_tile(M, N, bm, op, target):
    _reduce_rows_case(M, N, bm, "bool", op, target)


# ---------------------------------------------------------------------------------------------
# layer norm with a scalar eps and a run-time `if` on a flag tensor; a causal softmax with a
# column offset (index conditions); an embedding lookup by a scalar read; split-K with atomic_add;
# a grid of 1000 blocks

def layer_norm(N, bm):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), G: T.Tensor((N,), "float32"), eps: T.float32,
             Fl: T.Tensor((1,), "int32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            g = T.alloc_fragment((N,), "float32")
            sq = T.alloc_fragment((bm, N), "float32")
            mu = T.alloc_fragment((bm,), "float32")
            var = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(G, g)
            T.reduce_sum(x, mu, dim=1)
            for i in T.Parallel(bm):
                mu[i] = mu[i] / N
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] - mu[i]
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, var, dim=1)
            for i in T.Parallel(bm):
                var[i] = T.rsqrt(var[i] / N + eps)
            if Fl[0] > 0:
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] * var[i] * g[j]
            T.copy(x, Y[bx * bm, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("flag", [0, 1])
@pytest.mark.parametrize("M,N,bm", [(1, 1, 8), (13, 37, 8), (5, 300, 4), (0, 8, 8)])
def test_layer_norm_with_a_flag(M, N, bm, flag, target):
    rng = np.random.default_rng(26)
    x, g = rng.standard_normal((M, N)).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    xc = x.astype(np.float64) - x.astype(np.float64).mean(1, keepdims=True)
    ref = xc / np.sqrt((xc * xc).mean(1, keepdims=True) + 1e-5) * g if flag else xc
    y = _run(tw.compile(layer_norm(N, bm), target=target, out_idx=[4]), target, x, g, 1e-5,
             np.array([flag], np.int32))
    _close(y, ref, 1e-4, 1e-4)


def causal_softmax(S, bm, off, dtype):
    @T.prim_func
    def main(X: T.Tensor((S, S + off), dtype), Y: T.Tensor((S, S + off), dtype)):
        with T.Kernel(T.ceildiv(S, bm)) as bx:
            x = T.alloc_fragment((bm, S + off), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, S + off):
                x[i, j] = T.where(j <= bx * bm + i + off, x[i, j] * 0.5, -T.infinity("float32"))
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, S + off):
                x[i, j] = T.exp2(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(bm, S + off):
                x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * bm, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("S,bm,off,dtype", [(1, 8, 0, "float32"), (13, 8, 3, "float16"), (37, 32, 5, "float32"),
                                            (200, 64, 1, "float16")])
def test_causal_softmax_with_an_offset(S, bm, off, dtype, target):
    x = np.random.default_rng(27).standard_normal((S, S + off)).astype(np_dtype(dtype))
    v = np.where(np.arange(S + off)[None, :] <= np.arange(S)[:, None] + off, x.astype(np.float64) * 0.5, -np.inf)
    e = np.exp2(v - v.max(1, keepdims=True))
    y = _run(tw.compile(causal_softmax(S, bm, off, dtype), target=target, out_idx=[1]), target, x)
    _close(y, e / e.sum(1, keepdims=True), TOL[dtype], TOL[dtype])


def embedding(V, D, B, bd):
    @T.prim_func
    def main(W: T.Tensor((V, D), "bfloat16"), Ids: T.Tensor((B,), "int32"), Y: T.Tensor((B, D), "float32")):
        with T.Kernel(T.ceildiv(D, bd), B) as (bx, b):
            t = T.alloc_fragment((1, bd), "float32")
            T.copy(W[Ids[b], bx * bd], t)
            for i, j in T.Parallel(1, bd):
                t[i, j] = t[i, j] * 2.0
            T.copy(t, Y[b, bx * bd])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("V,D,B,bd", [(1, 1, 1, 8), (37, 100, 5, 32), (1000, 7, 13, 16)])
def test_embedding_lookup(V, D, B, bd, target):
    rng = np.random.default_rng(28)
    w = rng.integers(-8, 9, (V, D)).astype(ml_dtypes.bfloat16)
    ids = rng.integers(0, V, B).astype(np.int32)
    _close(_run(tw.compile(embedding(V, D, B, bd), target=target, out_idx=[2]), target, w, ids),
           w.astype(np.float64)[ids] * 2)


def split_k(M, N, K, bm, bn, bk, S):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), S) as (bx, by, s):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bk, bn), "float16")
            c = T.alloc_fragment((bm, bn), "float32")
            T.clear(c)
            for k in T.serial(T.ceildiv(T.ceildiv(K, bk), S)):
                kk = s + k * S
                T.copy(A[by * bm, kk * bk], a)
                T.copy(B[kk * bk, bx * bn], b)
                T.gemm(a, b, c)
            T.atomic_add(C[by * bm, bx * bn], c)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,bm,bn,bk,S", [(1, 1, 1, 16, 16, 16, 1), (19, 33, 100, 16, 32, 32, 3),
                                              (5, 7, 40, 16, 16, 16, 4)])
def test_split_k_with_atomic_add(M, N, K, bm, bn, bk, S, target):
    rng = np.random.default_rng(29)
    a, b = exact_values((M, K), "float16", rng), exact_values((K, N), "float16", rng)
    c = np.zeros((M, N), np.float32)                      # atomic_add adds into a zeroed input
    _run(tw.compile(split_k(M, N, K, bm, bn, bk, S), target=target), target, a, b, c)
    _close(c, a.astype(np.float64) @ b.astype(np.float64))


def index_map(M, N, bm, bn):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), "float32")
            T.copy(X[by * bm, bx * bn], x)
            for i, j in T.Parallel(bm, bn):
                x[i, j] = x[i, j] + (by * bm + i) * 1000 + bx * bn + j
            T.copy(x, Y[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm,bn", [(1000, 77, 8, 8), (3, 5000, 2, 16)])
def test_many_blocks(M, N, bm, bn, target):
    x = np.random.default_rng(30).integers(-8, 9, (M, N)).astype(np.float32)
    r, c = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
    _close(_run(tw.compile(index_map(M, N, bm, bn), target=target, out_idx=[1]), target, x), x + r * 1000.0 + c)


def float_mod(n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), "float32")
            y = T.alloc_fragment((n,), "float32")
            T.copy(X, x)
            for i in T.Parallel(n):
                y[i] = x[i] % 2.0
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)  # F13: fixed by h-port10b
def test_float_mod(target):
    x = np.array([-7.5, -2.0, -0.5, 0.0, 0.5, 3.0, 7.25, 1e6], np.float32)
    _close(_run(tw.compile(float_mod(8), target=target, out_idx=[1]), target, x), x.astype(np.float64) % 2, 1e-6, 1e-6)


def global_copy(M, N, bm, src, dst):
    @T.prim_func
    def main(X: T.Tensor((M, N), src), Y: T.Tensor((M, N), dst)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            T.copy(X[bx * bm:(bx + 1) * bm, 0:N], Y[bx * bm:(bx + 1) * bm, 0:N])
    return main


@pytest.mark.parametrize("target", TARGETS)  # F14: fixed by h-port10b (stage_global_copies)
@pytest.mark.parametrize("M,N,bm,src,dst", [(1, 1, 8, "float32", "float32"), (13, 37, 8, "float32", "float16"),
                                            (100, 3, 32, "int8", "int32")])
def test_global_to_global_copy(M, N, bm, src, dst, target):
    x = np.random.default_rng(31).integers(-8, 9, (M, N)).astype(np_dtype(src))
    _close(_run(tw.compile(global_copy(M, N, bm, src, dst), target=target, out_idx=[1]), target, x), x)


def half_maps(n, dt, odt):
    @T.prim_func
    def main(X: T.Tensor((n,), dt), Y: T.Tensor((n,), odt), Z: T.Tensor((n,), odt)):
        with T.Kernel(1) as bx:
            h = T.alloc_fragment((n,), dt)
            y = T.alloc_fragment((n,), odt)
            z = T.alloc_fragment((n,), odt)
            T.copy(X, h)
            for i in T.Parallel(n):
                y[i] = (h[i] + 1000.0) - 1000.0          # docs/language.md: computed in float32, rounded once
                z[i] = h[i] * 2.0
            T.copy(y, Y)
            T.copy(z, Z)
    return main


HALF_X = np.array([0.1, 0.3, 1.5, -0.7, 3.14159, 65504, -65504, 0.01], np.float32)


def _half_maps_case(dt, odt, target):
    h = HALF_X.astype(np_dtype(dt))
    y, z = _run(tw.compile(half_maps(8, dt, odt), target=target, out_idx=[1, 2]), target, h)
    v32 = h.astype(np.float32)
    with np.errstate(over="ignore"):
        ry = ((v32 + np.float32(1000)) - np.float32(1000)).astype(np_dtype(odt))    # float32 arithmetic, one rounding
        rz = (v32 * np.float32(2)).astype(np_dtype(odt))
    np.testing.assert_array_equal(y.astype(np.float64), ry.astype(np.float64))
    np.testing.assert_array_equal(z.astype(np.float64), rz.astype(np.float64))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("odt", ["bfloat16", "float32"])
def test_bfloat16_map_rounding(odt, target):
    _half_maps_case("bfloat16", odt, target)


@pytest.mark.parametrize("target", TARGETS)  # F15: fixed by h-ascfix9c
@pytest.mark.parametrize("odt", ["float16", "float32"])
def test_float16_map_rounding(odt, target):
    _half_maps_case("float16", odt, target)


def half_row_sum(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M,), "float16")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float16")
            y = T.alloc_fragment((M,), "float16")
            T.copy(X, x)
            T.reduce_sum(x, y, dim=1)
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)  # F15: fixed by h-ascfix9c
def test_float16_row_sum_rounded_once(target):
    x = np.ones((2, 256), np.float16)
    x[0, 0] = 2048                                   # 2303, rounded once: 2304
    x[1] = (np.random.default_rng(32).standard_normal(256) * 10).astype(np.float16)
    y = _run(tw.compile(half_row_sum(2, 256), target=target, out_idx=[1]), target, x)
    np.testing.assert_array_equal(y, x.astype(np.float64).sum(1).astype(np.float16))


# ---------------------------------------------------------------------------------------------
# a map over a 3-D tile (F16) and the 2-D forms that run on both targets

def map_3d(S, H, D, bs, form):
    @T.prim_func
    def tile3(X: T.Tensor((S, H, D), "float32"), Sc: T.Tensor((H,), "float32"), Y: T.Tensor((S, H, D), "float32")):
        with T.Kernel(T.ceildiv(S, bs)) as bx:
            x = T.alloc_fragment((bs, H, D), "float32")
            sc = T.alloc_fragment((H,), "float32")
            T.copy(X[bx * bs:(bx + 1) * bs, 0:H, 0:D], x)
            T.copy(Sc, sc)
            for s, h, d in T.Parallel(bs, H, D):
                x[s, h, d] = x[s, h, d] * sc[h] + d
            T.copy(x, Y[bx * bs:(bx + 1) * bs, 0:H, 0:D])

    @T.prim_func
    def per_head(X: T.Tensor((S, H, D), "float32"), Sc: T.Tensor((H,), "float32"), Y: T.Tensor((S, H, D), "float32")):
        with T.Kernel(T.ceildiv(S, bs)) as bx:
            x = T.alloc_fragment((bs, D), "float32")
            for h in T.serial(H):
                T.copy(X[bx * bs:(bx + 1) * bs, h, 0:D], x)
                sh = Sc[h]
                for s, d in T.Parallel(bs, D):
                    x[s, d] = x[s, d] * sh + d
                T.copy(x, Y[bx * bs:(bx + 1) * bs, h, 0:D])

    @T.prim_func
    def flat(X: T.Tensor((S, H, D), "float32"), Sc: T.Tensor((H,), "float32"), Y: T.Tensor((S, H, D), "float32")):
        with T.Kernel(T.ceildiv(S, bs)) as bx:
            x = T.alloc_fragment((bs * H, D), "float32")
            sc = T.alloc_fragment((bs * H,), "float32")
            T.copy(X[bx * bs:(bx + 1) * bs, 0:H, 0:D], x)
            for r in T.serial(bs * H):
                sc[r] = Sc[r % H]
            for r, d in T.Parallel(bs * H, D):
                x[r, d] = x[r, d] * sc[r] + d
            T.copy(x, Y[bx * bs:(bx + 1) * bs, 0:H, 0:D])
    return {"tile3": tile3, "per_head": per_head, "flat": flat}[form]


MAP_3D = [(1, 1, 8, 4), (13, 3, 16, 4), (7, 2, 64, 8)]


def _map_3d_case(S, H, D, bs, form, target):
    rng = np.random.default_rng(33)
    x, sc = rng.integers(-8, 9, (S, H, D)).astype(np.float32), rng.integers(-2, 3, H).astype(np.float32)
    y = _run(tw.compile(map_3d(S, H, D, bs, form), target=target, out_idx=[2]), target, x, sc)
    _close(y, x.astype(np.float64) * sc[None, :, None] + np.arange(D)[None, None, :])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["per_head", "flat"])
@pytest.mark.parametrize("S,H,D,bs", MAP_3D)
def test_map_over_3d_data_with_2d_tiles(S, H, D, bs, form, target):
    _map_3d_case(S, H, D, bs, form, target)


@pytest.mark.parametrize("target", _on_ascend_xfail("F16: a T.Parallel map over a 3-D tile is an error on ascend910b"))
@pytest.mark.parametrize("S,H,D,bs", MAP_3D)
def test_map_over_a_3d_tile(S, H, D, bs, target):
    _map_3d_case(S, H, D, bs, "tile3", target)


# ---------------------------------------------------------------------------------------------
# a counting histogram in a tile (element loads / stores at data indices), and an index past the
# tile: cpu's located error; ascend910b's checker report (F17: not inside the tile's 32 B padding)

def tile_histogram(N, E):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Cnt: T.Tensor((E,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), "int32")
            cnt = T.alloc_fragment((E,), "int32")
            T.copy(X, x)
            T.clear(cnt)
            for i in T.serial(N):
                e = x[i]
                cnt[e] = cnt[e] + 1
            T.copy(cnt, Cnt)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("N,E", [(1, 2), (37, 5), (200, 8), (9, 3)])
def test_tile_histogram(N, E, target):
    x = np.random.default_rng(34).integers(0, E, N).astype(np.int32)
    np.testing.assert_array_equal(_run(tw.compile(tile_histogram(N, E), target=target, out_idx=[1]), target, x),
                                  np.bincount(x, minlength=E))


def _bad_index_reported(target, bad):
    x = np.array([0, 1, bad, 2], np.int32)
    k = tw.compile(tile_histogram(4, 3), target=target, out_idx=[1])
    if target == "cpu":
        with pytest.raises(tw.TilewrightError, match="out of bounds for dimension 0 of 'cnt'"):
            k(x)
    else:
        assert any("out of bounds" in r for r in k.profile(x)["reports"])


@pytest.mark.parametrize("target", TARGETS)
def test_tile_index_past_the_padding(target):
    _bad_index_reported(target, 20)


@pytest.mark.parametrize("target", TARGETS)  # F17: fixed by h-ascfix9c
@pytest.mark.parametrize("bad", [3, 7])
def test_tile_index_past_the_tile_in_its_padding(bad, target):
    _bad_index_reported(target, bad)


# ---------------------------------------------------------------------------------------------
# an online (chunked) logsumexp: running max and rescaled sum, a masked last chunk

def online_logsumexp(N, bm, bn, dtype):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, bn), "float32")
            m = T.alloc_fragment((bm,), "float32")
            mnew = T.alloc_fragment((bm,), "float32")
            l = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.fill(m, -T.infinity("float32"))
            T.clear(l)
            for k in T.serial(T.ceildiv(N, bn)):
                T.copy(X[bx * bm, k * bn], x)
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.where(k * bn + j < N, x[i, j], -T.infinity("float32"))
                T.reduce_max(x, mnew, dim=1)
                for i in T.Parallel(bm):
                    mnew[i] = T.max(mnew[i], m[i])
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.exp(x[i, j] - mnew[i])
                T.reduce_sum(x, s, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * T.exp(m[i] - mnew[i]) + s[i]
                    m[i] = mnew[i]
            for i in T.Parallel(bm):
                l[i] = T.log(l[i]) + m[i]
            T.copy(l, Y[bx * bm])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bm,bn,dtype", [(1, 1, 8, 8, "float32"), (13, 37, 8, 16, "float16"),
                                             (5, 1000, 4, 128, "bfloat16"), (33, 64, 16, 64, "float32")])
def test_online_logsumexp(M, N, bm, bn, dtype, target):
    x = (np.random.default_rng(35).standard_normal((M, N)) * 5).astype(np_dtype(dtype))
    v = x.astype(np.float64)
    ref = np.log(np.exp(v - v.max(1, keepdims=True)).sum(1)) + v.max(1)
    _close(_run(tw.compile(online_logsumexp(N, bm, bn, dtype), target=target, out_idx=[1]), target, x), ref, 1e-5, 1e-5)


def gemm_column_sum(M, N, K, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), S: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            c = T.alloc_fragment((bm, bn), "float32")
            s = T.alloc_fragment((bn,), "float32")
            T.gemm(A[by * bm:(by + 1) * bm, 0:K], B[0:K, bx * bn:(bx + 1) * bn], c, clear_accum=True)
            T.reduce_sum(c, s, dim=0)
            T.atomic_add(S[bx * bn], s)
    return main


@pytest.mark.parametrize("target", TARGETS)  # F18: fixed by h-port10b (the tile stays whole on both AIVs)
@pytest.mark.parametrize("M,N,K,bm,bn", [(1, 1, 1, 16, 16), (37, 33, 20, 16, 32)])
def test_column_sum_of_a_gemm(M, N, K, bm, bn, target):
    rng = np.random.default_rng(36)
    a, b = exact_values((M, K), "float16", rng), exact_values((K, N), "float16", rng)
    s = np.zeros(N, np.float32)
    _run(tw.compile(gemm_column_sum(M, N, K, bm, bn), target=target), target, a, b, s)
    _close(s, (a.astype(np.float64) @ b.astype(np.float64)).sum(0))
