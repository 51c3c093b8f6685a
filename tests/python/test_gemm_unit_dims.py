"""T.gemm on N-D regions (docs/language.md "T.gemm"): BHSD attention's ``Q[b, h, rows, :]`` (the
dimensions before the last two of extent 1), from global tensors and from 3-D shared tiles; and,
since session 20, BSHD's ``Q[b, rows, h, :]`` from global tensors (the rows a stride H * D apart:
a strided view on cpu, staged through L1 on ascend910b). Other layouts (columns not in the last
dimension, a tile's matrix outside its last two dimensions, a non-unit extra dimension) are a
located error naming the fix.

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
    """BSHD tensors (the matrix in dimensions 1 and 3) through 2-D tiles: T.copy of each slice into
    a tile, then the gemm on the tiles (what a kernel wrote before session 20, and still the fix the
    errors name for layouts the gemm does not take)."""
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


def bshd_global(Bt, S, H, L, D, bm, dtype, ta, tb):
    """O[b, h] = op(A) @ op(B) per (b, h) and row block, both operands straight from BSHD-like 4-D
    tensors (the matrix in dimensions 1 and 3): A is Q[b, r0:r0 + bm, h, :] (ta: its transpose,
    stored (B, D, H, S), the row start in dimension 3), B is K[b, 0:L, h, :] transposed (tb) or
    stored (B, D, H, L). Row starts are run-time values (bx * bm); the last block of S % bm rows is
    a gemm of its own (a tail inside the tensor; regions past it are test_gemm_global_clip.py's)."""
    acc = ACC[dtype]
    a_shape = (Bt, D, H, S) if ta else (Bt, S, H, D)
    b_shape = (Bt, L, H, D) if tb else (Bt, D, H, L)
    full, tail = S // bm, S % bm
    ra, ca = (0, 1) if ta else (1, 0)  # the dimension of A that holds the row start
    a0, a1 = (D, bm) if ta else (bm, D)
    t0, t1 = (D, max(tail, 1)) if ta else (max(tail, 1), D)
    b0, b1 = (L, D) if tb else (D, L)

    def build(target):
        @T.prim_func
        def main(A: T.Tensor(a_shape, dtype), Bm: T.Tensor(b_shape, dtype), O: T.Tensor((Bt, H, S, L), acc)):
            with T.Kernel(T.ceildiv(S, bm), H, Bt) as (bx, by, bz):
                r0 = bx * bm
                if bx < full:
                    c = T.alloc_fragment((bm, L), acc)
                    T.gemm(A[bz, r0 * ra:r0 * ra + a0, by, r0 * ca:r0 * ca + a1], Bm[bz, 0:b0, by, 0:b1], c,
                           transpose_A=ta, transpose_B=tb, clear_accum=True)
                    T.copy(c, O[bz, by, r0:r0 + bm, 0:L])
                if tail:
                    if bx == full:
                        ct = T.alloc_fragment((max(tail, 1), L), acc)
                        T.gemm(A[bz, r0 * ra:r0 * ra + t0, by, r0 * ca:r0 * ca + t1], Bm[bz, 0:b0, by, 0:b1], ct,
                               transpose_A=ta, transpose_B=tb, clear_accum=True)
                        T.copy(ct, O[bz, by, r0:r0 + tail, 0:L])
        return tw.compile(main, target=target, out_idx=[])
    return build


def bshd_attention_block(Bt, S, H, L, D, dtype):
    """Both gemms of an attention block on BSHD tensors: scores = Q[b, :, h, :] @ K[b, :, h, :]^T
    accumulated over two halves of D (a clear, then an accumulating gemm on column windows of the
    global regions), cast into a shared tile, then O = P @ V[b, :, h, :] with V's rows strided."""
    acc = ACC[dtype]
    half = D // 2

    def build(target):
        @T.prim_func
        def main(Q: T.Tensor((Bt, S, H, D), dtype), K: T.Tensor((Bt, L, H, D), dtype),
                 V: T.Tensor((Bt, L, H, D), dtype), O: T.Tensor((Bt, S, H, D), acc)):
            with T.Kernel(H, Bt) as (bx, by):
                s = T.alloc_fragment((S, L), acc)
                p = T.alloc_shared((S, L), dtype)
                o = T.alloc_fragment((S, D), acc)
                T.gemm(Q[by, 0:S, bx, 0:half], K[by, 0:L, bx, 0:half], s, transpose_B=True, clear_accum=True)
                T.gemm(Q[by, 0:S, bx, half:D], K[by, 0:L, bx, half:D], s, transpose_B=True)
                T.copy(s, p)
                T.gemm(p, V[by, 0:L, bx, 0:D], o, clear_accum=True)
                T.copy(o, O[by, 0:S, bx, 0:D])
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
def test_bshd_operands_through_2d_tiles(dtype):
    B, S, H, L, D = 2, 9, 3, 32, 40
    rng = np.random.default_rng(13)
    q, k = values((B, S, H, D), dtype, rng), values((B, L, H, D), dtype, rng)
    o = np.full((B, H, S, L), -99, dtype=tw.testing.np_dtype(ACC[dtype]))
    res = run_both(scores_bshd(B, S, H, L, D, dtype), [q, k, o], [2])
    ref = np.einsum("bshd,blhd->bhsl", q.astype(np.float64), k.astype(np.float64))
    for target, (got,) in res.items():
        np.testing.assert_array_equal(got.astype(np.float64), ref, err_msg=target)


# the transposes ascend910b's Cube takes (docs/language.md "T.gemm"; the others are a located
# error there): 16-bit types every one, float32 no transpose_A, int8 only A M x K and B N x K
BSHD_CASES = [(t, ta, tb) for t in ("float16", "bfloat16", "float32", "int8")
              for ta, tb in ((False, True), (False, False), (True, False), (True, True))
              if not (t == "float32" and ta) and not (t == "int8" and (ta or not tb))]


@pytest.mark.parametrize("dtype,ta,tb", BSHD_CASES)
@pytest.mark.parametrize("Bt,S,H,L,D,bm", [(2, 17, 3, 33, 40, 8), (1, 1, 1, 1, 8, 1), (1, 5, 3, 16, 128, 3)])
def test_bshd_operands_from_global_tensors(dtype, ta, tb, Bt, S, H, L, D, bm):
    """Rows 1 / 5 / 17 (run-time row starts, a tail block of 1 or 2 rows), D 8 / 40 / 128, H 1 / 3,
    every transpose: exact against float64 on both targets."""
    rng = np.random.default_rng(17)
    a = values((Bt, D, H, S) if ta else (Bt, S, H, D), dtype, rng)
    b = values((Bt, L, H, D) if tb else (Bt, D, H, L), dtype, rng)
    o = np.full((Bt, H, S, L), -99, dtype=tw.testing.np_dtype(ACC[dtype]))
    res = run_both(bshd_global(Bt, S, H, L, D, bm, dtype, ta, tb), [a, b, o], [2])
    q = a.astype(np.float64).transpose(0, 3, 2, 1) if ta else a.astype(np.float64)  # (B, S, H, D)
    k = b.astype(np.float64) if tb else b.astype(np.float64).transpose(0, 3, 2, 1)  # (B, L, H, D)
    ref = np.einsum("bshd,blhd->bhsl", q, k)
    for target, (got,) in res.items():
        np.testing.assert_array_equal(got.astype(np.float64), ref, err_msg=target)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_bshd_operand_with_a_k_longer_than_one_staged_chunk(dtype):
    """K = D = 1000 (past one L1 chunk on ascend910b: stage_gemm_operands cuts the BSHD region's
    columns into chunks, the last one a run-time extent), rows 64 of a stride H * D."""
    Bt, S, H, L, D, bm = 1, 64, 2, 64, 1000, 64
    rng = np.random.default_rng(19)
    a, b = values((Bt, S, H, D), dtype, rng), values((Bt, L, H, D), dtype, rng)
    o = np.full((Bt, H, S, L), -99, dtype=np.float32)
    res = run_both(bshd_global(Bt, S, H, L, D, bm, dtype, False, True), [a, b, o], [2])
    ref = np.einsum("bshd,blhd->bhsl", a.astype(np.float64), b.astype(np.float64))
    for target, (got,) in res.items():
        np.testing.assert_array_equal(got.astype(np.float64), ref, err_msg=target)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])  # (int8: P @ V needs V N x K on ascend910b)
@pytest.mark.parametrize("Bt,S,H,L,D", [(2, 16, 3, 32, 40), (1, 17, 1, 16, 8)])
def test_bshd_attention_block_both_gemms(dtype, Bt, S, H, L, D):
    rng = np.random.default_rng(23)
    q, k, v = (values((Bt, n, H, D), dtype, rng) for n in (S, L, L))
    o = np.full((Bt, S, H, D), -99, dtype=tw.testing.np_dtype(ACC[dtype]))
    res = run_both(bshd_attention_block(Bt, S, H, L, D, dtype), [q, k, v, o], [3])
    s = np.einsum("bshd,blhd->bhsl", q.astype(np.float64), k.astype(np.float64))
    p = s.astype(tw.testing.np_dtype(dtype)).astype(np.float64)
    ref = np.einsum("bhsl,blhd->bshd", p, v.astype(np.float64))
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
    elif kind == "columns_not_last":
        @T.prim_func
        def main(Q: T.Tensor((1, 16, 16, 2), "float16"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as bx:
                c = T.alloc_fragment((16, 16), "float32")
                T.gemm(Q[0, 0:16, 0:16, 1], Q[0, 0:16, 0:16, 0], c, transpose_B=True, clear_accum=True)
                T.copy(c, C)
    elif kind == "tile_bshd":
        @T.prim_func
        def main(Q: T.Tensor((16, 2, 16), "float16"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as bx:
                q = T.alloc_shared((16, 2, 16), "float16")
                c = T.alloc_fragment((16, 16), "float32")
                T.copy(Q, q)
                T.gemm(q[0:16, 1, 0:16], Q[0:16, 0, 0:16], c, transpose_B=True, clear_accum=True)
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
    ("columns_not_last", ["operand A ('Q') is a matrix in dimensions (1, 2) of 4",
                          "takes its columns from the last dimension", "T.copy the slice into a 2-D tile"]),
    ("tile_bshd", ["operand A ('q') is a matrix in dimensions (0, 2) of 3", "a gemm on a shared tile takes the last two",
                   "allocate q with the matrix in its last two dimensions"]),
    ("one_d", ["operand A ('Q')", "must be a matrix (2-D region), got 1 dimension", "slice two dimensions"]),
])
def test_other_layouts_are_a_located_error_with_the_fix(target, kind, words):
    with pytest.raises(tw.TilewrightError) as ei:
        tw.compile(bad_kernel(kind), target=target)  # the front end may raise while parsing
    text = str(ei.value)
    for w in words:
        assert w in text, text
    assert ei.value.source_line.strip().startswith("T.gemm("), ei.value.source_line
