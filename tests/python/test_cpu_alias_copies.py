"""The cpu target's alias_tile_copies pass (a same-dtype whole-tile copy read only while its source
is unchanged is dropped; the readers read the source) and the loop form of fuse_map_reduce, checked
in the generated C++ and against numpy in float64: where they fire (flash attention's score tile)
and where they must not (the source written before a reader, the copy written, a cast copy).
Fixed seeds; fp32 tolerances atol 1e-4 / rtol 1e-5 (sums of 8-32 products of N(0, 1) values)."""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import flash_attention as fa  # noqa: E402
from tw_test_util import unchecked_code_only


@unchecked_code_only
def test_flash_attention_reads_the_score_tile_in_place():
    src = fa.flash_attention(1, 2, 300, 64, True, block_M=128, block_N=128).get_source()
    assert "acc_s_cast" not in src  # no tile, no copy: the P V gemm reads acc_s
    assert "gemm acc_o += acc_s * V_shared" in src
    # the mask map with the row max, exp2 with the row sum: one pass each over the score tile
    assert "map into acc_s fused with reduce_max acc_s -> scores_max" in src
    assert "map into acc_s fused with reduce_sum acc_s -> scores_sum" in src
    assert "tw_cpu::simd::fold_max(" in src and "tw_cpu::simd::fold_sum(" in src
    # bf16: the copy is a cast, kept
    src16 = fa.flash_attention(1, 2, 300, 64, True, block_M=64, block_N=64, dtype="bfloat16").get_source()
    assert "copy acc_s -> acc_s_cast" in src16 and "gemm acc_o += acc_s_cast * V_shared" in src16


@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
@pytest.mark.parametrize("S,D,blocks", [(1, 64, (64, 64)), (17, 128, (128, 128)), (2047, 64, (128, 128)),
                                        (300, 128, (128, 64)), (130, 64, (64, 64))])
def test_flash_attention_fp32(S, D, blocks, causal):
    rng = np.random.default_rng(S + D)
    H = 1 if S > 1000 else 2
    q, k, v = (randn((1, H, S, D), "float32", seed=rng) for _ in range(3))
    out = fa.flash_attention(1, H, S, D, causal, block_M=blocks[0], block_N=blocks[1])(q, k, v)
    assert_close(out, fa.reference(q, k, v, causal), atol=2e-4, rtol=1e-5, msg=f"S={S} D={D} {blocks} causal={causal}")


def _bf16(x):  # round to nearest even bfloat16, back in float64
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).view(np.float32).astype(np.float64)


# A loop of steps: s = A_t @ B_t, then (what `between` does), then p = s (a copy), then the readers
# of p: O += p @ C_t and, with `map_reader`, R += p elementwise. The reference follows the same
# steps in float64.
def _kernel(between, map_reader=False, dtype_p="float32", write_p=False, target="cpu"):
    M, K, N, steps = 32, 16, 24, 3

    @tw.jit(out_idx=[3, 4])
    def k():
        @T.prim_func
        def main(A: T.Tensor((steps * M, K), "float32"), Bm: T.Tensor((steps * K, N), "float32"),
                 C: T.Tensor((steps * N, N), "float32"), O: T.Tensor((M, N), "float32"),
                 R: T.Tensor((M, N), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((M, K), "float32")
                b = T.alloc_shared((K, N), "float32")
                c = T.alloc_shared((N, N), dtype_p)
                s = T.alloc_fragment((M, N), "float32")
                p = T.alloc_fragment((M, N), dtype_p)
                o = T.alloc_fragment((M, N), "float32")
                r = T.alloc_fragment((M, N), "float32")
                T.fill(o, 0)
                T.fill(r, 0)
                for t in T.serial(steps):
                    T.copy(A[t * M:(t + 1) * M, :], a)
                    T.copy(Bm[t * K:(t + 1) * K, :], b)
                    T.gemm(a, b, s, clear_accum=True)
                    T.copy(s, p)
                    if between == "scale_source":
                        for i, j in T.Parallel(M, N):
                            s[i, j] = s[i, j] * 2.0
                    if write_p:
                        for i, j in T.Parallel(M, N):
                            p[i, j] = p[i, j] + 1.0
                    T.copy(C[t * N:(t + 1) * N, :], c)
                    T.gemm(p, c, o)
                    if map_reader:
                        for i, j in T.Parallel(M, N):
                            r[i, j] = r[i, j] + p[i, j] * s[i, j]
                T.copy(o, O)
                T.copy(r, R)
        return main

    rng = np.random.default_rng(7)
    A = rng.standard_normal((steps * M, K)).astype(np.float32)
    Bm = rng.standard_normal((steps * K, N)).astype(np.float32)
    C = rng.standard_normal((steps * N, N)).astype(np.float32)
    o = np.zeros((M, N)); r = np.zeros((M, N))
    for t in range(steps):
        s = A[t * M:(t + 1) * M].astype(np.float64) @ Bm[t * K:(t + 1) * K]
        p = s.copy()
        c = C[t * N:(t + 1) * N].astype(np.float64)
        if dtype_p == "bfloat16":  # p and c held in bfloat16
            p, c = _bf16(p), _bf16(c)
        if between == "scale_source":
            s = s * 2.0
        if write_p:
            p = p + 1.0
        o += p @ c
        if map_reader:
            r += p * s
    kern = k(target=target)  # (test_ascend_alias_copies.py: the same kernels on ascend910b)
    return kern, (A, Bm, C), (o, r)


@pytest.mark.parametrize("case", ["plain", "map_reader", "scale_source", "write_p", "bf16"])
def test_copy_aliased_only_when_sound(case):
    kw = dict(between="", map_reader=case in ("map_reader", "scale_source"))
    if case == "scale_source":
        kw["between"] = "scale_source"
    if case == "write_p":
        kw["write_p"] = True
    if case == "bf16":
        kw["dtype_p"] = "bfloat16"
    kern, args, (o_ref, r_ref) = _kernel(**kw)
    src = kern.get_source()
    fires = case in ("plain", "map_reader")
    assert ("copy s -> p" not in src) == fires, src
    assert (re.search(r"alignas\(64\) \S+ p\[", src) is None) == fires  # p's storage
    o, r = kern(*args)
    tol = dict(atol=1e-4, rtol=1e-5) if case != "bf16" else dict(atol=0.05, rtol=1e-2)
    assert_close(o, o_ref, msg=case, **tol)
    assert_close(r, r_ref, msg=case, **tol)
