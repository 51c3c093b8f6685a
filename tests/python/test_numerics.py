"""Numeric tests on target "cpu": every tile op, dtype and math function against a numpy
(float64) reference.

Conventions
-----------
* Inputs come from ``np.random.default_rng(SEED)`` (fixed seeds); nothing depends on run order.
* A result passes when ``|got - ref| <= atol + rtol * |ref|`` elementwise (``assert_close``); every
  test states its (atol, rtol) and why. Integer results are compared exactly.
* Kernels are built by ``@tw.jit`` factories at module level, so each distinct shape/dtype is
  compiled once per process and shared by the parametrised cases that use it.
"""
import functools
import math
import os
import sys

import ml_dtypes
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tw_test_util import pairwise, unchecked_code_only  # noqa: E402

BF16 = ml_dtypes.bfloat16
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")

# Unit roundoff (half an ulp, relative) of each float dtype: the error of one round-to-nearest.
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


def randn(rng, shape, dtype="float32", scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(np_dtype(dtype))


def assert_close(got, ref, atol, rtol, what=""):
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(g - r)
    bound = atol + rtol * np.abs(r)
    bad = ~(err <= bound)
    same_nan = np.isnan(g) & np.isnan(r)
    same_inf = np.isinf(g) & np.isinf(r) & (np.sign(g) == np.sign(r))
    bad &= ~(same_nan | same_inf)
    if bad.any():
        idx = np.argwhere(bad)[:5]
        detail = ", ".join(f"{tuple(i)}: got {g[tuple(i)]!r} ref {r[tuple(i)]!r}" for i in idx)
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} elements outside atol={atol:g} rtol={rtol:g}; "
                    f"max err {float(np.nanmax(err)):.3e}; first: {detail}")


def assert_exact(got, ref, what=""):
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    if got.dtype.kind == "f" or got.dtype == BF16:
        ok = (got.astype(np.float64) == ref.astype(np.float64)) | (np.isnan(got.astype(np.float64))
                                                                     & np.isnan(ref.astype(np.float64)))
        # distinguish -0.0 from +0.0
        ok &= np.signbit(got.astype(np.float64)) == np.signbit(ref.astype(np.float64))
    else:
        ok = got == ref
    if not ok.all():
        idx = np.argwhere(~ok)[:5]
        detail = ", ".join(f"{tuple(i)}: got {got[tuple(i)]!r} ref {ref[tuple(i)]!r}" for i in idx)
        pytest.fail(f"{what}: {int((~ok).sum())} of {ok.size} elements differ; first: {detail}")


# =============================================================================================
# GEMM

@tw.jit(out_idx=[-1])
def gemm_kernel(M, N, K, bM, bN, bK, dtype, out_dtype, accum="float32", tA=False, tB=False, stages=2):
    a_shape = (K, M) if tA else (M, K)
    b_shape = (N, K) if tB else (K, N)
    a_tile = (bK, bM) if tA else (bM, bK)
    b_tile = (bN, bK) if tB else (bK, bN)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM)) as (bx, by):
            A_s = T.alloc_shared(a_tile, dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_f = T.alloc_fragment((bM, bN), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                if tA:
                    T.copy(A[k * bK, by * bM], A_s)
                else:
                    T.copy(A[by * bM, k * bK], A_s)
                if tB:
                    T.copy(B[bx * bN, k * bK], B_s)
                else:
                    T.copy(B[k * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=tA, transpose_B=tB)
            T.copy(C_f, C[by * bM, bx * bN])

    return main


def gemm_inputs(M, N, K, dtype, tA=False, tB=False, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "int8":
        a = rng.integers(-128, 128, (M, K), dtype=np.int8)
        b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    else:
        a = randn(rng, (M, K), dtype)
        b = randn(rng, (K, N), dtype)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    a_arg = np.ascontiguousarray(a.T) if tA else a
    b_arg = np.ascontiguousarray(b.T) if tB else b
    return a_arg, b_arg, ref


def gemm_tol(K, out_dtype):
    """fp32 accumulation of K products of N(0,1) values (|sum| ~ sqrt(K)): absolute error well
    under 1e-6 * K; plus one final rounding to the output dtype (relative unit roundoff)."""
    return 1e-6 * K + 1e-6, UNIT_ROUNDOFF[out_dtype] + 1e-6


GEMM_SHAPES = [  # (M, N, K, bM, bN, bK)
    (1000, 777, 513, 128, 128, 64),
    (1, 1, 1, 16, 16, 16),
    (17, 33, 65, 32, 32, 32),
]


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s[:3])))
@pytest.mark.parametrize("tA,tB", [(False, False), (False, True), (True, False), (True, True)],
                         ids=["NN", "NT", "TN", "TT"])
def test_gemm_float32_shapes_and_transposes(shape, tA, tB):
    M, N, K, bM, bN, bK = shape
    a, b, ref = gemm_inputs(M, N, K, "float32", tA, tB)
    c = gemm_kernel(M, N, K, bM, bN, bK, "float32", "float32", tA=tA, tB=tB)(a, b)
    assert c.dtype == np.float32 and c.shape == (M, N)
    assert_close(c, ref, *gemm_tol(K, "float32"), what=f"gemm {shape} tA={tA} tB={tB}")


# M <= 2 rows take the gemv path (B streamed in place, whole rows of up to 4096 columns per
# pass, 8 rows at a time): blocks wider than one pass, column tails, K tails, transposed A
@pytest.mark.parametrize("shape", [(1, 4200, 70, 1, 4200, 70), (2, 4111, 33, 2, 4111, 33),
                                   (1, 300, 1030, 1, 300, 512), (2, 4096, 9, 1, 4096, 9)],
                         ids=lambda s: "x".join(map(str, s[:3])))
@pytest.mark.parametrize("tA", [False, True], ids=["N", "T"])
def test_gemm_float32_gemv_wide_blocks(shape, tA):
    M, N, K, bM, bN, bK = shape
    a, b, ref = gemm_inputs(M, N, K, "float32", tA, False, seed=5)
    c = gemm_kernel(M, N, K, bM, bN, bK, "float32", "float32", tA=tA, tB=False)(a, b)
    assert_close(c, ref, *gemm_tol(K, "float32"), what=f"gemv {shape} tA={tA}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("out", ["float32", "same"])
@pytest.mark.parametrize("shape", [GEMM_SHAPES[0], GEMM_SHAPES[2]], ids=lambda s: "x".join(map(str, s[:3])))
def test_gemm_half_inputs_fp32_accumulate(dtype, out, shape):
    M, N, K, bM, bN, bK = shape
    out_dtype = dtype if out == "same" else "float32"
    a, b, ref = gemm_inputs(M, N, K, dtype, seed=1)
    c = gemm_kernel(M, N, K, bM, bN, bK, dtype, out_dtype)(a, b)
    assert c.dtype == np_dtype(out_dtype)
    # the reference uses the same (already rounded) inputs, so the only errors are the fp32
    # accumulation and the final rounding to out_dtype
    assert_close(c, ref, *gemm_tol(K, out_dtype), what=f"gemm {dtype}->{out_dtype}")


@pytest.mark.parametrize("tA,tB", [(False, False), (True, True)], ids=["NN", "TT"])
@pytest.mark.parametrize("shape", [GEMM_SHAPES[0], GEMM_SHAPES[2]], ids=lambda s: "x".join(map(str, s[:3])))
def test_gemm_int8_int32_exact(shape, tA, tB):
    M, N, K, bM, bN, bK = shape
    a, b, ref = gemm_inputs(M, N, K, "int8", tA, tB, seed=2)
    c = gemm_kernel(M, N, K, bM, bN, bK, "int8", "int32", accum="int32", tA=tA, tB=tB)(a, b)
    assert_exact(c, ref.astype(np.int32), "int8 gemm")


@tw.jit(out_idx=[-1])
def gemm_accum_kernel(M, N, K, clear, tA, tB, dtype="float32"):
    a_shape = (K, M) if tA else (M, K)
    b_shape = (N, K) if tB else (K, N)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C0: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared(a_shape, dtype)
            B_s = T.alloc_shared(b_shape, dtype)
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.copy(C0, C_f)                     # pre-filled accumulator
            T.gemm(A_s, B_s, C_f, transpose_A=tA, transpose_B=tB, clear_accum=clear)
            T.gemm(A_s, B_s, C_f, transpose_A=tA, transpose_B=tB)   # always accumulates
            T.copy(C_f, C)

    return main


@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("tA,tB", [(False, False), (False, True), (True, False), (True, True)],
                         ids=["NN", "NT", "TN", "TT"])
def test_gemm_clear_accum(clear, tA, tB):
    M, N, K = 24, 40, 36
    a, b, ref = gemm_inputs(M, N, K, "float32", tA, tB, seed=3)
    c0 = randn(np.random.default_rng(4), (M, N), scale=10.0)
    c = gemm_accum_kernel(M, N, K, clear, tA, tB)(a, b, c0)
    expected = 2 * ref + (0 if clear else c0.astype(np.float64))
    assert_close(c, expected, 1e-6 * K + 1e-5, 1e-6, what=f"clear_accum={clear}")


M_SYM, N_SYM, K_SYM = T.symbolic("M"), T.symbolic("N"), T.symbolic("K")


@tw.jit(out_idx=[-1])
def gemm_tail_tiles_kernel(M, N, K, BM, BN, BK, clear, tA, tB, dtype="float32"):
    """One block whose tiles (BM, BN, BK) are larger than the tensors: the copies are masked
    (tails zero-filled) and C, pre-filled with 5, is written out whole (its padding too)."""
    a_shape, a_tile = ((K, M), (BK, BM)) if tA else ((M, K), (BM, BK))
    b_shape, b_tile = ((N, K), (BN, BK)) if tB else ((K, N), (BK, BN))
    acc = "int32" if dtype == "int8" else "float32"

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((BM, BN), acc)):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared(a_tile, dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_f = T.alloc_fragment((BM, BN), acc)
            T.fill(C_f, 5)
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_f, transpose_A=tA, transpose_B=tB, clear_accum=clear)
            T.copy(C_f, C)

    return main


@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("tA,tB", [(False, False), (False, True), (True, False), (True, True)],
                         ids=["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_gemm_tail_tiles_multiply_only_their_live_part(clear, tA, tB, dtype):
    """Tiles filled by a masked copy are zero past the source's edge; the gemm multiplies only
    the part the copy filled (matvec on a 16-row tile takes the gemv path, a small K is not
    padded to the tile's K) and the result equals the padded product, C's padding included."""
    M, N, K, BM, BN, BK = 1, 37, 11, 16, 64, 32
    a, b, ref = gemm_inputs(M, N, K, dtype, tA, tB, seed=5)
    k = gemm_tail_tiles_kernel(M, N, K, BM, BN, BK, clear, tA, tB, dtype)
    src = k.get_source()
    call = src[src.index(": gemm C_f"):src.index("tw_cpu::gemm(")]  # from the gemm's comment to its call
    call += src[src.index("tw_cpu::gemm("):].split(";")[0]
    assert "_rows" in call and "_cols" in call, call  # the live extents of A_s and B_s bound M, N, K
    out = k(a, b)
    expected = np.zeros((BM, BN)) if clear else np.full((BM, BN), 5.0)
    expected[:M, :N] += ref
    assert_close(out, expected, 1e-6 * K + 1e-5, 1e-6, what=f"tail tiles clear_accum={clear}")


@pytest.mark.parametrize("tA", [False, True], ids=["A", "At"])
def test_gemm_matvec_strips_share_whole_row_products(tA):
    """A matvec (M = 1) in column blocks narrower than B: the gemm call is told where B's tile
    lies in its rows (b_col, b_width), so the runtime computes each K step's product with B's
    whole rows once and the blocks add their columns of it (gemv_shared_rows in gemm_impl.h).
    Tails: a narrow last column block and a short last K step; the result must not depend on
    which thread computed which product (two launches, bit for bit)."""
    M, N, K = 1, 1000, 515
    a, b, ref = gemm_inputs(M, N, K, "float32", tA, False, seed=21)
    kern = gemm_kernel(M, N, K, 16, 128, 64, "float32", "float32", tA=tA)
    call = kern.get_source().split("tw_cpu::gemm(")[1].split(";")[0]
    assert "/*b_col=*/B_s_col, /*b_width=*/B_s_width" in call, call
    c = kern(a, b)
    assert_close(c, ref, *gemm_tol(K, "float32"), what=f"matvec strips tA={tA}")
    assert np.array_equal(c, kern(a, b)), "the matvec's result changed between launches"


@pytest.mark.parametrize("tA", [False, True], ids=["A", "At"])
def test_gemm_matvec_wide_strips_stream_alone(tA):
    """A matvec in column blocks of 2048 or more columns: each block streams its own strip (no
    whole-row product: kGvShareCols in gemm_impl.h), and the narrow last block (5 columns) does
    not start one. Numerics against float64, the same result over two launches."""
    M, N, K = 1, 4101, 77
    a, b, ref = gemm_inputs(M, N, K, "float32", tA, False, seed=23)
    kern = gemm_kernel(M, N, K, 16, 2048, 32, "float32", "float32", tA=tA)
    c = kern(a, b)
    assert_close(c, ref, *gemm_tol(K, "float32"), what=f"matvec wide strips tA={tA}")
    assert np.array_equal(c, kern(a, b)), "the matvec's result changed between launches"


@pytest.mark.parametrize("M,N,tA,tB", [(1, 300, False, True), (1, 300, True, True), (300, 1, False, False),
                                       (300, 1, False, True), (300, 1, True, False), (300, 1, True, True)])
def test_gemm_gemv_shapes_every_transpose(M, N, tA, tB):
    """M = 1 with B transposed and N = 1 take the gemm runtime's dot-product / row-streaming GEMV
    paths (gemm_path in gemm_impl.h; no packing): numerics against float64 with K tails."""
    K = 203
    a, b, ref = gemm_inputs(M, N, K, "float32", tA, tB, seed=22)
    c = gemm_kernel(M, N, K, 16 if M == 1 else 64, 128 if N > 1 else 16, 64, "float32", "float32", tA=tA, tB=tB)(a, b)
    assert_close(c, ref, *gemm_tol(K, "float32"), what=f"gemv {M}x{N}x{K} tA={tA} tB={tB}")


def test_gemm_symbolic_mnk_one_kernel_many_sizes():
    kern = gemm_kernel(M_SYM, N_SYM, K_SYM, 64, 64, 32, "float32", "float32")
    assert gemm_kernel(M_SYM, N_SYM, K_SYM, 64, 64, 32, "float32", "float32") is kern
    assert "float32[M, K]" in kern.get_ir("input")
    for i, (M, N, K) in enumerate([(1, 1, 1), (64, 64, 32), (65, 63, 33), (200, 7, 129), (3, 300, 17)]):
        a, b, ref = gemm_inputs(M, N, K, "float32", seed=10 + i)
        c = kern(a, b)
        assert c.shape == (M, N)
        assert_close(c, ref, *gemm_tol(K, "float32"), what=f"symbolic gemm {M}x{N}x{K}")


@pytest.mark.parametrize("M,N,K", [(0, 5, 7), (5, 6, 0)])
def test_gemm_symbolic_empty_dims(M, N, K):
    kern = gemm_kernel(M_SYM, N_SYM, K_SYM, 64, 64, 32, "float32", "float32")
    a, b, ref = gemm_inputs(M, N, K, "float32")
    c = kern(a, b)
    assert c.shape == (M, N)
    assert_exact(c, ref.astype(np.float32), "empty gemm (K = 0 gives zeros)")


# =============================================================================================
# copy: dtype conversion, tails, ranks

COPY_DTYPES = ["float32", "float16", "bfloat16", "int32", "int8", "uint8"]
RANGES = {"float32": (-1e30, 1e30), "float16": (-65504.0, 65504.0), "bfloat16": (-1e30, 1e30),
          "int32": (-2 ** 31, 2 ** 31 - 1), "int8": (-128, 127), "uint8": (0, 255)}


@tw.jit(out_idx=[-1])
def convert_kernel(shape, src, dst, via_tile):
    @T.prim_func
    def main(A: T.Tensor(shape, src), B: T.Tensor(shape, dst)):
        with T.Kernel(1) as bx:
            if via_tile:
                t = T.alloc_fragment(shape, dst)
                T.copy(A, t)          # converts on the way in
                T.copy(t, B)
            else:
                T.copy(A, B)

    return main


def convert_values(src, dst, rng, n=256):
    """Values representable in `src` whose conversion to `dst` is defined: inside dst's range;
    fractional values when converting float to int (C / numpy truncation toward zero)."""
    lo = max(RANGES[src][0], RANGES[dst][0])
    hi = min(RANGES[src][1], RANGES[dst][1])
    if src in ("int32", "int8", "uint8"):
        lo_i, hi_i = int(lo), int(hi)
        if src == "int32" and dst in ("float32", "bfloat16"):  # keep int->float exact in f32 first
            lo_i, hi_i = -(2 ** 24), 2 ** 24
        if src == "int32" and dst == "float16":
            lo_i, hi_i = -65504, 65504
        vals = rng.integers(lo_i, hi_i, n, endpoint=True)
        vals[:2] = [lo_i, hi_i]
        return vals.astype(np_dtype(src))
    if dst in ("int32", "int8", "uint8"):
        lim_lo, lim_hi = (lo, min(hi, 1e6)) if dst == "int32" else (lo, hi)
        vals = rng.uniform(max(lim_lo, -1e6), lim_hi, n)
        vals[:4] = [0.5, -0.5 if lim_lo < 0 else 1.5, 2.75, lim_hi - 0.25]
        v = vals.astype(np_dtype(src))
        v64 = v.astype(np.float64)
        v = np.where((v64 > lim_lo - 1) & (v64 < lim_hi + 1), v, np.zeros_like(v))  # src rounding
        return v
    # float -> float: normal values, halfway cases of the destination, specials
    vals = np.concatenate([rng.standard_normal(n) * 100, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-6, -3e-8,
                                                          65504.0, 65519.0, 65520.0, 1e5, -1e5, 3.0e38]])
    v = vals.astype(np.float32)
    if src == "float32" and dst in ("float16", "bfloat16"):
        # exact midpoints between adjacent destination values (ties: round to even)
        d = np_dtype(dst)
        base = rng.standard_normal(64).astype(np.float32).astype(d)
        nxt = np.nextafter(base.astype(np.float32), np.float32(np.inf)).astype(d)  # toward +inf in dst
        nxt = np.where(nxt == base, (base.astype(np.float32) * (1 + 2 ** -7)).astype(d), nxt)
        mid = (base.astype(np.float64) + nxt.astype(np.float64)) / 2
        v = np.concatenate([v, mid.astype(np.float32)])
    return v.astype(np_dtype(src))


# every pair global -> global; through a tile (global -> fragment -> global) for pairs with float32
COPY_CASES = [(s, d, False) for s in COPY_DTYPES for d in COPY_DTYPES] + \
             [(s, d, True) for s in COPY_DTYPES for d in COPY_DTYPES if "float32" in (s, d)]


@pytest.mark.parametrize("src,dst,via_tile", COPY_CASES,
                         ids=[f"{s}-{d}-{'tile' if t else 'global'}" for s, d, t in COPY_CASES])
def test_copy_convert(src, dst, via_tile):
    rng = np.random.default_rng(COPY_DTYPES.index(src) * 10 + COPY_DTYPES.index(dst))
    with np.errstate(over="ignore"):           # float16 overflow to inf is intended
        x = convert_values(src, dst, rng)
    n = x.size
    y = convert_kernel((n,), src, dst, via_tile)(x)
    # numpy's astype is the reference: RNE for float -> float16 (numpy) / bfloat16 (ml_dtypes),
    # truncation toward zero for float -> int, exact for in-range int -> int / int -> float
    with np.errstate(over="ignore"):
        ref = x.astype(np_dtype(dst))
        if src in ("float16", "bfloat16") and dst in ("float16", "bfloat16") and src != dst:
            ref = x.astype(np.float32).astype(np_dtype(dst))
    assert_exact(y, ref, f"copy {src}->{dst}")


def test_copy_f32_to_f16_bf16_round_to_nearest_even_known_values():
    # 1 + 2^-11 is halfway between 1 and 1 + 2^-10 in float16: ties to even -> 1.0
    # 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: ties to even -> 1 + 2^-9
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20], np.float32)
    h = convert_kernel((5,), "float32", "float16", False)(x)
    assert h.astype(np.float64).tolist()[:2] == [1.0, 1 + 2 ** -9]
    b = convert_kernel((5,), "float32", "bfloat16", False)(x)
    assert b.dtype == BF16
    assert b.astype(np.float64).tolist()[2:] == [1.0, 1 + 2 ** -6, 1 + 2 ** -7]


@tw.jit(out_idx=[-1])
def tail_src_kernel(M, N, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((T.ceildiv(M, bm) * bm, T.ceildiv(N, bn) * bn), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            s = T.alloc_shared((bm, bn), "float32")
            T.fill(s, 7)                             # garbage that the masked copy must replace with 0
            T.copy(A[by * bm, bx * bn], s)
            T.copy(s, B[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("M,N", [(100, 70), (1, 1), (33, 65)])
def test_copy_tail_source_reads_zero(M, N):
    a = randn(np.random.default_rng(5), (M, N))
    b = tail_src_kernel(M, N, 32, 32)(a)
    ref = np.zeros(b.shape, np.float32)
    ref[:M, :N] = a
    assert_exact(b, ref, "OOB source elements read as 0")


@tw.jit
def tail_dst_kernel(Mp, Np, M, N, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((Mp, Np), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            s = T.alloc_shared((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], s)
            T.copy(s, B[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("M,N", [(100, 70), (5, 6), (1, 33)])
def test_copy_tail_destination_skipped(M, N):
    bm, bn = 32, 32
    Mp, Np = -(-M // bm) * bm, -(-N // bn) * bn
    a = np.full((Mp, Np), -999.0, np.float32)            # padding that must never be written
    a[:M, :N] = randn(np.random.default_rng(6), (M, N))
    sentinel = np.float32(12345.0)
    big = np.full(M * N + 4096, sentinel, np.float32)    # B lives at the start of a bigger buffer
    b = big[:M * N].reshape(M, N)
    assert b.flags.c_contiguous and b.base is big
    tail_dst_kernel(Mp, Np, M, N, bm, bn)(a, b)         # B is written in place
    assert_exact(b, a[:M, :N], "in-range destination elements")
    assert (big[M * N:] == sentinel).all(), "a masked copy wrote past the end of the destination"


@tw.jit
def tail_dst_offset_kernel(M, N, r0, c0, tm, tn):
    @T.prim_func
    def main(A: T.Tensor((tm, tn), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment((tm, tn), "float32")
            T.copy(A, s)
            T.copy(s, B[r0, c0])

    return main


def test_copy_tail_destination_offset_region_no_row_wrap():
    M, N, r0, c0, tm, tn = 5, 6, 2, 3, 4, 4       # the tile covers rows 2..5 and cols 3..6 of a 5x6 B
    a = np.arange(tm * tn, dtype=np.float32).reshape(tm, tn) + 1
    big = np.full(M * N + 64, -1.0, np.float32)
    b = big[:M * N].reshape(M, N)
    tail_dst_offset_kernel(M, N, r0, c0, tm, tn)(a, b)
    ref = np.full((M, N), -1.0, np.float32)
    ref[r0:, c0:] = a[:M - r0, :N - c0]
    assert_exact(b, ref, "offset tile copy (a column overflow must not wrap into the next row)")
    assert (big[M * N:] == -1.0).all()


@tw.jit(out_idx=[-1])
def rank_copy_kernel(case):
    @T.prim_func
    def main(A: T.Tensor((2, 3, 4, 5), "float32"), B: T.Tensor((2, 3, 4, 5), "float32")):
        with T.Kernel(2) as b:
            if case == 1:       # 1-D tile from a 4-D tensor: three unit dims
                t1 = T.alloc_fragment((5,), "float32")
                for c in T.serial(3):
                    for h in T.serial(4):
                        T.copy(A[b, c, h, 0], t1)
                        T.copy(t1, B[b, c, h, 0])
            elif case == 2:     # 2-D tile, explicit slices with unit leading dims
                t2 = T.alloc_fragment((4, 5), "float32")
                for c in T.serial(3):
                    T.copy(A[b:b + 1, c:c + 1, 0:4, 0:5], t2)
                    T.copy(t2, B[b:b + 1, c:c + 1, 0:4, 0:5])
            elif case == 3:     # 3-D tile
                t3 = T.alloc_shared((3, 4, 5), "float32")
                T.copy(A[b, 0, 0, 0], t3)
                T.copy(t3, B[b, 0, 0, 0])
            else:               # 4-D tile with unit dims
                t4 = T.alloc_shared((1, 3, 1, 5), "float32")
                for h in T.serial(4):
                    T.copy(A[b, 0, h, 0], t4)
                    T.copy(t4, B[b, 0, h, 0])

    return main


@pytest.mark.parametrize("case", [1, 2, 3, 4], ids=["1d", "2d", "3d", "4d"])
def test_copy_ranks_with_unit_dims(case):
    a = randn(np.random.default_rng(7), (2, 3, 4, 5))
    b = rank_copy_kernel(case)(a)
    assert_exact(b, a, f"rank case {case}")


# =============================================================================================
# fill, clear

@tw.jit(out_idx=[-1])
def fill_kernel(dtype, value):
    @T.prim_func
    def main(A: T.Tensor((6, 10), dtype), B: T.Tensor((6, 10), dtype)):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((6, 10), dtype)
            T.copy(A, f)
            T.fill(f[0:2, :], value)      # a slice
            T.clear(f[4:6, 3:7])          # a slice of a slice region
            T.copy(f, B)

    return main


@pytest.mark.parametrize("dtype,value", [("float32", 2.5), ("float16", -1.25), ("bfloat16", 3.0),
                                         ("int32", -7), ("int8", 100), ("uint8", 200)])
def test_fill_and_clear(dtype, value):
    rng = np.random.default_rng(8)
    a = rng.integers(1, 50, (6, 10)).astype(np_dtype(dtype))
    b = fill_kernel(dtype, value)(a)
    ref = a.copy()
    ref[0:2, :] = value
    ref[4:6, 3:7] = 0
    assert_exact(b, ref, f"fill {dtype}")


@tw.jit(out_idx=[-1])
def fill_whole_kernel(dtype):
    @T.prim_func
    def main(B: T.Tensor((3, 7), dtype), C: T.Tensor((3, 7), dtype)):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((3, 7), dtype)
            g = T.alloc_fragment((3, 7), dtype)
            T.fill(f, -T.infinity(dtype))
            T.fill(g, 5)
            T.clear(g)
            T.copy(f, B)
            T.copy(g, C)

    return main


def test_fill_infinity_and_clear_whole():
    k = fill_whole_kernel("float32")
    b = np.zeros((3, 7), np.float32)          # not an output: written in place
    c = k(b)
    assert (b == -np.inf).all()
    assert_exact(c, np.zeros((3, 7), np.float32), "clear")


# =============================================================================================
# reductions

REDUCE_KINDS = {"sum": (np.sum, 0), "max": (np.max, 1), "min": (np.min, 2)}


@tw.jit(out_idx=[-1])
def reduce_kernel(kind, M, N, dim, clear, dtype):
    out_shape = (N,) if dim == 0 else (M,)

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), D0: T.Tensor(out_shape, dtype), D: T.Tensor(out_shape, dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            d = T.alloc_fragment(out_shape, dtype)
            T.copy(A, x)
            T.copy(D0, d)
            if kind == 0:
                T.reduce_sum(x, d, dim=dim, clear=clear)
            elif kind == 1:
                T.reduce_max(x, d, dim=dim, clear=clear)
            else:
                T.reduce_min(x, d, dim=dim, clear=clear)
            T.copy(d, D)

    return main


# every pair of (kind, dim, clear, dtype) values (tw_test_util.pairwise: 10 cases, not the 36 of the
# product; session 27, h-citrim15: CI time)
@pytest.mark.parametrize("kind,dim,clear,dtype", pairwise(["sum", "max", "min"], [0, 1, -1], [True, False],
                                                          ["float32", "int32"]))
def test_reduce(kind, dim, clear, dtype):
    M, N = 37, 129
    rng = np.random.default_rng(9)
    if dtype == "int32":
        a = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    else:
        a = randn(rng, (M, N), scale=10.0)
    axis = dim % 2
    n_out = N if axis == 0 else M
    d0 = (rng.integers(-3000, 3000, n_out) if dtype == "int32" else rng.standard_normal(n_out) * 30).astype(dtype)
    fn, code = REDUCE_KINDS[kind]
    d = reduce_kernel(code, M, N, dim, clear, dtype)(a, d0)
    ref = fn(a.astype(np.float64), axis=axis)
    if not clear:  # merge with what the destination held
        ref = {"sum": ref + d0, "max": np.maximum(ref, d0), "min": np.minimum(ref, d0)}[kind]
    if dtype == "int32":
        assert_exact(d, ref.astype(np.int32), f"reduce_{kind}")
    elif kind == "sum":
        # fp32 sum of <= 129 values of magnitude ~10: stated bound 1e-5 abs + 1e-5 rel
        assert_close(d, ref, 1e-4, 1e-5, f"reduce_sum dim={dim}")
    else:
        assert_exact(d, ref.astype(np.float32), f"reduce_{kind}")  # max/min are exact


@pytest.mark.parametrize("N", [16, 63, 64, 65, 200, 1031])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reduce_rows_split_accumulators(kind, N):
    """float32 row reductions run four vector accumulators (tails: one vector, then scalars):
    every length around the vector and unroll widths; max/min exact, also with +-inf; a NaN
    element makes a max/min NaN (docs/language.md: numpy's rule), as it does a sum."""
    M = 6
    rng = np.random.default_rng(N)
    a = randn(rng, (M, N), scale=10.0)
    a[1, N // 2] = np.inf
    a[2, N - 1] = -np.inf
    a[3, 0] = np.nan
    a[4, N // 3] = np.nan
    a[4, N - 1] = np.nan
    fn, code = REDUCE_KINDS[kind]
    d = reduce_kernel(code, M, N, 1, True, "float32")(a, np.zeros(M, np.float32))
    if kind == "sum":
        ref = a.astype(np.float64).sum(axis=1)
        assert_close(d, ref, 1e-4, 1e-5, f"reduce_sum N={N}")
    else:
        assert_exact(d, fn(a, axis=1), f"reduce_{kind} N={N}")


@functools.lru_cache(maxsize=None)
def map_reduce_kernel(kind, N, keep, clear, block_M=8):
    """y = exp(x - 1) over row blocks; r = reduce(y) over the rows, fused with the map (the
    codegen's map + reduce fusion). keep: y is copied out too (the tile is written; outputs Y, R),
    else only r (output R; Y, never written, is an input: an unwritten output is an error)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), R0: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32"),
             R: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            y = T.alloc_fragment((block_M, N), "float32")
            r = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(R0[bx * block_M], r)
            for i, j in T.Parallel(block_M, N):
                y[i, j] = T.exp(x[i, j] - 1.0)
            if kind == 0:
                T.reduce_sum(y, r, dim=1, clear=clear)
            elif kind == 1:
                T.reduce_max(y, r, dim=1, clear=clear)
            else:
                T.reduce_min(y, r, dim=1, clear=clear)
            if keep:
                T.copy(y, Y[bx * block_M, 0])
            T.copy(r, R[bx * block_M])

    return tw.compile(main, out_idx=[-2, -1] if keep else [-1])


# every pair of (kind, N, clear, keep) values: 10 cases, not the 36 of the product
@pytest.mark.parametrize("kind,N,clear,keep", pairwise(["sum", "max", "min"], [64, 100, 1031], [True, False],
                                                       [True, False]))
def test_map_reduce_fusion(kind, N, clear, keep):
    """A map into a tile followed by a row reduction of it is one pass (chunks reduced while in
    L1): sums within the reduce tolerance, max/min exact, NaN propagated by max/min (as reduce_max),
    tail rows and chunks, merge into the destination."""
    M = 37
    rng = np.random.default_rng(N)
    a = randn(rng, (M, N), scale=2.0)
    a[3, N // 2] = np.nan
    a[5, 0] = -np.inf
    r0 = (rng.standard_normal(M) * 30).astype(np.float32)
    fn, code = REDUCE_KINDS[kind]
    k = map_reduce_kernel(code, N, keep, clear)
    y, r = k(a, r0) if keep else (None, k(a, r0, np.empty_like(a)))
    e = np.exp((a - np.float32(1.0)).astype(np.float64))  # the kernel subtracts in float32
    if keep:
        assert_close(y, e, 1e-30, 3e-7, "map")
    if kind == "sum":
        ref = e.sum(axis=1) + (0 if clear else r0)
        assert_close(r, ref, 1e-5, 2e-6, f"fused reduce_sum N={N}")
    else:
        ye = e if not keep else y  # the float32 values reduced (when kept: exactly those)
        red = (np.max if kind == "max" else np.min)(ye, axis=1)
        if not clear:
            red = (np.maximum if kind == "max" else np.minimum)(red, r0)
        red = red.astype(np.float32)
        if keep:
            assert_exact(r, red, f"fused reduce_{kind} N={N}")
        else:  # the map's float32 exp is not numpy's: compare within its bound
            assert_close(r, red, 1e-30, 3e-7, f"fused reduce_{kind} N={N}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "uint8"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_reduce_max_min_other_dtypes(kind, dtype):
    M, N = 5, 300
    rng = np.random.default_rng(20)
    if dtype in ("int8", "uint8"):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, (M, N), endpoint=True).astype(dtype)
    else:
        a = randn(rng, (M, N), dtype)
    fn, code = REDUCE_KINDS[kind]
    d = reduce_kernel(code, M, N, 1, True, dtype)(a, np.zeros(M, np_dtype(dtype)))
    assert_exact(d, fn(a, axis=1), f"reduce_{kind} {dtype} (exact: no arithmetic)")


# =============================================================================================
# elementwise maps: math functions

# name -> (code, numpy float64 reference, input domain, (atol, rtol) for float32)
def _erf(x):
    return np.vectorize(math.erf)(x)


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


UNARY = {
    "exp": (0, np.exp, (-20, 20), (0, 4e-7)),            # a few ulp
    "exp2": (1, np.exp2, (-20, 20), (0, 4e-7)),
    "log": (2, np.log, (1e-3, 1e3), (1e-7, 4e-7)),
    "log2": (3, np.log2, (1e-3, 1e3), (1e-7, 4e-7)),
    "sqrt": (4, np.sqrt, (0, 1e4), (0, 1.2e-7)),          # correctly rounded
    "rsqrt": (5, lambda x: 1 / np.sqrt(x), (1e-3, 1e4), (0, 4e-7)),
    "abs": (6, np.abs, (-100, 100), (0, 0)),
    "tanh": (7, np.tanh, (-10, 10), (2e-7, 4e-7)),
    "erf": (8, _erf, (-4, 4), (2e-7, 4e-7)),
    "sigmoid": (9, lambda x: 1 / (1 + np.exp(-x)), (-20, 20), (2e-7, 4e-7)),
    "floor": (10, np.floor, (-10, 10), (0, 0)),
    "ceil": (11, np.ceil, (-10, 10), (0, 0)),
    "gelu": (12, _gelu, (-6, 6), (2e-7, 5e-7)),
    "neg": (13, np.negative, (-100, 100), (0, 0)),
    "square_pow": (14, lambda x: x ** 2, (-100, 100), (0, 1.2e-7)),   # x ** 2
}


@tw.jit(out_idx=[-1])
def unary_kernel(code, n, dtype):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                if code == 0:
                    B[i] = T.exp(A[i])
                elif code == 1:
                    B[i] = T.exp2(A[i])
                elif code == 2:
                    B[i] = T.log(A[i])
                elif code == 3:
                    B[i] = T.log2(A[i])
                elif code == 4:
                    B[i] = T.sqrt(A[i])
                elif code == 5:
                    B[i] = T.rsqrt(A[i])
                elif code == 6:
                    B[i] = T.abs(A[i])
                elif code == 7:
                    B[i] = T.tanh(A[i])
                elif code == 8:
                    B[i] = T.erf(A[i])
                elif code == 9:
                    B[i] = T.sigmoid(A[i])
                elif code == 10:
                    B[i] = T.floor(A[i])
                elif code == 11:
                    B[i] = T.ceil(A[i])
                elif code == 12:
                    B[i] = T.gelu(A[i])
                elif code == 13:
                    B[i] = -A[i]
                else:
                    B[i] = A[i] ** 2

    return main


def unary_input(name, n, dtype, seed=11):
    lo, hi = UNARY[name][2]
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, n)
    if name in ("floor", "ceil"):
        x[:8] = [-2.0, -1.5, -0.5, 0.0, 0.5, 1.0, 2.5, -0.0]  # exact integers and halves
    if name == "sqrt":
        x[:3] = [0.0, 1.0, 4.0]
    return x.astype(np.float32).astype(np_dtype(dtype))


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_math_float32(name):
    code, ref_fn, _, (atol, rtol) = UNARY[name]
    x = unary_input(name, 1000, "float32")
    y = unary_kernel(code, 1000, "float32")(x)
    ref = ref_fn(x.astype(np.float64))
    # reference on the same float32 inputs in float64; the stated bound also covers the final
    # rounding to float32 (2^-24 relative)
    assert_close(y, ref, atol, rtol + 2.0 ** -24, f"T.{name} float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid", "gelu", "abs", "floor"])
def test_unary_math_half(name, dtype):
    code, ref_fn, (lo, hi), _ = UNARY[name]
    # (float16 exp overflows to inf above x~11.1: the reference overflows the same way)
    x = unary_input(name, 512, dtype, seed=12)
    y = unary_kernel(code, 512, dtype)(x)
    assert y.dtype == np_dtype(dtype)
    with np.errstate(over="ignore"):
        ref = ref_fn(x.astype(np.float64)).astype(np.float32).astype(np_dtype(dtype))
    # computed in float32 (or better) then rounded once to the half type: 1 ulp of the half type
    u = UNIT_ROUNDOFF[dtype]
    assert_close(y, ref.astype(np.float64), 1e-6 if name != "gelu" else 4 * u * 0.2, 2 * u, f"T.{name} {dtype}")


# binary ops: (code, reference on float64/int64 inputs, result dtype, (atol, rtol) for float32)
def _py_floordiv(a, b):
    return np.floor_divide(a, b)


def _py_mod(a, b):
    return np.mod(a, b)


BINARY = {
    "add": (0, lambda a, b: a + b, None),
    "sub": (1, lambda a, b: a - b, None),
    "mul": (2, lambda a, b: a * b, None),
    "min": (3, np.minimum, None),
    "max": (4, np.maximum, None),
    "floordiv": (5, _py_floordiv, None),
    "mod": (6, _py_mod, None),
    "where": (7, lambda a, b: np.where(a > b, a, 2 * b), None),
    "lt": (8, lambda a, b: (a < b).astype(np.int32), "int32"),
    "le": (9, lambda a, b: (a <= b).astype(np.int32), "int32"),
    "gt": (10, lambda a, b: (a > b).astype(np.int32), "int32"),
    "ge": (11, lambda a, b: (a >= b).astype(np.int32), "int32"),
    "eq": (12, lambda a, b: (a == b).astype(np.int32), "int32"),
    "ne": (13, lambda a, b: (a != b).astype(np.int32), "int32"),
    "and": (14, lambda a, b: ((a > 0) & (b > 0)).astype(np.int32), "int32"),
    "or": (15, lambda a, b: ((a > 0) | (b > 0)).astype(np.int32), "int32"),
    "not": (16, lambda a, b: (~(a > b)).astype(np.int32), "int32"),
    "chain": (17, lambda a, b: ((0 < a) & (a < b)).astype(np.int32), "int32"),   # 0 < a < b
    "pow": (18, np.power, None),
    "truediv": (19, lambda a, b: a / b, "float32"),
}


@tw.jit(out_idx=[-1])
def binary_kernel(code, n, dtype, out_dtype):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), out_dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                if code == 0:
                    C[i] = A[i] + B[i]
                elif code == 1:
                    C[i] = A[i] - B[i]
                elif code == 2:
                    C[i] = A[i] * B[i]
                elif code == 3:
                    C[i] = T.min(A[i], B[i])
                elif code == 4:
                    C[i] = T.max(A[i], B[i])
                elif code == 5:
                    C[i] = A[i] // B[i]
                elif code == 6:
                    C[i] = A[i] % B[i]
                elif code == 7:
                    C[i] = T.where(A[i] > B[i], A[i], B[i] * 2)
                elif code == 8:
                    C[i] = T.where(A[i] < B[i], 1, 0)
                elif code == 9:
                    C[i] = T.where(A[i] <= B[i], 1, 0)
                elif code == 10:
                    C[i] = T.where(A[i] > B[i], 1, 0)
                elif code == 11:
                    C[i] = T.where(A[i] >= B[i], 1, 0)
                elif code == 12:
                    C[i] = T.where(A[i] == B[i], 1, 0)
                elif code == 13:
                    C[i] = T.where(A[i] != B[i], 1, 0)
                elif code == 14:
                    C[i] = T.where((A[i] > 0) and (B[i] > 0), 1, 0)
                elif code == 15:
                    C[i] = T.where((A[i] > 0) or (B[i] > 0), 1, 0)
                elif code == 16:
                    C[i] = T.where(not (A[i] > B[i]), 1, 0)
                elif code == 17:
                    C[i] = T.if_then_else(0 < A[i] < B[i], 1, 0)
                elif code == 18:
                    C[i] = T.pow(A[i], B[i])
                else:
                    C[i] = A[i] / B[i]

    return main


def binary_inputs(name, n, dtype, seed=13):
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        a = rng.integers(-50, 50, n)
        b = rng.integers(-7, 8, n)
        if name in ("floordiv", "mod", "truediv"):
            b[b == 0] = 3
        a[:8] = [7, -7, 7, -7, 0, 6, -6, 1]
        b[:8] = [2, 2, -2, -2, 3, 3, 3, 1]
        if name == "pow":
            a = rng.integers(-5, 6, n)
            b = rng.integers(0, 6, n)
        return a.astype(np.int32), b.astype(np.int32)
    a = np.round(rng.standard_normal(n) * 8, 1)
    b = np.round(rng.standard_normal(n) * 4, 1)
    b[b == 0] = 1.5
    b[:16] = a[:16]  # equal operands exercise ==, <=, >=
    a[16:24] = [7.5, -7.5, 7.5, -7.5, 0.0, 6.0, -6.0, 1.0]
    b[16:24] = [2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 3.0, 1.0]
    if name == "pow":
        a = rng.uniform(0.1, 4, n)
        b = rng.uniform(-3, 3, n)
    if name in ("floordiv", "mod"):
        b[:16] = 1.25  # avoid a/a where the float32 quotient lands on an integer boundary
    return a.astype(np.float32), b.astype(np.float32)


BINARY_TOL = {"pow": (1e-7, 1e-6), "truediv": (0, 1.2e-7), "mod": (1e-5, 0), "mul": (0, 6e-8),
              "add": (1e-6, 6e-8), "sub": (1e-6, 6e-8)}


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_ops(name, dtype):
    code, ref_fn, out = BINARY[name]
    out_dtype = out or dtype
    n = 512
    a, b = binary_inputs(name, n, dtype)
    if name == "floordiv" and dtype == "float32":
        # '//' is integer-only in kernels (an explicit error, not a silent truncation)
        with pytest.raises(tw.TilewrightError, match="floordiv needs integer operands, got float32"):
            binary_kernel(code, n, dtype, out_dtype)
        return
    c = binary_kernel(code, n, dtype, out_dtype)(a, b)
    assert c.dtype == np.dtype(out_dtype)
    wide = np.int64 if dtype == "int32" else np.float64
    ref = ref_fn(a.astype(wide), b.astype(wide))
    if out_dtype == "int32":
        assert_exact(c, ref.astype(np.int32), f"{name} {dtype}")
    else:
        atol, rtol = BINARY_TOL.get(name, (0, 0))
        # python semantics: // and % follow the sign of the divisor (floor), not C's truncation
        assert_close(c, ref, atol, rtol, f"{name} {dtype}")
    if name in ("floordiv", "mod"):
        head = ref_fn(np.array([7, -7, 7, -7], wide), np.array([2, 2, -2, -2], wide))
        if dtype == "int32":
            assert c[:4].tolist() == head.tolist()
        else:
            assert c[16:20].tolist() == ref_fn(np.array([7.5, -7.5, 7.5, -7.5]), np.array([2.0, 2, -2, -2])).tolist()


@tw.jit(out_idx=[-1])
def bool_kernel(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "bool")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                B[i] = (A[i] > 0) and not (A[i] >= 10)

    return main


def test_bool_output():
    a = np.array([-1, 0, 0.5, 9.99, 10, 11], np.float32)
    b = bool_kernel(6)(a)
    assert_exact(b, (a > 0) & ~(a >= 10), "bool output")


@tw.jit(out_idx=[-1])
def cast_kernel(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), I: T.Tensor((n,), "int32"), H: T.Tensor((n,), "float16"),
             O: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                I[i] = T.cast(A[i], "int32")
                H[i] = T.float16(A[i])
                O[i] = T.cast(T.cast(A[i], "bfloat16"), "float32") + T.cast(I[i] % 3, "float32")

    return main


def test_cast_in_elementwise_map():
    n = 257
    rng = np.random.default_rng(14)
    a = (rng.standard_normal(n) * 50).astype(np.float32)
    a[:4] = [2.5, -2.5, 0.9999, -0.9999]
    i_out = np.zeros(n, np.int32)
    h_out = np.zeros(n, np.float16)
    o = cast_kernel(n)(a, i_out, h_out)
    assert_exact(i_out, a.astype(np.int32), "cast float32->int32 truncates toward zero")
    assert_exact(h_out, a.astype(np.float16), "T.float16(x) rounds to nearest even")
    ref = a.astype(BF16).astype(np.float32) + np.mod(a.astype(np.int32), 3).astype(np.float32)
    assert_exact(o, ref, "cast to bfloat16 and back")


# =============================================================================================
# loops, if/else, let, scalar parameters

@tw.jit(out_idx=[-1])
def serial_scan_kernel(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((1,), "float32")
            T.clear(acc)
            for k in T.serial(n):
                acc[0] = acc[0] + A[k]
                B[k] = acc[0]

    return main


def test_serial_loop_prefix_sum():
    n = 300
    a = np.random.default_rng(15).integers(-8, 8, n).astype(np.float32)  # exact in fp32
    b = serial_scan_kernel(n)(a)
    assert_exact(b, np.cumsum(a).astype(np.float32), "serial prefix sum")


@tw.jit(out_idx=[-1])
def unroll_kernel(n, degree):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((n,), "float32")
            T.clear(acc)
            for p in T.unroll(degree + 1):        # Horner: acc = acc * x + (p + 1)
                for i in T.Parallel(n):
                    acc[i] = acc[i] * X[i] + T.cast(p + 1, "float32")
            for j in range(0, n, 3):              # a range with a step: every third element
                acc[j] = -acc[j]
            T.copy(acc, Y)

    return main


def test_unroll_and_stepped_range():
    n = 100
    coeffs = (1.0, 2.0, 3.0, 4.0)
    x = np.linspace(-2, 2, n).astype(np.float32)
    k = unroll_kernel(n, 3)
    assert "unroll(0, 4)" in k.get_ir("input")
    y = k(x)
    x64 = x.astype(np.float64)
    ref = np.polyval(coeffs, x64)
    ref[0::3] *= -1
    assert_close(y, ref, 1e-5, 1e-6, "unrolled Horner")


@tw.jit(out_idx=[-1])
def pipelined_sum_kernel(M, K, bk, stages, start):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((M, bk), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((M, bk), "float32")
            acc = T.alloc_fragment((M, bk), "float32")
            T.clear(acc)
            for k in T.Pipelined(start, T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[0, k * bk], s)
                for i, j in T.Parallel(M, bk):
                    acc[i, j] += s[i, j]
            T.copy(acc, B)

    return main


@pytest.mark.parametrize("stages,start", [(1, 0), (2, 0), (3, 1)])
def test_pipelined_loop_sum_of_tiles_with_tail(stages, start):
    M, K, bk = 8, 100, 16        # 7 tiles, the last one half outside A (reads 0)
    a = np.random.default_rng(16).integers(-4, 5, (M, K)).astype(np.float32)
    b = pipelined_sum_kernel(M, K, bk, stages, start)(a)
    padded = np.zeros((M, 7 * bk), np.float32)
    padded[:, :K] = a
    ref = padded.reshape(M, 7, bk)[:, start:, :].sum(axis=1)
    assert_exact(b, ref.astype(np.float32), f"pipelined sum stages={stages}")


@tw.jit(out_idx=[-1])
def block_if_kernel(nb, bs):
    @T.prim_func
    def main(A: T.Tensor((nb * bs,), "float32"), B: T.Tensor((nb * bs,), "float32")):
        with T.Kernel(nb) as bx:
            if bx == 0:
                for i in T.Parallel(bs):
                    B[i] = 100.0
            elif bx % 2 == 1:
                for i in T.Parallel(bs):
                    v = A[bx * bs + i] * 2.0          # scalar let
                    B[bx * bs + i] = v * v + v
            else:
                for i in T.Parallel(bs):
                    B[bx * bs + i] = T.where(i < bs // 2, -A[bx * bs + i], A[bx * bs + i])

    return main


def test_if_else_on_block_index_and_let():
    nb, bs = 5, 16
    a = np.arange(nb * bs, dtype=np.float32) / 4
    b = block_if_kernel(nb, bs)(a)
    ref = np.empty_like(a)
    for blk in range(nb):
        s = slice(blk * bs, (blk + 1) * bs)
        if blk == 0:
            ref[s] = 100.0
        elif blk % 2 == 1:
            v = a[s] * 2
            ref[s] = v * v + v
        else:
            ref[s] = np.where(np.arange(bs) < bs // 2, -a[s], a[s])
    assert_exact(b, ref, "if/elif/else on bx")


@tw.jit(out_idx=[-1])
def scalar_param_kernel(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), alpha: T.float32, m: T.int32, B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                B[i] = T.where(i < m, A[i] * alpha, T.cast(m, "float32"))

    return main


def test_scalar_kernel_parameters_int_and_float():
    n = 64
    a = np.arange(n, dtype=np.float32)
    k = scalar_param_kernel(n)
    for alpha, m in [(2.5, 10), (-1.0, 0), (0.125, 64), (3, 33)]:
        b = k(a, alpha, m)
        ref = np.where(np.arange(n) < m, a * np.float32(alpha), np.float32(m))
        assert_exact(b, ref.astype(np.float32), f"alpha={alpha} m={m}")


# =============================================================================================
# softmax (examples/softmax.py) and the seed style

@pytest.fixture(scope="module")
def examples_path():
    sys.path.insert(0, EXAMPLES)
    yield EXAMPLES
    sys.path.remove(EXAMPLES)


@pytest.mark.parametrize("M,N", [(37, 1), (37, 4097), (1, 4097)])
def test_softmax_row_lengths(examples_path, M, N):
    import softmax as ex
    x = randn(np.random.default_rng(17), (M, N), scale=3.0)
    y = ex.softmax(N)(x)
    ref = ex.reference(x)
    assert_close(y, ref, 1e-6, 1e-5, f"softmax {M}x{N}")
    assert_close(y.astype(np.float64).sum(axis=1), np.ones(M), 1e-5, 0, "rows sum to 1")


@pytest.mark.parametrize("M,N,block_M,y_offset", [
    (1003, 2111, 8, 4),     # >= 8 MiB: streaming stores; a 3-row tail block; Y 4 bytes into a line
    (1024, 2048, 16, 16),   # numpy's usual layout: 16 bytes into the page
    (517, 4096, 4, 0),      # line-aligned output, a 1-row tail block
    (300, 65, 8, 12),       # rows of one chunk plus one column
    (300, 33, 8, 8),        # rows shorter than a chunk
])
@unchecked_code_only
def test_softmax_row_pipeline_into_offset_outputs(examples_path, M, N, block_M, y_offset):
    # The row pipeline (max, exp + sum and divide + copy-out run side by side, one row apart)
    # writing into a preallocated output at any offset from a cache line, with tail blocks.
    import softmax as ex
    x = randn(np.random.default_rng(M + N), (M, N), scale=3.0)
    k = tw.compile(ex.softmax.__wrapped__(N, block_M=block_M))
    assert ("row pipeline" in k.get_source()) == (N >= 64), "rows of at least one chunk take the pipeline"
    raw = np.zeros(M * N * 4 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + y_offset
    y = raw[start:start + M * N * 4].view(np.float32).reshape(M, N)
    k(x, y)
    assert_close(y, ex.reference(x), 1e-6, 1e-5, f"softmax {M}x{N} block_M={block_M} Y+{y_offset}")
    assert not raw[:start].any() and not raw[start + M * N * 4:].any(), "wrote outside Y"


@pytest.mark.parametrize("M,N,K", [(300, 200, 100), (128, 128, 64), (1, 129, 65)])
def test_seed_style_matmul_non_multiple_sizes(examples_path, M, N, K):
    import seed_matmul
    kern = seed_matmul.build(M, N, K)
    assert isinstance(kern, tw.Kernel)
    a, b, ref = gemm_inputs(M, N, K, "float32", seed=18)
    c = kern(a, b)
    assert c.shape == (M, N)
    assert_close(c, ref, *gemm_tol(K, "float32"), what=f"seed matmul {M}x{N}x{K}")
    # both output-tile loops became the grid; the K loop stayed a serial reduction loop
    g = kern.get_ir("infer_grid")
    assert "grid(" in g and "for k in serial" in g


def make_tile_loops_1d(n, bs, dtype):
    @tw.compile
    def scale_copy(X: tw.Tensor((n,), dtype)):
        out = tw.output((n,), dtype="float32")
        for i in range(tw.ceildiv(n, bs)):
            t = tw.load(X, (i * bs,), (bs,), dtype="float32")
            tw.store(out, (i * bs,), t)
        return out
    return scale_copy


@pytest.mark.parametrize("n", [1000, 1, 128])
def test_tile_loops_1d(n):
    kern = make_tile_loops_1d(n, 128, "float16")
    x = randn(np.random.default_rng(19), (n,), "float16")
    y = kern(x)
    assert_exact(y, x.astype(np.float32), "1-D tile loops load(dtype=float32)/store")
    assert "grid(" in kern.get_ir("final")
