"""Session 29 (h-bf16in): a float32 tile copied from a bfloat16 / float16 tensor is read in place
(view_rows' widening row view): the maps' loads and the row reductions widen each element where
they read it, with the conversion the copy made (exact), instead of a converting copy writing a
float32 tile first. The values read are the same, so every output is BITWISE the output of the
same kernel on the float32 widening of the input (numpy's conversion is exact too: the float32
input's tile is a float32 view, the code path before this change for the arithmetic), and close to
float64. Correctness only, no timing; one shape per property."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close, np_dtype, randn


@tw.jit
def softmax_k(N, NX, cin, in_dt, block_M, log=False):
    """softmax (or log_softmax) of columns [cin, cin + N) of X (NX wide): x read by two passes."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, NX), in_dt), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            e = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, cin], x)
            T.reduce_max(x, row_max, dim=1)
            if log:
                for i, j in T.Parallel(block_M, N):
                    e[i, j] = T.exp(x[i, j] - row_max[i])
                T.reduce_sum(e, row_sum, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] - row_max[i] - T.log(row_sum[i])
            else:
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.exp(x[i, j] - row_max[i])
                T.reduce_sum(x, row_sum, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


@tw.jit
def norm_k(N, in_dt, out_dt, block_M, layer=False):
    """rms_norm, or layer_norm (x read by three passes: the mean, the variance, the output map)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dt), Wt: T.Tensor((N,), "float32"), Y: T.Tensor((M, N), out_dt)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            tmp = T.alloc_fragment((block_M, N), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            if layer:
                T.reduce_sum(x, mean, dim=1)
                for i in T.Parallel(block_M):
                    mean[i] = mean[i] / N
                for i, j in T.Parallel(block_M, N):
                    tmp[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
                T.reduce_sum(tmp, ss, dim=1)
                for i in T.Parallel(block_M):
                    ss[i] = T.rsqrt(ss[i] / N + 1e-5)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = (x[i, j] - mean[i]) * ss[i] * Wt[j]
            else:
                for i, j in T.Parallel(block_M, N):
                    tmp[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(tmp, ss, dim=1)
                for i in T.Parallel(block_M):
                    ss[i] = T.rsqrt(ss[i] / N + 1e-6)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] * ss[i] * Wt[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


@tw.jit
def col_sum_k(N, in_dt, block_M):
    """Column sums and row maxima of row blocks: reductions over both axes of the viewed tile."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), in_dt), S: T.Tensor((M, N), "float32"), R: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((N,), "float32")
            r = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, s, dim=0)
            T.reduce_max(x, r, dim=1)
            T.copy(s, S[bx, 0])
            T.copy(r, R[bx * block_M])

    return main


WIDENED = "widened to float32 where read"


def _input(M, NX, dt, seed, special=False):
    x = randn((M, NX), dt, scale=2.0, seed=seed)
    if special and M * NX:
        # NaN, inf, -inf; float16: subnormals (the smallest, one with a high mantissa), the largest
        # finite value, a signalling NaN's bits (widened with its payload, as the copy widens it)
        flat = x.reshape(-1).view(np.uint16)
        nan = 0x7E01 if dt == "float16" else 0x7FC1
        flat[[1, 5]] = [nan, 0x7C00 if dt == "float16" else 0x7F80]
        flat[7] = 0xFC00 if dt == "float16" else 0xFF80
        if dt == "float16":
            flat[[8, 3, 4, 6]] = [0x0001, 0x83FF, 0x7BFF, 0x7D01]
    return x


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("M, N, NX, cin, dt, bm, log, special", [
    (3, 4099, 4099, 0, "bfloat16", 2, False, False),  # a row tail (4099), a tail block (masked path)
    (5, 130, 133, 3, "float16", 2, False, True),       # at column 3 (unaligned), NaN / inf / subnormals
    (4, 257, 257, 0, "bfloat16", 4, True, True),       # log_softmax, specials
    (0, 64, 64, 0, "bfloat16", 2, False, False),       # no rows
])
def test_softmax_bits(M, N, NX, cin, dt, bm, log, special):
    k = softmax_k(N, NX, cin, dt, bm, log)
    assert WIDENED in k.get_kernel_source()
    x = _input(M, NX, dt, 1, special)
    y = np.zeros((M, N), np.float32)
    k(x, y)
    x32 = x.astype(np.float32)  # exact
    y32 = np.zeros_like(y)
    k32 = softmax_k(N, NX, cin, "float32", bm, log)
    assert WIDENED not in k32.get_kernel_source()
    k32(x32, y32)
    _same_bits(y, y32)
    if M and not special:
        x64 = x32[:, cin:cin + N].astype(np.float64)
        z = x64 - x64.max(axis=1, keepdims=True)
        ref = z - np.log(np.exp(z).sum(axis=1, keepdims=True)) if log else np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        assert_close(y, ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("M, N, dt, out_dt, bm, layer", [
    (5, 1, "bfloat16", "float32", 3, False),     # one-element rows, a tail block
    (3, 4099, "float16", "float16", 3, True),    # layer_norm: three passes read x; fp16 out (fused convert)
    (9, 5, "float16", "float32", 4, True),       # rows shorter than a vector
])
def test_norm_bits(M, N, dt, out_dt, bm, layer):
    k = norm_k(N, dt, out_dt, bm, layer)
    assert WIDENED in k.get_kernel_source()
    x = _input(M, N, dt, 2, special=False)
    w = randn((N,), "float32", seed=3)
    y = np.zeros((M, N), np_dtype(out_dt))
    k(x, w, y)
    y32 = np.zeros_like(y)
    norm_k(N, "float32", out_dt, bm, layer)(x.astype(np.float32), w, y32)
    _same_bits(y, y32)
    x64 = x.astype(np.float64)
    if layer:
        c = x64 - x64.mean(axis=1, keepdims=True)
        ref = c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5) * w
    else:
        ref = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
    tol = 1e-5 if out_dt == "float32" else 2e-3
    assert_close(y.astype(np.float64), ref, atol=tol, rtol=tol * 10)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_column_and_row_reductions(dt):
    """Both reductions read the tile through the view (the column sum four rows a pass), a tail block."""
    M, N, bm = 11, 67, 4
    k = col_sum_k(N, dt, bm)
    assert WIDENED in k.get_kernel_source()
    x = _input(M, N, dt, 5, special=(dt == "float16"))
    s, r = np.zeros((M, N), np.float32), np.zeros((M,), np.float32)  # S: row b the sums of block b
    k(x, s, r)
    s32, r32 = np.zeros_like(s), np.zeros_like(r)
    col_sum_k(N, "float32", bm)(x.astype(np.float32), s32, r32)
    _same_bits(s, s32)
    _same_bits(r, r32)
