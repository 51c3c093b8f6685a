#!/usr/bin/env python3
"""Side-by-side timing of paged decode variants (bench/run.py's paged_decode case: the generated
`paged_decode_pages` kernel of examples/paged_attention.py) against a page-read probe and a plain
streaming read of the same bytes, on 1 or 2 threads, in one process.

    python bench/paged_decode_ab.py main=/tmp/main/include new=src/target/cpu/include \
        --dtype bfloat16 --threads 2 --rounds 12 --pages cold
    python bench/paged_decode_ab.py base=src/target/cpu/include edited=src/target/cpu/include@/tmp/k.cpp

A variant is name=INCLUDE_DIR (one holding tw_cpu/gemm_impl.h and gemm_runtime.cpp: its gemm
runtime) with, after @, a kernel source to use instead of the one this tilewright generates (an
edited copy of it: `--dump PATH` writes the generated one), or one of the deletion probes of the
generated kernel (timing only: their outputs are wrong): @-qk (no Q K^T gemm calls), @-pv (no
P V calls), @-passes (none of the score / softmax passes between them), @-next (no next page's
strip passed to the calls: nothing prefetched), e.g.

    python bench/paged_decode_ab.py k=src/target/cpu/include k-qk=src/target/cpu/include@-qk \
        k-pv=src/target/cpu/include@-pv --pages hot Each is compiled with the runtime's
flags (-O3 -march=ARCH, 512-bit vectors on AVX-512) into one shared library; bench/paged_decode_ab.cpp
loads them all and times them round by round, alternating, beside the two read probes (see its
header: threads released together by a spin barrier, wall and per-thread CPU time, start skew and
end gap). --pages cold (a shuffled block table over all pages, the L3 flushed between calls), hot
(every page number in 0-3: the arithmetic's ceiling), seq (the pages in memory order) or sorted (cold's pages, each sequence's in ascending memory order). On a loaded
machine wall time is time slicing: read the CPU times (each thread's) and the per-round ratios.
The harness reads with AVX-512 vectors: an AVX-512 host (the variants may still be built for
--march x86-64-v3). docs/performance.md "Issue 13, CPU" (sessions 17-20) has what it measured.
"""
import argparse
import fcntl
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TMP = Path(tempfile.gettempdir())  # TMPDIR, or /tmp: the built libraries, kept across runs (keyed by content)
SHAPE = (8, 32, 8, 128, 16, 4096)  # sequences, heads, kv heads, head dim, page, context (the .cpp's)


def kernel_source(dtype):
    sys.path.insert(0, str(ROOT / "examples"))
    import paged_attention as pa
    ns, nh, kvh, d, bs, ctx = SHAPE
    mb = ctx // bs
    return pa.paged_decode_pages(ns, nh, kvh, d, ns * mb + 3, bs, mb, dtype).get_kernel_source()


def strip(src, what):
    """The generated kernel source without its Q K^T calls (qk), P V calls (pv), the passes between
    them (passes) or the next page's strip (next): the deletion probes of the docstring."""
    qk = re.search(r"\n\s*tw_cpu::gemm\(\w+, \w+, \d+, \(q_p.*\n", src)
    pv = re.search(r"\n\s*tw_cpu::gemm\(\w+, \w+, \d+, \([ps] \+.*\n", src)
    if not qk or not pv:
        sys.exit("the generated kernel's gemm calls were not found: update strip()")
    if what == "qk":
        return src.replace(qk.group(0), "\n")
    if what == "pv":
        return src.replace(pv.group(0), "\n")
    if what == "passes":  # from the first pass after the Q K^T loop to the P V loop
        a = src.index("\n", src.index("for (int64_t i = 0;", qk.end()))
        a = src.rindex("\n", 0, a - 1)
        b = src.rindex("\n", 0, src.index("for (int64_t jj_1 = 0;"))
        return src[:a] + src[b:]
    if what == "next":
        return re.sub(r"/\*next_b=\*/\w+ \? [^:]+ : nullptr", "/*next_b=*/(decltype(K))nullptr", src)
    sys.exit(f"unknown deletion probe -{what}: -qk, -pv, -passes or -next")


def _built(out, cmd):
    """`out`, made by the compiler command `cmd` (less its -o) unless it exists: under a lock, into a
    temporary name renamed in place, so processes that need the same file at once (two tests on
    xdist workers, two people's runs) compile it once and never load a half-written one."""
    with open(f"{out}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
            subprocess.run([*cmd, "-o", str(tmp)], check=True)
            os.replace(tmp, out)
    return out


def _written(stem, text):
    """`text` in TMP/<stem>_<its hash>.cpp (a file per content: concurrent runs never rewrite one
    another's source under the compiler)."""
    path = TMP / f"{stem}_{hashlib.sha256(text.encode()).hexdigest()[:16]}.cpp"
    if not path.exists():
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def build(inc, src, march):
    flags = ["-O3", f"-march={march}", "-std=c++20", "-fPIC", "-fno-plt"]
    if march != "x86-64-v3":
        flags.append("-mprefer-vector-width=512")
    runtime = Path(inc, "tw_cpu", "gemm_runtime.cpp")
    headers = b"".join(p.read_bytes() for p in sorted(Path(inc, "tw_cpu").glob("*")))
    # The gemm runtime (~20 CPU-s of g++) is compiled once per include dir and flags, whatever the
    # kernel: the dtypes' and the probes' libraries link the same object.
    rt = _built(TMP / f"tw_paged_decode_ab_rt_{hashlib.sha256(headers + ' '.join(flags).encode()).hexdigest()[:16]}.o",
                ["g++", *flags, f"-I{inc}", "-c", str(runtime)])
    key = hashlib.sha256(src.read_bytes() + headers + " ".join(flags).encode()).hexdigest()[:16]
    return _built(TMP / f"tw_paged_decode_ab_{key}.so", ["g++", *flags, "-shared", f"-I{inc}", str(src), str(rt)])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*", help="name=include_dir[@kernel_source.cpp]")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--threads", type=int, default=1, choices=[1, 2])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--pages", default="cold", choices=["cold", "hot", "seq", "sorted"])
    ap.add_argument("--march", default="native")
    ap.add_argument("--dump", help="write the generated kernel source here and stop")
    opts = ap.parse_args()
    generated = kernel_source(opts.dtype)
    if opts.dump:
        Path(opts.dump).write_text(generated)
        return
    if not opts.variants:
        ap.error("name at least one variant (name=include_dir)")
    src = _written(f"tw_paged_decode_ab_{opts.dtype}", generated)
    libs = []
    for v in opts.variants:
        name, _, rest = v.partition("=")
        inc, _, ksrc = rest.partition("@")
        if not name or not Path(inc, "tw_cpu", "gemm_impl.h").exists():
            ap.error(f"{v}: expected name=include_dir with tw_cpu/gemm_impl.h in it")
        if ksrc.startswith("-"):
            ksrc = str(_written(f"tw_paged_decode_ab_{opts.dtype}{ksrc}", strip(generated, ksrc[1:])))
        libs.append(str(build(inc, Path(ksrc) if ksrc else src, opts.march)))
    harness = HERE / "paged_decode_ab.cpp"
    key = hashlib.sha256(harness.read_bytes() + b"".join(
        p.read_bytes() for p in sorted((ROOT / "src/target/cpu/include/tw_cpu").glob("*")))).hexdigest()[:16]
    exe = _built(TMP / f"tw_paged_decode_ab_{key}", ["g++", "-O2", "-march=native", "-std=c++20",
                 f"-I{ROOT / 'src/target/cpu/include'}", str(harness), "-ldl", "-lpthread"])
    es = "4" if opts.dtype == "float32" else "2"
    print("variants: " + ", ".join(f"{v.partition('=')[0]} = {lib}" for v, lib in zip(opts.variants, libs)))
    subprocess.run([str(exe), es, str(opts.threads), str(opts.rounds), opts.pages, *libs], check=True)


if __name__ == "__main__":
    main()
