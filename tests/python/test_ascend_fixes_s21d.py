"""Session 21 fixes of h-ascfix9d on the Ascend target (docs/ascend.md "Session 21: fuzz9 F2, hunt9b
F11 / F10 and markers"): an expert float32 K x N B loaded into L0B at any K (hunt9b F10), checked on
the simulator with the checker on against float64. fuzz9 F2's tests are in test_fuzz_findings_s21.py;
the Cast int32 -> half API rule in tw_tests (AscendSimApiRules)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET
from test_hunt_s21b import f32_mma_kernel as f32_mma


@pytest.mark.parametrize("M,N,K", [(16, 16, 8), (17, 24, 24), (3, 40, 40), (1, 8, 1), (16, 16, 16), (5, 9, 17)])
def test_expert_float32_kxn_b_in_l0b_at_any_k(M, N, K):
    """hunt9b F10: the L0B tile's rows (K) are planned rounded to 16, the rows the float32 K x N
    load (LoadData3DParamsV2, whole 16 x 16 fractals) writes: exact, no checker report, and the
    tile's size in the program is K rounded to 16 by N rounded to 16."""
    rng = np.random.default_rng(M * 100 + K)
    a = (rng.integers(-8, 9, (M, K)) / 4).astype(np.float32)
    b = (rng.integers(-8, 9, (K, N)) / 4).astype(np.float32)
    k = tw.compile(f32_mma(M, N, K), target=TARGET, out_idx=[-1])
    p = k.profile(a, b)
    assert p["reports"] == [], p["reports"]
    out = p.outputs[0] if isinstance(p.outputs, (list, tuple)) else p.outputs
    np.testing.assert_array_equal(np.asarray(out, np.float64), a.astype(np.float64) @ b.astype(np.float64))
    r16 = lambda x: -(-x // 16) * 16  # noqa: E731
    decl = [ln for ln in k.get_source("ascend_program").splitlines() if "buffer b0:" in ln]
    assert len(decl) == 1 and f"L0B @0 +{r16(K) * r16(N) * 4} float32" in decl[0], decl
