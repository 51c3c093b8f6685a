"""Every float operation a kernel writes is rounded on its own on cpu, as on ascend910b and in numpy (h-contract37):
the cpu target compiles with -ffp-contract=off, so error-free transformations work on both targets. Veltkamp's split
(t = v * (2^12 + 1), hi = t - (t - v): g++'s default contraction fused t - v into fma(v, c, -v) and hi was v) and
Dekker's TwoProduct error term (((ah * bh - p) + ah * bl + al * bh) + al * bl: ah * bh - p was fused) in a map
and in scalar code, inputs float32 / float16 / bfloat16, computed in float32: cpu == ascend910b == numpy, bit for bit.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

# 2^s + 1 splits a float32 into a hi of 24 - s significant bits and a lo: float32 inputs in two halves of 12
# bits; float16 (11 bits) and bfloat16 (8 bits) inputs into a hi of 6 and of 4 bits (their products are exact)
SPLIT = {"float32": 2.0 ** 12 + 1, "float16": 2.0 ** 18 + 1, "bfloat16": 2.0 ** 20 + 1}
BINADES = {"float32": 20, "float16": 6, "bfloat16": 20}  # inputs in [2^-k, 2^k]: products normal in float32


def _kernel(M, N, dt):
    C = SPLIT[dt]

    @T.prim_func
    def main(A: T.Tensor((M, N), dt), B: T.Tensor((M, N), dt), Y: T.Tensor((6, M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "float32")
            b = T.alloc_fragment((M, N), "float32")
            hi = T.alloc_fragment((M, N), "float32")
            lo = T.alloc_fragment((M, N), "float32")
            e = T.alloc_fragment((M, N), "float32")
            hi2 = T.alloc_fragment((M, N), "float32")
            lo2 = T.alloc_fragment((M, N), "float32")
            e2 = T.alloc_fragment((M, N), "float32")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            for i, j in T.Parallel(M, N):  # in a map
                t = a[i, j] * C
                ah = t - (t - a[i, j])
                al = a[i, j] - ah
                hi[i, j] = ah
                lo[i, j] = al
                p = a[i, j] * b[i, j]
                tb = b[i, j] * C
                bh = tb - (tb - b[i, j])
                bl = b[i, j] - bh
                e[i, j] = ((ah * bh - p) + ah * bl + al * bh) + al * bl
            for i in T.serial(M):  # in scalar code, through the tiles
                for j in T.serial(N):
                    t2 = a[i, j] * C
                    hi2[i, j] = t2 - (t2 - a[i, j])
                    lo2[i, j] = a[i, j] - hi2[i, j]
                    p2 = a[i, j] * b[i, j]
                    tb2 = b[i, j] * C
                    bh2 = tb2 - (tb2 - b[i, j])
                    bl2 = b[i, j] - bh2
                    e2[i, j] = ((hi2[i, j] * bh2 - p2) + hi2[i, j] * bl2 + lo2[i, j] * bh2) + lo2[i, j] * bl2
            T.copy(hi, Y[0, 0, 0])
            T.copy(lo, Y[1, 0, 0])
            T.copy(e, Y[2, 0, 0])
            T.copy(hi2, Y[3, 0, 0])
            T.copy(lo2, Y[4, 0, 0])
            T.copy(e2, Y[5, 0, 0])
    return main


def _numpy(a, b, dt):
    """Each operation rounded to float32 (numpy never fuses)."""
    a, b = a.astype(np.float32), b.astype(np.float32)
    c = np.float32(SPLIT[dt])

    def split(v):
        t = v * c
        h = t - (t - v)
        return h, v - h
    ah, al = split(a)
    bh, bl = split(b)
    return np.stack([ah, al, ((ah * bh - a * b) + ah * bl + al * bh) + al * bl])


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_error_free_transforms_bit_exact_on_both_targets(dt):
    M, N = 3, 19
    rng = np.random.default_rng(37)
    npdt = tw.testing.np_dtype(dt)
    # significands that need every bit, over a spread of binades (products stay normal in float32)
    k = BINADES[dt]
    a = (rng.standard_normal((M, N)) * np.exp2(rng.integers(-k, k, (M, N)))).astype(npdt)
    b = (rng.standard_normal((M, N)) * np.exp2(rng.integers(-k, k, (M, N)))).astype(npdt)
    a.flat[0], b.flat[0] = 1.0, -1.0  # an exact split: lo and the error term are 0
    ref = np.concatenate([_numpy(a, b, dt)] * 2)  # the map's results, then the scalar code's
    prim = _kernel(M, N, dt)
    got_cpu = tw.compile(prim, target="cpu", out_idx=[-1])(a, b)
    got_asc = run_checked(tw.compile(prim, target=TARGET, out_idx=[-1]), a, b)
    got_asc = got_asc[0] if isinstance(got_asc, (list, tuple)) else got_asc
    for name, got in (("cpu", got_cpu), (TARGET, got_asc)):
        np.testing.assert_array_equal(np.asarray(got).view(np.uint32), ref.view(np.uint32), err_msg=f"{name} {dt}")
    # the transform is error-free: hi + lo == a and p + e == a * b exactly (float64 holds both)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert np.array_equal(ref[0].astype(np.float64) + ref[1], a64)
    p = (a.astype(np.float32) * b.astype(np.float32)).astype(np.float64)
    assert np.array_equal(p + ref[2], a64 * b64)
    # the checks have teeth: most splits leave a lo; most float32 products are inexact (half ones are exact)
    assert np.count_nonzero(ref[1]) > M * N // 2
    assert np.count_nonzero(ref[2]) > M * N // 2 or dt != "float32"
