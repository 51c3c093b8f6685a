"""The float32 temporaries of bfloat16/int8 tiles on Ascend (legalize_vector's row chunks,
multi_buffer's unstaged temporaries; docs/ascend.md "Vector dtypes in automatic kernels").

The fuzzer's vector-temporaries-overflow bug (seeds 26840, 28470): the automatic pipeline
computed bfloat16 and int8 tiles in whole-tile float32 temporaries, several per tile, and
T.Pipelined copied each of them per stage, so tiles cpu runs overflowed the UB. Each kernel here
failed with "UB overflow ... compiler temporaries" before; now it runs in the simulator with zero
checker reports, equal to a numpy reference and to target cpu (bit for bit where both round the
same float32 values; sums of bfloat16 values within the bfloat16 tolerance of a float64 sum).
The shapes include row counts that are not a multiple of the chunk (tails, a 1-row tail) and a
tile whose single whole-tile float32 temporary alone would not fit the UB."""
import re

import ml_dtypes
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import TARGET, assert_close, run_checked
from tilewright.testing import TOLERANCES

BF16 = ml_dtypes.bfloat16
CHUNK_BYTES = 4096  # legalize_vector's bound on one float32 temporary of a chunk


def temporaries(kernel):
    """{name: bytes} of the compiler temporaries in the UB (named '<tile>_f32_0', '<tile>_t_0', ...)."""
    src = kernel.get_source("ascend_program")
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"buffer (\w+_(?:f32|t|part|half)_\d+): AIV UB @\d+ \+(\d+) float32", src)}


def both(k, inputs, out_idx):
    """(ascend outputs, cpu outputs) of kernel k."""
    kernel = tw.compile(k, out_idx=out_idx, target=TARGET)
    return kernel, run_checked(kernel, *inputs), tw.compile(k, out_idx=out_idx)(*inputs)


def test_bf16_sum_of_squares_in_a_3_stage_pipeline():
    """Seed 26840's kernel: a 32x128 bfloat16 tile, min and sum of squares over dim 0 in 3-stage
    pipelines (208 KiB of float32 temporaries before)."""
    M, N = 67, 28

    @T.prim_func
    def k(A: T.Tensor((M, N), "float16"), B: T.Tensor((N,), "float32"), B2: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128)) as bx:
            x = T.alloc_fragment((32, 128), "bfloat16")
            r = T.alloc_fragment((128,), "bfloat16")
            r2 = T.alloc_fragment((128,), "bfloat16")
            T.fill(r, T.infinity("bfloat16"))
            for k in T.Pipelined(T.ceildiv(M, 32), num_stages=3):
                T.copy(A[k * 32, bx * 128], x)
                T.reduce_min(x, r, dim=0, clear=False)
            T.copy(r, B[bx * 128])
            T.fill(r2, 0)
            for k2 in T.Pipelined(T.ceildiv(M, 32), num_stages=3):
                T.copy(A[k2 * 32, bx * 128], x)
                for i, j in T.Parallel(32, 128):
                    x[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, r2, dim=0, clear=False)
            T.copy(r2, B2[bx * 128])

    rng = np.random.default_rng(3)
    a = (rng.standard_normal((M, N)) * 2).astype(np.float16)
    xb = a.astype(BF16).astype(np.float64)
    kernel, got, cpu = both(k, [a], [1, 2])
    np.testing.assert_array_equal(got[0], xb.min(axis=0).astype(np.float32))
    np.testing.assert_array_equal(cpu[0], got[0])
    sq = (xb * xb).astype(BF16).astype(np.float64)
    assert_close(got[1], sq.sum(axis=0), TOLERANCES["bfloat16"], "ascend sum of squares")
    assert_close(got[1], cpu[1], TOLERANCES["bfloat16"], "ascend vs cpu")
    assert temporaries(kernel) and max(temporaries(kernel).values()) <= CHUNK_BYTES


@pytest.mark.parametrize("dim", [0, 1])
def test_int8_sum_in_a_2_stage_pipeline(dim):
    """Seed 28470's kernel with 2 stages: a 128x64 int8 tile converted from bfloat16, summed and
    its squares summed (wrapped into int8) in pipelined loops (130x the tile before)."""
    M, N = 129, 68
    kept = M if dim == 1 else N

    @T.prim_func
    def k(A: T.Tensor((M, N), "bfloat16"), B: T.Tensor((kept,), "int8"), B2: T.Tensor((kept,), "int8")):
        with T.Kernel(T.ceildiv(kept, 128 if dim == 1 else 64)) as b:
            x = T.alloc_fragment((128, 64), "int8")
            r = T.alloc_fragment((128,) if dim == 1 else (64,), "int8")
            r2 = T.alloc_fragment((128,) if dim == 1 else (64,), "int8")
            T.fill(r, 0)
            T.fill(r2, 0)
            for k in T.Pipelined(T.ceildiv(N, 64) if dim == 1 else T.ceildiv(M, 128), num_stages=2):
                T.copy(A[b * 128 if dim == 1 else k * 128, k * 64 if dim == 1 else b * 64], x)
                T.reduce_sum(x, r, dim=dim, clear=False)
                for i, j in T.Parallel(128, 64):
                    x[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, r2, dim=dim, clear=False)
            T.copy(r, B[b * 128 if dim == 1 else b * 64])
            T.copy(r2, B2[b * 128 if dim == 1 else b * 64])

    rng = np.random.default_rng(5)
    a = rng.integers(-40, 41, (M, N)).astype(BF16)
    v = a.astype(np.float64).astype(np.int64)
    wrap = lambda s: ((s + 128) % 256 - 128).astype(np.int8)  # noqa: E731
    sq = wrap(v * v).astype(np.int64)
    ref = (wrap(v.sum(axis=dim)), wrap(sq.sum(axis=dim)))
    kernel, got, cpu = both(k, [a], [1, 2])
    for g, c, w in zip(got, cpu, ref):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(c, w)
    assert max(temporaries(kernel).values()) <= CHUNK_BYTES


# rows x cols of a bfloat16 tile: chunks of 4 rows (256 float32 columns = 1 KiB a row); 37 and
# 33 rows end with a tail (of 1 row for 33), 5 rows are one chunk and a 1-row tail, 4 rows one
# chunk (no chunking), 1 row of 2048 columns one row (no chunking); 224 rows: the whole-tile
# float32 temporary (224 KiB) alone exceeds the UB.
SHAPES = [(37, 256), (33, 256), (5, 256), (4, 256), (1, 2048), (224, 256)]


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_bf16_map_and_reductions_in_row_chunks(rows, cols):
    """A bfloat16 map, its row sums (rows wider than one repeat: halved) and column maxima, on
    tiles of several row counts; the map's results equal cpu's bit for bit."""
    M = rows

    @T.prim_func
    def k(A: T.Tensor((M, cols), "bfloat16"), Y: T.Tensor((M, cols), "bfloat16"), S: T.Tensor((M,), "float32"),
          C: T.Tensor((cols,), "bfloat16")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((rows, cols), "bfloat16")
            s = T.alloc_fragment((rows,), "bfloat16")
            c = T.alloc_fragment((cols,), "bfloat16")
            T.copy(A[0, 0], x)
            for i, j in T.Parallel(rows, cols):
                x[i, j] = T.max(x[i, j] * 1.5 - 0.75, x[i, j] * 0.5)
            T.reduce_sum(x, s, dim=1)
            T.reduce_max(x, c, dim=0)
            T.copy(x, Y[0, 0])
            T.copy(s, S[0])
            T.copy(c, C[0])

    rng = np.random.default_rng(rows * 1000 + cols)
    a = (rng.standard_normal((M, cols)) * 4).astype(BF16)
    f = a.astype(np.float32)
    y = np.maximum(f * np.float32(1.5) - np.float32(0.75), f * np.float32(0.5)).astype(BF16)
    kernel, got, cpu = both(k, [a], [1, 2, 3])
    np.testing.assert_array_equal(got[0].view(np.uint16), y.view(np.uint16))
    np.testing.assert_array_equal(cpu[0].view(np.uint16), y.view(np.uint16))
    assert_close(got[1], y.astype(np.float64).sum(axis=1), TOLERANCES["bfloat16"], "row sums")
    assert_close(got[1], cpu[1], TOLERANCES["bfloat16"], "row sums vs cpu")
    np.testing.assert_array_equal(got[2].view(np.uint16), y.max(axis=0).view(np.uint16))
    np.testing.assert_array_equal(cpu[2].view(np.uint16), got[2].view(np.uint16))
    temps = temporaries(kernel)
    assert temps and max(temps.values()) <= max(CHUNK_BYTES, 8 * cols * 4)  # row sums: chunks of 8 rows


@pytest.mark.parametrize("rows", [37, 33])
def test_int8_values_added_to_a_float32_tile_in_row_chunks(rows):
    """A float32 tile updated in place with a converted int8 tile and a row vector: the chunk's
    instructions read and write the user's tiles at the chunk's row offset (the row vector's
    offset on a 32 B block: chunks of a multiple of 8 rows)."""
    cols = 256

    @T.prim_func
    def k(Q: T.Tensor((rows, cols), "int8"), V: T.Tensor((rows,), "float32"), Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1) as bx:
            q = T.alloc_fragment((rows, cols), "int8")
            v = T.alloc_fragment((rows,), "float32")
            y = T.alloc_fragment((rows, cols), "float32")
            T.copy(Q[0, 0], q)
            T.copy(V[0], v)
            T.fill(y, 0.25)
            for i, j in T.Parallel(rows, cols):
                y[i, j] = y[i, j] + T.cast(q[i, j], "float32") * v[i]
            T.copy(y, Y[0, 0])

    rng = np.random.default_rng(rows)
    q = rng.integers(-128, 128, (rows, cols)).astype(np.int8)
    v = rng.standard_normal(rows).astype(np.float32)
    ref = np.float32(0.25) + q.astype(np.float32) * v[:, None]
    kernel, got, cpu = both(k, [q, v], [2])
    assert_close(got, ref, TOLERANCES["float32"], "ascend")  # a fused multiply-add may round once
    assert_close(cpu, ref, TOLERANCES["float32"], "cpu")
    assert max(temporaries(kernel).values()) <= CHUNK_BYTES * 2


def test_bf16_column_sum_keeps_the_row_order():
    """A column sum of a bfloat16 tile in chunks adds the rows in order in float32, as the
    whole-tile reduction does: the result is a sequential float32 sum rounded once to bfloat16,
    bit for bit (as on cpu)."""
    rows, cols = 37, 256

    @T.prim_func
    def k(A: T.Tensor((rows, cols), "bfloat16"), C: T.Tensor((cols,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((rows, cols), "bfloat16")
            c = T.alloc_fragment((cols,), "bfloat16")
            T.copy(A[0, 0], x)
            T.reduce_sum(x, c, dim=0)
            T.copy(c, C[0])

    rng = np.random.default_rng(11)
    a = (rng.standard_normal((rows, cols)) * 100).astype(BF16)
    f = a.astype(np.float32)
    ref = f[0].copy()
    for r in range(1, rows):
        ref = ref + f[r]
    ref = ref.astype(BF16).astype(np.float32)
    kernel, got, cpu = both(k, [a], [1])
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    np.testing.assert_array_equal(cpu.view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("rows", [37, 64])
def test_int8_row_and_column_sums_of_wide_rows(rows):
    """int8 sums of 256-column rows: the row sum's chunks (8 rows: 32 B of float32 results) hold
    more rows than a map's chunk (4), and each chunk's int8 -> float16 -> float32 conversion is not
    chunked again inside it; both sums wrap exactly like numpy's."""
    cols = 256

    @T.prim_func
    def k(A: T.Tensor((rows, cols), "int8"), S: T.Tensor((rows,), "int8"), C: T.Tensor((cols,), "int8")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((rows, cols), "int8")
            s = T.alloc_fragment((rows,), "int8")
            c = T.alloc_fragment((cols,), "int8")
            T.copy(A[0, 0], x)
            T.reduce_sum(x, s, dim=1)
            T.reduce_sum(x, c, dim=0)
            T.copy(s, S[0])
            T.copy(c, C[0])

    a = np.random.default_rng(rows).integers(-128, 128, (rows, cols)).astype(np.int8)
    v = a.astype(np.int64)
    wrap = lambda s: ((s + 128) % 256 - 128).astype(np.int8)  # noqa: E731
    kernel, got, cpu = both(k, [a], [1, 2])
    for g, c, w in zip(got, cpu, (wrap(v.sum(axis=1)), wrap(v.sum(axis=0)))):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(c, w)
    assert max(temporaries(kernel).values()) <= 8 * cols * 4
