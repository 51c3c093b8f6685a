"""Session 38's portability hunt (h-port38, docs/testing.md "Session 38: port38"): more user kernel forms written for
cpu first (tests/python/port38_kernels.py) with only the target changed to ascend910b (simulator, checker on),
against float64 numpy / exact integers; the findings' minimal forms.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402
import port38_kernels as P  # noqa: E402


# --------------------------------------------------------------------------------------------- findings
# F1 (fixed as message + hint): an int32 comparison of a column of a 2-D tile in a 2-D map, the expert count of
# the aux-loss-free bias update T.where(ids[i, k] == e, 1.0, 0.0) (ids (Tn, K), k a serial loop's variable), was
# "'>>' by a per-element count: ShiftLeft/ShiftRight take one scalar count", hint "split longer formulas into tile
# ops": the user wrote no shift (legalize_vector's exact int32 comparison key, ids >> 8, computed per row). It is now
# port34 F2's located "the per-row factor 'ids' is read down a column", whose hint (the column gathered into a 1-D
# tile) runs.
def test_f1_int32_compare_of_a_column():
    with pytest.raises(tw.TilewrightError, match=r"the per-row factor 'ids' is read down a column") as e:
        P.check("aux_free_bias", "float32", (37, 2, 8), TARGET)
    assert "port38_kernels.py:" in str(e.value) and "v[i] = ids[i, k]" in str(e.value) and ">>" not in str(e.value)
    P.check("aux_free_bias_col", "float32", (37, 2, 8), TARGET)


# --------------------------------------------------------------------------------------------- the kernels
# (a) a selection, one per construct, on ascend910b at its first dtype and its first shape (the probe,
# `python tests/python/port38_kernels.py`, runs every kernel, dtype and shape on both targets)
AGREE = ["band_part", "stochastic_round", "margin_ranking", "welford", "safe_softmax", "eta_sampling", "inverse_cdf",
         "merge_states", "varlen_cu_seqlens", "chunked_local", "gqa_6_2", "group_limited_topk", "mx_shared_exp",
         "int4_sym_pack", "delta_rule_step", "rwkv4_wkv", "gather_neg", "channel_shuffle", "kth_value",
         "argsort_onehot", "seg_cumsum"]


@pytest.mark.parametrize("name", AGREE)
def test_runs_on_ascend910b(name):
    _, dts, shapes = P.CASES[name]
    P.check(name, dts[0], shapes[0], TARGET)


# (b) ascend910b's located error (the kernel's line and a hint); the form the hint names runs right
LOCATED = [
    ("block_scale_2d", "float16", (37, 45, 16), r"element store into tensor 'S' outside a T\.Parallel map",
     r"store into a tile .* and T\.copy the tile", "block_scale_2d_tile"),
    ("argsort_scatter", "float32", (13, 11, 1), r"stores into 'y' at the data-dependent index rk\[i_1, j_1\] \(a scatter\)",
     r"gather instead", "argsort_onehot"),
]


@pytest.mark.parametrize("name, dt, shape, what, hint, alt", LOCATED, ids=[c[0] for c in LOCATED])
def test_located_error_and_its_alternative(name, dt, shape, what, hint, alt):
    with pytest.raises(tw.TilewrightError, match=what) as e:
        P.check(name, dt, shape, TARGET)
    assert "port38_kernels.py:" in str(e.value) and re.search(hint, str(e.value)), str(e.value)
    P.check(alt, dt, shape, TARGET)
