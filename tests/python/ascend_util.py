"""Helpers shared by the Ascend tests of the automatic pipeline (tests/python/test_ascend_auto*.py)."""
import numpy as np

import tilewright as tw

TARGET = "ascend910b"


def build(factory, *args, **kwargs):
    """The example's @tw.jit kernel for the Ascend target: the same factory, only the target differs."""
    return factory(*args, target=TARGET, **kwargs)


def run_checked(kernel, *inputs):
    """Runs in the simulator with the checker; asserts it found nothing; returns the output."""
    prof = kernel.profile(*inputs)
    assert prof["reports"] == [], "\n".join(prof["reports"])
    return prof.outputs


def run_checked_partial(kernel, *inputs):
    """run_checked for a kernel that writes part of its out_idx output on purpose (a test of dropped stores):
    the `unwritten output` report (session 39) is expected there; any other report fails."""
    prof = kernel.profile(*inputs)
    reports = [r for r in prof["reports"] if ": unwritten output: " not in r]
    assert reports == [], "\n".join(reports)
    return prof.outputs


def run_on(prim, target, out_idx, *inputs):
    """Compiles prim for target and runs it: on cpu directly, on ascend910b in the simulator with the
    checker (run_checked); returns the outputs at out_idx."""
    k = tw.compile(prim, target=target, out_idx=out_idx)
    return k(*inputs) if target == "cpu" else run_checked(k, *inputs)


def assert_close(got, ref, tolerances, what):
    """|got - ref| <= atol + rtol |ref| elementwise, with (atol, rtol) = tolerances."""
    atol, rtol = tolerances
    tw.testing.assert_close(got, ref, atol=atol, rtol=rtol, msg=what)


# gemm operand dtypes and their accumulators (tests of T.gemm on both targets)
ACC = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32"}


def exact_values(shape, dtype, rng):
    """Small integers and halves, exact in every dtype (int8: -4..4): sums of a few stay exact in
    float32, so cpu, ascend910b and a float64 reference agree exactly."""
    if dtype == "int8":
        return rng.integers(-4, 5, shape).astype(np.int8)
    v = rng.integers(-6, 7, shape) / 2.0
    return v.astype(tw.testing.np_dtype(dtype))


def run_both(kernel_of, args, outs):
    """Runs kernel_of(target) on cpu and on ascend910b (checker on) on copies of args; returns,
    per target, the arrays at the indices outs."""
    res = {}
    for target in ("cpu", TARGET):
        a = [x.copy() for x in args]
        k = kernel_of(target)
        if target == "cpu":
            k(*a)
        else:
            run_checked(k, *a)
        res[target] = [a[i] for i in outs]
    return res
