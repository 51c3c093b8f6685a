"""Session 30 (h-opzoo): the op zoo's cross_entropy, unchanged, on ascend910b (issue 13 "change only
the target"). Its kernel reads the label's logit as `x[i, lab[i]]` in a row map; when the block's
rows overflow UB, split_rows now runs them in groups (the pick reads row i's own chunk, and lab[i]
is a row tile's load, rebased with the group). A row that does not fit UB at all needs column
blocks, which a run-time column cannot use: the error names the form that runs in them.
Checked: cpu, ascend910b (checker on) and float64 at 1e-5 relative."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
from ascend_util import run_checked

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import op_zoo  # noqa: E402

RTOL = 1e-5  # against float64 (bench/op_zoo.py states 1e-5 / 1e-5)


def _case(M, N, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((M, N)) * 3).astype(np.float32)
    lab = rng.integers(0, N, M).astype(np.int32)
    lab[:3] = [0, N - 1, N // 2]  # the first, the last (in the tail) and a middle column
    x64 = x.astype(np.float64)
    m = x64.max(1)
    ref = np.log(np.exp(x64 - m[:, None]).sum(1)) + m - x64[np.arange(M), lab]
    return x, lab, ref


@pytest.mark.parametrize("M, N", [(37, 300),    # rows fit UB: no split; a tail block of 5 rows
                                  (9, 4096)])   # 8 rows overflow UB: 4 at a time; a tail block of 1 row
def test_cross_entropy_unchanged_on_ascend(M, N):
    x, lab, ref = _case(M, N, seed=M)
    got = {}
    got["cpu"] = op_zoo.cross_entropy(N, target="cpu")(x, lab)
    k = op_zoo.cross_entropy(N, target="ascend910b")
    got["ascend910b"] = run_checked(k, x, lab)  # out_idx=[-1]: the loss
    for t, y in got.items():
        tw.testing.assert_close(y, ref, atol=1e-5, rtol=RTOL, msg=f"{t} {M}x{N}")
    tw.testing.assert_close(got["ascend910b"], got["cpu"], atol=1e-5, rtol=RTOL, msg=f"cpu vs ascend910b {M}x{N}")


def test_cross_entropy_row_split_note():
    """At 8 x 4097 the rows run in groups (the note says so), as the kernel is written (a width no
    other test compiles: a kernel reused from the process's cache gives no note)."""
    with pytest.warns(tw.TilewrightWarning, match=r"8 rows run 4 at a time"):
        op_zoo.cross_entropy(4097, target="ascend910b")


def test_run_time_column_beyond_one_row_names_the_working_form():
    """A row wider than UB needs column blocks; `x[i, lab[i]]` cannot run in them: the error names
    the kernel's line and the T.where form that does (tests/python/test_ascend_widerow_s25.py)."""
    with pytest.raises(tw.TilewrightError, match=r"op_zoo\.py:\d+:\d+: error: UB overflow(?s:.*)column chosen at run "
                       r"time \(`x\[i, lab\[i\]\]`\)(?s:.*)T\.where\(j == lab\[i\], x\[i, j\], 0\)"):
        op_zoo.cross_entropy(60000, target="ascend910b")
