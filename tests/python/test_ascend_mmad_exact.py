"""Mmad in the simulator, bit for bit (docs/ascend.md, "What is exact"): the seed matmul on
ascend910b, with tails in M, N and K, against a straightforward reference — every product of the
16-bit inputs exact in float32; the products of each slice of the Cube's depth (16 K steps for
16-bit inputs, session 24: docs/ascend.md "the Cube's accumulation order") summed in K order in
float32, each slice's sum added once to a float32 accumulator from +0, the sum rounded to the
output dtype (Fixpipe, round to nearest even) — and the same bits on a second run (the data
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


def sliced_reference(a, b, dtype, k0=16):
    """The K slices start at multiples of 16 (the seed's K blocks are multiples of 16)."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    K = a.shape[1]
    for s in range(0, K, k0):
        part = a32[:, s, None] * b32[None, s, :]  # float32 products (exact for 16-bit inputs)
        for kk in range(s + 1, min(K, s + k0)):
            part = part + a32[:, kk, None] * b32[None, kk, :]
        acc = acc + part  # one float32 add per slice
    return acc.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_seed_matmul_is_bit_exact_and_repeatable(dtype):
    M, N, K = 150, 100, 90  # tails: 150 = 128 + 22, 100 < 128, 90 = 64 + 26
    kernel = seed_matmul.build(M, N, K, dtype=dtype, target="ascend910b")
    rng = tw.testing.rng(5)
    a = tw.testing.randn((M, K), dtype, seed=rng)
    b = tw.testing.randn((K, N), dtype, seed=rng)
    want = sliced_reference(a, b, dtype).view(np.uint16)
    for _ in range(2):
        prof = kernel.profile(a, b)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        got = np.asarray(prof.outputs).view(np.uint16)
        np.testing.assert_array_equal(got, want)
