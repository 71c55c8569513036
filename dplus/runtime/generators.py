"""Generators made by differentiated code, run lazily and in order, as Python runs them.

A generator function, differentiated, is an ordinary function that returns a
:class:`Generator` built on ``resume`` (``transform.normalize.generator_machine``): a
plus-function of ``(mode, value)`` that runs the generator's code from where it stopped to
its next ``yield`` and returns ``(site, value)`` (``site`` 0: it returned ``value``). Each
``next``/``send``/``throw``/``close`` is one *resumption*: the generator calls ``resume``'s
transform and keeps its backprop in its :class:`GeneratorCore`'s log.

The backward pass runs the resumptions' backprops last first, each where the code that took
its value is reversed: the rule of ``next``/``send``/``throw``/``close``, the reverse of the
loop iteration that took it (:class:`GeneratorRoute`), the rule of ``sum``/``max``/``list``/
... that consumed it (:func:`consumes_generators`). Each hands on the sensitivity of the
value its resumption produced (:meth:`GeneratorCore.deliver`) and asks for the log to be
reversed down to that resumption (:meth:`GeneratorCore.reverse_down_to`); a resumption no
rule asked for (taken by code dplus does not see: a builtin such as ``any``, a function with
no rule) is reversed with the next one that is, or when the generator's creation is
reversed. What has been reversed, and the sensitivities waiting, are kept per backward pass
in its ``BoxSensitivities`` (a backprop may run more than once).

The operations the rewritten generator code calls are in :mod:`.generator_ops`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

from ..errors import NonDifferentiableError
from .boxes import BoxSensitivities
from .linear import add, gen_zero, is_zero_sensitivity, tuple_items
from .result import ProcResult
from .routers import iteration_router

__all__ = [
    "Generator",
    "GeneratorCore",
    "GeneratorTaker",
    "GeneratorRoute",
    "consumes_generators",
    "loop_iterable",
    "generator_route",
    "close_generator",
]

Z: Any = gen_zero
NEXT, THROW, CLOSE = 0, 1, 2
_CREATED, _SUSPENDED, _RUNNING, _CLOSED = range(4)


# every resumption of every generator numbered in the order they ran: generators taken
# together (``zip(g1, g2)``) may share variables, so their resumptions are reversed in the
# reverse of that order (:func:`reverse_together`)
_clock = itertools.count()


class _Resumption:
    """One resumption's record: its backprop (``None``: an exception left the generator) and
    when it ran among all generators' resumptions."""

    __slots__ = ("bp", "raised", "stamp")

    def __init__(self, bp: Any, raised: BaseException | None = None) -> None:
        self.bp = bp
        self.raised = raised
        self.stamp = next(_clock)


class GeneratorCore:
    """A generator's code, state and log of resumptions: what the records of the forward
    pass keep (the user's :class:`Generator` may be deleted before them, as in Python)."""

    __slots__ = ("resume", "name", "qualname", "close_runs", "state", "site", "log", "__weakref__")

    def __init__(self, resume: Any, name: str, qualname: str, close_runs: tuple) -> None:
        self.resume = resume
        self.name = name
        self.qualname = qualname
        self.close_runs = frozenset(close_runs)  # the sites where close() runs code
        self.state = _CREATED
        self.site = 0
        self.log: list[_Resumption] = []

    # ------------------------------------------------------------ forward
    def run(self, mode: int, value: Any) -> tuple[int, int, Any]:
        """One resumption: ``(index, site, value)``; what the generator raises is raised
        (``StopIteration`` raised inside it becomes ``RuntimeError``, as in Python)."""
        self.state = _RUNNING
        k = len(self.log)
        try:
            r = self.resume(mode, value)
        except StopIteration as e:
            self.state = _CLOSED
            self.log.append(_Resumption(None, e))
            raise RuntimeError("generator raised StopIteration") from e
        except BaseException as e:
            self.state = _CLOSED
            self.log.append(_Resumption(None, e))
            raise
        site, v = r.primal
        self.log.append(_Resumption(r.backprop))
        if site == 0:
            self.state = _CLOSED
        else:
            self.state = _SUSPENDED
            self.site = site
        return k, site, v

    def resume_protocol(self, mode: int, value: Any) -> tuple[int, Any]:
        """``next``/``send``/``throw`` as Python's generators take them: ``(index, value)``;
        ``StopIteration(value)`` when the generator returns (the index is then the last in
        the log if a resumption ran, see :meth:`ran_since`)."""
        if self.state == _RUNNING:
            raise ValueError("generator already executing")
        if mode == THROW:
            if self.state == _CREATED or self.state == _CLOSED:
                self.state = _CLOSED
                raise value
        elif self.state == _CLOSED:
            raise StopIteration
        elif self.state == _CREATED and value is not None:
            raise TypeError("can't send non-None value to a just-started generator")
        k, site, v = self.run(mode, value)
        if site == 0:
            raise StopIteration(v) if v is not None else StopIteration
        return k, v

    def close_protocol(self) -> int:
        """``close()``: the index of the resumption it ran (-1: it ran no code)."""
        if self.state == _RUNNING:
            raise ValueError("generator already executing")
        if self.state != _SUSPENDED or self.site not in self.close_runs:
            self.state = _CLOSED
            return -1
        try:
            k, site, _ = self.run(CLOSE, GeneratorExit())
        except GeneratorExit:
            return len(self.log) - 1
        if site != 0:
            raise RuntimeError("generator ignored GeneratorExit")
        return k

    # ------------------------------------------------------------ backward
    def _pass(self, Abox: BoxSensitivities) -> dict:
        """This backward pass's state: the last resumption not reversed yet, the sensitivities
        waiting for theirs, the closure sensitivity so far, the sent values' sensitivities."""
        rec = Abox.stash_record(self)
        if rec[1] is None:
            rec[1] = {"top": len(self.log) - 1, "A": {}, "closure": Z, "sent": {}}
        state: dict = rec[1]
        return state

    def latest_not_reversed(self, Abox: BoxSensitivities) -> tuple[int, int]:
        """The index and the stamp of the last resumption not reversed yet (-1, -1: none)."""
        top = self._pass(Abox)["top"]
        return (top, self.log[top].stamp) if top >= 0 else (-1, -1)

    def deliver(self, k: int, A: Any, Abox: BoxSensitivities) -> None:
        """The sensitivity of the value resumption ``k`` produced."""
        if A is Z or A is None:
            return
        state = self._pass(Abox)
        if k > state["top"]:
            if is_zero_sensitivity(A):
                return
            raise NonDifferentiableError(
                f"the generator {self.qualname!r}: a sensitivity reached a value it produced after the code that "
                "ran later had been reversed. dplus reverses a generator's resumptions last first, where the code "
                "that took each value is reversed; this value was taken by code that dplus reverses out of that "
                "order. Take the generator's values with next(), a for loop, or a builtin such as sum() or list()"
            )
        waiting = state["A"]
        waiting[k] = add(waiting[k], A) if k in waiting else A

    def reverse_down_to(self, k: int, Abox: BoxSensitivities) -> Any:
        """Run the backprops of resumption ``k`` and the later ones not reversed yet, last
        first; the sensitivity of the value sent into resumption ``k`` (``send``'s)."""
        state = self._pass(Abox)
        top = state["top"]
        waiting = state["A"]
        sent = state["sent"]
        while top >= k and top >= 0:
            rec = self.log[top]
            A = waiting.pop(top, Z)
            if rec.bp is None:
                raise NonDifferentiableError(
                    f"the generator {self.qualname!r} raised {type(rec.raised).__name__} out of its code, and "
                    "dplus cannot differentiate the part of it that ran before the exception (its backward pass "
                    "reaches that point). Catch the exception inside the generator, or write a function that "
                    "returns a list"
                )
            out = rec.bp(Z if A is Z else (Z, A), Abox)
            closure = out[0]
            if closure is not Z and closure is not None and closure != ():
                state["closure"] = add(state["closure"], closure)
            sent[top] = out[2] if len(out) > 2 else Z
            top -= 1
            state["top"] = top
        return sent.pop(k, Z) if k >= 0 else Z

    def closure_sensitivity(self, Abox: BoxSensitivities) -> Any:
        """At the reverse of the generator's creation, after every resumption's: the sum of
        their closure sensitivities (the generator's arguments' and captures')."""
        self.reverse_down_to(0, Abox)
        return self._pass(Abox)["closure"]


class Generator:
    """A generator object made by differentiated code: Python's generator protocol (``next``,
    ``send``, ``throw``, ``close``, iteration) over a :class:`GeneratorCore`. Python calls
    these methods when it iterates (a ``for`` loop, ``sum``, ``list``, code dplus does not
    differentiate); differentiated code calls their rules."""

    __slots__ = ("core", "__weakref__")

    def __init__(self, core: GeneratorCore) -> None:
        self.core = core

    @property
    def __name__(self) -> str:
        return self.core.name

    @property
    def gi_running(self) -> bool:
        return self.core.state == _RUNNING

    @property
    def gi_suspended(self) -> bool:
        return self.core.state == _SUSPENDED

    def __repr__(self) -> str:
        return f"<generator object {self.core.qualname} at {id(self):#x} (dplus)>"

    def __iter__(self) -> Generator:
        return self

    def __next__(self) -> Any:
        return self.core.resume_protocol(NEXT, None)[1]

    def send(self, value: Any) -> Any:
        return self.core.resume_protocol(NEXT, value)[1]

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        return self.core.resume_protocol(THROW, exception_of(typ, val, tb))[1]

    def close(self) -> None:
        self.core.close_protocol()

    def __del__(self) -> None:
        # (Python closes a generator it deletes while suspended: its finally clauses run)
        core = self.core
        if core.state == _SUSPENDED and core.site in core.close_runs:
            try:
                core.close_protocol()
            except BaseException:
                pass


def exception_of(typ: Any, val: Any = None, tb: Any = None) -> BaseException:
    """The exception ``throw(typ, val, tb)`` raises, as Python's generators make it."""
    if isinstance(typ, BaseException):
        if val is not None:
            raise TypeError("instance exception may not have a separate value")
        exc = typ
    elif isinstance(typ, type) and issubclass(typ, BaseException):
        exc = typ() if val is None else (val if isinstance(val, typ) else typ(val))
    else:
        raise TypeError(
            "exceptions must be classes or instances deriving from BaseException, not "
            + type(typ).__name__
        )
    if tb is not None:
        exc = exc.with_traceback(tb)
    return exc


class GeneratorTaker:
    """An iterator over a generator that knows which resumptions it took (a loop's, a rule's
    argument): the ``k``-th value it gave came from the resumption ``taken[k]``; when the
    generator ended in a resumption of its own, that is the last of ``taken``."""

    __slots__ = ("core", "taken")

    def __init__(self, core: GeneratorCore) -> None:
        self.core = core
        self.taken: list[int] = []

    def __iter__(self) -> GeneratorTaker:
        return self

    def __next__(self) -> Any:
        core = self.core
        n0 = len(core.log)
        try:
            k, v = core.resume_protocol(NEXT, None)
        except StopIteration:
            if len(core.log) > n0:
                self.taken.append(n0)
            raise
        except BaseException:
            if len(core.log) > n0:
                self.taken.append(n0)
            raise
        self.taken.append(k)
        return v

    def deliver_items(self, s: Any, Abox: BoxSensitivities) -> None:
        """The sensitivities of the first ``len(s)`` values taken (``None``: all zero)."""
        if s is None:
            return
        for k, si in zip(self.taken, s):
            self.core.deliver(k, si, Abox)

    def reverse(self, Abox: BoxSensitivities) -> None:
        """Every resumption taken, and the later ones not reversed yet, last first."""
        if self.taken:
            self.core.reverse_down_to(self.taken[0], Abox)


def loop_iterable(x: Any) -> Any:
    """What a ``for`` loop iterates: a :class:`GeneratorTaker` for a generator (so that each
    iteration's value goes back to its resumption), anything else as it is."""
    return GeneratorTaker(x.core) if type(x) is Generator else x


class GeneratorRoute:
    """The routing of a loop over a generator: iteration ``i``'s value goes back to its
    resumption, which is reversed then (not after the whole loop), as is the resumption that
    ended the loop at the start of the loop's reverse. It takes the place of both the router
    (``back``) and the list of sensitivities of a loop routed all at once (``route[i] = A``)."""

    __slots__ = ("taker", "n", "Abox")

    every = True  # (called for every iteration, a zero sensitivity too)

    def __init__(self, taker: GeneratorTaker, n: int, Abox: BoxSensitivities) -> None:
        self.taker = taker
        self.n = n
        self.Abox = Abox
        taken = taker.taken
        core = taker.core
        if n:
            core.reverse_down_to(taken[n - 1] + 1, Abox)
        elif taken:
            core.reverse_down_to(taken[0], Abox)

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        k = self.taker.taken[i]
        self.taker.core.deliver(k, A, Abox)
        self.taker.core.reverse_down_to(k, Abox)

    def __setitem__(self, i: Any, A: Any) -> None:
        if isinstance(i, slice):  # (a fast prefix's sensitivities: none for a generator)
            for j, a in reversed(list(zip(range(*i.indices(self.n)), A))):
                self.back(j, a, self.Abox)
            return
        self.back(i, A, self.Abox)

    def result(self) -> Any:
        if self.n:
            self.taker.core.reverse_down_to(self.taker.taken[0], self.Abox)
        return Z


def generator_route(itv: Any, n: int, length: Any, Abox: BoxSensitivities, batched: bool) -> Any:
    """The start of a loop's reverse: the router (or, ``batched``, the list of zeros its
    iterations fill) of a loop over ``itv``, or a :class:`GeneratorRoute` for a generator."""
    if type(itv) is GeneratorTaker:
        return GeneratorRoute(itv, n, Abox)
    if batched:
        return [Z] * n
    return iteration_router(itv, n, length)


# ---------------------------------------------------------------------------
# the rules of iterable-consuming builtins with generator arguments


def reverse_together(takers: list[GeneratorTaker], Abox: BoxSensitivities) -> None:
    """Every resumption the takers took, and the later ones not reversed yet, of all of them
    at once, the latest first: one rule may interleave the resumptions of generators that
    share a variable (``zip(g1, g2)``), whose reverses must run in the reverse of that order."""
    pending = [t for t in takers if t.taken]
    if len(pending) == 1:
        pending[0].reverse(Abox)  # (one generator: its resumptions in their own order)
        return
    while pending:
        latest: tuple[int, int, GeneratorTaker] | None = None
        for t in pending:
            top, stamp = t.core.latest_not_reversed(Abox)
            if top >= t.taken[0] and (latest is None or stamp > latest[1]):
                latest = (top, stamp, t)
        if latest is None:
            return
        top, _, taker = latest
        taker.core.reverse_down_to(top, Abox)
        pending = [t for t in pending if t.core.latest_not_reversed(Abox)[0] >= t.taken[0]]


def consumes_generators(transform: Callable[..., ProcResult]) -> Callable[..., ProcResult]:
    """``transform``, a rule that consumes iterables, taking generators as arguments: the
    rule gets a :class:`GeneratorTaker` in place of each generator, and returns for it the
    sensitivities of the values it took (as for a list); after the rule's backprop they go to
    the resumptions that produced them, which are reversed then, where the call is reversed
    (also when the rule returns early for a zero sensitivity)."""

    @functools.wraps(transform)
    def with_generators(*args: Any, **kwargs: Any) -> ProcResult:
        takers: list[tuple[int, GeneratorTaker]] | None = None
        for i, a in enumerate(args):
            if type(a) is Generator:
                if takers is None:
                    takers = []
                takers.append((i, GeneratorTaker(a.core)))
        if takers is None:
            return transform(*args, **kwargs)
        given = list(args)
        for i, taker in takers:
            given[i] = taker
        r = transform(*given, **kwargs)
        inner = r.backprop

        def with_generators_backprop(A: Any, Abox: BoxSensitivities) -> Any:
            out = list(inner(A, Abox))
            for i, taker in takers:
                if 1 + i < len(out):
                    s = out[1 + i]
                    out[1 + i] = Z
                    if s is not Z and s is not None:
                        taker.deliver_items(_items(s, len(taker.taken)), Abox)
            reverse_together([taker for _, taker in takers], Abox)
            return tuple(out)

        return ProcResult(r.primal, with_generators_backprop)

    # (higher.transform_of_plus differentiates ``transform`` itself at the next order)
    with_generators.__dplus_consumes_generators__ = True  # type: ignore[attr-defined]
    return with_generators


def _items(s: Any, n: int) -> Any:
    """The item sensitivities of a rule's iterable argument: a list, a tuple or a sparse
    tuple sensitivity."""
    if type(s) is list or type(s) is tuple:
        return s
    return tuple_items(s, n)


def close_generator(g: Generator) -> ProcResult:
    """``g.close()``: the generator's ``finally`` clauses run where it is suspended; the
    backprop reverses its resumptions down to the close."""
    core = g.core
    k = core.close_protocol()

    def generator_close_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if k >= 0:
            core.reverse_down_to(k, Abox)
        return (), Z

    return ProcResult(None, generator_close_backprop)
