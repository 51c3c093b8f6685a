"""Threads, processes and signals around kernels (docs/testing.md "Hostile inputs", session 20).
Every case runs in a child process with a timeout, so that a hang or a signal is a failure
rather than a stuck or dead test run."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

PY = sys.executable

PRELUDE = textwrap.dedent("""
    import os, sys, threading, time
    import numpy as np
    import tilewright as tw
    import tilewright.language as T

    def scale(a, n=4096):
        @T.prim_func
        def conc_scale(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(n // 256) as bx:
                for i in T.Parallel(256):
                    Y[bx * 256 + i] = X[bx * 256 + i] * a
        return tw.compile(conc_scale, out_idx=[-1])

    def slow(n=1 << 20, reps=64):
        @T.prim_func
        def conc_slow(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(n // 1024) as bx:
                acc = T.alloc_fragment((1024,), "float32")
                for i in T.Parallel(1024):
                    acc[i] = X[bx * 1024 + i]
                for r in T.serial(reps):
                    for i in T.Parallel(1024):
                        acc[i] = acc[i] * 1.0001 + 0.5
                for i in T.Parallel(1024):
                    Y[bx * 1024 + i] = acc[i]
        return tw.compile(conc_slow, out_idx=[-1])

    X = np.arange(4096, dtype=np.float32)

    def check(k, a):
        assert np.array_equal(k(X), X * np.float32(a)), "wrong result"
""")


def _run(tmp_path, body, timeout=300, env_update=None):
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env["TW_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(env_update or {})
    return subprocess.run([PY, str(script)], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("what", ["calls", "compiles"])
def test_daemon_threads_at_exit(tmp_path, what):
    """A daemon thread whose kernel call or compile ends while the interpreter exits: CPython
    ends such a thread with pthread_exit(), whose unwinding aborted the process (SIGABRT,
    "terminate called without an active exception") when it crossed the binding. The thread is
    parked now and the process exits normally."""
    body = """
        k, s = scale(2.0), slow()
        ones = np.ones(1 << 20, np.float32)
        def calls():
            while True:
                check(k, 2.0); s(ones)
        def compiles():
            i = 0
            while True:
                i += 1; check(scale(100.0 + i), 100.0 + i)
        for _ in range(3):
            threading.Thread(target=WHAT, daemon=True).start()
        time.sleep(0.5 if WHAT is calls else 2.0)
        print("exiting", flush=True)
    """.replace("WHAT", what)
    for _ in range(3):
        p = _run(tmp_path, body)
        assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
        assert p.stdout.strip() == "exiting"
        assert "terminate called" not in p.stderr


def test_threads_call_and_compile_at_once(tmp_path):
    """Eight threads calling one kernel, and four kernels, at once; six threads compiling one new
    kernel at once and four compiling distinct ones; every result checked."""
    body = """
        errors = []
        def guard(fn, *a):
            try:
                fn(*a)
            except Exception as e:
                errors.append(repr(e))
        def run_threads(targets):
            ts = [threading.Thread(target=guard, args=t) for t in targets]
            [t.start() for t in ts]; [t.join() for t in ts]
        def calls(k, a):
            for _ in range(100):
                check(k, a)
        k2 = scale(2.0)
        run_threads([(calls, k2, 2.0)] * 8)
        ks = [(scale(a), a) for a in (3.0, 5.0, 7.0)] + [(k2, 2.0)]
        run_threads([(calls,) + ks[i % 4] for i in range(8)])
        bar = threading.Barrier(6)
        def compile_once(a):
            bar.wait(); check(scale(a), a)
        run_threads([(compile_once, 11.0)] * 6)
        bar = threading.Barrier(4)
        run_threads([(compile_once, 20.0 + i) for i in range(4)])
        print("errors", errors)
    """
    p = _run(tmp_path, body)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "errors []", p.stdout


def test_fork_after_the_thread_pool_ran(tmp_path):
    """fork() after the kernel thread pool ran: the child calls and compiles kernels (serially:
    the workers are not its own) instead of waiting for workers that do not exist."""
    body = """
        k = scale(2.0); check(k, 2.0)
        s = slow(n=1 << 16, reps=4)
        ones = np.ones(1 << 16, np.float32)
        want = s(ones)
        pid = os.fork()
        if pid == 0:
            ok = np.array_equal(s(ones), want)
            check(k, 2.0); check(scale(3.0), 3.0)
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print("child", status)
    """
    p = _run(tmp_path, body, env_update={"TW_NUM_THREADS": "2"}, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "child 0", p.stdout


def test_sigint_during_a_long_call(tmp_path):
    """SIGINT while a kernel runs (the GIL released): KeyboardInterrupt once the call returns,
    and the next call works."""
    body = """
        s = slow(n=1 << 22, reps=200)
        ones = np.ones(1 << 22, np.float32)
        want = s(ones)
        print("ready", flush=True)
        try:
            while True:
                s(ones)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        print("after", bool(np.array_equal(s(ones), want)), flush=True)
    """
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env["TW_CACHE_DIR"] = str(tmp_path / "cache")
    p = subprocess.Popen([PY, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 0, err[-2000:]
    assert out.split() == ["interrupted", "after", "True"], out


def _start(tmp_path, body, **popen):
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env["TW_CACHE_DIR"] = str(tmp_path / "cache")
    return subprocess.Popen([PY, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **popen)


COMPILE_ONE = """
    print("compiling", flush=True)
    k = scale(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
    check(k, 3.0)
    print("done", flush=True)
"""


def _wait_for_generated_source(p, tmp_path):
    """Waits until the child `p` (running COMPILE_ONE) has written its generated source into the
    cache's tmp/ (its compiler is about to run, or running); returns that directory."""
    assert p.stdout.readline().strip() == "compiling"
    tmp = tmp_path / "cache" / "tmp"
    deadline = time.monotonic() + 60
    while not (tmp.is_dir() and any(tmp.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.01)
    return tmp


def test_ctrl_c_during_a_compile_is_not_lost(tmp_path):
    """SIGINT while the compiler runs: the only Python code a compile runs is the log sink, which
    the signal's KeyboardInterrupt hit, and the sink's errors were discarded ("Exception ignored
    in: tilewright log sink"): the interrupt was lost and the program went on. It was then raised once
    the compile returned, the kernel kept; since intr31 the compile's wait runs the signal handlers
    itself: the compiler is ended at once and nothing is cached (the next process compiles it)."""
    p = _start(tmp_path, COMPILE_ONE)
    try:
        assert p.stdout.readline().strip() == "compiling"
        time.sleep(0.05)  # the compiler takes far longer than this
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert "done" not in out, (out, err[-2000:])
    assert err.rstrip().endswith("KeyboardInterrupt"), err[-2000:]
    assert "Exception ignored" not in err, err[-2000:]
    p = _run(tmp_path, "check(scale(3.0), 3.0)\nprint(scale(3.0).from_disk_cache)")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "False"


def test_compile_temporaries_of_killed_processes_are_removed(tmp_path):
    """A process killed while it compiles leaves its generated source (and a partial library) in
    the cache's tmp/: files there older than an hour are removed by the next process that
    compiles; younger ones (another process's compile) are left alone."""
    p = _start(tmp_path, COMPILE_ONE, start_new_session=True)
    try:
        tmp = _wait_for_generated_source(p, tmp_path)
        os.killpg(p.pid, signal.SIGKILL)  # the process
        p.wait(timeout=60)
    finally:
        p.kill()
    # its compiler runs in its own process group (intr31) and would finish alone, writing its library
    # after the listing below: ended here, as `kill` of it would
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if str(tmp_path).encode() in f.read():
                    os.killpg(os.getpgid(int(pid)), signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.2)
    left = sorted(tmp.iterdir())
    assert left, "the killed compile left nothing behind (too fast?)"
    old = os.path.getmtime(left[0]) - 7200
    for f in left:
        os.utime(f, (old, old))
    (tmp / "young.cpp").write_text("// another process's compile\n")
    p = _run(tmp_path, "check(scale(5.0), 5.0)")
    assert p.returncode == 0, p.stderr[-2000:]
    assert sorted(f.name for f in tmp.iterdir()) == ["young.cpp"]


def test_ctrl_c_to_the_process_group_during_a_compile(tmp_path):
    """Ctrl-C in a terminal reached the compiler too, which died, and the compile failed; the
    KeyboardInterrupt then fired while that error was being made into a TilewrightError, which
    nanobind reported as a RuntimeError wrapping the traceback. It is a KeyboardInterrupt (since
    intr31 the compiler runs in its own group: the compile's wait ends it)."""
    p = _start(tmp_path, COMPILE_ONE, start_new_session=True)
    try:
        tmp = _wait_for_generated_source(p, tmp_path)
        time.sleep(0.05)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert "done" not in out, (out, err[-2000:])
    assert err.rstrip().endswith("KeyboardInterrupt"), err[-2000:]
    assert "RuntimeError" not in err and "Exception ignored" not in err, err[-2000:]


def test_fork_while_other_threads_run_kernels(tmp_path):
    """fork() while other threads are inside kernel calls: the launch lock, held by a thread that
    does not exist in the child, was copied held, and the child's first call hung (9 of 12 forks).
    The child makes the launch locks afresh."""
    body = """
        import signal
        k = scale(2.0)
        s = slow(n=1 << 20, reps=32)
        ones = np.ones(1 << 20, np.float32)
        want = s(ones)
        stop = False
        def calls():
            while not stop:
                s(ones); check(k, 2.0)
        ts = [threading.Thread(target=calls) for _ in range(2)]
        [t.start() for t in ts]
        statuses = []
        for _ in range(6):
            time.sleep(0.2)
            pid = os.fork()
            if pid == 0:
                signal.alarm(30)  # a hang ends as SIGALRM (status 14)
                ok = np.array_equal(s(ones), want)
                check(k, 2.0)
                os._exit(0 if ok else 3)
            statuses.append(os.waitpid(pid, 0)[1])
        stop = True
        [t.join() for t in ts]
        print("statuses", statuses)
    """
    p = _run(tmp_path, body, env_update={"TW_NUM_THREADS": "2"}, timeout=400)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "statuses [0, 0, 0, 0, 0, 0]", p.stdout
