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
from tw_test_util import pairwise

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
    # non-negative, a whole strip before column 0, a window wholly before the tensor
    for r, c in [(0, 0), (1, 0), (0, 1), (0, -C0[dtype]), (1, -16), (0, -40)]:
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


# --- hunt9a F1: T.floor / T.ceil on ascend910b ---------------------------------------------------

def _rounding(fn, dtype, M, N, bm=8, bn=32):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), dtype)
            y = T.alloc_fragment((bm, bn), dtype)
            T.copy(X[by * bm, bx * bn], x)
            if fn == "floor":
                for i, j in T.Parallel(bm, bn):
                    y[i, j] = T.floor(x[i, j])
            else:
                for i, j in T.Parallel(bm, bn):
                    y[i, j] = T.ceil(x[i, j])
            T.copy(y, Y[by * bm, bx * bn])
    return main


def _rounding_inputs(M, N, dtype, rng):
    big = {"float32": 2.0 ** 23, "float16": 1024.0, "bfloat16": 128.0}[dtype]
    special = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.0, -2.0, 0.3, -0.3, 0.999, -0.999, 1e-30, -1e-30,
               big - 0.5, -(big - 0.5), big, -big, big + 2, -(big + 2), 3e38 if dtype != "float16" else 6e4,
               np.inf, -np.inf, np.nan, 2.0 ** 31, -(2.0 ** 31) - 2 ** 9, 1e10, -1e10]
    if dtype == "float16":
        special = [x for x in special if not abs(x) > 6e4] + [np.inf]
    special = special[3:] + special[:3]  # a 1 x 1 tile gets -0.5
    v = rng.uniform(-300, 300, M * N)
    k = min(len(special), v.size)
    v[:k] = special[:k]
    return v.reshape(M, N).astype(np_dtype(dtype))


# every pair of (shape, dtype, fn) values (tw_test_util.pairwise: 9 cases, not the 18 of the product;
# session 27, h-citrim15: CI time)
@pytest.mark.parametrize("M, N, dtype, fn", [(*mn, d, f) for mn, d, f in pairwise([(13, 37), (1, 1), (8, 32)],
                                                                                ["float32", "float16", "bfloat16"],
                                                                                ["floor", "ceil"])])
def test_floor_ceil_on_ascend(fn, dtype, M, N):
    """hunt9a F1: T.floor / T.ceil were an error on ascend910b; now Cast with CAST_FLOOR (through
    float32), exact vs numpy (integers past 2^23, inf and NaN as they are) and vs cpu."""
    rng = np.random.default_rng(21)
    x = _rounding_inputs(M, N, dtype, rng)
    ref = getattr(np, fn)(x.astype(np.float64))
    for target in ("cpu", TARGET):
        k = tw.compile(_rounding(fn, dtype, M, N), target=target, out_idx=[-1])
        got = k(x) if target == "cpu" else run_checked(k, x)
        got = np.asarray(got, np.float64)
        assert np.array_equal(got, ref, equal_nan=True), (target, x[got != ref], got[got != ref])


def test_floor_quantize_on_ascend():
    """hunt9a F1's kernel: an int8 quantize, round half up (floor(x / s + 0.5)) and clamp."""
    @T.prim_func
    def main(X: T.Tensor((13, 37), "float32"), S: T.Tensor((13,), "float32"), Q: T.Tensor((13, 37), "int8")):
        with T.Kernel(2, 2) as (bx, by):
            x = T.alloc_fragment((8, 32), "float32")
            s = T.alloc_fragment((8,), "float32")
            q = T.alloc_fragment((8, 32), "int8")
            T.copy(X[by * 8, bx * 32], x)
            T.copy(S[by * 8], s)
            for i, j in T.Parallel(8, 32):
                r = T.floor(x[i, j] / s[i] + 0.5)
                q[i, j] = T.cast(T.min(T.max(r, -128.0), 127.0), "int8")
            T.copy(q, Q[by * 8, bx * 32])

    rng = np.random.default_rng(5)
    x = (rng.integers(-600, 600, (13, 37)) / 4).astype(np.float32)  # halves and quarters: ties exact
    s = np.full(13, 0.5, np.float32)
    ref = np.clip(np.floor(x.astype(np.float64) / 0.5 + 0.5), -128, 127).astype(np.int8)
    out = tw.compile(main, target="cpu", out_idx=[-1])(x, s)
    assert np.array_equal(out, ref)
    got = run_checked(tw.compile(main, target=TARGET, out_idx=[-1]), x, s)
    assert np.array_equal(got, ref)


# --- hunt9a F6: computed bool outputs ----------------------------------------------------------

def _threshold(op, dtype="float32", M=37, N=3, bm=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), B: T.Tensor((M, N), "bool")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dtype)
            b = T.alloc_fragment((bm, N), "bool")
            T.copy(X[bx * bm, 0], x)
            if op == "gt":
                for i, j in T.Parallel(bm, N):
                    b[i, j] = x[i, j] > 200.0
            elif op == "eq":
                for i, j in T.Parallel(bm, N):
                    b[i, j] = x[i, j] == x[i, (j + 1) % N]
            else:
                for i, j in T.Parallel(bm, N):
                    b[i, j] = x[i, j] != 0
            T.copy(b, B[bx * bm, 0])
    return main


@pytest.mark.parametrize("op", ["gt", "eq", "ne0"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_bool_output_from_a_comparison(op, dtype):
    """hunt9a F6: a comparison stored into a bool tile was an error naming 'operator gt on bool tile
    data'; now a Select of 1 / 0 and a Cast to the bool tile's bytes, exact vs numpy (NaN compares
    false, != 0 true) on both targets."""
    rng = np.random.default_rng(6)
    x = rng.integers(150, 250, (37, 3)).astype(np_dtype(dtype))
    x[::4, 1] = 0
    x[1::5] = x[1::5, :1]  # equal neighbours
    if dtype != "int32":
        x[2, 0] = np.nan
    ref = {"gt": x > 200, "eq": x == np.roll(x, -1, axis=1), "ne0": x != 0}[op]
    for target in ("cpu", TARGET):
        k = tw.compile(_threshold(op, dtype), target=target, out_idx=[-1])
        got = k(x) if target == "cpu" else run_checked(k, x)
        assert got.dtype == np.bool_ and np.array_equal(got, ref), target


@pytest.mark.parametrize("src", ["uint8", "float32", "int32"])
def test_copy_into_a_bool_tensor_converts_to_nonzero(src):
    """hunt9a F6: T.copy of a uint8 (or any) tile into a bool tensor is x != 0 (numpy's astype(bool));
    it was an error naming an internal float16 -> bool Cast."""
    @T.prim_func
    def main(U: T.Tensor((37, 5), src), B: T.Tensor((37, 5), "bool")):
        with T.Kernel(3) as bx:
            u = T.alloc_fragment((16, 5), src)
            T.copy(U[bx * 16, 0], u)
            T.copy(u, B[bx * 16, 0])

    rng = np.random.default_rng(7)
    u = rng.integers(0, 4, (37, 5)).astype(np_dtype(src))
    u[0, :4] = [255 if src == "uint8" else -1, 128 if src == "uint8" else 0.5, 1, 0]
    ref = u.astype(np.bool_)
    for target in ("cpu", TARGET):
        k = tw.compile(main, target=target, out_idx=[-1])
        got = k(u) if target == "cpu" else run_checked(k, u)
        assert got.dtype == np.bool_ and np.array_equal(got, ref), target


# --- hunt9a F3: T.reduce_* over the last axis of a 3-D tile -----------------------------------------

def _reduce_3d(B, M, N, bm, dtype, kind):
    @T.prim_func
    def main(X: T.Tensor((B, M, N), dtype), Y: T.Tensor((B, M), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((B, bm, N), dtype)
            y = T.alloc_fragment((B, bm), dtype)
            T.copy(X[0:B, bx * bm:(bx + 1) * bm, 0:N], x)
            if kind == "sum":
                T.reduce_sum(x, y, dim=2)
            elif kind == "max":
                T.reduce_max(x, y, dim=2)
            else:
                T.reduce_min(x, y, dim=2)
            T.copy(y, Y[0:B, bx * bm:(bx + 1) * bm])
    return main


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("B, M, N, bm, dtype", [(3, 13, 37, 8, "float32"), (5, 4, 16, 4, "int32"),
                                                (2, 7, 300, 8, "bfloat16"), (3, 9, 20, 3, "float16"),
                                                (1, 8, 5, 8, "float32")])
def test_reduce_last_axis_of_a_3d_tile(B, M, N, bm, dtype, kind):
    """hunt9a F3: a reduction over the last axis of a (B, bm, N) tile was 'reduce over a tile of more
    than 2 dims'; now one row reduction per matrix, exact (small integers) vs numpy on both targets."""
    x = np.random.default_rng(3).integers(-8, 9, (B, M, N)).astype(np_dtype(dtype))
    ref = {"sum": np.sum, "max": np.max, "min": np.min}[kind](x.astype(np.float64), axis=2)
    for target in ("cpu", TARGET):
        k = tw.compile(_reduce_3d(B, M, N, bm, dtype, kind), target=target, out_idx=[-1])
        got = k(x) if target == "cpu" else run_checked(k, x)
        assert np.array_equal(np.asarray(got, np.float64), ref), target


def test_reduce_first_axis_of_a_3d_tile():
    """The first axis of a 3-D tile (an error naming the loop in session 21) runs on ascend910b since
    session 22 (h-port10a; tests/python/test_ascend_nd_tiles.py covers every axis and dtype)."""
    @T.prim_func
    def main(X: T.Tensor((3, 8, 16), "float32"), Y: T.Tensor((8, 16), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((3, 8, 16), "float32")
            y = T.alloc_fragment((8, 16), "float32")
            T.copy(X, x)
            T.reduce_sum(x, y, dim=0)
            T.copy(y, Y)

    x = np.random.default_rng(4).integers(-8, 9, (3, 8, 16)).astype(np.float32)
    assert np.array_equal(run_checked(tw.compile(main, target=TARGET, out_idx=[-1]), x), x.sum(0))


# --- hunt9a F4 / F2: hints that name the form that runs ----------------------------------------------

def test_copy_1d_tile_to_2d_window():
    """Named the reshape map in session 21; runs on ascend910b since session 22 (h-port10a)."""
    @T.prim_func
    def main(X: T.Tensor((24,), "float32"), Y: T.Tensor((3, 8), "float32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((24,), "float32")
            T.copy(X, y)
            T.copy(y, Y[0:3, 0:8])

    x = np.arange(24, dtype=np.float32)
    assert np.array_equal(tw.compile(main, target="cpu", out_idx=[-1])(x), x.reshape(3, 8))
    assert np.array_equal(run_checked(tw.compile(main, target=TARGET, out_idx=[-1]), x), x.reshape(3, 8))


def test_transposing_map_names_the_identity_gemm():
    @T.prim_func
    def main(X: T.Tensor((8, 16), "float32"), Y: T.Tensor((16, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, 16), "float32")
            y = T.alloc_fragment((16, 8), "float32")
            T.copy(X, x)
            for j, i in T.Parallel(16, 8):
                y[j, i] = x[i, j]
            T.copy(y, Y)

    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(main, target=TARGET, out_idx=[-1])
    # session 33 (port33 F3): every dtype has the scalar element loop, the hint names it
    assert "transpose_B=True" in str(e.value) and "an element loop on the scalar unit" in str(e.value)


def test_map_over_a_3d_tile():
    """hunt9a F16: a T.Parallel map over a 3-D tile (an error naming the 2-D forms in session 21) runs
    on ascend910b since session 22 (h-port10a)."""
    @T.prim_func
    def main(X: T.Tensor((4, 3, 16), "float32"), Y: T.Tensor((4, 3, 16), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((4, 3, 16), "float32")
            T.copy(X, x)
            for s, h, d in T.Parallel(4, 3, 16):
                x[s, h, d] = x[s, h, d] * 2.0
            T.copy(x, Y)

    x = np.random.default_rng(5).integers(-8, 9, (4, 3, 16)).astype(np.float32)
    assert np.array_equal(run_checked(tw.compile(main, target=TARGET, out_idx=[-1]), x), x * 2)
