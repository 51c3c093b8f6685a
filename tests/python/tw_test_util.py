"""Helpers shared by the Python tests: loading the example scripts as modules, finding a marked
source line of a test file (for the line numbers that errors must name) and checking that an
error names it."""
import importlib.util
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def load_example(name, module_name=None):
    """Imports examples/<name>.py (name may be "ascend/gemm_expert"), with examples/ on sys.path
    for its sibling imports."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    spec = importlib.util.spec_from_file_location(module_name or "tw_example_" + name.replace("/", "_"),
                                                  os.path.join(EXAMPLES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def marked_line(path, marker):
    """(line number, source line) of the first line of `path` with the comment `# marker`."""
    pattern = re.compile(r"# %s(?![\w@])" % re.escape(marker))
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if pattern.search(line):
                return i, line.rstrip("\n")
    raise AssertionError(f"marker {marker} not found in {path}")


def assert_located(exc_info, path, marker, message):
    """The exception of pytest.raises(...) `exc_info` is a TilewrightError whose message contains
    `message`, at the line of `path` marked `# marker`."""
    from tilewright import TilewrightError
    e = exc_info.value
    assert isinstance(e, TilewrightError), repr(e)
    assert message in e.message, e.message
    assert (e.file, e.line) == (path, marked_line(path, marker)[0]), str(e)


def located(fn, path, marker, *parts):
    """fn() raises a TilewrightError at the line of `path` marked `# marker` whose message (and
    hint) hold every one of `parts`; returns the error."""
    import pytest
    from tilewright import TilewrightError
    with pytest.raises(TilewrightError) as e:
        fn()
    err = e.value
    assert err.file == path and err.line == marked_line(path, marker)[0], (err.file, err.line, err.message)
    text = err.message + " | " + (err.hint or "")
    for p in parts:
        assert p in text, text
    return err


def by_size(offsets, dtypes, once):
    """(offset, dtype) cases: every offset for each dtype of `dtypes`, one (`once[dtype]`) for a
    dtype whose element size is another listed dtype's (bfloat16 as float16, int32 as float32): the
    copies skip bytes (32 B blocks, C0 strips, fractals), so what an offset checks depends on the
    element size; the same-size dtype keeps one case for its own data path (session 27, h-citrim15:
    CI time; the full product ran every offset twice per element size)."""
    return [(*o, d) if isinstance(o, tuple) else (o, d) for d in dtypes for o in offsets if d not in once or o == once[d]]


def small_ints(shape, dtype, seed, lo=-3, hi=4):
    """Small integers in `dtype`: exact in every dtype, sums exact in float32."""
    import numpy as np
    import tilewright as tw
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(tw.testing.np_dtype(dtype))


def pairwise(*axes):
    """A covering set for a parametrization: rows (one value of each axis, in the axes' order) in
    which every pair of values of any two axes occurs at least once, so every value of every axis
    is run and so is every pair; what a full cartesian product adds are the combinations of three
    or more values, which a test that needs them names itself. Deterministic: each row starts from
    the first pair not yet covered and takes, axis by axis, the value that covers the most new
    pairs (the first on ties); it stops only when every pair is covered. A value that is a tuple
    stands for several parameters that go together (e.g. a shape and its dtype)."""
    axes = [list(a) for a in axes]
    if len(axes) < 2:
        return [(v,) for v in axes[0]] if axes else []
    pairs = {(i, a, j, b) for i in range(len(axes)) for j in range(i + 1, len(axes))
             for a in range(len(axes[i])) for b in range(len(axes[j]))}
    rows = []
    while pairs:
        i, a, j, b = min(pairs)
        row = {i: a, j: b}
        for k in range(len(axes)):
            if k not in row:
                row[k] = max(range(len(axes[k])),
                             key=lambda v: (sum((min(k, m), v if k < m else w, max(k, m), w if k < m else v) in pairs
                                                for m, w in row.items()), -v))
        pairs -= {(p, row[p], q, row[q]) for p in range(len(axes)) for q in range(p + 1, len(axes))}
        rows.append(tuple(axes[k][row[k]] for k in range(len(axes))))
    return rows


def suite_cache_dir(tmp_path):
    """The disk cache directory of this test process (TW_CACHE_DIR, or the default), for a child
    process whose test is not about the cache: it finds there the kernels the suite compiled, above
    all the gemm runtime library (about 14 s of compiler time on 2 cores, paid again by every child
    on a fresh directory). The cache is made for processes sharing it (docs/environment.md,
    "Concurrency"). With this process's disk cache disabled, a fresh directory in tmp_path."""
    import tilewright as tw
    kernels = tw.cache_info()["disk"]["dir"]
    return os.path.dirname(kernels) if kernels else str(tmp_path / "cache")


def bounds_checked_child(code, tmp_path):
    """Runs `code` (Python; its argv[1] is the tests' directory) in a child process under TW_BOUNDS_CHECK=1 (read
    once per process) with this suite's kernel cache; asserts it exits 0 and returns its stdout's lines."""
    import pathlib
    import subprocess
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_BOUNDS_CHECK": "1", "TW_CACHE_DIR": suite_cache_dir(tmp_path)})
    here = str(pathlib.Path(__file__).resolve().parent)
    p = subprocess.run([sys.executable, "-c", code, here], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()


def avx2_child_npz(tmp_path, module):
    """Runs `module.child_main(path)` (a test module in this directory) in a child process whose cpu
    target is x86-64-v3 (AVX2 + FMA), sharing this process's disk cache, and returns the path of
    the .npz it wrote; skips the test where this host cannot run x86-64-v3 code."""
    import subprocess

    import pytest
    flags = open("/proc/cpuinfo").read().split() if os.path.exists("/proc/cpuinfo") else []
    if not {"avx2", "fma"} <= set(flags):
        pytest.skip("this host cannot run x86-64-v3 code")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update(TW_CPU_ARCH="x86-64-v3", TW_CACHE_DIR=suite_cache_dir(tmp_path))
    path = str(tmp_path / "out.npz")
    p = subprocess.run([sys.executable, "-c", f"import {module} as m; m.child_main({path!r})"], env=env,
                       capture_output=True, text=True, timeout=600, cwd=os.path.dirname(os.path.abspath(__file__)))
    assert p.returncode == 0, p.stderr[-3000:]
    return path


def checked_cpu_results(cases, out_path):
    """The cpu side of a checked-mode differential test, run in a child with TW_BOUNDS_CHECK=1 (checked mode is
    read once per process): `cases` maps a name to (kernel factory (target -> kernel), inputs, float64 reference
    or None); writes each case's result as JSON: {"error": None, "close": bool} (float32 1e-5 / 1e-5 against the
    reference) or the TilewrightError's message, hint, file and line."""
    import json
    import numpy as np
    import tilewright as tw
    res = {}
    for name, (make, inputs, ref) in cases.items():
        try:
            y = np.asarray(make("cpu")(*inputs), np.float64)
            r = {"error": None}
            if ref is not None:
                r["close"] = bool(np.allclose(y, ref, atol=1e-5, rtol=1e-5))
        except tw.TilewrightError as e:
            r = {"error": e.message, "hint": e.hint, "file": e.file, "line": e.line}
        res[name] = r
    with open(out_path, "w") as f:
        json.dump(res, f)


def run_checked_child(module, tmp):
    """Runs `module.child_main(out)` (a test module beside this file) in a child process with TW_BOUNDS_CHECK=1
    and the suite's disk cache; returns the JSON it wrote."""
    import json
    import subprocess
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_BOUNDS_CHECK": "1", "TW_CACHE_DIR": suite_cache_dir(tmp)})
    out = os.path.join(str(tmp), "out.json")
    code = f"import {module} as m; m.child_main({out!r})"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                       cwd=os.path.dirname(os.path.abspath(__file__)))
    assert p.returncode == 0, p.stderr[-3000:]
    with open(out) as f:
        return json.load(f)


GEMM_RUNTIME_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import gemm
assert gemm.check(20, 20, 20, "float32")  # examples/gemm.py against numpy
with open("/proc/self/maps") as f:  # the runtime library this process loaded: its cache entry's file
    print({w for l in f for w in l.split() if "/libtw_gemm_" in w}.pop())
"""


def _gemm_runtime_template(tmp_path_factory, arch=None):
    """A copy (made once per test run and arch; the xdist workers share it under a lock in their common temp
    dir) of the gemm runtime library's cache entry (<key[0:2]>/<key>: the library and its manifest) that a
    child process with the tests' environment (no TW_* variable but TW_CACHE_DIR, and TW_CPU_ARCH=arch where
    given) loads from the suite's cache, building it there if the suite has not yet."""
    import fcntl
    import shutil
    import subprocess
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    base = tmp_path_factory.getbasetemp()
    root = base.parent if worker else base  # the run's directory, shared by its workers
    name = "gemm-runtime-template" + (f"-{arch}" if arch else "")
    template = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
            env["TW_CACHE_DIR"] = suite_cache_dir(base)
            if arch:
                env["TW_CPU_ARCH"] = arch
            p = subprocess.run([sys.executable, "-c", GEMM_RUNTIME_PROBE, EXAMPLES], env=env, capture_output=True,
                               text=True, timeout=600)
            assert p.returncode == 0, p.stderr
            entry = os.path.dirname(p.stdout.strip().splitlines()[-1])
            assert os.path.exists(os.path.join(entry, "manifest")), f"not a cache entry: {entry}"
            staged = root / f"{name}.{os.getpid()}"
            shutil.copytree(entry, staged / os.path.basename(os.path.dirname(entry)) / os.path.basename(entry))
            os.rename(staged, template)
        (entry,) = template.glob("*/*")
    return str(entry)


def seed_gemm_runtime(cache, tmp_path_factory, arch=None):
    """Puts the gemm runtime library (tw_cpu/gemm.h; the default compiler; for TW_CPU_ARCH=arch, or native)
    into the fresh disk cache directory `cache`, for a child process whose test needs it there but is not
    about building it (about 20 CPU-s of g++ per fresh cache): a copy of its entry (_gemm_runtime_template).
    The entry holds nothing tied to its path (its manifest records the key, the file's name, size and
    sha256), and the copy keeps the owner and the modes, so the child's lookup verifies it as it would its
    own compile. The cache holds no other entry: no kernel library, no usage index."""
    import shutil
    entry = _gemm_runtime_template(tmp_path_factory, arch)
    shard, key = entry.split(os.sep)[-2:]
    for d in (cache, os.path.join(cache, "kernels"), os.path.join(cache, "kernels", shard)):
        os.makedirs(d, mode=0o700, exist_ok=True)
    shutil.copytree(entry, os.path.join(cache, "kernels", shard, key))


def bounds_checked():
    """Whether this process compiles cpu kernels in checked mode (TW_BOUNDS_CHECK, as the library read it)."""
    import tilewright
    return tilewright._C.bounds_check()


def unchecked_code_only(fn):
    """Marks a test that asserts the shape of the UNCHECKED cpu code (its generated source, or a kernel that leaves
    outputs unwritten on purpose): in a process under TW_BOUNDS_CHECK=1 the code differs by design, so it skips.
    The checked behaviour has its own tests (test_check_bounds.py, test_unwritten40_s40.py)."""
    import pytest
    return pytest.mark.skipif(bounds_checked(), reason="asserts the unchecked cpu code (TW_BOUNDS_CHECK=1 here)")(fn)
