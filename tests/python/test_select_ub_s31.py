"""Session 31 rule audit (h-audit31): AscendC's Select in VSEL_TENSOR_TENSOR_MODE /
VSEL_TENSOR_SCALAR_MODE keeps a temporary in UB at byte 188416 (184 KiB) on dav-c220 (Select.md
reserves 8 KB; docs/ascend.md "Enforced API rules"). A T.where on tile data becomes Compare + Select,
so a kernel whose tiles would fill the UB past 184 KiB is planned below it: its UB buffers (the
AscendC source's `UB @offset +bytes` comments) end at or before 188416, the simulator (with the
checker: its API rule reports a Select while a UB buffer lies there) finds nothing, and the result
matches numpy."""
import os
import re
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ascend_util import TARGET  # noqa: E402

SELECT_TMP = 184 * 1024


def test_where_on_tile_data_keeps_the_select_temporary_free():
    # three 16 x 1000 float32 tiles (x, y and the select's result) = 192000 B: more than 184 KiB,
    # less than the 196352 B the UB holds otherwise (before session 31 they were planned up to byte
    # 192000 and the Select's temporary overwrote one); now the rows run in groups
    R, N = 16, 1000

    @T.prim_func
    def k(X: T.Tensor((R, N), "float32"), Y: T.Tensor((R, N), "float32"), Z: T.Tensor((R, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, N), "float32")
            y = T.alloc_fragment((R, N), "float32")
            T.copy(X[0, 0], x)
            T.copy(Y[0, 0], y)
            for i, j in T.Parallel(R, N):
                x[i, j] = T.where(x[i, j] > y[i, j], x[i, j], y[i, j] - 1.0)
            T.copy(x, Z[0, 0])

    kern = tw.compile(k, out_idx=[-1], target=TARGET)
    src = kern.get_kernel_source()
    ubs = [(int(a), int(b)) for a, b in re.findall(r"// UB @(\d+) \+(\d+)", src)]
    assert ubs and "Select(" in src, src[:2000]
    assert max(a + b for a, b in ubs) <= SELECT_TMP, ubs
    assert any("188416 B available" in n for n in kern.notes), kern.notes
    rng = np.random.default_rng(31)
    x = rng.standard_normal((R, N)).astype(np.float32)
    y = rng.standard_normal((R, N)).astype(np.float32)
    prof = kern.profile(x, y)
    assert prof["reports"] == [], "\n".join(prof["reports"])
    np.testing.assert_array_equal(prof.outputs, np.where(x > y, x, y - np.float32(1.0)))
