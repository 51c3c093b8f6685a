"""T.fma(x, y, z): x * y + z rounded once, and the cpu target's reductions of a product (h-fma38).

Every float operation a kernel writes is rounded on its own (cpu compiles with -ffp-contract=off, h-contract37);
a kernel that wants one rounding writes T.fma. The reference is exact: x * y + z as a fraction, rounded once to
float32 (float64 arithmetic would round twice). float16 / bfloat16 values are computed in float32 (docs/language.md),
their product exact there: cpu's fmaf and ascend910b's rounded product and sum give the same bits. A float32 T.fma is
refused on ascend910b (its Vector unit's multiply-add is not documented as one rounding), at the call, with a hint
whose form runs on both targets. A sum of a product whose values feed only the sum (rms_norm's x * x) is accumulated
with one fma per element on cpu, the reduction's rounding being the target's: within the reductions' tolerance.
"""
import pathlib
import sys
from fractions import Fraction

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import unchecked_code_only  # noqa: E402


def _round_f32(q):
    """The float32 nearest the fraction q (ties to even)."""
    r = np.float32(float(q))  # within one float32 step of q
    best = None
    for c in (np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))):
        if not np.isfinite(c):
            continue
        d = abs(Fraction(float(c)) - q)
        even = (int(np.float32(c).view(np.uint32)) & 1) == 0
        if best is None or d < best[0] or (d == best[0] and even):
            best = (d, c)
    return best[1]


def _fma_ref(x, y, z):
    """x * y + z of float32 values (any input dtype, converted exactly) rounded once to float32."""
    x, y, z = (np.asarray(v).astype(np.float32) for v in (x, y, z))
    out = np.empty(x.shape, np.float32)
    for i in np.ndindex(x.shape):
        out[i] = _round_f32(Fraction(float(x[i])) * Fraction(float(y[i])) + Fraction(float(z[i])))
    return out


def _inputs(shape, dt, rng):
    """Random values plus pairs where fma and a rounded product and sum differ: x = y = 1 + 2^-12 (x^2 =
    1 + 2^-11 + 2^-24, whose 2^-24 the rounded product drops), z = -(1 + 2^-11): fma 2^-24, mul + add 0."""
    npdt = tw.testing.np_dtype(dt)
    x = rng.standard_normal(shape).astype(npdt)
    y = rng.standard_normal(shape).astype(npdt)
    z = rng.standard_normal(shape).astype(npdt)
    if dt == "float32" and x.size:
        n = max(1, x.size // 3)
        e = rng.integers(-20, 20, n).astype(np.float64)
        x.flat[:n] = ((1 + 2.0 ** -12) * np.exp2(e)).astype(np.float32)
        y.flat[:n] = ((1 + 2.0 ** -12) * np.exp2(-e)).astype(np.float32)
        z.flat[:n] = np.float32(-(1 + 2.0 ** -11))
    return x, y, z


def _map(shape, dt):
    M, N = shape

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt), Z: T.Tensor((M, N), dt), O: T.Tensor((M, N), dt)):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(M, N):
                O[i, j] = T.fma(X[i, j], Y[i, j], Z[i, j])
    return main


def _scalar(n, dt):
    @T.prim_func
    def main(X: T.Tensor((n,), dt), Y: T.Tensor((n,), dt), Z: T.Tensor((n,), dt), O: T.Tensor((n,), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), dt)
            y = T.alloc_fragment((n,), dt)
            z = T.alloc_fragment((n,), dt)
            o = T.alloc_fragment((n,), dt)
            T.copy(X[0], x)
            T.copy(Y[0], y)
            T.copy(Z[0], z)
            for i in T.serial(n):  # scalar code (lower_scalar_math on ascend910b)
                o[i] = T.fma(x[i], y[i], z[i])
            T.copy(o, O[0])
    return main


@pytest.mark.parametrize("shape", [(3, 19), (1, 1)])
def test_fma_float32_on_cpu_one_rounding(shape):
    rng = np.random.default_rng(38)
    x, y, z = _inputs(shape, "float32", rng)
    ref = _fma_ref(x, y, z)
    got = tw.compile(_map(shape, "float32"), target="cpu", out_idx=[-1])(x, y, z)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint32), ref.view(np.uint32))
    got_s = tw.compile(_scalar(shape[0] * shape[1], "float32"), target="cpu", out_idx=[-1])(
        x.ravel(), y.ravel(), z.ravel())
    np.testing.assert_array_equal(np.asarray(got_s).view(np.uint32), ref.ravel().view(np.uint32))
    # teeth: a rounded product and a rounded sum differ from the fma where the inputs were built to
    assert np.count_nonzero(ref != x * y + z) >= max(1, x.size // 3)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(3, 37), (1, 1)])
def test_fma_half_cpu_equals_ascend_bit_for_bit(dt, shape):
    rng = np.random.default_rng(3800)
    x, y, z = _inputs(shape, dt, rng)
    npdt = tw.testing.np_dtype(dt)
    ref = _fma_ref(x, y, z).astype(npdt)  # one rounding to float32, then the store's to dt
    cases = [(_map(shape, dt), (x, y, z), ref)]
    if shape[1] > 1:  # scalar code (lower_scalar_math on ascend910b) too
        cases.append((_scalar(shape[1], dt), (x[0], y[0], z[0]), ref[0]))
    for prim, args, want in cases:
        got_cpu = tw.compile(prim, target="cpu", out_idx=[-1])(*args)
        got_asc = run_checked(tw.compile(prim, target=TARGET, out_idx=[-1]), *args)
        for name, got in (("cpu", got_cpu), (TARGET, got_asc)):
            np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16), err_msg=f"{name} {dt}")


def test_fma_promotes_its_arguments():
    # a float32 tile times a Python float plus a float16 tile: one type (float32) for the three
    @T.prim_func
    def main(X: T.Tensor((5,), "float32"), Z: T.Tensor((5,), "float16"), O: T.Tensor((5,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(5):
                O[i] = T.fma(X[i], 3.0, Z[i])
    x = np.linspace(-2, 2, 5).astype(np.float32)
    z = np.linspace(1, 3, 5).astype(np.float16)
    got = tw.compile(main, target="cpu", out_idx=[-1])(x, z)
    np.testing.assert_array_equal(got, _fma_ref(x, np.full(5, 3, np.float32), z))


def test_fma_float32_refused_on_ascend_with_a_hint_that_runs():
    with pytest.raises(tw.TilewrightError, match=r"T.fma of float32 values is not supported on ascend910b") as e:
        tw.compile(_map((2, 8), "float32"), target=TARGET, out_idx=[-1])
    assert "test_fma38_s38.py" in str(e.value) and "write x * y + z" in str(e.value)
    with pytest.raises(tw.TilewrightError, match=r"T.fma of float32 values is not supported on ascend910b"):
        tw.compile(_scalar(4, "float32"), target=TARGET, out_idx=[-1])

    @T.prim_func
    def hinted(X: T.Tensor((2, 8), "float32"), Y: T.Tensor((2, 8), "float32"), Z: T.Tensor((2, 8), "float32"),
               O: T.Tensor((2, 8), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(2, 8):
                O[i, j] = X[i, j] * Y[i, j] + Z[i, j]
    x, y, z = _inputs((2, 8), "float32", np.random.default_rng(1))
    want = (x * y + z).view(np.uint32)  # numpy: each operation rounded
    for target in ("cpu", TARGET):
        k = tw.compile(hinted, target=target, out_idx=[-1])
        got = run_checked(k, x, y, z) if target == TARGET else k(x, y, z)
        np.testing.assert_array_equal(np.asarray(got).view(np.uint32), want, err_msg=target)


def _sum_sq(N, keep):
    """The row sums of (x - 0.5) * (x + 0.25); keep: the product tile copied out too (read later)."""
    @T.prim_func
    def fused(X: T.Tensor((8, N), "float32"), S: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, N), "float32")
            sq = T.alloc_fragment((8, N), "float32")
            s = T.alloc_fragment((8,), "float32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(8, N):
                sq[i, j] = (x[i, j] - 0.5) * (x[i, j] + 0.25)
            T.reduce_sum(sq, s, dim=1)
            T.copy(s, S[0])

    @T.prim_func
    def kept(X: T.Tensor((8, N), "float32"), S: T.Tensor((8,), "float32"), Q: T.Tensor((8, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, N), "float32")
            sq = T.alloc_fragment((8, N), "float32")
            s = T.alloc_fragment((8,), "float32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(8, N):
                sq[i, j] = (x[i, j] - 0.5) * (x[i, j] + 0.25)
            T.reduce_sum(sq, s, dim=1)
            T.copy(s, S[0])
            T.copy(sq, Q[0, 0])
    return kept if keep else fused


@pytest.mark.parametrize("N", [37, 1000])
@unchecked_code_only
def test_sum_of_a_product_fused_on_cpu_within_the_reduction_tolerance(N):
    rng = np.random.default_rng(N)
    x = rng.standard_normal((8, N)).astype(np.float32)
    x64 = x.astype(np.float64)
    want = ((x64 - 0.5) * (x64 + 0.25)).sum(axis=1)
    scale = (np.abs(x64 - 0.5) * np.abs(x64 + 0.25)).sum(axis=1)
    for keep in (False, True):
        out_idx = [1, 2] if keep else [1]
        k = tw.compile(_sum_sq(N, keep), target="cpu", out_idx=out_idx)
        got = k(x)
        s, q = got if keep else (got, None)
        # the product feeds only the sum: one fma per element; read later, the tile holds the rounded product
        assert ("tw_cpu::simd::fma(" in k.get_kernel_source()) == (not keep), keep
        assert np.all(np.abs(s - want) <= 300 * 2.0 ** -24 * scale), keep
        if keep:
            np.testing.assert_array_equal(q, (x - np.float32(0.5)) * (x + np.float32(0.25)))
        s_asc = run_checked(tw.compile(_sum_sq(N, keep), target=TARGET, out_idx=out_idx), x)
        s_asc = s_asc[0] if keep else s_asc
        assert np.all(np.abs(s_asc - want) <= 300 * 2.0 ** -24 * scale), keep


def test_fma_rows_of_a_symbolic_count_none_and_a_tail():
    """M rows from the call (a block of 4 rows: M = 0 runs no block, M = 6 a partial second one)."""
    @tw.jit(out_idx=[-1])
    def rows(dt):
        M = T.symbolic("M")

        @T.prim_func
        def main(X: T.Tensor((M, 5), dt), Y: T.Tensor((M, 5), dt), Z: T.Tensor((M, 5), dt), O: T.Tensor((M, 5), dt)):
            with T.Kernel(T.ceildiv(M, 4)) as bx:
                for i, j in T.Parallel(4, 5):
                    if bx * 4 + i < M:
                        O[bx * 4 + i, j] = T.fma(X[bx * 4 + i, j], Y[bx * 4 + i, j], Z[bx * 4 + i, j])
        return main

    rng = np.random.default_rng(5)
    for dt, targets in (("float32", ("cpu",)), ("float16", ("cpu", TARGET))):
        for M in (0, 6):
            x, y, z = _inputs((M, 5), dt, rng)
            want = _fma_ref(x, y, z).astype(tw.testing.np_dtype(dt))
            for target in targets:
                k = rows(dt, target=target)
                got = run_checked(k, x, y, z) if target == TARGET else k(x, y, z)
                assert np.asarray(got).shape == (M, 5)
                np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8), err_msg=f"{target} {dt} {M}")
