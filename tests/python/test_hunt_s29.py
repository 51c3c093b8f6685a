"""Session 29's hunt (h-hunt, docs/testing.md "Session 29: LLM kernels at users' shapes (h-hunt)"): the
LLM kernels of examples/ at the shapes and inputs users call them with that sessions 23-28's hunts
(test_hunt_s23a.py, test_hunt_s25.py, test_hunt_s27.py) did not: GQA group 3 at head dim 96 and page 8,
MQA with 32 query heads, 33 splits of a split-KV decode (splits past the pages) at head dim 80, a block
table whose used entries repeat one page and whose entries past the context are garbage (2^31 - 1,
-5, 10^9: never read), the smaller chips (ascend910b4 / b1 / b3), an additive mask with a row of -inf
(0, the docs' promise) and a row of float32's lowest (uniform, as torch SDPA), a sliding window of 1 in
BSHD with GQA, varlen with an empty first sequence, RoPE at positions past 2^16, the MoE serving form
(`gather_rows` + `grouped_gemm_sorted`) with hidden and ffn tails, and a user's scatter-add
(`index_add_` with duplicate indices through `T.atomic_add`). The hunt ran each on cpu and on ascend910b
(simulator, checker on: `prof["reports"] == []`, the same kernel source) against float64 numpy (and torch
SDPA where the docs promise its semantics); all agreed. This file keeps one small shape per property, on
ascend910b (the simulator runs these in about a second; the cpu's g++ build of each kernel is what costs
CI time) and on cpu where the property is the cpu's too (garbage past the context, the additive mask's
rows, the scatter-add).

Tolerances (|got - ref| <= atol + rtol |ref|): tilewright.testing.TOLERANCES of the output dtype
(float32 1e-4 / 1e-4, float16 2e-3 / 2e-3, bfloat16 2e-2 / 1.6e-2); the scatter-add of quarter
integers exactly. Findings (F1.. of /work/hunt29-findings.md) were fixed on the branch; their tests
guard the fixes."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, np_dtype, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import load_example, located  # noqa: E402

pa = load_example("paged_attention")
ma = load_example("masked_attention")
rp = load_example("rope")
moe = load_example("moe")

THIS = __file__
TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    """Called on cpu; simulated with the checker on (run_checked asserts no report) elsewhere."""
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def _close(got, ref, dtype, what):
    atol, rtol = TOLERANCES[dtype]
    assert_close(np.asarray(got, np.float64), ref, atol=atol, rtol=rtol, msg=what)


# --------------------------------------------------------------------------- paged decode
def _paged(form, target, heads, kv_heads, dim, block_size, lens, dtype, pps=2, splits=3, bt=None,
           max_blocks=None):
    """examples/paged_attention.py's kernels on make_inputs' random cache; returns (inputs, out)."""
    lens = list(lens)
    max_blocks = max_blocks or max(1, -(-max(lens) // block_size))
    q, kc, vc, bt0, cl = pa.make_inputs(len(lens), heads, kv_heads, dim, block_size, max_blocks * block_size, dtype,
                                        lens=lens)
    bt = bt0 if bt is None else bt
    nb, ns = kc.shape[0], len(lens)
    if form == "split":
        part, lse = _run(pa.paged_decode_split(ns, heads, kv_heads, dim, nb, block_size, max_blocks, splits, dtype,
                                               target=target), target, q, kc, vc, bt, cl)
        out = _run(pa.combine_splits(ns, heads, splits, dim, dtype, target=target), target, part, lse)
    else:
        out = _run(pa.paged_decode(ns, heads, kv_heads, dim, nb, block_size, max_blocks, dtype, pages_per_step=pps,
                                   target=target), target, q, kc, vc, bt, cl)
    return (q, kc, vc, bt, cl), out


# (form, heads, kv_heads, dim, block_size, lens, dtype, pps / splits, max_blocks)
PAGED = [
    ("paged", 6, 2, 96, 8, [9, 0, 17, 8, 1], "float16", 4, None),       # G 3, head dim 96, page 8, page - 1 / + 1
    ("paged", 32, 1, 64, 32, [31, 1, 64], "bfloat16", 2, None),         # MQA: 32 query heads on one kv head
    ("split", 2, 1, 80, 4, [130, 7], "float32", 33, 40),                # 33 splits of 40 pages: splits past the pages
]


@pytest.mark.parametrize("case", PAGED, ids=lambda c: f"{c[0]}-{c[1]}q{c[2]}kv-d{c[3]}-p{c[4]}-{c[6]}")
def test_paged_decode_users_shapes_on_ascend(case):
    # the cpu runs these too (the hunt's probe); the file keeps the simulator's side, the cheap one in CI
    form, heads, kvh, dim, bs, lens, dtype, n, mb = case
    inputs, out = _paged(form, TARGET, heads, kvh, dim, bs, lens, dtype, pps=n, splits=n, max_blocks=mb)
    _close(out, pa.reference(*inputs), dtype, f"{case} on {TARGET}")


@pytest.mark.parametrize("target", TARGETS)
def test_paged_decode_repeated_pages_and_garbage_past_the_context(target):
    # sequence 0 uses page 3 three times (5 tokens of page 4 -> 2 pages); sequence 1 pages 1, 1, 3; the
    # entries past each sequence's pages are what an allocator leaves: never read (pps 4 reaches them)
    bt = np.array([[3, 3, 3, 2**31 - 1, -5, 10**9], [1, 1, 3, -1, -1, -1]], np.int32)
    for form in ("paged", "split") if target != "cpu" else ("paged",):
        inputs, out = _paged(form, target, 3, 1, 64, 4, [5, 9], "float16", pps=4, splits=2, bt=bt, max_blocks=6)
        _close(out, pa.reference(*inputs), "float16", f"{form} on {target}")


def test_paged_decode_on_the_smaller_chips():
    # change only the target: 20 AI cores (b3 / b4) and b4's half-size L2; a split decode with an empty split
    for chip in ("ascend910b4", "ascend910b3"):
        inputs, out = _paged("paged", chip, 3, 1, 64, 8, [9, 0, 17], "float16")
        _close(out, pa.reference(*inputs), "float16", chip)
    inputs, out = _paged("split", "ascend910b4", 3, 1, 64, 8, [9, 0, 17], "bfloat16", splits=5, max_blocks=4)
    _close(out, pa.reference(*inputs), "bfloat16", "split on ascend910b4")


# --------------------------------------------------------------------------- prefill
def _prefill(target, B, H, KVH, Sq, Skv, D, layout, dtype, mask=None, m=None, block=16, **kw):
    kern = ma.attention_prefill(B, H, KVH, Sq, Skv, D, layout, mask=mask, dtype=dtype, target=target, block_M=block,
                                block_N=block, **kw)
    args = list(ma.prefill_args(B, H, KVH, Sq, Skv, D, layout, mask, False, dtype, 0, target, True, block, block))
    if m is not None:
        args[3] = m
        args[4:9] = ma.prefill_blocks(m, block, block, target)
    return args, _run(kern, target, *args)


@pytest.mark.parametrize("target", TARGETS)
def test_additive_mask_rows_of_minus_inf_and_of_the_lowest_float(target):
    """A row of -inf sees no key: 0 (docs/llm-kernels.md; torch 2.15's SDPA gives 0 too, older torch NaN:
    F5 of the hunt, the docs said NaN). A row of float32's lowest (HF's padding value) keeps every key
    visible: the plain softmax, as SDPA."""
    torch = pytest.importorskip("torch")
    Sq, Skv = 19, 23
    m = np.random.default_rng(5).standard_normal((Sq, Skv)).astype(np.float32)
    m[3, :] = -np.inf
    m[7, :] = np.finfo(np.float32).min
    m[:, 5] = -np.inf
    args, out = _prefill(target, 1, 4, 2, Sq, Skv, 64, "BSHD", "float16", mask="additive", m=m)
    q, k, v = (torch.from_numpy(np.asarray(a, np.float32)).transpose(1, 2) for a in args[:3])
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(m),
                                                           enable_gqa=True).transpose(1, 2).double().numpy()
    assert (ref[0, 3] == 0).all() or np.isnan(ref[0, 3]).all()  # torch 2.15: 0; before: NaN
    ref[0, 3] = 0.0
    _close(out, ref, "float16", f"additive mask on {target}")


def test_window_of_one_bshd_gqa_on_ascend():
    # each query sees only itself: the output is its own value row (GQA 3, head dim 80, 33 tokens)
    args, out = _prefill(TARGET, 1, 3, 1, 33, 33, 80, "BSHD", "float16", causal=True, window=1)
    v = np.asarray(args[2], np.float64)
    _close(out, np.repeat(v, 3, axis=2), "float16", "window 1")


# --------------------------------------------------------------------------- RoPE, varlen
def test_rope_positions_past_2_16_on_ascend():
    target = TARGET
    pos = np.array([65536, 69999, 0, 65535, 1], np.int32)
    cos, sin = rp.tables(70000, 64)
    x = randn((5, 2, 64), "bfloat16", seed=0)
    for interleaved in (False, True):
        y = _run(rp.rope(5, 2, 64, 70000, interleaved, dtype="bfloat16", target=target), target, x, cos, sin, pos)
        _close(y, rp.reference(x, cos, sin, pos, interleaved), "bfloat16", f"interleaved={interleaved} {target}")


def test_f1_varlen_reference_with_an_empty_sequence():
    """F1: examples/masked_attention.py's run_varlen (its float64 reference) raised numpy's
    ValueError on a sequence of 0 tokens, which varlen_attention supports."""
    out, ref = ma.run_varlen([0, 1, 0, 21], 3, 1, 96, causal=True, dtype="bfloat16", target=TARGET, block_M=16,
                             block_N=16)
    _close(out, ref, "bfloat16", "varlen with empty sequences")


@pytest.mark.parametrize("factory", ["rope", "qk_rope_proj"])
def test_f2_rope_odd_head_dim_is_an_error(factory):
    """F2: an odd head dim left the last column of the output unwritten (stale tile memory, on both
    targets); RoPE rotates pairs, so it is an error at the factory's caller."""
    if factory == "rope":
        located(lambda: rp.rope(4, 1, 65, 32, True), THIS, "@odd", "must be even", "partial rotary")  # @odd
    else:
        located(lambda: rp.qk_rope_proj(4, 64, 1, 65, 32), THIS, "@odd2", "must be even")  # @odd2


def test_f3_profile_argument_error_points_at_the_call():
    """F3: an argument error raised by kernel.profile (the simulated targets, run_checked) was located
    at the kernel's definition; the call, as on cpu, names the definition in the message."""
    kern = rp.rope(4, 1, 64, 32, target=TARGET)
    cos, sin = rp.tables(32, 66)  # one pair too many
    x = np.zeros((4, 1, 64), np.float32)
    err = located(lambda: kern.profile(x, cos, sin, np.arange(4, dtype=np.int32)), THIS, "@prof",  # @prof
                  "argument 'Cos'", "must have shape (32, 32)", "is defined at")
    assert "rope.py" in err.message


# --------------------------------------------------------------------------- MoE, scatter-add
def test_moe_serving_form_with_hidden_and_ffn_tails_on_ascend():
    target = TARGET
    tokens, hidden, ffn, experts, top_k, dtype, bm = 13, 70, 50, 3, 2, "float16", 16
    x, lg, w = moe.inputs(tokens, hidden, ffn, experts, dtype)
    ids, wts = _run(moe.topk_gating(tokens, experts, top_k, target=target), target, lg)
    rows, be, slot = _run(moe.align_by_expert(tokens, experts, top_k, bm, target=target), target, ids)
    xs = _run(moe.gather_rows(tokens, hidden, rows.shape[0], block_H=64, dtype=dtype, target=target), target, x, rows)
    y = _run(moe.grouped_gemm_sorted(rows.shape[0], hidden, ffn, experts, bm, 32, 64, 2, dtype=dtype,
                                     out_dtype="float32", target=target), target, xs, w, be)
    out = _run(moe.combine(tokens, ffn, top_k, rows.shape[0], dtype=dtype, target=target), target, y, slot, wts)
    ref, ref_ids, _ = moe.reference(x, lg, w, top_k)
    assert (np.asarray(ids) == ref_ids).all()
    _close(out, ref, dtype, f"moe serving form on {target}")


@tw.jit
def index_add(M, N, R, block_N=64, dtype="float32"):
    """torch's Out.index_add_(0, Idx, Src): row i of Src added into row Idx[i] of Out (duplicates add)."""
    @T.prim_func
    def main(Src: T.Tensor((M, N), "float32"), Idx: T.Tensor((M,), "int32"), Out: T.Tensor((R, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), M) as (bx, i):
            y = T.alloc_fragment((block_N,), "float32")
            T.copy(Src[i, bx * block_N:(bx + 1) * block_N], y)
            T.atomic_add(Out[Idx[i], bx * block_N:(bx + 1) * block_N], y)
    return main


@pytest.mark.parametrize("target, dtype", [("cpu", "float32"), (TARGET, "float32"), (TARGET, "bfloat16")])
def test_index_add_with_duplicate_indices(dtype, target):
    idx = np.array([2, 2, 0, 2, 1, 0, 2], np.int32)
    src = (np.random.default_rng(3).integers(-8, 8, (7, 70)) / 4).astype(np.float32)  # sums exact
    out = np.zeros((4, 70), np_dtype(dtype))
    _run(index_add(7, 70, 4, dtype=dtype, target=target), target, src, idx, out)
    ref = np.zeros((4, 70))
    np.add.at(ref, idx, src.astype(np.float64))
    assert np.array_equal(out.astype(np.float64), ref)
