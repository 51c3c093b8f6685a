"""Session 31 review (h-review31): probes of the session's merges that found no defect, kept as
cheap regression tests of the forms the merged branches' own tests did not cover
(/work/review31-findings.md, docs/testing.md "Session 31: review of the session's merges").

- h-xent: the index mask `j == s` in its shifted forms (`j + 3 == lab[i]`, `7 - j == lab[i]`), an
  int8 label tile, a kernel scalar `s` and a multi-row map (block_M 3, a comparison), on cpu and on
  ascend910b (checker on), exactly against numpy; labels at the dtype's extremes keep no column.
- h-i32b: scalar `//` / `%` / ceildiv of a `%` by a run-time divisor that may be negative (the
  floor's result is then <= 0: not a dividend C's `/` may divide), on cpu and on ascend910b (no
  'negative dividend' report, Python's floor semantics).
- h-rect: the rectangle with op(A) and B transposed, float16 inputs and a K range past one packed block
  (a_band overwriting and accumulating: rows the rectangle leaves are 0 / keep C).
"""
import sys
import pathlib

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402


def _pick(N, bm, ldt, form):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Lab: T.Tensor((M,), ldt), s: T.int32, P: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            p = T.alloc_fragment((bm, N), "float32")
            lab = T.alloc_fragment((bm,), ldt)
            T.copy(Lab[bx * bm], lab)
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                if form == 0:
                    p[i, j] = T.where(j + 3 == lab[i], x[i, j], 0.0)
                if form == 1:
                    p[i, j] = T.where(7 - j == lab[i], x[i, j], 0.0)
                if form == 2:
                    p[i, j] = T.where(s == j - 2, x[i, j], -1.0)
            T.copy(p, P[bx * bm, 0])
    return main


@pytest.mark.parametrize("ldt,bm,form", [("int8", 1, 0), ("int32", 1, 1), ("int32", 3, 2)])
def test_index_mask_shifted_forms_both_targets(ldt, bm, form):
    N, M = 37, 5
    rng = np.random.default_rng(31)
    x = rng.standard_normal((M, N)).astype(np.float32)
    info = np.iinfo(ldt)
    lab = np.array([0, N + 2, info.max, info.min, 5], dtype=ldt)
    j, lab64 = np.arange(N)[None, :], lab.astype(np.int64)[:, None]
    for s in (3, -2**31):
        keep = {0: j + 3 == lab64, 1: 7 - j == lab64, 2: np.broadcast_to(s == j - 2, (M, N))}[form]
        ref = np.where(keep, x, -1.0 if form == 2 else 0.0).astype(np.float32)
        for target in ("cpu", TARGET):
            P = np.full((M, N), 9.0, np.float32)
            k = tw.compile(_pick(N, bm, ldt, form), target=target)
            k(x, lab, s, P) if target == "cpu" else run_checked(k, x, lab, s, P)
            np.testing.assert_array_equal(P, ref, err_msg=f"{target} s={s}")
        if form != 2:
            break  # s is read by form 2 only


def _divs():
    @T.prim_func
    def main(x: T.int32, n: T.int32, O: T.Tensor((4, 8), "int32")):
        with T.Kernel(4) as bx:
            o = T.alloc_fragment((8,), "int32")
            T.clear(o)
            o[0] = (x % n) // 2
            o[1] = T.ceildiv(x % n, 4)
            o[2] = ((bx - 3) % 4) // 2
            o[3] = (bx * 8 - x) // 4
            o[4] = T.min(x, 0 - n) // 3
            T.copy(o, O[bx, 0])
    return main


def test_divisions_of_possibly_negative_values_both_targets():
    kerns = {t: tw.compile(_divs(), target=t) for t in ("cpu", TARGET)}
    for x, n in ((13, -7), (5, 3), (100, -3)):
        ref = np.zeros((4, 8), np.int32)
        for b in range(4):
            ref[b, :5] = [(x % n) // 2, -(-(x % n) // 4), ((b - 3) % 4) // 2, (b * 8 - x) // 4, min(x, -n) // 3]
        for t, k in kerns.items():
            O = np.zeros((4, 8), np.int32)
            k(x, n, O) if t == "cpu" else run_checked(k, x, n, O)
            np.testing.assert_array_equal(O, ref, err_msg=f"{t} x={x} n={n}")


def _rect_gemm(M, N, K, clear):
    @T.prim_func
    def main(A: T.Tensor((K, M), "float16"), B: T.Tensor((N, K), "float16"), Init: T.Tensor((M, N), "float32"),
             lo: T.int32, hi: T.int32, r0: T.int32, r1: T.int32, c0: T.int32, c1: T.int32,
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((K, M), "float16")
            b = T.alloc_shared((N, K), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.copy(Init, c)
            T.gemm(a, b, c, transpose_A=True, transpose_B=True, clear_accum=clear, a_band=(lo, hi), rows=(r0, r1),
                   cols=(c0, c1))
            T.copy(c, C)
    return main


def test_rect_a_band_transposed_float16_past_one_k_block():
    M, N, K = 29, 65, 300
    rng = np.random.default_rng(31)
    i, k = np.arange(M)[:, None], np.arange(K)[None, :]
    b = (rng.integers(-3, 4, (K, N)) / 2.0).astype(np.float16)
    init = (rng.integers(-3, 4, (M, N)) / 2.0).astype(np.float32)
    for clear in (True, False):
        kern = tw.compile(_rect_gemm(M, N, K, clear), out_idx=[-1])
        for case in ((-5, 280, 3, 27, 150, 290), (0, 1, 3, M - 1, 2, K - 1), (-M, K, -3, 99, 200, 201)):
            lo, hi, r0, r1, c0, c1 = case
            inside = (k - i >= lo) & (k - i < hi) & (i >= r0) & (i < r1) & (k >= c0) & (k < c1)
            a = np.where(inside, rng.integers(-3, 4, (M, K)) / 2.0, 0).astype(np.float16)  # op(A): 0 outside
            ref = a.astype(np.float64) @ b.astype(np.float64) + (0 if clear else init)
            out = kern(np.ascontiguousarray(a.T), np.ascontiguousarray(b.T), init, *case)
            np.testing.assert_array_equal(out, ref, err_msg=f"{case} clear={clear}")
