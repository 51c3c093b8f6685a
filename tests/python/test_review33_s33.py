"""Session 33 review (h-review33): probes of h-labels33 (PyTorch's int64 labels in maps) and of the lead's
h-lead33 (map operands shifted by a loop variable with constant bounds, the changed hints).

R1 (fixed here): `map_operand_aligned` / the UB-window check evaluate a shifted start over each loop step
(`misaligned_step`), also a step an enclosing `if` skips: `for k in T.serial(3): if k == 0: ... x[i, j + k]`
compiled and ran before h-lead33 (the checker saw only the aligned step) and was then a compile-time error
naming `k = 1`, a step that never runs; a guarded 1-D copy window (`t[r * 3:r * 3 + 8]` under `if r == 0`,
session 23's check) was rejected the same way. A start using a variable an enclosing if tests (directly or
through a let) is now left to the checker at run time, as any run-time start is.
R4 (fixed in session 34 by h-wrap34): `y[j] = x[j] + c` / `x[j] // c` with int32 tiles and an int64 scalar
parameter c was an error on ascend910b whose hints were not fixes; both run exactly now, as on cpu (controls here).
R3 (fixed here): the steps enumerated a let's interval, not its values: `s = (k * 16) // 2` (0, 8, 16) was
rejected "when s = 1"; lets are now inlined, so the steps are those of the loops and blocks.
R2: h-lead33's port33 F3 hint ("any dtype (int32 / uint8 too) ... an element loop on the scalar unit") made
test_ascend_fixes_s21.py's assertion of the old text fail (the lead updated it, bc9edbf6); the uint8 element loop
the hint names runs here on both targets.
The label probes (no finding): the comparison forms h-labels33's tests do not cover — an offset or reversed
column (`j + 3 < lab[i]`, `N - 1 - j == lab[i]`, `i + j >= lab[i]`, `j + bx * 5 == lab[i]`), a label used twice
and as a gather index in one map, two columns of a 2-D int64 label tile, a masked `if j < lab[i]` store, the
int64 tile stored back out, an int64 scalar in a one-row map, a 1-D `T.cast(lab[i], "int32") + 1` with tails —
with labels at the clamp edges (N - 1, N, N + 1, -1, -2, INT64_MIN / MAX, 2^32 + 2): cpu and ascend910b
(checker on) equal numpy exactly.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

I64 = np.iinfo(np.int64)


# --------------------------------------------------------------------------------------------- R1
def _guarded_shift(form):
    R, C = 4, 16

    @T.prim_func
    def main(X: T.Tensor((R, C + 16), "float32"), Y: T.Tensor((R, C), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C + 16), "float32")
            y = T.alloc_fragment((R, C), "float32")
            T.copy(X[0, 0], x)
            T.fill(y, 0.0)
            for k in T.serial(3):
                if form == "eq0":
                    if k == 0:
                        for i, j in T.Parallel(R, C):
                            y[i, j] = y[i, j] + x[i, j + k]
                elif form == "even":
                    if k % 2 == 0:  # k = 0, 2: columns 0 and 8 (aligned); k = 1 never runs
                        for i, j in T.Parallel(R, C):
                            y[i, j] = y[i, j] + x[i, j + 4 * k]
                elif form == "let":  # through a let
                    if k < 1:
                        s = k * 3
                        for i, j in T.Parallel(R, C):
                            y[i, j] = y[i, j] + x[i, j + s]
                else:  # R3: no guard; the let takes 0, 8, 16, never the 1 its bounds [0, 16] allow
                    s = (k * 16) // 2
                    for i, j in T.Parallel(R, C):
                        y[i, j] = y[i, j] + x[i, j + s] * 0.5
            T.copy(y, Y[0, 0])

    return main


@T.prim_func
def _guarded_window(X: T.Tensor((8,), "float32"), Y: T.Tensor((16,), "float32")):
    with T.Kernel(1) as bx:
        t = T.alloc_fragment((16,), "float32")
        T.fill(t, 1.0)
        for r in T.serial(3):
            if r == 0:
                T.copy(X, t[r * 3:r * 3 + 8])
        T.copy(t, Y)


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("form", ["eq0", "even", "let", "let_steps"])
def test_r1_r3_misaligned_step_that_never_runs(form, target):
    x = np.arange(4 * 32, dtype=np.float32).reshape(4, 32)
    want = {"even": x[:, :16] + x[:, 8:24], "let_steps": (x[:, :16] + x[:, 8:24] + x[:, 16:32]) * 0.5}.get(form, x[:, :16])
    np.testing.assert_array_equal(run_on(_guarded_shift(form), target, [-1], x), want)


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_r1_guarded_window_runs(target):
    x = np.arange(8, dtype=np.float32) + 2
    want = np.ones(16, np.float32)
    want[:8] = x
    np.testing.assert_array_equal(run_on(_guarded_window, target, [-1], x), want)


# --------------------------------------------------------------------------------------------- R2
@T.prim_func
def _transpose_u8(X: T.Tensor((8, 32), "uint8"), Y: T.Tensor((32, 8), "uint8")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((8, 32), "uint8")
        y = T.alloc_fragment((32, 8), "uint8")
        T.copy(X, x)
        for i in T.serial(8):  # the hint's element loop (test_ascend_fixes_s21.py's transposing map)
            for j in T.serial(32):
                y[j, i] = x[i, j]
        T.copy(y, Y)


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_r2_uint8_transpose_by_elements(target):
    x = (np.arange(8 * 32) * 7 % 256).astype(np.uint8).reshape(8, 32)
    np.testing.assert_array_equal(run_on(_transpose_u8, target, [-1], x), x.T)


# --------------------------------------------------------------------------------------------- labels
N = 13
EDGE = [N - 1, N, N + 1, -1, -2, I64.min, I64.max, 2 ** 32 + 2, 0, N - 4, 2 ** 31 - 1, -2 ** 31]
COND = {"plus3_lt": lambda i, j, bx, l: j + 3 < l, "rev_eq": lambda i, j, bx, l: N - 1 - j == l,
        "ij_ge": lambda i, j, bx, l: i + j >= l, "bx_eq": lambda i, j, bx, l: j + bx * 5 == l}


def _label_forms(R):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), L: T.Tensor((M,), "int64"), A: T.Tensor((M, N), "float32"),
             B: T.Tensor((M, N), "float32"), Cc: T.Tensor((M, N), "float32"), D: T.Tensor((M, N), "float32"),
             G: T.Tensor((M, N), "float32"), W: T.Tensor((M, N), "float32"), K: T.Tensor((M, N), "float32"),
             LO: T.Tensor((M,), "int64")):
        with T.Kernel(T.ceildiv(M, R)) as bx:
            x = T.alloc_fragment((R, N), "float32")
            lab = T.alloc_fragment((R,), "int64")
            a = T.alloc_fragment((R, N), "float32")
            b = T.alloc_fragment((R, N), "float32")
            c = T.alloc_fragment((R, N), "float32")
            d = T.alloc_fragment((R, N), "float32")
            g = T.alloc_fragment((R, N), "float32")
            w = T.alloc_fragment((R, N), "float32")
            k = T.alloc_fragment((R, N), "float32")
            T.copy(X[bx * R, 0], x)
            T.copy(L[bx * R], lab)
            for i, j in T.Parallel(R, N):
                a[i, j] = T.where(j + 3 < lab[i], x[i, j], 0.0)
                b[i, j] = T.where(N - 1 - j == lab[i], x[i, j], 0.0)
                c[i, j] = T.where(i + j >= lab[i], x[i, j], 0.0)
                d[i, j] = T.where(j + bx * 5 == lab[i], x[i, j], 0.0)
                g[i, j] = T.where(j == lab[i], x[i, T.min(T.max(lab[i], 0), N - 1)], 0.0)  # a gather and a mask
                w[i, j] = T.where(j <= lab[i], x[i, j], 0.0) + T.where(j > lab[i], 2.0 * x[i, j], 0.0)
                k[i, j] = 0.0
            for i, j in T.Parallel(R, N):
                if j < lab[i]:
                    k[i, j] = x[i, j]
            T.copy(a, A[bx * R, 0])
            T.copy(b, B[bx * R, 0])
            T.copy(c, Cc[bx * R, 0])
            T.copy(d, D[bx * R, 0])
            T.copy(g, G[bx * R, 0])
            T.copy(w, W[bx * R, 0])
            T.copy(k, K[bx * R, 0])
            T.copy(lab, LO[bx * R])

    return main


@pytest.mark.parametrize("R, M", [(1, 12), (3, 13), (8, 5)])
def test_int64_label_forms_at_the_clamp_edges(R, M):
    lab = np.array([EDGE[r % len(EDGE)] for r in range(M)], np.int64)
    x = (np.arange(M * N, dtype=np.float32).reshape(M, N) + 1) / 4
    i, j, bx, l = (np.arange(M) % R)[:, None], np.arange(N)[None, :], (np.arange(M) // R)[:, None], lab[:, None]
    want = [np.where(COND[f](i, j, bx, l), x, 0) for f in COND]
    want.append(np.where(j == l, x[np.arange(M), np.clip(lab, 0, N - 1)][:, None], 0))
    want.append(np.where(j <= l, x, 2 * x))
    want.append(np.where(j < l, x, 0))
    for target in ("cpu", TARGET):
        got = run_on(_label_forms(R), target, [-8, -7, -6, -5, -4, -3, -2, -1], x, lab)
        for n, (gg, ww) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(gg, ww.astype(np.float32), err_msg=f"{target} R={R} output {n}")
        np.testing.assert_array_equal(got[-1], lab, err_msg=f"{target} R={R} labels stored back")


def _two_column_labels(R):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), L: T.Tensor((M, 3), "int64"), P: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, R)) as bx:
            x = T.alloc_fragment((R, N), "float32")
            p = T.alloc_fragment((R, N), "float32")
            lab = T.alloc_fragment((R, 3), "int64")  # rows of 24 B: padded, zeroed as int32 pairs in a tail
            T.copy(X[bx * R, 0], x)
            T.copy(L[bx * R, 0], lab)
            for i, j in T.Parallel(R, N):
                p[i, j] = T.where((j >= lab[i, 0]) and (j < lab[i, 2]), x[i, j], 0.0)
            T.copy(p, P[bx * R, 0])

    return main


def test_int64_label_ranges_from_a_2d_tile():
    M = 7
    lab = np.array([[r % 5 - 1, 2 ** 40, (r * 3) % 14 if r != 4 else I64.max] for r in range(M)], np.int64)
    x = np.arange(M * N, dtype=np.float32).reshape(M, N) + 1
    j = np.arange(N)[None, :]
    want = np.where((j >= lab[:, :1]) & (j < lab[:, 2:]), x, 0).astype(np.float32)
    for target in ("cpu", TARGET):
        np.testing.assert_array_equal(run_on(_two_column_labels(3), target, [-1], x, lab), want, err_msg=target)


def _cast_plus_one(R):
    M = T.symbolic("M")

    @T.prim_func
    def main(L: T.Tensor((M,), "int64"), O: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, R)) as bx:
            lab = T.alloc_fragment((R,), "int64")
            l32 = T.alloc_fragment((R,), "int32")
            T.copy(L[bx * R], lab)
            for i in T.Parallel(R):  # one scalar step per element, then one vector add
                l32[i] = T.cast(lab[i], "int32") + 1
            T.copy(l32, O[bx * R])

    return main


@pytest.mark.parametrize("R, M", [(1, 1), (8, 5), (8, 17)])
def test_int64_cast_in_a_1d_map_with_tails(R, M):
    lab = np.array([EDGE[r % len(EDGE)] if abs(EDGE[r % len(EDGE)]) > 2 ** 40 else EDGE[r % len(EDGE)] + r
                    for r in range(M)], np.int64)
    want = (lab.astype(np.int32).astype(np.int64) + 1).astype(np.int32)  # (astype wraps, as T.cast does)
    for target in ("cpu", TARGET):
        np.testing.assert_array_equal(run_on(_cast_plus_one(R), target, [-1], lab), want, err_msg=target)


@T.prim_func
def _scalar_label_row(X: T.Tensor((1, N), "float32"), n: T.int64, P: T.Tensor((1, N), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((1, N), "float32")
        p = T.alloc_fragment((1, N), "float32")
        T.copy(X[0, 0], x)
        for i, j in T.Parallel(1, N):
            p[i, j] = T.where(j == n, x[i, j], 0.0) + T.where(j + 2 >= n, 1.0, 0.0)
        T.copy(p, P[0, 0])


def test_int64_scalar_label_in_one_row():
    x = np.arange(N, dtype=np.float32)[None, :] + 1
    j = np.arange(N)[None, :]
    for n in (N - 1, N, -1, -2, I64.min, I64.max, 2 ** 32 + 2):
        want = (np.where(j == n, x, 0) + np.where(j + 2 >= n, 1.0, 0)).astype(np.float32)
        for target in ("cpu", TARGET):
            np.testing.assert_array_equal(run_on(_scalar_label_row, target, [-1], x, n), want, err_msg=f"{target} {n}")


# --------------------------------------------------------------------------------------------- R4 (fixed: h-wrap34)
def _int32_plus_int64_scalar(form):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), c: T.int64, Y: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), "int32")
            y = T.alloc_fragment((N,), "int32")
            T.copy(X, x)
            for j in T.Parallel(N):
                if form == "add":
                    y[j] = x[j] + c  # int64 arithmetic, wrapped into int32 at the store
                elif form == "floordiv":
                    y[j] = x[j] // c
                else:  # the same sum: the store wraps modulo 2^32 either way
                    y[j] = x[j] + T.cast(c, "int32")
            T.copy(y, Y)

    return main


def _int32_plus_int64_scalar_case(form, target):
    x = np.array([0, 1, -1, 7, -8, 1000, -1000, 123456, -987654, 5, 6, 7, 8], np.int32)
    for c in (3, 2 ** 32 + 5, -2 ** 40 - 7):  # (sums within int32 after the wrap: the checker reports leaving it)
        want = x.astype(np.int64) // c if form == "floordiv" else x.astype(np.int64) + c
        want = want.astype(np.int32)  # (astype wraps, as the int32 store does)
        np.testing.assert_array_equal(run_on(_int32_plus_int64_scalar(form), target, [-1], x, c), want,
                                      err_msg=f"{target} {form} c={c}")


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_r4_int32_tile_plus_a_cast_int64_scalar_runs(target):
    _int32_plus_int64_scalar_case("cast", target)


@pytest.mark.parametrize("form", ["add", "floordiv"])
def test_r4_int32_tile_with_an_int64_scalar_runs_on_cpu(form):
    _int32_plus_int64_scalar_case(form, "cpu")


# review33 R4, fixed by h-wrap34: x[j] + c / x[j] // c (int32 tiles, an int64 scalar parameter c) run exactly on
# ascend910b (the int32 forms with c a scalar that may leave int32); it was an error ('conversion from int32 to
# int64', '// on int64 tile data') whose hints were no fix (T.cast(c, "int32") changes the quotient)
@pytest.mark.parametrize("form", ["add", "floordiv"])
def test_r4_int32_tile_with_an_int64_scalar(form):
    _int32_plus_int64_scalar_case(form, TARGET)
