"""Session 31 (h-xent): the label pick `T.where(j == lab[i], x[i, j], 0)` of a one-row tile as an
index mask on ascend910b (docs/ascend.md "Session 31: the label pick as an index mask (h-xent)").

legalize_vector reads lab[i] of a one-row map with the scalar unit (hoist_scalar_reads) and keeps
the one column j == lab[i] by filling the columns around it (emit_where), instead of comparing the
column index with the label in int32 at every element. A label outside the row (negative, past the
last column, the int32 extremes) keeps no column, as the comparison does. Checked here on small odd
shapes, the simulator's checker on (run_checked): labels at column 0, the last column (in a tail),
the middle and outside the row; a row in column blocks (the label in the first block, in the last
block's tail); float32 and bfloat16 inputs; against float64 numpy, against cpu and bitwise against
the comparison form (`j != lab[i]`, which stays a comparison); the printed AscendC of the pick has no
Compare or Select. And `j < lab[i]` (a prefix) the same way.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

I32 = np.iinfo(np.int32)


def _kernel(N, dtype, form):
    """loss[r] = logsumexp(X[r, :]) - X[r, lab[r]], one row per block; the pick written as `form`
    (0: j == lab[i]; 1: the label clamped, on the left; 2: j != lab[i], the comparison form; 3: the
    sum of the first lab[r] logits, j < lab[i]; 4: the same compared in float32)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Lab: T.Tensor((M,), "int32"), L: T.Tensor((M,), "float32")):
        with T.Kernel(M) as bx:
            x = T.alloc_fragment((1, N), "float32")
            p = T.alloc_fragment((1, N), "float32")
            lab = T.alloc_fragment((1,), "int32")
            mx = T.alloc_fragment((1,), "float32")
            s = T.alloc_fragment((1,), "float32")
            xl = T.alloc_fragment((1,), "float32")
            T.copy(Lab[bx], lab)
            T.copy(X[bx, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(1, N):
                if form == 0:  # compile-time: chosen while parsing
                    p[i, j] = T.where(j == lab[i], x[i, j], 0.0)
                if form == 1:  # bench/op_zoo.py's clamp of the label
                    p[i, j] = T.where(T.min(T.max(lab[i], 0), N - 1) == j, x[i, j], 0.0)
                if form == 2:
                    p[i, j] = T.where(j != lab[i], 0.0, x[i, j])
                if form == 3:  # a prefix of the row, as long as the label says
                    p[i, j] = T.where(j < lab[i], x[i, j], 0.0)
                if form == 4:  # the same compared in float32: not a mask (its bound is no int32)
                    p[i, j] = T.where(j < T.cast(lab[i], "float32"), x[i, j], 0.0)
            T.reduce_sum(p, xl, dim=1)
            for i, j in T.Parallel(1, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(1):
                s[i] = mx[i] + T.log(s[i]) - xl[i]
            T.copy(s, L[bx])

    return main


@tw.jit(out_idx=[-1])
def xent_eq(N, dtype="float32"):
    return _kernel(N, dtype, 0)


@tw.jit(out_idx=[-1])
def xent_clamped(N, dtype="float32"):
    return _kernel(N, dtype, 1)


@tw.jit(out_idx=[-1])
def xent_ne(N, dtype="float32"):  # the comparison form: != is no mask
    return _kernel(N, dtype, 2)


@tw.jit(out_idx=[-1])
def xent_prefix(N, dtype="float32"):
    return _kernel(N, dtype, 3)


@tw.jit(out_idx=[-1])
def xent_prefix_f32(N, dtype="float32"):
    return _kernel(N, dtype, 4)


def _compares(kernel, pick):
    """Compare / CompareScalar / Select calls of the printed AscendC at the kernel line holding `pick`."""
    line = next(n for n, text in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1) if pick in text)
    return sum(1 for t in kernel.get_source().splitlines()
               if ("Compare" in t or "Select(" in t) and t.endswith(f"// line {line}"))


def _ref(x, lab, clamp=False):
    xf = x.astype(np.float64)
    m = xf.max(1)
    lse = np.log(np.exp(xf - m[:, None]).sum(1)) + m
    N = x.shape[1]
    lab = np.clip(lab.astype(np.int64), 0, N - 1) if clamp else lab.astype(np.int64)
    inside = (lab >= 0) & (lab < N)
    return lse - np.where(inside, xf[np.arange(len(lab)), np.clip(lab, 0, N - 1)], 0.0)


CASES = [
    # one tile per row, 4 whole repeats + a 45-column tail; labels at 0, the last column, the middle,
    # one past the end, negative and the int32 extremes (the kept column's bound cannot wrap)
    (301, "float32", [0, 300, 150, 301, -7, I32.max, I32.min]),
    # bfloat16 input computed in float32: 64 repeats + a 4-column tail; the label in the tail, at
    # the tail's first column and near the start
    (4100, "bfloat16", [4099, 4096, 5]),
    # a row wider than UB: column blocks (the kept column is lab - the block's start); the label in
    # the last block's tail, in the first block, and past the end
    (40001, "float32", [40000, 3, 40001]),
]


@pytest.mark.parametrize("N, dtype, labels", CASES)
def test_label_pick_as_index_mask(N, dtype, labels):
    rng = np.random.default_rng(N)
    M = len(labels)
    x = randn((M, N), dtype, scale=3.0, seed=rng)
    lab = np.array(labels, np.int32)
    k = xent_eq(N, dtype=dtype, target=TARGET)
    got = np.asarray(run_checked(k, x.copy(), lab.copy()), np.float64)
    cpu = np.asarray(xent_eq(N, dtype=dtype, target="cpu")(x.copy(), lab.copy()), np.float64)
    cmp = np.asarray(run_checked(xent_ne(N, dtype=dtype, target=TARGET), x.copy(), lab.copy()), np.float64)
    ref = _ref(x, lab)
    atol, rtol = 1e-4, 1e-5  # float32 arithmetic over the row (bfloat16 inputs are exact in float32)
    assert_close(got, ref, atol=atol, rtol=rtol, msg=f"cross_entropy {M}x{N} {dtype}")
    assert_close(got, cpu, atol=atol, rtol=rtol, msg=f"cross_entropy {M}x{N} {dtype} vs cpu")
    np.testing.assert_array_equal(got, cmp)  # bit for bit the comparison form's
    # the pick is fills around the kept column, not a comparison of the column index per element
    assert _compares(k, "T.where(j == lab[i]") == 0
    assert _compares(xent_ne(N, dtype=dtype, target=TARGET), "T.where(j != lab[i]") > 0


def test_clamped_label():
    # bench/op_zoo.py's T.min(T.max(lab[i], 0), N - 1), written on the left of the ==
    N = 301
    rng = np.random.default_rng(7)
    lab = np.array([-5, 0, 300, 9999, I32.min], np.int32)
    x = randn((len(lab), N), "float32", scale=3.0, seed=rng)
    got = np.asarray(run_checked(xent_clamped(N, target=TARGET), x.copy(), lab.copy()), np.float64)
    cpu = np.asarray(xent_clamped(N, target="cpu")(x.copy(), lab.copy()), np.float64)
    ref = _ref(x, lab, clamp=True)
    atol, rtol = TOLERANCES["float32"]
    assert_close(got, ref, atol=1e-4, rtol=1e-5, msg="clamped cross_entropy")
    assert_close(got, cpu, atol=atol, rtol=rtol, msg="clamped cross_entropy vs cpu")
    assert _compares(xent_clamped(N, target=TARGET), "== j, x[i, j], 0.0)") == 0


def test_prefix_bound_read_by_the_scalar_unit():
    # j < lab[i] in a one-row map: lab[i] read by the scalar unit, the condition a prefix mask;
    # bounds at 0, inside, the whole row, past it, negative and the int32 maximum
    N = 301
    rng = np.random.default_rng(11)
    lab = np.array([0, 5, 300, 301, -3, I32.max], np.int32)
    x = randn((len(lab), N), "float32", scale=3.0, seed=rng)
    k = xent_prefix(N, target=TARGET)
    got = np.asarray(run_checked(k, x.copy(), lab.copy()), np.float64)
    cpu = np.asarray(xent_prefix(N, target="cpu")(x.copy(), lab.copy()), np.float64)
    xf = x.astype(np.float64)
    m = xf.max(1)
    lse = np.log(np.exp(xf - m[:, None]).sum(1)) + m
    ref = lse - np.array([xf[r, :max(0, min(int(n), N))].sum() for r, n in enumerate(lab)])
    assert_close(got, ref, atol=1e-3, rtol=1e-5, msg="prefix sum")  # a float32 sum of up to 301 terms
    assert_close(got, cpu, atol=1e-3, rtol=1e-5, msg="prefix sum vs cpu")
    assert _compares(k, "T.where(j < lab[i]") == 0
    # a float32 bound is compared per element, as before (the masks take int32 bounds)
    lab = lab[:5]  # (2^31 - 1 is no float32)
    f32 = np.asarray(run_checked(xent_prefix_f32(N, target=TARGET), x[:5].copy(), lab.copy()), np.float64)
    np.testing.assert_array_equal(f32, got[:5])
