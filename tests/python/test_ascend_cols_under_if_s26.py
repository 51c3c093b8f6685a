"""Column blocks and row groups under a condition the same for every row and column (hunt14 F2, fuzz14 F1;
h-hints14, docs/ascend.md "Session 26: rows in groups under an `if` (h-hints14)").

A row wider than the UB runs in column blocks (split_cols); under `if Lens[bx] > 0` / `if Go[bx] > 0` /
`if bx < n` (a condition that reads no tile and nothing the block writes) it was the UB overflow. Now the
`if`, with the statements before and after it, is peeled (peel_uniform_if) and each branch split on its own.
fuzz14 F1's kernel with a branch not taken, and the note that names the column blocks; hunt14 F2's gated
masked softmax and run-time-extent `if` are test_hunt_s26.py's (test_masked_softmax_lengths's gated cases,
test_f2_runtime_extent_hint_then_if). cpu and ascend910b (checker on) against numpy, exact.
"""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET, run_checked

TARGETS = ["cpu", TARGET]


# fuzz14 F1: each of 2 programs stores the max of its row of N float32 under `if Lens[bx] > 0`.
def row_max_kernel(N):
    @T.prim_func
    def main(X: T.Tensor((2, N), "float32"), Lens: T.Tensor((2,), "int32"), S: T.Tensor((2,), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((1, N), "float32")
            s = T.alloc_fragment((1,), "float32")
            if Lens[bx] > 0:
                T.copy(X[bx, 0], x)
                T.reduce_max(x, s, dim=1)
                T.copy(s, S[bx])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lens", [[1, 1], [0, 1]])
def test_fuzz14_f1_row_wider_than_ub_under_a_uniform_condition(target, lens):
    N = 65537
    rng = np.random.default_rng(26)
    x = (rng.integers(-8, 9, (2, N)) / 2.0).astype(np.float32)
    lens = np.array(lens, np.int32)
    s = np.full(2, -5.0, np.float32)
    kern = tw.compile(row_max_kernel(N), target=target)
    if target == "cpu":
        kern(x, lens, s)
    else:
        run_checked(kern, x, lens, s)
        assert any("column blocks" in n for n in kern.notes), kern.notes
    np.testing.assert_array_equal(s, np.where(lens > 0, x.max(axis=1), -5.0))
