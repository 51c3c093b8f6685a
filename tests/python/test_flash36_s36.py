"""Session 36 (h-flash36): on AVX2 the fp32 micro-kernels (ukr_f32's AVX2 loop and ukr_f32_ra, the
in-place-A kernel of flash attention's P V) request C's rows kCLateK = 16 k steps before their end
instead of at their start (tw_cpu/gemm_impl.h). A prefetch only, so no result may change; checked
here in a child process compiled for x86-64-v3 (AVX2 + FMA) against float64 (fixed seeds), at the
depths on both sides of the split: flash attention non-causal at S 129, D 80 in 128 x 128 blocks
(Q K^T: ukr_f32 over 80 k steps; P V: ukr_f32_ra over a full key block of 128 and a one-key tail,
where the prefetch comes first) and an fp32 matmul whose K walk is 12, 12, 8 (block_K 12: ukr_f32
below 16 steps). Two kernels only (the compiles are this file's time; test_attention_odd_s26 has
the other shapes).
The AVX-512 micro-kernels are unchanged (their object code is the same), so the native runs of
test_attention_odd_s26 and test_cpu_runtime's Gemm tests cover them.

Tolerances: flash attention atol 2e-4, rtol 1e-5 (test_attention_odd_s26's); the matmul 1e-5 of
the sum of |a b| (fp32 accumulation of K products)."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import randn
from tw_test_util import avx2_child_npz

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import flash_attention as fa  # noqa: E402
import gemm  # noqa: E402

FLASH = [(129, 80)]  # (S, D)
MATMUL = [(21, 19, 32, 12)]  # (M, N, K, block_K)


def flash_inputs(S, D):
    rng = np.random.default_rng(36 + S + D)
    return [randn((1, 2, S, D), "float32", seed=rng) for _ in range(3)]


def matmul_inputs(M, N, K):
    rng = np.random.default_rng(360 + K)
    return randn((M, K), "float32", seed=rng), randn((K, N), "float32", seed=rng)


def child_main(path):
    out = {}
    for S, D in FLASH:
        q, k, v = flash_inputs(S, D)
        out[f"flash_{S}_{D}"] = np.asarray(fa.flash_attention(1, 2, S, D, False, block_M=128, block_N=128)(q, k, v))
    for M, N, K, bk in MATMUL:
        a, b = matmul_inputs(M, N, K)
        kern = gemm.matmul(M, N, K, block_M=32, block_N=32, block_K=bk, dtype="float32")
        out[f"matmul_{M}_{N}_{K}_{bk}"] = np.asarray(kern(a, b))
    np.savez(path, **out)


@pytest.fixture(scope="module")
def avx2(tmp_path_factory):
    path = avx2_child_npz(tmp_path_factory.mktemp("flash36"), "test_flash36_s36")
    with np.load(path) as f:
        return {name: f[name] for name in f.files}


@pytest.mark.parametrize("S,D", FLASH)
def test_avx2_flash_attention_close_to_float64(avx2, S, D):
    q, k, v = flash_inputs(S, D)
    ref = fa.reference(q, k, v, False)
    y = avx2[f"flash_{S}_{D}"]
    assert y.shape == ref.shape and y.dtype == np.float32
    np.testing.assert_allclose(y, ref, atol=2e-4, rtol=1e-5)


@pytest.mark.parametrize("M,N,K,bk", MATMUL)
def test_avx2_matmul_close_to_float64(avx2, M, N, K, bk):
    a, b = matmul_inputs(M, N, K)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    y = avx2[f"matmul_{M}_{N}_{K}_{bk}"].astype(np.float64)
    assert y.shape == ref.shape
    assert np.all(np.abs(y - ref) <= 1e-5 * mag + 1e-30), np.max(np.abs(y - ref) / mag)
