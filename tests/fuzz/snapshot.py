"""The refactor's equality check: writes what the compiler produces for N fuzz programs (the
generated cpu C++, the AscendC kernel, the lowered Ascend program and the simulated cycles of a
timing-only run) into OUTDIR, one folder per program. Take a snapshot before a refactor and one
after it; `diff -r BEFORE AFTER` must be empty when the refactor claims unchanged output.

    python tests/fuzz/snapshot.py OUTDIR [N] [--seed S] [--stream llm|llm2|skip|wide]

Programs come from the differential fuzzer's grammar (tests/python/fuzz), seeds S..S+N-1, or
from one of its streams (the fuzzer's --stream). A
program a target rejects records the error text instead (the message is part of the output too).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from fuzz import grammar, llm, llm2, reference, runner, skip, wide  # noqa: E402


def snapshot_one(d, compiled):
    import tilewright as tw
    files = {}
    for target in runner.TARGETS:
        tag = "cpu" if target == "cpu" else "ascend"
        try:
            kernel = compiled.get(d, target)
            if target == "cpu":
                files["cpu.cpp"] = kernel.get_source("c++")
                continue
            files["ascendc.cpp"] = kernel.get_source("ascendc")
            files["program.txt"] = kernel.get_source("ascend_program")
            prof = kernel.profile(*reference.inputs(d), functional=False)
            files["cycles.txt"] = f"{prof['total_cycles']}\n" + "".join(
                r + "\n" for r in prof["reports"])
        except tw.TilewrightError as e:
            files[f"{tag}.error"] = f"{type(e).__name__}: {e}\n"
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("n", type=int, nargs="?", default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stream", choices=("all", "llm", "llm2", "skip", "wide"), default="all")
    args = ap.parse_args()
    gen = {"llm": llm.generate, "llm2": llm2.generate, "skip": skip.generate,
           "wide": wide.generate}.get(args.stream, grammar.generate)
    compiled = runner.Compiled()
    for i in range(args.seed, args.seed + args.n):
        d = gen(i)
        folder = os.path.join(args.outdir, f"{i:06d}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "kernel.py"), "w") as f:
            f.write(grammar.source(d))
        for name, text in snapshot_one(d, compiled).items():
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
    print(f"{args.n} programs written to {args.outdir}")


if __name__ == "__main__":
    main()
