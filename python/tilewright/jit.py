"""Compiling and calling kernels: ``tw.jit``, ``tw.compile`` and the compiled :class:`Kernel`."""
from __future__ import annotations

import collections
import functools
import inspect
import operator
import os
import sys
import threading
import time
import warnings
import weakref

import numpy as _np

from . import _C
from .benchmark import active_timer as _active_timer
from .errors import TilewrightError, TilewrightWarning, user_location
from .frontend.source import caller_scope, defining_scope
from .language import PrimFunc
from .log import progress as _progress

__all__ = ["jit", "compile", "Kernel", "Profile", "cache_info", "clear_cache", "kernel_stats"]



def _bf16_dtype():
    """numpy has no bfloat16; ml_dtypes provides it. Imported on first use (a bfloat16 output),
    not with tilewright: loading its extension costs about a second on some machines."""
    try:
        import ml_dtypes
    except ImportError as e:  # ml_dtypes is a dependency: only a broken install gets here
        raise TilewrightError("a bfloat16 output needs the ml_dtypes package, which is not importable "
                              f"({e}); install it: pip install ml_dtypes") from e
    return ml_dtypes.bfloat16


class Kernel:
    """A kernel compiled for one target. Call it with numpy arrays (or any object implementing
    ``__dlpack__``) for the inputs, in parameter order; the outputs are allocated and returned
    (one array, a tuple of arrays, or None when the kernel has no output)."""

    def __init__(self, executable, compile_s: float = 0.0):
        self._exe = executable
        self._bf16_outputs = [i for i, d in enumerate(executable.output_dtypes) if d == "bfloat16"]
        self._calls = 0
        self._compile_s = compile_s
        self._simulated = executable.simulated
        self._written = frozenset(executable.written_inputs())  # inputs the kernel writes in place
        _live_kernels.add(self)
        for text, file, line in executable.notes:  # compile notes: at the kernel line they are about
            warnings.warn_explicit(text, TilewrightWarning, file or "<kernel>", line)

    def __reduce__(self):
        # pickle, multiprocessing, copy.deepcopy's fallback: the C++ 'Executable' refused by its type name
        # (robust38 F6); a kernel is code loaded into this process, not data
        raise TilewrightError(f"kernel '{self.name}' cannot be pickled: it is code loaded into this process",
                              *user_location(),
                              hint="send what builds it (a @tw.jit factory and its arguments) and call that in the "
                                   "other process (a cpu kernel is then loaded from the disk cache, not compiled again)")

    def __copy__(self):
        return self  # compiled code never changes: a copy (of a model, a config holding it) shares it, as a function

    def __deepcopy__(self, memo):
        return self

    @property
    def notes(self) -> list:
        """The compile notes (``file:line:col: note: ...``): what the compiler chose in place of
        what the kernel asked, e.g. fewer T.Pipelined stages than num_stages where those do not fit
        on Ascend. Each is also issued as a :class:`TilewrightWarning` when the kernel is compiled."""
        return [text for text, _, _ in self._exe.notes]

    def __call__(self, *args, **kwargs):
        self._calls += 1
        timer = _active_timer()
        try:
            if kwargs:
                raise TilewrightError(f"kernel '{self.name}' takes its arguments by position, got keyword "
                                      f"argument(s) {', '.join(map(repr, kwargs))}",
                                      hint="pass them in parameter order: " + self._signature())
            args, torch_out = _prepare_args(args, self)
            if timer is not None:
                if self._simulated:
                    prof = self.profile(*args)
                    timer.ms += prof["time_us"] * 1e-3
                    timer.calls += 1
                    return prof.outputs
                timer.host_calls += 1
            if self._simulated:
                with _progress(f"simulating kernel '{self.name}' on {self.target}"):
                    out = self._wrap(self._exe(*args))
            else:
                out = self._wrap(self._exe(*args))
        except TilewrightError as e:
            self._raise_at_call(e)
        return _to_torch(out) if torch_out else out

    def _raise_at_call(self, e):
        """Argument errors are located at the kernel's definition by the runtime (or nowhere: an
        output too large to allocate); the mistake is at the call: point there, and name the
        definition in the message. Errors inside the kernel's body keep their line."""
        file, line, _ = self._exe.kernel.span
        if e.line > 0 and (e.file, e.line) != (file, line):
            raise e
        call_file, call_line = user_location()
        where = f" (kernel '{self.name}' is defined at {file}:{line})" if line > 0 else ""
        raise TilewrightError(e.message + where, call_file, call_line, 0, e.hint) from None

    def _signature(self) -> str:
        return f"{self.name}({', '.join(name for name, *_ in self._exe.input_specs())})"

    def stats(self) -> dict:
        """``name``, ``target``, ``calls`` (of this object), ``compile_s`` (seconds its compile,
        or disk-cache load, took) and ``from_disk_cache``."""
        return {"name": self.name, "target": self.target, "calls": self._calls,
                "compile_s": self._compile_s, "from_disk_cache": self.from_disk_cache}

    def export(self, directory, name: str = None) -> list:
        """Writes this kernel as an artifact for the C++ runtime; see :func:`tilewright.deploy.export`."""
        from .deploy import export
        return export([self], directory, name)

    def _wrap(self, outs):
        for i in self._bf16_outputs:
            outs[i] = outs[i].view(_bf16_dtype())
        if len(outs) == 1:
            return outs[0]
        return tuple(outs) if outs else None

    def get_kernel_source(self) -> str:
        """The generated kernel source (tilelang's name for :meth:`get_source`)."""
        return self.get_source()

    def get_profiler(self, *args, **kwargs) -> "Profiler":
        """A :class:`Profiler` of this kernel (tilelang's ``kernel.get_profiler()``): its
        ``do_bench(*inputs, warmup=, rep=)`` times the kernel with :func:`tilewright.do_bench`
        (inputs made from a seed when omitted). tilelang's tensor-supply arguments are not
        supported: pass the inputs to ``do_bench`` instead."""
        if args or kwargs:
            raise TilewrightError("get_profiler() takes no arguments in Tilewright",
                                  hint="pass the inputs to profiler.do_bench(*inputs); tw.testing.randn makes seeded ones")
        return Profiler(self)

    def example_inputs(self, seed=0):
        """Seeded inputs matching the kernel's non-output parameters (normal values for floats,
        small integers for ints); symbolic dimensions are an error (pass real inputs)."""
        from . import testing
        out = []
        r = testing.rng(seed)
        for name, shape, dtype, _ in self._exe.input_specs():
            if shape is None:
                raise TilewrightError(f"kernel '{self.name}': parameter '{name}' has a symbolic shape or is a scalar; "
                                      "cannot make an input for it", hint="pass the inputs explicitly")
            if dtype in ("float16", "bfloat16", "float32", "float64"):
                out.append(testing.randn(shape, dtype, seed=r))
            else:
                out.append(testing.randint(shape, dtype, seed=r, low=0 if dtype in ("uint8", "bool") else -8,
                                           high=2 if dtype == "bool" else 8))
        return tuple(out)

    @property
    def name(self) -> str:
        return self._exe.kernel.name

    @property
    def target(self) -> str:
        return self._exe.target

    def get_source(self, lang: str = "") -> str:
        """The generated code: C++ for the cpu target (``"c++"``); for the Ascend targets the
        AscendC kernel (``"ascendc"``, default), its host launcher (``"ascendc_host"``), CMake
        project (``"ascendc_cmake"``) and README (``"ascendc_readme"``), or the lowered Ascend
        program as text (``"ascend_program"``)."""
        if not isinstance(lang, str):  # nanobind's TypeError leaked (api34 F10)
            raise TilewrightError(f"get_source() takes a language name (a str), got {lang!r}", *user_location(),
                                  hint="get_source() gives the kernel's main source; see help(Kernel.get_source)")
        try:
            return self._exe.source(lang)
        except TilewrightError as e:  # an unknown language: at the call (api34 F10)
            self._raise_at_call(e)

    def write_ascendc_project(self, directory) -> list:
        """Writes the AscendC project (kernel, host launcher, CMakeLists.txt, README.md) for
        building on a machine with CANN and an NPU. Returns the paths written."""
        import pathlib
        paths = []
        try:
            d = pathlib.Path(directory)
            d.mkdir(parents=True, exist_ok=True)
            for name, text in self._exe.ascendc_files():
                (d / name).write_text(text)
                paths.append(d / name)
        except (OSError, TypeError) as e:  # leaked unlocated (rel29 F5)
            raise TilewrightError(f"cannot write the AscendC project of kernel '{self.name}' into {directory!r}: "
                                  f"{getattr(e, 'strerror', None) or e}", *user_location(),
                                  hint="pass a writable directory (created if missing)") from None
        return paths

    def profile(self, *args, functional: bool = True, check: bool = True, trace=None) -> "Profile":
        """Simulated targets (ascend910b*): runs the kernel on ``args`` in the simulator and returns
        its :class:`Profile` (cycles, time at the chip clock, per-pipe busy %, Cube utilisation,
        TFLOP/s, checker reports). ``functional=False`` skips the arithmetic (timing only; outputs
        are left unset). ``trace=path`` also writes a Chrome/Perfetto trace."""
        for flag, value in (("functional", functional), ("check", check)):
            if not isinstance(value, (bool, _np.bool_)):  # nanobind's TypeError leaked (api34 F10)
                raise TilewrightError(f"profile({flag}=...) takes a bool, got {value!r}", *user_location(),
                                      hint=f"{flag}=True or {flag}=False")
        try:
            args, torch_out = _prepare_args(args, self)
        except TilewrightError as e:
            raise TilewrightError(e.message, *user_location(), 0, e.hint) from None
        try:
            with _progress(f"simulating kernel '{self.name}' on {self.target}"):
                outs, report = self._exe.simulate(list(args), bool(functional), bool(check), trace is not None)
        except TilewrightError as e:
            self._raise_at_call(e)
        if trace is not None:
            text = report.pop("trace_json")
            try:
                with open(os.fspath(trace), "w") as f:
                    f.write(text)
            except (OSError, TypeError) as e:  # leaked unlocated (rel29 F5); an int would be a file descriptor
                raise TilewrightError(f"cannot write the trace of kernel '{self.name}' to {trace!r}: "
                                      f"{getattr(e, 'strerror', None) or e}", *user_location(),
                                      hint="pass trace= a file path in a writable directory") from None
        outs = self._wrap(outs)
        return Profile(report, _to_torch(outs) if torch_out else outs)

    def trace(self, path, *args, functional: bool = True) -> "Profile":
        """Simulated targets: runs the kernel on ``args`` and writes a Chrome/Perfetto trace
        (one track per core x pipe) to ``path``; returns the :class:`Profile`."""
        return self.profile(*args, functional=functional, trace=path)

    def get_ir(self, stage: str = "final") -> str:
        """The IR text after a pipeline stage (Tile IR; on Ascend also the Program after each
        program pass); ``stages`` lists them, ``"final"`` is the last."""
        if not isinstance(stage, str):
            raise TilewrightError(f"get_ir() takes a stage name (a str), got {stage!r}", *user_location(),
                                  hint="one of: final, " + ", ".join(self.stages))
        try:
            return self._exe.ir(stage)
        except TilewrightError as e:  # an unknown stage: at the call (api34 F10)
            self._raise_at_call(e)

    @property
    def stages(self) -> list:
        return list(self._exe.stage_names())

    @property
    def from_disk_cache(self) -> bool:
        """True when the compiled code was loaded from the disk cache (no compiler run)."""
        return self._exe.from_disk_cache

    def __repr__(self):
        return f"<tilewright.Kernel {self.name} target={self.target}>"


def _prepare_args(args, kernel):
    """(args with strided or read-only numpy arrays / non-contiguous, non-strided-layout (sparse,
    mkldnn) or neg-bit torch tensors copied, whether any was a torch tensor). The kernels take dense row-major tensors, so such an input is copied;
    but a tensor the kernel writes in place cannot be (the writes would go to the copy): there it
    is an error naming the argument."""
    torch_in = False
    fixed = None
    for i, a in enumerate(args):
        if isinstance(a, _np.ndarray):
            flags = a.flags
            if flags.c_contiguous and flags.writeable:
                continue
            problem = "is not contiguous" if not flags.c_contiguous else "is read-only"
            copy = lambda a=a: _np.array(a, order="C")  # noqa: E731
        elif type(a).__module__.startswith("torch"):
            torch_in = True
            # DLPack exports the memory as it is: a sparse / mkldnn tensor has none to export (data_ptr
            # raised RuntimeError), and a neg-bit view (x._neg_view(), conj().imag) holds the negation
            # of its values, which the kernel read (and wrote) with the wrong sign (h-rel32 F1, F2).
            if a.layout is not sys.modules["torch"].strided:
                problem = f"has layout {a.layout}, not torch.strided"
                copy = lambda a=a: a.to_dense().contiguous()  # noqa: E731
            elif a.is_neg():
                problem = "is a negated view (torch's neg bit: its memory holds the negated values)"
                copy = lambda a=a: a.resolve_neg().contiguous()  # noqa: E731
            elif a.is_contiguous():
                continue
            else:
                problem = "is not contiguous"
                copy = a.contiguous
        else:
            continue
        if i in kernel._written:
            raise TilewrightError(f"argument {i} ('{_input_name(kernel, i)}') of kernel '{kernel.name}' {problem}, "
                                  "and the kernel writes it in place: its writes would go to a copy",
                                  hint="pass a writable C-contiguous array (numpy.ascontiguousarray(a), "
                                       "tensor.contiguous(), tensor.resolve_neg(), tensor.to_dense()) and read "
                                       "the result from it")
        try:
            fixed = fixed or list(args)
            fixed[i] = copy()
        except (ValueError, MemoryError, RuntimeError) as e:
            raise TilewrightError(f"argument {i} ('{_input_name(kernel, i)}') of kernel '{kernel.name}' {problem} "
                                  f"and cannot be copied to a contiguous one: {e}",
                                  hint="pass a C-contiguous array of the kernel's shape") from None
    args = tuple(fixed) if fixed else args
    if kernel._written:
        _check_no_overlap(args, kernel)
    return args, torch_in


def _byte_range(a):
    """[start, end) of a host array's bytes (numpy or a CPU torch tensor), or None for anything else."""
    if isinstance(a, _np.ndarray):
        start = a.__array_interface__["data"][0]
        return (start, start + a.nbytes) if a.nbytes else None
    if type(a).__module__.startswith("torch") and hasattr(a, "data_ptr") and a.device.type == "cpu":
        n = a.numel() * a.element_size()
        return (a.data_ptr(), a.data_ptr() + n) if n else None
    return None


def _check_no_overlap(args, kernel):
    """A tensor the kernel writes in place must not share memory with another argument: the kernel
    assumes distinct buffers, so reading one while writing the other gives a wrong answer without an
    error (session 23, h-hunt11b F19: Y[i] = X[5 - i] called as k(x, x))."""
    ranges = [_byte_range(a) for a in args]
    for w in kernel._written:
        if w >= len(ranges) or ranges[w] is None:
            continue
        for j, r in enumerate(ranges):
            if j != w and r is not None and r[0] < ranges[w][1] and ranges[w][0] < r[1]:
                raise TilewrightError(f"argument {w} ('{_input_name(kernel, w)}') of kernel '{kernel.name}', which the "
                                      f"kernel writes, overlaps argument {j} ('{_input_name(kernel, j)}') in memory: "
                                      "the kernel assumes distinct buffers, and its result would depend on the order "
                                      "of its reads and writes",
                                      hint="pass separate arrays (copy one first), or write the kernel with one "
                                           "parameter that it reads and writes")


def _input_name(kernel, i):
    specs = kernel._exe.input_specs()
    return specs[i][0] if i < len(specs) else "?"


def _to_torch(out):
    """numpy outputs as torch tensors, sharing memory (DLPack); bfloat16 through its bits."""
    import torch
    if out is None:
        return None
    if isinstance(out, tuple):
        return tuple(_to_torch(o) for o in out)
    if out.dtype.name == "bfloat16":  # ml_dtypes.bfloat16 (not imported here: see _bf16_dtype)
        return torch.from_dlpack(out.view(_np.int16)).view(torch.bfloat16)
    return torch.from_dlpack(out)


class Profiler:
    """tilelang's profiler shape: ``kernel.get_profiler().do_bench(*inputs)``."""

    def __init__(self, kernel):
        self.kernel = kernel

    def do_bench(self, *inputs, warmup=25, rep=100, quantiles=None, return_mode="mean"):
        """Milliseconds per call of the kernel on ``inputs`` (seeded inputs when omitted), by
        :func:`tilewright.do_bench` (simulated time on Ascend targets)."""
        from .benchmark import do_bench
        args = inputs or self.kernel.example_inputs()
        return do_bench(lambda: self.kernel(*args), warmup=warmup, rep=rep, quantiles=quantiles,
                        return_mode=return_mode)


class Profile(dict):
    """The simulator's report of one run (a dict): ``total_cycles``, ``time_us`` (at the chip
    clock), ``pipe_busy_pct`` ({"AIC"|"AIV": {pipe: %}}), ``cube_utilisation`` (fraction of the
    chip's peak Cube throughput), ``tflops``, ``reports`` (checker findings, formatted) and
    ``summary`` (text). ``outputs`` holds the kernel's outputs of that run. Simulated figures are
    a model's, not a measurement."""

    def __init__(self, report, outputs):
        super().__init__(report)
        self.outputs = outputs

    def __str__(self):
        return self["summary"]


def _index(value):
    """An int index (numpy's included), or None for anything else (a bool, a float, a str)."""
    if isinstance(value, (bool, _np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:  # a numpy array of one element has __index__ and raises
        return None


def _out_indices(ir_kernel, out_idx):
    if out_idx is None:
        return []
    n = len(ir_kernel.params)
    # one index, numpy's too (numpy.int64 was iterated: TypeError), or a sequence of them; a bool is
    # not an index (out_idx=True made parameter 1 the output: api34 F8)
    indices = [out_idx] if _index(out_idx) is not None else out_idx if isinstance(out_idx, (list, tuple)) else None
    result = []
    for i in indices if indices is not None else [out_idx]:
        k = _index(i)
        if k is None or not -n <= k < n:
            raise TilewrightError(f"out_idx {i!r} is not a parameter index of '{ir_kernel.name}' ({n} parameters)",
                                  *user_location(), hint=f"use an int in [-{n}, {n}), or a list of them")
        result.append(k % n)
    return result


def _build(prim_or_fn, target: str, out_idx, defining_locals=None) -> Kernel:
    """Compile a PrimFunc, or parse and compile a tile-loops function (``defining_locals``: the
    scope its postponed annotations are evaluated in, as for parse_tile_loops)."""
    if not isinstance(target, str):
        raise TilewrightError(f"target must be a target name (a str), got {target!r}", *user_location(),
                              hint="one of: " + ", ".join(name for name, _ in _C.targets()))
    if isinstance(prim_or_fn, PrimFunc):
        ir_kernel = prim_or_fn.ir
    else:  # a function with tile loops; anything else is the front end's located error (api34 F1, F3)
        from .frontend import parse_tile_loops
        ir_kernel = parse_tile_loops(prim_or_fn, defining_locals=defining_locals)
    outs = _out_indices(ir_kernel, out_idx)
    inputs = [i for i in outs if not ir_kernel.params[i].is_output]
    if inputs and not isinstance(prim_or_fn, PrimFunc):
        # it made the input an output: allocated, never written, returned as garbage (api34 F17)
        name = ir_kernel.params[inputs[0]].name
        raise TilewrightError(f"out_idx names input '{name}' of the tile-loops kernel '{ir_kernel.name}': its "
                              "outputs are its tw.output declarations", *user_location(),
                              hint="leave out_idx out for a tile-loops kernel; it returns what tw.output declares")
    if outs:
        ir_kernel = _C.mark_outputs(ir_kernel, outs)
    written = set(_C.written_params(ir_kernel))
    unwritten = [p.name for i, p in enumerate(ir_kernel.params) if p.is_output and i not in written]
    if unwritten:  # returned as uninitialised memory, silently (api34 F18)
        names = [p.name for i, p in enumerate(ir_kernel.params) if i in written and not p.is_output]
        fix = ("store every tw.output the kernel returns (tw.store(out, ...))" if not outs else
               f"out_idx names the parameters the kernel writes (here {', '.join(map(repr, names))})" if names else
               "the kernel writes none of its tensor parameters: leave out_idx out and pass every tensor as an input")
        raise TilewrightError(f"kernel '{ir_kernel.name}' never writes its output '{unwritten[0]}': it would be "
                              "returned uninitialised", *user_location(), hint=fix)
    t0 = time.perf_counter()
    try:
        with _progress(f"compiling kernel '{ir_kernel.name}' for {target}"):
            exe = _C.compile(ir_kernel, target)
    except TilewrightError as e:
        if e.line > 0:
            raise
        # not about a kernel line (an unknown target, a missing compiler): at the call that compiles (api34 F3)
        raise TilewrightError(e.message, *user_location(), 0, e.hint) from None
    return Kernel(exe, time.perf_counter() - t0)


_live_kernels = weakref.WeakSet()  # every Kernel object alive, for kernel_stats()


def kernel_stats() -> list:
    """:meth:`Kernel.stats` of every compiled kernel object alive in this process (those of
    ``tw.jit`` caches and ``tw.compile`` results), most called first."""
    return sorted((k.stats() for k in list(_live_kernels)), key=lambda d: (-d["calls"], d["name"]))


def compile(fn=None, *, target: str = "cpu", out_idx=None):  # noqa: A001 - the tile-language verb
    """Compile a kernel now.

    * ``tw.compile(prim_func, out_idx=[-1], target="cpu")`` compiles an explicit-style kernel.
    * ``@tw.compile(target="cpu")`` on a function written with tile loops (``tw.output``,
      ``tw.load``, ``tw.matmul``, ``tw.store`` inside ``for`` loops) replaces it by the compiled
      kernel. Errors are reported at the definition, not at the first call.
    """
    # a tile-loops function is parsed here, so its postponed annotations see the scope of the call
    # when that scope defined it (a factory's locals: hunt35 F3)
    if fn is None:
        return lambda f: _build(f, target, out_idx, caller_scope(f, 1))
    return _build(fn, target, out_idx, caller_scope(fn, 1))


def _freeze(value):
    """A @tw.jit argument as a cache key. Numbers carry their type, and floats their bits: Python
    equates 0.0 with -0.0 and 1 with 1.0 and True, but each builds another kernel (``X / -0.0`` is
    -inf, ``X * 1`` on int32 is exact where ``X * 1.0`` rounds through float32), and NaN equals
    nothing, so it never hit (h-rel17 F1)."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, float):
        return (float, value.hex())
    if isinstance(value, int):
        return (type(value), value)
    return value


def _python_scalar(value):
    """A numpy number as the Python number a kernel takes (numpy.int64(4096), e.g. a size computed with
    numpy, builds the kernel of 4096; the front end takes Python numbers only); anything else as it is."""
    if isinstance(value, _np.generic) and isinstance(value, (_np.integer, _np.floating, _np.bool_)):
        return value.item()
    return value


def jit(fn=None, *, out_idx=None, target: str = "cpu"):
    """``@tw.jit(out_idx=[-1])`` on a function whose parameters (sizes, block sizes, dtypes) build a
    ``@T.prim_func``: calling it returns the compiled :class:`Kernel`, cached per distinct
    arguments for the life of the process (repeated calls do not recompile).

    The kernel is compiled for ``target`` (default ``"cpu"``); a call may choose another one with
    the keyword ``target=`` (``softmax(4096, target="ascend910b")``): the same kernel source for
    every target."""
    if fn is None:
        return lambda f: jit(f, out_idx=out_idx, target=target)
    try:  # not callable: inspect's TypeError leaked; a builtin or a class built no kernel (api34 F4)
        signature = None if inspect.isbuiltin(fn) or inspect.isclass(fn) else inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    if signature is None:
        raise TilewrightError(f"@tw.jit decorates a kernel factory (a Python function), got {fn!r}", *user_location(),
                              hint="put @tw.jit(out_idx=...) on a 'def' whose arguments (sizes, dtypes) build and "
                                   "return a @T.prim_func")

    cache: collections.OrderedDict = collections.OrderedDict()  # least recently used first
    state = _JitCache(cache)
    default_target = target
    takes_target = "target" in signature.parameters
    name = getattr(fn, "__name__", repr(fn))

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        tgt = default_target if takes_target else kwargs.pop("target", None) or default_target
        args = tuple(_python_scalar(a) for a in args)
        kwargs = {k: _python_scalar(v) for k, v in kwargs.items()}
        key = (_freeze(args), _freeze(kwargs), tgt)
        try:
            hash(key)
        except TypeError:
            bad = next((repr(v) for v in (*args, *kwargs.values()) if not _hashable(_freeze(v))), "?")
            raise TilewrightError(f"@tw.jit function '{name}' got an argument that cannot be a cache key: {bad}",
                                  *user_location(),
                                  hint="pass ints, floats, strings, dtypes or tuples of them; tw.jit compiles one "
                                       "kernel per distinct argument values") from None
        with state.lock:
            kernel = cache.get(key)
            if kernel is not None:
                cache.move_to_end(key)
                return kernel
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:  # the factory's TypeError was raised from this wrapper (api34 F6)
            raise TilewrightError(f"@tw.jit function '{name}{signature}': {e}", *user_location(),
                                  hint="pass the factory's parameters (sizes, block sizes, dtypes); the compiled "
                                       "kernel it returns takes the arrays") from None
        prim = fn(*args, **kwargs)
        if not isinstance(prim, PrimFunc) and not inspect.isfunction(prim):
            code = getattr(inspect.unwrap(fn), "__code__", None)  # the factory's mistake: at its definition (api34 F5)
            raise TilewrightError(f"@tw.jit function '{name}' must return a @T.prim_func "
                                  f"or a function written with tile loops, got {prim!r}",
                                  *((code.co_filename, code.co_firstlineno) if code else user_location()),
                                  hint="end the factory with 'return main', main being the @T.prim_func it defines")
        # a tile-loops function it returns is parsed after the factory returned: its postponed
        # annotations see the factory's parameters (its other locals are gone; hunt35 F3)
        bound.apply_defaults()
        scope = defining_scope(prim, getattr(inspect.unwrap(fn), "__code__", None), bound.arguments)
        kernel = _build(prim, tgt, out_idx, scope)
        with state.lock:
            cache[key] = kernel
            cache.move_to_end(key)
            while len(cache) > _C.memory_cache_max():  # TW_MEMORY_CACHE_MAX
                cache.popitem(last=False)
        return kernel

    wrapper.cache = cache
    wrapper._tw_jit_cache = state  # the registry holds it weakly: it lives as long as wrapper
    _jit_caches.add(state)
    return wrapper


def _hashable(value) -> bool:
    try:
        hash(value)
        return True
    except TypeError:
        return False


class _JitCache:
    """One @tw.jit function's cache and its lock, registered (weakly) for cache_info(),
    clear_cache() and fork()."""

    def __init__(self, cache):
        self.cache, self.lock = cache, threading.Lock()


_jit_caches: "weakref.WeakSet[_JitCache]" = weakref.WeakSet()


def _after_fork_in_child():
    # A thread of the parent may have held a cache's lock at the fork (it is held only between
    # bytecodes of dict updates, but a thread can lose the GIL there): it would be held forever
    # in the child, whose next call of that function would hang. The dicts are whole (every
    # update is one bytecode), so only the locks are made afresh.
    for jc in list(_jit_caches):
        jc.lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def cache_info() -> dict:
    """The state of Tilewright's caches, as a dict::

        {"jit":    {"functions": int,      # live @tw.jit functions
                    "entries": int},       # kernels they hold (each bounded by TW_MEMORY_CACHE_MAX, LRU)
         "memory": {"entries": int,        # compiled cpu kernels kept for reuse (LRU)
                    "max_entries": int,    # TW_MEMORY_CACHE_MAX
                    "loaded_kernels": int},  # cpu kernel libraries loaded now (cached or referenced)
         "disk":   {"enabled": bool,       # False with TW_CACHE_DISABLE=1
                    "dir": str,            # <TW_CACHE_DIR>/kernels ("" when disabled)
                    "entries": int, "bytes": int,
                    "max_bytes": int}}     # TW_CACHE_MAX_BYTES

    Kernels for the simulated targets (ascend910b*) are held only by tw.jit and Kernel objects."""
    info = _C.cache_info()
    caches = list(_jit_caches)
    info["jit"] = {"functions": len(caches), "entries": sum(len(c.cache) for c in caches)}
    return info


def clear_cache(disk: bool = False) -> None:
    """Empties every @tw.jit cache and the in-memory kernel cache; a kernel library is unloaded
    once no :class:`Kernel` object refers to it. ``disk=True`` also removes every entry of the
    disk cache (later compiles run the host compiler again)."""
    if not isinstance(disk, bool):
        raise TilewrightError(f"clear_cache(disk=...) takes a bool, got {disk!r}", *user_location(),
                              hint="clear_cache() empties the in-memory caches, clear_cache(disk=True) also the disk cache")
    for c in list(_jit_caches):
        with c.lock:
            c.cache.clear()
    try:
        _C.clear_cache(disk)
    except RuntimeError as e:  # the disk cache's files could not be changed: a read-only file system (rel30 F2)
        raise TilewrightError(f"clear_cache(disk=True) could not empty the disk cache: {e}", *user_location(),
                              hint="a cache on a read-only file system can be read, not emptied: remove it where it "
                                   "is writable, or set TW_CACHE_DIR to a writable directory") from None
