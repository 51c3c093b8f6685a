"""int32 on the Ascend Vector side against numpy and the cpu target (issue 10, integer gaps).

- int32 reductions (T.reduce_sum / reduce_max / reduce_min, rows and columns, clear=False merges)
  are exact int32 Add/Max/Min calls, not float32 (exact only below 2^24): tails, odd widths and
  more rows than one 64-row group of select_vector_calls' int32 row reduce.
- int32 Add/Sub/Mul/Adds/Muls whose result leaves int32: the language wraps modulo 2^32, the 910B
  documentation does not say what the Vector unit gives (wrap or saturation), so the simulator
  reports it at the kernel line instead of storing a guess (the cpu target wraps).
- Expert-mode conversions dav-c220 has no Cast for are a located error naming the chain of
  conversions to write (the automatic pipeline's); written that way they give numpy's result.

Simulated results are a model's, not measurements on an NPU."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

from ascend_util import TARGET, run_checked
from tw_test_util import marked_line

THIS_FILE = __file__


def where(marker):
    return marked_line(THIS_FILE, "@" + marker)[0]


def reduce_kernel(M, N, rows, dim, kind):
    """Reduces each rows x N tile of A (an M x N int32 tensor) along `dim`: rows (dim=1) give one
    value per row, stored per tile; columns (dim=0) are merged over the tiles with clear=False."""
    out = N if dim == 0 else M
    op = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min}[kind]

    @T.prim_func
    def k(A: T.Tensor((M, N), "int32"), B: T.Tensor((out,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((rows, N), "int32")
            r = T.alloc_fragment((N,) if dim == 0 else (rows,), "int32")
            if dim == 0:
                T.copy(A[0, 0], x)
                op(x, r, dim=0)
                if M // rows > 1:
                    for t in T.serial(M // rows - 1):
                        T.copy(A[(t + 1) * rows, 0], x)
                        op(x, r, dim=0, clear=False)
                T.copy(r, B[0])
            else:
                for t in T.serial(M // rows):
                    T.copy(A[t * rows, 0], x)
                    op(x, r, dim=1)
                    T.copy(r, B[t * rows])
    return k


def reference(a, dim, kind):
    v = a.astype(np.int64)
    got = {"sum": v.sum(axis=dim), "max": v.max(axis=dim), "min": v.min(axis=dim)}[kind]
    return ((got + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)   # the language's wrap


# (M, N, rows): widths 1, 5, 8, 13, 64 (one repeat), 300 (halved first, then a 75-wide tail) and
# 130 rows (three 64-row groups, the last one not a whole 32 B block of results)
SHAPES = [(32, 1, 16), (48, 5, 16), (24, 8, 8), (18, 13, 9), (130, 64, 130), (140, 300, 70)]


@pytest.mark.parametrize("M,N,rows", SHAPES)
@pytest.mark.parametrize("dim", [1, 0])
def test_int32_sums_are_exact_beyond_float32(M, N, rows, dim):
    rng = np.random.default_rng(M * N + dim)
    bound = int(0.9 * 2 ** 31) // (M if dim == 0 else N)   # no partial sum leaves int32
    a = rng.integers(-bound, bound, (M, N)).astype(np.int32)
    ref = reference(a, dim, "sum")
    k = reduce_kernel(M, N, rows, dim, "sum")
    kernel = tw.compile(k, out_idx=[1], target=TARGET)
    prog = kernel.get_source("ascend_program")
    assert "WholeReduceSum" not in prog and "float32" not in prog, prog
    np.testing.assert_array_equal(run_checked(kernel, a), ref)
    np.testing.assert_array_equal(tw.compile(k, out_idx=[1])(a), ref)
    if N >= 5:   # float32 (the old path) would have rounded some of these sums
        assert np.any(np.abs(ref) > 2 ** 24)
        assert np.any(ref.astype(np.float32).astype(np.int64) != ref)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("M,N,rows,dim", [(48, 5, 16, 1), (140, 300, 70, 1), (18, 13, 9, 0)])
def test_int32_max_min_are_exact_beyond_float32(M, N, rows, dim, kind):
    rng = np.random.default_rng(N)
    a = (rng.integers(-2 ** 30, 2 ** 30, (M, N)) * 2 + 1).astype(np.int32)   # not float32 values
    ref = reference(a, dim, kind)
    k = reduce_kernel(M, N, rows, dim, kind)
    np.testing.assert_array_equal(run_checked(tw.compile(k, out_idx=[1], target=TARGET), a), ref)
    np.testing.assert_array_equal(tw.compile(k, out_idx=[1])(a), ref)
    assert np.any(ref.astype(np.float32).astype(np.int64) != ref)


@pytest.mark.parametrize("dim", [1, 0])
def test_int32_sums_near_the_int32_limits(dim):
    """Terms of +-2^31 magnitude whose partial sums all fit int32 are exact; a sum that leaves int32
    (which the language wraps, as the cpu target does) is the simulator's located int32-overflow
    report: whether dav-c220's int32 Add wraps or saturates is undocumented."""
    M, N, rows = 16, 24, 16
    k = reduce_kernel(M, N, rows, dim, "sum")
    kernel = tw.compile(k, out_idx=[1], target=TARGET)
    lines = np.full((M, N) if dim == 1 else (N, M), -3, np.int32)   # each reduced line: one huge
    lines[:, 0] = 2 ** 31 - 1                                      # term, small ones of the other
    lines[0, 0], lines[0, 1:] = -2 ** 31, 3                        # sign (line 0: -2^31 and +3s)
    a = lines if dim == 1 else np.ascontiguousarray(lines.T)
    ref = reference(a, dim, "sum")
    assert np.abs(ref.astype(np.int64)).max() > 2 ** 30
    np.testing.assert_array_equal(run_checked(kernel, a), ref)
    np.testing.assert_array_equal(tw.compile(k, out_idx=[1])(a), ref)
    b = np.full((M, N), 2 ** 30 + 7, np.int32)  # sums near 24 * 2^30: wrap in the language
    wrapped = reference(b, dim, "sum")
    np.testing.assert_array_equal(tw.compile(k, out_idx=[1])(b), wrapped)
    with pytest.raises(TilewrightError) as e:
        kernel(b)
    assert "int32 overflow: int32 Add gives" in e.value.message, e.value.message
    assert "wrap or saturation only an NPU run can tell" in e.value.message
    assert e.value.file == THIS_FILE


@pytest.mark.parametrize("op", ["add", "sub", "mul", "adds", "muls"])
def test_int32_arithmetic_that_leaves_int32_is_a_located_error(op):
    M, N = 9, 20   # 180 elements: not whole 64-element repeats

    @T.prim_func
    def k(A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "int32"), C: T.Tensor((M, N), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "int32")
            y = T.alloc_fragment((M, N), "int32")
            T.copy(A[0, 0], x)
            T.copy(B[0, 0], y)
            for i, j in T.Parallel(M, N):
                if op == "add":
                    x[i, j] = x[i, j] + y[i, j]  # @ADD
                elif op == "sub":
                    x[i, j] = x[i, j] - y[i, j]  # @SUB
                elif op == "mul":
                    x[i, j] = x[i, j] * y[i, j]  # @MUL
                elif op == "adds":
                    x[i, j] = x[i, j] + 2000000000  # @ADDS
                else:
                    x[i, j] = x[i, j] * 3  # @MULS
            T.copy(x, C[0, 0])

    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
          "adds": lambda p, q: p + 2000000000, "muls": lambda p, q: p * 3}[op]
    wrap = lambda v: ((v + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)  # noqa: E731
    rng = np.random.default_rng(3)
    kernel = tw.compile(k, out_idx=[2], target=TARGET)
    cpu = tw.compile(k, out_idx=[2])
    small = rng.integers(-40000, 40000, (2, M, N)).astype(np.int32)   # products up to 1.6e9: fit
    ref = wrap(fn(small[0].astype(np.int64), small[1].astype(np.int64)))
    np.testing.assert_array_equal(run_checked(kernel, small[0], small[1]), ref)
    np.testing.assert_array_equal(cpu(small[0], small[1]), ref)
    big = small.copy()
    big[0, 4, 7], big[1, 4, 7] = (2 ** 31 - 5, -7) if op == "sub" else (2 ** 31 - 5, 9)
    big[0, 4, 8], big[1, 4, 8] = 2 ** 30, 2 ** 30
    np.testing.assert_array_equal(cpu(big[0], big[1]), wrap(fn(big[0].astype(np.int64), big[1].astype(np.int64))))
    if op in ("mul", "muls"):  # a stored product is exact modulo 2^32 since h-mul35 (16-bit pieces), no report
        np.testing.assert_array_equal(run_checked(kernel, big[0], big[1]),
                                      wrap(fn(big[0].astype(np.int64), big[1].astype(np.int64))))
        return
    with pytest.raises(TilewrightError) as e:
        kernel(big[0], big[1])
    assert "int32 overflow: int32 " in e.value.message, e.value.message
    assert "the 910B documentation does not say what the Vector unit stores" in e.value.message
    assert e.value.file == THIS_FILE and e.value.line == where(op.upper())


# ---- expert mode: conversions without a dav-c220 Cast ---------------------------------------------

CHAINS = [  # (from, to, the chain named in the hint, or None: no exact chain)
    ("float32", "int8", "float32 -> int32 -> float32 -> float16 -> int8"),
    ("float32", "uint8", "float32 -> int32 -> float32 -> float16 -> uint8"),
    ("int8", "float32", "int8 -> float16 -> float32"),
    ("uint8", "int32", "uint8 -> float16 -> int32"),
    ("int32", "float16", "int32 -> float32 -> float16"),   # dav-c220's int32 -> half Cast dequantizes (F11)
    ("float16", "int32", None),   # half -> int32 is a Cast pair: no error
    ("float16", "bfloat16", "float16 -> float32 -> bfloat16"),
    ("bfloat16", "float16", "bfloat16 -> float32 -> float16"),
    ("int32", "int8", "no chain"),
]


def expert_cast(src, dst, how):
    @T.prim_func
    def k(X: T.Tensor((8, 64), src), Y: T.Tensor((8, 64), dst)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), src)
            b = T.alloc_UB((8, 64), dst)
            with T.Scope("V"):
                T.copy(X[0, 0], a)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                if how == "cast":
                    T.cast(b, a)  # @CAST
                else:
                    T.copy(a, b)  # @COPY
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(b, Y[0, 0])
    return k


# (an expert UB -> UB T.copy converts from float16/float32 only: another source is its own error)
@pytest.mark.parametrize("src,dst,chain,how", [c + (how,) for c in CHAINS for how in ("cast", "copy")
                                               if how == "cast" or c[0] in ("float16", "float32")])
def test_expert_conversion_without_a_cast_pair_names_the_chain(src, dst, chain, how):
    k = expert_cast(src, dst, how)
    if chain is None:
        tw.compile(k, out_idx=[1], target=TARGET)
        return
    with pytest.raises(TilewrightError) as e:
        tw.compile(k, out_idx=[1], target=TARGET)
    assert f"conversion from {src} to {dst}: dav-c220 has no Cast for this pair" in e.value.message, e.value.message
    assert e.value.line == where(how.upper())
    if chain == "no chain":
        assert "no chain of Casts gives this conversion exactly" in e.value.hint, e.value.hint
    else:
        assert f"convert in steps, through one UB tile per dtype: {chain}" in e.value.hint, e.value.hint


def test_expert_float32_to_int8_written_as_the_chain_matches_numpy():
    """The chain the error names, written out, truncates like the language (cpu: float -> int8 is
    truncation toward zero, defined for in-range values)."""
    @T.prim_func
    def k(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "int8")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            n = T.alloc_UB((8, 64), "int32")
            f = T.alloc_UB((8, 64), "float32")
            h = T.alloc_UB((8, 64), "float16")
            b = T.alloc_UB((8, 64), "int8")
            with T.Scope("V"):
                T.copy(X[0, 0], a)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.cast(n, a)
                T.pipe_barrier("V")
                T.cast(f, n)
                T.pipe_barrier("V")
                T.cast(h, f)
                T.pipe_barrier("V")
                T.cast(b, h)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(b, Y[0, 0])

    x = np.random.default_rng(5).uniform(-128.9, 127.9, (8, 64)).astype(np.float32)
    got = run_checked(tw.compile(k, out_idx=[1], target=TARGET), x)
    np.testing.assert_array_equal(got, np.trunc(x).astype(np.int8))


# ---- int32 -> int8/uint8 and bfloat16 -> int32 conversions (found by the differential fuzzer) ------

def narrowing_kernel(src, dst, M, N, bm, bn, arith):
    """A (M, N) `src` tensor through an int32 tile (optionally x * 3 - 7 on it) into a `dst` tile
    and out: the language wraps int32 into int8/uint8 modulo 256 for every value."""
    @T.prim_func
    def k(A: T.Tensor((M, N), src), B: T.Tensor((M, N), dst)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), "int32")
            T.copy(A[by * bm, bx * bn], x)
            if arith:
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = x[i, j] * 3 - 7
            o = T.alloc_fragment((bm, bn), dst)
            T.copy(x, o)
            T.copy(o, B[by * bm, bx * bn])
    return k


@pytest.mark.parametrize("dst", ["int8", "uint8"])
@pytest.mark.parametrize("arith", [False, True])
@pytest.mark.parametrize("M,N,bm,bn", [(7, 5, 8, 8), (33, 70, 16, 64), (1, 1, 1, 1)])
def test_int32_to_int8_wraps_every_int32_value(dst, arith, M, N, bm, bn):
    """Was an error ("may reach 2^24": the wrap went through float32); now exact in int32 on the
    Vector unit, the extremes of int32 included, the same bits as cpu and numpy."""
    rng = np.random.default_rng(M * 100 + N)
    a = rng.integers(-2 ** 31, 2 ** 31, size=(M, N), dtype=np.int64) // (8 if arith else 1)
    edge = [2 ** 28, -2 ** 28, 255, -129] if arith else [2 ** 31 - 1, -2 ** 31, 255, -129]
    a.flat[:min(4, a.size)] = edge[:min(4, a.size)]
    a = a.astype(np.int32)
    v = a.astype(np.int64) * 3 - 7 if arith else a.astype(np.int64)
    ref = v.astype(np.int32).astype(dst)
    k = narrowing_kernel("int32", dst, M, N, bm, bn, arith)
    np.testing.assert_array_equal(tw.compile(k, target="cpu", out_idx=[1])(a), ref)
    np.testing.assert_array_equal(run_checked(tw.compile(k, target=TARGET, out_idx=[1]), a), ref)


def test_bfloat16_to_int32_copy_truncates_like_cpu():
    """Was "cast on bfloat16: the Vector core has no bfloat16 arithmetic" at the copy; now
    bfloat16 -> float32 -> int32 (exact, then truncation toward zero), with a tail column."""
    import ml_dtypes

    @T.prim_func
    def k(A: T.Tensor((9, 9), "bfloat16"), B: T.Tensor((9, 10), "int32")):
        with T.Kernel(T.ceildiv(10, 4), T.ceildiv(9, 8)) as (bx, by):
            x = T.alloc_fragment((8, 4), "int32")
            T.copy(A[by * 8, bx * 4], x)
            T.copy(x, B[by * 8, bx * 4])

    a = (np.random.default_rng(5).standard_normal((9, 9)) * 1000).astype(ml_dtypes.bfloat16)
    ref = np.zeros((9, 10), np.int32)
    ref[:, :9] = np.trunc(a.astype(np.float64))
    np.testing.assert_array_equal(tw.compile(k, target="cpu", out_idx=[1])(a), ref)
    np.testing.assert_array_equal(run_checked(tw.compile(k, target=TARGET, out_idx=[1]), a), ref)


def test_overflow_of_never_written_tile_elements_says_so():
    # session 18 hunt: a map over a whole (1, 32) int32 tile of which a copy loaded 17 columns
    # adds to the other 15, never written, which hold the simulator's 0x7B fill (2071690107):
    # `+ 100000000` leaves int32 there. cpu never stores them, so its answer is right; the simulator's report
    # stays (the Vector unit computes on those lanes) but names the cause and the fix. (It was `* 2`, which
    # is x << 1 since h-mul35: a stored product is exact modulo 2^32, no report.)
    S, D = 15, 17

    @T.prim_func
    def main(X: T.Tensor((S, 1, D), "int32"), Y: T.Tensor((1, S, D), "int32")):
        with T.Kernel(S) as bx:
            t = T.alloc_fragment((1, 32), "int32")
            T.copy(X[bx:bx + 1, 0, 0:D], t[0:1, 0:D])
            for i, j in T.Parallel(1, 32):
                t[i, j] = t[i, j] + 100000000
            T.copy(t[0:1, 0:D], Y[0, bx:bx + 1, 0:D])

    x = np.arange(S * D, dtype=np.int32).reshape(S, 1, D)
    cpu = tw.compile(main, target="cpu", out_idx=[-1])(x)
    np.testing.assert_array_equal(cpu, (x + 100000000).transpose(1, 0, 2))
    with pytest.raises(TilewrightError) as e:
        tw.compile(main, target=TARGET, out_idx=[-1])(x)
    msg = e.value.message
    assert "int32 overflow: int32 Adds gives 2171690107" in msg and "(bytes 0x7B)" in msg, msg
    assert "compute over the written window only, or fill the tile first" in msg, msg
