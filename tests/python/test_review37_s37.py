"""review37: adversarial review of session 37's compiler changes (issue 13: Ascend trust). Findings in
docs/testing.md 'Session 37: review37'. Small shapes, fixed seeds; ascend910b with the checker on."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET, run_checked


# ---- R1: a serial nest serial_maps reads as a map keeps its math whole-tile (lower_scalar_math after it) -----

def serial_nest(M, N):
    @T.prim_func
    def serial_nest(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((M, N), "float32")
            T.copy(X, t)
            for i in T.serial(M):
                for j in T.serial(N):
                    t[i, j] = T.sqrt(T.abs(t[i, j]))
            T.copy(t, Y)
    return serial_nest


def test_r1_serial_nest_math_stays_whole_tile():
    x = np.random.default_rng(37).standard_normal((5, 37)).astype(np.float32)
    ref = np.sqrt(np.abs(x))
    np.testing.assert_allclose(tw.compile(serial_nest(5, 37), target="cpu", out_idx=[1])(x), ref, rtol=2e-6)
    k = tw.compile(serial_nest(5, 37), target=TARGET, out_idx=[1])
    np.testing.assert_allclose(run_checked(k, x), ref, rtol=2e-6)
    src = k.get_source("ascendc")
    # one Abs and one Sqrt over the whole tile, no per-element one-element tiles (GetValue of tw_sqrt / tw_abs)
    assert "Sqrt(t, t," in src and "tw_sqrt" not in src and "tw_abs" not in src, src[-3000:]


# ---- R2: a call reading an element of the tile its map stores to stays in the map (the located error) ------------

def self_read(N, math):
    @T.prim_func
    def self_read(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((N,), "float32")
            T.copy(X, t)
            for i in T.Parallel(N):
                if math:
                    t[i] = t[i] / T.sqrt(t[0] + 1.0)
                else:
                    t[i] = t[i] / (t[0] + 1.0)
            T.copy(t, Y)
    return self_read


@pytest.mark.parametrize("math", [True, False])
def test_r2_scalar_read_of_a_stored_tile_is_refused(math):
    # since session 41 the error of transform/independent_maps.h, on every target (h-selfread41)
    with pytest.raises(tw.TilewrightError, match=r"stores into 't' at t\[i\] and reads it at t\[0\]"):
        tw.compile(self_read(7, math), target=TARGET, out_idx=[1])


def hoisted(N):
    @T.prim_func
    def hoisted(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((N,), "float32")
            T.copy(X, t)
            s = t[0]
            for i in T.Parallel(N):
                t[i] = t[i] / T.sqrt(s + 1.0)
            T.copy(t, Y)
    return hoisted


def test_r2_the_hint_runs_on_both_targets():
    x = np.abs(np.random.default_rng(2).standard_normal(7)).astype(np.float32)
    ref = x / np.sqrt(x[0] + 1.0)
    np.testing.assert_allclose(tw.compile(hoisted(7), target="cpu", out_idx=[1])(x), ref, rtol=2e-6)
    np.testing.assert_allclose(run_checked(tw.compile(hoisted(7), target=TARGET, out_idx=[1]), x), ref, rtol=2e-6)


# ---- R3: scalar math whose value the Cube side of a gemm kernel sees: an error naming the user's call ------------

def gemm_scalar_math(form, M=32):
    @T.prim_func
    def gemm_scalar_math(A: T.Tensor((M, M), "float16"), B: T.Tensor((M, M), "float16"), a: T.float32,
                         C: T.Tensor((M, M), "float32")):
        with T.Kernel(1) as b:
            As = T.alloc_shared((M, M), "float16")
            Bs = T.alloc_shared((M, M), "float16")
            acc = T.alloc_fragment((M, M), "float32")
            o = T.alloc_fragment((M, M), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, acc, clear_accum=True)
            if form == "let":
                s = T.rsqrt(a)
                for i, j in T.Parallel(M, M):
                    o[i, j] = acc[i, j] * s
            elif form == "in_map":
                for i, j in T.Parallel(M, M):
                    o[i, j] = acc[i, j] * T.rsqrt(a)
            elif form == "let_if":  # (session 38) a let the Cube core needs: the condition of an if around a gemm
                s = T.rsqrt(a)
                if s < 1.0:
                    T.gemm(As, Bs, acc)
                for i, j in T.Parallel(M, M):
                    o[i, j] = acc[i, j]
            elif form == "if_gemm":
                if T.rsqrt(a) < 1.0:
                    T.gemm(As, Bs, acc)
                for i, j in T.Parallel(M, M):
                    o[i, j] = acc[i, j]
            else:  # "if_param": the value passed as a scalar parameter (a = rsqrt(4.0) computed on the host)
                if a < 1.0:
                    T.gemm(As, Bs, acc)
                for i, j in T.Parallel(M, M):
                    o[i, j] = acc[i, j]
            T.copy(o, C)
    return gemm_scalar_math


def _check_gemm_scalar_math(form):
    rng = np.random.default_rng(3)
    A, B = [(rng.integers(-3, 4, (32, 32)) / 4).astype(np.float16) for _ in range(2)]
    p = A.astype(np.float64) @ B
    a = np.float32(0.5 if form == "if_param" else 4.0)
    ref = p * 0.5 if form in ("in_map", "let") else 2 * p
    k = {t: tw.compile(gemm_scalar_math(form), target=t, out_idx=[3]) for t in ("cpu", TARGET)}
    np.testing.assert_allclose(k["cpu"](A, B, a), ref, rtol=1e-6)
    np.testing.assert_array_equal(run_checked(k[TARGET], A, B, a), k["cpu"](A, B, a))
    return k[TARGET].get_source("ascendc")


def test_r3_the_hints_forms_run():
    # the let's hint: the call in the map (on the Vector unit, its value read back); the if's: a scalar parameter;
    # (session 38, h-legalize38) the let used only in maps runs as written: split_cube_vector keeps a let of a UB
    # tile's element on the Vector core
    assert "GetValue(0)" in _check_gemm_scalar_math("in_map")
    assert "GetValue(0)" in _check_gemm_scalar_math("let")
    _check_gemm_scalar_math("if_param")


@pytest.mark.parametrize("form, where", [("let_if", "let 's' of a kernel with Cube code"),
                                         ("if_gemm", "the condition of an if around T.gemm")])
def test_r3_cube_side_scalar_math_names_the_call(form, where):
    # was (int37): "let 's' reads element tw_rsqrt_0[0] of tile 'tw_rsqrt_0' ..." / "buffer 'tw_exp_0' is used
    # outside its scope": the compiler's one-element tile, and a hint naming a GM tensor the user never wrote
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(gemm_scalar_math(form), target=TARGET, out_idx=[3])
    msg = str(e.value)
    assert "T.rsqrt(a) in " + where in msg and "tw_rsqrt" not in msg, msg
    line = "s = T.rsqrt(a)" if form == "let_if" else "if T.rsqrt(a) < 1.0:"
    assert line in msg, msg  # the user's source line
    assert ("use 's' only inside T.Parallel maps" if form == "let_if" else "as a scalar parameter") in msg, msg


# ---- R4: |n| of an integer scalar simulated, then did not print ('internal: the AscendC printer got ...') -------

def int_abs(N):
    @T.prim_func
    def int_abs(X: T.Tensor((N,), "float32"), n: T.int32, Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((N,), "float32")
            T.copy(X, t)
            m = T.abs(n) + 1
            for i in T.Parallel(N):
                t[i] = t[i] * T.abs(n) + m
            if T.abs(n) > 2:
                for i in T.Parallel(N):
                    t[i] = t[i] * 0.5
            T.copy(t, Y)
    return int_abs


def test_r4_integer_abs_of_a_scalar_prints_and_agrees():
    x = np.arange(7, dtype=np.float32) - 3
    k = {t: tw.compile(int_abs(7), target=t, out_idx=[2]) for t in ("cpu", TARGET)}
    for n in (-3, 0, 2, 5, -2**31):
        ref = x.astype(np.float64) * abs(n) + abs(n) + 1
        ref = ref * 0.5 if abs(n) > 2 else ref
        if n != -2**31:  # (|n| wraps in int32 there: the targets agree, checked next)
            np.testing.assert_allclose(k["cpu"](x, n), ref.astype(np.float32), rtol=1e-6, err_msg=str(n))
        np.testing.assert_array_equal(run_checked(k[TARGET], x, n), k["cpu"](x, n), err_msg=str(n))
    assert "tw_max(" in k[TARGET].get_source("ascendc")
