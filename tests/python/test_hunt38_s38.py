"""hunt38: silent wrong answers and refusals found in session 38's hunt (issue 13: the simulator as the guard).
Findings in /work/hunt38-findings.txt and docs/testing.md 'Session 37 changes hunted (h-hunt38)'. Small shapes,
fixed seeds; ascend910b with the checker on (a report fails), against numpy (float64) and cpu."""
import math

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

from ascend_util import TARGET, run_on


# ---- F1: a T.fill value reading a GM / UB element, or scalar math of one, was refused on ascend910b -----------

def fill_value(form, dt, R, C):
    @T.prim_func
    def fill_value(P: T.Tensor((4,), "float32"), Y: T.Tensor((R, C), dt)):
        with T.Kernel(1) as b:
            pt = T.alloc_fragment((4,), "float32")
            T.copy(P, pt)
            y = T.alloc_fragment((R, C), dt)
            if form == "gm":
                T.fill(y, P[0] * 2.0)
            elif form == "ub":
                T.fill(y, pt[1] - 0.5)
            else:
                T.fill(y, T.log(P[0]) * T.rsqrt(pt[3]))
            y[R - 1, 0] = P[2]
            T.copy(y, Y)
    return fill_value


def _fill_want(form, p, R, C, dt):
    v = {"gm": p[0] * 2.0, "ub": p[1] - 0.5, "math": np.log(p[0]) / np.sqrt(p[3])}[form]
    y = np.full((R, C), v)
    y[R - 1, 0] = p[2]
    return y.astype(np_dtype(dt)).astype(np.float64)


@pytest.mark.parametrize("form", ["gm", "ub", "math"])
@pytest.mark.parametrize("dt,R,C", [("float32", 3, 5), ("float16", 1, 17)])
def test_f1_fill_of_an_element_runs(form, dt, R, C):
    p = np.array([4.0, 2.0, 0.75, 9.0], np.float32)
    want = _fill_want(form, p, R, C, dt)
    got = run_on(fill_value(form, dt, R, C), TARGET, [1], p)
    tw.testing.assert_close(got.astype(np.float64), want, atol=0, rtol=2e-6 if dt == "float32" else 1e-3)


def fill_loop():
    @T.prim_func
    def fill_loop(P: T.Tensor((4,), "float32"), Y: T.Tensor((4, 9), "float16")):
        with T.Kernel(1) as b:
            y = T.alloc_fragment((1, 9), "float16")
            for r in T.serial(4):
                if P[r] > 0:
                    T.fill(y, T.where(P[r] > 1.0, P[r] * 2.0, -P[r]))
                else:
                    T.fill(y, P[(r + 1) % 4])
                T.copy(y, Y[r, 0])
    return fill_loop


def test_f1_fill_of_loop_indexed_elements_under_ifs():
    p = np.array([0.5, -1.0, 2.0, 3.0], np.float32)
    want = np.repeat(np.array([[-0.5], [2.0], [4.0], [6.0]]), 9, axis=1)
    tw.testing.assert_close(run_on(fill_loop(), TARGET, [1], p).astype(np.float64), want, atol=0, rtol=0)


# ---- F2: lower_scalar_math rounded a float16 / bfloat16 scalar call to its dtype (cpu keeps the float32 value) ----

def half_call(dt, N):
    @T.prim_func
    def half_call(X: T.Tensor((N,), dt), P: T.Tensor((2,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as b:
            x = T.alloc_fragment((N,), dt)
            y = T.alloc_fragment((N,), "float32")
            T.copy(X, x)
            s = T.sqrt(T.cast(P[0], dt))
            for i in T.Parallel(N):
                y[i] = x[i] + s * 64.0 + T.cast(T.exp(T.cast(P[1], dt)), "float32")
            if T.sqrt(T.cast(P[0], dt)) > 1.733:   # sqrt(3) = 1.7320508; rounded: 1.7324 (f16), 1.7344 (bf16)
                y[0] = -1.0
            T.copy(y, Y)
    return half_call


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_f2_half_scalar_call_keeps_its_float32_value(dt):
    """docs/language.md: float16 / bfloat16 values are computed in float32, rounded when stored or cast;
    ascend910b rounded the one-element tile's value to the call's dtype (the if took the other arm in bf16)."""
    N = 5
    x = (np.arange(N) / 4).astype(np_dtype(dt))
    p = np.array([3.0, 0.7], np.float32)
    h = lambda v: float(np.asarray(v, np.float32).astype(np_dtype(dt)))  # noqa: E731
    want = x.astype(np.float64) + np.sqrt(h(3.0)) * 64.0 + np.exp(h(0.7))
    targets = ("cpu", TARGET) if dt == "bfloat16" else (TARGET,)   # (cpu's compile: the test's cost)
    for t in targets:
        got = run_on(half_call(dt, N), t, [2], x, p)
        tw.testing.assert_close(got.astype(np.float64), want, atol=0, rtol=2e-6, msg=t)
    # the let holds the float32 value in the AscendC too (a 16-bit declaration would round it on the chip)
    src = tw.compile(half_call(dt, N), target=TARGET, out_idx=[2]).get_source("ascendc")
    assert "const float s = " in src, [ln for ln in src.splitlines() if " s = " in ln]


# ---- F3: expand_math rounded a float16 / bfloat16 tile's T.tanh / sigmoid / silu / erf / exp2 to the tile's dtype ----

def half_map(dt, fn, R, C):
    @T.prim_func
    def half_map(X: T.Tensor((R, C), dt), Y: T.Tensor((R, C), "float32")):
        with T.Kernel(1) as b:
            x = T.alloc_fragment((R, C), dt)
            y = T.alloc_fragment((R, C), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(R, C):
                if fn == "tanh":
                    y[i, j] = T.tanh(x[i, j]) * 64.0
                elif fn == "sigmoid":
                    y[i, j] = T.sigmoid(x[i, j]) * x[i, j]
                elif fn == "silu":
                    y[i, j] = T.silu(x[i, j]) + 1.0
                elif fn == "erf":
                    y[i, j] = T.erf(x[i, j]) * 64.0
                else:
                    y[i, j] = T.exp2(x[i, j]) * 64.0
            T.copy(y, Y)
    return half_map


_F3 = {"tanh": lambda x: np.tanh(x) * 64, "sigmoid": lambda x: x / (1 + np.exp(-x)),
       "silu": lambda x: x / (1 + np.exp(-x)) + 1, "erf": lambda x: np.vectorize(math.erf)(x) * 64,
       "exp2": lambda x: np.exp2(x) * 64}


@pytest.mark.parametrize("fn", sorted(_F3))
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_f3_half_tile_math_into_float32_is_not_rounded(dt, fn):
    """y = f(x[i, j]) * 64 of a 16-bit tile into a float32 one: f's float32 value (rounded to the tile's
    dtype it was 2.6e-3 off in bfloat16, 2.8e-4 in float16); the tolerance is erf's expansion's (A&S 7.1.26)."""
    R, C = 3, 20
    x = ((np.arange(R * C).reshape(R, C) - 30) / 16).astype(np_dtype(dt))
    want = _F3[fn](x.astype(np.float64))
    got = run_on(half_map(dt, fn, R, C), TARGET, [1], x)
    tw.testing.assert_close(got.astype(np.float64), want, atol=1e-5 * 64 if fn == "erf" else 1e-6, rtol=2e-6)


def test_f3_agrees_with_cpu():
    x = ((np.arange(3 * 20).reshape(3, 20) - 30) / 16).astype(np_dtype("bfloat16"))
    got = {t: run_on(half_map("bfloat16", "tanh", 3, 20), t, [1], x) for t in ("cpu", TARGET)}
    tw.testing.assert_close(got[TARGET], got["cpu"], atol=1e-6, rtol=2e-6)


# ---- F4: scalar math filling a gemm's tile named lower_scalar_math's own tile ("used outside its scope") -------

def fill_operand(hinted):
    M = N = K = 16

    @T.prim_func
    def fill_operand(B: T.Tensor((K, N), "float16"), P: T.Tensor((2,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as b:
            a = T.alloc_shared((M, K), "float16")
            af = T.alloc_fragment((M, K), "float16")
            bs = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(B, bs)
            if hinted:
                T.fill(af, T.log(P[0]))
                T.copy(af, a)
            else:
                T.fill(a, T.log(P[0]))
            T.gemm(a, bs, acc, clear_accum=True)
            T.copy(acc, Y)
    return fill_operand


def test_f4_math_fill_of_a_gemm_operand_is_located_and_the_hint_runs():
    with pytest.raises(tw.TilewrightError, match=r"T.log\(P\[0\]\) in the T.fill of gemm tile 'a'.*\n.*\n.*\n.*hint: fill "
                       r"a T.alloc_fragment tile with the value and T.copy it into 'a'"):
        tw.compile(fill_operand(False), target=TARGET, out_idx=[2])
    bm = (np.arange(256).reshape(16, 16) % 5 / 4).astype(np.float16)
    p = np.array([2.0, 0.0], np.float32)
    want = np.full((16, 16), np.log(2.0)).astype(np.float16).astype(np.float64) @ bm.astype(np.float64)
    tw.testing.assert_close(run_on(fill_operand(True), TARGET, [2], bm, p).astype(np.float64), want, atol=0, rtol=1e-6)


# ---- the fuzzer's twenty-third stream (fuzz/scal.py) -------------------------------------------------------------

def test_scal_stream_covers_its_forms_and_catches_a_wrong_answer():
    from fuzz import grammar, reducer, scal
    from fuzz.reference import compare, reference
    ds = [scal.generate(s) for s in range(0, 1000, grammar.GROUP)]
    assert {d["scal"] for d in ds} == set(scal.FORMS)
    m = [d for d in ds if d["scal"] == "math"]
    assert {d["src"] for d in m} == {"gm", "tile", "bx"} and {d["els"] for d in m} == {True, False}
    assert {d["hc"] for d in m} == {True, False} and {d["f4"] for d in m} >= {"pow", "exp", "tanh"}
    # T.sin / T.cos (session 40, h-math40): as scalar calls and as a map of the data times a scale up to 399999.9
    assert {d["trig"] for d in m} == {None, "sin", "cos"} and {d["f1"] for d in m} | {d["f4"] for d in m} >= {"sin", "cos"}
    assert max(d["big"] for d in m if d["trig"]) == 399999.9 and {d["tcol"] for d in m if d["trig"]} == {None, "first", "last"}
    u = [d for d in ds if d["scal"] == "unroll"]
    assert {d["cond"] for d in u} == {"lt", "eq0", "mod"} and {d["shape"] for d in u} == {"gemm", "vec"}
    assert {d["where"] for d in ds if d["scal"] == "dstore"} == {"tile", "gm"}
    for d in [next(d for d in ds if d["scal"] == f) for f in scal.FORMS] + [next(d for d in m if d["trig"] and d["tcol"])]:
        compile(grammar.source(d), "fuzz", "exec")
        refs, _ = reference(d)
        assert compare(d, refs) is None
        bad = [r.copy() for r in refs]
        bad[0].flat[0] += 1
        assert compare(d, bad) is not None
        assert all(scal.valid(c) and c != d for c in reducer.candidates(d))
