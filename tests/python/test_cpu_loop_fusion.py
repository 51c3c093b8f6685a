"""Tiles local to one iteration of a serial loop (docs/performance.md, "Issue 16, CPU reductions
and tiny programs"): when nothing outside the loop's body references a tile and the body's
first reference to it overwrites all of it, the CPU code generator fuses it as it does at a
kernel's top level -- the copy into it becomes a read-in-place view, a map and the row
reduction after it are one pass with the tile not written, a map and its copy-out are one pass.
A program that walks row blocks in a loop (a whole-tensor norm) then reads its input once.
Results against float64 numpy on odd shapes (tail blocks, rows shorter than a chunk, one
element), and tiles whose values do cross iterations stay unfused and correct."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
from op_zoo import frobenius  # noqa: E402  (M, N, block_M): one program walks the row blocks
from tw_test_util import unchecked_code_only  # noqa: E402


@pytest.mark.parametrize("M,N", [(37, 301), (8, 64), (1, 1), (5, 3), (64, 4097)])
def test_block_loop_norm_matches_float64(M, N):
    x = np.random.default_rng(M * N).standard_normal((M, N)).astype(np.float32)
    got = frobenius(M, N)(x)
    np.testing.assert_allclose(got, [np.linalg.norm(x.astype(np.float64))], rtol=2e-6)


@unchecked_code_only
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
@unchecked_code_only
def test_block_loop_map_copy_out(M, N):
    x = np.random.default_rng(N).standard_normal((M, N)).astype(np.float32)
    k = block_loop_map(M, N)
    np.testing.assert_array_equal(k(x), np.maximum(x, 0) * np.float32(2))
    assert "map into x fused with copy x -> Y" in k.get_source("c++")


@tw.jit(out_idx=[-1])
def carried(M, N, read, bm=8):
    """Squares of row blocks summed in a loop, with x also read outside its copy-map-reduce run:
    at the top of each iteration (the previous iteration's squares; "before") or after the loop
    (the last block, plus one; "after"). Either way x is not iteration-local: no fusion."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((bm,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            s = T.alloc_fragment((bm,), "float32")
            acc = T.alloc_fragment((bm,), "float32")
            T.fill(x, 1.0)
            T.fill(acc, 0.0)
            for k in T.serial(T.ceildiv(M, bm)):
                if read == "before":
                    for i in T.Parallel(bm):
                        acc[i] = acc[i] + x[i, 7]
                T.copy(X[k * bm, 0], x)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, s, dim=1)
                for i in T.Parallel(bm):
                    acc[i] = acc[i] + s[i]
            if read == "after":
                for i in T.Parallel(bm):
                    acc[i] = acc[i] + x[i, 0]
            T.copy(acc, Y)
    return main


@pytest.mark.parametrize("read", ["before", "after"])
def test_tile_read_outside_its_iteration_is_not_fused(read):
    M, N, bm = 37, 301, 8
    k = carried(M, N, read)
    x = np.random.default_rng(5).standard_normal((M, N)).astype(np.float32)
    blocks = np.concatenate([x, np.zeros((40 - M, N), np.float32)]).astype(np.float64).reshape(5, bm, N) ** 2
    want = blocks.sum((0, 2)) + (1.0 + blocks[:4, :, 7].sum(0) if read == "before" else blocks[4, :, 0])
    np.testing.assert_allclose(k(x), want, rtol=1e-5)
    assert "itself is not written" not in k.get_source("c++")


@tw.jit(out_idx=[-1])
def log_softmax_two_tiles(N, block_M=8):
    """log-softmax written with a first map that stores two tiles (the op zoo's kernel writes
    one tile per map since the map + reduce fusion applies then)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            e = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - row_max[i]
                e[i, j] = T.exp(x[i, j])
            T.reduce_sum(e, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - T.log(row_sum[i])
            T.copy(x, Y[bx * block_M, 0])
    return main


@unchecked_code_only
def test_map_writing_two_tiles_reads_its_input_in_place():
    """A first map that writes `x - max` into x and its exp into e overwrites x, so the copy
    into x is a read-in-place view (the reduction and that map read X), and the map's second
    statement reads the element the first just stored in the tile."""
    k = log_softmax_two_tiles(301)
    src = k.get_source("c++")
    assert "elided: x is only read (loads, reductions), from X in place" in src
    x = (np.random.default_rng(5).standard_normal((37, 301)) * 3).astype(np.float32)
    s = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    np.testing.assert_allclose(k(x), s - np.log(np.exp(s).sum(axis=1, keepdims=True)), rtol=1e-6, atol=1e-6)
