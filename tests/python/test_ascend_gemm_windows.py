"""Gemms on windows of tiles on ascend910b (docs/ascend.md "Gemms into part of a fragment"): never
a silent wrong answer.

- An L1 operand window is loaded into L0 in whole 16 x C0 fractals (LoadData 2D): a window that
  starts on a fractal (rows in multiples of 16, columns in multiples of C0, constants or loop
  indices times a multiple) runs and matches numpy and cpu; one that starts inside a fractal
  (`a[4:8, :]`, `b[:, 8:24]` in float16, `a[h * 4:..]`) is an error at the gemm's line. Before
  session 14 those were read from the fractal's first row / column: wrong results, no report.
- A clearing gemm into part of a fragment whose other elements the vector code wrote is an error
  at the gemm's line (before: the rows outside the window came back from stale L0C).
cpu vs ascend910b (checker on, zero reports) vs a float64 reference."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import TARGET, run_checked


def row_window_gemm(r0, G, dtype, target):
    """C = A[r0:r0 + G, :] @ B^T with A staged whole (32 x 64) in a shared tile."""
    @T.prim_func
    def main(A: T.Tensor((32, 64), dtype), B: T.Tensor((32, 64), dtype), C: T.Tensor((G, 32), "float32")):
        with T.Kernel(1) as b:
            a = T.alloc_shared((32, 64), dtype)
            bb = T.alloc_shared((32, 64), dtype)
            c = T.alloc_fragment((G, 32), "float32")
            T.copy(A, a)
            T.copy(B, bb)
            T.gemm(a[r0:r0 + G, :], bb, c, transpose_B=True, clear_accum=True)
            T.copy(c, C)
    return tw.compile(main, target=target, out_idx=[-1])


def col_window_gemm(c0, dtype, target):
    """C = A @ B[:, c0:c0 + 16]^T ... the K window of the transposed B: columns c0 .. c0 + 15."""
    @T.prim_func
    def main(A: T.Tensor((16, 16), dtype), B: T.Tensor((32, 64), dtype), C: T.Tensor((16, 32), "float32")):
        with T.Kernel(1) as b:
            a = T.alloc_shared((16, 16), dtype)
            bb = T.alloc_shared((32, 64), dtype)
            c = T.alloc_fragment((16, 32), "float32")
            T.copy(A, a)
            T.copy(B, bb)
            T.gemm(a, bb[:, c0:c0 + 16], c, transpose_B=True, clear_accum=True)
            T.copy(c, C)
    return tw.compile(main, target=target, out_idx=[-1])


def grouped_gemm(G, dtype, target):
    """Per group h of G rows: C[h] = A[h * G:(h + 1) * G, :] @ B^T (a loop-index window start)."""
    E = 32 // G

    @T.prim_func
    def main(A: T.Tensor((32, 64), dtype), B: T.Tensor((32, 64), dtype), C: T.Tensor((E, G, 32), "float32")):
        with T.Kernel(1) as b:
            a = T.alloc_shared((32, 64), dtype)
            bb = T.alloc_shared((32, 64), dtype)
            c = T.alloc_fragment((G, 32), "float32")
            T.copy(A, a)
            T.copy(B, bb)
            for h in T.serial(E):
                T.gemm(a[h * G:(h + 1) * G, :], bb, c, transpose_B=True, clear_accum=True)
                T.copy(c, C[h, :, :])
    return tw.compile(main, target=target, out_idx=[-1])


def inputs(dtype, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


TOL = {"float16": dict(atol=2e-2, rtol=2e-2), "float32": dict(atol=1e-2, rtol=1e-2)}  # fp32: Cube fp32 (HF32-free) tolerance


@pytest.mark.parametrize("r0,G", [(0, 4), (16, 4), (16, 16), (0, 1), (16, 13)])
def test_row_window_on_a_fractal_runs(r0, G):
    A, B = inputs(np.float16, (32, 64), (32, 64))
    ref = A[r0:r0 + G].astype(np.float64) @ B.astype(np.float64).T
    out = run_checked(row_window_gemm(r0, G, "float16", TARGET), A, B)
    np.testing.assert_allclose(out, ref, **TOL["float16"])
    np.testing.assert_allclose(out, row_window_gemm(r0, G, "float16", "cpu")(A, B), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("r0", [4, 20, 28, 1])
def test_row_window_inside_a_fractal_is_an_error(r0):
    with pytest.raises(tw.TilewrightError,
                       match=rf"test_ascend_gemm_windows\.py:\d+:\d+: error: the L1 window a\[{r0}:\+4, 0:\+64\] "
                             rf"\(a gemm operand\) starts at row {r0} \(a multiple of 16 is needed\)") as e:
        row_window_gemm(r0, 4, "float16", TARGET)
    assert "T.gemm(a[r0:r0 + G, :]" in str(e.value)  # the caret line: the user's gemm
    assert "copy the rows from global memory into a tile of their own" in str(e.value)


def test_column_window_on_a_fractal_runs():
    A, B = inputs(np.float16, (16, 16), (32, 64), seed=1)
    for c0 in (0, 16, 48):
        ref = A.astype(np.float64) @ B[:, c0:c0 + 16].astype(np.float64).T
        out = run_checked(col_window_gemm(c0, "float16", TARGET), A, B)
        np.testing.assert_allclose(out, ref, **TOL["float16"])


@pytest.mark.parametrize("c0", [8, 40])
def test_column_window_inside_a_fractal_is_an_error(c0):
    with pytest.raises(tw.TilewrightError, match=rf"error: the L1 window bb\[0:\+32, {c0}:\+16\] \(a gemm operand\) "
                                                 rf"starts at column {c0} \(a multiple of 16 for float16 is needed\)"):
        col_window_gemm(c0, "float16", TARGET)


def test_loop_index_window_on_a_fractal_runs():
    # h * 16: a multiple of 16 for every h (proved from the product), 2 groups
    A, B = inputs(np.float16, (32, 64), (32, 64), seed=2)
    ref = (A.astype(np.float64) @ B.astype(np.float64).T).reshape(2, 16, 32)
    out = run_checked(grouped_gemm(16, "float16", TARGET), A, B)
    np.testing.assert_allclose(out, ref, **TOL["float16"])
    np.testing.assert_allclose(out, grouped_gemm(16, "float16", "cpu")(A, B), atol=1e-3, rtol=1e-3)


def test_loop_index_window_inside_a_fractal_is_an_error():
    # h * 4 starts inside a fractal for h = 1, 2, 3, 5, ...: the paged_decode_pages shape (G = 4)
    A, B = inputs(np.float16, (32, 64), (32, 64), seed=3)
    ref = (A.astype(np.float64) @ B.astype(np.float64).T).reshape(8, 4, 32)
    np.testing.assert_allclose(grouped_gemm(4, "float16", "cpu")(A, B), ref, **TOL["float16"])  # cpu runs it
    with pytest.raises(tw.TilewrightError, match=r"error: the L1 window a\[h \* 4:\+4, 0:\+64\] \(a gemm operand\) "
                                                 r"starts at row h \* 4 \(a multiple of 16 is needed\)"):
        grouped_gemm(4, "float16", TARGET)


def partial_clear_gemm(r0, target):
    """c = row index everywhere, then c[r0:r0 + 16, :] = A @ B^T by a clearing gemm, then c + 1."""
    @T.prim_func
    def main(A: T.Tensor((16, 64), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1) as b:
            a = T.alloc_shared((16, 64), "float16")
            bb = T.alloc_shared((32, 64), "float16")
            c = T.alloc_fragment((32, 32), "float32")
            T.copy(A, a)
            T.copy(B, bb)
            for i, j in T.Parallel(32, 32):
                c[i, j] = 1.0 * i
            T.gemm(a, bb, c[r0:r0 + 16, :], transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(32, 32):
                c[i, j] = c[i, j] + 1.0
            T.copy(c, C)
    return tw.compile(main, target=target, out_idx=[-1])


def test_clearing_gemm_into_part_of_a_vector_tile_is_an_error():
    A, B = inputs(np.float16, (16, 64), (32, 64), seed=4)
    ref = np.repeat(np.arange(32, dtype=np.float64)[:, None], 32, 1) + 1
    ref[:16] = A.astype(np.float64) @ B.astype(np.float64).T + 1
    np.testing.assert_allclose(partial_clear_gemm(0, "cpu")(A, B), ref, **TOL["float16"])  # cpu runs it
    # rows 16..31 keep the vector code's values on cpu; on Ascend they would come from L0C
    with pytest.raises(tw.TilewrightError,
                       match=r"test_ascend_gemm_windows\.py:\d+:\d+: error: gemm writes part of 'c' \(c\[0:\+16, 0:\+32\]\), "
                             r"whose other elements the vector code wrote") as e:
        partial_clear_gemm(0, TARGET)
    assert "give each row group its own program in the grid" in str(e.value)
