"""Session 23's hunt through the LLM kernels of examples/ at the shapes of real models (h-hunt11a,
docs/testing.md "Session 23: LLM kernels at real model shapes (h-hunt11a)"): head dims 80 (Phi-2 /
StableLM), 96 (Phi-3-mini), 112, 128, 256 (Gemma); GQA ratios 7:1 (Qwen2-7B), 8:1 (Llama-3), 13:1,
MHA with 40 heads, MQA; vLLM block sizes 1 / 8 / 16 / 32 with shared (prefix-cached), repeated and
out-of-order pages and garbage past each sequence's pages; context lengths 0, 1, block_size - 1,
block_size, block_size + 1 and a batch of 1 and 4097; a KV cache of more than 2^31 elements; chunked
prefill and speculative decoding (queries at the end of the keys) through a mask tensor; Mistral's
window of 4096, a window of 1; varlen with sequences of length 0; RoPE at theta 1e4 / 5e5 / 1e6 and
position 131071; rms_norm / layer_norm at hidden 5120 / 8192 / 11009; softmax over a vocabulary row;
MoE with 60 / 64 experts, top-1 / 4 / 8, every token on one expert. Each on cpu and on ascend910b
(simulator, checker on: ascend_util.run_checked; smaller shapes there) against float64 numpy, torch
SDPA where the docs promise its semantics, with the tolerances of docs/llm-kernels.md
(tilewright.testing.TOLERANCES per output dtype).

The defects found are strict xfails whose reason names the finding (F1..F4 of /work/hunt11a-findings.md,
docs/testing.md); the rest guard what works."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
from tilewright.testing import TOLERANCES, assert_close, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import load_example  # noqa: E402

pa = load_example("paged_attention")
ma = load_example("masked_attention")
rope = load_example("rope")
moe = load_example("moe")
rms_norm = load_example("rms_norm")
layer_norm = load_example("layer_norm")
softmax = load_example("softmax")
fa = load_example("flash_attention")

TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def _close(got, ref, dtype, what):
    atol, rtol = TOLERANCES[dtype]
    assert_close(np.asarray(got, np.float64), ref, atol=atol, rtol=rtol, msg=what)


# ---------------------------------------------------------------------------------------------
# Paged decode (vLLM layout): real head dims / GQA ratios, block tables as vLLM fills them.

GARBAGE = [10**9, -(10**9), -1, 2**31 - 1, 7]  # what vLLM leaves past a sequence's pages


def _vllm_table(lens, block_size, max_blocks, num_blocks, seed):
    """Random pages with repeats, out of order, the first two pages shared by every sequence (prefix
    caching), garbage past each sequence's pages."""
    rng = np.random.default_rng(seed)
    bt = rng.integers(0, num_blocks, size=(len(lens), max_blocks)).astype(np.int32)
    bt[:, :2] = bt[0, :2]
    for b, n in enumerate(lens):
        used = -(-n // block_size)
        bt[b, used:] = (GARBAGE * max_blocks)[:max_blocks - used]
    return bt


def _paged(form, target, num_heads, kv_heads, dim, block_size, lens, dtype, bt=None, max_blocks=None,
           pps=2, splits=3, seed=0):
    lens = list(lens)
    max_blocks = max_blocks or max(1, -(-max(lens) // block_size))
    q, kc, vc, _, cl = pa.make_inputs(len(lens), num_heads, kv_heads, dim, block_size, max_blocks * block_size,
                                      dtype, seed=seed, lens=lens)
    nb = kc.shape[0]
    bt = _vllm_table(lens, block_size, max_blocks, nb, seed) if bt is None else bt
    ns = len(lens)
    if form == "pages":
        out = _run(pa.paged_decode_pages(ns, num_heads, kv_heads, dim, nb, block_size, max_blocks, dtype,
                                         pages_per_step=pps, target=target), target,
                   q, pa.page_view(kc), pa.page_view(vc), bt, cl)
    elif form == "split":
        part, lse = _run(pa.paged_decode_split(ns, num_heads, kv_heads, dim, nb, block_size, max_blocks, splits,
                                               dtype, target=target), target, q, kc, vc, bt, cl)
        out = _run(pa.combine_splits(ns, num_heads, splits, dim, dtype, target=target), target, part, lse)
    else:
        out = _run(pa.paged_decode(ns, num_heads, kv_heads, dim, nb, block_size, max_blocks, dtype,
                                   pages_per_step=pps, target=target), target, q, kc, vc, bt, cl)
    return (q, kc, vc, bt, cl), out


# (num_heads, kv_heads, head_dim, block_size, lens, dtype): per model (each dtype in each form; the
# kernels are compiled once per shape and dtype, so the dtypes rotate over the shapes)
PAGED_CPU = [
    (28, 4, 128, 16, [1, 17, 4097], "bfloat16"),   # Qwen2-7B (7:1), a batch of 1 and 4097
    (32, 8, 80, 16, [15, 16], "float16"),          # 8:1 at head dim 80; block_size - 1, block_size
    (14, 2, 96, 8, [9, 8, 0], "float32"),          # Qwen2-0.5B-like 7:1 at head dim 96; length 0
    (8, 1, 256, 32, [33, 31, 1], "bfloat16"),      # Gemma MQA, head dim 256, block 32
    (40, 40, 112, 1, [5, 1], "float16"),           # MHA 40 heads, one token per page
]


@pytest.mark.parametrize("form", ["paged", "pages", "split"])
@pytest.mark.parametrize("case", PAGED_CPU, ids=lambda c: f"{c[0]}q{c[1]}kv-d{c[2]}-p{c[3]}-{c[5]}")
def test_paged_decode_real_shapes_cpu(form, case):
    heads, kvh, dim, bs, lens, dtype = case
    inputs, out = _paged(form, "cpu", heads, kvh, dim, bs, lens, dtype, pps=3)
    _close(out, pa.reference(*inputs), dtype, f"paged {form} {case} {dtype}")


# ascend910b: G = 7 (Qwen2-7B per kv head), 13 (52 q / 4 kv), head dims 80..256, block sizes 1 / 32,
# context 0, garbage past the pages and shared pages; one or two pages per step
PAGED_ASCEND = [
    ("paged", 7, 1, 128, 16, [33, 0, 16], 2, "float16"),
    ("paged", 7, 1, 128, 16, [33, 0, 16], 2, "bfloat16"),
    ("split", 7, 1, 80, 8, [16, 1], 2, "float32"),
    ("paged", 13, 1, 128, 16, [33], 4, "bfloat16"),
    ("split", 13, 1, 96, 16, [17, 15], 2, "float16"),
    ("paged", 2, 1, 112, 8, [9, 8], 2, "float32"),
    ("paged", 8, 1, 256, 32, [1, 65], 2, "float16"),
    ("paged", 2, 2, 64, 1, [1, 3, 0], 4, "bfloat16"),
    ("paged", 40, 40, 128, 16, [17], 1, "float32"),
]


@pytest.mark.parametrize("case", PAGED_ASCEND,
                         ids=lambda c: f"{c[0]}-{c[1]}q{c[2]}kv-d{c[3]}-p{c[4]}-pps{c[6]}-{c[7]}")
def test_paged_decode_real_shapes_on_ascend(case):
    form, heads, kvh, dim, bs, lens, pps, dtype = case
    inputs, out = _paged(form, TARGET, heads, kvh, dim, bs, lens, dtype, pps=pps, splits=3)
    _close(out, pa.reference(*inputs), dtype, f"paged {case} {dtype} on ascend910b")


def test_paged_decode_agrees_with_torch_sdpa_at_llama3_shapes():
    # Llama-3-8B per layer: 32 q / 8 kv heads, head dim 128, block 16; torch SDPA (enable_gqa) on each
    # sequence's gathered cache, as the docs promise
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    (q, kc, vc, bt, cl), out = _paged("pages", "cpu", 32, 8, 128, 16, [1, 15, 16, 17, 100], "float32")
    for b, n in enumerate(cl):
        pages = bt[b, :-(-int(n) // 16)]
        k = torch.from_numpy(kc[pages].reshape(-1, 8, 128)[:n]).permute(1, 0, 2)
        v = torch.from_numpy(vc[pages].reshape(-1, 8, 128)[:n]).permute(1, 0, 2)
        ref = F.scaled_dot_product_attention(torch.from_numpy(q[b]).unsqueeze(1), k, v, enable_gqa=True)
        assert_close(out[b], ref.squeeze(1).numpy(), msg=f"sequence {b} of length {n}")


@pytest.mark.parametrize("form", ["paged", "pages", "split"])
def test_paged_decode_cache_of_more_than_2_31_elements(form, tmp_path):
    # a vLLM cache sized to fill memory: 140000 blocks x 16 x 8 x 128 = 2.29e9 elements per cache (a
    # sparse file: only the pages in the table are written), pages past element 2^31 (block 131072)
    NB, BS, KVH, D, H = 140000, 16, 8, 128, 32
    caches = []
    for name in ("k", "v"):
        path = tmp_path / f"{name}.bin"
        with open(path, "wb") as f:
            f.truncate(NB * BS * KVH * D * 2)
        caches.append(np.memmap(path, np.float16, "r+", shape=(NB, BS, KVH, D)))
    kc, vc = caches
    rng = np.random.default_rng(0)
    bt = np.array([[5, 139999, 70000], [131072, 131071, 135000]], np.int32)
    cl = np.array([40, 33], np.int32)
    for p in bt.ravel():
        kc[p] = rng.standard_normal((BS, KVH, D)).astype(np.float16)
        vc[p] = rng.standard_normal((BS, KVH, D)).astype(np.float16)
    q = rng.standard_normal((2, H, D)).astype(np.float16)
    if form == "pages":
        out = pa.paged_decode_pages(2, H, KVH, D, NB, BS, 3, "float16")(q, pa.page_view(kc), pa.page_view(vc), bt, cl)
    elif form == "split":
        part, lse = pa.paged_decode_split(2, H, KVH, D, NB, BS, 3, 2, "float16")(q, kc, vc, bt, cl)
        out = pa.combine_splits(2, H, 2, D, "float16")(part, lse)
    else:
        out = pa.paged_decode(2, H, KVH, D, NB, BS, 3, "float16")(q, kc, vc, bt, cl)
    used = sorted(set(bt.ravel().tolist()))
    remap = {p: i for i, p in enumerate(used)}  # the reference over the touched pages only
    small_k, small_v = np.stack([kc[p] for p in used]), np.stack([vc[p] for p in used])
    small_bt = np.vectorize(remap.get)(bt).astype(np.int32)
    _close(out, pa.reference(q, small_k, small_v, small_bt, cl), "float16", f"{form}: pages past element 2^31")


# ---------------------------------------------------------------------------------------------
# Masked prefill: real head dims / GQA, windows, queries at the end of the keys through a mask tensor.

PREFILL = [  # (B, H, KVH, Sq, Skv, D, kwargs, dtype)
    (1, 7, 1, 70, 70, 128, dict(causal=True), "float16"),                  # Qwen2-7B 7:1
    (1, 7, 1, 70, 70, 128, dict(causal=True), "bfloat16"),
    (1, 4, 1, 33, 33, 80, dict(causal=True, window=1), "bfloat16"),        # a window of 1: the query itself
    (1, 4, 2, 65, 65, 96, dict(causal=True, window=4096), "float32"),      # Mistral's window, longer than S
    (2, 2, 2, 17, 130, 112, dict(causal=True, layout="BSHD"), "float16"),  # seq_q < seq_kv (top-left)
    (1, 2, 1, 20, 20, 256, dict(mask="bool"), "float32"),                  # Gemma head dim
    (1, 8, 1, 40, 40, 64, dict(mask="additive", padded=True), "bfloat16"), # 8:1
    (1, 2, 1, 70, 10, 64, dict(causal=True, window=3), "float16"),         # seq_q > seq_kv
]


@pytest.mark.parametrize("case", PREFILL, ids=lambda c: "x".join(map(str, c[:6])) + "-" + "-".join(
    f"{k}={v}" for k, v in c[6].items()) + "-" + c[7])
@pytest.mark.parametrize("target", TARGETS)
def test_prefill_real_shapes(case, target):
    # (ascend910b: calling the kernel runs the simulator with the checker on; a report raises)
    *shape, kw, dtype = case
    out, ref = ma.run(*shape, dtype=dtype, target=target, **kw)
    _close(out, ref, dtype, f"prefill {case} {dtype} {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_causal_with_fewer_queries_than_keys_is_sdpas_top_left(target):
    # is_causal with seq_q 17 < seq_kv 130 (BSHD, 2 q / 2 kv heads, head dim 112): SDPA's top-left
    # alignment, as docs/llm-kernels.md says (queries at the end of the keys: a mask tensor, below)
    torch = pytest.importorskip("torch")
    q, k, v, _ = ma.inputs(1, 2, 2, 17, 130, 112, "BSHD", "float32", 0)
    kern = ma.attention_prefill(1, 2, 2, 17, 130, 112, "BSHD", causal=True, target=target)
    out = _run(kern, target, q, k, v, np.zeros((17, 130), np.float32), *ma.dense_blocks(17, 130),
               np.array([130], np.int32))
    t = [torch.from_numpy(x).double().transpose(1, 2) for x in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=True).transpose(1, 2)
    _close(out, ref.numpy(), "float32", f"top-left causal {target}")


def _prefill_with_mask(target, B, H, KVH, Sq, Skv, D, dtype, mask, lens=None, block=64):
    q, k, v, _ = ma.inputs(B, H, KVH, Sq, Skv, D, "BHSD", dtype, 0)
    kind = "bool" if mask.dtype == np.bool_ else "additive"
    L = np.asarray(lens if lens is not None else [Skv] * B, np.int32)
    tables = ma.prefill_blocks(mask, block, block, target)
    kern = ma.attention_prefill(B, H, KVH, Sq, Skv, D, "BHSD", False, None, kind, lens is not None, block, block,
                                dtype, target=target)
    return (q, k, v, L), _run(kern, target, q, k, v, mask, *tables, L)


def _bottom_right(Sq, Skv, window=None):
    """Queries at the end of the keys (chunked prefill, speculative decoding): query i is token
    Skv - Sq + i and sees keys j <= that token (and, with a window, j > token - window)."""
    i, j = np.arange(Sq)[:, None] + (Skv - Sq), np.arange(Skv)[None, :]
    vis = j <= i
    if window is not None:
        vis &= j > i - window
    return vis


@pytest.mark.parametrize("kind,dtype", [("bool", "bfloat16"), ("additive", "float16"), ("bool", "float32")])
@pytest.mark.parametrize("target", TARGETS)
def test_chunked_prefill_through_a_mask_tensor_matches_torch_sdpa(kind, dtype, target):
    # a chunk of 17 queries at the end of 130 keys, 4 q / 1 kv heads, head dim 80: SDPA's attn_mask
    # (bool, or additive with HF transformers' finfo(float32).min) with enable_gqa
    torch = pytest.importorskip("torch")
    vis = _bottom_right(17, 130)
    mask = vis if kind == "bool" else np.where(vis, 0.0, np.finfo(np.float32).min).astype(np.float32)
    (q, k, v, _), out = _prefill_with_mask(target, 1, 4, 1, 17, 130, 80, dtype, mask)
    t = [torch.from_numpy(np.asarray(x, np.float32)).double() for x in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=torch.from_numpy(vis), enable_gqa=True)
    _close(out, ref.numpy(), dtype, f"chunked prefill {kind} {dtype} {target}")


@pytest.mark.parametrize("target,dtype", [("cpu", "float32"), ("cpu", "bfloat16"), (TARGET, "float16")])
def test_speculative_decode_window_mask_with_padding(dtype, target):
    # 5 draft tokens at the end of 37 keys, a sliding window of 8 (bottom-right), Qwen2-7B's 7:1 heads,
    # head dim 128, the second sequence padded to 30 keys
    vis = _bottom_right(5, 37, window=8)
    (q, k, v, L), out = _prefill_with_mask(target, 2, 7, 1, 5, 37, 128, dtype, vis, lens=[37, 30])
    per_seq = np.stack([ma.visibility(5, 37, mask=vis, kv_len=n) for n in L])
    _close(out, ma.reference(q, k, v, per_seq), dtype, f"speculative decode {dtype} {target}")


@pytest.mark.parametrize("dtype", ["bfloat16"])
def test_mistral_window_4096_past_the_window(dtype):
    # S 4200 > the window: the first 104 queries see every earlier key, the rest exactly 4096 (cpu:
    # the simulator takes the same pattern at S 300 / window 100 below)
    out, ref = ma.run(1, 1, 1, 4200, 4200, 64, causal=True, window=4096, dtype=dtype)
    _close(out, ref, dtype, f"window 4096 {dtype}")


@pytest.mark.parametrize("dtype", ["float32"])
def test_window_past_its_length_on_ascend(dtype):
    out, ref = ma.run(1, 1, 1, 300, 300, 64, causal=True, window=100, dtype=dtype, target=TARGET)
    _close(out, ref, dtype, f"window 100 at S 300 {dtype}")


@pytest.mark.parametrize("target,dtype", [("cpu", "float16"), (TARGET, "bfloat16"), (TARGET, "float32")])
def test_padding_with_an_empty_sequence(dtype, target):
    # KvLen 0 for one batch entry (no key: 0, as the docs say), with and without a mask tensor
    out, ref = ma.run(2, 2, 1, 33, 33, 64, causal=True, padded=True, dtype=dtype, target=target)
    _close(out, ref, dtype, "causal, random lengths")
    q, k, v, _ = ma.inputs(2, 2, 1, 33, 33, 64, "BHSD", dtype, 0)
    L = np.array([0, 33], np.int32)
    kern = ma.attention_prefill(2, 2, 1, 33, 33, 64, causal=True, padded=True, dtype=dtype, target=target)
    out = _run(kern, target, q, k, v, np.zeros((33, 33), np.float32), *ma.dense_blocks(33, 33), L)
    vis = np.stack([ma.visibility(33, 33, causal=True, kv_len=n) for n in L])
    _close(out, ma.reference(q, k, v, vis), dtype, "KvLen 0 and 33")
    assert not np.asarray(out[0], np.float64).any()


def _varlen(seqlens, H, KVH, D, causal, dtype, target):
    rng = np.random.default_rng(0)
    cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
    total = int(cu[-1])
    q = randn((total, H, D), dtype, seed=rng)
    k, v = randn((total, KVH, D), dtype, seed=rng), randn((total, KVH, D), dtype, seed=rng)
    kern = ma.varlen_attention(total, len(seqlens), H, KVH, D, max(seqlens), causal, dtype=dtype, target=target)
    out = _run(kern, target, q, k, v, cu)
    ref = np.zeros((total, H, D))
    for b, n in enumerate(seqlens):
        if n:
            sl = slice(cu[b], cu[b + 1])
            seq = [x[sl].transpose(1, 0, 2)[None] for x in (q, k, v)]
            ref[sl] = ma.reference(*seq, ma.visibility(n, n, causal))[0].transpose(1, 0, 2)
    return out, ref


@pytest.mark.parametrize("seqlens,heads,dim,causal,dtype", [([1, 0, 70, 0, 3], (7, 1), 128, True, "float16"),
                                                             ([0, 5], (2, 1), 80, False, "bfloat16"),
                                                             ([65, 1], (4, 4), 96, True, "float32")],
                         ids=["zeros-between-7to1-d128-fp16", "leading-zero-d80-bf16", "65-and-1-mha-d96-fp32"])
@pytest.mark.parametrize("target", TARGETS)
def test_varlen_with_empty_sequences(seqlens, heads, dim, causal, dtype, target):
    out, ref = _varlen(seqlens, *heads, dim, causal, dtype, target)
    _close(out, ref, dtype, f"varlen {seqlens} {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# Flash attention (its docstring names head dims 64 / 128): the other real head dims.

@pytest.mark.parametrize("dim,dtype", [(80, "float16"), (96, "bfloat16"), (112, "float32"), (256, "bfloat16")])
@pytest.mark.parametrize("target", TARGETS)
def test_flash_attention_real_head_dims(dim, dtype, target):
    rng = np.random.default_rng(dim)
    q, k, v = (randn((1, 2, 67, dim), dtype, seed=rng) for _ in range(3))
    out = _run(fa.flash_attention(1, 2, 67, dim, True, dtype=dtype, target=target), target, q, k, v)
    _close(out, fa.reference(q, k, v, True), dtype, f"flash attention D {dim} {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# RoPE: real head dims and thetas, positions at the end of long contexts.

ROPE = [(80, 1e4, "float16"), (80, 1e4, "bfloat16"), (96, 1e4, "bfloat16"), (112, 5e5, "bfloat16"),
        (128, 5e5, "float32"), (256, 1e6, "float16"), (80, 1e4, "float32")]  # Phi-2, Phi-3, -, Llama-3, Gemma


def _rope(target, tokens, heads, dim, interleaved, dtype, base, max_pos=4096, pos=None):
    rng = np.random.default_rng(dim)
    cos, sin = rope.tables(max_pos, dim, base)
    pos = rng.integers(0, max_pos, size=tokens) if pos is None else pos
    pos = np.asarray(pos, np.int32)
    x = randn((tokens, heads, dim), dtype, seed=rng)
    y = _run(rope.rope(tokens, heads, dim, max_pos, interleaved, dtype=dtype, target=target), target, x, cos, sin, pos)
    _close(y, rope.reference(x, cos, sin, pos, interleaved), dtype, f"rope D {dim} base {base} {dtype} {target}")


# F1 (fixed by the lead): half-split RoPE at head dim 80 / 112 in fp16 / bf16 was an error on ascend910b (a
# 16-bit output tile's second half started 16 bytes into a 32 B block); the example rotates into float32.


@pytest.mark.parametrize("dim,base,dtype", ROPE, ids=[f"d{d}-theta{b:g}-{t}" for d, b, t in ROPE])
@pytest.mark.parametrize("interleaved", [False, True], ids=["half_split", "interleaved"])
@pytest.mark.parametrize("target", TARGETS)
def test_rope_real_head_dims_and_thetas(dim, base, dtype, interleaved, target):
    _rope(target, 33, 2, dim, interleaved, dtype, base)


@pytest.mark.parametrize("interleaved", [False, True], ids=["half_split", "interleaved"])
@pytest.mark.parametrize("target", TARGETS)
def test_rope_at_the_end_of_long_contexts(interleaved, target):
    # decode at position 131071 (Llama-3's 128k table, theta 5e5) and 4095 (the last row of a 4096 table)
    _rope(target, 1, 3, 128, interleaved, "float32", 5e5, max_pos=131072, pos=[131071])
    _rope(target, 5, 3, 64, interleaved, "bfloat16", 1e4, pos=[4095, 0, 4095, 17, 4094])


@pytest.mark.parametrize("interleaved", [False, True], ids=["half_split", "interleaved"])
@pytest.mark.parametrize("dtype", ["bfloat16"])
@pytest.mark.parametrize("target", TARGETS)
def test_qk_rope_proj_at_head_dim_80(interleaved, dtype, target):
    rng = np.random.default_rng(1)
    tokens, hidden, heads, dim, max_pos = 33, 200, 2, 80, 4096
    cos, sin = rope.tables(max_pos, dim)
    pos = rng.integers(0, max_pos, size=tokens).astype(np.int32)
    pos[-1] = max_pos - 1
    xs = randn((tokens, hidden), dtype, seed=rng)
    w = randn((hidden, heads * dim), dtype, seed=rng, scale=hidden ** -0.5)
    out = _run(rope.qk_rope_proj(tokens, hidden, heads, dim, max_pos, interleaved, dtype=dtype, target=target),
               target, xs, w, cos, sin, pos)
    proj = (xs.astype(np.float64) @ w.astype(np.float64)).reshape(tokens, heads, dim)
    _close(out, rope.reference(proj, cos, sin, pos, interleaved), dtype, f"qk_rope_proj D 80 {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# Norms and softmax at real hidden sizes (ascend910b: block_M 1, one row of up to 11009 per tile).

@pytest.mark.parametrize("hidden,eps,dtype", [(5120, 1e-6, "bfloat16"), (8192, 1e-5, "float16"),
                                              (11009, 1e-6, "float32")])
@pytest.mark.parametrize("target", TARGETS)
def test_norms_at_real_hidden_sizes(hidden, eps, dtype, target):
    rng = np.random.default_rng(hidden)
    bm = 8 if target == "cpu" else 1
    x = randn((3, hidden), dtype, scale=2.0, seed=rng)
    w, b = randn((hidden,), dtype, seed=rng), randn((hidden,), dtype, seed=rng)
    y = _run(rms_norm.rms_norm(hidden, eps, block_M=bm, dtype=dtype, target=target), target, x, w)
    _close(y, rms_norm.reference(x, w, eps), dtype, f"rms_norm {hidden} eps {eps} {dtype} {target}")
    y = _run(layer_norm.layer_norm(hidden, eps, block_M=bm, dtype=dtype, target=target), target, x, w, b)
    _close(y, layer_norm.reference(x, w, b, eps), dtype, f"layer_norm {hidden} eps {eps} {dtype} {target}")


# F2 (fixed by h-ascnan11): softmax over a 32000-wide row (Llama-2's vocabulary) at block_M 1 was a UB overflow
# on ascend910b whose hint ('use smaller tiles') could not be followed.
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("target", TARGETS)
def test_softmax_over_a_vocabulary_row(dtype, target):
    x = randn((3, 32000), dtype, scale=3.0, seed=np.random.default_rng(0))
    y = _run(softmax.softmax(32000, block_M=1, dtype=dtype, target=target), target, x)
    _close(y, softmax.reference(x), dtype, f"softmax 32000 {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# MoE: Qwen-MoE's 60 experts top-4, 64 experts top-8, Switch's top-1, every token on one expert.

def _one_expert_logits(tokens, experts, seed):
    lg = np.random.default_rng(seed).standard_normal((tokens, experts)).astype(np.float32)
    lg[:, 3] = 50.0  # expert 3 takes every token (first); the others get a few or none
    return lg


MOE = [(20, 64, 48, 60, 4, None, "bfloat16"), (9, 64, 48, 64, 8, None, "float32"),
       (11, 64, 40, 8, 2, "one", "float16")]


@pytest.mark.parametrize("case", MOE, ids=lambda c: f"t{c[0]}-e{c[3]}-top{c[4]}" + ("-one-expert" if c[5] else "") + "-" + c[6])
@pytest.mark.parametrize("target", TARGETS)
def test_moe_real_expert_counts(case, target):
    tokens, hidden, ffn, experts, top_k, routing, dtype = case
    x, logits, w = moe.inputs(tokens, hidden, ffn, experts, dtype)
    if routing == "one":
        logits = _one_expert_logits(tokens, experts, tokens)
    out, ids, wts = moe.moe(x, logits, w, top_k, target=target)  # ascend910b: each call checked
    ref, ref_ids, ref_w = moe.reference(x, logits, w, top_k)
    np.testing.assert_array_equal(ids, ref_ids)
    _close(wts, ref_w, "float32", "gate weights")
    _close(out, ref, dtype, f"moe {case} {dtype} {target}")


# ---------------------------------------------------------------------------------------------
# Findings whose fix is a clear error or a kernel change.

# F3 (fixed): num_heads not a multiple of num_kv_heads (14 q / 4 kv) returned uninitialised memory or zeros
# for the last heads; now a TilewrightError at the factory's caller.
@pytest.mark.parametrize("kernel", ["paged_decode", "paged_decode_split", "attention_prefill"])
def test_heads_not_a_multiple_of_kv_heads_is_an_error(kernel):
    def build():
        if kernel == "paged_decode_split":
            return pa.paged_decode_split(2, 14, 4, 64, 9, 16, 3, 2)
        if kernel == "attention_prefill":
            return ma.attention_prefill(1, 14, 4, 20, 20, 64, causal=True)
        return pa.paged_decode(2, 14, 4, 64, 9, 16, 3)
    with pytest.raises(tw.TilewrightError) as e:
        build()
    assert "kv" in str(e.value)
    assert e.value.file == __file__, e.value.file  # at the line that called the factory


# F4 (hunt11a, fixed by h-ubsplit12): prefill_blocks(mask, 128, 128, 'ascend910b') (the block sizes of the
# ascend910b prefill figures) was a UB overflow whose hint, a smaller tile, would give tables of the wrong
# block size. Now the bool mask is compared in float16 (no float32 copy of the tile) and the additive one's
# three 64 KiB tiles run in two groups of 64 rows (split_rows).
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_block_tables_at_128_blocks_on_ascend(kind):
    vis = _bottom_right(300, 300, window=100)
    mask = vis if kind == "bool" else np.where(vis, 0.0, -np.inf).astype(np.float32)
    got = ma.prefill_blocks(mask, 128, 128, TARGET)
    for g, want in zip(got, ma.prefill_blocks(mask, 128, 128, "cpu")):
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("blocks", [(128, 64)])
def test_block_tables_on_ascend_match_cpu(blocks):
    # the block summary of bottom-right masks (chunked prefill / speculative decoding) with rows and
    # columns past the blocks' edges, both kinds, on ascend910b against cpu
    for sq, skv in [(17, 130), (1, 4097)]:
        vis = _bottom_right(sq, skv, window=8)
        for mask in (vis, np.where(vis, 0.0, -np.inf).astype(np.float32)):
            np.testing.assert_array_equal(ma.block_mask(mask, *blocks, TARGET), ma.block_mask(mask, *blocks, "cpu"))


# F6 (fixed): topk_gating with top_k > experts returned duplicate expert ids and negative weights.
def test_top_k_more_than_the_experts_is_an_error():
    with pytest.raises(tw.TilewrightError):
        moe.topk_gating(4, 4, 6)(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32))
