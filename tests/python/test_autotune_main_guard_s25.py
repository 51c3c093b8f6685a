"""@tw.autotune called from a script's top level (hunt13 F4): the default executor's spawned
workers import the main script again (Python's spawn start method); a script without the
`if __name__ == "__main__":` guard used to make each worker start its own sweep and wait for its
parent's key lock (a hang). Now such a worker exits at once and the parent raises one clear
TilewrightError at the user's call line; guarded scripts, `python -c`, runpy and exec'd code
(no __file__) tune and compute the right answer. Every script runs in a subprocess with a timeout
and a kernel cache of its own."""
import multiprocessing
import os
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest

import tilewright as tw
import tilewright.autotune  # noqa: F401 - the module (tw.autotune is the decorator)

import tune_kernels

at = sys.modules["tilewright.autotune"]
HERE = pathlib.Path(__file__).resolve().parent
TIMEOUT = 240  # a hang was the bug: well past a sweep's seconds, well below the lock's 10-minute bound

# the tuned call and a check of its answer against numpy (4097: a tail block)
CALL = textwrap.dedent("""\
    import numpy as np
    import tilewright as tw
    import tune_kernels
    def run():
        k = tune_kernels.add_one(4097, target="ascend910b")
        x = tw.testing.randn((4097,), seed=3)
        tw.testing.assert_close(k(x), x + 1)
        print("RESULT-OK", tune_kernels.add_one.best_config)
    """)

# the tuned kernel defined in the script itself (workers import it from the script)
OWN = textwrap.dedent("""\
    import numpy as np
    import tilewright as tw
    import tilewright.language as T
    @tw.autotune(configs=[tw.Config(block=64), tw.Config(block=512)], key=["n"])
    @tw.jit(out_idx=[-1])
    def twice(n, block=64):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block)) as bx:
                t = T.alloc_fragment((block,), "float32")
                T.copy(A[bx * block], t)
                for i in T.Parallel(block):
                    t[i] = t[i] * 2.0
                T.copy(t, B[bx * block])
        return main
    def run():
        k = twice(1000, target="ascend910b")
        x = tw.testing.randn((1000,), seed=5)
        tw.testing.assert_close(k(x), x * 2)
        print("RESULT-OK", twice.best_config)
    """)

GUARDED = 'if __name__ == "__main__":\n    run()\n'
UNGUARDED = "run()  # the tuned call at the top level\n"


def _run(args, tmp_path, cwd=None):
    env = dict(os.environ, TW_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, *args], env=env, cwd=cwd or tmp_path, capture_output=True, text=True,
                       timeout=TIMEOUT)
    return p, time.monotonic() - t0


def _script(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _assert_guard_error(p, script, line):
    assert p.returncode != 0, p.stdout + p.stderr
    err = p.stderr
    assert "RESULT-OK" not in p.stdout
    assert f"{script}:{line}: error: autotune" in err, err  # at the user's call line
    assert "re-ran" in err and "if __name__ == \"__main__\":" in err and "executor=\"inline\"" in err, err
    # one error, no pool traceback, no wait for "another process" (its own parent)
    assert "BrokenProcessPool" not in err and "waiting for another process" not in err, err
    assert err.count("error: autotune") == 1, err


def test_unguarded_script_calling_an_imported_tuner_fails_fast_and_clearly(tmp_path):
    script = _script(tmp_path, "unguarded.py", CALL + UNGUARDED)
    p, took = _run([str(script)], tmp_path)
    _assert_guard_error(p, script, CALL.count("\n") + 1)
    assert took < TIMEOUT


def test_guarded_script_tunes_and_is_correct(tmp_path):
    script = _script(tmp_path, "guarded.py", CALL + GUARDED)
    p, _ = _run([str(script)], tmp_path)
    assert p.returncode == 0 and "RESULT-OK" in p.stdout, p.stdout + p.stderr
    assert "tuning 'add_one'" in p.stderr and "best:" in p.stderr


def test_kernel_defined_in_the_script(tmp_path):
    good = _script(tmp_path, "own_guarded.py", OWN + GUARDED)
    p, _ = _run([str(good)], tmp_path)
    assert p.returncode == 0 and "RESULT-OK" in p.stdout, p.stdout + p.stderr
    bad = _script(tmp_path, "own_unguarded.py", OWN.replace("1000", "1001") + UNGUARDED)
    p, _ = _run([str(bad)], tmp_path)
    _assert_guard_error(p, bad, OWN.count("\n") + 1)


def test_python_dash_c_tunes_inline(tmp_path):
    # no __file__: nothing a spawned worker could import; the sweep runs in the process
    p, _ = _run(["-c", CALL + UNGUARDED], tmp_path)
    assert p.returncode == 0 and "RESULT-OK" in p.stdout, p.stdout + p.stderr


def test_notebook_like_exec_without_file(tmp_path):
    # a cell's code exec'd in a namespace named __main__ by a driver without __file__, its source
    # registered in linecache as IPython does (the kernel's source is read from there)
    cell = OWN + UNGUARDED
    driver = (f"import linecache\nsrc = {cell!r}\n"
              f"linecache.cache['<cell 1>'] = (len(src), None, src.splitlines(True), '<cell 1>')\n"
              f"exec(compile(src, '<cell 1>', 'exec'), {{'__name__': '__main__'}})\n")
    p, _ = _run(["-c", driver], tmp_path)
    assert p.returncode == 0 and "RESULT-OK" in p.stdout, p.stdout + p.stderr


def test_runpy(tmp_path):
    good = _script(tmp_path, "rp_guarded.py", CALL + GUARDED)
    p, _ = _run(["-c", f"import runpy; runpy.run_path({str(good)!r}, run_name='__main__')"], tmp_path)
    assert p.returncode == 0 and "RESULT-OK" in p.stdout, p.stdout + p.stderr
    bad = _script(tmp_path, "rp_unguarded.py", CALL.replace("4097", "4099") + UNGUARDED)
    p, _ = _run(["-c", f"import runpy; runpy.run_path({str(bad)!r}, run_name='__main__')"], tmp_path)
    _assert_guard_error(p, bad, CALL.count("\n") + 1)


def test_a_tuners_worker_never_starts_a_sweep(monkeypatch, tmp_path):
    monkeypatch.setattr(at, "tune_dir", lambda: tmp_path / "tune")
    tuner = tw.autotune(configs=[tw.Config(block=64)], key=["n"], verbose=False)(tune_kernels.add_one.fn)
    monkeypatch.setattr(multiprocessing.current_process(), "name", f"{at._WORKER_NAME}-1")
    with pytest.raises(tw.TilewrightError, match="inside another sweep's worker process") as e:
        tuner(256, target="ascend910b")
    assert e.value.file == __file__  # the caller's line
    assert not (tmp_path / "tune").exists() or not list((tmp_path / "tune").glob("*.json"))


def test_a_sweep_lock_held_by_a_dead_process_is_taken_over(tmp_path):
    d = tmp_path / "tune"
    d.mkdir(mode=0o700)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""\
        import sys, time
        from tilewright import _C
        lock = _C.key_lock({str(d)!r}, "add_one-key", 0.0)
        print("held" if lock.held else "not held", flush=True)
        time.sleep(600)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        busy = tw._C.key_lock(str(d), "add_one-key", 0.2)
        assert not busy.held  # alive: it holds the key
        holder.kill()  # dies holding it (no release): the kernel drops its flock
        holder.wait(timeout=30)
        t0 = time.monotonic()
        lock = tw._C.key_lock(str(d), "add_one-key", 30.0)
        assert lock.held and time.monotonic() - t0 < 5
        lock.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        holder.stdout.close()
