"""Compiling and calling kernels: ``tw.jit``, ``tw.compile`` and the compiled :class:`Kernel`."""
from __future__ import annotations

import functools
import inspect
import time
import weakref

from . import _C
from .errors import TilewrightError
from .language import PrimFunc

__all__ = ["jit", "compile", "Kernel", "Profile", "kernel_stats"]



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
        _live_kernels.add(self)

    def __call__(self, *args):
        self._calls += 1
        return self._wrap(self._exe(*args))

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
        return self._exe.source(lang)

    def write_ascendc_project(self, directory) -> list:
        """Writes the AscendC project (kernel, host launcher, CMakeLists.txt, README.md) for
        building on a machine with CANN and an NPU. Returns the paths written."""
        import pathlib
        d = pathlib.Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, text in self._exe.ascendc_files():
            (d / name).write_text(text)
            paths.append(d / name)
        return paths

    def profile(self, *args, functional: bool = True, check: bool = True, trace=None) -> "Profile":
        """Simulated targets (ascend910b*): runs the kernel on ``args`` in the simulator and returns
        its :class:`Profile` (cycles, time at the chip clock, per-pipe busy %, Cube utilisation,
        TFLOP/s, checker reports). ``functional=False`` skips the arithmetic (timing only; outputs
        are left unset). ``trace=path`` also writes a Chrome/Perfetto trace."""
        outs, report = self._exe.simulate(list(args), functional, check, trace is not None)
        if trace is not None:
            with open(trace, "w") as f:
                f.write(report.pop("trace_json"))
        return Profile(report, self._wrap(outs))

    def trace(self, path, *args, functional: bool = True) -> "Profile":
        """Simulated targets: runs the kernel on ``args`` and writes a Chrome/Perfetto trace
        (one track per core x pipe) to ``path``; returns the :class:`Profile`."""
        return self.profile(*args, functional=functional, trace=path)

    def get_ir(self, stage: str = "final") -> str:
        """The Tile IR text after a pipeline stage; ``stages`` lists them."""
        return self._exe.ir(stage)

    @property
    def stages(self) -> list:
        return list(self._exe.stage_names())

    @property
    def from_disk_cache(self) -> bool:
        """True when the compiled code was loaded from the disk cache (no compiler run)."""
        return self._exe.from_disk_cache

    def __repr__(self):
        return f"<tilewright.Kernel {self.name} target={self.target}>"


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


def _out_indices(ir_kernel, out_idx):
    if out_idx is None:
        return []
    if isinstance(out_idx, int):
        out_idx = [out_idx]
    n = len(ir_kernel.params)
    result = []
    for i in out_idx:
        if not isinstance(i, int) or not -n <= i < n:
            raise TilewrightError(f"out_idx {i!r} is not a parameter index of '{ir_kernel.name}' ({n} parameters)",
                                  hint=f"use an int in [-{n}, {n})")
        result.append(i % n)
    return result


def _build(prim_or_fn, target: str, out_idx) -> Kernel:
    if isinstance(prim_or_fn, PrimFunc):
        ir_kernel = prim_or_fn.ir
    elif inspect.isfunction(prim_or_fn):
        from .frontend import parse_tile_loops
        ir_kernel = parse_tile_loops(prim_or_fn)
    else:
        raise TilewrightError(f"cannot compile {prim_or_fn!r}",
                              hint="pass a @T.prim_func or a function written with tile loops")
    outs = _out_indices(ir_kernel, out_idx)
    if outs:
        ir_kernel = _C.mark_outputs(ir_kernel, outs)
    t0 = time.perf_counter()
    exe = _C.compile(ir_kernel, target)
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
    if fn is None:
        return lambda f: _build(f, target, out_idx)
    return _build(fn, target, out_idx)


def _freeze(value):
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
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

    cache: dict = {}
    default_target = target
    takes_target = "target" in inspect.signature(fn).parameters

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        tgt = default_target if takes_target else kwargs.pop("target", None) or default_target
        key = (_freeze(args), _freeze(kwargs), tgt)
        kernel = cache.get(key)
        if kernel is None:
            prim = fn(*args, **kwargs)
            if not isinstance(prim, PrimFunc):
                raise TilewrightError(f"@tw.jit function '{fn.__name__}' must return a @T.prim_func, got {prim!r}")
            kernel = cache[key] = _build(prim, tgt, out_idx)
        return kernel

    wrapper.cache = cache
    return wrapper
