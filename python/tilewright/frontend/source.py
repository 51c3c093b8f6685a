"""A kernel function's source: its AST with real file/line/column positions, and its Python scope."""
from __future__ import annotations

import ast
import builtins
import inspect
import os
import sys

from ..errors import TilewrightError, user_location


def kernel_function(fn):
    """The Python function whose source is the kernel: ``fn``, or the function that decorators keeping
    ``__wrapped__`` (functools.wraps) wrap. Its source, file and scope are read together: the
    wrapper's file with the wrapped function's lines located errors in the decorator's module, and
    the wrapper's closure bound the kernel's names (api34 F2). A ``@tw.jit`` factory or anything that
    is not a Python function is a located error, not a parse of some other code (api34 F1)."""
    inner = inspect.unwrap(fn, stop=lambda f: hasattr(f, "_tw_jit_cache"))
    if hasattr(inner, "_tw_jit_cache"):  # a @tw.jit wrapper (jit.py): its own source is Tilewright's
        name = getattr(inner, "__name__", "?")
        code = getattr(getattr(inner, "__wrapped__", None), "__code__", None)
        where = f" (defined at {code.co_filename}:{code.co_firstlineno})" if code is not None else ""
        raise TilewrightError(f"'{name}' is a @tw.jit kernel factory{where}, not a kernel function", *user_location(),
                              hint=f"call it with its arguments to get the compiled kernel ({name}(...)), or decorate "
                                   "the kernel function with @T.prim_func (not @tw.jit) to pass it to tw.compile")
    if not inspect.isfunction(inner):
        raise TilewrightError(f"cannot compile {fn!r}", *user_location(),
                              hint="a kernel is a Python function: decorate a plain 'def' with @T.prim_func (explicit "
                                   "style), or pass one written with tile loops (tw.output, tw.load, tw.store) to "
                                   "tw.compile")
    return inner


def defining_scope(fn, scope_code, scope_locals):
    """``scope_locals`` (the locals of a run of the code object ``scope_code``) when ``fn`` was
    defined directly in that code (its code is one of the constants) and its annotations are
    postponed (strings, from ``from __future__ import annotations``); else None. Python evaluates
    such annotations in the defining scope, whose locals a closure holds only when the body uses
    them (a factory's ``shape = (N,)`` or a dtype used only in annotations: hunt35 F3)."""
    code = getattr(fn, "__code__", None)
    if code is None or not any(c is code for c in getattr(scope_code, "co_consts", ())):
        return None
    if not any(isinstance(a, str) for a in (getattr(fn, "__annotations__", None) or {}).values()):
        return None
    return scope_locals


def caller_scope(fn, depth):
    """:func:`defining_scope` for the frame ``depth`` levels above the caller of this function's
    caller (1: that caller's caller), where a decorator or ``tw.compile`` runs at the definition."""
    frame = sys._getframe(depth + 1)
    return defining_scope(fn, frame.f_code, frame.f_locals)


class Source:
    """The parsed source of ``fn``. ``span(node)`` maps an AST node to ``(file, line, col)`` in the
    user's file (1-based), so every IR node and error points at the real location."""

    def __init__(self, fn, defining_locals=None):
        fn = self.fn = kernel_function(fn)
        try:
            file = inspect.getsourcefile(fn) or inspect.getfile(fn)
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise TilewrightError(
                f"cannot read the source of {getattr(fn, '__qualname__', fn)!r}: {e}", *user_location(),
                hint="kernels must be defined in a .py file (not typed into an interactive prompt or exec'd)") from None
        self.file = os.path.abspath(file) if file and not file.startswith("<") else (file or "")
        try:
            self.file.encode("utf-8")
        except UnicodeEncodeError:  # a file name that is not UTF-8: shown with \xNN in messages (rel30 F6)
            self.file = os.fsencode(self.file).decode("utf-8", "backslashreplace")
        self.first_line = start
        first = lines[0]
        self.indent = len(first) - len(first.lstrip(" \t"))
        prefix = first[: self.indent]
        body = [ln[self.indent:] if ln.startswith(prefix) else ln for ln in lines]
        self.lines = body
        try:
            tree = ast.parse("".join(body))
        except SyntaxError as e:
            raise TilewrightError(f"cannot parse the kernel source: {e.msg}", self.file,
                                  (e.lineno or 1) + start - 1, (e.offset or 0) + self.indent) from None
        fdef = tree.body[0] if tree.body else None
        if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise TilewrightError("a kernel must be a plain 'def' function", self.file, start, self.indent + 1)
        self.funcdef = fdef
        if isinstance(fdef, ast.AsyncFunctionDef):
            self.error(fdef, "a kernel cannot be 'async def'", "remove 'async'")

        # The Python scope the kernel body sees: closure cells, then globals, then builtins. Postponed
        # annotations (`from __future__ import annotations`) are evaluated in the defining scope, as
        # Python would have: its locals (a factory's `shape`, no closure cell when the body does not
        # use it) come first while `in_annotations` (hunt35 F3).
        self.defining_locals = defining_locals or {}
        self.in_annotations = False
        self.closure = {}
        code = getattr(fn, "__code__", None)
        if code is not None and fn.__closure__:
            for name, cell in zip(code.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:  # empty cell: defined later in the enclosing function
                    pass
        self.globals = getattr(fn, "__globals__", {})

    def lookup_python(self, name):
        """(found, value) for a name of the enclosing Python scope."""
        if self.in_annotations and name in self.defining_locals:
            return True, self.defining_locals[name]
        if name in self.closure:
            return True, self.closure[name]
        if name in self.globals:
            return True, self.globals[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None

    def span(self, node):
        line = getattr(node, "lineno", None)
        if line is None:
            return (self.file, self.first_line, self.indent + 1)
        col = getattr(node, "col_offset", 0) or 0
        if 1 <= line <= len(self.lines):  # col_offset counts UTF-8 bytes
            col = len(self.lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))
        return (self.file, line + self.first_line - 1, col + self.indent + 1)

    def error(self, node, message, hint=""):
        file, line, col = self.span(node)
        raise TilewrightError(message, file, line, col, hint)
