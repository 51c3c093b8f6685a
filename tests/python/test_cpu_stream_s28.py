"""Session 28 (h-softmax17): streaming stores for the copy-out that converts a float32 tile into a
bfloat16 / float16 tensor of 8 MiB or more (codegen emit_copy, simd.h stream_values). The stores
change, not the values: the rows are bitwise the conversion numpy (ml_dtypes) makes of the same
float32 values, and a large output's rows equal those of a small output below the threshold.
Correctness only: no timing. One shape per property; run natively and with TW_CPU_ARCH=x86-64-v3."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, np_dtype, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples")]

import softmax  # noqa: E402

STREAM_BYTES = 8 << 20  # codegen's threshold: outputs of 8 MiB and more are streamed


@tw.jit
def convert_out(N, W, col, out_dtype, block_M=8):
    """X (M, N) float32 -> Y (M, W) out_dtype at column col, through a float32 tile scaled by 3."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, W), out_dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * 3.0
            T.copy(x, Y[bx * block_M, col])

    return main


def _run_convert(M, N, W, col, dt, seed=0):
    x = randn((M, N), seed=seed)
    y = np.full((M, W), 5.0, dtype=np.float32).astype(np_dtype(dt))
    k = convert_out(N, W, col, dt)
    k(x, y)
    ref = np.full((M, W), 5.0, dtype=np.float32)
    ref[:, col:col + N] = x * np.float32(3.0)
    return k, y, ref.astype(np_dtype(dt))


def test_converting_copy_out_streams_large_outputs():
    """The generated copy-out streams when the output tensor is 8 MiB or more (decided at run time)."""
    src = convert_out(300, 300, 0, "bfloat16").get_kernel_source()
    assert "tw_cpu::simd::stream_values(" in src and "tw_cpu::simd::stream_fence()" in src


@pytest.mark.parametrize("dt, M, N, W, col", [
    ("bfloat16", 1027, 4097, 4101, 1),  # rows 2 B into a line, a row stride no multiple of 64 B, a partial block
    ("float16", 4099, 1025, 1025, 0),   # rows of 2050 B: every row starts elsewhere in its line
    ("bfloat16", 246727, 17, 17, 0),    # 17-wide rows (shorter than one vector), 8 MiB in all
])
def test_converting_copy_out_bits(dt, M, N, W, col):
    """Streamed rows hold numpy's conversion of the same float32 values; the columns the copy does
    not write keep their values."""
    assert M * W * 2 >= STREAM_BYTES
    _, y, ref = _run_convert(M, N, W, col, dt)
    assert np.array_equal(y.view(np.uint16), ref.view(np.uint16))


def test_converting_copy_out_rows_of_a_large_tensor_match_a_small_one():
    """3 rows into a large tensor (streamed) equal the same 3 rows written into a small one."""
    N = 4097
    x = randn((3, N), seed=5)
    big = np.zeros((1025, N), dtype=np_dtype("bfloat16"))
    assert big.nbytes >= STREAM_BYTES
    convert_out(N, N, 0, "bfloat16")(x, big[:3])  # the view is a tensor of 3 rows: below the threshold
    small = big[:3].copy()

    @tw.jit
    def rows3():
        @T.prim_func
        def main(X: T.Tensor((3, N), "float32"), Y: T.Tensor((1025, N), "bfloat16")):
            with T.Kernel(1) as bx:
                t = T.alloc_fragment((3, N), "float32")
                T.copy(X[0, 0], t)
                for i, j in T.Parallel(3, N):
                    t[i, j] = t[i, j] * 3.0
                T.copy(t, Y[bx * 3 + 1, 0])
        return main

    big2 = np.zeros((1025, N), dtype=np_dtype("bfloat16"))
    rows3()(x, big2)
    assert np.array_equal(big2[1:4].view(np.uint16), small.view(np.uint16))
    assert not big2[0].view(np.uint16).any() and not big2[4:].view(np.uint16).any()


def test_softmax_bf16_large_output():
    """bfloat16 softmax, 1025 x 4097 (8.4 MB out: streamed) against float64, and its first and
    last rows bitwise those of the same kernel on those rows alone (2 rows: not streamed)."""
    M, N = 1025, 4097
    x = randn((M, N), "bfloat16", scale=3.0, seed=2)
    k = softmax.softmax(N, dtype="bfloat16")
    y = k(x)
    assert y.nbytes >= STREAM_BYTES
    assert_close(y, softmax.reference(x), atol=2e-3, rtol=1.6e-2)
    for rows in (slice(0, 2), slice(M - 2, M)):
        assert np.array_equal(k(np.ascontiguousarray(x[rows])).view(np.uint16), y[rows].view(np.uint16))


def test_converting_copy_out_empty():
    """No rows: nothing written, no streaming decision to get wrong."""
    x = np.zeros((0, 33), dtype=np.float32)
    y = np.zeros((0, 33), dtype=np_dtype("bfloat16"))
    convert_out(33, 33, 0, "bfloat16")(x, y)
    assert y.shape == (0, 33)
