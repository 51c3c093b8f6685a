"""Session 32 (h-ascbf32): the column blocks of 16-bit rows computed in float32 double buffer their
16-bit tiles (issues 13 / 16; docs/ascend.md "Session 32: 16-bit rows in column blocks (h-ascbf32)").

A bfloat16 / float16 row wider than the UB, copied into float32 tiles, runs in column blocks whose
copies convert: split_cols now makes each conversion a copy into a tile of the tensor's dtype and a
cast map, and gives only those tiles a second copy (`x_bfloat16_0`, ...); a block width for a row
reduction is 64 * 2^a * b with b odd and at most 63; pick_element takes the pair loop's pick tile
shared by its blocks. Each changed form is checked against float64 numpy at TOLERANCES and against
cpu, the simulator's checker on (run_checked: reports == []), at odd widths that need column blocks
(49081, 151937: a tail block; an odd block count's last block after the pair loop), 1 and 3 rows,
bfloat16 and float16, rows of NaN / +inf / -inf; the one-row forms at 4097 and 1 column are not
split and unchanged.
"""
import pathlib
import sys
import warnings

import numpy as np
import pytest

import tilewright as tw
from tilewright.testing import TOLERANCES, assert_close, np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402
from test_ascend_widerow_s25 import _case, _f64, _lse, _run, cross_entropy, log_softmax, softmax  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tw.TilewrightWarning)
        yield


def _note(k):
    notes = [n for n in k.notes if "column blocks" in n]
    assert len(notes) == 1, k.notes
    return notes[0]


def _check(op, N, M, dtype, block_M=None):
    factory, inputs, refs, tols, scale = _case(op, N, M, dtype)
    k, got = _run(factory, N, dtype, TARGET, inputs, block_M)
    _, cpu = _run(factory, N, dtype, "cpu", inputs, block_M)
    what = f"{op} {M}x{N} {dtype}"
    for g, c, ref, (atol, rtol) in zip(got, cpu, refs, tols):
        s = scale if op == "softmax" else 1
        assert_close(_f64(g) * s, ref, atol=atol, rtol=rtol, msg=what)
        assert_close(_f64(g) * s, _f64(c) * s, atol=atol, rtol=rtol, msg=what + " vs cpu")
    return k


# every wide-row form with a converting copy once: bfloat16 and float16, 1 and 3 rows, 49081 (an even
# or odd block count) and 151937 (a 1-column tail past 151936)
CASES = [
    ("softmax", 49081, 1, "bfloat16"),
    ("log_softmax", 49081, 1, "float16"),
    ("rms_norm", 49081, 1, "bfloat16"),
    ("layer_norm", 49081, 1, "float16"),
    ("row_sum_max", 151937, 1, "float16"),
    ("cross_entropy", 49081, 3, "bfloat16"),
]


@pytest.mark.parametrize("op,N,M,dtype", CASES)
def test_16_bit_tiles_doubled(op, N, M, dtype):
    k = _check(op, N, M, dtype)
    note = _note(k)
    # two copies of the tiles of the tensors' dtype only, never of the float32 tiles
    doubled = note.split("two copies of ")[1].split(":")[0]
    assert f"x_{dtype}_0" in doubled and "each" not in doubled, note
    # the block width: 64 * 2^a * b, b odd and at most 63 (every op here reduces along the row)
    cb = int(note.split(" column blocks of ")[1].split(" ")[0])
    b = cb // 64
    while b % 2 == 0:
        b //= 2
    assert cb % 64 == 0 and b <= 63, note


def test_pick_tile_shared_by_the_pair_loop():
    """cross_entropy's pick tile has one copy in the pair loop (only the bfloat16 tiles are doubled):
    pick_element still replaces every block's map and sum by the element (no `reduce sum pick`
    left, its allocation gone), and the labels in the first, a middle and the last block's tail
    give float64's loss."""
    N, M = 49081, 4
    factory, inputs, refs, tols, _ = _case("cross_entropy", N, M, "bfloat16")
    x, lab = inputs
    lab = np.array([0, N - 1, 24000, 12345], np.int32)
    k = cross_entropy(N, dtype="bfloat16", target=TARGET)
    ir = k.get_ir("pick_element")
    assert "for col_blk" in ir and "reduce sum pick" not in ir and "alloc pick" not in ir, ir
    xf = _f64(x)
    ref = _lse(xf) - xf[np.arange(M), lab]
    _, got = _run(cross_entropy, N, "bfloat16", TARGET, (x, lab))
    _, cpu = _run(cross_entropy, N, "bfloat16", "cpu", (x, lab))
    assert_close(_f64(got[0]), ref, atol=1e-4, rtol=1e-5, msg="cross_entropy bfloat16")
    assert_close(_f64(got[0]), _f64(cpu[0]), atol=1e-4, rtol=1e-5, msg="cross_entropy bfloat16 vs cpu")


def _special_rows(N, dtype):
    rng = np.random.default_rng(32)
    x = (rng.standard_normal((5, N)) * 3).astype(np.float32)
    x[0, N // 2] = np.nan    # NaN: the row is NaN
    x[1, 7] = np.inf         # +inf: NaN (inf - inf), as unsplit
    x[2, :] = -np.inf        # all -inf: NaN (-inf - -inf), as unsplit
    x[3, : N // 2] = -np.inf  # -inf in the first blocks: the online rescale starts from -inf
    x[4, N - 1] = 60.0       # the maximum in the tail block
    return x.astype(np_dtype(dtype))


@pytest.mark.parametrize("op,dtype", [("softmax", "bfloat16"), ("log_softmax", "float16")])
def test_special_rows(op, dtype):
    N = 49081
    x = _special_rows(N, dtype)
    factory = {"softmax": softmax.softmax, "log_softmax": log_softmax}[op]
    k, got = _run(factory, N, dtype, TARGET, (x,), block_M=1)
    assert "two copies of x_" in _note(k), k.notes
    _, cpu = _run(factory, N, dtype, "cpu", (x,), block_M=1)
    xf = _f64(x)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        ref = softmax.reference(x) if op == "softmax" else xf - _lse(xf)[:, None]
    atol, rtol = TOLERANCES[dtype]
    s = N if op == "softmax" else 1
    if op == "softmax" and dtype == "float16":
        atol = max(atol, N * 2.0**-25)
    g, c = _f64(got[0]), _f64(cpu[0])
    np.testing.assert_array_equal(np.isnan(g), np.isnan(ref), err_msg=f"{op} {dtype}: NaN where float64 has them")
    np.testing.assert_array_equal(np.isnan(c), np.isnan(ref), err_msg=f"{op} {dtype} cpu")
    ok = ~np.isnan(ref)
    assert_close(g[ok] * s, ref[ok] * s, atol=atol, rtol=rtol, msg=f"{op} {dtype}")
    assert_close(g[ok] * s, c[ok] * s, atol=atol, rtol=rtol, msg=f"{op} {dtype} vs cpu")


@pytest.mark.parametrize("N", [4097, 1])
def test_rows_that_fit_are_not_split(N):
    """Rows that fit the UB keep their form (no column blocks): softmax in bfloat16."""
    for op in ["softmax"]:
        factory, inputs, refs, tols, scale = _case(op, N, 3, "bfloat16")
        k, got = _run(factory, N, "bfloat16", TARGET, inputs)
        assert not any("column blocks" in n for n in k.notes), k.notes
        _, cpu = _run(factory, N, "bfloat16", "cpu", inputs)
        (atol, rtol), s = tols[0], scale if op == "softmax" else 1
        assert_close(_f64(got[0]) * s, refs[0], atol=atol, rtol=rtol, msg=f"{op} 3x{N}")
        assert_close(_f64(got[0]) * s, _f64(cpu[0]) * s, atol=atol, rtol=rtol, msg=f"{op} 3x{N} vs cpu")
