"""Copies whose origin lies before row 0 or column 0 of a tensor (issue 10, "no silent wrong
answer"; session 16): a window offset computed as bx * B - OFF (causal / sliding-window kernels)
starts at a negative row or column for the first blocks. On cpu the rows and columns before 0 read
zeros (GM -> tile) and are not written (tile -> GM). On ascend910b:

- GM <-> UB rows: skipped the same way (they read and wrote GM before the tensor: a checker report);
- GM -> UB columns: the GM side starts at column 0, the UB side whole 32 B blocks in and the rest
  through DataCopyPad's leftPadding (zeros);
- UB -> GM columns: skipped when the start is a multiple of the 32 B block (the UB side must start
  on a block); at any other start (session 17) the columns from the first block boundary at or after
  the skip are stored from their block and the head before it (under one block) through the scalar
  unit and a one-block-per-row scratch tile;
- GM -> L1 rows (gemm operands): the Nd2Nz writes skip_rows Nz rows further into every strip, the
  tile's zero fill covers the skipped rows; columns (session 17) in whole C0 strips, another start
  whose lower bound is negative a compile-time error at the copy;
- L0C -> GM rows and columns (Fixpipe): skipped in whole 16 x 16 fractals; another start whose lower
  bound is negative is a compile-time error at the copy (session 17; it was a checker report).

cpu vs ascend910b (checker on, zero reports) vs numpy."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype, randint

from ascend_util import TARGET, run_checked_partial as run_checked  # stores dropped by design leave parts of Y unwritten
from tw_test_util import by_size

M, N, B = 32, 16, 8


def compiled(main, target, out):
    """tw.compile(main, target, out_idx=[-1]); on cpu its call passes the output in, zeros of out = (shape, dtype):
    these kernels leave parts of it unwritten on purpose, which checked mode (TW_BOUNDS_CHECK=1) reports for an
    out_idx output (session 39; run_checked_partial is the ascend910b side)."""
    if target != "cpu":
        return tw.compile(main, target=target, out_idx=[-1])
    k = tw.compile(main, target="cpu")

    def run(*inputs):
        y = np.zeros(out[0], np_dtype(out[1]))
        k(*inputs, y)
        return y
    return run


def shifted_load(off, dtype, target):
    """Y[bx*B + i] = X[bx*B - off + i] (zeros where that row is before row 0)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, B)) as bx:
            t = T.alloc_fragment((B, N), dtype)
            T.copy(X[bx * B - off, 0], t)
            T.copy(t, Y[bx * B, 0])
    return tw.compile(main, target=target, out_idx=[-1])


def shifted_store(off, dtype, target):
    """Y[bx*B - off + i] = X[bx*B + i] + 1 for rows >= 0 (the first block's rows before 0 dropped)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, B)) as bx:
            t = T.alloc_fragment((B, N), dtype)
            T.copy(X[bx * B, 0], t)
            for i, j in T.Parallel(B, N):
                t[i, j] = t[i, j] + 1
            T.copy(t, Y[bx * B - off, 0])
    return compiled(main, target, ((M, N), dtype))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("off", [4, 8, 12])  # part of the first window, all of it, more than it
def test_load_from_a_negative_row_reads_zeros_there(off, dtype):
    x = (np.arange(M * N).reshape(M, N) % 251 + 1).astype(dtype)
    ref = np.zeros((M, N))
    for r in range(M):
        if 0 <= r - off < M:
            ref[r] = x[r - off]
    cpu = shifted_load(off, dtype, "cpu")(x)
    npu = run_checked(shifted_load(off, dtype, TARGET), x)
    assert np.array_equal(cpu.astype(np.float64), ref)
    assert np.array_equal(npu.astype(np.float64), ref)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("off", [4, 8])
def test_store_to_a_negative_row_drops_those_rows(off, dtype):
    x = (np.arange(M * N).reshape(M, N) % 251 + 1).astype(dtype)
    ref = x.astype(np.float64)[off:] + 1  # rows 0 .. M - off - 1 of Y; the rest is never written
    cpu = shifted_store(off, dtype, "cpu")(x)
    npu = run_checked(shifted_store(off, dtype, TARGET), x)
    assert np.array_equal(cpu[: M - off].astype(np.float64), ref)
    assert np.array_equal(npu[: M - off].astype(np.float64), ref)


def shifted_cols(off, dtype, target, store, roff=5):
    """Loads (store=False): Y[r, c] = X[r - roff, c - off] (zeros before row / column 0); stores:
    Y[r - roff, c - off] = X[r, c] + 1 for rows and columns >= 0 (8 x CB blocks)."""
    @T.prim_func
    def main(X: T.Tensor((NR, NC), dtype), Y: T.Tensor((NR, NC), dtype)):
        with T.Kernel(T.ceildiv(NC, CB), T.ceildiv(NR, 8)) as (bx, by):
            t = T.alloc_fragment((8, CB), dtype)
            if store:
                T.copy(X[by * 8, bx * CB], t)
                for i, j in T.Parallel(8, CB):
                    t[i, j] = t[i, j] + 1
                T.copy(t, Y[by * 8 - roff, bx * CB - off])
            else:
                T.copy(X[by * 8 - roff, bx * CB - off], t)
                T.copy(t, Y[by * 8, bx * CB])
    return compiled(main, target, ((NR, NC), dtype))


NR, NC, CB = 21, 100, 32


def odd_data(shape, dtype):
    return (np.arange(int(np.prod(shape))).reshape(shape) % 113 + 1).astype(np_dtype(dtype))  # exact in every dtype


# inside a block, whole blocks, the whole window, more
@pytest.mark.parametrize("off,dtype", by_size([3, 16, 32, 40], ["float32", "float16", "bfloat16", "int8"], {"bfloat16": 3}))
def test_load_from_a_negative_column_reads_zeros_there(off, dtype):
    x = odd_data((NR, NC), dtype)
    xf = x.astype(np.float64)
    ref = np.zeros((NR, NC))
    for r in range(NR):
        for c in range(NC):
            if r - 5 >= 0 and c - off >= 0:
                ref[r, c] = xf[r - 5, c - off]
    cpu = shifted_cols(off, dtype, "cpu", False)(x)
    npu = run_checked(shifted_cols(off, dtype, TARGET, False), x)
    assert np.array_equal(cpu.astype(np.float64), ref)
    assert np.array_equal(npu.astype(np.float64), ref)


# whole 32 B blocks of float32 / float16 (16, 32), inside a block (3, 19: a head of 5 / 13 float32
# columns before the next block), the whole first window (32) and more (40: the second block's
# window starts 8 before column 0, a whole block of float32 but not of float16)
@pytest.mark.parametrize("off,dtype", by_size([3, 16, 19, 32, 40], ["float32", "float16", "bfloat16", "int8", "int32"],
                                               {"bfloat16": 3, "int32": 19}))
def test_store_to_a_negative_column_drops_those_columns(off, dtype):
    x = odd_data((NR, NC), dtype)
    ref = x.astype(np.float64)[5:, off:] + 1
    cpu = shifted_cols(off, dtype, "cpu", True)(x)
    npu = run_checked(shifted_cols(off, dtype, TARGET, True), x)
    assert np.array_equal(cpu[: NR - 5, : NC - off].astype(np.float64), ref)
    assert np.array_equal(npu[: NR - 5, : NC - off].astype(np.float64), ref)


def test_store_before_column_0_inside_a_block_moves_the_head_by_the_scalar_unit():
    # the head (the columns before the first 32 B block boundary inside the tensor) is stored from a
    # one-block-per-row scratch tile under a run-time if; the rest from its block as before
    k = shifted_cols(3, "float32", TARGET, True)
    prog = k.get_source("ascend_program")
    assert "_head_" in prog and "ScalarStore" in prog, prog
    src = k.get_source("ascendc")
    assert "SetValue" in src and "GetValue" in src


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("off", [0, 3, 13, 40])  # not negative, inside a block, past one, the whole window
def test_store_before_column_0_at_a_run_time_start(off, dtype):
    # the start `bx * 24 - s` of a scalar parameter s: its range is unknown, so every store takes the
    # head path; 3-D output (a unit leading dim h) and a float16 block of 16 columns
    H, R, C, CB = 2, 6, 50, 24

    @T.prim_func
    def main(X: T.Tensor((R, C), dtype), s: T.int32, Y: T.Tensor((H, R, C), dtype)):
        with T.Kernel(T.ceildiv(C, CB), H) as (bx, h):
            t = T.alloc_fragment((R, CB), dtype)
            T.copy(X[0, bx * CB], t)
            for i, j in T.Parallel(R, CB):
                t[i, j] = t[i, j] + h
            T.copy(t, Y[h, 0, bx * CB - s])

    x = odd_data((R, C), dtype)
    ref = np.stack([x.astype(np.float64)[:, off:] + h for h in range(H)])
    cpu = compiled(main, "cpu", ((H, R, C), dtype))(x, off)
    npu = run_checked(tw.compile(main, target=TARGET, out_idx=[-1]), x, off)
    assert np.array_equal(cpu[:, :, : C - off].astype(np.float64), ref)
    assert np.array_equal(npu[:, :, : C - off].astype(np.float64), ref)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_atomic_add_before_column_0_inside_a_block(dtype):
    # Y += X shifted 5 columns left, in 16-column blocks: the first block's head (columns 5 .. 7 of
    # float32 / int32, 5 .. 15 of bfloat16) goes through the scratch tile, added as the rest is
    R, C, CB, off = 4, 40, 16, 5

    @T.prim_func
    def main(X: T.Tensor((R, C), dtype), Y: T.Tensor((R, C), dtype)):
        with T.Kernel(T.ceildiv(C, CB)) as bx:
            t = T.alloc_fragment((R, CB), dtype)
            T.copy(X[0, bx * CB], t)
            T.atomic_add(Y[0, bx * CB - off], t)

    x = odd_data((R, C), dtype)
    y0 = odd_data((R, C), dtype)[:, ::-1].copy()
    ref = y0.astype(np.float64)
    ref[:, : C - off] += x.astype(np.float64)[:, off:]
    for target in ("cpu", TARGET):
        y = y0.copy()
        k = tw.compile(main, target=target)
        k(x, y) if target == "cpu" else run_checked(k, x, y)  # Y is added into in place
        assert np.array_equal(y.astype(np.float64), ref), target


def test_expert_store_before_column_0_inside_a_block():
    # expert mode: the head's scalar moves are fenced by PipeBarrier<PIPE_ALL> (no flags of its own);
    # AIV 0 stores 3 columns before Y's column 0 (was the out-of-bounds report of test_ascend.py)
    @T.prim_func
    def main(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                T.copy(X[vid * 8, 0], a)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(a, Y[vid * 8, vid * 32 - 3])

    x = odd_data((16, 64), "float32")
    y = np.zeros((16, 64), np.float32)
    run_checked(tw.compile(main, target=TARGET), x, y)
    ref = np.zeros((16, 64))
    ref[0:8, 0:61] = x[0:8, 3:64]
    ref[8:16, 29:64] = x[8:16, 0:35]
    assert np.array_equal(y.astype(np.float64), ref)


def gemm_shifted(M, K, N, bm, a_off, c_off, dtype):
    """C[bx*bm - c_off + i] = (A[bx*bm - a_off + i] @ W) for rows >= 0 (A's rows before 0 read 0)."""
    acc = "int32" if dtype == "int8" else "float32"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K), dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_shared((bm, K), dtype)
            w = T.alloc_shared((N, K), dtype)
            c = T.alloc_fragment((bm, N), acc)
            T.clear(c)
            T.copy(A[bx * bm - a_off, 0], a)
            T.copy(W[0, 0], w)
            T.gemm(a, w, c, transpose_B=True)
            T.copy(c, C[bx * bm - c_off, 0])
    return main


def gemm_ref(a, w, a_off, c_off):
    M = a.shape[0]
    sh = np.zeros((M, a.shape[1]))
    sh[a_off:] = a.astype(np.float64)[: M - a_off]
    full = sh @ w.astype(np.float64).T
    return full[c_off:]  # rows 0 .. M - c_off - 1 of C


@pytest.mark.parametrize("a_off,c_off,dtype", by_size([(5, 0), (16, 0), (40, 0), (0, 16), (7, 32)],
                                                ["float16", "bfloat16", "float32", "int8"], {"bfloat16": (7, 32)}))
def test_gemm_operand_and_result_at_negative_rows(a_off, c_off, dtype):
    M, K, N, bm = 45, 40, 24, 16  # row tails, K not a multiple of C0 for 16-bit types
    a = randint((M, K), dtype, seed=7, low=-3, high=4)  # small integers: exact products and sums
    w = randint((N, K), dtype, seed=8, low=-3, high=4)
    ref = gemm_ref(a, w, a_off, c_off)
    k = gemm_shifted(M, K, N, bm, a_off, c_off, dtype)
    cpu = compiled(k, "cpu", ((M, N), "int32" if dtype == "int8" else "float32"))(a, w)
    npu = run_checked(tw.compile(k, target=TARGET, out_idx=[-1]), a, w)
    n = M - c_off
    assert np.array_equal(cpu[:n].astype(np.float64), ref)
    assert np.array_equal(npu[:n].astype(np.float64), ref)


def test_gemm_result_at_a_negative_row_inside_a_fractal_is_a_located_error():
    # Fixpipe's L0C source starts on a 16-row fractal: a skip of 8 rows cannot be clipped, and
    # the first block's start bx * 16 - 8 is -8 (it was a checker report at run time)
    with pytest.raises(tw.TilewrightError, match=r"(?s)test_ascend_negative_origin\.py:\d+.*first row .* lies "
                       r"before row 0 of tensor 'C' in some blocks or steps \(it can be -8\).*multiple of 16 rows"):
        tw.compile(gemm_shifted(48, 32, 16, 16, 0, 8, "float16"), target=TARGET, out_idx=[-1])


def gemm_cols(M, K, N, bm, a_coff, c_coff, dtype):
    """C[by, r, c] = sum_k A[r, k - a_coff * (1 - by)] W[c + c_coff * (1 - by), k]: grid row by = 0
    reads A from column -a_coff and stores from column -c_coff (the columns before 0 read zeros /
    are not written); by = 1 from column 0."""
    acc = "int32" if dtype == "int8" else "float32"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K), dtype), C: T.Tensor((2, M, N), acc)):
        with T.Kernel(T.ceildiv(M, bm), 2) as (bx, by):
            a = T.alloc_shared((bm, K), dtype)
            w = T.alloc_shared((N, K), dtype)
            c = T.alloc_fragment((bm, N), acc)
            T.clear(c)
            T.copy(A[bx * bm, by * a_coff - a_coff], a)
            T.copy(W[0, 0], w)
            T.gemm(a, w, c, transpose_B=True)
            T.copy(c, C[by, bx * bm, by * c_coff - c_coff])
    return main


@pytest.mark.parametrize("a_coff,c_coff,dtype", by_size([(32, 0), (64, 0), (0, 16), (32, 32), (96, 0)],
                                                ["float16", "bfloat16", "float32", "int8"], {"bfloat16": (32, 32)}))
def test_gemm_operand_and_result_at_negative_columns(a_coff, c_coff, dtype):
    # A's window skips whole C0 strips (16 / 16 / 8 / 32 columns), C's whole 16-column fractals;
    # a_coff 96 > K: the first grid row's A tile is all zeros
    M, K, N, bm = 45, 72, 48, 16
    a = randint((M, K), dtype, seed=5, low=-3, high=4)
    w = randint((N, K), dtype, seed=6, low=-3, high=4)
    af, wf = a.astype(np.float64), w.astype(np.float64)
    sh = np.zeros((M, K))
    if a_coff < K:
        sh[:, a_coff:] = af[:, : K - a_coff]
    ref0 = (sh @ wf.T)[:, c_coff:]  # grid row 0: columns 0 .. N - c_coff - 1 of C[0]
    ref1 = af @ wf.T
    k = gemm_cols(M, K, N, bm, a_coff, c_coff, dtype)
    for target in ("cpu", TARGET):
        kk = compiled(k, target, ((2, M, N), "int32" if dtype == "int8" else "float32"))
        c = kk(a, w) if target == "cpu" else run_checked(kk, a, w)
        assert np.array_equal(c[0, :, : N - c_coff].astype(np.float64), ref0), target
        assert np.array_equal(c[1].astype(np.float64), ref1), target


@pytest.mark.parametrize("a_coff,c_coff,what", [(8, 0, "first column by \\* 8 - 8 lies before column 0 of tensor 'A'"),
                                                (0, 8, "first column by \\* 8 - 8 lies before column 0 of tensor 'C'")])
def test_gemm_columns_before_0_inside_a_strip_are_located_errors(a_coff, c_coff, what):
    # float16: an Nz strip is 16 columns, an L0C fractal 16 columns: a skip of 8 cannot be clipped
    with pytest.raises(tw.TilewrightError, match=r"(?s)test_ascend_negative_origin\.py:\d+.*" + what):
        tw.compile(gemm_cols(45, 72, 48, 16, a_coff, c_coff, "float16"), target=TARGET, out_idx=[-1])


def gemm_cols_run_time(M, K, N, bm, dtype):
    """C[r, c + t] = sum_k A[r, k + s] W[c, k] with s = Off[0] * C0 (16 columns, int8 32) and
    t = Off[1] * 16 read from GM: column starts of unknown range (session 18) on both Cube paths,
    A's GM -> L1 copy (whole C0 strips) and C's Fixpipe (whole 16-column fractals)."""
    acc = "int32" if dtype == "int8" else "float32"
    c0 = 32 if dtype == "int8" else 16

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K), dtype), Off: T.Tensor((2,), "int32"),
             C: T.Tensor((M, N), acc)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            s = Off[0] * c0
            t = Off[1] * 16
            a = T.alloc_shared((bm, K), dtype)
            w = T.alloc_shared((N, K), dtype)
            c = T.alloc_fragment((bm, N), acc)
            T.clear(c)
            T.copy(A[bx * bm, s], a)
            T.copy(W[0, 0], w)
            T.gemm(a, w, c, transpose_B=True)
            T.copy(c, C[bx * bm, t])
    return main


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
@pytest.mark.parametrize("s,t", [(0, 0), (-1, 0), (-2, -1), (1, 0), (-5, 0), (0, -3), (-1, 1)])
def test_gemm_columns_at_run_time_starts_before_0(s, t, dtype):
    # the columns before 0 are skipped in whole C0 strips and L0C fractals, as for starts the bounds
    # know (a run-time start that is not a provable multiple of C0 stays the checker's report)
    c0 = 32 if dtype == "int8" else 16
    M, K, N, bm = 45, 64, 48, 16
    a = randint((M, K), dtype, seed=7, low=-3, high=4)
    w = randint((N, K), dtype, seed=8, low=-3, high=4)
    off = np.array([s, t], np.int32)
    af, wf = a.astype(np.float64), w.astype(np.float64)
    sh = np.zeros((M, K))
    for k in range(K):
        if 0 <= k + c0 * s < K:
            sh[:, k] = af[:, k + c0 * s]
    full = sh @ wf.T  # the tile's columns c land at C[:, c + 16 t]
    cpu = None
    for target in ("cpu", TARGET):
        kk = tw.compile(gemm_cols_run_time(M, K, N, bm, dtype), target=target)
        c = np.full((M, N), 5, np.int32 if dtype == "int8" else np.float32)
        kk(a, w, off, c) if target == "cpu" else run_checked(kk, a, w, off, c)
        want = np.full((M, N), 5.0)
        for col in range(N):
            if 0 <= col + 16 * t < N:
                want[:, col + 16 * t] = full[:, col]
        assert np.array_equal(c.astype(np.float64), want), target
        cpu = c if cpu is None else cpu
    assert np.array_equal(cpu, c)


def test_sliding_window_scores_read_zeros_before_the_first_key():
    # S[i, j] = Q[i] . K[bx*bq - W + j]: the key window of the first blocks starts before row 0
    S, D, bq, W = 40, 32, 16, 16

    @T.prim_func
    def main(Q: T.Tensor((S, D), "float16"), Kt: T.Tensor((S, D), "float16"), O: T.Tensor((S, W + bq), "float32")):
        with T.Kernel(T.ceildiv(S, bq)) as bx:
            q = T.alloc_shared((bq, D), "float16")
            k = T.alloc_shared((W + bq, D), "float16")
            s = T.alloc_fragment((bq, W + bq), "float32")
            T.clear(s)
            T.copy(Q[bx * bq, 0], q)
            T.copy(Kt[bx * bq - W, 0], k)
            T.gemm(q, k, s, transpose_B=True)
            T.copy(s, O[bx * bq, 0])

    rng = np.random.default_rng(2)
    q = rng.integers(-3, 4, (S, D)).astype(np.float16)
    kt = rng.integers(-3, 4, (S, D)).astype(np.float16)
    ref = np.zeros((S, W + bq))
    for i in range(S):
        for j in range(W + bq):
            kr = i // bq * bq - W + j
            if 0 <= kr < S:
                ref[i, j] = q[i].astype(np.float64) @ kt[kr].astype(np.float64)
    cpu = tw.compile(main, target="cpu", out_idx=[-1])(q, kt)
    npu = run_checked(tw.compile(main, target=TARGET, out_idx=[-1]), q, kt)
    assert np.array_equal(cpu.astype(np.float64), ref)
    assert np.array_equal(npu.astype(np.float64), ref)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_constant_starts_before_the_tensor(dtype):
    # constant negative starts (not only bx * B - off): a load at (-3, -5) and a gemm operand at
    # row -5 (an early build dropped a constant skip: a silent shift found by the differential hunt)
    M, K, N = 20, 32, 16

    @T.prim_func
    def main(X: T.Tensor((M, K), dtype), W: T.Tensor((N, K), dtype), Y: T.Tensor((16, K), dtype),
             C: T.Tensor((16, N), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((16, K), dtype)
            a = T.alloc_shared((16, K), dtype)
            w = T.alloc_shared((N, K), dtype)
            c = T.alloc_fragment((16, N), "float32")
            T.copy(X[-3, -5], t)
            T.copy(t, Y)
            T.clear(c)
            T.copy(X[-5, 0], a)
            T.copy(W, w)
            T.gemm(a, w, c, transpose_B=True)
            T.copy(c, C)

    x = randint((M, K), dtype, seed=3, low=-3, high=4)
    w = randint((N, K), dtype, seed=4, low=-3, high=4)
    xf = x.astype(np.float64)
    y_ref = np.zeros((16, K))
    y_ref[3:, 5:] = xf[:13, :K - 5]
    a_ref = np.zeros((16, K))
    a_ref[5:] = xf[:11]
    c_ref = a_ref @ w.astype(np.float64).T
    for target in ("cpu", TARGET):
        k = tw.compile(main, target=target, out_idx=[-2, -1])
        y, c = k(x, w) if target == "cpu" else run_checked(k, x, w)
        assert np.array_equal(y.astype(np.float64), y_ref), target
        assert np.array_equal(c.astype(np.float64), c_ref), target


def middle_index_load(off, h, dtype, target):
    """Y[r, c] = X[r - off, h, c] for c < n (a run-time count), zeros where r - off < 0: a window of
    a 3-D tensor whose unit leading dim starts before 0 and whose rows are the middle index's
    (fuzzer seeds 163485-163489, session 16)."""
    H, NB = 3, 8

    @T.prim_func
    def main(X: T.Tensor((M, H, N), dtype), Lens: T.Tensor((1,), "int32"), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, NB), M) as (bx, by):
            t = T.alloc_fragment((1, NB), "float32")
            n = Lens[0]
            cnt = T.min(NB, n - bx * NB)
            T.copy(X[by - off:by - off + 1, h, bx * NB:bx * NB + cnt], t)
            for i, j in T.Parallel(1, NB):
                t[i, j] = t[i, j] + 1
            T.copy(t[:, 0:cnt], Y[by:by + 1, bx * NB:bx * NB + cnt])
    return compiled(main, target, ((M, N), dtype))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("off,h,n", [(16, 2, 9), (6, 1, 16), (1, 0, 3), (40, 2, 16)])
def test_unit_leading_dim_before_row_0_reads_zeros(off, h, n, dtype):
    x = (np.arange(M * 3 * N).reshape(M, 3, N) % 251 + 1).astype(dtype)
    lens = np.array([n], dtype=np.int32)
    ref = np.ones((M, N))
    for r in range(M):
        if 0 <= r - off < M:
            ref[r] = x[r - off, h].astype(np.float64) + 1
    cpu = middle_index_load(off, h, dtype, "cpu")(x, lens)
    npu = run_checked(middle_index_load(off, h, dtype, TARGET), x, lens)
    assert np.array_equal(cpu[:, :n].astype(np.float64), ref[:, :n])
    assert np.array_equal(npu[:, :n].astype(np.float64), ref[:, :n])


@pytest.mark.parametrize("off", [3, 8, 16])
@pytest.mark.parametrize("m", [1, 5, 20])
def test_one_element_int8_window_before_the_tensor(off, m):
    # fuzzer seeds 182565-182569 (session 18): a 1-D int8 load of one element into a float32 tile,
    # staged through a 1-element int8 tile whose zero fill was an int8 Duplicate (no such call on
    # dav-c220: the simulator's API-rule report); it is a float16 Duplicate now, as for other
    # int8 tiles (the padding byte after the element is zeroed too)
    M = T.symbolic("M")

    @T.prim_func
    def main(A: T.Tensor((M,), "int8"), B: T.Tensor((M,), "int8")):
        with T.Kernel(T.ceildiv(M, 1)) as by:
            x = T.alloc_fragment((1,), "float32")
            T.copy(A[by - off], x)
            T.copy(x, B[by])

    a = randint((m,), "int8", seed=m, low=-100, high=100)
    want = np.array([a[i - off] if i >= off else 0 for i in range(m)], np.int8)
    for target in ("cpu", TARGET):
        k = tw.compile(main, target=target, out_idx=[-1])
        got = k(a) if target == "cpu" else run_checked(k, a)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("r_off,c_off", [(32, 16), (0, 16), (16, 32)])
def test_gemm_result_before_the_tensor_on_a_swizzled_grid(r_off, c_off, dtype):
    # fuzzer seed 182446 (session 18): a 2 x 5 grid is walked in panels (map_grid: bx = in_panel //
    # panel_rows), whose indices the bounds could not prove >= 0, so the Fixpipe column start
    # bx * 16 - 16 kept its unclipped copy and wrote before C (the checker's report). The grid-stride
    # index blk = cid + t * block_dim lies in [0, blocks - 1] (stride_bounds), which bounds the panel
    # indices: the start reaches -16 and is clipped in whole fractals.
    M, K, N = 65, 41, 17

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 16)) as (bx, by):
            a = T.alloc_shared((16, 16), dtype)
            b = T.alloc_shared((16, 16), dtype)
            acc = T.alloc_fragment((16, 16), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, 16), num_stages=3):
                T.copy(A[by * 16, k * 16], a)
                T.copy(B[k * 16, bx * 16], b)
                T.gemm(a, b, acc)
            T.copy(acc, C[by * 16 - r_off, bx * 16 - c_off])

    a = randint((M, K), dtype, seed=1, low=-3, high=4)
    b = randint((K, N), dtype, seed=2, low=-3, high=4)
    full = np.zeros((80, 32))
    full[:M, :N] = a.astype(np.float64) @ b.astype(np.float64)  # tiles past the end compute zeros
    want = np.full((M, N), 9.0)
    for i in range(M):
        for j in range(N):
            if i + r_off < 80 and j + c_off < 32:
                want[i, j] = full[i + r_off, j + c_off]
    for target in ("cpu", TARGET):
        c = np.full((M, N), 9.0, np.float32)
        k = tw.compile(main, target=target)
        k(a, b, c) if target == "cpu" else run_checked(k, a, b, c)
        np.testing.assert_array_equal(c.astype(np.float64), want, err_msg=target)
