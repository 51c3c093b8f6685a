"""Logging and progress lines.

Messages of the C++ runtime (kernel compile times, disk-cache hits and misses, simulator wall
time) go to the standard :mod:`logging` logger ``"tilewright"`` (INFO: compile and simulation
times; DEBUG: cache lookups, compiler commands). Configure it as usual, e.g.
``logging.basicConfig(); logging.getLogger("tilewright").setLevel(logging.INFO)``.
``TW_VERBOSE=1`` attaches a stderr handler at DEBUG level.

:class:`progress` prints to stderr what a step that takes longer than two seconds (host compile,
long simulation, tuning) is doing: on a terminal one line that updates with the elapsed time, in
non-interactive output one line when it starts to be slow and one when it ends. ``TW_PROGRESS=0``
turns it off.
"""
from __future__ import annotations

import atexit
import logging
import sys
import threading
import time

from . import _C

__all__ = ["logger", "progress"]

logger = logging.getLogger("tilewright")
try:
    _VERBOSE, _PROGRESS = _C.env_flags()[:2]
except ValueError:
    # A malformed TW_* value: the runtime raises the same ValueError, naming it, wherever it reads the
    # environment (every compile, the cache, the CLI); failing here failed `import tilewright` itself, so
    # `tilewright doctor` could not say what was wrong (h-rel32 F5).
    _VERBOSE, _PROGRESS = False, True
SLOW_SECONDS = 2.0


def _sink(level, message):
    logger.log(level, message)


def _install():
    _C.set_log_sink(_sink)
    atexit.register(_C.set_log_sink, None)
    if _VERBOSE and not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("tilewright: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)


_install()


class progress:
    """``with progress("compiling kernel 'mm' for cpu"):`` prints nothing when the block ends
    within :data:`SLOW_SECONDS`; otherwise says what is running and, at the end, how long it took.
    ``stream`` defaults to stderr; ``enabled`` to the TW_PROGRESS setting."""

    def __init__(self, label, stream=None, enabled=None):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _PROGRESS if enabled is None else enabled
        self._shown = False
        self._done = threading.Event()

    def _tty(self):
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def _watch(self):
        if self._done.wait(SLOW_SECONDS):
            return
        self._shown = True
        if not self._tty():
            self.stream.write(f"tilewright: {self.label} ...\n")
            self.stream.flush()
            return
        while not self._done.wait(0.5):
            self.stream.write(f"\rtilewright: {self.label} ... {time.perf_counter() - self._t0:.0f} s")
            self.stream.flush()

    def __enter__(self):
        self._t0 = time.perf_counter()
        if self.enabled:
            self._thread = threading.Thread(target=self._watch, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type, *exc):
        if not self.enabled:
            return False
        self._done.set()
        self._thread.join()
        if self._shown:
            dt = time.perf_counter() - self._t0
            # Ctrl-C is raised when the step returns, which may have succeeded (a compile is kept): not "failed"
            status = ("interrupted" if exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
                      else "failed" if exc_type is not None else "done")
            prefix = "\r" if self._tty() else ""
            self.stream.write(f"{prefix}tilewright: {self.label} ... {status} in {dt:.1f} s\n")
            self.stream.flush()
        return False
