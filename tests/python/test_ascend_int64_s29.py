"""Integer scalar arithmetic is computed in int64 on every target (docs/language.md), the printed
AscendC included (session 29, h-int64): the widen_scalars pass casts one operand of an integer
+, -, *, unary - to int64 where the result may leave int32 (the printed C++ would compute it in
`int`, undefined on overflow), and leaves index arithmetic it proves inside int32 as it was. Float
scalar operations are not contracted on ascend910b (`#pragma clang fp contract(off)` in the printed
kernel, -ffp-contract=off in its CMake file; the simulator rounds each operation).

One small kernel per property, fixed inputs; the ascend910b results are the simulator's (checker on)."""
import re

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET, run_checked

TARGETS = ["cpu", TARGET]


def run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


# ---- +, -, *, unary - of int32 scalars: the int64 value ---------------------------------------------

def arith_kernel(n):
    @T.prim_func
    def arith(X: T.Tensor((n, 2), "int32"), Y: T.Tensor((n, 4), "int32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n, 2), "int32")
            o = T.alloc_fragment((n, 4), "int32")
            T.copy(X, t)
            for i in T.serial(n):
                a = t[i, 0]
                c = t[i, 1]
                o[i, 0] = (a * c) // 65536
                o[i, 1] = 1 if a + c > 0 else 0
                o[i, 2] = (a - c) // 4
                o[i, 3] = (-a) // 2
            T.copy(o, Y)
    return arith


@pytest.mark.parametrize("target", TARGETS)
def test_int32_scalar_arithmetic_in_int64(target):
    big = 2**31 - 1
    x = np.array([[100000, 100000], [big, 1], [-100000, 100000], [-big - 1, big]], np.int32)
    k = tw.compile(arith_kernel(x.shape[0]), out_idx=[1], target=target)
    a, c = x[:, 0].astype(np.int64), x[:, 1].astype(np.int64)
    ref = np.stack([(a * c) // 65536, (a + c > 0).astype(np.int64), (a - c) // 4, (-a) // 2], 1)
    np.testing.assert_array_equal(run(k, target, x), ref.astype(np.int32))  # wrapped on store
    if target != "cpu":
        src = k.get_source()
        for op in ("*", "+", "-"):   # the IR's operands have one type: both cast
            assert f"(static_cast<int64_t>(a) {op} static_cast<int64_t>(c))" in src, src
        assert "(-static_cast<int64_t>(a))" in src, src


# ---- a loop index times a run-time scalar: not provable, widened --------------------------------------

def loop_scalar_kernel(n):
    @T.prim_func
    def loop_scalar(X: T.Tensor((n,), "int32"), s: T.int32, Y: T.Tensor((n,), "int32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n,), "int32")
            o = T.alloc_fragment((n,), "int32")
            T.copy(X, t)
            for i in T.serial(n):
                e = t[i]   # a store at a loaded index: a scalar-unit loop, not a vector map
                o[e] = (i * s) // 65536
            T.copy(o, Y)
    return loop_scalar


@pytest.mark.parametrize("target", TARGETS)
def test_loop_index_times_runtime_scalar(target):
    n, s = 5, 2**30
    x = np.array([4, 2, 0, 1, 3], np.int32)   # a permutation
    k = tw.compile(loop_scalar_kernel(n), out_idx=[2], target=target)
    ref = np.zeros(n, np.int64)
    ref[x] = (np.arange(n, dtype=np.int64) * s) // 65536
    np.testing.assert_array_equal(run(k, target, x, s), ref.astype(np.int32))
    if target != "cpu":
        src = k.get_source()
        assert re.search(r"\(static_cast<int64_t>\(\w+\) \* static_cast<int64_t>\(s\)\)", src), src


# ---- index arithmetic over block and loop indices: proved inside int32, printed unchanged --------------

def block_kernel(nb, n):
    @T.prim_func
    def blocks(Y: T.Tensor((nb, n), "int32")):
        with T.Kernel(nb) as b:
            o = T.alloc_fragment((n,), "int32")
            for j in T.serial(n):
                o[j] = b * 100000 + j * 7 - 3
            T.copy(o, Y[b, 0])
    return blocks


@pytest.mark.parametrize("target", TARGETS)
def test_block_index_arithmetic_unchanged(target):
    nb, n = 3, 5
    k = tw.compile(block_kernel(nb, n), out_idx=[0], target=target)
    ref = np.arange(nb)[:, None] * 100000 + np.arange(n)[None, :] * 7 - 3
    np.testing.assert_array_equal(run(k, target), ref.astype(np.int32))
    if target != "cpu":
        assert "static_cast<int64_t>" not in k.get_source(), k.get_source()


# ---- float scalars: p * q - r is not fused on ascend910b --------------------------------------------------

def fma_kernel(n):
    @T.prim_func
    def fma(X: T.Tensor((n, 3), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n, 3), "float32")
            o = T.alloc_fragment((n,), "float32")
            T.copy(X, t)
            for i in T.serial(n):
                p = t[i, 0]
                q = t[i, 1]
                r = t[i, 2]
                o[i] = p * q - r
            T.copy(o, Y)
    return fma


def test_float_product_not_contracted():
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: rounded to float32 it is 1 + 2^-11 (a tie to even), so the
    # unfused p * q - r is 0; an FMA gives 2^-24
    e = np.float32(1 + 2.0**-12)
    x = np.array([[e, e, 1 + 2.0**-11], [1.5, 2.0, 0.5]], np.float32)
    k = tw.compile(fma_kernel(x.shape[0]), out_idx=[1], target=TARGET)
    np.testing.assert_array_equal(run_checked(k, x), np.array([0.0, 2.5], np.float32))
    src = k.get_source()
    assert "#if defined(__clang__)\n#pragma clang fp contract(off)\n#endif" in src, src
    kc = tw.compile(fma_kernel(x.shape[0]), out_idx=[1], target="cpu")
    got = kc(x)   # the cpu target's g++ may fuse (docs/language.md): either value
    assert got[0] in (0.0, np.float32(2.0**-24)) and got[1] == 2.5, got
