"""widen_scalars' relational bounds (session 30, h-widen2): in map_grid's grid-stride loop
`for t in range(ceildiv(nblocks - cid, block_dim))`, `blk = cid + t * block_dim` stays below
nblocks, so a row kernel over ceildiv(M, 8) blocks of an int32 row count M computes its row
arithmetic (`M - bx * 8`) in int32 in the printed AscendC again; ceildiv(M, 8) sums in int64 (M + 7
may leave int32) and is cast back (its quotient is <= 2^28); the GM offset `bx * 8 * N`, past 2^31
for a large input, stays int64. cpu == ascend910b (simulator, checker on) == numpy, with a tail
block (M = 13) and a single row (M = 1)."""
import re

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET, run_checked

N = 24


def rows_kernel():
    M = T.symbolic("M")

    @T.prim_func
    def rows(X: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            x = T.alloc_fragment((8, N), "int32")
            T.copy(X[bx * 8, 0], x)
            for i, j in T.Parallel(8, N):
                x[i, j] = x[i, j] * 3 - 7
            T.copy(x, Y[bx * 8, 0])

    return rows


@pytest.mark.parametrize("m", [13, 1])
def test_row_blocks_cpu_equals_ascend(m):
    x = np.random.default_rng(m).integers(-1000, 1000, (m, N)).astype(np.int32)
    ref = x.astype(np.int64) * 3 - 7
    got = {}
    for target in ("cpu", TARGET):
        k = tw.compile(rows_kernel(), out_idx=[1], target=target)
        got[target] = k(x) if target == "cpu" else run_checked(k, x)
        np.testing.assert_array_equal(got[target], ref.astype(np.int32), err_msg=target)
    src = k.get_source()
    assert "static_cast<int32_t>(((static_cast<int64_t>(M) + 8 - 1) / 8))" in src, src
    assert "static_cast<int64_t>(cid)" not in src and "static_cast<int64_t>(t)" not in src, src
    assert "(M - (bx * 8))" in src, src
    assert re.search(r"static_cast<int64_t>\(bx\) \* \d+\)", src), src  # the GM offset: int64
