"""Column blocks double-buffered (issue 16, Ascend side; h-dbuf15, docs/ascend.md "Session 27:
column blocks double-buffered (h-dbuf15)").

split_cols (sessions 25 and 26) runs a row wider than the AIV's UB in column blocks. Since session
27 each phase's loop runs its blocks in pairs on two copies of the column tiles (the second named
`<tile>_b`), an odd block count's last block after the loop, so block b + 1's copy from GM lands
while the Vector unit works on block b; the running results (max, sum, Chan's statistics) stay one
tile each. Rows copied from bfloat16 / float16 tensors into float32 tiles double only the tiles of
the tensors' dtype the copies use (`x_bfloat16_0`; session 32, h-ascbf32: before, one copy of
every tile); a kernel whose tiles have the tensors' 16-bit dtype doubles them all. One case per property, at the smallest widths that need column blocks (49081, just
over a float32 row's UB share) and an odd tail (151937): float32 / float16 / bfloat16, 1 and 3
rows, an even and an odd block count, rows of NaN / +inf / all -inf; each against float64 numpy at
tilewright.testing.TOLERANCES and against cpu, the simulator's checker on (run_checked:
reports == []).
"""
import pathlib
import sys
import warnings

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, np_dtype, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402
from test_ascend_widerow_s25 import _case, _f64, _lse, _run, log_softmax, softmax  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tw.TilewrightWarning)
        yield


def _blocks(k):
    """(column blocks, copies, the doubled tiles: "each" or their names) from the kernel's note."""
    notes = [n for n in k.notes if "column blocks" in n]
    assert len(notes) == 1, k.notes
    blocks = int(notes[0].split(" runs in ")[1].split(" column blocks")[0])
    if "two copies of " not in notes[0]:
        return blocks, 1, ""
    return blocks, 2, notes[0].split("two copies of ")[1].split(":")[0]


# (op, N, rows, dtype): every op of the wide-row tests once, 1 and 3 rows, the odd tail 151937;
# float16 rows into float32 tiles (their float16 tiles doubled) twice (block counts as chosen now: even here; odd, the last block after the pair loop, in
# test_double_buffered_16_bit_tiles[float16] and the log_softmax special rows: 5 blocks)
CASES = [
    ("softmax", 49081, 3, "float32"),
    ("log_softmax", 151937, 1, "float32"),
    ("layer_norm", 49081, 3, "float16"),
    ("rms_norm", 151937, 3, "float32"),
    ("cross_entropy", 49081, 1, "float32"),
    ("row_sum_max", 151937, 3, "float16"),
    ("argmax", 49081, 3, "float32"),
]


@pytest.mark.parametrize("op,N,M,dtype", CASES)
def test_double_buffered_column_blocks(op, N, M, dtype):
    factory, inputs, refs, tols, scale = _case(op, N, M, dtype)
    k, got = _run(factory, N, dtype, TARGET, inputs)
    blocks, copies, doubled = _blocks(k)
    # float32 tiles: two copies of each where the rows are float32; where a copy converts them, two
    # of the tiles of the tensors' dtype only (session 32)
    assert copies == 2 and blocks >= 2, k.notes
    assert (doubled == "each") == (dtype == "float32") and (dtype == "float32" or f"x_{dtype}_0" in doubled), k.notes
    _, cpu = _run(factory, N, dtype, "cpu", inputs)
    what = f"{op} {M}x{N} {dtype} ({blocks} blocks)"
    for g, c, ref, (atol, rtol) in zip(got, cpu, refs, tols):
        if ref.dtype.kind in "iu":
            np.testing.assert_array_equal(g, ref, err_msg=what)
            np.testing.assert_array_equal(c, ref, err_msg=what + " cpu")
            continue
        s = scale if op == "softmax" else 1
        assert_close(_f64(g) * s, ref, atol=atol, rtol=rtol, msg=what)
        assert_close(_f64(g) * s, _f64(c) * s, atol=atol, rtol=rtol, msg=what + " vs cpu")


def test_converting_rows_double_their_16_bit_tiles():
    """bfloat16 rows copied into float32 tiles: two copies of the bfloat16 tiles the copies use, one
    of the float32 tile (session 32; before, one copy of every tile: compiled only,
    test_ascend_widerow_s25.py, _s26.py and test_ascbf32_s32.py run these forms)."""
    k = softmax.softmax(49081, dtype="bfloat16", target=TARGET)
    assert _blocks(k)[1:] == (2, "x_bfloat16_0, x_bfloat16_1"), k.notes
    k = softmax.softmax(49081, dtype="float32", target=TARGET)
    assert _blocks(k)[1:] == (2, "each"), k.notes


@tw.jit(out_idx=[-1])
def shift_by_max(N, block_M=1, dtype="float32"):
    """y = x - max(x) per row, the tiles in the tensors' dtype (no converting copy): two copies."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            mx = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - mx[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_double_buffered_16_bit_tiles(dtype):
    N = 151937
    x = randn((1, N), dtype, scale=3.0, seed=np.random.default_rng(27))
    x[0, N - 1] = 40.0  # the maximum in the tail block
    k, got = _run(shift_by_max, N, dtype, TARGET, (x,))
    assert _blocks(k)[1:] == (2, "each"), k.notes
    _, cpu = _run(shift_by_max, N, dtype, "cpu", (x,))
    xf = _f64(x)
    ref = xf - xf.max(axis=1, keepdims=True)
    atol, rtol = TOLERANCES[dtype]
    assert_close(_f64(got[0]), ref, atol=atol, rtol=rtol, msg=f"shift_by_max {dtype}")
    assert_close(_f64(got[0]), _f64(cpu[0]), atol=atol, rtol=rtol, msg=f"shift_by_max {dtype} vs cpu")


def _special_rows(N, dtype):
    """NaN, +inf and -inf rows, with the special value in a block of the first copy, of the second
    copy and in the tail block."""
    x = randn((6, N), dtype, scale=2.0, seed=np.random.default_rng(N + 27)).astype(np.float32)
    x[0, N - 1] = np.nan     # a NaN in the tail block
    x[1, 20000] = np.nan     # a NaN in the second block (the second copy)
    x[2, 30000] = np.inf     # +inf: NaN (inf - inf), as unsplit
    x[3, :] = -np.inf        # all -inf: NaN (-inf - -inf), as unsplit
    x[4, : N // 2] = -np.inf  # -inf in the first blocks: the rescale starts from -inf
    x[5, N - 3] = 60.0       # the maximum in the tail block
    return x.astype(np_dtype(dtype))


@pytest.mark.parametrize("op,N,dtype", [("softmax", 151937, "float32"), ("log_softmax", 49081, "float32")])
def test_double_buffered_special_rows(op, N, dtype):
    x = _special_rows(N, dtype)
    factory = {"softmax": softmax.softmax, "log_softmax": log_softmax}[op]
    k, got = _run(factory, N, dtype, TARGET, (x,), block_M=1)
    assert _blocks(k)[1] == 2, k.notes
    _, cpu = _run(factory, N, dtype, "cpu", (x,), block_M=1)
    xf = _f64(x)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        ref = softmax.reference(x) if op == "softmax" else xf - _lse(xf)[:, None]
    atol, rtol = TOLERANCES[dtype]
    scale = N if op == "softmax" else 1
    for g, name in ((_f64(got[0]), "ascend"), (_f64(cpu[0]), "cpu")):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(ref), err_msg=f"{op} {dtype} {name}: NaN")
        inf = np.isinf(ref)
        np.testing.assert_array_equal(g[inf], ref[inf], err_msg=f"{op} {dtype} {name}: inf")
        fin = np.isfinite(ref)
        assert_close(g[fin] * scale, ref[fin] * scale, atol=atol, rtol=rtol, msg=f"{op} {N} {dtype} {name}")
