"""Session 29 (h-decode): the small gemms' fold of 4 x 4 dot products (gemm_impl.h fold_4x4: Q K^T
in the cpu paged decode, `paged_decode_pages`, and any gemm_small call with B transposed and 4 rows
of A against 4 rows of B) keeps its order of summation. Session 29 measured a layout of the fold
with half the shuffles (a blend, one shuffle and an add a step; not kept: no faster,
docs/performance.md "Session 29: paged decode's V reads"); any such layout is bitwise equal to the
current one only while each step sums the same pairs of lanes, which this file pins, and a mix-up of
rows or columns in a new layout would show here too.

Checked: (1) a 4 x 16 x 16 fp32 product with B transposed (one kVF of k: each lane one rounded
product), bit for bit against the tree's order computed in numpy float32 on AVX-512 targets, and
against float64 (|err| <= 1e-5 sum |a b|) everywhere; (2) the decode at odd shapes against float64 as
tests/python/test_cpu_decode_s28.py states its tolerances (bf16 2^-7 max|V|, fp32 1e-5): the bench's
G 4 with D 128 (the 4 x 4 fold on every block) at page 17 with contexts 1 / 17 / 18 / 35, one page
used twice, bf16 and fp32. Run natively and with TW_CPU_ARCH=x86-64-v3 (no fold_4x4: fold_sum)."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import _C
from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import paged_attention as pa  # noqa: E402

TOL = {"bfloat16": 2.0 ** -7, "float32": 1e-5}


@tw.jit(out_idx=[2])
def dots(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as _:
            a = T.alloc_shared((M, K), "float32")
            b = T.alloc_shared((N, K), "float32")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, transpose_B=True, clear_accum=True)
            T.copy(c, C)

    return main


def tree_sum(p):
    """The fold's order over the last axis of 16 float32 lanes: lanes l and l + 8 first, then the
    sums 4 apart, 2 apart, 1 apart (fold_4x4's pairs), in float32."""
    t = p[..., :8] + p[..., 8:]
    v = t[..., :4] + t[..., 4:]
    w = v[..., :2] + v[..., 2:]
    return w[..., 0] + w[..., 1]


def test_fold_4x4_sums_the_same_pairs():
    M, N, K = 4, 16, 16
    rng = np.random.default_rng(29)
    a = rng.standard_normal((M, K), dtype=np.float32) * np.float32(3)
    b = rng.standard_normal((N, K), dtype=np.float32)
    b[5] *= np.float32(2.0 ** 20)  # one key far larger: a misplaced sum shows at once
    out = dots(M, N, K)(a, b)
    prod = a[:, None, :] * b[None, :, :]  # float32 products: fma(a, b, 0) rounds the same
    ref64 = a.astype(np.float64) @ b.astype(np.float64).T
    bound = 1e-5 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T)
    err = np.abs(out.astype(np.float64) - ref64)
    assert np.all(err <= bound), f"4 x 16 x 16 against float64: worst {np.max(err / bound)} of the bound"
    if "avx512f" in _C.target_cpu_features(_C.cpu_arch()).split():
        np.testing.assert_array_equal(out.view(np.uint32), tree_sum(prod).view(np.uint32),
                                      err_msg="fold_4x4 no longer sums the lanes in its order")


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_decode_bench_heads_at_odd_pages(dtype):
    nh, kvh, d, bs, lens = 8, 2, 128, 17, [1, 17, 18, 35]
    q, kc, vc, bt, cl = pa.make_inputs(len(lens), nh, kvh, d, bs, max(lens), dtype, seed=291, lens=lens)
    bt = bt.copy()
    bt[3, 1] = bt[3, 0]  # one page twice in a sequence, and also another sequence's first
    bt[2, 0] = bt[3, 0]
    kern = pa.paged_decode_pages(len(lens), nh, kvh, d, kc.shape[0], bs, bt.shape[1], dtype)
    out = kern(q, pa.page_view(kc), pa.page_view(vc), bt, cl)
    ref = pa.reference(q, kc, vc, bt, cl)
    scale = float(np.max(np.abs(vc.astype(np.float64))))
    assert_close(out.astype(np.float64), ref, atol=TOL[dtype] * scale, rtol=TOL[dtype],
                 msg=f"{dtype} heads {nh}/{kvh} D {d} page {bs} lens {lens}")
