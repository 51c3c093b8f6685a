"""Tilewright: a tile-level kernel language and compiler.

``import tilewright as tw`` for compiling and running (``tw.jit``, ``tw.compile``) and the
tile-loop vocabulary (``tw.output``, ``tw.load``, ``tw.matmul``, ``tw.store``, ...);
``import tilewright.language as T`` for the explicit style (``T.Kernel``, ``T.copy``, ``T.gemm``, ...).
"""
try:
    from . import _C
except ImportError as _e:  # the source tree without its compiled core for this interpreter
    import sys as _sys
    raise ImportError(
        f"tilewright's compiled core (tilewright._C) cannot be imported by {_sys.executable} (Python "
        f"{_sys.version.split()[0]}): it is built for one interpreter. Run the Python it was built for (`make build` "
        f"installs it into .venv: .venv/bin/python), or build it for this one (`{_sys.executable} -m pip install .` "
        f"in the source checkout). ({_e})") from None
from . import log  # noqa: F401 - routes the runtime's log lines to logging.getLogger("tilewright")
from . import testing
from .autotune import Config, autotune
from .benchmark import do_bench
from .errors import TilewrightError, TilewrightWarning, require
from .jit import Kernel, cache_info, clear_cache, compile, jit, kernel_stats
from .deploy import export, freeze, frozen, precompile
from .torch_op import register_torch_op
from .tile import SymbolicDim, Tensor, accumulator, ceildiv, load, matmul, output, store, symbolic

__version__ = _C.__version__

__all__ = [
    "TilewrightError", "TilewrightWarning", "require", "Kernel", "compile", "jit", "targets", "cache_info", "clear_cache",
    "export", "precompile", "freeze", "frozen", "kernel_stats",
    "testing", "do_bench", "autotune", "Config",
    "register_torch_op",
    "Tensor", "SymbolicDim", "symbolic", "output", "accumulator", "load", "matmul", "store", "ceildiv",
]


def targets():
    """[(name, description)] of every compilation target."""
    return list(_C.targets())
