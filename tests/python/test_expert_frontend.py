"""Ascend expert mode in the DSL: T.Kernel(n, is_npu=True), T.Scope, T.alloc_L1/L0A/L0B/L0C/UB,
T.mma, vector tile ops (expanded to T.Parallel maps), flags; lowering to the Ascend program
(tilewright._C.ascend.select_instructions, printed); and the front-end errors (file, line, caret).

Expected lines are found with marker comments (``# @NAME`` at the end of a line of this file)."""
import os

import pytest

import tilewright.language as T
from tilewright import TilewrightError
from tilewright import _C

THIS_FILE = __file__
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tw_test_util import load_example, marked_line  # noqa: E402


def where(marker):
    """(line number, source line) of the line of this file with the comment `# marker`."""
    return marked_line(THIS_FILE, marker)


def check(exc_info, message, marker, caret_at=None, hint=None):
    e = exc_info.value
    assert isinstance(e, TilewrightError)
    assert message in e.message, e.message
    line, src = where(marker)
    assert e.file == THIS_FILE, str(e)
    assert e.line == line, str(e)
    if caret_at is not None:
        assert e.col == src.index(caret_at) + 1, str(e)
    text = str(e).splitlines()
    assert text[1].strip() == src.strip(), str(e)
    assert text[2].strip() == "^", str(e)
    if hint is not None:
        assert hint in e.hint, e.hint


def lower(prim):
    return _C.ascend.select_instructions(prim.ir, "ascend910b")


# ---------------------------------------------------------------------------------------------
# The gemm example parses and lowers

def test_gemm_expert_example_lowers():
    mod = load_example("ascend/gemm_expert", "gemm_expert")
    prog = lower(mod.gemm_kernel(1000, 777, 513))
    head = prog.splitlines()[0]
    assert head == "ascend_kernel main AIC_ONLY blocks=24 workspace=0 block_idx=cid sub_block_idx=vid", head
    assert "buffer A_L0: AIC L0A @0 +32768 float16 Zz" in prog
    assert "buffer C_L0: AIC L0C @0 +131072 float32 Nz" in prog
    # tails from the region vs the tensor bounds
    assert "rows=max(min(1000 - bx * 128, 128), 0) cols=max(min(513 - k * 256, 256), 0)" in prog
    # double-buffered L1 (half p) and L0 (half s)
    assert "CopyGmToL1 A_L1[p * 65536] <- A[(k * 256 + bx * 65664) * 2]" in prog
    assert "LoadL0 A_L0[s * 16384] <- A_L1[p * 65536] float16 src_rows=128 window=(0, kk * 64) dst=128x64" in prog
    assert "Mmad C_L0[0] <- A_L0[s * 16384] x B_L0[s * 32768] float16->float32 m=128 n=256 k=64 " \
           "init=k == 0 and kk == 0" in prog
    assert "Fixpipe C[(by * 256 + bx * 99456) * 2] <- C_L0[0] float32->float16 m=max(min(1000 - bx * 128, 128), 0) " \
           "n=max(min(777 - by * 256, 256), 0)" in prog
    # the flags exactly as written: as many sets as waits per pair
    for pair in ("M_MTE1", "MTE1_M", "MTE2_MTE1", "MTE1_MTE2", "M_FIX", "FIX_M"):
        assert prog.count(f"SetFlag<{pair}>") >= 1 and prog.count(f"WaitFlag<{pair}>") >= 1, pair


# ---------------------------------------------------------------------------------------------
# Vector tile ops

def vector_kernel(N=64, rows=8, cols=64):
    @T.prim_func
    def main(X: T.Tensor((N, cols), "float32"), Y: T.Tensor((N, cols), "float16"), s: T.float32):
        with T.Kernel(T.ceildiv(N, 2 * rows), is_npu=True) as (cid, vid):
            x = T.alloc_UB((rows, cols), "float32")
            y = T.alloc_UB((rows, cols), "float32")
            m = T.alloc_UB((rows,), "float32")
            h = T.alloc_UB((rows, cols), "float16")
            with T.Scope("V"):
                r0 = cid * 2 * rows + vid * rows
                T.copy(X[r0, 0], x)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.reduce_max(x, m, dim=1)
                T.pipe_barrier("V")
                T.sub(y, x, m[:, None])
                T.pipe_barrier("V")
                T.exp(y, y)
                T.mul(y, y, s)
                T.add(y, 1.0, y)
                T.max(y, y, 0.5)
                T.relu(y, y)
                T.reciprocal(x, y)
                T.div(x, x, y)
                T.min(x, x, y)
                T.sqrt(y, y)
                T.abs(y, y)
                T.fill(m, 0.0)
                T.reduce_sum(x, m, dim=-1)
                T.cast(h, y)
                T.copy(y[0:rows, 0:cols // 2], x[0:rows, cols // 2:cols])
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(h, Y[r0, 0])
    return main


def test_vector_tile_ops_expand_to_maps_and_lower():
    prim = vector_kernel()
    text = prim.script()
    assert "sub_block(vid)" in text and "scope V {" in text
    assert "y[i, j] = x[i, j] - m[i]" in text           # row broadcast
    assert "y[i_1, j_1] = exp(y[i_1, j_1])" in text      # T.exp(dst, src): a map, not a value
    prog = lower(prim)
    want = [
        "ascend_kernel main MIX_1_2 blocks=4",
        "MTE2 CopyGmToUb x[0] <- X[r0 * 256] float32 n_rows=8 row_bytes=256",
        "V RowReduceMax m[0]/8 <- x[0]/64 float32 8x64",
        "V RowBroadcastSub y[0]/64 <- x[0]/64, m[0] float32 8x64",
        "V Exp y[0]/512 <- y[0]/512 float32 1x512",
        "V Muls y[0]/512 <- y[0]/512, s float32 1x512",
        "V Adds y[0]/512 <- y[0]/512, 1.0 float32 1x512",
        "V Maxs y[0]/512 <- y[0]/512, 0.5 float32 1x512",
        "V Relu y[0]/512 <- y[0]/512 float32 1x512",
        "V Reciprocal x[0]/512 <- y[0]/512 float32 1x512",
        "V Div x[0]/512 <- x[0]/512, y[0]/512 float32 1x512",
        "V Min x[0]/512 <- x[0]/512, y[0]/512 float32 1x512",
        "V Sqrt y[0]/512", "V Abs y[0]/512",
        "V Duplicate m[0]/8 <- 0.0 float32 1x8",
        "V RowReduceSum m[0]/8 <- x[0]/64 float32 8x64",
        "V Cast h[0]/512 <- y[0]/512 float32->float16 CAST_RINT 1x512",
        "V CopyUbToUb x[128] <- y[0] float32 n_rows=8 row_bytes=128 src_stride=256 dst_stride=256",
        "V SetFlag<V_MTE3>(0)", "MTE3 WaitFlag<V_MTE3>(0)",
        "MTE3 CopyUbToGm Y[r0 * 128] <- h[0] float16 n_rows=8 row_bytes=128",
    ]
    for w in want:
        assert w in prog, f"missing {w!r} in\n{prog}"


def test_cast_round_modes():
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((8, 64), "float32")
            n = T.alloc_UB((8, 64), "int32")
            with T.Scope("V"):
                T.cast(n, x, round="floor")
                T.cast(n, x, round="ceil")
                T.cast(n, x)
                T.cast(x, n)
    prog = lower(main)
    for mode in ("CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC"):
        assert f"float32->int32 {mode}" in prog, prog
    assert "int32->float32 CAST_RINT" in prog


def test_gemm_on_l1_and_mma_init_condition():
    @T.prim_func
    def main(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((64, 64), "float16")
            b1 = T.alloc_L1((64, 64), "float16")
            c0 = T.alloc_L0C((64, 64), "float32")
            with T.Scope("C"):
                for k in T.serial(2):
                    T.copy(A[0, k * 64], a1)
                    T.copy(B[k * 64, 0], b1)
                    T.set_flag("MTE2", "MTE1", 0)
                    T.wait_flag("MTE2", "MTE1", 0)
                    T.gemm(a1, b1, c0, clear_accum=False)
                    T.set_flag("MTE1", "MTE2", 1)
                    T.wait_flag("MTE1", "MTE2", 1)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, C)
    prog = lower(main)
    assert "ascend_kernel main AIC_ONLY blocks=1" in prog
    assert "LoadL0 _gemm_L0B[0] <- b1[0] float16 src_rows=64 window=(0, 0) dst=64x64 transpose" in prog
    assert "MTE1 SetFlag<MTE1_M>(7)" in prog and "Mmad c0[0] <- _gemm_L0A[0] x _gemm_L0B[0]" in prog


# ---------------------------------------------------------------------------------------------
# Errors, each at the user's line with a caret

def test_statement_exp_of_a_value_is_an_error():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_UB((8, 64), "float32")
                with T.Scope("V"):
                    T.exp(x[0, 0])  # @EXP1
    check(e, "T.exp(x) computes a value and has no effect as a statement", "@EXP1", "T.exp", hint="T.exp(dst, src)")


def test_scope_needs_npu_kernel():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(1) as bx:
                with T.Scope("V"):  # @SCOPE
                    pass
    check(e, 'T.Scope("V") is only valid in an Ascend expert-mode kernel', "@SCOPE", "T.Scope", hint="is_npu=True")


def test_bad_pipe_name():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                with T.Scope("V"):
                    T.set_flag("MTE9", "V", 0)  # @PIPE
    check(e, "T.set_flag: the source pipe must be a pipe name", "@PIPE", '"MTE9"')


def test_illegal_flag_pair_reported_at_definition():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                with T.Scope("C"):
                    T.set_flag("MTE2", "FIX", 0)  # @PAIR
    check(e, "MTE2 -> FIX is not a flag pair of the Cube core (AIC)", "@PAIR", "T.set_flag", hint="MTE2->{M,MTE1,MTE3}")


def test_ub_in_cube_scope():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_UB((8, 64), "float32")
                with T.Scope("C"):
                    T.copy(X, x)  # @UBC
    check(e, "UB buffer 'x' is used in code that runs on the Cube core", "@UBC", "T.copy")


def test_mma_operand_scopes():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_L1((16, 16), "float16")
                b = T.alloc_L0B((16, 16), "float16")
                c = T.alloc_L0C((16, 16), "float32")
                with T.Scope("C"):
                    T.mma(a, b, c, init=True)  # @MMA
    check(e, "T.mma operand A must be an L0A buffer, got 'a' in L1", "@MMA", "a, b", hint="T.gemm")


def test_vector_op_dtype_and_broadcast_errors():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_UB((8, 64), "float32")
                h = T.alloc_UB((8, 64), "float16")
                with T.Scope("V"):
                    T.add(x, x, h)  # @DT
    check(e, "T.add: 'h' is float16 but the destination 'x' is float32; vector ops do not convert", "@DT", "h)",
          hint="T.cast(dst, src)")
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main2(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_UB((8, 64), "float32")
                m = T.alloc_UB((8,), "float32")
                with T.Scope("V"):
                    T.sub(x, x, m)  # @BC
    check(e, "T.sub: operand b (8) does not broadcast to the destination (8x64)", "@BC", "m)", hint="v[:, None]")


def test_cast_round_mode_error():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_UB((8, 64), "float32")
                h = T.alloc_UB((8, 64), "float16")
                with T.Scope("V"):
                    T.cast(h, x, round="floor")  # @RND
    check(e, "T.cast float32 -> float16: round='floor' is not supported", "@RND", '"floor"')


def test_npu_kernel_has_one_grid_dim():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32")):
            with T.Kernel(2, 2, is_npu=True) as (cid, vid):  # @GRID
                pass
    check(e, "T.Kernel(..., is_npu=True) takes one grid extent", "@GRID", "T.Kernel")


def test_lowering_errors_point_at_the_line():
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((8, 64), "float32")
            m = T.alloc_UB((8,), "float32")
            with T.Scope("V"):
                for i, j in T.Parallel(8, 64):
                    x[i, j] = T.exp(x[i, j] - m[i])  # @MAP
    with pytest.raises(TilewrightError) as e:
        lower(main)
    check(e, "this T.Parallel body is not a vector instruction", "@MAP", "x[i, j] =", hint="tile ops")


def test_cpu_rejects_expert_kernels():
    import tilewright as tw

    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):  # @CPU
                T.pipe_barrier("V")
    with pytest.raises(TilewrightError) as e:
        tw.compile(main, target="cpu")
    check(e, "expert-mode synchronisation is Ascend-only", "@CPU", "with")


# ---------------------------------------------------------------------------------------------
# Numerics in the simulator (lowered programs run on the 910B model)

def test_gemm_expert_runs_in_the_simulator():
    import numpy as np
    mod = load_example("ascend/gemm_expert", "gemm_expert")
    for M, N, K in ((200, 300, 100), (129, 257, 300)):
        rng = np.random.default_rng(0)
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        c = mod.matmul(M, N, K)(a, b)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        assert c.dtype == np.float16 and c.shape == (M, N)
        assert np.allclose(c.astype(np.float64), ref, atol=1e-5 * K, rtol=2e-3), np.abs(c - ref).max()


def test_row_softmax_runs_in_the_simulator():
    import numpy as np
    import tilewright as tw

    @T.prim_func
    def softmax(X: T.Tensor((60, 64), "float32"), Y: T.Tensor((60, 64), "float32")):
        with T.Kernel(4, is_npu=True) as (cid, vid):
            x = T.alloc_UB((8, 64), "float32")
            mx = T.alloc_UB((8,), "float32")
            with T.Scope("V"):
                row = cid * 16 + vid * 8
                T.copy(X[row, 0], x)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.reduce_max(x, mx, dim=1)
                T.pipe_barrier("V")
                T.sub(x, x, mx[:, None])
                T.pipe_barrier("V")
                T.exp(x, x)
                T.pipe_barrier("V")
                T.reduce_sum(x, mx, dim=1)
                T.pipe_barrier("V")
                T.div(x, x, mx[:, None])
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(x, Y[row, 0])
                T.set_flag("MTE3", "MTE2", 0)  # the next kernel call may reuse x
                T.wait_flag("MTE3", "MTE2", 0)

    x = np.random.default_rng(1).standard_normal((60, 64)).astype(np.float32)
    y = tw.compile(softmax, out_idx=[1], target="ascend910b")(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
