"""Session 23 service fixes (h-svc11; hunt11b's findings F21 and F22, /work/hunt11b-findings.md):
a fleet of processes tuning one @tw.autotune key (or measuring the machine peaks) at once does
it once, the others wait for the stored result (the kernel cache's key lock, a flock the kernel
drops when its holder dies); TW_CACHE_DISABLE=1's private directory of a process killed by
SIGTERM / SIGKILL is removed by the next process that makes one, and nothing else is."""
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest

import tilewright as tw
import tilewright.autotune  # noqa: F401 - the module (tw.autotune is the decorator)
from tilewright import _C

at = sys.modules["tilewright.autotune"]
PY = sys.executable

TUNE_MODULE = textwrap.dedent("""
    import tilewright as tw
    import tilewright.language as T

    @tw.autotune(configs=[tw.Config(block=64), tw.Config(block=256)], key=["n"], executor="inline", warmup=2, rep=5)
    @tw.jit(out_idx=[-1])
    def svc_add_one(n, block=128):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block)) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < n:
                        B[bx * block + i] = A[bx * block + i] + 1.0
        return main
""")

# Waits for the file `go` (the test holds the key's lock by then), then tunes; the peaks are
# counted by wrapping their measurement.
TUNE_RUN = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import tilewright.autotune
    at = sys.modules["tilewright.autotune"]
    measure = at._measure_peaks
    def counted(path):
        print("measuring peaks", flush=True)
        return measure(path)
    at._measure_peaks = counted
    import tw_svc_s23_tune as m
    go = sys.argv[2]
    open(go + "." + str(os.getpid()), "w").close()
    while not os.path.exists(go):
        time.sleep(0.01)
    k = m.svc_add_one(1000)
    assert (k(np.zeros(1000, np.float32)) == 1).all()
    print("best", m.svc_add_one.best_config, flush=True)
""")


def _tune_module(tmp_path):
    (tmp_path / "tw_svc_s23_tune.py").write_text(TUNE_MODULE)


def _start(tmp_path, env, n):
    script = tmp_path / "run.py"
    script.write_text(TUNE_RUN)
    go = tmp_path / "go"
    return [subprocess.Popen([PY, str(script), str(tmp_path), str(go)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env) for _ in range(n)], go


def _wait_started(tmp_path, procs):
    import time
    t0 = time.time()
    while len(list(tmp_path.glob("go.*"))) < len(procs):
        assert time.time() - t0 < 300 and all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.02)


def test_three_processes_tuning_one_key_at_once_sweep_and_measure_peaks_once(tmp_path):
    """F21: a fresh cache, three processes on one key released together: one sweep, one peak
    measurement, every process ends with the same stored best configuration."""
    _tune_module(tmp_path)
    env = dict(os.environ, TW_CACHE_DIR=str(tmp_path / "cache"))
    procs, go = _start(tmp_path, env, 3)
    _wait_started(tmp_path, procs)
    go.write_text("")
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(o.count("tuning 'svc_add_one'") for o in outs) == 1, outs
    assert sum(o.count("measuring peaks") for o in outs) == 1, outs
    bests = {line for o in outs for line in o.splitlines() if line.startswith("best ")}
    assert len(bests) == 1 and bests.pop() in ("best block=64", "best block=256"), outs


def test_a_process_waits_for_the_sweep_under_way_and_loads_its_result(tmp_path):
    """F21: while this process holds the key (sweeping), another one says it waits, then loads
    the configuration stored here without sweeping itself."""
    _tune_module(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        import tw_svc_s23_tune as m
    finally:
        sys.path.remove(str(tmp_path))
    tuner = m.svc_add_one
    path = tuner._store_path({"n": 1000}, "cpu")
    path.unlink(missing_ok=True)
    env = dict(os.environ, TW_CACHE_DIR=_C.cache_dir())  # this process's tuning cache
    with tuner._locked(path):
        procs, go = _start(tmp_path, env, 1)
        _wait_started(tmp_path, procs)
        go.write_text("")
        line = procs[0].stdout.readline()
        while line and "waiting for another process's sweep of 'svc_add_one'" not in line:
            line = procs[0].stdout.readline()
        assert line, procs[0].communicate()
        best = tuner.tune(1000)  # holding the lock already
    out = procs[0].communicate(timeout=300)[0]
    assert procs[0].returncode == 0, out
    assert "tuning 'svc_add_one'" not in out, out
    assert f"best {best!r}" in out, out
    path.unlink(missing_ok=True)


def test_the_key_lock_of_a_killed_process_blocks_nobody(tmp_path):
    """A holder killed with SIGKILL (its lock file stays, nothing unwound) never blocks: the
    kernel dropped its flock. A live holder does block (a bounded wait, then not held)."""
    d = tmp_path / "tune"
    d.mkdir(mode=0o700)
    holder = subprocess.Popen([PY, "-c", textwrap.dedent(f"""
        import time
        from tilewright import _C
        lock = _C.key_lock({str(d)!r}, "peaks-0123456789abcdef")
        print("held", lock.held, flush=True)
        time.sleep(300)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held True"
        assert not _C.key_lock(str(d), "peaks-0123456789abcdef", 0.05).held
    finally:
        holder.kill()
        holder.wait()
    assert (d / ".locks" / "peaks-0123456789abcdef").exists()  # left behind by the killed holder
    lock = _C.key_lock(str(d), "peaks-0123456789abcdef", 0.0)
    assert lock.held
    lock.release()
    assert not (d / ".locks" / "peaks-0123456789abcdef").exists()


def test_the_key_lock_refuses_a_bad_key(tmp_path):
    with pytest.raises(Exception, match="key"):
        _C.key_lock(str(tmp_path), "../x", 0.0)


# ---------------------------------------------------------------------------------------------
# F22: TW_CACHE_DISABLE=1's private directory

COMPILE = textwrap.dedent("""
    import sys, time
    import numpy as np
    import tilewright as tw
    import tilewright.language as T

    @tw.jit(out_idx=[-1])
    def twice():
        @T.prim_func
        def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(4):
                    B[i] = A[i] * 2.0
        return main

    assert (twice()(np.ones(4, np.float32)) == 2).all()
    print("ready", flush=True)
    if sys.argv[1] == "wait":
        time.sleep(300)
""")


def _private_env(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(mode=0o700, exist_ok=True)
    script = tmp_path / "compile.py"
    script.write_text(COMPILE)
    return dict(os.environ, TMPDIR=str(tmpdir), TW_CACHE_DISABLE="1"), tmpdir, script


def _private_dirs(tmpdir):
    return sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("tilewright-"))


def _waiting(script, env):
    p = subprocess.Popen([PY, str(script), "wait"], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "ready", p.communicate()
    return p


def _run_once(script, env):
    r = subprocess.run([PY, str(script), "exit"], capture_output=True, text=True, timeout=300, env=env)
    assert r.stdout.strip() == "ready", r.stderr[-3000:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_private_directory_of_a_killed_process_is_removed_by_the_next(tmp_path, sig):
    env, tmpdir, script = _private_env(tmp_path)
    p = _waiting(script, env)
    try:
        left = _private_dirs(tmpdir)
        assert len(left) == 1 and (tmpdir / left[0] / ".owner").is_file(), left
        p.send_signal(sig)
        p.wait(timeout=60)
    finally:
        p.kill()
    assert _private_dirs(tmpdir) == left  # the killed process removed nothing
    _run_once(script, env)
    assert _private_dirs(tmpdir) == []


def test_the_private_directory_of_a_live_process_is_kept(tmp_path):
    """A second process leaves the first one's directory alone while it lives (also a forked
    child of it: the child inherits the lock), and removes it once it is gone."""
    env, tmpdir, script = _private_env(tmp_path)
    p = _waiting(script, env)
    try:
        mine = _private_dirs(tmpdir)
        _run_once(script, env)
        assert _private_dirs(tmpdir) == mine
    finally:
        p.kill()
        p.wait()
    _run_once(script, env)
    assert _private_dirs(tmpdir) == []


def test_only_private_directories_of_this_user_are_removed(tmp_path):
    """A directory of the right name but with a link, a wide mode, no `.owner`, or an `.owner`
    that is a link is not removed, nor is anything a link points to."""
    env, tmpdir, script = _private_env(tmp_path)
    target = tmp_path / "precious"
    target.mkdir(mode=0o700)
    (target / ".owner").write_text("")
    (target / "data").write_text("keep")
    (tmpdir / "tilewright-link01").symlink_to(target)  # a link to a directory with a free .owner
    wide = tmpdir / "tilewright-wide01"
    wide.mkdir()
    wide.chmod(0o755)
    (wide / ".owner").write_text("")
    bare = tmpdir / "tilewright-bare01"  # no .owner: an older Tilewright's, or not ours
    bare.mkdir(mode=0o700)
    (bare / "f").write_text("")
    owner_link = tmpdir / "tilewright-olink1"
    owner_link.mkdir(mode=0o700)
    (owner_link / ".owner").symlink_to(target / ".owner")
    named = tmpdir / "tilewright-toolong"  # not mkdtemp's six characters
    named.mkdir(mode=0o700)
    (named / ".owner").write_text("")
    _run_once(script, env)
    assert _private_dirs(tmpdir) == ["tilewright-bare01", "tilewright-link01", "tilewright-olink1",
                                     "tilewright-toolong", "tilewright-wide01"]
    assert (target / "data").read_text() == "keep" and (target / ".owner").exists()
    assert (tmpdir / "tilewright-link01").is_symlink()


def test_a_forked_child_keeps_its_parents_private_directory(tmp_path):
    """The owner lock is inherited by fork: a child still using the directory keeps it while the
    parent is killed; once the child is gone the next process removes it."""
    env, tmpdir, script = _private_env(tmp_path)
    fork_script = tmp_path / "fork.py"
    fork_script.write_text(COMPILE.replace('print("ready", flush=True)', textwrap.dedent("""\
        import os
        child = os.fork()
        if child == 0:
            time.sleep(300)
            os._exit(0)
        print("child", child, flush=True)
        print("ready", flush=True)""")))
    p = subprocess.Popen([PY, str(fork_script), "wait"], stdout=subprocess.PIPE, text=True, env=env)
    first = p.stdout.readline().split()
    assert first[:1] == ["child"] and p.stdout.readline().strip() == "ready", (first, p.communicate())
    child = int(first[1])
    left = _private_dirs(tmpdir)
    try:
        p.kill()
        p.wait()
        _run_once(script, env)
        assert _private_dirs(tmpdir) == left  # the child holds it
    finally:
        p.kill()
        os.kill(child, signal.SIGKILL)
    import time
    for _ in range(500):  # the child is reparented (not ours to reap): wait until it is gone
        if not pathlib.Path(f"/proc/{child}").exists() or \
                pathlib.Path(f"/proc/{child}/stat").read_text().split(") ")[1].startswith("Z"):
            break
        time.sleep(0.01)
    _run_once(script, env)
    assert _private_dirs(tmpdir) == []
