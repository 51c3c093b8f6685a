"""Session 28's hunt (h-hunt17, docs/testing.md "Session 28: the op zoo, integer / bool ops and the testing
helpers at users' edges (h-hunt17)"): bench/op_zoo.py's kernels at shapes the bench never uses (one-element
dims, primes, widths just past a 32 B block / a 256 B repeat), conversions between the dtypes as users spell
them (a store into a tile of another dtype, `T.cast`, a converting `T.copy`), bool masks, and tw.testing's
seeded inputs, on cpu and on ascend910b (simulator, checker on: `prof["reports"] == []`) against float64 numpy
or exact integers.

Tolerances: integer and bool results exactly (conversions, wraps, selects); the op zoo's kernels with each
op's own stated tolerance (bench/op_zoo.py `Case.atol` / `Case.rtol`: 1e-6 .. 1e-4 absolute on float32).

Findings (F1.. of /work/hunt17-findings.md): F1-F3 and F5 were fixed on the branch and their tests guard the
fixes; F4 was a docs sentence; F6 and F7 were fixed on h-bool17 and their tests guard the fixes."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import marked_line  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import op_zoo  # noqa: E402

TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    """Called on cpu; simulated with the checker on ascend910b (run_checked asserts no report)."""
    out = kernel(*args) if target == "cpu" else run_checked(kernel, *args)
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ---------------------------------------------------------------------------------------------
# F1: int8 <-> uint8 (and bool -> int8) conversions. cpu wraps (docs/language.md "Dtype conversions":
# integer -> narrower integer is the modular wrap); on ascend910b a store `b[i] = a[i]` of the other
# 8-bit type and a bool source were "dav-c220 has no Cast for this pair" with a hint saying no
# conversion exists, while `T.cast` / `T.copy` of int8 <-> uint8 ran.

def small_int_convert_kernel(n, src, dst):
    @T.prim_func
    def k(X: T.Tensor((n,), src), Y: T.Tensor((3, n), dst)):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((n,), src)
            b = T.alloc_fragment((n,), dst)
            y = T.alloc_fragment((3, n), dst)
            T.copy(X, a)
            T.copy(a, b)                       # a converting tile copy
            for i in T.Parallel(n):
                y[0, i] = a[i]                 # a store into a tile of another dtype
                y[1, i] = T.cast(a[i], dst)    # an explicit cast
                y[2, i] = b[i]
            T.copy(y, Y)
    return k


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("src,dst", [("int8", "uint8"), ("uint8", "int8"), ("bool", "int8")])
def test_f1_small_int_store_conversion(src, dst, target):
    vals = {"int8": [-128, -127, -1, 0, 1, 5, 126, 127, -7], "uint8": [0, 1, 127, 128, 129, 200, 254, 255, 7],
            "bool": [0, 1, 1, 0, 1, 0, 0, 1, 1]}[src]
    x = np.array(vals).astype(src)
    y = _run(tw.compile(small_int_convert_kernel(len(x), src, dst), target=target, out_idx=[1]), target, x)[0]
    ref = x.astype(np.int64).astype(dst)
    for k, how in enumerate(["store", "T.cast", "T.copy"]):
        np.testing.assert_array_equal(y[k], ref, err_msg=f"{src} -> {dst} by {how} on {target}")


# ---------------------------------------------------------------------------------------------
# F2: a float truncated to int32 (`T.cast(x, "int32")`) and stored into an int8 / uint8 tile: the int32
# value wraps (cpu; docs/language.md). ascend910b was "conversion from int32 to int8 ... no chain of Casts".
# Values whose truncation fits int32 only (out-of-range float -> int is undefined, the targets differ).

def float_to_int32_into_small_kernel(n, dst):
    @T.prim_func
    def k(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), dst)):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((n,), "float32")
            b = T.alloc_fragment((n,), dst)
            T.copy(X, a)
            for i in T.Parallel(n):
                b[i] = T.cast(a[i], "int32")
            T.copy(b, Y)
    return k


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dst", ["int8", "uint8"])
def test_f2_float_to_int32_cast_stored_into_int8(dst, target):
    x = np.array([0.0, -0.0, 1.5, -1.5, 127.9, -128.9, 255.9, 256.0, 300.0, -300.0, -0.9, 70000.5, -2e9, 2147483520.0],
                 np.float32)
    y = _run(tw.compile(float_to_int32_into_small_kernel(len(x), dst), target=target, out_idx=[1]), target, x)[0]
    np.testing.assert_array_equal(y, np.trunc(x.astype(np.float64)).astype(np.int64).astype(dst))


# ---------------------------------------------------------------------------------------------
# F3: a bool mask tile compared with 0 / False (the literal adopts bool) in T.where: cpu ran it;
# ascend910b was "T.where on the bool value m[i] != false: Ascend has no bool vector arithmetic".

def bool_mask_compare_kernel(M, N):
    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Msk: T.Tensor((M, N), "bool"), Y: T.Tensor((3, M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            m = T.alloc_fragment((M, N), "bool")
            y = T.alloc_fragment((3, M, N), "float32")
            T.copy(X, x)
            T.copy(Msk, m)
            for i, j in T.Parallel(M, N):
                y[0, i, j] = T.where(m[i, j] != 0, x[i, j], -T.infinity("float32"))
                y[1, i, j] = T.where(m[i, j] == False, x[i, j], 0.0)  # noqa: E712 - the spelling under test
                y[2, i, j] = T.where(m[i, j] > 0, 1.0, x[i, j])
            T.copy(y, Y)
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_f3_bool_tile_compared_with_zero(target):
    M, N = 3, 37
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, N)).astype(np.float32)
    msk = rng.integers(0, 2, (M, N)).astype(bool)
    y = _run(tw.compile(bool_mask_compare_kernel(M, N), target=target, out_idx=[2]), target, x, msk)[0]
    ref = np.stack([np.where(msk, x, -np.inf), np.where(~msk, x, 0.0), np.where(msk, 1.0, x)]).astype(np.float32)
    np.testing.assert_array_equal(y, ref)


# ---------------------------------------------------------------------------------------------
# F4 (docs): a condition must be bool; only a bool tile is a bare condition (docs/language.md said "a bare
# tile value as the condition means value != 0").

def test_f4_bare_float_condition_is_a_located_error():
    with pytest.raises(TilewrightError, match="condition of where\\(\\) must be bool") as e:
        @T.prim_func
        def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((8,), "float32")
                T.copy(X, x)
                for i in T.Parallel(8):
                    x[i] = T.where(x[i], 1.0, 2.0)  # @BARE
                T.copy(x, Y)
    assert e.value.line == marked_line(__file__, "@BARE")[0]
    assert "T.where(x > 0" in e.value.hint


# ---------------------------------------------------------------------------------------------
# F5: tw.testing.rand's values lie in [low, high) in every float dtype (float16 / bfloat16 draws rounded
# up to high); randint of an empty range is a located TilewrightError (was numpy's ValueError).

@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_f5_rand_stays_below_high(dtype):
    for low, high in [(0.0, 1.0), (-3.0, 2.5), (0.0, 0.1)]:
        v = tw.testing.rand((20000,), dtype, seed=1, low=low, high=high)
        assert v.dtype == np_dtype(dtype)
        v = v.astype(np.float64)
        assert v.max() < high and v.min() >= np.float64(np.asarray(low).astype(np_dtype(dtype))), (low, high)
    assert np.array_equal(tw.testing.rand((64,), dtype, seed=2), tw.testing.rand((64,), dtype, seed=2))


def test_f5_randint_empty_range():
    with pytest.raises(TilewrightError, match=r"randint: the range \[3, 3\) is empty"):
        tw.testing.randint((4,), "int32", seed=0, low=3, high=3)


# ---------------------------------------------------------------------------------------------
# What held (guards): op zoo kernels at a one-element row, two columns and a 31-row middle axis,
# unchanged on both targets, each against its float64 reference within the op's tolerance.

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,shape", [("log_softmax", (1, 1)), ("cumsum", (3, 2)), ("argmax_mid", (1, 31, 9))])
def test_op_zoo_at_one_element_and_odd_shapes(name, shape, target, monkeypatch):
    monkeypatch.setattr(op_zoo, "TARGET", target)
    make = op_zoo.OPS[name][0]
    case = make(shape, np.random.default_rng(1))
    if target == "cpu":
        ok, worst = op_zoo.check(name, case)
        assert ok, f"{name} {shape}: worst error {worst:.3g} x the tolerance"
        return
    got = np.asarray(run_checked(case.kernel, *case.args), np.float64)
    ref = np.asarray(case.ref(), np.float64).reshape(got.shape)
    assert np.all(np.abs(got - ref) <= case.atol + case.rtol * np.abs(ref)), (name, shape)


# ---------------------------------------------------------------------------------------------
# F6 (fixed on h-bool17): a scan along the rows of an int8 / uint8 tile (op_zoo's cumsum in int8): cpu
# wraps each sum into the tile's dtype; ascend910b was "not a vector instruction: the cast's source is not
# indexed like the destination". It now runs as an element loop on the scalar unit (as float32 / int32
# tiles do), whose stores wrap as the printed C++ cast does (the simulator saturated them).

def int8_row_scan_kernel(M, N, dt="int8"):
    @T.prim_func
    def k(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dt)
            T.copy(X, x)
            for j in T.serial(1, N):
                for i in T.Parallel(M):
                    x[i, j] = x[i, j] + x[i, j - 1]
            T.copy(x, Y)
    return k


@pytest.mark.parametrize("target,dt", [("cpu", "int8"), (TARGET, "int8"), (TARGET, "uint8")])
def test_f6_int8_row_scan_on_ascend(target, dt):
    info = np.iinfo(dt)
    x = np.random.default_rng(6).integers(info.min, info.max + 1, (3, 37)).astype(dt)
    y = _run(tw.compile(int8_row_scan_kernel(3, 37, dt), target=target, out_idx=[1]), target, x)[0]
    np.testing.assert_array_equal(y, np.cumsum(x.astype(np.int64), axis=1).astype(dt))  # wrapped


# ---------------------------------------------------------------------------------------------
# F7 (fixed on h-bool17): a UB -> UB copy of a bool tile: cpu copies the mask; ascend910b was "vector op on
# bool is not supported by the Vector core" (uint8 tiles copied). It now copies the bool bytes as uint8; a
# scan along a bool row runs on the scalar unit as F6's.

def bool_tile_copy_kernel(M, N):
    @T.prim_func
    def k(X: T.Tensor((M, N), "bool"), Y: T.Tensor((M, N), "bool")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "bool")
            b = T.alloc_fragment((M, N), "bool")
            c = T.alloc_fragment((M, N), "bool")
            T.copy(X, a)
            T.copy(a, b)                       # a UB -> UB copy
            for i, j in T.Parallel(M, N):
                c[i, j] = b[i, j]              # the same copy as a map
            for j in T.serial(1, N):
                for i in T.Parallel(M):
                    c[i, j] = c[i, j] or c[i, j - 1]  # a scan down a bool row (scalar unit, as F6's)
            T.copy(c, Y)
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_f7_bool_tile_copy_on_ascend(target):
    x = np.random.default_rng(7).integers(0, 2, (3, 37)).astype(bool)
    y = _run(tw.compile(bool_tile_copy_kernel(3, 37), target=target, out_idx=[1]), target, x)[0]
    np.testing.assert_array_equal(y, np.logical_or.accumulate(x, axis=1))


# ---------------------------------------------------------------------------------------------
# float64 / int64 tiles have no Vector core arithmetic on ascend910b (docs/ascend.md): the error is at the
# line and names the dtype.

@pytest.mark.parametrize("dt", ["float64", "int64"])
def test_64bit_tile_error_names_dtype_on_ascend(dt):
    @T.prim_func
    def k(X: T.Tensor((2, 8), dt), Y: T.Tensor((2, 8), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((2, 8), dt)
            T.copy(X, x)
            for i, j in T.Parallel(2, 8):
                x[i, j] = x[i, j] + x[i, j]  # @WIDE
            T.copy(x, Y)
    with pytest.raises(TilewrightError) as e:
        tw.compile(k, target=TARGET, out_idx=[1])
    assert f"vector op on {dt} is not supported" in e.value.message, e.value.message
    assert e.value.line == marked_line(__file__, "@WIDE")[0]
