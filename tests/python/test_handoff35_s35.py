"""Session 35 (h-handoff35): hand-offs between the Cube and the vector code that take a pair of cross-core flag ids
in turn (port35 F2, issue 13). The 910B has cross-core flag ids 0..10: five hand-offs with a pair each. Chunked
causal linear attention (phi = elu + 1 on the vector side) and RetNet retention (the decays on the vector side),
with the state carried between gemms across the chunk loop, need seven (q, k, the masked scores and the state's
16-bit copy to the Cube; the scores and the state to the vector code). split_cube_vector now lets a hand-off that
finds no pair left share the latest pair of its direction in turn (docs/ascend.md, "Hand-offs"); the simulator
runs every kernel here with the checker on (a report fails the test), against float64 and against cpu.
"""
import math
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import port35_kernels as P  # noqa: E402
from ascend_util import TARGET, run_checked  # noqa: E402


@tw.jit(out_idx=[-1])
def chunked(BH, S, D, dt, form, gamma=0.9, C=16):
    """port35 F2's kernel with the feature map (`linear`) or the decays (`retnet`, q gamma^(i + 1),
    k gamma^(C - 1 - i), the scores' mask times gamma^(-C), S = gamma^C S + a fresh gemm's k^T v) computed in the
    kernel, and the state's 16-bit copy for the next chunk's gemm made after each chunk's state (zeroed before
    the loop by a copy of a cleared float32 tile: an accumulator is zero only through its first gemm on Ascend)."""
    lg = math.log(gamma)

    @T.prim_func
    def main(Q: T.Tensor((BH, S, D), dt), K: T.Tensor((BH, S, D), dt), V: T.Tensor((BH, S, D), dt),
             O: T.Tensor((BH, S, D), dt)):
        with T.Kernel(BH) as b:
            qf = T.alloc_fragment((C, D), "float32")
            kf = T.alloc_fragment((C, D), "float32")
            q = T.alloc_shared((C, D), dt)
            k = T.alloc_shared((C, D), dt)
            v = T.alloc_shared((C, D), dt)
            a = T.alloc_fragment((C, C), "float32")
            ash = T.alloc_shared((C, C), dt)
            snew = T.alloc_fragment((D, D), "float32")
            st = T.alloc_fragment((D, D), "float32")
            stsh = T.alloc_shared((D, D), dt)
            acc = T.alloc_fragment((C, D), "float32")
            T.clear(st)
            T.copy(st, stsh)
            for c in T.serial(T.ceildiv(S, C)):
                T.copy(Q[b, c * C, 0], qf)
                T.copy(K[b, c * C, 0], kf)
                T.copy(V[b, c * C, 0], v)
                for i, j in T.Parallel(C, D):
                    if form == "linear":
                        qf[i, j] = T.where(qf[i, j] > 0, qf[i, j] + 1.0, T.exp(qf[i, j]))
                        kf[i, j] = T.where(c * C + i < S, T.where(kf[i, j] > 0, kf[i, j] + 1.0, T.exp(kf[i, j])), 0.0)
                    else:
                        qf[i, j] = qf[i, j] * T.exp(lg * (i + 1))
                        kf[i, j] = T.where(c * C + i < S, kf[i, j] * T.exp(lg * (C - 1 - i)), 0.0)
                T.copy(qf, q)
                T.copy(kf, k)
                T.clear(a)
                T.gemm(q, k, a, transpose_B=True)
                for i, j in T.Parallel(C, C):
                    if form == "linear":
                        a[i, j] = T.where(j <= i, a[i, j], 0.0)
                    else:
                        a[i, j] = T.where(j <= i, a[i, j] * T.exp(lg * -C), 0.0)
                T.copy(a, ash)
                T.clear(acc)
                T.gemm(ash, v, acc)
                T.gemm(q, stsh, acc)
                T.copy(acc, O[b, c * C, 0])
                T.clear(snew)
                T.gemm(k, v, snew, transpose_A=True)
                for i, j in T.Parallel(D, D):
                    if form == "linear":
                        st[i, j] = st[i, j] + snew[i, j]
                    else:
                        st[i, j] = st[i, j] * T.exp(lg * C) + snew[i, j]
                T.copy(st, stsh)

    return main


def _case(form, dt, shape):
    _, _, inputs, refs, extra = P._lin_attn(form)(dt, shape, np.random.default_rng(0))
    return inputs, refs[0], extra["bound"]


@pytest.mark.parametrize("form", ["linear", "retnet"])
@pytest.mark.parametrize("dt, shape", [("float16", (2, 37, 16)), ("bfloat16", (2, 37, 16)), ("float16", (1, 1, 16)),
                                       ("bfloat16", (3, 16, 32))])
def test_chunked_linear_attention_runs_on_ascend(form, dt, shape):
    """Seven hand-offs (five pairs, two taken in turn): right against float64 within the bound of the 16-bit
    roundings of the gemm operands, the checker on (a report fails: run_checked)."""
    inputs, ref, bound = _case(form, dt, shape)
    got = P.f64(run_checked(chunked(*shape, dt, form, target=TARGET), *inputs))
    assert np.all(np.abs(got - ref) <= bound), (np.abs(got - ref) / bound).max()


@pytest.mark.parametrize("form", ["linear", "retnet"])
def test_chunked_linear_attention_cpu_agrees(form):
    """cpu == ascend910b (each within the float64 bound; the two differ only by their roundings' order)."""
    inputs, ref, bound = _case(form, "float16", (2, 37, 16))
    cpu = P.f64(chunked(2, 37, 16, "float16", form)(*inputs))
    npu = P.f64(run_checked(chunked(2, 37, 16, "float16", form, target=TARGET), *inputs))
    assert np.all(np.abs(cpu - ref) <= bound)
    assert np.all(np.abs(cpu - npu) <= 2 * bound), (np.abs(cpu - npu) / bound).max()


def test_the_pair_taken_in_turn_is_in_the_ascendc():
    """The AscendC uses ids 0..9 (five pairs: no pacing, one program per core here) and one id is waited on (and
    set) by the hand-offs of two kernel lines: the two Cube -> vector hand-offs (the scores, the state's update)
    taking one pair in turn. The pre-sets and drains carry the kernel's def line."""
    src = chunked(2, 37, 16, "float16", "linear", target=TARGET).get_source("ascendc")
    def_line = next(i for i, x in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1) if "def main(Q" in x)
    lines = {}
    for kind, i, line in re.findall(r"CrossCore(Set|Wait)Flag<[^>]*>\((\d+)\);\s*// line (\d+)", src):
        assert int(i) <= 9, i
        if int(line) != def_line:
            lines.setdefault((kind, int(i)), set()).add(int(line))
    assert len({i for _, i in lines}) == 10, lines
    shared = {k: v for k, v in lines.items() if len(v) > 1}
    assert {i for _, i in shared} == {4, 5} and all(len(v) == 2 for v in shared.values()), lines


@tw.jit(out_idx=[-1])
def five_results(back, dt="float16"):
    """Five gemm results each read by the vector code (Cube -> vector, a pair of ids each: ids 0..9), their
    weighted sum written out, or (`back`) handed to a sixth gemm (vector -> Cube: no pair left, none of its
    direction to take)."""
    @T.prim_func
    def main(A: T.Tensor((16, 16), dt), O: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as _:
            a = T.alloc_shared((16, 16), dt)
            f0 = T.alloc_fragment((16, 16), "float32")
            f1 = T.alloc_fragment((16, 16), "float32")
            f2 = T.alloc_fragment((16, 16), "float32")
            f3 = T.alloc_fragment((16, 16), "float32")
            f4 = T.alloc_fragment((16, 16), "float32")
            s = T.alloc_fragment((16, 16), "float32")
            ssh = T.alloc_shared((16, 16), dt)
            o = T.alloc_fragment((16, 16), "float32")
            T.copy(A[0, 0], a)
            T.clear(f0)
            T.gemm(a, a, f0)
            T.clear(f1)
            T.gemm(a, a, f1)
            T.clear(f2)
            T.gemm(a, a, f2)
            T.clear(f3)
            T.gemm(a, a, f3)
            T.clear(f4)
            T.gemm(a, a, f4)
            for i, j in T.Parallel(16, 16):
                s[i, j] = f0[i, j] + f1[i, j] * 2.0 + f2[i, j] * 3.0 + f3[i, j] * 4.0 + f4[i, j] * 5.0
            if back:
                T.copy(s, ssh)
                T.clear(o)
                T.gemm(ssh, a, o)
                T.copy(o, O[0, 0])
            else:
                T.copy(s, O[0, 0])

    return main


def test_no_pair_of_its_direction_names_the_tiles_that_cross():
    """Five Cube -> vector hand-offs take ids 0..9; a vector -> Cube one after them has no pair of its direction
    to take in turn: the error, at its line, names every tile that crosses. Without it the kernel runs."""
    with pytest.raises(tw.TilewrightError, match=r"has no pair of its direction to share") as e:
        five_results(True, target=TARGET)
    msg = str(e.value)
    assert "test_handoff35_s35.py:" in msg and "the tiles that cross so far: " in msg, msg
    assert "of 'ssh' (vector -> Cube)" in msg, msg
    assert all(f"'f{r}' (Cube -> vector, line " in msg for r in range(5)), msg
    a = (np.random.default_rng(1).standard_normal((16, 16)) * 0.5).astype(np.float16)
    ref = 15 * (a.astype(np.float64) @ a.astype(np.float64))
    got = run_checked(five_results(False, target=TARGET), a)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
