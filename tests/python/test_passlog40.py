"""Nested math functions compile in linear work (session 40, h-passlog40; hunt40 F6): T.sin(T.sin(T.sin(x)))
took 100 s of CPU to compile for ascend910b, printing the Tile IR after every pass, whose text walked the shared
argument of each expansion once per use. The pass log now prints a Tile IR stage only when asked (get_ir,
TW_DUMP_IR), and expand_math binds an argument its expansion reads more than once to a let. No timing is
asserted: the size of the expanded IR's text is (deterministic), and so are the bits of cpu and ascend910b.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402


def _nested(fn, depth, n, dt):
    """fn depth times (depth 1, 2, 3, 4 or 5); fn may be a tuple of five functions, the innermost first."""
    f1, f2, f3, f4, f5 = fn if isinstance(fn, tuple) else (fn,) * 5

    @T.prim_func
    def main(X: T.Tensor((n,), dt), Y: T.Tensor((n,), dt)):
        with T.Kernel(1) as b:
            x = T.alloc_fragment((n,), dt)
            T.copy(X, x)
            for i in T.Parallel(n):
                if depth == 1:
                    x[i] = f1(x[i])
                elif depth == 2:
                    x[i] = f2(f1(x[i]))
                elif depth == 3:
                    x[i] = f3(f2(f1(x[i])))
                elif depth == 4:
                    x[i] = f4(f3(f2(f1(x[i]))))
                else:
                    x[i] = f5(f4(f3(f2(f1(x[i])))))
            T.copy(x, Y)
    return main


def _expanded_size(fn, depth):
    k = tw.compile(_nested(fn, depth, 8, "float32"), target=TARGET, out_idx=[-1])
    return len(k.get_ir("expand_math")), k


def test_nested_expansion_is_linear():
    fn = T.sin
    # each level adds one expansion (a let of the argument and its uses): before, the text of depth 2
    # was 782,879 characters (depth 1: 6,617) and depth 3 ~60x that
    s1, _ = _expanded_size(fn, 1)
    s2, _ = _expanded_size(fn, 2)
    s3, k3 = _expanded_size(fn, 3)
    assert s2 - s1 < 2 * s1 and s3 - s2 < 2 * s1, (s1, s2, s3)
    assert f"{fn.__name__}_arg" in k3.get_ir("expand_math")
    for stage in k3.stages:  # every stage is still printed on demand
        assert k3.get_ir(stage)


@pytest.mark.parametrize("fn,ref,n,dt", [(T.sin, np.sin, 8, "float32"), (T.cos, np.cos, 37, "float16")])
def test_nested_cpu_equals_ascend(fn, ref, n, dt):
    x = (np.random.default_rng(40).standard_normal(n) * 4).astype(dt)
    x[0] = 0.0
    ya = tw.compile(_nested(fn, 3, n, dt), target=TARGET, out_idx=[-1])(x)
    yc = tw.compile(_nested(fn, 3, n, dt), target="cpu", out_idx=[-1])(x)
    assert np.asarray(ya).tobytes() == np.asarray(yc).tobytes()
    want = x.astype(np.float64)
    for _ in range(3):
        want = ref(want).astype(np.float32).astype(dt).astype(np.float64)  # rounded once per call, as stored
    tol = 2e-6 if dt == "float32" else 2e-3
    np.testing.assert_allclose(np.asarray(yc, dtype=np.float64), want, rtol=0, atol=tol)


# exp five deep multiplies the relative error of each level by its value (up to 68 here)
@pytest.mark.parametrize("fn,ref,rtol", [(T.sin, np.sin, 3e-6), (T.tanh, np.tanh, 3e-6), (T.exp, np.exp, 1e-4)])
def test_cpu_five_deep(fn, ref, rtol):
    x = np.linspace(-3.0, -1.0, 13).astype("float32")
    y = tw.compile(_nested(fn, 5, 13, "float32"), target="cpu", out_idx=[-1])(x)
    want = x.astype(np.float64)
    for _ in range(5):
        want = ref(want)
    np.testing.assert_allclose(np.asarray(y, dtype=np.float64), want, rtol=rtol, atol=1e-6)
