"""Session 30 reliability hunt of deployment, the environment knobs and service use (h-rel30).
Findings F1.. of /work/rel30-findings.md (docs/testing.md "Session 30: reliability of deployment,
knobs and services (h-rel30)"). Attempts that could crash run in child processes, several per child."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNEL = textwrap.dedent('''
    import numpy as np
    import tilewright as tw
    import tilewright.language as T
    M = T.symbolic("M")

    @tw.jit(out_idx=[-1])
    def axpb(a, b):
        @T.prim_func
        def axpb(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 16)) as bx:
                for i in T.Parallel(16):
                    if bx * 16 + i < M:
                        Y[bx * 16 + i] = X[bx * 16 + i] * a + b
        return axpb
''')


def _child(tmp_path, code, env, timeout=300):
    """Runs `code` (after KERNEL) in a child Python with the environment `env` (bytes allowed); an
    exception is printed as `EXC <type> <first line>`."""
    script = tmp_path / "child.py"  # a file: the front end reads the kernel's source
    body = textwrap.indent(KERNEL + textwrap.dedent(code), "    ")
    script.write_text(f"try:\n{body}\nexcept BaseException as e:\n"
                      "    print('EXC', type(e).__name__, str(e).splitlines()[0] if str(e) else '')\n")
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, timeout=timeout)
    out, err = r.stdout.decode(errors="backslashreplace"), r.stderr.decode(errors="backslashreplace")
    assert r.returncode == 0, (r.returncode, out, err)  # a negative returncode is a signal
    return out, err


def test_f1_knob_values_and_cache_paths_that_are_not_utf8_are_named_not_unicode_errors(tmp_path):
    probe = '''
        y = axpb(2.0, 1.0)(np.ones(3, np.float32))
        print("OK", y.tolist(), repr(tw.cache_info()["disk"]["dir"]))
    '''
    base = {k: v for k, v in os.environb.items() if not k.startswith(b"TW_")}
    base[b"TW_CACHE_DIR"] = os.fsencode(tmp_path / "cache")
    # every knob read through one helper (src/support/env.cpp): the ValueError naming it, the bytes as \xNN
    for var in (b"TW_NUM_THREADS", b"TW_CACHE_MAX_BYTES", b"TW_FROZEN", b"TW_CPU_ARCH"):
        out, _ = _child(tmp_path, probe, {**base, var: b"1\xff"})
        assert f"EXC ValueError environment variable {var.decode()}='1\\xff' is invalid: expected" in out, out
    out, _ = _child(tmp_path, probe, {**base, b"TW_CXX": b"/nonexistent/g++-\xff"})
    assert "EXC TilewrightError" in out and "C++ compiler '/nonexistent/g++-\\xff' was not found" in out, out
    # a cache directory whose name is not UTF-8 works; cache_info gives it as os.fsdecode does; the log lines are
    # text (a UnicodeDecodeError in the log sink was printed to stderr for each line)
    cache = os.fsencode(tmp_path) + b"/c-\xff"
    out, err = _child(tmp_path, probe, {**base, b"TW_CACHE_DIR": cache, b"TW_VERBOSE": b"1"})
    assert f"OK [3.0, 3.0, 3.0] {os.fsdecode(cache + b'/kernels')!r}" in out, (out, err)
    assert "UnicodeDecodeError" not in err and "c-\\xff" in err, err
    # an error naming that directory is the TilewrightError with its fix, not a UnicodeDecodeError
    os.chmod(cache, 0o777)
    out, _ = _child(tmp_path, probe, {**base, b"TW_CACHE_DIR": cache})
    assert "EXC TilewrightError" in out and "it is writable by other users" in out and "c-\\xff" in out, out
