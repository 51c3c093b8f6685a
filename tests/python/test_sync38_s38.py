"""Session 38 (h-sync38, issues 13 / 16): insert_sync on long straight-line programs. Its colouring keeps
the reachability walks it asks again and again (src/target/ascend/insert_sync.cpp, reached()), so
T.unroll loops written out on ascend910b (unroll_loops) are synchronised up to kMaxUnrollCopies = 64 copies
(16 before). The output of the pass is unchanged (h-sync38 compared the AscendC of the ascend test files and
hunt36's MLP byte for byte, docs/performance.md "Session 38"); here the long kernels run in the simulator
with the checker on (a report fails) against float64 numpy, on inputs exact in fp16 / bf16."""
import os
import sys

import pytest

import tilewright as tw

sys.path.insert(0, os.path.dirname(__file__))
from ascend_util import TARGET, run_checked  # noqa: E402
from test_hunt36_s36 import _mlp_inputs, mlp_reference, mlp_unroll  # noqa: E402


@pytest.mark.parametrize("L, dt", [(20, "bfloat16"), (33, "float16")])
def test_mlp_written_out_past_the_old_cap(L, dt):
    """hunt36's MLP, T.unroll(L) written out (the loop form is refused): 2 (L - 1) Cube / vector hand-offs in
    one straight-line program, more flag pairs than a pipe pair has ids (shared in turn, relays coloured
    again); 37 rows: a tail block. Every hand-off, the ReLU and the last layer bitwise as float64 numpy."""
    M, D, bm = 37, 16, 16
    x, w = _mlp_inputs(L, M, D, dt)
    k = tw.compile(mlp_unroll(L, M, D, bm, dt), target=TARGET, out_idx=[-1])
    src = k.get_source()
    assert src.count("CrossCoreSetFlag") >= 2 * (L - 1), "every hand-off is its own flag"
    got = run_checked(k, x, w)
    tw.testing.assert_close(got, mlp_reference(x, w), atol=0, rtol=0, msg=f"L={L} {dt}")

