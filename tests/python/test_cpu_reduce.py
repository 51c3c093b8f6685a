"""Reductions over a tile axis that is not the innermost one on the CPU (docs/performance.md,
"Issue 16, CPU reductions and tiny programs"): the generated code accumulates whole rows of
vectors (four source rows per pass over a row of accumulators; one row a step when float32
rows of 256 B to 4 KiB lie back to back in the source) and reads a tile that a copy filled from
a global tensor in place. Results against float64 numpy on odd shapes: row counts
below, at and past the four-row group, column tails, padded (zero) rows of a tail block, an
empty grid (short rows), every reduce kind and the dtypes that take other accumulators."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
from op_zoo import reduce_mid  # noqa: E402  (A, B, C, kind, block_C, dtype)
from tw_test_util import unchecked_code_only  # noqa: E402


REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


def _data(shape, dtype, rng):
    if dtype.startswith("int"):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("B", [1, 3, 4, 37])
def test_middle_axis_reduce_matches_float64(kind, B):
    rng = np.random.default_rng(B)
    C, block_C = 301, 64  # 4 full column blocks and a tail of 45
    x = _data((5, B, C), "float32", rng)
    got = reduce_mid(5, B, C, kind, block_C, "float32")(x)
    want = REDUCE[kind](x.astype(np.float64), axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * B * 3)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32"])
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_middle_axis_reduce_other_dtypes(dtype, kind):
    rng = np.random.default_rng(7)
    x = _data((3, 23, 70), dtype, rng)
    got = reduce_mid(3, 23, 70, kind, 32, dtype)(x)
    want = REDUCE[kind](x.astype(np.float64), axis=1)
    if dtype == "float16":  # float32 accumulation, one rounding to float16
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-3, atol=2e-2)
    else:
        np.testing.assert_allclose(got, want.astype(dtype), rtol=1e-12 if dtype == "float64" else 0)


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("B", [1, 3, 4, 37])
@pytest.mark.parametrize("offset", [0, 1, 5, 15])
@unchecked_code_only
def test_middle_axis_reduce_over_whole_rows_walks_one_row_a_step(kind, B, offset):
    """A float32 tile of whole rows (block_C == C: the view's rows lie back to back in X) is
    reduced one row a step, its loads aligned by a scalar head per row (X starting `offset`
    floats past a 64-byte boundary). Per element the rows are combined in the same order as by
    the four-row passes of column blocks: the same bits."""
    rng = np.random.default_rng(100 + B + offset)
    C = 301
    buf = np.empty(5 * B * C + 16, np.float32)
    start = (-(buf.ctypes.data // 4) + offset) % 16  # X at `offset` floats past a 64-byte boundary
    x = buf[start:start + 5 * B * C].reshape(5, B, C)
    assert x.ctypes.data % 64 == 4 * offset
    x[...] = _data((5, B, C), "float32", rng)
    k = reduce_mid(5, B, C, kind, C, "float32")
    got = k(x)
    np.testing.assert_allclose(got, REDUCE[kind](x.astype(np.float64), axis=1), rtol=1e-6, atol=1e-6 * B * 3)
    np.testing.assert_array_equal(got, reduce_mid(5, B, C, kind, 64, "float32")(x))  # column blocks
    src = k.get_source("c++")
    assert "if (x_ld == 301)" in src  # the rows of the view are contiguous: one row a step
    assert '__asm__ volatile("" ::: "memory");' in src  # g++ may not interleave two rows' streams


@pytest.mark.parametrize("C, dtype", [(63, "float32"), (1025, "float32"), (140, "float16"), (140, "float64"),
                                      (140, "int32")])
def test_middle_axis_reduce_over_whole_rows_keeps_four_row_passes_outside_float32_256_b_to_4_kib(C, dtype):
    """Shorter float32 rows are bound by the loop, longer ones were not measured; other dtypes
    keep the four-row passes (and their own accumulator types)."""
    x = _data((2, 9, C), dtype, np.random.default_rng(C))
    k = reduce_mid(2, 9, C, "sum", C, dtype)
    want = x.astype(np.float64).sum(axis=1)
    if dtype == "float16":
        np.testing.assert_allclose(k(x).astype(np.float64), want, rtol=1e-3, atol=2e-2)
    elif dtype == "int32":
        np.testing.assert_array_equal(k(x), want.astype(dtype))
    else:
        np.testing.assert_allclose(k(x), want, rtol=1e-6, atol=1e-5)
    src = k.get_source("c++")
    assert "if (x_ld ==" not in src and "for (; tw_r + 4 <= 9; tw_r += 4)" in src


@pytest.mark.parametrize("kind", ["sum", "max"])
@unchecked_code_only
def test_column_reduce_of_row_blocks_counts_the_padded_rows(kind):
    """A 2-D row block whose last block passes the tensor's end: its missing rows read 0 (the
    copy's masked path) and take part in the column reduction, on the in-place path and the
    tile path alike."""
    M, N, bm = 37, 301, 8

    @T.prim_func
    def cols(X: T.Tensor((M, N), "float32"), Y: T.Tensor((5, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            c = T.alloc_fragment((N,), "float32")
            T.copy(X[bx * bm, 0], x)
            if kind == "sum":
                T.reduce_sum(x, c, dim=0)
            else:
                T.reduce_max(x, c, dim=0)
            T.copy(c, Y[bx, 0])
    k = tw.compile(cols, out_idx=[-1])
    x = (np.random.default_rng(3).standard_normal((M, N)) - 2).astype(np.float32)  # mostly negative: padding 0 wins max
    padded = np.concatenate([x.astype(np.float64), np.zeros((5 * bm - M, N))]).reshape(5, bm, N)
    np.testing.assert_allclose(k(x), REDUCE[kind](padded, axis=1), rtol=1e-6, atol=1e-5)
    src = k.get_source("c++")
    assert "elided: x is only read" in src  # the full blocks read X in place


@unchecked_code_only
def test_middle_axis_reduce_reads_the_tensor_in_place_four_rows_per_pass():
    """The shape of the generated code: the copy into the (37, 64) tile is elided on the fast
    path, and the reduction combines four rows per pass over the accumulators, in row order,
    then the remaining row."""
    src = reduce_mid(5, 37, 301, "sum", 64, "float32").get_source("c++")
    assert "elided: x is only read (loads, reductions), from X in place" in src
    assert "tw_acc[tw_j] = tw_acc[tw_j] + tw_p0[tw_j] + tw_p1[tw_j] + tw_p2[tw_j] + tw_p3[tw_j];" in src  # C++: left to right
    assert "for (; tw_r + 4 <= 37; tw_r += 4)" in src and "for (; tw_r < 37; ++tw_r)" in src
    assert "x_p + ((tw_o * 37) + tw_r + 0) * x_ld" in src  # rows from the view, not the tile


@tw.jit(out_idx=[-1])
def row_reduce(N, kind, dtype, block_M=8):
    """Y[i] = reduce_j X[i, j] with short rows: one accumulator per row, vectorised across rows."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            s = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], x)
            if kind == "sum":
                T.reduce_sum(x, s, dim=1)
            else:  # min shares max's code (tw_min for tw_max): op_zoo.reduce_mid tests it
                T.reduce_max(x, s, dim=1)
            T.copy(s, Y[bx * block_M])
    return main


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32"])
@pytest.mark.parametrize("kind", ["sum", "max"])
@pytest.mark.parametrize("N", [1, 3, 15])
def test_short_rows_reduce_matches_float64(N, kind, dtype):
    x = _data((37, N), dtype, np.random.default_rng(N))
    got = row_reduce(N, kind, dtype)(x)
    want = REDUCE[kind](x.astype(np.float64), axis=1)
    tol = {"float16": 2e-3, "float32": 1e-6, "float64": 1e-12, "int32": 0}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * N * 3)
    assert row_reduce(N, kind, dtype)(np.zeros((0, N), dtype)).shape == (0,)


@pytest.mark.parametrize("N", [1, 2, 15, 16])
@pytest.mark.parametrize("M", [1, 37])
def test_narrow_softmax_matches_float64(M, N):
    from tw_test_util import load_example
    softmax = load_example("softmax")
    x = (np.random.default_rng(M + N).standard_normal((M, N)) * 3).astype(np.float32)
    np.testing.assert_allclose(softmax.softmax(N)(x), softmax.reference(x), rtol=1e-5, atol=1e-6)


@unchecked_code_only
def test_narrow_softmax_reduces_across_rows():
    """Rows of one element: no fused map + row reduction (its per-row vector accumulators and
    fold cost more than the row), and the reductions run one accumulator per row, the loop over
    the block's rows innermost (vectorised: test_cpu_vectorize.py). The blocks of 8 rows are
    merged 32 at a time (coarsen_grid: tiles of 8 floats), so the loops run over 256 rows."""
    from tw_test_util import load_example
    src = load_example("softmax").softmax(1).get_source("c++")
    assert "fused with reduce_sum" not in src
    assert "for (int64_t tw_o = 0; tw_o < 256; ++tw_o) tw_acc[tw_o] = tw_acc[tw_o] + x[tw_o * 1 + tw_r];" in src
    assert "for (int64_t tw_o = 0; tw_o < 256; ++tw_o) tw_acc[tw_o] = tw_max(tw_acc[tw_o], x_p[tw_o * x_ld + tw_r]);" in src


@pytest.mark.parametrize("kind", ["sum", "max"])
@pytest.mark.parametrize("M", [1, 5, 32, 37])
def test_column_of_a_strided_tensor_reduced_over_its_rows(M, kind):
    """A (M, 1) tile copied from one column of an (M, 3) tensor and reduced over axis 0 (found by
    the differential fuzzer, seed 26329: the copy was elided into a view of row stride 3 and the
    reduce read the view as one contiguous row: -12 instead of -1)."""
    N = 3

    reduce = T.reduce_sum if kind == "sum" else T.reduce_max

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N) as bx:
            x = T.alloc_fragment((M, 1), "float32")
            r = T.alloc_fragment((1,), "float32")
            T.copy(A[0, bx], x)
            reduce(x, r, dim=0)
            T.copy(r, B[bx])

    a = np.random.default_rng(M).standard_normal((M, N)).astype(np.float32)
    ref = getattr(a.astype(np.float64), kind)(axis=0)
    np.testing.assert_allclose(tw.compile(k, out_idx=[1])(a), ref, rtol=1e-5, atol=1e-5)
