"""Session 33 (h-int64out33, issue 13): int64 outputs on ascend910b, and scalar reads of a gemm result's rows.

- port33 F4: PyTorch's index dtype is int64 (argmax, top-k, sampling). A map storing int32 / int8 / uint8 / bool
  values (or a -1 sentinel, a T.where of them) into an int64 UB tile runs as an element loop on the scalar unit
  (GetValue / SetValue, the value converted by a C++ cast: dav-c220 has no Cast into int64 and the Vector core
  no int64 arithmetic). T.copy(idx_int32, idx64), T.copy(idx_int32, I_int64[...]), a serial loop of element
  stores and a T.Parallel map all lower to it (docs/ascend.md "int64 outputs").
- hunt33 F7: a scalar read of a gemm result's element outside a map (`o[1] = c[15, 15]`) keeps the result
  whole on both Vector cores (it was the error "index 15 is out of bounds ... (shape 8x16)": the rows were
  split between them).

Every kernel runs on ascend910b in the simulator with the checker (no reports) against numpy; cpu runs each
construct's first case (a g++ compile each: CI time). All results are exact integers / exact float sums.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_on  # noqa: E402

BM = 8
FORMS = ["serial", "map", "copy_tile", "copy_gm"]


def _argmax_int64(M, N, form, BM=BM):
    """argmax along rows into an int64 tensor (ties: the lowest index; a row with a NaN: its first NaN, as
    np.argmax), the int32 indices converted into int64 in one of the forms users write (port33 F4)."""

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), I: T.Tensor((M,), "int64")):
        with T.Kernel(T.ceildiv(M, BM)) as bx:
            x = T.alloc_fragment((BM, N), "float32")
            mx = T.alloc_fragment((BM,), "float32")
            pick = T.alloc_fragment((BM, N), "int32")
            idx = T.alloc_fragment((BM,), "int32")
            idx64 = T.alloc_fragment((BM,), "int64")
            T.copy(X[bx * BM, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(BM, N):
                pick[i, j] = T.where(x[i, j] == mx[i] or x[i, j] != x[i, j], j, N)
            T.reduce_min(pick, idx, dim=1)
            if form == "serial":
                for i in T.serial(BM):
                    idx64[i] = idx[i]  # one element at a time, on the scalar unit
                T.copy(idx64, I[bx * BM])
            elif form == "map":
                for i in T.Parallel(BM):
                    idx64[i] = idx[i]
                T.copy(idx64, I[bx * BM])
            elif form == "copy_tile":
                T.copy(idx, idx64)
                T.copy(idx64, I[bx * BM])
            else:  # the int32 tile straight into the int64 tensor
                T.copy(idx, I[bx * BM])
    return k


def _argmax_cases():
    out = [("cpu", "serial", 13, 37)]
    for form in FORMS:
        for M, N in [(13, 37), (1, 1), (17, 5)]:
            out.append((TARGET, form, M, N))
    return out


@pytest.mark.parametrize("target, form, M, N", _argmax_cases())
def test_argmax_into_int64(target, form, M, N):
    x = np.random.default_rng(M * N).integers(-3, 4, (M, N)).astype(np.float32)  # many ties
    if M > 5 and N > 3:
        x[5, 2] = x[5, N - 1] = np.nan  # the first NaN
    got = run_on(_argmax_int64(M, N, form), target, [-1], x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.argmax(x, axis=1))


def _top2_int64(M, N, thr):
    """The two largest of each row (values distinct per row) as int64 indices, -1 where the value is below thr
    (a sentinel): a 2-D map storing a T.where of int32 indices and -1 into an int64 (BM, 2) tile."""

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), I: T.Tensor((M, 2), "int64")):
        with T.Kernel(T.ceildiv(M, BM)) as bx:
            x = T.alloc_fragment((BM, N), "float32")
            best = T.alloc_fragment((BM, 2), "float32")
            mx = T.alloc_fragment((BM,), "float32")
            pick = T.alloc_fragment((BM, N), "int32")
            idx = T.alloc_fragment((BM, 2), "int32")
            col = T.alloc_fragment((BM,), "int32")
            out = T.alloc_fragment((BM, 2), "int64")
            T.copy(X[bx * BM, 0], x)
            for r in T.serial(2):
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(BM, N):
                    pick[i, j] = T.where(x[i, j] == mx[i], j, N)
                T.reduce_min(pick, col, dim=1)
                for i, j in T.Parallel(BM, N):
                    x[i, j] = T.where(j == col[i], -T.infinity("float32"), x[i, j])
                for i in T.serial(BM):
                    idx[i, r] = col[i]
                    best[i, r] = mx[i]
            for i, r in T.Parallel(BM, 2):
                out[i, r] = T.where(best[i, r] >= thr, idx[i, r], -1)
            T.copy(out, I[bx * BM, 0])
    return k


@pytest.mark.parametrize("target, M, N", [("cpu", 13, 37), (TARGET, 13, 37), (TARGET, 9, 2), (TARGET, 1, 33)])
def test_top2_with_sentinel_into_int64(target, M, N):
    rng = np.random.default_rng(7)
    x = np.stack([rng.permutation(N) for _ in range(M)]).astype(np.float32) - N / 2  # distinct per row
    thr = 0.0
    order = np.argsort(-x, axis=1, kind="stable")[:, :2]
    vals = np.take_along_axis(x, order, 1)
    want = np.where(vals >= thr, order, -1)
    got = run_on(_top2_int64(M, N, thr), target, [-1], x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def _widen(M, N, dt, form):
    """An int32 / int8 / uint8 / bool tile into an int64 tensor: T.copy into an int64 tile, or straight into
    the tensor, or a 2-D map."""

    @T.prim_func
    def k(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), "int64")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dt)
            y = T.alloc_fragment((M, N), "int64")
            T.copy(X, x)
            if form == "copy_tile":
                T.copy(x, y)
                T.copy(y, Y)
            elif form == "map":
                for i, j in T.Parallel(M, N):
                    y[i, j] = x[i, j]
                T.copy(y, Y)
            else:
                T.copy(x, Y)
    return k


def _values(dt, shape, rng):
    if dt == "int32":
        edge = np.array([-2 ** 31, 2 ** 31 - 1, -1, 0, 1, -2 ** 31 + 1], np.int32)
        v = rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(np.int32)
    elif dt == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    else:
        info = np.iinfo(dt)
        edge = np.array([info.min, info.max, 0, 1], dt)
        v = rng.integers(info.min, int(info.max) + 1, shape).astype(dt)
    flat = v.reshape(-1)
    flat[:min(flat.size, edge.size)] = edge[:flat.size]
    return v


WIDEN = [("cpu", "int32", "copy_tile", (3, 37))] + [
    (TARGET, dt, form, shape) for dt in ["int32", "int8", "uint8", "bool"] for form in ["copy_tile", "map", "copy_gm"]
    for shape in [(3, 37)]] + [(TARGET, "int32", "copy_tile", (1, 1)), (TARGET, "int32", "map", (2, 9))]


@pytest.mark.parametrize("target, dt, form, shape", WIDEN)
def test_widen_into_int64(target, dt, form, shape):
    x = _values(dt, shape, np.random.default_rng(3))
    got = run_on(_widen(shape[0], shape[1], dt, form), target, [-1], x)
    np.testing.assert_array_equal(got, x.astype(np.int64))


@T.prim_func
def _int64_passthrough(X: T.Tensor((3, 37), "int64"), Y: T.Tensor((3, 37), "int64"), Z: T.Tensor((2,), "int64")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((3, 37), "int64")
        i = T.alloc_fragment((8,), "int32")
        z = T.alloc_fragment((2,), "int64")
        T.copy(X, x)
        T.copy(x, Y)  # a plain int64 copy (DMA both ways)
        for k in T.Parallel(8):
            i[k] = k * 1000 - 7
        z[0] = i[7]  # element stores on the scalar unit outside a loop
        z[1] = -1
        T.copy(z, Z)


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_int64_copies_and_element_stores(target):
    x = np.random.default_rng(5).integers(-2 ** 62, 2 ** 62, (3, 37), dtype=np.int64)
    y, z = run_on(_int64_passthrough, target, [1, 2], x)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, np.array([6993, -1], np.int64))


def test_printed_element_loop():
    """The printed AscendC stores each int64 element with SetValue of a C++ conversion of the int32 it read."""
    src = tw.compile(_argmax_int64(13, 37, "copy_gm"), target=TARGET, out_idx=[-1]).get_source()
    assert "SetValue(" in src and "static_cast<int64_t>" in src, src


# --------------------------------------------------------------------------- hunt33 F7: a gemm result's elements
def _gemm_reads(M, pts):
    (r0, c0), (r1, c1), (r2, c2), (r3, c3) = pts

    @T.prim_func
    def k(A: T.Tensor((M, 16), "float16"), B: T.Tensor((16, 16), "float16"), Y: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, 16), "float16")
            b = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((M, 16), "float32")
            o = T.alloc_fragment((4,), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            T.gemm(a, b, c)
            o[0] = c[r0, c0]
            o[1] = c[r1, c1]
            o[2] = c[r2, c2]
            o[3] = c[r3, c3]
            T.copy(o, Y)
    return k


@pytest.mark.parametrize("M", [1, 9, 15, 16, 17, 32])
def test_scalar_reads_of_a_gemm_result(M):
    """ascend910b only (cpu's gemm compile is minutes of a loaded CI core; cpu gemm results are checked in
    test_rect_s31); every corner and the rows either side of the two Vector cores' halves."""
    pts = [(0, 0), (M - 1, 15), (M // 2, 7), (max(M // 2 - 1, 0), 15)]
    rng = np.random.default_rng(M)
    a = rng.integers(-3, 4, (M, 16)).astype(np.float16)
    b = rng.integers(-3, 4, (16, 16)).astype(np.float16)
    c = a.astype(np.float64) @ b.astype(np.float64)
    got = run_on(_gemm_reads(M, pts), TARGET, [-1], a, b)
    np.testing.assert_array_equal(got, np.array([c[r, k] for r, k in pts], np.float32))


@T.prim_func
def _gemm_row_loop_other_rows(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
                              Y: T.Tensor((16, 16), "float32"), D: T.Tensor((16,), "float32")):
    with T.Kernel(1) as bx:
        a = T.alloc_shared((16, 16), "float16")
        b = T.alloc_shared((16, 16), "float16")
        c = T.alloc_fragment((16, 16), "float32")
        d = T.alloc_fragment((16,), "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.clear(c)
        T.gemm(a, b, c)
        for r in T.serial(16):
            d[r] = c[15 - r, r]  # the anti-diagonal: rows of both Vector cores' halves
        for r in T.serial(16):
            c[r, 0] = c[15 - r, 1]  # element stores and reads at other rows than the loop's own
        T.copy(c, Y)
        T.copy(d, D)


def test_row_loop_elements_at_other_rows():
    """ascend910b only (as above): a row loop's element accesses at other rows keep the gemm result whole (they
    were the error 'a loop over rows that accesses 'c' at other rows than the loop's own')."""
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (16, 16)).astype(np.float16)
    b = rng.integers(-3, 4, (16, 16)).astype(np.float16)
    c = a.astype(np.float64) @ b.astype(np.float64)
    d = np.array([c[15 - r, r] for r in range(16)])
    for r in range(16):
        c[r, 0] = c[15 - r, 1]
    y, got_d = run_on(_gemm_row_loop_other_rows, TARGET, [2, 3], a, b)
    np.testing.assert_array_equal(y, c)
    np.testing.assert_array_equal(got_d, d)
