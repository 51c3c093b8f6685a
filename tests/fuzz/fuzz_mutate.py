"""Mutation fuzzer of the front end, the compiler and the runtime.

Each mutant is an example kernel (examples/*.py) with a few random mutations of its
``@T.prim_func`` body's AST (constants, operators, names, dtypes, loop kinds, arguments, deleted or
duplicated statements). It is compiled and run, on small inputs, in a child process with a
timeout, for the cpu target or the Ascend 910B simulator. Every outcome must be one of:

  ok           the mutant compiled and ran (its numbers may be wrong: that is the mutation);
  error        a TilewrightError that names a source line, or another exception raised by the
               example's own code (a NameError of a deleted variable, numpy's checks);

and never one of the failures it counts and prints with a reproducer:

  signal       the child died by a signal (SIGSEGV, SIGFPE, SIGILL, SIGABRT, ...);
  hang         it ran past the timeout (extended while the child and its compiler are runnable
               but starved of CPU on a loaded machine, up to 10 x the timeout);
  internal     a non-Tilewright exception raised inside tilewright (TypeError from the binding,
               RecursionError, MemoryError, ...);
  unlocated    a TilewrightError without a source line, for an error in the kernel's source.

Usage: python tests/fuzz/fuzz_mutate.py [--seed S] [--count N] [--targets cpu,ascend910b]
                                        [--jobs J] [--timeout T] [--keep DIR] [--progress P]
Exit status 1 when any failure was found (or when interrupted: SIGINT or SIGTERM prints the counts
of the mutants that finished). `make fuzz-mutate` runs 10,000 mutants; the test suite
runs a fixed-seed corpus (tests/python/test_fuzz_mutate.py).
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures
import copy
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from fuzz.runner import tree_cpu_seconds  # noqa: E402 - the differential fuzzer's starvation probe

# example -> (its check() call on small inputs, targets it supports)
CASES = {
    "softmax": ("check(13, 40)", ("cpu", "ascend910b")),
    "rms_norm": ("check(13, 40)", ("cpu", "ascend910b")),
    "layer_norm": ("check(13, 40)", ("cpu", "ascend910b")),
    "gelu_bias": ("check(20, 24, 16)", ("cpu", "ascend910b")),
    "gemm": ("check(20, 24, 16, 'float16')", ("cpu", "ascend910b")),
    "flash_attention": ("check(1, 1, 24, 16, True)", ("cpu", "ascend910b")),
}

INTS = [0, 1, -1, 2, 3, 7, 8, 16, 31, 128, 1 << 20, 2 ** 31, 2 ** 63, -(2 ** 63), 10 ** 6]
DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool", "complex64", ""]
BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow]
T_FUNCS = ["exp", "log", "sqrt", "max", "min", "abs", "Parallel", "serial", "unroll", "Pipelined", "copy",
           "fill", "clear", "gemm", "reduce_sum", "reduce_max", "alloc_fragment", "alloc_shared", "ceildiv",
           "if_then_else", "cast", "symbolic", "Kernel"]

# The child: patches tw.jit's default target, imports the mutant, runs its check(), reports.
CHILD = r'''
import json, os, sys, traceback
sys.path.insert(0, sys.argv[3])
import tilewright as tw
from tilewright import TilewrightError
_jit = tw.jit
def jit(fn=None, **kw):
    kw["target"] = sys.argv[2]
    return _jit(fn, **kw)
tw.jit = jit
import importlib.util
PKG = os.path.dirname(tw.__file__)
def report(kind, **kw):
    print("FUZZ-RESULT " + json.dumps(dict(kind=kind, **kw)), flush=True)
try:
    spec = importlib.util.spec_from_file_location("mutant", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    eval(sys.argv[4], vars(mod))
    report("ok")
except TilewrightError as e:
    report("error" if e.line > 0 else "unlocated", msg=str(e)[:2000])
except BaseException as e:  # noqa: BLE001
    tb = traceback.extract_tb(e.__traceback__)
    # Raised inside tilewright (the innermost frame is in the package): a leak. Raised by the
    # example's own code, or by Python calling a tilewright function with the wrong arguments
    # (innermost frame: the user's), it is the mutation's doing, located by Python itself.
    inside = bool(tb) and tb[-1].filename.startswith(PKG)
    report("internal" if inside else "error", msg=f"{type(e).__name__}: {e}"[:2000],
           tb="".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:])
'''


def prim_func_defs(tree):
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
                (isinstance(d, ast.Attribute) and d.attr == "prim_func") for d in node.decorator_list):
            out.append(node)
    return out


class Mutator:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def mutate(self, fdef: ast.FunctionDef):
        nodes = [n for n in ast.walk(fdef) if n is not fdef]
        names = sorted({n.id for n in nodes if isinstance(n, ast.Name)})
        for _ in range(self.rng.choice([1, 1, 1, 2, 3])):
            kinds = [self.mut_const, self.mut_binop, self.mut_name, self.mut_call, self.mut_stmt, self.mut_attr,
                     self.mut_compare, self.mut_nest]
            self.rng.choice(kinds)(fdef, names)

    def pick(self, fdef, cls, pred=lambda n: True):
        cands = [n for n in ast.walk(fdef) if isinstance(n, cls) and n is not fdef and pred(n)]
        return self.rng.choice(cands) if cands else None

    def mut_const(self, fdef, names):
        n = self.pick(fdef, ast.Constant)
        if n is None:
            return
        if isinstance(n.value, str):
            n.value = self.rng.choice(DTYPES)
        elif isinstance(n.value, bool):
            n.value = not n.value
        elif isinstance(n.value, int):
            n.value = self.rng.choice(INTS + [n.value + 1, n.value - 1, n.value * 2, -n.value])
        elif isinstance(n.value, float):
            n.value = self.rng.choice([0.0, -0.0, float("inf"), float("nan"), 1e300, -1.5, 2 ** 64 * 1.0])

    def mut_binop(self, fdef, names):
        n = self.pick(fdef, (ast.BinOp, ast.AugAssign))
        if n is not None:
            n.op = self.rng.choice(BINOPS)()

    def mut_compare(self, fdef, names):
        n = self.pick(fdef, ast.Compare)
        if n is not None:
            n.ops = [self.rng.choice([ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq])() for _ in n.ops]

    def mut_name(self, fdef, names):
        n = self.pick(fdef, ast.Name, lambda x: isinstance(x.ctx, ast.Load))
        if n is not None and names:
            n.id = self.rng.choice(names + ["T", "undefined_name", "range", "len"])

    def mut_attr(self, fdef, names):
        n = self.pick(fdef, ast.Attribute, lambda x: isinstance(x.value, ast.Name) and x.value.id == "T")
        if n is not None:
            n.attr = self.rng.choice(T_FUNCS)

    def mut_call(self, fdef, names):
        n = self.pick(fdef, ast.Call)
        if n is None:
            return
        r = self.rng.random()
        if len(n.args) >= 2 and r < 0.4:
            i, j = self.rng.sample(range(len(n.args)), 2)
            n.args[i], n.args[j] = n.args[j], n.args[i]
        elif n.args and r < 0.6:
            del n.args[self.rng.randrange(len(n.args))]
        elif n.args and r < 0.8:
            n.args.append(copy.deepcopy(self.rng.choice(n.args)))
        elif n.keywords:
            kw = self.rng.choice(n.keywords)
            kw.value = ast.Constant(self.rng.choice(INTS + ["float32", None]))

    def mut_stmt(self, fdef, names):
        bodies = [n for n in ast.walk(fdef) if hasattr(n, "body") and isinstance(n.body, list) and n.body]
        body = self.rng.choice(bodies).body
        i = self.rng.randrange(len(body))
        r = self.rng.random()
        if r < 0.4 and len(body) > 1:
            del body[i]
        elif r < 0.7:
            body.insert(i, copy.deepcopy(body[i]))
        else:
            j = self.rng.randrange(len(body))
            body[i], body[j] = body[j], body[i]

    def mut_nest(self, fdef, names):
        n = self.pick(fdef, ast.expr, lambda x: isinstance(x, (ast.BinOp, ast.Subscript, ast.Name)))
        if n is None or not names:
            return
        # Wrap an expression in a deeper one: x -> (x op x) ... several levels.
        inner = copy.deepcopy(n)
        for _ in range(self.rng.choice([1, 2, 5, 50])):
            inner = ast.BinOp(inner, self.rng.choice(BINOPS)(), copy.deepcopy(n))
        for field, value in ast.iter_fields(n):
            setattr(n, field, value)
        parent = [p for p in ast.walk(fdef) for f, v in ast.iter_fields(p) if v is n or (isinstance(v, list) and n in v)]
        if parent:
            p = parent[0]
            for f, v in ast.iter_fields(p):
                if v is n:
                    setattr(p, f, inner)
                elif isinstance(v, list) and n in v:
                    v[v.index(n)] = inner


def make_mutant(example: str, seed: int) -> str | None:
    rng = random.Random(seed)
    with open(os.path.join(EXAMPLES, example + ".py")) as f:
        tree = ast.parse(f.read())
    defs = prim_func_defs(tree)
    if not defs:
        return None
    Mutator(rng).mutate(rng.choice(defs))
    ast.fix_missing_locations(tree)
    try:
        return ast.unparse(tree)
    except Exception:  # noqa: BLE001 - an unprintable mutant is skipped
        return None


_RUNNING = set()  # the children running now (killed when a campaign is interrupted)


def run_one(example, target, seed, timeout, workdir, cache_dir):
    src = make_mutant(example, seed)
    if src is None:
        return {"kind": "skipped"}
    path = os.path.join(workdir, f"mutant_{example}_{target}_{seed}.py")
    with open(path, "w") as f:
        f.write(src)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_CACHE_DIR": cache_dir, "TW_NUM_THREADS": "1"})
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", CHILD, path, target, EXAMPLES, CASES[example][0]], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    _RUNNING.add(p)
    deadline = t0 + timeout
    try:
        while True:
            try:
                stdout, stderr = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                cpu, runnable = tree_cpu_seconds(p.pid)
                if runnable and cpu < 0.5 * (now - t0) and now < t0 + 10 * timeout:  # starved, not hung
                    deadline = min(now + timeout, t0 + 10 * timeout)
                    continue
                kill_tree(p)
                p.communicate()
                return {"kind": "hang", "path": path, "seconds": round(now - t0, 1), "cpu_seconds": round(cpu, 1)}
    finally:
        _RUNNING.discard(p)
    result = {"kind": "signal", "signal": -p.returncode} if p.returncode < 0 else None
    if result is None:
        lines = [ln for ln in stdout.splitlines() if ln.startswith("FUZZ-RESULT ")]
        # No report: the example itself exited (sys.exit in its code) - not a failure.
        result = json.loads(lines[-1][len("FUZZ-RESULT "):]) if lines else {"kind": "error", "msg": "exited"}
    result.update({"path": path, "seconds": round(time.monotonic() - t0, 2)})
    if result["kind"] in ("ok", "error", "skipped"):
        os.unlink(path)
    else:
        result["stderr"] = stderr[-3000:]
    return result


FAILURES = ("signal", "hang", "internal", "unlocated")


def kill_tree(p):
    """Kills child `p` and its compiler (its own session); its thread reaps it."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def fuzz(seed=0, count=100, targets=("cpu", "ascend910b"), jobs=2, timeout=120.0, keep=None, cache_dir=None,
         log=print, progress=0):
    """Runs `count` mutants (deterministic for a seed); returns {kind: count} and the failures.
    `progress` > 0 logs the counts and the rate every that many mutants. Interrupted (SIGINT), it
    stops starting mutants and returns what finished; counts["interrupted"] is then set."""
    workdir = keep or tempfile.mkdtemp(prefix="tw-fuzz-")
    os.makedirs(workdir, exist_ok=True)
    cache_dir = cache_dir or os.path.join(workdir, "cache")
    rng = random.Random(seed)
    plan = []
    for _ in range(count):
        example = rng.choice(sorted(CASES))
        target = rng.choice([t for t in targets if t in CASES[example][1]])
        plan.append((example, target, rng.randrange(1 << 30)))
    counts, failures = {}, []
    t0 = time.monotonic()
    pool = concurrent.futures.ThreadPoolExecutor(jobs)
    try:
        futs = [pool.submit(run_one, e, t, s, timeout, workdir, cache_dir) for e, t, s in plan]
        for n, ((e, t, s), fut) in enumerate(zip(plan, futs), 1):
            r = fut.result()
            counts[r["kind"]] = counts.get(r["kind"], 0) + 1
            if r["kind"] in FAILURES:
                r.update({"example": e, "target": t, "seed": s})
                failures.append(r)
                log(f"FAIL {r['kind']}: {e} {t} seed={s} -> {r.get('path')}\n  {r.get('msg', r.get('signal', ''))}")
            if progress and n % progress == 0:
                dt = time.monotonic() - t0
                log(f"{n}/{count} mutants in {dt:.0f} s ({n / dt:.2f}/s): {json.dumps(counts, sort_keys=True)}")
    except KeyboardInterrupt:
        counts["interrupted"] = 1
        log("interrupted: the counts are those of the mutants that finished")
        pool.shutdown(wait=False, cancel_futures=True)
        for p in list(_RUNNING):
            kill_tree(p)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return counts, failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--targets", default="cpu,ascend910b")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--keep", help="directory for mutants (failing ones are kept there)")
    ap.add_argument("--progress", type=int, default=200, help="print the counts every this many mutants (0: never)")
    a = ap.parse_args(argv)

    def stop(signum, frame):  # also when started in the background, where SIGINT is ignored
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    t0 = time.monotonic()
    counts, failures = fuzz(a.seed, a.count, tuple(a.targets.split(",")), a.jobs, a.timeout, a.keep,
                            log=lambda m: print(m, flush=True), progress=a.progress)
    done = sum(v for k, v in counts.items() if k != "interrupted")
    print(json.dumps({"mutants": done, "outcomes": counts, "failures": len(failures),
                      "seconds": round(time.monotonic() - t0, 1)}))
    return 1 if failures or "interrupted" in counts else 0


if __name__ == "__main__":
    sys.exit(main())
