"""Findings of the session 21 fuzzer run (h-fuzz9, /work/fuzz9-findings.md), each reduced to a
minimal kernel and checked on cpu and on ascend910b (simulator, checker on) against float64.
An open finding is a strict xfail: when its fix lands the test passes and the xfail must go."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T


def _gemm_window(bshape, dtype):
    """C = eye @ B's window of 16 x 16 at run-time starts (r, c), copied into an L1 tile (a 2-D B,
    or a BSHD B's matrix at [0, :, 2, :])."""
    acc = "int32" if dtype == "int8" else "float32"

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
            T.gemm(a, b, cc)
            T.copy(cc, C[0, 0])
    return k


def _run_both(kernel, args, ref):
    """(cpu exact, ascend exact, ascend's checker reports)."""
    out = tw.compile(kernel, target="cpu", out_idx=[-1])(*args)
    assert np.array_equal(np.asarray(out, np.float64), ref)
    prof = tw.compile(kernel, target="ascend910b", out_idx=[-1]).profile(*args)
    out = prof.outputs[0] if isinstance(prof.outputs, (list, tuple)) else prof.outputs
    return np.array_equal(np.asarray(out, np.float64), ref), prof["reports"]


def _window_ref(mat, r, c):
    """float64 (16, 16): mat[r + i, c + j], zeros outside mat."""
    out = np.zeros((16, 16))
    for i in range(16):
        for j in range(16):
            if 0 <= r + i < mat.shape[0] and 0 <= c + j < mat.shape[1]:
                out[i, j] = mat[r + i, c + j]
    return out


def _matrix(B):
    return B if B.ndim == 2 else B[0, :, 2, :]


CASES = [  # (B's shape, dtype, r, c)
    ((17, 8), "float16", 1, -8),
    ((1, 16, 3, 8), "float16", 0, -8),
    ((1, 16, 3, 4), "float32", 0, -4),
    ((1, 16, 3, 1), "float16", 0, -1),
]


@pytest.mark.parametrize("bshape, dtype, r, c", CASES)
def test_l1_window_whole_rows_before_column_0_is_reported(bshape, dtype, r, c):
    """A GM -> L1 window whose run-time column start lies inside the first C0 strip before column 0
    cannot be clipped (docs/language.md, docs/ascend.md "Session 20: negative run-time column starts
    of L1 copies"): the checker must report it at the copy's line, as it does for c = -3, also when
    the start is a whole number of the tensor's rows before (c = -cols, the window's columns a
    multiple of cols: F1, fixed by h-ascfix9)."""
    B = (np.arange(int(np.prod(bshape))).reshape(bshape) % 7 + 1).astype(dtype)
    A = np.eye(16).astype(dtype)
    ref = _window_ref(_matrix(B).astype(np.float64), r, c)
    exact, reports = _run_both(_gemm_window(bshape, dtype), (A, B, r, c), ref)
    assert exact or any("out of bounds" in x for x in reports), "a wrong tile and no checker report"


def test_l1_window_inside_a_strip_before_column_0_is_reported():
    """The documented case F1 is measured against: c = -3 (float16, not a whole row before) is the
    checker's out-of-bounds report at the copy's line; c = -16 (a whole strip) is exact."""
    bshape = (1, 16, 3, 8)
    B = (np.arange(int(np.prod(bshape))).reshape(bshape) % 7 + 1).astype("float16")
    A = np.eye(16).astype("float16")
    kernel = _gemm_window(bshape, "float16")
    exact, reports = _run_both(kernel, (A, B, 0, -3), _window_ref(B[0, :, 2, :].astype(np.float64), 0, -3))
    assert any("out of bounds" in x for x in reports)
    exact, reports = _run_both(kernel, (A, B, 0, -16), _window_ref(B[0, :, 2, :].astype(np.float64), 0, -16))
    assert exact and not reports


def _whole_k_gemm(ash, K):
    """C = A's window [0:32, ka:ka + K] (a BSHD A's matrix at [0, :, 1, :]) @ B, one whole-K gemm on
    global operands: ascend910b stages K in chunks (float16 32 x 32 blocks: 512 and a run-time tail)."""
    @T.prim_func
    def k(A: T.Tensor(ash, "float16"), B: T.Tensor((K, 32), "float16"), ka: T.int32, C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((32, 32), "float32")
            T.clear(acc)
            if len(ash) == 4:
                T.gemm(A[0, 0:32, 1, ka:ka + K], B[0:K, 0:32], acc)
            else:
                T.gemm(A[0:32, ka:ka + K], B[0:K, 0:32], acc)
            T.copy(acc, C[0, 0])
    return k


@pytest.mark.parametrize("ash, ka", [((40, 1000), -1000), ((1, 40, 2, 1000), -1000), ((1, 40, 2, 1000), -1001)])
def test_chunked_whole_k_window_wholly_before_the_tensor(ash, ka):
    """ka = -1000 (-1001) with K = 1000: the operand window [ka, ka + K) is wholly before A, so C is 0
    exactly, with no checker report (docs/language.md: a window wholly before the tensor is exact).
    F2, fixed by h-ascfix9d: the last chunk (a run-time tail of 488) now moves nothing."""
    K = 1000
    rng = np.random.default_rng(0)
    A = (rng.integers(-4, 5, ash) / 2).astype(np.float16)
    B = (rng.integers(-4, 5, (K, 32)) / 2).astype(np.float16)
    exact, reports = _run_both(_whole_k_gemm(ash, K), (A, B, ka), np.zeros((32, 32)))
    assert exact and not reports, (exact, reports[:1])


@pytest.mark.parametrize("ka", [-1008, -1016, -992])
def test_chunked_whole_k_window_neighbours(ka):
    """Neighbours of F2's starts, exact before its fix too: -1008 (a multiple of C0 = 16, wholly before),
    -1016 (wholly before, inside a strip) and -992 (a multiple of C0 reaching 8 columns into A)."""
    K = 1000
    ash = (1, 40, 2, K)
    rng = np.random.default_rng(0)
    A = (rng.integers(-4, 5, ash) / 2).astype(np.float16)
    B = (rng.integers(-4, 5, (K, 32)) / 2).astype(np.float16)
    wa = np.zeros((32, K))
    lo, hi = max(0, ka), min(K, ka + K)
    if hi > lo:
        wa[:, lo - ka:hi - ka] = A[0, :32, 1, lo:hi]
    exact, reports = _run_both(_whole_k_gemm(ash, K), (A, B, ka), wa @ B.astype(np.float64))
    assert exact and not reports
