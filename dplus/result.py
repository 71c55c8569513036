"""The result pair of a reverse transform: a primal value and its backpropagator."""

from __future__ import annotations

import gc
import sys
from typing import Any, Callable

import attrs

Backprop = Callable[..., tuple]


@attrs.frozen(slots=True, repr=False)
class ProcResult:
    """``f+(*args) == ProcResult(f(*args), backprop)``."""

    primal: Any
    backprop: Backprop

    def __repr__(self) -> str:
        return f"ProcResult(primal={self.primal!r}, backprop={getattr(self.backprop, '__qualname__', self.backprop)!r})"


def primal(r: ProcResult) -> Any:
    """The primal value of a :class:`ProcResult`."""
    return r.primal


def backprop(r: ProcResult) -> Backprop:
    """The backpropagator of a :class:`ProcResult`."""
    return r.backprop


class _Deeper:
    """While a transform or a backprop runs: room for recursion, and no cyclic garbage collector.

    Each primal call level costs the transformed code a few frames, and recursion should be
    limited by the primal's depth. The record of a long computation holds millions of
    objects; the collector would traverse them again and again (quadratic time) although
    the record makes no reference cycles: reference counting frees it.
    """

    __slots__ = ("old", "gc_was_enabled")

    def __enter__(self) -> None:
        _depth[0] += 1
        self.old = sys.getrecursionlimit()
        if self.old < _DEEP:
            sys.setrecursionlimit(_DEEP)
        self.gc_was_enabled = gc.isenabled()
        if self.gc_was_enabled:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        _depth[0] -= 1
        if self.gc_was_enabled:
            gc.enable()
        if self.old < _DEEP and sys.getrecursionlimit() == _DEEP:
            sys.setrecursionlimit(self.old)


_DEEP = max(sys.getrecursionlimit() * 5, 5000)


_depth = [0]  # how many call_plus/run_backprop are running: only the outermost sets things up


def run_backprop(bp: Backprop, A: Any, Abox: Any) -> tuple:
    """``bp(A, Abox)`` with room for the reverse of deep recursion."""
    if _depth[0]:
        return bp(A, Abox)
    with _Deeper():
        return bp(A, Abox)


def call_plus(P: Backprop, *args: Any, **kwargs: Any) -> ProcResult:
    """``P(*args)``: call a plus-function captured from outside transformed code.

    Written this way (rather than ``P(*args)``) wherever dplus's own transformable code
    calls a plus-function it was given, because inside transformed code a plus-function
    value made there stands for itself, while one captured from outside stands for the
    function it differentiates: the rule of ``call_plus`` differentiates it again.
    """
    if _depth[0]:
        return P(*args, **kwargs)
    with _Deeper():
        return P(*args, **kwargs)
