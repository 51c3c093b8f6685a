"""fork() while other threads use Tilewright (docs/testing.md, "Session 21: fork while threads
run kernels"). Each case runs in a child process with a timeout, so that a hang is a failure
rather than a stuck test run. The C++ side (locks made afresh or taken at the fork, the pool
made afresh, cache locks' descriptors closed in the child) is tested in
tests/cpp/test_runtime_infra.cpp (Fork.*, ThreadPool.ForkedChildMakesItsOwnDefaultPool)."""
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(args, timeout):
    env = dict(os.environ, TW_NUM_THREADS="2")
    return subprocess.run([sys.executable, *args], cwd=HERE, env=env, capture_output=True, text=True, timeout=timeout)


def test_jit_lock_held_by_another_thread_at_the_fork(tmp_path):
    """A thread of the parent held a @tw.jit function's lock at the fork (it can lose the GIL
    inside `with lock:`): the child's copy stayed held and its next call of that function hung.
    The child makes the locks afresh (os.register_at_fork)."""
    code = textwrap.dedent("""
        import os, signal, threading
        import numpy as np
        import tilewright as tw
        import tilewright.language as T

        @tw.jit(out_idx=[-1])
        def plus(a):
            @T.prim_func
            def fork_plus(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
                with T.Kernel(1) as bx:
                    for i in T.Parallel(64):
                        Y[i] = X[i] + a
            return fork_plus

        x = np.arange(64, dtype=np.float32)
        assert np.array_equal(plus(1.0)(x), x + 1)
        held, done = threading.Event(), threading.Event()
        def hold():
            with plus._tw_jit_cache.lock:
                held.set()
                done.wait()
        t = threading.Thread(target=hold)
        t.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            signal.alarm(60)  # a hang ends as SIGALRM
            ok = np.array_equal(plus(1.0)(x), x + 1)  # a cache hit: takes the lock
            os._exit(0 if ok else 3)
        status = os.waitpid(pid, 0)[1]
        done.set()
        t.join()
        print("status", os.waitstatus_to_exitcode(status))
    """)
    script = tmp_path / "case.py"  # kernels need a source file
    script.write_text(code)
    r = _run([str(script)], timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-2:] == ["status", "0"], r.stdout


def test_fork_stress_harness_small(tmp_path):
    """The stress harness (tests/python/fork_stress.py), small: worker threads call a gemm
    kernel, maps and a long map, compile new kernels, hit the caches and log, while the main
    thread forks 12 times (os.fork and multiprocessing, fixed seed); every child calls and
    compiles within 120 s (a compile under heavy load takes up to ~40 s, and a child may wait for
    the parent's) and gets right results. A hung child fails the test with its stacks
    in the output."""
    r = _run(["fork_stress.py", "--forks", "12", "--seed", "0", "--timeout", "120", "--no-autotune",
              "--dump", str(tmp_path / "dump")], timeout=600)
    dumps = ""
    if (tmp_path / "dump").is_dir():
        for f in sorted((tmp_path / "dump").glob("*-*.txt")):
            text = f.read_text()
            main = text.find("Thread 1 ")  # gdb prints the main thread last: its innermost frames
            dumps += f"--- {f.name}\n" + (text[main:main + 4000] if main >= 0 else text[-4000:])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + dumps
    assert "forks 12 hung 0 failed 0 thread errors 0" in r.stdout, r.stdout
