"""Session 22 (h-port10b): portable kernels the session 21 hunt found rejected on ascend910b
(/work/hunt9a-findings.md F11, F18, F12, F13, F14) now run there unchanged; each case runs on cpu and
on ascend910b (simulator, checker on) against a float64 numpy reference at odd shapes.

  F11 serial loop nests that are element-wise maps (the tile-loops style's epilogue) -> T.Parallel
      (serial_maps); nests that are not maps stay serial loops.
  F18 a reduction across the rows of a gemm result: the tile stays whole on both AIVs (split_cube_vector).
  F12 reduce_max / reduce_min of a bool tile (any / all): its bytes converted as uint8 (legalize_vector).
  F13 float x % y with Python's sign rule: x - floor(x / y) * y in float32, + y where the signs
      differ (legalize_vector float_mod).
  F14 a global -> global T.copy: staged through fragment tiles in chunks of 16 KiB (stage_global_copies).

Tolerances: exact (0) for small-integer data (gemms of exact_values, bool reductions, copies of
integers); float % of values exact in float32 where x / y and its floor are exact (y a power of
two): exact; random float32 %: within 2 float32 ulp of max(|x|, |y|) of Python's value (measured: cpu
0.31 ulp, i.e. numpy's float32 np.mod exactly; ascend910b 1.0 ulp), as a distance modulo |y| (a value
within rounding of a multiple of y may come out as ~0 or ~|y|, both x mod y within rounding), with
the divisor's sign and |result| <= |y|; float16 / bfloat16 % of quarters by -3: exact after the one
rounding into the dtype."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, exact_values, run_checked  # noqa: E402
from tw_test_util import located  # noqa: E402

TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def _exact(out, ref):
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64), np.asarray(ref, np.float64))


# ---------------------------------------------------------------------------------------------
# F11: the docs' tile-loops matmul_scale (docs/language.md "The tile-loops style"), verbatim, and
# serial nests in the explicit style

M = tw.symbolic("M")
N, K = 24, 40
bm, bn, bk = 8, 8, 16


def docs_matmul_scale(target):
    def matmul_scale(A: tw.Tensor((M, K), "float16"), B: tw.Tensor((K, N), "float16"), s: float):
        out = tw.output((M, N), dtype="float32")
        for by in range(tw.ceildiv(M, bm)):
            for bx in range(tw.ceildiv(N, bn)):
                acc = tw.accumulator((bm, bn), dtype="float32")
                for k in range(tw.ceildiv(K, bk)):                 # K = 40: the last tile is a tail
                    a = tw.load(A, (by * bm, k * bk), (bm, bk))
                    b = tw.load(B, (k * bk, bx * bn), (bk, bn))
                    acc += tw.matmul(a, b)
                for i in range(bm):
                    for j in range(bn):
                        acc[i, j] = acc[i, j] * s
                tw.store(out, (by * bm, bx * bn), acc)
        return out
    return tw.compile(matmul_scale, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", [1, 13, 40])
def test_docs_tile_loops_matmul_scale(m, target):
    rng = np.random.default_rng(3)
    a, b = exact_values((m, K), "float16", rng), exact_values((K, N), "float16", rng)
    out = _run(docs_matmul_scale(target), target, a, b, 0.5)
    _exact(out, 0.5 * (a.astype(np.float64) @ b.astype(np.float64)))


def gemm_serial_epilogue(Mm, Nn, Kk, tm, tn):
    """A gemm whose epilogue is a T.serial nest: bias by column, a second tile, ReLU (T.where)."""
    @T.prim_func
    def main(A: T.Tensor((Mm, Kk), "float16"), B: T.Tensor((Kk, Nn), "float16"), Bias: T.Tensor((Nn,), "float32"),
             Y: T.Tensor((Mm, Nn), "float32"), Z: T.Tensor((Mm, Nn), "float16")):
        with T.Kernel(T.ceildiv(Nn, tn), T.ceildiv(Mm, tm)) as (bx, by):
            c = T.alloc_fragment((tm, tn), "float32")
            bias = T.alloc_fragment((tn,), "float32")
            z = T.alloc_fragment((tm, tn), "float16")
            T.copy(Bias[bx * tn], bias)
            T.gemm(A[by * tm:(by + 1) * tm, 0:Kk], B[0:Kk, bx * tn:(bx + 1) * tn], c, clear_accum=True)
            for i in T.serial(tm):
                for j in T.serial(tn):
                    c[i, j] = T.where(c[i, j] + bias[j] > 0, c[i, j] + bias[j], 0.0)
                    z[i, j] = c[i, j] * 2.0
            T.copy(c, Y[by * tm, bx * tn])
            T.copy(z, Z[by * tm, bx * tn])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("Mm,Nn,Kk,tm,tn", [(1, 1, 1, 16, 16), (37, 33, 20, 16, 32), (64, 16, 8, 32, 16)])
def test_gemm_with_a_serial_epilogue(Mm, Nn, Kk, tm, tn, target):
    rng = np.random.default_rng(5)
    a, b = exact_values((Mm, Kk), "float16", rng), exact_values((Kk, Nn), "float16", rng)
    bias = exact_values((Nn,), "float32", rng)
    y, z = _run(tw.compile(gemm_serial_epilogue(Mm, Nn, Kk, tm, tn), target=target, out_idx=[3, 4]), target, a, b, bias)
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    _exact(y, ref)
    _exact(z, 2 * ref)


def serial_vector_nests(Mm, Nn, tm):
    """Vector-only serial nests: an element-wise one (a map) and a running sum along the row (not a
    map: it reads y[i, j - 1], which the nest writes), which stays a serial loop."""
    @T.prim_func
    def main(X: T.Tensor((Mm, Nn), "float32"), Y: T.Tensor((Mm, Nn), "float32"), S: T.Tensor((Mm, Nn), "float32")):
        with T.Kernel(T.ceildiv(Mm, tm)) as bx:
            x = T.alloc_fragment((tm, Nn), "float32")
            y = T.alloc_fragment((tm, Nn), "float32")
            s = T.alloc_fragment((tm, Nn), "float32")
            T.copy(X[bx * tm, 0], x)
            for i in T.serial(tm):
                for j in T.serial(Nn):
                    y[i, j] = x[i, j] * 3.0 - 1.0
            T.copy(y, Y[bx * tm, 0])
            T.copy(x, s)
            for i in T.serial(tm):
                for j in T.serial(1, Nn):
                    s[i, j] = s[i, j - 1] + x[i, j]
            T.copy(s, S[bx * tm, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("Mm,Nn,tm", [(1, 2, 8), (13, 37, 8)])
def test_serial_nests_on_vector_tiles(Mm, Nn, tm, target):
    x = exact_values((Mm, Nn), "float32", np.random.default_rng(6))
    y, s = _run(tw.compile(serial_vector_nests(Mm, Nn, tm), target=target, out_idx=[1, 2]), target, x)
    _exact(y, 3 * x.astype(np.float64) - 1)
    _exact(s, np.cumsum(x.astype(np.float64), 1))


# ---------------------------------------------------------------------------------------------
# F18: reductions across the rows of a gemm result

def gemm_column_reduce(Mm, Nn, Kk, tm, tn, op):
    @T.prim_func
    def main(A: T.Tensor((Mm, Kk), "float16"), B: T.Tensor((Kk, Nn), "float16"), S: T.Tensor((Nn,), "float32"),
             R: T.Tensor((T.ceildiv(Mm, tm), Nn), "float32")):
        with T.Kernel(T.ceildiv(Nn, tn), T.ceildiv(Mm, tm)) as (bx, by):
            c = T.alloc_fragment((tm, tn), "float32")
            s = T.alloc_fragment((tn,), "float32")
            T.gemm(A[by * tm:(by + 1) * tm, 0:Kk], B[0:Kk, bx * tn:(bx + 1) * tn], c, clear_accum=True)
            if op == "sum":
                T.reduce_sum(c, s, dim=0)
                T.atomic_add(S[bx * tn], s)
            else:
                T.reduce_max(c, s, dim=0)
            T.copy(s, R[by, bx * tn])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("Mm,Nn,Kk,tm,tn", [(1, 1, 1, 16, 16), (37, 33, 20, 16, 32), (64, 48, 24, 32, 16)])
def test_column_reductions_of_a_gemm(Mm, Nn, Kk, tm, tn, op, target):
    rng = np.random.default_rng(7)
    a, b = exact_values((Mm, Kk), "float16", rng), exact_values((Kk, Nn), "float16", rng)
    s = np.zeros(Nn, np.float32)
    gm = -(-Mm // tm)
    r = np.zeros((gm, Nn), np.float32)
    _run(tw.compile(gemm_column_reduce(Mm, Nn, Kk, tm, tn, op), target=target), target, a, b, s, r)
    c = a.astype(np.float64) @ b.astype(np.float64)
    pad = np.zeros((gm * tm, Nn))                        # rows past M: the gemm of zero rows
    pad[:Mm] = c
    blocks = pad.reshape(gm, tm, Nn)
    if op == "sum":
        _exact(s, c.sum(0))
        _exact(r, blocks.sum(1))
    else:
        _exact(r, blocks.max(1))


# ---------------------------------------------------------------------------------------------
# F12: any / all of bool tiles, along rows and columns

def bool_reduce(Mm, Nn, tm, op, dim):
    @T.prim_func
    def main(X: T.Tensor((Mm, Nn), "bool"), Y: T.Tensor((T.ceildiv(Mm, tm) * tm if dim == 1 else Nn,), "bool")):
        with T.Kernel(T.ceildiv(Mm, tm) if dim == 1 else 1) as bx:
            x = T.alloc_fragment((tm, Nn), "bool")
            y = T.alloc_fragment((tm,) if dim == 1 else (Nn,), "bool")
            T.copy(X[bx * tm, 0], x)
            if op == "any":
                T.reduce_max(x, y, dim=dim)
            else:
                T.reduce_min(x, y, dim=dim)
            if dim == 1:
                T.copy(y, Y[bx * tm])
            else:
                T.copy(y, Y[0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["any", "all"])
@pytest.mark.parametrize("Mm,Nn,tm,dim,p", [(13, 37, 8, 1, 0.9), (5, 300, 8, 1, 0.995), (1, 1, 8, 1, 0.5),
                                            (8, 37, 8, 0, 0.8), (16, 64, 16, 0, 0.9)])
def test_any_all_of_bool_tiles(Mm, Nn, tm, dim, p, op, target):
    x = np.random.default_rng(8).random((Mm, Nn)) < p
    y = _run(tw.compile(bool_reduce(Mm, Nn, tm, op, dim), target=target, out_idx=[1]), target, x)
    ref = x.any(dim) if op == "any" else x.all(dim)
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y[:len(ref)], ref)


# ---------------------------------------------------------------------------------------------
# F13: float % (Python's sign rule: the result has the divisor's sign)

def float_mod(n, dtype, by_tile):
    @T.prim_func
    def main(X: T.Tensor((n,), dtype), D: T.Tensor((n,), dtype), d: T.float32, Y: T.Tensor((n,), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), dtype)
            dv = T.alloc_fragment((n,), dtype)
            y = T.alloc_fragment((n,), dtype)
            T.copy(X, x)
            T.copy(D, dv)
            for i in T.Parallel(n):
                y[i] = x[i] % dv[i] if by_tile else x[i] % d
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("d", [2.0, -2.0, 0.25, 8.0])
def test_float_mod_exact_cases(d, target):
    """Quarters (exact) by powers of two: x / d and its floor are exact, so the result is."""
    x = (np.random.default_rng(9).integers(-400, 401, 37) / 4).astype(np.float32)
    x[:4] = [0.0, -0.0, 1e6, -1e6]
    y = _run(tw.compile(float_mod(37, "float32", False), target=target, out_idx=[3]), target, x, x, d)
    _exact(y, np.mod(x.astype(np.float64), d))


def _mod_distance(got, ref, d):
    """|got - ref| modulo |d|: a value within rounding of a multiple of d is ~0 or ~|d|."""
    diff = np.abs(got.astype(np.float64) - ref) % np.abs(d)
    return np.minimum(diff, np.abs(d) - diff)


@pytest.mark.parametrize("target", TARGETS)
def test_float_mod_random(target):
    rng = np.random.default_rng(10)
    x = (rng.standard_normal(300) * 100).astype(np.float32)
    d = (rng.uniform(0.1, 10, 300) * rng.choice([-1, 1], 300)).astype(np.float32)
    y = _run(tw.compile(float_mod(300, "float32", True), target=target, out_idx=[3]), target, x, d, 1.0)
    ref = np.mod(x.astype(np.float64), d.astype(np.float64))
    assert (np.sign(y)[y != 0] == np.sign(d)[y != 0]).all()       # the divisor's sign
    assert (np.abs(y) <= np.abs(d)).all()
    ulp = np.spacing(np.maximum(np.abs(x), np.abs(d))).astype(np.float64)     # float32 ulp of max(|x|, |y|)
    assert (_mod_distance(y, ref, d.astype(np.float64)) <= 2 * ulp).all()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float_mod_half_types(dtype, target):
    x = (np.random.default_rng(11).integers(-200, 201, 37) / 4).astype(np_dtype(dtype))
    y = _run(tw.compile(float_mod(37, dtype, False), target=target, out_idx=[3]), target, x, x, -3.0)
    ref = np.mod(x.astype(np.float64), -3.0).astype(np_dtype(dtype))   # computed in float32, rounded once
    _exact(y, ref.astype(np.float64))


# ---------------------------------------------------------------------------------------------
# F14: global -> global T.copy, in chunks through UB

def g2g(shape, block, src, dst):
    rows = shape[0]

    @T.prim_func
    def main(X: T.Tensor(shape, src), Y: T.Tensor(shape, dst)):
        with T.Kernel(T.ceildiv(rows, block)) as bx:
            if len(shape) == 1:
                T.copy(X[bx * block:(bx + 1) * block], Y[bx * block:(bx + 1) * block])
            else:
                T.copy(X[bx * block:(bx + 1) * block, 0:shape[1]], Y[bx * block:(bx + 1) * block, 0:shape[1]])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,block,src,dst", [
    ((1, 1), 8, "float32", "float32"),
    ((13, 37), 8, "float32", "bfloat16"),
    ((300, 257), 300, "float32", "float32"),       # 300 KB per block: 15-row chunks and a tail
    ((3, 5000), 3, "float16", "float32"),          # one row wider than a chunk: column chunks and a tail
    ((10007,), 10007, "int8", "int32"),            # 1-D: element chunks and a tail
    ((100, 3), 32, "int32", "float16"),
])
def test_global_to_global_copies(shape, block, src, dst, target):
    x = np.random.default_rng(12).integers(-8, 9, shape).astype(np_dtype(src))
    y = _run(tw.compile(g2g(shape, block, src, dst), target=target, out_idx=[1]), target, x)
    assert y.dtype == np_dtype(dst)
    _exact(y, x.astype(np.float64))


def g2g_window():
    """A copy into a window of a larger tensor: the elements around it are kept."""
    @T.prim_func
    def main(X: T.Tensor((20, 9), "float32"), Y: T.Tensor((30, 40), "float32")):
        with T.Kernel(1) as bx:
            T.copy(X[3:20, 0:9], Y[5:22, 31:40])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_global_to_global_copy_into_a_window(target):
    x = np.random.default_rng(13).integers(-8, 9, (20, 9)).astype(np.float32)
    y = np.full((30, 40), 7.0, np.float32)
    _run(tw.compile(g2g_window(), target=target), target, x, y)
    ref = np.full((30, 40), 7.0)
    ref[5:22, 31:40] = x[3:20]
    _exact(y, ref)


def gemm_row_scan(copy_first):
    """A running sum along the rows of a gemm result: not a map. Straight on the accumulator and on
    a map copy of it; both run."""
    @T.prim_func
    def main(A: T.Tensor((16, 8), "float16"), B: T.Tensor((8, 16), "float16"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((16, 16), "float32")
            d = T.alloc_fragment((16, 16), "float32")
            T.gemm(A, B, c, clear_accum=True)
            if copy_first:
                for i, j in T.Parallel(16, 16):
                    d[i, j] = c[i, j]
                for i in T.serial(16):
                    for j in T.serial(1, 16):
                        d[i, j] = d[i, j - 1] + d[i, j]
            else:
                T.fill(d, 0.0)
                for i in T.serial(16):
                    for j in T.serial(1, 16):  # scan on the accumulator
                        c[i, j] = c[i, j - 1] + c[i, j]
                for i, j in T.Parallel(16, 16):
                    d[i, j] = c[i, j]
            T.copy(d, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_row_scan_of_a_gemm_result(target):
    rng = np.random.default_rng(14)
    a, b = exact_values((16, 8), "float16", rng), exact_values((8, 16), "float16", rng)
    ref = np.cumsum(a.astype(np.float64) @ b.astype(np.float64), 1)
    _exact(_run(tw.compile(gemm_row_scan(True), target=target, out_idx=[2]), target, a, b), ref)
    # straight on the accumulator: runs on ascend910b too since session 23 (h-ascnan11: the tile
    # moves to the vector side before the loop; it was a located error naming the copy form)
    _exact(_run(tw.compile(gemm_row_scan(False), target=target, out_idx=[2]), target, a, b), ref)


def bool_to_number(n, dtype):
    """A bool tile and a computed bool (a comparison) converted to a number: their bytes 0 / 1."""
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), B: T.Tensor((n,), "bool"), Y: T.Tensor((n,), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), "float32")
            b = T.alloc_fragment((n,), "bool")
            y = T.alloc_fragment((n,), dtype)
            T.copy(X, x)
            T.copy(B, b)
            for i in T.Parallel(n):
                y[i] = T.cast(x[i] > 0, dtype) * 2 + T.cast(b[i], dtype)
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n,dtype", [(37, "float32"), (1, "float16"), (300, "int32"), (37, "uint8"), (64, "bfloat16")])
def test_bool_values_converted_to_numbers(n, dtype, target):
    rng = np.random.default_rng(15)
    x, b = rng.standard_normal(n).astype(np.float32), rng.random(n) < 0.5
    y = _run(tw.compile(bool_to_number(n, dtype), target=target, out_idx=[2]), target, x, b)
    _exact(y, 2 * (x > 0) + b)


def g2g_with_a_gemm():
    """A global -> global copy next to a gemm (a kernel of both units): the staged tile is Vector code."""
    @T.prim_func
    def main(A: T.Tensor((37, 20), "float16"), B: T.Tensor((20, 33), "float16"), C: T.Tensor((37, 33), "float32"),
             A2: T.Tensor((37, 20), "float32")):
        with T.Kernel(2, 3) as (bx, by):
            c = T.alloc_fragment((16, 32), "float32")
            T.gemm(A[by * 16:(by + 1) * 16, 0:20], B[0:20, bx * 32:(bx + 1) * 32], c, clear_accum=True)
            T.copy(c, C[by * 16, bx * 32])
            if bx == 0:
                T.copy(A[by * 16:(by + 1) * 16, 0:20], A2[by * 16:(by + 1) * 16, 0:20])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_global_to_global_copy_next_to_a_gemm(target):
    rng = np.random.default_rng(16)
    a, b = exact_values((37, 20), "float16", rng), exact_values((20, 33), "float16", rng)
    c, a2 = _run(tw.compile(g2g_with_a_gemm(), target=target, out_idx=[2, 3]), target, a, b)
    _exact(c, a.astype(np.float64) @ b.astype(np.float64))
    _exact(a2, a)


def g2g_row(n):
    """A tensor row into a 1-D tensor: windows of different shapes, (1, n) and (n,)."""
    @T.prim_func
    def main(X: T.Tensor((3, n), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            T.copy(X[2, 0:n], Y[0:n])  # row into a vector
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [37, 5000])
def test_global_to_global_copy_of_a_row(n, target):
    x = np.random.default_rng(17).integers(-8, 9, (3, n)).astype(np.float32)
    if target != "cpu" and n > 4096:                   # more than one 16 KiB staging tile
        located(lambda: tw.compile(g2g_row(n), target=target, out_idx=[1]), __file__, "row into a vector",
                "windows of different shapes", "copy through a tile in chunks")
        return
    _exact(_run(tw.compile(g2g_row(n), target=target, out_idx=[1]), target, x), x[2])


def float_mod_scalar_first():
    @T.prim_func
    def main(X: T.Tensor((8, 37), "float32"), Y: T.Tensor((8, 37), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, 37), "float32")
            y = T.alloc_fragment((8, 37), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(8, 37):
                y[i, j] = 7.5 % x[i, j] + (x[i, j] + 1.0) % 3.0
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_float_mod_of_a_scalar_by_a_tile(target):
    """Halves (exact) by halves of small integers: every float32 step is exact, so the result is."""
    rng = np.random.default_rng(18)
    x = (rng.integers(1, 9, (8, 37)) * np.where(rng.random((8, 37)) < 0.5, -0.5, 0.5)).astype(np.float32)
    y = _run(tw.compile(float_mod_scalar_first(), target=target, out_idx=[1]), target, x)
    _exact(y, np.mod(7.5, x.astype(np.float64)) + np.mod(x.astype(np.float64) + 1, 3))
