"""The automatic Ascend pipeline on the Cube examples: examples/gemm.py's matmul (explicit style) and
the seed's tile-loop matmul (examples/seed_matmul.py), each compiled from the same source for "cpu"
and for "ascend910b" (only the target differs), run (the Ascend one in the 910B simulator, with its
checker), and compared with a float64 numpy reference and with each other. Shapes are odd (no
dimension a multiple of its block) so every tile loop has a tail.

Tolerances: gemm.py's own (atol 1e-5 * K, rtol 2e-3 for 16-bit inputs, 1e-5 for fp32), for
bfloat16 the examples' bfloat16 tolerance (tw.testing.TOLERANCES: rounding the output to
bf16 alone is 2^-9 relative); the seed's (1e-6 * K + 1e-4 absolute, fp32). The CPU and the
simulated NPU must agree within the sum of their two allowances. Simulated results are a model's,
not measurements on an NPU. (Vector examples: test_ascend_auto_vector.py; Cube + Vector:
test_ascend_auto_mix.py.)"""
import os
import sys

import numpy as np
import pytest

import tilewright as tw

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import gemm  # noqa: E402
import seed_matmul as seed_matmul_example  # noqa: E402
from tilewright.testing import TOLERANCES, randn  # noqa: E402

TARGETS = ("cpu", "ascend910b")


def run(kernel, *inputs):
    """Runs the kernel; on the Ascend target first in the simulator with the checker, asserting it
    reports nothing, then through the ordinary call (which raises on reports)."""
    if kernel.target.startswith("ascend"):
        prof = kernel.profile(*inputs)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        assert prof["total_cycles"] > 0
    return np.asarray(kernel(*inputs)).astype(np.float64)


def allowance(ref, dtype, K):
    """|got - ref| allowed per element (gemm.py's tolerances; bf16: the examples' bf16 one)."""
    if dtype == "bfloat16":
        atol, rtol = TOLERANCES["bfloat16"]
        atol = max(atol, 1e-5 * K)
    else:
        atol, rtol = 1e-5 * K, (1e-5 if dtype == "float32" else 2e-3)
    return atol + rtol * np.abs(ref)


def check_both(results, ref, allow, what):
    for tgt, got in results.items():
        assert got.shape == ref.shape, f"{what} on {tgt}: shape {got.shape} != {ref.shape}"
        err = np.abs(got - ref)
        bad = ~(err <= allow)
        assert not bad.any(), (f"{what} on {tgt}: {int(bad.sum())} of {bad.size} elements off, "
                               f"max err {err.max():.3e}")
    cpu, npu = results["cpu"], results["ascend910b"]
    diff = np.abs(cpu - npu)
    assert np.all(diff <= 2 * allow), f"{what}: cpu and ascend910b differ by up to {diff.max():.3e}"


# ---------------------------------------------------------------------------------------------
# examples/gemm.py: T.Kernel / T.Pipelined / T.gemm, fp32 accumulation

GEMM_CASES = [  # (M, N, K, dtype, blocks)
    (200, 130, 100, "float32", {}),
    (200, 130, 100, "float16", {}),
    (200, 130, 100, "bfloat16", {}),
    (300, 260, 520, "float16", {}),
    (300, 260, 520, "float32", {}),
    (75, 90, 70, "float32", dict(block_M=64, block_N=64, block_K=32)),
    (75, 90, 70, "float16", dict(block_M=32, block_N=64, block_K=32, num_stages=3)),
]


@pytest.mark.parametrize("M,N,K,dtype,blocks", GEMM_CASES,
                         ids=[f"{m}x{n}x{k}-{d}{'-' + '-'.join(f'{v}' for v in b.values()) if b else ''}"
                              for m, n, k, d, b in GEMM_CASES])
def test_gemm_example(M, N, K, dtype, blocks):
    rng = np.random.default_rng(M * 7 + K)
    a = randn((M, K), dtype, seed=rng)
    b = randn((K, N), dtype, seed=rng)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    source = gemm.matmul.__wrapped__(M, N, K, dtype=dtype, **blocks)  # one prim_func for both targets
    results = {t: run(tw.compile(source, out_idx=[-1], target=t), a, b) for t in TARGETS}
    check_both(results, ref, allowance(ref, dtype, K), f"gemm {M}x{N}x{K} {dtype}")


def test_gemm_example_uses_the_cube():
    """The Ascend program of gemm.py is Cube-only: Mmad on the AIC, no vector code, and the fp32
    B tile reaches L0B through the transposing load (printed as Load3Dv2)."""
    k = tw.compile(gemm.matmul.__wrapped__(200, 130, 100, dtype="float32"), out_idx=[-1], target="ascend910b")
    prog = k.get_source("ascend_program")
    assert "AIC_ONLY" in prog.splitlines()[0], prog.splitlines()[0]
    assert "Mmad" in prog and "Fixpipe" in prog
    src = k.get_source("ascendc")
    assert "LoadData3DParamsV2<float>" in src
    assert "if ASCEND_IS_AIV" not in src


# ---------------------------------------------------------------------------------------------
# The seed's tile loops: output / accumulator / load / matmul / store in plain range() loops

def seed_matmul(M, N, K, dtype, target):
    """examples/seed_matmul.py's kernel (the article's blocks 128/128/64) for this dtype and target."""
    return seed_matmul_example.build(M, N, K, dtype=dtype, target=target)


SEED_CASES = [(200, 130, 100, "float32"), (257, 129, 200, "float32"), (200, 130, 100, "float16")]


@pytest.mark.parametrize("M,N,K,dtype", SEED_CASES, ids=[f"{m}x{n}x{k}-{d}" for m, n, k, d in SEED_CASES])
def test_seed_matmul(M, N, K, dtype):
    rng = np.random.default_rng(K)
    a = randn((M, K), dtype, seed=rng)
    b = randn((K, N), dtype, seed=rng)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    results = {t: run(seed_matmul(M, N, K, dtype, t), a, b) for t in TARGETS}
    if dtype == "float32":
        allow = np.full(ref.shape, 1e-6 * K + 1e-4)  # the seed's stated bound
    else:
        allow = allowance(ref, dtype, K)
    check_both(results, ref, allow, f"seed matmul {M}x{N}x{K} {dtype}")


def test_seed_matmul_finds_the_grid_on_ascend():
    """The tile loops become the launch grid (by, bx) and the serial K loop; on the NPU every
    output tile goes to an AI Core (4 tiles here: 2 x 2)."""
    k = seed_matmul(200, 130, 100, "float32", "ascend910b")
    assert "grid(" in k.get_ir("infer_grid")
    first = k.get_source("ascend_program").splitlines()[0]
    assert "blocks=4" in first, first


def int8_gemm_bt(M, N, K, block_M, block_N, block_K):
    """C (int32) = A (int8, M x K) @ B^T, B stored N x K (int8), explicit style, K loop."""
    import tilewright.language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((N, K), "int8"), C: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "int8")
            B_s = T.alloc_shared((block_N, block_K), "int8")
            C_l = T.alloc_fragment((block_M, block_N), "int32")
            T.clear(C_l)
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


# Found by the differential fuzzer (seed 100146): an int8 gemm with a K tile of 16 sized its L0B
# tile for K = 16 while the int8 fractal (C0 = 32) makes LoadL0 write K rounded up to 32 (checker:
# out of bounds). K steps are whole fractals now. Exact int32 results on both targets.
@pytest.mark.parametrize("M,N,K,bk", [(7, 65, 8, 16), (33, 40, 80, 16), (16, 32, 96, 32)])
def test_int8_gemm_with_short_k_tiles(M, N, K, bk):
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (N, K), dtype=np.int8)
    ref = a.astype(np.int64) @ b.astype(np.int64).T
    for tgt in TARGETS:
        k = tw.compile(int8_gemm_bt(M, N, K, 32, 64, bk), out_idx=[-1], target=tgt)
        got = run(k, a, b)
        assert np.array_equal(got, ref), f"int8 gemm {M}x{N}x{K} block_K {bk} on {tgt}"
