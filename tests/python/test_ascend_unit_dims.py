"""Extent-1 dims on Ascend (issue 10, "no silent wrong answer"): tiles with one column, one row,
or one element, in fp32, fp16 and bf16, through the norm examples. Each kernel runs on cpu and on
ascend910b (simulator, checker on: zero reports) against a float64 numpy reference.

- A casting copy (fp16/bf16 tensor -> fp32 tile) into an (M, 1) or (1,) tile was a 1-D map whose
  stores missed the extent-1 index ("does not use every loop index"); it keeps every dim now.
- A row broadcast on a (1, 1) tile was rejected for its row stride (one row has no second repeat)."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import layer_norm  # noqa: E402
import rms_norm  # noqa: E402
import softmax  # noqa: E402
from tilewright.testing import TOLERANCES, randn  # noqa: E402
from ascend_util import TARGET, assert_close, run_checked  # noqa: E402

# (M, N, block_M, dtype): one-column tiles, a (1, 1) tile, one-row tiles. The kernels compute in
# float32 tiles in every dtype; the dtype decides only the copies (a casting copy from float16 /
# bfloat16). So every shape runs once or more, each 16-bit dtype on an (M, 1) tile, a (1, 1) tile
# and a one-row tile, float32 (no casting copy) on each of the three (session 29, h-ci: 15 -> 9;
# the 6 left out were the same layouts in the other dtype of the same element size or in float32).
CASES = [
    (3, 1, 8, "float32"), (3, 1, 8, "float16"), (3, 1, 8, "bfloat16"),  # the casting copy's (M, 1) tile
    (1, 1, 1, "float32"), (1, 1, 1, "bfloat16"),                        # a (1, 1) tile: the row broadcast
    (5, 1, 1, "float16"),                                                # (1, 1) tiles of 5 programs
    (1, 40, 8, "bfloat16"),                                              # one row in an 8-row tile
    (7, 40, 1, "float32"), (7, 40, 1, "float16"),                        # one-row tiles
]


def kernels(M, N, bm, dtype):
    rng = np.random.default_rng(M * 100 + N)
    x = randn((M, N), dtype, seed=rng)
    w = randn((N,), dtype, seed=rng)
    b = randn((N,), dtype, seed=rng)
    return [
        ("softmax", lambda tg: softmax.softmax(N, block_M=bm, dtype=dtype, target=tg), (x,), softmax.reference(x)),
        ("rms_norm", lambda tg: rms_norm.rms_norm(N, block_M=bm, dtype=dtype, target=tg), (x, w),
         rms_norm.reference(x, w)),
        ("layer_norm", lambda tg: layer_norm.layer_norm(N, block_M=bm, dtype=dtype, target=tg), (x, w, b),
         layer_norm.reference(x, w, b)),
    ]


@pytest.mark.parametrize("M,N,bm,dtype", CASES)
def test_norms_with_unit_dims_match_cpu_and_numpy(M, N, bm, dtype):
    for name, make, inputs, ref in kernels(M, N, bm, dtype):
        what = f"{name} {M}x{N} block_M={bm} {dtype}"
        cpu = make("cpu")(*inputs)
        npu = run_checked(make(TARGET), *inputs)
        assert_close(cpu, ref, TOLERANCES[dtype], what + " on cpu")
        assert_close(npu, ref, TOLERANCES[dtype], what + " on " + TARGET)


@pytest.mark.parametrize("M,N", [(1, 1), (17, 1), (1, 33), (3, 2)])
def test_expert_vector_ops_on_unit_dims(M, N):
    # examples/ascend/softmax_expert.py: T.sub(x, x, mx[:, None]) over a (block_M, 1) tile left the
    # map's unit-extent loop out of the destination's index ("the destination 'x' is not indexed by
    # every loop variable", session 15); a unit dim of the destination's extent is indexed now
    sys.path.insert(0, os.path.join(ROOT, "examples", "ascend"))
    import softmax_expert
    x = randn((M, N), "float32", scale=3.0, seed=np.random.default_rng(0))
    y = softmax_expert.softmax(M, N)(x)
    assert_close(y, softmax_expert.reference(x), (1e-6, 1e-5), "ascend expert softmax")
