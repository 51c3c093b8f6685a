"""printer37 (issue 13: the AscendC printer prints what the simulator ran). A math function of a scalar
(no tile data, no map index) simulated on ascend910b and then failed to print ("math function 'exp' in a
scalar expression is not supported by the AscendC printer"): RetNet written naturally (port35) was the
case. lower_scalar_math now folds a call of literals to its value (P1) and computes any other scalar call
on the Vector unit in a one-element tile, Duplicate + the function + GetValue (P2), before the program
is final; what it leaves is a located compile error whose hint (that same form, written by hand) runs.

Each kernel: cpu and ascend910b (simulator, checker on) against numpy, then its AscendC printed and
checked for the construct it was lowered to. Small shapes (odd, one-element); fixed seeds."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

import port33_kernels as P33
import port35_kernels as P
import port36_kernels as P36
from ascend_util import TARGET, run_checked

TARGETS = ["cpu", TARGET]
TOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def run(k, target, *args):
    return k(*args) if target == "cpu" else run_checked(k, *args)


# ---- P1: RetNet's decay T.exp(lg * C) of Python numbers (port35 retnet_chunked / retnet_state) --------------

@pytest.mark.parametrize("name", ["retnet_chunked", "retnet_state"])
def test_p1_retnet_decay_folds_and_prints(name):
    # the simulator (checker on) against float64; cpu against the same reference in test_port35_s35 / port35's probe
    shape = (1, 1, 16) if name == "retnet_chunked" else (2, 37, 16)   # one chunk of one row; three chunks, a tail
    P.check(name, "float16", shape, TARGET)
    fac = P.chunked_linear_attn if name == "retnet_chunked" else P.retnet_state
    args = (*shape, "float16", "retnet") if name == "retnet_chunked" else (*shape, "float16")
    k = fac(*args, target=TARGET)
    src = k.get_source("ascendc")
    # gamma^C = 0.9^16 = exp(16 ln 0.9), the literal Muls scales the state by
    assert "0.185302" in src and "Muls(" in src, src[:2000]
    assert "exp(" not in src.replace("Exp(", ""), "a scalar exp was printed"


# ---- P2: scalar calls of parameters / loop variables / lets: the Vector unit on a one-element tile -------------

def param_map(M, N, dt):
    @T.prim_func
    def param_map(X: T.Tensor((M, N), dt), a: T.float32, Y: T.Tensor((M, N), dt)):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((M, N), "float32")
            T.copy(X, t)
            for i, j in T.Parallel(M, N):
                t[i, j] = t[i, j] * T.exp(a) + T.sqrt(a)
            T.copy(t, Y)
    return param_map


def loop_decay(M, N, lg=-0.1):
    @T.prim_func
    def loop_decay(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((1, N), "float32")
            for c in T.serial(M):
                T.copy(X[c, 0], t)
                for i, j in T.Parallel(1, N):
                    t[i, j] = t[i, j] * T.exp(lg * c)
                T.copy(t, Y[c, 0])
    return loop_decay


def let_if_nested(M, N):
    @T.prim_func
    def let_if_nested(X: T.Tensor((M, N), "float32"), a: T.float32, Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((M, N), "float32")
            T.copy(X, t)
            s = T.tanh(T.sqrt(a) * 0.5) + T.exp2(a)   # nested and expanded functions (expand_math)
            if T.log(a) > 0.0:
                for i, j in T.Parallel(M, N):
                    t[i, j] = t[i, j] * s
            else:
                for i, j in T.Parallel(M, N):
                    t[i, j] = t[i, j] - s
            T.copy(t, Y)
    return let_if_nested


def printed(k):
    src = k.get_source("ascendc")
    assert "Duplicate(" in src and ".GetValue(" in src, src
    return src


@pytest.mark.parametrize("dt,shape", [("float32", (5, 37)), ("bfloat16", (5, 37)), ("float16", (1, 1))])
def test_p2_scalar_parameter_in_a_map(dt, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(tw.testing.np_dtype(dt))
    xf = x.astype(np.float64)
    a = np.float32(0.3)
    ref = xf * np.exp(0.3) + np.sqrt(0.3)
    outs = {}
    for target in TARGETS if dt != "bfloat16" else [TARGET]:  # (cpu's bfloat16 compile is the slow one: ~10 s)
        k = tw.compile(param_map(*shape, dt), out_idx=[2], target=target)
        outs[target] = np.asarray(run(k, target, x, a)).astype(np.float64)
        np.testing.assert_allclose(outs[target], ref, rtol=TOL[dt], atol=TOL[dt], err_msg=target)
        if target != "cpu":
            src = printed(k)
            assert "Exp(" in src and "Sqrt(" in src, src
    if "cpu" in outs:
        np.testing.assert_allclose(outs[TARGET], outs["cpu"], rtol=TOL[dt], atol=TOL[dt])


def test_p2_loop_variable_decay(M=5):
    x = np.random.default_rng(2).standard_normal((M, 37)).astype(np.float32)
    ref = x * np.exp(-0.1 * np.arange(M))[:, None]
    for target in TARGETS:
        k = tw.compile(loop_decay(M, 37), out_idx=[1], target=target)
        np.testing.assert_allclose(run(k, target, x), ref, rtol=2e-6, atol=1e-7, err_msg=target)
        if target != "cpu":
            assert "Exp(" in printed(k)


@pytest.mark.parametrize("a", [1.5, 0.5])   # log(a) > 0 and < 0: both arms of the if
def test_p2_let_if_condition_and_nested_calls(a):
    x = np.random.default_rng(3).standard_normal((3, 17)).astype(np.float32)
    s = np.tanh(np.sqrt(a) * 0.5) + 2.0 ** a
    ref = x * s if np.log(a) > 0 else x - s
    for target in TARGETS:
        k = tw.compile(let_if_nested(3, 17), out_idx=[2], target=target)
        np.testing.assert_allclose(run(k, target, x, np.float32(a)), ref, rtol=2e-6, atol=2e-6, err_msg=target)
        if target != "cpu":
            src = printed(k)
            assert "Ln(" in src and "Sqrt(" in src, src


# ---- P3: a function of a tile's or tensor's element (group_norm's T.rsqrt(tot[0] / n + eps), clip_grad_scale's
# T.sqrt(Tot[0]) of a GM scalar, bn_eval_nchw): simulated (the element a ScalarLoad), then not printable ------------

@pytest.mark.parametrize("name", ["group_norm", "clip_grad_scale", "bn_eval_nchw", "adamw", "alibi_bias_nonpow2"])
def test_p3_function_of_an_element(name):
    """(adamw: P2's b1 ** step of the step parameter, as exp(step * ln b1); alibi_bias_nonpow2: P2's exp2 of the
    block index, expanded to Exp)"""
    mod = {"group_norm": P33, "bn_eval_nchw": P36}.get(name, P)
    make, dts, shapes = mod.CASES[name]
    # the simulator (checker on) against float64; cpu against the same references in test_port33 / 35 / 36's AGREE
    if mod is P33:
        P33.check(name, dts[0], shapes[0], TARGET)
    else:
        P.check(name, dts[0], shapes[0], TARGET, mod.CASES)
    fac, args = make(dts[0], shapes[0], np.random.default_rng(0))[:2]
    printed(fac(*args, target=TARGET))


# ---- what stays: a scalar call in a loop extent is a located error; its hint's form runs and prints -------------

def test_call_in_loop_extent_is_located_error_and_the_hint_runs():
    @T.prim_func
    def bad(X: T.Tensor((4, 8), "float32"), a: T.float32, Y: T.Tensor((4, 8), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((1, 8), "float32")
            for c in T.serial(T.cast(T.floor(a), "int32")):  # @FLOOR-EXTENT
                T.copy(X[c, 0], t)
                T.copy(t, Y[c, 0])
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(bad, out_idx=[2], target=TARGET)
    msg = str(e.value)
    assert "math function 'floor'" in msg and "scalar unit" in msg and "T.alloc_fragment((1,)" in msg, msg
    line = next(i for i, s in enumerate(open(__file__).read().splitlines(), 1) if "@FLOOR-EXTENT" in s and "for" in s)
    assert f"test_printer37_s37.py:{line}:" in msg, msg

    @T.prim_func
    def hint(X: T.Tensor((4, 8), "float32"), a: T.float32, Y: T.Tensor((4, 8), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((4, 8), "float32")
            f = T.alloc_fragment((1,), "float32")
            for i in T.Parallel(1):
                f[i] = a
            for i in T.Parallel(1):
                f[i] = T.exp(f[i])
            T.copy(X, t)
            for i, j in T.Parallel(4, 8):
                t[i, j] = t[i, j] * f[0]
            T.copy(t, Y)
    x = np.random.default_rng(4).standard_normal((4, 8)).astype(np.float32)
    k = tw.compile(hint, out_idx=[2], target=TARGET)
    np.testing.assert_allclose(run_checked(k, x, np.float32(0.7)), x * np.exp(0.7), rtol=2e-6)
    printed(k)
