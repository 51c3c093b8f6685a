"""Session 31 reliability hunt: concurrency, interruption and the simulator as a service (h-rel31).
Findings F1.. of /work/rel31-findings.md (docs/testing.md "Session 31: concurrency, interruption and the
simulator as a service (h-rel31)"). Attempts that could crash or hang run in child processes, with timeouts."""
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNEL = textwrap.dedent('''
    import os, sys, time
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

# A compiler that hangs (TW_CXX): `--version` and the -march probe run g++; the first compile takes
# SLOW seconds when MARK can be made, every other one (or all, without MARK) sleeps "forever".
HANGING_CXX = textwrap.dedent('''\
    #!/bin/bash
    for a in "$@"; do case "$a" in --version|-dM) exec g++ "$@";; esac; done
    if [ -n "$MARK" ] && mkdir "$MARK" 2>/dev/null; then sleep "${SLOW:-3}"; exec g++ "$@"; fi
    [ -n "$STARTED" ] && mkdir -p "$STARTED"
    sleep 100000
''')


def _script(tmp_path, code, name="child.py"):
    script = tmp_path / name  # a file: the front end reads the kernel's source
    script.write_text(KERNEL + textwrap.dedent(code))
    return script


def _run(tmp_path, code, env, timeout=300):
    r = subprocess.run([sys.executable, str(_script(tmp_path, code))], env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)  # a negative returncode is a signal
    return r.stdout


def _hanging_cxx(tmp_path):
    cxx = tmp_path / "hanging-cxx.sh"
    cxx.write_text(HANGING_CXX)
    cxx.chmod(0o755)
    return str(cxx)


def _wait_for(path, timeout=120):
    end = time.time() + timeout
    while not os.path.isdir(path):
        assert time.time() < end, f"{path} never appeared"
        time.sleep(0.05)


def _ended_within(proc, seconds):
    """Whether `proc` (started in its own session) ends within `seconds`; its whole group is killed after."""
    try:
        proc.wait(timeout=seconds)
        ended = True
    except subprocess.TimeoutExpired:
        ended = False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the hanging compiler's processes too
    proc.wait()
    return ended


def test_f1_a_compile_whose_cache_entry_another_process_evicts_loads_its_own_library(tmp_path):
    # F1: between publishing a compiled library and loading it from the cache, another process (a
    # `tilewright cache prune`, a small TW_CACHE_MAX_BYTES) may evict the entry: the compile failed with
    # "the cache entry ... was evicted by another process before it could be loaded; raise TW_CACHE_MAX_BYTES"
    # (6 of 47 compiles beside a prune loop). Made deterministic: the usage index is held locked (a stopped
    # process), so the publish waits 5 s and logs a warning, whose handler evicts every entry right then.
    out = _run(tmp_path, '''
        import fcntl, glob, logging, shutil
        x = np.arange(5, dtype=np.float32)
        axpb(0.0, 0.0)(x)  # makes the cache and its usage index
        kernels = tw.cache_info()["disk"]["dir"]
        fd = os.open(os.path.join(kernels, ".usage"), os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)

        class Evict(logging.Handler):
            def emit(self, record):
                if "usage index" in record.getMessage():
                    for d in glob.glob(os.path.join(kernels, "??", "*")):
                        shutil.rmtree(d)
                    print("EVICTED")

        logging.getLogger("tilewright").addHandler(Evict())
        try:
            k = axpb(2.0, 1.0)
            print("F1", k(x).tolist(), k(x[:2]).tolist())
        except tw.TilewrightError as e:
            print("F1 error", e.message)
    ''', {**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache"), "TW_PROGRESS": "0"})
    assert "EVICTED" in out and "F1 [1.0, 3.0, 5.0, 7.0, 9.0] [1.0, 3.0]" in out, out


def test_f2_export_of_an_empty_or_relative_module_name_is_a_located_error(tmp_path, capsys):
    # F2: `tilewright export '' -o DIR` leaked ValueError "Empty module name"; '..x' a TypeError.
    from tilewright import deploy
    for source in ("", "..x"):
        assert deploy.cli_export([source, "-o", str(tmp_path / "out")]) == 1
        err = capsys.readouterr().err
        assert f"cannot import {source!r}" in err and "hint: pass FILE.py[:NAME]" in err, err
    assert not (tmp_path / "out").exists()


def test_f3_ctrl_c_during_an_autotune_sweep_stops_its_workers(tmp_path):
    # F3: SIGINT to `tilewright tune` while its spawned workers compile waited for every configuration
    # queued (cancel_futures alone is not enough: a pool hands each worker one task ahead); with a
    # compiler that hangs, forever. The sweep now ends its workers. Here the first compile takes 3 s and
    # every other one hangs.
    (tmp_path / "tuned.py").write_text(textwrap.dedent('''
        import tilewright as tw
        import tilewright.language as T

        @tw.autotune(configs=[tw.Config(block=b) for b in (32, 64, 128, 256)], key=["n"])
        @tw.jit(out_idx=[-1])
        def add_one(n, block=128):
            @T.prim_func
            def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
                with T.Kernel(T.ceildiv(n, block)) as bx:
                    t = T.alloc_fragment((block,), "float32")
                    T.copy(A[bx * block], t)
                    for i in T.Parallel(block):
                        t[i] = t[i] + 1.0
                    T.copy(t, B[bx * block])
            return main
    '''))
    mark = str(tmp_path / "first-compile")
    env = {**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache"), "TW_CXX": _hanging_cxx(tmp_path), "SLOW": "3",
           "MARK": mark}
    p = subprocess.Popen([sys.executable, "-m", "tilewright", "tune", f"{tmp_path}/tuned.py:add_one", "4097"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    _wait_for(mark)
    time.sleep(1)
    os.kill(p.pid, signal.SIGINT)
    ended = _ended_within(p, 30)
    # The compilers run in their own process groups (intr31): a worker ended by SIGTERM leaves its compiler
    # to finish alone (a real one does; this one hangs, so the test ends it).
    for pid, _ in _running(str(tmp_path)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(int(pid)), signal.SIGKILL)
    assert ended, "the sweep went on 30 s after SIGINT"
    assert p.returncode == -signal.SIGINT, p.returncode  # KeyboardInterrupt, as Python ends on Ctrl-C


def test_f4_cache_prune_and_list_while_other_processes_evict(tmp_path):
    # F4: two `tilewright cache prune --max-bytes 0` and a `cache list` while entries are published: 95
    # exceptions in 3 s (FileNotFoundError of an entry or its files, "ValueError: max() arg is an empty
    # sequence"): prune removed entries in place with its own loop, list assumed no entry vanishes.
    # In a child: the cache directory is read at import.
    out = _run(tmp_path, '''
        import contextlib, io, threading
        from tilewright import _C, cli
        root = os.path.join(_C.cache_dir(), "kernels")
        os.makedirs(root, mode=0o700, exist_ok=True)
        errors, end = [], time.time() + 2.0

        def loop(args):
            while time.time() < end:
                try:
                    assert cli.main(args) == 0
                except BaseException as e:
                    errors.append(f"{args[1]}: {type(e).__name__}: {e}")

        threads = [threading.Thread(target=loop, args=(a,)) for a in
                   (["cache", "prune", "--max-bytes", "0"], ["cache", "prune", "--max-bytes", "0"], ["cache", "list"])]
        with contextlib.redirect_stdout(io.StringIO()):
            for t in threads:
                t.start()
            i = 0
            while time.time() < end:  # entries published as the runtime does: made aside, renamed into place
                key = f"{0x31 << 240 | i:064x}"
                tmp = os.path.join(root, ".tmp-" + key)
                os.makedirs(tmp)
                for name in ("kernel.so", "manifest"):
                    with open(os.path.join(tmp, name), "wb") as f:
                        f.write(b"x" * 100)
                while True:  # a prune removes an emptied prefix directory: made again (as a publish does)
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(os.path.join(root, key[:2]))
                    try:
                        os.rename(tmp, os.path.join(root, key[:2], key))
                        break
                    except FileNotFoundError:
                        pass
                i += 1
            for t in threads:
                t.join()
        print("F4", i > 50, sorted(set(errors))[:5])
    ''', {**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache")})
    assert "F4 True []" in out, out


def _running(word):
    """The processes whose command line holds `word`."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
            if word in cmd and not zombie:
                out.append((pid, cmd))
    return out


def test_f5_sigint_to_the_process_while_its_compiler_hangs(tmp_path):
    # SIGINT to the process alone (a notebook's interrupt, `kill -INT`, a supervisor; a terminal's Ctrl-C
    # too, now that the compiler runs in its own process group): the compile's wait runs Python's signal
    # handlers, ends the compiler's group and raises KeyboardInterrupt (intr31). The key's lock is
    # released and the temporaries removed: the same kernel then compiles (the compiler works the
    # second time).
    started = str(tmp_path / "started")
    cxx = tmp_path / "hang-once-cxx.sh"
    cxx.write_text('#!/bin/bash\n[ -d "$STARTED" ] && exec g++ "$@"\n'
                   'for a in "$@"; do case "$a" in --version|-dM) exec g++ "$@";; esac; done\n'
                   'mkdir -p "$STARTED.tmp"\nsleep 100000 &\necho $! > "$STARTED.tmp/pid"\nmv "$STARTED.tmp" "$STARTED"\n'
                   'wait\n')
    cxx.chmod(0o755)
    p = subprocess.Popen([sys.executable, str(_script(tmp_path, '''
                             x = np.ones(3, np.float32)
                             try:
                                 axpb(3.0, 1.0)(x)
                             except KeyboardInterrupt:
                                 print("INTERRUPTED", flush=True)
                             print("AFTER", axpb(3.0, 1.0)(x).tolist(), flush=True)
                         '''))],
                         env={**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache"), "TW_CXX": str(cxx),
                              "STARTED": started},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_for(started)
    # the hung compile's own processes (the second compile, after the interrupt, runs the same script
    # until it execs g++: only these PIDs must be gone)
    first = {pid for pid, _ in _running(str(cxx))}
    os.kill(p.pid, signal.SIGINT)
    t0 = time.time()
    line = p.stdout.readline().strip()
    assert line == "INTERRUPTED", (line, p.stderr.read() if not line else "")
    assert time.time() - t0 < 8, "still compiling 8 s after SIGINT"
    sleeper = (tmp_path / "started" / "pid").read_text().strip()

    def hung():
        return first & {pid for pid, _ in _running(str(cxx))}

    end = time.time() + 5
    while (hung() or sleeper in [pid for pid, _ in _running("sleep")]) and time.time() < end:
        time.sleep(0.05)
    assert first and not hung(), "the hung compiler was not ended"
    assert sleeper not in [pid for pid, _ in _running("sleep")], "the hung compiler's child was not ended"
    assert p.stdout.readline().strip() == "AFTER [4.0, 4.0, 4.0]"
    assert _ended_within(p, 120)
    assert p.returncode == 0, p.stderr.read()
    assert not [f for f in (tmp_path / "cache" / "tmp").rglob("*") if f.suffix in (".cpp", ".so")], "temporaries left"


def test_ctrl_c_during_precompile_ends_its_pools_hung_compilers(tmp_path):
    # No signal reaches tw.precompile's pool threads: the interrupted main thread ends their compilers
    # (_C.interrupt_compiles, intr31). Before, the pool's shutdown waited for the hung compilers forever.
    started = str(tmp_path / "started")
    cxx = _hanging_cxx(tmp_path)
    p = subprocess.Popen([sys.executable, str(_script(tmp_path, '''
                             try:
                                 tw.precompile([(axpb, (1.0, 2.0)), (axpb, (3.0, 4.0))], workers=2, progress=False)
                             except KeyboardInterrupt:
                                 print("INTERRUPTED", flush=True)
                         '''))],
                         env={**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache"), "TW_CXX": cxx, "STARTED": started},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_for(started)
    time.sleep(0.5)
    os.kill(p.pid, signal.SIGINT)
    ended = _ended_within(p, 8)
    left = _running(cxx)
    for pid, _ in left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(int(pid)), signal.SIGKILL)
    assert ended, "precompile still waiting 8 s after SIGINT"
    assert p.stdout.read().strip() == "INTERRUPTED", p.stderr.read()
    assert not left, left


def test_f6_ctrl_c_during_a_long_simulation(tmp_path):
    # 48 blocks x 10^6 vector steps: about 80 s of simulation on the 2-core Zen 4. SIGINT stops the
    # simulation (timing-only profile, then a functional call) within 0.1 s of simulated work (intr31).
    script = _script(tmp_path, '''
        @tw.jit(out_idx=[-1], target="ascend910b")
        def spin(reps):
            @T.prim_func
            def spin(X: T.Tensor((48 * 64,), "float32"), Y: T.Tensor((48 * 64,), "float32")):
                with T.Kernel(48) as bx:
                    xs = T.alloc_shared((64,), "float32")
                    T.copy(X[bx * 64], xs)
                    for j in T.serial(reps):
                        for i in T.Parallel(64):
                            xs[i] = xs[i] * 2.0
                    T.copy(xs, Y[bx * 64])
            return spin

        k = spin(1000000)
        x = np.ones(48 * 64, np.float32)
        for what in ("profile", "call"):
            print("READY", flush=True)
            try:
                k.profile(x, functional=False) if what == "profile" else k(x)
            except KeyboardInterrupt:
                print("INTERRUPTED", what, flush=True)
        print("AFTER", spin(3)(x)[:2].tolist(), flush=True)  # the next simulation runs
    ''')
    p = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache")},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    for what in ("profile", "call"):
        assert p.stdout.readline().strip() == "READY"
        time.sleep(1)
        t0 = time.time()
        os.kill(p.pid, signal.SIGINT)
        line = p.stdout.readline().strip()
        assert line == f"INTERRUPTED {what}", (line, p.stderr.read() if not line else "")
        assert time.time() - t0 < 4, "still simulating 4 s after SIGINT"
    assert p.stdout.readline().strip() == "AFTER [8.0, 8.0]"
    assert _ended_within(p, 30)
    assert p.returncode == 0


def test_progress_line_of_a_step_ended_by_ctrl_c_says_interrupted(monkeypatch):
    # A compile interrupted by Ctrl-C raises KeyboardInterrupt when it returns, compiled and kept: its progress
    # line said "failed in 4.8 s".
    import io
    from tilewright.log import progress
    monkeypatch.setattr("tilewright.log.SLOW_SECONDS", 0.01)
    for exc, word in ((KeyboardInterrupt, "interrupted"), (ValueError, "failed")):
        out = io.StringIO()
        with pytest.raises(exc), progress("compiling kernel 'x' for cpu", stream=out, enabled=True):
            time.sleep(0.2)
            raise exc()
        assert f"compiling kernel 'x' for cpu ... {word} in " in out.getvalue(), out.getvalue()
