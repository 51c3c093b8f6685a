"""bfloat16 row kernels (softmax, log_softmax, rms_norm, layer_norm; bfloat16 in and out, float32
tiles, block_M 8) against the copy probe (bench/peaks.cpp tw_copy_probe: a copy of the same bytes),
interleaved round by round in one process: session 29 (h-bf16in), a float32 tile copied from a
bfloat16 tensor read in place (view_rows' widening row view).

    TW_NUM_THREADS=1 .venv/bin/python bench/bf16in_s29.py --rounds 9
    TW_NUM_THREADS=2 .venv/bin/python bench/bf16in_s29.py --rounds 9

With --old, each kernel is also compiled with TW_PROBE_NOWIDEN=1 in the environment, which only a
probe build reads (view_rows then makes no widening view: the converting copy-in of before); the
script checks that the two sources differ and that the outputs are bitwise equal. 1 thread: CPU
time of the process (time.process_time); more: wall time (and CPU time / threads). Prints min and
median (ms) of each variant and of the copy, the % of the copy (copy time / kernel time, median),
and the new / old ratio per round (median, min)."""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import tilewright as tw  # noqa: E402
import tilewright.language as T  # noqa: E402
from tilewright.testing import np_dtype, randn  # noqa: E402


@tw.jit
def row_k(kind, N, variant, block_M=8):
    M = T.symbolic("M")
    dt = "bfloat16"

    @T.prim_func
    def main(X: T.Tensor((M, N), dt), Wt: T.Tensor((N,), dt), Y: T.Tensor((M, N), dt)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            e = T.alloc_fragment((block_M, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            a = T.alloc_fragment((block_M,), "float32")
            b = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            if kind == "softmax":
                T.reduce_max(x, a, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.exp(x[i, j] - a[i])
                T.reduce_sum(x, b, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] / b[i]
            elif kind == "log_softmax":
                T.reduce_max(x, a, dim=1)
                for i, j in T.Parallel(block_M, N):
                    e[i, j] = T.exp(x[i, j] - a[i])
                T.reduce_sum(e, b, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] - a[i] - T.log(b[i])
            elif kind == "rms_norm":
                T.copy(Wt, w)
                for i, j in T.Parallel(block_M, N):
                    e[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(e, b, dim=1)
                for i in T.Parallel(block_M):
                    b[i] = T.rsqrt(b[i] / N + 1e-6)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] * b[i] * w[j]
            else:  # layer_norm
                T.copy(Wt, w)
                T.reduce_sum(x, a, dim=1)
                for i in T.Parallel(block_M):
                    a[i] = a[i] / N
                for i, j in T.Parallel(block_M, N):
                    e[i, j] = (x[i, j] - a[i]) * (x[i, j] - a[i])
                T.reduce_sum(e, b, dim=1)
                for i in T.Parallel(block_M):
                    b[i] = T.rsqrt(b[i] / N + 1e-5)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = (x[i, j] - a[i]) * b[i] * w[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--shape", default="8192x4096")
    ap.add_argument("--kinds", default="softmax,log_softmax,rms_norm,layer_norm")
    ap.add_argument("--old", action="store_true")
    opts = ap.parse_args()
    from run import build_peaks

    M, N = (int(v) for v in opts.shape.split("x"))
    threads = int(tw._C.num_threads())
    one = threads == 1
    clock = time.process_time if one else time.perf_counter
    x = randn((M, N), "bfloat16", scale=2.0, seed=1)
    w = randn((N,), "bfloat16", seed=2)
    lib = build_peaks()
    probe = lib.tw_copy_probe_new(threads, float(x.nbytes))
    variants = {}
    for kind in opts.kinds.split(","):
        if opts.old:
            os.environ["TW_PROBE_NOWIDEN"] = "1"
            old = row_k(kind, N, "old")
            src_old = old.get_kernel_source()
            del os.environ["TW_PROBE_NOWIDEN"]
        new = row_k(kind, N, "new")
        ys = {}
        for name, k in ([("old", old)] if opts.old else []) + [("new", new)]:
            y = np.zeros((M, N), np_dtype("bfloat16"))
            k(x, w, y)
            ys[name] = y
            variants[f"{kind} {name}"] = (k, y)
        if opts.old:
            assert src_old != new.get_kernel_source(), "TW_PROBE_NOWIDEN not read: not a probe build"
            assert np.array_equal(ys["old"].view(np.uint16), ys["new"].view(np.uint16)), kind
    times = {name: [] for name in variants}
    times["copy"] = []
    names = list(times)
    for r in range(opts.rounds):
        order = names[r % len(names):] + names[:r % len(names)]  # rotated each round
        for name in order:
            if name == "copy":
                c0 = clock()
                lib.tw_copy_probe_run(probe, 1)
                times[name].append(clock() - c0)
            else:
                k, y = variants[name]
                c0 = clock()
                k(x, w, y)
                times[name].append(clock() - c0)
    lib.tw_copy_probe_free(probe)
    cm = statistics.median(times["copy"])
    print(f"{M} x {N} bf16, {threads} thread(s), {opts.rounds} rounds, {'CPU time' if one else 'wall time'}, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"copy probe: min {min(times['copy']) * 1e3:.2f} / median {cm * 1e3:.2f} ms")
    for name in variants:
        t = times[name]
        line = (f"{name:>22}: min {min(t) * 1e3:7.2f} / median {statistics.median(t) * 1e3:7.2f} ms, "
                f"{100 * cm / statistics.median(t):5.1f}% of copy")
        if name.endswith(" new") and opts.old:
            ratios = [a / b for a, b in zip(t, times[name[:-4] + " old"])]
            line += f", new/old per round median {statistics.median(ratios):.3f} (min {min(ratios):.3f})"
        print(line)


if __name__ == "__main__":
    main()
