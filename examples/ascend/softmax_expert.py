"""Row softmax in Ascend expert mode, Vector cores only:
Y[i, :] = exp(X[i, :] - max_j X[i, j]) / sum_j exp(X[i, j] - max_j X[i, j]), fp32.

Each block (AI Core) runs its two Vector cores (AIV, sub-block `vid` 0 and 1); AIV number
g = cid * 2 + vid handles the row blocks g, g + 2 * blocks, ... of block_M rows each. A whole row
block (block_M x N) sits in one UB tile, so N is limited by the UB (192 KiB per AIV).

Per row block (all on one AIV; V instructions that depend on each other need PipeBarrier<V>):
  MTE2  copy GM -> UB (x)                      rows beyond M (the tail block) read as zeros
  V     reduce max per row  -> mx
  V     x = x - mx (row broadcast)
  V     x = exp(x)
  V     reduce sum per row  -> sm
  V     x = x / sm (row broadcast)
  MTE3  copy UB -> GM (Y)                      rows beyond M are not written
Column tail: the tile is N columns wide; its rows are stored 32 B apart (N rounded up to 8
fp32 columns) and every vector instruction works on the N valid columns of each row, so the
row padding takes no part in the max or the sum. N must be at least 2: a tile of one column
stores each element in its own 32 B block, which the row broadcast of the per-row max cannot
read as one vector instruction (a clear compile error says so).

Flags (event ids per pipe pair):
  MTE2 -> V, 0    "the row block has arrived in x"
  V -> MTE3, 0    "x holds the result"
  MTE3 -> MTE2, 0 "x has been written out; the next copy may overwrite it"
The loop-carried flags are set once before the loop and waited once after it, so sets and
waits match.

Usage: python examples/ascend/softmax_expert.py [M N]   (runs in the 910B simulator)
"""
import os
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tilewright.testing import finish, randn, report  # noqa: E402

UB_BUDGET = 160 * 1024   # bytes of the 192 KiB UB given to the row tile


def softmax_kernel(M, N, block_M=None, core_num=24):
    Np = (N + 7) // 8 * 8           # fp32 rows are stored 32 B apart in UB
    if block_M is None:
        block_M = max(1, min(16, UB_BUDGET // (Np * 4)))
    row_blocks = T.ceildiv(M, block_M)
    cores = max(1, min(core_num, T.ceildiv(row_blocks, 2)))
    aivs = 2 * cores

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(cores, is_npu=True) as (cid, vid):
            x = T.alloc_UB((block_M, N), "float32")
            mx = T.alloc_UB((block_M,), "float32")
            sm = T.alloc_UB((block_M,), "float32")

            with T.Scope("V"):
                g = cid * 2 + vid
                T.set_flag("MTE3", "MTE2", 0)
                for t in T.serial(T.ceildiv(row_blocks - g, aivs)):
                    row = (g + t * aivs) * block_M
                    T.wait_flag("MTE3", "MTE2", 0)
                    T.copy(X[row, 0], x)
                    T.set_flag("MTE2", "V", 0)
                    T.wait_flag("MTE2", "V", 0)
                    T.reduce_max(x, mx, dim=1)
                    T.pipe_barrier("V")
                    T.sub(x, x, mx[:, None])
                    T.pipe_barrier("V")
                    T.exp(x, x)
                    T.pipe_barrier("V")
                    T.reduce_sum(x, sm, dim=1)
                    T.pipe_barrier("V")
                    T.div(x, x, sm[:, None])
                    T.set_flag("V", "MTE3", 0)
                    T.wait_flag("V", "MTE3", 0)
                    T.copy(x, Y[row, 0])
                    T.set_flag("MTE3", "MTE2", 0)
                T.wait_flag("MTE3", "MTE2", 0)

    return main


softmax = tw.jit(out_idx=[-1], target="ascend910b")(softmax_kernel)


def reference(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def check(M, N):
    rng = np.random.default_rng(0)
    x = randn((M, N), "float32", scale=3.0, seed=rng)
    y = softmax(M, N)(x)
    return report(f"softmax_expert {M}x{N} float32", y, reference(x), atol=1e-6, rtol=1e-5)


def main(argv):
    M, N = (int(x) for x in argv[:2]) if len(argv) >= 2 else (1000, 1027)
    finish(all([check(M, N), check(37, 64), check(5, 2)]))


if __name__ == "__main__":
    main(sys.argv[1:])
