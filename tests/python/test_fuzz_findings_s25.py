"""Findings of the session 25 skipped-work fuzzer stream (h-fuzz13, fuzz/skip.py; /work/fuzz13-findings.md).

F1 (fixed): a `T.atomic_add` of a tile computed from a gemm's accumulator (a mix kernel: the tile is
handed from the Cube to the vector cores) was a plain copy on ascend910b: it overwrote the tensor
(one program) or raced with the other programs adding the same rows (checker report). Each case is
checked on cpu and ascend910b against float64, the checker on."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET

TARGETS = ["cpu", TARGET]


def gemm_atomic(grid, gate=False):
    """Each of `grid` programs adds A @ W + 1 into B (the same rows); gate: only programs whose
    Lens entry is positive (most programs skip both the gemm and the add)."""
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float16"), W: T.Tensor((16, 16), "float16"), Lens: T.Tensor((grid,), "int32"),
             B: T.Tensor((16, 16), "float32")):
        with T.Kernel(grid) as bx:
            a = T.alloc_shared((16, 16), "float16")
            w = T.alloc_shared((16, 16), "float16")
            acc = T.alloc_fragment((16, 16), "float32")
            y = T.alloc_fragment((16, 16), "float32")
            if Lens[bx] > 0:
                T.copy(A, a)
                T.copy(W, w)
                T.gemm(a, w, acc, clear_accum=True)
                for i, j in T.Parallel(16, 16):
                    y[i, j] = acc[i, j] + 1.0
                T.atomic_add(B[0, 0], y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("grid,working", [(1, 1), (2, 2), (300, 7)])
def test_f1_atomic_add_after_gemm_adds(target, grid, working):
    rng = np.random.default_rng(13)
    a = rng.integers(-2, 3, (16, 16)).astype(np.float16)
    w = rng.integers(-2, 3, (16, 16)).astype(np.float16)
    lens = np.zeros(grid, np.int32)
    lens[rng.choice(grid, working, replace=False)] = 1
    b = (rng.integers(-8, 9, (16, 16)) / 4.0).astype(np.float32)
    ref = b.astype(np.float64) + working * (a.astype(np.float64) @ w.astype(np.float64) + 1.0)   # exact in float32
    kern = tw.compile(gemm_atomic(grid), target=target)
    if target == "cpu":
        kern(a, w, lens, b)
    else:
        prof = kern.profile(a, w, lens, b)   # (the simulator adds into b in place, as cpu does)
        assert prof["reports"] == [], "\n".join(prof["reports"])
    np.testing.assert_array_equal(b, ref.astype(np.float32))


def rows_kernel(R, C, gate):
    """A (R, C) tile mapped into a float16 tile, under a program-uniform condition (gate) or not."""
    @T.prim_func
    def main(X: T.Tensor((2 * R, C), "bfloat16"), Lens: T.Tensor((2,), "int32"), Y: T.Tensor((2 * R, C), "float16")):
        with T.Kernel(2) as g:
            x = T.alloc_fragment((R, C), "float32")
            y = T.alloc_fragment((R, C), "float16")
            if not gate or 0 < Lens[g]:
                T.copy(X[g * R:(g + 1) * R, :], x)
                for i, j in T.Parallel(R, C):
                    y[i, j] = x[i, j] * 2.0 + 1.0
                T.copy(y, Y[g * R:(g + 1) * R, :])
    return main


@pytest.mark.parametrize("gate", [False, True])
def test_f2_rows_grouped_under_a_uniform_condition(gate):
    """2048 rows of 4 do not fit the UB at once (a UB row takes 32 B): the compiler runs them in groups,
    under `if 0 < Lens[g]` (the same for every row of the program) too (fixed in session 26 by h-hints14;
    test_ascend_rowgroups_if_s26.py)."""
    R, C = 2048, 4
    rng = np.random.default_rng(14)
    x = (rng.integers(-8, 9, (2 * R, C)) / 2.0).astype(np.float32)
    import ml_dtypes
    xb = x.astype(ml_dtypes.bfloat16)
    lens = np.array([1, 0] if gate else [0, 0], np.int32)
    kern = tw.compile(rows_kernel(R, C, gate), target=TARGET, out_idx=[2])
    prof = kern.profile(xb, lens)
    # with the gate, program 1 (Lens 0) writes nothing: its rows are the `unwritten output` report
    reports = [r for r in prof["reports"] if not (gate and ": unwritten output: " in r)]
    assert reports == [], "\n".join(reports)
    got = np.asarray(prof.outputs if not isinstance(prof.outputs, (list, tuple)) else prof.outputs[0], np.float64)
    rows = R if gate else 2 * R
    np.testing.assert_array_equal(got[:rows], (x[:rows].astype(np.float64) * 2.0 + 1.0))


def test_f3_pipelined_flash_under_if():
    """S = Q K^T, P V over `T.Pipelined(T.ceildiv(Lens[b], 16), num_stages=2)` inside `if bx * 16 < Lens[b]`,
    60 programs (fuzz/skip.py seed 810, reduced): no checker report, and the outputs match float64 (fuzz13 F3:
    "flag set twice: SetFlag<MTE1_MTE2>" before main's simulator fix, a CrossCoreWaitFlag on a 0 counter
    stopping the core's issue)."""
    from fuzz import runner, skip
    d = dict(skip.generate(810), B=30, NB=2, L=32, bn=16, dt_in="float16")
    compiled = runner.Compiled()
    for target in ("cpu", TARGET):
        assert runner.run_target(d, target, compiled) == ("ok", None), target
