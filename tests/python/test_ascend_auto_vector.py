"""The automatic Ascend pipeline on portable vector kernels: the examples' softmax, rms_norm and
layer_norm, compiled for ascend910b by changing only the target, run in the 910B simulator
against a float64 numpy reference with zero checker reports (fp32, fp16, bf16; a row count that
is not a multiple of block_M and row lengths that are not whole 32 B blocks). Also the errors of
legalize_vector (unsupported math, int32 data-dependent selects) and the UB capacity error.

Tolerances: the examples' own (tw.testing.TOLERANCES, |got - ref| <= atol + rtol |ref|).
Simulated results are a model's, not measurements on an NPU."""
import os
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import layer_norm  # noqa: E402
import rms_norm  # noqa: E402
import softmax  # noqa: E402
from tilewright.testing import TOLERANCES, randn  # noqa: E402
from ascend_util import TARGET, assert_close, build, run_checked  # noqa: E402

THIS_FILE = __file__

from tw_test_util import marked_line  # noqa: E402


def where(marker):
    """Line number of the line of this file with the comment `# @marker`."""
    return marked_line(THIS_FILE, "@" + marker)[0]








CASES = [  # (M, N, dtype): M % block_M != 0 everywhere; N * 4 B not a multiple of 32 B for 300 / 301
    (37, 301, "float32"),
    (13, 128, "float32"),
    (21, 300, "float16"),
    (19, 300, "bfloat16"),
]


@pytest.mark.parametrize("M,N,dtype", CASES)
def test_softmax(M, N, dtype):
    rng = np.random.default_rng(1)
    x = randn((M, N), dtype, scale=3.0, seed=rng)
    y = run_checked(build(softmax.softmax, N, dtype=dtype), x)
    assert_close(y, softmax.reference(x), TOLERANCES[dtype], f"softmax {M}x{N} {dtype}")


@pytest.mark.parametrize("M,N,dtype", CASES)
def test_rms_norm(M, N, dtype):
    rng = np.random.default_rng(2)
    x = randn((M, N), dtype, seed=rng)
    w = randn((N,), dtype, seed=rng)
    y = run_checked(build(rms_norm.rms_norm, N, dtype=dtype), x, w)
    assert_close(y, rms_norm.reference(x, w), TOLERANCES[dtype], f"rms_norm {M}x{N} {dtype}")


@pytest.mark.parametrize("M,N,dtype", CASES)
def test_layer_norm(M, N, dtype):
    rng = np.random.default_rng(3)
    x = randn((M, N), dtype, scale=2.0, seed=rng)
    w = randn((N,), dtype, seed=rng)
    b = randn((N,), dtype, seed=rng)
    y = run_checked(build(layer_norm.layer_norm, N, dtype=dtype), x, w, b)
    assert_close(y, layer_norm.reference(x, w, b), TOLERANCES[dtype], f"layer_norm {M}x{N} {dtype}")


def test_layer_norm_reads_weights_once_per_block():
    """W[j] and B[j] inside the map become one GM->UB copy each, before the maps that read them."""
    k = build(layer_norm.layer_norm, 256)
    ir = k.get_ir("legalize_vector")
    assert len(re.findall(r"copy W -> W_ub_\d+", ir)) == 1, ir
    assert len(re.findall(r"copy B -> B_ub_\d+", ir)) == 1, ir
    # every T.Parallel store is now a single operation
    for line in ir.splitlines():
        if "] = " in line:
            rhs = re.sub(r"\[[^\]]*\]", "", line.split("] = ", 1)[1])
            ops = sum(rhs.count(o) for o in (" + ", " - ", " * ", " / "))
            ops += len(re.findall(r"\b(?:exp|log|sqrt|rsqrt|abs|max|min|cast<\w+>)\(", rhs))
            assert ops <= 1, line


def test_rsqrt_and_reciprocal_are_sqrt_and_div():
    """AscendC Rsqrt and Reciprocal miss 1e-4 (fp32) relative error on the device: automatic
    kernels compute T.rsqrt, x ** -0.5, 1 / x and sigmoid with Sqrt and Div; rms_norm and layer_norm
    stay within the fp32 tolerance of a float64 reference."""
    R, C = 8, 64

    @T.prim_func
    def k(X: T.Tensor((R, C), "float32"), Y: T.Tensor((R, C), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), "float32")
            T.copy(X[bx * R, 0], x)
            for i, j in T.Parallel(R, C):
                x[i, j] = T.rsqrt(x[i, j]) + 1.0 / x[i, j] + T.pow(x[i, j], -0.5) + T.sigmoid(x[i, j])
            T.copy(x, Y[bx * R, 0])

    kern = tw.compile(k, out_idx=[-1], target=TARGET)
    kernels = [kern, build(rms_norm.rms_norm, 301), build(layer_norm.layer_norm, 301)]
    for kk in kernels:
        program = kk.get_source("ascend_program")
        assert "Sqrt" in program, program
        assert "Rsqrt" not in program and "Reciprocal" not in program, program
    rng = np.random.default_rng(5)
    x = (np.abs(randn((R, C), "float32", seed=rng)) + 0.25).astype(np.float32)
    v = x.astype(np.float64)
    ref = 2 / np.sqrt(v) + 1 / v + 1 / (1 + np.exp(-v))
    assert_close(run_checked(kern, x), ref, TOLERANCES["float32"], "rsqrt + reciprocal")
    x = randn((37, 301), "float32", seed=rng)
    w = randn((301,), "float32", seed=rng)
    b = randn((301,), "float32", seed=rng)
    assert_close(run_checked(kernels[1], x, w), rms_norm.reference(x, w), TOLERANCES["float32"], "rms_norm")
    assert_close(run_checked(kernels[2], x, w, b), layer_norm.reference(x, w, b), TOLERANCES["float32"], "layer_norm")


def test_math_expansions_and_masks():
    """exp2/sigmoid/tanh/erf inside a map, a tail mask and a diagonal mask (flash attention's
    shapes) through the whole pipeline."""
    R, C, S = 16, 40, 70

    @T.prim_func
    def k(X: T.Tensor((S, C), "float32"), Y: T.Tensor((S, C), "float32")):
        with T.Kernel(T.ceildiv(S, R)) as bx:
            x = T.alloc_fragment((R, C), "float32")
            T.copy(X[bx * R, 0], x)
            for i, j in T.Parallel(R, C):
                x[i, j] = T.sigmoid(x[i, j]) + T.tanh(x[i, j]) * T.erf(x[i, j]) - T.exp2(x[i, j])
            for i, j in T.Parallel(R, C):
                x[i, j] = T.where(bx * R + i >= j, x[i, j], -7.0)
            for i, j in T.Parallel(R, C):
                x[i, j] = T.where(j < 29, x[i, j], 5.0)
            T.copy(x, Y[bx * R, 0])

    kern = tw.compile(k, out_idx=[-1], target=TARGET)
    rng = np.random.default_rng(4)
    x = randn((S, C), "float32", seed=rng)
    y = run_checked(kern, x)
    import math
    v = x.astype(np.float64)
    erf = np.vectorize(math.erf)(v)
    ref = 1 / (1 + np.exp(-v)) + np.tanh(v) * erf - np.exp2(v)
    rows = np.arange(S)[:, None]
    cols = np.arange(C)[None, :]
    ref = np.where(rows >= cols, ref, -7.0)
    ref = np.where(cols < 29, ref, 5.0)
    assert_close(y, ref, TOLERANCES["float32"], "math + masks")


def test_unsupported_math_is_an_error_at_its_line():
    @T.prim_func
    def k(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((64, 64), "float32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(64, 64):
                x[i, j] = x[i, j] ** 4  # @POW (a non-integer constant is exp(c * log(x)) since port36 F5)
            T.copy(x, Y[0, 0])

    with pytest.raises(TilewrightError) as e:
        tw.compile(k, out_idx=[-1], target=TARGET)
    msg = str(e.value)
    assert "T.pow with exponent 4.0 is not supported on Ascend vector units yet" in msg
    assert f"{os.path.basename(THIS_FILE)}:{where('POW')}:" in msg


def test_data_dependent_int32_where_selects_exactly():
    """A T.where on tile data becomes Compare + Select (tests/python/test_where_data.py); Select
    takes half / float only, so int32 values are selected through an int32 0/1 mask (issue 13,
    legalize_vector's select_int32): exact for every int32 value (tests/python/test_iota_argmax.py)."""
    @T.prim_func
    def k(X: T.Tensor((64, 64), "int32"), Y: T.Tensor((64, 64), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((64, 64), "int32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(64, 64):
                x[i, j] = T.where(x[i, j] > 0, x[i, j], 0)
            T.copy(x, Y[0, 0])

    x = np.random.default_rng(0).integers(-2**31, 2**31 - 1, (64, 64), dtype=np.int64).astype(np.int32)
    x.flat[:2] = [-2**31, 2**31 - 1]
    prof = tw.compile(k, out_idx=[-1], target=TARGET).profile(x)
    assert prof["reports"] == [], "\n".join(prof["reports"])
    np.testing.assert_array_equal(prof.outputs, np.where(x > 0, x, 0))


def test_rows_too_long_for_ub_run_in_column_blocks():
    # 16384 runs since session 24 (the 8 rows one at a time: test_ascend_ubsplit_s24.py); one row
    # of 65536 float32 is more than the UB: since session 25 it runs in column blocks
    # (test_ascend_widerow_s25.py)
    k = build(softmax.softmax, 65536)
    assert any("column blocks" in n for n in k.notes), k.notes
    x = np.random.default_rng(0).standard_normal((3, 65536)).astype(np.float32)
    prof = k.profile(x)
    assert prof["reports"] == []
    np.testing.assert_allclose(prof.outputs * 65536, softmax.reference(x) * 65536, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("out_dtype", ["float16", "int8"])
def test_converting_copy_of_a_one_element_tile(out_dtype):
    """A (1,) tile converted on the way out (found by the fuzzer, seed 50): the cast map over a
    region whose every dim is 1 must still index the element by its (extent-1) loop."""
    @T.prim_func
    def k(A: T.Tensor((3,), "float32"), B: T.Tensor((3,), out_dtype)):
        with T.Kernel(3) as bx:
            x = T.alloc_fragment((1,), "float32")
            T.copy(A[bx], x)
            for i in T.Parallel(1):
                x[i] = x[i] * x[i]
            T.copy(x, B[bx])

    a = np.array([1.5, -2.5, 3.0], np.float32)
    y = run_checked(tw.compile(k, out_idx=[-1], target=TARGET), a)
    ref = (a.astype(np.float64) ** 2).astype(out_dtype) if out_dtype == "float16" else np.trunc(a.astype(np.float64) ** 2)
    assert_close(y, np.asarray(ref, np.float64), (0, 0), f"one-element tile -> {out_dtype}")


@pytest.mark.parametrize("shape", [(4, 1), (2, 1)])
def test_converting_copy_of_a_column_tile(shape):
    """A rows x 1 tile converted float32 -> float16 on the way out (found by the fuzzer, seed 285):
    the cast map keeps the unit column (UB rows are 32 B apart); it was 'the destination is not
    indexed by every loop variable in order'."""
    @T.prim_func
    def k(A: T.Tensor((6, 3), "float32"), B: T.Tensor((6, 3), "float16")):
        with T.Kernel(3, T.ceildiv(6, shape[0])) as (bx, by):
            x = T.alloc_fragment(shape, "float32")
            T.copy(A[by * shape[0], bx], x)
            T.copy(x, B[by * shape[0], bx])

    a = np.arange(18, dtype=np.float32).reshape(6, 3) / 4 - 2
    y = run_checked(tw.compile(k, out_idx=[-1], target=TARGET), a)
    assert_close(y, a.astype(np.float16).astype(np.float64), (0, 0), f"column tile {shape} -> float16")


# The Cast calls dav-c220 has (AscendC Cast; asc-devkit impl/basic_api/dav_c220/kernel_operator_vec_vconv_impl.h):
# (src, dst) -> the round modes that issue an instruction.
_ALL = {"CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC"}
DAV_C220_CASTS = {
    ("float16", "float32"): {"CAST_NONE"}, ("bfloat16", "float32"): {"CAST_NONE"},
    ("int8", "float16"): {"CAST_NONE"}, ("uint8", "float16"): {"CAST_NONE"},
    ("float32", "float16"): _ALL | {"CAST_NONE", "CAST_ODD"}, ("float32", "bfloat16"): _ALL,
    ("float32", "int32"): _ALL, ("float16", "int32"): _ALL, ("bfloat16", "int32"): _ALL,
    ("int32", "float32"): _ALL | {"CAST_NONE"},
    ("float16", "int8"): _ALL | {"CAST_NONE"}, ("float16", "uint8"): _ALL | {"CAST_NONE"},
}


def assert_documented_casts(kernel):
    """Every Cast of the lowered program is a (pair, mode) dav-c220 has; returns the pairs seen."""
    seen = set()
    for m in re.finditer(r"\bCast \S+ <- \S+ (\w+)->(\w+) (CAST_\w+)", kernel.get_source("ascend_program")):
        src, dst, mode = m.groups()
        assert mode in DAV_C220_CASTS.get((src, dst), ()), f"Cast {src}->{dst} {mode} does not exist on dav-c220"
        seen.add((src, dst))
    return seen


def test_bfloat16_tiles_compute_in_float32():
    """A bfloat16 tile on the Vector side (the fuzzer's bf16-vector bug): converted from float16 on
    the way in, mapped, filled, reduced with clear=False, converted to int8 and float16 on the way
    out. The 910B has no bf16 arithmetic: each value is computed in float32 and rounded once to
    bfloat16 when stored, as on cpu, so both targets agree bit for bit with this emulation; every
    conversion is a chain of Cast calls dav-c220 has (float16 <-> bfloat16 through float32,
    float32 -> int8 through int32/float32/float16)."""
    M, N = 24, 40

    @T.prim_func
    def k(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "int8"), C: T.Tensor((M,), "float16")):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            x = T.alloc_fragment((8, N), "bfloat16")
            y = T.alloc_fragment((8,), "bfloat16")
            T.copy(A[bx * 8, 0], x)
            for i, j in T.Parallel(8, N):
                x[i, j] = T.max(x[i, j] * 1.5 + 0.25, -1.0)
            T.fill(y, 0.5)
            T.reduce_sum(x, y, dim=1, clear=False)
            T.copy(x, B[bx * 8, 0])
            T.copy(y, C[bx * 8])

    import ml_dtypes
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(7)
    a = (rng.integers(-40, 41, (M, N)) / 8 + rng.integers(0, 2, (M, N)) / 256).astype(np.float16)
    x = np.maximum(a.astype(bf16).astype(np.float32) * np.float32(1.5) + np.float32(0.25), np.float32(-1.0)).astype(bf16)
    y = (np.float32(0.5) + x.astype(np.float32).sum(axis=1, dtype=np.float32)).astype(bf16)
    ref_b = np.trunc(x.astype(np.float32)).astype(np.int8)
    ref_c = y.astype(np.float32).astype(np.float16)
    kernel = tw.compile(k, out_idx=[1, 2], target=TARGET)
    seen = assert_documented_casts(kernel)
    assert {("float16", "float32"), ("float32", "bfloat16"), ("bfloat16", "float32"), ("float16", "int8")} <= seen
    assert "L2 Duplicate y[0] <- 0.5bf16 bfloat16 count=8" in kernel.get_source("ascend_program")   # Duplicate<bfloat16_t>
    for name, (b, c) in (("ascend", run_checked(kernel, a)), ("cpu", tw.compile(k, out_idx=[1, 2])(a))):
        np.testing.assert_array_equal(b, ref_b, err_msg=name)
        np.testing.assert_array_equal(c.view(np.uint16), ref_c.view(np.uint16), err_msg=name)


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_bfloat16_conversions_and_casts_in_maps(dtype):
    """bfloat16 <-> float16/int8 copies and T.cast to bfloat16/float16 inside a map of a float16
    tile: one rounding per conversion, as on cpu."""
    M, N = 16, 32

    @T.prim_func
    def k(A: T.Tensor((M, N), "bfloat16"), B: T.Tensor((M, N), "bfloat16"), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            x = T.alloc_fragment((8, N), dtype)
            T.copy(A[bx * 8, 0], x)
            for i, j in T.Parallel(8, N):
                x[i, j] = T.cast(x[i, j], "bfloat16")
            T.copy(x, B[bx * 8, 0])
            T.copy(x, C[bx * 8, 0])

    import ml_dtypes
    rng = np.random.default_rng(8)
    a = (rng.integers(-60, 61, (M, N)) / 4 + rng.integers(0, 2, (M, N)) / 64).astype(ml_dtypes.bfloat16)
    kernel = tw.compile(k, out_idx=[1, 2], target=TARGET)
    assert_documented_casts(kernel)
    want = tw.compile(k, out_idx=[1, 2])(a)
    got = run_checked(kernel, a)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).astype(np.float64), np.asarray(w).astype(np.float64))


def test_expert_bfloat16_arithmetic_stays_an_error():
    """Expert kernels place their tiles themselves: bf16 arithmetic there is still the clear error."""
    @T.prim_func
    def k(X: T.Tensor((16, 64), "bfloat16"), Y: T.Tensor((16, 64), "bfloat16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "bfloat16")
            with T.Scope("V"):
                T.copy(X[vid * 8, 0], a)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.exp(a, a)  # @BF16EXP
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(a, Y[vid * 8, 0])

    with pytest.raises(TilewrightError) as e:
        tw.compile(k, target=TARGET)
    assert "on bfloat16: the Vector core has no bfloat16 arithmetic" in e.value.message, e.value.message
    assert e.value.line == where("BF16EXP")


@pytest.mark.parametrize("dim", [0, 1])
def test_int8_reduce_sum_wraps_like_the_language(dim):
    """T.reduce_sum of an int8 tile is the int64 sum wrapped into int8 (docs/language.md; the
    fuzzer's int8-sum-saturates bug, seed 371: the simulator gave 127 instead of -94). Ascend sums
    exactly in float32 and wraps with float32 arithmetic and a CAST_FLOOR Cast; clear=True,
    clear=False merges and the sum of squares of a map, both targets equal to numpy."""
    M, N = 32, 64
    kept = N if dim == 0 else M

    @T.prim_func
    def k(A: T.Tensor((M, N), "int8"), B: T.Tensor((kept,), "int8"), B2: T.Tensor((kept,), "int8")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((16, 64), "int8")
            r = T.alloc_fragment((kept,) if dim == 0 else (16,), "int8")
            r2 = T.alloc_fragment((kept,) if dim == 0 else (16,), "int8")
            if dim == 0:
                T.fill(r, 0)
                T.fill(r2, 0)
                for k in T.serial(M // 16):
                    T.copy(A[k * 16, 0], x)
                    T.reduce_sum(x, r, dim=0, clear=False)
                    for i, j in T.Parallel(16, 64):
                        x[i, j] = x[i, j] * x[i, j]
                    T.reduce_sum(x, r2, dim=0, clear=False)
                T.copy(r, B[0])
                T.copy(r2, B2[0])
            else:
                for k in T.serial(M // 16):
                    T.copy(A[k * 16, 0], x)
                    T.reduce_sum(x, r, dim=1)
                    T.copy(r, B[k * 16])
                    for i, j in T.Parallel(16, 64):
                        x[i, j] = x[i, j] * x[i, j]
                    T.reduce_sum(x, r2, dim=1)
                    T.copy(r2, B2[k * 16])

    rng = np.random.default_rng(9)
    a = rng.integers(-11, 12, (M, N)).astype(np.int8)
    a[:4], a[4:6] = 100, -11   # sums far outside int8; the squares of 100 wrap too
    v = a.astype(np.int64)
    wrap = lambda s: ((s + 128) % 256 - 128).astype(np.int8)  # noqa: E731
    ref = (wrap(v.sum(axis=dim)), wrap((v * v).sum(axis=dim)))
    kernel = tw.compile(k, out_idx=[1, 2], target=TARGET)
    assert_documented_casts(kernel)
    assert "CAST_FLOOR" in kernel.get_source("ascend_program")
    for name, got in (("ascend", run_checked(kernel, a)), ("cpu", tw.compile(k, out_idx=[1, 2])(a))):
        for g, w in zip(got, ref):
            np.testing.assert_array_equal(g, w, err_msg=name)
    assert ref[0].min() < 0 < ref[0].max()


def test_int8_reduce_sum_of_too_many_terms_is_an_error():
    """The float32 sum is exact only below 2^24: more than 65535 int8 terms per output is a clear
    error at the reduction's line (a (1, 65536) tile; walking the row with clear=False works)."""
    @T.prim_func
    def k(A: T.Tensor((1, 65536), "int8"), B: T.Tensor((1,), "int8")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((1, 65536), "int8")
            r = T.alloc_fragment((1,), "int8")
            T.copy(A[0, 0], x)
            T.reduce_sum(x, r, dim=1)  # @TERMS
            T.copy(r, B[0])

    with pytest.raises(TilewrightError) as e:
        tw.compile(k, out_idx=[-1], target=TARGET)
    assert "T.reduce_sum over 65536 int8 values of 'x'" in e.value.message, e.value.message
    assert e.value.line == where("TERMS")
    assert "clear=False" in e.value.hint


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_small_int_maps_wrap_like_the_language(dtype):
    """Arithmetic in a map over an int8/uint8 tile is int64 arithmetic wrapped on store
    (docs/language.md); the Vector core has no such int8 operations, so Ascend computes it exactly
    in float32 and wraps with a CAST_FLOOR Cast (was: int8 Mul/Add saturating at 127/-128)."""
    M, N = 16, 64

    @T.prim_func
    def k(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            x = T.alloc_fragment((8, N), dtype)
            T.copy(A[bx * 8, 0], x)
            for i, j in T.Parallel(8, N):
                x[i, j] = x[i, j] * x[i, j] * 3 + T.max(x[i, j], 2) - 7
            for i, j in T.Parallel(8, N):
                x[i, j] = T.where(j < 40, x[i, j] + 100, 5)
            T.copy(x, B[bx * 8, 0])

    rng = np.random.default_rng(10)
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    a = rng.integers(lo, hi, (M, N)).astype(dtype)
    v = a.astype(np.int64)
    wrap = lambda w: (w - lo) % 256 + lo  # noqa: E731
    ref = wrap(v * v * 3 + np.maximum(v, 2) - 7)
    ref = np.where(np.arange(N)[None, :] < 40, wrap(ref + 100), 5).astype(dtype)
    kernel = tw.compile(k, out_idx=[-1], target=TARGET)
    assert_documented_casts(kernel)
    assert re.search(r"\b(Mul|Add|Max)s? \S+ <- .* (int8|uint8) ", kernel.get_source("ascend_program")) is None
    for name, got in (("ascend", run_checked(kernel, a)), ("cpu", tw.compile(k, out_idx=[-1])(a))):
        np.testing.assert_array_equal(got, ref, err_msg=name)


def test_int8_map_beyond_exact_float32_is_an_error():
    """x^4 of int8 values reaches 2^28: not exact in float32, a located error (not a silent wrap)."""
    @T.prim_func
    def k(A: T.Tensor((8, 32), "int8"), B: T.Tensor((8, 32), "int8")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, 32), "int8")
            T.copy(A[0, 0], x)
            for i, j in T.Parallel(8, 32):
                x[i, j] = x[i, j] * x[i, j] * x[i, j] * x[i, j]  # @POW4
            T.copy(x, B[0, 0])

    with pytest.raises(TilewrightError) as e:
        tw.compile(k, out_idx=[-1], target=TARGET)
    assert "may reach 2^24" in e.value.message, e.value.message
    assert e.value.line == where("POW4")
    assert "split the expression" in e.value.hint


def test_capacity_error_names_only_the_kernels_buffers():
    """The float32 temporaries that bfloat16 arithmetic needs count in UB (one row chunk of 4 KiB
    here), but the capacity error names the kernel's own buffers and counts the temporaries with
    the one they serve; its hint (the temporaries kept at their size) compiles."""
    def kernel(rows):
        @T.prim_func
        def k(X: T.Tensor((64, 1024), "bfloat16"), Z: T.Tensor((64, 1024), "bfloat16"),
              Y: T.Tensor((64, 1024), "bfloat16")):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((rows[0], 1024), "bfloat16")
                z = T.alloc_fragment((rows[1], 1024), "bfloat16")
                T.copy(X[0, 0], x)
                for _ in T.serial(2):  # a loop: the rows cannot run in column blocks (split_cols)
                    T.copy(Z[0, 0], z)
                for i, j in T.Parallel(rows[0], 1024):
                    x[i, j] = x[i, j] * 2.0 + 1.0  # @TEMPS
                T.copy(x, Y[0, 0])
                T.copy(z, Y[rows[0], 0])
        return k

    with pytest.raises(TilewrightError) as e:
        tw.compile(kernel((64, 31)), out_idx=[-1], target=TARGET)
    m = e.value.message
    assert m.startswith("UB overflow: x (64x1024 bfloat16, 131072 B, and 4096 B of compiler temporaries for it"), m
    assert "z (31x1024 bfloat16, 63488 B) are live together" in m, m
    assert "x_t" not in m and "x_t" not in e.value.hint, (m, e.value.hint)
    assert f"are live together at line {where('TEMPS')}" in m, m
    hint = re.match(r"a smaller tile that fits: x (\d+)x1024, z (\d+)x1024 ", e.value.hint)
    assert hint, e.value.hint
    tw.compile(kernel((int(hint.group(1)), int(hint.group(2)))), out_idx=[-1], target=TARGET)
    tw.compile(kernel((64, 29)), out_idx=[-1], target=TARGET)  # 4096 B fewer: fits with the chunk


def test_int8_fill_is_a_float16_duplicate_and_a_cast():
    """T.fill of an int8 tile: Duplicate has no 8-bit form on dav-c220 (half, bfloat16_t, 16/32-bit
    integers, float), so the value is duplicated in float16 and converted (exact)."""
    @T.prim_func
    def k(A: T.Tensor((64, 32), "int8"), B: T.Tensor((32,), "int8")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((32, 32), "int8")
            r = T.alloc_fragment((32,), "int8")
            T.fill(r, -128)
            for k in T.serial(2):
                T.copy(A[k * 32, 0], x)
                T.reduce_max(x, r, dim=0, clear=False)
            T.copy(r, B[0])

    a = np.random.default_rng(11).integers(-128, 128, (64, 32)).astype(np.int8)
    a[:, 3] = -128   # a column whose max is the fill value
    kernel = tw.compile(k, out_idx=[-1], target=TARGET)
    program = kernel.get_source("ascend_program")
    assert re.search(r"Duplicate r\S* <- \S+ int8", program) is None, program
    assert "Duplicate r_" in program and "float16" in program
    assert_documented_casts(kernel)
    np.testing.assert_array_equal(run_checked(kernel, a), a.max(axis=0))


@pytest.mark.parametrize("N", [40, 33, 1])
def test_int8_tail_zero_fill_is_a_float16_duplicate(N):
    """The zeros a short GM -> UB copy into an int8 tile reads beyond the tensor: Duplicate has no
    8-bit form on dav-c220, so they are written as float16 zero pairs (an odd row also zeroes its
    padding byte); the tail reads zeros as on cpu."""
    M = 37

    @T.prim_func
    def k(A: T.Tensor((M, N), "int8"), B: T.Tensor((T.ceildiv(M, 16),), "int8")):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            x = T.alloc_fragment((16, N), "int8")
            r = T.alloc_fragment((16,), "int8")
            s = T.alloc_fragment((1,), "int8")
            T.copy(A[bx * 16, 0], x)
            T.reduce_min(x, r, dim=1)
            T.reduce_min(r, s, dim=0)
            T.copy(s, B[bx])

    a = np.random.default_rng(12).integers(1, 100, (M, N)).astype(np.int8)
    kernel = tw.compile(k, out_idx=[-1], target=TARGET)
    program = kernel.get_source("ascend_program")
    assert re.search(r"Duplicate x\S* <- \S+ int8", program) is None, program
    assert re.search(r"Duplicate x\S* <- \S+ float16", program), program
    got = run_checked(kernel, a)
    np.testing.assert_array_equal(got, tw.compile(k, out_idx=[-1])(a))
    assert got[-1] == 0   # the last block's rows beyond M read zeros
