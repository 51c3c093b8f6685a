"""The NaN rule of T.max / T.min and T.reduce_max / T.reduce_min (docs/language.md): numpy's. An
elementwise max/min is NaN when either operand is NaN, in either operand order and in the scalar
forms; a max/min reduction (clear=True, and the clear=False merge with dst) is NaN when any element
(or dst) is NaN. Checked against np.maximum / np.minimum / np.max / np.min at odd shapes, NaN first,
in the middle, last, in every lane of a vector and in the tail, all-NaN rows, next to -inf/inf, for
float16 / bfloat16 / float32. Exact comparisons (max/min pick an element: no rounding; a float16 /
bfloat16 value is exact in float32). +0 / -0 order is unspecified: the inputs avoid -0.

ascend910b follows the rule whatever the Vector unit's Max / Min / WholeReduceMax/Min give for a NaN
operand (undocumented; the simulator drops a NaN operand, adversarially): legalize_vector's NaN
fix-ups (docs/ascend.md "Session 22: NaN through Max / Min, cheaply (h-nan10)").
"""
import sys
import pathlib

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

DTYPES = ["float32", "float16", "bfloat16"]
TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def _same(got, ref):
    """Equal values, NaN where the reference has NaN (compared in float64)."""
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), np.asarray(ref).astype(np.float64))


def _with_nans(shape, dtype, seed, frac=0.15):
    rng = np.random.default_rng(seed)
    x = rng.integers(-20, 21, shape).astype(np.float64)
    x[x == 0] = 1                                    # no signed zeros (their order is unspecified)
    u = rng.random(shape)
    x[u < frac] = np.nan
    x[(u >= frac) & (u < frac + 0.05)] = np.inf
    x[(u >= frac + 0.05) & (u < frac + 0.1)] = -np.inf
    return x.astype(np_dtype(dtype))


# ---------------------------------------------------------------------------------------------
# elementwise: both operand orders, tile-tile, tile-constant, tile-runtime scalar (cpu: a map
# writing a global tensor; ascend910b's forms are in test_elementwise_tiles_propagate_nan)

def elementwise(M, N, dtype):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), s: T.float32,
             O: T.Tensor((8, M, N), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            y = T.alloc_fragment((M, N), dtype)
            T.copy(X, x)
            T.copy(Y, y)
            for i, j in T.Parallel(M, N):
                O[0, i, j] = T.max(x[i, j], y[i, j])
                O[1, i, j] = T.max(y[i, j], x[i, j])
                O[2, i, j] = T.min(x[i, j], y[i, j])
                O[3, i, j] = T.min(y[i, j], x[i, j])
                O[4, i, j] = T.max(x[i, j], 0.0)
                O[5, i, j] = T.max(0.0, x[i, j])
                O[6, i, j] = T.min(x[i, j], s)
                O[7, i, j] = T.max(s, x[i, j])
    return main


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N", [(1, 1), (3, 37), (2, 130)])
@pytest.mark.parametrize("s", [2.5, float("nan"), float("-inf")])
def test_elementwise_max_min_propagate_nan(M, N, s, dtype):
    x, y = _with_nans((M, N), dtype, 1), _with_nans((M, N), dtype, 2)
    o = tw.compile(elementwise(M, N, dtype), target="cpu", out_idx=[3])(x, y, s)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    sd = np.float64(np.asarray(s, np.float32).astype(np_dtype(dtype)))
    for k, ref in enumerate([np.maximum(x64, y64), np.maximum(y64, x64), np.minimum(x64, y64), np.minimum(y64, x64),
                             np.maximum(x64, 0.0), np.maximum(0.0, x64), np.minimum(x64, sd), np.maximum(sd, x64)]):
        _same(o[k], ref)


def elementwise_tiles(M, N, dtype):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), s: T.float32,
             O0: T.Tensor((M, N), dtype), O1: T.Tensor((M, N), dtype), O2: T.Tensor((M, N), dtype),
             O3: T.Tensor((M, N), dtype), O4: T.Tensor((M, N), dtype), O5: T.Tensor((M, N), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            y = T.alloc_fragment((M, N), dtype)
            o0 = T.alloc_fragment((M, N), dtype)
            o1 = T.alloc_fragment((M, N), dtype)
            o2 = T.alloc_fragment((M, N), dtype)
            o3 = T.alloc_fragment((M, N), dtype)
            o4 = T.alloc_fragment((M, N), dtype)
            o5 = T.alloc_fragment((M, N), dtype)
            T.copy(X, x)
            T.copy(Y, y)
            for i, j in T.Parallel(M, N):
                o0[i, j] = T.max(x[i, j], y[i, j])
                o1[i, j] = T.min(y[i, j], x[i, j])
                o2[i, j] = T.max(x[i, j], 0.0)
                o3[i, j] = T.max(0.0, x[i, j])
                o4[i, j] = T.min(x[i, j], s)
                o5[i, j] = T.max(s, x[i, j])
            T.copy(o0, O0)
            T.copy(o1, O1)
            T.copy(o2, O2)
            T.copy(o3, O3)
            T.copy(o4, O4)
            T.copy(o5, O5)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s", [2.5, float("nan")])
def test_elementwise_tiles_propagate_nan(s, dtype, target):
    M, N = 4, 72
    x, y = _with_nans((M, N), dtype, 3), _with_nans((M, N), dtype, 4)
    outs = _run(tw.compile(elementwise_tiles(M, N, dtype), target=target, out_idx=[3, 4, 5, 6, 7, 8]), target, x, y, s)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    sd = np.float64(np.asarray(s, np.float32).astype(np_dtype(dtype)))
    for got, ref in zip(outs, [np.maximum(x64, y64), np.minimum(y64, x64), np.maximum(x64, 0.0), np.maximum(0.0, x64),
                               np.minimum(x64, sd), np.maximum(sd, x64)]):
        _same(got, ref)


# ---------------------------------------------------------------------------------------------
# reductions along rows (dim=1) and columns (dim=0), clear=True and the clear=False merge

def reduce2d(M, N, dim, dtype):
    R = M if dim == 1 else N

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), D: T.Tensor((R,), dtype), Mx: T.Tensor((R,), dtype),
             Mn: T.Tensor((R,), dtype), Mx2: T.Tensor((R,), dtype), Mn2: T.Tensor((R,), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            mx = T.alloc_fragment((R,), dtype)
            mn = T.alloc_fragment((R,), dtype)
            T.copy(X, x)
            T.reduce_max(x, mx, dim=dim)
            T.reduce_min(x, mn, dim=dim)
            T.copy(mx, Mx)
            T.copy(mn, Mn)
            T.copy(D, mx)
            T.copy(D, mn)
            T.reduce_max(x, mx, dim=dim, clear=False)
            T.reduce_min(x, mn, dim=dim, clear=False)
            T.copy(mx, Mx2)
            T.copy(mn, Mn2)
    return main


def _rows_placed(N, dtype):
    """Rows with NaN first, in the middle, last, all-NaN, none, next to -inf/inf, and one NaN in each
    of the first 40 positions (every lane of the cpu's float32 vector accumulators: 16 lanes with
    AVX-512, 8 with AVX2) and in the tail."""
    rows = []
    base = (np.arange(N) % 7 - 3).astype(np.float64)
    base[base == 0] = 5
    for pos in sorted({0, N // 2, N - 1} | set(range(0, min(N, 40)))):
        r = base.copy()
        r[pos] = np.nan
        rows.append(r)
    rows.append(np.full(N, np.nan))
    rows.append(base.copy())
    r = base.copy()
    r[0], r[-1] = -np.inf, np.inf
    rows.append(r)
    r = np.full(N, -np.inf)
    r[N // 2] = np.nan
    rows.append(r)
    r = np.full(N, np.inf)
    r[-1] = np.nan
    rows.append(r)
    return np.array(rows).astype(np_dtype(dtype))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N", [1, 5, 64, 67, 300, 128, 256])  # 128, 256: halved rows (the flag of the first halving's pairs)
def test_row_reduce_propagates_nan(N, dtype, target):
    x = _rows_placed(N, dtype)
    M = x.shape[0]
    d = np.where(np.arange(M) % 5 == 0, np.nan, np.where(np.arange(M) % 5 == 1, np.inf, 2.0)).astype(np_dtype(dtype))
    mx, mn, mx2, mn2 = _run(tw.compile(reduce2d(M, N, 1, dtype), target=target, out_idx=[2, 3, 4, 5]), target, x, d)
    x64, d64 = x.astype(np.float64), d.astype(np.float64)
    _same(mx, x64.max(1))
    _same(mn, x64.min(1))
    _same(mx2, np.maximum(d64, x64.max(1)))
    _same(mn2, np.minimum(d64, x64.min(1)))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N", [1, 3, 67])
def test_col_reduce_propagates_nan(N, dtype, target):
    x = _rows_placed(N, dtype).T.copy()          # the placed rows as columns
    M, R = x.shape
    d = np.where(np.arange(R) % 3 == 0, np.nan, 1.0).astype(np_dtype(dtype))
    mx, mn, mx2, mn2 = _run(tw.compile(reduce2d(N, R, 0, dtype), target=target, out_idx=[2, 3, 4, 5]), target, x, d)
    x64, d64 = x.astype(np.float64), d.astype(np.float64)
    _same(mx, x64.max(0))
    _same(mn, x64.min(0))
    _same(mx2, np.maximum(d64, x64.max(0)))
    _same(mn2, np.minimum(d64, x64.min(0)))


def reduce_middle(A, B, C, dtype):
    @T.prim_func
    def main(X: T.Tensor((A, B, C), dtype), Mx: T.Tensor((A, C), dtype), Mn: T.Tensor((A, C), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((A, B, C), dtype)
            mx = T.alloc_fragment((A, C), dtype)
            mn = T.alloc_fragment((A, C), dtype)
            T.copy(X, x)
            T.reduce_max(x, mx, dim=1)
            T.reduce_min(x, mn, dim=1)
            T.copy(mx, Mx)
            T.copy(mn, Mn)
    return main


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("A,B,C", [(2, 1, 3), (3, 9, 37), (2, 33, 70)])
def test_middle_axis_reduce_propagates_nan(A, B, C, dtype):
    x = _with_nans((A, B, C), dtype, 7, frac=0.05)
    mx, mn = tw.compile(reduce_middle(A, B, C, dtype), target="cpu", out_idx=[1, 2])(x)
    _same(mx, x.astype(np.float64).max(1))
    _same(mn, x.astype(np.float64).min(1))


# a map feeding the reduction (the cpu's fused map + reduce row pass) and a row max used after it,
# as softmax does: a NaN element makes the row max NaN, and the row's outputs NaN

def softmax_rows(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Mx: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            t = T.alloc_fragment((M, N), "float32")
            mx = T.alloc_fragment((M,), "float32")
            sm = T.alloc_fragment((M,), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                t[i, j] = x[i, j] * 2.0
            T.reduce_max(t, mx, dim=1)
            for i, j in T.Parallel(M, N):
                t[i, j] = T.exp(x[i, j] * 2.0 - mx[i])
            T.reduce_sum(t, sm, dim=1)
            for i, j in T.Parallel(M, N):
                t[i, j] = t[i, j] / sm[i]
            T.copy(mx, Mx)
            T.copy(t, Y)
    return main


@pytest.mark.parametrize("N", [7, 64, 257])
def test_fused_map_row_max_propagates_nan(N):
    x = _rows_placed(N, "float32")
    x = np.where(np.isinf(x), 1.0, x).astype(np.float32)      # finite, so the softmax of NaN-free rows is finite
    M = x.shape[0]
    mx, y = tw.compile(softmax_rows(M, N), target="cpu", out_idx=[1, 2])(x)
    ref_mx = (2.0 * x.astype(np.float64)).max(1)
    _same(mx, ref_mx)
    nan_rows = np.isnan(ref_mx)
    assert np.isnan(y[nan_rows]).all()
    e = np.exp(2.0 * x[~nan_rows].astype(np.float64) - ref_mx[~nan_rows, None])
    tw.testing.assert_close(y[~nan_rows].astype(np.float64), e / e.sum(1, keepdims=True), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("N", [7, 64, 257, 256])
def test_fused_map_row_max_stored_propagates_nan(N, target):
    """The row max is stored (an output): on ascend910b its NaN flag stays (no @nan_unobserved)."""
    x = _rows_placed(N, "float32")
    x = np.where(np.isinf(x), 1.0, x).astype(np.float32)
    M = x.shape[0]
    k = tw.compile(softmax_rows(M, N), target=target, out_idx=[1, 2])
    mx, y = _run(k, target, x)
    ref_mx = (2.0 * x.astype(np.float64)).max(1)
    _same(mx, ref_mx)
    nan_rows = np.isnan(ref_mx)
    assert np.isnan(y[nan_rows]).all()
    e = np.exp(2.0 * x[~nan_rows].astype(np.float64) - ref_mx[~nan_rows, None])
    tw.testing.assert_close(y[~nan_rows].astype(np.float64), e / e.sum(1, keepdims=True), atol=1e-6, rtol=1e-5)
    assert "@nan_unobserved" not in k.get_ir("mark_nan_unobserved")


# ---------------------------------------------------------------------------------------------
# ascend910b skips the NaN flag of a row max no output can observe (transform/nan_unobserved.h):
# softmax and flash attention, NaN rows checked against numpy; and kernels where it must stay

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import flash_attention  # noqa: E402
import softmax  # noqa: E402


def _unobserved(k):
    return k.get_ir("mark_nan_unobserved").count("@nan_unobserved")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("N", [64, 300, 1024])
def test_softmax_nan_rows_without_the_flag(N, target):
    x = np.random.default_rng(5).standard_normal((19, N)).astype(np.float32)
    x[3, N // 2] = np.nan
    x[7, :] = np.nan
    x[11, 0] = np.nan
    x[12, 1] = np.inf               # no NaN: inf - inf gives NaN in the reference too
    k = softmax.softmax(N, target=target)
    assert _unobserved(k) == 1
    y = _run(k, target, x)
    ref = softmax.reference(x)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    tw.testing.assert_close(np.nan_to_num(y), np.nan_to_num(ref), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_nan_rows_without_the_flag(causal, target):
    rng = np.random.default_rng(6)
    q, kk, v = (rng.standard_normal((1, 2, 130, 64)).astype(np.float32) for _ in range(3))
    q[0, 0, 5, 3] = np.nan          # one query row
    kk[0, 1, 100, 7] = np.nan       # one key: every query row of head 1 that sees it
    k = flash_attention.flash_attention(1, 2, 130, 64, causal, target=target)
    assert _unobserved(k) == 1
    o = _run(k, target, q, kk, v)
    ref = flash_attention.reference(q, kk, v, causal)
    np.testing.assert_array_equal(np.isnan(o), np.isnan(ref))
    tw.testing.assert_close(np.nan_to_num(o), np.nan_to_num(ref), atol=2e-4, rtol=1e-3)


def row_max_used(M, N, use):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            mx = T.alloc_fragment((M,), "float32")
            sm = T.alloc_fragment((M,), "float32")
            T.copy(X, x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(M, N):
                if use == "where":          # the max decides a select: x < max keeps finite values
                    x[i, j] = T.where(x[i, j] < mx[i], 0.0, 1.0)
                elif use == "no_sum":       # exp(x - max) stored without the row sum
                    x[i, j] = T.exp(x[i, j] - mx[i])
                else:                       # the row sum of the other tile: a NaN never reaches it
                    x[i, j] = mx[i] + 0.0 * X[i, j]
            if use == "sum":
                T.reduce_sum(x, sm, dim=1)
                for i, j in T.Parallel(M, N):
                    x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y)
    return main


@pytest.mark.parametrize("use", ["where", "no_sum", "sum"])
def test_row_max_whose_nan_is_observed_keeps_the_flag(use):
    M, N = 8, 64
    x = np.random.default_rng(7).standard_normal((M, N)).astype(np.float32)
    x[2, 9] = np.nan
    x[5, :] = np.nan
    outs = []
    for target in ("cpu", TARGET):
        k = tw.compile(row_max_used(M, N, use), target=target, out_idx=[1])
        assert _unobserved(k) == 0
        outs.append(_run(k, target, x))
    np.testing.assert_array_equal(np.isnan(outs[0]), np.isnan(outs[1]))
    tw.testing.assert_close(np.nan_to_num(outs[1]), np.nan_to_num(outs[0]), atol=1e-6, rtol=1e-5)


def scalar_max_min():
    @T.prim_func
    def main(X: T.Tensor((4, 8), "float32"), s: T.float32, t: T.float32, O0: T.Tensor((4, 8), "float32"),
             O1: T.Tensor((4, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((4, 8), "float32")
            o0 = T.alloc_fragment((4, 8), "float32")
            o1 = T.alloc_fragment((4, 8), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(4, 8):
                o0[i, j] = x[i, j] + T.max(s, t)
                o1[i, j] = x[i, j] + T.min(t, s)
            T.copy(o0, O0)
            T.copy(o1, O1)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("s,t", [(float("nan"), 1.0), (1.0, float("nan")), (2.0, -3.0), (float("nan"), float("nan"))])
def test_scalar_max_min_propagate_nan(s, t, target):
    """T.max / T.min of two scalars: the scalar unit on ascend910b (the printed tw_fmax / tw_fmin)."""
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    k = tw.compile(scalar_max_min(), target=target, out_idx=[3, 4])
    o0, o1 = _run(k, target, x, s, t)
    _same(o0, x + np.maximum(np.float32(s), np.float32(t)))
    _same(o1, x + np.minimum(np.float32(t), np.float32(s)))
    if target != "cpu":
        src = k.get_source("ascendc")
        assert "tw_fmax(" in src and "tw_fmin(" in src


def scalar_reads_max():
    @T.prim_func
    def main(X: T.Tensor((8,), "float32"), S: T.Tensor((2,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "float32")
            y = T.alloc_fragment((8,), "float32")
            T.copy(X, x)
            v = S[0]
            u = S[1]
            for i in T.Parallel(8):
                y[i] = x[i] + T.max(v, u)
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("s", [[0.0, float("nan")], [float("nan"), 1.0], [2.0, -1.0]])
def test_scalar_reads_max_propagates_nan(s, target):
    """hunt10a F13: T.max of two scalars read from a tensor (ascend910b: the scalar unit)."""
    x = np.arange(8, dtype=np.float32)
    S = np.array(s, np.float32)
    y = _run(tw.compile(scalar_reads_max(), target=target, out_idx=[2]), target, x, S)
    _same(y, x + np.maximum(S[0], S[1]))


def clamped_fns(dtype):
    @T.prim_func
    def main(X: T.Tensor((4, 64), dtype), Y: T.Tensor((4, 4, 64), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((4, 64), dtype)
            y = T.alloc_fragment((4, 4, 64), dtype)
            T.copy(X, x)
            for i, j in T.Parallel(4, 64):
                y[0, i, j] = T.tanh(x[i, j])
                y[1, i, j] = T.erf(x[i, j])
                y[2, i, j] = T.sigmoid(x[i, j])
                y[3, i, j] = T.max(T.min(x[i, j], 1.0), -1.0)
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_clamps_of_math_functions_propagate_nan(dtype, target):
    """hunt10a F8: expand_math's clamps (tanh's Min(Max(x, -9), 9), erf's) are T.max / T.min too."""
    x = _with_nans((4, 64), dtype, 8)
    y = _run(tw.compile(clamped_fns(dtype), target=target, out_idx=[1]), target, x)
    for k in range(4):
        np.testing.assert_array_equal(np.isnan(y[k]), np.isnan(x.astype(np.float64)), err_msg=f"function {k}")
