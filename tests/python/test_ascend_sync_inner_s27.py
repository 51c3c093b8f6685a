"""Ordering chains through inner loops (issue 13/16 Ascend, session 27, h-sync15).

insert_sync gives a loop-carried (or loop-body) flag pair a guard when nothing orders the pipe
that sets it again after the pipe that waited it. The proof now also counts chains of flag pairs
through a kid loop that provably runs at least once (a constant trip count, or ceildiv(e, c) with
e >= 1 from the value ranges: causal attention's `ceildiv((bx + 1) * bm, bn)`), in its first
iteration (including an `if` taken there), and through an `if` whose two branches both carry a
link. The kernel runs on cpu and ascend910b (checker on: no `flag set twice` or other report)
against a float64 reference. The C++ tests (InsertSync.ChainThrough*) pin each proof shape's
program text; the fuzz streams and corpus check the rest."""
import os
import sys

import numpy as np
import pytest

from ascend_util import TARGET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import flash_attention  # noqa: E402

TARGETS = ["cpu", TARGET]


@pytest.mark.parametrize("target", TARGETS)
def test_causal_flash_attention(target):
    """The causal flash chain (its key loop runs ceildiv((bx + 1) 64, 64) >= 1 steps, its first
    step's `if k < loop_range` is taken): S 192 (three row blocks), D 128, float16 (a shape whose
    program changes: an MTE2 -> MTE3 guard on the vector side is gone);
    tolerance: float16 scores and P."""
    B, H, S, D = 1, 1, 192, 128
    rng = np.random.default_rng(2702)
    q, k, v = (rng.standard_normal((B, H, S, D)).astype(np.float16) for _ in range(3))
    kern = flash_attention.flash_attention(B, H, S, D, True, dtype="float16", target=target)
    if target == "cpu":
        o = kern(q, k, v)
    else:
        prof = kern.profile(q, k, v)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        o = prof.outputs[0] if isinstance(prof.outputs, (list, tuple)) else prof.outputs
    np.testing.assert_allclose(o.astype(np.float64), flash_attention.reference(q, k, v, True), atol=2e-2, rtol=2e-2)
