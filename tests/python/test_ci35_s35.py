"""Session 35 (h-ci35): the gemm runtime library is built as up to one translation unit per CPU,
compiled in parallel threads (src/runtime/cpu_executable.cpp, build_runtime_library). Python's
signal check runs on the main thread only, so an interrupt seen by the main thread's compile must
end the other threads' compilers too (a cancel flag), or the process waits for them."""
import os
import signal
import subprocess
import sys
import textwrap
import time

from test_gemm_runtime_library import CHILD  # a gemm kernel compiled and checked in a child


def test_an_interrupt_ends_every_compile_of_the_runtime_library(tmp_path):
    # A compiler that hangs on every part of the runtime library (and is g++ for everything else):
    # SIGINT to the process while all its parts hang ends each of them and raises KeyboardInterrupt.
    started = tmp_path / "started"
    started.mkdir()
    cxx = tmp_path / "hang-parts-cxx.py"
    cxx.write_text(textwrap.dedent(f'''\
        #!{sys.executable}
        import os, sys, time
        if not any(a.startswith("-DTW_GEMM_PARTS=") for a in sys.argv):
            os.execvp("g++", ["g++"] + sys.argv[1:])
        open(os.path.join({str(started)!r}, str(os.getpid())), "w").close()
        time.sleep(600)
    '''))
    cxx.chmod(0o700)
    (tmp_path / "child.py").write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update(TW_CACHE_DIR=str(tmp_path / "cache"), TW_CXX=str(cxx))
    p = subprocess.Popen([sys.executable, str(tmp_path / "child.py"), "float32", "32", "32", "32"], env=env,
                         stderr=subprocess.PIPE, text=True)
    try:
        groups = min(5, len(os.sched_getaffinity(0)))
        deadline = time.monotonic() + 300  # a hang detector, not a timing
        while len(os.listdir(started)) < groups and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(os.listdir(started)) == groups, (os.listdir(started), p.poll())
        p.send_signal(signal.SIGINT)
        err = p.communicate(timeout=120)[1]  # without the cancel flag: waits for the other parts' 600 s
    finally:
        p.kill()
        p.wait()
    assert "KeyboardInterrupt" in err, err[-2000:]
    for pid in map(int, os.listdir(started)):  # every hanging compiler was ended and reaped
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        assert not alive, pid
