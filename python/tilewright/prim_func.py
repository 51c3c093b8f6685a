"""``@T.prim_func`` (exported by :mod:`tilewright.language`): parses a kernel written in the
explicit style into the Tile IR when it is defined."""
from __future__ import annotations

from ._C import ir
from .errors import TilewrightError, user_location
from .frontend import parse_prim_func
from .frontend.source import caller_scope


class PrimFunc:
    """A parsed ``@T.prim_func``: ``.fn`` (the Python function), ``.ir`` (the Tile IR kernel),
    ``.name``. It is compiled by the runtime (``tw.jit`` / ``tw.compile``), not called."""

    def __init__(self, fn, ir_kernel):
        self.fn = fn
        self.ir = ir_kernel
        self.name = ir_kernel.name

    def script(self) -> str:
        """The kernel's IR in text form."""
        return ir.print_kernel(self.ir)

    def __call__(self, *args, **kwargs):
        raise TilewrightError(
            f"prim_func '{self.name}' cannot be called directly", *user_location(),
            hint="compile it first: return it from a @tw.jit function, or pass it to tw.compile")

    def __repr__(self):
        return f"<T.prim_func {self.name}>"


def prim_func(fn):
    """Decorator: parse ``fn`` (explicit style) into the Tile IR now, so errors point at the
    definition. Returns a :class:`PrimFunc` (``fn`` itself when it is one already)."""
    if isinstance(fn, PrimFunc):  # @T.prim_func twice: it read fn's name, which a PrimFunc lacks (api34 F7)
        return fn
    # postponed annotations are evaluated in the defining scope (a factory's `shape = (N,)`: hunt35 F3)
    return PrimFunc(fn, parse_prim_func(fn, defining_locals=caller_scope(fn, 1)))
