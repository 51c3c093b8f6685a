"""Session 29 review of the session's merges (h-review): one small kernel per finding fixed.

F1 (widen_scalars, h-int64): a bitwise operator or `<<` of an int32 product that leaves int32,
compared or divided before a store, is the int64 value on the cpu target (docs/language.md:
"integers are otherwise computed in int64 ... a `//` of an unstored `~x` or `x << n` sees the int64
value"); on ascend910b the pass cast the widened product back to int32 under `&`, `|`, `^`, `~`, `<<`
(the value wrapped before the `//`). `>>` wraps its operand first on every target (kept). Checked
on cpu and ascend910b (simulator, checker on) against Python integers."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import TARGET, run_checked


def _bits_kernel(n):
    @T.prim_func
    def bits(X: T.Tensor((n, 2), "int32"), s: T.int32, Y: T.Tensor((n, 7), "int32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n, 2), "int32")
            o = T.alloc_fragment((n, 7), "int32")
            T.copy(X, t)
            for i in T.serial(n):
                a = t[i, 0]
                c = t[i, 1]
                o[i, 0] = ((a * c) | 0) // 65536
                o[i, 1] = ((a * c) ^ 1) % 1000003
                o[i, 2] = ((a * c) & -2) // 65536
                o[i, 3] = (~(a * c)) // 65536
                o[i, 4] = ((a * c) << 1) // 65536
                o[i, 5] = ((a * c) << s) // 65536   # s = 33: the count modulo 32 is 1
                o[i, 6] = (a * c) >> 16             # wraps into int32 first (docs/language.md)
            T.copy(o, Y)
    return bits


def _w32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_bitwise_of_a_widened_product_keeps_int64(target):
    x = np.array([[100000, 100000], [2**31 - 1, 3], [-100000, 100000], [-7, 1], [65536, 65536]], np.int32)
    ref = []
    for a, c in x.astype(object):
        p = int(a) * int(c)
        ref.append([(p | 0) // 65536, (p ^ 1) % 1000003, (p & -2) // 65536, (~p) // 65536,
                    (p << 1) // 65536, (p << 1) // 65536, _w32(p) >> 16])
    ref = np.array([[_w32(v) for v in r] for r in ref], np.int64).astype(np.int32)  # wrapped on store
    k = tw.compile(_bits_kernel(x.shape[0]), out_idx=[2], target=target)
    got = k(x, 33) if target == "cpu" else run_checked(k, x, 33)
    np.testing.assert_array_equal(got, ref)
