"""Session 32 (h-letfix32; issue 13: cpu == ascend910b, never a silent wrong answer; docs/ascend.md
"Session 32: lets and 8-bit fills in maps (h-letfix32)"). Findings in legalize_vector,
each with its neighbours here:
- a let in a T.Parallel map is its value where it is bound: one that reads a tile a later store of
  the map writes, and is read after that store, is computed into a temporary first (elif32);
- an index-mask fill of an int8 / uint8 tile (`y = T.where(j > c, v, y)`, in place or not) is done
  in float16 (exact Casts both ways) instead of 8-bit Adds / Duplicate the Vector core lacks (elif32).
Every kernel runs on cpu and on ascend910b (simulator, checker on: `prof["reports"] == []`) against
numpy; shapes with tails (37 columns, 3 rows, one-element maps). Exact everywhere (small integers and
halves, exact in every dtype tested).
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402
from test_elif32_s32 import _run, _same, _values  # noqa: E402  (the same helpers)

TARGETS = ["cpu", TARGET]
R, C = 3, 37


# --------------------------------------------------------------------------- a let read after a store clobbers its source
def _let_then_store(dt):
    @T.prim_func
    def k(X: T.Tensor((R, C), dt), Y: T.Tensor((R, C), dt), Z: T.Tensor((R, C), dt), W: T.Tensor((R, C), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), dt)
            y = T.alloc_fragment((R, C), dt)
            z = T.alloc_fragment((R, C), dt)
            w = T.alloc_fragment((R, C), dt)
            T.copy(X, x)
            T.copy(X, y)
            for i, j in T.Parallel(R, C):
                t = y[i, j] * 2   # y's value here
                u = t + x[i, j]   # a let of a let
                y[i, j] = x[i, j] + 1
                z[i, j] = t + y[i, j]  # read by two statements, with the new y
                w[i, j] = u - t
            T.copy(y, Y)
            T.copy(z, Z)
            T.copy(w, W)
    return k


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "int32", "int8"])
def test_let_is_its_value_where_bound(target, dt):
    x = _values(dt, (R, C), 1)
    y, z, w = _run(_let_then_store(dt), target, [1, 2, 3], x)
    f = x.astype(np.float64)
    np_dt = x.dtype
    _same(y, (f + 1).astype(np_dt))
    _same(z, (f * 2 + f + 1).astype(np_dt))
    _same(w, f.astype(np_dt))


def _let_as_computed(dt, odt, mul):
    @T.prim_func
    def k(X: T.Tensor((R, C), dt), Z: T.Tensor((R, C), odt), W: T.Tensor((R, C), dt)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((R, C), dt)
            z = T.alloc_fragment((R, C), odt)
            w = T.alloc_fragment((R, C), dt)
            T.copy(X, y)
            for i, j in T.Parallel(R, C):
                t = y[i, j] * mul  # the value as computed: 8-bit unwrapped, 16-bit unrounded
                y[i, j] = 1
                z[i, j] = t
                w[i, j] = t - 100
            T.copy(z, Z)
            T.copy(w, W)
    return k


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt,odt,mul", [("int8", "int32", 20), ("uint8", "int32", 3), ("bfloat16", "float32", 1.1),
                                        ("float16", "float16", 300.0)])
def test_materialised_let_keeps_its_value_as_computed(target, dt, odt, mul):
    """The temporary is float32 for 8-bit and 16-bit lets: rounded / wrapped only where stored, as on cpu."""
    rng = np.random.default_rng(4)
    x = rng.integers(0 if dt == "uint8" else -100, 100, (R, C)).astype(tw.testing.np_dtype(dt))
    z, w = _run(_let_as_computed(dt, odt, mul), target, [1, 2], x)
    f = x.astype(np.float64)
    if dt in ("int8", "uint8"):
        t = f.astype(np.int64) * mul
        _same(z, t.astype(odt))
        _same(w, (t - 100).astype(dt))
    else:  # t computed in float32, rounded once at each store
        t = x.astype(np.float32) * np.float32(mul)
        _same(z, t.astype(tw.testing.np_dtype(odt)))
        _same(w, (t - np.float32(100)).astype(x.dtype))


@T.prim_func
def _let_other_tile(X: T.Tensor((1,), "float32"), Y0: T.Tensor((1,), "float32"), Y: T.Tensor((1,), "float32"),
                    Z: T.Tensor((1,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((1,), "float32")
        y = T.alloc_fragment((1,), "float32")
        z = T.alloc_fragment((1,), "float32")
        T.copy(X, x)
        T.copy(Y0, y)
        for i in T.Parallel(1):
            t = x[i] - y[i]  # reads x and y; only y is stored after it
            s = x[i] * 3     # reads no stored tile: substituted as before
            y[i] = 5.0
            z[i] = t * s + y[i]
        T.copy(y, Y)
        T.copy(z, Z)


@pytest.mark.parametrize("target", TARGETS)
def test_let_of_two_tiles_one_stored_one_element_map(target):
    x, y0 = np.array([3.0], np.float32), np.array([1.5], np.float32)
    y, z = _run(_let_other_tile, target, [2, 3], x, y0)
    _same(y, np.array([5.0], np.float32))
    _same(z, ((x - y0) * (x * 3) + 5).astype(np.float32))


# --------------------------------------------------------------------------- 8-bit index-mask fills
def _mask_fill(dt, fill, in_place):
    @T.prim_func
    def k(X: T.Tensor((R, C), dt), Y: T.Tensor((R, C), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), dt)
            y = T.alloc_fragment((R, C), dt)
            T.copy(X, x)
            if in_place:
                T.copy(X, y)
                for i, j in T.Parallel(R, C):
                    y[i, j] = T.where(j > C - 5, fill, y[i, j])
                for i, j in T.Parallel(R, C):
                    y[i, j] = T.where(j >= i + 3, y[i, j], fill)  # row-dependent prefix
            else:
                for i, j in T.Parallel(R, C):
                    y[i, j] = T.where(j < 20, x[i, j], fill)
            T.copy(y, Y)
    return k


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt,fill", [("int8", 0), ("int8", -3), ("uint8", 0), ("uint8", 200)])
@pytest.mark.parametrize("in_place", [True, False])
def test_8bit_index_mask_fill(target, dt, fill, in_place):
    x = _values(dt, (R, C), 2)
    i, j = np.arange(R)[:, None], np.arange(C)[None, :]
    if in_place:
        want = np.where(j > C - 5, fill, x)
        want = np.where(j >= i + 3, want, fill)
    else:
        want = np.where(j < 20, x, fill)
    _same(_run(_mask_fill(dt, fill, in_place), target, [-1], x), want.astype(dt))
