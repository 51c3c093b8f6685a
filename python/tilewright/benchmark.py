"""``tw.do_bench``: time a callable the way ``triton.testing.do_bench`` does.

On the ``cpu`` target the times are wall-clock (``time.perf_counter``). On simulated targets
(``ascend910b*``) a kernel call inside the timed function runs in the simulator and counts its
*simulated* time (the chip model's cycles at its clock), not the host's wall time: the model is
deterministic, so one timed run is enough and warmup/rep do not apply.
"""
from __future__ import annotations

import math
import numbers
import statistics
import threading
import time

import numpy as np

from .errors import TilewrightError, user_location

__all__ = ["do_bench", "simulated_timer"]

_RETURN_MODES = ("min", "max", "mean", "median", "all")
_FLUSH_BYTES = 256 << 20  # larger than any last-level cache we run on
_flush_buffer = None
_local = threading.local()


class simulated_timer:
    """Context manager: while active in this thread, every call of a kernel compiled for a
    simulated target adds its simulated time (ms) to ``self.ms`` and counts in ``self.calls``;
    calls of other kernels count in ``self.host_calls``. Used by :func:`do_bench`."""

    def __init__(self):
        self.ms = 0.0
        self.calls = 0
        self.host_calls = 0

    def __enter__(self):
        self._prev = getattr(_local, "timer", None)
        _local.timer = self
        return self

    def __exit__(self, *exc):
        _local.timer = self._prev
        return False


def active_timer():
    """The :class:`simulated_timer` active in this thread, or None (read by ``Kernel.__call__``)."""
    return getattr(_local, "timer", None)


def _flush_cache():
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.empty(_FLUSH_BYTES, dtype=np.uint8)
    _flush_buffer.fill(0)


def _summarise(times_ms, quantiles, return_mode):
    if quantiles is not None:
        q = [float(np.quantile(times_ms, p)) for p in quantiles]
        return q[0] if len(q) == 1 else q
    if return_mode == "all":
        return list(times_ms)
    return float({"min": min, "max": max, "mean": statistics.fmean, "median": statistics.median}[return_mode](times_ms))


def _finite(v) -> bool:
    """A real number (not a bool, a string, NaN or an infinity)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def do_bench(fn, warmup=25, rep=100, quantiles=None, return_mode="mean", flush_cache=False):
    """Runtime of ``fn()`` in milliseconds.

    ``warmup`` and ``rep`` are time budgets in ms (as in Triton): ``fn`` is run once and timed
    over a few calls to estimate its cost, then called ``max(1, warmup / estimate)`` times
    untimed and ``max(1, rep / estimate)`` times timed. ``quantiles`` (e.g. ``[0.5, 0.2, 0.8]``)
    returns those quantiles of the timed runs (a single float for one quantile); otherwise
    ``return_mode`` picks ``"min"``, ``"max"``, ``"mean"`` (default), ``"median"`` or ``"all"``
    (the list of times). ``flush_cache=True`` (cpu) overwrites a 256 MiB buffer before every
    timed call so each run starts with cold caches (that time is not counted).

    When ``fn`` calls kernels of a simulated target (ascend910b*), the result is their summed
    simulated time per call of ``fn``; ``fn`` is run once (the model is deterministic) and every
    statistic is that time. A ``fn`` that mixes simulated and cpu kernels is an error."""
    if not callable(fn):  # its TypeError came from the first call, inside do_bench (api34 F11)
        raise TilewrightError(f"do_bench: {fn!r} is not callable", *user_location(),
                              hint="pass a function of no arguments: do_bench(lambda: kernel(a, b))")
    if return_mode not in _RETURN_MODES:
        raise TilewrightError(f"do_bench: return_mode {return_mode!r} is not one of {', '.join(_RETURN_MODES)}",
                              *user_location(), hint="use return_mode='median' (or quantiles=[...])")
    if quantiles is not None:
        quantiles_arg = quantiles
        quantiles = list(quantiles) if hasattr(quantiles, "__iter__") and not isinstance(quantiles, str) else None
        if not quantiles or not all(_finite(q) and 0.0 <= q <= 1.0 for q in quantiles):
            raise TilewrightError(f"do_bench: quantiles {quantiles_arg!r} must be a non-empty list of values in [0, 1]",
                                  *user_location())
    if not (_finite(warmup) and _finite(rep) and warmup >= 0 and rep > 0):
        raise TilewrightError(f"do_bench: warmup ({warmup!r}) must be >= 0 and rep ({rep!r}) > 0 (both finite numbers, in ms)",
                              *user_location())

    with simulated_timer() as first:
        t0 = time.perf_counter()
        fn()
    if first.calls:
        if first.host_calls:
            raise TilewrightError("do_bench: the function calls kernels of a simulated target and of the cpu target; "
                                  "simulated and wall-clock times cannot be added", *user_location(),
                                  hint="benchmark the cpu and the ascend kernels separately")
        return _summarise([first.ms], quantiles, return_mode)

    # estimate the cost from up to 5 calls (fewer when they already exceed the rep budget)
    n_est = 0
    t0 = time.perf_counter()
    while n_est < 5 and (n_est == 0 or (time.perf_counter() - t0) * 1e3 < rep):
        fn()
        n_est += 1
    estimate = max((time.perf_counter() - t0) * 1e3 / n_est, 1e-6)
    n_warmup = max(1, int(warmup / estimate))
    n_repeat = max(1, int(rep / estimate))
    for _ in range(n_warmup):
        fn()
    times = []
    for _ in range(n_repeat):
        if flush_cache:
            _flush_cache()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return _summarise(times, quantiles, return_mode)
