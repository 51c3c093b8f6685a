"""Mmad in the simulator, bit for bit (docs/ascend.md, "What is exact"): the seed matmul on
ascend910b, with tails in M, N and K, against a straightforward reference — every product of the
16-bit inputs rounded to float32 and added to a float32 sum in K order from +0, the sum rounded to
the output dtype (Fixpipe, round to nearest even) — and the same bits on a second run (the data
effects run on worker threads: simulator/functional_queue.h)."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest

import tilewright as tw

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import seed_matmul  # noqa: E402


def sequential_reference(a, b, dtype):
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for kk in range(a.shape[1]):
        acc = acc + a32[:, kk, None] * b32[None, kk, :]  # float32 product, then float32 sum
    return acc.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_seed_matmul_is_bit_exact_and_repeatable(dtype):
    M, N, K = 150, 100, 90  # tails: 150 = 128 + 22, 100 < 128, 90 = 64 + 26
    kernel = seed_matmul.build(M, N, K, dtype=dtype, target="ascend910b")
    rng = tw.testing.rng(5)
    a = tw.testing.randn((M, K), dtype, seed=rng)
    b = tw.testing.randn((K, N), dtype, seed=rng)
    want = sequential_reference(a, b, dtype).view(np.uint16)
    for _ in range(2):
        prof = kernel.profile(a, b)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        got = np.asarray(prof.outputs).view(np.uint16)
        np.testing.assert_array_equal(got, want)
