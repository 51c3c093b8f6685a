"""Session 21 Ascend fixes (h-ascfix9b; docs/ascend.md "Session 21: ... (h-ascfix9b)"):

- hunt9a F8: a gemm whose K loop runs 0 times at run time (symbolic K = 0) returned L0C garbage on
  ascend910b (expand_gemm folds T.clear into the first Mmad): now zeros, as on cpu;
- hunt9b F6: Abs on int32 is not a dav-c220 call (Abs.md: half, float): the automatic lowering
  computes |x| as max(x, x * -1), expert T.abs on int32 is an error at the line, the simulator's
  API rules report Abs on int32;
- hunt9b F7: an expert GM -> UB copy into a window ending inside a 32 B block before the end of
  the tile's row (DataCopyPad's dummy bytes would overwrite the next columns) is an error at the line.

Every result is checked against numpy (float64) with exact tolerances (small integer inputs), on
cpu and on ascend910b (simulator, checker on: no reports)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

from ascend_util import TARGET, run_checked
import tw_test_util
from tw_test_util import marked_line

THIS = __file__
TARGETS = ["cpu", TARGET]


def line(marker):
    return marked_line(THIS, "@" + marker)[0]


def located(fn, marker, *parts):
    """fn() raises a TilewrightError at the line marked `# @marker` whose message (and hint) hold `parts`."""
    return tw_test_util.located(fn, THIS, "@" + marker, *parts)


ints = tw_test_util.small_ints


def run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def exact(out, ref):
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64), np.asarray(ref, np.float64))


# ---------------------------------------------------------------------------------------------
# hunt9a F8: K loops that run 0 times

def k_loop_gemm(M, N, bk, dt, acc, pipelined=False, outer=None, trans_b=False):
    K = T.symbolic("K")
    loop = T.Pipelined if pipelined else T.serial

    @T.prim_func
    def main(A: T.Tensor((M, K), dt), B: T.Tensor((N, K) if trans_b else (K, N), dt), C: T.Tensor((M, N), acc)):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((M, N), acc)
            a = T.alloc_shared((M, bk), dt)
            b = T.alloc_shared((N, bk) if trans_b else (bk, N), dt)
            T.clear(c)
            if trans_b:  # int8: B stored N x K (the Cube's int8 B has no transposing load)
                for k in loop(T.ceildiv(K, bk)):
                    T.copy(A[0, k * bk], a)
                    T.copy(B[0, k * bk], b)
                    T.gemm(a, b, c, transpose_B=True)
            elif outer is None:
                for k in loop(T.ceildiv(K, bk)):
                    T.copy(A[0, k * bk], a)
                    T.copy(B[k * bk, 0], b)
                    T.gemm(a, b, c)
            else:  # two nested loops: the outer one of constant trip count, the inner one symbolic
                for o in T.serial(outer):
                    for k in loop(T.ceildiv(K, bk * outer)):
                        T.copy(A[0, (o * T.ceildiv(K, bk * outer) + k) * bk], a)
                        T.copy(B[(o * T.ceildiv(K, bk * outer) + k) * bk, 0], b)
                        T.gemm(a, b, c)
            T.copy(c, C)
    return main


GEMM_CASES = [(16, 16, 32, "float16", "float32"), (19, 24, 16, "float16", "float32"),
              (16, 16, 16, "float32", "float32"), (17, 33, 32, "int8", "int32")]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,bk,dt,acc", GEMM_CASES)
@pytest.mark.parametrize("K", [0, 1, 40])
def test_gemm_with_symbolic_k(M, N, bk, dt, acc, K, target):
    a, b = ints((M, K), dt, 1), ints((K, N), dt, 2)
    tb = dt == "int8"
    k = tw.compile(k_loop_gemm(M, N, bk, dt, acc, trans_b=tb), target=target, out_idx=[2])
    exact(run(k, target, a, np.ascontiguousarray(b.T) if tb else b), a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("K", [0, 48])
def test_pipelined_and_nested_k_loops(K, target):
    a, b = ints((16, K), "float16", 3), ints((K, 16), "float16", 4)
    for prim in (k_loop_gemm(16, 16, 16, "float16", "float32", pipelined=True),
                 k_loop_gemm(16, 16, 16, "float16", "float32", outer=2)):
        k = tw.compile(prim, target=target, out_idx=[2])
        exact(run(k, target, a, b), a.astype(np.float64) @ b.astype(np.float64))


def test_a_k_loop_of_constant_trip_count_gets_no_guard():
    def prim(K):
        @T.prim_func
        def main(A: T.Tensor((16, K), "float16"), B: T.Tensor((K, 16), "float16"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as bx:
                c = T.alloc_fragment((16, 16), "float32")
                a = T.alloc_shared((16, 16), "float16")
                b = T.alloc_shared((16, 16), "float16")
                T.clear(c)
                for k in T.serial(K // 16):
                    T.copy(A[0, k * 16], a)
                    T.copy(B[k * 16, 0], b)
                    T.gemm(a, b, c)
                T.copy(c, C)
        return main

    fixed = tw.compile(prim(48), target=TARGET, out_idx=[2]).get_ir("expand_gemm")
    assert "c_zero_a" not in fixed, fixed
    symbolic = tw.compile(prim(T.symbolic("K")), target=TARGET, out_idx=[2]).get_ir("expand_gemm")
    assert "c_zero_a" in symbolic, symbolic


def test_inner_trip_count_depending_on_an_outer_loop_is_an_error():
    K = T.symbolic("K")

    @T.prim_func
    def main(A: T.Tensor((16, K), "float16"), B: T.Tensor((K, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((16, 16), "float32")
            a = T.alloc_shared((16, 16), "float16")
            b = T.alloc_shared((16, 16), "float16")
            T.clear(c)
            for o in T.serial(T.ceildiv(K, 64)):
                for k in T.serial(T.min(4, T.ceildiv(K, 16) - o * 4)):
                    T.copy(A[0, (o * 4 + k) * 16], a)
                    T.copy(B[(o * 4 + k) * 16, 0], b)
                    T.gemm(a, b, c)  # @DEPENDENT_TRIPS
            T.copy(c, C)

    located(lambda: tw.compile(main, target=TARGET, out_idx=[2]), "DEPENDENT_TRIPS",
            "depends on the outer loop variable o", "clear the accumulator inside the loop over o")


# ---------------------------------------------------------------------------------------------
# hunt9b F6: |x| of int32

def auto_abs(M, N, dt):
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dt)
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                x[i, j] = T.abs(x[i, j]) + T.abs(x[i, j] - 2)
            T.copy(x, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N", [(1, 1), (3, 37), (4, 64)])
def test_int32_abs_on_both_targets(M, N, target):
    x = ints((M, N), "int32", 5, -100, 100)
    x.flat[0] = -(2 ** 29)
    k = tw.compile(auto_abs(M, N, "int32"), target=target, out_idx=[-1])
    exact(run(k, target, x), np.abs(x.astype(np.float64)) + np.abs(x.astype(np.float64) - 2))
    if target != "cpu":
        src = k.get_source("ascendc")
        assert "Abs(" not in src, [ln for ln in src.splitlines() if "Abs(" in ln]


def abs_1d():
    @T.prim_func
    def main(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((8,), "int32")
            T.copy(X, x)
            for i in T.Parallel(8):
                x[i] = T.abs(x[i])  # @ABS_1D
            T.copy(x, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_int32_abs_at_the_int32_limits(target):
    x = np.array([2 ** 31 - 1, -(2 ** 31 - 1), 0, -1, 1, -7, 7, -2 ** 30], np.int32)
    np.testing.assert_array_equal(run(tw.compile(abs_1d(), target=target, out_idx=[-1]), target, x), np.abs(x))


def test_int32_abs_of_int_min():
    # cpu wraps (the language: int32 arithmetic is modulo 2^32); on ascend910b -INT_MIN overflows
    # Muls, whose result on overflow the 910B documentation does not give: the checker reports it
    x = np.array([-2 ** 31, 1, 2, 3, 4, 5, 6, 7], np.int32)
    np.testing.assert_array_equal(tw.compile(abs_1d(), target="cpu", out_idx=[-1])(x), np.abs(x))
    reports = tw.compile(abs_1d(), target=TARGET, out_idx=[-1]).profile(x)["reports"]
    assert len(reports) == 1 and reports[0].startswith(f"{THIS}:{line('ABS_1D')}: int32 overflow: int32 Muls"), reports


def abs_in_a_condition(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "int32")
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                x[i, j] = T.where(~T.abs(x[i, j]) > -3, 1, 2)
            T.copy(x, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_int32_abs_in_a_where_condition(target):
    # an int |x| in a T.where condition (kept as written by expand_math) is also Max(x, Muls(x, -1))
    # (the fuzz corpus's seeds 67 / 69 after the merge of h-ascfix9b with h-ascfix9c)
    x = ints((3, 37), "int32", 7, -5, 6)
    k = tw.compile(abs_in_a_condition(3, 37), target=target, out_idx=[-1])
    exact(run(k, target, x), np.where(~np.abs(x) > -3, 1, 2).astype(np.float64))
    if target != "cpu":
        assert "Abs(" not in k.get_source("ascendc")


@pytest.mark.parametrize("dt", ["float16", "float32"])
def test_float_abs_keeps_the_abs_call(dt):
    k = tw.compile(auto_abs(3, 37, dt), target=TARGET, out_idx=[-1])
    x = ints((3, 37), dt, 6, -9, 9)
    exact(run_checked(k, x), np.abs(x.astype(np.float64)) + np.abs(x.astype(np.float64) - 2))
    assert "Abs(" in k.get_source("ascendc")


def expert_abs(dt, form):
    @T.prim_func
    def main(X: T.Tensor((4, 64), dt), Y: T.Tensor((4, 64), dt)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((4, 64), dt)
            y = T.alloc_UB((4, 64), dt)
            neg = T.alloc_UB((4, 64), dt)
            with T.Scope("V"):
                T.copy(X, x)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                if form == "abs":
                    T.abs(y, x)  # @EXPERT_ABS
                else:  # the form the error names
                    T.mul(neg, x, -1)
                    T.pipe_barrier("V")
                    T.max(y, x, neg)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(y, Y)
    return main


def test_expert_abs_of_int32_is_an_error_naming_the_form():
    located(lambda: tw.compile(expert_abs("int32", "abs"), target=TARGET, out_idx=[-1]), "EXPERT_ABS",
            "T.abs on an int32 tile", "half/float only", "T.mul(neg, x, -1) then T.max(dst, x, neg)")


def test_expert_abs_of_int32_as_the_named_form():
    x = ints((4, 64), "int32", 7, -1000, 1000)
    x[0, 0] = -(2 ** 31 - 1)
    out = run_checked(tw.compile(expert_abs("int32", "max"), target=TARGET, out_idx=[-1]), x)
    np.testing.assert_array_equal(out, np.abs(x))


@pytest.mark.parametrize("dt", ["float16", "float32"])
def test_expert_abs_of_floats(dt):
    x = ints((4, 64), dt, 8, -9, 9)
    exact(run_checked(tw.compile(expert_abs(dt, "abs"), target=TARGET, out_idx=[-1]), x), np.abs(x.astype(np.float64)))


# ---------------------------------------------------------------------------------------------
# hunt9b F7: expert GM -> UB windows ending inside a 32 B block

def ub_window(n, w, dt="float32", start=0):
    @T.prim_func
    def main(X: T.Tensor((2, n), dt), Y: T.Tensor((2, w), dt)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            u = T.alloc_UB((2, w), dt)
            with T.Scope("V"):
                T.fill(u, 7)
                T.pipe_barrier("ALL")
                T.copy(X, u[0:2, start:start + n])  # @UB_WINDOW
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(u, Y)
    return main


@pytest.mark.parametrize("n,w,dt,clobbered", [(3, 16, "float32", "3:8"), (1, 9, "float32", "1:8"),
                                              (17, 32, "float16", "17:32"), (5, 64, "int8", "5:32")])
def test_window_ending_inside_a_block_is_an_error(n, w, dt, clobbered):
    located(lambda: tw.compile(ub_window(n, w, dt), target=TARGET, out_idx=[-1]), "UB_WINDOW",
            f"columns 0:{n}", "inside a 32 B block", f"columns {clobbered} would hold garbage",
            "end the window on a 32 B block", f"a tile of its own, {n} columns wide")


def test_window_ending_inside_a_block_at_an_offset_is_an_error():
    located(lambda: tw.compile(ub_window(3, 24, "float32", start=8), target=TARGET, out_idx=[-1]), "UB_WINDOW",
            "columns 8:11", "columns 11:16 would hold garbage")


@pytest.mark.parametrize("n,w,start", [(8, 16, 0), (3, 3, 0), (3, 11, 8), (16, 24, 8)])
def test_windows_on_blocks_or_at_the_row_end_keep_the_rest(n, w, start):
    x = np.arange(2 * n, dtype=np.float32).reshape(2, n)
    out = run_checked(tw.compile(ub_window(n, w, start=start), target=TARGET, out_idx=[-1]), x)
    want = np.full((2, w), 7.0, np.float32)
    want[:, start:start + n] = x
    np.testing.assert_array_equal(out, want)


def test_window_starting_inside_a_block_stays_the_misaligned_report():
    # a start inside a 32 B block is no address DataCopyPad can write: the simulator's `misaligned`
    # report at the line (test_ascend.py::test_misaligned_ub_address), not this check
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    p = tw.compile(ub_window(3, 16, start=2), target=TARGET, out_idx=[-1]).profile(x)
    assert any(r.startswith(f"{THIS}:{line('UB_WINDOW')}: misaligned") for r in p["reports"]), p["reports"]


def auto_abs_tile_op():
    @T.prim_func
    def main(X: T.Tensor((3, 37), "int32"), Y: T.Tensor((3, 37), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((3, 37), "int32")
            y = T.alloc_fragment((3, 37), "int32")
            T.copy(X, x)
            T.abs(y, x)  # the tile-op form in an automatic kernel: a map, lowered by expand_math
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_int32_abs_tile_op_in_an_automatic_kernel(target):
    x = ints((3, 37), "int32", 9, -100, 100)
    np.testing.assert_array_equal(run(tw.compile(auto_abs_tile_op(), target=target, out_idx=[-1]), target, x), np.abs(x))


def k_loop_with_epilogue():
    K = T.symbolic("K")

    @T.prim_func
    def main(A: T.Tensor((32, K), "float16"), B: T.Tensor((K, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(2) as bx:
            c = T.alloc_fragment((16, 32), "float32")
            a = T.alloc_shared((16, 32), "float16")
            b = T.alloc_shared((32, 32), "float16")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
                T.copy(A[bx * 16, k * 32], a)
                T.copy(B[k * 32, 0], b)
                T.gemm(a, b, c)
            for i, j in T.Parallel(16, 32):  # a Vector epilogue: Cube and Vector split
                c[i, j] = c[i, j] + 1.0
            T.copy(c, C[bx * 16, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("K", [0, 70])
def test_k_zero_with_a_vector_epilogue(K, target):
    a, b = ints((32, K), "float16", 10), ints((K, 32), "float16", 11)
    k = tw.compile(k_loop_with_epilogue(), target=target, out_idx=[2])
    exact(run(k, target, a, b), a.astype(np.float64) @ b.astype(np.float64) + 1)
