"""Session 30, lead: checks added while merging the helpers' branches."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T


def _copy_rows():
    M = T.symbolic("M")
    K = T.symbolic("K")

    @T.prim_func
    def main(X: T.Tensor((M, K), "float32"), Y: T.Tensor((M, K), "float32")):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            x = T.alloc_fragment((8, 8), "float32")
            T.copy(X[bx * 8, 0], x)
            T.copy(x, Y[bx * 8, 0])

    return main


def test_shape_beyond_int32_is_refused_on_ascend():
    # widen2's finding: the printed AscendC holds a shape variable in int32
    # (static_cast<int32_t>(tw_tiling->M)) where the simulator holds int64; a dimension of 2^31
    # rows (K = 0: no memory) must be an error at the call, not a disagreement between the two.
    k = tw.compile(_copy_rows(), target="ascend910b", out_idx=[1])
    x = np.empty((2**31, 0), np.float32)
    with pytest.raises(tw.TilewrightError) as e:
        k(x)
    msg = str(e.value)
    assert "'M'" in msg and "2147483648" in msg and "2147483647" in msg and "split the call" in msg
    # within int32 the call binds (a small shape, run and checked)
    y = np.arange(13 * 8, dtype=np.float32).reshape(13, 8)
    np.testing.assert_array_equal(k(y), y)
