"""Session 28 (h-bf16rows17): a map whose float32 tile is copied out into a bfloat16 / float16
tensor is fused with that copy (fuse_map_copy_out) and ends a row pipeline (pipeline_rows), each
chunk converted by simd.h store_chunk with tw_cpu::convert, as the separate copy converts. The
fusion changes where the values are stored, not the values: the bf16 / fp16 output of softmax,
rms_norm and layer_norm is bitwise the conversion, by the unfused copy, of the float32 output of
the same kernel. Correctness only: no timing. One shape per property; run natively and with
TW_CPU_ARCH=x86-64-v3."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, np_dtype, randn

STREAM_BYTES = 8 << 20  # codegen's threshold: outputs of 8 MiB and more are streamed


@tw.jit
def softmax_k(N, W, col, in_dt, out_dt, block_M):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dt), Y: T.Tensor((M, W), out_dt)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, col])

    return main


@tw.jit
def rms_norm_k(N, W, col, in_dt, out_dt, block_M):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dt), Wt: T.Tensor((N,), in_dt), Y: T.Tensor((M, W), out_dt)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(Wt, w)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + 1e-6)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * ss[i] * w[j]
            T.copy(x, Y[bx * block_M, col])

    return main


@tw.jit
def layer_norm_k(N, W, col, in_dt, out_dt, block_M):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dt), Wt: T.Tensor((N,), in_dt), B: T.Tensor((N,), in_dt),
             Y: T.Tensor((M, W), out_dt)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            tmp = T.alloc_fragment((block_M, N), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            var = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                tmp[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
            T.reduce_sum(tmp, var, dim=1)
            for i in T.Parallel(block_M):
                var[i] = T.rsqrt(var[i] / N + 1e-5)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = (x[i, j] - mean[i]) * var[i] * Wt[j] + B[j]
            T.copy(x, Y[bx * block_M, col])

    return main


@tw.jit
def copy_k(N, out_dt):
    """The unfused conversion: a float32 tensor through a tile (no map) into an out_dt tensor."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), out_dt)):
        with T.Kernel(M) as bx:
            t = T.alloc_fragment((1, N), "float32")
            T.copy(X[bx, 0], t)
            T.copy(t, Y[bx, 0])

    return main


KERNELS = {"softmax": (softmax_k, 0), "rms_norm": (rms_norm_k, 1), "layer_norm": (layer_norm_k, 2)}


def _check(kind, M, N, W, col, in_dt, out_dt, block_M, special=False, seed=0):
    """Runs `kind` with an out_dt output (into columns [col, col + N) of a width-W tensor, the other
    columns keeping their value) and with a float32 one; the first must be the unfused copy's
    conversion of the second, bit for bit. Returns the out_dt kernel and its output."""
    make, nparams = KERNELS[kind]
    x = randn((M, N), in_dt, scale=2.0, seed=seed)
    if special and M:  # a NaN row, an inf row (softmax: a row of NaN), a row with one inf
        x[0, N // 2] = np.nan
        if M > 1:
            x[1, :] = np.inf
        if M > 2:
            x[2, 0] = -np.inf
    params = [randn((N,), in_dt, seed=seed + 1 + p) for p in range(nparams)]
    k = make(N, W, col, in_dt, out_dt, block_M)
    y = np.full((M, W), 7.0, dtype=np.float32).astype(np_dtype(out_dt))
    k(x, *params, y)
    y32 = np.zeros((M, N), dtype=np.float32)
    make(N, N, 0, in_dt, "float32", block_M)(x, *params, y32)
    ref = np.zeros((M, N), dtype=np_dtype(out_dt))
    copy_k(N, out_dt)(y32, ref)
    bits = y.view(np.uint16)
    assert np.array_equal(bits[:, col:col + N], ref.view(np.uint16))
    keep = np.full((1,), 7.0, dtype=np.float32).astype(np_dtype(out_dt)).view(np.uint16)[0]
    assert (bits[:, :col] == keep).all() and (bits[:, col + N:] == keep).all()
    finite = np.isfinite(y32)  # and, where finite, numpy's conversion (ml_dtypes: round to nearest even)
    assert np.array_equal(y[:, col:col + N][finite].view(np.uint16), y32[finite].astype(np_dtype(out_dt)).view(np.uint16))
    return k, y


def test_converting_copy_out_is_fused():
    """The bf16 copy-out ends a row pipeline (3 rows) or is fused with its map (1 row)."""
    src = softmax_k(4097, 4097, 0, "bfloat16", "bfloat16", 3).get_kernel_source()
    assert "row pipeline" in src and "tw_cpu::simd::store_chunk(" in src
    src = rms_norm_k(4097, 4097, 0, "bfloat16", "float16", 1).get_kernel_source()
    assert "fused with copy" in src


@pytest.mark.parametrize("kind, M, N, W, col, in_dt, out_dt, block_M", [
    ("softmax", 3, 4097, 4097, 0, "bfloat16", "bfloat16", 3),     # pipeline, rows of 8194 B
    ("rms_norm", 1, 4097, 4101, 3, "bfloat16", "float16", 1),     # one row, fused, into a wider tensor at col 3
    ("layer_norm", 3, 4097, 4097, 0, "float16", "bfloat16", 3),   # pipeline with a per-column operand (pairs)
    ("rms_norm", 5, 17, 17, 0, "bfloat16", "bfloat16", 3),        # 17 wide (no fusion), a partial block
    ("layer_norm", 3, 1, 1, 0, "bfloat16", "bfloat16", 3),        # 1 wide
])
def test_bits(kind, M, N, W, col, in_dt, out_dt, block_M):
    _check(kind, M, N, W, col, in_dt, out_dt, block_M)


@pytest.mark.parametrize("kind", ["softmax", "rms_norm", "layer_norm"])
def test_nan_inf_rows(kind):
    _check(kind, 3, 4097, 4097, 0, "bfloat16", "bfloat16", 3, special=True, seed=4)


def test_streamed_output_view():
    """An output of 8 MiB or more (streamed) into columns 1.. of a wider tensor: bits as above."""
    M, N, W = 1025, 4097, 4099
    assert M * W * 2 >= STREAM_BYTES
    _check("softmax", M, N, W, 1, "bfloat16", "bfloat16", 8, seed=6)
    _check("rms_norm", M, N, W, 1, "bfloat16", "float16", 8, seed=7)


def test_softmax_bf16_close_to_float64():
    x = randn((3, 4097), "bfloat16", scale=3.0, seed=9)
    y = np.zeros((3, 4097), dtype=np_dtype("bfloat16"))
    softmax_k(4097, 4097, 0, "bfloat16", "bfloat16", 3)(x, y)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    assert_close(y, e / e.sum(axis=1, keepdims=True), atol=2e-3, rtol=1.6e-2)


def test_empty():
    x = np.zeros((0, 4097), dtype=np_dtype("bfloat16"))
    y = np.zeros((0, 4097), dtype=np_dtype("bfloat16"))
    softmax_k(4097, 4097, 0, "bfloat16", "bfloat16", 3)(x, y)
    assert y.shape == (0, 4097)


@pytest.mark.parametrize("kind", ["softmax", "rms_norm"])
def test_same_kernels_on_ascend910b(kind):
    """The kernels are portable (the fusion is a cpu pass): on ascend910b, checker on, the bf16 output
    is within one bf16 rounding of cpu's and of float64's (each target's exp / rsqrt differ in the
    last float32 bits before the rounding)."""
    from ascend_util import run_checked

    make, nparams = KERNELS[kind]
    M, N = 3, 200
    x = randn((M, N), "bfloat16", scale=2.0, seed=11)
    params = [randn((N,), "bfloat16", seed=12 + p) for p in range(nparams)]
    y = np.zeros((M, N), dtype=np_dtype("bfloat16"))
    make(N, N, 0, "bfloat16", "bfloat16", 2)(x, *params, y)
    out = np.zeros((M, N), dtype=np_dtype("bfloat16"))
    run_checked(make(N, N, 0, "bfloat16", "bfloat16", 2, target="ascend910b"), x, *params, out)  # in place, as cpu
    x64 = x.astype(np.float64)
    if kind == "softmax":
        e = np.exp(x64 - x64.max(axis=1, keepdims=True))
        ref = e / e.sum(axis=1, keepdims=True)
    else:
        ref = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * params[0].astype(np.float64)
    assert_close(out, ref, atol=2e-3, rtol=1.6e-2, msg="ascend910b vs float64")
    assert_close(out, y, atol=2e-3, rtol=8e-3, msg="ascend910b vs cpu")
