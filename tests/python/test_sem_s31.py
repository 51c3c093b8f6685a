"""Session 31 (h-sem31): a let, an annotated let and a cast to an expression's own dtype, on cpu and ascend910b
(simulator, checker on: `prof["reports"] == []`), against the language's rule (docs/language.md "Dtype
conversions"): integer scalar arithmetic is computed in int64 and float16 / bfloat16 arithmetic in float32; a let
without an annotation holds that value; an annotated let `x: dtype = ...`, `T.cast(x, dtype)`, a store and a copy
convert it (wrap / round), also when the expression's dtype already is `dtype`.

hunt31 F2 (ascend910b declared a let with its dtype: wrapped / rounded at the let) and F7 (a same-dtype cast
converted nothing, both targets): the hunter's reproducers (tests/python/test_hunt_s31.py, strict xfails there)
are copied here. Every result is exact (integers, products of halves, powers of two), compared with ==.
"""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]


def _run(prim, target, *args):
    k = tw.compile(prim, target=target, out_idx=[-1])
    return k(*args) if target == "cpu" else run_checked(k, *args)


# --------------------------------------------------------------------------- F2: a let holds the computed value
# (hunt31's int32 and uint8 reproducers are test_hunt_s31.py's, passing since this fix)
@T.prim_func
def _let_half(A: T.Tensor((16,), "float16"), B: T.Tensor((16,), "bfloat16"), Z: T.Tensor((5,), "float32")):
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((16,), "float16")
        b = T.alloc_fragment((16,), "bfloat16")
        z = T.alloc_fragment((5,), "float32")
        T.copy(A, a)
        T.copy(B, b)
        h = a[0] * a[1]  # 90000 in float32: no float16 rounding (inf) at the let
        g = b[0] + b[1]  # 257 in float32: bfloat16 would round it to 256
        z[0] = h / 100.0
        z[1] = g - b[0]
        hs: T.float16 = a[0] * a[1]  # annotated: rounded to float16 here (inf)
        gs: T.bfloat16 = b[0] + b[1]  # annotated: 256
        z[2] = hs / 100.0
        z[3] = gs - b[0]
        z[4] = T.cast(h, "float16") / 100.0  # the cast of the let's name rounds its float32 value: inf
        T.copy(z, Z)


@pytest.mark.parametrize("target", TARGETS)
def test_f2_float16_and_bfloat16_lets_keep_float32_annotated_lets_round(target):
    a = np.zeros(16, np.float16)
    a[0], a[1] = 300, 300
    b = np.zeros(16, ml_dtypes.bfloat16)
    b[0], b[1] = 256, 1
    assert _run(_let_half, target, a, b).tolist() == [900.0, 1.0, float("inf"), 0.0, float("inf")]


@T.prim_func
def _ann_int(U: T.Tensor((32,), "uint8"), X: T.Tensor((32,), "int8"), Z: T.Tensor((6,), "int32")):
    with T.Kernel(1) as bx:
        u = T.alloc_fragment((32,), "uint8")
        x = T.alloc_fragment((32,), "int8")
        z = T.alloc_fragment((6,), "int32")
        T.copy(U, u)
        T.copy(X, x)
        d: T.uint8 = u[0] - u[1]  # wrapped at the annotation: 9
        p: T.int8 = x[0] << 4  # 496 wrapped into int8: -16
        z[0] = d
        z[1] = d // 2
        z[2] = p // 16
        z[3] = T.where(d < 0, 1, 0)
        w = u[0] - u[1]  # a let: -247
        z[4] = T.cast(w, "uint8")  # the cast of a let's name converts its value: 9
        z[5] = T.cast(w, "int32")
        T.copy(z, Z)


@pytest.mark.parametrize("target", TARGETS)
def test_annotated_integer_lets_wrap(target):
    u, x = np.zeros(32, np.uint8), np.zeros(32, np.int8)
    u[0], u[1], x[0] = 3, 250, 0x1F
    assert _run(_ann_int, target, u, x).tolist() == [9, 4, -1, 0, 9, -247]


# --------------------------------------------------------------------------- F7: T.cast to the expression's own dtype
# (hunt31's int8 reproducer is test_hunt_s31.py's, passing since this fix)
@T.prim_func
def _cast_own_scalar(U: T.Tensor((32,), "uint8"), A: T.Tensor((16,), "float16"), Z: T.Tensor((2,), "float32")):
    with T.Kernel(1) as bx:
        u = T.alloc_fragment((32,), "uint8")
        a = T.alloc_fragment((16,), "float16")
        z = T.alloc_fragment((2,), "float32")
        T.copy(U, u)
        T.copy(A, a)
        z[0] = T.cast(u[0] - u[1], "uint8") // 2  # -247 wrapped: 9 // 2
        z[1] = T.cast(a[0] * a[1], "float16") / 100.0  # rounded to float16: inf
        T.copy(z, Z)


@pytest.mark.parametrize("target", TARGETS)
def test_f7_same_dtype_cast_of_scalar_arithmetic(target):
    u, a = np.zeros(32, np.uint8), np.zeros(16, np.float16)
    u[0], u[1], a[0], a[1] = 3, 250, 300, 300
    assert _run(_cast_own_scalar, target, u, a).tolist() == [4.0, float("inf")]


@T.prim_func
def _cast_own_map(U: T.Tensor((33,), "uint8"), A: T.Tensor((33,), "float16"), Z: T.Tensor((33,), "int32"),
                  Y: T.Tensor((33,), "float32")):
    with T.Kernel(1) as bx:
        u = T.alloc_fragment((33,), "uint8")
        a = T.alloc_fragment((33,), "float16")
        z = T.alloc_fragment((33,), "int32")
        y = T.alloc_fragment((33,), "float32")
        T.copy(U, u)
        T.copy(A, a)
        for i in T.Parallel(33):
            z[i] = T.cast(u[i] - 200, "uint8") // 2
            y[i] = T.cast(a[i] * a[i], "float16") / 4.0
        T.copy(z, Z)
        T.copy(y, Y)


@pytest.mark.parametrize("target", TARGETS)
def test_f7_same_dtype_cast_in_a_map(target):
    """33 elements: a vector tail. u - 200 wrapped into uint8, then // 2; a * a rounded to float16 (inf past 65504)."""
    u = np.arange(33, dtype=np.uint8) * 7
    a = np.zeros(33, np.float16)
    a[:4] = [300, 2, -1.5, 256]
    a[4:] = np.arange(29) * 0.25
    k = tw.compile(_cast_own_map, target=target, out_idx=[-2, -1])
    z, y = k(u, a) if target == "cpu" else run_checked(k, u, a)
    assert z.tolist() == [int((int(v) - 200) % 256) // 2 for v in u]
    with np.errstate(over="ignore"):
        ref = (a.astype(np.float32) * a.astype(np.float32)).astype(np.float16).astype(np.float32) / 4
    assert y.tolist() == ref.tolist()
