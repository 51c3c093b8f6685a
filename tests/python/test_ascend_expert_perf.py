"""The expert reference kernels of issue 5 (examples/ascend/gemm_expert.py with L1 and L0
ping-pong, examples/ascend/flash_attention_expert.py, MIX 1:2): right results against float64
numpy with zero checker reports at small odd shapes, and *simulated* throughput floors at mid
sizes. Simulated time is deterministic (a model's figure, not a wall-clock measurement), so a
floor catches a change that breaks the kernels' overlap; the floors sit just under the measured
values (docs/ascend.md, "Expert reference kernels")."""
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples", "ascend")

from tw_test_util import load_example  # noqa: E402
PEAK_910B2 = 353.9   # TFLOP/s fp16


def example(name):
    return load_example("ascend/" + name, name)


@pytest.fixture(scope="module")
def gemm():
    return example("gemm_expert")


@pytest.fixture(scope="module")
def fa():
    return example("flash_attention_expert")


def within(got, ref, atol, rtol):
    got = np.asarray(got).astype(np.float64)
    return got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= atol + rtol * np.abs(ref)))


@pytest.mark.parametrize("M,N,K,kw", [
    (1000, 777, 513, {}),
    (300, 520, 1100, {"core_num": 2}),        # 6 tiles on 2 cores: L1/L0 halves carried across tiles
    (65, 97, 130, {"dtype": "bfloat16"}),
])
def test_gemm_expert_results(gemm, M, N, K, kw):
    rng = np.random.default_rng(0)
    dt = kw.get("dtype", "float16")
    a = gemm.randn((M, K), dt, seed=rng)
    b = gemm.randn((K, N), dt, seed=rng)
    p = gemm.matmul(M, N, K, **kw).profile(a, b)
    assert p["reports"] == []
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = (1e-5 * K, 2e-3) if dt == "float16" else (2e-2, 1.6e-2)
    assert within(p.outputs, ref, *tol)


@pytest.mark.parametrize("B,H,S,D,causal,core_num", [
    (1, 2, 300, 128, False, 24),     # key tail 44 (not a multiple of 16), query tail
    (1, 2, 300, 64, True, 24),
    (1, 1, 512, 128, True, 24),      # whole blocks; diagonal offsets 0 and 128
    (2, 1, 520, 64, False, 3),       # tail of 8 keys; 10 tasks on 3 blocks: slots reused across tasks
    (1, 3, 130, 64, True, 2),
])
def test_flash_attention_expert_results(fa, B, H, S, D, causal, core_num):
    args = fa.inputs(B, H, S, D, core_num=core_num)
    p = fa.flash_attention(B, H, S, D, causal=causal, core_num=core_num).profile(*args)
    assert p["reports"] == []
    assert p["kernel_type"] == "MIX_1_2"
    assert within(p.outputs, fa.reference(*args[:3], causal=causal), 2e-3, 2e-3)


def test_gemm_expert_simulated_utilisation(gemm, capsys):
    """2048^3 fp16: 62.8% measured (6 rounds of 128 x 256 tiles for 5.33 per core); 4096^3: 79.8%.
    (80.0% / 92.0% before select_move_calls, when the model counted each L1 -> L0 move as one MTE1
    instruction; 67.9% / 75.9% with one LoadData per fractal row, 12 per K step; 72.5% / 81.5% with
    8 per K step, the fewest the Nz -> Zz / Zn layouts allow: A one call per fractal column (4), B
    one per fractal row (4) -- with the assumed 32-entry pipe queue the scalar unit still stalls on
    MTE1; now with the calibrated kernel start of issue 16 (a 10 us launch is ~13% of the 2048^3
    kernel's 77 us). The floors keep margins of about 2 points under the measured.)"""
    figs = {}
    for n, floor in ((2048, 0.61), (4096, 0.78)):
        a = np.zeros((n, n), np.float16)
        p = gemm.matmul(n, n, n).profile(a, a, functional=False, check=False)
        figs[n] = p
        assert p["cube_utilisation"] >= floor, (n, p["summary"])
    with capsys.disabled():
        print("\n" + "\n".join(f"[gemm_expert sim] {n}^3 fp16: {p['tflops']:.1f} TFLOP/s, Cube "
                               f"{100 * p['cube_utilisation']:.1f}%" for n, p in figs.items()))


def test_flash_attention_expert_simulated_throughput(fa, capsys):
    """B=1 H=16 D=128 fp16 non-causal, timing only: S=2048 35.7% of peak measured, S=8192 42.3%
    (issue 5's goal: >= 35% at S=8192). 37.2% at S=2048 before the calibrated kernel start (issue
    16: the 10 us launch is ~5% of that kernel's time); its floor keeps its 1.2-point margin."""
    lines = []
    for S, floor in ((2048, 0.345), (8192, 0.40)):
        B, H, D = 1, 16, 128
        args = [np.zeros((B, H, S, D), np.float16)] * 3 + [fa.mask_tensor(S), *fa.workspaces(B, H, S, D)]
        p = fa.flash_attention(B, H, S, D).profile(*args, functional=False, check=False)
        tflops = 4 * B * H * S * S * D / (p["time_us"] * 1e-6) / 1e12
        assert tflops / PEAK_910B2 >= floor, (S, p["summary"])
        lines.append(f"[flash_attention_expert sim] B=1 H=16 S={S} D=128: {tflops:.1f} TFLOP/s = "
                     f"{100 * tflops / PEAK_910B2:.1f}% of peak")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
