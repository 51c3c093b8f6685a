"""examples/flash_attention.py on the cpu target against a float64 reference: odd sequence lengths
(one token, a 17-token tail, 2047 = one short of the blocks), head dims 64 and 128, causal and
not, the benchmark's block shapes, fp32 / bf16 / fp16 inputs. Fixed seeds.

Tolerances: fp32 atol 2e-4 (the example's own check; every output is a convex combination of V's
rows, |V| < 5, and the scores pass through exp2), rtol 1e-5; bf16 / fp16 the default tolerances
of tw.testing for those dtypes (the probabilities are cast to the input dtype before P @ V).
The cpu / ascend910b differential lives in test_ascend_auto_mix.py (test_flash_attention)."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import flash_attention as fa  # noqa: E402


def run(B, H, S, D, causal, dtype="float32", block_M=64, block_N=64, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (randn((B, H, S, D), dtype, seed=rng) for _ in range(3))
    out = fa.flash_attention(B, H, S, D, causal, block_M=block_M, block_N=block_N, dtype=dtype)(q, k, v)
    assert out.shape == (B, H, S, D) and out.dtype == q.dtype
    return out, fa.reference(q, k, v, causal)


def check(out, ref, dtype, msg):
    if dtype == "float32":
        assert_close(out, ref, atol=2e-4, rtol=1e-5, msg=msg)
    else:
        assert_close(out, ref, msg=msg)
    assert np.isfinite(out.astype(np.float64)).all(), msg


@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("S", [1, 17, 2047])
def test_fp32_odd_lengths(S, D, causal):
    H = 1 if S > 1000 else 2
    out, ref = run(1, H, S, D, causal)
    check(out, ref, "float32", f"S={S} D={D} causal={causal}")


@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
@pytest.mark.parametrize("blocks", [(128, 128), (128, 64)], ids=lambda b: f"{b[0]}x{b[1]}")
def test_fp32_bench_blocks(blocks, causal):
    # the benchmark's block shapes; 300 = two full 128-row blocks and a 44-row tail
    out, ref = run(2, 2, 300, 128, causal, block_M=blocks[0], block_N=blocks[1], seed=1)
    check(out, ref, "float32", f"blocks {blocks} causal={causal}")


@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
@pytest.mark.parametrize("S,D", [(17, 64), (130, 128)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision(dtype, S, D, causal):
    out, ref = run(1, 2, S, D, causal, dtype=dtype, seed=2)
    check(out, ref, dtype, f"{dtype} S={S} D={D} causal={causal}")


def test_peaked_scores_underflow_to_zero():
    # scores far apart: most probabilities underflow (exp2 of large negative differences, the
    # region exp2 selects +0 for) and each row is dominated by one key; still finite and exact
    rng = np.random.default_rng(3)
    S, D = 200, 64
    q = (rng.standard_normal((1, 1, S, D)) * 12).astype(np.float32)
    k = (rng.standard_normal((1, 1, S, D)) * 12).astype(np.float32)
    v = rng.standard_normal((1, 1, S, D)).astype(np.float32)
    for causal in (False, True):
        out = fa.flash_attention(1, 1, S, D, causal)(q, k, v)
        check(out, fa.reference(q, k, v, causal), "float32", f"peaked causal={causal}")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("blocks", [(64, 64), (64, 128), (128, 128)], ids=lambda b: f"{b[0]}x{b[1]}")
def test_unmasked_form(blocks, dtype):
    # non-causal with seq_len a multiple of block_N: no key is masked, so the example takes the row
    # max of the raw scores (no map before it: a pass that only reads the tile) and scales in exp2's
    # argument; two query blocks or more, several key blocks
    S, D = 256, 128
    out, ref = run(1, 2, S, D, False, dtype=dtype, block_M=blocks[0], block_N=blocks[1], seed=4)
    check(out, ref, dtype, f"unmasked {blocks} {dtype}")
    src = fa.flash_attention(1, 2, S, D, False, block_M=blocks[0], block_N=blocks[1], dtype=dtype).get_source()
    assert "reduce_max acc_s -> row_max" in src and "fused with reduce_max" not in src


def test_unmasked_form_peaked_scores():
    # the unmasked form with probabilities that underflow to +0 (scores 12x wider than randn's) and
    # a row max that moves between key blocks (the rescale of acc_o and logsum)
    rng = np.random.default_rng(5)
    S, D = 256, 64
    q, k = ((rng.standard_normal((1, 1, S, D)) * 12).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((1, 1, S, D)).astype(np.float32)
    out = fa.flash_attention(1, 1, S, D, False, block_M=64, block_N=64)(q, k, v)
    check(out, fa.reference(q, k, v, False), "float32", "unmasked peaked")
