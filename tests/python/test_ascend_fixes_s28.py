"""hunt14 F5 / hunt15 F3 on ascend910b (session 28, h-fix17; docs/ascend.md "Session 28: gemm
epilogues in row groups, messages at the user's tiles (h-fix17)").

F5 (2): a gemm -> residual epilogue whose vector tiles overflow the UB (acc's Vector copy, r and out:
3 x 64 KiB per AIV at 128 x 256 float32) runs its block's rows in groups (split_rows takes a gemm
whose A and C are row tiles as a row statement: row i of C is row i of A times B), the Cube's gemm
included. The kernels run on cpu and ascend910b (the simulator's checker on) against float64.
F5 (1) / hunt15 F3: capacity messages and the column-copy hint name the user's tiles at the shapes the
kernel declares (split_cube_vector records, per tile it makes or halves, the user's tile and the
factor: BufferNode::part_of), not each Vector core's half.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    out = kernel(*args) if target == "cpu" else run_checked(kernel, *args)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _f64(x):
    return np.asarray(x, np.float64)


def _operands(M, N, K):
    # multiples of 1/16: exact in float32 in any summation order
    rng = np.random.default_rng(M + N)
    a = (rng.integers(-4, 5, (M, K)) / 4.0).astype(np.float16)
    b = (rng.integers(-4, 5, (K, N)) / 4.0).astype(np.float16)
    rz = rng.integers(-4, 5, (M, N)).astype(np.float32)
    return a, b, rz


# ---------------------------------------------------------------------------------------------
# F5 (2): the epilogue of a K loop (T.Pipelined, the gemm accumulating) in row groups.

@tw.jit(out_idx=[-1])
def gemm_residual_k_loop(M, N, K, bm, bn, bk):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Rz: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            r = T.alloc_fragment((bm, bn), "float32")
            out = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, acc)
            T.copy(Rz[by * bm, bx * bn], r)
            for i, j in T.Parallel(bm, bn):
                out[i, j] = acc[i, j] * 0.5 + r[i, j]
            T.copy(out, C[by * bm, bx * bn])

    return main


def test_gemm_residual_k_loop_runs_in_row_groups():
    """129 x 256 (a 1-row tail block), K 64 in two steps of 32, blocks 128 x 256: with all
    rows acc's copy, r and out overflow each AIV's UB by 256 B; the rows run 64 at a time (the K loop whole
    in each group) and cpu and ascend910b equal float64 exactly."""
    M, N, K = 129, 256, 64
    a, b, rz = _operands(M, N, K)
    ref = (_f64(a) @ _f64(b)) * 0.5 + rz
    for target in TARGETS:
        k = gemm_residual_k_loop(M, N, K, 128, 256, 32, target=target)
        (c,) = _run(k, target, a, b, rz)
        np.testing.assert_array_equal(_f64(c), ref, err_msg=target)
        if target == TARGET:
            notes = " | ".join(str(n) for n in k.notes)
            assert "the block's 128 rows run 64 at a time" in notes, notes


# ---------------------------------------------------------------------------------------------
# F5 (1): a mixed kernel's UB overflow that stays (A transposed: row i of C is not row i of A) names
# acc, r and out as declared (128 x 256), what each AIV holds, and hints at the user's tiles.

@tw.jit(out_idx=[-1])
def gemm_t_residual(M, N, K, bm, bn):
    @T.prim_func
    def main(AT: T.Tensor((K, M), "float16"), B: T.Tensor((K, N), "float16"), Rz: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_shared((K, bm), "float16")
            b = T.alloc_shared((K, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            r = T.alloc_fragment((bm, bn), "float32")
            out = T.alloc_fragment((bm, bn), "float32")
            T.copy(AT[0, by * bm], a)
            T.copy(B[0, bx * bn], b)
            T.gemm(a, b, acc, transpose_A=True, clear_accum=True)
            T.copy(Rz[by * bm, bx * bn], r)
            for i, j in T.Parallel(bm, bn):
                out[i, j] = acc[i, j] * 0.5 + r[i, j]
            T.copy(out, C[by * bm, bx * bn])

    return main


def test_overflow_names_the_users_tiles_at_their_declared_shapes():
    with pytest.raises(tw.TilewrightError) as e:
        gemm_t_residual(128, 256, 32, 128, 256, target=TARGET)
    msg, hint = e.value.message, e.value.hint
    assert re.search(r"acc \(128x256 float32, line \d+; as acc_ub, each AIV 64 of its 128 rows: 64x256, 65536 B\)",
                     msg), msg
    assert re.search(r"r \(128x256 float32, line \d+; each AIV 64 of its 128 rows: 64x256, 65536 B\)", msg), msg
    assert "acc_ub" not in hint, hint
    shapes = dict(p.rsplit(" ", 1) for p in re.match(r"a smaller tile that fits: (.*?) \(", hint).group(1).split(", "))
    assert shapes == {"acc": "64x256", "r": "64x256", "out": "64x256"}, hint
    assert "128 -> 64" in hint, hint
    assert "(a gemm whose A and C are not whole row tiles with A untransposed" in hint, hint


# ---------------------------------------------------------------------------------------------
# hunt15 F3: a strided GM column into a 1-D tile of 16 rows, split 8 per AIV: the hint's column tile is
# the user's (16, 1), and the message names the tile as declared.

from test_hunt_s27 import paged_int8_token_scales  # noqa: E402  (hunt15 F3's kernel)


def test_column_into_1d_tile_hint_names_the_declared_rows():
    with pytest.raises(tw.TilewrightError) as e:
        paged_int8_token_scales(2, 4, 2, 64, 6, 16, 2, "float16", column=False, target=TARGET)
    assert "declare the tile as a column, shape (16, 1)" in e.value.hint, e.value.hint
    assert "of tile 'ks', declared (16,): each of the 2 Vector cores copies 8 of its 16" in e.value.message, \
        e.value.message
