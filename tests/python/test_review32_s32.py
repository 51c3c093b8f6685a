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


@pytest.mark.parametrize("closed", ["0,1", "1,2"])
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


# --- h-ascbf32's pick_element dry run: forms it must judge right (passed; kept as regression tests) ---

def _pick_kernels():
    import tilewright as tw
    import tilewright.language as T

    @tw.jit(out_idx=[-2, -1])
    def pick_stored(N, dtype="bfloat16"):
        """The label's logit picked with a map and a sum, the pick tile also stored: read outside its
        group, so it must stay whole."""
        M = T.symbolic("M")

        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), La: T.Tensor((M,), "int32"), P: T.Tensor((M, N), "float32"),
                 D: T.Tensor((M,), "float32")):
            with T.Kernel(M) as bx:
                x = T.alloc_fragment((1, N), "float32")
                pick = T.alloc_fragment((1, N), "float32")
                la = T.alloc_fragment((1,), "int32")
                xa = T.alloc_fragment((1,), "float32")
                T.copy(La[bx], la)
                T.copy(X[bx, 0], x)
                for i, j in T.Parallel(1, N):
                    pick[i, j] = T.where(j == la[i], x[i, j], 0.0)
                T.reduce_sum(pick, xa, dim=1)
                T.copy(pick, P[bx, 0])
                T.copy(xa, D[bx])

        return main

    @tw.jit(out_idx=[-1])
    def two_picks(N, dtype="bfloat16"):
        """One pick tile, two groups (the logits at two labels: xa - xb): both become elements."""
        M = T.symbolic("M")

        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), La: T.Tensor((M,), "int32"), Lb: T.Tensor((M,), "int32"),
                 D: T.Tensor((M,), "float32")):
            with T.Kernel(M) as bx:
                x = T.alloc_fragment((1, N), "float32")
                pick = T.alloc_fragment((1, N), "float32")
                la = T.alloc_fragment((1,), "int32")
                lb = T.alloc_fragment((1,), "int32")
                xa = T.alloc_fragment((1,), "float32")
                xb = T.alloc_fragment((1,), "float32")
                T.copy(La[bx], la)
                T.copy(Lb[bx], lb)
                T.copy(X[bx, 0], x)
                for i, j in T.Parallel(1, N):
                    pick[i, j] = T.where(j == la[i], x[i, j], 0.0)
                T.reduce_sum(pick, xa, dim=1)
                for i, j in T.Parallel(1, N):
                    pick[i, j] = T.where(j == lb[i], x[i, j], 0.0)
                T.reduce_sum(pick, xb, dim=1)
                for i in T.Parallel(1):
                    xa[i] = xa[i] - xb[i]
                T.copy(xa, D[bx])

        return main

    return pick_stored, two_picks


@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_pick_tile_read_outside_its_group_or_in_two_groups(target):
    """49081 bfloat16 columns (column blocks on ascend910b, a tail block): labels in the first, middle
    and tail columns and out of range (-1, N, N + 5: nothing picked), against float64, checker on."""
    import warnings

    import numpy as np

    import tilewright as tw
    from tilewright.testing import randn
    sys.path.insert(0, os.path.dirname(__file__))
    from ascend_util import run_checked

    pick_stored, two_picks = _pick_kernels()
    N, M = 49081, 6
    rng = np.random.default_rng(32)
    x = randn((M, N), "bfloat16", scale=3.0, seed=rng)
    xf = x.astype(np.float64)
    la = np.array([0, N - 1, N, -1, N // 2, 7], np.int32)
    lb = np.array([N - 1, 0, N // 3, N + 5, -7, N - 1], np.int32)

    def at(lab):
        ok = (lab >= 0) & (lab < N)
        return np.where(ok, xf[np.arange(M), np.clip(lab, 0, N - 1)], 0.0)

    def run(k, *args):
        args = [a.copy() for a in args]
        return k(*args) if target == "cpu" else run_checked(k, *args)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tw.TilewrightWarning)
        ks, kt = pick_stored(N, target=target), two_picks(N, target=target)
        # the stored pick tile stays (its allocation and map); the shared one becomes elements
        assert "alloc pick" in ks.get_ir("pick_element") and "alloc pick" not in kt.get_ir("pick_element")
        if target != "cpu":
            assert "for col_blk" in kt.get_ir("pick_element")  # the row runs in column blocks
        P, D = run(ks, x, la)
        ref_p = np.zeros((M, N))
        ok = (la >= 0) & (la < N)
        ref_p[np.arange(M)[ok], la[ok]] = xf[np.arange(M)[ok], la[ok]]
        np.testing.assert_array_equal(P.astype(np.float64), ref_p)
        np.testing.assert_array_equal(D.astype(np.float64), at(la))
        D2 = run(kt, x, la, lb)
    np.testing.assert_allclose(D2.astype(np.float64), at(la) - at(lb), rtol=1e-6, atol=1e-6)
