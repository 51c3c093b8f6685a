"""T.sin / T.cos (session 39, h-math39; docs/language.md "Functions", docs/ascend.md "Session 39: T.sin and
T.cos"): float32 against float64 numpy at odd shapes, large arguments, the range's end, infinities and NaN;
float16 / bfloat16 rounded once from float32; cpu and ascend910b give the same bits (both run the multiplies, adds
and selects of tw_cpu/math.h sin_cos); a RoPE kernel that builds its cos / sin table in the kernel.
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
import port36_kernels as P36  # noqa: E402
import port38_kernels as P  # noqa: E402

L = 400000.0      # the argument range: NaN beyond
ABS32 = 1.53e-7   # float32: max abs error vs float64 over every float32 with |x| <= L (1.527e-7 / 1.529e-7 measured)


def _sincos(M, N, dt, bm=4):
    M = M or T.symbolic("M")  # no rows: a symbolic row count (a dim of 0 is not declared)

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), S: T.Tensor((M, N), dt), C: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dt)
            s = T.alloc_fragment((bm, N), dt)
            c = T.alloc_fragment((bm, N), dt)
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                s[i, j] = T.sin(x[i, j])
                c[i, j] = T.cos(x[i, j])
            T.copy(s, S[bx * bm, 0])
            T.copy(c, C[bx * bm, 0])
    return main


def _run(x, dt, target):
    k = tw.compile(_sincos(x.shape[0], x.shape[1], dt), target=target, out_idx=[1, 2])
    if target == "cpu":
        return k(x)
    p = k.profile(x)
    assert p["reports"] == [], p["reports"]
    return p.outputs


def _bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def _f32_inputs(n):
    rng = np.random.default_rng(39)
    special = [0.0, -0.0, 1e-45, -1e-45, 1e-30, 1e-8, -1e-8, math.pi / 2, math.pi, -math.pi, 2 * math.pi, 3 * math.pi / 2,
               1e4, -1e4, 1e5, -1e5, 355.0, 103993.0, 3e5, -3e5, L, -L, np.nextafter(np.float32(L), np.float32(1e6)),
               1e6, -1e30, np.inf, -np.inf, np.nan]
    k = np.arange(1, 40) * 3217.0   # near multiples of pi and pi / 2 (results near 0)
    near = np.concatenate([k * math.pi, (k + 0.5) * math.pi, -k * math.pi])
    x = np.concatenate([special, near, rng.uniform(-10, 10, n), rng.uniform(-1e3, 1e3, n), rng.uniform(-L, L, n),
                        rng.standard_normal(n) * 1e-3])
    return x.astype(np.float32)


@pytest.mark.parametrize("shape", [(39, 37), (1, 1), (5, 1), (0, 37)])
def test_float32_vs_float64_and_cpu_equals_ascend(shape):
    M, N = shape
    x = np.resize(_f32_inputs(400), M * N).reshape(M, N)  # (39, 37): every input; (1, 1): 0.0; (5, 1): a tail
    got = {t: _run(x, "float32", t) for t in ("cpu", TARGET)}
    if M == 0:  # no program runs: empty outputs
        assert all(o.shape == (0, N) for t in got for o in got[t])
        return
    X = x.astype(np.float64)
    inside = np.abs(X) <= L
    for r, f in enumerate((np.sin, np.cos)):
        y = got["cpu"][r].astype(np.float64)
        assert np.all(np.isnan(y[~inside])), y[~inside]
        err = np.abs(y[inside] - f(X[inside]))
        assert err.max() <= ABS32, (f.__name__, err.max(), x[inside][err.argmax()])
        np.testing.assert_array_equal(_bits(got["cpu"][r]), _bits(got[TARGET][r]), err_msg=f.__name__)
    # sin(-0) = -0, sin(+0) = +0, cos(+-0) = 1
    zero = (x == 0)
    np.testing.assert_array_equal(np.signbit(got["cpu"][0][zero]), np.signbit(x[zero]))
    assert np.all(got["cpu"][1][zero] == 1.0)


def test_relative_error_away_from_zero():
    """For |x| <= pi the error is relative: <= 2.21 ulp (the exhaustive sweep's bound), denormal results too."""
    x = np.random.default_rng(7).uniform(-math.pi, math.pi, (4, 512)).astype(np.float32)
    x[0, :8] = [1e-30, -1e-38, 1e-45, 3.14159, -3.14159, 1.5707964, -1.5707964, 3e-4]
    s, c = _run(x, "float32", "cpu")
    for y, f in ((s, np.sin), (c, np.cos)):
        ref = f(x.astype(np.float64))
        ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
        assert (np.abs(y - ref) / ulp).max() <= 2.21, f.__name__


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_types_round_once(dt):
    """float16 / bfloat16: computed in float32 and rounded once: within half a unit of the dtype (+ float32's error)."""
    rng = np.random.default_rng(16)
    npdt = tw.testing.np_dtype(dt)
    x = np.concatenate([rng.uniform(-60, 60, 7 * 19 - 5), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    x = x.astype(npdt).reshape(7, 19)
    got = {t: _run(x, dt, t) for t in ("cpu", TARGET)}
    X = x.astype(np.float64)
    p = 10 if dt == "float16" else 7
    fin = np.isfinite(X)
    for r, f in enumerate((np.sin, np.cos)):
        ref = f(X[fin])
        ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(ref), 2.0 ** -14))) - p)
        y = got["cpu"][r].astype(np.float64)
        assert np.all(np.abs(y[fin] - ref) <= 0.5 * ulp + 2 * ABS32), f.__name__
        assert np.all(np.isnan(y[~fin]))
        np.testing.assert_array_equal(_bits(got["cpu"][r]), _bits(got[TARGET][r]), err_msg=f.__name__)


def _rope(M, H, bm=4):
    """Rotate-half RoPE with the table built in the kernel: angle = pos * theta^(-j / H), then cos / sin."""
    D = 2 * H

    @T.prim_func
    def main(X: T.Tensor((M, D), "float32"), Pos: T.Tensor((M,), "int32"), Y: T.Tensor((M, D), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x1 = T.alloc_fragment((bm, H), "float32")
            x2 = T.alloc_fragment((bm, H), "float32")
            pos = T.alloc_fragment((bm,), "int32")
            y1 = T.alloc_fragment((bm, H), "float32")
            y2 = T.alloc_fragment((bm, H), "float32")
            T.copy(X[bx * bm, 0], x1)
            T.copy(X[bx * bm, H], x2)
            T.copy(Pos[bx * bm], pos)
            for i, j in T.Parallel(bm, H):
                a = T.cast(pos[i], "float32") * T.exp(j * (-math.log(10000.0) / H))
                y1[i, j] = x1[i, j] * T.cos(a) - x2[i, j] * T.sin(a)
                y2[i, j] = x2[i, j] * T.cos(a) + x1[i, j] * T.sin(a)
            T.copy(y1, Y[bx * bm, 0])
            T.copy(y2, Y[bx * bm, H])
    return main


@pytest.mark.parametrize("M, H", [(13, 12), (1, 1)])
def test_rope_table_in_kernel(M, H):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, 2 * H)).astype(np.float32)
    pos = rng.integers(0, 300, M).astype(np.int32)
    a = pos[:, None].astype(np.float64) * np.exp(np.arange(H) * (-math.log(10000.0) / H))[None]
    X = x.astype(np.float64)
    c, s = np.cos(a), np.sin(a)
    ref = np.concatenate([X[:, :H] * c - X[:, H:] * s, X[:, H:] * c + X[:, :H] * s], 1)
    k = {t: tw.compile(_rope(M, H), target=t, out_idx=[-1]) for t in ("cpu", TARGET)}
    got = {"cpu": k["cpu"](x, pos)}
    p = k[TARGET].profile(x, pos)
    assert p["reports"] == [], p["reports"]
    got[TARGET] = p.outputs
    # the angle is rounded to float32 (and exp differs by target): |a| * 2^-22 of the angle, times |x|
    tol = 3 * (300 * 2.0 ** -22 + 2 * ABS32) * np.abs(X).max()
    for t in got:
        np.testing.assert_allclose(got[t], ref, rtol=0, atol=tol, err_msg=t)
    np.testing.assert_allclose(got["cpu"], got[TARGET], rtol=0, atol=tol)


@pytest.mark.parametrize("N", [1, 2, 7])
def test_roll_at_one_column(N):
    """port38 F5: torch.roll written x[i, (j + N - 3 % N) % N] folds at N = 1 to x[i, 0] of the (bm, 1) tile, which
    ascend910b refused ("the per-row factor 'x' is read down a column"): column 0 of a one-column tile is the map's
    column."""
    for dt in ("float32", "bfloat16"):
        P.check("roll", dt, (13, N, 1), TARGET)
        P.check("roll", dt, (13, N, 1), "cpu")
    if N == 1:  # port36's outer product a[i, 0] * b[0, j] at one column (its located error at 5 columns stays)
        P36.check("outer_product", "bfloat16", (1, 1), TARGET)
