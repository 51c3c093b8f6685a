"""Accuracy of long float32-accumulated sums on cpu (hunt12 F1, docs/language.md "T.reduce_sum"):
rows and columns of 1 .. 1e6 elements of adversarial values (constant 0.1, 1 + small, alternating
large / small, mixed signs), float32 / float16 / bfloat16 inputs, dim 0 and 1, clear=False merges,
a fused map + sum, and the AVX2 proxy (TW_CPU_ARCH=x86-64-v3). Each sum is checked against the
float64 sum of the same (rounded) inputs with the documented bound

    |sum - exact| <= 300 * 2**-24 * sum(|x|)        (+ the destination's rounding)

which a running sum (the code before session 24) breaks from ~1e5 elements on: a row of 1e6 values
0.1 was 1.5e-4 off (relative), a column of 1e6 0.1s 9.6e-3."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tw_test_util import avx2_child_npz, load_example  # noqa: E402

U = 2.0 ** -24
BOUND = 300 * U  # docs/language.md "T.reduce_sum"
LENGTHS = [1, 15, 16, 17, 1000, 100000, 1000000]


def _values(n, dtype, rng):
    """Four sequences of n values, rounded to dtype: 0.1; 1 + U(0, 1e-3); alternating 1000 / 0.01;
    N(0, 1) with mean 0.5 (mixed signs). 16-bit values are scaled by min(1, 30 / n) so that the
    sums (rounded into the 16-bit destination: src and dst share a dtype) stay below 65504."""
    alt = np.where(np.arange(n) % 2 == 0, 1000.0, 0.01)
    x = np.stack([np.full(n, 0.1), 1 + rng.random(n) * 1e-3, alt, rng.standard_normal(n) + 0.5])
    if dtype != "float32":
        x = x * min(1.0, 30.0 / n)
    return x.astype(np_dtype(dtype))


OUT_U = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}  # the destination's rounding


def _check(got, x, axis, what):
    x64 = np.asarray(x, dtype=np.float64)
    ref = x64.sum(axis)
    ou = OUT_U[np.dtype(x.dtype).name]
    bound = BOUND * np.abs(x64).sum(axis) + np.abs(ref) * ou + 2.0 ** -24
    err = np.abs(np.asarray(got, dtype=np.float64) - ref)
    assert np.all(err <= bound), f"{what}: error {err} > bound {bound} (sums {ref})"


def _row_sum(M, N, dtype, merge=False):
    @T.prim_func
    def k(X: T.Tensor((M, N), dtype), Y0: T.Tensor((M,), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            s = T.alloc_fragment((M,), dtype)
            T.copy(X[0, 0], x)
            T.copy(Y0[0], s)
            T.reduce_sum(x, s, dim=1, clear=not merge)
            T.copy(s, Y[0])
    return k


def _col_sum(M, N, dtype, merge=False):
    @T.prim_func
    def k(X: T.Tensor((M, N), dtype), Y0: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            s = T.alloc_fragment((N,), dtype)
            T.copy(X[0, 0], x)
            T.copy(Y0[0], s)
            T.reduce_sum(x, s, dim=0, clear=not merge)
            T.copy(s, Y[0])
    return k


def _run_sum(axis, n, dtype, merge=False, seed=0):
    rng = np.random.default_rng(seed)
    x = _values(n, dtype, rng)  # [4, n]
    y0 = (np.array([3.0, -1.0, 0.5, 0.0]) if merge else np.zeros(4)).astype(np_dtype(dtype))
    if axis == 0:
        x = np.ascontiguousarray(x.T)  # [n, 4]: columns of n
        got = tw.compile(_col_sum(n, 4, dtype, merge), out_idx=[-1])(x, y0)
    else:
        got = tw.compile(_row_sum(4, n, dtype, merge), out_idx=[-1])(x, y0)
    return x, y0, got


@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("n", LENGTHS)
def test_float32_sums_within_the_bound(axis, n):
    x, _, got = _run_sum(axis, n, "float32", seed=n)
    _check(got, x, axis, f"float32 sums of {n} along axis {axis}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("n", [17, 1000, 100000, 1000000])
def test_16bit_inputs_sum_in_float32_within_the_bound(dtype, axis, n):
    x, _, got = _run_sum(axis, n, dtype, seed=n + 1)
    _check(got, x, axis, f"{dtype} sums of {n} along axis {axis}")


@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("n", [16, 100000])
def test_clear_false_merges_within_the_bound(axis, n):
    """reduce_sum(clear=False) adds the tile's sum to what the destination holds (one rounding)."""
    x, y0, got = _run_sum(axis, n, "float32", merge=True, seed=7)
    x64 = np.asarray(x, np.float64)
    part = x64.sum(axis)
    bound = BOUND * np.abs(x64).sum(axis) + (np.abs(part) + np.abs(part + y0)) * 2.0 ** -24
    err = np.abs(got.astype(np.float64) - (part + y0))
    assert np.all(err <= bound), f"merge of {n} along axis {axis}: error {err} > {bound}"


def test_chunked_clear_false_merges_stay_accurate():
    """A kernel that sums a 2^20-element row in 8192-element chunks (reduce_sum(clear=False) in a
    T.serial loop): the chunks' sums are added one by one into the float32 destination (the
    kernel's order), within the bound for 128 chunks."""
    M, N, C = 2, 1 << 20, 8192

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, C), "float32")
            s = T.alloc_fragment((M,), "float32")
            T.clear(s)
            for c in T.serial(N // C):
                T.copy(X[0, c * C], x)
                T.reduce_sum(x, s, dim=1, clear=False)
            T.copy(s, Y[0])

    x = _values(N, "float32", np.random.default_rng(3))[[0, 2]]
    got = tw.compile(k, out_idx=[-1])(x)
    x64 = x.astype(np.float64)
    bound = (BOUND + (N // C) * U) * np.abs(x64).sum(1)
    assert np.all(np.abs(got - x64.sum(1)) <= bound)


def test_fused_map_sum_of_long_rows():
    """A T.Parallel map followed by a row sum (fused by fuse_map_reduce: the map is computed and
    summed chunk by chunk): a sum of squares of 1e6-element rows, blocked like reduce_sum."""
    M, N = 4, 1000000

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            q = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(M, N):
                q[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(q, s, dim=1)
            T.copy(s, Y[0])

    x = _values(N, "float32", np.random.default_rng(5))
    x[2] = np.float32(0.316)  # squares of 0.316: 0.099856 each (the alternating row's are 1e6 / 1e-4)
    kern = tw.compile(k, out_idx=[-1])
    got = kern(x)
    sq = x.astype(np.float64) ** 2
    # a product rounds once (U relative) before it is summed
    bound = (BOUND + U) * sq.sum(1) + np.abs(sq.sum(1)) * U
    assert np.all(np.abs(got - sq.sum(1)) <= bound), (got, sq.sum(1))


AVX2_CASES = [(axis, dtype) for dtype in ("float32", "bfloat16") for axis in (1, 0)]


def child_main(path):
    """The AVX2 proxy's sums, in a child process whose cpu target is x86-64-v3 (tw_test_util.avx2_child_npz:
    the environment is read once per process, so setting TW_CPU_ARCH in the test's own process compiled
    these natively); float32 holds a bfloat16 sum exactly."""
    assert tw._C.cpu_arch() == "x86-64-v3", tw._C.cpu_arch()
    np.savez(path, **{f"{axis}_{dtype}": np.asarray(_run_sum(axis, 1000000, dtype, seed=11)[2], np.float32)
                      for axis, dtype in AVX2_CASES})


@pytest.fixture(scope="module")
def avx2(tmp_path_factory):
    path = avx2_child_npz(tmp_path_factory.mktemp("reduce_accuracy"), "test_reduce_accuracy_s24")
    with np.load(path) as f:
        return {name: f[name] for name in f.files}


@pytest.mark.parametrize("axis,dtype", AVX2_CASES)
def test_avx2_proxy_sums_within_the_bound(axis, dtype, avx2):
    """TW_CPU_ARCH=x86-64-v3 (8-lane vectors: twice the elements per lane of AVX-512)."""
    x = _values(1000000, dtype, np.random.default_rng(11))
    if axis == 0:
        x = np.ascontiguousarray(x.T)
    _check(avx2[f"{axis}_{dtype}"], x, axis, f"x86-64-v3 {dtype} sums of 1e6 along axis {axis}")


def test_sums_are_deterministic():
    """The same bits run to run (the blocks are summed in a fixed order)."""
    x = _values(1000000, "float32", np.random.default_rng(9))
    kern = tw.compile(_row_sum(4, 1000000, "float32"), out_idx=[-1])
    y0 = np.zeros(4, np.float32)
    a, b = kern(x, y0), kern(x, y0)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_softmax_of_long_rows_sums_in_blocks():
    """The softmax example at N = 20000 (> one 4096-element block): its exp-sum runs in the row
    pipeline / fused map + sum, blocked; each output is within the sum bound of float64 (plus a
    few roundings of exp and the division)."""
    N = 20000
    kern = tw.compile(load_example("softmax").softmax.__wrapped__(N, block_M=4), out_idx=[-1])
    x = np.zeros((8, N), np.float32)
    x[1] = 0.1
    x[2, ::2] = 5.0
    x[3] = np.random.default_rng(4).standard_normal(N).astype(np.float32) * 3
    y = kern(x)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    rel = np.abs(y - ref) / ref
    assert rel.max() <= BOUND + 16 * U, rel.max()
