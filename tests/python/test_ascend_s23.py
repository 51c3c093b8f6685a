"""Session 23 (h-ascnan11): the ascend910b NaN flag of max / min reductions without a source-sized
UB tile, and the open Ascend items that followed it (docs/ascend.md "Session 23: the NaN flag in
row chunks (h-ascnan11)").

Every kernel runs on ascend910b in the simulator with its checker (a report fails the test) and on
cpu, against numpy in float64. Max / min pick an element, so the comparisons are exact (NaN where
numpy has NaN); shapes have row tails (rows not a multiple of the flag's row chunk), one-row and
one-column tiles, and each float dtype.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]
DTYPES = ["float32", "float16", "bfloat16"]


def _run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def _same(got, ref):
    """Equal values, NaN where the reference has NaN (compared in float64)."""
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), np.asarray(ref).astype(np.float64))


def _specials(shape, dtype, seed):
    """Small integers (exact in every dtype, no signed zeros), with NaN in some rows (first,
    middle, last element of a row; whole NaN rows) and +-inf next to them."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-20, 21, shape).astype(np.float64)
    x[x == 0] = 1
    rows, cols = shape
    for r in range(0, rows, 3):  # NaN in every third row, at a position that moves along the row
        x[r, (r * 7) % cols] = np.nan
    x[rows - 1, cols - 1] = np.nan  # the last row (the chunks' tail)
    if rows > 5:
        x[4, :] = np.nan
        x[5, 0], x[5, -1] = np.inf, -np.inf
    if rows > 1:
        x[1, 0] = -np.inf
    return x.astype(np_dtype(dtype))


def _ub_buffers(kernel, suffix):
    """{name: bytes} of the lowered program's UB buffers whose name contains suffix."""
    prog = kernel.get_source("ascend_program")
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"buffer (\w*" + suffix + r"\w*): AIV UB @\d+ \+(\d+)", prog)}


# ---------------------------------------------------------------------------------------------
# Task 1: a stored row max / min of a kernel tile takes its NaN flag in row chunks (at most 16 KiB
# of flags at a time, legalize_vector's flag_chunk_rows), not in a tile of the source's size

def stored_max_min(M, N, dtype):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), D: T.Tensor((M,), dtype), Mx: T.Tensor((M,), dtype),
             Mn: T.Tensor((M,), dtype), Mx2: T.Tensor((M,), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            mx = T.alloc_fragment((M,), dtype)
            mn = T.alloc_fragment((M,), dtype)
            T.copy(X, x)
            T.reduce_max(x, mx, dim=1)
            T.reduce_min(x, mn, dim=1)
            T.copy(mx, Mx)
            T.copy(mn, Mn)
            T.copy(D, mx)
            T.reduce_max(x, mx, dim=1, clear=False)
            T.copy(mx, Mx2)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,dtype", [
    (128, 128, "float16"),   # 2 chunks of 64 rows (16 KiB of float16 flags each)
    (100, 67, "float32"),    # a chunk of 56 rows (288 B each), a tail of 44
    (37, 300, "float16"),    # chunks of 16 rows (the float16 granule: 16 x 608 B), tail 5
    (600, 1, "float32"),     # one column: rows of one 32 B block, a chunk of 512, tail 88
    (9, 1, "float32"),       # fits one chunk: the flag tile of the source's shape (288 B)
    (1, 129, "float32"),     # one row: no chunks
    (70, 40, "bfloat16"),    # computed in float32: the flag in the conversion's own tile
])
def test_stored_row_max_min_propagate_nan_in_chunks(M, N, dtype, target):
    x = _specials((M, N), dtype, M * 1000 + N)
    d = np.where(np.arange(M) % 4 == 2, np.nan, 3.0).astype(np_dtype(dtype))
    mx, mn, mx2 = _run(tw.compile(stored_max_min(M, N, dtype), target=target, out_idx=[2, 3, 4]), target, x, d)
    x64 = x.astype(np.float64)
    _same(mx, x64.max(1))
    _same(mn, x64.min(1))
    _same(mx2, np.maximum(d.astype(np.float64), x64.max(1)))


@pytest.mark.parametrize("M,N,dtype,flag_bytes", [
    (128, 128, "float16", 16384),  # before: one 32 KiB flag tile
    (100, 67, "float32", 16128),   # 56 rows of 288 B (67 float32 padded to 32 B)
    (37, 300, "float16", 9728),    # the 16-row granule of a float16 row vector: 16 x 608 B
    (600, 1, "float32", 16384),    # 512 rows of 32 B (before: 19200 B)
    (70, 40, "bfloat16", 0),       # the float32 conversion holds its flags: no flag tile
])
def test_flag_tile_is_a_row_chunk(M, N, dtype, flag_bytes):
    """The flag's UB: the largest source-shaped `_nan` tile is one row chunk of at most 16 KiB
    (or one granule of rows); none when the reduction converts its source (the conversion, dead
    once reduced, holds the flags)."""
    k = tw.compile(stored_max_min(M, N, dtype), target=TARGET, out_idx=[2, 3, 4])
    tiles = {n: b for n, b in _ub_buffers(k, "_nan").items() if n.startswith("x_")}
    assert max(tiles.values(), default=0) == flag_bytes, tiles


def pipelined_row_max(stages):
    """fuzz-133745 (test_ascend_pipelined.py's _reduce_rows) with the max read back: a stored
    float16 row max of float32 data in 128 x 128 tiles, num_stages=stages."""
    M, N = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float16")):
        with T.Kernel(T.ceildiv(M, 128)) as by:
            x = T.alloc_fragment((128, 128), "float16")
            r = T.alloc_fragment((128,), "float16")
            T.fill(r, -T.infinity("float16"))
            for kk in T.Pipelined(T.ceildiv(N, 128), num_stages=stages):
                T.copy(A[by * 128, kk * 128], x)
                T.reduce_max(x, r, dim=1, clear=False)
            T.copy(r, B[by * 128])

    return k


@pytest.mark.parametrize("M,N", [(130, 300), (9, 1), (256, 256)])
def test_pipelined_stored_row_max_two_stages_with_nan(M, N):
    """Two stages run (no note; with the 32 KiB flag tile of session 22 one did), and
    the row maxima follow the NaN rule in every chunk and iteration: equal to numpy's and cpu's."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", tw.TilewrightWarning)
        kernel = tw.compile(pipelined_row_max(2), out_idx=[-1], target=TARGET)
    a = _specials((M, N), "float32", M + N)
    (got,) = [run_checked(kernel, a)]
    padded = np.zeros((M, -(-N // 128) * 128), np.float16)  # a tail reads zeros (both targets)
    padded[:, :N] = a.astype(np.float16)
    ref = padded.astype(np.float64).max(axis=1)
    _same(got, ref)
    _same(got, tw.compile(pipelined_row_max(2), out_idx=[-1])(a))
