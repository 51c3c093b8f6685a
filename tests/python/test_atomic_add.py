"""T.atomic_add(dst, value) (issue 13) on cpu and ascend910b: many programs adding into the same rows.

cpu: each element's read-add-write is atomic across the thread pool's workers (tw_cpu::atomic_add,
fetch-add for int32, a compare-and-swap loop for the float types). ascend910b: the copy into GM runs
between SetAtomicAdd<T>() and SetAtomicNone() (UB -> GM DataCopyPad; L0C -> GM Fixpipe for a Cube
accumulator); the simulator adds into GM and its checker does not count atomic adds of different
cores as a race. Values are small integers (and halves) where the sum must be exact whatever order
the programs add in (float16, int32, float32); with random float32 values the order changes the
last bits, so those are compared with a stated tolerance (atol 1e-5 * S, rtol 1e-5 for S terms).
Shapes: tails (37 x 45 in 16 x 32 blocks), one element, every program adding into one row. Every
result is checked against numpy; simulated results are a model's, not measurements on an NPU."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError
from tilewright._C import ir

from ascend_util import TARGET, run_checked
from tw_test_util import marked_line

TARGETS = ["cpu", TARGET]


def run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def sum_kernel(S, M, N, bm, bn, dtype, acc_dtype):
    """Out[M, N] += sum_s X[s]: program (i, j, s) loads its block of X[s] and adds it into Out."""
    @T.prim_func
    def atomic_sum(X: T.Tensor((S, M, N), dtype), Out: T.Tensor((M, N), acc_dtype)):
        with T.Kernel(T.ceildiv(M, bm), T.ceildiv(N, bn), S) as (i, j, s):
            t = T.alloc_fragment((bm, bn), acc_dtype)
            T.copy(X[s, i * bm:(i + 1) * bm, j * bn:(j + 1) * bn], t)
            T.atomic_add(Out[i * bm, j * bn], t)
    return atomic_sum


def small_values(shape, dtype, seed):
    """Integers in [-8, 8) (halves for float types): every partial sum is exact in dtype."""
    v = np.random.default_rng(seed).integers(-16, 16, size=shape).astype(np.float64)
    return (v / 2 if dtype != "int32" else v).astype(tw.testing.np_dtype(dtype))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("S,M,N,bm,bn", [
    (6, 37, 45, 16, 32),   # row and column tails, 6 programs per element
    (5, 1, 1, 16, 32),     # one element
    (24, 8, 64, 8, 64),    # one block: 24 programs add into the same rows
])
def test_programs_add_into_the_same_rows_exactly(target, dtype, S, M, N, bm, bn):
    x = small_values((S, M, N), dtype, seed=S * 100 + M)
    init = small_values((M, N), dtype, seed=7)
    out = init.copy()
    k = tw.compile(sum_kernel(S, M, N, bm, bn, dtype, dtype), target=target)
    run(k, target, x, out)
    np.testing.assert_array_equal(out, (init.astype(np.float64) + x.astype(np.float64).sum(0)).astype(out.dtype))


@pytest.mark.parametrize("target", TARGETS)
def test_float32_sums_within_the_stated_tolerance(target):
    S, M, N = 16, 33, 70
    x = tw.testing.randn((S, M, N), "float32", seed=3)
    out = np.zeros((M, N), np.float32)
    run(tw.compile(sum_kernel(S, M, N, 16, 32, "float32", "float32"), target=target), target, x, out)
    tw.testing.assert_close(out, x.astype(np.float64).sum(0), atol=1e-5 * S, rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_float16_values_added_into_float32(target):
    """The value is converted to the destination's dtype first (as T.copy does), then added."""
    S, M, N = 4, 20, 48
    x = small_values((S, M, N), "float16", seed=1)
    out = np.zeros((M, N), np.float32)
    k = tw.compile(sum_kernel(S, M, N, 16, 16, "float16", "float32"), target=target)
    run(k, target, x, out)
    np.testing.assert_array_equal(out, x.astype(np.float64).sum(0).astype(np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_bfloat16(target):
    S, M, N = 8, 9, 40
    x = small_values((S, M, N), "bfloat16", seed=2)
    out = np.zeros((M, N), x.dtype)
    run(tw.compile(sum_kernel(S, M, N, 8, 32, "bfloat16", "bfloat16"), target=target), target, x, out)
    np.testing.assert_array_equal(out.astype(np.float64), x.astype(np.float64).sum(0))


def histogram_kernel(n, bins):
    @T.prim_func
    def histogram(Idx: T.Tensor((n,), "int32"), W: T.Tensor((n,), "float32"), H: T.Tensor((bins,), "int32"),
                  HW: T.Tensor((bins,), "float32")):
        with T.Kernel(n) as b:
            T.atomic_add(H[Idx[b]], 1)
            T.atomic_add(HW[Idx[b]], W[b] * 2)
    return histogram


@pytest.mark.parametrize("target", TARGETS)
def test_scalar_values_into_one_element(target):
    """T.atomic_add(H[i], value): a scalar added into the one element dst names (a histogram)."""
    n, bins = 50, 7
    rng = np.random.default_rng(4)
    idx = rng.integers(0, bins, size=n).astype(np.int32)
    w = (rng.integers(-8, 8, size=n) / 4).astype(np.float32)
    h, hw = np.zeros(bins, np.int32), np.zeros(bins, np.float32)
    run(tw.compile(histogram_kernel(n, bins), target=target), target, idx, w, h, hw)
    np.testing.assert_array_equal(h, np.bincount(idx, minlength=bins))
    np.testing.assert_array_equal(hw, np.bincount(idx, weights=w * 2, minlength=bins).astype(np.float32))


def test_ir_text_and_ascendc_print_the_atomic_add():
    f = sum_kernel(3, 16, 32, 16, 32, "float32", "float32")
    text = ir.print_kernel(f.ir)
    assert "atomic_add t -> Out[i * 16:+16, j * 32:+32]" in text, text
    assert ir.print_kernel(ir.parse_kernel(text)) == text
    k = tw.compile(f, target=TARGET)
    src = k.get_source()
    lines = [l.strip() for l in src.splitlines()]
    at = next(i for i, l in enumerate(lines) if l.startswith("SetAtomicAdd<float>();"))
    assert lines[at + 1].startswith("DataCopyPad(Out_gm") and lines[at + 2].startswith("SetAtomicNone();"), lines[at:at + 3]
    prog = k.get_ir("select_move_calls")
    assert "SetAtomicAdd float32" in prog and " atomic " in prog and "SetAtomicNone" in prog, prog


def bad_kernel(case):
    @T.prim_func
    def bad(X: T.Tensor((16, 32), "float32"), Y: T.Tensor((16, 32), "float32"), Z: T.Tensor((16, 32), "uint8")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((16, 32), "float32")
            u = T.alloc_fragment((16, 32), "float32")
            T.copy(X, t)
            if case == "tile":
                T.atomic_add(u, t)  # err-tile
            elif case == "global":
                T.atomic_add(Y, X)  # err-global
            elif case == "dtype":
                T.atomic_add(Z, t)  # err-dtype
            else:
                T.atomic_add(Y[0:4, 0:4], 1.0)  # err-scalar
    return bad


@pytest.mark.parametrize("case,message", [
    ("tile", r"T.atomic_add: the destination 'u' is a fragment tile, not a global tensor"),
    ("global", r"T.atomic_add: the source 'X' is a global tensor"),
    ("dtype", r"T.atomic_add into uint8 tensor 'Z' is not supported"),
    ("scalar", r"T.atomic_add of a scalar value needs one element of the destination"),
])
def test_misuse_is_a_located_error(case, message):
    line, _ = marked_line(__file__, "err-" + case)
    with pytest.raises(TilewrightError, match=message) as e:
        tw.compile(bad_kernel(case))
    assert f"test_atomic_add.py:{line}:" in str(e.value), str(e.value)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,parts,bm,bn,trans_A", [
    (200, 130, 1000, 3, 64, 64, False),   # tails in M, N and the last K part
    (1, 16, 300, 7, 16, 16, True),        # one row; 7 parts of 64: the last part reads past K (zeros)
    (64, 64, 4096, 12, 64, 64, True),     # 12 programs add into every element
])
def test_splitk_gemm_matches_float64(target, M, N, K, parts, bm, bn, trans_A):
    """examples/gemm.py matmul_splitk (issue 16): each K part's float32 partial is added into C with
    T.atomic_add (Fixpipe in the atomic-add mode on Ascend). Tolerance: fp16 products are exact in
    float32, the float32 sums round per add: atol 1e-5 * sqrt(K)-scaled values, rtol 1e-5."""
    from tw_test_util import load_example
    gemm = load_example("gemm")
    rng = np.random.default_rng(M + K)
    a = tw.testing.randn((K, M) if trans_A else (M, K), "float16", seed=rng)
    b = tw.testing.randn((K, N), "float16", seed=rng)
    c = np.zeros((M, N), np.float32)
    k = gemm.matmul_splitk(M, N, K, parts, block_M=bm, block_N=bn, trans_A=trans_A, target=target)
    run(k, target, a, b, c)
    a64 = a.astype(np.float64).T if trans_A else a.astype(np.float64)
    tw.testing.assert_close(c, a64 @ b.astype(np.float64), atol=1e-5 * K, rtol=1e-5)


def test_expert_mode_atomic_copy_from_ub():
    """Ascend expert mode: a UB tile added into GM by every Vector core (a vector-only kernel: one AIV
    per block, 4 blocks)."""
    blocks = 4

    @T.prim_func
    def expert(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                x = T.alloc_UB((8, 64), "float32")
                T.copy(X, x)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.atomic_add(Y, x)

    x = small_values((8, 64), "float32", seed=9)
    y = small_values((8, 64), "float32", seed=10)
    want = y.astype(np.float64) + blocks * x.astype(np.float64)
    run_checked(tw.compile(expert, target=TARGET), x, y)
    np.testing.assert_array_equal(y, want.astype(np.float32))
