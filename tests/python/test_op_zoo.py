"""Every kernel of bench/op_zoo.py runs once on small odd shapes and matches its float64 numpy
reference within the op's stated tolerance (correctness only: no timing)."""
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import op_zoo  # noqa: E402


@pytest.mark.parametrize("name", list(op_zoo.OPS))
def test_op_zoo_kernel_matches_numpy(name):
    make, small, _ = op_zoo.OPS[name]
    case = make(small, np.random.default_rng(1))
    ok, worst = op_zoo.check(name, case)
    assert ok, f"{name} {small}: worst error {worst:.3g} x the tolerance (atol {case.atol}, rtol {case.rtol})"


# The ops whose kernel, written for cpu, does not yet run unchanged on ascend910b, with the
# construct the Ascend lowering lacks (issue 13). The test fails when one of them starts to run
# (remove it here) or when another op stops running (a portability regression).
ASCEND_UNPORTED = {
}


@pytest.mark.parametrize("name", list(op_zoo.OPS))
def test_op_zoo_kernel_unchanged_on_ascend(name, monkeypatch):
    from tilewright import TilewrightError
    monkeypatch.setattr(op_zoo, "TARGET", "ascend910b")
    make, small, _ = op_zoo.OPS[name]
    if name in ASCEND_UNPORTED:
        with pytest.raises(TilewrightError, match=r"op_zoo\.py:\d+:\d+: error"):
            make(small, np.random.default_rng(1))
        return
    case = make(small, np.random.default_rng(1))
    assert case.kernel.target.startswith("ascend910b")
    ok, worst = op_zoo.check(name, case)
    assert ok, f"{name} {small} on ascend910b: worst error {worst:.3g} x the tolerance"
