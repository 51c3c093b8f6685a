"""T.gemm on global tensors on ascend910b (docs/ascend.md "Gemm operands in global tensors"): the
cpu kernel runs unchanged, its A / B operands staged through L1 tiles (stage_gemm_operands), K in
pipelined chunks when it is long. Until session 19 it was an error at the gemm's line.

Every test compares cpu and ascend910b (simulator with the checker: no report) with a float64
reference. Inputs are small integers (and halves), exact in every dtype, and K stays small enough
that every float32 sum is exact: the comparisons are exact."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import ACC, TARGET, exact_values as values, run_both, run_checked
from tw_test_util import pairwise



def f64(x):
    return x.astype(np.float64)


def mat(x, t):
    return f64(x).T if t else f64(x)


def gemm_global(M, N, K, dtype, ta, tb, clear):
    """One block: C = op(A) @ op(B) with A and B straight from the tensors into a fragment, cleared
    by the gemm (clear_accum=True) or by T.clear before it (the gemm accumulates)."""
    acc = ACC[dtype]
    ash = (K, M) if ta else (M, K)
    bsh = (N, K) if tb else (K, N)

    def build(target):
        if clear:
            @T.prim_func
            def main(A: T.Tensor(ash, dtype), B: T.Tensor(bsh, dtype), C: T.Tensor((M, N), acc)):
                with T.Kernel(1) as bx:
                    c = T.alloc_fragment((M, N), acc)
                    T.gemm(A, B, c, transpose_A=ta, transpose_B=tb, clear_accum=True)
                    T.copy(c, C)
        else:
            @T.prim_func
            def main(A: T.Tensor(ash, dtype), B: T.Tensor(bsh, dtype), C: T.Tensor((M, N), acc)):
                with T.Kernel(1) as bx:
                    c = T.alloc_fragment((M, N), acc)
                    T.clear(c)
                    T.gemm(A, B, c, transpose_A=ta, transpose_B=tb)
                    T.copy(c, C)
        return tw.compile(main, target=target, out_idx=[])
    return build, ash, bsh


# The Cube's transposing L1 -> L0 loads (LoadData) take 16-bit types (and 32-bit ones into L0B):
# the same located error as for tiles staged by the user (docs/ascend.md "Gemm operands in
# global tensors"); cpu runs them all.
def unsupported(dtype, ta, tb):
    return (dtype == "int8" and (ta or not tb)) or (dtype == "float32" and ta)


# every (dtype, transposes) pair, each with a cleared and an accumulating C in turn (tw_test_util.pairwise),
# and int8's one supported form cleared too (pairwise gives it only accumulating): 17 cases, not the 32 of
# the product (session 27, h-citrim15: CI time)
@pytest.mark.parametrize("dtype,ta,tb,clear", [(d, *t, c) for d, t, c in pairwise(
    ["float16", "bfloat16", "float32", "int8"], [(False, False), (False, True), (True, False), (True, True)], [True, False])]
    + [("int8", False, True, True)])
def test_dtypes_transposes_and_accumulation(dtype, ta, tb, clear):
    M, N, K = 17, 33, 40
    build, ash, bsh = gemm_global(M, N, K, dtype, ta, tb, clear)
    rng = np.random.default_rng(1)
    a, b = values(ash, dtype, rng), values(bsh, dtype, rng)
    c0 = np.zeros((M, N), tw.testing.np_dtype(ACC[dtype]))
    ref = mat(a, ta) @ mat(b, tb)
    if unsupported(dtype, ta, tb):
        with pytest.raises(tw.TilewrightError, match="needs a transposing load"):
            build(TARGET)
        return
    got = run_both(build, [a, b, c0], [2])
    for target, (c,) in got.items():
        np.testing.assert_array_equal(f64(c), ref, err_msg=target)


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (1, 16, 1), (16, 1, 17), (15, 17, 1), (2, 3, 33), (64, 48, 1000)])
@pytest.mark.parametrize("clear", [True, False])
def test_odd_shapes_and_k_chunks(M, N, K, clear):
    # K = 1000 in float16: the staged tiles of 64 + 48 rows take 224 B a K column, so K is walked
    # in chunks of 288 (kStageBytes) with a last chunk of 136 (a run-time extent)
    build, ash, bsh = gemm_global(M, N, K, "float16", False, True, clear)
    rng = np.random.default_rng(2)
    a, b = values(ash, "float16", rng), values(bsh, "float16", rng)
    c0 = np.zeros((M, N), np.float32)
    ref = f64(a) @ f64(b).T
    for target, (c,) in run_both(build, [a, b, c0], [2]).items():
        np.testing.assert_array_equal(f64(c), ref, err_msg=target)


@pytest.mark.parametrize("dtype,ta,tb,M,N,K", [
    ("float16", True, False, 48, 80, 1000),    # A K x M and B K x N: chunks of rows, a row tail
    ("bfloat16", False, False, 128, 128, 777),
    ("float32", False, True, 64, 64, 600),     # chunks of 128, a tail of 88
    ("int8", False, True, 96, 64, 1500),       # K fractal 32: chunks of 384, a tail of 348
    ("float16", True, True, 16, 16, 4100),     # chunks of 1024, a tail of 4
])
def test_k_chunks_in_every_orientation(dtype, ta, tb, M, N, K):
    build, ash, bsh = gemm_global(M, N, K, dtype, ta, tb, True)
    rng = np.random.default_rng(K)
    a, b = values(ash, dtype, rng), values(bsh, dtype, rng)
    c0 = np.zeros((M, N), tw.testing.np_dtype(ACC[dtype]))
    ref = mat(a, ta) @ mat(b, tb)
    for target, (c,) in run_both(build, [a, b, c0], [2]).items():
        np.testing.assert_array_equal(f64(c), ref, err_msg=target)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8"])
@pytest.mark.parametrize("pipelined", [False, True])
def test_gridded_slices_accumulated_by_a_k_loop(dtype, pipelined):
    # the usual cpu port: every block multiplies its slices of A and B straight from the tensors,
    # K in steps of bk by a loop, into its accumulator
    M, N, K, bm, bn, bk = 48, 64, 96, 16, 32, 32
    acc = ACC[dtype]
    tb = dtype == "int8"   # int8 B: N x K (the load into L0B transposes 16- and 32-bit types only)
    bsh = (N, K) if tb else (K, N)

    def build(target):
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor(bsh, dtype), C: T.Tensor((M, N), acc)):
            with T.Kernel(N // bn, M // bm) as (bx, by):
                c = T.alloc_fragment((bm, bn), acc)
                T.clear(c)
                if pipelined:
                    for k in T.Pipelined(K // bk, num_stages=2):
                        if tb:
                            T.gemm(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk],
                                   B[bx * bn:(bx + 1) * bn, k * bk:(k + 1) * bk], c, transpose_B=True)
                        else:
                            T.gemm(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk],
                                   B[k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn], c)
                else:
                    for k in T.serial(K // bk):
                        if tb:
                            T.gemm(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk],
                                   B[bx * bn:(bx + 1) * bn, k * bk:(k + 1) * bk], c, transpose_B=True)
                        else:
                            T.gemm(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk],
                                   B[k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn], c)
                T.copy(c, C[by * bm, bx * bn])
        return tw.compile(main, target=target, out_idx=[])
    rng = np.random.default_rng(3)
    a, b = values((M, K), dtype, rng), values(bsh, dtype, rng)
    c0 = np.zeros((M, N), tw.testing.np_dtype(acc))
    ref = f64(a) @ mat(b, tb)
    for target, (c,) in run_both(build, [a, b, c0], [2]).items():
        np.testing.assert_array_equal(f64(c), ref, err_msg=target)


@pytest.mark.parametrize("K", [64, 512])
def test_one_operand_global_the_other_a_tile(K):
    # A staged by the user (shared tile), B read from the tensor; K = 512 in float32 is walked in
    # chunks that divide the tile's K
    M, N = 32, 48

    def build(target):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((M, K), "float32")
                c = T.alloc_fragment((M, N), "float32")
                T.copy(A, a)
                T.gemm(a, B, c, transpose_B=True, clear_accum=True)
                T.copy(c, C)
        return tw.compile(main, target=target, out_idx=[])
    rng = np.random.default_rng(4)
    a, b = values((M, K), "float32", rng), values((N, K), "float32", rng)
    c0 = np.zeros((M, N), np.float32)
    ref = f64(a) @ f64(b).T
    for target, (c,) in run_both(build, [a, b, c0], [2]).items():
        np.testing.assert_array_equal(f64(c), ref, err_msg=target)


def test_docs_int8_example_gives_the_transposing_load_error_with_the_fix():
    # docs/language.md's gemm_i8 example (operands straight from global tensors, B int8 K x N): the
    # Cube's L1 -> L0B load of an int8 K x N tile would transpose, which LoadData does not do for
    # 8-bit types: the error of the tile path, at the gemm, naming B as N x K; that form runs
    @T.prim_func
    def gemm_i8(A: T.Tensor((4, 8), "int8"), B: T.Tensor((8, 4), "int8"), C: T.Tensor((4, 4), "int32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((4, 4), "int32")
            T.gemm(A, B, acc, clear_accum=True)  # @i8_gemm
            T.copy(acc, C)

    @T.prim_func
    def gemm_i8_nt(A: T.Tensor((4, 8), "int8"), B: T.Tensor((4, 8), "int8"), C: T.Tensor((4, 4), "int32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((4, 4), "int32")
            T.gemm(A, B, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, C)
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(gemm_i8, target=TARGET, out_idx=[-1])
    msg = str(e.value)
    assert f":{line_of('# @i8_gemm')}:" in msg, msg
    assert "store B as NxK (transpose_B=True)" in msg, msg
    rng = np.random.default_rng(6)
    a, b = values((4, 8), "int8", rng), values((4, 8), "int8", rng)
    for target in ("cpu", TARGET):
        k = tw.compile(gemm_i8_nt, target=target, out_idx=[-1])
        c = k(a, b) if target == "cpu" else run_checked(k, a, b)  # one output: the array
        np.testing.assert_array_equal(np.asarray(c), a.astype(np.int32) @ b.astype(np.int32).T, err_msg=target)


def line_of(tag):
    return [i for i, s in enumerate(open(__file__).read().splitlines(), 1) if s.endswith(tag)][0]


def test_staged_operands_past_l1_are_an_error_at_the_gemm():
    # 2048 + 2048 float32 rows: 16 KiB a K column, two stages of the smallest K step (16) fill L1
    @T.prim_func
    def main(A: T.Tensor((2048, 64), "float32"), B: T.Tensor((64, 2048), "float32"), C: T.Tensor((2048, 2048), "float32")):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((2048, 2048), "float32")
            T.gemm(A, B, c, clear_accum=True)  # @big_ab
            T.copy(c, C)
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(main, target=TARGET, out_idx=[])
    msg = str(e.value)
    assert f":{line_of('# @big_ab')}:" in msg, msg
    assert "do not fit L1 (511 KiB)" in msg and "gemm blocks of at most 256 rows and 256 columns" in msg, msg


@pytest.mark.parametrize("bm,bn", [(128, 64), (64, 128)])
@pytest.mark.parametrize("staged", [False, True])
def test_two_gemms_in_a_row_whose_l0_steps_take_more_than_half_of_l0(bm, bn, staged):
    # Two gemms into one accumulator, each with K steps of more than half of L0A (bm = 128: 2 x
    # 128 x 80 float16) or L0B (bn = 128): their L0 tiles are never used together. Until session
    # 19 (h-ascend7b) plan_memory's loop-carried check compared each read of one slot with the
    # whole two-slot tile, kept both tiles live through the grid loop and reported an L0 overflow.
    # Whole-K gemms of global slices (K = 1000 in pipelined chunks), or tiles staged by hand in two
    # T.Pipelined loops (K steps of 160).
    M, N, K, bk = 2 * bm, 2 * bn, 1000 if not staged else 960, 160
    dt = "float16"

    def build(target):
        if not staged:
            @T.prim_func
            def main(A: T.Tensor((M, K), dt), B: T.Tensor((K, N), dt), A2: T.Tensor((M, K), dt),
                     B2: T.Tensor((K, N), dt), C: T.Tensor((M, N), "float32")):
                with T.Kernel(N // bn, M // bm) as (bx, by):
                    c = T.alloc_fragment((bm, bn), "float32")
                    T.gemm(A[by * bm:(by + 1) * bm, :], B[:, bx * bn:(bx + 1) * bn], c, clear_accum=True)
                    T.gemm(A2[by * bm:(by + 1) * bm, :], B2[:, bx * bn:(bx + 1) * bn], c)
                    T.copy(c, C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
        else:
            @T.prim_func
            def main(A: T.Tensor((M, K), dt), B: T.Tensor((K, N), dt), A2: T.Tensor((M, K), dt),
                     B2: T.Tensor((K, N), dt), C: T.Tensor((M, N), "float32")):
                with T.Kernel(N // bn, M // bm) as (bx, by):
                    a = T.alloc_shared((bm, bk), dt)
                    b = T.alloc_shared((bk, bn), dt)
                    a2 = T.alloc_shared((bm, bk), dt)
                    b2 = T.alloc_shared((bk, bn), dt)
                    c = T.alloc_fragment((bm, bn), "float32")
                    T.clear(c)
                    for k in T.Pipelined(K // bk, num_stages=2):
                        T.copy(A[by * bm, k * bk], a)
                        T.copy(B[k * bk, bx * bn], b)
                        T.gemm(a, b, c)
                    for k in T.Pipelined(K // bk, num_stages=2):
                        T.copy(A2[by * bm, k * bk], a2)
                        T.copy(B2[k * bk, bx * bn], b2)
                        T.gemm(a2, b2, c)
                    T.copy(c, C[by * bm, bx * bn])
        return tw.compile(main, target=target, out_idx=[])
    rng = np.random.default_rng(9)
    a, a2 = values((M, K), dt, rng), values((M, K), dt, rng)
    b, b2 = values((K, N), dt, rng), values((K, N), dt, rng)
    c0 = np.zeros((M, N), np.float32)
    ref = f64(a) @ f64(b) + f64(a2) @ f64(b2)
    for target, (c,) in run_both(build, [a, b, a2, b2, c0], [4]).items():
        np.testing.assert_array_equal(f64(c), ref, err_msg=target)


# An L0 K step that does not divide K (docs/ascend.md "Session 20: ... (h-ascendk8)"): when two
# L0A / L0B tiles of all of K do not fit and no multiple of the K fractal (16, 32 for int8) that
# fits divides K, expand_gemm takes the largest multiple that fits and a shorter last step (the
# last Mmad's k is the K left). Until session 20 "no K step fits ..." (tests/python/test_hunt_s20.py).
# Blocks of bm x bn; chunk: the user's K loop over slices of chunk columns (None: one whole-K gemm).
# The L1 and L0 steps are named in the comments (ascend910b: kStageBytes 64 KiB, L0A / L0B 64 KiB).
@pytest.mark.parametrize("dtype,K,bm,bn,tb,chunk", [
    ("float16", 600, 32, 16, True, None),     # all of K in L1; L0 steps 512 + 88
    ("bfloat16", 600, 32, 16, False, None),   # the same, B K x N
    ("float32", 200, 16, 64, True, None),     # L0 steps 128 + 72
    ("float32", 200, 16, 64, False, None),    # B K x N (the 32-bit transposing load), 128 + 72
    ("int8", 600, 64, 16, True, None),        # K fractal 32: 512 + 88
    ("float16", 1000, 32, 16, True, None),    # L1 chunks 672 + 328 (run-time tail), L0 steps of 336
    ("float16", 17, 32, 16, False, None),     # one step of 17
    ("int8", 17, 64, 16, True, None),
    ("float32", 600, 16, 64, True, 200),      # a K loop of 3 gemms of K 200: L0 steps 128 + 72
    ("bfloat16", 1200, 32, 16, False, 600),   # 2 gemms of K 600: 512 + 88
    ("int8", 1200, 64, 16, True, 600),        # 2 gemms of K 600: 512 + 88
])
def test_l0_k_step_not_dividing_k(dtype, K, bm, bn, tb, chunk):
    M, N = 2 * bm, 2 * bn   # whole blocks: on cpu a gemm on a slice past the tensor is out of bounds
    acc = ACC[dtype]
    bsh = (N, K) if tb else (K, N)
    ck = chunk or K

    def build(target):
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor(bsh, dtype), C: T.Tensor((M, N), acc)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
                c = T.alloc_fragment((bm, bn), acc)
                T.clear(c)
                for k in T.serial(T.ceildiv(K, ck)):
                    if tb:
                        T.gemm(A[by * bm:(by + 1) * bm, k * ck:(k + 1) * ck],
                               B[bx * bn:(bx + 1) * bn, k * ck:(k + 1) * ck], c, transpose_B=True)
                    else:
                        T.gemm(A[by * bm:(by + 1) * bm, k * ck:(k + 1) * ck],
                               B[k * ck:(k + 1) * ck, bx * bn:(bx + 1) * bn], c)
                T.copy(c, C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
        return tw.compile(main, target=target, out_idx=[])
    rng = np.random.default_rng(K + bm)
    a, b = values((M, K), dtype, rng), values(bsh, dtype, rng)
    c0 = np.zeros((M, N), tw.testing.np_dtype(acc))
    ref = f64(a) @ mat(b, tb)
    for target, (c,) in run_both(build, [a, b, c0], [2]).items():
        np.testing.assert_array_equal(f64(c), ref, err_msg=target)
