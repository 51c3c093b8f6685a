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


@tw.jit
def double_in_place(N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype)):  # no output: A is written in place
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((N,), dtype)
            T.copy(A[0], a)
            for i in T.Parallel(N):
                a[i] = a[i] * 2.0
            T.copy(a, A[0])
    return main


@tw.jit(out_idx=[-1])
def accumulate(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Acc: T.Tensor((N,), "float32"), Old: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:  # Old = Acc; Acc += X (in place)
            for i in T.serial(N):
                Old[i] = Acc[i]
                Acc[i] = Acc[i] + X[i]
    return main


def test_custom_op_of_an_in_place_kernel_declares_the_mutation():
    """A kernel writing an input in place was refused; the op now names that input in
    mutates_args (Tensor(a!) in the schema), mutates it and returns None (no output)."""
    op = tw.register_torch_op("tw_test::double_in_place", double_in_place(7))
    assert "Tensor(a!) A) -> ()" in str(op._opoverload._schema)
    x = torch.arange(7, dtype=torch.float32)
    assert op(x) is None
    assert torch.equal(x, 2 * torch.arange(7, dtype=torch.float32))
    # A strided tensor is run through a dense copy and written back, as any torch op writes it.
    base = torch.ones(14)
    op(base[::2])
    assert torch.equal(base, torch.tensor([2.0, 1.0] * 7))
    # torch.compile sees the mutation: it does not reuse x's old value after the call.
    @torch.compile(fullgraph=True)
    def f(x):
        y = x + 1
        op(x)
        return x + y

    x = torch.arange(7, dtype=torch.float32)
    r = f(x)
    ref = torch.arange(7, dtype=torch.float32)
    assert torch.equal(x, 2 * ref)
    assert torch.equal(r, 2 * ref + ref + 1)

    @torch.compile(fullgraph=True)
    def g(base):  # a strided view, mutated inside a compiled graph
        op(base[::2])
        return base + 0

    base = torch.ones(14)
    assert torch.equal(g(base), torch.tensor([2.0, 1.0] * 7)) and torch.equal(base, torch.tensor([2.0, 1.0] * 7))


def test_custom_op_with_outputs_and_an_in_place_input():
    op = tw.register_torch_op("tw_test::accumulate", accumulate(5))
    schema = str(op._opoverload._schema)
    assert "Tensor X, Tensor(a!) Acc) -> Tensor" in schema, schema
    x, acc = torch.arange(5, dtype=torch.float32), torch.full((5,), 10.0)

    @torch.compile(fullgraph=True)
    def f(x, acc):
        old = op(x, acc)
        return old * 1, acc * 1

    old, new = f(x, acc)
    assert torch.equal(old, torch.full((5,), 10.0))
    assert torch.equal(new, 10.0 + x) and torch.equal(acc, 10.0 + x)
    assert torch.equal(x, torch.arange(5, dtype=torch.float32))  # read only: untouched
