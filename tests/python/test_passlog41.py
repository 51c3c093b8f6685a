"""Nested math compiles in linear work on ascend910b (session 41, h-passlog41; passlog40 P1, hunt40 F6).

legalize_vector substitutes a map's lets into its stores, so the argument expand_math binds to a let (read five
times by a sin / cos expansion) became one node shared by its uses, and every walk of the store (the scalar test,
the memo of built values, the unguarded reads, the int32 checks) walked it as a tree: 4 deep took ~126 s of CPU,
6 deep would not finish. Each walk now visits a shared node once. No timing is asserted: the lowered program's
size (deterministic) grows by the same count per level, and the values agree with float64 (and cpu's bits where
the two targets compute the same operations).
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402


def _chain(f1, f2, f3, f4, f5, f6, depth, n, dt):
    @T.prim_func
    def main(X: T.Tensor((n,), dt), Y: T.Tensor((n,), dt)):
        with T.Kernel(1) as b:
            x = T.alloc_fragment((n,), dt)
            T.copy(X, x)
            for i in T.Parallel(n):
                if depth == 4:
                    x[i] = f4(f3(f2(f1(x[i]))))
                elif depth == 5:
                    x[i] = f5(f4(f3(f2(f1(x[i])))))
                else:
                    x[i] = f6(f5(f4(f3(f2(f1(x[i]))))))
            T.copy(x, Y)
    return main


def _lines(depth):
    k = tw.compile(_chain(*[T.sin] * 6, depth, 8, "float32"), target=TARGET, out_idx=[-1])
    return len(k.get_source("ascend_program").splitlines())


def test_nested_program_grows_linearly():
    # (before: 4 deep took ~126 s of CPU in legalize_vector, 6 deep did not finish)
    l4, l5, l6 = _lines(4), _lines(5), _lines(6)
    assert 0 < l5 - l4 == l6 - l5 < l4, (l4, l5, l6)


REF = {T.sin: np.sin, T.cos: np.cos, T.tanh: np.tanh, T.erf: None, T.exp: np.exp, T.sigmoid: None}


def _ref(fns, x, dt):
    import math
    erf = np.vectorize(math.erf)
    want = x.astype(np.float64)
    for f in fns:
        if f is T.erf:
            want = erf(want)
        elif f is T.sigmoid:
            want = 1.0 / (1.0 + np.exp(-want))
        else:
            want = REF[f](want)
        want = want.astype(dt).astype(np.float64)  # each call's value in the tile's dtype, as stored
    return want


@pytest.mark.parametrize("fns,dt,n,tol", [
    ((T.sin, T.cos, T.tanh, T.erf, T.exp, T.sin), "float32", 8, 1e-6),
    ((T.cos, T.erf, T.sigmoid, T.sin, T.tanh, T.exp), "float16", 37, 2e-3),
    ((T.sin,) * 6, "float32", 8, 1e-6),
])
def test_mixed_six_deep(fns, dt, n, tol):
    x = (np.random.default_rng(41).standard_normal(n) * 3).astype(dt)
    x[0] = 0.0
    ya = np.asarray(tw.compile(_chain(*fns, 6, n, dt), target=TARGET, out_idx=[-1])(x), dtype=np.float64)
    yc = np.asarray(tw.compile(_chain(*fns, 6, n, dt), target="cpu", out_idx=[-1])(x), dtype=np.float64)
    want = _ref(fns, x, dt)
    np.testing.assert_allclose(ya, want, rtol=0, atol=tol)
    np.testing.assert_allclose(yc, want, rtol=0, atol=tol)
    if all(f in (T.sin, T.cos) for f in fns):  # the same float32 operations on both targets (h-math39)
        assert ya.tobytes() == yc.tobytes()
