#!/usr/bin/env python3
"""hunt35's differential shape sweep (issue 13), run by hand with a seed:

    cd tests/python && ../../.venv/bin/python hunt35_sweep.py --seed 35000 [--only zoo,gemm] [--cpu-only]
    TW_BOUNDS_CHECK=1 ../../.venv/bin/python hunt35_sweep.py --seed 35000 --cpu-only   # checked cpu code

Every kernel of bench/op_zoo.py and of examples/*.py, as shipped, called at shapes a user would
have (each dim drawn from DIMS where the kernel allows it), every dtype it claims and block sizes
a user (or an autotuner) changes, on cpu and on ascend910b (the simulator's checker on: any
report is a finding), each against a float64 reference and against each other. Also: T.gemm
with transpose_A / transpose_B for fp32 / fp16 / bf16 / int8, T.Pipelined with num_stages 1..4
and tiles allocated inside or outside the loop at odd K, split-K with T.atomic_add at odd parts,
the split-KV paged decode and its combine at contexts 0, 1, page +- 1 with empty splits, and the
tile-loop style against the same kernel in prim_func style.

One line per case: ok (or "ok (documented limit: ...)" where a target refuses the kernel with the located error
of a documented limit, LIMITS), or WRONG / REPORT / ERROR / CRASH / DIFF with the details; the count at the end.
tests/python/test_hunt35_s35.py runs a representative subset in the suite.
"""

import argparse
import math
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "bench")]

import tilewright as tw  # noqa: E402
import tilewright.language as T  # noqa: E402
from tilewright.testing import TOLERANCES, np_dtype  # noqa: E402

DIMS = [1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 65, 127, 129, 255, 257, 1000, 1025]
ASC = "ascend910b"
# located errors of documented target limits (docs/testing.md): a "limit", not a finding
LIMITS = ("needs a transposing load", "the loop has no iterations")  # the zoo cumsum at N = 1: docs "Loops"
ACC = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32"}


# ------------------------------------------------------------------------------------------------
# running one case on each target
# ------------------------------------------------------------------------------------------------

class Case:
    """kernel_of(target) -> compiled kernel; args: inputs (copied per run); outs(result, args) ->
    list of arrays to compare; ref() -> list of float64 arrays; tol (atol, rtol) or a list of them."""

    def __init__(self, name, kernel_of, args, ref, tol, outs=None):
        self.name, self.kernel_of, self.args, self.ref, self.tol = name, kernel_of, args, ref, tol
        self.outs = outs or (lambda r, a: list(r) if isinstance(r, (list, tuple)) else [r])


def _run(case, target):
    a = [x.copy() if isinstance(x, np.ndarray) else x for x in case.args]
    k = case.kernel_of(target)
    if target == "cpu":
        return case.outs(k(*a), a), []
    prof = k.profile(*a)
    return case.outs(prof.outputs, a), list(prof["reports"])


def _worst(got, ref, tol):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64).reshape(got.shape)
    atol, rtol = tol
    both_nan = np.isnan(got) & np.isnan(ref)
    same_inf = np.isinf(got) & (got == ref)
    err = np.abs(got - ref) / (atol + rtol * np.abs(ref) + 1e-300)
    err = np.where(both_nan | same_inf, 0.0, err)
    err = np.where(np.isnan(err), np.inf, err)
    return float(err.max()) if err.size else 0.0


def check_case(case, targets):
    """A line: the case's name and its verdict on each target, cpu against ascend too."""
    ref = [np.asarray(r, np.float64) for r in case.ref()]
    tols = case.tol if isinstance(case.tol, list) else [case.tol] * len(ref)
    res, verdict, limits = {}, [], []
    for t in targets:
        try:
            outs, reports = _run(case, t)
        except tw.TilewrightError as e:
            first = str(e).strip().splitlines()[0]
            if any(s in first for s in LIMITS):
                limits.append(f"{t}: {first[first.find('error: ') + 7:][:120]}")
            else:
                verdict.append(f"{t}: ERROR {first[:300]}")
            continue
        except Exception as e:  # noqa: BLE001  (a crash of the front end is a finding too)
            verdict.append(f"{t}: CRASH {type(e).__name__}: {e}"[:400])
            traceback.print_exc()
            continue
        res[t] = outs
        worst = max(_worst(o, r, tl) for o, r, tl in zip(outs, ref, tols))
        if reports:
            verdict.append(f"{t}: REPORT {reports[0].splitlines()[0][:300]}")
        if worst > 1.0:
            verdict.append(f"{t}: WRONG worst {worst:.3g} x tol")
    if len(res) == 2:
        d = max(_worst(x, y, tl) for x, y, tl in zip(res["cpu"], res[ASC], tols))
        if d > 1.0:
            verdict.append(f"DIFF cpu vs ascend {d:.3g} x tol")
    if verdict:
        return "; ".join(verdict)
    return "ok" if not limits else "ok (documented limit: " + "; ".join(limits) + ")"


# ------------------------------------------------------------------------------------------------
# the cases
# ------------------------------------------------------------------------------------------------

def pick(rng, lo=1, hi=1025, k=1):
    cand = [d for d in DIMS if lo <= d <= hi]
    return [int(rng.choice(cand)) for _ in range(k)]


def zoo_cases(rng, budget):
    """bench/op_zoo.py's kernels at odd shapes (its make(shape, rng) builds inputs and kernel)."""
    import op_zoo
    for name, (make, small, _) in op_zoo.OPS.items():
        nd = len(small)
        for _ in range(2):
            if name.startswith("matmul") or name == "matvec":
                shape = tuple(pick(rng, 1, 257, nd))
                if name == "matvec":
                    shape = (1,) + shape[1:]
            elif name == "sdpa":
                shape = (1, int(rng.choice([1, 2, 3])), pick(rng, 1, 257)[0], int(rng.choice([16, 32, 64])))
            elif name == "softmax_narrow":
                shape = (pick(rng, 1, 1025)[0], 1)
            else:
                shape = tuple(pick(rng, 1, 1025, nd))
                while math.prod(shape) > budget:
                    shape = tuple(pick(rng, 1, 257, nd))
            seed = int(rng.integers(1 << 30))

            def kernel_of(t, make=make, shape=shape, seed=seed):
                op_zoo.TARGET = t
                return make(shape, np.random.default_rng(seed)).kernel
            op_zoo.TARGET = "cpu"
            c = make(shape, np.random.default_rng(seed))
            yield Case(f"zoo {name} {shape}", kernel_of, c.args, lambda c=c: [c.ref()], (c.atol, c.rtol))


def _randn(rng, shape, dtype, scale=1.0):
    if dtype == "int8":
        return rng.integers(-4, 5, shape).astype(np.int8)
    return (rng.standard_normal(shape) * scale).astype(np_dtype(dtype))


def example_cases(rng, budget):
    from softmax import softmax
    from rms_norm import rms_norm
    from layer_norm import layer_norm
    from gelu_bias import gemm_bias_gelu, reference as gelu_ref
    from gemm import matmul
    from flash_attention import flash_attention, reference as fa_ref
    from rope import rope, tables, reference as rope_ref
    import seed_matmul
    for dtype in ("float32", "float16", "bfloat16"):
        for _ in range(2):
            M, N = pick(rng, 1, 1025, 2)
            while M * N > budget:
                M, N = pick(rng, 1, 257, 2)
            bm = int(rng.choice([1, 2, 3, 8, 16]))
            x = _randn(rng, (M, N), dtype, 3.0)
            w, b = _randn(rng, (N,), dtype), _randn(rng, (N,), dtype)
            x64, w64, b64 = (v.astype(np.float64) for v in (x, w, b))

            def sm_ref(x64=x64):
                e = np.exp(x64 - x64.max(1, keepdims=True))
                return [e / e.sum(1, keepdims=True)]
            tol = TOLERANCES[dtype] if dtype != "float32" else (1e-5, 1e-5)
            yield Case(f"softmax {M}x{N} {dtype} block_M={bm}", lambda t, N=N, bm=bm, d=dtype: softmax(N, block_M=bm, dtype=d, target=t),
                       [x], sm_ref, tol)
            yield Case(f"rms_norm {M}x{N} {dtype} block_M={bm}", lambda t, N=N, bm=bm, d=dtype: rms_norm(N, block_M=bm, dtype=d, target=t),
                       [x, w], lambda x64=x64, w64=w64: [x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True) + 1e-6) * w64], tol)

            def ln_ref(x64=x64, w64=w64, b64=b64):
                mu = x64.mean(1, keepdims=True)
                return [(x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(1, keepdims=True) + 1e-5) * w64 + b64]
            yield Case(f"layer_norm {M}x{N} {dtype} block_M={bm}", lambda t, N=N, bm=bm, d=dtype: layer_norm(N, block_M=bm, dtype=d, target=t),
                       [x, w, b], ln_ref, tol)
    # gemms of the examples, with user block sizes
    blocks = [(16, 16, 16), (32, 32, 32), (64, 64, 64), (128, 128, 64), (64, 128, 128), (32, 64, 16)]
    for dtype in ("float32", "float16", "bfloat16"):
        for _ in range(3):
            M, N, K = pick(rng, 1, 1025, 3)
            while M * N * K > 40 * budget:
                M, N, K = pick(rng, 1, 257, 3)
            bm, bn, bk = blocks[int(rng.integers(len(blocks)))]
            st = int(rng.integers(1, 5))
            a, bb = _randn(rng, (M, K), dtype), _randn(rng, (K, N), dtype)
            ref = lambda a=a, bb=bb: [a.astype(np.float64) @ bb.astype(np.float64)]  # noqa: E731
            tol = (1e-5 * K + (1e-2 if dtype == "bfloat16" else 2e-3 if dtype == "float16" else 1e-5),
                   2e-2 if dtype == "bfloat16" else 2e-3 if dtype == "float16" else 1e-5)
            yield Case(f"gemm.matmul {M}x{N}x{K} {dtype} blocks {bm},{bn},{bk} stages {st}",
                       lambda t, M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, d=dtype, st=st:
                       matmul(M, N, K, block_M=bm, block_N=bn, block_K=bk, dtype=d, num_stages=st, target=t),
                       [a, bb], ref, tol)
            if dtype != "bfloat16":
                yield Case(f"seed_matmul {M}x{N}x{K} {dtype} blocks {bm},{bn},{bk}",
                           lambda t, M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, d=dtype: seed_matmul.build(M, N, K, bm, bn, bk, d, target=t),
                           [a, bb], ref, tol)
            bias = _randn(rng, (N,), dtype)
            if dtype == "float32":
                yield Case(f"gemm_bias_gelu {M}x{N}x{K} {dtype} blocks {bm},{bn},{bk}",
                           lambda t, M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, d=dtype:
                           gemm_bias_gelu(M, N, K, block_M=bm, block_N=bn, block_K=bk, dtype=d, target=t),
                           [a, bb, bias], lambda a=a, bb=bb, bias=bias: [gelu_ref(a.astype(np.float64), bb.astype(np.float64), bias.astype(np.float64))],
                           tol)
    # flash attention
    for dtype in ("float32", "float16", "bfloat16"):
        for _ in range(2):
            B, H = int(rng.choice([1, 2])), int(rng.choice([1, 3]))
            S = pick(rng, 1, 257)[0]
            D = int(rng.choice([16, 32, 64, 80, 128]))
            causal = bool(rng.integers(2))
            bm, bn = [int(v) for v in rng.choice([16, 32, 64], 2)]
            q, k, v = (_randn(rng, (B, H, S, D), dtype) for _ in range(3))
            yield Case(f"flash_attention B{B} H{H} S{S} D{D} causal={causal} {dtype} blocks {bm},{bn}",
                       lambda t, B=B, H=H, S=S, D=D, c=causal, bm=bm, bn=bn, d=dtype:
                       flash_attention(B, H, S, D, c, block_M=bm, block_N=bn, dtype=d, target=t),
                       [q, k, v], lambda q=q, k=k, v=v, c=causal: [fa_ref(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), c)],
                       TOLERANCES[dtype] if dtype != "float32" else (2e-4, 1e-3))
    # rope
    for dtype in ("float32", "float16", "bfloat16"):
        for inter in (False, True):
            tokens = pick(rng, 1, 257)[0]
            heads = int(rng.choice([1, 2, 3]))
            dim = int(rng.choice([16, 32, 64, 128]))
            bm = int(rng.choice([1, 8, 16, 32]))
            max_pos = 300
            cos, sin = tables(max_pos, dim)
            x = _randn(rng, (tokens, heads, dim), dtype)
            pos = rng.integers(0, max_pos, tokens).astype(np.int32)
            yield Case(f"rope T{tokens} H{heads} D{dim} interleaved={inter} {dtype} block_M={bm}",
                       lambda t, tk=tokens, h=heads, dm=dim, i=inter, bm=bm, d=dtype: rope(tk, h, dm, max_pos, i, block_M=bm, dtype=d, target=t),
                       [x, cos, sin, pos], lambda x=x, cos=cos, sin=sin, pos=pos, i=inter: [rope_ref(x.astype(np.float64), cos, sin, pos, i)],
                       TOLERANCES[dtype] if dtype != "float32" else (1e-5, 1e-5))


def examples2_cases(rng, budget):
    """More of the examples' kernels: qk_rope_proj, flash_attention's narrow hand-offs,
    gemm_bias_gelu and seed_matmul in every dtype they take, moe's combine_atomic."""
    from rope import qk_rope_proj, tables, reference as rope_ref
    from flash_attention import flash_attention, reference as fa_ref
    from gelu_bias import gemm_bias_gelu, reference as gelu_ref
    import seed_matmul
    for dtype in ("float32", "float16", "bfloat16"):
        for inter in (False, True):
            tokens, hidden = pick(rng, 1, 257, 2)
            heads, dim = int(rng.choice([1, 2, 3])), int(rng.choice([16, 32, 64]))
            bm, bk = int(rng.choice([16, 32, 64])), int(rng.choice([16, 32, 64]))
            max_pos = 100
            cos, sin = tables(max_pos, dim)
            pos = rng.integers(0, max_pos, tokens).astype(np.int32)
            xs = _randn(rng, (tokens, hidden), dtype)
            w = _randn(rng, (hidden, heads * dim), dtype, hidden ** -0.5)

            def ref(xs=xs, w=w, cos=cos, sin=sin, pos=pos, i=inter, s=(tokens, heads, dim)):
                proj = (xs.astype(np.float64) @ w.astype(np.float64)).reshape(s)
                return [rope_ref(proj, cos, sin, pos, i)]
            yield Case(f"qk_rope_proj T{tokens} hidden {hidden} H{heads} D{dim} interleaved={inter} {dtype} blocks {bm},{bk}",
                       lambda t, a=(tokens, hidden, heads, dim, max_pos, inter), kw=dict(block_M=bm, block_K=bk, dtype=dtype):
                       qk_rope_proj(*a, target=t, **kw), [xs, w, cos, sin, pos], ref,
                       TOLERANCES[dtype] if dtype != "float32" else (1e-4, 1e-4))
    for dtype in ("float16", "bfloat16"):
        for _ in range(2):
            B, H, S, D = 1, int(rng.choice([1, 2])), pick(rng, 1, 257)[0], int(rng.choice([32, 64, 128]))
            causal = bool(rng.integers(2))
            bm, bn = [int(v) for v in rng.choice([16, 32, 64], 2)]
            q, k, v = (_randn(rng, (B, H, S, D), dtype) for _ in range(3))
            yield Case(f"flash_attention narrow_handoffs B{B} H{H} S{S} D{D} causal={causal} {dtype} blocks {bm},{bn}",
                       lambda t, a=(B, H, S, D, causal), kw=dict(block_M=bm, block_N=bn, dtype=dtype, narrow_handoffs=True):
                       flash_attention(*a, target=t, **kw), [q, k, v],
                       lambda q=q, k=k, v=v, c=causal: [fa_ref(q, k, v, c)], (2 * TOLERANCES[dtype][0], 2 * TOLERANCES[dtype][1]))
    for dtype in ("float16", "bfloat16"):
        for _ in range(2):
            M, N, K = pick(rng, 1, 257, 3)
            bm, bn, bk = [int(v) for v in rng.choice([16, 32, 64, 128], 3)]
            a, b = _randn(rng, (M, K), dtype, 0.3), _randn(rng, (K, N), dtype, 0.3)
            bias = _randn(rng, (N,), dtype)
            yield Case(f"gemm_bias_gelu {M}x{N}x{K} {dtype} blocks {bm},{bn},{bk}",
                       lambda t, a=(M, N, K), kw=dict(block_M=bm, block_N=bn, block_K=bk, dtype=dtype): gemm_bias_gelu(*a, target=t, **kw),
                       [a, b, bias], lambda a=a, b=b, bias=bias: [gelu_ref(a, b, bias)], (TOLERANCES[dtype][0] * 2, TOLERANCES[dtype][1] * 2))
            yield Case(f"seed_matmul {M}x{N}x{K} {dtype} blocks {bm},{bn},{bk}",
                       lambda t, a=(M, N, K, bm, bn, bk, dtype): seed_matmul.build(*a, target=t),
                       [a, b], lambda a=a, b=b: [a.astype(np.float64) @ b.astype(np.float64)],
                       (TOLERANCES[dtype][0] * 2, TOLERANCES[dtype][1] * 2))


def _gemm_kernel(M, N, K, dtype, ta, tb, bm, bn, bk, stages, inside):
    """C = op(A) @ op(B) with A given as (K, M) when ta, B as (N, K) when tb; tiles allocated
    inside the pipelined loop when `inside`."""
    acc = ACC[dtype]
    a_shape, a_tile = ((K, M), (bk, bm)) if ta else ((M, K), (bm, bk))
    b_shape, b_tile = ((N, K), (bn, bk)) if tb else ((K, N), (bk, bn))

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            c = T.alloc_fragment((bm, bn), acc)
            if not inside:
                a = T.alloc_shared(a_tile, dtype)
                b = T.alloc_shared(b_tile, dtype)
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if inside:
                    a = T.alloc_shared(a_tile, dtype)
                    b = T.alloc_shared(b_tile, dtype)
                if ta:
                    T.copy(A[k * bk, by * bm], a)
                else:
                    T.copy(A[by * bm, k * bk], a)
                if tb:
                    T.copy(B[bx * bn, k * bk], b)
                else:
                    T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, c, transpose_A=ta, transpose_B=tb)
            T.copy(c, C[by * bm, bx * bn])
    return main


def gemm_cases(rng, budget):
    for dtype in ("float32", "float16", "bfloat16", "int8"):
        for ta in (False, True):
            for tb in (False, True):
                M, N = pick(rng, 1, 257, 2)
                K = int(rng.choice([1, 17, 65, 1000, pick(rng, 1, 1025)[0]]))
                bm, bn, bk = [int(v) for v in rng.choice([16, 32, 64], 3)]
                stages = int(rng.integers(1, 5))
                inside = bool(rng.integers(2))
                a = _randn(rng, (K, M) if ta else (M, K), dtype)
                b = _randn(rng, (N, K) if tb else (K, N), dtype)
                a64 = a.astype(np.float64).T if ta else a.astype(np.float64)
                b64 = b.astype(np.float64).T if tb else b.astype(np.float64)
                tol = (0.0, 0.0) if dtype == "int8" else (1e-5 * K + 1e-4, 1e-5)
                yield Case(f"gemm {M}x{N}x{K} {dtype} tA={ta} tB={tb} blocks {bm},{bn},{bk} stages {stages} inside={inside}",
                           lambda t, a=(M, N, K, dtype, ta, tb, bm, bn, bk, stages, inside):
                           tw.compile(_gemm_kernel(*a), target=t, out_idx=[-1]),
                           [a, b], lambda a64=a64, b64=b64: [a64 @ b64], tol)


def splitk_cases(rng, budget):
    from gemm import matmul_splitk
    for dtype in ("float16", "bfloat16", "float32"):
        for _ in range(2):
            M, N = pick(rng, 1, 257, 2)
            K = pick(rng, 1, 1025)[0]
            parts = int(rng.choice([1, 2, 3, 5, 7]))
            bm, bn, bk = [int(v) for v in rng.choice([16, 32, 64], 3)]
            ta = bool(rng.integers(2))
            a = _randn(rng, (K, M) if ta else (M, K), dtype)
            b = _randn(rng, (K, N), dtype)
            c = np.zeros((M, N), np.float32)
            a64 = a.astype(np.float64).T if ta else a.astype(np.float64)
            yield Case(f"matmul_splitk {M}x{N}x{K} parts {parts} {dtype} blocks {bm},{bn},{bk} trans_A={ta}",
                       lambda t, a=(M, N, K, parts), kw=dict(block_M=bm, block_N=bn, block_K=bk, dtype=dtype, trans_A=ta):
                       matmul_splitk(*a, target=t, **kw),
                       [a, b, c], lambda a64=a64, b=b: [a64 @ b.astype(np.float64)], (1e-5 * K + 1e-4, 1e-5),
                       outs=lambda r, args: [args[2]])


def decode_cases(rng, budget):
    from paged_attention import paged_decode_split, combine_splits, paged_decode, reference, make_inputs
    for dtype in ("float32", "float16", "bfloat16"):
        for bs in (16, int(rng.choice([1, 17, 32]))):
            for lens in ([0, 1, bs - 1 if bs > 1 else 1], [bs, bs + 1, 0], [1, 3 * bs + 1, 2 * bs - 1]):
                seqs, heads, kvh = len(lens), int(rng.choice([1, 2, 4])), 1
                heads, kvh = (heads * 2, 2) if rng.integers(2) else (heads, 1)
                D = int(rng.choice([16, 64, 128]))
                max_ctx = max(max(lens), 1) + int(rng.integers(0, 2 * bs + 1))
                q, kc, vc, bt, cl = make_inputs(seqs, heads, kvh, D, bs, max_ctx, dtype, seed=int(rng.integers(1 << 30)), lens=lens)
                nb, mb = kc.shape[0], bt.shape[1]
                splits = int(rng.choice([1, 2, 3, 5, 8]))
                tol = TOLERANCES[dtype] if dtype != "float32" else (2e-5, 2e-5)
                ref = lambda q=q, kc=kc, vc=vc, bt=bt, cl=cl: [reference(q, kc, vc, bt, cl)]  # noqa: E731

                def split_then_combine(t, a=(seqs, heads, kvh, D, nb, bs, mb, splits, dtype)):
                    ks = paged_decode_split(*a, target=t)
                    kc_ = combine_splits(a[0], a[1], a[7], a[3], a[8], target=t)

                    class Both:  # one call: split, then combine (profiles both on ascend)
                        def __call__(self, *args):
                            part, lse = ks(*args)
                            return kc_(part, lse)

                        def profile(self, *args):
                            p1 = ks.profile(*args)
                            p2 = kc_.profile(*p1.outputs)
                            p2["reports"] = list(p1["reports"]) + list(p2["reports"])
                            return p2
                    return Both()
                yield Case(f"paged_decode_split+combine lens {lens} page {bs} H{heads}/{kvh} D{D} splits {splits} (max_blocks {mb}) {dtype}",
                           split_then_combine, [q, kc, vc, bt, cl], ref, tol)
                yield Case(f"paged_decode lens {lens} page {bs} H{heads}/{kvh} D{D} {dtype}",
                           lambda t, a=(seqs, heads, kvh, D, nb, bs, mb, dtype): paged_decode(*a, target=t),
                           [q, kc, vc, bt, cl], ref, tol)


def pipelined_cases(rng, budget):
    """T.Pipelined num_stages 1..4, tiles inside / outside the loop, K = 1, 17, 65, 1000."""
    for dtype in ("float32", "float16"):
        for K in (1, 17, 65, 1000):
            for stages in (1, 2, 3, 4):
                inside = bool(rng.integers(2))
                M, N = pick(rng, 1, 129, 2)
                bm, bn, bk = [int(v) for v in rng.choice([16, 32, 64], 3)]
                tb = dtype == "float32" and bool(rng.integers(2))
                a = _randn(rng, (M, K), dtype)
                b = _randn(rng, (N, K) if tb else (K, N), dtype)
                b64 = b.astype(np.float64).T if tb else b.astype(np.float64)
                yield Case(f"pipelined gemm {M}x{N}x{K} {dtype} tB={tb} blocks {bm},{bn},{bk} stages {stages} inside={inside}",
                           lambda t, a=(M, N, K, dtype, False, tb, bm, bn, bk, stages, inside):
                           tw.compile(_gemm_kernel(*a), target=t, out_idx=[-1]),
                           [a, b], lambda a=a, b64=b64: [a.astype(np.float64) @ b64], (1e-5 * K + 1e-4, 1e-5))


def zoo_block_cases(rng, budget):
    """op_zoo kernels with the block sizes and dtypes a user (or autotuner) picks."""
    import op_zoo
    for kind, red in (("sum", np.sum), ("max", np.max), ("min", np.min)):
        for dtype in ("float32", "float16", "bfloat16"):
            A, B, C = pick(rng, 1, 65)[0], pick(rng, 1, 257)[0], pick(rng, 1, 1025)[0]
            bc = int(rng.choice([1, 3, 16, 100, 256, 512, 1024]))
            x = _randn(rng, (A, B, C), dtype)
            tol = (TOLERANCES[dtype][0] * max(1, math.sqrt(B)) * (8 if kind == "sum" else 1), TOLERANCES[dtype][1]) \
                if dtype != "float32" else (1e-6 + 2.4e-7 * B, 1e-5)
            yield Case(f"reduce_mid {kind} {(A, B, C)} {dtype} block_C={bc}",
                       lambda t, a=(A, B, C, kind), bc=bc, d=dtype: op_zoo.reduce_mid(*a, block_C=bc, dtype=d, target=t),
                       [x], lambda x=x, red=red: [red(x.astype(np.float64), axis=1)], tol)
    for _ in range(3):
        A, B, C = pick(rng, 1, 65)[0], pick(rng, 1, 257)[0], pick(rng, 1, 1025)[0]
        bc = int(rng.choice([1, 3, 16, 100, 256, 512]))
        x = rng.integers(-3, 4, (A, B, C)).astype(np.float32)  # ties: the first index wins
        yield Case(f"argmax_mid {(A, B, C)} block_C={bc} (ties)", lambda t, a=(A, B, C), bc=bc: op_zoo.argmax_mid(*a, block_C=bc, target=t),
                   [x], lambda x=x: [np.argmax(x, axis=1)], (0.0, 0.0))
    for act in op_zoo.ACTIVATIONS:
        M, N = pick(rng, 1, 257, 2)
        bm = int(rng.choice([1, 3, 7, 16, 33]))
        x = _randn(rng, (M, N), "float32", 3.0)
        ref = op_zoo.ACTIVATIONS[act][0]
        yield Case(f"activation {act} {M}x{N} block_M={bm}", lambda t, a=(M, N, act), bm=bm: op_zoo.activation(*a, block_M=bm, target=t),
                   [x], lambda x=x, ref=ref: [ref(x.astype(np.float64))], (1e-6, 2e-6))
    for name in ("log_softmax", "l2norm_rows", "cumsum_rows", "cross_entropy"):
        M, N = pick(rng, 1, 257, 2)
        bm = int(rng.choice([1, 2, 3, 16, 33]))
        x = _randn(rng, (M, N), "float32", 3.0)
        x64 = x.astype(np.float64)
        lab = rng.integers(0, N, M).astype(np.int32)
        if name == "log_softmax":
            args, ref = [x], lambda x64=x64: [x64 - x64.max(1, keepdims=True) - np.log(np.exp(x64 - x64.max(1, keepdims=True)).sum(1, keepdims=True))]
        elif name == "l2norm_rows":
            args, ref = [x], lambda x64=x64: [np.linalg.norm(x64, axis=1)]
        elif name == "cumsum_rows":
            args, ref = [x], lambda x64=x64: [np.cumsum(x64, axis=1)]
        else:
            def ref(x64=x64, lab=lab, M=M):
                m = x64.max(1)
                return [np.log(np.exp(x64 - m[:, None]).sum(1)) + m - x64[np.arange(M), lab]]
            args = [x, lab]
        yield Case(f"{name} {M}x{N} block_M={bm}", lambda t, n=name, N=N, bm=bm: getattr(op_zoo, n)(N, block_M=bm, target=t),
                   args, ref, (1e-4 if name == "cumsum_rows" else 1e-5, 1e-5))


def tileloop_cases(rng, budget):
    """examples/seed_matmul.py's tile-loop kernel against the same product as a prim_func."""
    import seed_matmul
    for dtype in ("float32", "float16"):
        for _ in range(3):
            M, N = pick(rng, 1, 257, 2)
            K = int(rng.choice([1, 17, 65, 1000]))
            bm, bn, bk = [int(v) for v in rng.choice([16, 32, 64], 3)]
            a, b = _randn(rng, (M, K), dtype), _randn(rng, (K, N), dtype)
            ref = lambda a=a, b=b: [a.astype(np.float64) @ b.astype(np.float64)]  # noqa: E731
            tol = (1e-5 * K + 1e-4, 1e-5)
            yield Case(f"tile-loop matmul {M}x{N}x{K} {dtype} blocks {bm},{bn},{bk}",
                       lambda t, a=(M, N, K, bm, bn, bk, dtype): seed_matmul.build(*a, target=t), [a, b], ref,
                       tol if dtype == "float32" else (tol[0] + 2e-3, 2e-3))  # the output in dtype
            yield Case(f"prim_func matmul {M}x{N}x{K} {dtype} blocks {bm},{bn},{bk}",
                       lambda t, a=(M, N, K, dtype, False, False, bm, bn, bk, 2, False):
                       tw.compile(_gemm_kernel(*a), target=t, out_idx=[-1]),
                       [a, b], ref, tol)


def expert_cases(rng, budget):
    """examples/ascend/*: ascend910b only (expert mode); ascend against float64."""
    sys.path.insert(0, str(ROOT / "examples" / "ascend"))
    import gemm_expert
    import softmax_expert
    import flash_attention_expert as fae
    import matmul_gelu_expert as mge
    for dtype in ("float16", "bfloat16"):
        for _ in range(2):
            M, N, K = pick(rng, 1, 1025, 3)
            while M * N * K > 40 * budget:
                M, N, K = pick(rng, 1, 257, 3)
            a, b = _randn(rng, (M, K), dtype), _randn(rng, (K, N), dtype)
            yield Case(f"gemm_expert {M}x{N}x{K} {dtype}", lambda t, a=(M, N, K), d=dtype: gemm_expert.matmul(*a, dtype=d),
                       [a, b], lambda a=a, b=b: [a.astype(np.float64) @ b.astype(np.float64)],
                       (1e-5 * K + 2e-3, 2e-3) if dtype == "float16" else TOLERANCES[dtype])
    for _ in range(3):
        M, N = pick(rng, 1, 1025, 2)
        while M * N > budget:
            M, N = pick(rng, 1, 257, 2)
        x = _randn(rng, (M, N), "float32", 3.0)
        yield Case(f"softmax_expert {M}x{N}", lambda t, a=(M, N): softmax_expert.softmax(*a), [x],
                   lambda x=x: [softmax_expert.reference(x)], (1e-6, 1e-5))
    for _ in range(2):
        M, N, K = pick(rng, 1, 257, 3)
        args = list(mge.inputs(M, N, K, seed=int(rng.integers(1 << 30))))
        yield Case(f"matmul_gelu_expert {M}x{N}x{K}", lambda t, a=(M, N, K): mge.matmul_gelu(*a), args,
                   lambda args=args: [mge.reference(*args[:3])], TOLERANCES["float16"])
    for _ in range(2):
        B, H, S, D = 1, int(rng.choice([1, 2])), pick(rng, 1, 257)[0], int(rng.choice([64, 128]))
        causal = bool(rng.integers(2))
        args = list(fae.inputs(B, H, S, D, seed=int(rng.integers(1 << 30))))
        yield Case(f"flash_attention_expert B{B} H{H} S{S} D{D} causal={causal}",
                   lambda t, a=(B, H, S, D), c=causal: fae.flash_attention(*a, causal=c), args,
                   lambda args=args, c=causal: [fae.reference(*args[:3], causal=c)], TOLERANCES["float16"])


GROUPS = {"zoo": zoo_cases, "examples": example_cases, "gemm": gemm_cases, "splitk": splitk_cases,
          "decode": decode_cases, "tileloop": tileloop_cases, "expert": expert_cases,
          "pipelined": pipelined_cases, "examples2": examples2_cases, "zooblocks": zoo_block_cases}
ASCEND_ONLY = {"expert"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=35000)
    ap.add_argument("--only", default=",".join(GROUPS))
    ap.add_argument("--cpu-only", action="store_true")
    ap.add_argument("--budget", type=int, default=70000, help="largest element count of a row-op input")
    opts = ap.parse_args(argv)
    targets = ["cpu"] if opts.cpu_only else ["cpu", ASC]
    bad = total = 0
    for g in opts.only.split(","):
        rng = np.random.default_rng([opts.seed, list(GROUPS).index(g)])
        tg = [ASC] if g in ASCEND_ONLY else targets
        if not set(tg) <= set(targets):
            continue
        for case in GROUPS[g](rng, opts.budget):
            t0 = time.perf_counter()
            line = check_case(case, tg)
            total += 1
            bad += not line.startswith("ok")
            print(f"[{g}] {case.name}: {line} ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"{total - bad} of {total} cases ok (seed {opts.seed}, targets {', '.join(targets)}, "
          f"TW_BOUNDS_CHECK={os.environ.get('TW_BOUNDS_CHECK', '0')})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
