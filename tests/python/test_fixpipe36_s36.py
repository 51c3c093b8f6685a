"""Session 36 (h-fixpipe36, issue 13, port35 F2): a gemm accumulator cleared by `T.clear` and read (copied) before
its first gemm in program order reads zeros on ascend910b, as on cpu. expand_gemm folds a clear into the first gemm's
init (an L0C accumulator is written only by Mmad), so such a read stopped at "the accumulator 'st' is read before any
gemm wrote it"; the clear of an accumulator read before its first gemm now runs where it stands, as a gemm of zero
tiles with init (docs/ascend.md "Session 36: a cleared accumulator read before its first gemm"). Chunked linear
attention and RetNet written the natural way (port35 F2: the float32 state cleared before the chunk loop, copied
into the 16-bit gemm operand at the top of each chunk, `S += k^T v` by T.gemm) run on both targets, checker on.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import port35_kernels as P  # noqa: E402
from ascend_util import TARGET, run_checked  # noqa: E402


@pytest.mark.parametrize("name", ["linear_attn_chunked", "retnet_chunked"])
@pytest.mark.parametrize("dt, shape", [("float16", (2, 37, 16)), ("bfloat16", (2, 37, 16)), ("float16", (1, 1, 16)),
                                       ("bfloat16", (3, 16, 32))])
def test_f2_natural_form_runs_on_ascend(name, dt, shape):
    """port35 F2's kernels as written: right against float64 within the bound of the operands' 16-bit roundings
    (P.check: the checker on, a report fails), with a tail chunk, one row, and two full chunks of D = 32."""
    P.check(name, dt, shape, TARGET)


@pytest.mark.parametrize("form", ["linear", "retnet"])
def test_f2_natural_form_cpu_agrees(form):
    """cpu == ascend910b: each within the float64 bound, the two within twice it (their roundings' order)."""
    fac, args, inputs, refs, extra = P._lin_attn(form)("float16", (2, 37, 16), np.random.default_rng(3))
    cpu = P.f64(fac(*args)(*inputs))
    npu = P.f64(run_checked(fac(*args, target=TARGET), *inputs))
    bound = extra["bound"]
    assert np.all(np.abs(cpu - refs[0]) <= bound) and np.all(np.abs(npu - refs[0]) <= bound)
    assert np.all(np.abs(cpu - npu) <= 2 * bound), (np.abs(cpu - npu) / bound).max()


@tw.jit(out_idx=[-2, -1])
def read_then_gemm(n, where, dt="float16"):
    """n steps: `c` is cleared (`where` = "outside": once before the loop; "inside": at the top of every step),
    copied out (Z[t]: zeros, then the sum of the earlier steps' A[t] @ B when cleared once), then
    C[t] = c after `c += A[t] @ B`. "inside" is the case that needs a real clear: L0C holds the previous step's
    product when the step's copy reads it."""
    @T.prim_func
    def main(A: T.Tensor((n, 16, 32), dt), B: T.Tensor((32, 16), dt), Z: T.Tensor((n, 16, 16), "float32"),
             C: T.Tensor((n, 16, 16), "float32")):
        with T.Kernel(1) as _:
            a = T.alloc_shared((16, 32), dt)
            b = T.alloc_shared((32, 16), dt)
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(B[0, 0], b)
            if where == "outside":
                T.clear(c)
            for t in T.serial(n):
                if where == "inside":
                    T.clear(c)
                T.copy(c, Z[t, 0, 0])
                T.copy(A[t, 0, 0], a)
                T.gemm(a, b, c)
                T.copy(c, C[t, 0, 0])

    return main


@pytest.mark.parametrize("where", ["outside", "inside"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_cleared_accumulator_read_before_its_first_gemm(where, dt):
    """Exact values (small integers and halves): Z and C equal the float64 sums exactly on ascend910b (checker on),
    for a loop of 3 steps and of 1."""
    rng = np.random.default_rng(7)
    npdt = tw.testing.np_dtype(dt)
    for n in (3, 1):
        a = (rng.integers(-6, 7, (n, 16, 32)) / 2.0).astype(npdt)
        b = (rng.integers(-6, 7, (32, 16)) / 2.0).astype(npdt)
        prods = np.einsum("tik,kj->tij", P.f64(a), P.f64(b))
        if where == "outside":
            c_ref = np.cumsum(prods, axis=0)
            z_ref = c_ref - prods
        else:
            c_ref, z_ref = prods, np.zeros_like(prods)
        z, c = run_checked(read_then_gemm(n, where, dt, target=TARGET), a, b)
        np.testing.assert_array_equal(P.f64(z), z_ref)
        np.testing.assert_array_equal(P.f64(c), c_ref)


def test_the_clear_that_stands_is_one_zero_gemm():
    """The clear read before its first gemm is one Mmad with init (of two L1 tiles zeroed by InitConstValue) at the
    clear's line, before the loop; the loop's gemm accumulates onto it (no init)."""
    src = read_then_gemm(3, "outside", target=TARGET).get_source("ascendc")
    lines = pathlib.Path(__file__).read_text().splitlines()
    clear = next(i for i, x in enumerate(lines, 1) if 'if where == "outside":' in x) + 1
    aic = src[src.index("ASCEND_IS_AIC"):]
    before, loop = aic.split("for (int32_t t = 0;", 1)
    assert before.count("Mmad(") == 1 and "cmatrixInitVal = true" in before, before
    assert f"Mmad(c, c_zero_a_l0, c_zero_b_l0, tw_p);  // line {clear}" in before, before
    assert before.count("InitConstValue(c_zero_") == 2, before
    assert loop.count("Mmad(") == 1 and "cmatrixInitVal = false" in loop and "cmatrixInitVal = true" not in loop


# ------------------------------------------------------------------------------------ Fixpipe L0C -> L1
@tw.jit(out_idx=[-1])
def chain(M, K, N, P_, dt):
    """o = round_dt(a @ b) @ c: the float32 result `s` copied into the next gemm's 16-bit operand `ssh`."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dt), B: T.Tensor((K, N), dt), Cm: T.Tensor((N, P_), dt),
             O: T.Tensor((M, P_), "float32")):
        with T.Kernel(1) as _:
            a = T.alloc_shared((M, K), dt)
            b = T.alloc_shared((K, N), dt)
            cm = T.alloc_shared((N, P_), dt)
            s = T.alloc_fragment((M, N), "float32")
            ssh = T.alloc_shared((M, N), dt)
            o = T.alloc_fragment((M, P_), "float32")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            T.copy(Cm[0, 0], cm)
            T.clear(s)
            T.gemm(a, b, s)
            T.copy(s, ssh)
            T.clear(o)
            T.gemm(ssh, cm, o)
            T.copy(o, O[0, 0])

    return main


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape, cube", [((16, 32, 16, 16), True), ((32, 16, 48, 32), True),
                                         ((20, 16, 16, 16), False), ((16, 16, 24, 16), False)])
def test_accumulator_into_operand(dt, shape, cube):
    """Whole 16 x 16 fractals: one Fixpipe L0C -> L1 on the Cube (CFG_NZ, F322F16 / F322BF16), no hand-off to the
    vector core; other shapes keep the hand-off (a partial fractal would leave the operand's padding to the
    accumulator's). Exact values: a @ b of small integers and halves rounds exactly to dt only where it fits, so
    the reference rounds it to dt as the copy does; o equals it exactly (checker on), and cpu agrees for one shape."""
    M, K, N, P_ = shape
    rng = np.random.default_rng(5)
    npdt = tw.testing.np_dtype(dt)
    a = (rng.integers(-3, 4, (M, K)) / 2.0).astype(npdt)
    b = (rng.integers(-3, 4, (K, N)) / 2.0).astype(npdt)
    c = (rng.integers(-3, 4, (N, P_)) / 2.0).astype(npdt)
    s = (P.f64(a) @ P.f64(b)).astype(npdt)
    ref = P.f64(s) @ P.f64(c)
    k = chain(M, K, N, P_, dt, target=TARGET)
    src = k.get_source("ascendc")
    fix = f"Fixpipe<{'half' if dt == 'float16' else 'bfloat16_t'}, float, CFG_NZ>(ssh"
    assert (fix in src) == cube and ("CrossCoreSetFlag" in src) != cube, src
    np.testing.assert_array_equal(P.f64(run_checked(k, a, b, c)), ref)
    if shape == (16, 32, 16, 16) and dt == "float16":
        np.testing.assert_array_equal(P.f64(chain(M, K, N, P_, dt)(a, b, c)), ref)


def test_linear_attention_state_stays_on_the_cube():
    """port35 F2's linear form: the state st is only gemm'd and copied, so its copy into the operand is one Fixpipe
    L0C -> L1 per chunk and the state never crosses to the vector core; RetNet's state is scaled by vector code,
    so its copy stays a hand-off."""
    lin = P.chunked_linear_attn(2, 37, 16, "float16", "linear", target=TARGET)
    ret = P.chunked_linear_attn(2, 37, 16, "float16", "retnet", target=TARGET)
    assert lin.get_source("ascendc").count("CFG_NZ>(stsh") == 1
    assert lin.get_source("ascend_program").count("FixpipeL1 ") == 1
    assert "FixpipeL1 " not in ret.get_source("ascend_program")


@tw.jit(out_idx=[-1])
def cleared_operand_then_fixpipe(dt="float16"):
    """The operand is cleared (InitConstValue, MTE2) before the Fixpipe L0C -> L1 writes it (FIX)."""
    @T.prim_func
    def main(A: T.Tensor((16, 16), dt), O: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as _:
            a = T.alloc_shared((16, 16), dt)
            s = T.alloc_fragment((16, 16), "float32")
            ssh = T.alloc_shared((16, 16), dt)
            o = T.alloc_fragment((16, 16), "float32")
            T.clear(ssh)
            T.copy(A[0, 0], a)
            T.clear(s)
            T.gemm(a, a, s)
            T.copy(s, ssh)
            T.clear(o)
            T.gemm(ssh, a, o)
            T.copy(o, O[0, 0])

    return main


def test_mte2_write_then_fixpipe_is_relayed_through_mte1():
    """The AIC has no MTE2 -> FIX flag pair: insert_sync orders the clear before the Fixpipe through MTE1
    (MTE2 -> MTE1, MTE1 -> FIX); the checker finds no race and the result is exact."""
    k = cleared_operand_then_fixpipe(target=TARGET)
    src = k.get_source("ascendc")
    fix = src.index("Fixpipe<half, float, CFG_NZ>(ssh")
    before = src[src.index("InitConstValue(ssh"):fix]
    assert "MTE2_FIX" not in src and "WaitFlag<HardEvent::MTE1_FIX>" in before, before
    a = (np.random.default_rng(0).integers(-3, 4, (16, 16)) / 2).astype(np.float16)
    s = (P.f64(a) @ P.f64(a)).astype(np.float16)
    np.testing.assert_array_equal(P.f64(run_checked(k, a)), P.f64(s) @ P.f64(a))
