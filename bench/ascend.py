#!/usr/bin/env python3
"""Tilewright on the simulated Ascend 910B2: the automatic pipeline beside the hand-written
(expert) kernels, in one process, with issue 5's goals.

    python bench/ascend.py            # every case (make bench runs it after bench/run.py)
    python bench/ascend.py --quick    # small sizes

Figures are the simulator's (a model of the chip, docs/ascend.md "The simulator"), not
measurements: simulated time is deterministic, so one timing-only run per case is enough. The
compile + simulate case is wall time on this machine (arithmetic and the checker on).
Writes bench/results/ascend-<timestamp>.json (or --json PATH).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import tilewright as tw  # noqa: E402

TARGET = "ascend910b"
PEAK = 353.9  # TFLOP/s, fp16, 910B2 (docs/ascend.md "The chips")
# torch_npu fp16 gemm on a real 910B2, % of peak (shared/ascend-910b.md "Published performance"):
# what the timing model is calibrated against (docs/performance.md "Simulator calibration")
TORCH_NPU_GEMM = {1024: 28.0, 2048: 71.0, 4096: 89.0, 8192: 86.0}


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def seed_matmul(M, N, K, bm, bn, bk, dtype="float16"):
    """The seed article's tile-loop matmul (examples/seed_matmul.py), compiled for Ascend."""
    return load("examples/seed_matmul.py", "seed_matmul").build(M, N, K, bm, bn, bk, dtype, TARGET)


def timing(kernel, *args):
    p = kernel.profile(*args, functional=False, check=False)
    return p["time_us"], p["tflops"], p["cube_utilisation"]


def paged_decode_rows(row, quick, pages_per_step=(4, 16)):
    """Issue 13: paged decode (batch 8, 32 q heads / 8 kv heads, D 128, context 4096, page 16, fp16):
    K and V bytes read / simulated time, as % of the model's HBM bandwidth (goal >= 60%)."""
    import paged_attention as pa
    hbm = tw._C.target_info(TARGET)["hbm_tbps"] * 1e12
    B, H, KVH, D, page, ctx = (8, 32, 8, 128, 16, 1024 if quick else 4096)
    max_blocks = ctx // page
    num_blocks = B * max_blocks
    q = np.zeros((B, H, D), np.float16)
    kc = np.zeros((num_blocks, page, KVH, D), np.float16)
    bt = np.arange(num_blocks, dtype=np.int32).reshape(B, max_blocks)
    cl = np.full((B,), ctx, np.int32)
    kv_bytes = 2 * B * ctx * KVH * D * 2
    for pps in pages_per_step:
        k = pa.paged_decode(B, H, KVH, D, num_blocks, page, max_blocks, "float16", pages_per_step=pps, target=TARGET)
        t, _, _ = timing(k, q, kc, kc, bt, cl)
        row(f"paged decode B8 32/8 D128 ctx{ctx} p16 pps{pps}, % HBM", kv_bytes / (t * 1e-6) / hbm * 100, 0, "% HBM")


def masked_prefill_rows(row, quick):
    """Issue 13: masked prefill (bool mask tensor) vs the same kernel causal, S 8192 (2048 quick),
    D 128, fp16, 128 x 128 blocks: the masked kernel's throughput as % of the causal one's, both
    counted as the full S x S work the masked kernel does (goal >= 90%). An all-True mask, given
    its block tables (prefill_blocks: every block 2, no mask work) and dense_blocks (every block 1:
    the mask tile copied and applied in every block, the kernel's partial-block path); and the
    causal pattern as a mask tensor against the causal kernel (the same visible pairs)."""
    import masked_attention as ma
    B, H, S, D = 1, 16, (2048 if quick else 8192), 128
    q = np.zeros((B, H, S, D), np.float16)
    msk = np.ones((S, S), np.bool_)
    kvl = np.full((B,), S, np.int32)
    kw = dict(block_M=128, block_N=128, dtype="float16", target=TARGET)
    kern = ma.attention_prefill(B, H, H, S, S, D, mask="bool", **kw)
    tables = ma.prefill_blocks(msk, 128, 128)
    dense = ma.dense_blocks(S, S, 128, 128)
    t_full, _, _ = timing(kern, q, q, q, msk, *tables, kvl)
    t_partial, _, _ = timing(kern, q, q, q, msk, *dense, kvl)
    unused = np.zeros((S, S), np.float32)  # the causal kernel's (unread) mask and block tables
    t_causal, _, _ = timing(ma.attention_prefill(B, H, H, S, S, D, causal=True, **kw), q, q, q, unused, *dense, kvl)
    # the causal kernel skips the blocks above the diagonal: per block of work it does half the pairs
    row(f"masked prefill S={S} D=128 bool mask vs causal, % (per pair)", (t_causal * 2) / t_full * 100, 0, "%")
    row(f"masked prefill S={S} D=128 bool mask, mask applied in every block, % (per pair)",
        (t_causal * 2) / t_partial * 100, 0, "%")
    # the causal pattern as a mask tensor (the blocks above the diagonal listed as empty): the same
    # visible pairs as the causal kernel's, so the ratio is the rate per visible pair
    tril = np.tril(np.ones((S, S), np.bool_))
    t_tril, _, _ = timing(kern, q, q, q, tril, *ma.prefill_blocks(tril, 128, 128), kvl)
    row(f"masked prefill S={S} D=128 causal pattern as a bool mask vs causal, %", t_causal / t_tril * 100, 0, "%")


def moe_grouped_gemm(row, rows, quick):
    """Issue 13's goal: the MoE grouped GEMM, 8 experts, top-2, 4096 tokens, hidden 4096, ffn 14336,
    fp16 (quick: 1024 tokens, hidden 1024, ffn 2048). Routing from seeded random logits, sorted and
    padded to the row block by examples/moe.py's align_by_expert (on cpu); then gather_rows (the
    permute) and grouped_gemm_sorted (blocks 128/256/128, 2 stages) on the simulated 910B2. The
    Cube utilisation is the GEMM kernel's (M busy / cores x time); % of peak counts only the useful
    2 * tokens * k * hidden * ffn FLOPs (padding rows excluded) over both kernels' time."""
    import moe
    tokens, hidden, ffn = (1024, 1024, 2048) if quick else (4096, 4096, 14336)
    experts, top_k, bm, bn, bk = 8, 2, 128, 256, 128
    logits = np.random.default_rng(0).standard_normal((tokens, experts)).astype(np.float32)
    ids = np.argsort(-logits, axis=1, kind="stable")[:, :top_k].astype(np.int32)
    r, block_expert, _ = moe.align_by_expert(tokens, experts, top_k, bm)(ids)
    n_rows = r.shape[0]
    x = np.zeros((tokens, hidden), np.float16)
    w = np.zeros((experts, hidden, ffn), np.float16)
    t_g, _, _ = timing(moe.gather_rows(tokens, hidden, n_rows, dtype="float16", target=TARGET), x, r)
    gemm = moe.grouped_gemm_sorted(n_rows, hidden, ffn, experts, block_M=bm, block_N=bn, block_K=bk, dtype="float16",
                                   out_dtype="float16", target=TARGET)
    t_m, _, u = timing(gemm, np.zeros((n_rows, hidden), np.float16), w, block_expert)
    shape = f"{tokens}x{hidden}x{ffn}"
    row(f"moe grouped gemm {shape} e8 top2, Cube util", u * 100, 0, "%")
    flops = 2.0 * tokens * top_k * hidden * ffn
    row("  ... gather + gemm, useful % of peak", flops / ((t_g + t_m) * 1e-6) / 1e12 / PEAK * 100, 0, "% peak")
    rows.append(dict(case=f"moe {shape} times", gather_rows_us=t_g, grouped_gemm_us=t_m, unit="us"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    opts = ap.parse_args()
    gemm_expert = load("examples/ascend/gemm_expert.py", "tw_bench_gemm_expert")
    fa_expert = load("examples/ascend/flash_attention_expert.py", "tw_bench_fa_expert")
    import flash_attention as fa_auto

    rows = []

    def row(case, auto, expert, unit):
        ratio = auto / expert if expert else None
        rows.append(dict(case=case, automatic=auto, expert=expert or None, unit=unit, ratio=ratio))
        exp = f"{expert:8.1f}" if expert else "       -"
        rat = f"{ratio:6.2f}x" if ratio else "      -"
        print(f"{case:44s} {auto:8.1f} {exp} {unit:12s} {rat}", flush=True)

    print(f"{'case (simulated 910B2, fp16)':44s} {'auto':>8s} {'expert':>8s} {'unit':12s} ratio")
    sizes = [1024, 2048] if opts.quick else [1024, 2048, 4096, 8192]
    for n in sizes:
        a = np.zeros((n, n), np.float16)
        _, tf_auto, u_auto = timing(seed_matmul(n, n, n, 128, 256, 64), a, a)
        _, tf_exp, u_exp = timing(gemm_expert.matmul(n, n, n), a, a)
        row(f"gemm {n}^3, Cube utilisation (128/256/64)", u_auto * 100, u_exp * 100, "%")
        sim, pub = tf_auto / PEAK * 100, TORCH_NPU_GEMM[n]
        rows.append(dict(case=f"gemm {n}^3 % of peak, simulated vs torch_npu", simulated=sim, torch_npu=pub,
                         residual=sim - pub, unit="% peak"))
        print(f"{'  ... % of peak; torch_npu on a real 910B2':44s} {sim:8.1f} {pub:8.1f} {'% peak':12s} "
              f"{sim - pub:+6.1f} pt", flush=True)
        if n == 4096:
            _, _, u_seed = timing(seed_matmul(n, n, n, 128, 128, 64), a, a)
            row("seed matmul 4096^3, article blocks 128/128/64", u_seed * 100, 0, "%")
    # issue 16: a large K with few output tiles (256 x 256: two 128 x 256 tiles for 24 Cube cores).
    # Split-K (examples/gemm.py matmul_splitk): the grid adds the K parts, each program adds its
    # float32 partial into C with T.atomic_add (Fixpipe in the atomic-add mode). A is passed as its
    # transpose (K, M): a GM->L1 copy reads rows at most 65535 elements apart (Nd2NzParams).
    gemm_ex = load("examples/gemm.py", "tw_bench_gemm")
    M = N = 256
    K = 16384 if opts.quick else 65536
    at, b = np.zeros((K, M), np.float16), np.zeros((K, N), np.float16)
    c = np.zeros((M, N), np.float32)
    one = dict(block_M=128, block_N=256, block_K=64, trans_A=True, target=TARGET)
    _, _, u_one = timing(gemm_ex.matmul_splitk(M, N, K, 1, **one), at, b, c)
    for parts in (6, 12):
        t_split, tf_split, u_split = timing(gemm_ex.matmul_splitk(M, N, K, parts, **one), at, b, c)
        rows.append(dict(case=f"split-K gemm {M}x{N}x{K} fp16, {parts} parts", split_k=u_split * 100,
                         one_part=u_one * 100, unit="% Cube", time_us=t_split, tflops=tf_split))
        print(f"{f'split-K gemm {M}x{N}x{K}, {parts} parts, Cube util':44s} {u_split * 100:8.1f} "
              f"{u_one * 100:8.1f} {'% (1 part)':12s} {t_split:7.1f} us", flush=True)
    B, H, D = 1, 16, 128
    for S in ([2048] if opts.quick else [2048, 8192]):
        for causal in (False, True):
            q = np.zeros((B, H, S, D), np.float16)
            t_auto, _, _ = timing(fa_auto.flash_attention(B, H, S, D, causal, block_M=128, block_N=128,
                                                          dtype="float16", target=TARGET), q, q, q)
            args = fa_expert.inputs(B, H, S, D)
            t_exp, _, _ = timing(fa_expert.flash_attention(B, H, S, D, causal=causal), *args)
            flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
            pct = lambda t: flops / (t * 1e-6) / 1e12 / PEAK * 100  # noqa: E731
            row(f"flash attn S={S} D=128 {'causal' if causal else 'non-causal'}, % of peak", pct(t_auto),
                pct(t_exp), "% peak")
            # the user's opt-in: scores and P V copied into float16 tiles (16-bit hand-offs)
            t_narrow, _, _ = timing(fa_auto.flash_attention(B, H, S, D, causal, block_M=128, block_N=128, dtype="float16",
                                                            narrow_handoffs=True, target=TARGET), q, q, q)
            row("  ... narrow_handoffs=True, % of peak", pct(t_narrow), pct(t_exp), "% peak")
    paged_decode_rows(row, opts.quick)
    masked_prefill_rows(row, opts.quick)
    moe_grouped_gemm(row, rows, opts.quick)
    # compile + simulate the seed matmul 1024^3 fp16 end to end (fresh kernel, arithmetic + checker)
    n = 1024
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(np.float16)
    t0 = time.perf_counter()
    k = seed_matmul(n, n, n, 128, 256, 64)
    p = k.profile(a, a)
    wall = time.perf_counter() - t0
    err = float(np.abs(p.outputs.astype(np.float64) - a.astype(np.float64) @ a.astype(np.float64)).max())
    row(f"compile+simulate seed 1024^3 (err {err:.2g}), wall", wall, 0, "s")

    path = opts.json or os.path.join(ROOT, "bench", "results",
                                     f"ascend-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(dict(target=TARGET, rows=rows), f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
