"""T.silu(x) = x * sigmoid(x), the elementwise function issue 12 added to measure "Adding an op"
(docs/architecture.md): one row in TW_MATH_FNS (ir.h), one per target (the cpu's
tw_cpu::silu, the Ascend expansion x / (1 + exp(-x)) through the path sigmoid takes), checked on
the cpu target and the Ascend 910B simulator against a float64 numpy reference.

Inputs: uniform in [-8, 8] plus 0, -0, +-1, +-20 (fixed seeds), cast to the dtype; the reference
is computed in float64 from the same (rounded) inputs. Tolerances |got - ref| <= atol + rtol |ref|:
  float32  atol 1e-6, rtol 1e-6   (tw_cpu::silu: rel <= 4.2e-7, math.h; Ascend: exp, add, div
                                   each rounded to float32)
  float16  atol 2e-3, rtol 2e-3   (a few float16 ulps: the output rounding, and on Ascend the
                                   float16 exp / add / div)
  bfloat16 atol 2e-2, rtol 1.6e-2 (computed in float32, rounded once to bfloat16)
"""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError
from tilewright.testing import np_dtype

TOL = {"float32": (1e-6, 1e-6), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 1.6e-2)}
TARGETS = ["cpu", "ascend910b"]


@tw.jit(out_idx=[-1])
def silu_kernel(N, block_M, dtype):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.silu(x[i, j])
            T.copy(x, Y[bx * block_M, 0])

    return main


def silu_input(shape, dtype, seed):
    x = np.random.default_rng(seed).uniform(-8, 8, shape)
    flat = x.reshape(-1)
    special = [0.0, -0.0, 1.0, -1.0, 20.0, -20.0]
    flat[:min(len(special), flat.size)] = special[:flat.size]
    return x.astype(np.float32).astype(np_dtype(dtype))


def reference(x):
    v = x.astype(np.float64)
    return v / (1.0 + np.exp(-v))


def run(kernel, target, x):
    if target == "cpu":
        return kernel(x)
    prof = kernel.profile(x)  # the simulator, with its checker
    assert prof["reports"] == [], "\n".join(prof["reports"])
    return prof.outputs


# (M, N, block_M): row tails (37 = 4 * 8 + 5, a row of 301), one element, a single partial block
SHAPES = [(37, 301, 8), (1, 1, 1), (5, 64, 8)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("M,N,block_M", SHAPES)
def test_silu_matches_float64_reference(target, dtype, M, N, block_M):
    kern = silu_kernel(N, block_M, dtype, target=target)
    x = silu_input((M, N), dtype, seed=M * 1000 + N)
    y = run(kern, target, x)
    assert y.shape == (M, N) and y.dtype == np_dtype(dtype)
    atol, rtol = TOL[dtype]
    tw.testing.assert_close(y, reference(x), atol=atol, rtol=rtol, msg=f"T.silu {dtype} {M}x{N} on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_silu_empty_rows_launch_nothing(target):
    kern = silu_kernel(64, 8, "float32", target=target)
    x = np.zeros((0, 64), np.float32)
    assert run(kern, target, x).shape == (0, 64)


def test_silu_is_one_vectorisable_call_on_cpu_and_an_expansion_on_ascend():
    src = silu_kernel(64, 8, "float32", target="cpu").get_source()
    assert "tw_cpu::silu(" in src
    prog = silu_kernel(64, 8, "float32", target="ascend910b").get_source()
    assert "Exp(" in prog and "Div(" in prog  # x / (1 + exp(-x)) on the Vector unit


def test_silu_takes_one_argument():
    with pytest.raises(TilewrightError, match="T.silu"):
        @T.prim_func
        def bad(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(8):
                    Y[i] = T.silu(X[i], X[i])
