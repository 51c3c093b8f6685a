"""The fuzzer's command line (``make fuzz``): run N programs from a seed on `jobs` workers, print
the counts and every failure reduced to a minimal kernel.

    cd tests/python && ../../.venv/bin/python -m fuzz -n 10000 --seed 0 --jobs 2

Exit status 1 when a failure is not explained by the known-bugs table (fuzz/known.py).
"""
import argparse
import sys
import time
from collections import Counter, defaultdict

from . import chain, grammar, hunt, idiom, llm, llm2, reducer, runner, scal, skip, wide


def describe(d, result, reduced=None, runs=0):
    """The text of one failure: seed, status, message and the (reduced) kernel's source."""
    lines = [f"--- seed {d['seed']}: {result['status']} on {result['target']}",
             "    " + (result["detail"] or "").strip().replace("\n", "\n    ")[:1500]]
    shown = reduced or d
    if reduced is not None:
        lines.append(f"    reduced in {runs} runs to (description {shown}):")
    else:
        lines.append(f"    description {shown}:")
    lines.append(grammar.source(shown).rstrip())
    return "\n".join(lines)


def report(descs, results, reduce=True, budget=60, max_reduce=20, timeout=120.0, out=sys.stdout):
    """Prints the counts and the failures; returns the number of unexpected failures."""
    counts = Counter(r["status"] for r in results.values())
    known_hits = Counter(r["known"] for r in results.values() if r["status"] == "known")
    skipped = Counter(name for r in results.values() for name in r.get("skipped", {}).values())
    print(f"programs {len(results)}  ok {counts['ok']}  disagreements {counts['mismatch']}  "
          f"checker reports {counts['checker']}  errors {counts['error']}  crashes {counts['crash']}  "
          f"hangs {counts['hang']}  known bugs {counts['known']}", file=out)
    if known_hits or skipped:
        print("known bugs hit: " + ", ".join(f"{k} {v}" for k, v in sorted(known_hits.items())) +
              ("; skipped (target not run): " + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items()))
               if skipped else ""), file=out)
    groups = defaultdict(list)
    for i, r in sorted(results.items()):
        if r["status"] in runner.FAILURES:
            groups[runner.signature(r)].append(i)
    with runner.Isolated(timeout) as iso:
        for n, (sig, idx) in enumerate(groups.items()):
            d, r = descs[idx[0]], results[idx[0]]
            print(f"\n=== failure {n + 1}/{len(groups)}: {sig[0]} on {sig[1]}, {len(idx)} program(s), seeds "
                  + " ".join(str(descs[i]["seed"]) for i in idx[:30]) + (" ..." if len(idx) > 30 else ""), file=out)
            if reduce and n < max_reduce:
                small, runs = reducer.reduce(d, r, iso.run, budget)
                print(describe(d, r, small, runs), file=out)
            else:
                print(describe(d, r), file=out)
            out.flush()
    return sum(len(v) for v in groups.values())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10000, help="number of programs (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per program before a hang")
    ap.add_argument("--no-reduce", action="store_true", help="print failures without reducing them")
    ap.add_argument("--budget", type=int, default=60, help="runs per reduction")
    ap.add_argument("--stream", choices=("all", "llm", "llm2", "skip", "wide", "idiom", "hunt", "chain", "scal"), default="all",
                    help="all: the whole grammar; llm: only the sixteenth stream's LLM-kernel forms; "
                         "llm2: only the seventeenth's (combine, gqa, norm, topk, cumsum); "
                         "skip: only the eighteenth's (skipped work: fuzz/skip.py); "
                         "wide: only the nineteenth's (tiles past the UB: fuzz/wide.py); "
                         "idiom: only the twentieth's (session 32's idioms: fuzz/idiom.py); "
                         "hunt: only the twenty-first's (session 36: int32 hashes, outputs only T.atomic_add "
                         "writes, masks from index tensors: fuzz/hunt.py); "
                         "chain: only the twenty-second's (session 37: gemm chains through a Cube accumulator "
                         "copied into an operand, int32 products ranged from int8 / uint8 loads, T.pow: fuzz/chain.py); "
                         "scal: only the twenty-third's (session 38: scalar math in lets / ifs / loop extents "
                         "mixed with maps, T.unroll with ifs on the variable, stores under data-dependent ifs: "
                         "fuzz/scal.py)")
    ap.add_argument("--max-reduce", type=int, default=20, help="distinct failures to reduce")
    args = ap.parse_args(argv)
    gen = {"llm": llm.generate, "llm2": llm2.generate, "skip": skip.generate,
           "wide": wide.generate, "idiom": idiom.generate, "hunt": hunt.generate,
           "chain": chain.generate, "scal": scal.generate}.get(args.stream, grammar.generate)
    descs = [gen(s) for s in range(args.seed, args.seed + args.n)]
    start = time.monotonic()
    done = [0]

    def progress(key, req, res):
        done[0] += 1
        if res["status"] in runner.FAILURES:
            print(f"seed {req['desc']['seed']}: {res['status']} on {res['target']}", flush=True)
        if done[0] % 200 == 0:
            print(f"[{done[0]}/{args.n} programs, {time.monotonic() - start:.0f} s]", flush=True)

    results = runner.run_programs(descs, jobs=args.jobs, timeout=args.timeout, on_result=progress)
    print(f"\n{args.n} programs from seed {args.seed} in {time.monotonic() - start:.0f} s on {args.jobs} workers")
    bad = report(descs, results, reduce=not args.no_reduce, budget=args.budget, max_reduce=args.max_reduce,
                 timeout=args.timeout)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
