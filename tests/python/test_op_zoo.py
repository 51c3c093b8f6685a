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
