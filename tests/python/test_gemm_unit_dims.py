"""T.gemm on N-D regions whose dimensions before the last two have extent 1 (docs/language.md
"T.gemm"): BHSD attention's ``Q[b, h, rows, :]``, from global tensors and from 3-D shared tiles.
The IR verifier and both targets always took them; until session 19 the front end rejected them
("must be 2-D"). Other layouts (a matrix in dimensions that are not the last two, a non-unit extra
dimension) are a located error naming the fix.

Every test compares cpu and ascend910b (simulator with the checker: no report) with a float64
reference. Inputs are small integers (and halves), exact in every dtype, and the sums stay exact in
float32: the comparisons are exact."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import ACC, TARGET, exact_values as values, run_both



def scores_global(B, H, S, L, D, bm, dtype):
    """S = Q[b, h] @ K[b, h]^T per (b, h) and row block, operands straight from the 4-D tensors."""
    acc = ACC[dtype]

    def build(target):
        @T.prim_func
        def main(Q: T.Tensor((B, H, S, D), dtype), K: T.Tensor((B, H, L, D), dtype),
                 O: T.Tensor((B, H, S, L), acc)):
            with T.Kernel(T.ceildiv(S, bm), H, B) as (bx, by, bz):
                c = T.alloc_fragment((bm, L), acc)
                T.gemm(Q[bz, by, bx * bm:bx * bm + bm, 0:D], K[bz, by, 0:L, :], c,
                       transpose_B=True, clear_accum=True)
                T.copy(c, O[bz, by, bx * bm:bx * bm + bm, 0:L])
        return tw.compile(main, target=target, out_idx=[])
    return build


def scores_shared(B, H, S, L, D, bl, dtype):
    """The same through 3-D shared tiles: K in blocks of bl rows into the two slots of a
    (2, bl, D) tile, each slot a gemm operand K_s[slot, :, :] (a leading unit dim); Q into a
    (1, S, D) tile read whole."""
    acc = ACC[dtype]

    def build(target):
        @T.prim_func
        def main(Q: T.Tensor((B, H, S, D), dtype), K: T.Tensor((B, H, L, D), dtype),
                 O: T.Tensor((B, H, S, L), acc)):
            with T.Kernel(H, B) as (bx, by):
                q_s = T.alloc_shared((1, S, D), dtype)
                k_s = T.alloc_shared((2, bl, D), dtype)
                c = T.alloc_fragment((S, bl), acc)
                T.copy(Q[by, bx:bx + 1, 0:S, 0:D], q_s)
                for j in T.serial(L // bl):
                    T.copy(K[by, bx, j * bl:j * bl + bl, 0:D], k_s[j % 2, 0:bl, 0:D])
                    T.gemm(q_s, k_s[j % 2, :, :], c, transpose_B=True, clear_accum=True)
                    T.copy(c, O[by, bx, 0:S, j * bl:j * bl + bl])
        return tw.compile(main, target=target, out_idx=[])
    return build


def scores_bshd(B, S, H, L, D, dtype):
    """BSHD tensors (the matrix in dimensions 1 and 3): the fix the error names, T.copy of each
    slice into a 2-D tile, then the gemm on the tiles."""
    acc = ACC[dtype]

    def build(target):
        @T.prim_func
        def main(Q: T.Tensor((B, S, H, D), dtype), K: T.Tensor((B, L, H, D), dtype),
                 O: T.Tensor((B, H, S, L), acc)):
            with T.Kernel(H, B) as (bx, by):
                q_s = T.alloc_shared((S, D), dtype)
                k_s = T.alloc_shared((L, D), dtype)
                c = T.alloc_fragment((S, L), acc)
                T.copy(Q[by, 0:S, bx, 0:D], q_s)
                T.copy(K[by, 0:L, bx, 0:D], k_s)
                T.gemm(q_s, k_s, c, transpose_B=True, clear_accum=True)
                T.copy(c, O[by, bx, 0:S, 0:L])
        return tw.compile(main, target=target, out_idx=[])
    return build


def reference(q, k):
    return np.einsum("bhsd,bhld->bhsl", q.astype(np.float64), k.astype(np.float64))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8"])
@pytest.mark.parametrize("B,H,S,L,D,bm", [(2, 3, 17, 33, 40, 16), (1, 1, 1, 1, 1, 1), (1, 2, 5, 16, 24, 5)])
def test_bhsd_operands_from_global_tensors(dtype, B, H, S, L, D, bm):
    rng = np.random.default_rng(7)
    q, k = values((B, H, S, D), dtype, rng), values((B, H, L, D), dtype, rng)
    o = np.full((B, H, S, L), -99, dtype=tw.testing.np_dtype(ACC[dtype]))
    res = run_both(scores_global(B, H, S, L, D, bm, dtype), [q, k, o], [2])
    ref = reference(q, k)
    for target, (got,) in res.items():
        np.testing.assert_array_equal(got.astype(np.float64), ref, err_msg=target)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8"])
@pytest.mark.parametrize("B,H,S,L,D,bl", [(2, 2, 16, 64, 32, 32), (1, 3, 7, 48, 24, 16)])
def test_bhsd_operands_through_3d_shared_tiles(dtype, B, H, S, L, D, bl):
    rng = np.random.default_rng(11)
    q, k = values((B, H, S, D), dtype, rng), values((B, H, L, D), dtype, rng)
    o = np.full((B, H, S, L), -99, dtype=tw.testing.np_dtype(ACC[dtype]))
    res = run_both(scores_shared(B, H, S, L, D, bl, dtype), [q, k, o], [2])
    ref = reference(q, k)
    for target, (got,) in res.items():
        np.testing.assert_array_equal(got.astype(np.float64), ref, err_msg=target)


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_bshd_operands_through_the_copy_the_error_names(dtype):
    B, S, H, L, D = 2, 9, 3, 32, 40
    rng = np.random.default_rng(13)
    q, k = values((B, S, H, D), dtype, rng), values((B, L, H, D), dtype, rng)
    o = np.full((B, H, S, L), -99, dtype=tw.testing.np_dtype(ACC[dtype]))
    res = run_both(scores_bshd(B, S, H, L, D, dtype), [q, k, o], [2])
    ref = np.einsum("bshd,blhd->bhsl", q.astype(np.float64), k.astype(np.float64))
    for target, (got,) in res.items():
        np.testing.assert_array_equal(got.astype(np.float64), ref, err_msg=target)


def bad_kernel(kind):
    if kind == "non_unit":
        @T.prim_func
        def main(Q: T.Tensor((2, 16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as bx:
                c = T.alloc_fragment((16, 16), "float32")
                T.gemm(Q[0:2, 0:16, 0:16], Q[0, 0:16, 0:16], c, clear_accum=True)
                T.copy(c, C)
    elif kind == "bshd":
        @T.prim_func
        def main(Q: T.Tensor((1, 16, 2, 16), "float16"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as bx:
                c = T.alloc_fragment((16, 16), "float32")
                T.gemm(Q[0, 0:16, 1, 0:16], Q[0, 0:16, 0, 0:16], c, transpose_B=True, clear_accum=True)
                T.copy(c, C)
    else:
        @T.prim_func
        def main(Q: T.Tensor((16,), "float16"), P: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as bx:
                c = T.alloc_fragment((16, 16), "float32")
                T.gemm(Q[0:16], P, c, clear_accum=True)
                T.copy(c, C)
    return main


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("kind,words", [
    ("non_unit", ["operand A ('Q')", "dimension 0 of 3 has extent 2", "index dimension 0 with one value"]),
    ("bshd", ["operand A ('Q') is a matrix in dimensions (1, 3) of 4", "T.copy the slice into a 2-D tile"]),
    ("one_d", ["operand A ('Q')", "must be a matrix (2-D region), got 1 dimension", "slice two dimensions"]),
])
def test_other_layouts_are_a_located_error_with_the_fix(target, kind, words):
    with pytest.raises(tw.TilewrightError) as ei:
        tw.compile(bad_kernel(kind), target=target)  # the front end may raise while parsing
    text = str(ei.value)
    for w in words:
        assert w in text, text
    assert ei.value.source_line.strip().startswith("T.gemm("), ei.value.source_line
