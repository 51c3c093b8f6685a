"""The DSL's definition-time values, shared by :mod:`tilewright.language` (which exports them as
``T.*``) and :mod:`tilewright.frontend` (which recognises them), so neither imports the other:
dtype names (:class:`DType`), :class:`SymbolicDim` / :func:`symbolic`, :class:`Tensor`."""
from __future__ import annotations

import builtins as _builtins
import sys as _sys

from .errors import TilewrightError, user_location


def _outside_kernel(what: str):
    frame = _sys._getframe(2)
    raise TilewrightError(
        f"{what} can only be used inside a kernel",
        frame.f_code.co_filename, frame.f_lineno, 0,
        "write it in the body of a @T.prim_func function (inside `with T.Kernel(...)`); "
        "the DSL functions describe the kernel to the compiler and are not executed by Python")


class DType(str):
    """A dtype name (a ``str``). Inside a kernel, ``T.float32(x)`` casts ``x``."""

    def __call__(self, value=None):
        _outside_kernel(f"T.{self}")


def dtype_name(value):
    """The dtype name of a dtype given as a name, a numpy dtype or scalar type (``np.float16``,
    ``np.dtype("int32")``, ml_dtypes' bfloat16) or a torch dtype (``torch.float16``); None for
    anything else. Users pass these where a dtype name goes (api35 F1)."""
    if isinstance(value, str):
        return value
    module = type(value).__module__ or ""
    if module.startswith("torch") and type(value).__name__ == "dtype":
        return str(value)[len("torch."):]  # torch.float16 (torch.half prints so too)
    np = _sys.modules.get("numpy")
    if np is not None and (isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic))):
        return np.dtype(value).name
    return None


class SymbolicDim:
    """A symbolic tensor dimension (``T.symbolic("M")``): bound from the actual argument at call
    time; the kernel is not specialised on it. Dimensions with the same name are the same."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        if not isinstance(name, str) or not name.isidentifier():
            raise TilewrightError(f"T.symbolic needs an identifier name, got {name!r}", *user_location())
        self.name = name

    def __repr__(self):
        return f"T.symbolic({self.name!r})"

    def __eq__(self, other):
        return isinstance(other, SymbolicDim) and other.name == self.name

    def __hash__(self):
        return hash(("SymbolicDim", self.name))


def symbolic(name: str) -> SymbolicDim:
    """A symbolic dimension for tensor shapes: ``M = T.symbolic("M")``."""
    return SymbolicDim(name)


class Tensor:
    """A tensor parameter annotation: ``A: T.Tensor((M, K), "float16")``.

    Each dimension is a Python int, a :class:`SymbolicDim` or a string naming a symbolic dim.
    """

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype="float32"):
        if isinstance(shape, (int, str, SymbolicDim)):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)):
            raise TilewrightError(f"tensor shape must be a tuple of dimensions, got {shape!r}", *user_location(),
                                  hint="e.g. T.Tensor((M, K), 'float16')")
        shape = tuple(shape)
        for d in shape:
            if isinstance(d, _builtins.bool) or not isinstance(d, (int, str, SymbolicDim)):
                raise TilewrightError(
                    f"tensor dimension must be an int, a T.symbolic dim or a name string, got {d!r}",
                    *user_location())
        name = dtype_name(dtype)
        if name is None:
            raise TilewrightError(f"tensor dtype must be a name like 'float16', got {dtype!r}", *user_location(),
                                  hint="a dtype name ('float16', T.float16), a numpy dtype or a torch dtype")
        self.shape = shape
        self.dtype = str(name)

    def __repr__(self):
        return f"Tensor({self.shape!r}, {self.dtype!r})"
