"""The result pair of a reverse transform: a primal value and its backpropagator."""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from ..errors import DplusError
from .error_places import locate_in_user_code

T = TypeVar("T")

# A backpropagator: ``bp(A, Abox)`` is the tuple of sensitivities, the closure's first.
Backprop = Callable[..., tuple[Any, ...]]
# A plus-function (a reverse transform): ``P(*args)`` is a ProcResult.
PlusFunction = Callable[..., "ProcResult"]


@attrs.frozen(slots=True, repr=False)
class ProcResult:
    """``f+(*args) == ProcResult(f(*args), backprop)``."""

    primal: Any
    backprop: Backprop

    def __repr__(self) -> str:
        return f"ProcResult(primal={self.primal!r}, backprop={getattr(self.backprop, '__qualname__', self.backprop)!r})"


# (the slots' descriptors, read from the class's namespace: `ProcResult.primal` is the same)
_set_primal = ProcResult.__dict__["primal"].__set__
_set_backprop = ProcResult.__dict__["backprop"].__set__


def _init_result(self: ProcResult, primal: Any, backprop: Backprop) -> None:
    if type(primal) is _array_type[0]:
        # an array: if its memory is changed in place later, the operation that made it takes
        # its sensitivity from the box-sensitivity map when its reverse runs (runtime.memory)
        backprop = _array_type[1](primal, backprop)
    _set_primal(self, primal)
    _set_backprop(self, backprop)


def plain_result(primal: Any, backprop: Backprop) -> ProcResult:
    """``ProcResult(primal, backprop)`` whose backprop takes nothing from the box-sensitivity
    map for an array ``primal``: an operation whose result shows memory it did not make and
    whose backprop could not hand that memory's sensitivity back (code dplus does not see), or
    has no derivative at all."""
    r = object.__new__(ProcResult)
    _set_primal(r, primal)
    _set_backprop(r, backprop)
    return r


class _NoArray:
    pass


# (the array type, what wraps the backprop of an array result, and what wraps that of any
# rule's array result: set by runtime.memory)
_array_type: list[Any] = [_NoArray, None, None]


def array_results(
    array_type: type,
    wrap: Callable[[Any, Backprop], Backprop],
    wrap_rule: Callable[[Any, Backprop], Backprop],
) -> None:
    """Results of type ``array_type`` get the backprop ``wrap(result, backprop)``, and those
    made by :func:`rule_result` ``wrap_rule(result, backprop)``."""
    _array_type[0] = array_type
    _array_type[1] = wrap
    _array_type[2] = wrap_rule


def rule_result(primal: Any, backprop: Backprop) -> ProcResult:
    """``ProcResult(primal, backprop)`` of a rule whose backprop hands its arguments'
    sensitivities back at once, wherever it is defined: an array result takes the sensitivity
    of its memory when it is changed in place later (``runtime.memory``)."""
    if type(primal) is _array_type[0]:
        backprop = _array_type[2](primal, backprop)
    return plain_result(primal, backprop)


# attrs' frozen __init__ looks the setter up on every call; one is made per call and per rule
# application, so the slots are set directly (the class stays frozen: __setattr__ raises)
ProcResult.__init__ = _init_result  # type: ignore[method-assign]


def primal(r: ProcResult) -> Any:
    """The primal value of a :class:`ProcResult`."""
    return r.primal


def backprop(r: ProcResult) -> Backprop:
    """The backpropagator of a :class:`ProcResult`."""
    return r.backprop


# While a transform or a backprop runs: room for recursion, and no cyclic garbage collector.
# Each primal call level costs the transformed code a few frames, and recursion should be
# limited by the primal's depth. The record of a long computation holds millions of
# objects; the collector would traverse them again and again (quadratic time) although the
# record makes no reference cycles: reference counting frees it. Only the outermost call
# sets this up (nested derivatives make thousands of inner ones), written out rather than as
# a context manager because a gradient of a small function pays it twice per call.

_DEEP = max(sys.getrecursionlimit() * 5, 5000)

_depth = [0]  # how many call_plus/run_backprop are running: only the outermost sets things up

# What a loop of code differentiated again keeps while it runs (``live_again``'s watch of a lazy
# builtin's items, by the id of the list): its entry ends with the loop, or with the outermost
# call when an exception left the loop (no loop runs on after it)
loops_in_flight: dict[int, Any] = {}


def _outermost(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    _depth[0] += 1
    old = _getrecursionlimit()
    if old < _DEEP:
        _setrecursionlimit(_DEEP)
    gc_was_enabled = _gc_isenabled()
    if gc_was_enabled:
        _gc_disable()
    try:
        return fn(*args, **kwargs)
    except DplusError as e:
        locate_in_user_code(e)
        raise
    finally:
        _depth[0] -= 1
        if loops_in_flight and not _depth[0]:
            loops_in_flight.clear()
        if gc_was_enabled:
            _gc_enable()
        if old < _DEEP and _getrecursionlimit() == _DEEP:
            _setrecursionlimit(old)


_getrecursionlimit, _setrecursionlimit = sys.getrecursionlimit, sys.setrecursionlimit
_gc_isenabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable


def run_backprop(bp: Backprop, A: Any, Abox: Any) -> tuple[Any, ...]:
    """``bp(A, Abox)`` with room for the reverse of deep recursion."""
    if _depth[0]:
        return bp(A, Abox)
    return _outermost(bp, (A, Abox), {})


def call_plus(P: PlusFunction, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``P(*args)``: call a plus-function captured from outside transformed code.

    Written this way (rather than ``P(*args)``) wherever dplus's own transformable code
    calls a plus-function it was given, because inside transformed code a plus-function
    value made there stands for itself, while one captured from outside stands for the
    function it differentiates: the rule of ``call_plus`` differentiates it again.
    """
    if kwargs:
        # (a plus-function with plain parameters answers by position: _call_positionally binds the
        # keywords so that their sensitivities come back by name, as for any call with keywords)
        if _depth[0]:
            return _call_positionally(P, args, kwargs)
        return _outermost(_call_positionally, (P, args, kwargs), {})
    if _depth[0]:
        return P(*args)
    return _outermost(P, args, {})


# ---------------------------------------------------------------------------
# calls with keywords


class KeywordDict(dict[str, Any]):
    """Keyword arguments by name, in a new dict that no code changes: the sensitivities of a
    call's keywords (the last element of a backprop's result when the call had keywords),
    a partial's bound keywords. A value like a tuple, not a mutable whose sensitivity lives
    in ``Abox``: at the next order, its sensitivity is a dict carried like a tuple's."""

    __slots__ = ()


_VARARGS = 0x04  # (code flags)
_VARKW = 0x08


def plain_parameters(
    f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...] | None:
    """The parameter names of ``f`` when it has plain parameters only and ``args`` and
    ``kwargs`` fill them exactly (so the call can be made positionally), else None."""
    if type(f) is not types.FunctionType:
        return None
    code = f.__code__
    if code.co_flags & (_VARARGS | _VARKW) or code.co_kwonlyargcount or f.__defaults__:
        return None  # it binds keywords itself and reports their sensitivities
    names = code.co_varnames[: code.co_argcount]
    if (
        len(args) > len(names)
        or any(k not in names[len(args) :] for k in kwargs)
        or len(args) + len(kwargs) != len(names)
    ):
        return None  # (a call Python rejects: let it raise its own TypeError)
    return names


def keywords_by_name(
    out: tuple[Any, ...], names: tuple[Any, ...], npos: int, keywords: tuple[Any, ...]
) -> tuple[Any, ...]:
    """A positional backprop result ``(closure, *per-parameter)`` as the result of a call
    with ``npos`` positional arguments and then ``keywords``: ``(closure, *positional, {keyword: ...})``."""
    by_name = dict(zip(names, out[1:]))
    return (out[0],) + tuple(out[1 : 1 + npos]) + (KeywordDict({k: by_name[k] for k in keywords}),)


def _call_positionally(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ProcResult:
    """Keyword arguments to a plus-function with plain parameters: its backprop answers by
    position, so call it positionally and give the keywords their sensitivities back by name."""
    names = plain_parameters(f, args, kwargs)
    if names is None:
        result: ProcResult = f(*args, **kwargs)
        return result
    full = list(args) + [kwargs[n] for n in names[len(args) :]]
    r = f(*full)
    inner = r.backprop
    npos = len(args)
    keywords = tuple(kwargs)

    def keyword_backprop(A: Any, Abox: Any) -> tuple[Any, ...]:
        return keywords_by_name(inner(A, Abox), names, npos, keywords)

    return ProcResult(r.primal, keyword_backprop)
