"""The cpu target's in-place accumulator (view_gemm_operands' @gemm_out): a tile that is cleared,
only gemm'd into and copied whole into a window of a global tensor of its dtype is computed in
that window (no clear of the tile, no copy-out; the first gemm overwrites). Checked in the
generated C++ and against a float64 (int64 for int8) numpy reference: where it fires (the gemm
example, ragged last blocks, 1-row and 1-column tiles, a 3-D window, int8, several gemms a step,
an empty K loop) and where it must not (the tile read otherwise, another dtype, the destination
read, a window two blocks share), and a window whose start may be negative (the run-time
fallback to the tile). Fixed seeds; fp32 tolerances atol 2e-6 * K + 1e-5, rtol 1e-5."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from gemm import matmul  # noqa: E402

IN_PLACE = "computed in place by its gemms"


def _f32(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32)


def _check(out, ref, K):
    assert_close(out, ref, atol=2e-6 * max(K, 1) + 1e-5, rtol=1e-5)


@pytest.mark.parametrize("M,N,K,bm,bn,bk", [
    (1, 1, 1, 64, 128, 128),       # one element: a ragged block in both dims
    (3, 17, 129, 64, 128, 128),    # tails everywhere, two K steps (the second of one column)
    (129, 3, 17, 64, 128, 128),
    (200, 300, 260, 64, 128, 128),  # whole and ragged blocks side by side
    (37, 257, 40, 1, 128, 16),     # 1-row tiles
    (70, 33, 20, 64, 1, 8),        # 1-column tiles
])
def test_gemm_example_computes_c_in_place(M, N, K, bm, bn, bk):
    k = matmul(M, N, K, block_M=bm, block_N=bn, block_K=bk, dtype="float32")
    src = k.get_source()
    assert IN_PLACE in src and "_fresh = false;" in src
    if 1 in (bm, bn):  # the window's row (col) is a unit dim not proved inside C: the tile stays as a run-time fallback
        assert "if (C_local_p == C_local)" in src
    else:
        assert "stream_copy" not in src and "C_local_p == C_local" not in src  # no copy-out pass
    rng = np.random.default_rng(M * 7 + N + K)
    a, b = _f32(rng, M, K), _f32(rng, K, N)
    _check(k(a, b), a.astype(np.float64) @ b.astype(np.float64), K)


def test_batched_window():
    import op_zoo
    k = op_zoo.matmul_batched(3, 33, 47, 29, target="cpu")
    assert IN_PLACE in k.get_source()
    rng = np.random.default_rng(3)
    a, b = _f32(rng, 3, 33, 29), _f32(rng, 3, 29, 47)
    _check(k(a, b), a.astype(np.float64) @ b.astype(np.float64), 29)


def test_int8_into_int32():
    M, N, K = 65, 70, 300
    k = _acc_kernel(M, N, K, "int8", bm=32, bn=64, bk=128)
    assert IN_PLACE in k.get_source()
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    out = k(a, b)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))


def _acc_kernel(M, N, K, variant, bm=32, bn=32, bk=16):
    """C = A @ B with an accumulator tile; variant changes what else touches it."""
    in_dtype = "int8" if variant == "int8" else "float32"
    acc_dtype = "int32" if variant == "int8" else "float32"
    out_dtype = "float16" if variant == "cast" else acc_dtype
    grid_z = 2 if variant == "shared_window" else 1

    @tw.jit(out_idx=[-1])
    def kern():
        @T.prim_func
        def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), in_dtype), C: T.Tensor((M, N), out_dtype)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), grid_z) as (bx, by, bz):
                a = T.alloc_shared((bm, bk), in_dtype)
                b = T.alloc_shared((bk, bn), in_dtype)
                b2 = T.alloc_shared((bk, bn), "float32")
                c = T.alloc_fragment((bm, bn), acc_dtype)
                T.clear(c)
                for k in T.Pipelined(T.ceildiv(K, bk)):
                    T.copy(A[by * bm, k * bk], a)
                    T.copy(B[k * bk, bx * bn], b)
                    T.gemm(a, b, c)
                    if variant == "two_gemms":  # a second gemm a step: c += A_k (B_k / 2) twice
                        for i, j in T.Parallel(bk, bn):
                            b2[i, j] = b[i, j] * 0.5
                        T.gemm(a, b2, c)
                        T.gemm(a, b2, c)
                if variant == "relu":  # the tile is read by a map before its copy-out
                    for i, j in T.Parallel(bm, bn):
                        c[i, j] = T.max(c[i, j], 0.0)
                T.copy(c, C[by * bm, bx * bn])
        return main
    return kern()


@pytest.mark.parametrize("variant,in_place", [("plain", True), ("two_gemms", True), ("relu", False), ("cast", False),
                                              ("shared_window", False)])
def test_where_it_applies_and_where_not(variant, in_place):
    M, N, K = 45, 50, 37
    k = _acc_kernel(M, N, K, variant)
    assert (IN_PLACE in k.get_source()) == in_place, variant
    rng = np.random.default_rng(11)
    a, b = _f32(rng, M, K), _f32(rng, K, N)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if variant == "relu":
        ref = np.maximum(ref, 0)
    if variant == "two_gemms":
        ref = 2 * ref
    out = k(a, b)
    if variant == "cast":
        assert_close(out.astype(np.float64), ref, atol=5e-3, rtol=2e-3)
    else:
        _check(out, ref, K)


def test_destination_read_keeps_the_tile():
    """C is also read (C = C + A @ B through a second tile): not in place, C keeps its input."""
    M, N, K, bm, bn, bk = 40, 48, 24, 16, 32, 16

    @tw.jit
    def kern():
        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
                a = T.alloc_shared((bm, bk), "float32")
                b = T.alloc_shared((bk, bn), "float32")
                old = T.alloc_fragment((bm, bn), "float32")
                c = T.alloc_fragment((bm, bn), "float32")
                T.copy(C[by * bm, bx * bn], old)
                T.clear(c)
                for k in T.Pipelined(T.ceildiv(K, bk)):
                    T.copy(A[by * bm, k * bk], a)
                    T.copy(B[k * bk, bx * bn], b)
                    T.gemm(a, b, c)
                for i, j in T.Parallel(bm, bn):
                    old[i, j] = old[i, j] + c[i, j]
                T.copy(old, C[by * bm, bx * bn])
        return main
    k = kern()
    assert IN_PLACE not in k.get_source()
    rng = np.random.default_rng(5)
    a, b, c0 = _f32(rng, M, K), _f32(rng, K, N), _f32(rng, M, N)
    c = c0.copy()
    k(a, b, c)
    _check(c, c0.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64), K)


@pytest.mark.parametrize("off", [0, 3, -3])
def test_window_start_maybe_negative_falls_back_at_run_time(off):
    """The copy-out's row start by * bm + off is not provably >= 0: the window is used in place
    when it is, the tile (and its masked copy-out) otherwise; rows no window covers keep C's value."""
    M, N, K, bm, bn, bk = 50, 40, 20, 16, 32, 16

    @tw.jit
    def kern():
        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32"),
                 o: T.int32):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
                a = T.alloc_shared((bm, bk), "float32")
                b = T.alloc_shared((bk, bn), "float32")
                c = T.alloc_fragment((bm, bn), "float32")
                T.clear(c)
                for k in T.Pipelined(T.ceildiv(K, bk)):
                    T.copy(A[by * bm, k * bk], a)
                    T.copy(B[k * bk, bx * bn], b)
                    T.gemm(a, b, c)
                T.copy(c, C[by * bm + o, bx * bn])
        return main
    k = kern()
    src = k.get_source()
    assert IN_PLACE in src and "if (c_p == c)" in src  # the run-time fallback is there
    rng = np.random.default_rng(9)
    a, b = _f32(rng, M, K), _f32(rng, K, N)
    prod = a.astype(np.float64) @ b.astype(np.float64)
    nb = -(-M // bm)
    padded = np.zeros((nb * bm, N))
    padded[:M] = prod
    ref = np.full((M, N), 7.0)
    for r in range(M):
        if 0 <= r - off < nb * bm:
            ref[r] = padded[r - off]
    c = np.full((M, N), 7.0, dtype=np.float32)
    k(a, b, c, off)
    _check(c, ref, K)


def test_empty_k_loop_writes_zeros():
    """A K loop of no iterations (n_k = 0 at run time): the window gets the clear's zeros."""
    M, N, K, bm, bn, bk = 20, 24, 16, 16, 16, 16

    @tw.jit(out_idx=[2])
    def kern():
        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32"),
                 n_k: T.int32):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
                a = T.alloc_shared((bm, bk), "float32")
                b = T.alloc_shared((bk, bn), "float32")
                c = T.alloc_fragment((bm, bn), "float32")
                T.clear(c)
                for k in T.serial(n_k):
                    T.copy(A[by * bm, k * bk], a)
                    T.copy(B[k * bk, bx * bn], b)
                    T.gemm(a, b, c)
                T.copy(c, C[by * bm, bx * bn])
        return main
    k = kern()
    assert IN_PLACE in k.get_source()
    rng = np.random.default_rng(2)
    a, b = _f32(rng, M, K), _f32(rng, K, N)
    np.testing.assert_array_equal(k(a, b, 0), np.zeros((M, N), np.float32))
    _check(k(a, b, 1), a.astype(np.float64) @ b.astype(np.float64), K)
