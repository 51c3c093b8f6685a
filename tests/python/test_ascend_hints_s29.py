"""Capacity hints that name the kernel's own tiles (session 29, lead; hunt29 F4).

examples/paged_attention.py's `paged_decode` at Gemma's head dim 256 with vLLM's page 128 in float32
(pages_per_step 4: the gemm's N is 512 keys) has no L0 K step that fits on ascend910b. The error is
at the gemm's line; its hint named block_M / block_N, which this kernel does not have: it now names
the gemm's operand tiles and their M / N.
"""
import sys
from pathlib import Path

import pytest

import tilewright as tw

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import paged_attention as pa  # noqa: E402


def test_l0_capacity_hint_names_the_gemm_operands():
    with pytest.raises(tw.TilewrightError) as e:
        pa.paged_decode(1, 8, 1, 256, 12, 128, 3, "float32", pages_per_step=4, target="ascend910b")
    text = str(e.value)
    assert "gemm 8x512x256 (float32): no K step fits" in text
    assert "block_M" not in text
    # M is the rows of the query tile, N the rows of the transposed key tile (512 keys).
    assert "M (rows of 'q', 8)" in text and "N (rows of 'k', 512)" in text
    # One page a step fits (N 128; two pages overflow L1 with k and v, an error naming those tiles).
    pa.paged_decode(1, 8, 1, 256, 12, 128, 3, "float32", pages_per_step=1, target="ascend910b")
