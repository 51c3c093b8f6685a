"""Element accesses of tiles are never out of bounds silently (src/transform/check_bounds.*): an
index provably outside is a compile-time error at its line, an index proved inside runs unchecked,
and any other tile index is checked at run time on cpu (a TilewrightError at the access's line,
without TW_BOUNDS_CHECK)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

from tw_test_util import assert_located, load_example, unchecked_code_only

THIS_FILE = __file__


def at(exc_info, marker, message):
    assert_located(exc_info, THIS_FILE, marker, message)


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_non_affine_tile_store_out_of_range_is_a_compile_error(target):
    # fuzz_mutate seed 9001: softmax with x[i * i * i, j] wrote past the tile (SIGSEGV on cpu).
    M = T.symbolic("M")

    @T.prim_func
    def cube(X: T.Tensor((M, 40), "float32"), Y: T.Tensor((M, 40), "float32")):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            x = T.alloc_fragment((8, 40), "float32")
            T.copy(X[bx * 8, 0], x)
            for i, j in T.Parallel(8, 40):
                x[i * i * i, j] = T.exp(x[i, j])  # @cube
            T.copy(x, Y[bx * 8, 0])
    with pytest.raises(TilewrightError) as ei:
        tw.compile(cube, out_idx=[-1], target=target)
    at(ei, "@cube", "index i * i * i of 'x' reaches 343, outside dimension 0 of size 8")


@unchecked_code_only
def test_monotone_tile_indices_are_proved_and_unchecked():
    @T.prim_func
    def folded(X: T.Tensor((8, 8), "float32"), Y: T.Tensor((8, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, 8), "float32")
            y = T.alloc_fragment((8, 8), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(8, 8):
                y[7 - i, (j * 3) % 8] = x[T.min(i * i, 7), j * j // 8]
            T.copy(y, Y)
    k = tw.compile(folded, out_idx=[-1])
    assert "checked_index" not in k.get_source()
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    want = np.zeros((8, 8), np.float32)
    for i in range(8):
        for j in range(8):
            want[7 - i, (j * 3) % 8] = x[min(i * i, 7), j * j // 8]
    assert np.array_equal(k(x), want)


@unchecked_code_only
def test_clamped_gather_index_is_proved():
    # bench/op_zoo.py's cross entropy: x[i, T.min(T.max(lab[i], 0), N - 1)] with lab read from an
    # int32 tensor: a loaded value lies within its dtype, so the clamp proves the index.
    @T.prim_func
    def gather(X: T.Tensor((8, 16), "float32"), L: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, 16), "float32")
            lab = T.alloc_fragment((8,), "int32")
            y = T.alloc_fragment((8,), "float32")
            T.copy(X, x)
            T.copy(L, lab)
            for i in T.Parallel(8):
                y[i] = x[i, T.min(T.max(lab[i], 0), 15)]
            T.copy(y, Y)
    k = tw.compile(gather, out_idx=[-1])
    assert "checked_index" not in k.get_source()
    X = np.arange(128, dtype=np.float32).reshape(8, 16)
    L = np.array([0, 15, -5, 99, 3, 7, 1, 2], np.int32)
    assert np.array_equal(k(X, L), X[np.arange(8), np.clip(L, 0, 15)])


def _scalar_row_kernel(target="cpu"):
    @T.prim_func
    def scalar_row(X: T.Tensor((8, 16), "float32"), n: T.int32, Y: T.Tensor((8, 16), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8, 16), "float32")
            T.copy(X, x)
            for j in T.Parallel(16):
                x[n, j] = x[n, j] * 2.0  # @scalar_row
            T.copy(x, Y)
    return tw.compile(scalar_row, out_idx=[-1], target=target)


def test_unproved_tile_index_is_checked_at_run_time():
    k = _scalar_row_kernel()
    assert "tw_cpu::checked_index" in k.get_source()
    X = np.arange(128, dtype=np.float32).reshape(8, 16)
    want = X.copy()
    want[3] *= 2
    assert np.array_equal(k(X, 3), want)
    for n in (8, -1, 1 << 30):
        with pytest.raises(TilewrightError) as ei:
            k(X, n)
        at(ei, "@scalar_row", f"index {n} is out of bounds for dimension 0 of 'x' (size 8)")


def test_unproved_tile_index_on_ascend_is_a_checker_report():
    # The simulator checks every operand against its buffer: the same row out of the UB tile is
    # a report at the access's line, not a write past it.
    k = _scalar_row_kernel("ascend910b")
    X = np.arange(128, dtype=np.float32).reshape(8, 16)
    assert np.array_equal(k(X, 5)[5], X[5] * 2)
    with pytest.raises(TilewrightError) as ei:
        k(X, 9)
    at(ei, "@scalar_row", "out of bounds")


def test_guarded_tile_access_that_would_overflow_is_checked_not_rejected():
    @T.prim_func
    def guarded(X: T.Tensor((8,), "float32"), n: T.int32, Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "float32")
            T.copy(X, x)
            if n > 0:
                for i in T.Parallel(8):
                    x[i * i] = 0.0  # @guarded
            T.copy(x, Y)
    k = tw.compile(guarded, out_idx=[-1])
    X = np.arange(8, dtype=np.float32)
    assert np.array_equal(k(X, 0), X)  # the branch does not run: no error
    with pytest.raises(TilewrightError) as ei:
        k(X, 1)
    at(ei, "@guarded", "index 9 is out of bounds for dimension 0 of 'x' (size 8)")


def test_gemm_into_a_tile_region_not_proved_in_bounds_is_checked():
    @T.prim_func
    def rows(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32"), n: T.int32,
             C: T.Tensor((16, 8), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((8, 8), "float32")
            b = T.alloc_shared((8, 8), "float32")
            c = T.alloc_fragment((16, 8), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            T.gemm(a, b, c[n:n + 8, 0:8])  # @gemm_rows
            T.copy(c, C)
    k = tw.compile(rows, out_idx=[-1])
    A = np.arange(64, dtype=np.float32).reshape(8, 8)
    B = np.eye(8, dtype=np.float32)
    want = np.zeros((16, 8), np.float32)
    want[8:] = A
    assert np.array_equal(k(A, B, 8), want)
    for n, bad in ((9, 16), (-1, -1)):
        with pytest.raises(TilewrightError) as ei:
            k(A, B, n)
        at(ei, "@gemm_rows", f"index {bad} is out of bounds for dimension 0 of 'c' (size 16)")


EXAMPLES = {
    "softmax": lambda m: m.softmax(40),
    "rms_norm": lambda m: m.rms_norm(40),
    "layer_norm": lambda m: m.layer_norm(40),
    "gelu_bias": lambda m: m.gemm_bias_gelu(20, 24, 16),
    "gemm": lambda m: m.matmul(20, 24, 16),
    "flash_attention": lambda m: m.flash_attention(1, 2, 100, 16, True),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@unchecked_code_only
def test_examples_have_no_run_time_tile_checks(name):
    # The hot loops of the examples index tiles by loop variables: all proved, none checked.
    kernel = EXAMPLES[name](load_example(name))
    assert "checked_index" not in kernel.get_source()
