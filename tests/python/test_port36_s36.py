"""Session 36's portability hunt (h-port36, docs/testing.md "Session 36: port36"): review35 R2's unit-dim tiles,
then more user kernel forms written for cpu first (tests/python/port36_kernels.py) with only the target changed to
ascend910b (simulator, checker on), against float64 numpy / exact integers.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402


# --------------------------------------------------------------------------------------------- review35 R2
# An elif chain in a 2-D map storing into a tile with a unit dim, y[0, i, j] of (1, m, n) or y[i, 0, j] of
# (m, 1, n), was "this T.Parallel body is not a vector instruction: an if inside a map" on ascend910b (int32;
# serial_maps read the store as strided), whose hint was what the kernel already did; into an (m, n) tile it
# compiled. The serial-loop form ran as a scalar element loop; it is a map now.
def _chain(M, N, dt, form):
    shp = (M, 1, N) if form == "mid" else (1, M, N)

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), n: T.int32, Y: T.Tensor(shp, dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dt)
            y = T.alloc_fragment(shp, dt)
            T.copy(X, x)
            if form == "mid":
                for i, j in T.Parallel(M, N):
                    if j < 1 and i < n:
                        y[i, 0, j] = x[i, j] + 1
                    elif j < 3 and i < n:
                        y[i, 0, j] = x[i, j] * 2
                    else:
                        y[i, 0, j] = x[i, j]
            elif form == "serial":
                for i in T.serial(M):
                    for j in T.serial(N):
                        if j < 1 and i < n:
                            y[0, i, j] = x[i, j] + 1
                        elif j < 3:
                            y[0, i, j] = x[i, j] * 2
                        else:
                            y[0, i, j] = x[i, j]
            else:
                for i, j in T.Parallel(M, N):
                    if j < 1 and i < n:
                        y[0, i, j] = x[i, j] + 1
                    elif j < 3 and i < n:
                        y[0, i, j] = x[i, j] * 2
                    else:
                        y[0, i, j] = x[i, j]
            T.copy(y, Y)

    return main


def _chain_ref(x, n, form):
    i, j = np.indices(x.shape)
    xf = x.astype(np.float64)
    first = (j < 1) & (i < n)
    second = (j < 3) & ((i < n) | (form == "serial"))
    y = np.where(first, xf + 1, np.where(second, xf * 2, xf))
    return y[:, None, :] if form == "mid" else y[None]


@pytest.mark.parametrize("form", ["lead", "mid", "serial"])
@pytest.mark.parametrize("dt", ["int32", "float16"])
def test_r2_unit_dim_tile_elif_chain(form, dt):
    for M, N in [(5, 19), (1, 1)]:
        x = (np.arange(M * N).reshape(M, N) % 23 - 11).astype(dt)
        p = tw.compile(_chain(M, N, dt, form), target=TARGET, out_idx=[-1]).profile(x, 3)
        assert p["reports"] == [], p["reports"]
        np.testing.assert_array_equal(p.outputs.astype(np.float64), _chain_ref(x, 3, form))


def test_r2_unit_dim_tile_elif_chain_cpu():
    x = (np.arange(95).reshape(5, 19) % 23 - 11).astype("int32")
    got = tw.compile(_chain(5, 19, "int32", "mid"), target="cpu", out_idx=[-1])(x, 3)
    np.testing.assert_array_equal(got, _chain_ref(x, 3, "mid"))
