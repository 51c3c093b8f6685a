"""Session 32 (h-intr32): Ctrl-C stops a cpu kernel's call between blocks, and a process killed while it
compiles takes its compiler along (docs/environment.md, "Ctrl-C"). Each case runs in a child process
that the test signals; the bounds are generous liveness bounds, not timings."""
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

KERNEL = textwrap.dedent('''
    import os, sys, time
    import numpy as np
    import tilewright as tw
    import tilewright.language as T
    M = T.symbolic("M")

    # y = x after `reps` steps of x * 0.5 + 1, 64 elements a block: reps = 10^6 is about 2 ms a block.
    @tw.jit(out_idx=[-1])
    def spin():
        @T.prim_func
        def spin(X: T.Tensor((M,), "float32"), reps: T.int32, Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 64)) as bx:
                acc = T.alloc_fragment((64,), "float32")
                for i in T.Parallel(64):
                    acc[i] = X[bx * 64 + i] if bx * 64 + i < M else 0.0
                for r in T.serial(reps):
                    for i in T.Parallel(64):
                        acc[i] = acc[i] * 0.5 + 1.0
                for i in T.Parallel(64):
                    if bx * 64 + i < M:
                        Y[bx * 64 + i] = acc[i]
        return spin
''')


def _expected(x, reps):
    y = x.copy()
    for _ in range(reps):
        y = y * np.float32(0.5) + np.float32(1.0)
    return y


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One kernel cache for the module's children: `spin` compiles once."""
    return str(tmp_path_factory.mktemp("cache"))


def _child(tmp_path, code, cache, env=None):
    script = tmp_path / "child.py"  # a file: the front end reads the kernel's source
    script.write_text(KERNEL + textwrap.dedent(code))
    return subprocess.Popen([sys.executable, str(script)], env={**os.environ, "TW_CACHE_DIR": cache, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(p, seconds=60):
    try:
        p.wait(timeout=seconds)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


@pytest.mark.parametrize("threads", [1, 2])
def test_sigint_stops_a_long_cpu_kernel_and_the_next_call_works(tmp_path, cache, threads):
    # 20000 blocks of about 2 ms: some 40 s of work (20 s on 2 threads). SIGINT raises KeyboardInterrupt
    # once the blocks running end; the same kernel then gives numpy's result, on a tail shape too.
    p = _child(tmp_path, '''
        k = spin()
        x = np.linspace(-3, 3, 64 * 20000).astype(np.float32)
        small = np.linspace(-3, 3, 131).astype(np.float32)
        k(small, 2)  # compiled and warm
        for attempt in range(2):
            print("READY", flush=True)
            try:
                k(x, 10**6)
                print("FINISHED", flush=True)
            except KeyboardInterrupt:
                print("INTERRUPTED", flush=True)
        np.save(sys.argv[0] + ".out.npy", np.stack([k(small, 3), k(small[:1], 3).repeat(131)]))
        print("AFTER", flush=True)
    ''', cache, {"TW_NUM_THREADS": str(threads)})
    # twice: the second interrupt of one process is caught as the first; on 2 threads the first past 1 s,
    # after which the ticker would sleep if no launch were running
    for wait in ((1.5, 0.3) if threads == 2 else (0.3, 0.3)):
        line = p.stdout.readline().strip()
        assert line == "READY", (line, p.stderr.read() if not line else "")
        time.sleep(wait)
        t0 = time.time()
        os.kill(p.pid, signal.SIGINT)
        line = p.stdout.readline().strip()
        assert line == "INTERRUPTED", (line, p.stderr.read() if not line else "")
        assert time.time() - t0 < 5, "the kernel ran on 5 s after SIGINT"
    assert p.stdout.readline().strip() == "AFTER", p.stderr.read()
    _finish(p)
    assert p.returncode == 0, p.stderr.read()
    out = np.load(str(tmp_path / "child.py.out.npy"))
    small = np.linspace(-3, 3, 131).astype(np.float32)
    np.testing.assert_array_equal(out[0], _expected(small, 3))
    np.testing.assert_array_equal(out[1], np.full(131, _expected(small[:1], 3)[0]))


def test_sigint_handler_that_does_not_raise_leaves_the_call_alone(tmp_path, cache):
    # A Python handler that only records the signal: the call is not cancelled, its result is whole.
    p = _child(tmp_path, '''
        import signal
        seen = []
        signal.signal(signal.SIGINT, lambda *a: seen.append(1))
        k = spin()
        x = np.linspace(-3, 3, 64 * 300).astype(np.float32)
        k(x[:64], 1)
        print("READY", flush=True)
        y = k(x, 10**6)  # 300 blocks of about 2 ms
        print("DONE", len(seen), bool((y == np.float32(2.0)).all()), flush=True)
    ''', cache)
    assert p.stdout.readline().strip() == "READY"
    time.sleep(0.2)
    os.kill(p.pid, signal.SIGINT)
    line = p.stdout.readline().strip()
    _finish(p)
    assert line == "DONE 1 True", (line, p.stderr.read())


def test_sigint_stops_a_kernel_whose_tiles_run_on_the_big_stack_thread(tmp_path, cache):
    # Tiles past 1 MiB run on the big-stack thread; the main thread waits there and polls.
    p = _child(tmp_path, '''
        @tw.jit(out_idx=[-1])
        def big():
            @T.prim_func
            def big(X: T.Tensor((M,), "float32"), reps: T.int32, Y: T.Tensor((M,), "float32")):
                with T.Kernel(T.ceildiv(M, 64)) as bx:
                    pad = T.alloc_fragment((300000,), "float32")  # 1.2 MB of tiles
                    acc = T.alloc_fragment((64,), "float32")
                    for i in T.Parallel(64):
                        acc[i] = X[bx * 64 + i] if bx * 64 + i < M else 0.0
                    for r in T.serial(reps):
                        for i in T.Parallel(64):
                            acc[i] = acc[i] * 0.5 + 1.0
                    pad[bx % 300000] = acc[0]
                    for i in T.Parallel(64):
                        if bx * 64 + i < M:
                            Y[bx * 64 + i] = acc[i] + pad[bx % 300000] * 0.0
            return big
        k = big()
        small = np.linspace(-3, 3, 70).astype(np.float32)
        k(small, 1)
        print("READY", flush=True)
        try:
            k(np.ones(64 * 20000, np.float32), 10**6)
            print("FINISHED", flush=True)
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
        np.save(sys.argv[0] + ".out.npy", k(small, 4))
    ''', cache)
    assert p.stdout.readline().strip() == "READY", p.stderr.read()
    time.sleep(0.3)
    t0 = time.time()
    os.kill(p.pid, signal.SIGINT)
    line = p.stdout.readline().strip()
    assert line == "INTERRUPTED", (line, p.stderr.read() if not line else "")
    assert time.time() - t0 < 5, "the kernel ran on 5 s after SIGINT"
    _finish(p)
    assert p.returncode == 0, p.stderr.read()
    np.testing.assert_array_equal(np.load(str(tmp_path / "child.py.out.npy")),
                                  _expected(np.linspace(-3, 3, 70).astype(np.float32), 4))


def test_a_signal_handler_that_calls_a_kernel_during_a_launch_is_a_located_error(tmp_path, cache):
    # The handler runs between the launch's blocks, on the thread that holds the launch: a kernel called
    # there would wait for that launch forever. It is a TilewrightError, raised by the interrupted call.
    p = _child(tmp_path, '''
        import signal
        k = spin()
        x = np.linspace(-3, 3, 64 * 20000).astype(np.float32)
        k(x[:64], 1)
        signal.signal(signal.SIGINT, lambda *a: k(x[:64], 1))
        print("READY", flush=True)
        try:
            k(x, 10**6)
            print("FINISHED", flush=True)
        except tw.TilewrightError as e:
            print("ERROR", "while this thread runs another kernel's launch" in str(e), flush=True)
        print("AFTER", bool((k(x[:64], 40) == np.float32(2.0)).all()), flush=True)
    ''', cache)
    assert p.stdout.readline().strip() == "READY", p.stderr.read()
    time.sleep(0.3)
    os.kill(p.pid, signal.SIGINT)
    line = p.stdout.readline().strip()
    assert line == "ERROR True", (line, p.stderr.read() if not line else "")
    assert p.stdout.readline().strip() == "AFTER True"
    _finish(p)
    assert p.returncode == 0, p.stderr.read()


def test_interrupt_compiles_stops_a_cpu_call_on_another_thread(tmp_path, cache):
    # No signal reaches other threads; _C.interrupt_compiles() (tw.precompile's and the autotuner's answer to
    # Ctrl-C) stops their waits, and now their cpu launches between blocks.
    p = _child(tmp_path, '''
        import threading
        from tilewright import _C
        k = spin()
        x = np.linspace(-3, 3, 64 * 20000).astype(np.float32)
        k(x[:64], 1)
        out = []
        def call():
            try:
                k(x, 10**6)
                out.append("FINISHED")
            except KeyboardInterrupt:
                out.append("INTERRUPTED")
        t = threading.Thread(target=call)
        t.start()
        time.sleep(0.3)
        t0 = time.time()
        _C.interrupt_compiles()
        t.join()
        print(out[0], time.time() - t0 < 5, bool((k(x[:64], 40) == np.float32(2.0)).all()), flush=True)
    ''', cache)
    _finish(p, 120)
    assert p.returncode == 0 and p.stdout.read().strip() == "INTERRUPTED True True", p.stderr.read()


def _alive(pid):
    """Whether `pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_process_killed_while_it_compiles_takes_its_compiler_along(tmp_path):
    # SIGKILL to a process whose compiler hangs: the compiler (the driver, which the parent-death signal
    # reaches) ends with it, the key's lock goes with the dead process, and the next process compiles
    # the same kernel (the same compiler command, now working) and gets the right result.
    started = tmp_path / "started"
    cxx = tmp_path / "hang-cxx.py"  # one process: the parent-death signal reaches the driver only
    cxx.write_text(textwrap.dedent(f'''\
        #!{sys.executable}
        import os, sys, time
        if not os.path.exists({str(tmp_path / "hang")!r}) or any(a in ("--version", "-dM") for a in sys.argv):
            os.execvp("g++", ["g++"] + sys.argv[1:])
        with open({str(started)!r} + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename({str(started)!r} + ".tmp", {str(started)!r})
        time.sleep(100000)
    '''))
    cxx.chmod(0o755)
    (tmp_path / "hang").mkdir()
    code = '''
        small = np.linspace(-3, 3, 77).astype(np.float32)
        np.save(sys.argv[0] + ".out.npy", spin()(small, 5))
        print("COMPILED", flush=True)
    '''
    p = _child(tmp_path, code, str(tmp_path / "cache"), {"TW_CXX": str(cxx)})
    end = time.time() + 120
    while not started.exists():
        assert time.time() < end and p.poll() is None, p.stderr.read() if p.poll() is not None else "no compile"
        time.sleep(0.05)
    compiler = int(started.read_text())
    assert _alive(compiler)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    end = time.time() + 5
    while _alive(compiler) and time.time() < end:
        time.sleep(0.05)
    alive = _alive(compiler)
    if alive:
        os.kill(compiler, signal.SIGKILL)
    assert not alive, "the compiler outlived the process killed while it compiled"
    (tmp_path / "hang").rmdir()
    q = _child(tmp_path, code, str(tmp_path / "cache"), {"TW_CXX": str(cxx)})
    _finish(q, 120)
    assert q.returncode == 0 and q.stdout.read().strip() == "COMPILED", q.stderr.read()
    np.testing.assert_array_equal(np.load(str(tmp_path / "child.py.out.npy")),
                                  _expected(np.linspace(-3, 3, 77).astype(np.float32), 5))
