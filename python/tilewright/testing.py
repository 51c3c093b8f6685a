"""Testing helpers: ``tw.testing.assert_close``, seeded inputs and a reference store.

* :func:`assert_close` compares a kernel's output with a reference with tolerances chosen from
  the output's dtype (:data:`TOLERANCES`), handles NaN and infinities, and raises an
  ``AssertionError`` whose message says how many elements differ, where the worst ones are and by
  how much — the way ``torch.testing.assert_close`` does.
* :func:`randn`, :func:`rand`, :func:`randint` make inputs from a seed, so a failure reproduces.
* :class:`Reference` saves inputs and reference outputs once (``<path>.npz`` plus a JSON
  manifest ``<path>.json``: seed, shapes, dtypes, tolerance, library versions) and compares every
  later run against them; ``tilewright check <path>`` runs one from the command line.

numpy arrays, bfloat16 arrays (ml_dtypes) and torch tensors are accepted wherever an array is.
"""
from __future__ import annotations

import datetime as _dt
import importlib
import importlib.util
import json
import os
import pathlib
import platform
import sys

import numpy as np

__all__ = ["TOLERANCES", "tolerance", "assert_close", "np_dtype", "rng", "randn", "rand", "randint", "Reference",
           "report", "finish", "load_fn"]

# Default (atol, rtol) per dtype: ok where |actual - expected| <= atol + rtol * |expected|.
# The 16-bit floats allow a few ulps of their output rounding; integers and bool are exact.
TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (2e-3, 2e-3),
    "bfloat16": (2e-2, 1.6e-2),
    "int8": (0.0, 0.0), "int32": (0.0, 0.0), "int64": (0.0, 0.0), "uint8": (0.0, 0.0), "bool": (0.0, 0.0),
}
# Of two dtypes, the tolerance of the less precise one applies.
_PRECISION_ORDER = ["bfloat16", "float16", "float32", "float64"]


def np_dtype(name):
    """The numpy dtype of a Tilewright dtype name (``"bfloat16"`` is ml_dtypes' bfloat16)."""
    if isinstance(name, str) and name == "bfloat16":
        from .jit import _bf16_dtype  # ml_dtypes, imported on first use (it costs ~1 s)
        return np.dtype(_bf16_dtype())
    try:
        return np.dtype(name)
    except TypeError as e:
        from .errors import TilewrightError, user_location
        raise TilewrightError(f"{name!r} is not a dtype ({e})", *user_location(),
                              hint="a dtype name: float16, bfloat16, float32, float64, int8, int32, int64, uint8, "
                                   "bool") from None


def _dtype_name(x) -> str:
    """Tilewright's name of the dtype of a numpy array or torch tensor."""
    dt = getattr(x, "dtype", None)
    name = str(dt)
    if name.startswith("torch."):
        name = name[len("torch."):]
        return {"half": "float16", "float": "float32", "double": "float64"}.get(name, name)
    return np.dtype(dt).name if dt is not None else np.asarray(x).dtype.name


def _to_numpy(x):
    """A numpy view (or, for torch tensors on a device / in bfloat16, a host copy) of ``x``."""
    if type(x).__module__.startswith("torch"):
        t = x.detach()
        if str(t.device) != "cpu":
            t = t.cpu()
        if str(t.dtype) == "torch.bfloat16":
            return t.view(dtype=__import__("torch").int16).numpy().view(np_dtype("bfloat16"))
        return t.numpy()
    return np.asarray(x)


def tolerance(*dtypes):
    """(atol, rtol) for comparing values of these dtypes: that of the least precise float among
    them, exact for integers only."""
    names = [d if isinstance(d, str) else np_dtype(d).name for d in dtypes]
    floats = [n for n in names if n in _PRECISION_ORDER]
    if floats:
        return TOLERANCES[min(floats, key=_PRECISION_ORDER.index)]
    for n in names:
        if n not in TOLERANCES:
            raise ValueError(f"no default tolerance for dtype '{n}'; pass atol= and rtol=")
    return (0.0, 0.0)


def _fmt_index(i):
    return "(" + ", ".join(str(int(v)) for v in i) + ")" if len(i) != 1 else f"({int(i[0])},)"


def assert_close(actual, expected, *, atol=None, rtol=None, equal_nan=False, check_dtype=False, msg=None):
    """Asserts ``|actual - expected| <= atol + rtol * |expected|`` elementwise.

    ``atol``/``rtol`` default to :func:`tolerance` of the two dtypes (:data:`TOLERANCES`). NaN
    matches NaN only with ``equal_nan=True``; an infinity must match exactly (same sign).
    ``check_dtype=True`` also requires equal dtypes. Shapes must be equal (no broadcasting).
    Tuples/lists of arrays are compared pairwise. On failure raises ``AssertionError`` with a
    report: the count of mismatched elements and the greatest absolute and relative differences
    with their indices and values; ``msg`` is prefixed to it."""
    if isinstance(actual, (tuple, list)) or isinstance(expected, (tuple, list)):
        if not (isinstance(actual, (tuple, list)) and isinstance(expected, (tuple, list))) or len(actual) != len(expected):
            def what(x):
                return f"a {type(x).__name__} of {len(x)}" if isinstance(x, (tuple, list)) else f"one {type(x).__name__}"
            raise AssertionError(f"{msg + ': ' if msg else ''}cannot compare {what(actual)} (actual) with "
                                 f"{what(expected)} (expected)")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, atol=atol, rtol=rtol, equal_nan=equal_nan, check_dtype=check_dtype,
                         msg=f"{msg + ', ' if msg else ''}output {i}")
        return
    prefix = f"{msg}: " if msg else ""
    da, de = _dtype_name(actual), _dtype_name(expected)
    if check_dtype and da != de:
        raise AssertionError(f"{prefix}dtype mismatch: actual {da}, expected {de}")
    a_np, e_np = _to_numpy(actual), _to_numpy(expected)
    if a_np.shape != e_np.shape:
        raise AssertionError(f"{prefix}shape mismatch: actual {a_np.shape}, expected {e_np.shape}")
    from .benchmark import _finite
    for what, v in (("atol", atol), ("rtol", rtol)):
        if v is not None and not (_finite(v) and v >= 0):
            from .errors import TilewrightError, user_location
            raise TilewrightError(f"assert_close: {what}={v!r} must be a finite number >= 0", *user_location())
    d_atol, d_rtol = tolerance(da, de)
    atol = d_atol if atol is None else float(atol)
    rtol = d_rtol if rtol is None else float(rtol)
    a, e = a_np.astype(np.float64), e_np.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        ok = diff <= atol + rtol * np.abs(e)
        if atol == 0 and rtol == 0 and a_np.dtype.kind in "biu" and e_np.dtype.kind in "biu":
            ok = a_np == e_np  # exact: int64 values past 2**53 that differ by 1 are equal as float64
        nan_a, nan_e = np.isnan(a), np.isnan(e)
        ok |= equal_nan & nan_a & nan_e
        inf = np.isinf(a) | np.isinf(e)
        ok = np.where(inf, a == e, ok)
    if ok.all():
        return
    bad = ~ok
    n_bad, n = int(bad.sum()), int(ok.size)
    lines = [f"{prefix}not close: {n_bad} of {n} elements ({100.0 * n_bad / n:.2f}%) differ by more than "
             f"atol + rtol * |expected| (atol {atol:g}, rtol {rtol:g}; dtypes actual {da}, expected {de})"]
    with np.errstate(invalid="ignore", divide="ignore"):
        d_bad = np.where(bad, np.nan_to_num(diff, nan=np.inf, posinf=np.inf), -1.0)
        rel = np.where(bad, np.where(e == 0, np.inf, d_bad / np.abs(e)), -1.0)
    for what, arr in (("absolute", d_bad), ("relative", rel)):
        idx = np.unravel_index(int(np.argmax(arr)), arr.shape) if arr.ndim else ()
        lines.append(f"  greatest {what} difference {float(arr[idx]):.4g} at index {_fmt_index(idx)}: "
                     f"actual {float(a[idx])!r}, expected {float(e[idx])!r}")
    n_nan = int((bad & (nan_a | nan_e)).sum())
    if n_nan:
        lines.append(f"  {n_nan} of the mismatches involve NaN" + ("" if equal_nan else " (equal_nan=False)"))
    raise AssertionError("\n".join(lines))


def rng(seed=0):
    """``numpy.random.Generator`` for a seed (a Generator passes through)."""
    if isinstance(seed, np.random.Generator):
        return seed
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as e:
        from .errors import TilewrightError, user_location
        raise TilewrightError(f"seed {seed!r} is not a random seed ({e})",
                              *user_location(), hint="pass a non-negative int or a numpy.random.Generator") from None


def randn(shape, dtype="float32", *, seed=0, scale=1.0):
    """Normal(0, scale^2) values of ``shape``, drawn in float32 from ``seed`` (an int or a
    ``numpy.random.Generator``) and converted to ``dtype``."""
    return (rng(seed).standard_normal(shape, dtype=np.float32) * scale).astype(np_dtype(dtype))


def rand(shape, dtype="float32", *, seed=0, low=0.0, high=1.0):
    """Uniform [low, high) values of ``shape`` from ``seed``, converted to ``dtype``."""
    return rng(seed).uniform(low, high, size=shape).astype(np.float32).astype(np_dtype(dtype))


def randint(shape, dtype="int32", *, seed=0, low=-8, high=8):
    """Uniform integers in [low, high) of ``shape`` from ``seed``."""
    dt = np_dtype(dtype)
    info = np.iinfo(dt) if dt.kind in "iu" else None if dt.kind != "b" else np.iinfo(np.uint8)
    lo, hi = (0, 1) if dt.kind == "b" else (info.min, info.max) if info is not None else (None, None)
    if lo is not None and not (lo <= low and high - 1 <= hi):
        from .errors import TilewrightError, user_location
        raise TilewrightError(f"randint: [{low}, {high}) does not fit in {dt.name} [{lo}, {hi}] (the values would wrap)",
                              *user_location(), hint=f"pass low >= {lo} and high <= {hi + 1}")
    return rng(seed).integers(low, high, size=shape).astype(dt)


def _versions():
    import tilewright
    out = {"tilewright": tilewright.__version__, "numpy": np.__version__, "ml_dtypes": __import__("ml_dtypes").__version__,
           "python": platform.python_version()}
    if "torch" in sys.modules:
        out["torch"] = sys.modules["torch"].__version__
    return out


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _store_array(x, what):
    """(array for .npz, dtype name): bfloat16 is stored as its uint16 bits; a 0-d value stays 0-d."""
    if x is None:
        from .errors import TilewrightError
        raise TilewrightError(f"Reference: the {what} is None: there is nothing to store",
                              hint="return the outputs (a kernel that writes in place: return the written array)")
    a = np.asarray(_to_numpy(x), order="C")
    name = _dtype_name(x)
    return (a.view(np.uint16) if name == "bfloat16" else a), name


def _load_array(a, name):
    return a.view(np_dtype("bfloat16")) if name == "bfloat16" else a.astype(np_dtype(name), copy=False)


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _as_torch(a, name):
    """A stored input that was a torch tensor goes back to the function as one (CPU)."""
    import torch
    if name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.array(a))


def _fn_spec(fn):
    """"module:qualname" of an importable function, else None."""
    mod, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not mod or mod == "__main__" or "<" in qual:
        return None
    return f"{mod}:{qual}"


def load_fn(spec: str):
    """The callable named by ``"module:qualname"`` (a module name or a path to a .py file)."""
    from .errors import TilewrightError
    if not isinstance(spec, str):
        raise TilewrightError(f"{spec!r} does not name a function", hint="write module:function or file.py:function")
    mod_name, _, qual = spec.partition(":")
    if not qual:
        raise TilewrightError(f"'{spec}' does not name a function", hint="write module:function or file.py:function")
    try:
        if mod_name.endswith(".py"):
            path = pathlib.Path(mod_name).resolve()
            sys.path.insert(0, str(path.parent))  # its sibling imports; worker processes import it by name
            spec_ = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec_)
            sys.modules[path.stem] = module
            spec_.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except (ImportError, OSError) as e:
        raise TilewrightError(f"cannot import '{mod_name}' for '{spec}': {e}",
                              hint="run from the directory that holds it or put it on PYTHONPATH") from e
    obj = module
    for part in qual.split("."):
        if not hasattr(obj, part):
            raise TilewrightError(f"'{mod_name}' has no '{qual}'", hint="check the function's name")
        obj = getattr(obj, part)
    return obj


class Reference:
    """A stored reference: inputs and expected outputs in ``<path>.npz``, and ``<path>.json``
    (seed, shapes, dtypes, tolerance, library versions, the function when importable).

    ``ref.check(fn, inputs, expected=None)``: the first time (no files yet), computes the
    expected outputs (``expected(*inputs)``, or ``fn(*inputs)`` itself when ``expected`` is
    None: a golden run), saves everything, and checks ``fn`` against them; every later time,
    loads the stored inputs, runs ``fn`` on them and compares with the stored outputs at the
    stored tolerance (``inputs`` and ``expected`` are then not used). Returns ``fn``'s outputs.
    The default tolerance is that of the less precise of ``fn``'s and the reference's dtypes. A
    store with a file missing or damaged is a TilewrightError, never recreated;
    ``Reference(path, update=True)`` rewrites the store."""

    def __init__(self, path, *, seed=None, atol=None, rtol=None, update=False):
        p = pathlib.Path(path)
        if p.suffix in (".npz", ".json"):
            p = p.with_suffix("")
        self.path = p
        self.npz = p.with_name(p.name + ".npz")
        self.manifest_path = p.with_name(p.name + ".json")
        self.seed, self.atol, self.rtol, self.update = seed, atol, rtol, update

    @property
    def exists(self) -> bool:
        """Both files are there; one without the other is a damaged store (an error, never
        recreated behind the caller's back)."""
        there = [p.exists() for p in (self.npz, self.manifest_path)]
        if there[0] != there[1]:
            missing = self.manifest_path if there[0] else self.npz
            raise self._damaged(f"{missing} is missing")
        return there[0]

    def _damaged(self, why):
        from .errors import TilewrightError
        return TilewrightError(f"the reference store {self.path} is damaged: {why}",
                               hint=f"restore it (e.g. from version control), or rewrite it from the current function "
                                    f"with tw.testing.Reference({str(self.path)!r}, update=True)")

    def manifest(self) -> dict:
        from .errors import TilewrightError
        try:
            return json.loads(self.manifest_path.read_text())
        except (OSError, ValueError) as e:
            raise TilewrightError(f"cannot read the reference manifest {self.manifest_path}: {e}",
                                  hint="create it with tw.testing.Reference(path).check(fn, inputs)") from e

    def load(self):
        """(inputs tuple, expected outputs tuple, manifest)."""
        import zipfile
        m = self.manifest()
        try:
            if not isinstance(m, dict):
                raise ValueError(f"{self.manifest_path} holds a {type(m).__name__}, not a manifest")
            with np.load(self.npz) as z:
                arrays = {}
                for kind in ("input", "output"):
                    for i, d in enumerate(m[kind + "s"]):
                        a = z[f"{kind}{i}"]
                        if list(a.shape) != list(d["shape"]):
                            raise ValueError(f"{kind} {i} has shape {list(a.shape)} in {self.npz.name} but "
                                             f"{d['shape']} in {self.manifest_path.name}")
                        a = _load_array(a, d["dtype"])
                        arrays.setdefault(kind, []).append(_as_torch(a, d["dtype"]) if d.get("torch") else a)
            tol = m["tolerance"]
            tol["atol"], tol["rtol"]  # noqa: B018 - present
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as e:
            if "allow_pickle" in str(e):  # numpy's advice to unpickle the file: never for a damaged store
                raise self._damaged(f"{self.npz} is not an .npz archive") from None
            raise self._damaged(f"{type(e).__name__}: {e}") from None
        return tuple(arrays.get("input", ())), tuple(arrays.get("output", ())), m

    def save(self, inputs, outputs, fn=None, actual=None):
        """Stores ``inputs`` and the reference ``outputs``; the default tolerance is that of the
        less precise of the outputs and ``actual`` (what the function under test returns: a
        float32 kernel checked against float64 outputs gets float32's)."""
        ins = [_store_array(x, "input") for x in _as_tuple(inputs)]
        outs = [_store_array(x, "reference output") for x in _as_tuple(outputs)]
        dtypes = [d for _, d in outs] + [_dtype_name(x) for x in _as_tuple(actual) if x is not None]
        atol, rtol = (0.0, 0.0)
        if outs and (self.atol is None or self.rtol is None):
            try:
                atol, rtol = tolerance(*dtypes)
            except ValueError as e:
                from .errors import TilewrightError
                raise TilewrightError(f"Reference {self.path}: {e}", hint="pass atol= and rtol= to Reference") from None
        manifest = {
            "format": 1,
            "seed": self.seed,
            "inputs": [{"shape": list(a.shape), "dtype": d, **({"torch": True} if _is_torch(x) else {})}
                       for (a, d), x in zip(ins, _as_tuple(inputs))],
            "outputs": [{"shape": list(a.shape), "dtype": d} for a, d in outs],
            "tolerance": {"atol": atol if self.atol is None else self.atol,
                          "rtol": rtol if self.rtol is None else self.rtol},
            "fn": _fn_spec(fn) if fn is not None else None,
            "versions": _versions(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.npz.with_name(self.npz.name + f".{os.getpid()}.tmp.npz")
        np.savez(tmp, **{f"input{i}": a for i, (a, _) in enumerate(ins)},
                 **{f"output{i}": a for i, (a, _) in enumerate(outs)})
        os.replace(tmp, self.npz)
        tmpj = self.manifest_path.with_name(self.manifest_path.name + f".{os.getpid()}.tmp")
        tmpj.write_text(json.dumps(manifest, indent=1) + "\n")
        os.replace(tmpj, self.manifest_path)
        return manifest

    def check(self, fn, inputs=None, expected=None):
        if self.update or not self.exists:
            if inputs is None:
                from .errors import TilewrightError
                raise TilewrightError(f"no reference stored at {self.npz} and no inputs given",
                                      hint="call check(fn, inputs, expected) once to create it")
            inputs = _as_tuple(inputs)
            if expected is None:  # a golden run
                ref = actual = fn(*inputs)
            else:
                ref, actual = expected(*inputs), fn(*inputs)
            if actual is None:
                from .errors import TilewrightError
                raise TilewrightError(f"Reference {self.path}: the function returned None: there is nothing to compare",
                                      hint="return the outputs (a kernel that writes in place: return the written array)")
            self.save(inputs, ref, fn, actual)
        ins, outs, m = self.load()
        got = fn(*ins)
        tol = m["tolerance"]
        exp = outs if isinstance(got, (tuple, list)) else outs[0]
        assert_close(got, exp, atol=tol["atol"], rtol=tol["rtol"], msg=f"reference {self.path}")
        return got


def report(name, actual, expected, *, atol=None, rtol=None, equal_nan=False, stream=None):
    """For scripts: prints ``name: max abs err ... OK`` (or the mismatch report of
    :func:`assert_close`) and returns whether ``actual`` is close to ``expected``."""
    out = stream if stream is not None else sys.stdout
    a = _to_numpy(actual).astype(np.float64)
    e = _to_numpy(expected).astype(np.float64)
    err = float(np.max(np.abs(a - e))) if a.shape == e.shape and a.size else 0.0
    try:
        assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=equal_nan, msg=name)
    except AssertionError as exc:
        print(f"  {name}: max abs err {err:.3e} MISMATCH\n{exc}", file=out)
        return False
    atol_, rtol_ = tolerance(_dtype_name(actual), _dtype_name(expected))
    atol_ = atol_ if atol is None else atol
    rtol_ = rtol_ if rtol is None else rtol
    print(f"  {name}: max abs err {err:.3e} (atol {atol_:g}, rtol {rtol_:g}) OK", file=out)
    return True


def finish(ok):
    """For scripts: prints ``OK`` or ``MISMATCH`` and exits with status 0 or 1."""
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)
