"""Session 32 (h-review32): an adversarial review of the session's merges (issues 13 / 16; docs/testing.md
"Session 32: review of the session's merges (h-review32)").

R1 (fixed): the compiler spawn (h-intr32's clone + execve) dup2'd the pipe's write end onto 1 and 2;
in a process started with stdin and stdout closed the pipe is fds 0 and 1, dup2(1, 1) keeps
FD_CLOEXEC, and the compiler ran without stdout: `--version` printed nothing (the toolchain's
version line, which names the compiler in errors and keys the cache, was empty).
R2 (fixed message): a process that ignores SIGCHLD cannot compile (the kernel reaps the compiler,
waitpid fails with ECHILD; posix_spawn did the same before): the error now names the cause and the fix.
Each case runs in a child process (a spawn fault could end it); the children share one kernel cache.
"""
import os
import subprocess
import sys
import textwrap

import pytest

KERNEL = textwrap.dedent('''
    import os, sys
    import numpy as np
    import tilewright as tw
    import tilewright.language as T
    M = T.symbolic("M")

    @tw.jit(out_idx=[-1])
    def triple():
        @T.prim_func
        def triple(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 64)) as bx:
                for i in T.Parallel(64):
                    if bx * 64 + i < M:
                        Y[bx * 64 + i] = X[bx * 64 + i] * 3.0
        return triple

    keep = os.dup(2)  # the report's channel, whatever the case closes
    for fd in [int(a) for a in sys.argv[1].split(",") if a]:
        os.close(fd)
    if sys.argv[2] == "ignore_sigchld":
        import signal
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    x = np.arange(131, dtype=np.float32)
    try:
        y = triple()(x)
        msg = "OK " + str(bool(np.array_equal(y, x * np.float32(3))))
    except Exception as e:
        msg = "ERR " + str(e)
    os.write(keep, ("@@" + msg).encode())
''')

# a compiler that prints its version (g++'s) but fails every compile, with a line on stderr
FAILING_CXX = '#!/bin/sh\ncase "$*" in *--version*) exec g++ "$@";; esac\necho "review32: this compile fails" >&2\nexit 3\n'


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache"))


def _child(tmp_path, cache, closed, mode="", env=None):
    script = tmp_path / "child.py"  # a file: the front end reads the kernel's source
    script.write_text(KERNEL)
    p = subprocess.run([sys.executable, str(script), closed, mode], env={**os.environ, "TW_CACHE_DIR": cache, **(env or {})},
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert "@@" in p.stderr, p.stderr[-2000:]
    return p.stderr[p.stderr.rfind("@@") + 2:].strip()  # the report, after the compile's progress lines


@pytest.mark.parametrize("closed", ["0,1", "1,2", "0,1,2"])
def test_compiler_gets_stdout_and_stderr_with_standard_fds_closed(tmp_path, cache, closed):
    """R1: with 0 and 1 (or 1 and 2) closed the pipe takes them; the compiler still writes its version
    (stdout) and its diagnostics (stderr) into the error, and a working compiler builds the kernel."""
    cxx = tmp_path / "failing-cxx"
    cxx.write_text(FAILING_CXX)
    cxx.chmod(0o755)
    line = _child(tmp_path, str(tmp_path), closed, env={"TW_CXX": str(cxx)})  # an empty cache: it compiles
    assert line.startswith("ERR") and "review32: this compile fails" in line, line
    assert f"'{cxx}' (g++" in line, line  # the version line read from the compiler's stdout
    assert _child(tmp_path, cache, closed) == "OK True"


def test_a_failing_compiler_is_a_clear_error(tmp_path, cache):
    """The clone + execve spawn: a compiler that exits non-zero, one that is missing, a script without #!."""
    cxx = tmp_path / "failing-cxx"
    cxx.write_text(FAILING_CXX)
    cxx.chmod(0o755)
    line = _child(tmp_path, str(tmp_path), "", env={"TW_CXX": str(cxx)})
    assert "cannot build a one-line shared library" in line and "review32: this compile fails" in line, line
    line = _child(tmp_path, str(tmp_path), "", env={"TW_CXX": str(tmp_path / "no-such-cxx")})
    assert "was not found" in line and "TW_CXX" in line, line
    noshebang = tmp_path / "noshebang"
    noshebang.write_text("echo hi\n")
    noshebang.chmod(0o755)
    line = _child(tmp_path, str(tmp_path), "", env={"TW_CXX": str(noshebang)})
    assert "Exec format error" in line, line


def test_sigchld_ignored_names_the_cause(tmp_path, cache):
    """R2: SIGCHLD ignored: the kernel reaps the compiler and its exit status is lost; the error says so
    (not a bare `waitpid: No child processes`)."""
    line = _child(tmp_path, str(tmp_path), "", "ignore_sigchld")
    assert line.startswith("ERR") and "ignores SIGCHLD" in line and "SIG_IGN" in line, line
