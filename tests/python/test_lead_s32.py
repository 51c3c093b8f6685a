"""Session 32 (lead, issue 13): a tile element read outside a T.Parallel map (a let, an element
statement of a serial loop) is a scalar read: on ascend910b the scalar unit's GetValue, which the
simulator reports as an `uninitialised read` when no instruction of the block wrote the element
(session 30). cpu's checked mode (TW_BOUNDS_CHECK=1, session 31) tested tile elements only where
they leave the block, as an index or in control flow, so the same kernel ran on cpu with whatever
the stack held (1.0 + garbage) and no report: now such a read is tested too, and both targets
report the same programs (docs/testing.md "Session 32: scalar reads in checked mode").

Checked mode is read once per process: the cpu cases run in one child. Values: float32 sums of a
few float32 inputs, compared with float64 numpy at 1e-5 / 1e-5."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tw_test_util import checked_cpu_results, marked_line, run_checked_child  # noqa: E402

THIS = str(pathlib.Path(__file__).resolve())


@tw.jit(out_idx=[-1])
def let_of_element(M, N, W, at):
    """Z = X + y[0, at], with y's columns [0, W) written: `at >= W` reads an unwritten element."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            y = T.alloc_fragment((M, N), "float32")
            z = T.alloc_fragment((M, N), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(M, W):
                y[i, j] = x[i, j] * 2.0
            v = y[0, at]  # lead32-let
            for i, j in T.Parallel(M, N):
                z[i, j] = x[i, j] + v
            T.copy(z, Z)

    return main


@tw.jit(out_idx=[-1])
def running_sum(N, init):
    """A serial element loop accumulating into s[0] (the scalar unit on ascend910b); without `init`
    s[0] is read before any statement wrote it."""

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((N,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X, x)
            if init:
                T.clear(s)
            for k in T.serial(N):
                s[0] = s[0] + x[k]  # lead32-serial
            T.copy(s, Y)

    return main


@tw.jit(out_idx=[-1])
def let_of_reduction(M, N):
    """Z = X - max(row 0 of X): the let reads an element a reduction wrote (no report)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            m = T.alloc_fragment((M,), "float32")
            z = T.alloc_fragment((M, N), "float32")
            T.copy(X, x)
            T.reduce_max(x, m, dim=1)
            top = m[0]
            for i, j in T.Parallel(M, N):
                z[i, j] = x[i, j] - top
            T.copy(z, Z)

    return main


def cases():
    """name -> (kernel factory (target -> kernel), inputs, float64 reference or None: a report)."""
    rng = np.random.default_rng(32)
    x = rng.standard_normal((5, 9)).astype(np.float32)
    x13 = rng.standard_normal(13).astype(np.float32)
    x64 = x.astype(np.float64)
    return {
        "let_unwritten": (lambda t: let_of_element(5, 9, 3, 4, target=t), (x,), None),
        "let_written": (lambda t: let_of_element(5, 9, 3, 2, target=t), (x,), x64 + 2.0 * x64[0, 2]),
        "serial_unwritten": (lambda t: running_sum(13, False, target=t), (x13,), None),
        "serial_cleared": (lambda t: running_sum(13, True, target=t), (x13,), x13.astype(np.float64).sum(keepdims=True)),
        "reduction": (lambda t: let_of_reduction(5, 9, target=t), (x,), x64 - x64[0].max()),
    }


def child_main(out_path):
    """The cpu side, run with TW_BOUNDS_CHECK=1: each case's output or report, as JSON."""
    checked_cpu_results(cases(), out_path)


@pytest.fixture(scope="module")
def cpu_checked(tmp_path_factory):
    return run_checked_child("test_lead_s32", tmp_path_factory.mktemp("lead32"))


@pytest.mark.parametrize("name,marker,element", [("let_unwritten", "lead32-let", "element [0, 4] of tile 'y'"),
                                                 ("serial_unwritten", "lead32-serial", "element [0] of tile 's'")])
def test_scalar_read_of_an_unwritten_element_is_reported_on_cpu(cpu_checked, name, marker, element):
    r = cpu_checked[name]
    assert r["error"] is not None, r
    assert (r["file"], r["line"]) == (THIS, marked_line(THIS, marker)[0]), r
    for part in ("uninitialised read", element, "read outside a T.Parallel map"):
        assert part in r["error"], r["error"]
    assert "write every element of" in r["hint"], r["hint"]


@pytest.mark.parametrize("name", ["let_written", "serial_cleared", "reduction"])
def test_scalar_reads_of_written_elements_are_not_reported(cpu_checked, name):
    assert cpu_checked[name] == {"error": None, "close": True}


@pytest.mark.parametrize("name", sorted(cases()))
def test_ascend910b_reports_the_same_programs(cpu_checked, name):
    # the simulator with its checker, timing-only: it reports iff cpu's checked mode does, at the same line
    make, inputs, _ = cases()[name]
    prof = make("ascend910b").profile(*inputs, functional=False)
    assert bool(prof["reports"]) == (cpu_checked[name]["error"] is not None), (prof["reports"], cpu_checked[name])
    for rep in prof["reports"]:
        assert "uninitialised read" in rep and f"{THIS}:{cpu_checked[name]['line']}:" in rep, rep


@pytest.mark.parametrize("name", ["let_written", "serial_cleared", "reduction"])
def test_ascend910b_values_match_float64(name):
    make, inputs, ref = cases()[name]
    y = np.asarray(make("ascend910b")(*inputs), np.float64)
    np.testing.assert_allclose(y, ref, atol=1e-5, rtol=1e-5)
