"""hunt41 (issue 13: users' shapes are odder): the finding fixed, and guards for the new ground the hunt ran
(docs/testing.md "Session 41: hunt41").

F1: on ascend910b a 1-D T.Parallel map storing an int32 `//`, `%`, bitwise operator or a shift by a run-time
count down a column of a tile (`y[i, 0] = a[i] // 3`, `y[i, 6] = a[i] >> s`: one result per column, as a port of
`torch.stack([...], dim=1)` writes) was "this T.Parallel body is not a vector instruction: tile 'y' is read down a
column", naming a tile the kernel never reads: the exact lowerings of these operators store their steps into the
destination and read them back. They are now computed in a contiguous temporary and copied down the column, as a
math function's column already was (hunt30 F1). cpu ran them right.

Guards, each checked on cpu and ascend910b (the simulator's checker on) against numpy: split-K gemm partials
added with T.atomic_add where some splits have no K block (splits > K / block), the round-half-to-even formula
of the "unknown function: round" hint in an int8 quantiser at exact .5 quotients, and integer `//` / `%` at
INT32_MIN // -1 and by 0 (docs/language.md "Operators").
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

TARGETS = ["cpu", TARGET]
N = 13


def _floor_div_mod(p, q):
    """Python's // and % with the language's x // 0 == 0 and x % 0 == x."""
    q0 = np.where(q == 0, 1, q)
    return np.where(q == 0, 0, p // q0), np.where(q == 0, p, p % q0)


def _wrap32(x):
    return ((x + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)


@T.prim_func
def _int_columns(A: T.Tensor((N,), "int32"), Bv: T.Tensor((N,), "int32"), s: T.int32,
                 Y: T.Tensor((N, 12), "int32")):
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((N,), "int32")
        b = T.alloc_fragment((N,), "int32")
        y = T.alloc_fragment((N, 12), "int32")
        T.copy(A, a)
        T.copy(Bv, b)
        for i in T.Parallel(N):
            y[i, 0] = a[i] // 3
            y[i, 1] = a[i] % -3
            y[i, 2] = a[i] // b[i]
            y[i, 3] = a[i] % b[i]
            y[i, 4] = a[i] // s
            y[i, 5] = a[i] % s
            y[i, 6] = a[i] >> s
            y[i, 7] = a[i] << s
            y[i, 8] = a[i] >> b[i]
            y[i, 9] = (a[i] & b[i]) ^ ~a[i]
            y[i, 10] = a[i] // 4 + a[i] % 8
            y[i, 11] = (a[i] | b[i]) + 1
        T.copy(y, Y)


@pytest.mark.parametrize("target", TARGETS)
def test_int32_operators_stored_down_columns(target):
    rng = np.random.default_rng(41)
    a = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    a[:4] = [-7, -2 ** 31, 7, 2 ** 31 - 1]  # -7 // 0, INT32_MIN // -1 (wraps), 7 // -3
    b = rng.integers(-40, 40, N).astype(np.int32)
    b[:3] = [0, -1, -3]
    x, y = a.astype(np.int64), b.astype(np.int64)
    for s in (-2, 0, 5, 33):
        full = np.full_like(x, s)
        cols = [_floor_div_mod(x, np.full_like(x, 3))[0], _floor_div_mod(x, np.full_like(x, -3))[1],
                *_floor_div_mod(x, y), *_floor_div_mod(x, full), x >> (s & 31), x << (s & 31), x >> (y & 31),
                (x & y) ^ ~x, x // 4 + x % 8, (x | y) + 1]
        got = run_on(_int_columns, target, [-1], a, b, s)
        np.testing.assert_array_equal(got, _wrap32(np.stack(cols, 1)), err_msg=f"{target} s={s}")


def _split_k(M, N_, K, splits, bm=16, bn=16, bk=16):
    kper = -(-(-(-K // splits)) // bk) * bk  # each split's K range, whole blocks

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N_), "float16"), C: T.Tensor((M, N_), "float32")):
        with T.Kernel(T.ceildiv(N_, bn), T.ceildiv(M, bm), splits) as (bx, by, sk):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bk, bn), "float16")
            c = T.alloc_fragment((bm, bn), "float32")
            T.clear(c)
            for kk in T.serial(T.ceildiv(kper, bk)):
                T.copy(A[by * bm, sk * kper + kk * bk], a)  # past K: zeros (a split with no K block adds 0)
                T.copy(B[sk * kper + kk * bk, bx * bn], b)
                T.gemm(a, b, c)
            T.atomic_add(C[by * bm, bx * bn], c)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_split_k_with_empty_splits(target):
    rng = np.random.default_rng(7)
    M, N_, K, splits = 7, 3, 33, 5  # 3 K blocks of 16 over 5 splits
    a = rng.integers(-3, 4, (M, K)).astype(np.float16)
    b = rng.integers(-3, 4, (K, N_)).astype(np.float16)
    got = run_on(_split_k(M, N_, K, splits), target, [-1], a, b)
    np.testing.assert_array_equal(got, a.astype(np.float64) @ b.astype(np.float64))  # small integers: exact


def _quantise(M, N_, dt, bm=8):
    @T.prim_func
    def main(X: T.Tensor((M, N_), dt), S: T.Tensor((N_,), "float32"), Q: T.Tensor((M, N_), "int8")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N_), "float32")
            s = T.alloc_fragment((N_,), "float32")
            q = T.alloc_fragment((bm, N_), "int8")
            T.copy(X[bx * bm, 0], x)
            T.copy(S, s)
            for i, j in T.Parallel(bm, N_):
                v = (x[i, j] / s[j] + 12582912.0) - 12582912.0  # round half to even (float32, |v| < 2^22)
                q[i, j] = T.cast(T.max(T.min(v, 127.0), -128.0), "int8")
            T.copy(q, Q[bx * bm, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_int8_quantise_rounds_half_to_even(target, dt):
    rng = np.random.default_rng(3)
    M, N_ = 13, 7
    s = np.full(N_, 0.5, np.float32)
    x = (rng.integers(-600, 600, (M, N_)) * 0.25).astype(tw.testing.np_dtype(dt))  # quotients k / 2: ties
    ref = np.clip(np.rint(x.astype(np.float32) / s), -128, 127)
    np.testing.assert_array_equal(run_on(_quantise(M, N_, dt), target, [-1], x, s), ref)
