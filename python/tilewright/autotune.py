"""``@tw.autotune``: pick the fastest configuration of a ``@tw.jit`` kernel factory.

    @tw.autotune(configs=[tw.Config(block_M=128, block_N=128), tw.Config(block_M=64, block_N=256)],
                 key=["M", "N", "K"])
    @tw.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=64): ...

    kernel = matmul(1024, 1024, 1024)        # tunes once per key value and target, then cached

A sweep has three phases:

1. **compile** every configuration, in parallel on ``executor`` (any
   ``concurrent.futures.Executor``; default: local processes). A configuration that does not
   compile (a tile that exceeds a buffer's capacity, ...) is dropped with the compiler's reason.
2. **prune** by a roofline estimate: on ``cpu`` the kernel's gemm flops and global-memory bytes
   (counted on its IR) against this machine's measured peaks (a float32 matmul and a large copy
   through numpy); on Ascend targets the simulator's timing model (a timing-only run). Configs
   whose estimate is more than ``prune_factor`` times the best one's are not timed. ``prune``
   (a callable ``prune(configs, **key_args) -> configs``) can cut the list before compiling.
3. **time** the rest with :func:`tilewright.do_bench` (wall clock on cpu, in this process, one at
   a time; on Ascend the checked functional simulation, on the executor).

The kernels run on ``inputs(kernel, **params)`` when given (``params``: the factory's arguments
for that configuration, the call's, the configuration's and the defaults), else on
``kernel.example_inputs()``: random values, so a kernel with an int32 / int64 input (which it
may read as indices: block tables, lengths) needs ``inputs=`` (else a ``TilewrightError``).

The best configuration per (factory, its code, key values, target, machine, Tilewright version)
is saved under ``<cache dir>/tune/`` (a private directory, like the kernel cache) and reused by
later processes (processes missing one key at once sweep it once: the others wait for the
stored result, under the kernel cache's key lock); a stored configuration that no longer compiles is logged and tuned again. One
line per configuration is printed while tuning (``verbose=False`` silences it).
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
import inspect
import json
import logging
import marshal
import math
import multiprocessing
import multiprocessing.context
import os
import pathlib
import platform
import stat
import sys
import threading
import time
from collections.abc import Iterable, Mapping

from . import _C
from .errors import TilewrightError, user_location

__all__ = ["Config", "autotune", "Autotuner", "machine_peaks"]


class Config(dict):
    """Keyword arguments of the kernel factory for one candidate: ``tw.Config(block_M=128)``."""

    def __init__(self, **kwargs):
        super().__init__(kwargs)

    def __repr__(self):
        return " ".join(f"{k}={v}" for k, v in self.items()) or "(defaults)"

    def __hash__(self):
        return hash(tuple(sorted(self.items())))


def _check_private_dir(path: pathlib.Path):
    """Creates ``path`` (mode 0700) or checks that it is ours and not writable by others."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as e:  # a file there (FileExistsError), a read-only disk: leaked before (h-rel17 F4)
        raise TilewrightError(f"cannot use the tuning cache {path}: {e.strerror or e}",
                              hint=f"remove what is at {path} or make its parent writable, or point TW_CACHE_DIR "
                                   "elsewhere") from None
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise TilewrightError(f"the tuning cache {path} is not private (owner uid {st.st_uid}, mode "
                              f"{stat.filemode(st.st_mode)}): another user could plant a configuration",
                              hint=f"chmod 700 {path} (and check its owner), or point TW_CACHE_DIR elsewhere")


def _stored_json(path: pathlib.Path):
    """The JSON object stored at ``path`` in the tuning cache, or None: missing, or not a regular file of
    ours that others cannot write, or damaged (not a JSON object): then removed, so that it is tuned or
    measured again. A directory there is an error naming it (its removal would have leaked
    IsADirectoryError; h-rel17 F4)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise TilewrightError(f"the tuning cache holds a directory where a stored result belongs: {path}",
                              hint=f"remove it (rm -r '{path}')")
    rec = None
    if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022:
        try:
            rec = json.loads(path.read_text())
        except (ValueError, RecursionError):  # garbage, truncated, not UTF-8, nested past the parser's depth
            pass
    if not isinstance(rec, dict):
        path.unlink(missing_ok=True)
        return None
    return rec


def _write_private(path: pathlib.Path, text: str):
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def tune_dir() -> pathlib.Path:
    return pathlib.Path(_C.cache_dir()) / "tune"


class _key_locked:
    """``with _key_locked(name, what):``: one process at a time per ``name`` in the tuning cache,
    across processes (the kernel cache's key lock, _C.key_lock: an flock the kernel drops when
    its holder dies; the wait bounded, past it the caller goes on without the lock). A fleet
    starting together on one key then sweeps (or measures the peaks) once: the others wait and
    load the stored result, instead of each measuring under the others' load."""

    _held = threading.local()  # names this thread holds: taken again (tune() in __call__) it is a no-op

    def __init__(self, name, what, say):
        self.name, self.what, self.say = name, what, say
        self.lock = None

    def __enter__(self):
        held = self._held.__dict__.setdefault("names", set())
        if self.name in held:
            return self
        d = tune_dir()
        _check_private_dir(d)
        self.lock = _C.key_lock(str(d), self.name, 0.0)
        if not self.lock.held:
            self.say(f"tilewright: waiting for another process's {self.what} (one process does it, the others load "
                     f"its result)")
            self.lock = _C.key_lock(str(d), self.name)
            if not self.lock.held:
                logging.getLogger("tilewright").warning(
                    "autotune: another process's %s has held its lock longer than the wait's bound: going on "
                    "without it (the lock: %s/.locks/%s)", self.what, d, self.name)
        held.add(self.name)
        return self

    def __exit__(self, *exc):
        if self.lock is not None:
            self._held.names.discard(self.name)
            self.lock.release()


def machine_id(target: str) -> str:
    """What a tuning result depends on besides the kernel: the host CPU and compiler (cpu), or
    the target's model (simulated targets)."""
    if _C.target_info(target)["kind"] == "cpu":
        arch = _C.cpu_arch()  # the code tuned is compiled for it (TW_CPU_ARCH); native: the host
        arch = "" if arch == "native" else f" arch={arch} ({_C.target_cpu_features(arch)})"
        return f"{platform.machine()} {_C.cpu_features()}{arch} {_C.compiler_identity()} threads={_C.num_threads()}"
    return f"simulator {_C.find_target(target)}"


def machine_peaks(refresh=False) -> dict:
    """This machine's float32 FMA throughput (FLOP/s, from a numpy matmul) and copy bandwidth
    (bytes read + written per second), measured once and kept in the tuning cache (by one
    process: others wanting them at the same time wait for its measurement)."""
    d = tune_dir()
    _check_private_dir(d)
    path = d / ("peaks-" + hashlib.sha256(machine_id("cpu").encode()).hexdigest()[:16] + ".json")
    stored = None if refresh else _stored_peaks(path)
    if stored is not None:
        return stored
    with _key_locked(path.stem, "measurement of this machine's peaks", logging.getLogger("tilewright").info):
        stored = None if refresh else _stored_peaks(path)  # measured by the process we waited for
        return stored if stored is not None else _measure_peaks(path)


def _stored_peaks(path):
    peaks = _stored_json(path)
    if peaks is not None and not all(type(peaks.get(k)) in (int, float) and 0 < peaks[k] < math.inf
                                     for k in ("flops", "bytes_per_s")):
        path.unlink(missing_ok=True)  # not peaks (zero, NaN, a string): measured again (h-rel17 F4)
        return None
    return peaks


def _measure_peaks(path):
    import numpy as np
    n = 1024
    a = np.ones((n, n), np.float32)
    best_f = 0.0
    for _ in range(10):
        t0 = time.perf_counter()
        a @ a
        best_f = max(best_f, 2.0 * n ** 3 / (time.perf_counter() - t0))
    src = np.ones(16 << 20, np.float32)
    dst = np.empty_like(src)
    best_b = 0.0
    for _ in range(10):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best_b = max(best_b, 2.0 * src.nbytes / (time.perf_counter() - t0))
    peaks = {"flops": best_f, "bytes_per_s": best_b, "how": "numpy float32 1024^3 matmul; 64 MiB copy; best of 10",
             "measured": time.strftime("%Y-%m-%d %H:%M:%S"), "loadavg": os.getloadavg()[0]}
    _write_private(path, json.dumps(peaks))
    return peaks


def code_hash(fn) -> str:
    """What a stored tuning result depends on in the kernel factory itself: a hash of its source
    text (decorators and nested kernel included), else of its code object (a function whose source
    is not at hand). An edited kernel is tuned again; functions it calls are not covered."""
    f = inspect.unwrap(fn)
    try:
        data = inspect.getsource(f).encode()
    except (OSError, TypeError):
        code = getattr(f, "__code__", None)
        data = marshal.dumps(code) if code is not None else repr(f).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def _resolve(module: str, qualname: str):
    """The kernel factory named module:qualname (the tuner's own name, or the factory it wraps)."""
    mod = sys.modules.get(module)
    if mod is None:
        import importlib
        mod = importlib.import_module(module)
    obj = mod
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj.fn if isinstance(obj, Autotuner) else obj


def _amount(x, unit, base=1000):
    """``x`` with a unit prefix (base 1000: k, M, G, T; 1024: Ki, Mi, Gi, Ti), three digits."""
    prefixes = ("", "k", "M", "G", "T") if base == 1000 else ("", "Ki", "Mi", "Gi", "Ti")
    for p in prefixes[:-1]:
        if abs(x) < base:
            return f"{x:.3g} {p}{unit}"
        x /= base
    return f"{x:.3g} {prefixes[-1]}{unit}"


def _peaks(target):
    """(peak FLOP/s, memory bytes/s, cache bytes/s or 0) of a target: measured on cpu (no cache
    term: its caches are not measured), the chip table's Cube peak, HBM and L2 on Ascend."""
    info = _C.target_info(target)
    if info["kind"] == "cpu":
        p = machine_peaks()
        return p["flops"], p["bytes_per_s"], 0.0
    return info["peak_fp16_tflops"] * 1e12, info["hbm_tbps"] * 1e12, info["l2_tbps"] * 1e12


_INDEX_DTYPES = ("int32", "int64")


def _timing_inputs(kernel, inputs, params, name):
    """The inputs a configuration is run on: ``inputs(kernel, **params)`` (the user's), or the
    kernel's seeded example inputs when it has no int32 / int64 input. Random integers are no valid
    block table or length (examples/masked_attention.py's KvIdx, paged_decode's table): run on them,
    the kernel reads outside its tensors, so such a kernel needs ``inputs=``."""
    if inputs is not None:
        got = inputs(kernel, **params)
        return tuple(got) if isinstance(got, (tuple, list)) else (got,)
    ints = [n for n, _, dtype, _ in kernel._exe.input_specs() if dtype in _INDEX_DTYPES]
    if ints:
        raise TilewrightError(f"autotune '{name}': the kernel's input{'s' if len(ints) > 1 else ''} "
                              f"{', '.join(repr(n) for n in ints)} {'are' if len(ints) > 1 else 'is'} integer: random "
                              "example inputs may be invalid there (indices or lengths out of range), so the "
                              "tuner does not time on them",
                              hint="pass @tw.autotune(..., inputs=fn) with fn(kernel, **params) returning valid "
                                   "inputs for one configuration (params: the factory's arguments, config included)")
    return kernel.example_inputs()


def _estimate(kernel, peaks, inputs=None, params=None, name="kernel"):
    """(estimate in seconds or None, what it is) of a compiled kernel (phase 2): the roofline bound
    against ``peaks`` (see _peaks) on cpu, the simulator's timing model on Ascend (the timing-only
    run of the simulation that times it: the two figures agree). The second item names the
    estimate in the progress lines and prune reasons."""
    if _C.target_info(kernel.target)["kind"] == "cpu":
        t = kernel._exe.roofline_seconds(*peaks)
        return t, "roofline estimate" if t is not None else "no estimate (non-constant loop bounds)"
    prof = kernel.profile(*_timing_inputs(kernel, inputs, params, name), functional=False, check=False)
    return prof["time_us"] * 1e-6, "timing-model estimate"


def _quiet_worker():
    """Worker processes print no progress lines of their own (the tuner prints one per config)."""
    from . import log
    log._PROGRESS = False


def _compile_task(module, qualname, args, kwargs, cfg, target, peaks, inputs, params):
    """Phase 1 on a worker: compile one configuration and estimate it. Returns
    ("ok", estimate_s, detail) or ("dropped", reason)."""
    _quiet_worker()
    return _compile_config(_resolve(module, qualname), args, kwargs, cfg, target, peaks, inputs, params)


def _compile_config(factory, args, kwargs, cfg, target, peaks, inputs, params):
    try:
        kernel = factory(*args, **kwargs, **cfg, target=target)
    except TilewrightError as e:
        return ("dropped", e.message.splitlines()[0])
    # not a reason to drop one configuration: no valid inputs (_timing_inputs) fails them all
    est, detail = _estimate(kernel, peaks, inputs, params, getattr(factory, "__name__", "kernel"))
    return ("ok", est, detail)


def _time_task(module, qualname, args, kwargs, cfg, target, warmup, rep, inputs, params):
    """Phase 3 on a worker (simulated targets): the checked simulation's time in ms."""
    _quiet_worker()
    return _time_config(_resolve(module, qualname), args, kwargs, cfg, target, warmup, rep, inputs, params)


def _time_config(factory, args, kwargs, cfg, target, warmup, rep, inputs, params):
    from .benchmark import do_bench
    kernel = factory(*args, **kwargs, **cfg, target=target)
    inputs = _timing_inputs(kernel, inputs, params, getattr(factory, "__name__", "kernel"))
    prof = kernel.profile(*inputs)
    if prof["reports"]:
        return ("dropped", "simulator checker: " + prof["reports"][0].splitlines()[0])
    return ("ok", do_bench(lambda: kernel(*inputs), warmup=warmup, rep=rep, return_mode="median"))


_WORKER_NAME = "TilewrightTuneWorker"
_MAIN_RERUN_EXIT = 86  # a worker's exit status: its import of the script reached a tuned call again


class _TuneContext(multiprocessing.context.SpawnContext):
    """The default executor's start method: spawn (fork is unsafe with the runtime's threads), with
    the workers named _WORKER_NAME (a spawned worker knows its name before it imports the user's
    script) and remembered (their exit statuses say why a pool broke)."""

    def __init__(self):
        super().__init__()
        self.workers = []

    def Process(self, *args, **kwargs):  # noqa: N802 - multiprocessing's name
        p = multiprocessing.context.SpawnProcess(*args, **kwargs)
        p.name = f"{_WORKER_NAME}-{len(self.workers) + 1}"
        self.workers.append(p)
        return p


class _TunePool(cf.ProcessPoolExecutor):
    """The default executor: ``workers`` spawned processes (see _TuneContext)."""

    def __init__(self, workers):
        self.context = _TuneContext()
        super().__init__(workers, mp_context=self.context)


def _main_site():
    """(file, line) of the main script's top-level statement this call runs under (the one to put
    under the guard): the innermost module-level frame of a module named __main__ / __mp_main__;
    else the user's line that called into Tilewright."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "<module>" and f.f_globals.get("__name__") in ("__main__", "__mp_main__"):
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return user_location()


_GUARD_HINT = ("put the code that calls it under `if __name__ == \"__main__\":` (Python's spawn start method, which the "
               "tuner's worker processes use, imports the main script in each process), or pass executor=\"inline\" "
               "to @tw.autotune")


def _check_may_sweep(name):
    """A process that must not start a sweep of its own raises here (or, a tuner's worker still
    importing the user's script, exits with _MAIN_RERUN_EXIT for its parent to explain): a
    spawned process importing the main script (a script without the main-module guard calls the
    tuned kernel at its top level: each worker would sweep again, and wait for its parent's key
    lock while the parent waits for it), or any tuner's worker (it has no processes of its own)."""
    proc = multiprocessing.current_process()
    ours = proc.name.startswith(_WORKER_NAME)
    if getattr(proc, "_inheriting", False):  # multiprocessing's own mark of a child importing __main__
        if ours:
            os._exit(_MAIN_RERUN_EXIT)  # quietly: the parent raises one error at the user's call
        file, line = _main_site()
        raise TilewrightError(f"autotune '{name}': a sweep started while a spawned process was importing the main "
                              f"script (the script calls the tuned kernel at its top level)", file, line,
                              hint=_GUARD_HINT)
    if ours:
        file, line = user_location()
        raise TilewrightError(f"autotune '{name}': a sweep started inside another sweep's worker process (a factory "
                              f"calls an autotuned kernel with no stored result)", file, line,
                              hint="tune that kernel first (call it once before the outer sweep), or tune with "
                                   "executor=\"inline\"")


class _Inline(cf.Executor):
    """Runs tasks in the caller (``executor="inline"``: no processes, e.g. for functions defined
    in a notebook cell)."""

    def submit(self, fn, *args, **kwargs):
        f = cf.Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            f.set_exception(e)
        return f


class Autotuner:
    """The object ``@tw.autotune`` returns. Calling it returns the best :class:`~tilewright.Kernel`
    for the arguments; ``best_config`` and ``report`` describe the last sweep."""

    def __init__(self, fn, configs, key, prune, executor, warmup, rep, prune_factor, verbose, inputs=None):
        if not configs:
            raise TilewrightError("@tw.autotune needs at least one configuration", hint="configs=[tw.Config(block_M=64), ...]")
        if isinstance(configs, (str, bytes, Mapping)) or not isinstance(configs, Iterable):
            bad = configs
        else:
            configs = list(configs)
            bad = next((c for c in configs if not isinstance(c, Mapping)), None)
        if bad is not None:
            raise TilewrightError(f"@tw.autotune configs must be a list of tw.Config (or dicts), got {bad!r}",
                                  hint="configs=[tw.Config(block_M=64), ...]")
        from .benchmark import _finite
        if not (_finite(warmup) and _finite(rep) and warmup >= 0 and rep > 0):
            raise TilewrightError(f"@tw.autotune: warmup ({warmup!r}) must be >= 0 and rep ({rep!r}) > 0 "
                                  "(finite numbers, in ms)")
        if not ((_finite(prune_factor) or prune_factor == float("inf")) and prune_factor >= 1):
            raise TilewrightError(f"@tw.autotune: prune_factor {prune_factor!r} must be a number >= 1 (inf: no pruning)",
                                  hint="configurations whose roofline estimate exceeds prune_factor x the best "
                                       "one's are not timed; 2.0 is the default")
        if executor is not None and executor != "inline" and not callable(getattr(executor, "submit", None)):
            raise TilewrightError(f"@tw.autotune: executor {executor!r} is not a concurrent.futures.Executor",
                                  hint="pass an Executor, \"inline\", or None for local processes")
        if inputs is not None and not callable(inputs):
            raise TilewrightError(f"@tw.autotune: inputs {inputs!r} is not callable",
                                  hint="inputs=fn with fn(kernel, **params) returning the kernel's inputs")
        if not hasattr(fn, "_tw_jit_cache") and "target" not in _parameters(fn):
            raise TilewrightError(f"@tw.autotune decorates a @tw.jit kernel factory, got {fn!r}",
                                  hint="put @tw.autotune(...) above @tw.jit(...)")
        self.fn = fn
        self.configs = [c if isinstance(c, Config) else Config(**c) for c in configs]
        if isinstance(key, str):  # one parameter's name, not its letters (api34 F12)
            key = (key,)
        if not isinstance(key, Iterable) or not all(isinstance(k, str) for k in key):  # list(5): TypeError
            raise TilewrightError(f"@tw.autotune key {key!r} is not a list of parameter names",
                                  hint="key=(\"M\", \"N\"): the factory parameters whose values start a new sweep")
        self.key = list(key)
        self.prune = prune
        self.inputs = inputs
        self.executor = executor
        self.warmup, self.rep = warmup, rep
        self.prune_factor = prune_factor
        self.verbose = verbose
        self.best_config = None
        self.report = []
        self._memory = {}
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = getattr(fn, "__doc__", None)
        self._module = getattr(fn, "__module__", None)
        self._qualname = getattr(fn, "__qualname__", self.__name__)
        wrapped = getattr(fn, "__wrapped__", fn)
        self._signature = inspect.signature(wrapped)
        self._code = code_hash(fn)
        config_names = {k for c in self.configs for k in c}
        params = self._signature.parameters
        for name in self.key:
            if name not in params:
                raise TilewrightError(f"@tw.autotune key '{name}' is not a parameter of '{self.__name__}'",
                                      hint=f"parameters: {', '.join(params)}")
        for name in config_names:
            if name not in params:
                raise TilewrightError(f"@tw.autotune config parameter '{name}' is not a parameter of '{self.__name__}'",
                                      hint=f"parameters: {', '.join(params)}")

    # ---- keys and the persistent store ---------------------------------------------------
    def _key_values(self, args, kwargs):
        try:
            bound = self._signature.bind_partial(*args, **kwargs)
        except TypeError as e:  # too many arguments, an unknown keyword: Python's message, at the call
            raise TilewrightError(f"autotune '{self.__name__}': {e}", *user_location(),
                                  hint=f"the parameters of '{self.__name__}': {', '.join(self._signature.parameters)}"
                                  ) from None
        tuned = [n for n in bound.arguments if any(n in c for c in self.configs)]
        if tuned:  # the factory would get it twice: Python's TypeError from inside the sweep (robust38 F4)
            raise TilewrightError(f"autotune '{self.__name__}': {', '.join(map(repr, tuned))} given at the call, "
                                  "but the configurations set it", *user_location(),
                                  hint="leave tuned parameters out of the call (the sweep chooses them), or take "
                                       "them out of the configurations")
        names = self.key or list(bound.arguments)
        missing = [n for n in names if n not in bound.arguments and
                   self._signature.parameters[n].default is inspect.Parameter.empty]
        if missing:  # a sweep started with inspect._empty as the key's value (rel29 F8)
            raise TilewrightError(f"autotune '{self.__name__}': no value for the key parameter(s) "
                                  f"{', '.join(map(repr, missing))}", *user_location(),
                                  hint="pass every key parameter (it chooses the stored configuration)")
        return {n: _key_value(bound.arguments.get(n, self._signature.parameters[n].default)) for n in names}

    def _params(self, args, kwargs, cfg):
        """The factory's arguments for one configuration (``inputs=`` gets them)."""
        bound = self._signature.bind_partial(*args, **{**kwargs, **cfg})
        bound.apply_defaults()
        return dict(bound.arguments)

    def _store_path(self, key_values, target):
        text = json.dumps({"kernel": f"{self._module}:{self._qualname}", "key": {k: repr(v) for k, v in key_values.items()},
                           "target": _C.find_target(target), "machine": machine_id(target),
                           "version": _C.__version__, "configs": [repr(c) for c in self.configs],
                           "code": self._code}, sort_keys=True)
        return tune_dir() / (hashlib.sha256(text.encode()).hexdigest()[:32] + ".json")

    def _load(self, path):
        rec = _stored_json(path)  # not ours, writable by others or damaged: evicted, tuned again
        if rec is None:
            return None
        try:
            cfg = Config(**rec["config"])
        except (KeyError, TypeError):
            path.unlink(missing_ok=True)
            return None
        return cfg if cfg in self.configs else None

    def _line(self, report, r, simulated):
        """One progress line per configuration, printed when its outcome is known."""
        if r["status"] == "timed":
            what = f"{r['ms']:.4f} ms" + (" (simulated)" if simulated else "")
            if r.get("estimate_s"):
                what += f"  ({r['estimate_detail']} {r['estimate_s'] * 1e3:.4f} ms)"
        else:
            what = f"{r['status']}: {r['reason']}"
        self._say(f"  [{report.index(r) + 1}/{len(report)}] {r['config']!r}: {what}")

    def _say(self, text):
        if self.verbose:
            print(text, file=sys.stderr, flush=True)

    # ---- the sweep ----------------------------------------------------------------------
    def _executor(self, n):
        if self.executor == "inline":
            return _Inline(), True
        if self.executor is not None:
            return self.executor, False
        if self._module in (None, "__main__") and not hasattr(sys.modules.get("__main__"), "__file__"):
            return _Inline(), True  # interactive: nothing a spawned process could import
        if "<locals>" in self._qualname:  # defined in a function: nor that (h-rel32 F4)
            return _Inline(), True
        workers = max(1, min(n, os.cpu_count() or 1))
        return _TunePool(workers), True

    def tune(self, *args, target="cpu", **kwargs):
        """Runs a sweep now (ignoring the stored result); returns the best :class:`Config`. A
        process sweeping the same key at the same time is waited for first (_key_locked)."""
        key_values = self._key_values(args, kwargs)
        _check_may_sweep(self.__name__)
        with self._locked(self._store_path(key_values, target)):
            return self._sweep(args, kwargs, key_values, target)

    def _locked(self, path):
        return _key_locked(path.stem, f"sweep of '{self.__name__}'", self._say)

    def _sweep(self, args, kwargs, key_values, target):
        self.last_call = (args, kwargs)
        configs = list(self.configs)
        if self.prune is not None:
            pruned = self.prune(configs, **key_values)
            pruned = list(pruned) if isinstance(pruned, Iterable) and not isinstance(pruned, (str, bytes, Mapping)) else [pruned]
            if not all(isinstance(c, Mapping) for c in pruned):
                raise TilewrightError(f"autotune '{self.__name__}': prune() must return a list of configurations, "
                                      f"got {pruned!r}", *user_location(),  # robust38 F5: was unlocated
                                      hint="return some of the configurations it was given (tw.Config or dicts)")
            configs = [c if isinstance(c, Config) else Config(**c) for c in pruned]
            if not configs:
                raise TilewrightError(f"autotune '{self.__name__}': prune() removed every configuration",
                                      *user_location(), hint="have prune() keep at least one configuration")
        n = len(configs)
        t_start = time.perf_counter()
        self._say(f"tilewright: tuning '{self.__name__}' for {target} "
                  f"({', '.join(f'{k}={v}' for k, v in key_values.items())}): {n} configurations")
        report = [{"config": c, "status": "pending"} for c in configs]
        ex, own = self._executor(n)
        simulated = _C.target_info(target)["kind"] != "cpu"
        peaks = _peaks(target)  # measured (cpu) here once; every worker estimates against the same
        # in this process the tuner is at hand; elsewhere a worker imports it by name
        here = isinstance(ex, (_Inline, cf.ThreadPoolExecutor))
        compile_fn = functools.partial(_compile_config, self.fn) if here else \
            functools.partial(_compile_task, self._module, self._qualname)
        time_fn = functools.partial(_time_config, self.fn) if here else \
            functools.partial(_time_task, self._module, self._qualname)
        if not here and "<locals>" in self._qualname:  # a worker's getattr leaked AttributeError (h-rel32 F4)
            raise TilewrightError(f"autotune '{self.__name__}' is defined inside a function ({self._qualname}): the "
                                  "executor's workers cannot import it by name", *user_location(),
                                  hint="define it at the top level of a module, or tune with executor=\"inline\" "
                                       "(or a ThreadPoolExecutor)")
        if not here and simulated and self.inputs is not None:  # cpu workers only compile
            import pickle
            try:
                pickle.dumps(self.inputs)
            except Exception as e:  # noqa: BLE001 - any pickling failure: the same advice
                raise TilewrightError(f"autotune '{self.__name__}': inputs={self.inputs!r} cannot be sent to the "
                                      f"executor's workers ({type(e).__name__}: {e})", *user_location(),
                                      hint="define it at the top level of a module (workers import it by name), "
                                           "or tune with executor=\"inline\"") from None
        try:
            futs = [ex.submit(compile_fn, args, kwargs, dict(c), target, peaks, self.inputs if simulated else None,
                              self._params(args, kwargs, c)) for c in configs]
            for r, f in zip(report, futs):
                res = f.result()
                if res[0] == "dropped":
                    r.update(status="dropped", reason=res[1])
                    self._line(report, r, simulated)
                else:
                    r.update(status="compiled", estimate_s=res[1], estimate_detail=res[2])
            estimates = [r["estimate_s"] for r in report if r["status"] == "compiled" and r["estimate_s"] is not None]
            best_est = min(estimates) if estimates else None
            for r in report:
                if r["status"] == "compiled" and best_est is not None and r["estimate_s"] is not None \
                        and r["estimate_s"] > self.prune_factor * best_est:
                    r.update(status="pruned", reason=f"{r['estimate_detail']} {r['estimate_s'] * 1e3:.3f} ms > "
                                                     f"{self.prune_factor:g} x best {best_est * 1e3:.3f} ms")
                    self._line(report, r, simulated)
            todo = [r for r in report if r["status"] == "compiled"]
            if simulated:
                futs = [ex.submit(time_fn, args, kwargs, dict(r["config"]), target, self.warmup, self.rep,
                                  self.inputs, self._params(args, kwargs, r["config"])) for r in todo]
                for r, f in zip(todo, futs):
                    res = f.result()
                    if res[0] == "dropped":
                        r.update(status="dropped", reason=res[1])
                    else:
                        r.update(status="timed", ms=res[1])
                    self._line(report, r, simulated)
        except cf.process.BrokenProcessPool:
            ex.shutdown()
            if isinstance(ex, _TunePool) and any(p.exitcode == _MAIN_RERUN_EXIT for p in ex.context.workers):
                main = getattr(sys.modules.get("__main__"), "__file__", "the main script")
                file, line = _main_site()
                raise TilewrightError(f"autotune '{self.__name__}': the tuner's worker processes re-ran {main} and "
                                      f"reached this call again", file, line, hint=_GUARD_HINT) from None
            raise
        except BaseException:  # Ctrl-C (or an error): the sweep is abandoned, its compiles too (rel31 F3: it
            if own and isinstance(ex, _TunePool):  # waited for every configuration queued, a hung compiler forever)
                for p in ex.context.workers:
                    if p.is_alive():
                        p.terminate()
            elif own and isinstance(ex, cf.ThreadPoolExecutor) and isinstance(sys.exc_info()[1], KeyboardInterrupt):
                ex.shutdown(wait=False, cancel_futures=True)  # no signal reaches the pool's threads: their
                _C.interrupt_compiles()                      # compilers are ended (intr31)
            raise
        finally:
            if own:
                ex.shutdown(wait=True, cancel_futures=True)
        if not simulated:
            from .benchmark import do_bench
            for r in todo:
                kernel = self.fn(*args, **kwargs, **r["config"], target=target)
                inputs = _timing_inputs(kernel, self.inputs, self._params(args, kwargs, r["config"]), self.__name__)
                r.update(status="timed", ms=do_bench(lambda: kernel(*inputs), warmup=self.warmup, rep=self.rep,
                                                     return_mode="median"))
                self._line(report, r, simulated)
        timed = [r for r in report if r["status"] == "timed"]
        if not timed:
            reasons = "; ".join(f"{r['config']!r}: {r.get('reason', r['status'])}" for r in report)
            why = {str(r.get("reason", r["status"])) for r in report}
            if all("frozen" in w for w in why):
                hint = (f"tune before freezing: tw.precompile([({self.__name__}, args, target)]) tunes and stores the "
                        f"winner, then tw.freeze()")
            elif len(why) == 1 and len(report) > 1:
                hint = "every configuration failed the same way: an error in the factory, not in a block size"
            else:
                hint = "add configurations that fit the target's buffers"
            raise TilewrightError(f"autotune '{self.__name__}' for {target}: no configuration could be run ({reasons})",
                                  *user_location(), hint=hint)  # at the call that started the sweep (api35 F2)
        best = min(timed, key=lambda r: r["ms"])
        self.report = report
        self.best_config = best["config"]
        elapsed = time.perf_counter() - t_start
        self.roofline = self._roofline_position(best, target, args, kwargs)
        self._say(f"  best: {best['config']!r}: {best['ms']:.4f} ms{'' if not simulated else ' (simulated)'}; "
                  f"{self.roofline}; sweep took {elapsed:.1f} s")
        path = self._store_path(key_values, target)
        _check_private_dir(path.parent)
        _write_private(path, json.dumps({"config": dict(best["config"]), "ms": best["ms"], "target": target,
                                         "key": {k: repr(v) for k, v in key_values.items()},
                                         "machine": machine_id(target), "version": _C.__version__}, indent=1))
        self.elapsed_s = elapsed
        return best["config"]

    def _roofline_position(self, best, target, args, kwargs):
        kernel = self.fn(*args, **kwargs, **best["config"], target=target)
        work = kernel._exe.estimate_work()
        if work is None:
            return "roofline position unknown (non-constant loop bounds)"
        flops, tile_bytes, bytes_once = work
        pf, mem_bw, cache_bw = _peaks(target)
        bound = kernel._exe.roofline_seconds(pf, mem_bw, cache_bw)
        terms = {"compute": flops / pf, "memory": bytes_once / mem_bw, "cache": tile_bytes / cache_bw if cache_bw else 0}
        limit = max(terms, key=terms.get)
        achieved = flops / (best["ms"] * 1e-3) if flops else 0.0
        best["roofline"] = {"flops": flops, "tile_bytes": tile_bytes, "bytes": bytes_once, "peak_flops": pf,
                            "peak_bytes_per_s": mem_bw, "cache_bytes_per_s": cache_bw, "bound_s": bound,
                            "limit": limit, "fraction": bound / (best["ms"] * 1e-3)}
        note = ""
        if best["roofline"]["fraction"] > 1.0:
            note = ("; above 100%: the stored peaks are too low (measured on a busy machine?): re-measure with "
                    "`tilewright tune --refresh-peaks` or tilewright.autotune.machine_peaks(refresh=True)")
        # the bound itself is printed: on Ascend a small kernel's is a fraction of a microsecond against
        # a launch of microseconds, which a whole percent printed as "0%" (hunt35); no GFLOP/s without gemm
        pct = 100 * best["roofline"]["fraction"]
        return ((f"{_amount(achieved, 'FLOP/s')}, " if flops else "") + (f"{pct:.0f}%" if pct >= 10 else f"{pct:.2g}%")
                + f" of its roofline bound of {bound * 1e6:.3g} us ({limit}-bound: {_amount(flops, 'FLOP')}, "
                f"{_amount(bytes_once, 'B', 1024)} in/out, {_amount(tile_bytes, 'B', 1024)} of tile copies; peaks "
                f"{_amount(pf, 'FLOP/s')}, {_amount(mem_bw, 'B/s')}" + (f", cache {_amount(cache_bw, 'B/s')})" if cache_bw else ")")
                + note)

    def __call__(self, *args, target="cpu", **kwargs):
        key_values = self._key_values(args, kwargs)
        mkey = (tuple(sorted((k, repr(v)) for k, v in key_values.items())), target)
        cfg = self._memory.get(mkey)
        if cfg is None:
            path = self._store_path(key_values, target)
            kernel = self._stored_kernel(path, mkey, args, kwargs, target)
            if kernel is not None:
                return kernel
            _check_may_sweep(self.__name__)  # before the lock: a worker must never wait for its parent's
            # one process sweeps a key: the others wait here and then load what it stored
            with self._locked(path):
                kernel = self._stored_kernel(path, mkey, args, kwargs, target)
                if kernel is not None:
                    return kernel
                cfg = self.tune(*args, target=target, **kwargs)  # the lock is this thread's already
            self._memory[mkey] = cfg
        self.best_config = cfg
        return self.fn(*args, **kwargs, **cfg, target=target)

    def _stored_kernel(self, path, mkey, args, kwargs, target):
        """The kernel of the stored best configuration, or None (none stored, or it no longer compiles)."""
        cfg = self._load(path)
        if cfg is None:
            return None
        try:
            kernel = self.fn(*args, **kwargs, **cfg, target=target)
        except TilewrightError as e:  # the kernel changed in a way its source hash missed (a helper)
            logging.getLogger("tilewright").warning(
                "autotune '%s': the stored best configuration %r (%s) no longer compiles (%s): tuning again",
                self.__name__, cfg, path, e.message.splitlines()[0])
            path.unlink(missing_ok=True)
            return None
        self._memory[mkey] = self.best_config = cfg
        return kernel


def _key_value(v):
    """Equal numbers are one key: 4096, numpy.int64(4096) and numpy.int32(4096) (a shape taken from
    an array) tune once, not once per type (keys are stored by repr)."""
    import numbers
    if isinstance(v, bool) or not isinstance(v, numbers.Number):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    return float(v) if isinstance(v, numbers.Real) else v


def _parameters(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):  # not introspectable (a builtin)
        return {}


def autotune(configs, key=(), prune=None, executor=None, warmup=25, rep=100, prune_factor=2.0, verbose=True,
             inputs=None):
    """Decorates a ``@tw.jit`` factory (see the module docstring). ``configs``: a list of
    :class:`Config` (or dicts) of factory keyword arguments; ``key``: the names (a list, or one str) of
    the factory parameters whose values start a new sweep (default: all arguments of the call); ``prune``: optional
    ``prune(configs, **key_args) -> configs``; ``executor``: a ``concurrent.futures.Executor``
    (e.g. ``dask.distributed.Client(...).get_executor()``), ``"inline"`` for none, default local
    processes; ``warmup``/``rep``: :func:`tilewright.do_bench` budgets in ms; ``prune_factor``:
    roofline pruning threshold; ``inputs``: optional ``inputs(kernel, **params) -> tuple`` of the
    kernel's inputs to time on (``params``: the factory's arguments, configuration included;
    needed when the kernel has an int32 / int64 input, e.g. a block table)."""
    def deco(fn):
        try:
            return Autotuner(fn, configs, key, prune, executor, warmup, rep, prune_factor, verbose, inputs)
        except TilewrightError as e:  # a bad argument of the decorator: at its line (api34 F12)
            if e.line > 0:
                raise
            raise TilewrightError(e.message, *user_location(), 0, e.hint) from None
    return deco
