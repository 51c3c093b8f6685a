"""torch interop: torch tensors in -> torch tensors out (sharing memory), bf16/fp16 both ways,
strided views, device errors, and tw.register_torch_op under torch.compile(fullgraph=True).
Skipped when torch is not installed (CI does not install it)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

torch = pytest.importorskip("torch")


@tw.jit(out_idx=[-1])
def scale(M, N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            t = T.alloc_fragment((8, N), dtype)
            T.copy(A[bx * 8, 0], t)
            for i, j in T.Parallel(8, N):
                t[i, j] = t[i, j] * 2.0
            T.copy(t, B[bx * 8, 0])
    return main


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_in_torch_out(dtype):
    x = torch.randn(16, 32).to(getattr(torch, dtype))
    y = scale(16, 32, dtype)(x)
    assert isinstance(y, torch.Tensor) and y.dtype == x.dtype
    tw.testing.assert_close(y, x.float() * 2)


def test_numpy_in_numpy_out():
    y = scale(16, 32)(np.ones((16, 32), np.float32))
    assert isinstance(y, np.ndarray)


def test_strided_views_are_copied():
    x = torch.randn(32, 16).t()  # not contiguous
    tw.testing.assert_close(scale(16, 32)(x), x * 2)
    a = np.ones((32, 16), np.float32).T
    tw.testing.assert_close(scale(16, 32)(a), a * 2)


def test_device_mismatch_names_the_tensor():
    if not hasattr(torch, "device") or not torch.backends.mps.is_available() and not torch.cuda.is_available():
        x = torch.randn(16, 32, device="meta")
        with pytest.raises((tw.TilewrightError, RuntimeError, BufferError)):
            scale(16, 32)(x)
        return
    dev = "cuda" if torch.cuda.is_available() else "mps"
    with pytest.raises(tw.TilewrightError, match="'A'.*device"):
        scale(16, 32)(torch.randn(16, 32, device=dev))


def test_custom_op_under_torch_compile():
    op = tw.register_torch_op("tw_test::scale", scale(16, 32))

    @torch.compile(fullgraph=True)
    def f(x):
        return op(x) + 1

    x = torch.randn(16, 32)
    tw.testing.assert_close(f(x), x * 2 + 1)
