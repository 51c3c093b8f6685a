"""Session 35: a bool let of the map that is an index mask is substituted into its uses again on ascend910b
(h-masktile35; issue 13; docs/ascend.md "Session 35: an index mask read twice is no tile (h-masktile35)").

Session 34 (h-elif34) computed every bool let of the map's elements read twice into a float16 1 / 0 tile; the
block-mask kernel's `inside = bx * M + i < seq_q and by * N + j < seq_kv` (read by two stores) took 32 KiB of UB
and its 128 x 128 blocks ran 64 rows at a time. Now a let that is an index mask (comparisons of the indices with
scalars) built on no other bound condition is substituted as before session 34; one reading tile data, or built
on a bound condition (the elif chain's paths), stays a tile. Checked: masked_attention's block summary and its
prefill with a bool mask on ascend910b (simulator, checker on: `prof["reports"] == []`) against numpy / float64
and cpu at S = 1, 17, 20, 129, 300 with rows that see nothing; which lets are tiles (the legalized IR); an elif chain
on the indices only (every path built on the one before) against numpy, its Program growing linearly.
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from test_block_mask import block_pattern, summary_reference  # noqa: E402
from test_elif32_s32 import _values  # noqa: E402
from test_elifcond33_s33 import _same, load_kernel  # noqa: E402
from tw_test_util import load_example  # noqa: E402

ma = load_example("masked_attention")


@pytest.mark.parametrize("additive", [False, True], ids=["bool", "additive"])
@pytest.mark.parametrize("S,bm", [(1, 64), (17, 64), (129, 64), (300, 128)])
def test_block_summary_on_ascend(S, bm, additive):
    """The block summary (0 / 1 / 2 per block) at odd sizes, row 3 seeing nothing: ascend910b == numpy, and
    == cpu at 17; the bool kind's 128-row blocks run whole again."""
    mask = block_pattern(S, S, bm, bm, seed=S, additive=additive)
    k = ma.block_mask_kernel(S, S, bm, bm, "additive" if additive else "bool", target=TARGET)
    got = run_checked(k, mask)
    want = summary_reference(mask, bm, bm)
    np.testing.assert_array_equal(got, want)
    if S == 17:
        np.testing.assert_array_equal(ma.block_mask(mask, bm, bm), want)
    if bm == 128:
        assert any("rows run 64 at a time" in n for n in k.notes) == additive, k.notes
    assert "_inside" not in k.get_ir("legalize_vector")


@pytest.mark.parametrize("S", [1, 20, 129])
def test_prefill_bool_mask_with_empty_rows(S):
    """attention_prefill with a bool mask whose rows 0, 7 and the last see nothing (their output 0) and block
    tables from the ascend910b summary: ascend910b == float64 (float32 tolerances); at 20 == cpu too (the
    configuration of test_masked_attention's test_rows_that_see_no_key_are_zero: its cpu kernel, compiled once)."""
    B, H, KVH, D, bm = 1, 2, 2, 16, (16 if S <= 20 else 64)
    q, k, v, rng = ma.inputs(B, H, KVH, S, S, D)
    mask = np.random.default_rng(S).random((S, S)) < 0.6
    empty = sorted({0, min(7, S - 1), S - 1})
    mask[empty] = False
    tables = ma.prefill_blocks(mask, bm, bm, TARGET)
    for t, want in zip(tables, ma.prefill_blocks(mask, bm, bm)):
        np.testing.assert_array_equal(t, want)
    lens = np.array([S], np.int32)
    ref = ma.reference(q, k, v, mask[None])
    outs = {}
    for target in ["cpu", TARGET] if S == 20 else [TARGET]:
        kern = ma.attention_prefill(B, H, KVH, S, S, D, "BHSD", False, None, "bool", False, block_M=bm, block_N=bm,
                                    target=target)
        args = (q, k, v, mask, *tables, lens)
        outs[target] = kern(*args) if target == "cpu" else run_checked(kern, *args)
        assert (outs[target][:, :, empty] == 0).all()
        assert_close(outs[target], ref)
    if len(outs) == 2:
        assert_close(outs[TARGET], outs["cpu"], atol=1e-6, rtol=1e-5)


R, C = 5, 19


def _two_lets(dt):
    @T.prim_func
    def k(X: T.Tensor((R, C), dt), Y: T.Tensor((R, C), dt), Z: T.Tensor((R, C), dt), n: T.int32):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), dt)
            y = T.alloc_fragment((R, C), dt)
            z = T.alloc_fragment((R, C), dt)
            T.copy(X, x)
            for i, j in T.Parallel(R, C):
                inside = i < n and j < C - 3  # an index mask read twice: substituted
                hot = x[i, j] > 0  # tile data read twice: a tile
                y[i, j] = T.where(inside and hot, x[i, j], -1)
                z[i, j] = T.where(inside or hot, 2, x[i, j])
            T.copy(y, Y)
            T.copy(z, Z)
    return k


@pytest.mark.parametrize("dt", ["float32", "int32"])
def test_index_let_substituted_data_let_a_tile(dt):
    x = _values(dt, (R, C), 35)
    f, i, j = x.astype(np.float64), np.arange(R)[:, None], np.arange(C)[None, :]
    for n in (3, 0):
        inside, hot = (i < n) & (j < C - 3), f > 0
        want = (np.where(inside & hot, f, -1).astype(dt), np.where(inside | hot, 2, f).astype(dt))
        for target in ["cpu", TARGET]:
            k = tw.compile(_two_lets(dt), target=target, out_idx=[1, 2])
            got = k(x, n) if target == "cpu" else run_checked(k, x, n)
            for g, w in zip(got, want):
                _same(g, w)
    ir = tw.compile(_two_lets(dt), target=TARGET, out_idx=[1, 2]).get_ir("legalize_vector")
    assert "_hot" in ir and "_inside" not in ir


def _index_chain(arms):
    """if / elif on the column index only (j < 2, j < 4, ...; every path built on the one before), int32 arms
    (guarded arithmetic: the nested ifs bind their conditions and paths)."""
    body = []
    for k in range(arms - 1):
        body += [f"                {'elif' if k else 'if'} j < {2 * k + 2}:",
                 f"                    y[i, j] = x[i, j] * 2 - y[i, j] + {k}"]
    body += ["                else:", "                    y[i, j] = x[i, j] - 1"]
    return f"""import tilewright.language as T


@T.prim_func
def kernel(X: T.Tensor((3, 23), "int32"), Y0: T.Tensor((3, 23), "int32"), Y: T.Tensor((3, 23), "int32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((3, 23), "int32")
        y = T.alloc_fragment((3, 23), "int32")
        T.copy(X, x)
        T.copy(Y0, y)
        for i, j in T.Parallel(3, 23):
""" + "\n".join(body) + """
        T.copy(y, Y)
"""


def _instructions(k):
    text = k.get_source("ascend_program")
    return sum(1 for line in text[text.index("AIV:"):].splitlines() if line.strip().startswith(("V ", "S ", "MTE")))


def test_index_elif_chain(tmp_path):
    """A 7-arm chain: cpu == ascend910b == numpy; 4, 6 and 8 arms: every arm adds the same instructions
    (within 10 %), the paths, built on each other, stay tiles."""
    prim = load_kernel(_index_chain(7), tmp_path)
    x, y0 = _values("int32", (3, 23), 7), _values("int32", (3, 23), 8)
    j = np.arange(23)[None, :]
    want = x - 1
    for k in reversed(range(6)):
        want = np.where(j < 2 * k + 2, 2 * x - y0 + k, want)
    for target in ["cpu", TARGET]:
        kern = tw.compile(prim, target=target, out_idx=[-1])
        _same(kern(x, y0) if target == "cpu" else run_checked(kern, x, y0), want.astype(np.int32))
    n = {a: _instructions(tw.compile(load_kernel(_index_chain(a), tmp_path), target=TARGET, out_idx=[-1]))
         for a in (4, 6, 8)}
    first, second = n[6] - n[4], n[8] - n[6]
    assert first > 0 and abs(second - first) <= 0.1 * first, n
