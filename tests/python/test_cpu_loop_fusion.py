"""Tiles local to one iteration of a serial loop (docs/performance.md, "Issue 16, CPU reductions
and tiny programs"): when nothing outside the loop's body references a tile and the body's
first reference to it overwrites all of it, the CPU code generator fuses it as it does at a
kernel's top level -- the copy into it becomes a read-in-place view, a map and the row
reduction after it are one pass with the tile not written, a map and its copy-out are one pass.
A program that walks row blocks in a loop (a whole-tensor norm) then reads its input once.
Results against float64 numpy on odd shapes (tail blocks, rows shorter than a chunk, one
element), and tiles whose values do cross iterations stay unfused and correct."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T


@tw.jit(out_idx=[-1])
def frobenius(M, N, block_M=8):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            acc = T.alloc_fragment((block_M,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            T.fill(acc, 0.0)
            for k in T.serial(T.ceildiv(M, block_M)):
                T.copy(X[k * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, s, dim=1)
                for i in T.Parallel(block_M):
                    acc[i] = acc[i] + s[i]
            T.reduce_sum(acc, tot, dim=0)
            tot[0] = T.sqrt(tot[0])
            T.copy(tot, Y)
    return main


@pytest.mark.parametrize("M,N", [(37, 301), (8, 64), (1, 1), (5, 3), (64, 4097)])
def test_block_loop_norm_matches_float64(M, N):
    x = np.random.default_rng(M * N).standard_normal((M, N)).astype(np.float32)
    got = frobenius(M, N)(x)
    np.testing.assert_allclose(got, [np.linalg.norm(x.astype(np.float64))], rtol=2e-6)


def test_block_loop_norm_reads_its_input_once():
    src = frobenius(37, 301).get_source("c++")
    body = src[src.index("for (int64_t k = 0;"):]
    assert "elided: x is only read (loads, reductions), from X in place" in body
    assert "map into x fused with reduce_sum x -> s (x itself is not written: nothing reads it later)" in body


@tw.jit(out_idx=[-1])
def block_loop_map(M, N, block_M=8):
    """One program maps every row block: copy in, map, copy out, in a loop."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            for k in T.serial(T.ceildiv(M, block_M)):
                T.copy(X[k * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.max(x[i, j], 0.0) * 2.0
                T.copy(x, Y[k * block_M, 0])
    return main


@pytest.mark.parametrize("M,N", [(37, 301), (3, 64), (16, 1000)])
def test_block_loop_map_copy_out(M, N):
    x = np.random.default_rng(N).standard_normal((M, N)).astype(np.float32)
    k = block_loop_map(M, N)
    np.testing.assert_array_equal(k(x), np.maximum(x, 0) * np.float32(2))
    assert "map into x fused with copy x -> Y" in k.get_source("c++")


def test_tile_read_by_the_next_iteration_is_not_fused():
    """x is read at the top of each iteration (its previous iteration's squares) before the copy
    overwrites it: not iteration-local, so the map must still write it."""
    M, N, bm = 37, 301, 8

    @T.prim_func
    def carry(X: T.Tensor((M, N), "float32"), Y: T.Tensor((bm,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            s = T.alloc_fragment((bm,), "float32")
            acc = T.alloc_fragment((bm,), "float32")
            T.fill(x, 1.0)
            T.fill(acc, 0.0)
            for k in T.serial(T.ceildiv(M, bm)):
                for i in T.Parallel(bm):
                    acc[i] = acc[i] + x[i, 7]
                T.copy(X[k * bm, 0], x)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, s, dim=1)
                for i in T.Parallel(bm):
                    acc[i] = acc[i] + s[i]
            T.copy(acc, Y)
    k = tw.compile(carry, out_idx=[-1])
    x = np.random.default_rng(5).standard_normal((M, N)).astype(np.float32)
    blocks = np.concatenate([x, np.zeros((40 - M, N), np.float32)]).astype(np.float64).reshape(5, bm, N) ** 2
    want = 1.0 + blocks[:4, :, 7].sum(0) + blocks.sum((0, 2))
    np.testing.assert_allclose(k(x), want, rtol=1e-5)
    assert "itself is not written" not in k.get_source("c++")


def test_tile_read_after_the_loop_is_not_fused():
    M, N, bm = 20, 100, 8

    @T.prim_func
    def after(X: T.Tensor((M, N), "float32"), Y: T.Tensor((bm,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            s = T.alloc_fragment((bm,), "float32")
            for k in T.serial(T.ceildiv(M, bm)):
                T.copy(X[k * bm, 0], x)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] + 1.0
                T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(bm):
                s[i] = s[i] + x[i, 0]
            T.copy(s, Y)
    k = tw.compile(after, out_idx=[-1])
    x = np.random.default_rng(6).standard_normal((M, N)).astype(np.float32)
    last = np.concatenate([x[16:], np.zeros((4, N), np.float32)]).astype(np.float64) + 1.0  # rows past M read 0
    np.testing.assert_allclose(k(x), last.sum(1) + last[:, 0], rtol=1e-5, atol=1e-5)
    assert "itself is not written" not in k.get_source("c++")
