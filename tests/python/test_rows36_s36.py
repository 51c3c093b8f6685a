"""Session 36 (h-rows36): streaming stores start at a cache line of the output (tw_cpu/simd.h
kStreamBytes = 64), not at a vector boundary. With AVX-512 a vector is a line (nothing changes); with
AVX2 (32-byte vectors) a row of a numpy array (16 B into its page) began its streamed chunks halfway
into a line, so every chunk began and ended with half a line. Only the stores move: each row is now an
ordinary-store head of up to 15 floats, full chunks from a line boundary, and a tail. Checked in a
child process compiled for x86-64-v3 (AVX2 + FMA) with outputs of 8 MiB and more (the streaming path)
whose rows start at every 16-byte offset in a line: softmax (the row pipeline's rotated copy-out from
registers), layer_norm (its copy-out in row pairs through the chunk buffer) and a map fused with a
copy-out into column 1 of a wider tensor (emit_map_copy_out), each against float64 and bit for bit
against the same kernel's rows below the threshold (ordinary stores). Correctness only: no timing."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from test_cpu_rows import KERNELS as ROWS, _check, _inputs, _at_offset
from tw_test_util import avx2_child_npz

M, N = 521, 4099  # 8.5 MB of float32 (streamed); rows of 16396 B: row r starts 12 r bytes further into its line
SMALL = 16  # the first rows alone: 262 KB, ordinary stores
Y_OFFSETS = (16, 48)  # numpy's page offset; and a vector boundary (32 B) that is no line boundary
WIDE, COL = N + 4, 1  # the map + copy-out writes columns 1 .. N of a (M, N + 4) tensor


@tw.jit
def scale_into(N, W, col, block_M=8):
    """Y[:, col:col + N] = 3 X, through a float32 tile (a map fused with its copy-out, no row pass)."""
    Mv = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((Mv, N), "float32"), Y: T.Tensor((Mv, W), "float32")):
        with T.Kernel(T.ceildiv(Mv, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * 3.0
            T.copy(x, Y[bx * block_M, col])

    return main


def child_main(path):
    out = {}
    for name in ("softmax", "layer_norm"):
        x, ws = _inputs(name, M, N, "float32", seed=36)
        k = tw.compile(ROWS[name][0].__wrapped__(N))  # no out_idx: writes into the given output
        out[name + "_src"] = np.array(k.get_source("c++"))
        for off in Y_OFFSETS:
            y = _at_offset((M, N), np.float32, off)
            y[...] = np.nan
            k(x, *ws, y)
            out[f"{name}_{off}"] = y.copy()
        small = np.full((SMALL, N), np.nan, np.float32)
        k(np.ascontiguousarray(x[:SMALL]), *ws, small)
        out[name + "_small"] = small
    x, _ = _inputs("softmax", M, N, "float32", seed=37)
    k = scale_into(N, WIDE, COL)
    out["scale_src"] = np.array(k.get_source("c++"))
    for off in Y_OFFSETS:
        y = _at_offset((M, WIDE), np.float32, off)
        y[...] = np.nan
        k(x, y)
        out[f"scale_{off}"] = y.copy()
    np.savez(path, **out)


@pytest.fixture(scope="module")
def avx2(tmp_path_factory):
    path = avx2_child_npz(tmp_path_factory.mktemp("rows36"), "test_rows36_s36")
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def test_sizes_take_the_streaming_path():
    assert M * N * 4 >= 8 << 20 and SMALL * N * 4 < 8 << 20  # codegen's threshold: 8 MiB of output


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "scale"])
def test_streamed_rows_start_at_a_line(name, avx2):
    src = str(avx2[name + "_src"])
    assert "tw_cpu::simd::kStreamBytes - 1" in src and "kVecBytes - 1" not in src
    assert "tw_cpu::simd::stream_fence()" in src


@pytest.mark.parametrize("name", ["softmax", "layer_norm"])
def test_row_pipeline_streamed_on_avx2(name, avx2):
    x, ws = _inputs(name, M, N, "float32", seed=36)
    y = avx2[f"{name}_16"]
    _check(name, y, x, ws, "float32")  # every element written (NaN-filled before), float64 reference
    assert np.array_equal(y[:SMALL].view(np.uint32), avx2[name + "_small"].view(np.uint32))
    assert np.array_equal(y.view(np.uint32), avx2[f"{name}_48"].view(np.uint32))  # the other placement


def test_map_copy_out_streamed_into_a_column_on_avx2(avx2):
    x, _ = _inputs("softmax", M, N, "float32", seed=37)
    for off in Y_OFFSETS:
        y = avx2[f"scale_{off}"]
        assert np.array_equal(y[:, COL:COL + N], x * np.float32(3.0)), off
        rest = np.concatenate([y[:, :COL], y[:, COL + N:]], axis=1)
        assert np.isnan(rest).all(), off  # the columns not written keep their value
