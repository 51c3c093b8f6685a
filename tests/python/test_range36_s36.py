"""h-range36: a value-range analysis of int32 map values on ascend910b (legalize_vector's range_of, issue 13).
A value from an int8 / uint8 tensor, a map index, a clamp, `& mask`, `>> k`, `// c`, `% c`, a narrower cast and the
arithmetic between them have a proven [lo, hi]: a product or sum proven inside int32 is one Mul / Add (exact, no
pieces, whatever the constant); one whose operands are proven but whose value may leave int32, where the language
wraps it, is computed modulo 2^32 from 16-bit pieces (a constant of 16 bits and two tiles included); where nothing is
proven (an int32 tile times 3) it stays one Mul and the simulator's `int32 overflow` report (test_mul35_s35).
Each form on cpu and on ascend910b (simulator, checker on: no report) against numpy's wrapped int32 values, at odd
shapes (a 37-column tail, 1 x 1), with the int8 / uint8 / int32 edge values."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

TARGETS = ["cpu", TARGET]
I32 = np.iinfo(np.int32)
R = 11  # result rows of _ranged


def _w32(v):
    return (((np.asarray(v, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31).astype(np.int32)


def _ranged(M, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((M, K), "uint8"), X: T.Tensor((M, K), "int32"), n: T.int32,
             Y: T.Tensor((R, M, K), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, K), "int32")
            y = T.alloc_fragment((R, M, K), "int32")
            T.copy(X, x)
            for i, j in T.Parallel(M, K):
                a = T.cast(A[i, j], "int32")  # [-128, 127]
                b = T.cast(B[i, j], "int32")  # [0, 255]
                y[0, i, j] = a * 1000000  # proven inside int32: one Muls (a wide constant)
                y[1, i, j] = a * 16777259 + n  # a small tile times a wide constant: 8 calls, the sum modulo 2^32
                y[2, i, j] = (a * 30000) * 1000  # proven, may wrap: a constant of 16 bits from pieces
                y[3, i, j] = (a * b) * (x[i, j] & 0x1FFFF)  # two tiles, one of them small: 11 calls
                y[4, i, j] = (x[i, j] >> 8) * (x[i, j] >> 8)  # two tiles in [-2^23, 2^23): signed pieces
                y[5, i, j] = (x[i, j] % 1000) * (a * 3000)  # % by a constant: proven inside int32
                y[6, i, j] = T.min(T.max(x[i, j], -100000), 100000) * 30000  # a clamp, may wrap
                y[7, i, j] = (x[i, j] >> 1) + b * 8388608  # a sum proven past int32: modulo 2^32
                y[8, i, j] = (i * K + j) * 1103515245 + n  # a map index times a hash constant
                y[9, i, j] = (x[i, j] // 65536) * (b - 100) * 300  # // by a constant, may wrap
                y[10, i, j] = x[i, j] * 3 - 5  # nothing proven: one Muls (no pieces), exact where it fits
            T.copy(y, Y)

    return main


def _expected(a, b, x, n):
    M, K = a.shape
    a, b, x = a.astype(np.int64), b.astype(np.int64), x.astype(np.int64)
    i, j = np.meshgrid(np.arange(M), np.arange(K), indexing="ij")
    clamp = np.minimum(np.maximum(x, -100000), 100000)
    rows = [a * 1000000, a * 16777259 + n, a * 30000 * 1000, a * b * (x & 0x1FFFF), (x >> 8) * (x >> 8),
            (x % 1000) * (a * 3000), clamp * 30000, (x >> 1) + b * 8388608, (i * K + j) * 1103515245 + n,
            (x // 65536) * (b - 100) * 300, x * 3 - 5]
    return np.stack([_w32(r) for r in rows])


def _inputs(M, K, rng):
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(0, 256, (M, K)).astype(np.uint8)
    x = rng.integers(-2 ** 28, 2 ** 28, (M, K)).astype(np.int32)  # x * 3 - 5 stays inside int32
    edges = [-128, 127, 0, -1, 1]
    a.flat[:len(edges)] = edges
    b.flat[:4] = [0, 255, 1, 254]
    x.flat[:6] = [0, -1, 2 ** 28 - 1, -2 ** 28, 65535, -65536]
    return a, b, x


@pytest.mark.parametrize("shape", [(3, 37), (1, 1)])
@pytest.mark.parametrize("target", TARGETS)
def test_ranged_forms_exact(target, shape):
    rng = np.random.default_rng(36)
    a, b, x = _inputs(*shape, rng)
    prim = _ranged(*shape)
    for n in (0, I32.max, I32.min, -12345):
        got = run_on(prim, target, [-1], a, b, x, n)
        np.testing.assert_array_equal(np.asarray(got), _expected(a, b, x, n), err_msg=f"{target} n={n}")


def test_int32_edges_through_the_pieces():
    """x's whole int32 range through the forms that take x apart (>> 8 squared, & 0x1FFFF, the clamp, // 65536)."""
    M, K = 2, 19
    rng = np.random.default_rng(361)
    a, b, x = _inputs(M, K, rng)
    x = np.array([I32.min, I32.max, I32.min + 1, I32.max - 1, 2 ** 23, -2 ** 23, 2 ** 23 - 1, 0x1FFFF, -0x20000,
                  100001, -100001, 65536 * 32767, -65536 * 32768] + list(rng.integers(I32.min, I32.max, M * K - 13)),
                 np.int64).astype(np.int32).reshape(M, K)
    want = _expected(a, b, x, 7)
    rows = [1, 2, 3, 4, 6, 7, 8, 9]  # (x * 3 - 5 leaves int32 here: row 10 is test_mul35's report)
    for target in TARGETS:
        if target == "cpu":
            got = tw.compile(_ranged(M, K), target="cpu", out_idx=[-1])(a, b, x, 7)
        else:
            prof = tw.compile(_ranged(M, K), target=TARGET, out_idx=[-1]).profile(a, b, x, 7)
            assert all("int32 overflow" in r and ":" in r for r in prof["reports"]), prof["reports"]
            got = prof.outputs
        np.testing.assert_array_equal(np.asarray(got)[rows], want[rows], err_msg=target)


def _copied(M, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((M, K), "uint8"), n: T.int32, Y: T.Tensor((4, M, K), "int32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, K), "int32")  # written only by the converting copies: [-128, 127]
            b = T.alloc_fragment((M, K), "int32")  # [0, 255]
            c = T.alloc_fragment((M, K), "int32")  # a copy, then a map: nothing proven (test_colred_s30's form)
            y = T.alloc_fragment((4, M, K), "int32")
            T.copy(A, a)
            T.copy(B, b)
            T.copy(A, c)
            for i, j in T.Parallel(M, K):
                c[i, j] = c[i, j] * 3 - 5
            for i, j in T.Parallel(M, K):
                y[0, i, j] = a[i, j] * 1000000  # proven inside int32: one Muls
                y[1, i, j] = a[i, j] * 1103515245 + n  # small times a hash constant: 8 calls, the sum modulo 2^32
                y[2, i, j] = (a[i, j] * b[i, j]) * (a[i, j] * b[i, j]) * 3  # two tiles, proven, may wrap
                y[3, i, j] = c[i, j] * 7  # nothing proven: one Muls, exact where it fits
            T.copy(y, Y)

    return main


@pytest.mark.parametrize("target", TARGETS)
def test_tiles_copied_from_int8_tensors(target):
    """A tile filled only by a converting T.copy from an int8 / uint8 tensor carries the tensor's range."""
    M, K = 5, 33
    rng = np.random.default_rng(362)
    a, b, _ = _inputs(M, K, rng)
    A, B = a.astype(np.int64), b.astype(np.int64)
    for n in (3, I32.max):
        want = np.stack([_w32(r) for r in [A * 1000000, A * 1103515245 + n, (A * B) * (A * B) * 3, (A * 3 - 5) * 7]])
        got = run_on(_copied(M, K), target, [-1], a, b, n)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{target} n={n}")


def test_a_proven_product_is_one_muls():
    """x from an int8 tensor times 1000000 is proven inside int32: one Muls (h-mul35 made it 15 calls of pieces)."""
    import re

    @T.prim_func
    def k(A: T.Tensor((40,), "int8"), Y: T.Tensor((40,), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((40,), "int32")
            for j in T.Parallel(40):
                y[j] = T.cast(A[j], "int32") * 1000000
            T.copy(y, Y)

    src = tw.compile(k, target=TARGET, out_idx=[-1]).get_source()
    assert len(re.findall(r"\bMuls?\(", src)) == 1, src
    assert not re.findall(r"\bShift(Left|Right)\(", src), src


def test_pieces_that_overflow_ub_are_a_located_error():
    """A proven wrapped product whose pieces' temporaries do not fit in UB, in a map before a column reduction
    (no row split): the UB-overflow error at the kernel's tile, naming the pieces among the temporaries, never a
    silent single Mul."""
    S, N = 2000, 40

    @T.prim_func
    def k(X: T.Tensor((S, N), "int32"), Out: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((S, N), "int32")
            res = T.alloc_fragment((N,), "int32")
            T.copy(X, x)
            for i, j in T.Parallel(S, N):
                x[i, j] = (x[i, j] >> 8) * (x[i, j] >> 8) + x[i, j]
            T.reduce_max(x, res, dim=0)
            T.copy(res, Out)

    with pytest.raises(tw.TilewrightError, match=r"UB overflow: x \(2000x40 int32(.|\n)*16-bit pieces") as e:
        tw.compile(k, target=TARGET, out_idx=[-1])
    assert "test_range36_s36.py" in str(e.value)


def test_rows_times_columns():
    """A 2-D map's row and column values (an index, a row vector from an int8 tensor) multiplied: the pieces of a
    row-shaped and a column-shaped operand."""
    M, K = 3, 37

    @T.prim_func
    def k(V: T.Tensor((M,), "int8"), n: T.int32, Y: T.Tensor((3, M, K), "int32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((3, M, K), "int32")
            for i, j in T.Parallel(M, K):
                y[0, i, j] = (i * 70001) * (j + 40000)  # neither in 16 bits: signed pieces of both
                y[1, i, j] = (T.cast(V[i], "int32") * 30000) * (j * 3 + 7)  # the column is small
                y[2, i, j] = (T.cast(V[i], "int32") - 100) * (j + n % 7)  # proven inside int32: one Mul
            T.copy(y, Y)

    v = np.array([-128, 127, 5], np.int8)
    i, j = np.meshgrid(np.arange(M), np.arange(K), indexing="ij")
    V = v.astype(np.int64)[:, None]
    for n in (3, I32.min):
        want = np.stack([_w32((i * 70001) * (j + 40000)), _w32((V * 30000) * (j * 3 + 7)), _w32((V - 100) * (j + n % 7))])
        for target in TARGETS:
            np.testing.assert_array_equal(np.asarray(run_on(k, target, [-1], v, n)), want, err_msg=f"{target} n={n}")
