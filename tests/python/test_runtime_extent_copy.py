"""T.copy with a run-time extent (docs/language.md "Run-time extents", issue 13): a tensor slice
X[r0:r0 + rows] with rows = T.min(C, n - r0) copies the rows that exist. Loads: the tile's rows past
`rows` read as 0 (a tail); stores: the tensor's rows past `rows` are not written. An extent <= 0
copies nothing. Each kernel runs on cpu and on ascend910b (the 910B simulator, checker on: no
reports) against numpy, exactly (copies do not round), for float32 / float16 / bfloat16 / int32,
1-D and 2-D, run-time row counts 0, 1, the tile size, tails of the tensor and past its end; then the
errors (an extent with no constant bound, one that can exceed the tile, a DataCopyPad field beyond
its width at run time), with their message and line."""
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype, randn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# these kernels leave an out_idx output's elements past a run-time extent unwritten on purpose: the
# simulator's `unwritten output` report is expected there (run_checked_partial), any other fails
from ascend_util import TARGET, run_checked_partial as run_checked  # noqa: E402
from tw_test_util import marked_line, unchecked_code_only  # noqa: E402

THIS_FILE = __file__
SENTINEL = -7


def where(marker):
    return marked_line(THIS_FILE, "@" + marker)[0]


def rows_kernel(M, D, block, dtype, target, axis=0):
    """Block bx loads the rows r0 .. r0 + rows of X (rows = min(block, n - r0), run time) into a
    tile, stores the whole tile into Z (the zeros past `rows` show) and, over a block of SENTINEL,
    the tile's first `rows` rows into Y (the rows past `rows` keep the SENTINEL). axis=1: the same
    along the columns of 2-D tiles (a run-time column count)."""
    G = (M + block - 1) // block
    # the SENTINEL block store, then the rows store into the same bytes: on ascend910b the checker
    # reports the two MTE3 writes as a same-pipe hazard (insert_sync does not order GM writes of one
    # pipe), so there the rows past n of Y are not compared
    sentinel = target == "cpu"
    shape = (M,) if D is None else (M, D)
    zshape = (G * block,) if D is None else (G * block, D)
    tshape = (block,) if D is None else (block, D)

    if axis == 1:
        @T.prim_func
        def cols_main(X: T.Tensor((D, M), dtype), n: T.int32, Y: T.Tensor((D, M), dtype),
                      Z: T.Tensor((D, G * block), dtype)):
            with T.Kernel(G) as bx:
                t = T.alloc_fragment((D, block), dtype)
                s = T.alloc_fragment((D, block), dtype)
                c0 = bx * block
                cols = T.min(block, n - c0)
                T.copy(X[:, c0:c0 + cols], t)
                T.copy(t, Z[:, c0:c0 + block])
                if sentinel:
                    T.fill(s, SENTINEL)
                    T.copy(s, Y[:, c0:c0 + block])
                T.copy(t[:, 0:cols], Y[:, c0:c0 + cols])
        return tw.compile(cols_main, target=target, out_idx=[2, 3])

    if D is None:
        @T.prim_func
        def main1(X: T.Tensor(shape, dtype), n: T.int32, Y: T.Tensor(shape, dtype), Z: T.Tensor(zshape, dtype)):
            with T.Kernel(G) as bx:
                t = T.alloc_fragment(tshape, dtype)
                s = T.alloc_fragment(tshape, dtype)
                r0 = bx * block
                rows = T.min(block, n - r0)
                T.copy(X[r0:r0 + rows], t)
                T.copy(t, Z[r0:r0 + block])
                if sentinel:
                    T.fill(s, SENTINEL)
                    T.copy(s, Y[r0:r0 + block])
                T.copy(t[0:rows], Y[r0:r0 + rows])
        return tw.compile(main1, target=target, out_idx=[2, 3])

    @T.prim_func
    def main2(X: T.Tensor(shape, dtype), n: T.int32, Y: T.Tensor(shape, dtype), Z: T.Tensor(zshape, dtype)):
        with T.Kernel(G) as bx:
            t = T.alloc_fragment(tshape, dtype)
            s = T.alloc_fragment(tshape, dtype)
            r0 = bx * block
            rows = T.min(block, n - r0)
            T.copy(X[r0:r0 + rows, :], t)
            T.copy(t, Z[r0:r0 + block, :])
            if sentinel:
                T.fill(s, SENTINEL)
                T.copy(s, Y[r0:r0 + block, :])
            T.copy(t[0:rows, :], Y[r0:r0 + rows, :])
    return tw.compile(main2, target=target, out_idx=[2, 3])


def expected(X, n, block, axis=0):
    """numpy: Y = X on the first n rows (columns), SENTINEL after; Z = X there, 0 after (padded to
    whole blocks)."""
    Xa = np.moveaxis(X, axis, 0)
    M = Xa.shape[0]
    G = (M + block - 1) // block
    k = max(0, min(n, M))
    Y = np.full_like(Xa, SENTINEL)
    Y[:k] = Xa[:k]
    Z = np.zeros((G * block,) + Xa.shape[1:], X.dtype)
    Z[:k] = Xa[:k]
    return np.moveaxis(Y, 0, axis), np.moveaxis(Z, 0, axis)


def inputs(shape, dtype, seed=0):
    if dtype == "int32":
        return np.random.default_rng(seed).integers(-1000, 1000, size=shape).astype(np.int32)
    return randn(shape, dtype, seed=seed)


def check(kern, X, n, block, axis=0, ascend=False):
    Y, Z = run_checked(kern, X, n) if ascend else kern(X, n)
    eY, eZ = expected(X, n, block, axis)
    Y = np.asarray(Y)
    if ascend:  # only the rows of X (see rows_kernel; the rest of Y is never written)
        k = max(0, min(n, X.shape[axis]))
        Y, eY = np.moveaxis(Y, axis, 0)[:k], np.moveaxis(eY, axis, 0)[:k]
    np.testing.assert_array_equal(Y.astype(np.float64), eY.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(Z).astype(np.float64), eZ.astype(np.float64))


DTYPES = ["float32", "float16", "bfloat16", "int32"]
# M = 37 rows in blocks of 16: the last block is a tail (5 rows); n: nothing, one row, a whole
# block, a count inside the tail, the tensor's end, past it (clipped by the tensor), negative
NS = [0, 1, 16, 35, 37, 50, -3]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_rows_2d(dtype, target):
    kern = rows_kernel(37, 24, 16, dtype, target)
    X = inputs((37, 24), dtype)
    for n in NS:
        check(kern, X, n, 16, ascend=target != "cpu")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_rows_1d(dtype, target):
    kern = rows_kernel(45, None, 16, dtype, target)
    X = inputs((45,), dtype, seed=1)
    for n in [0, 1, 16, 40, 45, 99]:
        check(kern, X, n, 16, ascend=target != "cpu")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_columns(dtype, target):
    kern = rows_kernel(40, 3, 16, dtype, target, axis=1)
    X = inputs((3, 40), dtype, seed=2)
    for n in [0, 1, 16, 33, 40, 64]:
        check(kern, X, n, 16, axis=1, ascend=target != "cpu")


def test_one_row_tensor_and_one_row_tile():
    kern = rows_kernel(1, 8, 1, "float32", "cpu")
    X = inputs((1, 8), "float32", seed=3)
    for n in [0, 1, 2]:
        check(kern, X, n, 1)
    # on ascend910b a run-time extent of bound 1 is a dimension the window drops: a located error
    with pytest.raises(tw.TilewrightError, match=r"test_runtime_extent_copy\.py:\d+:\d+: error: .*has the bound 1"):
        rows_kernel(1, 8, 1, "float32", TARGET)(X, 1)


def gemm_rows(M, K, N, bm, dtype, target):
    """C = A B with A's row block loaded with a run-time row count into a gemm operand (GM -> L1
    on Ascend, Nd2Nz with a run-time nValue): rows past n are zero rows of the product, and the
    store writes only rows < n (C past them keeps the kernel's zero fill of a first store)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), n: T.int32, C: T.Tensor((M, N), "float32"),
             Z: T.Tensor((T.ceildiv(M, bm) * bm, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_shared((bm, K), dtype)
            b = T.alloc_shared((K, N), dtype)
            c = T.alloc_fragment((bm, N), "float32")
            r0 = bx * bm
            rows = T.min(bm, n - r0)
            T.copy(A[r0:r0 + rows, :], a)
            T.copy(B, b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, Z[r0:r0 + bm, :])
            T.copy(c, C[r0:r0 + rows, :])
    return tw.compile(main, target=target, out_idx=[3, 4])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@unchecked_code_only
def test_gemm_operand_rows_on_both_targets(dtype):
    M, K, N, bm = 40, 32, 32, 16
    A, B = inputs((M, K), dtype, seed=4), inputs((K, N), dtype, seed=5)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    for n in [0, 1, 16, 29, 40]:
        _, Zc = gemm_rows(M, K, N, bm, dtype, "cpu")(A, B, n)
        Ca, Za = run_checked(gemm_rows(M, K, N, bm, dtype, TARGET), A, B, n)
        k = min(n, M)
        eZ = np.zeros((48, N))
        eZ[:k] = ref[:k]
        tol = dict(atol=1e-4, rtol=1e-4) if dtype == "float32" else dict(atol=1e-2, rtol=1e-2)
        np.testing.assert_allclose(Zc, eZ, **tol)
        np.testing.assert_allclose(Za, eZ, **tol)
        np.testing.assert_allclose(np.asarray(Ca)[:k], ref[:k], **tol)


def gemm_cols(M, K, N, bn, dtype, target):
    """C = A B over column blocks of B loaded with a run-time column count (GM -> L1, Nd2Nz with a
    run-time dValue; the columns past n are zero columns of the product) and C stored with it
    (L0C -> GM, Fixpipe with a run-time nSize: C's columns past n are not written)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), n: T.int32, C: T.Tensor((M, N), "float32"),
             Z: T.Tensor((M, T.ceildiv(N, bn) * bn), "float32")):
        with T.Kernel(T.ceildiv(N, bn)) as bx:
            a = T.alloc_shared((M, K), dtype)
            b = T.alloc_shared((K, bn), dtype)
            c = T.alloc_fragment((M, bn), "float32")
            c0 = bx * bn
            cols = T.min(bn, n - c0)
            T.copy(A, a)
            T.copy(B[:, c0:c0 + cols], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, Z[:, c0:c0 + bn])
            T.copy(c, C[:, c0:c0 + cols])
    return tw.compile(main, target=target, out_idx=[3, 4])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@unchecked_code_only
def test_gemm_operand_columns_on_both_targets(dtype):
    M, K, N, bn = 32, 32, 40, 16
    A, B = inputs((M, K), dtype, seed=7), inputs((K, N), dtype, seed=8)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    kc, ka = gemm_cols(M, K, N, bn, dtype, "cpu"), gemm_cols(M, K, N, bn, dtype, TARGET)
    for n in [0, 1, 5, 16, 37, 40, -2]:
        _, Zc = kc(A, B, n)
        Ca, Za = run_checked(ka, A, B, n)
        k = max(0, min(n, N))
        eZ = np.zeros((M, 48))
        eZ[:, :k] = ref[:, :k]
        tol = dict(atol=1e-4, rtol=1e-4) if dtype == "float32" else dict(atol=1e-2, rtol=1e-2)
        np.testing.assert_allclose(Zc, eZ, **tol)
        np.testing.assert_allclose(Za, eZ, **tol)
        np.testing.assert_allclose(np.asarray(Ca)[:, :k], ref[:, :k], **tol)


def gathered_rows(M, N, K, bm, nblk, dtype, target):
    """Per row block bx of A, over the key blocks kb = Idx[bx, t] of the table (their rows past n
    are zero: a run-time count min(bm, n - kb * bm), kb read from the table): S = A_bx Kb^T / 2
    (Cube), its copy into dtype (Vector), C_bx = C_bx / 2 + S Vb (Vector, Cube), as masked
    prefill's key loop. On cpu the K and V tiles are gemm views of K and V in place (no copy); on
    ascend910b the Cube loop is skewed (skew_cube_loops: Q K^T 3 iterations ahead, the table read
    substituted into the V copy's count) and the count's table read is hoisted into a scalar load."""
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), Kt: T.Tensor((K, N), dtype), Vt: T.Tensor((K, N), dtype),
             Idx: T.Tensor((M // bm, nblk), "int32"), n: T.int32, C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm) as bx:
            a = T.alloc_shared((bm, N), dtype)
            k = T.alloc_shared((bm, N), dtype)
            v = T.alloc_shared((bm, N), dtype)
            s = T.alloc_fragment((bm, bm), "float32")
            p = T.alloc_fragment((bm, bm), dtype)
            c = T.alloc_fragment((bm, N), "float32")
            T.copy(A[bx * bm:(bx + 1) * bm, :], a)
            T.fill(c, 0)
            for t in T.serial(nblk):
                kb = Idx[bx, t]
                rows = T.min(bm, n - kb * bm)
                T.copy(Kt[kb * bm:kb * bm + rows, :], k)
                T.gemm(a, k, s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(bm, bm):
                    p[i, j] = s[i, j] * 0.5
                for i, d in T.Parallel(bm, N):
                    c[i, d] = c[i, d] * 0.5
                T.copy(Vt[kb * bm:kb * bm + rows, :], v)
                T.gemm(p, v, c)
            T.copy(c, C[bx * bm:(bx + 1) * bm, :])
    return tw.compile(main, target=target, out_idx=[5])


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gathered_row_blocks_with_run_time_counts(dtype):
    M, N, K, bm, nblk = 32, 32, 40, 16, 3  # K / V: 2 whole row blocks and a tail of 8 rows
    A, Kt, Vt = (inputs(sh, dtype, seed=9 + x) for x, sh in enumerate([(M, N), (K, N), (K, N)]))
    idx = np.array([[2, 0, 1], [1, 2, 2]], np.int32)
    kc, ka = gathered_rows(M, N, K, bm, nblk, dtype, "cpu"), gathered_rows(M, N, K, bm, nblk, dtype, TARGET)
    src = kc.get_source("c++")
    assert "elided: k is only read (by gemm), from Kt in place" in src
    assert "elided: v is only read (by gemm), from Vt in place" in src
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == "float32" else dict(atol=5e-2, rtol=2e-2)
    for n in [40, 37, 17, 0]:
        Kz, Vz = (np.concatenate([x.astype(np.float64)[:n], np.zeros((nblk * bm - min(n, K), N))]) for x in (Kt, Vt))
        ref = np.zeros((M, N))
        for r in range(M // bm):
            Ar = A[r * bm:(r + 1) * bm].astype(np.float64)
            for t in range(nblk):
                kb = slice(idx[r, t] * bm, (idx[r, t] + 1) * bm)
                ref[r * bm:(r + 1) * bm] = ref[r * bm:(r + 1) * bm] * 0.5 + (Ar @ Kz[kb].T * 0.5) @ Vz[kb]
        np.testing.assert_allclose(kc(A, Kt, Vt, idx, n), ref, **tol)
        np.testing.assert_allclose(run_checked(ka, A, Kt, Vt, idx, n), ref, **tol)


# ---- errors ------------------------------------------------------------------------------------

def test_an_extent_without_a_constant_bound_is_an_error():
    with pytest.raises(tw.TilewrightError) as e:
      @T.prim_func
      def bad(X: T.Tensor((64, 8), "float32"), n: T.int32, Y: T.Tensor((64, 8), "float32")):
        with T.Kernel(4) as bx:
            t = T.alloc_fragment((16, 8), "float32")
            T.copy(X[bx * 16:n, :], t)  # @unbounded
            T.copy(t, Y[bx * 16, 0])
      tw.compile(bad, out_idx=[-1])
    msg = str(e.value)
    assert f"test_runtime_extent_copy.py:{where('unbounded')}:" in msg
    assert "is neither a constant nor bounded by one" in msg and "T.min(block_M, n - r0)" in msg


def test_an_extent_that_can_exceed_the_tile_is_an_error():
    with pytest.raises(tw.TilewrightError) as e:
      @T.prim_func
      def bad(X: T.Tensor((64, 8), "float32"), n: T.int32, Y: T.Tensor((64, 8), "float32")):
        with T.Kernel(4) as bx:
            t = T.alloc_fragment((16, 8), "float32")
            rows = T.min(32, n - bx * 16)
            T.copy(X[bx * 16:bx * 16 + rows, :], t)  # @exceeds
            T.copy(t, Y[bx * 16, 0])
      tw.compile(bad, out_idx=[-1])
    msg = str(e.value)
    assert f"test_runtime_extent_copy.py:{where('exceeds')}:" in msg
    assert "can reach 32, more than the tile window of 't' holds" in msg and "T.min(16, ...)" in msg


def test_a_run_time_extent_on_the_tile_alone_is_an_error():
    with pytest.raises(tw.TilewrightError) as e:
      @T.prim_func
      def bad(X: T.Tensor((64, 8), "float32"), n: T.int32, Y: T.Tensor((64, 8), "float32")):
        with T.Kernel(4) as bx:
            t = T.alloc_fragment((16, 8), "float32")
            rows = T.min(16, n - bx * 16)
            T.copy(X[bx * 16, 0], t)
            T.copy(t[0:rows, :], Y[bx * 16:bx * 16 + 16, :])  # @tile_only
      tw.compile(bad, out_idx=[-1])
    msg = str(e.value)
    assert f"test_runtime_extent_copy.py:{where('tile_only')}:" in msg
    assert "has no counterpart on tensor" in msg and "Out[r0:r0 + rows, :]" in msg


def test_a_run_time_block_count_beyond_its_field_is_several_calls():
    # a 4100-row UB tile whose run-time row count reaches 4100: DataCopyPad's blockCount is 0..4095, so
    # the copy is two calls, min(4095, rows) and min(4095, rows - 4095) rows (the second under `if`);
    # until session 26 (hunt14 F1, fuzz14 F2) it was one call, a checker report at the copy's line for rows > 4095
    @T.prim_func
    def big(X: T.Tensor((4100, 32), "int8"), n: T.int32, Y: T.Tensor((4100, 32), "int8")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((4100, 32), "int8")
            rows = T.min(4100, n)
            T.copy(X[0:rows, :], t)
            T.copy(t, Y[0:rows, :])
    kern = tw.compile(big, target=TARGET, out_idx=[-1])
    X = np.random.default_rng(6).integers(-100, 100, size=(4100, 32)).astype(np.int8)
    for n in (0, 1, 4000, 4095, 4096, 4100):
        # rows past n of the out_idx output are unwritten on purpose: that report is expected (n < 4100)
        np.testing.assert_array_equal(np.asarray(run_checked(kern, X, n))[:n], X[:n])