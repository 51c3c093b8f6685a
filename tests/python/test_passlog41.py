"""Nested math compiles in linear work on ascend910b (session 41, h-passlog41; passlog40 P1, hunt40 F6).

legalize_vector substitutes a map's lets into its stores, so the argument expand_math binds to a let (read five
times by a sin / cos expansion) became one node shared by its uses, and every walk of the store (the scalar test,
the memo of built values, the unguarded reads, the int32 checks) walked it as a tree: 4 deep took ~126 s of CPU,
5 deep would not finish. Each walk now visits a shared node once. No timing is asserted: the lowered program's
size (deterministic) grows by the same count per level, and the values agree with float64 (and cpu's bits where
the two targets compute the same operations).
"""
import math
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402
from test_passlog40 import _nested  # noqa: E402


def _lines(depth):
    k = tw.compile(_nested(T.sin, depth, 8, "float32"), target=TARGET, out_idx=[-1])
    return len(k.get_source("ascend_program").splitlines())


def test_nested_program_grows_linearly():
    # (before: 4 deep took ~126 s of CPU in legalize_vector, 5 deep did not finish)
    l3, l4, l5 = _lines(3), _lines(4), _lines(5)
    assert 0 < l4 - l3 == l5 - l4 < l3, (l3, l4, l5)


REF = {T.sin: np.sin, T.cos: np.cos, T.tanh: np.tanh, T.exp: np.exp, T.erf: np.vectorize(math.erf),
       T.sigmoid: lambda v: 1.0 / (1.0 + np.exp(-v))}


def _ref(fns, x, dt):
    want = x.astype(np.float64)
    for f in fns:
        want = REF[f](want).astype(dt).astype(np.float64)  # each call's value in the tile's dtype, as stored
    return want


@pytest.mark.parametrize("fns,dt,n,tol", [
    ((T.sin, T.cos, T.tanh, T.erf, T.exp), "float32", 8, 1e-6),
    ((T.cos, T.erf, T.sigmoid, T.sin, T.tanh), "float16", 37, 2e-3),
    ((T.sin, T.cos, T.sin, T.cos, T.sin), "float32", 8, 1e-6),
])
def test_mixed_five_deep(fns, dt, n, tol):
    x = (np.random.default_rng(41).standard_normal(n) * 3).astype(dt)
    x[0] = 0.0
    ya = np.asarray(tw.compile(_nested(fns, 5, n, dt), target=TARGET, out_idx=[-1])(x), dtype=np.float64)
    yc = np.asarray(tw.compile(_nested(fns, 5, n, dt), target="cpu", out_idx=[-1])(x), dtype=np.float64)
    want = _ref(fns, x, dt)
    np.testing.assert_allclose(ya, want, rtol=0, atol=tol)
    np.testing.assert_allclose(yc, want, rtol=0, atol=tol)
    if all(f in (T.sin, T.cos) for f in fns):  # the same float32 operations on both targets (h-math39)
        assert ya.tobytes() == yc.tobytes()


def _ulps(a, b):
    ia, ib = (np.where(v.view(np.int32) < 0, -(v.view(np.int32) & 0x7FFFFFFF), v.view(np.int32)).astype(np.int64)
              for v in (a, b))
    return np.abs(ia - ib)


# docs/ascend.md "Session 41: nested math": the exps differ (the chip's Exp instruction against cpu's polynomial), so
# every function through exp differs; these are the table's bounds of how far apart the two targets are
@pytest.mark.parametrize("fn,ulp,abs_", [(T.exp, 2, None), (T.sigmoid, 4, None), (T.silu, 3, None),
                                        (T.tanh, None, 1.2e-7), (T.erf, None, 6e-7)])
def test_cpu_and_ascend_apart(fn, ulp, abs_):
    n = 1024
    rng = np.random.default_rng(4141)
    x = np.concatenate([np.linspace(-10, 10, n // 2), rng.standard_normal(n // 4) * 3,
                        rng.uniform(-0.01, 0.01, n // 4)]).astype(np.float32)
    ya = np.asarray(tw.compile(_nested(fn, 1, n, "float32"), target=TARGET, out_idx=[-1])(x))
    yc = np.asarray(tw.compile(_nested(fn, 1, n, "float32"), target="cpu", out_idx=[-1])(x))
    assert np.isfinite(ya).all() and np.isfinite(yc).all()
    if ulp is not None:
        assert _ulps(ya, yc).max() <= ulp
    else:
        assert np.abs(ya.astype(np.float64) - yc).max() <= abs_
    assert (ya != yc).any()  # (not the same bits: when they are, the docs' table is out of date)
