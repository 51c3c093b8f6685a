"""examples/masked_attention.py's float32 prefill scales its q tile once a query block when every
query block is whole (session 40, h-masked40: cpu's Q K^T then reads q in place); with a query
tail (or 16-bit inputs) the scores keep the scale. Both forms against float64 and against each
other's target: a block-pattern bool mask (empty, full and partial blocks, a row that sees
nothing), GQA, on cpu and ascend910b."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests" / "python"))

import masked_attention as ma  # noqa: E402
from test_block_mask import block_pattern  # noqa: E402


def run(sq, skv, target, dtype="float32"):
    mask = block_pattern(sq, skv, 16, 16, seed=6)
    q, k, v, _ = ma.inputs(1, 4, 2, sq, skv, 32, "BHSD", dtype, seed=sq + skv)
    kern = ma.attention_prefill(1, 4, 2, sq, skv, 32, mask="bool", block_M=16, block_N=16, dtype=dtype,
                                target=target)
    out = kern(q, k, v, mask, *ma.prefill_blocks(mask, 16, 16, target), np.full(1, skv, np.int32))
    return out, ma.reference(q, k, v, mask)


@pytest.mark.parametrize("sq, skv", [(32, 48), (37, 53)], ids=["whole_query_blocks", "query_tail"])
def test_prescaled_q_matches_float64_on_both_targets(sq, skv):
    got = {t: run(sq, skv, t) for t in ("cpu", "ascend910b")}
    for t, (out, ref) in got.items():
        assert np.isfinite(out).all(), t
        assert_close(out, ref, rtol=1e-5, atol=1e-5, msg=t)  # row 3 sees nothing: 0 there, as ref
    assert_close(got["cpu"][0], got["ascend910b"][0], rtol=1e-5, atol=1e-5, msg="cpu against ascend910b")
