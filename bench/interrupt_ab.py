"""The cost of Ctrl-C between a cpu kernel's blocks (session 32, h-intr32): with the interrupt check
installed (the Python module's), a launch of more than one block registers with the ticker thread
and the thread running blocks loads a flag before each one; the pool's workers load the cancel flag.
A/B in one process, batch against batch, interleaved round by round, needs a probe build whose
module has `_C._probe_interrupt_check(on)` (support::set_interrupt_check(on ? &python_interrupted :
nullptr), one line in bind_runtime.cpp, not committed): off is the launch path of before.

    .venv/bin/python bench/interrupt_ab.py --rounds 15

Cases: the tiny kernel (bench/kernels.py tiny_add: 16 floats, one block: the call overhead, which
never polls), and kernels of many small blocks (4096 blocks of 64 floats, one step each; 64 blocks).
Prints, per case and variant, the median and min per call of wall time and of the process's CPU time
(time.process_time: all its threads), and the median on/off ratio of the rounds."""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tilewright as tw  # noqa: E402
import tilewright.language as T  # noqa: E402
from tilewright import _C  # noqa: E402
from kernels import tiny_add  # noqa: E402


@tw.jit(out_idx=[-1])
def many_blocks(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(n // 64) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = A[bx * 64 + i] * 0.5 + 1.0

    return main


def batch(fn, x, calls):
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - t0) / calls, (time.process_time() - c0) / calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    x16 = np.arange(16, dtype=np.float32)
    xm = np.linspace(-3, 3, 64 * 4096).astype(np.float32)
    cases = [("tiny kernel (16 floats, 1 block)", tiny_add(16), x16, x16 + 1, 4000),
             ("many blocks (4096 x 64 floats)", many_blocks(64 * 4096), xm, xm * np.float32(0.5) + 1, 200),
             ("64 blocks of 64 floats", many_blocks(64 * 64), xm[:4096], xm[:4096] * np.float32(0.5) + 1, 2000)]
    for name, k, x, want, calls in cases:
        for on in (True, False):
            _C._probe_interrupt_check(on)
            assert np.array_equal(k(x), want), name
        res = {True: [], False: []}
        for r in range(args.rounds):
            for on in ((True, False) if r % 2 == 0 else (False, True)):
                _C._probe_interrupt_check(on)
                res[on].append(batch(k, x, calls))
        _C._probe_interrupt_check(True)
        print(name)
        for on in (True, False):
            w = [a for a, _ in res[on]]
            c = [b for _, b in res[on]]
            print(f"  check {'on ' if on else 'off'}: wall {statistics.median(w) * 1e6:8.2f} us (min {min(w) * 1e6:8.2f}), "
                  f"CPU {statistics.median(c) * 1e6:8.2f} us (min {min(c) * 1e6:8.2f})")
        rw = statistics.median(a[0] / b[0] for a, b in zip(res[True], res[False]))
        rc = statistics.median(a[1] / b[1] for a, b in zip(res[True], res[False]))
        print(f"  on / off, median of rounds: wall {rw:.3f}x, CPU {rc:.3f}x")


if __name__ == "__main__":
    main()
