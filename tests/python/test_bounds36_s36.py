"""Session 36's bounds checks on ascend910b with padded loops (h-bounds36, docs/testing.md "Session 36: bounds36").

h-bounds35's checked copies (a T.Parallel map's staged element reads of a tensor report a window leaving its
dimension: hunt34 F3) came back, and the passes that pad a map past the user's iterations mark it (ir.h
ForNode::user_extent): split_cols runs a row too wide for UB in column blocks whose last one overhangs the row
(49081 columns in blocks of 8192), the map's reads of a weight row `W[j]` there are padding, clipped (zeros, never
stored) without a report. The check covers the part of the window the user's iterations read (CopyNode::used): a
read past the row by the user's own index (`W[j + n]`) is still reported, in the last block too. The results are
checked against float64 numpy and cpu (the same kernel), the checker on.
"""
import pathlib
import sys
import warnings

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright._C import ir

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402

@pytest.fixture(autouse=True)
def _quiet():  # the column split's compile note
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tw.TilewrightWarning)
        yield


N = 30001  # two float32 rows of it overflow UB: column blocks, the last one padded past N


def _scaled():
    """y[0, j] = x[0, j] * W[j] + B[j] - sum(x), two row tiles of N float32 (split_cols); W has N - short elements
    at run time (a symbolic length: the compiler cannot refuse the kernel)."""
    K = T.symbolic("K")

    @T.prim_func
    def k(X: T.Tensor((1, N), "float32"), W: T.Tensor((K,), "float32"), B: T.Tensor((N,), "float32"),
          Y: T.Tensor((1, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((1, N), "float32")
            t = T.alloc_fragment((1, N), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[0, 0], x)
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(1, N):
                t[i, j] = x[i, j] * W[j] + B[j] - s[i]
            T.copy(t, Y[0, 0])
    return k


def _inputs(short):
    rng = np.random.default_rng(36)
    x = rng.integers(-4, 5, (1, N)).astype(np.float32)
    w = rng.integers(-4, 5, N - short).astype(np.float32)
    b = rng.integers(-4, 5, N).astype(np.float32)
    return x, w, b


def _profile(short):
    kernel = tw.compile(_scaled(), target=TARGET, out_idx=[-1])
    prof = kernel.profile(*_inputs(short))
    return kernel, prof.outputs, prof["reports"]


def test_padded_last_column_block_is_not_reported():
    kernel, y, reports = _profile(0)
    x, w, b = _inputs(0)
    want = x.astype(np.float64) * w + b - x.astype(np.float64).sum()
    assert reports == [], reports
    # integer-valued data: exact in float32 (|values| < 2^24)
    assert y.tolist() == want.tolist()
    assert tw.compile(_scaled(), out_idx=[-1])(*_inputs(0)).tolist() == want.tolist()
    assert any("column blocks" in n for n in kernel.notes), kernel.notes  # the padded split ran


@pytest.mark.parametrize("short", [1, 5])
def test_user_read_past_the_row_in_a_padded_block_is_reported(short):
    _, _, reports = _profile(short)  # W[j] at j = N - short: the user's index past W, in the last (padded) block
    oob = [r for r in reports if "out of bounds" in r]
    assert oob and f"index {N - short} of dimension 0 of tensor W, which has {N - short}" in oob[0], reports
    assert "test_bounds36_s36.py:" in oob[0] and "T.if_then_else" in oob[0]  # the kernel's line, the hint


def test_ir_text_of_the_padded_loop_and_the_checked_window():
    kernel = tw.compile(_scaled(), target=TARGET, out_idx=[-1])
    split, legal = kernel.get_ir("split_cols"), kernel.get_ir("legalize_vector")
    assert ", user=min(" in split, split  # the last column block's padded map (ir.h ForNode::user_extent)
    used = [ln for ln in legal.splitlines() if "checked_copy W[" in ln]
    assert used and all(" used [min(" in ln for ln in used), used  # W's window: the user's columns checked
    for text in (split, legal):  # the text forms read back
        assert ir.print_kernel(ir.parse_kernel(text)) == text


def test_clipped_row_group_is_not_reported():
    """split_rows: 7 rows of 4096 float32 in groups of 3, the last group clipped (rows 7, 8 are padding) while the map
    reads the tensor S at its row: no report, the values exact against numpy and cpu."""
    R, C = 7, 4096

    @T.prim_func
    def k(X: T.Tensor((R, C), "float32"), S: T.Tensor((R, C), "float32"), Y: T.Tensor((R, C), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), "float32")
            t = T.alloc_fragment((R, C), "float32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(R, C):
                t[i, j] = x[i, j] * S[i, j] + 1.0
            T.copy(t, Y[0, 0])

    x = np.arange(R * C, dtype=np.float32).reshape(R, C) % 7
    s = np.arange(R * C, dtype=np.float32).reshape(R, C) % 5 - 2
    kernel = tw.compile(k, target=TARGET, out_idx=[-1])
    assert ", user=min(" in kernel.get_ir("split_rows")  # the clipped group's padded rows
    prof = kernel.profile(x, s)
    assert prof["reports"] == [] and prof.outputs.tolist() == (x * s + 1).tolist(), prof["reports"]
    assert tw.compile(k, out_idx=[-1])(x, s).tolist() == (x * s + 1).tolist()
