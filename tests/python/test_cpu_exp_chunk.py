"""Row maps whose whole value is exp(...) or exp2(...) of float32 (softmax, log_softmax, a map +
row sum, a map + copy-out): the CPU code generator computes the argument into a local chunk and
calls tw_cpu::exp_chunk / exp2_chunk from it into the destination (on AVX-512 a vscalefps form, bit for bit the scalar
function: tests/cpp/test_cpu_runtime.cpp Math.ExpChunkMatchesScalar). Checked here: the generated
C++ calls the chunk form where the value is the call and not where it is not (the call inside a
larger expression, a float16 tile); results against float64 numpy on odd shapes (one row, one
column, 4095 columns, tail blocks); and, bit for bit, against the same kernel written so that the
chunk form does not fire (`exp(a) + 0.0`, exact: exp never gives -0), with specials (NaN, +-Inf,
-1e30 as a masked score, 89, -104) in the inputs. Correctness only: no timing."""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "bench")]

import op_zoo  # noqa: E402
import softmax  # noqa: E402
from tw_test_util import unchecked_code_only  # noqa: E402

SHAPES = [(1, 1), (1, 4095), (13, 37), (37, 4095), (9, 64), (17, 4096), (5, 1)]


@tw.jit(out_idx=[-1])
def exp_sum(N, fn="exp", plain=False, bm=8, dtype="float32"):
    """S[i] = sum_j f(X[i, j] * 0.5 - 1) (a map + row sum; f = exp or exp2), the map's tile unkept."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), dtype)
            e = T.alloc_fragment((bm, N), dtype)
            s = T.alloc_fragment((bm,), dtype)
            T.copy(X[bx * bm, 0], x)
            if fn == "exp" and not plain:
                for i, j in T.Parallel(bm, N):
                    e[i, j] = T.exp(x[i, j] * 0.5 - 1.0)
            elif fn == "exp":
                for i, j in T.Parallel(bm, N):
                    e[i, j] = T.exp(x[i, j] * 0.5 - 1.0) + 0.0
            elif not plain:
                for i, j in T.Parallel(bm, N):
                    e[i, j] = T.exp2(x[i, j] * 0.5 - 1.0)
            else:
                for i, j in T.Parallel(bm, N):
                    e[i, j] = T.exp2(x[i, j] * 0.5 - 1.0) + 0.0
            T.reduce_sum(e, s, dim=1)
            T.copy(s, S[bx * bm])
    return main


@tw.jit(out_idx=[-1])
def exp_map(N, fn="exp", plain=False, bm=8):
    """Y = f(X - 1) (a map + copy-out, f = exp or exp2)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            T.copy(X[bx * bm, 0], x)
            if fn == "exp" and not plain:
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp(x[i, j] - 1.0)
            elif fn == "exp":
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp(x[i, j] - 1.0) + 0.0
            elif not plain:
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp2(x[i, j] - 1.0)
            else:
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp2(x[i, j] - 1.0) + 0.0
            T.copy(x, Y[bx * bm, 0])
    return main


@tw.jit(out_idx=[-1])
def softmax_plain(N, block_M=8):
    """examples/softmax.py with its exp map written `exp(...) + 0.0` (the chunk form does not fire)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i]) + 0.0
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])
    return main


def _x(M, N, seed, scale=3.0):
    return (np.random.default_rng(seed).standard_normal((M, N)) * scale).astype(np.float32)


def _specials(x):
    """Specials at scattered places: NaN, +-Inf, a masked score, the clamp edges, large values."""
    flat = x.reshape(-1)
    vals = np.array([np.nan, np.inf, -np.inf, -1e30, 89.0, -104.0, 88.7, -103.9, -87.5, 200.0, -149.5, 127.9],
                    np.float32)
    idx = np.arange(0, flat.size, 7)[:len(vals) * 8]
    flat[idx] = np.resize(vals, idx.size)
    return x


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a) & np.isnan(b)
    return np.array_equal(np.where(nan, 0, a).view(np.uint32), np.where(nan, 0, b).view(np.uint32))


@unchecked_code_only
def test_generated_code_calls_the_chunk_form_where_the_value_is_the_call():
    cases = [
        (softmax.softmax.__wrapped__(4096), 1),           # row pipeline: max | exp + sum | divide + store
        (op_zoo.log_softmax.__wrapped__(4096), 1),        # the same with the exp chunk unkept
        (exp_sum.__wrapped__(100), 1),                    # map + reduce (tile unkept)
        (exp_map.__wrapped__(100), 1),                    # map + copy-out
        (exp_sum.__wrapped__(100, fn="exp2"), 1),
        (exp_map.__wrapped__(100, fn="exp2"), 1),
        (softmax_plain.__wrapped__(4096), 0),             # exp inside a larger expression
        (exp_sum.__wrapped__(100, plain=True), 0),
        (exp_map.__wrapped__(100, plain=True), 0),
        (exp_sum.__wrapped__(100, dtype="float16"), 0),   # a float16 tile: computed and rounded per element
    ]
    for prim, fires in cases:
        src = tw.compile(prim).get_source("c++")
        n = src.count("tw_cpu::exp_chunk(") + src.count("tw_cpu::exp2_chunk(") + src.count("tw_cpu::exp_nonpos_chunk(")
        assert (n > 0) == bool(fires), (prim, n)
        if fires:  # the argument goes into a local chunk (kept in registers), the call writes the destination from it
            assert src.count("alignas(64) float tw_a[64];") == n, (prim, n)
            calls = re.findall(r"tw_cpu::exp(?:2|_nonpos)?_chunk\((\w+), tw_a, tw_jn\);", src)
            assert len(calls) == n and set(calls) <= {"tw_c", "tw_cu", "tw_buf", "tw_o"}, (prim, calls)


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_and_log_softmax_vs_float64(shape):
    M, N = shape
    x = _x(M, N, M * 7919 + N)
    x64 = x.astype(np.float64)
    s = x64 - x64.max(axis=1, keepdims=True)
    e = np.exp(s)
    y = softmax.softmax(N)(x)
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)
    ly = op_zoo.log_softmax(N)(x)
    np.testing.assert_allclose(ly, s - np.log(e.sum(axis=1, keepdims=True)), rtol=2e-6, atol=5e-6)


@pytest.mark.parametrize("fn", ["exp", "exp2"])
@pytest.mark.parametrize("shape", SHAPES)
def test_exp_map_and_sum_vs_float64(fn, shape):
    M, N = shape
    x = _x(M, N, M * 31 + N, scale=20.0)
    f64 = np.exp if fn == "exp" else np.exp2
    # the argument as the kernel rounds it (float32), f in float64: math.h's bounds, rel 2.5e-7
    # for normal results, abs 2^-148 for subnormal ones; past FLT_MAX +Inf
    y = exp_map(N, fn)(x)
    want = f64((x - np.float32(1)).astype(np.float64))
    want[want > np.finfo(np.float32).max] = np.inf
    np.testing.assert_allclose(y, want, rtol=2.5e-7, atol=2.0**-148)
    s = exp_sum(N, fn)(x)
    a = (x * np.float32(0.5) - np.float32(1)).astype(np.float64)
    np.testing.assert_allclose(s, f64(a).sum(axis=1), rtol=2e-6, atol=2.0**-140)


@pytest.mark.parametrize("fn", ["exp", "exp2"])
@pytest.mark.parametrize("shape", [(13, 37), (9, 4095), (1, 100)])
def test_chunk_form_same_bits_as_scalar_form_with_specials(fn, shape):
    M, N = shape
    x = _specials(_x(M, N, 5, scale=60.0))
    assert _same_bits(exp_map(N, fn)(x), exp_map(N, fn, plain=True)(x))
    assert _same_bits(exp_sum(N, fn)(x), exp_sum(N, fn, plain=True)(x))


@pytest.mark.parametrize("shape", [(13, 37), (17, 4096), (1, 4095)])
def test_softmax_same_bits_as_scalar_form(shape):
    M, N = shape
    x = _x(M, N, 11)
    x[::3, ::5] = -1e30   # masked scores (exp gives +0 by the mask, nothing underflows)
    x[1::4, 2::9] = -95.0  # subnormal exp results relative to the row max
    assert _same_bits(softmax.softmax(N)(x), softmax_plain(N)(x))


# ------------------------------------------------------------------------------------------------
# Session 26 (h-rows14): exp(x[i, j] - m[i]) after a row max of x into m takes exp_nonpos_chunk in the
# row pipeline (no upper clamp: the argument is <= 0, -Inf or NaN there; the same bits as exp())
# ------------------------------------------------------------------------------------------------

@tw.jit(out_idx=[-1])
def softmax_shifted(N, shift=0.0, other=False, block_M=8):
    """softmax with, between the max and the exp, `m[i] = m[i] - shift` (shift != 0: the argument may
    be positive, so the clamped form must stay), or (other) the max taken of another tile (X + 1)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            z = T.alloc_fragment((block_M, N), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            if other:
                for i, j in T.Parallel(block_M, N):
                    z[i, j] = x[i, j] + 1.0
                T.reduce_max(z, m, dim=1)
            else:
                T.reduce_max(x, m, dim=1)
            if shift != 0.0:
                for i in T.Parallel(block_M):
                    m[i] = m[i] - shift
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - m[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * block_M, 0])
    return main


@unchecked_code_only
def test_nonpos_chunk_only_where_the_argument_is_a_row_max_shift():
    def calls(prim):
        src = tw.compile(prim).get_source("c++")
        return src.count("tw_cpu::exp_nonpos_chunk("), src.count("tw_cpu::exp_chunk(")
    assert calls(softmax.softmax.__wrapped__(4096))[0] == 1        # the pipeline's exp pass
    assert calls(op_zoo.log_softmax.__wrapped__(4096))[0] == 1
    assert calls(softmax_shifted.__wrapped__(4096))[0] == 1        # the same kernel, spelt here
    assert calls(softmax_shifted.__wrapped__(4096, shift=-100.0))[0] == 0  # m rewritten: x - m may be > 0
    assert calls(softmax_shifted.__wrapped__(4096, other=True))[0] == 0    # the max of another tile
    assert calls(softmax_plain.__wrapped__(4096))[0] == 0
    assert calls(exp_sum.__wrapped__(4096))[0] == 0


def _rows_with_specials(M, N, seed):
    x = _x(M, N, seed)
    if M > 1:
        x[1 % M, N // 2] = np.nan               # a NaN row
    if M > 2:
        x[2, N - 1] = np.inf                     # +Inf: x - max is NaN there
    if M > 3:
        x[3, :] = -np.inf                        # all -Inf: every x - max is NaN
    if M > 4:
        x[4, ::2] = -np.inf                      # some -Inf: exp gives 0 there
    if M > 5:
        x[5, :] = -1e30                          # masked scores: x - max = 0
        x[5, 0] = 0.0
    return x


def _softmax64(x):
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(np.where(np.isnan(x64), -np.inf, x64), axis=1, keepdims=True)
        e = np.exp(x64 - m)
        y = e / e.sum(axis=1, keepdims=True)
    y[np.isnan(x64).any(axis=1)] = np.nan
    return y


@pytest.mark.parametrize("M", [1, 3, 4097])
@pytest.mark.parametrize("N", [1, 17, 4097])
def test_softmax_odd_shapes_and_specials_vs_float64(M, N):
    x = _rows_with_specials(M, N, M * 131 + N)
    y = softmax.softmax(N)(x)
    want = _softmax64(x)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(y[ok], want[ok], rtol=2e-6, atol=1e-7)
    assert _same_bits(y, softmax_plain(N)(x))   # the clamped scalar form: the same bits


@pytest.mark.parametrize("shape", [(4097, 4096), (13, 4097), (3, 64)])
def test_log_softmax_and_shifted_forms_vs_float64(shape):
    M, N = shape
    x = _rows_with_specials(M, N, 7)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(np.where(np.isnan(x64), -np.inf, x64), axis=1, keepdims=True)
        want = x64 - m - np.log(np.exp(x64 - m).sum(axis=1, keepdims=True))
    want[np.isnan(x64).any(axis=1)] = np.nan
    ly = op_zoo.log_softmax(N)(x)
    np.testing.assert_array_equal(np.isnan(ly), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(ly[ok], want[ok], rtol=2e-6, atol=5e-6)
    # the clamped form where m was rewritten (shift 1e30: exp(x - m) overflows to +Inf, the rows NaN)
    # and where it was not (same bits as the example)
    assert _same_bits(softmax_shifted(N)(x), softmax.softmax(N)(x))
    y = softmax_shifted(N, shift=1e30)(x)
    assert np.isnan(y[np.abs(x).max(axis=1) < 1e3]).all()   # the rows without specials (+Inf / +Inf)
