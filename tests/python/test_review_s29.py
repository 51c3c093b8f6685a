"""Session 29 review of the session's merges (h-review): one small kernel per finding fixed.

F1 (widen_scalars, h-int64): a bitwise operator or `<<` of an int32 product that leaves int32,
compared or divided before a store, is the int64 value on the cpu target (docs/language.md:
"integers are otherwise computed in int64 ... a `//` of an unstored `~x` or `x << n` sees the int64
value"); on ascend910b the pass cast the widened product back to int32 under `&`, `|`, `^`, `~`, `<<`
(the value wrapped before the `//`). `>>` wraps its operand first on every target (kept). Checked
on cpu and ascend910b (simulator, checker on) against Python integers.

F4 (open, xfail strict): an if / else in a key loop whose arms each hand gemm scores to the vector
code, one arm float16 scores (float32), the other int8 (int32): plan_memory puts both arms' landing
tiles at the same UB bytes, and insert_sync orders nothing between the vector read of one arm's tile
and the MTE2 write of the other arm's in the next iteration (the checker's data race); the same kernel
with two separate ifs runs clean. Reproduces with h-window's split_cube_vector reverted: not the flag
sharing."""
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


BM, BN, D = 16, 16, 32


def _arms_kernel(M, N, two_ifs):
    """two_ifs: the int8 arm is a second if of the opposite condition; else the first if's else arm."""
    if not two_ifs:
        return _if_else_kernel(M, N)
    nk = N // BN

    @T.prim_func
    def arms(Q: T.Tensor((M, D), "float16"), K: T.Tensor((N, D), "float16"), Qi: T.Tensor((M, D), "int8"),
             Ki: T.Tensor((N, D), "int8"), O: T.Tensor((M, BN), "float32")):
        with T.Kernel(M // BM) as by:
            q = T.alloc_shared((BM, D), "float16")
            p = T.alloc_fragment((BM, D), "float16")
            kt = T.alloc_shared((BN, D), "float16")
            qi = T.alloc_shared((BM, D), "int8")
            ki = T.alloc_shared((BN, D), "int8")
            s = T.alloc_fragment((BM, BN), "float32")
            si = T.alloc_fragment((BM, BN), "int32")
            acc = T.alloc_fragment((BM, BN), "float32")
            T.copy(Q[by * BM, 0], p)
            T.copy(Qi[by * BM, 0], qi)
            T.fill(acc, 0)
            for kk in T.serial(nk):
                if (kk + by) % 2 == 0:
                    T.copy(K[kk * BN, 0], kt)
                    for i, j in T.Parallel(BM, D):
                        p[i, j] = p[i, j] * 0.5
                    T.copy(p, q)
                    T.gemm(q, kt, s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(BM, BN):
                        acc[i, j] += s[i, j]
                if two_ifs:
                    if (kk + by) % 2 == 1:
                        T.copy(Ki[kk * BN, 0], ki)
                        T.gemm(qi, ki, si, transpose_B=True, clear_accum=True)
                        for i, j in T.Parallel(BM, BN):
                            acc[i, j] += T.cast(si[i, j], "float32") * 0.25
            T.copy(acc, O[by * BM, 0])

    return arms


def _if_else_kernel(M, N):
    nk = N // BN

    @T.prim_func
    def arms(Q: T.Tensor((M, D), "float16"), K: T.Tensor((N, D), "float16"), Qi: T.Tensor((M, D), "int8"),
             Ki: T.Tensor((N, D), "int8"), O: T.Tensor((M, BN), "float32")):
        with T.Kernel(M // BM) as by:
            q = T.alloc_shared((BM, D), "float16")
            p = T.alloc_fragment((BM, D), "float16")
            kt = T.alloc_shared((BN, D), "float16")
            qi = T.alloc_shared((BM, D), "int8")
            ki = T.alloc_shared((BN, D), "int8")
            s = T.alloc_fragment((BM, BN), "float32")
            si = T.alloc_fragment((BM, BN), "int32")
            acc = T.alloc_fragment((BM, BN), "float32")
            T.copy(Q[by * BM, 0], p)
            T.copy(Qi[by * BM, 0], qi)
            T.fill(acc, 0)
            for kk in T.serial(nk):
                if (kk + by) % 2 == 0:
                    T.copy(K[kk * BN, 0], kt)
                    for i, j in T.Parallel(BM, D):
                        p[i, j] = p[i, j] * 0.5
                    T.copy(p, q)
                    T.gemm(q, kt, s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(BM, BN):
                        acc[i, j] += s[i, j]
                else:
                    T.copy(Ki[kk * BN, 0], ki)
                    T.gemm(qi, ki, si, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(BM, BN):
                        acc[i, j] += T.cast(si[i, j], "float32") * 0.25
            T.copy(acc, O[by * BM, 0])

    return arms


def _arms_ref(Q, K, Qi, Ki, M, N):
    O = np.zeros((M, BN))
    for by in range(M // BM):
        p = Q[by * BM:(by + 1) * BM].astype(np.float64)
        qi = Qi[by * BM:(by + 1) * BM].astype(np.float64)
        for kk in range(N // BN):
            if (kk + by) % 2 == 0:
                p = p * 0.5
                O[by * BM:(by + 1) * BM] += p @ K[kk * BN:(kk + 1) * BN].astype(np.float64).T
            else:
                O[by * BM:(by + 1) * BM] += 0.25 * (qi @ Ki[kk * BN:(kk + 1) * BN].astype(np.float64).T)
    return O


def _arms_inputs(M, N):
    rng = np.random.default_rng(2)  # integer-valued: every product and sum exact in float32
    return ((rng.integers(-3, 4, (M, D)) * 8).astype(np.float16), rng.integers(-3, 4, (N, D)).astype(np.float16),
            rng.integers(-100, 100, (M, D)).astype(np.int8), rng.integers(-100, 100, (N, D)).astype(np.int8))


@pytest.mark.parametrize("two_ifs", [True, False])  # False: one if's two arms (review29 F4, fixed by h-syncarm)
def test_if_else_arms_handing_off_different_dtypes(two_ifs):
    M, N = 3 * BM, 5 * BN
    args = _arms_inputs(M, N)
    ref = _arms_ref(*args, M, N)
    np.testing.assert_array_equal(tw.compile(_arms_kernel(M, N, two_ifs), out_idx=[4], target="cpu")(*args), ref)
    k = tw.compile(_arms_kernel(M, N, two_ifs), out_idx=[4], target=TARGET)
    np.testing.assert_array_equal(run_checked(k, *args), ref)
