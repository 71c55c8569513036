"""Timing: a timeit-style auto-ranging loop with a per-cell time budget and a cap
on any single call (enforced with SIGALRM where available, so a tool that is
far too slow is interrupted instead of holding up the run)."""

from __future__ import annotations

import contextlib
import gc
import math
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["TooSlow", "Timing", "time_limit", "call_once", "autorange", "fmt_seconds"]

perf = time.perf_counter


class TooSlow(BaseException):
    """A single call exceeded the cap.  A ``BaseException`` (like ``KeyboardInterrupt``)
    so that libraries' ``except Exception`` fallbacks do not swallow it."""

    def __init__(self, cap: float) -> None:
        super().__init__(f"a single call took more than {cap:g} s")
        self.cap = cap


@contextlib.contextmanager
def time_limit(cap: float | None) -> Iterator[None]:
    """Raise :class:`TooSlow` inside the block once ``cap`` seconds have passed.

    Works by SIGALRM, so it interrupts Python code (every tool here spends its time
    in Python) but not a long call into C (an XLA compile): use a subprocess for those.
    Without SIGALRM, or off the main thread, the block just runs.
    """
    usable = (
        cap is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise TooSlow(cap)

    old_hook = sys.unraisablehook

    def hook(u: Any) -> None:  # an alarm landing in a gc callback is dropped there: stay quiet
        if not isinstance(u.exc_value, TooSlow):
            old_hook(u)

    sys.unraisablehook = hook
    old = signal.signal(signal.SIGALRM, on_alarm)
    # fire at cap, then again every 0.5 s in case a handler somewhere swallowed it
    signal.setitimer(signal.ITIMER_REAL, cap, 0.5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        sys.unraisablehook = old_hook


def call_once(fn: Callable[[], Any], cap: float | None = None) -> tuple[float, Any]:
    """``(seconds, result)`` of one call, raising :class:`TooSlow` past ``cap``."""
    with time_limit(cap):
        t0 = perf()
        r = fn()
        t1 = perf()
    return t1 - t0, r


@dataclass
class Timing:
    seconds: float  # median seconds per call
    runs: int  # total timed calls
    repeats: int  # number of medians taken over
    spread: float  # (max - min) / median over the repeats
    best: float  # the fastest repeat (seconds per call): least disturbed by other load

    def describe(self) -> str:
        if self.runs == 1:
            return f"{fmt_seconds(self.seconds)} (a single call)"
        return f"{fmt_seconds(self.seconds)} (median of {self.repeats}, {self.runs} calls, spread {self.spread:.0%})"


def autorange(
    fn: Callable[[], Any],
    budget: float,
    first: float | None = None,
    repeats: int = 5,
    cap: float | None = None,
) -> Timing:
    """Median seconds per call of ``fn`` using about ``budget`` seconds in all.

    ``first`` is the time of a call already made (e.g. the checked one): when it
    alone is more than half the budget, one more call is timed and the two are
    combined, so a slow tool costs about two calls.
    """
    gc.collect()
    if first is not None and first > budget / 2:
        # the first call may include one-time work (a transform, a compile): time another
        t, _ = call_once(fn, cap)
        if t > budget / 4:
            return Timing(seconds=t, runs=1, repeats=1, spread=0.0, best=t)
    target = budget / repeats  # time per repeat
    # calibrate: smallest power-of-ten-ish number of calls taking >= target / 5
    number = 1
    while True:
        t0 = perf()
        for _ in range(number):
            fn()
        t = perf() - t0
        if t >= target / 5 or number >= 10**7:
            break
        number = number * 10 if t < target / 50 else number * 2
    number = max(1, int(math.ceil(number * target / max(t, 1e-9))))
    times = []
    for _ in range(repeats):
        t0 = perf()
        for _ in range(number):
            fn()
        times.append((perf() - t0) / number)
    med = statistics.median(times)
    return Timing(
        seconds=med,
        runs=number * repeats,
        repeats=repeats,
        spread=(max(times) - min(times)) / med if med > 0 else 0.0,
        best=min(times),
    )


def fmt_seconds(s: float) -> str:
    if s is None or math.isnan(s):
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.3g} µs"
    return f"{s * 1e9:.3g} ns"
