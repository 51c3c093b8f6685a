"""The matmul of the seed article (section 3.3), run on Tilewright and checked against numpy.

The article's code, with the fewest changes that make it well defined:

1. ``import tilewright as tw`` instead of ``tilelang``: this is Tilewright's API.
2. The kernel takes the input tensors, ``A: tw.Tensor((M, K), "float32")`` and
   ``B: tw.Tensor((K, N), "float32")``, instead of ``(M: int, N: int, K: int)``: the article calls
   ``matmul_kernel(a, b)`` with two arrays, and its loads name "A" and "B", which nothing defined.
3. ``tw.load(A, ...)`` takes the tensor parameter instead of the string ``"A"``, for the same reason.
4. ``range(tw.ceildiv(M, block_m))`` instead of ``range(M // block_m)``: with ``//`` a size that
   is not a multiple of the block silently drops the last rows/columns; ``ceildiv`` covers them and
   the loads/stores mask the tails. (For 8192 both are the same.)
5. The target is a command-line choice (default ``cpu``), as no NPU is attached here.
6. Inputs come from a fixed seed (the article's own advice in 5.3), and the result is checked
   against numpy: the script prints the max error and GFLOP/s and exits non-zero on a mismatch.

7. ``--dtype`` and ``--blocks`` choose the input dtype (the article's float32 by default;
   accumulation is always float32) and the block sizes (the article's 128/128/64 by default).
8. The kernel is defined inside ``build(M, N, K, ...)``, so the tests and the benchmarks compile
   this same kernel for other sizes, dtypes and targets.

On an Ascend target (``--target ascend910b``) the same kernel runs in Tilewright's simulator of
the chip: the script prints the simulated time and Cube utilisation (a model's figures), and the
wall time of compiling and simulating. Block-size tuning, as the article advises, matters there:
128x128 tiles are bound by the per-core GM read rate of the 910B (docs/performance.md);
``--blocks 128,256,64`` keeps the Cube busy.

Usage: python examples/seed_matmul.py [M [N [K]]] [--target cpu] [--dtype float32]
                                      [--blocks 128,128,64] [--repeat 3]
"""
import argparse
import sys
import time

import numpy as np

import tilewright as tw


def build(M, N, K, block_m=128, block_n=128, block_k=64, dtype="float32", target="cpu"):
    """The article's kernel for these sizes, block sizes, input dtype and target."""
    return tw.compile(kernel_function(M, N, K, block_m, block_n, block_k, dtype), target=target)


def kernel_function(M, N, K, block_m=128, block_n=128, block_k=64, dtype="float32"):
    """The article's kernel as a Python function (compiled by build() or tuned_matmul)."""

    def matmul_kernel(A: tw.Tensor((M, K), dtype), B: tw.Tensor((K, N), dtype)):
        # the output matrix, cut into block_m x block_n tiles
        out = tw.output((M, N), dtype=dtype)
        for by in range(tw.ceildiv(M, block_m)):
            for bx in range(tw.ceildiv(N, block_n)):
                # accumulate over K in block_k steps
                acc = tw.accumulator((block_m, block_n), dtype="float32")
                for k in range(tw.ceildiv(K, block_k)):
                    a_tile = tw.load(A, (by * block_m, k * block_k), (block_m, block_k))
                    b_tile = tw.load(B, (k * block_k, bx * block_n), (block_k, block_n))
                    acc += tw.matmul(a_tile, b_tile)
                tw.store(out, (by * block_m, bx * block_n), acc)
        return out

    return matmul_kernel


# The article's advice (tune the block sizes per chip) as a tuner: `tilewright tune
# examples/seed_matmul.py:tuned_matmul 1024 --target ascend910b` sweeps these configurations.
BLOCK_CONFIGS = [tw.Config(block_m=bm, block_n=bn, block_k=bk)
                 for bm, bn, bk in [(64, 64, 64), (128, 128, 64), (128, 256, 64), (256, 128, 64),
                                    (64, 256, 128), (128, 256, 128), (256, 256, 128), (32, 32, 32)]]


@tw.autotune(configs=BLOCK_CONFIGS, key=["M", "N", "K", "dtype"])
@tw.jit
def tuned_matmul(M, N=None, K=None, block_m=128, block_n=128, block_k=64, dtype="float32"):
    """The seed matmul with its block sizes chosen by tw.autotune (N and K default to M)."""
    return kernel_function(M, N or M, K or M, block_m, block_n, block_k, dtype)


def _positive(text):
    """An int >= 1 (--repeat 0 printed "nan ms"; --blocks 128,128 was a ValueError traceback)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def _blocks(text):
    parts = text.split(",")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"{text!r} is not three block sizes block_m,block_n,block_k (e.g. 128,128,64)")
    return tuple(_positive(p) for p in parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=_positive, help="M [N [K]] (default 8192 8192 8192)")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--blocks", default="128,128,64", type=_blocks, help="block_m,block_n,block_k")
    parser.add_argument("--repeat", type=_positive, default=3, help="timed runs after one warm-up (median reported)")
    opts = parser.parse_args(argv)
    sizes = (opts.sizes + [8192] * 3)[:3] if opts.sizes else [8192] * 3
    if len(opts.sizes) == 1:
        sizes = [opts.sizes[0]] * 3
    M, N, K = sizes
    block_m, block_n, block_k = opts.blocks
    dtype = opts.dtype
    simulated = opts.target.startswith("ascend")
    t_compile = time.perf_counter()
    matmul_kernel = build(M, N, K, block_m, block_n, block_k, dtype, opts.target)
    t_compile = time.perf_counter() - t_compile

    rng = tw.testing.rng(0)
    a = tw.testing.randn((M, K), dtype, seed=rng)
    b = tw.testing.randn((K, N), dtype, seed=rng)
    flops = 2.0 * M * N * K
    print(f"seed matmul {M}x{N}x{K} {dtype} on {opts.target} (blocks {block_m}/{block_n}/{block_k}"
          + (", simulated)" if simulated else f", {tw._C.num_threads()} threads)"))

    if simulated:
        t0 = time.perf_counter()
        prof = matmul_kernel.profile(a, b)  # arithmetic + the checker (raises on a report)
        t_sim = time.perf_counter() - t0
        result = prof.outputs
    else:
        result = matmul_kernel(a, b)  # warm-up (and the result we check)
        times = []
        for _ in range(opts.repeat):
            t0 = time.perf_counter()
            matmul_kernel(a, b)
            times.append(time.perf_counter() - t0)
        t = float(np.median(times)) if times else float("nan")

    t0 = time.perf_counter()
    # float64 when cheap; else float32 BLAS (exact products of 16-bit inputs, float32 sums)
    big = M * N * K > 2048**3
    ref = (a.astype(np.float32) @ b.astype(np.float32)) if big else (a.astype(np.float64) @ b.astype(np.float64))
    t_ref = time.perf_counter() - t0
    err = float(np.max(np.abs(result.astype(np.float64) - ref)))
    # fp32 sums of K products of N(0,1) values: stated bound 1e-6 * K + 1e-4 (absolute); a 16-bit
    # output adds its rounding (half an ulp: 2^-11 relative for float16, 2^-8 for bfloat16).
    tol = 1e-6 * K + 1e-4
    rel = {"float32": 0.0, "float16": 2.0**-11, "bfloat16": 2.0**-8}[dtype]
    mismatch = None
    try:
        tw.testing.assert_close(result, ref, atol=tol, rtol=rel, msg="seed matmul vs numpy")
    except AssertionError as e:
        mismatch = str(e)
    print(f"  max |tilewright - numpy| = {err:.3e}  (tolerance {tol:.1e} + {rel:.1e} * |ref|)")
    if simulated:
        print(f"  simulated : {prof['time_us']:9.2f} us  {prof['tflops']:8.1f} TFLOP/s  "
              f"Cube utilisation {prof['cube_utilisation'] * 100:.1f}%  (a model's figures, not a measurement)")
        print(f"  wall time : compile {t_compile:.2f} s, simulate {t_sim:.2f} s")
    else:
        print(f"  tilewright: {t * 1e3:9.2f} ms  {flops / t / 1e9:8.1f} GFLOP/s  (median of {opts.repeat})")
    print(f"  numpy     : {t_ref * 1e3:9.2f} ms  {flops / t_ref / 1e9:8.1f} GFLOP/s  (one run, reference)")
    if mismatch:
        print(mismatch, file=sys.stderr)
        print("MISMATCH", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
