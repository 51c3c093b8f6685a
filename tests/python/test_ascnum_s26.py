"""Session 26 (h-ascnum14): exact float `%` on ascend910b and bfloat16 column stores with arithmetic.

float `%` is numpy's np.remainder in float32 on both targets, bit for bit (signed zeros and NaN
included): fmod(x, y) exactly, plus y where the signs differ (rounded once), a zero with y's sign,
NaN for x % 0, inf % y and NaN operands, x (or +-inf where the signs differ) for x % +-inf; float16 /
bfloat16 operands computed in float32 and rounded once. ascend910b computes the remainder as a long
division in 12-bit quotient steps with split products (legalize_vector's float_mod, docs/ascend.md
"Session 26: exact float %"); cpu as fmod plus numpy's sign rule (tw_fmod). Inputs cover the whole
float32 range: random bit patterns, subnormal operands, |x| >> |y| (up to 2^277), |x| < |y|, x a
multiple of y and one ulp either side, the top binade, divisors near FLT_MAX, +-inf, 0 and NaN.

A bfloat16 column store with arithmetic (x[i, 0] = x[i, 0] + cy[i]) gathers its column reads into
a contiguous tile, computes in float32 with vector instructions, Casts to bfloat16 (round to
nearest even once, as cpu) and copies the result down the column on the scalar unit."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import run_checked

TARGETS = ["cpu", "ascend910b"]


def _run(kernel_of, target, *args):
    k = tw.compile(kernel_of, target=target, out_idx=[-1])
    return np.asarray(k(*args) if target == "cpu" else run_checked(k, *args))


def _bits_equal(got, ref, what):
    """got == ref bit for bit (any NaN equals any NaN)."""
    got = np.asarray(got)
    ref = np.asarray(ref, got.dtype)
    u = {2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    same = (got.view(u) == ref.view(u)) | (np.isnan(got.astype(np.float32)) & np.isnan(ref.astype(np.float32)))
    if not same.all():
        i = np.nonzero(~same.ravel())[0][:8]
        raise AssertionError(f"{what}: {(~same).sum()} of {same.size} differ; got {got.ravel()[i]}, numpy "
                             f"{ref.ravel()[i]}")


def _mod_ref(x, y, dtype):
    with np.errstate(all="ignore"):
        return np.remainder(x.astype(np.float32), y.astype(np.float32)).astype(tw.testing.np_dtype(dtype))


# --- float % -----------------------------------------------------------------------------------

def _mod2d(M, N, dtype, divisor="tile"):
    """Y = X % D over an M x N tile: D a tile, a float constant, a scalar parameter or a row vector."""
    if divisor == "param":
        @T.prim_func
        def k(X: T.Tensor((M, N), dtype), D: T.Tensor((M, N), dtype), s: T.float32, Y: T.Tensor((M, N), dtype)):
            with T.Kernel(1) as b:
                a = T.alloc_fragment((M, N), dtype)
                T.copy(X[0, 0], a)
                for i, j in T.Parallel(M, N):
                    a[i, j] = a[i, j] % s
                T.copy(a, Y[0, 0])
        return k

    @T.prim_func
    def k(X: T.Tensor((M, N), dtype), D: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(1) as b:
            a = T.alloc_fragment((M, N), dtype)
            d = T.alloc_fragment((M, N), dtype)
            v = T.alloc_fragment((M,), dtype)
            T.copy(X[0, 0], a)
            T.copy(D[0, 0], d)
            for i in T.Parallel(M):
                v[i] = d[i, 0]
            if divisor == "tile":
                for i, j in T.Parallel(M, N):
                    a[i, j] = a[i, j] % d[i, j]
            elif divisor == "row":
                for i, j in T.Parallel(M, N):
                    a[i, j] = a[i, j] % v[i]
            else:
                for i, j in T.Parallel(M, N):
                    a[i, j] = a[i, j] % divisor
            T.copy(a, Y[0, 0])
    return k


F32_MAX = np.finfo(np.float32).max


def _random_bits(rng, n):
    """float32 values of uniformly random bit patterns (every exponent, both signs, NaN / inf)."""
    return rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


def _hard_pairs(rng, n):
    """(x, y) pairs that stress an exact remainder: subnormal divisors and dividends, |x| >> |y|, x a
    multiple k * y * 2^s of y and one ulp either side, the top binade, divisors near FLT_MAX, mantissas
    of all ones, |x| < |y|, specials."""
    sub = rng.integers(1, 2 ** 23, n).astype(np.uint32).view(np.float32)
    ones = ((rng.integers(1, 255, n).astype(np.uint32) << 23) | np.uint32(0x7FFFFF)).view(np.float32)
    top = ((np.uint32(254) << 23) | rng.integers(0, 2 ** 23, n).astype(np.uint32)).view(np.float32)
    r = _random_bits(rng, n)
    r = np.where(np.isfinite(r), r, np.float32(1.5))
    with np.errstate(all="ignore"):
        k = rng.integers(1, 2 ** 12, n).astype(np.float64)
        mult = np.ldexp(np.abs(r).astype(np.float64) * k, rng.integers(0, 60, n)).astype(np.float32)
    mult = np.where(np.isfinite(mult), mult, np.float32(3))
    xs = [r, sub, top, mult, np.nextafter(mult, np.float32(0)), np.nextafter(mult, np.float32(np.inf)), ones,
          np.full(n, F32_MAX, np.float32), r * np.float32(1e-30)]
    ys = [sub, r, r, r, r, r, np.roll(ones, 1), np.nextafter(np.full(n, F32_MAX, np.float32), np.float32(0)), r]
    x = np.concatenate(xs)
    y = np.concatenate(ys)
    sign = np.where(rng.random((2, x.size)) < 0.5, -1, 1).astype(np.float32)
    spec = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1, -1, 1e-45, -1e-45, F32_MAX, -F32_MAX, 0.1, 7], np.float32)
    sx, sy = np.meshgrid(spec, spec)
    return (np.concatenate([x * sign[0], sx.ravel(), [0.3, -0.3, 1e6 + 1, 1e30, 100]]).astype(np.float32),
            np.concatenate([y * sign[1], sy.ravel(), [0.1, 0.1, 3.3, 7, 0.7]]).astype(np.float32))


def _as_tile(v, rows, cols, fill):
    out = np.full(rows * cols, fill, v.dtype)
    out[:v.size] = v
    return out.reshape(rows, cols)


@pytest.mark.parametrize("target", TARGETS)
def test_float_mod_exact_float32_random_bits(target):
    """20 x 37 tiles (a column tail) of random bit patterns against random bit patterns: the whole
    float32 range, subnormals, inf and NaN, both signs; numpy's result bit for bit."""
    rng = np.random.default_rng(2601)
    x = _random_bits(rng, 20 * 37).reshape(20, 37)
    y = _random_bits(rng, 20 * 37).reshape(20, 37)
    _bits_equal(_run(_mod2d(20, 37, "float32"), target, x, y), _mod_ref(x, y, "float32"), target)


@pytest.mark.parametrize("target", TARGETS)
def test_float_mod_exact_float32_hard_pairs(target):
    """The remainder's hard cases (see _hard_pairs), 24 x 40 tiles per run."""
    rng = np.random.default_rng(2602)
    x, y = _hard_pairs(rng, 96)
    rows, cols = 24, 40
    for s in range(0, x.size, rows * cols):
        xt = _as_tile(x[s:s + rows * cols], rows, cols, 1)
        yt = _as_tile(y[s:s + rows * cols], rows, cols, 1)
        _bits_equal(_run(_mod2d(rows, cols, "float32"), target, xt, yt), _mod_ref(xt, yt, "float32"),
                    f"{target} pairs {s}..")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float_mod_exact_16bit(dtype, target):
    """float16 / bfloat16 tiles of random bit patterns (every exponent, subnormals, inf, NaN):
    computed in float32 and rounded once, as numpy's float32 result rounded."""
    rng = np.random.default_rng(2603)
    npdt = tw.testing.np_dtype(dtype)
    x = rng.integers(0, 2 ** 16, (16, 45)).astype(np.uint16).view(npdt)
    y = rng.integers(0, 2 ** 16, (16, 45)).astype(np.uint16).view(npdt)
    _bits_equal(_run(_mod2d(16, 45, dtype), target, x, y), _mod_ref(x, y, dtype), target)


CONSTANTS = [0.1, 3.3, -7.0, 0.7, 1e-45, 3e38, -float(F32_MAX), 0.5, -0.5, 1.0, -2.0, 2.0 ** 64, 2.0 ** 120, 1e-40,
             float("inf"), float("-inf")]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c", CONSTANTS, ids=[repr(c) for c in CONSTANTS])
def test_float_mod_constant_divisor(c, target):
    """x % c for a constant c: non-powers of two (compile-time split divisors, one step per 12 bits of
    the quotient range), powers of two (the fast path below 2^105, the exact form above), subnormal
    and near-FLT_MAX constants, negative ones, +-inf; x random bits and multiples of c."""
    rng = np.random.default_rng(2604)
    x = _random_bits(rng, 12 * 40)
    cf = np.float32(c)
    with np.errstate(all="ignore"):
        mult = np.ldexp(float(abs(cf)) * rng.integers(1, 2 ** 12, 160), rng.integers(0, 40, 160)).astype(np.float32)
    mult = np.where(np.isfinite(mult), mult, np.float32(5))
    x[:160] = mult * np.where(rng.random(160) < 0.5, -1, 1)
    x[160:320] = np.nextafter(mult, np.float32(0))
    x = x.reshape(12, 40)
    ref = _mod_ref(x, np.full_like(x, cf), "float32")
    _bits_equal(_run(_mod2d(12, 40, "float32", c), target, x, np.zeros_like(x)), ref, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("s", [0.1, -3.3, 2.0, float("inf"), 0.0, 1e-45])
def test_float_mod_scalar_parameter(s, target):
    """x % s for a float32 scalar parameter s (a run-time value: the tile form)."""
    rng = np.random.default_rng(2605)
    x = _random_bits(rng, 8 * 24).reshape(8, 24)
    k = tw.compile(_mod2d(8, 24, "float32", "param"), target=target, out_idx=[-1])
    got = np.asarray(k(x, x, s) if target == "cpu" else run_checked(k, x, x, s))
    _bits_equal(got, _mod_ref(x, np.full_like(x, np.float32(s)), "float32"), target)


@pytest.mark.parametrize("target", TARGETS)
def test_float_mod_row_vector_divisor(target):
    """x[i, j] % v[i] (a row vector broadcast along the row)."""
    rng = np.random.default_rng(2606)
    x = _random_bits(rng, 9 * 33).reshape(9, 33)
    d = _random_bits(rng, 9 * 33).reshape(9, 33)
    ref = _mod_ref(x, np.repeat(d[:, :1], 33, axis=1), "float32")
    _bits_equal(_run(_mod2d(9, 33, "float32", "row"), target, x, d), ref, target)


@pytest.mark.parametrize("target", TARGETS)
def test_float_mod_one_element_and_signed_zeros(target):
    """One element; zero results take the divisor's sign (numpy's copysign(0, y)): -4 % 2 is +0,
    4 % -2 is -0, -0.0 % 1 is +0."""
    for x, y in [(-4.0, 2.0), (4.0, -2.0), (-0.0, 1.0), (0.0, -1.0), (6.0, -3.0), (-6.0, -3.0), (1e30, -7.0)]:
        xa = np.array([[x]], np.float32)
        ya = np.array([[y]], np.float32)
        _bits_equal(_run(_mod2d(1, 1, "float32"), target, xa, ya), _mod_ref(xa, ya, "float32"), f"{target} {x} % {y}")


# --- bfloat16 column stores with arithmetic ------------------------------------------------------

def _column_kernel(R, form, stages):
    """An (R, 8) bfloat16 tile per block of X (R x 24), a 1-D map storing down column 3."""
    NB = 3

    @T.prim_func
    def k(X: T.Tensor((R, NB * 8), "bfloat16"), F: T.Tensor((R,), "float32"), Y: T.Tensor((R, NB * 8), "bfloat16")):
        with T.Kernel(1) as b:
            f = T.alloc_fragment((R,), "float32")
            cy = T.alloc_fragment((R,), "bfloat16")
            T.copy(F[0], f)
            T.fill(cy, 0.25)
            for kk in T.Pipelined(NB, num_stages=stages):
                x = T.alloc_fragment((R, 8), "bfloat16")
                T.copy(X[0, kk * 8], x)
                if form == "mul_add":
                    for i in T.Parallel(R):
                        x[i, 3] = x[i, 3] * 1.1 + cy[i]
                elif form == "two_columns":
                    for i in T.Parallel(R):
                        x[i, 3] = x[i, 5] - x[i, 3] * x[i, 0]
                elif form == "cast":
                    for i in T.Parallel(R):
                        x[i, 3] = T.cast(f[i] * 3.0, "bfloat16")
                elif form == "copy":
                    for i in T.Parallel(R):
                        x[i, 3] = x[i, 6]
                else:  # a constant
                    for i in T.Parallel(R):
                        x[i, 3] = 1.5
                T.copy(x, Y[0, kk * 8])
    return k


def _column_ref(x, f, form):
    """float32 arithmetic rounded once to bfloat16, as the language defines it."""
    bf = tw.testing.np_dtype("bfloat16")
    y = x.copy()
    xf = x.astype(np.float32)
    for kk in range(3):
        c = slice(8 * kk, 8 * kk + 8)
        xs = xf[:, c]
        if form == "mul_add":
            v = xs[:, 3] * np.float32(1.1) + np.float32(0.25)
        elif form == "two_columns":
            v = xs[:, 5] - xs[:, 3] * xs[:, 0]
        elif form == "cast":
            v = f * np.float32(3.0)
        elif form == "copy":
            v = xs[:, 6]
        else:
            v = np.full(x.shape[0], 1.5, np.float32)
        y[:, 8 * kk + 3] = v.astype(bf)
    return y


@pytest.mark.parametrize("stages", [1, 2])
@pytest.mark.parametrize("form", ["mul_add", "two_columns", "cast", "copy", "constant"])
def test_bfloat16_column_store(form, stages):
    """A bfloat16 column store (column 3 of each 7 x 8 block: a row tail of the 8-row granule) with
    arithmetic whose float32 result is not a bfloat16 (rounding to nearest even matters), a copy
    and a constant: cpu and ascend910b equal the float32-then-bfloat16 reference bit for bit."""
    R = 7
    rng = np.random.default_rng(2607)
    bf = tw.testing.np_dtype("bfloat16")
    x = rng.standard_normal((R, 24)).astype(np.float32).astype(bf)
    f = rng.standard_normal(R).astype(np.float32)
    ref = _column_ref(x, f, form)
    for target in TARGETS:
        _bits_equal(_run(_column_kernel(R, form, stages), target, x, f), ref, target)
