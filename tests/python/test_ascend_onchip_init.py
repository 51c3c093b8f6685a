"""The simulator's on-chip memories start poisoned, not zeroed (issue 10, "no silent wrong
answer"): on the chip, L1, L0A/B/C and UB hold whatever the previous kernel left, so a kernel
that reads on-chip memory it never wrote must get visibly wrong values in the simulator, not the
zeros that would hide the bug. The poison is 0x7B in every byte (deterministic)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import TARGET

# the value of all-0x7B bytes in each dtype
POISON = {
    "float32": np.frombuffer(b"\x7b" * 4, np.float32)[0],
    "float16": np.frombuffer(b"\x7b" * 2, np.float16)[0],
    "int32": np.frombuffer(b"\x7b" * 4, np.int32)[0],
}


def unwritten_tile_copied_out(dtype):
    """Y = a UB tile nobody wrote (a kernel bug the simulator must expose)."""
    @T.prim_func
    def main(X: T.Tensor((8, 16), dtype), Y: T.Tensor((8, 16), dtype)):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8, 16), dtype)
            T.copy(t, Y[0, 0])
    return tw.compile(main, target=TARGET, out_idx=[-1])


@pytest.mark.parametrize("dtype", sorted(POISON))
def test_unwritten_ub_reads_the_poison_not_zeros(dtype):
    prof = unwritten_tile_copied_out(dtype).profile(np.zeros((8, 16), dtype))
    y = np.asarray(prof.outputs)
    assert y.dtype == np.dtype(dtype)
    assert (y == POISON[dtype]).all(), y
    assert abs(float(POISON[dtype])) > 100  # visibly wrong in any sum, max or product


def test_gemm_accumulator_is_zeroed_by_its_instruction_not_by_the_initial_state():
    # T.clear + T.gemm: the zeroing is Mmad's init (or a fill), so the result is exact even
    # though L0C starts poisoned
    M = N = K = 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            T.gemm(a, b, c)
            T.copy(c, C[0, 0])

    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    prof = tw.compile(main, target=TARGET, out_idx=[-1]).profile(a, b)
    assert prof["reports"] == []
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(np.asarray(prof.outputs), ref, atol=1e-3, rtol=1e-3)
