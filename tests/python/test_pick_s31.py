"""Session 31 (h-pick31): the one-hot pick `T.reduce_sum` over j of `T.where(j == s, e, 0)` is the
element itself (transform/pick_element.h; docs/ascend.md "Session 31: the one-hot pick as one
element (h-pick31)").

Checked on both targets (ascend910b with the simulator's checker on) at small odd shapes: labels at
column 0, the last column (in a 32-byte block's tail), outside the row (past it, negative, the int32
extremes); -0.0 and NaN at the label, NaN and inf elsewhere; float32 and bfloat16 pick tiles; one-row
and multi-row blocks (a block with rows past the tensor) and a 1-D pick at a scalar; against float64
numpy and bit for bit against the form the rewrite leaves alone (`T.where(j != s, 0.0, e)`).
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

I32 = np.iinfo(np.int32)
N = 37  # 4 float32 32-byte blocks + a 5-column tail (2 bfloat16 blocks + 5)


@tw.jit(out_idx=[-1])
def pick_rows(N, R, dtype, eq):
    """P[r] = sum_j where(j == Lab[r], 2 * X[r, j], 0) in a (R, N) pick tile of `dtype` (eq=False:
    the same as `where(j != Lab[r], 0, ...)`, which stays a map and a sum)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Lab: T.Tensor((M,), "int32"), P: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, R)) as bx:
            x = T.alloc_fragment((R, N), "float32")
            p = T.alloc_fragment((R, N), dtype)
            lab = T.alloc_fragment((R,), "int32")
            d = T.alloc_fragment((R,), dtype)
            T.copy(Lab[bx * R], lab)
            T.copy(X[bx * R, 0], x)
            for i, j in T.Parallel(R, N):
                if eq:  # compile-time: chosen while parsing
                    p[i, j] = T.where(j == lab[i], x[i, j] * 2.0, 0.0)
                else:
                    p[i, j] = T.where(j != lab[i], 0.0, x[i, j] * 2.0)
            T.reduce_sum(p, d, dim=1)
            T.copy(d, P[bx * R])

    return main


@tw.jit(out_idx=[-1])
def pick_scalar(N, eq):
    """P[0] = sum_j where(s == j, X[j], 0) of a 1-D tile, s a scalar argument."""

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), s: T.int32, P: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), "float32")
            p = T.alloc_fragment((N,), "float32")
            d = T.alloc_fragment((1,), "float32")
            T.copy(X[0], x)
            for j in T.Parallel(N):
                if eq:
                    p[j] = T.where(s == j, x[j], 0.0)
                else:
                    p[j] = T.where(j != s, 0.0, x[j])
            T.reduce_sum(p, d, dim=0)
            T.copy(d, P[0])

    return main


def _ref(x, lab, dtype):
    """float64 numpy: the element (times 2) at the label, +0.0 outside the row; -0.0 becomes +0.0."""
    cols = x.shape[1]
    inside = (lab >= 0) & (lab < cols)
    v = np.where(inside, x.astype(np.float64)[np.arange(len(lab)), np.clip(lab, 0, cols - 1)] * 2, 0.0) + 0.0
    return v.astype(np.float32).astype(tw.testing.np_dtype(dtype)).astype(np.float64)


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


LABELS = np.array([0, N - 1, 33, N, -1, I32.max, I32.min, 5, 6], np.int32)


# (40001, 1): a row wider than UB on ascend910b, in column blocks (each block's pick the element at
# the label minus the block's start, or nothing)
@pytest.mark.parametrize("N, R, dtype", [(N, 1, "float32"), (N, 4, "bfloat16"), (40001, 1, "float32")])
def test_pick_is_the_element(N, R, dtype):
    rng = np.random.default_rng(R)
    M = len(LABELS)  # R = 4: 3 blocks, the last with 3 rows past the tensor
    x = rng.standard_normal((M, N)).astype(np.float32)
    labels = LABELS.copy()
    if N > 100:
        labels[2] = 8448 * 2 + 1  # past the first blocks
        labels[0], labels[1], labels[3] = N - 2, N - 1, N  # the last block's tail, past the row
    x[7, 5] = -0.0         # -0.0 at the label: +0.0, as the sum gives
    x[8, 6] = np.nan       # NaN at the label: NaN
    x[0, 1:] = np.nan      # NaN and inf in the other columns are never summed
    x[1, 0] = np.inf
    outs = {}
    for target in ("cpu", TARGET):
        for eq in (True, False):
            k = pick_rows(N, R, dtype, eq, target=target)
            run = run_checked if target == TARGET else (lambda k, *a: k(*a))
            outs[target, eq] = np.asarray(run(k, x.copy(), labels.copy()))
    ref = _ref(x, labels, dtype)
    got = outs["cpu", True].astype(np.float64)
    np.testing.assert_array_equal(got, ref)  # exact: one element, one rounding
    assert np.signbit(ref[7]) == np.signbit(got[7]) == False  # noqa: E712
    for key, out in outs.items():  # bit for bit: both targets, both forms
        np.testing.assert_array_equal(_bits(out), _bits(outs["cpu", False]), err_msg=str(key))
    # the rewritten kernels hold no sum; the comparison form keeps its map and sum
    for target in ("cpu", TARGET):
        assert "reduce sum p" not in pick_rows(N, R, dtype, True, target=target).get_ir("pick_element")
        assert "reduce sum p" in pick_rows(N, R, dtype, False, target=target).get_ir("pick_element")


def test_pick_at_a_scalar():
    x = np.random.default_rng(3).standard_normal(N).astype(np.float32)
    x[2] = -0.0
    for s in (0, 2, N - 1, N, -3):
        outs = []
        for target in ("cpu", TARGET):
            for eq in (True, False):
                k = pick_scalar(N, eq, target=target)
                run = run_checked if target == TARGET else (lambda k, *a: k(*a))
                outs.append(np.asarray(run(k, x.copy(), s)))
        want = np.float32(x[s] + np.float32(0.0)) if 0 <= s < N else np.float32(0.0)
        for out in outs:
            np.testing.assert_array_equal(_bits(out), _bits(np.array([want], np.float32)), err_msg=f"s={s}")
    for target in ("cpu", TARGET):
        assert "reduce sum p" not in pick_scalar(N, True, target=target).get_ir("pick_element")
