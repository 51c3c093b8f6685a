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
import json
import math
import os
import pathlib
import platform
import re
import stat
import sys
import threading

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
    for n in names:  # every integer width is exact (int16, uint32, ... too: rel29 F2)
        if n not in TOLERANCES and not re.fullmatch(r"u?int\d+", n):
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
    for what, x in (("actual", a_np), ("expected", e_np)):
        if x.dtype.kind not in "biuf" and _dtype_name(x) != "bfloat16":
            # complex went through float64 without its imaginary part: a silent pass (rel29 F1)
            from .errors import TilewrightError, user_location
            raise TilewrightError(f"assert_close compares real numbers: {what} is {x.dtype.name}", *user_location(),
                                  hint="compare the parts: assert_close(a.real, e.real) and assert_close(a.imag, "
                                       "e.imag) (a complex reference of a real kernel: check that e.imag is 0)"
                                  if x.dtype.kind == "c" else "pass arrays of numbers (float, integer or bool)")
    if a_np.shape != e_np.shape:
        raise AssertionError(f"{prefix}shape mismatch: actual {a_np.shape}, expected {e_np.shape}")
    from .benchmark import _finite
    for what, v in (("atol", atol), ("rtol", rtol)):
        if v is not None and not (_finite(v) and v >= 0):
            from .errors import TilewrightError, user_location
            raise TilewrightError(f"assert_close: {what}={v!r} must be a finite number >= 0", *user_location())
    d_atol, d_rtol = tolerance(da, de) if atol is None or rtol is None else (None, None)
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


def _drawn(who, shape, draw):
    """``draw()``, an array of ``shape``, after checking the shape: numpy's errors about it (a negative
    or float dimension, an array too big to allocate) leaked from its random module (api34 F13)."""
    from .errors import TilewrightError, user_location
    dims = (shape,) if hasattr(shape, "__index__") else shape
    try:
        ok = all(hasattr(d, "__index__") and not isinstance(d, (bool, np.bool_)) and d >= 0 for d in dims)
    except TypeError:  # not iterable
        ok = False
    if not ok:
        raise TilewrightError(f"{who}: shape {shape!r} is not a tuple of non-negative ints", *user_location(),
                              hint="pass e.g. (128, 64)")
    try:
        return draw()
    except (MemoryError, ValueError) as e:  # "array is too big"
        raise TilewrightError(f"{who}: cannot make an array of shape {shape!r}: {e or 'out of memory'}",
                              *user_location(), hint="use a smaller shape") from None


def randn(shape, dtype="float32", *, seed=0, scale=1.0):
    """Normal(0, scale^2) values of ``shape``, drawn in float32 from ``seed`` (an int or a
    ``numpy.random.Generator``) and converted to ``dtype``."""
    dt = np_dtype(dtype)
    g = rng(seed)
    return _drawn("randn", shape, lambda: (g.standard_normal(shape, dtype=np.float32) * scale).astype(dt))


def rand(shape, dtype="float32", *, seed=0, low=0.0, high=1.0):
    """Uniform [low, high) values of ``shape`` from ``seed``, converted to ``dtype``. A draw that
    rounds up to ``high`` (or past it) in the dtype (about 0.2% of bfloat16 draws in [0, 1)) becomes the
    dtype's largest value below ``high``, so every value is < high."""
    dt = np_dtype(dtype)
    try:  # numpy's ValueError / OverflowError leaked (rel29 F6); bounds may be arrays, as numpy's
        ok = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(np.less(low, high)))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        from .errors import TilewrightError, user_location
        raise TilewrightError(f"rand: the range [{low}, {high}) is not a finite, non-empty interval", *user_location(),
                              hint="pass finite low < high (high is excluded)")
    g = rng(seed)
    v = _drawn("rand", shape, lambda: g.uniform(low, high, size=shape).astype(np.float32).astype(dt))
    if dt.name in _PRECISION_ORDER:  # the float dtypes (bfloat16's numpy kind is "V")
        with np.errstate(over="ignore"):
            top = np.asarray(high, np.float64).astype(dt)
        if top >= high:  # the largest value of dt below high
            top = np.nextafter(top, np.asarray(-np.inf, dt))
        v = np.where(v.astype(np.float64) >= high, top, v).astype(dt)
    return v


def randint(shape, dtype="int32", *, seed=0, low=-8, high=8):
    """Uniform integers in [low, high) of ``shape`` from ``seed``."""
    dt = np_dtype(dtype)
    info = np.iinfo(dt) if dt.kind in "iu" else None if dt.kind != "b" else np.iinfo(np.uint8)
    lo, hi = (0, 1) if dt.kind == "b" else (info.min, info.max) if info is not None else (None, None)
    if not low < high:
        from .errors import TilewrightError, user_location
        raise TilewrightError(f"randint: the range [{low}, {high}) is empty", *user_location(),
                              hint="pass low < high (high is excluded)")
    if lo is not None and not (lo <= low and high - 1 <= hi):
        from .errors import TilewrightError, user_location
        raise TilewrightError(f"randint: [{low}, {high}) does not fit in {dt.name} [{lo}, {hi}] (the values would wrap)",
                              *user_location(), hint=f"pass low >= {lo} and high <= {hi + 1}")
    g = rng(seed)
    return _drawn("randint", shape, lambda: g.integers(low, high, size=shape).astype(dt))


def _versions():
    import tilewright
    out = {"tilewright": tilewright.__version__, "numpy": np.__version__, "ml_dtypes": __import__("ml_dtypes").__version__,
           "python": platform.python_version()}
    if "torch" in sys.modules:
        out["torch"] = sys.modules["torch"].__version__
    return out


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _store_array(x):
    """(a C-ordered copy of ``x`` for the .npz, its dtype name): bfloat16 is stored as its uint16
    bits; a 0-d value stays 0-d. A copy: taken before the function runs, it keeps the inputs as
    they were even when the function writes into them."""
    a = np.array(_to_numpy(x), order="C", copy=True)
    name = _dtype_name(x)
    return (a.view(np.uint16) if name == "bfloat16" else a), name


def _stored_dtype(name):
    """The numpy dtype name a value of dtype ``name`` has in the .npz."""
    return "uint16" if name == "bfloat16" else np_dtype(name).name


def _storable_dtype(name) -> bool:
    """A dtype name the store reads back and assert_close compares: numpy's real numbers and bool, bfloat16
    (not complex, object or strings)."""
    try:
        return isinstance(name, str) and np_dtype(name).kind in "biufV"
    except Exception:  # noqa: BLE001 - any unreadable dtype name
        return False


def _npz_member(z, name):
    """(dtype, shape, bytes of data) of array ``name`` of the open .npz ``z``, read from its .npy header
    and the archive's directory without reading (or allocating) the data."""
    member = name + ".npy"
    with z.zip.open(member) as f:
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(f)
        return dtype, shape, z.zip.getinfo(member).file_size - f.tell()


def _load_array(a, name):
    return a.view(np_dtype("bfloat16")) if name == "bfloat16" else a.astype(np_dtype(name), copy=False)


def _outputs(values, who):
    """The outputs ``who`` returned, as a tuple; None (a function that writes in place and returns
    nothing) is an error: the store keeps what the function returns."""
    outs = _as_tuple(values)
    if values is None or any(v is None for v in outs):
        from .errors import TilewrightError, user_location
        raise TilewrightError(f"tw.testing.Reference: {who} returned None" +
                              ("" if values is None else f" as output {[v is None for v in outs].index(True)}") +
                              ": the store keeps and compares the values the function returns",
                              *user_location(),
                              hint="return the outputs (a function that writes into one of its arguments: "
                                   "return that argument)")
    return outs
def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _as_torch(a, name):
    """A stored input that was a torch tensor goes back to the function as one (CPU)."""
    import torch
    if name == "bfloat16":
        return torch.from_numpy(np.array(a, order="C").view(np.int16)).view(torch.bfloat16)
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
            from .deploy import import_file  # the command line's one loader of FILE.py (robust38 F3)
            module = import_file(mod_name)
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
    stored tolerance (``inputs`` and ``expected`` are then not used; a NaN stored must be NaN at the
    same place). Returns ``fn``'s outputs.
    The default tolerance is that of the less precise of ``fn``'s outputs and the reference's.
    A damaged store, or one of its two files missing, is a ``TilewrightError`` naming it;
    ``Reference(path, update=True)`` rewrites the store."""

    def __init__(self, path, *, seed=None, atol=None, rtol=None, update=False):
        try:
            p = pathlib.Path(path)
        except TypeError:  # pathlib's TypeError (api34 F13)
            p = pathlib.Path()
        if p.suffix in (".npz", ".json"):
            p = p.with_suffix("")
        if not p.name:  # '', '.', '/': with_name below raised ValueError (h-rel32 F3)
            from .errors import TilewrightError, user_location
            raise TilewrightError(f"the reference path {str(path)!r} names no file", *user_location(),
                                  hint="pass a file path without its suffix, e.g. 'refs/softmax' (the store is "
                                       "refs/softmax.npz and refs/softmax.json)")
        self.path = p
        self.npz = p.with_name(p.name + ".npz")
        self.manifest_path = p.with_name(p.name + ".json")
        self.seed, self.atol, self.rtol, self.update = seed, atol, rtol, update

    @property
    def exists(self) -> bool:
        """Both files are there (one without the other is a damaged store: ``check`` says which
        file is missing, it never writes a fresh store over the other)."""
        return self.npz.exists() and self.manifest_path.exists()

    def _damaged(self, what):
        from .errors import TilewrightError, user_location
        return TilewrightError(f"the reference store {self.path} is damaged: {what}", *user_location(),
                               hint=f"restore {self.npz.name} and {self.manifest_path.name} together (e.g. from "
                                    f"version control), or rewrite both: tw.testing.Reference('{self.path}', "
                                    "update=True).check(fn, inputs, expected)")

    def _check_regular(self, p):
        """A FIFO or a device in the store's place would block its read forever or never end (h-rel17 F6)."""
        try:
            st = p.stat()
        except OSError:
            return  # missing or unreadable: the read reports it
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):  # a directory: the read's IsADirectoryError
            raise self._damaged(f"{p} is not a regular file ({stat.filemode(st.st_mode)})")

    def manifest(self) -> dict:
        """The manifest, checked: a format-1 object whose inputs and outputs are lists of
        {shape, dtype} and whose tolerance is two numbers >= 0 (else a TilewrightError naming the
        store and the fix)."""
        self._check_regular(self.manifest_path)
        try:
            m = json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            raise self._damaged(f"{self.manifest_path} is missing") from None
        except (OSError, ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError; JSON nested too deep
            raise self._damaged(f"cannot read its manifest {self.manifest_path}: {e}") from None
        where = f"its manifest {self.manifest_path}"
        if not isinstance(m, dict):
            raise self._damaged(f"{where} holds a JSON {type(m).__name__}, not an object")
        if m.get("format") != 1:
            raise self._damaged(f"{where} has format {m.get('format')!r}; this Tilewright reads format 1")
        for kind in ("inputs", "outputs"):
            entries = m.get(kind)
            if not isinstance(entries, list):
                raise self._damaged(f"{where} has no list '{kind}'")
            for i, d in enumerate(entries):
                shape = d.get("shape") if isinstance(d, dict) else None
                if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)):
                    raise self._damaged(f"{where}: {kind}[{i}] has no shape (a list of sizes): {d!r}")
                if not _storable_dtype(d.get("dtype")):
                    raise self._damaged(f"{where}: {kind}[{i}] has no dtype Tilewright reads: {d.get('dtype')!r}")
        from .benchmark import _finite
        tol = m.get("tolerance")
        if not (isinstance(tol, dict) and all(_finite(tol.get(k)) and not isinstance(tol.get(k), bool)
                                              and tol[k] >= 0 for k in ("atol", "rtol"))):
            raise self._damaged(f"{where} has no tolerance {{atol, rtol}} (numbers >= 0): {tol!r}")
        return m

    def load(self):
        """(inputs tuple, expected outputs tuple, manifest), each array checked against the
        manifest's shape and dtype."""
        import zipfile
        m = self.manifest()
        specs = [(f"input{i}", d) for i, d in enumerate(m["inputs"])] + \
                [(f"output{i}", d) for i, d in enumerate(m["outputs"])]
        arrays = {}
        self._check_regular(self.npz)
        try:
            with np.load(self.npz, allow_pickle=False) as z:
                missing = [n for n, _ in specs if n not in z.files]
                if missing:
                    raise self._damaged(f"{self.npz} has no array {', '.join(missing)} (its manifest lists "
                                        f"{len(m['inputs'])} inputs and {len(m['outputs'])} outputs)")
                extra = sorted(set(z.files) - {n for n, _ in specs})
                if extra:
                    raise self._damaged(f"{self.npz} holds arrays its manifest does not list: {', '.join(extra)}")
                for n, d in specs:
                    # The member's header first: numpy allocates the array its header describes before
                    # reading a byte of data, so a damaged header (a huge shape) was a MemoryError (robust38 F1)
                    dtype, shape, size = _npz_member(z, n)
                    if dtype.name != _stored_dtype(d["dtype"]) or list(shape) != d["shape"]:
                        raise self._damaged(f"{self.npz}: {n} is {dtype.name} {list(shape)}, its manifest says "
                                            f"{d['dtype']} {d['shape']}")
                    if size < dtype.itemsize * math.prod(shape):
                        raise self._damaged(f"{self.npz}: {n} holds {size} bytes of data, too few for its "
                                            f"{dtype.name} {list(shape)} (the archive is truncated or damaged)")
                    a = _load_array(z[n], d["dtype"])
                    arrays[n] = _as_torch(a, d["dtype"]) if d.get("torch") is True else a
        except AttributeError:  # np.load read a lone .npy (an ndarray, no context manager)
            raise self._damaged(f"{self.npz} is not an .npz archive") from None
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
            # allow_pickle=False: a file that is no .npy/.npz (or holds object arrays) is numpy's
            # ValueError suggesting allow_pickle=True, which is no advice for a store
            why = ("its content would have to be unpickled, which a store never needs" if "pickle" in str(e) else
                   f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'empty'}")
            raise self._damaged(f"cannot read {self.npz} as an .npz archive of arrays ({why})") from None
        ins = tuple(arrays[f"input{i}"] for i in range(len(m["inputs"])))
        outs = tuple(arrays[f"output{i}"] for i in range(len(m["outputs"])))
        return ins, outs, m

    def save(self, inputs, outputs, fn=None, actual=None):
        """Writes the store. The default tolerance is that of the less precise of the outputs'
        dtypes and ``actual``'s (the checked function's outputs), as in :func:`assert_close`."""
        ins = [_store_array(x) for x in _as_tuple(inputs)]
        outs = [_store_array(x) for x in _outputs(outputs, "the reference")]
        for kind, arrays in (("input", ins), ("output", outs)):
            for i, (a, d) in enumerate(arrays):
                if not _storable_dtype(d):  # written, then "damaged" at its first read (rel29 F12)
                    from .errors import TilewrightError, user_location
                    raise TilewrightError(f"tw.testing.Reference: {kind} {i} has dtype {d} "
                                          f"({np.array2string(a.ravel()[:3], threshold=3)[:60]}): a store holds "
                                          "arrays of numbers", *user_location(),
                                          hint="pass numbers (an int beyond int64 or None becomes an object array), "
                                               "or arrays of a numeric dtype")
        dtypes = [d for _, d in outs] + [_dtype_name(x) for x in (_as_tuple(actual) if actual is not None else ())]
        atol, rtol = self.atol, self.rtol
        if atol is None or rtol is None:
            try:
                d_atol, d_rtol = tolerance(*dtypes) if dtypes else (0.0, 0.0)
            except ValueError as e:
                from .errors import TilewrightError, user_location
                raise TilewrightError(f"tw.testing.Reference: {e}", *user_location(),
                                      hint="pass Reference(path, atol=..., rtol=...)") from None
            atol = d_atol if atol is None else atol
            rtol = d_rtol if rtol is None else rtol
        manifest = {
            "format": 1,
            "seed": self.seed,
            "inputs": [{"shape": list(a.shape), "dtype": d, **({"torch": True} if _is_torch(x) else {})}
                       for (a, d), x in zip(ins, _as_tuple(inputs))],
            "outputs": [{"shape": list(a.shape), "dtype": d} for a, d in outs],
            "tolerance": {"atol": atol, "rtol": rtol},
            "fn": _fn_spec(fn) if fn is not None else None,
            "versions": _versions(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        # one temporary per thread: threads filling one store at once wrote one file and lost its rename (rel29 F11)
        me = f"{os.getpid()}.{threading.get_ident()}"
        tmp = self.npz.with_name(self.npz.name + f".{me}.tmp.npz")
        tmpj = self.manifest_path.with_name(self.manifest_path.name + f".{me}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(tmp, **{f"input{i}": a for i, (a, _) in enumerate(ins)},
                     **{f"output{i}": a for i, (a, _) in enumerate(outs)})
            os.replace(tmp, self.npz)
            tmpj.write_text(json.dumps(manifest, indent=1) + "\n")
            os.replace(tmpj, self.manifest_path)
        except OSError as e:  # leaked unlocated (rel29 F12)
            for t in (tmp, tmpj):
                t.unlink(missing_ok=True) if t.parent.is_dir() else None
            from .errors import TilewrightError, user_location
            raise TilewrightError(f"cannot write the reference store {self.path}: {e.strerror or e}", *user_location(),
                                  hint="pass a path in a writable directory") from None
        return manifest

    def check(self, fn, inputs=None, expected=None):
        have_npz, have_manifest = self.npz.exists(), self.manifest_path.exists()
        if have_npz != have_manifest and not self.update:
            # half a store (a partial checkout, a cleaned .json): never a fresh golden run over it
            missing, there = (self.manifest_path, self.npz) if have_npz else (self.npz, self.manifest_path)
            raise self._damaged(f"{missing} is missing ({there.name} is there; a store is both files)")
        if self.update or not have_npz:
            if inputs is None:
                from .errors import TilewrightError, user_location
                raise TilewrightError(f"no reference stored at {self.npz} and no inputs given", *user_location(),
                                      hint="call check(fn, inputs, expected) once to create it")
            inputs = _as_tuple(inputs)
            stored = [(*_store_array(x), _is_torch(x)) for x in inputs]  # before fn or expected writes into them

            def replay():  # the inputs as a later check passes them: torch tensors stay torch tensors
                return [_as_torch(_load_array(a.copy(), d), d) if t else _load_array(a.copy(), d) for a, d, t in stored]

            ref = _outputs(fn(*inputs) if expected is None else expected(*inputs),
                           "fn" if expected is None else "expected")
            got = fn(*replay())
            self.save(replay(), ref, fn, actual=_outputs(got, "fn"))
            outs, m = self.load()[1:]
        else:
            ins, outs, m = self.load()
            got = fn(*ins)
            _outputs(got, "fn")
        tol = m["tolerance"]
        # one array against a store of several outputs is a mismatch, not a check of the first (rel29 F4);
        # a NaN stored is the reference's value: the same place must be NaN (a golden run of a function
        # whose output holds NaN failed against itself, rel29 F3)
        exp = outs if isinstance(got, (tuple, list)) or len(outs) != 1 else outs[0]
        assert_close(got, exp, atol=tol["atol"], rtol=tol["rtol"], equal_nan=True, msg=f"reference {self.path}")
        return got


def _max_abs_err(actual, expected) -> float:
    """The greatest |actual - expected| for report()'s line (pairs of tuples too; NaN where the two
    cannot be subtracted: assert_close then says why). Leaked numpy's ValueError on a tuple of
    arrays of different shapes, which assert_close takes (rel29 F9)."""
    if isinstance(actual, (tuple, list)) and isinstance(expected, (tuple, list)) and len(actual) == len(expected):
        return max((_max_abs_err(a, e) for a, e in zip(actual, expected)), default=0.0)
    try:
        a = _to_numpy(actual).astype(np.float64)
        e = _to_numpy(expected).astype(np.float64)
        return float(np.max(np.abs(a - e))) if a.shape == e.shape and a.size else 0.0
    except (TypeError, ValueError):
        return float("nan")


def report(name, actual, expected, *, atol=None, rtol=None, equal_nan=False, stream=None):
    """For scripts: prints ``name: max abs err ... OK`` (or the mismatch report of
    :func:`assert_close`) and returns whether ``actual`` is close to ``expected``."""
    out = stream if stream is not None else sys.stdout
    err = _max_abs_err(actual, expected)
    try:
        assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=equal_nan, msg=name)
    except AssertionError as exc:
        print(f"  {name}: max abs err {err:.3e} MISMATCH\n{exc}", file=out)
        return False
    pairs = zip(actual, expected) if isinstance(actual, (tuple, list)) else [(actual, expected)]
    atol_, rtol_ = tolerance(*(_dtype_name(x) for p in pairs for x in p)) if atol is None or rtol is None else (0, 0)
    atol_ = atol_ if atol is None else atol
    rtol_ = rtol_ if rtol is None else rtol
    print(f"  {name}: max abs err {err:.3e} (atol {atol_:g}, rtol {rtol_:g}) OK", file=out)
    return True


def finish(ok):
    """For scripts: prints ``OK`` or ``MISMATCH`` and exits with status 0 or 1."""
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)
