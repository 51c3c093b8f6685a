"""Integer bitwise operators, shifts, // and % (issue 13, language part).

Semantics (docs/language.md, "Operators"): Python's on the element type's two's complement bits.
`&`, `|`, `^`, `~` as numpy gives them on the type; a shift count is taken modulo the type's bit
width (`count & (bits - 1)`, so a negative count -k shifts by bits - k); `<<` wraps into the type
when stored; `>>` is arithmetic for signed types and logical for uint8. `//` and `%` follow Python
(floor) with `x // 0 == 0` and `x % 0 == x`. Every reference below is computed with numpy in int64
from those rules, with fixed seeds; results must be equal (integers, no tolerance).

On ascend910b every operator works on scalars (block indices, loop variables, scalar parameters:
the simulator and the AscendC printer); on int32 tile data `~`, `<<` / `>>` (scalar or per-element
counts) and `//` / `%` (any divisor: constants, scalars, tiles; also int8/uint8 tiles) are lowered
exactly; `&`, `|`, `^` on tiles are a located TilewrightError with the alternative (docs/ascend.md).
Simulated results are a model's, not measurements on an NPU."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

from ascend_util import TARGET, run_checked
from tw_test_util import marked_line

THIS_FILE = __file__
DTYPES = ["int8", "uint8", "int32"]
BITS = {"int8": 8, "uint8": 8, "int32": 32}

BINARY = {
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
}


def wrap(v, dtype):
    """int64 values wrapped into dtype (two's complement), as a store does."""
    return np.asarray(v, np.int64).astype(dtype)


def reference(op, a, b, dtype):
    """Python semantics on dtype's bits, computed in int64 (dtype "int64x": not wrapped)."""
    x, y = a.astype(np.int64), b.astype(np.int64)
    bits = BITS.get(dtype, 64)
    if op == "and":
        r = x & y
    elif op == "or":
        r = x | y
    elif op == "xor":
        r = x ^ y
    elif op == "shl":
        r = x << (y & (bits - 1))
    elif op == "shr":
        r = x >> (y & (bits - 1))            # x is already a value of dtype: >= 0 for uint8
    elif op == "floordiv":
        safe = np.where(y == 0, 1, y)
        r = np.where(y == 0, 0, x // safe)
    elif op == "mod":
        safe = np.where(y == 0, 1, y)
        r = np.where(y == 0, x, x % safe)
    else:
        raise AssertionError(op)
    return r if dtype == "int64x" else wrap(r, dtype)


def edge_values(dtype):
    info = np.iinfo(dtype)
    vals = [info.min, info.min + 1, -1, 0, 1, 2, 3, 7, 8, info.max - 1, info.max, -7, 31, 32, 33, -8, -33]
    return np.array([v for v in vals if info.min <= v <= info.max], np.int64)


def operands(dtype, n, seed):
    """a, b of n elements: every pair of edge values first (counts 0, bits-1, out of range, negative,
    divisors 0 and -1, INT_MIN), then random values."""
    rng = np.random.default_rng(seed)
    e = edge_values(dtype)
    ea, eb = np.meshgrid(e, e)
    info = np.iinfo(dtype)
    a = np.concatenate([ea.ravel(), rng.integers(info.min, info.max, n, endpoint=True)])[:max(n, 1)]
    b = np.concatenate([eb.ravel(), rng.integers(info.min, info.max, n, endpoint=True)])[:max(n, 1)]
    return a.astype(dtype), b.astype(dtype)


def binary_kernel(op, dtype, n, tile):
    """C = A op B over n elements in tiles of `tile` (the last tile a tail when tile does not divide n)."""
    @T.prim_func
    def k(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, tile)) as bx:
            a = T.alloc_fragment((tile,), dtype)
            b = T.alloc_fragment((tile,), dtype)
            c = T.alloc_fragment((tile,), dtype)
            T.copy(A[bx * tile], a)
            T.copy(B[bx * tile], b)
            for i in T.Parallel(tile):
                if op == "and":
                    c[i] = a[i] & b[i]
                elif op == "or":
                    c[i] = a[i] | b[i]
                elif op == "xor":
                    c[i] = a[i] ^ b[i]
                elif op == "shl":
                    c[i] = a[i] << b[i]
                elif op == "shr":
                    c[i] = a[i] >> b[i]
                elif op == "floordiv":
                    c[i] = a[i] // b[i]
                else:
                    c[i] = a[i] % b[i]
            T.copy(c, C[bx * tile])
    return k


# (n, tile): one element, a tail (300 = 4 x 64 + 44), a single odd tile, the edge grid in one tile
SHAPES = [(1, 1), (300, 64), (37, 37), (289, 128)]


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,tile", SHAPES)
def test_binary_ops_on_tiles_cpu(op, dtype, n, tile):
    a, b = operands(dtype, n, seed=n * 7 + len(op))
    got = tw.compile(binary_kernel(op, dtype, n, tile), out_idx=[2])(a, b)
    np.testing.assert_array_equal(got, reference(op, a, b, dtype), err_msg=f"{op} {dtype}")


def unary_kernel(dtype, n):
    @T.prim_func
    def k(A: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                C[i] = ~A[i]
    return k


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 17, 300])
def test_bitwise_not_cpu(dtype, n):
    a, _ = operands(dtype, n, seed=n)
    got = tw.compile(unary_kernel(dtype, n), out_idx=[1])(a)
    np.testing.assert_array_equal(got, wrap(~a.astype(np.int64), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_constant_counts_and_precedence_cpu(dtype):
    """Literal counts (0, bits - 1, bits, a negative one) and Python's precedence:
    a | b ^ c & d << 1 + 1 == a | (b ^ (c & (d << (1 + 1))))."""
    bits = BITS[dtype]
    n = 64

    @T.prim_func
    def k(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n, 6), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                C[i, 0] = A[i] << 0
                C[i, 1] = A[i] << (bits - 1)
                C[i, 2] = A[i] >> (bits - 1)
                C[i, 3] = A[i] >> bits          # count modulo bits: >> 0
                C[i, 4] = A[i] << -1            # count modulo bits: << bits - 1
                C[i, 5] = A[i] | B[i] ^ A[i] & B[i] << 1 + 1
    a, b = operands(dtype, n, seed=3)
    x, y = a.astype(np.int64), b.astype(np.int64)
    ref = np.stack([x, x << (bits - 1), x >> (bits - 1), x, x << (bits - 1), x | (y ^ (x & (y << 2)))], axis=1)
    np.testing.assert_array_equal(tw.compile(k, out_idx=[2])(a, b), wrap(ref, dtype))


def test_shift_right_wraps_its_operand_first_cpu():
    """`>>` acts on the type's bits: (a << 4) >> 4 on int8 sign-extends the low nibble, and on uint8
    `~a >> 1` shifts 255 - a (the cpu computes integers in int64 otherwise, wrapping on store)."""
    n = 256

    @T.prim_func
    def k(A: T.Tensor((n,), "int8"), U: T.Tensor((n,), "uint8"), C: T.Tensor((n,), "int8"),
          D: T.Tensor((n,), "uint8")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                C[i] = (A[i] << 4) >> 4
                D[i] = ~U[i] >> 1
    a = np.arange(-128, 128).astype(np.int8)
    u = np.arange(256).astype(np.uint8)
    c, d = tw.compile(k, out_idx=[2, 3])(a, u)
    np.testing.assert_array_equal(c, ((a.astype(np.int64) & 15) ^ 8) - 8)
    np.testing.assert_array_equal(d, (255 - u.astype(np.int64)) >> 1)


def scalar_kernel(n):
    """Bitwise operators on scalar integer expressions: the block index and a scalar parameter
    (a copy's start index, a value added to a tile), on any target."""
    @T.prim_func
    def k(A: T.Tensor((n, 8), "float32"), s: T.int32, C: T.Tensor((n, 8), "float32")):
        with T.Kernel(n) as bx:
            a = T.alloc_fragment((8,), "float32")
            c = T.alloc_fragment((8,), "float32")
            T.copy(A[bx ^ 1, 0], a)
            for j in T.Parallel(8):
                c[j] = a[j] + T.float32(((bx | s) >> 1) + (~bx % 3) + (s << 33) // 4 + (s & 12))
            T.copy(c, C[bx, 0])
    return k


def scalar_reference(a, s):
    out = np.zeros_like(a)
    for bx in range(a.shape[0]):
        # s << 33 on int32: the count is 33 % 32 = 1; the value is not wrapped before the //
        v = ((bx | s) >> 1) + (~bx % 3) + (s << 1) // 4 + (s & 12)
        out[bx] = a[bx ^ 1] + np.float32(v)
    return out


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_scalar_bitwise_index_arithmetic(target):
    n = 6
    a = np.random.default_rng(5).standard_normal((n, 8)).astype(np.float32)
    s = 5
    kernel = tw.compile(scalar_kernel(n), out_idx=[2], target=target)
    got = run_checked(kernel, a, s) if target == TARGET else kernel(a, s)
    np.testing.assert_allclose(got, scalar_reference(a, s), rtol=0, atol=1e-6)


def test_cpu_and_ascend_agree_on_scalar_operators():
    """The differential check: the same kernel on both targets, several scalar parameters
    (negative ones, out-of-range counts)."""
    n = 6
    a = np.random.default_rng(11).standard_normal((n, 8)).astype(np.float32)
    cpu = tw.compile(scalar_kernel(n), out_idx=[2])
    npu = tw.compile(scalar_kernel(n), out_idx=[2], target=TARGET)
    for s in [0, 1, 5, -1, -8, 2 ** 31 - 1, -2 ** 31]:
        np.testing.assert_array_equal(run_checked(npu, a, s), cpu(a, s), err_msg=f"s={s}")


# --- errors -------------------------------------------------------------------------------------

def test_bitwise_on_floats_is_an_error_at_the_line():
    with pytest.raises(TilewrightError, match="'&' needs integer operands, got float32") as e:
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), C: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(8):
                    C[i] = A[i] & 1.0  # @float-and
    assert f":{marked_line(THIS_FILE, '@float-and')[0]}:" in str(e.value)
    assert "hint:" in str(e.value)


@pytest.mark.parametrize("form", ["shl", "not", "shr", "xor"])
def test_float_operands_of_every_bitwise_operator_are_rejected(form):
    with pytest.raises(TilewrightError, match="needs integer operands, got float"):
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), C: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(8):
                    if form == "shl":
                        C[i] = A[i] << 2
                    elif form == "not":
                        C[i] = ~A[i]
                    elif form == "shr":
                        C[i] = A[i] >> A[i]
                    else:
                        C[i] = T.float16(A[i]) ^ 3


def ascend_int32_kernel(n, tile):
    """int32 tiles on Ascend: shifts by constant and scalar-parameter counts, // and % by 2^k.
    C[k] holds the k-th formula (a map on UB stores one whole tile per formula)."""
    @T.prim_func
    def k(A: T.Tensor((n,), "int32"), s: T.int32, C: T.Tensor((8, n), "int32")):
        with T.Kernel(T.ceildiv(n, tile)) as bx:
            a = T.alloc_fragment((tile,), "int32")
            c0 = T.alloc_fragment((tile,), "int32")
            c1 = T.alloc_fragment((tile,), "int32")
            c2 = T.alloc_fragment((tile,), "int32")
            c3 = T.alloc_fragment((tile,), "int32")
            c4 = T.alloc_fragment((tile,), "int32")
            c5 = T.alloc_fragment((tile,), "int32")
            c6 = T.alloc_fragment((tile,), "int32")
            c7 = T.alloc_fragment((tile,), "int32")
            T.copy(A[bx * tile], a)
            for i in T.Parallel(tile):
                c0[i] = a[i] << 3
                c1[i] = a[i] >> 31
                c2[i] = a[i] << s
                c3[i] = a[i] >> s
                c4[i] = a[i] // 8
                c5[i] = a[i] % 8
                c6[i] = a[i] // 1024 + a[i] % 2
                c7[i] = (a[i] >> 33) << -30     # counts 1 and 2
            T.copy(c0, C[0, bx * tile])
            T.copy(c1, C[1, bx * tile])
            T.copy(c2, C[2, bx * tile])
            T.copy(c3, C[3, bx * tile])
            T.copy(c4, C[4, bx * tile])
            T.copy(c5, C[5, bx * tile])
            T.copy(c6, C[6, bx * tile])
            T.copy(c7, C[7, bx * tile])
    return k


def ascend_int32_reference(a, s):
    x = a.astype(np.int64)
    c = s & 31
    cols = [x << 3, x >> 31, x << c, x >> c, x // 8, x % 8, x // 1024 + x % 2, (x >> 1) << 2]
    return wrap(np.stack(cols, axis=0), "int32")


@pytest.mark.parametrize("n,tile", [(1, 1), (300, 64), (37, 37)])
@pytest.mark.parametrize("s", [0, 5, 31, 33, -1])
def test_int32_shifts_and_power_of_two_division_on_ascend(n, tile, s):
    """Edge values (INT_MIN, -1, 0, INT_MAX) and random ones; counts 0, 31, out of range (33 -> 1)
    and negative (-1 -> 31); the same kernel on cpu gives the same (the differential check)."""
    rng = np.random.default_rng(n + 100 * abs(s))
    edges = np.array([-2 ** 31, -2 ** 31 + 1, -9, -8, -7, -1, 0, 1, 7, 8, 9, 2 ** 31 - 1], np.int64)
    a = np.concatenate([edges, rng.integers(-2 ** 31, 2 ** 31, n, endpoint=False)])[:n].astype(np.int32)
    k = ascend_int32_kernel(n, tile)
    npu = tw.compile(k, out_idx=[2], target=TARGET)
    # the shifts are 32-bit: the `<<` results wrap (the cpu target computes in int64 and wraps on store)
    got = run_checked(npu, a, s)
    ref = ascend_int32_reference(a, s)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(tw.compile(k, out_idx=[2])(a, s), ref)
    prog = npu.get_source("ascend_program")
    assert "ShiftLeft" in prog and "ShiftRight" in prog, prog


# int32 tile operators composed from vector instructions on Ascend (docs/ascend.md "Integer
# operators"): ~ (Sub from -1), shifts by a per-element count (five scalar-count shifts selected
# by the count's bits), // and % by anything (float32 estimates and int32 corrections). Each is
# checked on cpu and in the simulator with the checker on (whose int32-overflow report would flag
# any step that leaves int32) against numpy, bit-exact, on every pair of edge values plus random
# ones, with tails and one-element tiles.
ASCEND_COMPOSED = ["shl", "shr", "floordiv", "mod"]


@pytest.mark.parametrize("op", ASCEND_COMPOSED)
@pytest.mark.parametrize("n,tile", SHAPES)
def test_int32_tile_operators_on_ascend(op, n, tile):
    a, b = operands("int32", n, seed=n * 11 + len(op))
    k = binary_kernel(op, "int32", n, tile)
    ref = reference(op, a, b, "int32")
    got = run_checked(tw.compile(k, out_idx=[2], target=TARGET), a, b)
    np.testing.assert_array_equal(got, ref, err_msg=op)
    np.testing.assert_array_equal(tw.compile(k, out_idx=[2])(a, b), ref, err_msg=op)


@pytest.mark.parametrize("n", [1, 17, 300])
def test_int32_bitwise_not_on_ascend(n):
    a, _ = operands("int32", n, seed=n)
    k = unary_kernel_tiles("int32", n, min(n, 128))
    got = run_checked(tw.compile(k, out_idx=[1], target=TARGET), a)
    np.testing.assert_array_equal(got, wrap(~a.astype(np.int64), "int32"))


def test_int32_row_and_column_operands_on_ascend():
    """2-D maps whose divisor / dividend / count is a row vector v[i] or a column vector w[j]
    (120 elements: a partial second repeat), every value an edge value."""
    M, N = 5, 24

    @T.prim_func
    def k(A: T.Tensor((M, N), "int32"), V: T.Tensor((M,), "int32"), W: T.Tensor((N,), "int32"),
          C: T.Tensor((4, M, N), "int32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "int32")
            v = T.alloc_fragment((M,), "int32")
            w = T.alloc_fragment((N,), "int32")
            c = T.alloc_fragment((4, M, N), "int32")
            T.copy(A[0, 0], a)
            T.copy(V[0], v)
            T.copy(W[0], w)
            for i, j in T.Parallel(M, N):
                c[0, i, j] = a[i, j] // v[i]
                c[1, i, j] = w[j] % a[i, j]
                c[2, i, j] = a[i, j] >> w[j]
                c[3, i, j] = v[i] << w[j]
            T.copy(c, C[0, 0, 0])
    rng = np.random.default_rng(2)
    e = edge_values("int32")
    a = rng.choice(e, (M, N)).astype(np.int32)
    v = rng.choice(e, M).astype(np.int32)
    w = rng.choice(e, N).astype(np.int32)
    x = a.astype(np.int64)
    vv = np.broadcast_to(v[:, None], (M, N)).astype(np.int64)
    ww = np.broadcast_to(w[None, :], (M, N)).astype(np.int64)
    ref = np.stack([reference("floordiv", x, vv, "int32"), reference("mod", ww, x, "int32"),
                    reference("shr", x, ww, "int32"), reference("shl", vv, ww, "int32")])
    np.testing.assert_array_equal(run_checked(tw.compile(k, out_idx=[3], target=TARGET), a, v, w), ref)
    np.testing.assert_array_equal(tw.compile(k, out_idx=[3])(a, v, w), ref)


def unary_kernel_tiles(dtype, n, tile):
    @T.prim_func
    def k(A: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, tile)) as bx:
            a = T.alloc_fragment((tile,), dtype)
            c = T.alloc_fragment((tile,), dtype)
            T.copy(A[bx * tile], a)
            for i in T.Parallel(tile):
                c[i] = ~a[i]
            T.copy(c, C[bx * tile])
    return k


def divide_by_scalars_kernel(n, tile):
    """// and % by constants (not powers of two, negative, -1, INT32_MIN) and by a scalar
    parameter s (which may be 0, -1 or INT32_MIN at run time); C[k] holds the k-th formula."""
    @T.prim_func
    def k(A: T.Tensor((n,), "int32"), s: T.int32, C: T.Tensor((10, n), "int32")):
        with T.Kernel(T.ceildiv(n, tile)) as bx:
            a = T.alloc_fragment((tile,), "int32")
            c = T.alloc_fragment((10, tile), "int32")
            T.copy(A[bx * tile], a)
            for i in T.Parallel(tile):
                c[0, i] = a[i] // 3
                c[1, i] = a[i] % 3
                c[2, i] = a[i] // -7
                c[3, i] = a[i] % -7
                c[4, i] = a[i] // -1
                c[5, i] = a[i] % -2147483648
                c[6, i] = a[i] // s
                c[7, i] = a[i] % s
                c[8, i] = a[i] // -4
                c[9, i] = (a[i] // 1000003) % (a[i] % 10 - 5)
            T.copy(c, C[0, bx * tile])
    return k


def divide_by_scalars_reference(a, s):
    x = a.astype(np.int64)

    def fd(p, q):
        return reference("floordiv", p, np.broadcast_to(np.asarray(q, np.int64), p.shape), "int64x")

    def md(p, q):
        return reference("mod", p, np.broadcast_to(np.asarray(q, np.int64), p.shape), "int64x")
    cols = [fd(x, 3), md(x, 3), fd(x, -7), md(x, -7), fd(x, -1), md(x, -2 ** 31), fd(x, s), md(x, s), fd(x, -4),
            md(fd(x, 1000003), md(x, 10) - 5)]
    return wrap(np.stack(cols, axis=0), "int32")


@pytest.mark.parametrize("n,tile", [(1, 1), (300, 64), (37, 37)])
@pytest.mark.parametrize("s", [3, 0, -1, -2 ** 31, 2 ** 31 - 1, 65537])
def test_int32_division_by_scalars_on_ascend(n, tile, s):
    rng = np.random.default_rng(n + abs(s) % 1000)
    edges = edge_values("int32")
    a = np.concatenate([edges, rng.integers(-2 ** 31, 2 ** 31, n)])[:n].astype(np.int32)
    k = divide_by_scalars_kernel(n, tile)
    ref = divide_by_scalars_reference(a, s)
    got = run_checked(tw.compile(k, out_idx=[2], target=TARGET), a, s)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(tw.compile(k, out_idx=[2])(a, s), ref)


def test_int32_division_large_sample_on_ascend():
    """Exactness beyond the edge grid: every int16-range dividend against divisors -300..300 and a
    few wide ones (the float estimate's worst cases are small divisors and dividends near a
    multiple), then a random sample of int32 pairs (divisors of every magnitude)."""
    rng = np.random.default_rng(13)
    x16 = np.arange(-2 ** 15, 2 ** 15, dtype=np.int64)
    divisors = np.concatenate([np.arange(-300, 301), [-2 ** 31, -2 ** 30, -65537, 65535, 2 ** 24 + 1, 2 ** 31 - 1]])
    picked = rng.choice(divisors, 24, replace=False)
    a = np.concatenate([np.tile(x16, len(picked)), rng.integers(-2 ** 31, 2 ** 31, 2 ** 17)])
    b = np.concatenate([np.repeat(picked, len(x16)),
                        rng.integers(-2 ** 31, 2 ** 31, 2 ** 17) >> rng.integers(0, 31, 2 ** 17)])
    a, b = a.astype(np.int32), b.astype(np.int32)
    n = a.size
    for op in ("floordiv", "mod"):
        k = binary_kernel(op, "int32", n, 2048)
        got = run_checked(tw.compile(k, out_idx=[2], target=TARGET), a, b)
        np.testing.assert_array_equal(got, reference(op, a, b, "int32"), err_msg=op)


@pytest.mark.parametrize("op", ["floordiv", "mod"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_small_int_division_on_ascend(op, dtype):
    """int8/uint8 tiles are computed in float32; // and % divide their (exact) values in int32."""
    a, b = operands(dtype, 300, seed=5)
    k = binary_kernel(op, dtype, 300, 64)
    got = run_checked(tw.compile(k, out_idx=[2], target=TARGET), a, b)
    np.testing.assert_array_equal(got, reference(op, a, b, dtype), err_msg=f"{op} {dtype}")


UNSUPPORTED_ON_ASCEND = [
    ("and", "'&' on int32 tile data is not supported on Ascend"),
    ("or", "'|' on int32 tile data is not supported on Ascend"),
    ("xor", r"'\^' on int32 tile data is not supported on Ascend"),
]


@pytest.mark.parametrize("form,match", UNSUPPORTED_ON_ASCEND)
def test_unsupported_integer_tile_operators_on_ascend_are_located_errors(form, match):
    @T.prim_func
    def k(A: T.Tensor((64,), "int32"), C: T.Tensor((64,), "int32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((64,), "int32")
            c = T.alloc_fragment((64,), "int32")
            T.copy(A[0], a)
            for i in T.Parallel(64):
                if form == "and":
                    c[i] = a[i] & 255  # @un-and
                elif form == "or":
                    c[i] = a[i] | 255  # @un-or
                else:
                    c[i] = a[i] ^ 255  # @un-xor
            T.copy(c, C[0])
    with pytest.raises(TilewrightError, match=match) as e:
        tw.compile(k, target=TARGET)
    assert "hint:" in str(e.value) and "cpu target" in str(e.value)
    assert f":{marked_line(THIS_FILE, '@un-' + form)[0]}:" in str(e.value)
    a = np.arange(-32, 32, dtype=np.int32)   # the cpu target computes them
    got = tw.compile(k, out_idx=[1])(a)
    x = a.astype(np.int64)
    ref = {"and": x & 255, "or": x | 255, "xor": x ^ 255}[form]
    np.testing.assert_array_equal(got, wrap(ref, "int32"))


def test_int8_bitwise_not_on_ascend_asks_for_int32():
    """~ on an int8 tile stays an error naming int32 (the vector units' integer ops are int32)."""
    k = unary_kernel_tiles("int8", 64, 64)
    with pytest.raises(TilewrightError, match="int32 tiles only") as e:
        tw.compile(k, target=TARGET)
    assert "test_int_ops.py" in str(e.value)


def test_int8_shift_on_ascend_asks_for_int32():
    with pytest.raises(TilewrightError, match="shift int32 only"):
        tw.compile(binary_kernel("shl", "int8", 64, 64), target=TARGET)


def test_bitwise_on_ascend_tiles_is_a_located_error():
    k = binary_kernel("xor", "int32", 64, 64)
    with pytest.raises(TilewrightError, match=r"'\^' on int32 tile data is not supported on Ascend") as e:
        tw.compile(k, target=TARGET)
    assert "test_int_ops.py" in str(e.value)


def test_bools_keep_logic():
    """& | ^ between bools are logic (and, or, !=), ~ on a bool is not."""
    n = 16

    @T.prim_func
    def k(A: T.Tensor((n,), "int32"), C: T.Tensor((n, 3), "bool")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                C[i, 0] = (A[i] > 2) & (A[i] < 9)
                C[i, 1] = (A[i] > 2) ^ (A[i] < 9)
                C[i, 2] = ~(A[i] > 2) | (A[i] == 5)
    a = np.arange(n, dtype=np.int32) - 3
    got = tw.compile(k, out_idx=[1])(a)
    np.testing.assert_array_equal(got, np.stack([(a > 2) & (a < 9), (a > 2) ^ (a < 9), ~(a > 2) | (a == 5)], 1))
