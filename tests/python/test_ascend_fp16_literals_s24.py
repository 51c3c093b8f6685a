"""Session 24 (h-ascnum12, hunt12 F5 / F6): a float literal in a compare, a select, T.max / T.min or an
index-mask fill of a float16 / bfloat16 / float32 tile keeps its float32 value on both targets (literals
are float32: docs/language.md), bit for bit, for every comparison operator and literal class -- exact in
float16, inexact (0.1, -0.1), between 65504 and float16's overflow threshold (65519), past float16's
range (1e5, 1e30), tiny (1e-8: below float16's normals), -inf and NaN -- into float32 and 16-bit tiles.
Each result is checked against numpy's float32 computation rounded to the output dtype, and cpu against
ascend910b bit for bit."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

LITERALS = [0.5, -1e4, 65504.0, 0.1, -0.1, 65519.0, 1e5, -1e30, 1e-8, float("-inf"), float("nan")]
# (tile dtype, output dtype): float32 -> "same" is float32 -> float32, the same kernel and inputs
# (session 27, h-citrim15: it ran twice)
DTYPE_PAIRS = [("float16", "float32"), ("float16", "same"), ("bfloat16", "float32"), ("bfloat16", "same"),
               ("float32", "float32")]
# A float32 tile holds every literal as it is (literals are float32): the classes that matter for
# 16-bit tiles (past float16's range, below its normals, between 65504 and 65519) are ordinary
# float32 normals there. float32 tiles run one literal of each float32 class (exact, inexact in
# decimal, huge, -inf, NaN), 16-bit tiles every literal (session 27, h-citrim15: CI time; one
# compile a case).
F32_CLASSES = {0.0, 0.5, 0.1, -1e30, float("-inf")}


def _cases(literals):
    return [(c, d, y) for d, y in DTYPE_PAIRS for c in literals
            if d != "float32" or c in F32_CLASSES or c != c]   # (c != c: NaN)
N = 32
OPS = ["<", "<=", ">", ">=", "==", "!="]
NP_OPS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
          "!=": np.not_equal}


def _x_values(c, dtype):
    """The literal rounded to dtype and its dtype neighbours (by bits), signed zeros, the float16 range
    ends, float16's smallest normal and subnormal, +-inf, NaN."""
    t = np_dtype(dtype)
    vals = [0.0, -0.0, 1.0, -1.0, 3.0, 65504.0, -65504.0, 6.103515625e-05, 5.960464477539063e-08,
            float("inf"), float("-inf"), float("nan")]
    v = np.array(vals, np.float32).astype(t)
    f = np.float32(c)
    if np.isfinite(f) and f != 0:
        with np.errstate(over="ignore"):
            r = np.array([f]).astype(t)
        ut = np.uint32 if dtype == "float32" else np.uint16
        b = r.view(ut)[0]
        v = np.concatenate([v, r, np.array([b + 1, b - 1], ut).view(t)])
    return np.concatenate([v, np.zeros(N - len(v), t)])[:N]


def _kernel(c, dtype, ydtype):
    rows = len(OPS) + 5

    @T.prim_func
    def k(X: T.Tensor((N,), dtype), Z: T.Tensor((N,), dtype), Y: T.Tensor((rows, N), ydtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), dtype)
            z = T.alloc_fragment((N,), dtype)
            y = T.alloc_fragment((rows, N), ydtype)
            T.copy(X[0], x)
            T.copy(Z[0], z)
            for i in T.Parallel(N):
                y[0, i] = T.where(x[i] < c, 1.0, 0.0)
                y[1, i] = T.where(x[i] <= c, 1.0, 0.0)
                y[2, i] = T.where(x[i] > c, 1.0, 0.0)
                y[3, i] = T.where(x[i] >= c, 1.0, 0.0)
                y[4, i] = T.where(x[i] == c, 1.0, 0.0)
                y[5, i] = T.where(x[i] != c, 1.0, 0.0)
                y[6, i] = T.where(x[i] > z[i], x[i], c)
                y[7, i] = T.where(x[i] > z[i], c, x[i])
                y[8, i] = T.where(x[i] >= c, x[i], -2.0)
                y[9, i] = T.max(x[i], c)
                y[10, i] = T.min(x[i], c)
            T.copy(y, Y[0, 0])
    return k


def _want(c, x, z, ydtype):
    xf, zf, cf = x.astype(np.float32), z.astype(np.float32), np.float32(c)
    one, zero = np.float32(1), np.float32(0)
    rows = [np.where(NP_OPS[o](xf, cf), one, zero) for o in OPS]
    # T.max / T.min of a NaN: NaN (numpy's maximum / minimum)
    rows += [np.where(xf > zf, xf, cf), np.where(xf > zf, cf, xf), np.where(xf >= cf, xf, np.float32(-2)),
             np.maximum(xf, cf), np.minimum(xf, cf)]
    with np.errstate(over="ignore"):
        return np.stack(rows).astype(np_dtype(ydtype))


def _run(kernel, target, *args):
    out = kernel(*args) if target == "cpu" else run_checked(kernel, *args)
    return np.asarray(out[-1] if isinstance(out, (list, tuple)) else out)


def _same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(
        np.where(np.isnan(a), 0, a).view(np.uint32), np.where(np.isnan(b), 0, b).view(np.uint32))


@pytest.mark.parametrize("c,dtype,ydtype", _cases(LITERALS), ids=str)
def test_compare_select_max_min_with_a_literal(c, dtype, ydtype):
    ydtype = dtype if ydtype == "same" else ydtype
    x = _x_values(c, dtype)
    z = np.roll(x, 3)
    want = _want(c, x, z, ydtype)
    got = {}
    for target in ("cpu", TARGET):
        kern = tw.compile(_kernel(c, dtype, ydtype), out_idx=[-1], target=target)
        got[target] = _run(kern, target, x, z)
        bad = ~((got[target].astype(np.float32) == want.astype(np.float32)) |
                (np.isnan(got[target].astype(np.float32)) & np.isnan(want.astype(np.float32))))
        assert not bad.any(), (f"{target}: literal {c} {dtype} -> {ydtype}: rows {sorted(set(np.nonzero(bad)[0]))}, "
                               f"x {x[np.nonzero(bad)[1]]} got {got[target][bad]} want {want[bad]}")
    assert _same_bits(got["cpu"], got[TARGET]), f"cpu and {TARGET} differ in bits (signed zeros?)"


def _mask_kernel(n, c, dtype, ydtype):
    @T.prim_func
    def k(X: T.Tensor((n, n), dtype), Y: T.Tensor((3, n, n), ydtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n, n), dtype)
            y = T.alloc_fragment((3, n, n), ydtype)
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(n, n):
                y[0, i, j] = T.where(j <= i, x[i, j], c)   # causal
                y[1, i, j] = T.where(j < 5, x[i, j], c)    # a tail
                y[2, i, j] = T.where(j > i, c, x[i, j])    # the literal as the kept value
            T.copy(y, Y[0, 0, 0])
    return k


@pytest.mark.parametrize("c,dtype,ydtype", _cases([0.0, -1e4, 0.1, 65519.0, -1e30, 1e-8, float("-inf")]), ids=str)
def test_index_mask_fill_keeps_the_literal(c, dtype, ydtype):
    ydtype = dtype if ydtype == "same" else ydtype
    n = 16
    x = np.random.default_rng(0).standard_normal((n, n)).astype(np_dtype(dtype))
    xf, cf = x.astype(np.float32), np.float32(c)
    i, j = np.indices((n, n))
    with np.errstate(over="ignore"):
        want = np.stack([np.where(j <= i, xf, cf), np.where(j < 5, xf, cf), np.where(j > i, cf, xf)]).astype(
            np_dtype(ydtype))
    got = {}
    for target in ("cpu", TARGET):
        got[target] = _run(tw.compile(_mask_kernel(n, c, dtype, ydtype), out_idx=[-1], target=target), target, x)
        np.testing.assert_array_equal(got[target].astype(np.float32), want.astype(np.float32),
                                      err_msg=f"{target}: fill {c} {dtype} -> {ydtype}")
    assert _same_bits(got["cpu"], got[TARGET])


def test_bfloat16_in_place_mask_stays_exact():
    """The in-place form (session 23's F1) still runs and is exact, with an inexact fill too."""
    n = 16

    @T.prim_func
    def k(X: T.Tensor((n, n), "bfloat16"), Y: T.Tensor((n, n), "bfloat16")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n, n), "bfloat16")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(n, n):
                x[i, j] = T.where(j <= i, x[i, j], 0.1)
            T.copy(x, Y[0, 0])

    x = np.random.default_rng(2).standard_normal((n, n)).astype(np_dtype("bfloat16"))
    i, j = np.indices((n, n))
    want = np.where(j <= i, x.astype(np.float32), np.float32(0.1)).astype(np_dtype("bfloat16"))
    for target in ("cpu", TARGET):
        got = _run(tw.compile(k, out_idx=[-1], target=target), target, x)
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32), err_msg=target)
