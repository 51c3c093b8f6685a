"""hunt40's findings fixed (issue 13; docs/testing.md "Session 40: hunt40").

F1: a math function of one UB tile element outside a T.Parallel map (`s[0] = T.sin(s[0])`, a scalar that a
kernel keeps in a one-element tile) runs as a one-element map on ascend910b when the element starts a 32-byte
block; legalize_vector made that map after expand_math had run, so every function without a vector instruction
of its own (sin, cos, rsqrt, tanh, sigmoid, silu, exp2, log2, erf, pow 1.5) was "T.sin is not supported on Ascend
vector units yet" with a hint to compute it from exp / log, and `x ** 1.5` "not supported ... supported
exponents: ... non-integer constants". Each is checked against float64 numpy on cpu and ascend910b (the
simulator's checker on); sin / cos give cpu's bits. A 16-bit element 16 bytes into a block stays the located
error naming the function (docs/language.md).
"""
import math
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

ERF = np.vectorize(math.erf)
# (name, float64 reference), in the order _one_element stores them
FNS = [("sin", np.sin), ("cos", lambda v: np.cos(v * 2.0)), ("rsqrt", lambda v: 1 / np.sqrt(v)), ("tanh", np.tanh),
       ("sigmoid", lambda v: 1 / (1 + np.exp(-v))), ("silu", lambda v: v / (1 + np.exp(-v))), ("exp2", np.exp2),
       ("log2", np.log2), ("erf", ERF), ("pow1.5", lambda v: v ** 1.5), ("sqrt", np.sqrt)]


def _one_element(dt, s, n):
    """Each function of one element, s elements apart, outside any map."""
    @T.prim_func
    def main(X: T.Tensor((n,), dt), Y: T.Tensor((n,), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), dt)
            T.copy(X[0], x)
            x[0] = T.sin(x[0])
            x[s] = T.cos(x[s] * 2.0)
            x[2 * s] = T.rsqrt(x[2 * s])
            x[3 * s] = T.tanh(x[3 * s])
            x[4 * s] = T.sigmoid(x[4 * s])
            x[5 * s] = T.silu(x[5 * s])
            x[6 * s] = T.exp2(x[6 * s])
            x[7 * s] = T.log2(x[7 * s])
            x[8 * s] = T.erf(x[8 * s])
            x[9 * s] = x[9 * s] ** 1.5
            x[10 * s] = T.sqrt(x[10 * s])
            T.copy(x, Y[0])
    return main


@pytest.mark.parametrize("dt,tol", [("float32", (2e-6, 2e-6)), ("float16", (2e-3, 2e-3)), ("bfloat16", (2e-2, 1.6e-2))])
def test_math_of_one_element_outside_a_map(dt, tol):
    slot = 32 // np.dtype(np.float32).itemsize if dt == "float32" else 16  # each element starts a 32 B block
    n = slot * len(FNS) + 3  # an odd tail after the last slot
    x = (np.arange(n) % 7 * 0.37 + 0.2).astype(tw.testing.np_dtype(dt))
    f = x.astype(np.float64)
    ref = f.copy()
    for k, (_, r) in enumerate(FNS):
        ref[k * slot] = r(f[k * slot])
    got = {t: run_on(_one_element(dt, slot, n), t, [-1], x.copy()) for t in ("cpu", TARGET)}
    for t, y in got.items():
        for k, (name, _) in enumerate(FNS):
            tw.testing.assert_close(y[k * slot], ref[k * slot], atol=tol[0], rtol=tol[1], msg=f"{t} {name} {dt}")
        rest = np.ones(n, bool)
        rest[::slot][:len(FNS)] = False
        assert np.array_equal(y[rest], x[rest]), f"{t}: elements no store names changed"
    for k in (0, 1):  # sin, cos: the same float32 operations on both targets
        assert got["cpu"][k * slot].tobytes() == got[TARGET][k * slot].tobytes()


def test_unaligned_16bit_element_runs():
    # 16 bytes into its block: no vector operand starts there, so the call is computed on a one-element float32
    # tile from the element the scalar unit reads (math41; it was the located error naming the function)
    @T.prim_func
    def main(X: T.Tensor((16,), "float16"), Y: T.Tensor((16,), "float16")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((16,), "float16")
            T.copy(X[0], x)
            x[8] = T.sin(x[8])
            T.copy(x, Y[0])
    x = (np.arange(16) / 3 - 2).astype(np.float16)
    got = {t: np.asarray(run_on(main, t, [-1], x.copy())) for t in ("cpu", TARGET)}
    ref = x.copy()
    ref[8] = np.float16(math.sin(float(x[8])))
    for y in got.values():
        assert y.tobytes() == ref.tobytes()
