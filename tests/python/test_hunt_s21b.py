"""Session 21's Ascend expert-mode rule hunt (h-hunt9b, docs/testing.md "Session 21: ... (h-hunt9b)").

Expert kernels written the way docs/ascend.md teaches (explicit Cube / Vector split, L1 / L0 / UB
tiles, flags, barriers, cross-core flags, atomic_add, scalar reads, T.Pipelined) at odd shapes,
each correct variant against float64 numpy with the simulator's checker on (no reports), and the
same kernel with one documented rule broken at a time: the simulator (or the compiler) must report
it at the kernel line that breaks it, with the fix. A defect found is a strict xfail naming its
finding (/work/hunt9b-findings.md F<n>) until its fix lands.

Source lines are found with marker comments (`# @NAME` on a line of this file)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

from ascend_util import TARGET
import tw_test_util
from tw_test_util import marked_line

THIS = __file__


def line(marker):
    return marked_line(THIS, "@" + marker)[0]


def at(marker):
    """The prefix of a checker report at the marked line."""
    return f"{THIS}:{line(marker)}: "


def compile_npu(prim, out_idx=None):
    return tw.compile(prim, target=TARGET, out_idx=out_idx)


def located(fn, marker, *parts):
    """fn() raises a TilewrightError at the line marked `# @marker` whose message (and hint) hold `parts`."""
    return tw_test_util.located(fn, THIS, "@" + marker, *parts)


ints = tw_test_util.small_ints


def f64(x):
    return np.asarray(x).astype(np.float64)


# ---------------------------------------------------------------------------------------------
# Cube: one L0A / L0B tile reused every K step of 16 (K / 16 Mmads accumulating into one L0C)

def cube_kernel(M, N, K, reuse_flag=True, m_barrier=True, mte1_barrier=False):
    """C = A @ B, fp16 -> fp32, one L1 chunk, K in steps of 16 through one L0A / L0B tile.
    reuse_flag: the M -> MTE1 flag that frees the L0 tiles for the next step's loads;
    m_barrier: PipeBarrier<PIPE_M> before each Mmad (needed: ceil(M/16) * ceil(N/16) < 10)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((M, K), "float16")
            b1 = T.alloc_L1((K, N), "float16")
            a0 = T.alloc_L0A((M, 16), "float16")
            b0 = T.alloc_L0B((16, N), "float16")
            c0 = T.alloc_L0C((M, N), "float32")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.set_flag("M", "MTE1", 0)
                for kk in T.serial(K // 16):
                    if reuse_flag:
                        T.wait_flag("M", "MTE1", 0)
                    if mte1_barrier:
                        T.pipe_barrier("MTE1")
                    T.copy(a1[0:M, kk * 16:(kk + 1) * 16], a0)  # @CUBE_LOAD_A
                    T.copy(b1[kk * 16:(kk + 1) * 16, 0:N], b0)
                    T.set_flag("MTE1", "M", 0)
                    T.wait_flag("MTE1", "M", 0)
                    if m_barrier:
                        T.pipe_barrier("M")
                    T.mma(a0, b0, c0, init=(kk == 0))  # @CUBE_MMA
                    if reuse_flag:
                        T.set_flag("M", "MTE1", 0)
                T.wait_flag("M", "MTE1", 0)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, C)
    return main


def cube_inputs(M, N, K, seed=0):
    return ints((M, K), "float16", seed), ints((K, N), "float16", seed + 1)


@pytest.mark.parametrize("M,N,K", [(32, 32, 64), (17, 33, 48), (1, 16, 32), (2, 16, 16)])
def test_cube_kernel_at_odd_shapes_is_exact(M, N, K):
    a, b = cube_inputs(M, N, K)
    k = compile_npu(cube_kernel(M, N, K), out_idx=[-1])
    p = k.profile(a, b)
    assert p["reports"] == []
    np.testing.assert_array_equal(f64(p.outputs), f64(a) @ f64(b))
    src = k.get_source("ascendc")
    assert "pipe.Destroy();" in src          # TPipe's M_MTE1 events 0-2 are consumed before our id 0
    # a one-row A runs as a whole fractal row (m = 1 would be GEMV on the device)
    assert ("tw_p.m = 1;" in src) is False


def test_missing_pipe_m_barrier_between_small_mmads_is_an_api_rule_at_the_mma():
    a, b = cube_inputs(32, 32, 64)
    p = compile_npu(cube_kernel(32, 32, 64, m_barrier=False), out_idx=[-1]).profile(a, b)
    assert p["reports"]
    for r in p["reports"]:
        assert r.startswith(at("CUBE_MMA") + "API rule: "), r
    assert "ceil(m/16) * ceil(n/16) = 4 < 10" in p["reports"][0] and "PipeBarrier<PIPE_M>" in p["reports"][0]


def test_l0_tiles_reloaded_before_the_mmad_finished_name_the_m_mte1_flag():
    # no M -> MTE1 flag: the next step's LoadData overwrites a0 / b0 while Mmad may still read them.
    # F1 (fixed): the report named the same-pipe WAW between the two loads (PipeBarrier<PIPE_MTE1>, not the
    # fix); now the M -> MTE1 race, whose flag also orders the two loads
    a, b = cube_inputs(32, 32, 64)
    for mte1_barrier in (False, True):
        p = compile_npu(cube_kernel(32, 32, 64, reuse_flag=False, mte1_barrier=mte1_barrier), out_idx=[-1]).profile(a, b)
        assert p["reports"]
        r = p["reports"][0]
        assert r.startswith(at("CUBE_LOAD_A") + "race: "), r
        assert "read by M on AIC 0" in r and "add SetFlag<M_MTE1> after the first and WaitFlag<M_MTE1>" in r, r
        assert not any("same-pipe hazard" in x for x in p["reports"]), p["reports"]


def test_two_loads_into_one_tile_without_a_barrier_are_a_same_pipe_hazard():
    # nothing reads the first load's bytes before the second overwrites them: the same-pipe report stays
    @T.prim_func
    def main(A: T.Tensor((16, 32), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((16, 32), "float16")
            a0 = T.alloc_L0A((16, 16), "float16")
            with T.Scope("C"):
                T.copy(A, a1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.copy(a1[0:16, 0:16], a0)
                T.copy(a1[0:16, 16:32], a0)  # @SECOND_LOAD
    p = compile_npu(main).profile(ints((16, 32), "float16", 26), np.zeros((16, 16), np.float32))
    assert p["reports"] and p["reports"][0].startswith(at("SECOND_LOAD") + "same-pipe hazard: "), p["reports"]
    assert "PipeBarrier<PIPE_MTE1>" in p["reports"][0]


# ---------------------------------------------------------------------------------------------
# Cube rules caught when the kernel is compiled

def mmad_kernel(adt, bdt, cdt):
    @T.prim_func
    def main(A: T.Tensor((16, 32), adt), B: T.Tensor((32, 16), bdt), C: T.Tensor((16, 16), cdt)):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((16, 32), adt)
            b1 = T.alloc_L1((32, 16), bdt)
            a0 = T.alloc_L0A((16, 32), adt)
            b0 = T.alloc_L0B((32, 16), bdt)
            c0 = T.alloc_L0C((16, 16), cdt)
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.copy(a1, a0)
                T.copy(b1, b0)
                T.set_flag("MTE1", "M", 0)
                T.wait_flag("MTE1", "M", 0)
                T.mma(a0, b0, c0, init=True)  # @MMAD
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, C)
    return main


@pytest.mark.parametrize("adt,bdt,cdt,want", [
    ("float16", "float32", "float32", "A and B must have the same dtype"),
    ("bfloat16", "float16", "float32", "A and B must have the same dtype"),
    ("float16", "float16", "float16", "float16 inputs accumulate in float32"),
    ("float16", "float16", "int32", "float16 inputs accumulate in float32"),
    ("int8", "int8", "float32", "int8 inputs accumulate in int32"),
])
def test_illegal_mmad_dtype_pairs_are_errors_at_the_mma(adt, bdt, cdt, want):
    err = located(lambda: compile_npu(mmad_kernel(adt, bdt, cdt)), "MMAD", want)
    # F3 (fixed): the Cube's copies do not convert, so the hint no longer says "copy converts"
    assert "copy converts" not in err.hint, err.hint


def int8_gemm_kernel(K):
    @T.prim_func
    def main(A: T.Tensor((16, K), "int8"), B: T.Tensor((16, K), "int8"), C: T.Tensor((16, 16), "int32")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((16, K), "int8")
            b1 = T.alloc_L1((16, K), "int8")
            c0 = T.alloc_L0C((16, 16), "int32")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.gemm(a1, b1, c0, transpose_B=True, clear_accum=True)  # @INT8_GEMM
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, C)
    return main


def test_int8_gemm_k_past_the_mmad_limit_names_the_split():
    # a 64 KiB L0A holds 16 x 4096 int8: K = 4096 passes Mmad's k <= 4095 (F5: the error had no hint)
    located(lambda: compile_npu(int8_gemm_kernel(4096)), "INT8_GEMM", "gemm dimension 4096 exceeds the Mmad limit 4095",
            "split K")
    a, b = ints((16, 4064), "int8", 24), ints((16, 4064), "int8", 25)
    p = compile_npu(int8_gemm_kernel(4064), out_idx=[-1]).profile(a, b)
    assert p["reports"] == []
    np.testing.assert_array_equal(p.outputs, a.astype(np.int64) @ b.astype(np.int64).T)


def test_l0a_over_capacity_names_the_buffer_and_a_tile_that_fits():
    @T.prim_func
    def main(A: T.Tensor((128, 256), "float16")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((128, 256), "float16")
            a0 = T.alloc_L0A((2, 128, 256), "float16")  # @L0A_CAP
            with T.Scope("C"):
                T.copy(A, a1)
    located(lambda: compile_npu(main), "L0A_CAP", "L0A overflow: a0 (2x128x256 float16, 131072 B)", "holds 65536 B",
            "a smaller tile that fits: a0 2x64x256")


def test_l1_over_capacity_counts_the_padded_rows():
    # 511 rows are stored as 512 (Nz pads rows to 16): 524288 B > the 524032 B usable
    @T.prim_func
    def main(A: T.Tensor((511, 512), "float16")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((511, 512), "float16")  # @L1_CAP
            with T.Scope("C"):
                T.copy(A, a1)
    located(lambda: compile_npu(main), "L1_CAP", "L1 overflow: a1 (511x512 float16, 524288 B)", "holds 524032 B")


def wide_rows_kernel(N):
    @T.prim_func
    def main(A: T.Tensor((16, N), "float16")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((16, 32), "float16")
            with T.Scope("C"):
                T.copy(A[0, N - 32], a1)  # @SRC_D_VALUE
    return main


def test_nd2nz_src_d_value_past_uint16_is_an_error_at_the_copy():
    located(lambda: compile_npu(wide_rows_kernel(70000)), "SRC_D_VALUE", "Nd2NzParams.srcDValue is a uint16",
            "store the matrix transposed")
    p = compile_npu(wide_rows_kernel(65535)).profile(np.ones((16, 65535), np.float16))
    assert p["reports"] == []


def l0_window_kernel(k0):
    @T.prim_func
    def main(A: T.Tensor((16, 64), "float16"), B: T.Tensor((64, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((16, 64), "float16")
            b1 = T.alloc_L1((64, 16), "float16")
            a0 = T.alloc_L0A((16, 16), "float16")
            b0 = T.alloc_L0B((16, 16), "float16")
            c0 = T.alloc_L0C((16, 16), "float32")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.copy(a1[0:16, k0:k0 + 16], a0)  # @L0_WINDOW
                T.copy(b1[k0:k0 + 16, 0:16], b0)
                T.set_flag("MTE1", "M", 0)
                T.wait_flag("MTE1", "M", 0)
                T.mma(a0, b0, c0, init=True)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, C)
    return main


def test_l1_window_inside_a_fractal_is_an_error_and_a_fractal_start_is_exact():
    located(lambda: compile_npu(l0_window_kernel(8)), "L0_WINDOW", "starts at column 8", "whole 16 x 16 fractals")
    a, b = ints((16, 64), "float16", 1), ints((64, 16), "float16", 2)
    p = compile_npu(l0_window_kernel(32), out_idx=[-1]).profile(a, b)
    assert p["reports"] == []
    np.testing.assert_array_equal(f64(p.outputs), f64(a[:, 32:48]) @ f64(b[32:48]))


def gemm_event_kernel(ev):
    """T.gemm on L1 operands (its own MTE1 <-> M flags, event 7) next to a hand-written Mmad whose
    M -> MTE1 / MTE1 -> M flags use event `ev`."""

    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32"),
             D: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((32, 32), "float16")
            b1 = T.alloc_L1((32, 32), "float16")
            a0 = T.alloc_L0A((32, 32), "float16")
            b0 = T.alloc_L0B((32, 32), "float16")
            c0 = T.alloc_L0C((32, 32), "float32")
            c1 = T.alloc_L0C((32, 32), "float32")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.set_flag("M", "MTE1", ev)  # @EVENT_SET
                T.gemm(a1, b1, c1, clear_accum=True)
                T.wait_flag("M", "MTE1", ev)
                T.copy(a1, a0)
                T.copy(b1, b0)
                T.set_flag("MTE1", "M", ev)
                T.wait_flag("MTE1", "M", ev)
                T.mma(a0, b0, c0, init=True)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, C)
                T.copy(c1, D)
    return main


def test_event_7_is_reserved_for_t_gemm():
    located(lambda: compile_npu(gemm_event_kernel(7)), "EVENT_SET", "event 7 of M->MTE1 is used by T.gemm")
    a, b = ints((32, 32), "float16", 3), ints((32, 32), "float16", 4)
    c, d = np.zeros((32, 32), np.float32), np.zeros((32, 32), np.float32)
    p = compile_npu(gemm_event_kernel(3)).profile(a, b, c, d)
    assert p["reports"] == []
    np.testing.assert_array_equal(f64(c), f64(a) @ f64(b))
    np.testing.assert_array_equal(f64(d), f64(a) @ f64(b))


# ---------------------------------------------------------------------------------------------
# Vector core: flags, barriers, alignment, field widths

def test_set_flag_twice_before_its_wait_is_reported_at_the_second_set():
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                T.copy(X, a)
                T.set_flag("MTE2", "MTE3", 1)
                T.set_flag("MTE2", "MTE3", 1)  # @SET_TWICE
                T.wait_flag("MTE2", "MTE3", 1)
                T.copy(a, Y)
                T.wait_flag("MTE2", "MTE3", 1)
    p = compile_npu(main, out_idx=[-1]).profile(np.ones((8, 64), np.float32))
    assert p["reports"] and p["reports"][0].startswith(at("SET_TWICE") + "flag set twice: "), p["reports"]


def test_vector_operand_inside_a_32_byte_block_is_an_error_at_the_op():
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                T.copy(X, a)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.exp(a[0:8, 3:11], a[0:8, 3:11])  # @VEC_MISALIGNED
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(a, Y)
    located(lambda: compile_npu(main), "VEC_MISALIGNED", "12 bytes into a 32 B block of UB",
            "shift by a multiple of 8 columns")


def test_ub_to_ub_copy_inside_a_32_byte_block_is_an_error_at_the_copy():
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            b = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                T.copy(X, a)
                T.fill(b, 0.0)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.copy(a[0:8, 1:9], b[0:8, 0:8])  # @UB_UB_MISALIGNED
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(b, Y)
    located(lambda: compile_npu(main), "UB_UB_MISALIGNED", "starts 4 bytes into tile 'a', not on a 32 B block")


def test_data_copy_pad_of_more_than_4095_rows_is_several_calls():
    """DataCopyExtParams.blockCount is at most 4095: a copy of 5000 rows was an error at the copy (with F4's
    internal bound printed, fixed); since session 25 (h-pipecol13) it is two calls of at most 4095 rows."""
    R = 5000

    @T.prim_func
    def main(X: T.Tensor((R, 8), "float32"), Y: T.Tensor((R, 8), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((R, 8), "float32")
            with T.Scope("V"):
                T.copy(X, a)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(a, Y)
    k = compile_npu(main)
    assert k.get_source("ascend_program").count("blockCount=4095") == 2, k.get_source("ascend_program")
    x = np.arange(R * 8, dtype=np.float32).reshape(R, 8)
    y = np.zeros_like(x)
    prof = k.profile(x, y)
    assert prof["reports"] == [], prof["reports"]
    np.testing.assert_array_equal(y, x)


def test_ub_over_capacity_is_an_error_at_the_first_buffer():
    @T.prim_func
    def main(X: T.Tensor((3100, 9), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((3100, 9), "float32")  # @UB_CAP  (rows of 36 B padded to 64 B: 198400 B)
            with T.Scope("V"):
                T.copy(X, a)
    located(lambda: compile_npu(main), "UB_CAP", "UB overflow: a (3100x9 float32, 198400 B)", "holds 196352 B")


def vec_kernel(M, N, dt, op):
    """One vector op of the expert forms on an (M, N) UB tile; outputs Y (M, N), R (M,), Cc (N,)."""
    col_op = op in ("colsum", "colmax")  # writes c, not r

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt), R: T.Tensor((M,), dt), Cc: T.Tensor((N,), dt)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((M, N), dt)
            y = T.alloc_UB((M, N), dt)
            r = T.alloc_UB((M,), dt)
            c = T.alloc_UB((N,), dt)
            with T.Scope("V"):
                T.copy(X, x)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                if op == "colsum":
                    T.reduce_sum(x, c, dim=0)
                elif op == "colmax":
                    T.reduce_max(x, c, dim=0)
                elif op == "rowmin":
                    T.reduce_min(x, r, dim=1)
                elif op == "bdiv":
                    T.reduce_sum(x, r, dim=1)
                else:
                    T.reduce_max(x, r, dim=1)
                T.pipe_barrier("V")
                if op == "bsub":
                    T.sub(y, x, r[:, None])  # @ROW_BROADCAST
                elif op == "bdiv":
                    T.div(y, x, r[:, None])
                elif op == "exp":
                    T.exp(y, x)
                else:
                    T.add(y, 2.0, x)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(y, Y)
                # only the tiles the op wrote: copying out an unwritten tile is an uninitialised read
                # (session 30's h-uninit rule), stale UB on the chip
                if col_op:
                    T.copy(c, Cc)
                else:
                    T.copy(r, R)
    return main


def vec_reference(X, op):
    return {"colsum": ("C", X.sum(0)), "colmax": ("C", X.max(0)), "rowmin": ("R", X.min(1)),
            "rowmax": ("R", X.max(1)), "bsub": ("Y", X - X.max(1)[:, None]), "bdiv": ("Y", X / X.sum(1)[:, None]),
            "exp": ("Y", np.exp(X)), "sadd": ("Y", 2.0 + X)}[op]


def run_vec(M, N, dt, op):
    x = (ints((M, N), "float32", 7, 1, 9) / 4).astype(tw.testing.np_dtype(dt))
    col_op = op in ("colsum", "colmax")  # the kernel writes Cc, else R (an output never written is an error)
    unused = np.zeros(M if col_op else N, x.dtype)  # the one of R / Cc not written: an input
    p = compile_npu(vec_kernel(M, N, dt, op), out_idx=[1, 3] if col_op else [1, 2]).profile(x, unused)
    assert p["reports"] == []
    Y, RC = p.outputs
    which, ref = vec_reference(f64(x), op)
    got = f64({"Y": Y, "R": RC, "C": RC}[which])
    rtol = 2e-3 if dt == "float16" else 1e-6
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=0)


@pytest.mark.parametrize("M,N", [(3, 13), (5, 70), (2, 257), (9, 129), (4, 1), (1, 1)])
@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("op", ["colsum", "colmax", "rowmin", "exp", "sadd"])
def test_vector_ops_at_odd_shapes_match_float64(M, N, dt, op):
    # rows padded to 32 B (garbage after each DataCopyPad burst): reductions must mask it
    run_vec(M, N, dt, op)


@pytest.mark.parametrize("M,N", [(3, 13), (2, 257), (4, 1), (9, 129)])
@pytest.mark.parametrize("op", ["bsub", "bdiv"])
def test_row_broadcast_at_odd_shapes_matches_float64(M, N, op):
    run_vec(M, N, "float32", op)


@pytest.mark.parametrize("N", [1, 8, 13])
@pytest.mark.parametrize("op", ["bsub", "bdiv"])
@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_row_broadcast_over_one_row(N, op, dt):
    # F2 (fixed): the frontend dropped the unit row dim, so the map was 1-D and r[0] no vector operand
    run_vec(1, N, dt, op)


def test_row_broadcast_over_a_one_row_window():
    # (row 8: r[8] starts a 32 B block; r[3] would be the located misalignment error)
    @T.prim_func
    def main(X: T.Tensor((16, 24), "float32"), Y: T.Tensor((16, 24), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((16, 24), "float32")
            r = T.alloc_UB((16,), "float32")
            with T.Scope("V"):
                T.copy(X, x)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.reduce_max(x, r, dim=1)
                T.pipe_barrier("V")
                T.sub(x[8:9, :], x[8:9, :], r[8:9, None])
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(x, Y)
    x = (ints((16, 24), "float32", 23, 1, 9) / 4).astype(np.float32)
    p = compile_npu(main, out_idx=[-1]).profile(x)
    assert p["reports"] == []
    want = f64(x)
    want[8] -= want[8].max()
    np.testing.assert_array_equal(f64(p.outputs), want)


# ---------------------------------------------------------------------------------------------
# Scalar unit: reads and stores of UB elements race with the pipes without their flags

def scalar_read_kernel(flag):
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            b = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                T.copy(X, a)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.exp(a, a)
                if flag:
                    T.set_flag("V", "S", 0)
                    T.wait_flag("V", "S", 0)
                v = a[3, 5]  # @SCALAR_READ
                T.fill(b, v)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(b, Y)
    return main


def test_scalar_read_racing_a_vector_write():
    x = np.random.default_rng(8).standard_normal((8, 64)).astype(np.float32)
    p = compile_npu(scalar_read_kernel(True), out_idx=[-1]).profile(x)
    assert p["reports"] == []
    np.testing.assert_allclose(p.outputs, np.full((8, 64), np.exp(f64(x[3, 5]))), rtol=1e-6)
    p = compile_npu(scalar_read_kernel(False), out_idx=[-1]).profile(x)
    assert p["reports"]
    r = p["reports"][0]
    assert r.startswith(at("SCALAR_READ") + "race: "), r
    assert "UB bytes [788, 792) written by V" in r and "add SetFlag<V_S>" in r, r


def scalar_store_kernel(flag):
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                T.copy(X, a)
                T.set_flag("MTE2", "S", 0)
                T.wait_flag("MTE2", "S", 0)
                a[2, 3] = 5.0
                if flag:
                    T.set_flag("S", "MTE3", 0)
                    T.wait_flag("S", "MTE3", 0)
                T.copy(a, Y)  # @SCALAR_STORE_READER
    return main


def test_scalar_store_racing_the_copy_out():
    x = np.random.default_rng(9).standard_normal((8, 64)).astype(np.float32)
    p = compile_npu(scalar_store_kernel(True), out_idx=[-1]).profile(x)
    assert p["reports"] == []
    want = x.copy()
    want[2, 3] = 5.0
    np.testing.assert_array_equal(p.outputs, want)
    p = compile_npu(scalar_store_kernel(False), out_idx=[-1]).profile(x)
    r = p["reports"][0]
    assert r.startswith(at("SCALAR_STORE_READER") + "race: ") and "add SetFlag<S_MTE3>" in r, r


def test_scalar_read_of_a_tensor_the_kernel_writes_is_an_error():
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                T.copy(X, a)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(a, Y)
                v = Y[0, 0]  # @STALE_DCACHE
                T.set_flag("MTE3", "V", 0)
                T.wait_flag("MTE3", "V", 0)
                T.fill(a, v)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(a, Y)
    located(lambda: compile_npu(main), "STALE_DCACHE", "reads element Y[0, 0] of tensor 'Y' as a scalar",
            "DataCache")


# ---------------------------------------------------------------------------------------------
# Cube -> Vector hand-off through GM: cross-core flags

def handoff_kernel(wait):
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"), W: T.Tensor((32, 32), "float32"),
             Y: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a1 = T.alloc_L1((32, 32), "float16")
            b1 = T.alloc_L1((32, 32), "float16")
            a0 = T.alloc_L0A((32, 32), "float16")
            b0 = T.alloc_L0B((32, 32), "float16")
            c0 = T.alloc_L0C((32, 32), "float32")
            u = T.alloc_UB((16, 32), "float32")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.copy(a1, a0)
                T.copy(b1, b0)
                T.set_flag("MTE1", "M", 0)
                T.wait_flag("MTE1", "M", 0)
                T.mma(a0, b0, c0, init=True)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, W)
                T.set_cross_flag(2, "FIX", 0)
            with T.Scope("V"):
                if wait:
                    T.wait_cross_flag(0)
                T.copy(W[vid * 16, 0], u)  # @HANDOFF_READ
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.exp(u, u)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(u, Y[vid * 16, 0])
                if not wait:
                    T.wait_cross_flag(0)
    return main


def test_hand_off_without_the_cross_core_wait_is_a_race_at_the_read():
    a, b = (ints((32, 32), "float16", 10) / 4).astype(np.float16), (ints((32, 32), "float16", 11) / 4).astype(np.float16)
    ref = np.exp(f64(a) @ f64(b))
    p = compile_npu(handoff_kernel(True), out_idx=[-1]).profile(a, b, np.zeros((32, 32), np.float32))
    assert p["reports"] == []
    np.testing.assert_allclose(f64(p.outputs), ref, rtol=2e-6)
    p = compile_npu(handoff_kernel(False), out_idx=[-1]).profile(a, b, np.zeros((32, 32), np.float32))
    assert len(p["reports"]) == 2          # both AIVs
    for r in p["reports"]:
        assert r.startswith(at("HANDOFF_READ") + "race: "), r
        assert "written by FIX on AIC 0" in r and "CrossCoreSetFlag/CrossCoreWaitFlag" in r, r


def cross_flag_kernel(scope, mode, pipe, fid):
    @T.prim_func
    def main(X: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            if scope == "C":
                with T.Scope("C"):
                    T.set_cross_flag(mode, pipe, fid)  # @CROSS_SET_C
                with T.Scope("V"):
                    T.wait_cross_flag(fid)
            else:
                with T.Scope("V"):
                    T.set_cross_flag(mode, pipe, fid)  # @CROSS_SET_V
                with T.Scope("C"):
                    T.wait_cross_flag(fid)
    return main


def test_cross_core_flag_rules():
    x = np.zeros((16, 64), np.float32)
    for scope, pipe in (("C", "FIX"), ("C", "MTE3"), ("V", "MTE3")):
        assert compile_npu(cross_flag_kernel(scope, 2, pipe, 10)).profile(x)["reports"] == []
    located(lambda: cross_flag_kernel("C", 2, "FIX", 11), "CROSS_SET_C", "flag id 11 is out of range 0..10")
    located(lambda: cross_flag_kernel("V", 2, "FIX", 1), "CROSS_SET_V", "the Vector core (AIV) has no pipe FIX")
    located(lambda: cross_flag_kernel("C", 2, "V", 1), "CROSS_SET_C", "the Cube core (AIC) has no pipe V")
    p = compile_npu(cross_flag_kernel("C", 1, "FIX", 1)).profile(x)
    assert p["reports"][0].startswith(at("CROSS_SET_C") + "invalid instruction: cross-core flag mode 1"), p["reports"]


# ---------------------------------------------------------------------------------------------
# Atomic add into GM

def atomic_ub_kernel(M, N, dt, blocks, plain_block=-1):
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                x = T.alloc_UB((M, N), dt)
                T.copy(X, x)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                if cid == plain_block:
                    T.copy(x, Y)  # @ATOMIC_PLAIN
                else:
                    T.atomic_add(Y, x)
    return main


@pytest.mark.parametrize("M,N,dt", [(3, 13, "float16"), (1, 1, "bfloat16"), (3, 5, "int32"), (7, 33, "float32")])
def test_atomic_add_from_ub_at_odd_shapes(M, N, dt):
    x, y = ints((M, N), dt, 12), ints((M, N), dt, 13)
    want = f64(y) + 3 * f64(x)
    k = compile_npu(atomic_ub_kernel(M, N, dt, 3))
    assert k.profile(x, y)["reports"] == []
    np.testing.assert_array_equal(f64(y), want)
    src = k.get_source("ascendc")
    assert src.count("SetAtomicAdd<") == 1 and src.count("SetAtomicNone();") == 1


def test_plain_copy_racing_an_atomic_add_of_another_core_is_reported():
    x, y = ints((8, 64), "float32", 14), np.zeros((8, 64), np.float32)
    p = compile_npu(atomic_ub_kernel(8, 64, "float32", 2, plain_block=1)).profile(x, y)
    assert p["reports"]
    r = p["reports"][0]
    assert r.startswith(at("ATOMIC_PLAIN") + "race: ") and "CrossCoreSetFlag/CrossCoreWaitFlag" in r, r


def test_atomic_add_from_l0c_by_two_blocks():
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(2, is_npu=True) as cid:
            a1 = T.alloc_L1((32, 32), "float16")
            b1 = T.alloc_L1((32, 32), "float16")
            a0 = T.alloc_L0A((32, 32), "float16")
            b0 = T.alloc_L0B((32, 32), "float16")
            c0 = T.alloc_L0C((32, 32), "float32")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.copy(a1, a0)
                T.copy(b1, b0)
                T.set_flag("MTE1", "M", 0)
                T.wait_flag("MTE1", "M", 0)
                T.mma(a0, b0, c0, init=True)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.atomic_add(C, c0)
    a, b = ints((32, 32), "float16", 15), ints((32, 32), "float16", 16)
    c = np.ones((32, 32), np.float32)
    k = compile_npu(main)
    assert k.profile(a, b, c)["reports"] == []
    np.testing.assert_array_equal(f64(c), 1 + 2 * (f64(a) @ f64(b)))
    assert "SetAtomicAdd<float>();" in k.get_source("ascendc")


def test_atomic_add_of_another_dtype_is_an_error():
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float16"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                x = T.alloc_UB((8, 64), "float16")
                T.copy(X, x)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.atomic_add(Y, x)  # @ATOMIC_DTYPE
    located(lambda: compile_npu(main), "ATOMIC_DTYPE", "cannot convert float16 to float32")


# ---------------------------------------------------------------------------------------------
# T.Pipelined in expert mode is a serial loop: the user's flags order its iterations

@pytest.mark.parametrize("M,N,R", [(37, 24, 8), (5, 3, 4), (1, 1, 1)])
def test_pipelined_expert_loop_with_tails(M, N, R):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((R, N), "float32")
            with T.Scope("V"):
                T.set_flag("MTE3", "MTE2", 0)
                for i in T.Pipelined(T.ceildiv(M, R), num_stages=2):
                    T.wait_flag("MTE3", "MTE2", 0)
                    T.copy(X[i * R, 0], a)
                    T.set_flag("MTE2", "V", 0)
                    T.wait_flag("MTE2", "V", 0)
                    T.mul(a, a, 2.0)
                    T.set_flag("V", "MTE3", 0)
                    T.wait_flag("V", "MTE3", 0)
                    T.copy(a, Y[i * R, 0])
                    T.set_flag("MTE3", "MTE2", 0)
                T.wait_flag("MTE3", "MTE2", 0)
    x = np.random.default_rng(17).standard_normal((M, N)).astype(np.float32)
    p = compile_npu(main, out_idx=[-1]).profile(x)
    assert p["reports"] == []
    np.testing.assert_array_equal(p.outputs, 2 * x)


# ---------------------------------------------------------------------------------------------
# The dtype of each vector call against its A2 page (asc-devkit docs/api/context/<Call>.md)

def unary_kernel(dt, op):
    @T.prim_func
    def main(X: T.Tensor((4, 64), dt), Y: T.Tensor((4, 64), dt)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((4, 64), dt)
            y = T.alloc_UB((4, 64), dt)
            with T.Scope("V"):
                T.copy(X, x)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                if op == "abs":
                    T.abs(y, x)  # @UNARY_ABS
                elif op == "relu":
                    T.relu(y, x)
                elif op == "add":
                    T.add(y, x, x)
                else:
                    T.mul(y, x, 3)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(y, Y)
    return main


@pytest.mark.parametrize("dt", ["int32", "float16", "float32"])
@pytest.mark.parametrize("op", ["relu", "add", "muls"])
def test_int32_and_float_calls_the_a2_pages_list(dt, op):
    # Relu: half/int32/float; Add: half/int16/int32/float; Muls: half/int16/float/int32 (Atlas A2)
    x = ints((4, 64), dt, 18, -5, 6)
    p = compile_npu(unary_kernel(dt, op), out_idx=[-1]).profile(x)
    assert p["reports"] == []
    X = f64(x)
    np.testing.assert_array_equal(f64(p.outputs), {"relu": np.maximum(X, 0), "add": 2 * X, "muls": 3 * X}[op])


@pytest.mark.parametrize("dt", ["int8", "uint8"])
def test_8_bit_arithmetic_in_expert_mode_is_an_api_rule_at_the_op(dt):
    x = ints((4, 64), dt, 19, 0, 6)
    p = compile_npu(unary_kernel(dt, "abs"), out_idx=[-1]).profile(x)
    assert p["reports"] and p["reports"][0].startswith(at("UNARY_ABS") + "API rule: Abs (level-2) on " + dt), p["reports"]


def abs_is_refused(make, x):
    """Abs has no int32 form on Atlas A2 (Abs.md: half, float): the kernel must be refused at the
    T.abs line (a compile error when the expert kernel is defined or compiled, or the simulator's
    API rule)."""
    try:
        p = compile_npu(make(), out_idx=[-1]).profile(x)
    except TilewrightError as e:
        return e.line == line("UNARY_ABS")
    return any(r.startswith(at("UNARY_ABS") + "API rule: Abs") for r in p["reports"])


def test_expert_abs_of_int32_is_refused_at_the_line():
    # F6, fixed by h-ascfix9b: an expert T.abs on an int32 tile is an error at the line
    assert abs_is_refused(lambda: unary_kernel("int32", "abs"), ints((4, 64), "int32", 20, -5, 6))


def auto_abs_kernel(M, N, dt):
    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dt)
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                x[i, j] = T.abs(x[i, j])
            T.copy(x, Y)
    return main


@pytest.mark.parametrize("dt", ["float16", "float32", "int8"])
def test_automatic_abs_on_both_targets(dt):
    x = ints((3, 37), dt, 21, -5, 6)
    want = np.abs(f64(x))
    cpu = tw.compile(auto_abs_kernel(3, 37, dt), target="cpu", out_idx=[-1])(x)
    p = compile_npu(auto_abs_kernel(3, 37, dt), out_idx=[-1]).profile(x)
    assert p["reports"] == []
    np.testing.assert_array_equal(f64(cpu), want)
    np.testing.assert_array_equal(f64(p.outputs), want)


def test_automatic_abs_of_int32_issues_only_documented_calls():
    # F6, fixed by h-ascfix9b: int32 |x| as Max(x, Muls(x, -1))
    x = ints((3, 37), "int32", 22, -5, 6)
    k = compile_npu(auto_abs_kernel(3, 37, "int32"), out_idx=[-1])
    p = k.profile(x)
    assert p["reports"] == []
    np.testing.assert_array_equal(f64(p.outputs), np.abs(f64(x)))
    src = k.get_source("ascendc")
    # the only tile is int32: any Abs call is the int32 form
    assert "Abs(" not in src, [ln for ln in src.splitlines() if "Abs(" in ln]


# ---------------------------------------------------------------------------------------------
# GM -> UB copies: what the UB elements after the copied part hold

def ub_window_copy_kernel(n, w):
    @T.prim_func
    def main(X: T.Tensor((2, n), "float32"), Y: T.Tensor((2, w), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            u = T.alloc_UB((2, w), "float32")
            with T.Scope("V"):
                T.fill(u, 7.0)
                T.pipe_barrier("ALL")
                T.copy(X, u[0:2, 0:n])  # @UB_WINDOW_COPY
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(u, Y)
    return main


def test_copy_into_a_window_of_whole_32_byte_blocks_keeps_the_rest():
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    p = compile_npu(ub_window_copy_kernel(8, 16), out_idx=[-1]).profile(x)
    assert p["reports"] == []
    want = np.full((2, 16), 7.0, np.float32)
    want[:, :8] = x
    np.testing.assert_array_equal(p.outputs, want)


def test_tail_copy_zeroes_the_rest_of_the_tile():
    # the short GM window of the last columns: the tile is zeroed first (expert tails, docs/ascend.md Limits)
    @T.prim_func
    def main(X: T.Tensor((2, 20), "float32"), Y: T.Tensor((2, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            u = T.alloc_UB((2, 16), "float32")
            with T.Scope("V"):
                T.fill(u, 7.0)
                T.pipe_barrier("ALL")
                T.copy(X[0, 16], u)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(u, Y)
    x = np.arange(40, dtype=np.float32).reshape(2, 20)
    p = compile_npu(main, out_idx=[-1]).profile(x)
    assert p["reports"] == []
    want = np.zeros((2, 16), np.float32)
    want[:, :4] = x[:, 16:]
    np.testing.assert_array_equal(p.outputs, want)


def test_copy_into_a_window_ending_inside_a_block_is_refused_or_keeps_the_rest():
    # F7, fixed by h-ascfix9b: an error at the copy's line
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    try:
        p = compile_npu(ub_window_copy_kernel(3, 16), out_idx=[-1]).profile(x)
    except TilewrightError as e:
        assert e.line == line("UB_WINDOW_COPY"), e
        return
    if p["reports"]:
        assert any(r.startswith(at("UB_WINDOW_COPY")) or f"{THIS}:{line('UB_WINDOW_COPY')}" in r
                   for r in p["reports"]), p["reports"]
        return
    want = np.full((2, 16), 7.0, np.float32)
    want[:, :3] = x
    np.testing.assert_array_equal(p.outputs, want)


def cross_left_set_kernel(n, both):
    @T.prim_func
    def main(X: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                for i in T.serial(n):
                    T.set_cross_flag(2, "FIX", 4)  # @CROSS_LEFT_SET
            with T.Scope("V"):
                if both or vid == 0:
                    for i in T.serial(n):
                        T.wait_cross_flag(4)
    return main


def test_cross_core_sets_all_consumed():
    assert compile_npu(cross_left_set_kernel(3, True)).profile(np.zeros((16, 64), np.float32))["reports"] == []


@pytest.mark.parametrize("n", [1, 3])
def test_cross_core_sets_left_pending_are_reported(n):
    # F8 (fixed): a local flag left set was reported, a cross-core one was not
    p = compile_npu(cross_left_set_kernel(n, False)).profile(np.zeros((16, 64), np.float32))
    assert len(p["reports"]) == 1, p["reports"]
    r = p["reports"][0]
    assert r.startswith(at("CROSS_LEFT_SET") + "unmatched set flag: cross-core flag 4 of AIV 1 has "
                        f"{n} set(s) never waited for"), r
    assert "add the matching CrossCoreWaitFlag on AIV 1" in r, r


@pytest.mark.parametrize("M,N", [(3, 13), (2, 257), (16, 130)])
def test_independent_ops_sharing_the_compiler_scratch_need_no_user_barrier(M, N):
    # two wide row reductions and two row broadcasts with no data dependence between them (so no
    # pipe_barrier written): their expansions reuse tw_vec_scratch, which the compiler fences itself
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), W: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"),
             Z: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((M, N), "float32")
            w = T.alloc_UB((M, N), "float32")
            y = T.alloc_UB((M, N), "float32")
            z = T.alloc_UB((M, N), "float32")
            r = T.alloc_UB((M,), "float32")
            q = T.alloc_UB((M,), "float32")
            with T.Scope("V"):
                T.copy(X, x)
                T.copy(W, w)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.reduce_max(x, r, dim=1)
                T.reduce_max(w, q, dim=1)
                T.pipe_barrier("V")
                T.sub(y, x, r[:, None])
                T.sub(z, w, q[:, None])
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(y, Y)
                T.copy(z, Z)
    rng = np.random.default_rng(27)
    x, w = rng.standard_normal((M, N)).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    p = compile_npu(main, out_idx=[2, 3]).profile(x, w)
    assert p["reports"] == []
    Y, Z = p.outputs
    # one float32 subtraction per element (correctly rounded, as numpy's float32 one)
    np.testing.assert_array_equal(Y, x - x.max(1)[:, None])
    np.testing.assert_array_equal(Z, w - w.max(1)[:, None])


def f32_mma_kernel(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((M, K), "float32")
            b1 = T.alloc_L1((K, N), "float32")
            a0 = T.alloc_L0A((M, K), "float32")
            b0 = T.alloc_L0B((K, N), "float32")
            c0 = T.alloc_L0C((M, N), "float32")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.copy(a1, a0)
                T.copy(b1, b0)  # @F32_B_LOAD  (K x N float32: LoadData3DParamsV2, whole 16 x 16 fractals)
                T.set_flag("MTE1", "M", 0)
                T.wait_flag("MTE1", "M", 0)
                T.mma(a0, b0, c0, init=True)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, C)
    return main


def run_f32_mma(M, N, K):
    a, b = ints((M, K), "float32", 28), ints((K, N), "float32", 29)
    p = compile_npu(f32_mma_kernel(M, N, K), out_idx=[-1]).profile(a, b)
    assert p["reports"] == [], p["reports"]
    np.testing.assert_array_equal(f64(p.outputs), f64(a) @ f64(b))


@pytest.mark.parametrize("M,N,K", [(16, 16, 16), (17, 24, 32), (3, 40, 48)])
def test_float32_kxn_b_in_l0b_with_k_a_multiple_of_16(M, N, K):
    run_f32_mma(M, N, K)


@pytest.mark.parametrize("M,N,K", [(16, 16, 8), (17, 24, 24), (3, 40, 40), (1, 8, 1)])
def test_float32_kxn_b_in_l0b_with_any_k(M, N, K):
    # F10, fixed by h-ascfix9d: the tile's K is planned rounded to 16, as the load writes
    run_f32_mma(M, N, K)


@pytest.mark.parametrize("M,N,K", [(16, 16, 8), (17, 24, 24), (3, 40, 40), (1, 8, 1)])
def test_float32_b_stored_n_by_k_at_any_k(M, N, K):
    # the form F10's hint can name: B stored N x K, loaded untransposed, T.gemm(..., transpose_B=True)
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as cid:
            a1 = T.alloc_L1((M, K), "float32")
            b1 = T.alloc_L1((N, K), "float32")
            a0 = T.alloc_L0A((M, K), "float32")
            b0 = T.alloc_L0B((N, K), "float32")
            c0 = T.alloc_L0C((M, N), "float32")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.copy(a1, a0)
                T.copy(b1, b0)
                T.set_flag("MTE1", "M", 0)
                T.wait_flag("MTE1", "M", 0)
                T.gemm(a0, b0, c0, transpose_B=True, clear_accum=True)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, C)
    a, b = ints((M, K), "float32", 30), ints((N, K), "float32", 31)
    p = compile_npu(main, out_idx=[-1]).profile(a, b)
    assert p["reports"] == []
    np.testing.assert_array_equal(f64(p.outputs), f64(a) @ f64(b).T)


def cast_kernel(sdt, ddt, rnd="none"):
    @T.prim_func
    def main(X: T.Tensor((4, 64), sdt), Y: T.Tensor((4, 64), ddt)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((4, 64), sdt)
            y = T.alloc_UB((4, 64), ddt)
            with T.Scope("V"):
                T.copy(X, x)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.cast(y, x, round=rnd)  # @CAST
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(y, Y)
    return main


@pytest.mark.parametrize("sdt,ddt,mode", [
    ("float32", "int32", "CAST_TRUNC"), ("float16", "int32", "CAST_TRUNC"), ("float16", "int8", "CAST_TRUNC"),
    ("int32", "float32", "CAST_RINT"), ("float32", "float16", "CAST_RINT"), ("float16", "float32", "CAST_NONE"),
    ("bfloat16", "float32", "CAST_NONE"), ("int8", "float16", "CAST_NONE"),
    ("bfloat16", "int32", "CAST_TRUNC"),    # F12 (fixed): was refused as "bfloat16 arithmetic"
])
def test_expert_casts_print_a_mode_table_4_lists(sdt, ddt, mode):
    # Cast.md table 4 (Atlas A2): float -> int32 and half -> int32 have no CAST_NONE; widening casts only CAST_NONE
    if sdt in ("float32", "float16", "bfloat16"):
        x = (ints((4, 64), "float32", 32, -20, 20) / 4).astype(tw.testing.np_dtype(sdt))
    else:
        x = ints((4, 64), sdt, 32, -20, 20)
    k = compile_npu(cast_kernel(sdt, ddt), out_idx=[-1])
    p = k.profile(x)
    assert p["reports"] == []
    want = np.trunc(f64(x)) if ddt.startswith("int") else f64(x)
    np.testing.assert_array_equal(f64(p.outputs), want)
    casts = [ln for ln in k.get_source("ascendc").splitlines() if "Cast(" in ln]
    assert len(casts) == 1 and f"RoundMode::{mode}" in casts[0], casts


def test_expert_cast_int32_to_float16_names_the_chain_through_float32():
    # F11 (fixed): Cast int32 -> half on dav-c220 is vconv_deq (scaled by SetDeqScale's register, the
    # round mode ignored; Cast.md table 4): it printed as if it converted, and the simulator converted
    with pytest.raises(TilewrightError) as e:
        compile_npu(cast_kernel("int32", "float16"), out_idx=[-1])
    assert e.value.line == line("CAST"), e.value
    assert "dequantizing Cast" in e.value.message, e.value.message
    assert "int32 -> float32 -> float16" in e.value.hint, e.value.hint


def test_int32_to_float16_through_float32_is_exact():
    @T.prim_func
    def main(X: T.Tensor((4, 64), "int32"), Y: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((4, 64), "int32")
            f = T.alloc_UB((4, 64), "float32")
            y = T.alloc_UB((4, 64), "float16")
            with T.Scope("V"):
                T.copy(X, x)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.cast(f, x)
                T.pipe_barrier("V")
                T.cast(y, f)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(y, Y)
    x = ints((4, 64), "int32", 35, -2048, 2049)
    k = compile_npu(main, out_idx=[-1])
    p = k.profile(x)
    assert p["reports"] == []
    np.testing.assert_array_equal(f64(p.outputs), f64(x))
    assert not any("Cast(y, x" in ln for ln in k.get_source("ascendc").splitlines())
