"""test_cpu_alias_copies.py's kernels on ascend910b (session 14): a loop of s = A_t @ B_t, p = s
(`T.copy(s, p)`: a copy from a gemm result into a gemm operand), O += p @ C_t, and with the vector
code reading p and s. The 910B program has no L0C -> L1 move: infer_scope gives both tiles the
vector role, so the copy runs on the Vector core between two hand-offs (L0C -> GM -> UB, UB -> GM ->
L1). Before, `plain` was "copy L0C -> L1 is not supported" and the variants whose vector code reads
p a misleading "no data path L1 -> global" at the map's line. Also: the 32-bit K x N B tiles of
these gemms (24 columns) were read past their end by the transposing L0B load (a checker report);
their L1 columns are now padded to 16. The bfloat16 variant copies a float32 tensor into a bfloat16
L1 tile: a located error naming the working form, which is checked to run.
Simulator with the checker on (zero reports) against the float64 reference of the cpu test and
the cpu result; tolerances as there (fp32: atol 1e-4, rtol 1e-5)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close

from ascend_util import TARGET, run_checked
from test_cpu_alias_copies import _bf16, _kernel

CASES = {"plain": dict(between=""), "map_reader": dict(between="", map_reader=True),
         "scale_source": dict(between="scale_source", map_reader=True), "write_p": dict(between="", write_p=True)}


@pytest.mark.parametrize("case", list(CASES))
def test_alias_copy_kernels_run_on_ascend(case):
    kern, args, (o_ref, r_ref) = _kernel(**CASES[case], target=TARGET)
    o, r = run_checked(kern, *args)
    assert_close(o, o_ref, atol=1e-4, rtol=1e-5, msg=case)
    assert_close(r, r_ref, atol=1e-4, rtol=1e-5, msg=case)
    o_cpu, r_cpu = _kernel(**CASES[case])[0](*args)
    assert_close(o, o_cpu, atol=1e-4, rtol=1e-5, msg=case)
    assert_close(r, r_cpu, atol=1e-4, rtol=1e-5, msg=case)
    prog = kern.get_source("ascend_program")
    assert "s_ub" in prog and "p_ub" in prog  # the copy runs in UB, between the two hand-offs


def test_bf16_operand_from_a_float32_tensor_is_a_located_error():
    with pytest.raises(tw.TilewrightError, match=r"test_cpu_alias_copies\.py:\d+:\d+: error: copy GM->L1 cannot "
                                                 r"convert float32 to bfloat16") as e:
        _kernel(between="", dtype_p="bfloat16", target=TARGET)
    assert "T.copy(C[t * N:(t + 1) * N, :], c)" in str(e.value)  # the copy's line
    assert "convert that tile in a T.Parallel map" in e.value.hint


def _bf16_kernel(target):
    """The working form the hint names: C copied into a float32 tile, converted to bfloat16 in a map."""
    M, K, N, steps = 32, 16, 24, 3

    @T.prim_func
    def main(A: T.Tensor((steps * M, K), "float32"), Bm: T.Tensor((steps * K, N), "float32"),
             C: T.Tensor((steps * N, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, K), "float32")
            b = T.alloc_shared((K, N), "float32")
            cf = T.alloc_fragment((N, N), "float32")
            c = T.alloc_shared((N, N), "bfloat16")
            s = T.alloc_fragment((M, N), "float32")
            p = T.alloc_fragment((M, N), "bfloat16")
            o = T.alloc_fragment((M, N), "float32")
            T.fill(o, 0)
            for t in T.serial(steps):
                T.copy(A[t * M:(t + 1) * M, :], a)
                T.copy(Bm[t * K:(t + 1) * K, :], b)
                T.gemm(a, b, s, clear_accum=True)
                T.copy(s, p)
                T.copy(C[t * N:(t + 1) * N, :], cf)
                for i, j in T.Parallel(N, N):
                    c[i, j] = cf[i, j]
                T.gemm(p, c, o)
            T.copy(o, O)
    return tw.compile(main, out_idx=[3], target=target)


def test_bf16_working_form_runs():
    _, args, _ = _kernel(between="", dtype_p="bfloat16")
    A, Bm, C = args
    o_ref = np.zeros((32, 24))
    for t in range(3):
        s = A[t * 32:(t + 1) * 32].astype(np.float64) @ Bm[t * 16:(t + 1) * 16]
        o_ref += _bf16(s) @ _bf16(C[t * 24:(t + 1) * 24])
    o = run_checked(_bf16_kernel(TARGET), *args)
    assert_close(o, o_ref, atol=0.05, rtol=1e-2)
    assert_close(o, _bf16_kernel("cpu")(*args), atol=0.05, rtol=1e-2)
