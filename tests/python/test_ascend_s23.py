"""Session 23 (h-ascnan11) on ascend910b: the NaN flag of max / min reductions without a
source-sized UB tile; UB copies from a column tile into a 1-D tile; serial row loops over a gemm
accumulator; float16 / bfloat16 reductions of N-D tiles in chunks; softmax over a vocabulary row
(hunt11a F2). docs/ascend.md "Session 23: the NaN flag in row chunks, column copies, gemm results
in row loops, N-D and vocabulary-row reductions (h-ascnan11)".

Every kernel runs on ascend910b in the simulator with its checker (a report fails the test) and,
where the test names both targets, on cpu, against numpy in float64. Max / min pick an element,
so their comparisons are exact (NaN where numpy has NaN); sums of quarters are exact in float32.
Shapes have chunk tails, one-row and one-column tiles, and each float dtype.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import pairwise  # noqa: E402

TARGETS = ["cpu", TARGET]
DTYPES = ["float32", "float16", "bfloat16"]


def _run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def _same(got, ref):
    """Equal values, NaN where the reference has NaN (compared in float64)."""
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), np.asarray(ref).astype(np.float64))


def _specials(shape, dtype, seed):
    """Small integers (exact in every dtype, no signed zeros), with NaN in some rows (first,
    middle, last element of a row; whole NaN rows) and +-inf next to them."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-20, 21, shape).astype(np.float64)
    x[x == 0] = 1
    rows, cols = shape
    for r in range(0, rows, 3):  # NaN in every third row, at a position that moves along the row
        x[r, (r * 7) % cols] = np.nan
    x[rows - 1, cols - 1] = np.nan  # the last row (the chunks' tail)
    if rows > 5:
        x[4, :] = np.nan
        x[5, 0], x[5, -1] = np.inf, -np.inf
    if rows > 1:
        x[1, 0] = -np.inf
    return x.astype(np_dtype(dtype))


def _ub_buffers(kernel, suffix):
    """{name: bytes} of the lowered program's UB buffers whose name contains suffix."""
    prog = kernel.get_source("ascend_program")
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"buffer (\w*" + suffix + r"\w*): AIV UB @\d+ \+(\d+)", prog)}


# ---------------------------------------------------------------------------------------------
# Task 1: a stored row max / min of a kernel tile takes its NaN flag in row chunks (at most 16 KiB
# of flags at a time, legalize_vector's flag_chunk_rows), not in a tile of the source's size

def stored_max_min(M, N, dtype):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), D: T.Tensor((M,), dtype), Mx: T.Tensor((M,), dtype),
             Mn: T.Tensor((M,), dtype), Mx2: T.Tensor((M,), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            mx = T.alloc_fragment((M,), dtype)
            mn = T.alloc_fragment((M,), dtype)
            T.copy(X, x)
            T.reduce_max(x, mx, dim=1)
            T.reduce_min(x, mn, dim=1)
            T.copy(mx, Mx)
            T.copy(mn, Mn)
            T.copy(D, mx)
            T.reduce_max(x, mx, dim=1, clear=False)
            T.copy(mx, Mx2)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,dtype", [
    (128, 128, "float16"),   # 2 chunks of 64 rows (16 KiB of float16 flags each)
    (100, 67, "float32"),    # a chunk of 56 rows (288 B each), a tail of 44
    (37, 300, "float16"),    # chunks of 16 rows (the float16 granule: 16 x 608 B), tail 5
    (600, 1, "float32"),     # one column: rows of one 32 B block, a chunk of 512, tail 88
    (9, 1, "float32"),       # fits one chunk: the flag tile of the source's shape (288 B)
    (1, 129, "float32"),     # one row: no chunks
    (70, 40, "bfloat16"),    # computed in float32: the flag in the conversion's own tile
])
def test_stored_row_max_min_propagate_nan_in_chunks(M, N, dtype, target):
    x = _specials((M, N), dtype, M * 1000 + N)
    d = np.where(np.arange(M) % 4 == 2, np.nan, 3.0).astype(np_dtype(dtype))
    mx, mn, mx2 = _run(tw.compile(stored_max_min(M, N, dtype), target=target, out_idx=[2, 3, 4]), target, x, d)
    x64 = x.astype(np.float64)
    _same(mx, x64.max(1))
    _same(mn, x64.min(1))
    _same(mx2, np.maximum(d.astype(np.float64), x64.max(1)))


@pytest.mark.parametrize("M,N,dtype,flag_bytes", [
    (128, 128, "float16", 16384),  # before: one 32 KiB flag tile
    (100, 67, "float32", 16128),   # 56 rows of 288 B (67 float32 padded to 32 B)
    (37, 300, "float16", 9728),    # the 16-row granule of a float16 row vector: 16 x 608 B
    (600, 1, "float32", 16384),    # 512 rows of 32 B (before: 19200 B)
    (70, 40, "bfloat16", 0),       # the float32 conversion holds its flags: no flag tile
])
def test_flag_tile_is_a_row_chunk(M, N, dtype, flag_bytes):
    """The flag's UB: the largest source-shaped `_nan` tile is one row chunk of at most 16 KiB
    (or one granule of rows); none when the reduction converts its source (the conversion, dead
    once reduced, holds the flags)."""
    k = tw.compile(stored_max_min(M, N, dtype), target=TARGET, out_idx=[2, 3, 4])
    tiles = {n: b for n, b in _ub_buffers(k, "_nan").items() if n.startswith("x_")}
    assert max(tiles.values(), default=0) == flag_bytes, tiles


def pipelined_row_max(stages):
    """fuzz-133745 (test_ascend_pipelined.py's _reduce_rows) with the max read back: a stored
    float16 row max of float32 data in 128 x 128 tiles, num_stages=stages."""
    M, N = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float16")):
        with T.Kernel(T.ceildiv(M, 128)) as by:
            x = T.alloc_fragment((128, 128), "float16")
            r = T.alloc_fragment((128,), "float16")
            T.fill(r, -T.infinity("float16"))
            for kk in T.Pipelined(T.ceildiv(N, 128), num_stages=stages):
                T.copy(A[by * 128, kk * 128], x)
                T.reduce_max(x, r, dim=1, clear=False)
            T.copy(r, B[by * 128])

    return k


@pytest.mark.parametrize("M,N", [(130, 300), (9, 1), (256, 256)])
def test_pipelined_stored_row_max_two_stages_with_nan(M, N):
    """Two stages run (no note; with the 32 KiB flag tile of session 22 one did), and
    the row maxima follow the NaN rule in every chunk and iteration: equal to numpy's and cpu's."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", tw.TilewrightWarning)
        kernel = tw.compile(pipelined_row_max(2), out_idx=[-1], target=TARGET)
    a = _specials((M, N), "float32", M + N)
    (got,) = [run_checked(kernel, a)]
    padded = np.zeros((M, -(-N // 128) * 128), np.float16)  # a tail reads zeros (both targets)
    padded[:, :N] = a.astype(np.float16)
    ref = padded.astype(np.float64).max(axis=1)
    _same(got, ref)
    _same(got, tw.compile(pipelined_row_max(2), out_idx=[-1])(a))


# ---------------------------------------------------------------------------------------------
# Task 2 (b): a UB T.copy between a column tile (R, 1) and a 1-D tile (R,), both ways. The column
# tile's elements sit a padded row (32 B) apart: reading them into a 1-D tile is a flat Gather
# (legalize_vector MapLowering::gather); the other way was already a strided write.

def column_copies(R, C, col, dtype):
    @T.prim_func
    def main(X: T.Tensor((R, C), dtype), V: T.Tensor((R,), dtype), Y: T.Tensor((R,), dtype),
             Z: T.Tensor((R, 1), dtype)):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((R, C), dtype)
            v = T.alloc_fragment((R,), dtype)
            w = T.alloc_fragment((R,), dtype)
            z = T.alloc_fragment((R, 1), dtype)
            T.copy(X, c)
            T.copy(V, v)
            if C == 1:
                T.copy(c, w)                     # (R, 1) -> (R,)
            else:
                for i in T.Parallel(R):
                    w[i] = c[i, col]             # one column of a wider tile
            T.copy(v, z)                         # (R,) -> (R, 1)
            for i in T.Parallel(R):
                w[i] = w[i] + z[i, 0]
            T.copy(w, Y)
            T.copy(z, Z)
    return main


# every shape in float32 and float16; bfloat16 and int32 (the element sizes of float16 and float32: the
# same padded-row gather) at a column tile and the last column of a wide tile, for their own add
# (session 27, h-citrim15: CI time; 48 -> 32 cases)
COLUMN_SHAPES = [(16, 1, 0), (7, 1, 0), (1, 1, 0), (300, 1, 0), (37, 5, 3), (9, 40, 39)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("R,C,col,dtype", [(*s, d) for d in ("float32", "float16") for s in COLUMN_SHAPES]
                         + [(*s, d) for d in ("bfloat16", "int32") for s in [(7, 1, 0), (9, 40, 39)]])
def test_column_tile_to_1d_tile_copies(R, C, col, dtype, target):
    rng = np.random.default_rng(R * 100 + C)
    x = rng.integers(-50, 50, (R, C)).astype(np_dtype(dtype))
    v = rng.integers(-50, 50, (R,)).astype(np_dtype(dtype))
    y, z = _run(tw.compile(column_copies(R, C, col, dtype), target=target, out_idx=[2, 3]), target, x, v)
    _same(z, v.reshape(R, 1))
    _same(y, x[:, col].astype(np.float64) + v.astype(np.float64))


# ---------------------------------------------------------------------------------------------
# Task 2 (d): a serial loop whose body works on a gemm accumulator with vector code (row by row)
# was "tile 'acc' is on the Cube side at the start of this loop but on the other side at the end
# of its body": split_cube_vector now hands the tile to the vector side before the loop.

def gemm_then_row_loop(M, N, K, dtype, scan):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, K), dtype)
            b = T.alloc_shared((K, N), dtype)
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(acc)
            T.gemm(a, b, acc)
            if scan:
                for i in T.serial(M - 1):        # a scan down the rows: row i + 1 += row i
                    for j in T.Parallel(N):
                        acc[i + 1, j] = acc[i + 1, j] + acc[i, j]
            else:
                for i in T.serial(M):
                    for j in T.Parallel(N):
                        acc[i, j] = acc[i, j] * 2.0 + i
            T.copy(acc, C)
    return main


ROW_LOOPS = [(32, 32, 32, "float16", False), (17, 40, 24, "float16", False), (1, 16, 8, "bfloat16", False),
             (9, 24, 5, "float32", False), (17, 40, 24, "float16", True), (9, 24, 5, "float32", True)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,dtype,scan", ROW_LOOPS)
def test_serial_row_loop_over_a_gemm_accumulator(M, N, K, dtype, scan, target):
    """Row by row (each row scaled) and a scan down the rows (row i + 1 += row i). A scan of a tile
    whose rows are split between the two Vector cores (32 rows here) stays a located error: it is
    not row-local (split_cube_vector's AIV split): the test below."""
    rng = np.random.default_rng(M * 7 + K)
    a = (rng.integers(-4, 5, (M, K)) / 2).astype(np_dtype(dtype))   # exact products and sums
    b = (rng.integers(-4, 5, (K, N)) / 2).astype(np_dtype(dtype))
    (c,) = [_run(tw.compile(gemm_then_row_loop(M, N, K, dtype, scan), target=target, out_idx=[2]), target, a, b)]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ref = np.cumsum(ref, axis=0) if scan else ref * 2 + np.arange(M)[:, None]
    _same(c, ref)


def gemm_in_loop_after_vector_work(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, clear_accum=True)
            for k in T.serial(2):
                for i, j in T.Parallel(M, N):
                    acc[i, j] = acc[i, j] * 0.5
                T.gemm(a, b, acc)
            T.copy(acc, C)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_into_a_tile_the_loop_scales(target):
    """A serial loop that scales a gemm accumulator and then accumulates another gemm into it:
    acc = A B, then twice acc = 0.5 acc + A B (1.75 A B)."""
    M, N, K = 32, 48, 40
    rng = np.random.default_rng(5)
    a = (rng.integers(-4, 5, (M, K)) / 2).astype(np.float16)
    b = (rng.integers(-4, 5, (K, N)) / 2).astype(np.float16)
    (c,) = [_run(tw.compile(gemm_in_loop_after_vector_work(M, N, K), target=target, out_idx=[2]), target, a, b)]
    _same(c, 1.75 * (a.astype(np.float64) @ b.astype(np.float64)))


def test_scan_of_rows_split_between_vector_cores_is_located():
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(gemm_then_row_loop(32, 32, 32, "float16", True), target=TARGET, out_idx=[2])
    m = str(e.value)
    assert "is not row-local" in m and "for i in T.serial(M - 1)" in m, m


# ---------------------------------------------------------------------------------------------
# Task 2 (c): a float16 / bfloat16 reduction of an N-D tile converts it to float32 in chunks of its
# first dim (its second for a reduction over the first): the whole tile's float32 copy overflowed
# the UB where cpu runs. Values are quarters, so float32 sums are exact and rounded once into dst.

def reduce_nd(shape, dim, kind, dtype, clear=True):
    dsh = tuple(x for k, x in enumerate(shape) if k != dim)

    @T.prim_func
    def main(X: T.Tensor(shape, dtype), D: T.Tensor(dsh, dtype), Y: T.Tensor(dsh, dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment(shape, dtype)
            r = T.alloc_fragment(dsh, dtype)
            T.copy(X, x)
            T.copy(D, r)
            if kind == "sum":
                T.reduce_sum(x, r, dim=dim, clear=clear)
            elif kind == "max":
                T.reduce_max(x, r, dim=dim, clear=clear)
            else:
                T.reduce_min(x, r, dim=dim, clear=clear)
            T.copy(r, Y)
    return main


ND_CASES = [  # (shape, dim, kind, dtype, clear)
    ((4, 64, 128), 2, "sum", "float16", True),     # 192 KiB of tile + float32 copy before: overflow
    ((4, 64, 128), 1, "sum", "float16", False),
    ((5, 48, 130), 0, "sum", "float16", True),     # chunks of the second dim, a tail
    ((3, 33, 200), 2, "max", "bfloat16", True),    # bfloat16 max in float32: NaN flag in the chunk
    ((7, 20, 96), 1, "min", "bfloat16", False),
    ((2, 3, 4, 300), 3, "sum", "bfloat16", True),  # 4-D
    ((1, 9, 70), 2, "sum", "float16", True),       # one index of the first dim: one chunk
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,dim,kind,dtype,clear", ND_CASES,
                         ids=[f"{'x'.join(map(str, c[0]))}-d{c[1]}-{c[2]}-{c[3]}-{'clear' if c[4] else 'merge'}"
                              for c in ND_CASES])
def test_narrow_nd_reduction_in_chunks(shape, dim, kind, dtype, clear, target):
    rng = np.random.default_rng(sum(shape) + dim)
    x = (rng.integers(-8, 9, shape) / 4).astype(np.float64)
    dsh = tuple(v for k, v in enumerate(shape) if k != dim)
    d = (rng.integers(-8, 9, dsh) / 4).astype(np.float64)
    if kind != "sum":
        x[x == 0] = 0.25  # no signed zeros (their order is unspecified)
        flat = x.reshape(-1)
        flat[:: 97] = np.nan  # NaN spread over the chunks
        d[d == 0] = 0.5
    x, d = x.astype(np_dtype(dtype)), d.astype(np_dtype(dtype))
    (y,) = [_run(tw.compile(reduce_nd(shape, dim, kind, dtype, clear), target=target, out_idx=[2]), target, x, d)]
    x64, d64 = x.astype(np.float64), d.astype(np.float64)
    ref = {"sum": x64.sum(dim), "max": x64.max(dim), "min": x64.min(dim)}[kind]
    if not clear:
        ref = {"sum": d64 + ref, "max": np.maximum(d64, ref), "min": np.minimum(d64, ref)}[kind]
    _same(y, ref.astype(np_dtype(dtype)))


# ---------------------------------------------------------------------------------------------
# hunt11a F2 (routed by the lead): softmax over a 32000-wide row (Llama-2's vocabulary) at block_M 1
# was a UB overflow on ascend910b: the row max's halvings took 124000 B of scratch next to the
# 128000 B row. A whole source of more than half the UB is now reduced unhalved, and rows of more
# than 255 repeats are reduced along the row (select_vector_calls' per-row form; the per-chunk
# form's uint8 dstRepStride overflowed).

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import softmax  # noqa: E402


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N", [32000, 25001])
def test_softmax_over_a_vocabulary_row(N, dtype):
    x = tw.testing.randn((3, N), dtype, scale=3.0, seed=np.random.default_rng(N))
    y = run_checked(softmax.softmax(N, block_M=1, dtype=dtype, target=TARGET), x)
    ref = softmax.reference(x)
    tol = {"float32": (1e-9, 1e-5), "float16": (1e-7, 2e-3), "bfloat16": (1e-6, 1.6e-2)}[dtype]
    tw.testing.assert_close(np.asarray(y, np.float64), ref, atol=tol[0], rtol=tol[1], msg=f"softmax {N} {dtype}")


def long_row_reductions(N):
    @T.prim_func
    def main(X: T.Tensor((1, N), "float32"), S: T.Tensor((1,), "float32"), Mx: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((1, N), "float32")
            s = T.alloc_fragment((1,), "float32")
            m = T.alloc_fragment((1,), "float32")
            T.copy(X, x)
            T.reduce_sum(x, s, dim=1)
            T.reduce_max(x, m, dim=1)
            T.copy(s, S)
            T.copy(m, Mx)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("N,nan", [(32000, False), (32000, True), (40000, False), (16321, True)])
def test_long_row_sum_and_max(N, nan, target):
    """One row of more than 255 repeats (and of more than half the UB at 32000 / 40000 float32):
    quarters, so the sum is exact in float32; the max with a NaN (its flag) or without."""
    x = (np.random.default_rng(N).integers(-40, 41, (1, N)) / 4).astype(np.float32)
    if nan:
        x[0, N - 3] = np.nan
    s, m = _run(tw.compile(long_row_reductions(N), target=target, out_idx=[1, 2]), target, x)
    _same(s, x.astype(np.float64).sum(1))
    _same(m, x.astype(np.float64).max(1))


# ---------------------------------------------------------------------------------------------
# Task 2 (e): float `%` by a constant divisor (test_ascend_portable_s22.py's divisors are run-time
# scalars or tiles). Measured and reverted: the fix-up's sign test as r < 0 / r > 0 by the
# constant's sign (no r * y) saved one instruction but no UB (docs/ascend.md, session 23).

def mod_by_constant(M, N, dtype, c):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                x[i, j] = x[i, j] % c
            T.copy(x, Y)
    return main


# every pair of (shape and dtype, divisor, target) values (tw_test_util.pairwise: 15 cases, not the
# 30 of the product; session 29, h-ci): every divisor at every shape, each on both targets
@pytest.mark.parametrize("MND,c,target", pairwise([(5, 37, "float32"), (3, 70, "float16"), (1, 1, "bfloat16")],
                                                  [2.0, -2.0, 0.25, -8.0, 3], TARGETS))
def test_float_mod_by_constant_exact_cases(MND, c, target):
    M, N, dtype = MND
    """Quarters by powers of two (exact), and by 3 (x / 3 rounds: within 2 ulp modulo |3|)."""
    x = (np.random.default_rng(M * N).integers(-400, 401, (M, N)) / 4).astype(np_dtype(dtype))
    y = _run(tw.compile(mod_by_constant(M, N, dtype, c), target=target, out_idx=[1]), target, x)
    ref = np.mod(x.astype(np.float64), c)
    if c == 3:
        assert (np.sign(y)[y != 0] >= 0).all()
        d = np.abs(np.asarray(y, np.float64) - ref) % 3
        assert (np.minimum(d, 3 - d) <= 2 * np.spacing(np.float32(100))).all()
    else:
        _same(y, ref.astype(np_dtype(dtype)))


@pytest.mark.parametrize("c", [2.5, -0.1])
def test_float_mod_by_constant_random_on_both_targets(c):
    x = (np.random.default_rng(12).standard_normal((16, 300)) * 100).astype(np.float32)
    outs = [_run(tw.compile(mod_by_constant(16, 300, "float32", c), target=t, out_idx=[1]), t, x) for t in TARGETS]
    ref = np.mod(x.astype(np.float64), c)
    for y in outs:
        assert (np.sign(y)[y != 0] == np.sign(c)).all()
        assert (np.abs(y) <= abs(c)).all()
        ulp = np.spacing(np.maximum(np.abs(x), np.float32(abs(c)))).astype(np.float64)
        diff = np.abs(np.asarray(y, np.float64) - ref) % abs(c)
        assert (np.minimum(diff, abs(c) - diff) <= 2 * ulp).all()
