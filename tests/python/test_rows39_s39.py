"""Session 39 (h-rows39): in a cpu row pipeline, a tile that a map + reduce pass writes only for the
run's later passes (softmax's exp(x - max) tile, read by the division's copy-out) lives in a ring of
its first K - q rows (codegen.cpp emit_row_pipeline). The same values in the same order, so every
block_M gives the same bits (rows are independent), the ring's (block_M > the ring's rows) and the
whole tile's (block_M <= it: no ring) alike, and the tail block (the statements as written, the
whole tile) too. Correctness only: no timing. Shapes: 4099 columns (64 full chunks, a 3-element
tail), 37 rows (a partial last block for every block_M > 1). And a serial loop's fused map + row
reduction reading its rows in place prefetches them ahead (kAheadBytes)."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples")]

import softmax  # noqa: E402
from tw_test_util import unchecked_code_only  # noqa: E402

N = 4099


@tw.jit(out_idx=[-1])
def exp_normalise(N, block_M=8):
    """exp(x) / sum(exp(x)) without the max: the kept tile is written by the run's first pass (q = 0,
    two passes, a ring of 2 rows)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


def _ref_softmax(x):
    """examples/softmax.py's float64 reference, quiet about the NaN / inf rows' invalid operations."""
    with np.errstate(invalid="ignore"):
        return softmax.reference(x)


@unchecked_code_only
def test_softmax_ring_code_and_bits():
    """block_M 8: the exp pass writes row i % 2 of x, the copy-out reads it there; block_M 1 (no
    ring), 3 and 8 give the same bits on 37 rows, NaN / inf / -inf rows included, and match
    float64."""
    x = randn((37, N), "float32", scale=3.0, seed=np.random.default_rng(39))
    x[1, 5] = np.nan
    x[2, N - 1] = np.inf
    x[3, :] = -np.inf
    src = softmax.softmax(N, block_M=8).get_source("c++")
    assert "x + (tw_p1_i % 2) * 4099 + tw_j0" in src  # the exp pass writes its ring row
    assert "(x + (tw_p2_i % 2) * 4099)[" in src  # the copy-out reads it
    outs = {bm: softmax.softmax(N, block_M=bm)(x) for bm in (1, 3, 8)}
    for bm in (3, 8):
        np.testing.assert_array_equal(outs[bm].view(np.uint32), outs[1].view(np.uint32), err_msg=f"block_M={bm}")
    ok = np.ones(37, bool)
    ok[[1, 2, 3]] = False
    assert_close(outs[8][ok], _ref_softmax(x)[ok], atol=1e-6, rtol=1e-5)
    assert np.isnan(outs[8][[1, 2, 3]]).all()  # NaN in, +inf in, a row of -inf: NaN rows


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_softmax_ring_half_inputs(dtype):
    """A widening view in, a converting copy-out: the ring holds the float32 exp values; block_M 8
    (ring) gives the bits of block_M 1 (none)."""
    x = randn((13, N), dtype, scale=3.0, seed=np.random.default_rng(7))
    a = softmax.softmax(N, block_M=8, dtype=dtype)(x)
    b = softmax.softmax(N, block_M=1, dtype=dtype)(x)
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    assert_close(a.astype(np.float64), _ref_softmax(x.astype(np.float32)), atol=2e-3, rtol=1e-2)


@unchecked_code_only
def test_ring_of_the_first_pass():
    """The kept tile written by pass 0 of two: block_M 4 (ring of 2) against block_M 1, and float64."""
    x = randn((37, N), "float32", seed=np.random.default_rng(3))
    k = exp_normalise(N, block_M=4)
    assert "x + (tw_p0_i % 2) * 4099 + tw_j0" in k.get_source("c++")
    a = k(x)
    b = exp_normalise(N, block_M=1)(x)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    e = np.exp(x.astype(np.float64))
    assert_close(a, e / e.sum(axis=1, keepdims=True), atol=1e-6, rtol=1e-5)


@unchecked_code_only
def test_serial_loop_rows_prefetched_ahead():
    """The op zoo's frobenius (one program walking the row blocks in a T.serial loop, its copies read
    in place with no next-block prefetch): its fused square + sum prefetches the stream
    tw_cpu::simd::kAheadBytes ahead (4 KiB on AMX cores, none elsewhere: `if constexpr`); the value
    matches float64 on 37 x 301 (a partial last block)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import op_zoo

    x = randn((37, 301), "float32", seed=np.random.default_rng(5))
    k = op_zoo.frobenius(37, 301)
    assert "tw_cpu::simd::kAheadBytes > 0" in k.get_source("c++")
    assert_close(k(x), np.array([np.linalg.norm(x.astype(np.float64))]), atol=1e-5, rtol=1e-5)
