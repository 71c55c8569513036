"""The operations the rewritten generator code calls (``transform.normalize.generator_machine``
rewrites a generator function into a plus-function of ``(mode, value)``): the generator's
creation (``make_generator_plus``), a ``for`` loop's ``iter``/``next`` inside a generator
(``generator_iterate_plus``/``generator_take_plus``), ``yield from``'s delegation (PEP 380:
``generator_step_plus``, ``generator_close_delegate_plus``) and where a resumption goes on
(``generator_resumed_at_plus``). Each returns its value and a backprop that hands sensitivity
to the generator's log of resumptions (:mod:`.generators`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import DplusError, NonDifferentiableError
from .boxes import BoxSensitivities
from .generators import CLOSE, NEXT, THROW, Generator, GeneratorCore, Z, close_generator
from .linear import add, is_zero_sensitivity, tuple_items
from .result import ProcResult
from .routers import ListIterator, LiveIteration, iteration_router, list_length, route_all

__all__ = [
    "make_generator_plus",
    "generator_iterate_plus",
    "generator_take_plus",
    "generator_step_plus",
    "generator_close_delegate_plus",
    "generator_resumed_at_plus",
    "generator_raised_again_plus",
]


def make_generator_plus(resume: Any, name: str, qualname: str, close_runs: tuple) -> ProcResult:
    """``return make_generator(resume, ...)`` ending a generator function: the generator.
    Its creation is reversed after every resumption: ``resume`` gets the sum of their
    closure sensitivities."""
    core = GeneratorCore(resume, name, qualname, close_runs)

    def make_generator_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        return (), core.closure_sensitivity(Abox), None, None, None

    return ProcResult(Generator(core), make_generator_backprop)


class _RoutedIterator:
    """``iter(x)`` inside a generator for an iterable other than a list or a generator: the
    items it gave, whose sensitivities go back to ``x`` as a loop's would when the ``iter``
    is reversed (after every ``take``: ``x`` is a tuple, an array, a set, a range...)."""

    __slots__ = ("source", "it", "count", "order")

    def __init__(self, source: Any) -> None:
        self.source = source
        self.order = list_length(source)  # (a set's order where its iteration starts)
        self.it = iter(source)
        self.count = 0


def generator_iterate_plus(x: Any) -> ProcResult:
    """``iter(x)`` of a ``for`` loop (or ``yield from``) inside a generator."""
    t = type(x)
    if t is Generator or t is LiveIteration:
        return ProcResult(x, _no_sensitivity_1)
    if t is list:
        return ProcResult(ListIterator(x), _no_sensitivity_1)
    it = _RoutedIterator(x)

    def iterate_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        rec = Abox.stash_record(it)
        sens = rec[1]
        if not sens:
            return (), Z
        items = [Z] * it.count
        for i, s in sens.items():
            items[i] = s
        return (), route_all(x, items, Abox, it.order)

    return ProcResult(it, iterate_backprop)


def _no_sensitivity_1(A: Any, Abox: BoxSensitivities) -> tuple:
    return (), Z


def _pair_value(A: Any) -> Any:
    """The sensitivity of ``v`` in the pair ``(ok, v)`` an operation returned."""
    if A is Z or A is None:
        return Z
    return tuple_items(A, 2)[1]


def generator_take_plus(it: Any) -> ProcResult:
    """``(True, next(it))``, or ``(False, None)`` when ``it`` is exhausted: a ``for`` loop's
    next item inside a generator (by the kind of iterator ``generator_iterate_plus`` made)."""
    take = _TAKE_BY_KIND.get(type(it), _take_from_other)
    return take(it)


def _take_from_generator(it: Generator) -> ProcResult:
    out, k = _resumed(it.core, NEXT, None, False)
    return ProcResult(out, _resumption_backprop(it.core, k, 1))


def _take_from_list(it: ListIterator) -> ProcResult:
    pos, n = it.index, len(it.source)
    try:
        v = next(it)
    except StopIteration:
        return ProcResult((False, None), _no_sensitivity_1)

    def list_take_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        from .handover import handover, is_tracked_mutable

        s = _pair_value(A)
        if s is Z or s is None:
            return (), Z
        if is_tracked_mutable(v):
            handover(Abox, v, s)
        else:
            entry = Abox.list_entry(it.source, n)
            entry[pos] = add(entry[pos], s)
        return (), Z

    return ProcResult((True, v), list_take_backprop)


def _take_routed(it: _RoutedIterator) -> ProcResult:
    i = it.count
    try:
        v = next(it.it)
    except StopIteration:
        return ProcResult((False, None), _no_sensitivity_1)
    it.count = i + 1

    def routed_take_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        s = _pair_value(A)
        if s is not Z and s is not None:
            rec = Abox.stash_record(it)
            if rec[1] is None:
                rec[1] = {}
            rec[1][i] = add(rec[1][i], s) if i in rec[1] else s
        return (), Z

    return ProcResult((True, v), routed_take_backprop)


def _take_live(it: LiveIteration) -> ProcResult:
    try:
        v = next(it)
    except StopIteration:
        return ProcResult((False, None), _no_sensitivity_1)
    lengths = list_length(it)

    def live_take_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        s = _pair_value(A)
        if s is not Z and s is not None:
            iteration_router(it, 1, lengths).back(0, s, Abox)
        return (), Z

    return ProcResult((True, v), live_take_backprop)


def _take_from_other(it: Any) -> ProcResult:
    try:
        v = next(it)
    except StopIteration:
        return ProcResult((False, None), _no_sensitivity_1)
    return ProcResult((True, v), _nowhere(type(it).__name__))


_TAKE_BY_KIND: dict[type, Callable[[Any], ProcResult]] = {
    Generator: _take_from_generator,
    ListIterator: _take_from_list,
    _RoutedIterator: _take_routed,
    LiveIteration: _take_live,
}


def _nowhere(what: str) -> Callable[[Any, BoxSensitivities], tuple]:
    def nowhere_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        s = _pair_value(A)
        if not is_zero_sensitivity(s):
            raise NonDifferentiableError(
                f"sensitivity reached an element taken from a {what} inside a generator, which has nowhere to send "
                "it. Iterate over a list, a tuple or a generator made by differentiated code"
            )
        return (), Z

    return nowhere_backprop


def _resumed(core: GeneratorCore, mode: int, value: Any, returned: bool) -> tuple[Any, int]:
    """One resumption of ``core`` run by an operation of differentiated code: ``(ok, v)``
    (``ok``: it yielded ``v``; else it returned ``v``, or ``None`` when ``returned`` is
    false) and the resumption's index (-1: none ran, the generator was closed)."""
    n0 = len(core.log)
    try:
        k, v = core.resume_protocol(mode, value)
        return (True, v), k
    except StopIteration as e:
        out = (False, e.value if returned else None)
        return out, (n0 if len(core.log) > n0 else -1)


def _resumption_backprop(core: GeneratorCore, k: int, n_args: int) -> Callable[..., tuple]:
    """The backprop of an operation that ran resumption ``k``: its value's sensitivity
    handed on, the resumption reversed; the sent value's sensitivity, for the last of
    ``n_args`` arguments (``send``'s value), the others none."""

    def resumption_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if k < 0:
            return ((),) + (Z,) * n_args
        core.deliver(k, _pair_value(A), Abox)
        sent = core.reverse_down_to(k, Abox)
        return ((),) + (Z,) * (n_args - 1) + (sent,)

    return resumption_backprop


def _sent_nothing(A: Any, Abox: BoxSensitivities) -> tuple:
    return (), Z, None, Z


def generator_step_plus(sub: Any, mode: int, value: Any) -> ProcResult:
    """``yield from sub``'s delegation of one resumption (PEP 380): ``next``/``send``/
    ``throw`` passed on to ``sub``; ``(True, v)`` for the value it yielded, ``(False, r)``
    for its return value. ``close`` (or throwing ``GeneratorExit``) closes ``sub`` and raises."""
    if mode == CLOSE or (mode == THROW and isinstance(value, GeneratorExit)):
        generator_close_delegate_plus(sub)
        raise value
    if type(sub) is Generator:
        out, k = _resumed(sub.core, mode, value, True)
        return ProcResult(out, _resumption_backprop(sub.core, k, 3))
    if mode == THROW:
        throw = getattr(sub, "throw", None)
        if throw is None:
            raise value
        return _native_step(lambda: throw(value), sub)
    if value is None:
        r = generator_take_plus(sub)
        inner = r.backprop
        return ProcResult(r.primal, lambda A, Abox: inner(A, Abox) + (None, Z))
    return _native_step(lambda: sub.send(value), sub)


def _native_step(step: Callable[[], Any], sub: Any) -> ProcResult:
    try:
        v = step()
    except StopIteration as e:
        return ProcResult((False, e.value), _sent_nothing)
    nowhere = _nowhere(type(sub).__name__)
    return ProcResult((True, v), lambda A, Abox: nowhere(A, Abox) + (None, Z))


def generator_resumed_at_plus(pc: int, site: int, mode: int, value: Any) -> ProcResult:
    """At a ``yield`` of the rewritten code: ``0`` (running again) when the resumption starts
    at this site, after raising the exception ``throw`` (or ``close``, where a handler might
    catch ``GeneratorExit``) passes; ``pc`` unchanged otherwise."""
    if pc != site:
        return ProcResult(pc, _no_sensitivity_4)
    if mode != NEXT:
        raise value
    return ProcResult(0, _no_sensitivity_4)


def _no_sensitivity_4(A: Any, Abox: BoxSensitivities) -> tuple:
    return (), None, None, None, Z


def generator_close_delegate_plus(sub: Any) -> ProcResult:
    """``yield from``'s delegate closed when the delegating generator is (PEP 380)."""
    if type(sub) is Generator:
        return close_generator(sub)
    close = getattr(sub, "close", None)
    if close is not None:
        close()
    return ProcResult(None, _no_sensitivity_1)


def generator_raised_again_plus(
    raised: BaseException, name: str, filename: str, line: int
) -> ProcResult:
    """Differentiated again, a generator runs to completion where it is made
    (``normalize.rewrites._YieldsToList``); an exception its code raises there is refused by
    name: Python's generator raises it only if it is read that far, and never where it is
    made. dplus's own errors (a refusal inside the body) pass as they are."""
    if isinstance(raised, DplusError):
        raise raised
    raise NonDifferentiableError(
        f"the generator function {name!r} ({filename}, line {line}) raised "
        f"{type(raised).__name__}: {raised} while it ran to completion where it is made: at a "
        "higher order of differentiation (hessian, grad of grad) dplus runs a generator to the "
        "end at once, and Python's generator raises only when it is read that far (never, if "
        "its reader stops before). Catch the exception inside the generator, or end it "
        "before the code that raises"
    ) from raised
