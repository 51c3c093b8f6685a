"""Session 26 (h-attn14): flash attention and the sliding window at the odd shapes of issue 16's
attention goals, against float64 (fixed seeds): sequence lengths 1, 17 and 2049 (one past the
blocks), head dims 64 / 80 / 96 / 128, windows of 1 key and longer than the sequence, the window
with the block shapes measured fastest on the cpu (128 x 128: docs/performance.md "Session 26"),
as `window=` and as a bool mask tensor with its block tables; the same window kernels on the
ascend910b simulator against the cpu and float64. Run natively and with TW_CPU_ARCH=x86-64-v3
(the AVX2 exp2_chunk's vector form; its bits are checked against exp2 in test_cpu_runtime.cpp).

Tolerances: fp32 flash attention atol 2e-4, rtol 1e-5 (test_flash_attention_cpu.py's: a convex
combination of V's rows through exp2); masked prefill tw.testing's float32 defaults
(test_masked_attention.py's)."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import flash_attention as fa  # noqa: E402
import masked_attention as ma  # noqa: E402


@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
@pytest.mark.parametrize("S,D", [(1, 80), (17, 80), (17, 96), (2049, 96), (2049, 64), (2049, 128), (1, 96)])
def test_flash_odd_shapes(S, D, causal):
    rng = np.random.default_rng(26)
    q, k, v = (randn((1, 2 if S < 2049 else 1, S, D), "float32", seed=rng) for _ in range(3))
    out = fa.flash_attention(*q.shape, causal, block_M=64, block_N=128)(q, k, v)
    assert_close(out, fa.reference(q, k, v, causal), atol=2e-4, rtol=1e-5, msg=f"S {S} D {D} causal {causal}")


# window 1: each query sees itself only (P = 1 on the diagonal: O = V); a window longer than the
# sequence: plain causal attention
@pytest.mark.parametrize("window", [1, 3000], ids=["w1", "w_gt_S"])
@pytest.mark.parametrize("S,D,blocks", [(1, 64, (64, 64)), (17, 96, (64, 64)), (2049, 64, (128, 128)),
                                        (2049, 128, (64, 64))])
def test_window_edges(S, D, blocks, window):
    out, ref = ma.run(1, 2, 1, S, S, D, causal=True, window=window, block_M=blocks[0], block_N=blocks[1])
    assert_close(out, ref)
    if window == 1:
        _, k, v, _ = ma.inputs(1, 2, 1, S, S, D)
        assert_close(out, np.repeat(v, 2, axis=1))


# the bench's sliding window (256 keys, causal) as a bool mask tensor with its block tables, and as
# window=, at the 128 x 128 blocks: both against float64 and each other
@pytest.mark.parametrize("S", [2049, 300])
def test_window_256_mask_tensor_and_window_agree(S):
    q, k, v, _ = ma.inputs(1, 2, 2, S, S, 128, seed=5)
    vis = ma.visibility(S, S, causal=True, window=256)
    lens = np.full((1,), S, np.int32)
    km = ma.attention_prefill(1, 2, 2, S, S, 128, mask="bool", block_M=128, block_N=128)
    om = km(q, k, v, vis, *ma.prefill_blocks(vis, 128, 128), lens)
    kw = ma.attention_prefill(1, 2, 2, S, S, 128, causal=True, window=256, block_M=128, block_N=128)
    ow = kw(q, k, v, np.zeros((S, S), np.float32), *ma.dense_blocks(S, S, 128, 128), lens)
    ref = ma.reference(q, k, v, vis)
    assert_close(om, ref)
    assert_close(ow, ref)
    assert_close(om, ow)


@pytest.mark.parametrize("window", [1, 40], ids=["w1", "w_gt_S"])
@pytest.mark.parametrize("S", [1, 17])
def test_window_edges_on_ascend(S, window):
    out, ref = ma.run(1, 2, 1, S, S, 32, causal=True, window=window, target="ascend910b", block_M=16, block_N=16)
    assert_close(out, ref)
    cpu, _ = ma.run(1, 2, 1, S, S, 32, causal=True, window=window, block_M=16, block_N=16)
    assert_close(out, cpu)
