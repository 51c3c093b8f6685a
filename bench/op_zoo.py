#!/usr/bin/env python3
"""The op zoo: common single ops people port first, written as Tilewright kernels the way
docs/language.md teaches (one row block per program, T.copy in, T.Parallel maps, T.reduce_*,
T.copy out; T.gemm for the matmuls), each checked against a float64 numpy reference with a stated
tolerance and timed side by side with numpy (and PyTorch when importable).

    python bench/op_zoo.py                       # every op, 1 and 2 threads
    python bench/op_zoo.py --threads 1 --ops softmax,sum_mid
    python bench/op_zoo.py --list
    python bench/op_zoo.py --cpu-arch x86-64-v3  # the AVX2 code (and the peers' AVX2 kernels), as bench/run.py
    python bench/op_zoo.py --target ascend910b   # portability: each kernel unchanged on the simulator

Each thread count runs in its own child process (TW_NUM_THREADS = OPENBLAS_NUM_THREADS =
OMP_NUM_THREADS = n, as bench/run.py does). Timing: one warm-up call each (checked), then
alternating batches (ours, numpy, torch; `--rounds`, three by default, the order rotated each
round); each ratio is the median of the per-round ratios, with best against best beside it. The
machine may be shared: the ratios (same process, alternating batches) are the figures to read. Each thread count
ends with the geometric means of the ratios (numpy: every op but gelu_erf, whose peer is not
numpy's own) and the ops below 1.0x numpy.
tests/python/test_op_zoo.py runs every op once on small odd shapes (correctness only).

Ops of the issue's list not in the zoo: see MISSING below (none today). Peers to read with care: numpy has no
erf, so gelu_erf's numpy peer is np.vectorize(math.erf) (its ratio means nothing); frobenius runs
as one program (so one thread), the one-kernel form of a norm: across programs the sum of squares
would be `T.atomic_add`ed into a zeroed output and its square root taken in a second step.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent / "examples"), str(BENCH)]

import tilewright as tw  # noqa: E402
import tilewright.language as T  # noqa: E402

# ops of the list that cannot be written today, with the construct that is missing
MISSING = {
}
# ops whose numpy peer is not numpy's own fp32 op (numpy has no erf): left out of the numpy
# geometric mean and of the "below 1.0x numpy" list
NO_NUMPY_PEER = {"gelu_erf"}


@dataclass
class Case:
    kernel: object      # compiled Tilewright kernel
    args: list          # its inputs (numpy arrays)
    ref: object         # () -> float64 reference output
    numpy: object       # () -> numpy's own fp32 result (the timing peer)
    torch: object       # (torch module) -> callable, or None
    atol: float
    rtol: float
    work: str           # what the op does, for the table


OPS = {}
TARGET = "cpu"  # every kernel is built for this target (`--target`): the same source on each


def op(name, small, large):
    """Registers make(shape, rng) -> Case under `name`, with a small odd shape (the test) and a
    large one (the timing)."""
    def deco(make):
        OPS[name] = (make, small, large)
        return make
    return deco


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ------------------------------------------------------------------------------------------------
# activations: Y = f(X) over (M, N), block_M rows per program
# ------------------------------------------------------------------------------------------------

@tw.jit(out_idx=[-1])
def activation(M, N, act, block_M=8):
    """`act` is a Python string: the `if` is decided when the kernel is built (one map per kernel)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                if act == "relu":
                    x[i, j] = T.max(x[i, j], 0.0)
                elif act == "sigmoid":
                    x[i, j] = T.sigmoid(x[i, j])
                elif act == "tanh":
                    x[i, j] = T.tanh(x[i, j])
                elif act == "swish":
                    x[i, j] = x[i, j] * T.sigmoid(x[i, j])
                elif act == "gelu_erf":
                    x[i, j] = 0.5 * x[i, j] * (1.0 + T.erf(x[i, j] * 0.7071067811865476))
                elif act == "gelu_tanh":
                    x[i, j] = 0.5 * x[i, j] * (1.0 + T.tanh(0.7978845608028654 * (x[i, j] + 0.044715 * x[i, j] * x[i, j] * x[i, j])))
            T.copy(x, Y[bx * block_M, 0])
    return main


def _erf64(x):
    return np.vectorize(math.erf)(x)


ACTIVATIONS = {  # name: (float64 reference, numpy fp32 peer or None, torch function)
    "relu": (lambda x: np.maximum(x, 0), lambda x: np.maximum(x, np.float32(0)), "relu"),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), lambda x: 1 / (1 + np.exp(-x)), "sigmoid"),
    "tanh": (np.tanh, np.tanh, "tanh"),
    "swish": (lambda x: x / (1 + np.exp(-x)), lambda x: x / (1 + np.exp(-x)), "silu"),
    "gelu_erf": (lambda x: 0.5 * x * (1 + _erf64(x / math.sqrt(2))), None, "gelu"),
    "gelu_tanh": (lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3))),
                  lambda x: 0.5 * x * (1 + np.tanh(np.float32(0.7978845608028654) * (x + np.float32(0.044715) * x * x * x))),
                  "gelu_tanh"),
}


def _activation(name):
    ref, peer, tname = ACTIVATIONS[name]

    def make(shape, rng):
        M, N = shape
        x = f32(rng, M, N, scale=3.0)
        x64 = x.astype(np.float64)
        numpy_peer = peer if peer is not None else None
        if numpy_peer is None:  # numpy has no erf: scipy-free fp32 peer is the float64 reference
            numpy_peer = lambda v: ref(v.astype(np.float64)).astype(np.float32)  # noqa: E731

        def torch_peer(torch):
            tx = torch.from_numpy(x)
            F = torch.nn.functional
            return {"relu": lambda: torch.relu(tx), "sigmoid": lambda: torch.sigmoid(tx), "tanh": lambda: torch.tanh(tx),
                    "silu": lambda: F.silu(tx), "gelu": lambda: F.gelu(tx),
                    "gelu_tanh": lambda: F.gelu(tx, approximate="tanh")}[tname]
        return Case(activation(M, N, name, target=TARGET), [x], lambda: ref(x64), lambda: numpy_peer(x), torch_peer, 1e-6, 2e-6, "elementwise")
    return make


for _name in ACTIVATIONS:
    op(_name, (37, 301), (4096, 4096))(_activation(_name))


# ------------------------------------------------------------------------------------------------
# row-wise: softmax, log-softmax, norms
# ------------------------------------------------------------------------------------------------

@tw.jit(out_idx=[-1])
def log_softmax(N, block_M=8):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            e = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            # one tile per map: exp(x - max) feeds only the sum (the cpu target fuses the map into
            # the reduction and never writes e), and x is read in place until the last map, whose
            # rows go straight to Y; a map that also wrote x - max back would copy X into x first
            for i, j in T.Parallel(block_M, N):
                e[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(e, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - row_max[i] - T.log(row_sum[i])
            T.copy(x, Y[bx * block_M, 0])
    return main


def _softmax_make(shape, rng, log=False):
    from softmax import softmax
    M, N = shape
    x = f32(rng, M, N, scale=3.0)
    x64 = x.astype(np.float64)

    def ref():
        s = x64 - x64.max(axis=1, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=1, keepdims=True)) if log else np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)

    def peer():
        s = x - x.max(axis=1, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=1, keepdims=True)) if log else np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)

    def torch_peer(torch):
        tx = torch.from_numpy(x)
        return (lambda: torch.log_softmax(tx, 1)) if log else (lambda: torch.softmax(tx, 1))
    k = log_softmax(N, target=TARGET) if log else softmax(N, target=TARGET)
    return Case(k, [x], ref, peer, torch_peer, 1e-6, 1e-5, "rows")


op("softmax_wide", (37, 1000), (4096, 4096))(lambda s, r: _softmax_make(s, r))
op("softmax_narrow", (37, 1), (4096, 1))(lambda s, r: _softmax_make(s, r))
op("log_softmax", (37, 1000), (4096, 4096))(lambda s, r: _softmax_make(s, r, log=True))


@op("rmsnorm", (37, 301), (4096, 4096))
def _rmsnorm(shape, rng):
    from rms_norm import rms_norm
    M, N = shape
    x, w = f32(rng, M, N), f32(rng, N)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)

    def peer():
        return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + np.float32(1e-6)) * w

    def torch_peer(torch):
        tx, tw_ = torch.from_numpy(x), torch.from_numpy(w)
        return lambda: torch.nn.functional.rms_norm(tx, (N,), tw_, 1e-6)
    return Case(rms_norm(N, target=TARGET), [x, w], lambda: x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True) + 1e-6) * w64,
                peer, torch_peer, 1e-5, 1e-5, "rows")


@op("layernorm", (37, 301), (4096, 4096))
def _layernorm(shape, rng):
    from layer_norm import layer_norm
    M, N = shape
    x, w, b = f32(rng, M, N), f32(rng, N), f32(rng, N)
    x64 = x.astype(np.float64)

    def ref():
        mu = x64.mean(1, keepdims=True)
        return (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(1, keepdims=True) + 1e-5) * w + b

    def peer():
        mu = x.mean(1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + np.float32(1e-5)) * w + b

    def torch_peer(torch):
        tx, tw_, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
        return lambda: torch.nn.functional.layer_norm(tx, (N,), tw_, tb, 1e-5)
    return Case(layer_norm(N, target=TARGET), [x, w, b], ref, peer, torch_peer, 1e-5, 1e-5, "rows")


@tw.jit(out_idx=[-1])
def batchnorm(M, C, eps=1e-5, block_M=8):
    """Inference batch norm over (M, C) with per-channel statistics, written per element."""
    @T.prim_func
    def main(X: T.Tensor((M, C), "float32"), Mean: T.Tensor((C,), "float32"), Var: T.Tensor((C,), "float32"),
             G: T.Tensor((C,), "float32"), B: T.Tensor((C,), "float32"), Y: T.Tensor((M, C), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, C), "float32")
            mean = T.alloc_fragment((C,), "float32")
            var = T.alloc_fragment((C,), "float32")
            g = T.alloc_fragment((C,), "float32")
            b = T.alloc_fragment((C,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(Mean, mean)
            T.copy(Var, var)
            T.copy(G, g)
            T.copy(B, b)
            for i, j in T.Parallel(block_M, C):
                x[i, j] = (x[i, j] - mean[j]) * T.rsqrt(var[j] + eps) * g[j] + b[j]
            T.copy(x, Y[bx * block_M, 0])
    return main


@op("batchnorm", (37, 301), (4096, 4096))
def _batchnorm(shape, rng):
    M, C = shape
    x, mean, g, b = f32(rng, M, C), f32(rng, C), f32(rng, C), f32(rng, C)
    var = (rng.random(C) + 0.5).astype(np.float32)
    x64 = x.astype(np.float64)

    def peer():
        return (x - mean) / np.sqrt(var + np.float32(1e-5)) * g + b

    def torch_peer(torch):
        t = [torch.from_numpy(v) for v in (x, mean, var, g, b)]
        return lambda: torch.nn.functional.batch_norm(t[0], t[1], t[2], t[3], t[4], False, 0.0, 1e-5)
    return Case(batchnorm(M, C, target=TARGET), [x, mean, var, g, b], lambda: (x64 - mean) / np.sqrt(var.astype(np.float64) + 1e-5) * g + b,
                peer, torch_peer, 1e-5, 1e-5, "rows")


@tw.jit(out_idx=[-1])
def l2norm_rows(N, block_M=8):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(block_M):
                s[i] = T.sqrt(s[i])
            T.copy(s, Y[bx * block_M])
    return main


@op("l2norm_rows", (37, 301), (4096, 4096))
def _l2(shape, rng):
    M, N = shape
    x = f32(rng, M, N)
    return Case(l2norm_rows(N, target=TARGET), [x], lambda: np.linalg.norm(x.astype(np.float64), axis=1),
                lambda: np.linalg.norm(x, axis=1), lambda torch: (lambda t: lambda: torch.linalg.vector_norm(t, dim=1))(torch.from_numpy(x)),
                1e-5, 1e-5, "rows")


@tw.jit(out_idx=[-1])
def frobenius(M, N, block_M=8):
    """One program walks the row blocks: the square root needs the whole sum, which a reduction
    across programs (`T.atomic_add` into a zeroed output) only has after the kernel."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            acc = T.alloc_fragment((block_M,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            T.fill(acc, 0.0)
            for k in T.serial(T.ceildiv(M, block_M)):
                T.copy(X[k * block_M, 0], x)  # rows past M read as 0
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, s, dim=1)
                for i in T.Parallel(block_M):
                    acc[i] = acc[i] + s[i]
            T.reduce_sum(acc, tot, dim=0)
            tot[0] = T.sqrt(tot[0])
            T.copy(tot, Y)
    return main


@op("frobenius", (37, 301), (4096, 4096))
def _frob(shape, rng):
    M, N = shape
    x = f32(rng, M, N)
    return Case(frobenius(M, N, target=TARGET), [x], lambda: np.array([np.linalg.norm(x.astype(np.float64))]),
                lambda: np.linalg.norm(x), lambda torch: (lambda t: lambda: torch.linalg.norm(t))(torch.from_numpy(x)),
                1e-5, 1e-5, "whole tensor")


# ------------------------------------------------------------------------------------------------
# reductions over a middle axis, cumsum, cross-entropy
# ------------------------------------------------------------------------------------------------

@tw.jit(out_idx=[-1])
def reduce_mid(A, B, C, kind, block_C=512, dtype="float32"):
    """Y[a, c] = sum_b (or max_b, min_b) X[a, b, c]: one program per (c block, a), a (B, block_C)
    tile reduced over dim 0. (tests/python/test_cpu_reduce.py runs it on odd shapes and dtypes.)
    block_C 512 (2 KiB of each row per program): 64x256x1024 fp32 took 12-14% less time than with
    256 on a Zen 4 core, natively and on AVX2, sum and max alike; 1024 (whole rows) 30-60% more
    (docs/performance.md, session 19). Since whole rows are reduced one row a step (session 21),
    1024 takes 20-23% less time than 512 (docs/performance.md, session 21)."""
    @T.prim_func
    def main(X: T.Tensor((A, B, C), dtype), Y: T.Tensor((A, C), dtype)):
        with T.Kernel(T.ceildiv(C, block_C), A) as (bx, by):
            x = T.alloc_fragment((B, block_C), dtype)
            s = T.alloc_fragment((block_C,), dtype)
            T.copy(X[by, 0:B, bx * block_C:(bx + 1) * block_C], x)
            if kind == "sum":
                T.reduce_sum(x, s, dim=0)
            elif kind == "max":
                T.reduce_max(x, s, dim=0)
            else:
                T.reduce_min(x, s, dim=0)
            T.copy(s, Y[by, bx * block_C])
    return main


def _mid(kind, red, tname):
    def make(shape, rng):
        A, B, C = shape
        x = f32(rng, A, B, C)
        return Case(reduce_mid(A, B, C, kind, target=TARGET), [x], lambda: red(x.astype(np.float64), axis=1), lambda: red(x, axis=1),
                    lambda torch: (lambda t: lambda: getattr(torch, tname)(t, 1))(torch.from_numpy(x)),
                    1e-6 + 2.4e-7 * B, 1e-5, "middle axis")  # fp32 sum of B N(0,1) terms: ~4 sqrt(B) u sqrt(B)
    return make


op("sum_mid", (5, 37, 301), (64, 256, 1024))(_mid("sum", np.sum, "sum"))
op("max_mid", (5, 37, 301), (64, 256, 1024))(_mid("max", np.max, "amax"))


@tw.jit(out_idx=[-1])
def argmax_mid(A, B, C, block_C=256):
    """Y[a, c] = argmax_b X[a, b, c] (int32; the first index of the maximum, as numpy): one program
    per (c block, a) walks the B rows keeping the best value and its index with T.where (no
    index-returning reduction needed). NaN inputs are not handled (numpy returns the first NaN)."""
    @T.prim_func
    def main(X: T.Tensor((A, B, C), "float32"), Y: T.Tensor((A, C), "int32")):
        with T.Kernel(T.ceildiv(C, block_C), A) as (bx, by):
            x = T.alloc_fragment((block_C,), "float32")
            best = T.alloc_fragment((block_C,), "float32")
            idx = T.alloc_fragment((block_C,), "int32")
            T.fill(best, -T.infinity("float32"))
            T.fill(idx, 0)
            for b in T.serial(B):
                T.copy(X[by, b, bx * block_C:(bx + 1) * block_C], x)
                for j in T.Parallel(block_C):
                    idx[j] = T.where(x[j] > best[j], b, idx[j])
                    best[j] = T.max(best[j], x[j])
            T.copy(idx, Y[by, bx * block_C])
    return main


@op("argmax_mid", (5, 37, 301), (64, 256, 1024))
def _argmax(shape, rng):
    A, B, C = shape
    x = f32(rng, A, B, C)
    return Case(argmax_mid(A, B, C, target=TARGET), [x], lambda: np.argmax(x, axis=1), lambda: np.argmax(x, axis=1),
                lambda torch: (lambda t: lambda: torch.argmax(t, 1))(torch.from_numpy(x)), 0.5, 0.0, "middle axis")  # exact


@tw.jit(out_idx=[-1])
def cumsum_rows(N, block_M=8):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            for j in T.serial(1, N):
                for i in T.Parallel(block_M):
                    x[i, j] = x[i, j] + x[i, j - 1]
            T.copy(x, Y[bx * block_M, 0])
    return main


@op("cumsum", (37, 301), (4096, 1024))
def _cumsum(shape, rng):
    M, N = shape
    x = f32(rng, M, N)
    return Case(cumsum_rows(N, target=TARGET), [x], lambda: np.cumsum(x.astype(np.float64), axis=1), lambda: np.cumsum(x, axis=1),
                lambda torch: (lambda t: lambda: torch.cumsum(t, 1))(torch.from_numpy(x)),
                1e-4, 1e-5, "rows (serial scan)")


@tw.jit(out_idx=[-1])
def cross_entropy(N, block_M=8):
    """loss[i] = logsumexp(X[i, :]) - X[i, label[i]]."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), L: T.Tensor((M,), "int32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            e = T.alloc_fragment((block_M, N), "float32")
            lab = T.alloc_fragment((block_M,), "int32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(L[bx * block_M], lab)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                e[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(e, row_sum, dim=1)
            for i in T.Parallel(block_M):
                row_sum[i] = T.log(row_sum[i]) + row_max[i] - x[i, T.min(T.max(lab[i], 0), N - 1)]
            T.copy(row_sum, Y[bx * block_M])
    return main


@op("cross_entropy", (37, 301), (4096, 4096))
def _xent(shape, rng):
    M, N = shape
    x = f32(rng, M, N, scale=3.0)
    lab = rng.integers(0, N, M).astype(np.int32)
    x64 = x.astype(np.float64)

    def ref():
        m = x64.max(1)
        return np.log(np.exp(x64 - m[:, None]).sum(1)) + m - x64[np.arange(M), lab]

    def peer():
        m = x.max(1)
        return np.log(np.exp(x - m[:, None]).sum(1)) + m - x[np.arange(M), lab]

    def torch_peer(torch):
        tx, tl = torch.from_numpy(x), torch.from_numpy(lab.astype(np.int64))
        return lambda: torch.nn.functional.cross_entropy(tx, tl, reduction="none")
    return Case(cross_entropy(N, target=TARGET), [x, lab], ref, peer, torch_peer, 1e-5, 1e-5, "rows")


# ------------------------------------------------------------------------------------------------
# matmuls
# ------------------------------------------------------------------------------------------------

@tw.jit(out_idx=[-1])
def matmul_nt(M, N, K, block_M=64, block_N=128, block_K=128):
    """C = A @ B.T with B stored (N, K) (a linear layer's weight)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            a = T.alloc_shared((block_M, block_K), "float32")
            b = T.alloc_shared((block_N, block_K), "float32")
            c = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K)):
                T.copy(A[by * block_M, k * block_K], a)
                T.copy(B[bx * block_N, k * block_K], b)
                T.gemm(a, b, c, transpose_B=True)
            T.copy(c, C[by * block_M, bx * block_N])
    return main


@tw.jit(out_idx=[-1])
def matmul_batched(Bt, M, N, K, block_M=64, block_N=128, block_K=128):
    @T.prim_func
    def main(A: T.Tensor((Bt, M, K), "float32"), B: T.Tensor((Bt, K, N), "float32"), C: T.Tensor((Bt, M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), Bt) as (bx, by, bz):
            a = T.alloc_shared((block_M, block_K), "float32")
            b = T.alloc_shared((block_K, block_N), "float32")
            c = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K)):
                T.copy(A[bz, by * block_M:(by + 1) * block_M, k * block_K:(k + 1) * block_K], a)
                T.copy(B[bz, k * block_K:(k + 1) * block_K, bx * block_N:(bx + 1) * block_N], b)
                T.gemm(a, b, c)
            T.copy(c, C[bz, by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])
    return main


def _mm(shape, rng, kind="nn"):
    from gemm import matmul
    if kind == "batched":
        Bt, M, N, K = shape
        a, b = f32(rng, Bt, M, K), f32(rng, Bt, K, N)
        k = matmul_batched(Bt, M, N, K, target=TARGET)
        peer = lambda: a @ b  # noqa: E731
        ref = lambda: a.astype(np.float64) @ b.astype(np.float64)  # noqa: E731
        args = [a, b]
    else:
        M, N, K = shape
        a = f32(rng, M, K)
        b = f32(rng, N, K) if kind == "nt" else f32(rng, K, N)
        bm = 64 if M >= 64 else 16
        k = matmul_nt(M, N, K, target=TARGET) if kind == "nt" else matmul(M, N, K, block_M=bm, block_N=128, block_K=128,
                                                                      dtype="float32", target=TARGET)
        bb = b.T if kind == "nt" else b
        peer = lambda: a @ bb  # noqa: E731
        ref = lambda: a.astype(np.float64) @ bb.astype(np.float64)  # noqa: E731
        args = [a, b]
    K = shape[-1]

    def torch_peer(torch):
        ta, tb = torch.from_numpy(args[0]), torch.from_numpy(args[1])
        return (lambda: ta @ tb.T) if kind == "nt" else (lambda: torch.matmul(ta, tb))
    return Case(k, args, ref, peer, torch_peer, 2e-6 * K + 1e-5, 1e-5, "matmul")


op("matmul_square", (65, 97, 131), (1024, 1024, 1024))(lambda s, r: _mm(s, r))
op("matmul_irregular", (65, 37, 74), (1025, 369, 741))(lambda s, r: _mm(s, r))
op("matmul_tall_skinny", (301, 17, 33), (16384, 64, 64))(lambda s, r: _mm(s, r))
op("matmul_small_k", (65, 97, 7), (2048, 2048, 16))(lambda s, r: _mm(s, r))
op("matmul_large_k", (17, 19, 1031), (256, 256, 16384))(lambda s, r: _mm(s, r))
op("matvec", (1, 97, 131), (1, 4096, 4096))(lambda s, r: _mm(s, r))
op("matmul_transposed_b", (65, 97, 131), (1024, 1024, 1024))(lambda s, r: _mm(s, r, "nt"))
op("matmul_batched", (3, 33, 47, 29), (32, 128, 128, 128))(lambda s, r: _mm(s, r, "batched"))


@op("sdpa", (1, 2, 67, 32), (1, 8, 1024, 64))
def _sdpa(shape, rng):
    from flash_attention import flash_attention, reference
    Bt, H, S, D = shape
    q, k, v = (f32(rng, Bt, H, S, D) for _ in range(3))

    def peer():
        s = (q @ np.swapaxes(k, -1, -2)) * np.float32(1 / math.sqrt(D))
        s = np.exp(s - s.max(-1, keepdims=True))
        return (s / s.sum(-1, keepdims=True)) @ v

    def torch_peer(torch):
        tq, tk, tv = (torch.from_numpy(t) for t in (q, k, v))
        return lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
    return Case(flash_attention(Bt, H, S, D, False, target=TARGET), [q, k, v],
                lambda: reference(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), False),
                peer, torch_peer, 2e-4, 1e-3, "attention")


# ------------------------------------------------------------------------------------------------
# checking and timing
# ------------------------------------------------------------------------------------------------

def check(name, case) -> tuple[bool, float]:
    """(within tolerance, worst |got - ref| / (atol + rtol |ref|)) of one call."""
    got = np.asarray(case.kernel(*case.args), dtype=np.float64)
    ref = np.asarray(case.ref(), dtype=np.float64).reshape(got.shape)
    err = np.abs(got - ref) / (case.atol + case.rtol * np.abs(ref))
    worst = float(err.max()) if err.size else 0.0
    return bool(np.isfinite(got).all() and worst <= 1.0), worst


def per_round_times(fns, rounds=3, budget=1.0, clock=time.perf_counter):
    """Alternating batches of each callable in `fns`, `rounds` rounds, the order rotated each round
    (so no peer always runs right after another); seconds per call in each round, for each, on
    `clock` (wall time, or the process's CPU time: see `--clock`)."""
    for f in fns.values():
        f()
    t0 = time.perf_counter()
    next(iter(fns.values()))()
    reps = max(1, min(2000, int(budget / 6 / max(time.perf_counter() - t0, 1e-7))))
    times = {k: [] for k in fns}
    keys = list(fns)
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            f = fns[k]
            time.sleep(0.05)
            s = clock()
            for _ in range(reps):
                f()
            times[k].append((clock() - s) / reps)
    return times


def ratios_of(times, peer):
    """(best peer / best ours, median of the per-round ratios peer / ours)."""
    ours = times["tilewright"]
    per_round = [p / o for p, o in zip(times[peer], ours)]
    return min(times[peer]) / min(ours), statistics.median(per_round)


def child(names, threads, rounds=3, clock=time.perf_counter):
    try:
        import torch
        torch.set_num_threads(threads)
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    ratios = {"numpy": [], "torch": []}
    below = []
    for name in names:
        make, _, large = OPS[name]
        case = make(large, rng)
        ok, worst = check(name, case)
        fns = {"tilewright": lambda: case.kernel(*case.args), "numpy": case.numpy}
        if torch is not None and case.torch is not None:
            fns["torch"] = case.torch(torch)
        t = per_round_times(fns, rounds, clock=clock)
        best_np, r_np = ratios_of(t, "numpy")
        r_t = "  n/a"
        if "torch" in t:
            best_t, med_t = ratios_of(t, "torch")
            r_t = f"{med_t:5.2f}x (best {best_t:5.2f}x)"
        print(f"{name:22s} {threads}T {str(large):22s} {statistics.median(t['tilewright']) * 1e3:9.3f} ms  "
              f"vs numpy {r_np:5.2f}x (best {best_np:5.2f}x)  vs torch {r_t}  "
              f"check {'ok' if ok else 'FAILED'} ({worst:.2f} of tol)", flush=True)
        if name not in NO_NUMPY_PEER:
            ratios["numpy"].append(r_np)
            if r_np < 1.0:
                below.append(f"{name} {r_np:.2f}x")
        if "torch" in t:
            ratios["torch"].append(med_t)
    for peer, rs in ratios.items():
        if rs:
            gm = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"geometric mean {threads}T vs {peer}: {gm:.2f}x over {len(rs)} ops", flush=True)
    if ratios["numpy"]:
        print(f"below 1.0x numpy {threads}T: {', '.join(below) if below else 'none'}", flush=True)


def portability(names, target) -> int:
    """Runs every op's kernel, unchanged, on `target` at its small shape, checked against the same
    float64 reference; prints one line per op (ok, wrong, or the first line of the error) and the
    count. Returns the number of ops that ran and matched."""
    global TARGET
    from tilewright import TilewrightError
    TARGET = target
    passed = 0
    for name in names:
        make, small, _ = OPS[name]
        try:
            ok, worst = check(name, make(small, np.random.default_rng(1)))
            line = "ok" if ok else f"WRONG ({worst:.2f} of tol)"
            passed += ok
        except TilewrightError as e:
            line = "error: " + str(e).strip().splitlines()[0]
        print(f"{name:22s} {target} {str(small):18s} {line}", flush=True)
    missing = f" ({len(MISSING)} more not written: {', '.join(MISSING)})" if MISSING else ""
    print(f"{passed} of {len(names)} ops ran unchanged on {target} and matched the reference{missing}")
    return passed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--ops", default="", help="comma-separated substrings of op names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--target", default="cpu", help="another target (ascend910b): no timing; each op's kernel, "
                    "unchanged, runs at its small shape and is checked (portability count)")
    ap.add_argument("--cpu-arch", default=None, metavar="ARCH",
                    help="compile for ARCH (TW_CPU_ARCH); peers on AVX2 too when ARCH has no AVX-512 (bench/run.py)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per op (the ratios: median of the "
                    "per-round ratios, and best against best)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: the process's CPU time (all its threads), which a loaded machine's waits do not "
                    "inflate; a fair clock at one thread only (at two it adds the threads' times)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    filters = [f for f in opts.ops.split(",") if f]
    names = [n for n in OPS if not filters or any(f in n for f in filters)]
    if opts.list:
        print("\n".join(OPS))
        for n, why in MISSING.items():
            print(f"{n} (not written: {why})")
        return 0
    if opts.target != "cpu":
        portability(names, opts.target)
        return 0
    if opts.child:
        child(names, opts.child, opts.rounds, time.process_time if opts.clock == "cpu" else time.perf_counter)
        return 0
    import run
    run.CPU_ARCH = opts.cpu_arch
    print("Under load, timings vary; the ratios (same process, alternating batches) are the figures to read.")
    print(f"compiled for: {run.cpu_arch_note(opts.cpu_arch)}")
    for n in (int(t) for t in opts.threads.split(",")):
        r = subprocess.run([sys.executable, __file__, "--child", str(n), "--rounds", str(opts.rounds), "--clock", opts.clock,
                            "--ops", ",".join(names)], env=run.peer_env(n))
        if r.returncode != 0:
            return r.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
