"""Session 38 (h-legalize38): a math call of a row's value in a map over more than two dims (gated RMSNorm's /
a 2-D layer norm's T.rsqrt(r[i] / n + eps) over i, g, c) is computed, not refused. legalize_vector runs the leading
loops of such a map serially around a 2-D map of the last two, where r[i] is a scalar operand: the call was scalar
code, verify_program's located error (integration fix 90337150) whose hint was the form a user writes by hand, the
call over the rows in its own map first (rr[i]). lower_scalar_math now writes that form itself.
"""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET

# float32: a few ulp of the vector functions plus sums of G * C squares; float16 / bfloat16 outputs: one rounding
TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def rownorm(M, G, C, dt, form, bm=4):
    """y = x * f(r[i]) over (bm, G, C), r[i] the row's sum of squares (rsqrt: RMSNorm of each row's G x C values)."""
    n = float(G * C)

    @T.prim_func
    def main(X: T.Tensor((M, G, C), dt), Y: T.Tensor((M, G, C), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, G, C), "float32")
            q = T.alloc_fragment((bm, G, C), "float32")
            y = T.alloc_fragment((bm, G, C), dt)
            s = T.alloc_fragment((bm, G), "float32")
            r = T.alloc_fragment((bm,), "float32")
            rr = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0, 0], x)
            for i, g, c in T.Parallel(bm, G, C):
                q[i, g, c] = x[i, g, c] * x[i, g, c]
            T.reduce_sum(q, s, dim=2)
            T.reduce_sum(s, r, dim=1)
            if form == "hinted":  # the form verify_program's hint named (port37)
                for i in T.Parallel(bm):
                    rr[i] = T.rsqrt(r[i] / n + 1e-5)
                for i, g, c in T.Parallel(bm, G, C):
                    y[i, g, c] = x[i, g, c] * rr[i]
            elif form == "rsqrt":
                for i, g, c in T.Parallel(bm, G, C):
                    y[i, g, c] = x[i, g, c] * T.rsqrt(r[i] / n + 1e-5)
            elif form == "nested":  # exp / log / sqrt / pow / rsqrt of row values, nested, through lets of the map
                for i, g, c in T.Parallel(bm, G, C):
                    m = r[i] / n
                    v = m + 1e-5
                    y[i, g, c] = (x[i, g, c] * T.exp(-T.sqrt(m)) + T.log(r[i] + 1.0) - T.pow(m + 1.0, 1.5) * 0.25 +
                                  0.5 ** m + x[i, g, c] * T.rsqrt(v))
            elif form == "column":  # a row's value read down a column of x: no vector instruction reads it
                for i, g, c in T.Parallel(bm, G, C):
                    y[i, g, c] = x[i, g, c] * T.exp(x[i, 0, 0])
            elif form == "column_hinted":  # the hint's form: the call over a slice of rows first
                e = T.alloc_fragment((bm, C), "float32")
                for i, c in T.Parallel(bm, C):
                    e[i, c] = T.exp(x[i, 0, c])
                for i, g, c in T.Parallel(bm, G, C):
                    y[i, g, c] = x[i, g, c] * e[i, 0]
            T.copy(y, Y[bx * bm, 0, 0])
    return main


def ref(x, form):
    X = x.astype(np.float64)
    n = X.shape[1] * X.shape[2]
    r = (X * X).sum((1, 2), keepdims=True)
    if form in ("hinted", "rsqrt"):
        return X / np.sqrt(r / n + 1e-5)
    assert form == "nested"  # 0.5 ** v: exp(v * ln 0.5) on the vector (Adam's b1 ** step, per row)
    return (X * np.exp(-np.sqrt(r / n)) + np.log(r + 1) - (r / n + 1) ** 1.5 * 0.25 + 0.5 ** (r / n) +
            X / np.sqrt(r / n + 1e-5))


def run_both(prog, x, dt, want):
    """cpu and ascend910b (simulated, checker on) against float64, and against each other."""
    got = {}
    for t in ("cpu", TARGET):
        k = tw.compile(prog, target=t, out_idx=[-1])
        if t == "cpu":
            got[t] = k(x)
        else:
            p = k.profile(x)
            assert p["reports"] == [], p["reports"]
            got[t] = p.outputs
        np.testing.assert_allclose(got[t].astype(np.float64), want, rtol=TOL[dt], atol=TOL[dt], err_msg=t)
    np.testing.assert_allclose(got["cpu"].astype(np.float64), got[TARGET].astype(np.float64), rtol=2 * TOL[dt],
                               atol=2 * TOL[dt])


@pytest.mark.parametrize("M, G, C, dt", [(17, 3, 16, "float32"), (1, 3, 16, "float32"), (3, 1, 16, "float16")])
def test_row_rsqrt_in_a_3d_map_runs(M, G, C, dt):
    x = np.random.default_rng(38).standard_normal((M, G, C)).astype(tw.testing.np_dtype(dt))
    run_both(rownorm(M, G, C, dt, "rsqrt"), x, dt, ref(x, "rsqrt"))


def test_row_math_nested_in_expressions():
    x = np.random.default_rng(3).standard_normal((5, 2, 8)).astype(np.float32)
    run_both(rownorm(5, 2, 8, "float32", "nested"), x, "float32", ref(x, "nested"))


def half_rows(M, G, C, dt, bm=4):
    """The call of float16 / bfloat16 values: computed in float32 like the rest of the map, rounded once at the store."""
    @T.prim_func
    def main(X: T.Tensor((M, G, C), dt), R: T.Tensor((M,), dt), Y: T.Tensor((M, G, C), dt)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, G, C), dt)
            r = T.alloc_fragment((bm,), dt)
            y = T.alloc_fragment((bm, G, C), dt)
            T.copy(X[bx * bm, 0, 0], x)
            T.copy(R[bx * bm], r)
            for i, g, c in T.Parallel(bm, G, C):
                y[i, g, c] = x[i, g, c] * T.rsqrt(r[i] * 3.0 + 0.5)
            T.copy(y, Y[bx * bm, 0, 0])
    return main


@pytest.mark.parametrize("dt, ulp", [("float16", 2.0 ** -10), ("bfloat16", 2.0 ** -7)])
def test_row_math_of_half_values_rounds_once(dt, ulp):
    # a tile of the call's dtype would round the row's value first: 0.745 ulp (float16) against cpu's 0.47
    rng = np.random.default_rng(1)
    x = rng.standard_normal((13, 3, 16)).astype(tw.testing.np_dtype(dt))
    r = (0.3 + rng.random(13)).astype(tw.testing.np_dtype(dt))
    R = r.astype(np.float64)[:, None, None] * 3 + np.array(0.5).astype(tw.testing.np_dtype(dt)).astype(np.float64)
    want = x.astype(np.float64) / np.sqrt(R)
    for t in ("cpu", TARGET):
        k = tw.compile(half_rows(13, 3, 16, dt), target=t, out_idx=[-1])
        got = (k(x, r) if t == "cpu" else k.profile(x, r).outputs).astype(np.float64)
        # one rounding of the float32 value: half an ulp of the value's binade, relative 2^-11 / 2^-8 (+ float32's)
        rel = np.abs(got - want) / np.abs(want)
        assert rel.max() <= ulp / 2 * 1.01, (t, rel.max() / ulp)


def row_scale4(A, B, G, C, dt):
    """A map over four dims scaled by a math call of s[a, b] (the two leading loops run serially)."""
    @T.prim_func
    def main(X: T.Tensor((A, B, G, C), dt), S: T.Tensor((A, B), "float32"), Y: T.Tensor((A, B, G, C), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((A, B, G, C), dt)
            s = T.alloc_fragment((A, B), "float32")
            y = T.alloc_fragment((A, B, G, C), dt)
            T.copy(X, x)
            T.copy(S, s)
            for a, b, g, c in T.Parallel(A, B, G, C):
                y[a, b, g, c] = x[a, b, g, c] * T.sqrt(s[a, b]) + T.exp(s[a, b] * -0.5)
            T.copy(y, Y)
    return main


def test_row_math_in_a_4d_map():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 2, 16)).astype(np.float16)
    s = (0.5 + rng.random((2, 3))).astype(np.float32)
    S = s.astype(np.float64)[..., None, None]
    want = x.astype(np.float64) * np.sqrt(S) + np.exp(-0.5 * S)
    for t in ("cpu", TARGET):
        k = tw.compile(row_scale4(2, 3, 2, 16, "float16"), target=t, out_idx=[-1])
        got = k(x, s) if t == "cpu" else k.profile(x, s).outputs
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=TOL["float16"], atol=TOL["float16"], err_msg=t)


def test_row_value_read_down_a_column_is_still_a_located_error():
    # x[i, 0, 0] over the rows is a column of x, which no vector instruction reads: the call stays per row, scalar
    # code, verify_program's error at the call naming it; the hint's form runs
    with pytest.raises(tw.TilewrightError, match=r"math function 'exp' of a scalar") as e:
        tw.compile(rownorm(5, 2, 8, "float32", "column"), target=TARGET, out_idx=[-1])
    assert "T.exp(x[i, 0, 0])" in str(e.value) and "e[i, c] = T.exp(x[i, 0, c])" in str(e.value), str(e.value)
    x = np.random.default_rng(5).standard_normal((5, 2, 8)).astype(np.float32)
    want = x * np.exp(x[:, :1, :1].astype(np.float64))
    run_both(rownorm(5, 2, 8, "float32", "column_hinted"), x, "float32", want)


# ---- review37 R3: scalar math of a gemm kernel's vector code in a let --------------------------------------------
# A let of T.rsqrt(a) (lower_scalar_math: an element of a one-element UB tile) or of a UB tile's element the user
# wrote was refused in a kernel with a gemm (a let ran on both cores; the tile lives on the Vector core's UB): a let
# used only in T.Parallel maps now runs on the Vector core alone (split_cube_vector), computed once, outside the
# loop; a let the Cube code uses (an if around a gemm) stays a located error.
def gemm_let(form, K=2, M=32):
    @T.prim_func
    def main(A: T.Tensor((K, M, M), "float16"), B: T.Tensor((M, M), "float16"), a: T.float32,
             C: T.Tensor((K, M, M), "float32")):
        with T.Kernel(1) as b:
            As = T.alloc_shared((M, M), "float16")
            Bs = T.alloc_shared((M, M), "float16")
            acc = T.alloc_fragment((M, M), "float32")
            o = T.alloc_fragment((M, M), "float32")
            t = T.alloc_fragment((1,), "float32")
            T.copy(B, Bs)
            for i in T.Parallel(1):
                t[i] = a * 0.5
            if form == "math":
                s = T.rsqrt(a) * 2.0
            else:
                s = t[0]
            for k in T.serial(K):
                T.copy(A[k, 0, 0], As)
                T.gemm(As, Bs, acc, clear_accum=True)
                if form == "cube" and s > 1.0:
                    T.gemm(As, Bs, acc)
                for i, j in T.Parallel(M, M):
                    o[i, j] = acc[i, j] * s + T.exp(s * 0.1)
                T.copy(o, C[k, 0, 0])
    return main


@pytest.mark.parametrize("form", ["math", "tile"])
def test_gemm_kernel_let_used_in_maps_runs(form):
    rng = np.random.default_rng(38)
    A = (rng.integers(-3, 4, (2, 32, 32)) / 4).astype(np.float16)
    B = (rng.integers(-3, 4, (32, 32)) / 4).astype(np.float16)
    a = np.float32(4.0)
    s = 1.0 if form == "math" else 2.0
    want = np.einsum("kij,jl->kil", A.astype(np.float64), B) * s + np.exp(s * 0.1)
    got = {}
    for t in ("cpu", TARGET):
        k = tw.compile(gemm_let(form), target=t, out_idx=[3])
        if t == "cpu":
            got[t] = k(A, B, a)
        else:
            p = k.profile(A, B, a)
            assert p["reports"] == [], p["reports"]
            got[t] = p.outputs
        np.testing.assert_allclose(got[t], want, rtol=1e-6, atol=1e-6, err_msg=t)
    np.testing.assert_allclose(got["cpu"], got[TARGET], rtol=1e-6, atol=1e-6)


def test_gemm_kernel_let_the_cube_uses_is_located():
    with pytest.raises(tw.TilewrightError, match=r"let 's' reads element t\[0\] of tile 't' as a scalar: .* the "
                                                 r"Cube code uses 's'") as e:
        tw.compile(gemm_let("cube"), target=TARGET, out_idx=[3])
    assert "s = t[0]" in str(e.value) and "inside a T.Parallel map" in str(e.value), str(e.value)


# ---- found on the way: a row loop after a gemm writing a tile the row split did not cut ----------------------------
# `for r in T.serial(M): for j in T.Parallel(N): o2[r, j] = o[r, j] * 2.0` after a gemm: the row loop over the
# hand-off tile o runs half the rows on each Vector core, but o2 was not a row tile, so AIV 0 stored all of o2 with
# only its half written (the checker's uninitialised-read report; garbage rows on the chip). split_cube_vector's row
# propagation now follows row loops as it follows maps: o2 is cut too.
def gemm_row_loop(M=32):
    @T.prim_func
    def main(A: T.Tensor((M, M), "float16"), B: T.Tensor((M, M), "float16"), C: T.Tensor((M, M), "float32")):
        with T.Kernel(1) as b:
            As = T.alloc_shared((M, M), "float16")
            Bs = T.alloc_shared((M, M), "float16")
            acc = T.alloc_fragment((M, M), "float32")
            o = T.alloc_fragment((M, M), "float32")
            o2 = T.alloc_fragment((M, M), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, acc, clear_accum=True)
            for i, j in T.Parallel(M, M):
                o[i, j] = acc[i, j] + 1.0
            for r in T.serial(M):
                s = o[r, 0]
                for j in T.Parallel(M):
                    o2[r, j] = o[r, j] * s
            T.copy(o2, C)
    return main


def test_gemm_row_loop_writes_a_tile_the_split_cuts():
    rng = np.random.default_rng(9)
    A, B = [(rng.integers(-3, 4, (32, 32)) / 4).astype(np.float16) for _ in range(2)]
    o = A.astype(np.float64) @ B + 1.0
    want = o * o[:, :1]
    for t in ("cpu", TARGET):
        k = tw.compile(gemm_row_loop(), target=t, out_idx=[2])
        if t == "cpu":
            got = k(A, B)
        else:
            p = k.profile(A, B)
            assert p["reports"] == [], p["reports"]
            got = p.outputs
        np.testing.assert_array_equal(got, want, err_msg=t)
