"""Session 29 (h-rows): a whole weight tensor copied into a tile per block (rms_norm's `T.copy(W, w)`)
is read in place on the cpu target (alias_tile_copies), and the four row kernels of issue 16 on rows
the earlier files do not cover (the norms' special rows, no rows for softmax / log_softmax) against
float64 numpy. Correctness only: no timing. The kernels are the examples' at N = 4097 with their
default block_M (the ones test_cpu_rows.py compiles: the kernel cache serves them); one shape per
property: 4097 is a row of 64 full chunks and a 1-element tail, 13 rows a partial last block of 8."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "bench")]

import layer_norm  # noqa: E402
import op_zoo  # noqa: E402
import rms_norm  # noqa: E402
import softmax  # noqa: E402
from tw_test_util import unchecked_code_only  # noqa: E402

N = 4097


@tw.jit(out_idx=[-1])
def rms_norm_w_direct(N, eps=1e-6, block_M=8):
    """rms_norm.py's kernel with its map loading W itself (no tile w): what the pass makes of it."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), W: T.Tensor((N,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * ss[i] * W[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


def _special_rows(M, seed):
    """M rows of N(0, 1) values, then: a NaN, a +inf, a -inf, a row of -inf (rows 1-4)."""
    x = randn((M, N), "float32", seed=np.random.default_rng(seed))
    x[1, 100] = np.nan
    x[2, N - 1] = np.inf
    x[3, 0] = -np.inf
    x[4, :] = -np.inf
    return x


def _check_nan_pattern(y, want, what):
    y = y.astype(np.float64)
    assert np.array_equal(np.isnan(y), np.isnan(want)), what
    ok = ~np.isnan(want)
    assert_close(y[ok], want[ok], atol=1e-5, rtol=1e-5, msg=what)


@unchecked_code_only
def test_rms_norm_reads_its_weights_in_place():
    """The per-block 16 KiB copy W -> w is gone (no tile w, no copy in the generated C++: the
    copy-out's map loads W), and the results are the bits of the kernel written with W[j] in its
    map; NaN / inf rows give the float64 reference's NaNs, the other rows stay right."""
    k = rms_norm.rms_norm(N)
    src = k.get_source("c++")
    assert "copy W -> w" not in src and "float w[" not in src, "the weight tile is still materialised"
    assert "* W[j_1]" in src, "the copy-out's map reads W in place"
    assert "row pipeline" in src and "tw_out1" in src, "still a row pipeline whose copy-out takes rows in pairs"
    x = _special_rows(13, seed=29)
    w = randn((N,), "float32", seed=np.random.default_rng(30))
    y = k(x, w)
    np.testing.assert_array_equal(y.view(np.uint32), rms_norm_w_direct(N)(x, w).view(np.uint32))
    with np.errstate(invalid="ignore", over="ignore"):
        want = rms_norm.reference(x, w)
    _check_nan_pattern(y, want, "rms_norm special rows")


def test_weight_copy_kept_for_a_cast():
    """A converting copy (bfloat16 W into a float32 tile) is a real copy: kept."""
    src = tw.compile(rms_norm.rms_norm.__wrapped__(301, dtype="bfloat16")).get_source("c++")
    assert "copy W -> w" in src


def test_layer_norm_special_rows():
    x = _special_rows(13, seed=31)
    rng = np.random.default_rng(32)
    w, b = randn((N,), "float32", seed=rng), randn((N,), "float32", seed=rng)
    with np.errstate(invalid="ignore", over="ignore"):
        want = layer_norm.reference(x, w, b)
    _check_nan_pattern(layer_norm.layer_norm(N)(x, w, b), want, "layer_norm special rows")


@pytest.mark.parametrize("build", [softmax.softmax, op_zoo.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_no_rows(build):
    """No rows (M = 0): an empty output, nothing run."""
    y = build(N)(np.zeros((0, N), np.float32))
    assert y.shape == (0, N) and y.dtype == np.float32
