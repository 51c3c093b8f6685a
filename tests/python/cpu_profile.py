"""CPU seconds per test, for CI-time work on a loaded machine (docs/testing.md, "Session 33: CI
time"): `PYTHONPATH=tests/python .venv/bin/python -m pytest -n 2 -p cpu_profile --cpu-profile=DIR
tests/python` (from the repository root) appends a line per test to DIR/<xdist worker>.tsv: node id, the worker's own CPU
seconds (every thread: the simulator, the cpu kernels), its waited-for children's (the g++ compiles
of cpu kernels, child processes), wall seconds, end time. Wall times rank tests poorly when other
processes share the cores (10-25x a test's CPU time here); CPU seconds do not. Not part of
`make test`.

    sort -t$'\\t' -k3 -rn DIR/*.tsv | head      # the tests whose children cost most
"""
import os
import resource
import time

import pytest


def pytest_addoption(parser):
    parser.addoption("--cpu-profile", metavar="DIR", default=None,
                     help="append each test's CPU seconds (own, children), wall seconds to DIR/<worker>.tsv")


def _cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    out = item.config.getoption("--cpu-profile")
    if not out:
        yield
        return
    s0, c0 = _cpu()
    w0 = time.perf_counter()
    yield
    s1, c1 = _cpu()
    w1 = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, os.environ.get("PYTEST_XDIST_WORKER", "main") + ".tsv"), "a") as f:
        f.write(f"{item.nodeid}\t{s1 - s0:.3f}\t{c1 - c0:.3f}\t{w1 - w0:.3f}\t{time.time():.1f}\n")
