"""Session 37 (h-hunt37, issue 13: the simulator as the guard): reproducers of the hunt's findings
(/work/hunt37-findings.txt; docs/testing.md "Session 37: hunt (h-hunt37)"). Exact integer references on
Python ints under the language's rules (docs/language.md: integers computed in int64, wrapped on store;
`x >> n` wraps x into its type first)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import TARGET, run_checked


def _wrap32(v):
    return ((v + 2**31) % 2**32) - 2**31


@tw.jit(out_idx=[-2, -1])
def bool_arith(M, N):
    """F2: a bool converted to int32, then arithmetic past int32 before the store: a comparison sees the
    int64 value (Y), a shift the value wrapped into int32 (Z)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "int8"), Y: T.Tensor((M, N), "int32"), Z: T.Tensor((M, N), "int32")):
        with T.Kernel(1) as _:
            x = T.alloc_fragment((M, N), "int8")
            y = T.alloc_fragment((M, N), "int32")
            z = T.alloc_fragment((M, N), "int32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(M, N):
                y[i, j] = ((T.cast(x[i, j] != 0, "int32") - 127) * 20000000) < 0
                z[i, j] = ((T.cast(T.cast(x[i, j], "bool"), "int32") - 127) * 20000000) >> 4
            T.copy(y, Y[0, 0])
            T.copy(z, Z[0, 0])

    return main


@pytest.mark.parametrize("shape", [(3, 17), (1, 1)])
def test_f2_bool_converted_to_int_is_computed_in_int64_on_cpu(shape):
    """cpu computed `T.cast(cond, "int32") - 127` in C++'s 32-bit int (a C++ bool promoted), so the product
    overflowed (undefined behaviour): Y was 0, Z -134217728 everywhere. ascend910b's Z agrees (no report);
    its Y is the documented `int32 overflow` report (the Muls leaves int32), not run here."""
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, shape).astype(np.int8)
    x.flat[0] = 0
    b = (x != 0).astype(np.int64)
    y_ref = ((b - 127) * 20000000 < 0).astype(np.int32)
    z_ref = np.vectorize(lambda v: _wrap32(v) >> 4)((b - 127) * 20000000).astype(np.int32)
    y, z = bool_arith(*shape)(x)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(z, z_ref)
    prof = bool_arith(*shape, target=TARGET).profile(x)
    np.testing.assert_array_equal(prof.outputs[1], z_ref)
    assert all("int32 overflow" in r for r in prof["reports"]) and prof["reports"]


# ------------------------------------------------------------------------------------------------
# F1 (open): a gemm state fed back into its own operand

@tw.jit(out_idx=[-1])
def fed_back(S, dt="float16"):
    """h_0 = A, s = h_t @ B, h_{t+1} = s rounded to dt (a Fixpipe L0C -> L1 copy), O[t] = s."""
    @T.prim_func
    def main(A: T.Tensor((16, 16), dt), B: T.Tensor((16, 16), dt), O: T.Tensor((S, 16, 16), "float32")):
        with T.Kernel(1) as _:
            b = T.alloc_shared((16, 16), dt)
            s = T.alloc_fragment((16, 16), "float32")
            h = T.alloc_shared((16, 16), dt)
            T.copy(B[0, 0], b)
            T.copy(A[0, 0], h)
            for t in T.serial(S):
                T.gemm(h, b, s, clear_accum=True)
                T.copy(s, h)
                T.copy(s, O[t, 0, 0])

    return main


def _fed_back_ref(a, b, S, dt):
    h, out = a.astype(np.float64), []
    for _ in range(S):
        s = h @ b.astype(np.float64)
        out.append(s)
        h = s.astype(tw.testing.np_dtype(dt)).astype(np.float64)
    return np.stack(out)


def test_f1_fed_back_state_runs_on_cpu():
    rng = np.random.default_rng(1)
    a = (rng.integers(-3, 4, (16, 16)) / 2).astype(np.float16)
    b = (rng.integers(-3, 4, (16, 16)) / 8).astype(np.float16)
    np.testing.assert_array_equal(fed_back(3)(a, b), _fed_back_ref(a, b, 3, "float16"))


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_f1_fed_back_state_stays_on_the_cube(dt):
    """Was 'tile h holds its value on the Cube ... where the vector code needs it': infer_scope's Fixpipe
    L0C -> L1 rule took a copy only when neither tile was in another copy, and h is loaded from A (MTE2
    GM -> L1), s copied out to O (Fixpipe L0C -> GM). Those are the Cube's own moves: the state now stays on
    the Cube (one FixpipeL1 a step, no cross-core flag), exact (checker on)."""
    rng = np.random.default_rng(1)
    npdt = tw.testing.np_dtype(dt)
    a = (rng.integers(-3, 4, (16, 16)) / 2).astype(npdt)
    b = (rng.integers(-3, 4, (16, 16)) / 8).astype(npdt)
    k = fed_back(3, dt, target=TARGET)
    assert k.get_source("ascend_program").count("FixpipeL1 ") == 1 and "CrossCoreSetFlag" not in k.get_source("ascendc")
    np.testing.assert_array_equal(run_checked(k, a, b), _fed_back_ref(a, b, 3, dt))


@tw.jit(out_idx=[-1])
def reloaded(S, dt="float16"):
    """Each step h is loaded from A[t] (MTE2), then overwritten by s = h @ B (Fixpipe L0C -> L1) for h @ C:
    two writers of one L1 tile per step, in a 2-stage pipelined loop."""
    @T.prim_func
    def main(A: T.Tensor((S, 16, 16), dt), B: T.Tensor((16, 16), dt), C: T.Tensor((16, 16), dt),
             O: T.Tensor((S, 16, 16), "float32")):
        with T.Kernel(1) as _:
            b = T.alloc_shared((16, 16), dt)
            c = T.alloc_shared((16, 16), dt)
            h = T.alloc_shared((16, 16), dt)
            s = T.alloc_fragment((16, 16), "float32")
            o = T.alloc_fragment((16, 16), "float32")
            T.copy(B[0, 0], b)
            T.copy(C[0, 0], c)
            for t in T.Pipelined(S, num_stages=2):
                T.copy(A[t, 0, 0], h)
                T.gemm(h, b, s, clear_accum=True)
                T.copy(s, h)
                T.gemm(h, c, o, clear_accum=True)
                T.copy(o, O[t, 0, 0])

    return main


def test_f1_operand_loaded_and_fed_back_each_step():
    """The MTE2 load and the Fixpipe write of h in every step are ordered (checker on: no race); exact."""
    rng = np.random.default_rng(3)
    a, b, c = ((rng.integers(-3, 4, sh) / 2).astype(np.float16) for sh in ((3, 16, 16), (16, 16), (16, 16)))
    ref = np.stack([(a[t].astype(np.float64) @ b).astype(np.float16).astype(np.float64) @ c for t in range(3)])
    k = reloaded(3, target=TARGET)
    assert "FixpipeL1 " in k.get_source("ascend_program")
    np.testing.assert_array_equal(run_checked(k, a, b, c), ref)


# ------------------------------------------------------------------------------------------------
# F3: a cleared accumulator whose first gemm is a conditional clear_accum gemm

@tw.jit(out_idx=[-1])
def cond_clear_accum(S=4):
    @T.prim_func
    def main(A: T.Tensor((S, 16, 16), "float16"), B: T.Tensor((16, 16), "float16"), Y: T.Tensor((S, 16, 16), "float32")):
        with T.Kernel(1) as _:
            a = T.alloc_shared((16, 16), "float16")
            b = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(B[0, 0], b)
            T.clear(c)
            for s in T.serial(S):
                T.copy(A[s, 0, 0], a)
                if s == 2:
                    T.gemm(a, b, c, clear_accum=True)
                T.gemm(a, b, c)
                T.copy(c, Y[s, 0, 0])

    return main


def test_f3_conditional_clear_accum_gemm_after_a_clear():
    """ascend910b folded the T.clear into the conditional clear_accum gemm and gave the unconditional gemm no init:
    Y[0], Y[1] were L0C never written (1.3e36), no report. Now the documented error of a cleared accumulator whose
    first gemm is conditional, at that gemm; cpu is right."""
    rng = np.random.default_rng(0)
    a = (rng.integers(-3, 4, (4, 16, 16)) / 2).astype(np.float16)
    b = (rng.integers(-3, 4, (16, 16)) / 2).astype(np.float16)
    p = np.einsum("tik,kj->tij", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(cond_clear_accum()(a, b), np.stack([p[0], p[0] + p[1], 2 * p[2], 2 * p[2] + p[3]]))
    with pytest.raises(tw.TilewrightError, match="first gemm into the cleared accumulator 'c' is conditional"):
        cond_clear_accum(target=TARGET).profile(a, b)


@tw.jit(out_idx=[-1])
def clear_then_run_time_loop():
    @T.prim_func
    def main(A: T.Tensor((4, 16, 16), "float16"), B: T.Tensor((16, 16), "float16"), n: T.int32,
             Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as _:
            a = T.alloc_shared((16, 16), "float16")
            b = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(B[0, 0], b)
            T.clear(c)
            for s in T.serial(n):
                T.copy(A[s, 0, 0], a)
                T.gemm(a, b, c, clear_accum=True)
            T.copy(c, Y[0, 0])

    return main


@pytest.mark.parametrize("n", [0, 2])
def test_f5_cleared_accumulator_and_a_clear_accum_gemm_in_a_loop_of_n_0(n):
    """F5: the clear_accum gemm took the T.clear without the zero-trip guard the other gemms get: n = 0 stored
    L0C's stale bytes (the checker's uninitialised read); now zeros, as on cpu."""
    a = np.ones((4, 16, 16), np.float16)
    b = np.ones((16, 16), np.float16)
    ref = np.full((16, 16), 16.0 if n else 0.0)
    np.testing.assert_array_equal(clear_then_run_time_loop()(a, b, n), ref)
    np.testing.assert_array_equal(run_checked(clear_then_run_time_loop(target=TARGET), a, b, n), ref)


@tw.jit(out_idx=[-1])
def never_cleared():
    @T.prim_func
    def main(A: T.Tensor((2, 16, 16), "float16"), B: T.Tensor((16, 16), "float16"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as _:
            a = T.alloc_shared((16, 16), "float16")
            b = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(B[0, 0], b)
            for s in T.serial(2):
                T.copy(A[s, 0, 0], a)
                T.gemm(a, b, c)
            T.copy(c, Y[0, 0])

    return main


def test_f4_accumulating_onto_l0c_never_written_is_reported():
    """F4 (the simulator as the guard for F3's kind): an Mmad without init adds onto what L0C held, so its bytes
    keep their written state; the copy out of an accumulator no initialising Mmad wrote is the checker's
    `uninitialised read` at the copy (it stored the fill's 1.3e36 unreported)."""
    a = np.ones((2, 16, 16), np.float16)
    b = np.ones((16, 16), np.float16)
    prof = never_cleared(target=TARGET).profile(a, b)
    assert len(prof["reports"]) == 1 and "uninitialised read: Fixpipe stores 256 element(s) of tile c (L0C) that no " \
        "Mmad of this block wrote" in prof["reports"][0], prof["reports"]


# ------------------------------------------------------------------------------------------------
# the fuzzer's twenty-second stream (fuzz/chain.py)

def test_chain_stream_covers_its_forms_and_catches_a_wrong_answer():
    from fuzz import chain, grammar, reducer
    from fuzz.reference import compare, reference
    ds = [chain.generate(s) for s in range(0, 3000, grammar.GROUP)]
    assert {d["chain"] for d in ds} == set(chain.FORMS)
    fix = [d for d in ds if d["chain"] == "fix"]
    assert {d["N"] for d in fix} == {16, 24, 32, 48} and {d["when"] for d in fix} == {"once", "each"}
    assert {d["tb"] for d in fix} == {True, False} and {d["kloop"] for d in fix} == {"serial", "pipelined"}
    assert {d["use"] for d in ds if d["chain"] == "i8"} == {"store", "shr", "and", "cmp", "div"}
    assert {d["c"] for d in ds if d["chain"] == "pow"} == set(chain.EXPS)
    for form in chain.FORMS:
        d = next(d for d in ds if d["chain"] == form)
        compile(grammar.source(d), "fuzz", "exec")
        refs, _ = reference(d)
        assert compare(d, refs) is None
        bad = [r.copy() for r in refs]
        bad[0].flat[0] += 1
        assert compare(d, bad) is not None
        assert all(chain.valid(c) and c != d for c in reducer.candidates(d))
