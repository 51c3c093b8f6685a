"""Session 38's adversarial review (h-review38, /work/review38-findings.txt): the session's compiler changes tried
with inputs their authors did not, on cpu and ascend910b (simulator, checker on) against numpy's exact answers."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402


# R1 (fixed): an int64 index tile compared with the map's column index where the int64 value reads that index too
# (k == ix[i, k], k < ix[i, k] of a 2-D tile; j == ix[j] in a 1-D map) was refused on ascend910b with "conversion
# from int64 to float32: no Cast" (a conversion the user never wrote), while x[i, ix[i, k] % N] (port38 F3) ran:
# legalize_vector's comparison narrowing took only an int64 value free of the column index. Values past int32
# that wrap onto a compared index (2^33 + 1 == 1 after a wrapping cast) must still compare unequal: the value is
# clamped to one past either end of the index's range, not wrapped.
def _compare_with_index(M, K, bm, form):
    @T.prim_func
    def main(Ix: T.Tensor((M, K), "int64"), Y: T.Tensor((M, K), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            ix = T.alloc_fragment((bm, K), "int64")
            y = T.alloc_fragment((bm, K), "float32")
            T.copy(Ix[bx * bm, 0], ix)
            for i, k in T.Parallel(bm, K):
                if form == "eq":
                    y[i, k] = T.where(ix[i, k] == k, 1.0, 0.0)
                elif form == "lt":
                    y[i, k] = T.where(k + 1 < ix[i, k], 2.0, -1.0)
                else:  # the value on the right, a row offset in the index expression
                    y[i, k] = T.where(k - i >= ix[i, k], 1.0, 0.0)
            T.copy(y, Y[bx * bm, 0])
    return main


def _compare_1d(N, form):
    @T.prim_func
    def main(Ix: T.Tensor((N,), "int64"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            ix = T.alloc_fragment((N,), "int64")
            y = T.alloc_fragment((N,), "float32")
            T.copy(Ix, ix)
            for j in T.Parallel(N):
                y[j] = T.where(ix[j] != j, 1.0, 0.0)
            T.copy(y, Y)
    return main


def _index_values(shape, seed):
    rng = np.random.default_rng(seed)
    v = rng.integers(-3, shape[-1] + 3, shape).astype(np.int64)
    flat = v.reshape(-1)
    flat[::3] += 2 ** 33  # wraps onto the same small value in int32
    flat[1::7] -= 2 ** 32
    flat[2::11] = np.iinfo(np.int64).min
    flat[4::13] = np.iinfo(np.int64).max
    return v


@pytest.mark.parametrize("form", ["eq", "lt", "ge_rows"])
def test_r1_int64_tile_compared_with_its_own_column_index(form):
    M, K, bm = 13, 7, 4
    ix = _index_values((M, K), 1)
    k = np.arange(K)[None, :]
    i = np.arange(M)[:, None] % bm
    ref = {"eq": np.where(ix == k, 1.0, 0.0), "lt": np.where(k + 1 < ix, 2.0, -1.0),
           "ge_rows": np.where(k - i >= ix, 1.0, 0.0)}[form].astype(np.float32)
    prim = _compare_with_index(M, K, bm, form)
    np.testing.assert_array_equal(tw.compile(prim, target="cpu", out_idx=[-1])(ix), ref)
    p = tw.compile(prim, target=TARGET, out_idx=[-1]).profile(ix)
    assert p["reports"] == [], p["reports"]
    np.testing.assert_array_equal(p.outputs, ref)


def test_r1_int64_vector_compared_with_its_index():
    ix = _index_values((29,), 2)
    ix[5] = 5
    ref = np.where(ix != np.arange(29), 1.0, 0.0).astype(np.float32)
    prim = _compare_1d(29, "ne")
    np.testing.assert_array_equal(tw.compile(prim, target="cpu", out_idx=[-1])(ix), ref)
    p = tw.compile(prim, target=TARGET, out_idx=[-1]).profile(ix)
    assert p["reports"] == [], p["reports"]
    np.testing.assert_array_equal(p.outputs, ref)


# R2 (fixed; older than session 38): a function expand_math writes out (T.tanh, T.sigmoid, T.erf, ...) in a T.where
# condition, T.where(T.tanh(x[i, j]) > 0.5, ..), was "T.tanh is not supported on Ascend vector units yet" on
# ascend910b, while the same call in the map's value ran: expand_math kept every condition as written (index masks).
def _call_in_condition(M, N, dt):
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dt)
            y = T.alloc_fragment((M, N), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                y[i, j] = T.where(T.tanh(x[i, j]) > 0.5, 1.0, 0.0) + T.where(T.sigmoid(x[i, j]) < 0.25, 2.0, 0.0) + \
                    T.where(T.erf(x[i, j]) >= -0.5, 4.0, 0.0)
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_r2_expanded_function_in_a_where_condition(dt):
    import math
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 37)) * 2).astype(dt)
    x64 = x.astype(np.float64)
    t, s, e = np.tanh(x64), 1 / (1 + np.exp(-x64)), np.vectorize(math.erf)(x64)
    # values within 1e-2 of a threshold moved off it: the answer then does not hang on the last bit
    near = (np.abs(t - 0.5) < 1e-2) | (np.abs(s - 0.25) < 1e-2) | (np.abs(e + 0.5) < 1e-2)
    x[near] = np.asarray(3.0, dt)
    x64 = x.astype(np.float64)
    t, s, e = np.tanh(x64), 1 / (1 + np.exp(-x64)), np.vectorize(math.erf)(x64)
    ref = ((t > 0.5) * 1.0 + (s < 0.25) * 2.0 + (e >= -0.5) * 4.0).astype(np.float32)
    prim = _call_in_condition(3, 37, dt)
    np.testing.assert_array_equal(tw.compile(prim, target="cpu", out_idx=[-1])(x), ref)
    p = tw.compile(prim, target=TARGET, out_idx=[-1]).profile(x)
    assert p["reports"] == [], p["reports"]
    np.testing.assert_array_equal(p.outputs, ref)
