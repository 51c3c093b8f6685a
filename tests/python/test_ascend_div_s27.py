"""A tile divided by a scalar on ascend910b is correctly rounded, as cpu's `/` and numpy (session 27,
h-div16; hunt15 F1): select_vector_calls Duplicates the scalar into one 32 B block of the scratch
area and issues Div reading it with block and repeat stride 0; only a constant +-2^k keeps Muls by
its reciprocal (exact). Constant and run-time scalars, float32 / float16 / bfloat16 tiles (divided
in float32 and rounded once), contiguous, strided (level-0 repeats) and wide rows (one row at a
time), a one-element tile; bit equality against numpy's float32 quotient rounded to the dtype and
against cpu, checker on (reports == [])."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402


def divide(M, N, dtype, target, C=None):
    """B = A / 127.0, D = A / S[0] (run-time), E = A / 0.25 (Muls by 4: exact), F = S[0] / A, over
    the first N columns of (M, C) fragments (C > N: strided rows)."""
    C = C or N

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), S: T.Tensor((1,), "float32"), B: T.Tensor((M, N), dtype),
             D: T.Tensor((M, N), dtype), E: T.Tensor((M, N), dtype), F: T.Tensor((M, N), dtype)):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, C), dtype)
            b = T.alloc_fragment((M, C), dtype)
            d = T.alloc_fragment((M, C), dtype)
            e = T.alloc_fragment((M, C), dtype)
            f = T.alloc_fragment((M, C), dtype)
            T.copy(A, a[0:M, 0:N])
            s = S[0]
            for i, j in T.Parallel(M, N):
                b[i, j] = a[i, j] / 127.0
                d[i, j] = a[i, j] / s
                e[i, j] = a[i, j] / 0.25
                f[i, j] = s / a[i, j]
            T.copy(b[0:M, 0:N], B)
            T.copy(d[0:M, 0:N], D)
            T.copy(e[0:M, 0:N], E)
            T.copy(f[0:M, 0:N], F)

    return tw.compile(main, out_idx=[2, 3, 4, 5], target=target)


def _inputs(M, N, dtype):
    a = (np.random.default_rng(16).standard_normal((M, N)) * 10).astype(np.float32)
    a.flat[0] = 0.0  # F: s / 0 = +-inf
    if a.size > 2:
        a.flat[1], a.flat[2] = 65504.0, -1.5e-3
    return a.astype(np_dtype(dtype)), np.array([-3.0], np.float32)


def _check(M, N, dtype, C=None):
    a, s = _inputs(M, N, dtype)
    t = np_dtype(dtype)
    a32 = a.astype(np.float32)
    with np.errstate(divide="ignore", over="ignore"):
        ref = [(a32 / np.float32(127)).astype(t), (a32 / s[0]).astype(t), (a32 / np.float32(0.25)).astype(t),
               (s[0] / a32).astype(t)]
    cpu = divide(M, N, dtype, "cpu", C)(a, s)
    k = divide(M, N, dtype, TARGET, C)
    asc = run_checked(k, a, s)
    for name, r, c, g in zip(("x / 127.0", "x / s", "x / 0.25", "s / x"), ref, cpu, asc):
        np.testing.assert_array_equal(np.asarray(c).view(np.uint8), r.view(np.uint8), err_msg=f"cpu {name}")
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), r.view(np.uint8), err_msg=f"{TARGET} {name}")
    return k


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_division_by_a_scalar_is_bit_exact(dtype):
    """Contiguous odd rows (5 x 37: a tail repeat), every dtype."""
    _check(5, 37, dtype)


def test_division_by_a_scalar_layouts():
    """Rows 72 elements apart holding 67 (level-0 repeats, two masked column chunks); contiguous rows
    (4 x 72: four whole repeats and a half one along the flat run); a 1 x 1 tile."""
    _check(3, 67, "float32", C=72)
    _check(4, 72, "float32")
    _check(1, 1, "float32")


def test_division_by_a_scalar_wide_rows():
    """Rows 2056 float32 apart (257 blocks: past a repeat stride), one row at a time."""
    _check(2, 9, "float32", C=2056)


def test_printed_ascendc_divides_except_by_a_power_of_two():
    """Div for 127.0 and the run-time s, Muls by 4 for 0.25 (its reciprocal is exact); no Muls by
    a reciprocal 1 / s."""
    src = divide(5, 37, "float32", TARGET).get_source("ascendc")
    assert src.count("Duplicate(") >= 2 and src.count("Div(") >= 3, src
    assert "static_cast<float>(4.0f)" in src, src
    assert "(1.0f /" not in src, src
