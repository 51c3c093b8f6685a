"""Deployment benchmarks (docs/performance.md, "Deployment"): the C++ runtime's launch overhead
on a 16-float kernel and its resident memory over many launches, loading + verifying an artifact
of 10 kernels, and exporting the seed's matmul from a warm cache.

Usage: python bench/deploy.py [--launches N] [--quick]

Builds examples/cpp against the runtime installed from build/py (run `make build` first).
Kernels go to the usual disk cache (TW_CACHE_DIR), so a second run measures warm caches."""
import argparse
import importlib.util
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import tilewright as tw  # noqa: E402
import tilewright.language as T  # noqa: E402

M = T.symbolic("M")
TEN_KERNELS = "\n".join(f'''
@T.prim_func
def k{i}(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
    with T.Kernel(T.ceildiv(M, 16)) as bx:
        for i in T.Parallel(16):
            if bx * 16 + i < M:
                Y[bx * 16 + i] = X[bx * 16 + i] * {i + 1}.0
''' for i in range(10))


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=1_000_000, help="launches timed in the C++ consumer")
    ap.add_argument("--quick", action="store_true", help="10,000 launches and 3 repetitions (a smoke run)")
    ap.add_argument("--consumer", default=None, help="an already built examples/cpp consumer to use")
    a = ap.parse_args(argv)
    launches, reps = (10_000, 3) if a.quick else (a.launches, 7)
    work = pathlib.Path(tempfile.mkdtemp(prefix="tw-bench-deploy-"))
    consumer = a.consumer or load_module(ROOT / "examples" / "cpp" / "build.py",
                                         "tw_consumer_build").build_consumer(work / "c")

    # 10 kernels with 16-float inputs, exported into one library.
    (work / "ten.py").write_text("import tilewright.language as T\nM = T.symbolic('M')\n" + TEN_KERNELS)
    ten = load_module(work / "ten.py", "tw_bench_ten")
    kernels = [tw.compile(getattr(ten, f"k{i}"), out_idx=[-1]) for i in range(10)]
    tw.export(kernels, work / "ten", name="ten")
    x = np.arange(16, dtype=np.float32)
    np.save(work / "x.npy", x)
    np.save(work / "ref.npy", kernels[0](x))
    run = lambda *args: subprocess.run([str(consumer), str(work / "ten"), "k0", str(work / "ref.npy"),  # noqa: E731
                                        str(work / "x.npy"), *map(str, args)], capture_output=True, text=True)

    loads = []
    for _ in range(reps):
        r = run("--threads", 1, "--launches", 1)
        loads.append(float(re.search(r"load ([0-9.]+) ms", r.stdout).group(1)))
    r = run("--threads", 1, "--launches", 1, "--bench", launches)
    if r.returncode != 0:
        sys.exit(r.stderr)
    m = re.search(r"([0-9.]+) us per launch, rss (\d+) KiB -> (\d+) KiB", r.stdout)
    us, rss0, rss1 = float(m.group(1)), int(m.group(2)), int(m.group(3))

    seed = load_module(ROOT / "examples" / "seed_matmul.py", "tw_bench_seed")
    mm = seed.build(1024, 1024, 1024)
    tw.export(mm, work / "seed")  # the first export of these kernels may compile the library
    exports = []
    for _ in range(reps):
        t0 = time.perf_counter()
        tw.export(mm, work / "seed")
        exports.append((time.perf_counter() - t0) * 1e3)

    rows = [
        ("C++ launch overhead, 16-float kernel (run(inputs, outputs))", f"{us:.2f} us", "<= 2 us", us <= 2.0),
        (f"RSS of the consumer over {launches:,} launches", f"{rss0} -> {rss1} KiB", "flat",
         rss1 - rss0 <= 256),
        ("load + verify an artifact of 10 kernels (median)", f"{statistics.median(loads):.2f} ms", "<= 20 ms",
         statistics.median(loads) <= 20),
        ("export of the seed matmul from a warm cache (median)", f"{statistics.median(exports):.1f} ms",
         "<= 100 ms", statistics.median(exports) <= 100),
    ]
    print(f"Tilewright {tw.__version__}, {tw._C.num_threads()} threads, CPU features: {tw._C.cpu_features()}\n")
    print("| measurement | measured | goal | met |\n|---|---|---|---|")
    for name, value, goal, met in rows:
        print(f"| {name} | {value} | {goal} | {'yes' if met else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
