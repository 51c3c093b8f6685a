"""Session 29 (h-coldcomp): what g++ parses for every CPU kernel stays small.

The kernel library's entry point (src/runtime/cpu_library.cpp) had included <atomic>, which under
-std=c++20 pulls in atomic_wait's headers (~36,000 preprocessed lines): ~0.4 s of g++ CPU in every
kernel's cold compile (a gemm kernel 0.09 -> 0.5 s). Timings are not asserted; the guard is the
size of the translation unit the compiler really gets (a TW_CXX wrapper keeps a copy of it).
"""
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

PY = sys.executable

WRAPPER = textwrap.dedent("""\
    #!/bin/sh
    # Keeps each compiled source and the compiler's arguments, then runs the real compiler.
    for a in "$@"; do
      case "$a" in *.cpp) cp "$a" "{keep}/";; esac
    done
    printf '%s\\n' "$@" > "{keep}/argv.txt"
    exec "{cxx}" "$@"
""")

SCRIPT = textwrap.dedent("""
    import numpy as np
    import tilewright as tw
    import tilewright.language as T

    M = T.symbolic("M")

    @tw.jit(out_idx=[-1])
    def scale_kernel(factor):
        @T.prim_func
        def scale(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 64)) as bx:
                for i in T.Parallel(64):
                    if bx * 64 + i < M:
                        Y[bx * 64 + i] = X[bx * 64 + i] * factor
        return scale

    x = np.arange(70, dtype=np.float32)
    assert np.array_equal(scale_kernel(3.0)(x), x * np.float32(3.0))
    print("ok")
""")


def test_the_kernel_translation_unit_includes_no_heavy_standard_header(tmp_path):
    cxx = shutil.which(os.environ.get("TW_CXX") or os.environ.get("CXX") or "g++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    keep = tmp_path / "keep"
    keep.mkdir()
    wrapper = tmp_path / "cxx.sh"
    wrapper.write_text(WRAPPER.format(keep=keep, cxx=cxx))
    wrapper.chmod(0o755)
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TW_CACHE_DIR=str(tmp_path / "cache"), TW_CXX=str(wrapper))
    r = subprocess.run([PY, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr[-3000:]
    sources = sorted(keep.glob("*.cpp"))
    assert len(sources) == 1, sources
    source = sources[0].read_text()
    assert "tw_error_lock" in source  # the library's entry point is in this translation unit
    argv = (keep / "argv.txt").read_text().splitlines()
    flags = [a for a in argv if a.startswith(("-I", "-std=", "-march="))]
    pre = subprocess.run([cxx, *flags, "-E", "-x", "c++", str(sources[0])], capture_output=True, text=True,
                         timeout=120)
    assert pre.returncode == 0, pre.stderr[-3000:]
    lines = pre.stdout.count("\n")
    # ~1,700 lines today (the tw_cpu headers, <cstdio>, <exception>); <atomic> alone is ~36,000
    assert lines < 8000, (
        f"the kernel's translation unit preprocesses to {lines} lines: a heavy header "
        "(e.g. <atomic>) in src/runtime/cpu_library.cpp or tw_cpu/*.h costs every cold compile")
