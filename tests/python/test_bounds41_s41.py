"""Session 41, h-bounds41: two stores past a tensor that went unreported.

bounds40 F3: an in-place map under a condition that stores the value it read plus z == 0 past the tensor
(`if x[j] > 2: Y[0, j + n] = Y[0, j + n] + z[j]`): cpu under TW_BOUNDS_CHECK=1 reports index 8, ascend910b ran it
clean, because the simulator's by-value rule (a Mul / Add / Sub lane that multiplies by 1 or adds 0 keeps the
preloaded state) applied to every Mul / Add / Sub, the user's own `+ z` included. The rule now applies only where the
identity operand is a compiler temporary legalize_vector marks (ir::BufferNode::passes: the int32 where blend's mask
and terms, the int8 / uint8 wrap's multiple of 256), so the user's `+ z` is a store and is reported, while the guard
idiom (`if j + n < 8: Y[0, j + n] = Y[0, j + n] + x[j]`, whose blend passes the preloaded lanes through) stays silent.

hunt40 F3: a map's element store past the tensor's rows under an if / else (`if j < n: Y[bx * 4 + i, j] = x[i, j]
else: Y[bx * 4 + i, j] = -x[i, j]` with M = 1, block 4) ran on cpu without TW_BOUNDS_CHECK and wrote past Y's
allocation (heap corruption, a later glibc abort). A store both arms make runs whichever arm runs: check_bounds (one
place, both targets) checks it as a store outside any if, a compile-time error naming the line, as without the if.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import test_bounds38_s38 as B38  # noqa: E402
from ascend_util import TARGET  # noqa: E402
from tw_test_util import bounds_checked_child  # noqa: E402

DTYPES = ["int32", "int8", "uint8", "bfloat16", "float16", "float32"]


def _args(n, dtype):
    t = tw.testing.np_dtype(dtype)
    return [np.arange(1, 9).astype(t), np.array([n], np.int32), (np.arange(16).reshape(2, 8) + 3).astype(t)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_inplace_add_of_zero_past_the_tensor_is_reported(dtype):
    args = _args(3, dtype)
    want = args[-1].astype(np.float64)  # z == 0: the stores inside leave Y as it was
    reports = tw.compile(B38.make("add", dtype), target=TARGET).profile(*args)["reports"]
    oob = [r for r in reports if "out of bounds" in r]
    assert len(oob) == 1 and "a T.Parallel map stores index 8 of dimension 1 of tensor Y" in oob[0], reports
    assert "test_bounds38_s38.py:" in oob[0]  # the kernel's line
    assert args[-1].astype(np.float64).tolist() == want.tolist()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [3, 0, 6])
def test_the_guard_idiom_in_place_is_silent_and_exact(dtype, n):
    """Every lane the condition skips keeps the preload through the where's blend (int32: Mul, Mul, Add; int8 /
    uint8: the wrap's Sub): no report; the stores inside against numpy."""
    args = _args(n, dtype)
    want = args[-1].astype(np.float64)
    for j in range(8):
        if j + n < 8 and 0 <= j + n:
            want[0, j + n] += j + 1
    reports = tw.compile(B38.make("guardadd", dtype), target=TARGET).profile(*args)["reports"]
    assert reports == [] and args[-1].astype(np.float64).tolist() == want.tolist(), reports


def both_arms(form, dtype="float32", M=1, bm=4):
    """hunt40 F3: Y[bx * bm + i, j] stored by both arms of `if j < n` (form "if"), an elif chain ("elif"), a guard
    on the row around them ("guarded"), or arms that store into different buffers ("differ")."""
    N = 3

    @T.prim_func
    def k(X: T.Tensor((M, N), dtype), n: T.int32, Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dtype)
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                if form == "if":
                    if j < n:
                        Y[bx * bm + i, j] = x[i, j]
                    else:
                        Y[bx * bm + i, j] = -x[i, j]
                elif form == "elif":
                    if j < n:
                        Y[bx * bm + i, j] = x[i, j]
                    elif j < n + 1:
                        Y[bx * bm + i, j] = x[i, j] * 2
                    else:
                        Y[bx * bm + i, j] = -x[i, j]
                elif form == "guarded":
                    if bx * bm + i < M:
                        if j < n:
                            Y[bx * bm + i, j] = x[i, j]
                        else:
                            Y[bx * bm + i, j] = -x[i, j]
                else:  # differ: the then arm stores into Y, the else arm into the tile
                    if bx * bm + i < M:
                        Y[bx * bm + i, j] = x[i, j]
                    else:
                        x[i, j] = -x[i, j]
    return k


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("form, dtype", [("if", "float32"), ("if", "int8"), ("elif", "float16"), ("if", "bfloat16")])
def test_a_store_both_arms_make_past_the_tensor_is_a_compile_time_error(target, form, dtype):
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(both_arms(form, dtype), target=target)
    msg = str(e.value)
    assert "index bx * 4 + i of 'Y' reaches 3, outside dimension 0 of size 1" in msg, msg
    assert "the if and its else both store this element" in msg and "test_bounds41_s41.py:" in msg, msg


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("form, M", [("guarded", 1), ("guarded", 6), ("differ", 1), ("differ", 6), ("if", 8)])
def test_a_store_the_condition_bounds_is_accepted_and_exact(target, form, M):
    N, n = 3, 2
    X = (np.arange(M * N).reshape(M, N) + 1).astype(np.float32)
    Y = np.zeros((M, N), np.float32)
    want = np.zeros((M, N))
    for i in range(M):
        for j in range(N):
            want[i, j] = X[i, j] if form == "differ" or j < n else -X[i, j]
    k = tw.compile(both_arms(form, M=M), target=target)
    if target == "cpu":
        k(X, n, Y)
    else:
        assert k.profile(X, n, Y)["reports"] == []
    assert Y.astype(np.float64).tolist() == want.tolist()


CHILD = r'''
import sys
sys.path.insert(0, sys.argv[1])
import tilewright as tw
import test_bounds41_s41 as B
for dtype in B.DTYPES:
    try:
        tw.compile(B.B38.make("add", dtype), target="cpu")(*B._args(3, dtype))
        print(dtype, "RAN")
    except tw.TilewrightError as e:
        print(dtype, e.message)
'''


def test_cpu_checked_reports_the_same_index(tmp_path):
    """cpu under TW_BOUNDS_CHECK=1 (a child process) reports the index ascend910b reports."""
    lines = bounds_checked_child(CHILD, tmp_path)
    assert len(lines) == len(DTYPES), lines
    for line in lines:
        assert "index 8 is out of bounds for dimension 1 of 'Y'" in line, line
