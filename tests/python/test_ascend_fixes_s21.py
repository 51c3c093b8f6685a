"""Session 21 fixes of the Ascend target (h-ascfix9): each finding of the session's hunters
(/work/fuzz9-findings.md, hunt9a, hunt9b) reduced to a kernel checked on cpu and on ascend910b
(simulator, checker on) against numpy / float64, or the located error that replaces a program the
device would run wrongly."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

from ascend_util import TARGET, run_checked

ACC = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32"}
C0 = {"float16": 16, "bfloat16": 16, "float32": 8, "int8": 32}


# --- fuzz9 F1: a GM -> L1 window starting whole tensor rows before column 0 -----------------------

def _l1_window(bshape, dtype):
    """C = eye(16) @ (B's 16 x 16 window (int8: window @ eye(16)^T) at run-time starts (r, c), through an L1 tile), zeros outside
    B; a 2-D B, or a BSHD B's matrix at [0, :, 2, :]."""
    acc = ACC[dtype]

    @T.prim_func
    def k(A: T.Tensor((16, 16), dtype), B: T.Tensor(bshape, dtype), r: T.int32, c: T.int32,
          C: T.Tensor((16, 16), acc)):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 16), dtype)
            b = T.alloc_shared((16, 16), dtype)
            cc = T.alloc_fragment((16, 16), acc)
            T.clear(cc)
            T.copy(A[0:16, 0:16], a)
            if len(bshape) == 2:
                T.copy(B[r:r + 16, c:c + 16], b)
            else:
                T.copy(B[0, r:r + 16, 2, c:c + 16], b)
            if dtype == "int8":  # an int8 K x N operand needs a transposing load: the window is A
                T.gemm(b, a, cc, transpose_B=True)
            else:
                T.gemm(a, b, cc)
            T.copy(cc, C[0, 0])
    return k


def _window_ref(mat, r, c):
    out = np.zeros((16, 16))
    for i in range(16):
        for j in range(16):
            if 0 <= r + i < mat.shape[0] and 0 <= c + j < mat.shape[1]:
                out[i, j] = mat[r + i, c + j]
    return out


# (B's shape, dtype, r, c): whole rows before column 0 (c = -w), half a strip (-C0/2), a strip
# less one (-C0 + 1), a BSHD row of 8 / 4 / 1 elements
L1_ROW_CASES = [
    ((17, 8), "float16", 1, -8), ((17, 8), "float16", 1, -15), ((17, 4), "float32", 2, -4),
    ((17, 8), "int8", 1, -8), ((17, 16), "int8", 1, -15), ((17, 8), "bfloat16", 1, -8),
    ((17, 24), "float16", 1, -8), ((17, 4), "float32", 0, -7),
    ((1, 16, 3, 8), "float16", 0, -8), ((1, 16, 3, 4), "float32", 0, -4), ((1, 16, 3, 1), "float16", 0, -1),
    ((1, 16, 3, 1), "float32", 0, -1), ((1, 16, 3, 8), "int8", 0, -8), ((1, 16, 3, 8), "bfloat16", 0, -4),
]


@pytest.mark.parametrize("bshape, dtype, r, c", L1_ROW_CASES)
def test_l1_window_before_column_0_inside_a_strip_is_reported(bshape, dtype, r, c):
    """fuzz9 F1: a GM -> L1 window whose run-time column start is before column 0 but not a whole C0
    strip before it cannot be clipped on the Nd2Nz path; the checker reports it at the copy's line
    (was silent when the start was whole tensor rows before column 0: the read of the previous row
    stayed in a row-aligned range). cpu is exact."""
    B = (np.arange(int(np.prod(bshape))).reshape(bshape) % 7 + 1).astype(np_dtype(dtype))
    A = np.eye(16).astype(np_dtype(dtype))
    mat = B if B.ndim == 2 else B[0, :, 2, :]
    ref = _window_ref(mat.astype(np.float64), r, c)
    k = _l1_window(bshape, dtype)
    out = tw.compile(k, target="cpu", out_idx=[-1])(A, B, r, c)
    assert np.array_equal(np.asarray(out, np.float64), ref)
    reports = tw.compile(k, target=TARGET, out_idx=[-1]).profile(A, B, r, c)["reports"]
    assert reports and all("out of bounds" in x and "test_ascend_fixes_s21.py" in x for x in reports), reports
    assert any("before column 0" in x for x in reports), reports


@pytest.mark.parametrize("bshape, dtype", [((17, 8), "float16"), ((1, 16, 3, 8), "float16"), ((17, 16), "int8"),
                                           ((1, 16, 3, 4), "float32")])
def test_l1_window_whole_strips_before_column_0_stay_exact(bshape, dtype):
    """The starts the run-time clip handles (a multiple of C0 before column 0, a window wholly before
    the tensor, non-negative starts) stay exact and unreported."""
    B = (np.arange(int(np.prod(bshape))).reshape(bshape) % 7 + 1).astype(np_dtype(dtype))
    A = np.eye(16).astype(np_dtype(dtype))
    mat = B if B.ndim == 2 else B[0, :, 2, :]
    npu = tw.compile(_l1_window(bshape, dtype), target=TARGET, out_idx=[-1])
    for r, c in [(0, 0), (1, 0), (0, -C0[dtype]), (1, -16), (0, -40), (0, 1)]:
        if c == -C0[dtype] or c >= 0 or c + 16 <= 0 or -c % C0[dtype] == 0:
            got = run_checked(npu, A, B, r, c)
            assert np.array_equal(np.asarray(got, np.float64), _window_ref(mat.astype(np.float64), r, c)), (r, c)


# --- hunt9a F5: row-by-row store of a 1-D UB tile at a misaligned run-time start ------------------

def _rows_of_1d_tile(R, C, dtype):
    @T.prim_func
    def main(X: T.Tensor((R * C,), dtype), Y: T.Tensor((R, C), dtype)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R * C,), dtype)
            T.copy(X, y)
            for r in T.serial(R):
                T.copy(y[r * C:(r + 1) * C], Y[r, 0:C])  # MARK-F5
    return main


@pytest.mark.parametrize("R, C, dtype", [(3, 8, "float16"), (5, 4, "float32"), (2, 3, "float32"), (4, 3, "int32"),
                                         (3, 16, "int8")])
def test_1d_tile_rows_at_a_misaligned_start_is_a_compile_error(R, C, dtype):
    """hunt9a F5: the UB source y[r * C:] starts r * C * es bytes into the tile, not a 32 B block for
    r = 1: it compiled and every run was the checker's misaligned report. Now a located compile-time
    error naming the step and the fix; cpu runs it."""
    x = (np.arange(R * C) % 50 + 1).astype(np_dtype(dtype))
    out = tw.compile(_rows_of_1d_tile(R, C, dtype), target="cpu", out_idx=[-1])(x)
    assert np.array_equal(out, x.reshape(R, C))
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(_rows_of_1d_tile(R, C, dtype), target=TARGET, out_idx=[-1])
    msg = str(e.value)
    assert "test_ascend_fixes_s21.py" in msg and "not on a 32 B block" in msg and "when r = 1" in msg, msg
    assert "2-D tile" in msg, msg


@pytest.mark.parametrize("R, C, dtype", [(3, 8, "float32"), (2, 16, "float16"), (2, 32, "int8")])
def test_1d_tile_rows_at_aligned_starts_run(R, C, dtype):
    """Rows of whole 32 B blocks stay legal and exact on ascend910b."""
    x = (np.arange(R * C) % 50 + 1).astype(np_dtype(dtype))
    got = run_checked(tw.compile(_rows_of_1d_tile(R, C, dtype), target=TARGET, out_idx=[-1]), x)
    assert np.array_equal(got, x.reshape(R, C))

