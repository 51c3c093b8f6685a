"""The four row kernels of issue 16's bandwidth goal (examples/softmax.py, rms_norm.py,
layer_norm.py and the op zoo's log_softmax) on the cpu target against float64 numpy: odd shapes
(one element, rows of 4097 and of 5, row counts that are not a multiple of block_M), fp32 / fp16 /
bf16 where the kernel takes a dtype, and inputs / outputs that start 16 or 64 bytes into a page
(numpy's large arrays start 16 bytes in) with outputs large enough for the streaming-store path
(>= 8 MiB). Correctness only: no timing."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, np_dtype, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "bench")]

import layer_norm  # noqa: E402
import op_zoo  # noqa: E402
import rms_norm  # noqa: E402
import softmax  # noqa: E402
from tw_test_util import unchecked_code_only  # noqa: E402


def _log_softmax_ref(x):
    s = x.astype(np.float64) - x.astype(np.float64).max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


# name -> (builder (the @tw.jit function), number of weight vectors, float64 reference, dtypes)
KERNELS = {
    "softmax": (softmax.softmax, 0, softmax.reference, ("float32", "float16", "bfloat16")),
    "log_softmax": (op_zoo.log_softmax, 0, _log_softmax_ref, ("float32",)),
    "rms_norm": (rms_norm.rms_norm, 1, rms_norm.reference, ("float32", "float16", "bfloat16")),
    "layer_norm": (layer_norm.layer_norm, 2, layer_norm.reference, ("float32", "float16", "bfloat16")),
}
TOL = {"float32": (1e-5, 1e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}


def _inputs(name, M, N, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = randn((M, N), dtype, scale=3.0 if "softmax" in name else 1.0, seed=rng)
    return x, [randn((N,), dtype, seed=rng) for _ in range(KERNELS[name][1])]


def _check(name, y, x, ws, dtype):
    want = KERNELS[name][2](x, *ws)
    atol, rtol = TOL[dtype]
    assert_close(y.astype(np.float64), want, atol=atol, rtol=rtol, msg=f"{name} {x.shape} {dtype}")


SHAPES = [(1, 1), (3, 4097), (8193, 5), (37, 300)]  # 8193 and 37 rows: a partial last block of 8


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(KERNELS))
def test_row_kernel_fp32_odd_shapes(name, shape):
    M, N = shape
    x, ws = _inputs(name, M, N, "float32")
    y = KERNELS[name][0](N)(x, *ws)
    _check(name, y, x, ws, "float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["softmax", "rms_norm", "layer_norm"])
def test_row_kernel_half_precision(name, dtype):
    M, N = 37, 4097
    x, ws = _inputs(name, M, N, dtype)
    y = KERNELS[name][0](N, dtype=dtype)(x, *ws)
    assert y.dtype == np_dtype(dtype)
    _check(name, y, x, ws, dtype)


def _at_offset(shape, dtype, offset):
    """An array of `shape` whose data starts `offset` bytes past a 4 KiB page boundary."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 8192, np.uint8)
    start = (-raw.ctypes.data) % 4096 + offset
    a = raw[start:start + nbytes].view(dtype).reshape(shape)
    assert a.ctypes.data % 4096 == offset
    return a


@pytest.mark.parametrize("offsets", [(16, 16), (64, 64), (0, 16), (16, 64), (0, 0)], ids=lambda o: f"x+{o[0]}_y+{o[1]}")
@pytest.mark.parametrize("name", list(KERNELS))
def test_row_kernel_page_offsets_streaming_path(name, offsets):
    """Input and preallocated output at numpy's page offset (+16 B), a cache line in (+64 B) and
    page-aligned; 521 x 4099 fp32 is 8.2 MiB, so the output takes the streaming-store path (its
    unaligned head and tail included), and 521 rows end in a partial block."""
    M, N = 521, 4099
    x0, ws = _inputs(name, M, N, "float32", seed=3)
    x = _at_offset((M, N), np.float32, offsets[0])
    x[...] = x0
    y = _at_offset((M, N), np.float32, offsets[1])
    y[...] = np.nan
    k = tw.compile(KERNELS[name][0].__wrapped__(N))  # no out_idx: writes into the given output
    k(x, *ws, y)
    _check(name, y, x0, ws, "float32")


@unchecked_code_only
def test_log_softmax_fuses_like_softmax():
    """The op zoo's log-softmax writes one tile per map: exp(x - max) is fused into the row sum
    (its tile never written), x is read from X in place, and the last map streams to Y through
    the row pipeline, as softmax does."""
    src = op_zoo.log_softmax(4096).get_source("c++")
    assert "elided: x is only read (loads, reductions), from X in place" in src
    assert "e itself is not written" in src
    assert "row pipeline: 3 row passes" in src
    # the pipeline's exp pass keeps its chunks in a local buffer (e is read by nothing later)
    assert "float* const tw_c = e +" not in src


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@unchecked_code_only
def test_next_block_prefetch_in_the_exp_pass(name):
    """The next block's prefetch of X (read in place) is issued once per chunk, by the row
    pipeline's exp pass (the arithmetic-bound one), not beside the copy-out's streaming stores:
    for log_softmax, whose exp pass writes another tile, it used to be the copy-out's."""
    src = KERNELS[name][0](4096).get_source("c++")
    pipe = src[src.index("row pipeline:"):src.index("// tail: the statements as written")]
    assert pipe.count("__builtin_prefetch(x_next") == 1
    pf = pipe.index("__builtin_prefetch(x_next")
    # (the exp of x - max: exp_nonpos_chunk, session 26)
    assert pipe.index("if (tw_p1_on)") < pf < pipe.index("tw_cpu::exp_nonpos_chunk(")


@unchecked_code_only
def test_log_softmax_log_once_per_row():
    """log(row_sum[i]) in the last map is computed once per row (a variable set where the row
    starts), not once per 64-element chunk: g++ moved it out of the vectorised column loop but
    not out of the chunk loop around it (0.4-0.5 cycles per element on the Sapphire Rapids core)."""
    src = op_zoo.log_softmax(4096).get_source("c++")
    pipe = src[src.index("row pipeline"):src.index("// tail: the statements as written")]
    assert "= tw_cpu::log(row_sum[i_1]);  // once per row" in pipe
    assert pipe.count("tw_cpu::log(") == 1
    tail = src[src.index("// tail: the statements as written"):]
    assert "tw_cpu::log(row_sum[i_1]);  // once per row" in tail  # the fused map + copy-out of the tail
    assert tail.count("tw_cpu::log(") == 2  # and the partial block's plain map (no chunk loop)


@tw.jit(out_idx=[-1])
def _row_parts_kernel(N, block_M=8):
    """Per-row math in a fused map + reduce (exp(-m[i])) and in the map + copy-out (sqrt(s[i]) and
    the division by it) of a row pipeline."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            e = T.alloc_fragment((block_M, N), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(block_M, N):
                e[i, j] = T.exp(x[i, j] - m[i]) * T.exp(-m[i])
            T.reduce_sum(e, s, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / T.sqrt(s[i] + 1.0)
            T.copy(x, Y[bx * block_M, 0])
    return main


@pytest.mark.parametrize("shape", [(1, 1), (3, 4097), (37, 300), (521, 4099)], ids=lambda s: f"{s[0]}x{s[1]}")
@unchecked_code_only
def test_row_parts_in_pipeline_and_fused_passes(shape):
    M, N = shape
    k = _row_parts_kernel(N)
    if N >= 64:
        src = k.get_source("c++")
        pipe = src[src.index("row pipeline"):src.index("// tail: the statements as written")]
        assert pipe.count("// once per row") == 2 and pipe.count("tw_cpu::sqrt(") == 1
        assert "tw_cpu::exp((-m[i]))" not in pipe.split("// once per row")[-1]
    x = randn((M, N), "float32", scale=2.0, seed=np.random.default_rng(M))
    x64 = x.astype(np.float64)
    m = x64.max(axis=1, keepdims=True)
    s = (np.exp(x64 - m) * np.exp(-m)).sum(axis=1, keepdims=True)
    assert_close(k(x).astype(np.float64), x64 / np.sqrt(s + 1.0), atol=1e-5, rtol=1e-5, msg=f"{shape}")


@pytest.mark.parametrize("shape", [(1, 1), (37, 300)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_row_parts_kernel_on_ascend(shape):
    # the same kernel, unchanged, in the 910B simulator (checker on) against the same reference
    # and the cpu result (wider rows: the two (8, N) float32 tiles overflow UB, a located error)
    from ascend_util import run_checked
    M, N = shape
    x = randn((M, N), "float32", scale=2.0, seed=np.random.default_rng(M))
    x64 = x.astype(np.float64)
    m = x64.max(axis=1, keepdims=True)
    s = (np.exp(x64 - m) * np.exp(-m)).sum(axis=1, keepdims=True)
    y = np.asarray(run_checked(_row_parts_kernel(N, target="ascend910b"), x), np.float64)
    assert_close(y, x64 / np.sqrt(s + 1.0), atol=1e-5, rtol=1e-5, msg=f"ascend910b {shape}")
    assert_close(y, _row_parts_kernel(N)(x).astype(np.float64), atol=1e-5, rtol=1e-5, msg=f"cpu vs ascend910b {shape}")


@pytest.mark.parametrize("offsets", [(16, 16), (16, 64)], ids=lambda o: f"x+{o[0]}_y+{o[1]}")
@pytest.mark.parametrize("name", list(KERNELS))
@unchecked_code_only
def test_row_pipeline_short_rows_streaming_path(name, offsets):
    """The row pipeline's copy-out takes its full chunks in rotated order (half a 4 KiB page
    on, kRotChunks; softmax and log_softmax, whose exp pass is arithmetic-bound), fewer when a row
    has few: 7001 x 301 fp32 is 8.4 MiB (streaming stores), so a row is an unaligned head, 4 full
    chunks (rotated by 2) and a tail; every element of the NaN-filled output must be written once
    with the row's value. Those two stream their full chunks from registers (stream_chunk64), the
    memory-bound norms through the buffer (stream_chunk)."""
    M, N = 7001, 301
    x0, ws = _inputs(name, M, N, "float32", seed=5)
    x = _at_offset((M, N), np.float32, offsets[0])
    x[...] = x0
    y = _at_offset((M, N), np.float32, offsets[1])
    y[...] = np.nan
    k = tw.compile(KERNELS[name][0].__wrapped__(N))
    rotated = "tw_rot" in k.get_source("c++")
    assert rotated == (name in ("softmax", "log_softmax"))
    assert ("tw_cpu::simd::stream_chunk64(" in k.get_source("c++")) == rotated
    k(x, *ws, y)
    _check(name, y, x0, ws, "float32")


@pytest.mark.parametrize("name,passes", [("rms_norm", 2), ("layer_norm", 3)])
@unchecked_code_only
def test_norms_run_as_row_pipeline(name, passes):
    """rms_norm's rsqrt and layer_norm's mean / rsqrt are per-row scalar maps between the row
    passes: they run on the row the pass before them finished, inside the row pipeline, so the
    reductions overlap the streaming stores and the next block's prefetches."""
    src = KERNELS[name][0](4096).get_source("c++")
    assert f"row pipeline: {passes} row passes" in src
    pipe = src[src.index("row pipeline"):src.index("// tail: the statements as written")]
    assert pipe.count("per-row map on the row pass") == passes - 1
    assert "tw_cpu::rsqrt(" in pipe


@tw.jit(out_idx=[-1])
def _row_map_reads_tile(N, block_M=8):
    """A per-row map that reads a 2-D tile (x[i, 0]): not a row scalar map, so no pipeline."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = ss[i] + x[i, 0]
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / ss[i]
            T.copy(x, Y[bx * block_M, 0])
    return main


@pytest.mark.parametrize("shape", [(3, 4097), (37, 300)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_row_map_reading_a_tile_is_left_out_of_the_pipeline(shape):
    M, N = shape
    k = _row_map_reads_tile(N)
    assert "row pipeline" not in k.get_source("c++")
    x = (np.random.default_rng(1).random((M, N)) + 0.5).astype(np.float32)
    x64 = x.astype(np.float64)
    ss = (x64 * x64).sum(axis=1, keepdims=True) + x64[:, :1]
    assert_close(k(x).astype(np.float64), x64 / ss, atol=1e-6, rtol=1e-5, msg=f"{shape}")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (13, 4097), (8201, 301)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", ["rms_norm", "layer_norm"])
@unchecked_code_only
def test_norm_copy_out_row_pairs(name, shape, dtype):
    """The norms' copy-out reads per-column operands (W, B), so it takes its rows in pairs, at
    every other step of the row pipeline (both rows chunk by chunk side by side; an odd block's
    last row alone; fp32: the half-precision outputs' copy-out converts, outside the pipeline): block_M
    3, 5 and 8 (odd ones end in a lone row) must give the same bits as block_M 2 (one pair per
    block) in the rows of full blocks that take the pipeline (300 or more; a block of one row, or
    the partial last block, runs the statements as written); 8201 x 301 fp32 is 9.4 MiB (streaming
    stores, an unaligned head and tail per row) and ends in partial blocks; a NaN row stays NaN
    and leaves the other rows alone."""
    M, N = shape
    x, ws = _inputs(name, M, N, dtype, seed=7)
    if M > 2:
        x[M // 2, N // 2] = np.nan
    if N >= 300 and dtype == "float32":  # (block_M 4 is compiled for this check only: it is never run)
        code = tw.compile(KERNELS[name][0].__wrapped__(N, block_M=4, dtype=dtype)).get_source("c++")
        assert "row pipeline" in code and "tw_out1" in code, "the copy-out takes rows in pairs"
    base = None
    for bm in (2, 3, 5, 8):
        y = np.full((M, N), np.nan, np_dtype(dtype))
        tw.compile(KERNELS[name][0].__wrapped__(N, block_M=bm, dtype=dtype))(x, *ws, y)
        if base is None:
            base = y
        elif N >= 300:  # the rows of full blocks on both sides (a partial block runs the statements)
            n = min(M // bm * bm, M // 2 * 2)
            u = np.uint16 if dtype != "float32" else np.uint32
            np.testing.assert_array_equal(y[:n].view(u), base[:n].view(u), err_msg=f"block_M {bm}")
    if M > 2:
        assert np.isnan(base[M // 2].astype(np.float32)).all()
        keep = np.arange(M) != M // 2
        _check(name, base[keep], x[keep], ws, dtype)
    else:
        _check(name, base, x, ws, dtype)


@unchecked_code_only
def test_row_pairs_only_with_per_column_operands():
    """softmax and log_softmax read no per-column operand (and rotate their copy-out): one row per step."""
    for k in (softmax.softmax(4096), op_zoo.log_softmax(4096)):
        src = k.get_source("c++")
        assert "row pipeline" in src and "tw_out1" not in src


@pytest.mark.parametrize("name", ["rms_norm", "layer_norm"])
def test_norms_empty_rows(name):
    """No rows (M = 0): nothing to do, an empty output."""
    x, ws = _inputs(name, 0, 300, "float32")
    y = KERNELS[name][0](300)(x, *ws)
    assert y.shape == (0, 300)
