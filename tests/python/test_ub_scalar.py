"""Scalar reads and element stores of UB tiles on ascend910b (issue 13), against cpu and numpy.

Outside a T.Parallel map, a let, a loop bound, an if condition or an index may read one element of a
tile (`e = idx[i]`), and a statement may store one element (`cnt[e] = cnt[e] + 1`). On Ascend the
Vector core's scalar unit does both: LocalTensor::GetValue / SetValue on pipe S (the Ascend program's
ScalarLoad from UB and ScalarStore). insert_sync orders them against the MTE2/V/MTE3 instructions
that touch the same bytes (SetFlag/WaitFlag<X_S> before a read or write of bytes another pipe wrote
or read, <S_X> after a write another pipe reads); the simulator's race checker reports a missing flag
in expert mode at the kernel's line. Fixed seeds; shapes include one element and tails (13, 37
columns); dtypes int32, float32, float16 (exact integer arithmetic; float scans compared with a
float64 reference at the dtype's tolerance). Simulated results are a model's, not an NPU's."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

from ascend_util import TARGET, run_checked
from tw_test_util import marked_line

TARGETS = ["cpu", TARGET]


def run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


# ---- a histogram: scalar reads give the index of an element store (counting sort's first step) ----

def histogram_kernel(n, bins):
    @T.prim_func
    def histogram(idx: T.Tensor((n,), "int32"), out: T.Tensor((bins,), "int32")):
        with T.Kernel(1) as b:
            ti = T.alloc_fragment((n,), "int32")
            cnt = T.alloc_fragment((bins,), "int32")
            T.copy(idx, ti)
            T.fill(cnt, 0)
            for i in T.serial(n):
                e = ti[i]
                cnt[e] = cnt[e] + 1
            T.copy(cnt, out)
    return histogram


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n,bins", [(64, 8), (37, 5), (1, 1)])
def test_histogram(target, n, bins):
    rng = np.random.default_rng(1)
    idx = rng.integers(0, bins, n).astype(np.int32)
    k = tw.compile(histogram_kernel(n, bins), out_idx=[1], target=target)
    np.testing.assert_array_equal(run(k, target, idx), np.bincount(idx, minlength=bins).astype(np.int32))


def test_histogram_program_and_source():
    k = tw.compile(histogram_kernel(64, 8), out_idx=[1], target=TARGET)
    prog = k.get_ir("insert_sync")
    assert "ScalarLoad e <- ti[" in prog and "ScalarStore cnt[" in prog, prog
    # the index tile arrives by MTE2 and the counts are cleared by V before the scalar unit reads
    # them; the counts leave by MTE3 after the scalar unit wrote them
    for pair in ("MTE2_S", "V_S", "S_MTE3"):
        assert f"SetFlag<{pair}>" in prog and f"WaitFlag<{pair}>" in prog, (pair, prog)
    src = k.get_source()
    assert ".GetValue(" in src and ".SetValue(" in src, src


# ---- a scan along a row on the scalar unit, each dtype ---------------------------------------------

def row_scan_kernel(B, N, dtype):
    @T.prim_func
    def row_scan(X: T.Tensor((B, N), dtype), Y: T.Tensor((B, N), dtype)):
        with T.Kernel(B) as b:
            t = T.alloc_fragment((N,), dtype)
            T.copy(X[b, :], t)
            for j in T.serial(1, N):
                t[j] = t[j] + t[j - 1]
            T.copy(t, Y[b, :])
    return row_scan


TOL = {"float32": (1e-5, 1e-5), "float16": (2e-2, 1e-2)}


def scan_input(rng, dtype, shape, bound):
    """Integers in [-bound, bound) for int32, uniform in [-1, 1) otherwise."""
    if dtype == "int32":
        return rng.integers(-bound, bound, shape).astype(np.int32)
    return rng.uniform(-1, 1, shape).astype(dtype)


def check_cumsum_rows(got, X, dtype):
    """got == the cumulative sum along each row: exact for int32, TOL (atol per element summed) else."""
    if dtype == "int32":
        np.testing.assert_array_equal(got, np.cumsum(X, axis=1).astype(np.int32))
    else:
        atol, rtol = TOL[dtype]
        np.testing.assert_allclose(got.astype(np.float64), np.cumsum(X.astype(np.float64), axis=1),
                                   atol=atol * X.shape[1], rtol=rtol)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["int32", "float32", "float16"])
@pytest.mark.parametrize("B,N", [(3, 37), (2, 13), (1, 2)])
def test_row_scan(target, dtype, B, N):
    rng = np.random.default_rng(2)
    X = scan_input(rng, dtype, (B, N), 1000)
    k = tw.compile(row_scan_kernel(B, N, dtype), out_idx=[1], target=target)
    got = run(k, target, X)
    check_cumsum_rows(got, X, dtype)


# ---- a scalar read feeding vector code: the element as a map's scalar operand ---------------------

def scale_by_first_kernel(M, N):
    @T.prim_func
    def scale_by_first(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((M, N), "float32")
            T.copy(X, t)
            s = t[M - 1, N - 1]
            for i, j in T.Parallel(M, N):
                t[i, j] = t[i, j] * s
            T.copy(t, Y)
    return scale_by_first


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N", [(4, 16), (3, 13)])
def test_scalar_read_as_map_operand(target, M, N):
    X = np.random.default_rng(3).standard_normal((M, N)).astype(np.float32)
    k = tw.compile(scale_by_first_kernel(M, N), out_idx=[1], target=target)
    np.testing.assert_allclose(run(k, target, X), X.astype(np.float64) * X[M - 1, N - 1], rtol=1e-6, atol=1e-6)


# ---- expert mode: the user's flags; a missing one is a race at the line ---------------------------

def expert_kernel(with_flag):
    @T.prim_func
    def first_to_all(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((16,), "float32")
            with T.Scope("V"):
                T.copy(X, a)
                if with_flag:
                    T.set_flag("MTE2", "S", 0)
                    T.wait_flag("MTE2", "S", 0)
                v = a[0]  # @UB-READ
                T.set_flag("S", "V", 0)  # the fill overwrites the element the scalar unit read
                T.wait_flag("S", "V", 0)
                T.fill(a, v)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(a, Y)
    return first_to_all


def test_expert_scalar_read_with_flag():
    X = np.random.default_rng(4).standard_normal(16).astype(np.float32)
    k = tw.compile(expert_kernel(True), out_idx=[1], target=TARGET)
    np.testing.assert_array_equal(run_checked(k, X), np.full(16, X[0], np.float32))


def test_expert_missing_mte2_s_flag_is_reported_at_the_line():
    X = np.random.default_rng(4).standard_normal(16).astype(np.float32)
    k = tw.compile(expert_kernel(False), out_idx=[1], target=TARGET)
    reports = k.profile(X)["reports"]
    line = marked_line(__file__, "@UB-READ")[0]
    assert reports and all("race" in r for r in reports), reports
    assert any(f"test_ub_scalar.py:{line}:" in r and "SetFlag<MTE2_S>" in r for r in reports), reports


# ---- what stays an error ---------------------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_math_function_in_element_store_of_unaligned_elements(target):
    # t[3] and t[2] start no 32 B block: the call is computed on a one-element tile from the element the scalar
    # unit reads, and the scalar unit stores the value (math41; it was a located error)
    @T.prim_func
    def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((8,), "float32")
            T.copy(X, t)
            t[3] = T.exp(t[2])
            T.copy(t, Y)
    X = np.random.default_rng(5).uniform(-2, 2, 8).astype(np.float32)
    ref = X.astype(np.float64)
    ref[3] = np.exp(ref[2])
    np.testing.assert_allclose(run(tw.compile(main, out_idx=[1], target=target), target, X), ref, rtol=1e-6)


def test_element_store_into_tensor_names_the_fix():
    @T.prim_func
    def bad(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((8,), "int32")
            T.copy(X, t)
            Y[t[0]] = 1  # @GM-STORE
    with pytest.raises(TilewrightError) as e:
        tw.compile(bad, target=TARGET)
    msg = str(e.value)
    assert "element store into tensor 'Y'" in msg and "T.copy the tile to the tensor" in msg, msg
    assert f"test_ub_scalar.py:{marked_line(__file__, '@GM-STORE')[0]}:" in msg, msg


# ---- a map over a column: an element loop on the scalar unit (a scan along rows) -------------------

def column_scan_kernel(M, N, dtype):
    @T.prim_func
    def column_scan(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(1) as b:
            x = T.alloc_fragment((M, N), dtype)
            T.copy(X, x)
            for j in T.serial(1, N):
                for i in T.Parallel(M):
                    x[i, j] = x[i, j] + x[i, j - 1]
            T.copy(x, Y)
    return column_scan


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["int32", "float32", "float16"])
@pytest.mark.parametrize("M,N", [(5, 13), (1, 40), (8, 2)])
def test_column_map_scan(target, dtype, M, N):
    rng = np.random.default_rng(5)
    X = scan_input(rng, dtype, (M, N), 50)
    k = tw.compile(column_scan_kernel(M, N, dtype), out_idx=[1], target=target)
    got = run(k, target, X)
    check_cumsum_rows(got, X, dtype)
    if target == TARGET:  # no vector instruction for a column: GetValue / SetValue in a loop
        prog = k.get_ir("select_instructions")
        assert "ScalarStore x[" in prog and "Add" not in prog, prog


# ---- an element store with a math function: a one-element vector instruction when aligned, else a scalar ---

def sqrt_element_kernel(n, at):
    @T.prim_func
    def sqrt_element(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((n,), "float32")
            T.copy(X, t)
            t[at] = T.sqrt(t[at])
            T.copy(t, Y)
    return sqrt_element


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n,at", [(1, 0), (13, 8), (13, 3)])
def test_math_element_store_one_element_map(target, n, at):
    X = np.random.default_rng(6).uniform(0.5, 4, n).astype(np.float32)
    k = tw.compile(sqrt_element_kernel(n, at), out_idx=[1], target=target)
    ref = X.copy()
    ref[at] = np.sqrt(X[at])
    np.testing.assert_allclose(run(k, target, X), ref, rtol=1e-6)
