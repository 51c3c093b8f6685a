"""Session 28 (h-decode17): the cpu paged decode (`paged_decode_pages`, examples/paged_attention.py)
at the odd shapes of issue 13's decode goal, against float64 attention over the gathered pages
(fixed seeds): a context of 1 token, page sizes 15 and 17 (one under and one over the bench's 16),
G = 7 query heads per kv head (the small-M gemms' 4-row group plus a 3-row one), head_dim 80 (a
K tail of 16 in Q K^T, a 16-column tail in P V), one page used twice in a sequence and by two
sequences, and bf16 caches holding subnormals and values near 2^100.

On an AVX512-BF16 build (-march=native on Zen 4) the bf16 gemms run `vdpbf16ps` on the bf16 pairs
in place (gemm_impl.h dp_small): each product of two bf16 is exact in fp32, each of a pair's two
additions into the fp32 accumulator rounded to nearest even, subnormal inputs and results read
and written as 0 (DAZ / FTZ; Intel SDM "VDPBF16PS"). Elsewhere (TW_CPU_ARCH=x86-64-v3) they widen
bf16 to fp32 and use FMAs. Run natively and with TW_CPU_ARCH=x86-64-v3: both must pass.

Tolerances (|out - ref| <= atol + rtol |ref|, ref float64): bf16 atol 2^-7 max|V|, rtol 2^-7: the
output's bf16 rounding (2^-9 relative) plus the probabilities rounded to bf16 before P V, as vLLM
does (its paged_attention converts the fp32 logits to the cache dtype, `from_float(logits_vec,
..)`, before the V products: each weight off by up to 2^-9 relative, so the sum by up to 2^-9
max|V|); fp32 atol 1e-5 max|V|, rtol 1e-5. Measured: docs/performance.md "Session 28"."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close, np_dtype, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import paged_attention as pa  # noqa: E402
from tw_test_util import unchecked_code_only

TOL = {"bfloat16": 2.0 ** -7, "float32": 1e-5}


def decode(q, kc, vc, bt, cl, dtype):
    ns, nh, d = q.shape
    kern = pa.paged_decode_pages(ns, nh, kc.shape[2], d, kc.shape[0], kc.shape[1], bt.shape[1], dtype)
    return kern(q, pa.page_view(kc), pa.page_view(vc), bt, cl)


def check(q, kc, vc, bt, cl, dtype, msg):
    out = decode(q, kc, vc, bt, cl, dtype)
    ref = pa.reference(q, kc, vc, bt, cl)
    scale = float(np.max(np.abs(vc.astype(np.float64))))
    assert_close(out.astype(np.float64), ref, atol=TOL[dtype] * scale, rtol=TOL[dtype], msg=msg)
    return out, ref


# (heads, kv heads, head_dim, block_size, context lengths): G 7 with D 80 and page 17; G 4 with the
# bench's D 128 and page 15; every case has a 1-token context and lengths at / past page edges
CASES = [(14, 2, 80, 17, [1, 17, 18, 52], "bfloat16"), (8, 2, 128, 15, [1, 15, 16, 46], "bfloat16"),
         (14, 2, 80, 17, [1, 17, 18, 52], "float32")]


@pytest.mark.parametrize("nh,kvh,d,bs,lens,dtype", CASES, ids=["bf16-G7-D80-page17", "bf16-G4-D128-page15",
                                                              "fp32-G7-D80-page17"])
def test_odd_shapes_against_float64(nh, kvh, d, bs, lens, dtype):
    q, kc, vc, bt, cl = pa.make_inputs(len(lens), nh, kvh, d, bs, max(lens), dtype, seed=28, lens=lens)
    bt = bt.copy()
    # one page twice in the longest sequence, and that page also the second sequence's first
    last = len(lens) - 1
    bt[last, 2] = bt[last, 0]
    bt[1, 0] = bt[last, 0]
    check(q, kc, vc, bt, cl, dtype, f"{dtype} heads {nh}/{kvh} D {d} page {bs} lens {lens}")


def test_bf16_subnormal_and_large_values():
    # bf16 subnormals (2^-130 .. 2^-127) in Q and K: vdpbf16ps reads them as 0 (DAZ); their products
    # (< 2^-120) are far below the scores' rounding, so float64's result agrees within the tolerance.
    # V near 2^100 (P V sums up to 2^104: within fp32, no overflow), and one key per sequence 2^6
    # larger than the rest (a score ~100x the others': the softmax puts ~all weight on it)
    nh, kvh, d, bs, lens = 8, 2, 128, 16, [1, 17, 40]
    bf = np_dtype("bfloat16")
    q, kc, vc, bt, cl = pa.make_inputs(3, nh, kvh, d, bs, 40, "bfloat16", seed=29, lens=lens)
    rng = np.random.default_rng(30)
    tiny = (rng.choice([-1.0, 1.0], size=kc.shape) * 2.0 ** rng.integers(-130, -126, size=kc.shape)).astype(bf)
    kc = np.where(rng.random(kc.shape) < 0.25, tiny, kc).astype(bf)
    q = np.where(rng.random(q.shape) < 0.25, tiny.reshape(-1)[:q.size].reshape(q.shape), q).astype(bf)
    vc = (vc.astype(np.float32) * 2.0 ** 100).astype(bf)
    kc[bt[2, 1], 3] = (kc[bt[2, 1], 3].astype(np.float32) * 64).astype(bf)  # token 19 of sequence 2
    assert np.any((np.abs(kc.astype(np.float32)) < 2.0 ** -126) & (kc.astype(np.float32) != 0))
    out, ref = check(q, kc, vc, bt, cl, "bfloat16", "bf16 subnormal K / Q, V ~2^100")
    assert np.isfinite(out.astype(np.float32)).all()
    assert np.max(np.abs(ref)) > 2.0 ** 98


def test_vdpbf16ps_semantics_in_the_decode():
    # the numerics stated above, on the kernel itself: Q and K all subnormal except one pair
    # (2^-70 * 2^-70 = 2^-140: below fp32's normal range, flushed to 0 by vdpbf16ps; an FMA keeps it as
    # a subnormal), so every score is 0 or 2^-140 * scale: either way the softmax is uniform over the
    # context to within 2^-100, and the output is the mean of V's rows (what both builds must give)
    nh, kvh, d, bs, lens = 4, 1, 32, 16, [5]
    bf = np_dtype("bfloat16")
    q, kc, vc, bt, cl = pa.make_inputs(1, nh, kvh, d, bs, 5, "bfloat16", seed=31, lens=lens)
    q = np.full(q.shape, 2.0 ** -130, np.float32).astype(bf)
    kc = np.full(kc.shape, -(2.0 ** -128), np.float32).astype(bf)
    q[0, 0, 0] = np.float32(2.0 ** -70).astype(bf)
    kc[bt[0, 0], 0, 0, 0] = np.float32(2.0 ** -70).astype(bf)
    out = decode(q, kc, vc, bt, cl, "bfloat16").astype(np.float64)
    mean = vc[bt[0, 0], :5, 0].astype(np.float64).mean(axis=0)
    assert_close(out[0], np.broadcast_to(mean, out[0].shape), atol=TOL["bfloat16"] * float(np.max(np.abs(mean))),
                 rtol=TOL["bfloat16"])


@unchecked_code_only
def test_bench_deletion_probes():
    # bench/paged_decode_ab.py's @-qk / @-pv / @-passes / @-next variants (the breakdown of
    # docs/performance.md "Session 28"): each is the generated kernel less one part, and compiles
    import shutil
    import subprocess
    sys.path.insert(0, str(ROOT / "bench"))
    import paged_decode_ab as ab
    for dtype in ("bfloat16", "float32"):
        src = ab.kernel_source(dtype)
        assert src.count("tw_cpu::gemm(") == 2
        probes = {w: ab.strip(src, w) for w in ("qk", "pv", "passes", "next")}
        assert probes["qk"].count("tw_cpu::gemm(4, 16, 128,") == 0 and probes["qk"].count("tw_cpu::gemm(") == 1
        assert probes["pv"].count("tw_cpu::gemm(4, 128, 16,") == 0 and probes["pv"].count("tw_cpu::gemm(") == 1
        assert "exp2_chunk" in src and "exp2_chunk" not in probes["passes"] and probes["passes"].count("tw_cpu::gemm(") == 2
        assert probes["next"].count("(decltype(K))nullptr") == 2 and "k_nx + " not in probes["next"]
        if dtype == "bfloat16" and shutil.which("g++"):
            for w, text in probes.items():
                r = subprocess.run(["g++", "-std=c++20", "-fsyntax-only", f"-I{ROOT / 'src/target/cpu/include'}", "-x",
                                    "c++", "-"], input=text, capture_output=True, text=True)
                assert r.returncode == 0, (w, r.stderr[-2000:])
