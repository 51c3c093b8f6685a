"""fork() while other threads use Tilewright: the stress harness (docs/testing.md, session 21).

Worker threads call a gemm kernel (through the gemm runtime library), small maps and a long map
(on the kernel thread pool), compile new kernels, hit the memory cache (tw.compile of the same
function, a tw.jit function), log at DEBUG through the "tilewright" logger and run an autotune
now and then, while the main thread forks again and again (os.fork and multiprocessing with
fork). Every child calls the kernels, checks them, compiles a new kernel and the one the
parent's compile thread was compiling at the fork (its cache lock maybe held then), and checks
them, within a timeout. A child still running at the timeout is a hang: its C++ stacks (gdb -batch, where gdb
is installed) and Python stacks (faulthandler) are written to --dump, then it is killed.

    python tests/python/fork_stress.py --forks 300 --seed 1 --dump /tmp/fork-dumps

Prints one line per fork (its exit status and how long it took) and a summary; exit status 0
when no child hung or failed.
tests/python/test_fork.py runs a small, fixed version of it."""
import argparse
import os
import sys

os.environ.setdefault("TW_NUM_THREADS", "2")  # read at import: the pool's workers must exist
# numpy's OpenBLAS shuts its threads down in its own fork handler, which deadlocked the parent
# here (main thread joining a BLAS worker that waits on its condition: OpenMathLib/OpenBLAS
# #5520, #2270); one BLAS thread keeps that out of what this harness measures.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import faulthandler  # noqa: E402
import logging  # noqa: E402
import multiprocessing  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tilewright as tw  # noqa: E402
import tilewright.language as T  # noqa: E402

N = 4096
X = np.arange(N, dtype=np.float32)


def scale(a):
    @T.prim_func
    def fork_scale(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(N // 256) as bx:
            for i in T.Parallel(256):
                Y[bx * 256 + i] = X[bx * 256 + i] * a
    return fork_scale


def gemm(M=64, Nn=64, K=64):
    @T.prim_func
    def fork_gemm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, Nn), "float32"),
                  C: T.Tensor((M, Nn), "float32")):
        with T.Kernel(Nn // 32, M // 32) as (bx, by):
            a = T.alloc_shared((32, 32), "float32")
            b = T.alloc_shared((32, 32), "float32")
            c = T.alloc_fragment((32, 32), "float32")
            T.clear(c)
            for k in T.serial(K // 32):
                T.copy(A[by * 32, k * 32], a)
                T.copy(B[k * 32, bx * 32], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * 32, bx * 32])
    return tw.compile(fork_gemm, out_idx=[-1])


def long_map(n=1 << 20, reps=16):
    @T.prim_func
    def fork_long(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(n // 1024) as bx:
            acc = T.alloc_fragment((1024,), "float32")
            for i in T.Parallel(1024):
                acc[i] = X[bx * 1024 + i]
            for r in T.serial(reps):
                for i in T.Parallel(1024):
                    acc[i] = acc[i] * 0.5 + 1.0
            for i in T.Parallel(1024):
                Y[bx * 1024 + i] = acc[i]
    return tw.compile(fork_long, out_idx=[-1])


@tw.jit(out_idx=[-1])
def jit_scale(a):
    return scale(a)


def check_scale(k, a):
    if not np.array_equal(k(X), X * np.float32(a)):
        raise AssertionError(f"scale({a}) gave a wrong result")


RNG = np.random.default_rng(0)
GA = RNG.standard_normal((64, 64)).astype(np.float32)
GB = RNG.standard_normal((64, 64)).astype(np.float32)
GWANT = GA.astype(np.float64) @ GB.astype(np.float64)


def check_gemm(k):
    got = k(GA, GB)
    if not np.allclose(got, GWANT, rtol=1e-4, atol=1e-4):  # f32 accumulation over K = 64
        raise AssertionError("gemm gave a wrong result")


ONES = np.ones(1 << 20, np.float32)
LONG_WANT = None


class Load:
    """The worker threads of the parent; `errors` collects what any of them raised."""

    def __init__(self, seed, autotune, log_pause):
        self.stop = threading.Event()
        self.log_pause = log_pause
        self.errors = []
        self.counts = {}
        self.seed = seed
        self.gemm = gemm()
        self.long = long_map()
        self.hit_prim = scale(3.0)
        self.autotune = autotune
        self.compiling = None  # the kernel the compile thread is compiling (or last compiled)
        global LONG_WANT
        LONG_WANT = self.long(ONES)
        fns = [self.gemm_calls, self.map_calls, self.long_calls, self.compiles, self.cache_hits, self.logs]
        if autotune:
            fns.append(self.tunes)
        self.threads = [threading.Thread(target=self._loop, args=(f,), daemon=True) for f in fns]

    def _loop(self, fn):
        i = 0
        try:
            while not self.stop.is_set():
                fn(i)
                i += 1
        except BaseException as e:  # noqa: BLE001 - reported by the harness
            self.errors.append(f"{fn.__name__}: {type(e).__name__}: {e}")
        self.counts[fn.__name__] = i

    def gemm_calls(self, i):
        check_gemm(self.gemm)

    def map_calls(self, i):
        check_scale(tw.compile(scale(2.0), out_idx=[-1]), 2.0)

    def long_calls(self, i):
        if not np.array_equal(self.long(ONES), LONG_WANT):
            raise AssertionError("long map gave a wrong result")

    def compiles(self, i):
        a = 1000.0 + self.seed * 100000 + i  # a new kernel every time (new for the disk cache too)
        self.compiling = a
        check_scale(tw.compile(scale(a), out_idx=[-1]), a)

    def cache_hits(self, i):
        check_scale(tw.compile(self.hit_prim, out_idx=[-1]), 3.0)
        a = float(4 + i % 3)
        check_scale(jit_scale(a), a)

    def logs(self, i):
        logging.getLogger("tilewright").debug("fork stress log line %d", i)
        time.sleep(self.log_pause)
        check_scale(jit_scale(5.0), 5.0)

    def tunes(self, i):
        time.sleep(0.5)
        n = 256 * (1 + i % 4)  # tuned once per size; later calls reuse the best config
        k = tuned(n)
        x = np.arange(n, dtype=np.float32)
        if not np.array_equal(k(x), x + 1):
            raise AssertionError("tuned kernel gave a wrong result")


@tw.autotune(configs=[tw.Config(block=64), tw.Config(block=128)], key=["n"], executor="inline", warmup=1, rep=2,
             verbose=False)
@tw.jit(out_idx=[-1])
def tuned(n, block=64):
    @T.prim_func
    def fork_tuned(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(n // block) as bx:
            for j in T.Parallel(block):
                Y[bx * block + j] = X[bx * block + j] + 1.0
    return fork_tuned


def child_work(index, seed, dump, timeout, compile_new):
    """What every child does: call the kernels it inherited, compile a new one; exit status 0."""
    f = open(os.path.join(dump, f"py-{os.getpid()}.txt"), "w")
    faulthandler.dump_traceback_later(timeout + 30, exit=True, file=f)  # after the parent's gdb dump
    check_gemm(LOAD.gemm)
    check_scale(jit_scale(4.0), 4.0)
    if not np.array_equal(LOAD.long(ONES), LONG_WANT):
        raise AssertionError("long map gave a wrong result in the child")
    if compile_new:
        a = -1000.0 - seed * 100000 - index  # new in this child
        check_scale(tw.compile(scale(a), out_idx=[-1]), a)
        if LOAD.compiling is not None:  # the one a thread of the parent was compiling at the fork
            check_scale(tw.compile(scale(LOAD.compiling), out_idx=[-1]), LOAD.compiling)
    logging.getLogger("tilewright").debug("child %d done", index)
    faulthandler.cancel_dump_traceback_later()
    f.close()
    os.unlink(f.name)


def _os_fork_child(*args):
    code = 1
    try:
        child_work(*args)
        code = 0
    except BaseException:  # noqa: BLE001
        import traceback
        traceback.print_exc()
    os._exit(code)


def _gdb_sysroot(dump):
    """A sysroot for gdb holding every top-level directory but /proc: kernel libraries are loaded
    as /proc/self/fd/<n>, which gdb would open in itself (a pipe there: gdb hangs)."""
    root = os.path.join(dump, "sysroot")
    if not os.path.isdir(root):
        os.makedirs(root)
        for name in os.listdir("/"):
            if name not in ("proc", "sys", "dev"):
                os.symlink("/" + name, os.path.join(root, name))
    return root


def _dump_hung(pid, dump):
    path = os.path.join(dump, f"gdb-{pid}.txt")
    gdb = shutil.which("gdb")
    if gdb:
        with open(path, "w") as out:
            env = dict(os.environ, DEBUGINFOD_URLS="")  # no symbol downloads (nothing to reach)
            try:
                subprocess.run([gdb, "-nx", "-batch", "-iex", "set debuginfod enabled off", "-iex", "set auto-load off",
                                "-iex", f"set sysroot {_gdb_sysroot(dump)}", "-p", str(pid),
                                "-ex", "thread apply all bt"], stdin=subprocess.DEVNULL,
                               stdout=out, stderr=subprocess.STDOUT, timeout=180, env=env)
            except subprocess.TimeoutExpired:
                out.write("gdb timed out\n")
    return path


class FdHandler(logging.Handler):
    """Writes each record with one os.write, no Python file object. A logging.FileHandler's
    buffered file has a lock of its own, which CPython does not remake in a forked child: a
    child forked while another thread wrote through it hung at its next line there (located by
    this harness: BufferedWriter.write waiting in _enter_buffered_busy, under the log sink). That
    is CPython's, for any buffered stream shared by threads across a fork; --buffered-log keeps
    it in (logging's own locks are remade in the child)."""

    def __init__(self, path):
        super().__init__()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def emit(self, record):
        try:
            os.write(self.fd, (self.format(record) + "\n").encode())
        except Exception:  # noqa: BLE001 - logging's convention
            self.handleError(record)


def run(forks, seed, timeout, dump, autotune=True, compile_new=True, quiet=False, log_pause=0.001,
        buffered_log=False):
    global LOAD
    os.makedirs(dump, exist_ok=True)
    logging.getLogger("tilewright").setLevel(logging.DEBUG)
    log_path = os.path.join(dump, "log.txt")
    handler = logging.FileHandler(log_path) if buffered_log else FdHandler(log_path)
    logging.getLogger("tilewright").addHandler(handler)
    rng = random.Random(seed)
    LOAD = Load(seed, autotune, log_pause)
    for t in LOAD.threads:
        t.start()
    ctx = multiprocessing.get_context("fork")
    hung, failed = [], []
    try:
        for i in range(forks):
            time.sleep(rng.uniform(0.0, 0.2))
            how = rng.choice(["os.fork", "multiprocessing"])
            args = (i, seed, dump, timeout, compile_new)
            start = time.monotonic()
            if how == "os.fork":
                pid = os.fork()
                if pid == 0:
                    _os_fork_child(*args)
                status = None
                while time.monotonic() - start < timeout:
                    done, st = os.waitpid(pid, os.WNOHANG)
                    if done:
                        status = os.waitstatus_to_exitcode(st)
                        break
                    time.sleep(0.02)
            else:
                p = ctx.Process(target=child_work, args=args)
                p.start()
                pid = p.pid
                p.join(timeout)
                status = p.exitcode
            took = time.monotonic() - start
            if status is None:
                where = _dump_hung(pid, dump)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                hung.append((i, how, pid, where))
            elif status != 0:
                failed.append((i, how, pid, status))
            if not quiet:
                print(f"fork {i} {how} pid {pid}: {'HUNG' if status is None else status} {took:.1f}s", flush=True)
            if LOAD.errors:
                break
    finally:
        LOAD.stop.set()
        for t in LOAD.threads:
            t.join(120)
        logging.getLogger("tilewright").removeHandler(handler)
    return {"forks": i + 1, "hung": hung, "failed": failed, "errors": LOAD.errors, "counts": LOAD.counts}


LOAD = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--forks", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a child may take")
    ap.add_argument("--dump", default="/tmp/tw-fork-stress")
    ap.add_argument("--no-autotune", action="store_true")
    ap.add_argument("--no-child-compile", action="store_true")
    ap.add_argument("--buffered-log", action="store_true",
                    help="log through a logging.FileHandler (CPython's buffered-file lock, see FdHandler)")
    ap.add_argument("--log-pause", type=float, default=0.001,
                    help="seconds the logging thread sleeps between lines (0: as fast as it can)")
    a = ap.parse_args()
    r = run(a.forks, a.seed, a.timeout, a.dump, autotune=not a.no_autotune, compile_new=not a.no_child_compile,
              log_pause=a.log_pause, buffered_log=a.buffered_log)
    print(f"forks {r['forks']} hung {len(r['hung'])} failed {len(r['failed'])} thread errors {len(r['errors'])}")
    print("thread iterations", r["counts"])
    for h in r["hung"]:
        print("hung", h)
    for f in r["failed"]:
        print("failed", f)
    for e in r["errors"]:
        print("error", e)
    sys.exit(1 if r["hung"] or r["failed"] or r["errors"] else 0)


if __name__ == "__main__":
    main()
