"""Session 21 fixes of h-ascfix9c (docs/ascend.md "Session 21: float16 in float32, exact int32
compares, tile-end checks (h-ascfix9c)"), each on cpu and ascend910b (simulator, checker on):

- hunt9a F15: float16 maps and sums are computed in float32 and rounded once when stored
  (docs/language.md "Dtype conversions and rounding"), as on cpu: bit-exact against a numpy
  float32 reference rounded once (+, -, * are correctly rounded in float32 on both targets).
- hunt9a F10: int32 comparisons in T.where are exact for every int32 (not only below 2^24).
- hunt9a F17: a scalar element access of a UB tile past the tile's last element, inside its 32 B
  padding, is a checker report (cpu: the located index error).

Tolerances: all exact (0)."""
import sys
import pathlib

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


# ---------------------------------------------------------------------------------------------
# F15: float16 maps and reductions in float32, rounded once

def half_chain(M, N, bm, odt):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), V: T.Tensor((M,), "float16"), Y: T.Tensor((M, N), odt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float16")
            v = T.alloc_fragment((bm,), "float16")
            y = T.alloc_fragment((bm, N), odt)
            T.copy(X[bx * bm, 0], x)
            T.copy(V[bx * bm], v)
            for i, j in T.Parallel(bm, N):
                y[i, j] = ((x[i, j] * 3.0 + v[i]) - x[i, j] * v[i]) * 0.25 + T.max(x[i, j], v[i])
            T.copy(y, Y[bx * bm, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("odt", ["float16", "float32"])
@pytest.mark.parametrize("M,N,bm", [(1, 1, 1), (5, 33, 4), (17, 130, 8), (40, 16, 40)])
def test_float16_chain_rounded_once(M, N, bm, odt, target):
    rng = np.random.default_rng(2101)
    x = (rng.standard_normal((M, N)) * 300).astype(np.float16)
    x.flat[0] = 65504                                         # float16 max: intermediates overflow float16
    v = (rng.standard_normal(M) * 300).astype(np.float16)
    y = _run(tw.compile(half_chain(M, N, bm, odt), target=target, out_idx=[2]), target, x, v)
    x32, v32 = x.astype(np.float32), v.astype(np.float32)[:, None]
    with np.errstate(over="ignore"):
        ref = (((x32 * np.float32(3) + v32) - x32 * v32) * np.float32(0.25) + np.maximum(x32, v32)).astype(odt)
    np.testing.assert_array_equal(y.astype(np.float64), ref.astype(np.float64))


def half_reduce(M, N, dim, kind, odt):
    R = M if dim == 1 else N

    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((R,), odt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float16")
            y = T.alloc_fragment((R,), odt)
            T.copy(X, x)
            if kind == "sum":
                T.reduce_sum(x, y, dim=dim)
            else:
                T.reduce_max(x, y, dim=dim)
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,dim", [(1, 1, 1), (3, 300, 1), (33, 64, 1), (200, 24, 0), (1, 7, 0)])
def test_float16_sums_in_float32(M, N, dim, target):
    # exact halves: every float32 partial sum is exact, so the sum is the true sum rounded once
    odt = "float16"
    x = (np.random.default_rng(2102).integers(-64, 65, (M, N)) / 2.0).astype(np.float16)
    if dim == 1:
        x[0, 0] = 2048                                       # float16 alone would drop the +0.5 steps
    y = _run(tw.compile(half_reduce(M, N, dim, "sum", odt), target=target, out_idx=[1]), target, x)
    np.testing.assert_array_equal(y.astype(np.float64), x.astype(np.float64).sum(dim).astype(odt).astype(np.float64))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,dim", [(3, 300, 1), (17, 40, 0)])
def test_float16_max_exact(M, N, dim, target):
    x = (np.random.default_rng(2103).standard_normal((M, N)) * 1000).astype(np.float16)
    y = _run(tw.compile(half_reduce(M, N, dim, "max", "float16"), target=target, out_idx=[1]), target, x)
    np.testing.assert_array_equal(y, x.max(dim))


# ---------------------------------------------------------------------------------------------
# F10: int32 comparisons exact for every int32

OPS = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


def int_compare(M, N, op, scalar):
    @T.prim_func
    def main(A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N), "int32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "int32")
            b = T.alloc_fragment((M, N), "int32")
            y = T.alloc_fragment((M, N), "int32")
            T.copy(A, a)
            T.copy(B, b)
            for i, j in T.Parallel(M, N):
                rhs = 16777217 if scalar else b[i, j]
                if op == "==":
                    c = a[i, j] == rhs
                elif op == "!=":
                    c = a[i, j] != rhs
                elif op == "<":
                    c = a[i, j] < rhs
                elif op == "<=":
                    c = a[i, j] <= rhs
                elif op == ">":
                    c = a[i, j] > rhs
                else:
                    c = a[i, j] >= rhs
                y[i, j] = T.where(c, 1, 0)
            T.copy(y, Y)
    return main


def _int_operands():
    lo, hi = -2 ** 31, 2 ** 31 - 1
    base = [lo, lo + 1, lo + 255, lo + 256, -2 ** 24 - 1, -1, 0, 1, 255, 256, 2 ** 24, 2 ** 24 + 1, hi - 256, hi - 1, hi]
    a, b = np.meshgrid(np.array(base, np.int64), np.array(base, np.int64))
    a, b = a.ravel(), b.ravel()
    near = np.array([2 ** 24 + 1, 2 ** 30 + 64, 16777216, 16777217, 16777218, -2 ** 31 + 3], np.int64)
    a = np.concatenate([a, near, near + 1])
    b = np.concatenate([b, near + 1, near])
    n = 11 * ((a.size + 10) // 11)
    a = np.resize(a, n).astype(np.int32).reshape(-1, 11)
    b = np.resize(b, n).astype(np.int32).reshape(-1, 11)
    return a, b


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scalar", [False, True])
@pytest.mark.parametrize("op", list(OPS))
def test_int32_compare_exact(op, scalar, target):
    a, b = _int_operands()
    y = _run(tw.compile(int_compare(*a.shape, op, scalar), target=target, out_idx=[2]), target, a, b)
    ref = OPS[op](a.astype(np.int64), np.int64(16777217) if scalar else b.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(y, ref)


# ---------------------------------------------------------------------------------------------
# F17: an element past a UB tile's last element (inside its 32 B padding) is reported

def tile_poke(R, C, dtype):
    @T.prim_func
    def main(X: T.Tensor((R, C), dtype), P: T.Tensor((2,), "int32"), Y: T.Tensor((R, C), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), dtype)
            p = T.alloc_fragment((2,), "int32")
            T.copy(X, x)
            T.copy(P, p)
            r = p[0]
            c = p[1]
            x[r, c] = x[r, c] + 1
            T.copy(x, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("R,C,dtype", [(3, 5, "int32"), (1, 3, "float32"), (2, 9, "float16")])
def test_element_at_the_tile_end(R, C, dtype, target):
    x = np.arange(R * C).reshape(R, C).astype(dtype)
    for r, c in [(0, 0), (R - 1, C - 1)]:                    # in the tile: no report
        y = _run(tw.compile(tile_poke(R, C, dtype), target=target, out_idx=[2]), target, x, np.array([r, c], np.int32))
        ref = x.copy()
        ref[r, c] += 1
        np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("R,C,dtype", [(3, 5, "int32"), (1, 3, "float32"), (2, 9, "float16")])
def test_element_past_the_tile_end_reported(R, C, dtype, target):
    x = np.arange(R * C).reshape(R, C).astype(dtype)
    k = tw.compile(tile_poke(R, C, dtype), target=target, out_idx=[2])
    bad = np.array([R - 1, C], np.int32)                     # one past the last element: in the 32 B padding
    if target == "cpu":
        with pytest.raises(tw.TilewrightError, match="out of bounds for dimension 1"):
            k(x, bad)
    else:
        reports = k.profile(x, bad)["reports"]
        assert any("last element ends at byte" in r for r in reports), reports
