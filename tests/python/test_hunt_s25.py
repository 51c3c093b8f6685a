"""Session 25's hunt with the shapes of real public LLMs (h-hunt13, docs/testing.md "Session 25: real
model shapes (h-hunt13)"): the kernels of examples/ and of docs/language.md, on cpu and on ascend910b
(simulator, checker on), against float64 numpy. "Users' shapes are odder": head dims 64 / 80 (Phi-2) /
96 / 112 (StableLM) / 128 / 256 (Gemma); GQA groups 1 / 4 / 5 (40 query heads over 8 kv heads) / 7
(Qwen2-7B's 28 / 4) / 8 (64 / 8); hidden sizes 2560 / 3584 / 5120 / 6144 / 7168 (DeepSeek) / 8192;
intermediate sizes 11008 / 13824 / 14336 / 18944; vocabularies 32000 / 32064 / 151936 / 152064 / 128256;
page sizes 16 / 32 / 128; context lengths 0, 1, 2, 15, 16, 17 and 4095; odd batches; packed sequences
with empty ones; sliding windows of 1, 4096 and past the sequence; MoE with 8 / 60 / 64 experts, top-1 /
2 / 6 and experts that receive no token; RoPE at theta 1e4 / 1e6 and positions up to 131072.

Each model's head counts are reduced to one kv head's group (or two) on the simulator, which keeps the
odd group and head dim and shrinks what only repeats; long sizes (contexts, hidden, vocabulary) are
full on cpu and shortened on ascend910b where the simulator would take minutes (the comment at each
case says which).

Tolerances: tilewright.testing.TOLERANCES per output dtype (float32 1e-4 / 1e-4, float16 2e-3 / 2e-3,
bfloat16 2e-2 / 1.6e-2, atol / rtol), except where a case states its own (attention outputs in float32:
2e-4 absolute, as examples/flash_attention.py; gemms: 1e-5 * K absolute, as examples/gemm.py).

The defects found are strict xfails whose reason names the finding (F1.. of /work/hunt13-findings.md,
docs/testing.md); the rest guard what works."""
import math
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import TOLERANCES, assert_close, np_dtype, randn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import load_example  # noqa: E402

rms_norm = load_example("rms_norm")
layer_norm = load_example("layer_norm")
softmax = load_example("softmax")
gemm = load_example("gemm")
gelu_bias = load_example("gelu_bias")
fa = load_example("flash_attention")
ma = load_example("masked_attention")
pa = load_example("paged_attention")
rope = load_example("rope")
moe = load_example("moe")
seed = load_example("seed_matmul")

TARGETS = ["cpu", TARGET]


def _run(kernel, target, *args):
    """The kernel's outputs: called on cpu, simulated with the checker on ascend910b (which asserts
    that the checker reported nothing)."""
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


def _last(out):
    return out[-1] if isinstance(out, (list, tuple)) else out


def _close(got, ref, dtype, what, atol=None, rtol=None):
    a, r = TOLERANCES[dtype]
    assert_close(np.asarray(got, np.float64), ref, atol=a if atol is None else atol,
                 rtol=r if rtol is None else rtol, msg=what)


def _attn_tol(dtype):
    """attention outputs (|o| <= max |v|, about 3 for N(0, 1) values): float32 2e-4 absolute (the
    examples' own), 16-bit: their TOLERANCES."""
    return (2e-4, 1e-4) if dtype == "float32" else TOLERANCES[dtype]


def _fails(reason, raises=AssertionError):
    """The strict xfail mark of a finding: the test fails with `raises` (a wrong value: AssertionError)."""
    return pytest.mark.xfail(strict=True, raises=raises, reason=reason)


# ---------------------------------------------------------------------------------------------
# Paged decode (vLLM layout) at real models' head dims, GQA groups, page sizes and context lengths.
# (heads, kv_heads) are one or two kv heads' worth of the model's: the group G and head dim are the
# model's. Context lengths: 0 (an empty slot in the batch), 1, 2, 15, 16, 17, page +- 1.

PAGED = [
    # model                       seqs heads kv  D   page lens                 dtype
    ("phi2-mha-D80",               3,  2,   2,  80,  16, [1, 17, 2],           "float16"),
    ("qwen2-7b-G7-D128",           3,  7,   1,  128, 16, [15, 16, 17],         "bfloat16"),
    ("40q8kv-G5-D128-page32",      3,  5,   1,  128, 32, [1, 2, 33],           "float16"),
    ("64q8kv-G8-D128-page128",     2,  8,   1,  128, 128, [1, 129],            "float32"),
    ("gemma-D256-G2",              3,  4,   2,  256, 16, [17, 1, 16],          "bfloat16"),
    ("D96-G4",                     3,  8,   2,  96,  16, [0, 5, 31],           "float32"),
    ("stablelm-D112-G4",           1,  4,   1,  112, 32, [15],                 "float16"),
    ("llama-D64-G4-page16",        5,  4,   1,  64,  16, [1, 2, 15, 16, 17],   "float32"),
]


def _paged_inputs(seqs, heads, kv, D, page, lens, dtype, seed_=0):
    return pa.make_inputs(seqs, heads, kv, D, page, max(max(lens), 1), dtype, seed=seed_, lens=lens)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,seqs,heads,kv,D,page,lens,dtype", PAGED, ids=[p[0] for p in PAGED])
def test_paged_decode_model_shapes(name, seqs, heads, kv, D, page, lens, dtype, target):
    q, kc, vc, bt, cl = _paged_inputs(seqs, heads, kv, D, page, lens, dtype)
    ref = pa.reference(q, kc, vc, bt, cl)
    pps = 1 if page >= 128 else 2
    k = pa.paged_decode(seqs, heads, kv, D, kc.shape[0], page, bt.shape[1], dtype, pps, target=target)
    _close(_last(_run(k, target, q, kc, vc, bt, cl)), ref, dtype, f"paged_decode {name} {target}",
           *_attn_tol(dtype))


SPLIT = [
    ("40q8kv-G5-D80-splits3",      3,  5,   1,  80,  16, [0, 40, 17],          "float16", 3),
    ("qwen2-G7-D128-splits2",      2,  7,   1,  128, 32, [1, 65],              "float32", 2),
    ("gemma-D256-splits4",         1,  2,   1,  256, 16, [63],                 "bfloat16", 4),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,seqs,heads,kv,D,page,lens,dtype,splits", SPLIT, ids=[p[0] for p in SPLIT])
def test_paged_decode_split_model_shapes(name, seqs, heads, kv, D, page, lens, dtype, splits, target):
    q, kc, vc, bt, cl = _paged_inputs(seqs, heads, kv, D, page, lens, dtype, seed_=1)
    ref = pa.reference(q, kc, vc, bt, cl)
    ks = pa.paged_decode_split(seqs, heads, kv, D, kc.shape[0], page, bt.shape[1], splits, dtype, target=target)
    part, lse = _run(ks, target, q, kc, vc, bt, cl)
    kc_ = pa.combine_splits(seqs, heads, splits, D, dtype, target=target)
    _close(_last(_run(kc_, target, part, lse)), ref, dtype, f"paged_decode_split {name} {target}", *_attn_tol(dtype))


@pytest.mark.parametrize("name,seqs,heads,kv,D,page,lens,dtype", [
    ("40q8kv-G5-D80", 3, 40, 8, 80, 16, [0, 17, 4095], "float32"),
    ("qwen2-28q4kv-D128", 1, 28, 4, 128, 32, [4095], "bfloat16"),
    ("gemma-16q8kv-D256", 2, 16, 8, 256, 16, [1, 2], "float16"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_paged_decode_pages_cpu_full_heads(name, seqs, heads, kv, D, page, lens, dtype):
    """The cpu form at the models' full head counts and a context of 4095."""
    q, kc, vc, bt, cl = _paged_inputs(seqs, heads, kv, D, page, lens, dtype, seed_=2)
    ref = pa.reference(q, kc, vc, bt, cl)
    k = pa.paged_decode_pages(seqs, heads, kv, D, kc.shape[0], page, bt.shape[1], dtype)
    _close(k(q, pa.page_view(kc), pa.page_view(vc), bt, cl), ref, dtype, f"paged_decode_pages {name}",
           *_attn_tol(dtype))


def test_paged_decode_cpu_long_context_full_heads():
    """paged_decode (the ascend form) on cpu at Qwen2-7B's 28 / 4 heads and a context of 4095."""
    q, kc, vc, bt, cl = _paged_inputs(2, 28, 4, 128, 16, [4095, 17], "float16", seed_=3)
    k = pa.paged_decode(2, 28, 4, 128, kc.shape[0], 16, bt.shape[1], "float16")
    _close(k(q, kc, vc, bt, cl), pa.reference(q, kc, vc, bt, cl), "float16", "paged_decode 4095 cpu")


def test_paged_decode_ascend_long_context():
    """ascend910b at a context of 1023 (4095 is a minute of simulation), G 5, D 80, float16."""
    q, kc, vc, bt, cl = _paged_inputs(1, 5, 1, 80, 32, [1023], "float16", seed_=3)
    k = pa.paged_decode(1, 5, 1, 80, kc.shape[0], 32, bt.shape[1], "float16", 4, target=TARGET)
    _close(run_checked(k, q, kc, vc, bt, cl), pa.reference(q, kc, vc, bt, cl), "float16", "paged_decode 1023 ascend")


# ---------------------------------------------------------------------------------------------
# Flash attention (examples/flash_attention.py) at the models' head dims and short / odd lengths.

FLASH = [
    # B H  S     D    causal dtype       blocks
    (1, 1, 1,    64,  True,  "float32",  64),
    (1, 2, 2,    80,  True,  "float16",  64),
    (3, 1, 15,   96,  False, "bfloat16", 64),
    (1, 1, 17,   112, True,  "float16",  64),
    (1, 1, 130,  128, True,  "bfloat16", 64),
    (1, 1, 17,   256, True,  "float32",  32),
    (1, 1, 65,   256, False, "float16",  32),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("B,H,S,D,causal,dtype,blk", FLASH)
def test_flash_attention_model_head_dims(B, H, S, D, causal, dtype, blk, target):
    rng = np.random.default_rng(5)
    q, k, v = (randn((B, H, S, D), dtype, seed=rng) for _ in range(3))
    kern = fa.flash_attention(B, H, S, D, causal, blk, blk, dtype, target=target)
    _close(_last(_run(kern, target, q, k, v)), fa.reference(q, k, v, causal), dtype,
           f"flash_attention {B}x{H}x{S}x{D} causal={causal} {target}", *_attn_tol(dtype))


def test_flash_attention_cpu_4095():
    rng = np.random.default_rng(6)
    q, k, v = (randn((1, 1, 4095, 80), "float16", seed=rng) for _ in range(3))
    out = fa.flash_attention(1, 1, 4095, 80, True, dtype="float16")(q, k, v)
    _close(out, fa.reference(q, k, v, True), "float16", "flash_attention S 4095 D 80 causal")


# ---------------------------------------------------------------------------------------------
# Masked prefill: GQA groups 5 / 7 / 8, windows 1 / 4096 / past S, head dims 80 / 112 / 256.

PREFILL = [
    # B H   KVH Sq  Skv D    kw                                          dtype
    (1, 5,  1,  17, 17, 80,  dict(causal=True, window=1),                  "float16"),
    (3, 7,  1,  15, 15, 128, dict(causal=True, window=4096),               "bfloat16"),
    (1, 8,  1,  33, 33, 112, dict(causal=True, window=40),                 "float32"),
    (1, 5,  1,  2,  2,  256, dict(causal=True),                            "float16"),
    (1, 10, 2,  17, 17, 80,  dict(mask="bool"),                            "float32"),
    (3, 5,  1,  16, 16, 96,  dict(padded=True, layout="BSHD"),             "float16"),
    (1, 4,  1,  1,  1,  128, dict(causal=True, window=1),                  "float32"),
    (1, 7,  1,  9,  20, 64,  dict(mask="additive"),                        "bfloat16"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("B,H,KVH,Sq,Skv,D,kw,dtype", PREFILL)
def test_prefill_model_shapes(B, H, KVH, Sq, Skv, D, kw, dtype, target):
    kw = dict(kw)
    layout = kw.pop("layout", "BHSD")
    kern = ma.attention_prefill(B, H, KVH, Sq, Skv, D, layout, dtype=dtype, target=target,
                                block_M=64 if D <= 128 else 32, block_N=64 if D <= 128 else 32, **kw)
    args = ma.prefill_args(B, H, KVH, Sq, Skv, D, layout, kw.get("mask"), kw.get("padded", False), dtype, 0, target,
                           block_M=64 if D <= 128 else 32, block_N=64 if D <= 128 else 32)
    q, k, v, m, lens = args[0], args[1], args[2], args[3], args[-1]
    vis = np.stack([ma.visibility(Sq, Skv, kw.get("causal", False), kw.get("window"),
                                  m if kw.get("mask") == "bool" else None, lens[b]) for b in range(B)])
    ref = ma.reference(q, k, v, vis, m.astype(np.float64) if kw.get("mask") == "additive" else None, layout)
    _close(_last(_run(kern, target, *args)), ref, dtype, f"prefill {B} {H}/{KVH} {Sq}x{Skv} D{D} {kw} {target}",
           *_attn_tol(dtype))


VARLEN = [
    ([0, 17, 1, 0, 15], 5, 1, 80, True, "float16"),
    ([2, 0, 0], 7, 1, 128, False, "bfloat16"),
    ([0, 1], 8, 1, 112, True, "float32"),
    ([65, 0, 3], 4, 1, 256, True, "float16"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seqlens,H,KVH,D,causal,dtype", VARLEN)
def test_varlen_with_empty_sequences(seqlens, H, KVH, D, causal, dtype, target):
    rng = np.random.default_rng(7)
    cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
    total = int(cu[-1])
    q = randn((total, H, D), dtype, seed=rng)
    k, v = randn((total, KVH, D), dtype, seed=rng), randn((total, KVH, D), dtype, seed=rng)
    blk = 64 if D <= 128 else 32
    kern = ma.varlen_attention(total, len(seqlens), H, KVH, D, max(seqlens), causal, blk, blk, dtype, target=target)
    out = _last(_run(kern, target, q, k, v, cu))
    ref = np.zeros((total, H, D))
    for b, n in enumerate(seqlens):
        sl = slice(cu[b], cu[b + 1])
        if n:
            seq = [x[sl].transpose(1, 0, 2)[None] for x in (q, k, v)]
            ref[sl] = ma.reference(*seq, ma.visibility(n, n, causal))[0].transpose(1, 0, 2)
    _close(out, ref, dtype, f"varlen {seqlens} {H}/{KVH} D{D} {target}", *_attn_tol(dtype))


# ---------------------------------------------------------------------------------------------
# RoPE: head dims 80 / 112 / 128 / 256, theta 1e4 and 1e6 (Qwen2, Llama 3 uses 5e5), positions up to
# 131072 (the tables in float64 -> float32, as examples/rope.py; the kernel's float32 products).

ROPE = [
    # tokens heads D   theta  max_pos  interleaved dtype
    (7,      2,    80,  1e4,   4096,    False,      "float16"),
    (33,     1,    112, 1e6,   32768,   True,       "bfloat16"),
    (1,      3,    128, 1e6,   131073,  False,      "float32"),
    (17,     1,    256, 1e4,   8192,    True,       "float32"),
    (5,      2,    64,  5e5,   131073,  True,       "float16"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tokens,heads,D,theta,max_pos,interleaved,dtype", ROPE)
def test_rope_model_shapes(tokens, heads, D, theta, max_pos, interleaved, dtype, target):
    rng = np.random.default_rng(8)
    cos, sin = rope.tables(max_pos, D, theta)
    pos = rng.integers(0, max_pos, size=tokens).astype(np.int32)
    pos[0] = max_pos - 1
    x = randn((tokens, heads, D), dtype, seed=rng)
    kern = rope.rope(tokens, heads, D, max_pos, interleaved, dtype=dtype, target=target)
    # the reference rotates by the exact (float64) angles: the float32 tables add 6e-8 relative
    inv = theta ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    ang = pos.astype(np.float64)[:, None] * inv[None, :]
    ref = rope.reference(x, np.cos(ang), np.sin(ang), np.arange(tokens), interleaved)
    _close(_last(_run(kern, target, x, cos, sin, pos)), ref, dtype, f"rope D{D} theta {theta} pos {max_pos - 1} {target}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tokens,hidden,heads,D,dtype", [(7, 2560, 1, 80, "float16"), (3, 320, 2, 112, "bfloat16"),
                                                         (1, 192, 1, 256, "float32")])
def test_qk_rope_proj_model_shapes(tokens, hidden, heads, D, dtype, target):
    rng = np.random.default_rng(9)
    max_pos = 131073
    cos, sin = rope.tables(max_pos, D, 1e6)
    pos = rng.integers(0, max_pos, size=tokens).astype(np.int32)
    xs = randn((tokens, hidden), dtype, seed=rng)
    w = randn((hidden, heads * D), dtype, seed=rng, scale=hidden ** -0.5)
    kern = rope.qk_rope_proj(tokens, hidden, heads, D, max_pos, False, dtype=dtype, target=target)
    proj = (xs.astype(np.float64) @ w.astype(np.float64)).reshape(tokens, heads, D)
    _close(_last(_run(kern, target, xs, w, cos, sin, pos)), rope.reference(proj, cos, sin, pos), dtype,
           f"qk_rope_proj hidden {hidden} D{D} {target}")


# ---------------------------------------------------------------------------------------------
# MoE: Mixtral 8 experts top-2, Qwen1.5-MoE 60 experts top-4, DeepSeek / OLMoE 64 experts top-6,
# Switch top-1; few tokens, so many experts receive none. hidden / ffn shrunk (odd sizes kept).

MOE = [
    # tokens hidden ffn experts top_k dtype
    (7,      96,    80,  8,      2,    "float32"),
    (5,      64,    96,  60,     4,    "bfloat16"),
    (3,      64,    40,  64,     6,    "float16"),
    (9,      32,    64,  8,      1,    "float32"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tokens,hidden,ffn,experts,top_k,dtype", MOE)
def test_moe_model_shapes(tokens, hidden, ffn, experts, top_k, dtype, target):
    x, logits, w = moe.inputs(tokens, hidden, ffn, experts, dtype, seed=10)
    ref, ref_ids, ref_w = moe.reference(x, logits, w, top_k)
    if target == "cpu":
        out, ids, wts = moe.moe(x, logits, w, top_k, block_M=16)
    else:
        ids, wts = run_checked(moe.topk_gating(tokens, experts, top_k, target=target), logits)
        rows, be, slot = run_checked(moe.align_by_expert(tokens, experts, top_k, 16, target=target), ids)
        y = run_checked(moe.grouped_gemm(tokens, hidden, ffn, experts, top_k, block_M=16, dtype=dtype,
                                         target=target), x, w, rows, be)
        out = run_checked(moe.combine(tokens, ffn, top_k, rows.shape[0], dtype=dtype, target=target), y, slot, wts)
    assert np.array_equal(ids, ref_ids), f"moe ids {target}"
    _close(wts, ref_w, "float32", f"moe weights {target}")
    _close(out, ref, dtype, f"moe {experts} experts top-{top_k} {target}")


# ---------------------------------------------------------------------------------------------
# Row kernels at the models' hidden sizes and vocabularies.

HIDDEN = [2560, 3584, 5120, 6144, 7168, 8192]


# every hidden size once, the dtypes in turn (each twice): on cpu these multiples of 512 share one row
# schedule (no tail), two compiles a case (session 27, h-citrim15: CI time; not the 18 of the product)
@pytest.mark.parametrize("N,dtype", [(n, ["float32", "float16", "bfloat16"][i % 3]) for i, n in enumerate(HIDDEN)])
def test_norms_hidden_sizes_cpu(N, dtype):
    rng = np.random.default_rng(N)
    x = randn((13, N), dtype, seed=rng)
    w = randn((N,), dtype, seed=rng)
    b = randn((N,), dtype, seed=rng)
    _close(rms_norm.rms_norm(N, dtype=dtype)(x, w), rms_norm.reference(x, w), dtype, f"rms_norm {N}")
    _close(layer_norm.layer_norm(N, dtype=dtype)(x, w, b), layer_norm.reference(x, w, b), dtype, f"layer_norm {N}")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("N", [2560, 3584, 7168])
def test_norms_hidden_sizes_ascend(N, dtype):
    """ascend910b: block_M 1 and 3 rows (a symbolic M: the odd tail)."""
    rng = np.random.default_rng(N)
    x = randn((3, N), dtype, seed=rng)
    w = randn((N,), dtype, seed=rng)
    b = randn((N,), dtype, seed=rng)
    _close(run_checked(rms_norm.rms_norm(N, block_M=1, dtype=dtype, target=TARGET), x, w), rms_norm.reference(x, w),
           dtype, f"rms_norm {N} ascend")
    _close(run_checked(layer_norm.layer_norm(N, block_M=1, dtype=dtype, target=TARGET), x, w, b),
           layer_norm.reference(x, w, b), dtype, f"layer_norm {N} ascend")


VOCAB = [32000, 32064, 128256, 151936, 152064]


@pytest.mark.parametrize("N", VOCAB)
def test_softmax_vocab_cpu(N):
    rng = np.random.default_rng(N)
    x = randn((3, N), "float32", scale=3.0, seed=rng)
    _close(softmax.softmax(N, block_M=2)(x), softmax.reference(x), "float32", f"softmax vocab {N}", atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("N", [32000, 32064])
def test_softmax_vocab_ascend(N, dtype):
    rng = np.random.default_rng(N)
    x = randn((3, N), dtype, scale=3.0, seed=rng)
    _close(run_checked(softmax.softmax(N, block_M=1, dtype=dtype, target=TARGET), x), softmax.reference(x), dtype,
           f"softmax vocab {N} {dtype} ascend", atol=1e-6 if dtype == "float32" else None)


@tw.jit(out_idx=[-1])
def argmax_rows(M, N, block=8):
    """docs/language.md's argmax_rows (greedy decoding's next token over a vocabulary)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), I: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, block)) as bx:
            x = T.alloc_fragment((block, N), "float32")
            best = T.alloc_fragment((block,), "float32")
            pick = T.alloc_fragment((block, N), "int32")
            idx = T.alloc_fragment((block,), "int32")
            T.copy(X[bx * block, 0], x)
            T.reduce_max(x, best, dim=1)
            for i, j in T.Parallel(block, N):
                pick[i, j] = T.where(x[i, j] == best[i] or x[i, j] != x[i, j], j, N)
            T.reduce_min(pick, idx, dim=1)
            T.copy(idx, I[bx * block])
    return main


@pytest.mark.parametrize("N", VOCAB)
def test_argmax_vocab_cpu(N):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, N)).astype(np.float32)
    x[1, N - 1] = 100.0  # the best in the last column
    x[2, [5, N - 2]] = 50.0  # a tie: the lower index
    assert np.array_equal(argmax_rows(3, N, 1)(x), np.argmax(x, axis=1))


def test_argmax_vocab_ascend_runs_in_column_blocks():
    """A whole 32000-entry row does not fit the AIV's UB: since h-widerow13 (session 25) the compiler runs each row in
    column blocks carrying the running max and index (a note says so), and the answer is numpy's, ties included.
    (Until then this was a UB overflow whose hint named the column-block form below.)"""
    N = 32000
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, N)).astype(np.float32)
    x[1, N - 1] = 100.0
    x[2, [5, N - 2]] = 50.0
    assert np.array_equal(run_checked(argmax_rows(3, N, 1, target=TARGET), x), np.argmax(x, axis=1))


@tw.jit(out_idx=[-1])
def argmax_chunked(M, N, block_N=4096):
    """The hint's alternative: each row in column blocks, the best value and its index carried from block to block
    (a strictly greater later block wins: ties keep the lower index)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), I: T.Tensor((M,), "int32")):
        with T.Kernel(M) as b:
            x = T.alloc_fragment((1, block_N), "float32")
            pick = T.alloc_fragment((1, block_N), "int32")
            cmax = T.alloc_fragment((1,), "float32")
            cidx = T.alloc_fragment((1,), "int32")
            best = T.alloc_fragment((1,), "float32")
            bidx = T.alloc_fragment((1,), "int32")
            T.fill(best, -3.4e38)
            T.fill(bidx, 0)
            for c in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[b:b + 1, c * block_N:(c + 1) * block_N], x)
                for i, j in T.Parallel(1, block_N):
                    x[i, j] = T.where(c * block_N + j < N, x[i, j], -3.4e38)
                T.reduce_max(x, cmax, dim=1)
                for i, j in T.Parallel(1, block_N):
                    pick[i, j] = T.where(x[i, j] == cmax[i], c * block_N + j, N)
                T.reduce_min(pick, cidx, dim=1)
                for i in T.Parallel(1):
                    bidx[i] = T.where(cmax[i] > best[i], cidx[i], bidx[i])
                    best[i] = T.max(best[i], cmax[i])
            T.copy(bidx, I[b:b + 1])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("N", [32064, 151936, 152064])
def test_argmax_vocab_chunked(N, target):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((4, N)).astype(np.float32)
    x[1, N - 1] = 100.0  # the best in the tail block
    x[2, [5, N - 2]] = 50.0  # a tie across blocks: the lower index
    x[3, [4097, 4100]] = 60.0  # a tie inside a block
    got = _run(argmax_chunked(4, N, target=target), target, x)
    assert np.array_equal(_last(got), np.argmax(x, axis=1)), (got, np.argmax(x, axis=1))


# ---------------------------------------------------------------------------------------------
# GEMMs: the LM head (M 1 / odd tokens, N a vocabulary), the MLP's up projection (N intermediate),
# gelu + bias epilogue, the seed matmul.

@pytest.mark.parametrize("M,N,K,dtype", [(1, 32064, 2560, "float16"), (7, 152064, 256, "bfloat16"),
                                         (3, 11008, 4096, "float16"), (5, 18944, 3584, "float32")])
def test_gemm_lm_head_cpu(M, N, K, dtype):
    rng = np.random.default_rng(12)
    a = randn((M, K), dtype, seed=rng)
    b = randn((K, N), dtype, seed=rng, scale=K ** -0.5)
    c = gemm.matmul(M, N, K, dtype=dtype)(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    _close(c, ref, dtype, f"gemm {M}x{N}x{K} {dtype}", atol=max(TOLERANCES[dtype][0], 1e-5 * math.sqrt(K)))


@pytest.mark.parametrize("M,N,K,dtype", [(1, 1000, 2560, "float16"), (7, 520, 7168, "bfloat16"),
                                         (3, 328, 576, "float32")])
def test_gemm_lm_head_ascend(M, N, K, dtype):
    """ascend910b: the vocabulary shrunk to a few N blocks with a tail; K the models' hidden sizes."""
    rng = np.random.default_rng(12)
    a = randn((M, K), dtype, seed=rng)
    b = randn((K, N), dtype, seed=rng, scale=K ** -0.5)
    c = run_checked(gemm.matmul(M, N, K, block_N=256, dtype=dtype, target=TARGET), a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    _close(c, ref, dtype, f"gemm {M}x{N}x{K} {dtype} ascend", atol=max(TOLERANCES[dtype][0], 1e-5 * math.sqrt(K)))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,dtype", [(7, 13824 // 64, 320, "float16"), (1, 200, 2560, "bfloat16"),
                                         (17, 96, 80, "float32")])
def test_gelu_bias_model_shapes(M, N, K, dtype, target):
    rng = np.random.default_rng(13)
    x = randn((M, K), dtype, scale=0.2, seed=rng)
    w = randn((K, N), dtype, scale=0.2 * 16 / math.sqrt(K), seed=rng)
    b = randn((N,), dtype, seed=rng)
    kern = gelu_bias.gemm_bias_gelu(M, N, K, dtype=dtype, target=target)
    _close(_last(_run(kern, target, x, w, b)), gelu_bias.reference(x, w, b), dtype, f"gelu_bias {M}x{N}x{K} {target}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,dtype", [(1, 320, 2560, "float32"), (7, 136, 80, "float16"),
                                         (3, 72, 112, "bfloat16")])
def test_seed_matmul_model_shapes(M, N, K, dtype, target):
    rng = np.random.default_rng(14)
    a = randn((M, K), dtype, seed=rng)
    b = randn((K, N), dtype, seed=rng)
    kern = seed.build(M, N, K, dtype=dtype, target=target)
    c = _last(_run(kern, target, a, b))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-6 * K + 1e-4
    rel = {"float32": 0.0, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype]
    _close(c, ref, dtype, f"seed matmul {M}x{N}x{K} {dtype} {target}", atol=tol, rtol=rel)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seqs,heads,kv,D,page,lens,dtype,pps", [(3, 5, 1, 80, 32, [1, 33, 17], "bfloat16", 2),
                                                                 (2, 7, 1, 112, 16, [15, 17], "float16", 4)])
def test_paged_decode_nan_in_stale_slots(seqs, heads, kv, D, page, lens, dtype, pps, target):
    """vLLM's cache slots past a sequence's length (and unused pages) hold stale data: NaN here. Both forms
    (paged_decode and the split one with combine_splits) read none of it, at G 5 / D 80 and G 7 / D 112."""
    q, kc, vc, bt, cl = _paged_inputs(seqs, heads, kv, D, page, lens, dtype, seed_=20)
    used = np.zeros(kc.shape[:2], bool)
    for b, n in enumerate(lens):
        for j in range(-(-n // page)):
            used[bt[b, j], :min(page, n - j * page)] = True
    kc, vc = kc.copy(), vc.copy()
    kc[~used] = np.nan
    vc[~used] = np.nan
    ref = pa.reference(q, kc, vc, bt, cl)
    k = pa.paged_decode(seqs, heads, kv, D, kc.shape[0], page, bt.shape[1], dtype, pps, target=target)
    _close(_last(_run(k, target, q, kc, vc, bt, cl)), ref, dtype, f"paged_decode NaN slots {target}", *_attn_tol(dtype))
    ks = pa.paged_decode_split(seqs, heads, kv, D, kc.shape[0], page, bt.shape[1], 2, dtype, target=target)
    part, lse = _run(ks, target, q, kc, vc, bt, cl)
    out = _last(_run(pa.combine_splits(seqs, heads, 2, D, dtype, target=target), target, part, lse))
    _close(out, ref, dtype, f"paged_decode_split NaN slots {target}", *_attn_tol(dtype))


@tw.jit(out_idx=[-1])
def swiglu(N, block_M=2, block_N=2048, dtype="float16"):
    """The MLP's gate: Y = silu(G) * U (T.silu, docs/language.md), at the models' intermediate sizes."""
    M = T.symbolic("M")

    @T.prim_func
    def main(G: T.Tensor((M, N), dtype), U: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            g = T.alloc_fragment((block_M, block_N), "float32")
            u = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(G[by * block_M, bx * block_N], g)
            T.copy(U[by * block_M, bx * block_N], u)
            for i, j in T.Parallel(block_M, block_N):
                g[i, j] = T.silu(g[i, j]) * u[i, j]
            T.copy(g, Y[by * block_M, bx * block_N])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("N,dtype", [(11008, "float16"), (13824, "bfloat16"), (14336, "float16"), (18944, "bfloat16")])
def test_swiglu_intermediate_sizes(N, dtype, target):
    rng = np.random.default_rng(N)
    g = randn((5, N), dtype, scale=3.0, seed=rng)
    u = randn((5, N), dtype, seed=rng)
    g64 = g.astype(np.float64)
    ref = g64 / (1 + np.exp(-g64)) * u.astype(np.float64)
    _close(_last(_run(swiglu(N, dtype=dtype, target=target), target, g, u)), ref, dtype, f"swiglu {N} {target}")


# ---------------------------------------------------------------------------------------------
# Findings (/work/hunt13-findings.md): strict xfails, each named by its finding.

F1 = ("F1 (fixed in session 25 by the lead, h-lead13: the consumer waits for the producer's previous drain): ascend910b: varlen_attention with most programs empty (max_seqlen far above most sequences) is a checker "
      "report 'cross-core flag overflow ... 16 pending sets (the hardware hangs)' at the kernel's line; cpu is right; "
      "/work/hunt13-findings.md")
F2 = ("F2 (fixed in session 25 by h-pipecol13: such a copy is several calls of at most 4095 rows): ascend910b: a UB <-> GM copy of a tile of more than 4095 rows is a compile-time error 'DataCopyExtParams."
      "blockCount = 4096 (rows) is above 4095' (moe.align_by_expert at 4096 tokens x top-2 of 8 experts, which "
      "docs/llm-kernels.md says fits); cpu runs it; /work/hunt13-findings.md")
F3 = ("F3 (fixed in session 26 by h-hints14: the hint shrinks the dims the kernel ties together, "
      "test_ascend_capacity_hints_s26.py): ascend910b: the L1 overflow hint of paged_decode at head dim 256, page 128, "
      "4 pages per step proposed tiles that do not fit together (p 4x512 against k / v 256 rows); /work/hunt13-findings.md")


def _varlen_case(seqlens, heads, max_seqlen, target, D=64, dtype="float32"):
    rng = np.random.default_rng(15)
    cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
    total = int(cu[-1])
    q = randn((total, heads, D), dtype, seed=rng)
    k, v = randn((total, 1, D), dtype, seed=rng), randn((total, 1, D), dtype, seed=rng)
    kern = ma.varlen_attention(total, len(seqlens), heads, 1, D, max_seqlen, False, dtype=dtype, target=target)
    out = _last(_run(kern, target, q, k, v, cu))
    ref = np.zeros((total, heads, D))
    for b, n in enumerate(seqlens):
        sl = slice(cu[b], cu[b + 1])
        seq = [x[sl].transpose(1, 0, 2)[None] for x in (q, k, v)]
        ref[sl] = ma.reference(*seq, ma.visibility(n, n, False))[0].transpose(1, 0, 2)
    _close(out, ref, dtype, f"varlen {len(seqlens)} sequences, max_seqlen {max_seqlen}, {target}", *_attn_tol(dtype))


@pytest.mark.parametrize("seqlens,heads,max_seqlen", [
    ([1], 1, 64 * 400),          # the model's max length as max_seqlen: 400 programs, one with rows
    ([4096] + [1] * 15, 2, 4096),  # a mixed batch: one long prompt and 15 one-token sequences
], ids=["max-len-config", "mixed-batch"])
@pytest.mark.parametrize("target", TARGETS)
def test_f1_varlen_many_empty_programs(seqlens, heads, max_seqlen, target):
    _varlen_case(seqlens, heads, max_seqlen, target)


def test_f1_varlen_few_empty_programs_ascend():
    """The same kernel with 330 programs (at most 14 per core) is clean: the guard of F1's boundary."""
    _varlen_case([1], 1, 64 * 330, TARGET)


@pytest.mark.parametrize("target", TARGETS)
def test_f1_paged_split_mostly_empty_splits(target):
    """Flash-decoding of a usual serving batch: 63 one-token sequences and one of 4095, 8 splits (512 programs, most
    with an empty page range)."""
    seqs, splits, dtype = 64, 8, "float16"
    q, kc, vc, bt, cl = _paged_inputs(seqs, 1, 1, 64, 16, [1] * 63 + [4095], dtype, seed_=18)
    ks = pa.paged_decode_split(seqs, 1, 1, 64, kc.shape[0], 16, bt.shape[1], splits, dtype, target=target)
    part, lse = _run(ks, target, q, kc, vc, bt, cl)
    out = _last(_run(pa.combine_splits(seqs, 1, splits, 64, dtype, target=target), target, part, lse))
    _close(out, pa.reference(q, kc, vc, bt, cl), dtype, f"paged_decode_split 64 sequences 8 splits {target}")


def test_paged_decode_mostly_empty_batch_ascend():
    """paged_decode (no split) with 399 empty sequences of 400 is clean: F1 needs skipped Cube / Vector work."""
    q, kc, vc, bt, cl = _paged_inputs(400, 1, 1, 64, 16, [0] * 399 + [17], "float16", seed_=19)
    k = pa.paged_decode(400, 1, 1, 64, kc.shape[0], 16, bt.shape[1], "float16", 1, target=TARGET)
    _close(run_checked(k, q, kc, vc, bt, cl), pa.reference(q, kc, vc, bt, cl), "float16", "paged_decode 400 sequences")


@pytest.mark.parametrize("target", TARGETS)
def test_f2_align_by_expert_4096_tokens(target):
    """Mixtral's routing of a 4096-token prefill (8 experts, top-2): the counting sort bit-exact against cpu's."""
    rng = np.random.default_rng(16)
    ids = np.stack([rng.permutation(8)[:2] for _ in range(4096)]).astype(np.int32)
    got = _run(moe.align_by_expert(4096, 8, 2, 16, target=target), target, ids)
    ref = moe.align_by_expert(4096, 8, 2, 16)(ids) if target != "cpu" else got
    counts = np.bincount(ids.ravel(), minlength=8)
    assert np.array_equal(np.sort(got[0][got[0] < 4096]), np.sort(np.repeat(np.arange(4096), 2)))
    assert (np.bincount(got[1][got[1] >= 0], minlength=8) * 16 >= counts).all()
    for a, b in zip(got, ref):
        assert np.array_equal(a, b)


@tw.jit(out_idx=[-1])
def copy_through_tile(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "int32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "int32")
            T.copy(A, a)
            T.copy(a, B)
    return main


@pytest.mark.parametrize("M", [4095, 4096, 6000, 8191])
def test_f2_copy_of_4096_rows(M):
    """A (M, 2) int32 tile copied in and out on ascend910b: 4096 and 6000 rows fit the UB (each row padded to a
    32 B block: 192000 B at 6000) and are one copy of more than 4095 rows; 8191 rows do not fit, so the compiler
    runs them in groups of rows (a note), which works."""
    a = np.arange(M * 2, dtype=np.int32).reshape(M, 2)
    assert np.array_equal(run_checked(copy_through_tile(M, 2, target=TARGET), a), a)


def test_f3_overflow_hint_proposes_consistent_tiles():
    """paged_decode at Gemma's head dim 256 with 128-slot pages and 4 pages per step overflows the AIC's L1 (a clear
    error at the kernel's line); the hint's smaller tiles must still multiply: p's columns = v's rows."""
    with pytest.raises(tw.TilewrightError) as e:
        pa.paged_decode(3, 8, 1, 256, 30, 128, 3, "float16", 4, target=TARGET)
    import re
    hint = e.value.hint or ""
    assert "L1 overflow" in str(e.value)
    p = re.search(r"\bp (\d+)x(\d+)", hint)
    v = re.search(r"\bv (\d+)x(\d+)", hint)
    assert p and v, hint
    assert p.group(2) == v.group(1), f"hint proposes p {p.group(1)}x{p.group(2)} against v {v.group(1)}x{v.group(2)}: {hint}"


F4 = ("F4 (fixed in session 25 by h-tune13: the workers exit and the parent raises one error naming the guard): a script that tunes (@tw.autotune's default executor: spawned workers) without `if __name__ == "
      "'__main__':` hangs: the workers re-run the script and wait for the sweep lock their parent holds ('waiting for "
      "another process's sweep'); /work/hunt13-findings.md")

TUNE_SCRIPT = """
import sys
sys.path.insert(0, {examples!r})
import seed_matmul
k = seed_matmul.tuned_matmul(64, 48, 80, dtype="float16", target="ascend910b")
print("tuned", seed_matmul.tuned_matmul.best_config)
"""


def test_f4_tune_without_main_guard(tmp_path):
    """examples/seed_matmul.py's tuned_matmul called at a script's top level (no main guard): it must finish or
    fail clearly (naming the guard), not wait on its own workers."""
    import os
    import subprocess
    script = tmp_path / "tune_no_guard.py"
    script.write_text(TUNE_SCRIPT.format(examples=str(pathlib.Path(__file__).resolve().parents[2] / "examples")))
    env = dict(os.environ, TW_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the script and the workers it spawned (its own session)
        proc.communicate()
        raise
    assert proc.returncode == 0 and "tuned" in out or "__main__" in err, err[-2000:]


def test_paged_decode_gemma_page128_two_pages_per_step_ascend():
    """The working form of F3's shape: 2 pages per step."""
    q, kc, vc, bt, cl = _paged_inputs(3, 8, 1, 256, 128, [1, 255, 129], "float16", seed_=17)
    k = pa.paged_decode(3, 8, 1, 256, kc.shape[0], 128, bt.shape[1], "float16", 2, target=TARGET)
    _close(run_checked(k, q, kc, vc, bt, cl), pa.reference(q, kc, vc, bt, cl), "float16", "paged D256 page128 pps2")
