#!/usr/bin/env python3
"""printer37's sweep (issue 13, "the printer makes no decision the simulator did not see"), run by hand:
every kernel compiled for an Ascend target is also printed as AscendC, and every error of the printing
(or of any other step after the Ascend program is final) is recorded, with the kernel and the test or
script that compiled it. Two ways to drive it, from tests/python:

    # a pytest plugin over any test files (the simulation is skipped: compiling and printing is the sweep)
    PRINTER37_OUT=/tmp/p37.jsonl ../../.venv/bin/python -m pytest -q -p printer37_sweep -p no:cacheprovider \\
        test_port35_s35.py test_port36_s36.py ...
    # any script (the fuzz streams, hunt35_sweep.py, the port kernels' probes), simulation kept
    PRINTER37_OUT=/tmp/p37.jsonl ../../.venv/bin/python printer37_sweep.py -m fuzz -n 100 --seed 37000
    PRINTER37_OUT=/tmp/p37.jsonl ../../.venv/bin/python printer37_sweep.py hunt35_sweep.py --seed 37000
    PRINTER37_OUT=/tmp/p37.jsonl ../../.venv/bin/python printer37_sweep.py --ports   # port33-36's tables, compiled only
    ../../.venv/bin/python printer37_sweep.py --summary /tmp/p37.jsonl   # the distinct errors, counted

PRINTER37_SIM=1 keeps the simulation in the pytest mode too (slower; the tests then run as usual).
In the pytest mode a test stops at its first simulated call, so the kernels it would compile after that one
are not swept. Since h-printer37 every Ascend compile prints the AscendC (AscendExecutable): a printer error
is the compile's own error, so with this build the sweep records only successes and the failures are the
tests' (or the fuzzer's) errors; --ports lists the compile errors it meets.
One JSON line per printed kernel: {"where", "kernel", "target", "ok", "error"}.
"""

import json
import os
import runpy
import sys
from collections import Counter

import tilewright  # noqa: F401

_jit = sys.modules["tilewright.jit"]  # the package's `jit` attribute is the decorator

_OUT = os.environ.get("PRINTER37_OUT", "/tmp/printer37.jsonl")
_orig_build = _jit._build


def _where():
    return os.environ.get("PYTEST_CURRENT_TEST", " ".join(sys.argv[:3])).split(" (")[0]


def _record(kernel):
    if not kernel.target.startswith("ascend"):
        return
    rec = {"where": _where(), "kernel": kernel.name, "target": kernel.target, "ok": True, "error": ""}
    try:
        kernel._exe.ascendc_files()
    except Exception as e:  # noqa: BLE001 - every failure is a finding
        rec["ok"], rec["error"] = False, f"{type(e).__name__}: {e}"
    with open(_OUT, "a") as f:
        f.write(json.dumps(rec) + "\n")


def _build(*args, **kwargs):
    k = _orig_build(*args, **kwargs)
    _record(k)
    return k


def install(skip_simulation=False):
    _jit._build = _build
    if skip_simulation:
        import pytest

        def skip(self, *a, **kw):
            if self._simulated:
                pytest.skip("printer37 sweep: compiled and printed, not simulated")
            return _call(self, *a, **kw)

        _call, _jit.Kernel.__call__ = _jit.Kernel.__call__, skip
        _jit.Kernel.profile = lambda self, *a, **kw: pytest.skip("printer37 sweep: not simulated")


def pytest_configure(config):  # the plugin's entry (-p printer37_sweep)
    install(skip_simulation=os.environ.get("PRINTER37_SIM") != "1")


def summary(path):
    recs = [json.loads(x) for x in open(path)]
    bad = [r for r in recs if not r["ok"]]
    print(f"{len(recs)} kernels printed, {len(bad)} failed")
    by = Counter(r["error"].split("\n")[0] for r in bad)
    for err, n in by.most_common():
        ks = sorted({r["kernel"] for r in bad if r["error"].split("\n")[0] == err})
        ws = sorted({r["where"] for r in bad if r["error"].split("\n")[0] == err})
        print(f"{n:5d}  {err}\n       kernels: {', '.join(ks[:12])}\n       e.g. {ws[0]}")


def ports():
    """Every case of the port33-36 kernel tables (each dtype and shape), compiled for ascend910b (and so
    printed): a compile error is the case's documented refusal, not a finding; counted."""
    import numpy as np
    import port33_kernels as P33
    import port34_kernels as P34
    import port35_kernels as P35
    import port36_kernels as P36
    refused = 0
    for mod in (P33, P34, P35, P36):
        for name, (make, dts, shapes) in mod.CASES.items():
            for dt in dts:
                for shape in shapes:
                    os.environ["PYTEST_CURRENT_TEST"] = f"{mod.__name__} {name} {dt} {shape}"
                    try:
                        fac, args = make(dt, shape, np.random.default_rng(0))[:2]
                        if fac == "tileloop":
                            _jit._build(args[0](*args[1:]), "ascend910b", None)
                        else:
                            fac(*args, target="ascend910b")
                    except Exception as e:  # noqa: BLE001
                        refused += 1
                        print(f"refused at compile: {mod.__name__} {name} {dt} {shape}: {str(e).splitlines()[0]}")
    print(f"{refused} cases refused at compile")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summary(sys.argv[2])
        sys.exit(0)
    if sys.argv[1:2] == ["--ports"]:
        install()
        ports()
        sys.exit(0)
    install()
    # worker subprocesses (the fuzz runner's) install the patch too: a sitecustomize on their path
    site = os.path.join(os.environ.get("TMPDIR", "/tmp"), "printer37_site")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write("import printer37_sweep\nprinter37_sweep.install()\n")
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join([site, here] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    os.environ["PRINTER37_OUT"] = os.path.abspath(_OUT)
    if sys.argv[1] == "-m":
        mod, sys.argv = sys.argv[2], [sys.argv[2]] + sys.argv[3:]
        runpy.run_module(mod, run_name="__main__", alter_sys=True)
    else:
        script, sys.argv = sys.argv[1], sys.argv[1:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")
