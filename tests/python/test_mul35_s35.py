"""h-mul35: int32 products wrapped by the language (stored into int32, or an operand of + - * & | ^ before that) are
exact on ascend910b: legalize_vector's wrapped_mul computes x * c modulo 2^32 from 16-bit pieces whose products fit
int32, each form swept over int32 edge values (0, +-1, +-2^15, +-2^16, INT32_MAX, INT32_MIN, ...) and random ones,
on cpu and on ascend910b (simulator, checker on: no report) against numpy's int32 wrapping (port34 F6, review34 R2).
Pieces only where the multiplier is a constant outside 16 bits or an int64 scalar (the lead, at integration:
a constant of 16 bits, a run-time int32 and two tiles keep one Mul / Muls and the report where they leave int32).
A product the compiler can bound inside int32 keeps its one Muls; one seen unwrapped (converted to float32) keeps the
simulator's `int32 overflow` report where it leaves int32.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import port34_kernels as P  # noqa: E402
from ascend_util import TARGET, run_on  # noqa: E402

TARGETS = ["cpu", TARGET]
I32 = np.iinfo(np.int32)
EDGES = [0, 1, -1, 2, -2, 2 ** 15 - 1, 2 ** 15, -2 ** 15, -2 ** 15 - 1, 2 ** 16 - 1, 2 ** 16, -2 ** 16, -2 ** 16 + 1,
         2 ** 30, -2 ** 30, I32.max, I32.max - 1, I32.min, I32.min + 1, 0x7FFF8000, 0x7FFF7FFF, -0x7FFF8000]
N = 37  # the edges and random values; a tail past the 32 B blocks
F = 9  # result rows of _forms
G = 6  # of _small


def _w32(v):
    return (((np.asarray(v, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31).astype(np.int32)


@T.prim_func
def _forms(X: T.Tensor((N,), "int32"), X2: T.Tensor((N,), "int32"), n: T.int32, c: T.int64,
           Y: T.Tensor((F, N), "int32")):
    """The wrapped forms computed from pieces: a constant outside 16 bits, an int64 scalar, and sums with them."""
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((N,), "int32")
        x2 = T.alloc_fragment((N,), "int32")
        y = T.alloc_fragment((F, N), "int32")
        T.copy(X, x)
        T.copy(X2, x2)
        for j in T.Parallel(N):
            y[0, j] = x[j] * 1103515245  # a constant with both halves: signed pieces
            y[1, j] = x[j] * 196608  # 3 * 2^16: low half 0
            y[2, j] = x[j] * 1024  # powers of two: ShiftLeft
            y[3, j] = x[j] * -2147483648
            y[4, j] = x[j] * 1103515245 + n  # sums with a wrapped product: modulo 2^32 too
            y[5, j] = n - x[j] * 196608
            y[6, j] = x[j] * c  # review34 R2: an int64 scalar, past int32
            y[7, j] = (x[j] * 65537) ^ (x2[j] * 40503)  # wrapped by ^
            y[8, j] = (j + 3) * 1000  # bounded inside int32: one Muls
        T.copy(y, Y)


@T.prim_func
def _small(X: T.Tensor((N,), "int32"), X2: T.Tensor((N,), "int32"), n: T.int32, Y: T.Tensor((G, N), "int32")):
    """Products that keep their one Mul / Muls: a constant of 16 bits, a run-time int32, two tiles."""
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((N,), "int32")
        x2 = T.alloc_fragment((N,), "int32")
        y = T.alloc_fragment((G, N), "int32")
        T.copy(X, x)
        T.copy(X2, x2)
        for j in T.Parallel(N):
            y[0, j] = x[j] * 12345
            y[1, j] = x[j] * -32768
            y[2, j] = x[j] * n
            y[3, j] = x[j] * x2[j]
            y[4, j] = x[j] * 12345 - x2[j] * 7
            y[5, j] = x[j] * x2[j] + x[j]
        T.copy(y, Y)


def _inputs(rng):
    x = np.array(EDGES + list(rng.integers(I32.min, I32.max, N - len(EDGES), endpoint=True)), np.int64)
    x2 = np.concatenate([x[::-1][:N // 2], rng.integers(I32.min, I32.max, N - N // 2, endpoint=True)])
    return x.astype(np.int32), x2.astype(np.int32)


def _expected(x, x2, n, c):
    x, x2 = x.astype(np.int64), x2.astype(np.int64)
    rows = [x * 1103515245, x * 196608, x * 1024, x * -2147483648, x * 1103515245 + n, n - x * 196608,
            x * (c % 2 ** 32), _w32(x * 65537).astype(np.int64) ^ _w32(x2 * 40503).astype(np.int64),
            (np.arange(N) + 3) * 1000]
    return np.stack([_w32(r) for r in rows])


PARAMS = [(0, 0), (1, -1), (-1, 2 ** 32 + 5), (2 ** 15, -2 ** 40 - 7), (-2 ** 15, 2 ** 31), (2 ** 16 + 3, 3),
          (I32.max, 2 ** 62 + 12345), (I32.min, -2 ** 31 - 1), (1103515245, 70000), (-70001, I32.max)]


@pytest.mark.parametrize("target", TARGETS)
def test_wrapped_products_exact(target):
    rng = np.random.default_rng(35)
    k = tw.compile(_forms, target=target, out_idx=[-1])
    for n, c in PARAMS:
        x, x2 = _inputs(rng)
        if target == "cpu":
            got = k(x, x2, n, c)
        else:
            prof = k.profile(x, x2, n, c)
            assert prof["reports"] == [], "\n".join(prof["reports"])
            got = prof.outputs
        np.testing.assert_array_equal(np.asarray(got), _expected(x, x2, n, c), err_msg=f"n={n} c={c}")


def test_small_multipliers_keep_one_mul():
    """A constant of 16 bits, a run-time int32 scalar and two tiles keep one Mul / Muls: exact (== cpu == numpy)
    where the products fit int32, the simulator's `int32 overflow` report where one leaves it."""
    rng = np.random.default_rng(36)
    x = rng.integers(-30000, 30000, N).astype(np.int32)
    x2 = rng.integers(-60000, 60000, N).astype(np.int32)
    x, x2, n = x.astype(np.int32), x2.astype(np.int32), 7
    X, X2 = x.astype(np.int64), x2.astype(np.int64)
    want = np.stack([_w32(r) for r in [X * 12345, X * -32768, X * n, X * X2, X * 12345 - X2 * 7, X * X2 + X]])
    k = tw.compile(_small, target=TARGET, out_idx=[-1])
    prof = k.profile(x, x2, n)
    assert prof["reports"] == [], "\n".join(prof["reports"])
    np.testing.assert_array_equal(np.asarray(prof.outputs), want)
    np.testing.assert_array_equal(np.asarray(tw.compile(_small, target="cpu", out_idx=[-1])(x, x2, n)), want)
    big = x.copy()
    big[3] = 2 ** 20
    prof = k.profile(big, x2, n)
    assert any("int32 overflow" in r for r in prof["reports"]), prof["reports"]


def test_2d_rows_and_columns():
    """A 2-D map: a row vector times a column vector (the index arithmetic of a hash) and a tile times a row."""
    M, K = 5, 19

    @T.prim_func
    def k2(X: T.Tensor((M, K), "int32"), V: T.Tensor((M,), "int32"), s: T.int32, Y: T.Tensor((2, M, K), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, K), "int32")
            v = T.alloc_fragment((M,), "int32")
            y = T.alloc_fragment((2, M, K), "int32")
            T.copy(X, x)
            T.copy(V, v)
            for i, j in T.Parallel(M, K):
                y[0, i, j] = (i * K + j + s) * -1640531535 + s
                y[1, i, j] = x[i, j] * v[i]
            T.copy(y, Y)

    rng = np.random.default_rng(351)
    x = rng.integers(-30000, 30000, (M, K), endpoint=True).astype(np.int32)
    v = np.array([-65536, 65535, -1, 65536, 12345], np.int32)  # x * v keeps its one Mul: products that fit
    s = 2 ** 31 - 2 ** 20
    i, j = np.meshgrid(np.arange(M), np.arange(K), indexing="ij")
    want = np.stack([_w32(_w32(i * K + j + s).astype(np.int64) * -1640531535 + s),
                     _w32(x.astype(np.int64) * v[:, None].astype(np.int64))])
    for target in TARGETS:
        got = run_on(k2, target, [-1], x, v, s)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=target)


@T.prim_func
def _seen(X: T.Tensor((8,), "int32"), n: T.int32, Z: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((8,), "int32")
        z = T.alloc_fragment((8,), "float32")
        T.copy(X, x)
        for j in T.Parallel(8):
            z[j] = T.cast(x[j] * n, "float32")  # seen unwrapped: the language's int64 product
        T.copy(z, Z)


def test_unwrapped_product_keeps_the_report():
    x = np.array([0, 1, -1, 7, 1000, -1000, 46340, -46340], np.int32)
    k = tw.compile(_seen, target=TARGET, out_idx=[-1])
    prof = k.profile(x, 46340)  # fits: exact, no report
    assert prof["reports"] == []
    np.testing.assert_array_equal(prof.outputs, (x.astype(np.int64) * 46340).astype(np.float32))
    prof = k.profile(x, 65536)  # 1000 * 65536 leaves int32: the simulator's report stays
    assert any("int32 overflow" in r for r in prof["reports"]), prof["reports"]


def test_f6_hash_dropout_runs_on_both_targets():
    """port34 F6's dropout hash against the exact reference on both targets (test_port34_s34's strict xfail flipped)."""
    for target in TARGETS:
        P.check("hash_dropout", "float32", (13, 37), target)
    P.check("hash_dropout", "float32", (1, 1), TARGET)
