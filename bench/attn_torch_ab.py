#!/usr/bin/env python3
"""examples/flash_attention.py against torch SDPA in CPU time, 1 thread: issue 16's flash attention goal
(>= 1.2x torch SDPA) measured the way a shared machine disturbs least.

    python bench/attn_torch_ab.py --cpu-arch x86-64-v3 --blocks 128/128 64/128 --rounds 15
    python bench/attn_torch_ab.py --causal

Both sides run on the calling thread (torch.set_num_threads(1), TW_NUM_THREADS=1: with more threads
the kernel's grid would run partly on workers whose time `time.thread_time` does not see), alternating
in one process in an order rotated every round, best of 3 calls a round, thread CPU time; prints min and
median per side and, per block shape, torch / ours as min/min and the median of the per-round ratios.
--cpu-arch sets what bench/run.py --cpu-arch sets (cpu_arch_env: TW_CPU_ARCH and, without AVX-512, the
peers' AVX2 settings) and runs the measurement in a child with that environment. Outputs are checked
against torch's (max abs difference printed, 1e-5 required). B 1, H 8, S 2048, D 128 unless --shape.
docs/performance.md "Session 35: flash attention non-causal on the AVX2 proxy" has what it measured.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(opts):
    sys.path.insert(0, str(HERE.parent / "examples"))
    import numpy as np
    import torch
    from flash_attention import flash_attention

    torch.set_num_threads(1)
    B, H, S, D = opts.shape
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, H, S, D)).astype(np.float32) for _ in range(3))
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    fns = {"torch": lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=opts.causal)}
    for b in opts.blocks:
        bm, bn = map(int, b.split("/"))
        kern = flash_attention(B, H, S, D, opts.causal, block_M=bm, block_N=bn)
        fns[b] = lambda kern=kern: kern(q, k, v)
    ref = fns["torch"]().numpy()
    for b in opts.blocks:
        err = float(np.abs(np.asarray(fns[b]()) - ref).max())
        print(f"{b}: max |ours - torch| {err:.2e}")
        if not err <= 1e-5:
            sys.exit(f"{b}: result differs from torch SDPA by {err}")

    def best_of_3(f):
        best = float("inf")
        for _ in range(3):
            t = time.thread_time()
            f()
            best = min(best, time.thread_time() - t)
        return best

    names = list(fns)
    res = {n: [] for n in names}
    for r in range(opts.rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            res[n].append(best_of_3(fns[n]))
    print(f"torch capability {torch.backends.cpu.get_cpu_capability()}, TW_CPU_ARCH "
          f"{os.environ.get('TW_CPU_ARCH', 'native')}, {'causal' if opts.causal else 'non-causal'}, "
          f"{opts.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    for n in names:
        print(f"{n:>8}: min {min(res[n]) * 1e3:9.3f} ms, median {statistics.median(res[n]) * 1e3:9.3f} ms")
    for b in opts.blocks:
        ratios = [a / c for a, c in zip(res["torch"], res[b])]
        print(f"torch / {b}: min/min {min(res['torch']) / min(res[b]):.3f}, median of rounds "
              f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu-arch", help="compile for ARCH, the peers on its instruction set (bench/run.py's)")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--blocks", nargs="+", default=["128/128", "64/128"], help="block_M/block_N shapes")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--shape", type=int, nargs=4, default=[1, 8, 2048, 128], metavar=("B", "H", "S", "D"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        return measure(opts)
    sys.path.insert(0, str(HERE))
    from run import cpu_arch_env  # noqa: E402 (bench/run.py: one place for the peers' settings)

    env = dict(os.environ, TW_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for var in ("OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA",
                "NPY_DISABLE_CPU_FEATURES", "TW_CPU_ARCH"):
        env.pop(var, None)  # as bench/run.py's children: only --cpu-arch sets them
    env.update(cpu_arch_env(opts.cpu_arch))
    return subprocess.run([sys.executable, __file__, "--child", *sys.argv[1:]], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
