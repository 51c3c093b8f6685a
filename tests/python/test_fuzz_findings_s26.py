"""Findings of the session 26 wide fuzzer stream (h-fuzz14, fuzz/wide.py; /work/fuzz14-findings.md).

F1 (open, low): a program-uniform condition read from a tensor (`if Lens[bx] > 0:`) around a row wider
than the UB stops the column blocks (split_cols): a UB capacity error on ascend910b whose hint names
the `if`; the same body without the `if` runs in column blocks. (The rows-in-groups sibling, fuzz13 F2,
is test_fuzz_findings_s25.py's.)

Each case is checked on cpu and ascend910b against float64, the checker on."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET

def row_max_kernel(N, gate):
    """Each of 2 programs stores the max of its row of N float32 (N past the UB: column blocks), under
    `if Lens[bx] > 0` (gate) or not."""
    @T.prim_func
    def main(X: T.Tensor((2, N), "float32"), Lens: T.Tensor((2,), "int32"), S: T.Tensor((2,), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((1, N), "float32")
            s = T.alloc_fragment((1,), "float32")
            if not gate or Lens[bx] > 0:
                T.copy(X[bx, 0], x)
                T.reduce_max(x, s, dim=1)
                T.copy(s, S[bx])
    return main


F1_XFAIL = pytest.mark.xfail(
    strict=True, raises=tw.TilewrightError,
    reason="fuzz14 F1 (low): a program-uniform `if` stops split_cols' column blocks (docs/ascend.md "
           "\"Session 25: rows wider than UB\")")


@pytest.mark.parametrize("target,gate", [("cpu", False), ("cpu", True), (TARGET, False),
                                         pytest.param(TARGET, True, marks=F1_XFAIL)])
def test_f1_row_wider_than_ub_under_a_uniform_condition(target, gate):
    N = 65537
    rng = np.random.default_rng(26)
    x = (rng.integers(-8, 9, (2, N)) / 2.0).astype(np.float32)
    lens = np.array([1, 1], np.int32)
    kern = tw.compile(row_max_kernel(N, gate), target=target, out_idx=[-1])
    if target == "cpu":
        s = kern(x, lens)
    else:
        prof = kern.profile(x, lens)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        s = prof.outputs[0] if isinstance(prof.outputs, (list, tuple)) else prof.outputs
    np.testing.assert_array_equal(np.asarray(s), x.max(axis=1))
