"""Session 31 (h-rect): T.gemm's band met with a rectangle, `rows=(r0, r1)` / `cols=(c0, c1)`
(docs/language.md "Bands"), and examples/masked_attention.py passing each block's rectangle
(`block_rects`, the `Rects` table) to both of its gemms.

The gemm alone on cpu against float64 at odd shapes (M 40, N 72, K 72: row and column tails past
the 14 x 32 micro-tiles), exact values so the products compare exactly: c_band + rectangle (only
the region compared: the rest is unspecified), a_band + rectangle (A zero outside the region; the
whole C compared, overwritten and accumulated: rows the rectangle leaves get 0 / keep C), B
transposed as attention's Q K^T; rectangles empty, one row, one column, the whole product, one
crossing tiles. Checked mode (a child: TW_BOUNDS_CHECK is read once per process): C outside the
region NaN, A's zeros outside it verified with a located error, rows lo > hi an error. The IR text
round trip. The masked example at S 200 with two documents (67 and 133 tokens) against float64 on
cpu and against ascend910b (the checker on; the region is dropped there with the band)."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples")]
try:
    import masked_attention as ma
finally:
    del sys.path[:1]

M, N, K = 40, 72, 72


def rect_gemm(kind, trans_b, clear=True):
    """C (M x N) = op(A) op(B) with kind's band (lo, hi) met with rows (r0, r1) and cols (c0, c1),
    all run-time scalars; C starts as Init (clear=False accumulates into it)."""
    bshape = (N, K) if trans_b else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor(bshape, "float32"), Init: T.Tensor((M, N), "float32"),
             lo: T.int32, hi: T.int32, r0: T.int32, r1: T.int32, c0: T.int32, c1: T.int32,
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, K), "float32")
            b = T.alloc_shared(bshape, "float32")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.copy(Init, c)
            if kind == "a":
                T.gemm(a, b, c, transpose_B=trans_b, clear_accum=clear, a_band=(lo, hi), rows=(r0, r1),
                       cols=(c0, c1))
            else:
                T.gemm(a, b, c, transpose_B=trans_b, clear_accum=clear, c_band=(lo, hi), rows=(r0, r1),
                       cols=(c0, c1))
            T.copy(c, C)
    return main


def region(rows, cols, lo, hi, r0, r1, c0, c1):
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    return (j - i >= lo) & (j - i < hi) & (i >= r0) & (i < r1) & (j >= c0) & (j < c1)


# (lo, hi, r0, r1, c0, c1): every diagonal with an empty rectangle, one row, one column, the whole
# product; a document-edge rectangle (rows to the top, columns to the right) crossing the tiles,
# a narrow band met with a rectangle, rows and columns past the product
CASES = [(-M, N + K, 5, 5, 0, N), (-M, N + K, 17, 18, 0, N), (-M, N + K, 0, M, 33, 34),
         (-M, N + K, 0, M, 0, N), (-10, N + K, 0, 29, 37, N), (-3, 9, 13, 40, 0, 50), (-M, 40, -5, 99, -7, 200)]


def exact(shape, rng):
    return (rng.integers(-6, 7, shape) / 2.0).astype(np.float32)


@pytest.mark.parametrize("kind,trans_b", [("c", True), ("a", False)])
def test_rect_gemm_against_float64(kind, trans_b):
    rng = np.random.default_rng(31)
    b = exact((N, K) if trans_b else (K, N), rng)
    opb = (b.T if trans_b else b).astype(np.float64)
    init = exact((M, N), rng)
    kerns = {cl: tw.compile(rect_gemm(kind, trans_b, cl), out_idx=[-1]) for cl in ((True, False) if kind == "a" else
                                                                                  (True,))}
    for case in CASES:
        a = exact((M, K), rng)
        if kind == "a":  # the promise: op(A) is 0 outside the band met with the rectangle
            a = np.where(region(M, K, *case), a, 0).astype(np.float32)
        ref = a.astype(np.float64) @ opb
        for cl, kern in kerns.items():
            out = kern(a, b, init, *case)
            if kind == "c":  # only the region is specified
                keep = region(M, N, *case)
                np.testing.assert_array_equal(np.where(keep, out, 0), np.where(keep, ref, 0), err_msg=str(case))
            else:  # everything: rows the rectangle leaves are 0 (overwritten) or keep C (accumulated)
                np.testing.assert_array_equal(out, ref if cl else ref + init, err_msg=f"{case} clear={cl}")


def test_rect_front_end_and_ir_text():
    def build(a_band=None, c_band=None, rows=None, cols=None):
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32"), r: T.int32, C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((32, 32), "float32")
                c = T.alloc_fragment((32, 32), "float32")
                T.copy(A, a)
                T.gemm(a, a, c, clear_accum=True, a_band=a_band, c_band=c_band, rows=rows, cols=cols)
                T.copy(c, C)
        return main

    text = build(c_band=(-4, 5), rows=(1, 20), cols=(3, 9)).script()
    assert "band_c=(-4, 5) rows=(1, 20) cols=(3, 9)" in text
    assert "rows=" not in build(c_band=(-4, 5), rows=None).script()
    with pytest.raises(tw.TilewrightError, match="limits a band"):
        build(rows=(0, 4))
    with pytest.raises(tw.TilewrightError, match="cols must be a pair"):
        build(a_band=(0, 4), cols=3)
    from tilewright._C import ir  # the IR text parses back to the same text
    assert ir.print_kernel(ir.parse_kernel(text)) == text


# checked mode: C outside the region NaN, A's zeros outside it verified, lo > hi of rows an error
CHILD = '''
import sys
import numpy as np
sys.path.insert(0, "tests/python")
import tilewright as tw
import test_rect_s31 as t

rng = np.random.default_rng(3)
case = (-10, 200, 0, 29, 37, 72)
a, bt = t.exact((40, 72), rng), t.exact((72, 72), rng)
init = np.zeros((40, 72), np.float32)
kc = tw.compile(t.rect_gemm("c", True), out_idx=[-1])
out = kc(a, bt, init, *case)
keep = t.region(40, 72, *case)
ref = a.astype(np.float64) @ bt.T.astype(np.float64)
print("CRECT", bool(np.isnan(out[~keep]).all()), bool(np.array_equal(out[keep], ref[keep])))
ka = tw.compile(t.rect_gemm("a", False), out_idx=[-1])
za = np.where(t.region(40, 72, *case), a, 0).astype(np.float32)
print("AKEPT", bool(np.array_equal(ka(za, bt, init, *case), za.astype(np.float64) @ bt.astype(np.float64))))
for bad, args in (((30, 40), case), ((5, 40), (-10, 200, 7, 3, 37, 72))):
    zb = za.copy()
    zb[bad] = 1.0  # (30, 40): inside the band, row 30 past rows (0, 29); (5, 40): rows lo > hi
    try:
        ka(zb, bt, init, *args)
        print("NOERR")
    except tw.TilewrightError as e:
        print("ERR", e.message, "|", e.hint)
'''


def test_rect_checked_mode(tmp_path):
    from tw_test_util import suite_cache_dir
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_BOUNDS_CHECK": "1", "TW_CACHE_DIR": suite_cache_dir(tmp_path)})
    (tmp_path / "child.py").write_text(CHILD)
    p = subprocess.run([sys.executable, str(tmp_path / "child.py")], env=env, capture_output=True, text=True,
                       timeout=900, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout.strip().splitlines()
    assert "CRECT True True" in out and "AKEPT True" in out, p.stdout
    errs = [ln for ln in out if ln.startswith("ERR")]
    assert len(errs) == 2, p.stdout
    assert "op(A)[30, 40] ('a') is 1, not 0, outside the band's rows=(0, 29) cols=(37, 72)" in errs[0], errs[0]
    assert "widen rows / cols to cover row 30, column 40" in errs[0], errs[0]
    assert "gemm rows=(7, 3)" in errs[1] and "has lo > hi" in errs[1], errs[1]


def documents(s, lengths):
    """causal inside each packed document of the given lengths (the last one takes the rest)"""
    doc = np.searchsorted(np.cumsum(lengths), np.arange(s), side="right")
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    return (j <= i) & (doc[:, None] == doc[None, :])


S = 200  # two documents, 67 and 133 tokens: the edge at 67 cuts rectangles out of 64 x 64 blocks


def test_document_rects_and_exact_blocks():
    mask = documents(S, [67])
    blocks, _, _, bands, rects = ma.prefill_blocks(mask, 64, 64)
    # block (1, 0): rows 64..66 (the first document's end) see keys 0..63 whole: rows (0, 3)
    assert tuple(rects[1, 0]) == (0, 3, 0, 64) and blocks[1, 0] == 3
    # block (2, 1): rows 128..191 see keys 67..127 of the second document: columns (3, 64)
    assert tuple(rects[2, 1]) == (0, 64, 3, 64) and blocks[2, 1] == 3
    assert blocks[1, 1] == 1  # the diagonal block the edge cuts into two triangles: its mask tile
    assert blocks[2, 0] == 0 and tuple(rects[2, 0]) == (0, 0, 0, 0)
    i, j = np.arange(64)[:, None], np.arange(64)[None, :]
    for qb, kb in zip(*np.nonzero(blocks)):  # every visible element inside its block's region
        tile = np.zeros((64, 64), bool)
        sub = mask[qb * 64:(qb + 1) * 64, kb * 64:(kb + 1) * 64]
        tile[:sub.shape[0], :sub.shape[1]] = sub
        lo, hi = bands[qb, kb]
        r0, r1, c0, c1 = rects[qb, kb]
        inside = (j - i >= lo) & (j - i < hi) & (i >= r0) & (i < r1) & (j >= c0) & (j < c1)
        assert not (tile & ~inside).any()
        if blocks[qb, kb] == 3:  # exactly its region
            assert (tile == inside).all()


def test_document_prefill_against_float64_and_tables_without_rects():
    mask = documents(S, [67])
    q, k, v, _ = ma.inputs(1, 2, 1, S, S, 32, seed=31)
    kern = ma.attention_prefill(1, 2, 1, S, S, 32, mask="bool")
    lens = np.full((1,), S, np.int32)
    tables = ma.prefill_blocks(mask)
    out = kern(q, k, v, mask, *tables, lens)
    assert_close(out, ma.reference(q, k, v, mask))
    # every block's rectangle whole (the bands alone, as before): the same result bit for bit
    whole = ma.dense_blocks(S, S)[4]
    blocks = ma.band_exact(mask, ma.block_mask(mask), tables[3], whole)
    plain = kern(q, k, v, mask, blocks, *ma.block_lists(blocks), tables[3], whole, lens)
    np.testing.assert_array_equal(out, plain)


def test_document_prefill_on_ascend_against_cpu():
    from ascend_util import run_checked
    bs, s = 16, 45  # small: documents of 13 and 32 tokens cut 16 x 16 blocks into rectangles
    mask = documents(s, [13])
    q, k, v, _ = ma.inputs(1, 2, 1, s, s, 32, seed=5)
    lens = np.full((1,), s, np.int32)
    outs = {}
    for target in ("cpu", "ascend910b"):
        kern = ma.attention_prefill(1, 2, 1, s, s, 32, mask="bool", block_M=bs, block_N=bs, target=target)
        tables = ma.prefill_blocks(mask, bs, bs, target)
        assert (tables[0] == 3).sum() > 2  # rectangles below the diagonal
        args = (q, k, v, mask, *tables, lens)
        out = run_checked(kern, *args) if target == "ascend910b" else kern(*args)  # the checker finds nothing
        outs[target] = out[0] if isinstance(out, (list, tuple)) else out
    assert_close(outs["cpu"], ma.reference(q, k, v, mask))
    assert_close(outs["ascend910b"], outs["cpu"], atol=1e-6, rtol=1e-5)
