"""The capacity error's smaller tiles keep the kernel's relations (hunt13 F3; h-hints14, docs/ascend.md
"Session 26: capacity hints that fit together (h-hints14)").

An L1 / UB / L0C overflow on ascend910b proposes smaller tiles: dims a gemm (M, K, N), a map's index or
a copy ties shrink together, dims taken whole from a tensor (a head dim) last. Each test compiles an
overflowing kernel, reads the hint's shapes, applies them to the kernel's block sizes (the test maps
tile dims to the factory's arguments), and runs the kernel so configured: it must compile and match
float64 (TOLERANCES), the simulator's checker on.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
from tilewright.testing import TOLERANCES, assert_close, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import load_example  # noqa: E402

gemm = load_example("gemm")
fa = load_example("flash_attention")
pa = load_example("paged_attention")


def _hint(build):
    """The capacity error of build() and its proposed shapes {tile: (dims)}."""
    with pytest.raises(tw.TilewrightError) as e:
        build()
    hint = e.value.hint or ""
    assert "overflow" in e.value.message, e.value.message
    m = re.match(r"a smaller tile that fits: (.*?) \(\d+ B\)", hint)
    assert m, hint
    shapes = {}
    for part in m.group(1).split(", "):
        name, shape = part.rsplit(" ", 1)
        shapes[name] = tuple(int(x) for x in shape.split("x"))
    return e.value.message, hint, shapes


def _close(got, ref, dtype, what, atol=None):
    a, r = TOLERANCES[dtype]
    assert_close(np.asarray(got, np.float64), ref, atol=a if atol is None else atol, rtol=r, msg=what)


def test_paged_decode_hint_is_fewer_keys_per_step():
    """hunt13 F3: paged_decode at Gemma's head dim 256, 128-slot pages, 4 pages per step overflows L1 (q, k, v, p);
    the hint halves the keys per step in k, v and p together (q's rows are the GQA group, its columns the head
    dim: kept); applied (pages_per_step = k's rows / 128) it runs."""
    args = (3, 8, 1, 256, 30, 128, 3, "float16")
    msg, hint, sh = _hint(lambda: pa.paged_decode(*args, 4, target=TARGET))
    assert msg.startswith("L1 overflow"), msg
    assert sh["p"][1] == sh["v"][0] == sh["k"][0] < 512, hint
    assert sh["q"] == (8, 256) and sh["k"][1] == sh["v"][1] == 256, hint
    assert "512 -> 256" in hint, hint
    pps = sh["k"][0] // 128
    q, kc, vc, bt, cl = pa.make_inputs(3, 8, 1, 256, 128, 255, "float16", seed=17, lens=[1, 255, 129])
    k = pa.paged_decode(3, 8, 1, 256, kc.shape[0], 128, bt.shape[1], "float16", pps, target=TARGET)
    _close(run_checked(k, q, kc, vc, bt, cl), pa.reference(q, kc, vc, bt, cl), "float16", f"paged_decode pps {pps}")


@pytest.mark.parametrize("blocks,stages", [
    ((128, 256, 1024), 3),   # A 128x1024 and B 1024x256 float16: 768 KiB of L1 with one stage
    ((256, 512, 256), 2),    # C 256x512 float32: twice L0C
])
def test_gemm_hint_applied_runs(blocks, stages):
    """examples/gemm.py's matmul with blocks too large: the hint's A_shared (block_M, block_K) and B_shared
    (block_K, block_N) agree on block_K; applied, the gemm compiles and is right."""
    M, N, K = 512, 512, 1024
    bm, bn, bk = blocks
    msg, hint, sh = _hint(lambda: gemm.matmul(M, N, K, bm, bn, bk, "float16", num_stages=stages, target=TARGET))
    new = dict(block_M=bm, block_N=bn, block_K=bk)
    if "A_shared" in sh:
        new["block_M"], new["block_K"] = sh["A_shared"]
    if "B_shared" in sh:
        assert sh["B_shared"][0] == new["block_K"], hint
        new["block_K"], new["block_N"] = sh["B_shared"]
    if "C_local" in sh:
        new["block_M"], new["block_N"] = sh["C_local"]
    assert new != dict(block_M=bm, block_N=bn, block_K=bk), hint
    rng = np.random.default_rng(3)
    a, b = randn((M, K), "float16", seed=rng), randn((K, N), "float16", seed=rng)
    k = gemm.matmul(M, N, K, new["block_M"], new["block_N"], new["block_K"], "float16", num_stages=stages,
                    target=TARGET)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    _close(run_checked(k, a, b), ref, "float16", f"matmul {new} ({hint})", atol=2e-2)


@pytest.mark.parametrize("D,block", [(512, 128), (256, 256)])
def test_flash_attention_hint_applied_runs(D, block):
    """examples/flash_attention.py at a large head dim / block size: the hint keeps the head dim (taken whole
    from Q, K, V) and shrinks block_M / block_N consistently; applied, the kernel runs and matches float64."""
    B, H, S = 1, 1, 300
    msg, hint, sh = _hint(lambda: fa.flash_attention(B, H, S, D, False, block, block, "float16", target=TARGET))
    bm, bn = block, block
    for name, shape in sh.items():
        if name in ("Q_shared", "acc_o"):
            bm = shape[0]
            assert shape[1] == D, hint
        elif name in ("K_shared", "V_shared"):
            bn = shape[0]
            assert shape[1] == D, hint
        elif name in ("acc_s", "acc_s_cast"):
            bm, bn = shape
    assert (bm, bn) != (block, block), hint
    rng = np.random.default_rng(6)
    q, k, v = (randn((B, H, S, D), "float16", seed=rng) for _ in range(3))
    kern = fa.flash_attention(B, H, S, D, False, bm, bn, "float16", target=TARGET)
    _close(run_checked(kern, q, k, v), fa.reference(q, k, v, False), "float16", f"flash D {D} blocks {bm}x{bn} ({hint})")
