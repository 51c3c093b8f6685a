"""Session 30 review of the session's merges (h-review30): findings of /work/review30-findings.md.

R3 (h-rel30): an error in a kernel whose file path is not UTF-8 keeps its source line and caret.
R1 (h-uninit): a half-written float32 tile copied out into a float16 tensor (the converting copy: a
vector Cast into a staging tile, then DataCopyPad) was not reported as an uninitialised read; the
Cast now carries its source's written state.
R2 (h-negzero, session 31): cpu's reduce_sum of -0.0 values was +0.0 where ascend910b gives -0.0;
cpu's sums now start from -0.0 (numpy's default np.sum starts from +0.0: initial=-0.0 gives -0.0).
"""
import importlib.util
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET

KERNEL_SRC = '''
import tilewright as tw
import tilewright.language as T


@tw.jit(out_idx=[-1])
def shifted():
    @T.prim_func
    def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((8,), "float32")
            T.copy(X, y)
            for i in T.Parallel(8):
                y[i] = y[i + 9]  # past the tile
            T.copy(y, Y)
    return main
'''


@pytest.mark.skipif(sys.platform != "linux", reason="file names of arbitrary bytes: Linux")
def test_error_in_a_non_utf8_path_shows_its_source_line(tmp_path):
    """R3: the error names the file with \\xNN (rel30 F6) and shows the line and the caret, as for
    any other file (the compile-time range check: no host compiler runs)."""
    d = os.fsencode(str(tmp_path)) + b"/k\xff"
    os.mkdir(d)
    f = d + b"/kern_r3.py"
    with open(f, "w") as out:
        out.write(KERNEL_SRC)
    spec = importlib.util.spec_from_file_location("kern_r3", os.fsdecode(f))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(tw.TilewrightError) as e:
        mod.shifted(target="cpu")
    msg = str(e.value)
    assert "k\\xff/kern_r3.py:14:" in msg, msg
    assert "y[i] = y[i + 9]  # past the tile" in msg and "^" in msg, msg


@tw.jit(out_idx=[-1])
def half_written_cast_out(dtype):
    """Rows 0..3 of y written, rows 4..7 never: copied out whole into a `dtype` tensor."""

    @T.prim_func
    def main(X: T.Tensor((8, 16), "float32"), Y: T.Tensor((8, 16), dtype)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((8, 16), "float32")
            T.copy(X[0:4, 0:16], y[0:4, 0:16])
            T.copy(y, Y[0, 0])

    return main


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_half_written_tile_copied_out_is_reported(dtype):
    """R1: the float16 copy casts y into a staging tile; the Cast carries y's unwritten rows 4..7."""
    x = np.ones((8, 16), np.float32)
    prof = half_written_cast_out(dtype, target=TARGET).profile(x)
    assert any("uninitialised read" in r and "element(s) [0, 16) of row 4" in r for r in prof["reports"]), \
        prof["reports"]


@tw.jit(out_idx=[-1])
def tail_rows_cast_out(M):
    """A tail block (M = 13 of blocks of 8): the staging Cast covers the tile's unloaded rows too, the
    copy out only the loaded ones: no report."""

    @T.prim_func
    def main(X: T.Tensor((M, 16), "float32"), Y: T.Tensor((M, 16), "float16")):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            y = T.alloc_fragment((8, 16), "float32")
            T.copy(X[bx * 8, 0], y)  # the tail block loads rows 0..4
            T.copy(y, Y[bx * 8, 0])

    return main


def test_tail_block_cast_out_is_not_reported():
    x = np.random.default_rng(1).standard_normal((13, 16)).astype(np.float32)
    prof = tail_rows_cast_out(13, target=TARGET).profile(x)
    assert prof["reports"] == [], prof["reports"]
    np.testing.assert_array_equal(prof.outputs, x.astype(np.float16))


@tw.jit(out_idx=[-1])
def row_sum(R, N):
    @T.prim_func
    def main(X: T.Tensor((R, N), "float32"), Out: T.Tensor((R,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, N), "float32")
            s = T.alloc_fragment((R,), "float32")
            T.copy(X, x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, Out)

    return main


def test_sum_of_negative_zeros_keeps_its_sign_on_cpu():
    x = np.full((2, 8), -0.0, np.float32)
    assert np.signbit(x.sum(1, initial=-0.0)).all()  # numpy's default start is +0.0 (test_negzero_s31)
    got = row_sum(2, 8, target="cpu")(x)
    assert np.signbit(got).all(), got
