"""T.gemm on regions of global tensors that reach outside the tensor (docs/language.md T.gemm): the
region reads zeros there, as T.copy's source does, on every target. cpu clips the region at run
time (src/target/cpu/codegen.cpp emit_gemm, the regions check_bounds does not prove inside);
ascend910b stages it through zero-filled L1 tiles. Both are checked against float64 numpy on
exact values (small integers and halves: every sum is exact), with the memory just past each
tensor poisoned (NaN, or 100 for int8) so that a read past the tensor shows."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import ACC, TARGET, exact_values, run_checked  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DTYPES = ["float32", "float16", "bfloat16", "int8"]


def poisoned(a, extra_rows):
    """a (2-D) as the first rows of a larger C-contiguous array whose further rows are poison."""
    poison = 100 if a.dtype == np.int8 else np.nan
    big = np.full((a.shape[0] + extra_rows, a.shape[1]), poison, a.dtype)
    big[:a.shape[0]] = a
    return big[:a.shape[0]]


def f64(x):
    return x.astype(np.float64)


# ---------------------------------------------------------------------------------------------
# A user's K loop over 128-wide slices, M / N / K not multiples of the blocks: the last slices of
# A and B reach past K, the last block's rows (cols) past M (N). On cpu one kernel of symbolic
# shapes runs every size (each region unproved: the clipped path).

def k_loop(M, N, K, dtype, bm=16, bn=16, bk=128):
    acc = ACC[dtype]

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            c = T.alloc_fragment((bm, bn), acc)
            T.clear(c)
            for ko in T.serial(T.ceildiv(K, bk)):
                T.gemm(A[by * bm:(by + 1) * bm, ko * bk:(ko + 1) * bk], B[ko * bk:(ko + 1) * bk, bx * bn:(bx + 1) * bn],
                       c)
            T.copy(c, C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
    return main


def k_loop_inputs(M, N, K, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return poisoned(exact_values((M, K), dtype, rng), 16), poisoned(exact_values((K, N), dtype, rng), 130)


SIZES = [(20, 24, 1), (20, 24, 17), (1, 3, 129), (33, 17, 200), (16, 16, 600), (5, 40, 128)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_k_loop_tails_on_cpu(dtype):
    kern = tw.compile(k_loop(T.symbolic("M"), T.symbolic("N"), T.symbolic("K"), dtype), out_idx=[2])
    for M, N, K in SIZES:
        a, b = k_loop_inputs(M, N, K, dtype)
        out = kern(a, b)
        np.testing.assert_array_equal(out, f64(a) @ f64(b), err_msg=f"M, N, K = {M}, {N}, {K}")


@pytest.mark.parametrize("K", [1, 17, 129, 200, 600])
@pytest.mark.parametrize("dtype", DTYPES)
def test_k_loop_tails_cpu_against_ascend(dtype, K):
    """Constant shapes (the proofs of check_bounds apply: only the tail regions are clipped)."""
    M, N = 20, 24
    a, b = k_loop_inputs(M, N, K, dtype, seed=K)
    ref = f64(a) @ f64(b)
    out = tw.compile(k_loop(M, N, K, dtype), out_idx=[2])(a, b)
    np.testing.assert_array_equal(out, ref)
    if dtype != "int8":  # ascend910b: an int8 B needs a transposing load it lacks (test_ascend_gemm_global.py)
        kern = tw.compile(k_loop(M, N, K, dtype), target=TARGET, out_idx=[2])
        np.testing.assert_array_equal(run_checked(kern, a, b), ref)


# ---------------------------------------------------------------------------------------------
# One gemm on a window at run-time starts (r0, k0, c0) that may begin before the tensor (negative)
# or end past it, transposed operands too; C starts at 7 and is copied out whole, so its rows and
# cols outside the product show: 0 with clear_accum, 7 (kept) with accumulation (ascend910b's
# accumulator starts from 0: there C starts at 0 and the gemm accumulates).

BM, BN, BK = 16, 8, 32


def window(M, N, K, dtype, ta, tb, clear, init=7):
    acc = ACC[dtype]
    ash = (K, M) if ta else (M, K)
    bsh = (N, K) if tb else (K, N)

    @T.prim_func
    def main(A: T.Tensor(ash, dtype), B: T.Tensor(bsh, dtype), r0: T.int32, k0: T.int32, c0: T.int32,
             D: T.Tensor((BM, BN), acc)):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((BM, BN), acc)
            T.fill(c, init)
            if ta:
                if tb:
                    T.gemm(A[k0:k0 + BK, r0:r0 + BM], B[c0:c0 + BN, k0:k0 + BK], c, transpose_A=True,
                           transpose_B=True, clear_accum=clear)
                else:
                    T.gemm(A[k0:k0 + BK, r0:r0 + BM], B[k0:k0 + BK, c0:c0 + BN], c, transpose_A=True,
                           clear_accum=clear)
            else:
                if tb:
                    T.gemm(A[r0:r0 + BM, k0:k0 + BK], B[c0:c0 + BN, k0:k0 + BK], c, transpose_B=True,
                           clear_accum=clear)
                else:
                    T.gemm(A[r0:r0 + BM, k0:k0 + BK], B[k0:k0 + BK, c0:c0 + BN], c, clear_accum=clear)
            T.copy(c, D)
    return main


def window_ref(opa, opb, r0, k0, c0, clear, init=7):
    """float64: op(A), op(B) zero-padded around, the window's product plus C's start value."""
    M, K = opa.shape
    N = opb.shape[1]
    pa = np.zeros((M + 2 * 64, K + 2 * 64))
    pa[64:64 + M, 64:64 + K] = opa
    pb = np.zeros((K + 2 * 64, N + 2 * 64))
    pb[64:64 + K, 64:64 + N] = opb
    wa = pa[64 + r0:64 + r0 + BM, 64 + k0:64 + k0 + BK]
    wb = pb[64 + k0:64 + k0 + BK, 64 + c0:64 + c0 + BN]
    return wa @ wb + (0 if clear else init)


M_, N_, K_ = 20, 12, 40
# (r0, k0, c0): inside; M / N / K tails; starting before the tensor in each dim; wholly outside
STARTS = [(0, 0, 0), (2, 5, 3), (10, 20, 8), (-5, 0, 0), (0, -30, 0), (0, 0, -4), (-3, -7, -2), (19, 39, 11),
          (20, 0, 0), (0, 40, 0), (0, 0, 12), (-16, 0, 0), (0, -32, 0), (3, 8, -8)]
WINDOW_CASES = [(d, False, False, clear) for d in DTYPES for clear in (True, False)] + \
               [("float32", ta, tb, True) for ta, tb in [(True, False), (False, True), (True, True)]] + \
               [("bfloat16", True, True, False)]


def window_inputs(dtype, ta, tb):
    rng = np.random.default_rng(3)
    opa, opb = exact_values((M_, K_), dtype, rng), exact_values((K_, N_), dtype, rng)
    a = poisoned(np.ascontiguousarray(opa.T) if ta else opa, 40)
    b = poisoned(np.ascontiguousarray(opb.T) if tb else opb, 40)
    return opa, opb, a, b


@pytest.mark.parametrize("dtype,ta,tb,clear", WINDOW_CASES)
def test_window_at_run_time_starts_on_cpu(dtype, ta, tb, clear):
    opa, opb, a, b = window_inputs(dtype, ta, tb)
    kern = tw.compile(window(M_, N_, K_, dtype, ta, tb, clear), out_idx=[5])
    for r0, k0, c0 in STARTS:
        out = kern(a, b, r0, k0, c0)
        np.testing.assert_array_equal(out, window_ref(opa, opb, r0, k0, c0, clear),
                                      err_msg=f"(r0, k0, c0) = {(r0, k0, c0)}")


def cpu_and_ascend(dtype, starts):
    opa, opb, a, b = window_inputs(dtype, False, False)
    cpu = tw.compile(window(M_, N_, K_, dtype, False, False, False, init=0), out_idx=[5])
    asc = tw.compile(window(M_, N_, K_, dtype, False, False, False, init=0), target=TARGET, out_idx=[5])
    for r0, k0, c0 in starts:
        ref = window_ref(opa, opb, r0, k0, c0, False, init=0)
        np.testing.assert_array_equal(cpu(a, b, r0, k0, c0), ref, err_msg=f"cpu, (r0, k0, c0) = {(r0, k0, c0)}")
        np.testing.assert_array_equal(run_checked(asc, a, b, r0, k0, c0), ref,
                                      err_msg=f"{TARGET}, (r0, k0, c0) = {(r0, k0, c0)}")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_window_at_run_time_starts_against_ascend(dtype):
    cpu_and_ascend(dtype, [s for s in STARTS if s[1] >= 0 and s[2] >= 0])


# ascend910b with a run-time column start < 0 (A's k0, B's c0; also B's row start k0 < 0, the
# same k0): the staging copy (GM -> L1, DataCopyNd2Nz) clips the columns before 0 at run time in
# whole C0 strips (session 20, h-negcol8; found by h-gemmclip8, where it was not clipped at all: a
# wrong product, silent at c0 = -8). A start a multiple of C0 before the tensor and a window wholly
# before it are exact; the rest of a strip before column 0 cannot be clipped on this path (the Nz
# tile keeps a strip's C0 columns of a row in one 32 B block): the read before the row is the
# simulator checker's report at the gemm's line, never a silent wrong answer. cpu is exact.
NEG_EXACT = {"float16": [(0, -16, 0), (0, -32, 0), (3, 8, -8), (0, 0, -16), (-3, -16, -8)],
             "float32": [(0, -8, 0), (0, -24, 0), (0, 0, -8), (3, 8, -8), (-3, -16, -16)]}
NEG_INSIDE_A_STRIP = {"float16": [(0, -30, 0), (0, 0, -4), (-3, -7, -2)],
                      "float32": [(0, -30, 0), (0, 0, -4), (2, -5, 0)]}


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_window_negative_column_start_on_ascend(dtype):
    cpu_and_ascend(dtype, NEG_EXACT[dtype])


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_window_negative_column_start_inside_a_strip_is_reported_on_ascend(dtype):
    opa, opb, a, b = window_inputs(dtype, False, False)
    asc = tw.compile(window(M_, N_, K_, dtype, False, False, False, init=0), target=TARGET, out_idx=[5])
    for r0, k0, c0 in NEG_INSIDE_A_STRIP[dtype]:
        reports = asc.profile(a, b, r0, k0, c0)["reports"]
        assert reports and all("out of bounds" in r and "test_gemm_global_clip.py" in r for r in reports), \
            ((r0, k0, c0), reports)


# ---------------------------------------------------------------------------------------------
# Bands (docs/language.md "Bands"): the diagonals count from the regions' first elements, also
# when the part inside the tensor starts later (the clipped product's band is shifted to match).
# 48 x 48 windows take the packed path that uses the band (gemm.h Band).

BAND_W, BAND_K = 48, 64


def band_window(kind):
    @T.prim_func
    def main(A: T.Tensor((T.symbolic("M"), T.symbolic("K")), "float32"),
             B: T.Tensor((T.symbolic("K"), T.symbolic("N")), "float32"), r0: T.int32, k0: T.int32, c0: T.int32,
             lo: T.int32, hi: T.int32, D: T.Tensor((BAND_W, BAND_W), "float32")):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((BAND_W, BAND_W), "float32")
            if kind == "a":
                T.gemm(A[r0:r0 + BAND_W, k0:k0 + BAND_K], B[k0:k0 + BAND_K, c0:c0 + BAND_W], c, clear_accum=True,
                       a_band=(lo, hi))
            else:
                T.gemm(A[r0:r0 + BAND_W, k0:k0 + BAND_K], B[k0:k0 + BAND_K, c0:c0 + BAND_W], c, clear_accum=True,
                       c_band=(lo, hi))
            T.copy(c, D)
    return main


BAND_CASES = [(0, 0, 0, -4, 9), (-7, -5, -3, -4, 9), (30, 20, 10, -10, 3), (-20, 0, 5, 0, 1), (5, -30, 0, -2, 40)]


def band_case(kern, kind, r0, k0, c0, lo, hi, M=60, N=50, K=70):
    rng = np.random.default_rng(7)
    a = exact_values((M, K), "float32", rng)
    b = exact_values((K, N), "float32", rng)
    rows, cols = np.indices((M, K))
    if kind == "a":  # the promise: op(A) is 0 outside the band, in the window's indices
        a[~(((cols - k0) - (rows - r0) >= lo) & ((cols - k0) - (rows - r0) < hi))] = 0
    out = kern(poisoned(a, 8), poisoned(b, 80), r0, k0, c0, lo, hi)
    ref = window_ref_sized(a, b, r0, k0, c0)
    i, j = np.indices(ref.shape)
    keep = np.ones(ref.shape, bool) if kind == "a" else (j - i >= lo) & (j - i < hi)
    np.testing.assert_array_equal(np.where(keep, out, 0), np.where(keep, ref, 0),
                                  err_msg=f"{kind}_band, (r0, k0, c0, lo, hi) = {(r0, k0, c0, lo, hi)}")


def window_ref_sized(a, b, r0, k0, c0):
    pa = np.zeros((a.shape[0] + 256, a.shape[1] + 256))
    pa[128:128 + a.shape[0], 128:128 + a.shape[1]] = a
    pb = np.zeros((b.shape[0] + 256, b.shape[1] + 256))
    pb[128:128 + b.shape[0], 128:128 + b.shape[1]] = b
    return pa[128 + r0:128 + r0 + BAND_W, 128 + k0:128 + k0 + BAND_K] @ pb[128 + k0:128 + k0 + BAND_K,
                                                                           128 + c0:128 + c0 + BAND_W]


@pytest.mark.parametrize("kind", ["a", "c"])
def test_bands_of_a_clipped_window(kind):
    kern = tw.compile(band_window(kind), out_idx=[7])
    for case in BAND_CASES:
        band_case(kern, kind, *case)


# ---------------------------------------------------------------------------------------------
# Checked mode (TW_BOUNDS_CHECK=1) reports nothing for a region outside the tensor (it is legal)
# and gives the same product; a global C stays an error.

CHECKED_CHILD = '''
import sys
import numpy as np
sys.path.insert(0, "tests/python")
import tilewright as tw
import test_gemm_global_clip as g
for dtype in ["float32", "int8"]:
    a, b = g.k_loop_inputs(20, 24, 200, dtype)
    out = tw.compile(g.k_loop(20, 24, 200, dtype), out_idx=[2])(a, b)
    np.testing.assert_array_equal(out, g.f64(a) @ g.f64(b))
    opa, opb, a, b = g.window_inputs(dtype, False, False)
    kern = tw.compile(g.window(g.M_, g.N_, g.K_, dtype, False, False, True), out_idx=[5])
    for s in g.STARTS:
        np.testing.assert_array_equal(kern(a, b, *s), g.window_ref(opa, opb, *s, True))
for kind in "ac":  # checked mode verifies the a_band promise on the clipped part (shifted band)
    kern = tw.compile(g.band_window(kind), out_idx=[7])
    for case in g.BAND_CASES:
        g.band_case(kern, kind, *case)
print("OK")
'''


def test_checked_mode_accepts_regions_outside_the_tensor(tmp_path):
    from tw_test_util import suite_cache_dir
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_BOUNDS_CHECK": "1", "TW_CACHE_DIR": suite_cache_dir(tmp_path)})
    (tmp_path / "child.py").write_text(CHECKED_CHILD)
    p = subprocess.run([sys.executable, str(tmp_path / "child.py")], env=env, capture_output=True, text=True,
                       timeout=900, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "OK", p.stdout


def test_global_c_is_still_an_error():
    @T.prim_func
    def main(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32"), C: T.Tensor((8, 8), "float32")):
        with T.Kernel(1) as bx:
            T.gemm(A[0:8, 0:8], B[0:8, 0:8], C[0:8, 0:8])
    with pytest.raises(tw.TilewrightError):
        tw.compile(main)


# ---------------------------------------------------------------------------------------------
# BSHD regions (the rows a stride H * D apart, docs/language.md T.gemm) on the clipped path: a
# user's loop over 32-wide head-dim slices of Q[b, rows, h, :] and K[b, keys, h, :] with S, L and
# D symbolic (nothing proved): the last row block reaches past S, the last slices past D. The
# memory just past each tensor is poisoned.

def bshd_k_loop(bm=16, bl=16, bk=32):
    S, L, D = T.symbolic("S"), T.symbolic("L"), T.symbolic("D")

    @T.prim_func
    def main(Q: T.Tensor((2, S, 3, D), "float32"), K: T.Tensor((2, L, 3, D), "float32"),
             O: T.Tensor((2, 3, S, L), "float32")):
        with T.Kernel(T.ceildiv(L, bl), T.ceildiv(S, bm), 6) as (bx, by, bz):
            c = T.alloc_fragment((bm, bl), "float32")
            T.clear(c)
            for ko in T.serial(T.ceildiv(D, bk)):
                T.gemm(Q[bz // 3, by * bm:(by + 1) * bm, bz % 3, ko * bk:(ko + 1) * bk],
                       K[bz // 3, bx * bl:(bx + 1) * bl, bz % 3, ko * bk:(ko + 1) * bk], c, transpose_B=True)
            T.copy(c, O[bz // 3, bz % 3, by * bm:(by + 1) * bm, bx * bl:(bx + 1) * bl])
    return main


def test_bshd_regions_clipped_on_cpu():
    kern = tw.compile(bshd_k_loop(), out_idx=[2])
    rng = np.random.default_rng(5)
    for S, L, D in [(17, 5, 40), (1, 33, 1), (16, 16, 32), (40, 3, 70)]:
        q = exact_values((2, S, 3, D), "float32", rng)
        k = exact_values((2, L, 3, D), "float32", rng)
        qp = np.full(q.size + 4096, np.nan, np.float32)
        qp[:q.size] = q.ravel()
        kp = np.full(k.size + 4096, np.nan, np.float32)
        kp[:k.size] = k.ravel()
        out = kern(qp[:q.size].reshape(q.shape), kp[:k.size].reshape(k.shape))
        ref = np.einsum("bshd,blhd->bhsl", f64(q), f64(k))
        np.testing.assert_array_equal(out, ref, err_msg=f"S, L, D = {S}, {L}, {D}")
