"""Session 31, the lead: an expert kernel's cross-core flag of mode 1 or 2 in a kernel that runs on one core type
is a compile error at the T.set_cross_flag line (h-audit31 F4: the device runs those modes only in kernels with both
a Cube and a Vector scope; mode 0 is the one-core-type form)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T


@tw.jit(target="ascend910b", out_idx=[-1])
def vector_only(mode):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            u = T.alloc_UB((32,), "float32")
            with T.Scope("V"):  # no vid: a Vector-only kernel, one AIV per block
                T.copy(X[cid * 32], u)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(u, Y[cid * 32])
                T.set_cross_flag(mode, "MTE3", 0)  # @SET
                T.wait_cross_flag(0)
    return main


@pytest.mark.parametrize("mode", [1, 2])
def test_paired_cross_flag_modes_need_both_scopes(mode):
    with pytest.raises(tw.TilewrightError) as e:
        vector_only(mode)(np.ones(64, np.float32))
    msg = str(e.value)
    line = [i for i, l in enumerate(open(__file__).read().splitlines(), 1) if "# @SET" in l][0]
    assert f"test_lead_s31.py:{line}:" in msg, msg
    assert f"T.set_cross_flag mode {mode} synchronises the units of one AI Core" in msg, msg
    assert "use mode 0" in msg, msg


def test_mode_0_runs():
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(vector_only(0)(x), x)
