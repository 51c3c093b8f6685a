"""hunt35 (issue 13): a representative subset of tests/python/hunt35_sweep.py's differential shape
sweep. Each case runs a shipped kernel (bench/op_zoo.py, examples/*.py) or a kernel written the
way docs/language.md teaches at a user's odd shape, on cpu and on ascend910b (the simulator's
checker on: no report allowed), against a float64 reference and against each other. The full
sweep (`python hunt35_sweep.py --seed S`) is run by hand."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hunt35_sweep as sw  # noqa: E402

TARGETS = ["cpu", sw.ASC]


def _gemm_case(M, N, K, dtype, ta, tb, blocks, stages, inside, seed=0):
    rng = np.random.default_rng(seed)
    a = sw._randn(rng, (K, M) if ta else (M, K), dtype)
    b = sw._randn(rng, (N, K) if tb else (K, N), dtype)
    a64 = a.astype(np.float64).T if ta else a.astype(np.float64)
    b64 = b.astype(np.float64).T if tb else b.astype(np.float64)
    tol = (0.0, 0.0) if dtype == "int8" else (1e-5 * K + 1e-4, 1e-5)
    args = (M, N, K, dtype, ta, tb, *blocks, stages, inside)
    return sw.Case(f"gemm {args}", lambda t: sw.tw.compile(sw._gemm_kernel(*args), target=t, out_idx=[-1]),
                   [a, b], lambda: [a64 @ b64], tol)


def _tileloop_case(M, N, K, dtype, blocks, seed=0):
    rng = np.random.default_rng(seed)
    a, b = sw._randn(rng, (M, K), dtype), sw._randn(rng, (K, N), dtype)
    import seed_matmul
    return sw.Case(f"tile loops {M}x{N}x{K} {dtype}", lambda t: seed_matmul.build(M, N, K, *blocks, dtype, target=t),
                   [a, b], lambda: [a.astype(np.float64) @ b.astype(np.float64)], (1e-5 * K + 2e-3, 2e-3))


def _splitk_case(M, N, K, parts, dtype, blocks, trans_A, seed=0):
    from gemm import matmul_splitk
    rng = np.random.default_rng(seed)
    a = sw._randn(rng, (K, M) if trans_A else (M, K), dtype)
    b = sw._randn(rng, (K, N), dtype)
    a64 = a.astype(np.float64).T if trans_A else a.astype(np.float64)
    kw = dict(block_M=blocks[0], block_N=blocks[1], block_K=blocks[2], dtype=dtype, trans_A=trans_A)
    return sw.Case(f"split-K {M}x{N}x{K} parts {parts}", lambda t: matmul_splitk(M, N, K, parts, target=t, **kw),
                   [a, b, np.zeros((M, N), np.float32)], lambda: [a64 @ b.astype(np.float64)], (1e-5 * K + 1e-4, 1e-5),
                   outs=lambda r, args: [args[2]])


CASES = {  # small cases of the sweep's groups (hunt35_sweep.py; int8, num_stages 1..4 and the rest run there)
    "gemm bf16 transposed A and B, tiles inside a 3-stage loop, K 17": lambda: _gemm_case(33, 17, 17, "bfloat16", True, True, (16, 32, 16), 3, True),
    "tile-loop matmul fp16 K 17": lambda: _tileloop_case(17, 15, 17, "float16", (16, 16, 16)),
    "split-K in 5 parts, 3 of them empty, trans_A": lambda: _splitk_case(17, 3, 33, 5, "float16", (16, 16, 16), True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sweep_case_agrees(name):
    case = CASES[name]()
    assert sw.check_case(case, TARGETS) == "ok", case.name


def test_paged_decode_split_empty_splits_and_contexts():
    """Contexts 0, 1 and page + 1 with more splits than pages (empty splits), combined."""
    rng = np.random.default_rng([35000, list(sw.GROUPS).index("decode")])
    case = next(c for c in sw.decode_cases(rng, 0) if "split" in c.name)
    assert sw.check_case(case, TARGETS) == "ok", case.name


# --------------------------------------------------------------------------- F1: a map's store past the tensor's end
def _add_symbolic(block=64):
    """docs/language.md's first kernel with a symbolic N: the last block's map overhangs the tensors."""
    N = sw.T.symbolic("N")

    @sw.T.prim_func
    def main(A: sw.T.Tensor((N,), "float32"), B: sw.T.Tensor((N,), "float32"), C: sw.T.Tensor((N,), "float32")):
        with sw.T.Kernel(sw.T.ceildiv(N, block)) as bx:
            for i in sw.T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return main


# hunt35 F1 (fixed: the reads by h-bounds35, the store alone by h-bounds36): a map's element store to a GM tensor past
# its end (docs/language.md's first kernel `C[bx * block + i] = ...` with a symbolic N = 100, block 64: indices
# 100..127) ran on ascend910b without a report (the staged copy clipped it); cpu writes past the buffer and reports
# 'index 100 is out of bounds for dimension 0' under TW_BOUNDS_CHECK=1 (the store counterpart of hunt34 F3).


def _profile_add(n):
    a, b = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    prof = sw.tw.compile(_add_symbolic(), target=sw.ASC, out_idx=[-1]).profile(a, b)
    return prof.outputs, prof["reports"], a + b


def test_f1_map_store_past_the_end_is_reported():
    # reported since h-bounds35 through the map's reads of A and B at the same indices (the staged read windows are
    # checked per dimension); a store alone past its row is still silent (below)
    _, reports, _ = _profile_add(100)
    assert any("out of bounds" in r for r in reports), reports


def test_f1_control_whole_blocks():
    out, reports, ref = _profile_add(128)
    assert reports == [] and out.tolist() == ref.tolist()


def _row_store():
    """Y[0, j + n] = x[j]: a map storing into a tensor row at a run-time offset (hunt34 F3's store)."""
    T = sw.T

    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), N: T.Tensor((1,), "int32"), Y: T.Tensor((2, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "float32")
            T.copy(X, x)
            n = N[0]
            for j in T.Parallel(8):
                Y[0, j + n] = x[j]
    return k


def _profile_row_store(n):
    x, y = np.arange(1, 9, dtype=np.float32), np.zeros((2, 8), np.float32)
    prof = sw.tw.compile(_row_store(), target=sw.ASC).profile(x, np.array([n], np.int32), y)
    return y, prof["reports"]


def test_f1_map_store_past_its_row_is_reported():  # fixed by h-bounds36: the staged store's window is checked
    # ascend910b drops Y[0, 8..10] (cpu writes them into row 1: Y[1, 0..2] = 6, 7, 8) and reports the first index
    _, reports = _profile_row_store(3)
    oob = [r for r in reports if "out of bounds" in r]
    assert oob and "a T.Parallel map stores index 8 of dimension 1 of tensor Y, which has 8" in oob[0], reports
    assert "test_hunt35_s35.py:" in oob[0] and "guard the store" in oob[0]  # the kernel's line, the hint


def test_f1_control_in_range_row_store():
    y, reports = _profile_row_store(0)
    assert reports == [] and y[0].tolist() == list(range(1, 9)) and not y[1].any()


# --------------------------------------------------------------------------- F2: T.atomic_add inside T.Parallel
# hunt35 F2 (fixed by h-hunt35): `T.atomic_add(Y[0, j + n], x[j])` in a T.Parallel map was refused as "alloc is not
# allowed inside a parallel loop ... move the alloc out of the loop" (the scalar form's 1-element tile), and a tile
# form as "copy is not allowed": neither names what the user wrote. The front end now refuses it at the line by name.
def _atomic_in_map(scalar):
    T = sw.T

    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((2, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "float32")
            T.copy(X, x)
            for j in T.Parallel(8):
                if scalar:
                    T.atomic_add(Y[0, j], x[j])
                else:
                    T.atomic_add(Y[0, 0], x)
    return k


@pytest.mark.parametrize("scalar", [True, False])
@pytest.mark.parametrize("target", TARGETS)
def test_f2_atomic_add_in_a_map_is_refused_by_name(scalar, target):
    with pytest.raises(sw.tw.TilewrightError) as e:
        sw.tw.compile(_atomic_in_map(scalar), target=target)
    assert "T.atomic_add is not allowed inside a T.Parallel loop" in e.value.message
    assert e.value.line > 0 and "T.serial" in e.value.hint


# --------------------------------------------------------------------------- F3: postponed annotations of a factory
# hunt35 F3 (fixed by h-hunt35): in a file with `from __future__ import annotations`, a factory's kernel annotated
# with the factory's locals (`shape = (N,)`, `dtype`) that its body does not use failed with "name 'shape' is not
# defined" (such names are no closure cells; Python evaluates postponed annotations in the defining scope).
# @T.prim_func now evaluates them there; a global of the same name does not leak into the body.
POSTPONED_FACTORY = '''from __future__ import annotations
import tilewright as tw
import tilewright.language as T

shape = "a global the kernel must not see in its annotations"


@tw.jit(out_idx=[-1])
def double(N, dtype="float32"):
    shape = (N,)

    @T.prim_func
    def main(X: T.Tensor(shape, dtype), Y: T.Tensor(shape, dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[i] = X[i] * 2
    return main


def plain(N):
    shape, dt = (N, 2), "int32"

    @T.prim_func
    def main(X: T.Tensor(shape, dt), Y: T.Tensor(shape, dt)):
        with T.Kernel(1) as bx:
            T.copy(X, Y)
    return main
'''


def test_f3_postponed_annotations_name_factory_locals(tmp_path):  # the front end's: one target (no cpu compile)
    import importlib.util
    path = tmp_path / "tw_hunt35_postponed.py"
    path.write_text(POSTPONED_FACTORY)
    spec = importlib.util.spec_from_file_location("tw_hunt35_postponed", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = np.arange(7, dtype=np.float16)
    prof = mod.double(7, "float16", target=sw.ASC).profile(x)
    assert prof["reports"] == [] and prof.outputs.dtype == np.float16 and prof.outputs.tolist() == (2 * x).tolist()
    xi = np.arange(6, dtype=np.int32).reshape(3, 2)
    prof = sw.tw.compile(mod.plain(3), target=sw.ASC, out_idx=[-1]).profile(xi)
    assert prof["reports"] == [] and prof.outputs.tolist() == xi.tolist()


def _add_guarded(block=64):
    """The first kernel of docs/language.md for any N: the element accesses guarded by `< N`."""
    T = sw.T
    N = T.symbolic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_f1_docs_first_kernel_guarded_for_any_n(target):
    k = sw.tw.compile(_add_guarded(), target=target, out_idx=[-1])
    for n in (1, 100, 129):
        a, b = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
        if target == "cpu":
            out, reports = k(a, b), []
        else:
            prof = k.profile(a, b)
            out, reports = prof.outputs, prof["reports"]
        assert reports == [] and out.tolist() == (a + b).tolist()
