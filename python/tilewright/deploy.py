"""From a Python prototype to a C++ service (docs/deploying.md).

* :func:`export` (and ``Kernel.export``) writes compiled kernels as a self-contained artifact
  directory that the C++ runtime (``tilewright/artifact.h``, ``find_package(Tilewright)``)
  loads without Python or a compiler.
* :func:`precompile` compiles a list of kernels at start-up, in parallel, with progress;
  :func:`freeze` (or ``TW_FROZEN=1``) then turns any compile on the request path into an error.
* :func:`kernel_stats`: per-kernel call counts and compile times.
* The command line: ``python -m tilewright.deploy export|precompile ...`` (:func:`cli_export`,
  :func:`cli_precompile`).

A *spec* names one kernel to build: ``(factory, args)`` or ``(factory, args, target)``, where
``factory(*args)`` (``factory(*args, target=target)`` when a target is given) returns a compiled
:class:`tilewright.Kernel` — a ``@tw.jit`` function, or any function that returns
``tw.compile(...)``. ``args`` is a tuple (or a single value).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import importlib
import importlib.util
import os
import pathlib
import sys
import time
from collections.abc import Mapping

from . import _C
from .errors import TilewrightError, user_location
from .jit import Kernel, kernel_stats

__all__ = ["export", "read_manifest", "precompile", "freeze", "frozen", "kernel_stats",
           "cli_export", "cli_precompile"]


def export(kernels, directory, name: str = None, cpu_arch: str = None) -> list:
    """Writes ``kernels`` (a :class:`Kernel` or a list of them, all for one target) into
    ``directory`` as one artifact and returns the paths written (the manifest last).

    cpu: ``lib<name>.so`` with one typed C entry point ``<name>_<kernel>`` per kernel,
    ``<name>.h`` declaring them, and ``tilewright.manifest`` (kernels, parameters with dtypes and
    shapes — symbolic dimensions stay symbolic —, target, CPU features required, compiler,
    Tilewright version, sha256 of every file). Ascend targets: each kernel's AscendC project in
    ``<kernel>/`` and the manifest. ``name`` defaults to the kernel's name (one kernel) or
    ``"kernels"``. ``kernels`` may be a dict ``{name: kernel}``: each kernel is exported under its
    name (a C identifier) instead of its own -- one factory built at several shapes gives kernels
    of one name. ``cpu_arch`` (cpu): the g++ ``-march`` value to compile the library for, e.g.
    ``"x86-64-v3"`` for any AVX2 + FMA server (Zen 3, Haswell and later) or ``"znver3"``; default
    this process's (``TW_CPU_ARCH``, else ``native``: this machine's CPU). It may be one this
    machine cannot run: nothing exported is loaded here; the manifest records the architecture
    and the CPU features it needs, which the C++ runtime checks before loading."""
    if isinstance(kernels, Kernel):
        kernels = [kernels]
    names = []
    if isinstance(kernels, Mapping):
        names, kernels = list(kernels.keys()), list(kernels.values())
        bad = next((n for n in names if not isinstance(n, str) or not n), None)
        if bad is not None:
            raise TilewrightError(f"export: kernel name {bad!r} is not a non-empty str", *user_location(),
                                  hint="pass {\"name\": kernel, ...} with C identifiers as names")
    if not hasattr(kernels, "__iter__") or isinstance(kernels, (str, bytes)):
        raise TilewrightError(f"cannot export {kernels!r}: not a compiled kernel or a list of them", *user_location(),
                              hint="pass kernels returned by tw.compile / a @tw.jit function")
    for what, value in (("name", name), ("cpu_arch", cpu_arch)):
        if value is not None and not isinstance(value, str):
            raise TilewrightError(f"export({what}=...) takes a str, got {value!r}", *user_location())
    if cpu_arch is not None and not cpu_arch:  # `--cpu-arch "$FLEET_ARCH"` with the variable unset (h-hunt11b F17)
        raise TilewrightError("export(cpu_arch=\"\"): an empty architecture", *user_location(),
                              hint="pass a -march value (e.g. x86-64-v3), \"native\" for this machine, or leave it "
                                   "out (TW_CPU_ARCH, else native)")
    kernels = list(kernels)
    for k in kernels:
        if not isinstance(k, Kernel):
            raise TilewrightError(f"cannot export {k!r}: not a compiled kernel", *user_location(),
                                  hint="pass kernels returned by tw.compile / a @tw.jit function")
    if name is None:
        name = (names[0] if names else kernels[0].name) if len(kernels) == 1 else "kernels"
    try:
        path = os.fspath(directory)
    except TypeError:
        path = None
    if not isinstance(path, str) or not path or "\0" in path:
        raise TilewrightError(f"export() takes a directory path (a non-empty str or os.PathLike), got "
                              f"{directory!r}", *user_location(), hint="pass e.g. 'build/kernels'")
    _check_utf8(path, "export()")
    try:
        files, _ = _C.export_artifact([k._exe for k in kernels], path, name, cpu_arch or "", names)
    except TilewrightError as e:
        if e.line > 0:  # located at a kernel's definition
            raise
        # The directory, the disk, the name: the mistake is at the call.
        raise TilewrightError(e.message, *user_location(), 0, e.hint) from None
    return [pathlib.Path(f) for f in files]


def read_manifest(directory) -> dict:
    """The manifest of an exported artifact as a dict: ``tilewright`` (version), ``target``,
    ``abi``/``compiler``/``cpu_arch``/``cpu_features``/``library`` (cpu), ``runtime`` (cpu, when a kernel calls
    gemm: the gemm runtime library shipped next to ``library``), ``files`` and ``kernels`` (name,
    symbol, shape_vars, params with name, dtype, output, shape or scalar)."""
    try:
        path = os.fspath(directory)
    except TypeError:
        path = None
    if not isinstance(path, str) or "\0" in path:  # a NUL would cut the path short in C (robust38 F2)
        raise TilewrightError(f"read_manifest() takes a directory path (a str or os.PathLike), got {directory!r}",
                              *user_location(), hint="pass the directory written by kernel.export(dir)")
    _check_utf8(path, "read_manifest()")
    try:
        return _C.read_manifest(path)
    except TilewrightError as e:  # a missing or damaged artifact: the mistake is at the call (robust38 F2)
        raise TilewrightError(e.message, *user_location(), 0, e.hint) from None


def _check_utf8(path: str, who: str) -> None:
    """An artifact's directory path must be UTF-8 (the bindings take UTF-8 text; such a path was their
    TypeError "incompatible function arguments": rel30 F7)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise TilewrightError(f"{who}: the directory path {os.fsencode(path)!r} is not UTF-8", *user_location(1),
                              hint="use a directory whose path is UTF-8 (rename it)") from None


def freeze(on: bool = True) -> None:
    """Freezes the kernel cache of this process: from now on a kernel that is not already
    compiled (in memory or in the disk cache) is an error instead of a compile. ``freeze(False)``
    undoes it (``TW_FROZEN=1`` cannot be undone)."""
    if not isinstance(on, bool):  # freeze("no") would freeze
        raise TilewrightError(f"freeze() takes a bool, got {on!r}", *user_location(), hint="tw.freeze() or tw.freeze(False)")
    try:
        _C.freeze(on)
    except TilewrightError as e:  # TW_FROZEN=1 and freeze(False): at the call
        raise TilewrightError(e.message, *user_location(), hint=e.hint) from None


def frozen() -> bool:
    """True when the kernel cache is frozen (:func:`freeze` or ``TW_FROZEN=1``)."""
    return _C.frozen()


def _describe(spec) -> str:
    factory, args, target = spec
    name = getattr(factory, "__name__", repr(factory))
    text = f"{name}({', '.join(repr(a) for a in args)})"
    return f"{text} on {target}" if target else text


def _normalise(spec):
    if not isinstance(spec, (tuple, list)) or len(spec) not in (2, 3) or not callable(spec[0]):
        raise TilewrightError(f"bad kernel spec {spec!r}", *user_location(),
                              hint="a spec is (factory, args) or (factory, args, target), with factory a "
                                   "@tw.jit function or a function returning tw.compile(...)")
    factory, args = spec[0], spec[1]
    target = spec[2] if len(spec) == 3 else None
    if not isinstance(args, (tuple, list)):
        args = (args,)
    if target is not None and not isinstance(target, str):
        raise TilewrightError(f"bad target {target!r} in kernel spec {spec!r}", *user_location(), hint="a target name, e.g. \"cpu\"")
    return factory, tuple(args), target


def _build(spec) -> Kernel:
    factory, args, target = spec
    kernel = factory(*args, target=target) if target else factory(*args)
    if not isinstance(kernel, Kernel):
        raise TilewrightError(f"{_describe(spec)} returned {kernel!r}, not a compiled kernel",
                              hint="the factory must be a @tw.jit function or return tw.compile(...)")
    return kernel


def precompile(specs, *, workers: int = None, progress=True) -> list:
    """Compiles every spec (see the module docstring) now, ``workers`` at a time (default: the
    CPUs of this process), and returns the kernels in spec order. Kernels in the disk cache are
    loaded, not compiled. ``progress`` (True: stderr, or a file object, or False) reports each
    kernel as it finishes with its time. The first failure is raised after the others finish.
    Typically followed by :func:`freeze` in a service."""
    if isinstance(specs, (str, bytes)) or not hasattr(specs, "__iter__"):
        raise TilewrightError(f"precompile() takes a list of kernel specs, got {specs!r}", *user_location(),
                              hint="tw.precompile([(factory, args), (factory, args, target), ...])")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise TilewrightError(f"precompile(workers=...) must be a positive int, got {workers!r}", *user_location())
    if not isinstance(progress, bool) and not callable(getattr(progress, "write", None)):
        raise TilewrightError(f"precompile(progress=...) takes True (stderr), False or a file object, got {progress!r}",
                              *user_location())
    specs = [_normalise(s) for s in specs]
    out = [None] * len(specs)
    stream = sys.stderr if progress is True else (progress or None)
    workers = workers or len(os.sched_getaffinity(0))
    first_error = None
    failed = 0
    t_all = time.perf_counter()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = {pool.submit(_build, s): i for i, s in enumerate(specs)}
        for n, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            i = futures[fut]
            try:
                out[i] = fut.result()
                how = "disk cache" if out[i].from_disk_cache else "compiled"
                status = f"{out[i].stats()['compile_s']:.2f} s ({how})"
            except Exception as e:  # noqa: BLE001 - reported, then the first one is re-raised
                first_error = first_error or e
                failed += 1
                status = "FAILED: " + str(e).splitlines()[0]
            if stream:
                print(f"tilewright: precompile [{n}/{len(specs)}] {_describe(specs[i])}: {status}",
                      file=stream, flush=True)
    except BaseException as e:  # Ctrl-C: the queued specs are dropped (h-hunt11b F15), the running ones' compilers
        pool.shutdown(wait=False, cancel_futures=True)  # ended (no signal reaches the pool's threads: intr31)
        if isinstance(e, KeyboardInterrupt):
            _C.interrupt_compiles()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    if stream:  # the count that built (a failed spec is not "precompiled")
        print(f"tilewright: precompiled {len(specs) - failed} of {len(specs)} kernel(s) in "
              f"{time.perf_counter() - t_all:.2f} s" + (f"; {failed} FAILED (the first one below)" if failed else ""),
              file=stream, flush=True)
    if isinstance(first_error, TilewrightError) and first_error.line <= 0:  # raised in a pool thread: at the call
        raise TilewrightError(first_error.message, *user_location(), 0, first_error.hint) from None
    if first_error is not None:
        raise first_error
    return out


# --------------------------------------------------------------------------------------------
# Command line


def import_file(path: str):
    """Imports ``path/to/file.py`` (the command line's FILE.py, for export / precompile / tune / check)
    under its own name with its directory on sys.path (kept), as `import` would: the worker processes
    of an @tw.autotune factory import it by that name. Only a regular file: a FIFO there would block
    the import forever (robust38 F3), a directory is no module."""
    p = pathlib.Path(path)
    if not p.is_file():
        what = "no such file" if not p.exists() else "not a regular file"
        raise TilewrightError(f"{what}: {path}", hint="pass FILE.py[:NAME] or package.module[:NAME]")
    here = sys.modules.get(p.stem)
    name = p.stem if here is None or getattr(here, "__file__", None) == str(p.resolve()) else f"_tw_deploy_{p.stem}"
    module_spec = importlib.util.spec_from_file_location(name, p.resolve())
    module = importlib.util.module_from_spec(module_spec)
    if str(p.resolve().parent) not in sys.path:
        sys.path.insert(0, str(p.resolve().parent))
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _load_attr(ref: str, default_attr: str):
    """``path/to/file.py[:ATTR]`` or ``package.module[:ATTR]`` -> the attribute."""
    path, _, attr = ref.rpartition(":") if ref.count(":") and not ref.endswith(".py") else (ref, "", "")
    attr = attr or default_attr
    if path.endswith(".py"):
        module = import_file(path)
    else:
        try:
            module = importlib.import_module(path)
        except (ImportError, ValueError, TypeError) as e:  # '' or '..x' leaked ValueError / TypeError (rel31 F2)
            raise TilewrightError(f"cannot import {path!r}: {e}",
                                  hint="pass FILE.py[:NAME] or an importable package.module[:NAME]") from e
    if not hasattr(module, attr):
        raise TilewrightError(f"{path} defines no {attr!r}",
                              hint=f"define {attr} = [(factory, args, target), ...] there, or name it: {path}:NAME")
    return getattr(module, attr)


def _kernels_from(value):
    """A Kernel, a spec, or a list of kernels and specs -> compiled kernels; a dict of them ->
    a dict of compiled kernels under the same names."""
    if isinstance(value, Mapping):
        return dict(zip(value.keys(), _kernels_from(list(value.values()))))
    if isinstance(value, Kernel):
        return [value]
    if isinstance(value, tuple) and value and callable(value[0]) and not isinstance(value[0], Kernel):
        value = [value]
    if not hasattr(value, "__iter__") or isinstance(value, (str, bytes)):
        from .prim_func import PrimFunc
        if isinstance(value, PrimFunc):  # the fix names the value (api35 F3)
            fix = f"compile it first: tw.compile({value.name}, out_idx=[...]) is a kernel to export"
        elif hasattr(value, "_tw_jit_cache"):
            fix = f"name it with its arguments: a spec ({value.__name__}, (args...)) or a list of them"
        else:
            fix = "SPECS = [kernel, (factory, (args...)), ...]"
        raise TilewrightError(f"cannot export {value!r}: not a kernel, a spec, or a list / dict / iterable of them",
                              hint=fix)
    value = list(value)  # any iterable of kernels and specs (a generator too)
    kernels, specs, where = [None] * len(value), [], []
    for i, v in enumerate(value):
        if isinstance(v, Kernel):
            kernels[i] = v
        else:
            specs.append(v)
            where.append(i)
    for i, k in zip(where, precompile(specs, progress=False) if specs else []):
        kernels[i] = k
    return kernels


def _run_cli(fn, argv) -> int:
    try:
        return fn(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else 2
    except TilewrightError as e:
        print(f"tilewright: {e}", file=sys.stderr)  # str(e) starts "error:" already (it read "error: error:")
        return 1


def _parser(command, description, names):
    ap = argparse.ArgumentParser(prog=f"tilewright {command}", description=description)
    ap.add_argument("source", help=f"FILE.py[:NAME] or package.module[:NAME]; NAME (default SPECS) is {names}")
    return ap


def _export_main(argv) -> int:
    ap = _parser("export", "Compile kernels and write them as an artifact for the C++ runtime (docs/deploying.md).",
                 "a kernel, a spec (factory, args[, target]), a list of them or a dict {kernel name: ...}")
    ap.add_argument("-o", "--output", required=True, help="artifact directory to write")
    ap.add_argument("--name", default=None, help="library name (a C identifier; prefixes the symbols)")
    ap.add_argument("--cpu-arch", default=None, metavar="ARCH",
                    help="g++ -march value to compile for, e.g. x86-64-v3 (any AVX2 + FMA CPU), znver3, "
                         "skylake-avx512 (default: TW_CPU_ARCH, else native: this machine)")
    a = ap.parse_args(argv)
    kernels = _kernels_from(_load_attr(a.source, "SPECS"))
    if not kernels:
        raise TilewrightError(f"{a.source} lists no kernels", hint="list at least one (factory, args, target)")
    for p in export(kernels, a.output, a.name, cpu_arch=a.cpu_arch):
        print(p)
    return 0


def _precompile_main(argv) -> int:
    ap = _parser("precompile", "Compile a service's kernels into the disk cache at start-up, in parallel, "
                               "with progress.", "a list of specs (factory, args[, target])")
    ap.add_argument("-j", "--jobs", type=int, default=None, help="kernels compiled at a time (default: CPUs)")
    a = ap.parse_args(argv)
    if a.jobs is not None and a.jobs < 1:
        raise TilewrightError(f"--jobs {a.jobs}: must be at least 1")
    specs = _load_attr(a.source, "SPECS")
    if not isinstance(specs, (list, tuple)):
        raise TilewrightError(f"{a.source} is {specs!r}, not a list of specs",
                              hint="SPECS = [(factory, args, target), ...]")
    precompile(list(specs), workers=a.jobs)
    return 0


def cli_export(argv: list) -> int:
    """``tilewright export FILE.py[:NAME] -o DIR [--name LIB] [--cpu-arch ARCH]``; returns the exit status."""
    return _run_cli(_export_main, list(argv))


def cli_precompile(argv: list) -> int:
    """``tilewright precompile FILE.py[:NAME] [-j N]``; returns the exit status."""
    return _run_cli(_precompile_main, list(argv))


_COMMANDS = {"export": cli_export, "precompile": cli_precompile}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in _COMMANDS:
        print("usage: python -m tilewright.deploy {export,precompile} ...", file=sys.stderr)
        return 2
    return _COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
