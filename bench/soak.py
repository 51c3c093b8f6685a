"""Soak benchmark of a long-running service (the seed article's overnight memory growth): compiles
many distinct kernels and calls them many times, printing resident memory (RSS), memory mappings
and open file descriptors at intervals. With the in-memory cache bounded (TW_MEMORY_CACHE_MAX,
default 512) the three figures go flat once the bound is reached. Not a test. Where glibc's
mallinfo2 is available it also prints the heap glibc holds ("heap MiB", what RSS follows) and the
part of it in use, and the disk cache's entries (which grow with every distinct kernel).

Usage: python bench/soak.py [--kernels 20000] [--calls 1000000] [--every 1000]
The disk cache is a fresh temporary directory unless TW_CACHE_DIR is set.
"""
import argparse
import ctypes
import os
import sys
import tempfile
import time

import numpy as np


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap_stats():
    """(MiB of heap glibc holds, MiB of it in use) by mallinfo2, or None without glibc 2.33+."""
    try:
        f = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    f.restype = _MallInfo2
    m = f()
    return (m.arena + m.hblkhd) / 2**20, (m.uordblks + m.hblkhd) / 2**20


def stats():
    with open("/proc/self/status") as f:
        rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:")) / 1024
    with open("/proc/self/maps") as f:
        maps = sum(1 for _ in f)
    fds = len(os.listdir("/proc/self/fd"))
    return rss, maps, fds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=20000, help="distinct kernels to compile")
    ap.add_argument("--calls", type=int, default=1000000, help="kernel calls in all")
    ap.add_argument("--every", type=int, default=1000, help="print every this many kernels")
    a = ap.parse_args(argv)
    os.environ.setdefault("TW_PROGRESS", "0")  # compile progress lines would bury the table
    if not os.environ.get("TW_CACHE_DIR"):
        os.environ["TW_CACHE_DIR"] = tempfile.mkdtemp(prefix="tw-soak-")
    import tilewright as tw
    import tilewright.language as T

    @tw.jit(out_idx=[-1])
    def affine(a):
        @T.prim_func
        def soak(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    Y[i] = X[i] * a + 1.0
        return soak

    x = np.ones(64, np.float32)
    calls_per_kernel = max(1, a.calls // a.kernels)
    heap = heap_stats() is not None
    print(f"{'kernels':>8} {'calls':>9} {'RSS MiB':>8} {'maps':>6} {'fds':>4} {'loaded':>6}"
          + (f" {'heap MiB':>8} {'in use':>7}" if heap else "") + f" {'disk':>6} {'s':>7}", flush=True)
    t0 = time.monotonic()
    calls = 0
    for n in range(a.kernels):
        k = affine(float(n))
        for _ in range(calls_per_kernel):
            y = k(x)
            calls += 1
        assert y[0] == n + 1.0
        if (n + 1) % a.every == 0 or n + 1 == a.kernels:
            info = tw.cache_info()
            rss, maps, fds = stats()
            h = " {:>8.2f} {:>7.2f}".format(*heap_stats()) if heap else ""
            print(f"{n + 1:>8} {calls:>9} {rss:>8.1f} {maps:>6} {fds:>4} {info['memory']['loaded_kernels']:>6}{h} "
                  f"{info['disk']['entries']:>6} {time.monotonic() - t0:>7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
