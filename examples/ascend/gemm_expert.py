"""GEMM in Ascend expert mode (tilelang-ascend style): C = A @ B, fp16 (or bf16) inputs, fp32
accumulation in L0C, output in the input dtype.

Everything is explicit: the buffers of each memory (L1, L0A, L0B, L0C), the data paths
(GM -> L1 -> L0A/L0B -> Mmad -> L0C -> GM) and every flag between the pipes. The kernel runs on
`core_num` Cube cores; each loops over the output tiles cid, cid + core_num, ... For each tile it
streams K through L1 in chunks of K_L1 and through L0 in steps of K_L0.

Both levels are double-buffered, and the buffers are counted across tiles (chunk number
g = t * k_chunks + k of the core's whole run, L1 half g % 2; L0 step number g * steps + kk, L0 half
(g * steps + kk) % 2), so every pipe runs ahead into the next tile too:
  L1 ping-pong: MTE2 loads chunk g + 1 into L1 half 1 - p while MTE1 feeds the Cube from half p;
  L0 ping-pong: MTE1 loads L0 half 1 - s while Mmad multiplies half s.
The only stall between tiles is L0C (one 128 x 256 fp32 accumulator fills all 128 KiB): the
next tile's first Mmad waits until Fixpipe has written this tile out.

Tails (M, N, K not multiples of the tiles) are handled by the copies: GM -> L1 zero-fills beyond
the tensor, L0C -> GM writes only the valid part.

Flags (event ids per pipe pair; every loop-carried flag is set once before the loop and waited
once after it, so sets and waits pair exactly):
  MTE1 -> MTE2, id p  "L1 half p is free: MTE1 has finished loading from it"  (primed for p = 0, 1)
  MTE2 -> MTE1, id p  "L1 half p holds chunk g"
  M -> MTE1, id s     "L0 half s is free: the Mmad that read it has finished"  (primed for s = 0, 1)
  MTE1 -> M, id s     "L0 half s is loaded"
  M -> FIX, 0         "the tile's accumulation is complete"
  FIX -> M, 0         "L0C has been written out; the next tile's first Mmad may clear it"  (primed)

Tiles (defaults, fp16): block_M x block_N = 128 x 256 (GM traffic (m + n) * 2 B per m * n / 256
MACs: 96 B/cycle per core at full Cube rate, under the 110 B/cycle of MTE2), K_L1 = 256
(L1: 2 x (64 + 128) KiB = 384 KiB of 512), K_L0 = 64 (L0A 2 x 16 KiB, L0B 2 x 32 KiB).
No fp32 variant: B (K x N) reaches L0B through a transposing L1 -> L0B load, which LoadData 2D
only does for 16-bit types (expert mode reports it at the copy).

Usage: python examples/ascend/gemm_expert.py [M N K]   (runs in the 910B simulator)
"""
import os
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tilewright.testing import finish, randn, report  # noqa: E402


def gemm_kernel(M, N, K, block_M=128, block_N=256, K_L1=256, K_L0=64, core_num=24,
                dtype="float16", accum_dtype="float32"):
    assert K_L1 % K_L0 == 0, "K_L1 must be a multiple of K_L0"
    m_num = T.ceildiv(M, block_M)
    n_num = T.ceildiv(N, block_N)
    tiles = m_num * n_num
    cores = min(core_num, tiles)
    k_chunks = T.ceildiv(K, K_L1)
    steps = K_L1 // K_L0

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(cores, is_npu=True) as (cid, vid):
            A_L1 = T.alloc_L1((2, block_M, K_L1), dtype)
            B_L1 = T.alloc_L1((2, K_L1, block_N), dtype)
            A_L0 = T.alloc_L0A((2, block_M, K_L0), dtype)
            B_L0 = T.alloc_L0B((2, K_L0, block_N), dtype)
            C_L0 = T.alloc_L0C((block_M, block_N), accum_dtype)

            with T.Scope("C"):
                T.set_flag("MTE1", "MTE2", 0)
                T.set_flag("MTE1", "MTE2", 1)
                T.set_flag("M", "MTE1", 0)
                T.set_flag("M", "MTE1", 1)
                T.set_flag("FIX", "M", 0)
                for t in T.serial(T.ceildiv(tiles - cid, cores)):
                    tile = cid + t * cores
                    bx = tile // n_num
                    by = tile % n_num
                    for k in T.serial(k_chunks):
                        g = t * k_chunks + k
                        p = g % 2
                        T.wait_flag("MTE1", "MTE2", p)                  # L1 half p is free
                        T.copy(A[bx * block_M, k * K_L1], A_L1[p, :, :])
                        T.copy(B[k * K_L1, by * block_N], B_L1[p, :, :])
                        T.set_flag("MTE2", "MTE1", p)
                        T.wait_flag("MTE2", "MTE1", p)                  # chunk g has arrived
                        for kk in T.serial(steps):
                            s = (g * steps + kk) % 2
                            T.wait_flag("M", "MTE1", s)                 # L0 half s is free
                            T.copy(A_L1[p, 0:block_M, kk * K_L0:(kk + 1) * K_L0], A_L0[s, :, :])
                            T.copy(B_L1[p, kk * K_L0:(kk + 1) * K_L0, 0:block_N], B_L0[s, :, :])
                            T.set_flag("MTE1", "M", s)
                            T.wait_flag("MTE1", "M", s)                 # L0 half s is loaded
                            if k == 0 and kk == 0:
                                T.wait_flag("FIX", "M", 0)              # the previous tile has left L0C
                            T.mma(A_L0[s, :, :], B_L0[s, :, :], C_L0, init=(k == 0 and kk == 0))
                            T.set_flag("M", "MTE1", s)
                        T.set_flag("MTE1", "MTE2", p)
                    T.set_flag("M", "FIX", 0)
                    T.wait_flag("M", "FIX", 0)                          # the accumulation is complete
                    T.copy(C_L0, C[bx * block_M, by * block_N])
                    T.set_flag("FIX", "M", 0)
                T.wait_flag("MTE1", "MTE2", 0)
                T.wait_flag("MTE1", "MTE2", 1)
                T.wait_flag("M", "MTE1", 0)
                T.wait_flag("M", "MTE1", 1)
                T.wait_flag("FIX", "M", 0)

    return main


matmul = tw.jit(out_idx=[-1], target="ascend910b")(gemm_kernel)


def check(M, N, K, dtype="float16"):
    rng = np.random.default_rng(0)
    a = randn((M, K), dtype, seed=rng)
    b = randn((K, N), dtype, seed=rng)
    c = matmul(M, N, K, dtype=dtype)(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if dtype == "float16":
        return report(f"gemm_expert {M}x{N}x{K} float16", c, ref, atol=1e-5 * K, rtol=2e-3)
    return report(f"gemm_expert {M}x{N}x{K} {dtype}", c, ref)


def main(argv):
    M, N, K = (int(x) for x in argv[:3]) if len(argv) >= 3 else (1000, 777, 513)
    finish(all([check(M, N, K), check(M, N, K, "bfloat16")]))


if __name__ == "__main__":
    main(sys.argv[1:])
