"""The DSL front end: Python source (AST) -> Tile IR, through the builder in tilewright._C.ir.

Entry points:
  * :func:`parse_prim_func` -- the explicit style (``@T.prim_func``, ``with T.Kernel(...)``);
  * :func:`parse_tile_loops` -- the tile-loops style (``tw.output/accumulator/load/matmul/store``
    inside plain ``for ... in range(...)`` loops).

Both read the function's source with ``inspect`` and walk its AST (Python loops are not run or
unrolled); names of the enclosing Python scope are compile-time constants. Every IR node gets the
user's (file, line, col); every error is a :class:`tilewright.TilewrightError` at that location.
"""
from __future__ import annotations

from ..errors import TilewrightError
from .explicit import PrimFuncParser
from .tile_loops import TileLoopsParser

__all__ = ["parse_prim_func", "parse_tile_loops"]


def _parse(parser):
    """Runs parser.parse(); the front end walks expressions recursively, so a very deeply nested
    one (e.g. a sum of thousands of terms) is reported as an error at the function, not as
    Python's RecursionError."""
    try:
        return parser.parse()
    except RecursionError:
        code = getattr(parser.fn, "__code__", None)
        raise TilewrightError(
            f"kernel '{parser.fn.__name__}' has an expression nested too deeply to compile",
            code.co_filename if code else "", code.co_firstlineno if code else 0,
            hint="split the expression into several statements (e.g. accumulate partial sums in a loop)",
        ) from None


def parse_prim_func(fn, out_idx=None, defining_locals=None):
    """Build the IR kernel of an explicit-style function (``fn`` may also be a ``T.PrimFunc``).

    ``out_idx``: an index or list of indices of parameters that are outputs (negative counts from
    the end), as in tilelang's ``out_idx``; default none. ``defining_locals``: the locals of the
    scope that defined ``fn`` (names its postponed annotations may use; see Source).
    """
    fn = getattr(fn, "fn", fn)
    return _parse(PrimFuncParser(fn, out_idx, defining_locals))


def parse_tile_loops(fn, arg_specs=None, defining_locals=None):
    """Build the IR kernel of a tile-loops function.

    ``arg_specs`` (optional) supplies or overrides parameter annotations, as a list in parameter
    order or a dict by name. Each spec is a ``tw.Tensor(shape, dtype)`` (a tensor input), a dtype
    or ``int``/``float`` (a scalar input), or a Python int/float (a compile-time constant bound to
    that parameter). Outputs are the ``tw.output`` declarations, after the inputs.
    ``defining_locals``: as for :func:`parse_prim_func`.
    """
    return _parse(TileLoopsParser(fn, arg_specs, defining_locals))
