"""Session 40, h-math40 (issue 13; docs/ascend.md "Session 40: a per-row factor read down a column"): a column of a
tile read as a per-row value in a 2-D map (the timestep embedding's t = z[i, 0], a block scale sa[i, kb] at a
serial loop's kb, an int32 id ids[i, k]) runs on ascend910b: legalize_vector gathers the column into a 1-D tile
first (the form the located error's hint named). Against float64 numpy at odd shapes (row tails, one row, one
column), cpu == ascend910b bit for bit; a map that writes the tile it reads down a column stays a located error.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402


def _emb(M, N, K, c, dt, bm=8):
    """y[i, j] = cos / sin(z[i, c] * fr[j]) ([cos, sin] halves, the diffusion timestep embedding with the frequency
    table an input); w[i, j] = x[i, j] * s[i, k] summed over a serial k (a scale per row and block);
    v[i, j] = x[i, j] + ids[i, k] for each k (int32)."""
    H = max(N // 2, 1)

    @T.prim_func
    def main(Z: T.Tensor((M, K), dt), Fr: T.Tensor((N,), "float32"), X: T.Tensor((M, N), dt),
             S: T.Tensor((M, K), dt), Ids: T.Tensor((M, K), "int32"), Y: T.Tensor((M, N), "float32"),
             W: T.Tensor((M, N), "float32"), V: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            z = T.alloc_fragment((bm, K), dt)
            fr = T.alloc_fragment((N,), "float32")
            x = T.alloc_fragment((bm, N), dt)
            s = T.alloc_fragment((bm, K), dt)
            ids = T.alloc_fragment((bm, K), "int32")
            y = T.alloc_fragment((bm, N), "float32")
            w = T.alloc_fragment((bm, N), "float32")
            v = T.alloc_fragment((bm, N), "int32")
            T.copy(Z[bx * bm, 0], z)
            T.copy(Fr, fr)
            T.copy(X[bx * bm, 0], x)
            T.copy(S[bx * bm, 0], s)
            T.copy(Ids[bx * bm, 0], ids)
            for i, j in T.Parallel(bm, N):
                y[i, j] = T.where(j < H, T.cos(z[i, c] * fr[j]), T.sin(z[i, c] * fr[j]))
            T.clear(w)
            for k in T.serial(K):
                for i, j in T.Parallel(bm, N):
                    w[i, j] = w[i, j] + x[i, j] * s[i, k]
            T.clear(v)
            for k in T.serial(K):
                for i, j in T.Parallel(bm, N):
                    v[i, j] = v[i, j] + ids[i, k] * (j + 1)
            T.copy(y, Y[bx * bm, 0])
            T.copy(w, W[bx * bm, 0])
            T.copy(v, V[bx * bm, 0])
    return main


def _bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


@pytest.mark.parametrize("M, N, K, c, dt", [(13, 37, 3, 2, "float32"), (1, 1, 1, 0, "float32"), (37, 8, 1, 0, "bfloat16"),
                                            (9, 6, 2, 1, "float16")])
def test_per_row_factor_read_down_a_column(M, N, K, c, dt):
    rng = np.random.default_rng(40)
    nd = tw.testing.np_dtype(dt)  # 16-bit inputs: values the dtype holds
    z = (rng.random((M, K)) * (1000 if dt == "float32" else 60)).astype(nd)
    H = max(N // 2, 1)
    fr = np.exp(-np.log(10000.0) * (np.arange(N) % H) / H).astype(np.float32)
    x = rng.standard_normal((M, N)).astype(nd)
    s = (0.5 + rng.random((M, K))).astype(nd)
    ids = rng.integers(-1000, 1000, (M, K)).astype(np.int32)
    ins = [z, fr, x, s, ids]
    prim = _emb(M, N, K, c, dt)
    got = {t: run_on(prim, t, [5, 6, 7], *[a.copy() for a in ins]) for t in ("cpu", TARGET)}
    # float64 references: the angle the kernel rounds to float32, then sin / cos within the functions' 1.53e-7;
    # the block-scaled sum within K float32 roundings; the int32 sum exact
    t = (z[:, c:c + 1].astype(np.float64) * fr.astype(np.float64)).astype(np.float32).astype(np.float64)
    ref_y = np.where(np.arange(N) < H, np.cos(t), np.sin(t))
    ref_w = (x.astype(np.float64)[:, :, None] * s.astype(np.float64)[:, None, :]).sum(-1)
    ref_v = (ids.astype(np.int64).sum(1)[:, None] * (np.arange(N) + 1)).astype(np.int32)
    for tgt in ("cpu", TARGET):
        y, w, v = (np.asarray(a) for a in got[tgt])
        np.testing.assert_allclose(y, ref_y, atol=2.0**-22, rtol=0)
        np.testing.assert_allclose(w, ref_w, atol=1e-5 * K, rtol=1e-5 * K)
        np.testing.assert_array_equal(v, ref_v)
    for a, b in zip(got["cpu"], got[TARGET]):
        np.testing.assert_array_equal(_bits(a), _bits(b))


def _written(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                x[i, j] = x[i, j] / x[i, 0]
            T.copy(x, Y)
    return main


def test_a_map_writing_the_column_it_reads_stays_a_located_error():
    # x[i, 0] changes in the map that reads it: the result would depend on the order of the elements, which a
    # T.Parallel map leaves open; since session 41 (h-selfread41) the error of transform/independent_maps.h on every
    # target, its hint the tile copied first
    for target in ("cpu", TARGET):
        with pytest.raises(tw.TilewrightError, match=r"reads it at x\[i, 0\]: iteration \(i=0, j=1\) reads the element") as e:
            tw.compile(_written(13, 8), target=target, out_idx=[-1])
        assert "test_math40_s40.py:" in str(e.value) and "T.copy(x, x_old)" in str(e.value), str(e.value)


def _one_row(C):
    @T.prim_func
    def main(X: T.Tensor((1, C), "float32"), Y: T.Tensor((1, C), "float32")):
        with T.Kernel(1) as bx:
            w = T.alloc_fragment((1, C), "float32")
            y = T.alloc_fragment((1, C), "float32")
            T.copy(X, w)
            for i, j in T.Parallel(1, C):
                y[i, j] = T.exp(w[i, 0] * 0.7) + w[i, j]
            T.copy(y, Y)
    return main


def test_m4_a_call_of_a_column_in_a_one_row_map():
    x = (np.arange(5, dtype=np.float32) / 7 - 0.3).reshape(1, 5)
    X = x.astype(np.float64)
    got = run_on(_one_row(5), TARGET, [1], x)
    np.testing.assert_allclose(np.asarray(got), np.exp(X[:, :1] * 0.7) + X, rtol=1e-6, atol=1e-6)
