"""Twin flag pairs (issue 13/16 Ascend, session 28, h-pipeall17).

Causal flash attention whose program loop runs more than once per core (more row blocks than the
24 AICs) loads P from the workspace in both `if`s of its key loop; both loads must finish before
the program's cross-core set on FIX, an MTE2 -> FIX order relayed through MTE1. insert_sync kept
the two relayed pairs apart (the second load is later than the first) although they set and
wait at the same places, and with no MTE2_MTE1 id left one was a PipeBarrier<PIPE_ALL>. Now they
are one pair. B 1, H 2, S 832 (26 row blocks of 64), D 128, float16: no PIPE_ALL, the checker
silent, cpu and ascend910b against float64. The C++ tests InsertSync.TwinRelayedPairsAreOnePair /
RelayedPairsWaitedAtDifferentPlacesStayApart pin the program text."""
import os
import sys

import numpy as np
import pytest

from ascend_util import TARGET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import flash_attention  # noqa: E402


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_causal_flash_attention_with_a_program_loop_needs_no_pipe_all(target):
    """tolerance: float16 scores and P (as test_ascend_sync_inner_s27.py)."""
    B, H, S, D = 1, 2, 832, 128
    rng = np.random.default_rng(2801)
    q, k, v = (rng.standard_normal((B, H, S, D)).astype(np.float16) for _ in range(3))
    kern = flash_attention.flash_attention(B, H, S, D, True, dtype="float16", target=target)
    if target == "cpu":
        o = kern(q, k, v)
    else:
        prog = kern.get_source("ascend_program")
        assert "PipeBarrier<ALL>" not in prog, prog
        prof = kern.profile(q, k, v)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        o = prof.outputs[0] if isinstance(prof.outputs, (list, tuple)) else prof.outputs
    np.testing.assert_allclose(o.astype(np.float64), flash_attention.reference(q, k, v, True), atol=2e-2, rtol=2e-2)
