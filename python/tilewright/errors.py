"""The user-facing error of Tilewright.

Every error the front end (and, through the binding's exception translator, the C++ core) reports
about a user's kernel is a :class:`TilewrightError` carrying where it happened::

    /path/kernel.py:12:9: error: unsupported statement 'while' in a kernel
        while i < n:
        ^
      hint: use a for loop over T.serial(n) / range(n)
"""
from __future__ import annotations

import linecache
import os
import re
import sys

__all__ = ["TilewrightError", "TilewrightWarning", "require", "user_location"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


# torch's dispatch of a registered op (tw.register_torch_op) runs between the user's call and ours:
# its frames are not the user's either (session 23, h-hunt11b F7).
_DISPATCH_MODULES = ("torch._library.", "torch._ops", "torch._compile", "torch._dynamo.", "torch.utils._python_dispatch")


# The pools that run Tilewright's own work (tw.precompile's threads, autotune's processes): a worker's
# stack holds no user frame, and an error there is unlocated, not at the pool's code (api34 F16).
_POOL_PACKAGES = ("threading", "concurrent", "multiprocessing")


def _not_users(frame) -> bool:
    # "<frozen runpy>": `python -m tilewright tune ...` located errors there (rel29 F9)
    name = str(frame.f_globals.get("__name__", ""))
    return frame.f_code.co_filename.startswith((_PACKAGE, "<frozen ")) or name.startswith(_DISPATCH_MODULES) or \
        name.partition(".")[0] in _POOL_PACKAGES


def user_location(skip: int = 0):
    """(file, line) of the innermost stack frame outside the tilewright package (and outside torch's
    dispatch of a registered op): where the user's code called into Tilewright (("", 0) when there is
    none). ``skip`` frames above the caller are passed over first: a kernel factory checking its
    arguments passes 1 to point at the line that called it (through ``@tw.jit``)."""
    frame = sys._getframe(1 + skip)
    while frame is not None and _not_users(frame):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("", 0)


class TilewrightError(Exception):
    """An error in a user's kernel, located at ``file:line:col`` (1-based; 0 = unknown)."""

    def __init__(self, message: str, file: str = "", line: int = 0, col: int = 0, hint: str = ""):
        self.message = message
        self.file = file or ""
        self.line = int(line or 0)
        self.col = int(col or 0)
        self.hint = hint or ""
        super().__init__(self._format())

    @property
    def source_line(self) -> str:
        """The user's source line the error points at ("" when unavailable)."""
        if not self.file or self.line <= 0:
            return ""
        line = linecache.getline(self.file, self.line)
        if not line and "\\x" in self.file:
            # a file name that is not UTF-8 is carried with \xNN escapes (frontend/source.py): read the
            # file at the name's bytes (review30 R3: the error had lost its source line)
            raw = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m[1], 16)]), self.file.encode("utf-8"))
            line = linecache.getline(os.fsdecode(raw), self.line)
        return line.rstrip("\n")

    def _format(self) -> str:
        out = ""
        if self.line > 0:
            out += f"{self.file or '<kernel>'}:{self.line}"
            if self.col > 0:
                out += f":{self.col}"
            out += ": "
        out += f"error: {self.message}"
        src = self.source_line
        if src:
            pad = "".join("\t" if ch == "\t" else " " for ch in src[: max(self.col - 1, 0)])
            out += f"\n    {src}\n    {pad}^"
        if self.hint:
            out += f"\n  hint: {self.hint}"
        return out

    def __str__(self) -> str:
        return self._format()

    def __reduce__(self):  # picklable (multiprocessing, pytest-xdist)
        return (type(self), (self.message, self.file, self.line, self.col, self.hint))


class TilewrightWarning(UserWarning):
    """A compile note about a user's kernel: what the compiler chose in place of what the kernel
    asked (e.g. ``T.Pipelined(..., num_stages=3)`` run with 2 stages on Ascend, where 3 copies of
    the loop's tiles do not fit). The message is ``file:line:col: note: ...`` with the source line;
    the warning is attributed to that kernel line. ``kernel.notes`` lists them too."""


def require(condition, message: str, hint: str = "", skip: int = 0) -> None:
    """Raises a :class:`TilewrightError` with ``message`` and ``hint`` unless ``condition``, located at
    the line that called the kernel factory calling ``require`` (past the factory and ``@tw.jit``):
    how a factory refuses arguments it cannot compile correctly, e.g.
    ``tw.require(heads % kv_heads == 0, f"{heads} query heads cannot share {kv_heads} kv heads")``.
    ``skip``: helper frames between the factory and this call (1 for a check in a helper)."""
    if not condition:
        raise TilewrightError(message, *user_location(skip=2 + skip), hint=hint)
