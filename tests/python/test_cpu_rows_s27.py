"""Session 27 (h-rows15): maps that bind names (lets) fuse on the cpu target (inline_map_lets), and
the row kernels softmax / log_softmax on odd shapes and special rows against float64 numpy.
Correctness only: no timing. One shape per property."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "bench")]

import op_zoo  # noqa: E402
import softmax  # noqa: E402
from tw_test_util import unchecked_code_only  # noqa: E402


@tw.jit(out_idx=[-1])
def masked_softmax(N, block_M=8, lets=True):
    """Causal-masked, scaled softmax; its mask map binds names (as masked_attention.py's) or, with
    lets=False, writes the same expression in its store."""
    M = T.symbolic("M")
    neg_inf = float("-inf")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            if lets:
                for i, j in T.Parallel(block_M, N):
                    qi = bx * block_M + i
                    visible = j <= qi
                    s = x[i, j] * 0.5
                    x[i, j] = T.where(visible, s, neg_inf)
            else:
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.where(j <= bx * block_M + i, x[i, j] * 0.5, neg_inf)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


def _masked_ref(x):
    s = x.astype(np.float64) * 0.5
    M, N = s.shape
    s[np.arange(N)[None, :] > np.arange(M)[:, None]] = -np.inf
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@unchecked_code_only
def test_let_map_fuses_with_same_bits():
    """The mask map with lets is now fused with the row max (it was not: full_tile_map took one
    store only), and gives the same bits as the map written without names."""
    M, N = 13, 37  # a partial last block of 8, a row not a multiple of the vector
    with_lets, without = masked_softmax(N, lets=True), masked_softmax(N, lets=False)
    src = with_lets.get_kernel_source()
    assert "map into x fused with reduce_max" in src, src
    assert "let visible: bool = j <= qi" in with_lets.get_ir("coarsen_grid")
    assert "x[i, j] = where(j <= bx * 8 + i, x[i, j] * 0.5, -inf)" in with_lets.get_ir("inline_map_lets")
    x = randn((M, N), "float32", scale=3.0, seed=np.random.default_rng(5))
    y = with_lets(x)
    assert np.array_equal(y.view(np.uint32), without(x).view(np.uint32))
    assert_close(y.astype(np.float64), _masked_ref(x), atol=1e-6, rtol=1e-5, msg="masked softmax with lets")
    # the same kernel on the simulator (the pass is the cpu target's; the kernel is portable)
    prof = masked_softmax(N, lets=True, target="ascend910b").profile(x)
    assert prof["reports"] == [], prof["reports"]
    assert_close(prof.outputs.astype(np.float64), _masked_ref(x), atol=1e-6, rtol=1e-5, msg="ascend910b")
    assert_close(prof.outputs, y, atol=1e-6, rtol=1e-5, msg="ascend910b vs cpu")


@tw.jit(out_idx=[-1])
def twice_used_exp(N, block_M=4):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                e = T.exp(x[i, j])
                x[i, j] = e * e + 1.0
            T.copy(x, Y[bx * block_M, 0])

    return main


def test_costly_let_used_twice_stays():
    """A let of a math call read twice is not substituted (exp would run twice): the map keeps its
    let and is not fused; its results are still right."""
    M, N = 5, 17
    k = twice_used_exp(N)
    assert k.get_ir("inline_map_lets") == k.get_ir("coarsen_grid")
    assert "fused" not in k.get_kernel_source()
    x = randn((M, N), "float32", seed=np.random.default_rng(6))
    e = np.exp(x.astype(np.float64))
    assert_close(k(x).astype(np.float64), e * e + 1.0, atol=1e-5, rtol=1e-5, msg="exp let used twice")


def _softmax_ref(x):
    with np.errstate(invalid="ignore", over="ignore"):
        x = x.astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


def _log_softmax_ref(x):
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        s = x.astype(np.float64) - x.astype(np.float64).max(axis=1, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


KERNELS = {"softmax": (softmax.softmax, _softmax_ref), "log_softmax": (op_zoo.log_softmax, _log_softmax_ref)}


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (3, 4097)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(KERNELS))
def test_row_kernel_odd_shapes(name, shape):
    x = randn(shape, "float32", scale=3.0, seed=np.random.default_rng(7))
    build, ref = KERNELS[name]
    assert_close(build(shape[1])(x).astype(np.float64), ref(x), atol=1e-5, rtol=1e-5, msg=f"{name} {shape}")


@pytest.mark.parametrize("name", list(KERNELS))
def test_row_kernel_special_rows(name):
    """Rows holding a NaN, +inf, a -inf, all -inf: the float64 reference's NaN where it has one."""
    N = 4097
    x = randn((5, N), "float32", scale=3.0, seed=np.random.default_rng(8))
    x[0, 100] = np.nan
    x[1, 4096] = np.inf
    x[2, 0] = -np.inf
    x[3, :] = -np.inf
    build, ref = KERNELS[name]
    y, want = build(N)(x).astype(np.float64), ref(x)
    assert np.array_equal(np.isnan(y), np.isnan(want)), name
    ok = ~np.isnan(want)
    assert_close(y[ok], want[ok], atol=1e-5, rtol=1e-5, msg=f"{name} special rows")
