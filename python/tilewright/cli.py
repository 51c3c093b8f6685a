"""The ``tilewright`` command (also ``python -m tilewright``).

    tilewright doctor                 what this machine gives Tilewright, and what is missing
    tilewright targets                the targets and their aliases (CANN spellings accepted)
    tilewright cache [stats|list|prune|clear]
    tilewright tune FILE.py:NAME ARGS... [--target T] [--plot roofline.png]
    tilewright check PATH [--fn MODULE:FUNC]      run a tw.testing.Reference
    tilewright export ... / precompile ...        see tilewright.deploy

Every command returns 0 on success, 1 when a check failed, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import pathlib
import platform
import shutil
import stat
import sys

from . import _C
from .errors import TilewrightError

__all__ = ["main"]


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# ---- cache ----------------------------------------------------------------------------------

def _cache_entries(root: pathlib.Path):
    """[(key, artefact name, bytes, last used)] of the disk cache's kernel entries
    (layout ``<dir>/kernels/<key[0:2]>/<key>/{artefact, manifest}``, see src/runtime/disk_cache.h)."""
    out = []
    root = root / "kernels"
    if not root.is_dir():
        return out
    for shard in root.iterdir():
        if len(shard.name) != 2 or not shard.is_dir():
            continue
        try:
            entries = list(shard.iterdir())
        except OSError:  # removed meanwhile: another process evicted its last entry
            continue
        for entry in entries:
            # Another process may evict the entry while it is read (its files vanish one by one): it is
            # then left out, as a scan a moment later would (rel31 F4: ValueError, FileNotFoundError).
            try:
                if not (entry / "manifest").is_file():
                    continue
                stats = [(f.name, f.stat()) for f in entry.iterdir() if f.is_file()]
            except OSError:
                continue
            if not any(n == "manifest" for n, _ in stats):
                continue
            name = next((n for n, _ in stats if n != "manifest"), "?")
            out.append((entry.name, name, sum(st.st_size for _, st in stats), max(st.st_mtime for _, st in stats)))
    return out


def _trust(root: pathlib.Path) -> str:
    if not root.exists():
        return "not created yet (made with mode 0700 on first compile)"
    if not root.is_dir():  # a file or /dev/null: "ok", or "chmod 700 it" (api34 F15)
        return "REFUSED: not a directory; every compile fails until TW_CACHE_DIR names a directory (or is unset)"
    st = root.stat()
    if st.st_uid != os.getuid():
        return f"REFUSED: owned by uid {st.st_uid}, not you ({os.getuid()}); Tilewright will not load code from it"
    if st.st_mode & 0o022:
        return f"REFUSED: mode {stat.filemode(st.st_mode)} is writable by others; chmod 700 it"
    return f"ok (yours, mode {stat.filemode(st.st_mode)})"


def cmd_cache(opts) -> int:
    root = pathlib.Path(_C.cache_dir())
    _, _, disabled, max_bytes = _C.env_flags()
    entries = _cache_entries(root)
    total = sum(e[2] for e in entries)
    if opts.action == "stats":
        print(f"cache dir : {root}{'  (disabled: TW_CACHE_DISABLE)' if disabled else ''}")
        print(f"trust     : {_trust(root)}")
        print(f"entries   : {len(entries)} kernels, {_human(total)} of {_human(max_bytes)} (TW_CACHE_MAX_BYTES)")
        tune = root / "tune"
        n_tune = len(list(tune.glob("*.json"))) if tune.is_dir() else 0
        print(f"tuning    : {n_tune} stored results in {tune}")
        return 0
    if opts.action == "list":
        for key, name, size, used in sorted(entries, key=lambda e: -e[3]):
            when = _dt.datetime.fromtimestamp(used).strftime("%Y-%m-%d %H:%M")
            print(f"{key[:16]}  {name:12s} {_human(size):>10s}  last used {when}")
        print(f"{len(entries)} entries, {_human(total)}")
        return 0
    if "REFUSED" in _trust(root):
        print(f"tilewright cache {opts.action}: {_trust(root)}", file=sys.stderr)
        return 1
    if opts.action == "prune":
        limit = opts.max_bytes if opts.max_bytes is not None else max_bytes
        try:  # the runtime's own eviction: it renames an entry away before removing it, races no other process
            _C.prune_cache(limit)  # (two prunes, or a prune and a process evicting, leaked FileNotFoundError) and
        except RuntimeError as e:  # keeps the cache's usage index (rel31 F4)
            raise TilewrightError(f"tilewright cache prune: {e}", hint="a cache on a read-only file system can be read, "
                                  "not pruned") from None
        left = _cache_entries(root)
        total = sum(e[2] for e in left)
        print(f"removed {max(0, len(entries) - len(left))} least recently used entries; {_human(total)} left "
              f"(limit {_human(limit)})")
        return 0
    # clear: through the runtime's own disk cache (tw.clear_cache), which takes its locks
    from .jit import clear_cache
    clear_cache(disk=True)
    if (root / "tune").is_dir():
        shutil.rmtree(root / "tune")
    print(f"removed {len(entries)} kernels and the stored tuning results from {root}")
    return 0


# ---- doctor ---------------------------------------------------------------------------------

def _read_first(paths):
    for p in paths:
        try:
            text = pathlib.Path(p).read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if "version" in line.lower() and "=" in line:
                return f"{line.split('=', 1)[1].strip()} ({p})"
        return f"{text.strip().splitlines()[0] if text.strip() else '?'} ({p})"
    return None


def _ascend_report(out):
    """What CANN/NPU pieces are present. These variables belong to CANN (set by its set_env.sh),
    not to Tilewright: they are read only to report on them."""
    home = os.environ.get("ASCEND_HOME_PATH")
    toolkit = os.environ.get("ASCEND_TOOLKIT_HOME")
    opp = os.environ.get("ASCEND_OPP_PATH")
    out.append("Ascend (only needed to build the printed AscendC on a machine with an NPU; the simulator needs none of it):")
    out.append(f"  ASCEND_HOME_PATH    : {home or 'unset'}")
    out.append(f"  ASCEND_TOOLKIT_HOME : {toolkit or 'unset'}")
    sourced = bool(home and opp)
    out.append(f"  CANN set_env.sh     : {'sourced' if sourced else 'not sourced'}"
               + ("" if sourced else " -> run `source <CANN>/set_env.sh` before building an AscendC project"))
    for tool, meaning in (("bisheng", "the AscendC compiler driver"), ("ccec", "the AI Core compiler")):
        path = shutil.which(tool)
        out.append(f"  {tool:19s} : {path or 'not on PATH'}"
                   + ("" if path else f" -> {meaning}; without it `cmake` of the printed project fails"))
    base = pathlib.Path(home or "/usr/local/Ascend")
    drv = _read_first(["/usr/local/Ascend/driver/version.info"])
    fw = _read_first(["/usr/local/Ascend/firmware/version.info"])
    cann = _read_first([base / "version.cfg", base / "compiler" / "version.info",
                        base.parent / "ascend-toolkit" / "latest" / "version.cfg"]) if home else None
    out.append(f"  driver              : {drv or 'not found'}" + ("" if drv else " -> no NPU driver: kernels cannot run on hardware"))
    out.append(f"  firmware            : {fw or 'not found'}")
    out.append(f"  CANN                : {cann or 'not found'}" + ("" if cann else " (AscendC output targets CANN 8.3.RC1)"))
    npus = sorted(p.name for p in pathlib.Path("/dev").glob("davinci[0-9]*"))
    out.append(f"  NPU devices         : {', '.join(npus) if npus else 'none (/dev/davinci*)'}")


def _cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cmd_doctor(opts) -> int:
    import numpy as np
    out = [f"tilewright {_C.__version__} on Python {platform.python_version()} ({sys.executable}), numpy {np.__version__}"]
    ok = True
    try:
        ident = _C.compiler_identity()
        flags = " ".join(_C.compile_flags(_C.cpu_arch()))
        problem = _C.toolchain_problem(_C.cpu_arch())  # compiles and links a one-line shared library
        out.append(f"host compiler : {ident}" + (" -- NOT USABLE: it cannot build a shared library (below)"
                                                 if problem else ""))
        out.append(f"  flags       : {flags}")
        out.append("  build test  : " + ("a one-line shared library with these flags: ok" if not problem else
                                        f"NOT USABLE: {problem}"))
        if problem:
            ok = False
            out.append("  -> the cpu target cannot compile kernels (see docs/environment.md, TW_CXX)")
    except Exception as e:  # noqa: BLE001 - reported, not raised: doctor explains what is missing
        ok = False
        out.append(f"host compiler : NOT USABLE: {e}")
        out.append("  -> the cpu target cannot compile kernels; install g++ or set TW_CXX")
    feats = _C.cpu_features()
    arch = _C.cpu_arch()
    try:  # the GEMM path is the one compiled for TW_CPU_ARCH's features, not necessarily the host's
        target = _C.target_cpu_features(arch)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        ok, target = False, ""
        out.append(f"TW_CPU_ARCH   : NOT USABLE: {e}")
    fs = set(target.split())
    path = ("AVX-512 packed micro-kernels" if "avx512f" in fs else
            "AVX2/FMA packed micro-kernels" if "avx" in fs else "portable micro-kernels (no AVX: slower GEMM)")
    out.append(f"CPU           : {_cpu_model()}, {os.cpu_count()} CPUs, "
               f"{_C.num_threads()} kernel threads (TW_NUM_THREADS)")
    out.append(f"  features    : {feats or '(none detected)'}")
    if arch != "native":
        missing = sorted(fs - set(feats.split()))
        ok &= not missing
        out.append(f"  compiled for: -march={arch} (TW_CPU_ARCH): {target or '(no listed features)'}"
                   + (f"; NOT RUNNABLE HERE, this CPU lacks {' '.join(missing)}" if missing else ""))
    out.append(f"  GEMM path   : {path}" + (", bf16 dot products (avx512bf16)" if "avx512bf16" in fs else ""))
    root = pathlib.Path(_C.cache_dir())
    entries = _cache_entries(root)
    verbose, progress, disabled, max_bytes = _C.env_flags()
    out.append(f"kernel cache  : {root}" + ("  (DISABLED by TW_CACHE_DISABLE)" if disabled else ""))
    out.append(f"  entries     : {len(entries)}, {_human(sum(e[2] for e in entries))} of {_human(max_bytes)}")
    trust = _trust(root)
    ok &= "REFUSED" not in trust
    out.append(f"  trust       : {trust}")
    out.append(f"logging       : TW_VERBOSE={'1' if verbose else '0'}, progress lines {'on' if progress else 'off'} (TW_PROGRESS)")
    _ascend_report(out)
    print("\n".join(out))
    return 0 if ok else 1


# ---- targets --------------------------------------------------------------------------------

def cmd_targets(opts) -> int:
    aliases = {}
    for alias, name in _C.target_aliases():
        aliases.setdefault(name, []).append(alias)
    for name, desc in _C.targets():
        extra = aliases.get(name, [])
        if name.startswith("ascend"):
            extra = extra + ["Ascend" + name[6:].upper()]  # CANN's spelling (names are case-insensitive)
        print(f"{name:13s} {desc}" + (f"  (also: {', '.join(extra)})" if extra else ""))
    return 0


# ---- check ----------------------------------------------------------------------------------

def cmd_check(opts) -> int:
    from .testing import Reference, load_fn
    ref = Reference(opts.path)
    if not ref.npz.exists() and not ref.manifest_path.exists():  # half a store: check() says which half is missing
        print(f"tilewright check: no reference at {ref.npz} / {ref.manifest_path}", file=sys.stderr)
        return 2
    spec = opts.fn or ref.manifest().get("fn")
    if not spec:
        print("tilewright check: the manifest names no function; pass --fn module:function", file=sys.stderr)
        return 2
    fn = load_fn(spec)
    try:
        ref.check(fn)
    except AssertionError as e:
        print(str(e), file=sys.stderr)
        print("MISMATCH")
        return 1
    m = ref.manifest()
    print(f"{ref.path}: OK ({spec} vs the reference of {m.get('created', '?')}, "
          f"atol {m['tolerance']['atol']:g}, rtol {m['tolerance']['rtol']:g})")
    return 0


# ---- tune -----------------------------------------------------------------------------------

def _parse_value(text):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def cmd_tune(opts) -> int:
    from .autotune import Autotuner
    from .testing import load_fn
    args, kwargs = [], {}
    for a in opts.args:
        if "=" in a:
            k, v = a.split("=", 1)
            if k in kwargs:  # the last one was tuned, silently (h-rel32 F7)
                print(f"tilewright tune: argument '{k}' given twice ({k}={kwargs[k]!r}, {a})", file=sys.stderr)
                return 2
            kwargs[k] = _parse_value(v)
        else:
            args.append(_parse_value(a))
    tuner = load_fn(opts.kernel)
    if not isinstance(tuner, Autotuner):
        print(f"tilewright tune: '{opts.kernel}' is not a @tw.autotune kernel", file=sys.stderr)
        return 2
    target = _C.find_target(opts.target)
    if opts.refresh_peaks:
        from .autotune import machine_peaks
        p = machine_peaks(refresh=True)
        print(f"peaks: {p['flops'] / 1e9:.1f} GFLOP/s, {p['bytes_per_s'] / 1e9:.1f} GB/s (load average {p['loadavg']:.1f})",
              file=sys.stderr)
    tuner.tune(*args, target=target, **kwargs)
    if opts.plot:
        _plot(tuner, target, opts.plot)
    return 0


def _plot(tuner, target, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise TilewrightError("--plot needs matplotlib, which is not installed", hint="pip install matplotlib") from e
    best = next(r for r in tuner.report if r.get("roofline"))
    rf = best["roofline"]
    pf = rf["peak_flops"]
    bw = rf["cache_bytes_per_s"] or rf["peak_bytes_per_s"]
    fig, ax = plt.subplots(figsize=(6, 4))
    import numpy as np
    x = np.logspace(-2, 4, 200)
    ax.loglog(x, np.minimum(pf, bw * x) / 1e9, "k-", label=f"roofline ({pf / 1e9:.0f} GFLOP/s, {bw / 1e9:.0f} GB/s)")
    args, kwargs = tuner.last_call
    for r in tuner.report:
        if r["status"] != "timed":
            continue
        work = tuner.fn(*args, **kwargs, **r["config"], target=target)._exe.estimate_work()
        if not work or not work[1]:
            continue
        flops, tile_bytes, _ = work
        ax.loglog([flops / tile_bytes], [flops / (r["ms"] * 1e-3) / 1e9], "r*" if r is best else "o",
                  label=repr(r["config"]))
    ax.set_xlabel("arithmetic intensity (FLOP / byte of tile copies)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"{tuner.__name__} on {target}")
    ax.legend()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    print(f"wrote {path}")


# ---- export / precompile (tilewright.deploy) ---------------------------------------------------

def _deploy(name, argv) -> int:
    from . import deploy
    return int(getattr(deploy, f"cli_{name}")(list(argv)))


# ---- main -----------------------------------------------------------------------------------

def _byte_count(text: str) -> int:
    """`--max-bytes`: a count of bytes >= 0 with an optional binary suffix K, M, G, T (as
    TW_CACHE_MAX_BYTES takes it: 500M; the one parser, support/env.cpp)."""
    n = _C.parse_byte_count(text.strip())
    if n is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not a byte count (a whole number >= 0, optionally with K, M, G "
                                         f"or T: e.g. 500M)")
    return n


def main(argv=None) -> int:
    try:
        return _main(argv)
    except ValueError as e:  # a malformed TW_* value (src/support/env.cpp): a traceback said it (h-rel32 F5)
        if not str(e).startswith("environment variable "):
            raise
        print(f"tilewright: error: {e}\n  hint: fix or unset it (docs/environment.md lists each variable's values)",
              file=sys.stderr)
        return 1


def _main(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("export", "precompile"):
        return _deploy(argv[0], argv[1:])
    parser = argparse.ArgumentParser(prog="tilewright", description="Tilewright: the kernel compiler's tools.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check the host compiler, CPU, cache and the Ascend toolchain")
    sub.add_parser("targets", help="list the compilation targets")
    p = sub.add_parser("cache", help="inspect or clean the kernel cache")
    p.add_argument("action", nargs="?", default="stats", choices=["stats", "list", "prune", "clear"])
    p.add_argument("--max-bytes", type=_byte_count, default=None,
                   help="prune: the size to prune to, bytes with an optional K/M/G/T suffix as TW_CACHE_MAX_BYTES "
                        "(default TW_CACHE_MAX_BYTES)")
    p = sub.add_parser("tune", help="tune a @tw.autotune kernel: tilewright tune file.py:name 1024 1024 1024")
    p.add_argument("kernel", help="FILE.py:NAME or MODULE:NAME of a @tw.autotune object")
    p.add_argument("args", nargs="*", help="the factory's arguments (NAME=VALUE for keywords)")
    p.add_argument("--target", default="cpu")
    p.add_argument("--plot", default=None, help="write a roofline PNG (needs matplotlib)")
    p.add_argument("--refresh-peaks", action="store_true", help="re-measure this machine's FMA and copy peaks first")
    p = sub.add_parser("check", help="run a tw.testing.Reference")
    p.add_argument("path", help="the reference (path with or without .npz/.json)")
    p.add_argument("--fn", default=None, help="MODULE:FUNC or FILE.py:FUNC (default: the one in the manifest)")
    sub.add_parser("export", help="export a kernel (tilewright.deploy)", add_help=False)
    sub.add_parser("precompile", help="precompile kernels into the cache (tilewright.deploy)", add_help=False)
    opts, extra = parser.parse_known_args(argv)
    if opts.command == "tune":  # the factory's arguments may come after --target (argparse stops at an option)
        opts.args += [a for a in extra if not a.startswith("-")]
        extra = [a for a in extra if a.startswith("-")]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    handler = {"doctor": cmd_doctor, "targets": cmd_targets, "cache": cmd_cache, "tune": cmd_tune,
               "check": cmd_check}[opts.command]
    try:
        return handler(opts)
    except TilewrightError as e:
        print(str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
