"""N-D GM windows (issue 13): a copy between a window of a tensor of any rank and a 2-D tile drops
the window's unit dims (Q[b, s0:s0 + M, h, :] -> (M, D)); a window with more non-unit dims than the
tile fills the tile's rows with its leading dims flattened row-major. Each kernel runs on cpu and on
ascend910b (simulator, checker on: zero reports) against numpy, with tails in every dim.
"""
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError
from tilewright.testing import TOLERANCES, randn

from ascend_util import TARGET, assert_close, run_checked
from tw_test_util import marked_line

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

DTYPES = ["float32", "float16", "bfloat16", "int8"]
TARGETS = ["cpu", TARGET]


def data(shape, dtype, seed):
    if dtype == "int8":
        return np.random.default_rng(seed).integers(-128, 128, size=shape).astype(np.int8)
    return randn(shape, dtype, seed=seed)


def run(kernel, target, *inputs):
    return kernel(*inputs) if target == "cpu" else run_checked(kernel, *inputs)


@tw.jit(out_idx=[1])
def bshd_copy(B, S, H, D, M, dtype, layout):
    """Y = X block by block through an (M, D) tile: X[b, s, h, :] windows (BSHD) or X[b, h, s, :] (BHSD)."""
    shape = (B, S, H, D) if layout == "bshd" else (B, H, S, D)

    @T.prim_func
    def main(X: T.Tensor(shape, dtype), Y: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(S, M), H, B) as (bs, h, b):
            t = T.alloc_shared((M, D), dtype)
            if layout == "bshd":
                T.copy(X[b, bs * M:(bs + 1) * M, h, :], t)
                T.copy(t, Y[b, bs * M:(bs + 1) * M, h, :])
            else:
                T.copy(X[b, h, bs * M:(bs + 1) * M, :], t)
                T.copy(t, Y[b, h, bs * M:(bs + 1) * M, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_bshd_bhsd_tile_load_and_store(layout, dtype, target):
    # S = 37: a partial block of 5 rows at the end; 48 int8 elements are 48 B (UB rows padded to 64 B)
    B, S, H, D, M = 2, 37, 3, 48, 16
    shape = (B, S, H, D) if layout == "bshd" else (B, H, S, D)
    x = data(shape, dtype, 1)
    y = run(bshd_copy(B, S, H, D, M, dtype, layout, target=target), target, x)
    np.testing.assert_array_equal(np.asarray(y), x)


@tw.jit(out_idx=[1])
def cache_block_copy(NB, BS, KVH, D, dtype):
    """Y[h, page] = cache[page, :, h, :] (vLLM layout [num_blocks, block_size, kv_heads, head_dim])."""

    @T.prim_func
    def main(Kc: T.Tensor((NB, BS, KVH, D), dtype), Y: T.Tensor((KVH, NB, BS, D), dtype)):
        with T.Kernel(KVH, NB) as (h, page):
            k = T.alloc_shared((BS, D), dtype)
            T.copy(Kc[page, :, h, :], k)
            T.copy(k, Y[h, page, :, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_vllm_cache_block_load(dtype, target):
    NB, BS, KVH, D = 5, 16, 3, 64
    kc = data((NB, BS, KVH, D), dtype, 2)
    y = run(cache_block_copy(NB, BS, KVH, D, dtype, target=target), target, kc)
    np.testing.assert_array_equal(np.asarray(y), kc.transpose(2, 0, 1, 3))


@tw.jit(out_idx=[1])
def merged_rows_copy(A, S, D, BA, BSZ, dtype):
    """(BA, BSZ, D) windows of an (A, S, D) tensor through a (BA * BSZ, D) tile, doubled on the way."""

    @T.prim_func
    def main(X: T.Tensor((A, S, D), dtype), Y: T.Tensor((A, S, D), dtype)):
        with T.Kernel(T.ceildiv(S, BSZ), T.ceildiv(A, BA)) as (bs, ba):
            t = T.alloc_fragment((BA * BSZ, D), dtype)
            T.copy(X[ba * BA:(ba + 1) * BA, bs * BSZ:(bs + 1) * BSZ, :], t)
            for i, j in T.Parallel(BA * BSZ, D):
                t[i, j] = t[i, j] + t[i, j]
            T.copy(t, Y[ba * BA:(ba + 1) * BA, bs * BSZ:(bs + 1) * BSZ, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("A,S,BA,BSZ", [
    (4, 8, 2, 8),    # whole S per block: the two dims merge into one run of 16 rows
    (5, 8, 2, 8),    # merged, with a partial block in A (the last block has one of two)
    (5, 19, 2, 8),   # not contiguous: one copy per outer index, tails in A and in S
    (3, 5, 3, 1),    # one row per outer index
])
def test_window_with_more_dims_than_the_tile(A, S, BA, BSZ, dtype, target):
    D = 32
    x = data((A, S, D), dtype, 3)
    y = run(merged_rows_copy(A, S, D, BA, BSZ, dtype, target=target), target, x)
    np.testing.assert_array_equal(np.asarray(y), x + x)


@tw.jit(out_idx=[1])
def unit_dims_copy(case, S, D, M, dtype):
    """Y = X through an (M, D) tile; X has unit dims at the front, middle or end (or everywhere)."""
    shape = UNIT_SHAPES[case](S, D)

    @T.prim_func
    def main(X: T.Tensor(shape, dtype), Y: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(S, M)) as bx:
            t = T.alloc_shared((M, D), dtype)
            if case == "front":
                T.copy(X[0, 0, bx * M:(bx + 1) * M, :], t)
                T.copy(t, Y[0, 0, bx * M:(bx + 1) * M, :])
            elif case == "middle":
                T.copy(X[bx * M:(bx + 1) * M, 0, :], t)
                T.copy(t, Y[bx * M:(bx + 1) * M, 0, :])
            elif case == "end":
                T.copy(X[bx * M:(bx + 1) * M, :, 0], t)
                T.copy(t, Y[bx * M:(bx + 1) * M, :, 0])
            else:
                T.copy(X[0, bx * M:(bx + 1) * M, 0, :, 0], t)
                T.copy(t, Y[0, bx * M:(bx + 1) * M, 0, :, 0])

    return main


UNIT_SHAPES = {
    "front": lambda S, D: (1, 1, S, D),
    "middle": lambda S, D: (S, 1, D),
    "end": lambda S, D: (S, D, 1),
    "all": lambda S, D: (1, S, 1, D, 1),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("case", sorted(UNIT_SHAPES))
def test_unit_dims_anywhere(case, dtype, target):
    S, D = 21, 40  # a tail block of 5 rows
    x = data(UNIT_SHAPES[case](S, D), dtype, 4)
    y = run(unit_dims_copy(case, S, D, 8, dtype, target=target), target, x)
    np.testing.assert_array_equal(np.asarray(y), x)


@tw.jit(out_idx=[2])
def rms_norm_3d(B, S, H, M, dtype, eps=1e-6):
    """RMSNorm of every (b, s) row of a (B, S, H) tensor: blocks of M rows along dim 1."""

    @T.prim_func
    def main(X: T.Tensor((B, S, H), dtype), W: T.Tensor((H,), dtype), Y: T.Tensor((B, S, H), dtype)):
        with T.Kernel(T.ceildiv(S, M), B) as (bs, b):
            x = T.alloc_fragment((M, H), "float32")
            sq = T.alloc_fragment((M, H), "float32")
            w = T.alloc_fragment((H,), "float32")
            ss = T.alloc_fragment((M,), "float32")
            T.copy(X[b, bs * M:(bs + 1) * M, :], x)
            T.copy(W, w)
            for i, j in T.Parallel(M, H):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(M):
                ss[i] = T.rsqrt(ss[i] / H + eps)
            for i, j in T.Parallel(M, H):
                x[i, j] = x[i, j] * ss[i] * w[j]
            T.copy(x, Y[b, bs * M:(bs + 1) * M, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rms_norm_over_dim_1_of_a_3d_tensor(dtype, target):
    B, S, H, M = 3, 13, 96, 8
    x = randn((B, S, H), dtype, seed=5)
    w = randn((H,), dtype, seed=6)
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64 * x64).mean(axis=2, keepdims=True) + 1e-6) * w.astype(np.float64)
    y = run(rms_norm_3d(B, S, H, M, dtype, target=target), target, x, w)
    assert_close(np.asarray(y).astype(np.float64), ref, TOLERANCES[dtype], f"rms_norm (3, 13, 96) {dtype} {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_window_shape_mismatch_is_a_located_error(target):
    @tw.jit(out_idx=[1])
    def bad(dtype="float32"):
        @T.prim_func
        def main(X: T.Tensor((2, 8, 64), dtype), Y: T.Tensor((8, 64), dtype)):
            with T.Kernel(1) as bx:
                t = T.alloc_shared((8, 64), dtype)
                T.copy(X[0:2, 0:8, :], t)  # nd-mismatch
                T.copy(t, Y[0:8, :])

        return main

    line, _ = marked_line(__file__, "nd-mismatch")
    with pytest.raises(TilewrightError) as e:
        bad(target=target)
    msg = str(e.value)
    assert f":{line}" in msg, msg
    assert "2x8x64" in msg and "is 8x64" in msg, msg


def expert_bshd_copy(B, S, H, D, M):
    """Expert mode: Y[b, s, h, :] = 2 X[b, s, h, :] through a UB tile, one (M, D) window of the
    BSHD tensor per (b, h, row block)."""
    @T.prim_func
    def main(X: T.Tensor((B, S, H, D), "float32"), Y: T.Tensor((B, S, H, D), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((M, D), "float32")
            with T.Scope("V"):
                T.set_flag("MTE3", "V", 0)
                for b in T.serial(B):
                    for h in T.serial(H):
                        for t in T.serial(T.ceildiv(S, M)):
                            T.wait_flag("MTE3", "V", 0)
                            T.set_flag("V", "MTE2", 0)
                            T.wait_flag("V", "MTE2", 0)
                            T.copy(X[b, t * M:(t + 1) * M, h, :], x)
                            T.set_flag("MTE2", "V", 0)
                            T.wait_flag("MTE2", "V", 0)
                            T.add(x, x, x)
                            T.set_flag("V", "MTE3", 0)
                            T.wait_flag("V", "MTE3", 0)
                            T.copy(x, Y[b, t * M:(t + 1) * M, h, :])
                            T.set_flag("MTE3", "V", 0)
                T.wait_flag("MTE3", "V", 0)
    return tw.compile(main, target=TARGET, out_idx=[-1])


def test_expert_mode_bshd_windows():
    B, S, H, D, M = 2, 21, 3, 16, 8  # a 5-row tail block
    x = randn((B, S, H, D), "float32", seed=9)
    y = run_checked(expert_bshd_copy(B, S, H, D, M), x)
    np.testing.assert_array_equal(np.asarray(y), x + x)


def test_cube_side_window_of_several_calls_is_a_located_error():
    # a (2, 16, 32) window of a (4, 24, 32) tensor into a gemm operand (L1 on Ascend): its two row
    # blocks are not one run of rows; cpu copies it (one copy per outer index)
    @tw.jit(out_idx=[2])
    def gemm_rows(dtype="float16"):
        @T.prim_func
        def main(A: T.Tensor((4, 24, 32), dtype), B: T.Tensor((32, 16), dtype), C: T.Tensor((32, 16), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((32, 32), dtype)
                b = T.alloc_shared((32, 16), dtype)
                c = T.alloc_fragment((32, 16), "float32")
                T.copy(A[0:2, 0:16, :], a)  # cube-window
                T.copy(B, b)
                T.gemm(a, b, c, clear_accum=True)
                T.copy(c, C)

        return main

    a = randn((4, 24, 32), "float16", seed=10)
    b = randn((32, 16), "float16", seed=11)
    ref = a[0:2, 0:16].reshape(32, 32).astype(np.float64) @ b.astype(np.float64)
    assert_close(np.asarray(gemm_rows(target="cpu")(a, b)), ref, (1e-2, 1e-2), "cpu gemm of a flattened window")
    line, _ = marked_line(__file__, "cube-window")
    with pytest.raises(TilewrightError) as e:
        gemm_rows(target=TARGET)
    msg = str(e.value)
    assert f":{line}" in msg and "one 2-D window per call" in msg, msg


@tw.jit(out_idx=[1])
def shifted_unit_dim_copy(M, H, N, h, shift, dtype):
    """Y[i, :] = X[i + shift, h, :] + 1 through a (1, N) tile: the unit dim's index runs past M in the
    last `shift` programs (those windows are empty: the tile keeps the fill of a tail, 0)."""

    @T.prim_func
    def main(X: T.Tensor((M, H, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M) as i:
            t = T.alloc_fragment((1, N), "float32")
            T.copy(X[i + shift, h, :], t)
            for r, c in T.Parallel(1, N):
                t[r, c] = t[r, c] + 1
            T.copy(t, Y[i, :])

    return main


@tw.jit(out_idx=[])
def shifted_unit_dim_store(M, H, N, h, shift, dtype):
    """Y[i + shift, h, :] = X[i, :]: the stores of the last `shift` programs fall past M (dropped)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, H, N), dtype)):
        with T.Kernel(M) as i:
            t = T.alloc_shared((1, N), dtype)
            T.copy(X[i, :], t)
            T.copy(t, Y[i + shift, h, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_unit_dim_index_past_the_end_is_an_empty_window(dtype, target):
    # fuzz seed 132081: on ascend910b the dropped unit dim's index was not clipped (a read past the
    # tensor, reported by the checker); now the window is empty there, as on cpu
    M, H, N, h, shift = 7, 3, 40, 2, 3
    x = data((M, H, N), dtype, 5)
    k = shifted_unit_dim_copy(M, H, N, h, shift, dtype, target=target)
    y = run(k, target, x)
    ref = np.ones((M, N), np.float64)
    ref[:M - shift] += x[shift:, h, :].astype(np.float64)
    assert_close(np.asarray(y).astype(np.float64), ref, TOLERANCES[dtype], f"unit dim past the end {dtype} {target}")
    src = data((M, N), dtype, 6)
    out = np.full((M, H, N), 7, dtype=x.dtype)
    ks = shifted_unit_dim_store(M, H, N, h, shift, dtype, target=target)
    run(ks, target, src, out)
    want = np.full((M, H, N), 7, dtype=x.dtype)
    want[shift:, h, :] = src[:M - shift]
    np.testing.assert_array_equal(out, want)
