#!/usr/bin/env python3
"""Side-by-side timing of gemm runtime variants (gemm_impl.h from different include directories)
on examples/gemm.py's fp32 tile program, with numpy and torch in the same rounds.

    python bench/gemm_tile_ab.py main=/tmp/main/include new=src/target/cpu/include \
        --shapes 1024,1024,1024,64,256,256 256,256,16384,64,128,128 --rounds 12 --threads 1

Each variant's include directory (one holding tw_cpu/gemm_impl.h and gemm_runtime.cpp) is compiled with
bench/gemm_tile_ab.cpp at the runtime's flags into a shared library; all are loaded into this
process. A shape is M,N,K,block_M,block_N,block_K[,batch]; --blocks BM/BN/BK ... times each variant at those
blocks too, in the same rounds (as NAME@BM/BN/BK). Every round times each implementation
(best of a few calls), alternating the order; printed per implementation: the best and median
rates, and against the first variant the median of the per-round time ratios (> 1: the first is
faster) and the ratio of the best times. --cpu-time times the calling thread's CPU time
(1 thread only: on a loaded machine wall time is mostly waiting for a core). --hot: every call
reads the first block's tiles (the operands stay cached: the micro-kernels' and driver's ceiling). --march ARCH without AVX-512
(x86-64-v3: the AVX2 proxy) puts numpy's OpenBLAS and torch on their AVX2 kernels too, as
bench/run.py's --cpu-arch does.
--dtype int8: int8 operands and an int32 C (the int8 tile program; numpy and torch time fp32 of the
same values). --dtype float16 / bfloat16: 16-bit operands into an fp32 C (the 16-bit programs'
accumulator tile), and each variant's fp32 program on the same values beside it as NAME:f32 (issue 16's
fp16 / bf16 goals are against our fp32); numpy times fp32, torch fp32 for float16 and its bf16 matmul
for bfloat16 (on AMX machines oneDNN's tile kernels: the peer of the AMX path). Outputs are checked against a float64 reference (int8: exactly)
and compared bit for bit with the first variant's.
"""
import argparse
import ctypes
import hashlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(name, inc, flags):
    src = HERE / "gemm_tile_ab.cpp"
    text = src.read_bytes() + b"".join(p.read_bytes() for p in sorted(Path(inc, "tw_cpu").glob("*")))
    key = hashlib.sha256(text + " ".join(flags).encode()).hexdigest()[:16]
    out = Path("/tmp") / f"tw_gemm_tile_ab_{name}_{key}.so"
    if not out.exists():
        cmd = ["g++", "-O3", "-std=c++20", "-fPIC", "-shared", "-fvisibility=hidden", *flags, f"-I{inc}",
               str(src), "-o", str(out), "-lpthread"]
        subprocess.run(cmd, check=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", help="name=include_dir")
    ap.add_argument("--shapes", nargs="+", default=["1024,1024,1024,64,256,256"])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cpu-time", action="store_true")
    ap.add_argument("--hot", action="store_true")
    ap.add_argument("--blocks", nargs="*", default=[], metavar="BM/BN/BK",
                    help="more block sizes for every shape: each variant's program at each of them beside the "
                         "shape's own in every round, as NAME@BM/BN/BK")
    ap.add_argument("--march", default="native")
    ap.add_argument("--dtype", default="float32", choices=["float32", "int8", "float16", "bfloat16"],
                    help="int8: int8 operands, int32 C, exact; float16 / bfloat16: 16-bit operands, fp32 C, with "
                         "our fp32 beside it; numpy times float32 of the same values, torch too but bf16 for bfloat16")
    opts = ap.parse_args()
    n = opts.threads
    if opts.cpu_time and n != 1:
        sys.exit("--cpu-time needs --threads 1")
    os.environ.update(OPENBLAS_NUM_THREADS=str(n), OMP_NUM_THREADS=str(n), MKL_NUM_THREADS=str(n))
    os.environ.pop("OPENBLAS_CORETYPE", None)
    if opts.march != "native" and "TW_AB_PEER_ENV" not in os.environ:
        # the peers on the same instruction set (bench/run.py's --cpu-arch): their libraries read
        # it when loaded, and cpu_arch_env imports numpy, so run again with it set
        sys.path.insert(0, str(HERE))
        import run
        env = dict(os.environ, TW_AB_PEER_ENV="1")
        env.update({k: v for k, v in run.cpu_arch_env(opts.march).items() if k != "TW_CPU_ARCH"})
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    import numpy as np
    try:
        import torch
        torch.set_num_threads(n)
    except ImportError:
        torch = None
    clock = time.thread_time if opts.cpu_time else time.perf_counter
    flags = [f"-march={opts.march}", "-mprefer-vector-width=512"]
    libs = {}
    for v in opts.variants:
        name, _, inc = v.partition("=")
        lib = ctypes.CDLL(str(build(name, inc, flags)), mode=os.RTLD_LOCAL)
        lib.ab_launch.argtypes = [ctypes.c_int] * 7 + [ctypes.c_void_p] * 3 + [ctypes.c_int]
        lib.ab_setup(n, int(opts.hot))
        libs[name] = lib
    rng = np.random.default_rng(0)
    for shape in opts.shapes:
        v = [int(x) for x in shape.split(",")]
        M, N, K, bm, bn, bk = v[:6]
        batch = v[6] if len(v) > 6 else 1
        i8, bf = opts.dtype == "int8", opts.dtype == "bfloat16"
        f16 = opts.dtype == "float16" or bf
        if bf:  # fp32 values rounded to nearest even bf16, kept as their 16 bits (numpy has no bf16)
            def to_bf16(x):
                u = x.astype(np.float32).view(np.uint32)
                return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            a = to_bf16(rng.standard_normal((batch, M, K)))
            b = to_bf16(rng.standard_normal((batch, K, N)))
        elif i8:
            a = rng.integers(-128, 128, (batch, M, K), dtype=np.int8)
            b = rng.integers(-128, 128, (batch, K, N), dtype=np.int8)
        else:
            a = rng.standard_normal((batch, M, K)).astype(opts.dtype)
            b = rng.standard_normal((batch, K, N)).astype(opts.dtype)
        if bf:
            a32, b32 = ((x.astype(np.uint32) << 16).view(np.float32) for x in (a, b))
        else:
            a32, b32 = a.astype(np.float32), b.astype(np.float32)
        ref = a32.astype(np.float64) @ b32.astype(np.float64)
        code = {"float32": 0, "int8": 1, "float16": 2, "bfloat16": 3}[opts.dtype]
        impls, outs = {}, {}
        blocks = [(bm, bn, bk, "")] + [(*(int(x) for x in blk.split("/")), "@" + blk) for blk in opts.blocks]
        for name, lib in libs.items():
            runs = [(name, code, a, b)] + ([(name + ":f32", 0, a32, b32)] if f16 else [])
            for key, dt, x, y in runs:
                for m0, n0, k0, tag in blocks:
                    c = outs[key + tag] = np.empty((batch, M, N), np.int32 if i8 else np.float32)
                    impls[key + tag] = (lambda lib=lib, c=c, dt=dt, x=x, y=y, m0=m0, n0=n0, k0=k0: lib.ab_launch(
                        M, N, K, m0, n0, k0, batch, x.ctypes.data, y.ctypes.data, c.ctypes.data, dt))
        a2, b2 = (a32[0], b32[0]) if batch == 1 else (a32, b32)
        impls["numpy"] = lambda: a2 @ b2
        if torch is not None:
            ta, tb = torch.from_numpy(a2), torch.from_numpy(b2)
            if bf:
                ta, tb = ta.to(torch.bfloat16), tb.to(torch.bfloat16)
            impls["torch"] = lambda: torch.matmul(ta, tb)
        for f in impls.values():
            f()
        first = next(iter(libs))
        for name, c in outs.items():
            if not opts.hot and i8:
                assert np.array_equal(c, ref.astype(np.int32)), f"{name}: not exact"
            elif not opts.hot:
                err = np.abs(c - ref) / (2e-6 * K + 1e-5 + 1e-5 * np.abs(ref))
                assert err.max() <= 1.0, f"{name}: {err.max():.2f} of the tolerance"
            if not np.array_equal(c, outs[first]):
                print(f"  {name}: not bit-identical to {first}")
        t0 = time.perf_counter()
        impls[first]()
        reps = max(1, int(0.15 / max(time.perf_counter() - t0, 1e-6)))
        times = {k: [] for k in impls}
        for r in range(opts.rounds):
            for k in (list(impls) if r % 2 == 0 else list(impls)[::-1]):
                best = float("inf")
                for _ in range(reps):
                    s = clock()
                    impls[k]()
                    best = min(best, clock() - s)
                times[k].append(best)
        flops = 2.0 * M * N * K * batch
        print(f"{batch}x{M}x{N}x{K} blocks {bm}/{bn}/{bk}, {n} thread(s), {opts.rounds} rounds of best-of-{reps}, "
              f"{'thread CPU' if opts.cpu_time else 'wall'} time, load {os.getloadavg()[0]:.1f}")
        for k, t in times.items():
            line = f"  {k:10s} best {flops / min(t) / 1e9:7.1f} GFLOP/s  median {flops / statistics.median(t) / 1e9:7.1f}"
            if k != first:
                ratio = statistics.median(t[i] / times[first][i] for i in range(opts.rounds))
                line += f"   {first} speed / {k}: median {ratio:.3f}, best {min(t) / min(times[first]):.3f}"
            if k in outs and k != first:  # ours at other blocks or dtype: against numpy too
                tn = times["numpy"]
                ratio = statistics.median(tn[i] / t[i] for i in range(opts.rounds))
                line += f";  {k} / numpy: median {ratio:.3f}, best {min(tn) / min(t):.3f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
