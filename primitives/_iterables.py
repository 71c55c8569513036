"""Shared machinery of the builtins and functional rules (internal).

Rules that take iterables and return lists need three things:

* :func:`seq` / :func:`lazy_seq` turn an iterable argument into a :class:`Seq`: its
  elements (materialized when that is safe) and the *kind* of the argument, which
  decides what sensitivity conforms to it (a list for a list, a tuple for a tuple,
  an array for an array, nothing for ``range``/``str``/``bytes``, the element's
  sensitivity for an infinite ``itertools.repeat``, and zero -- or an error -- for
  iterators, generators, sets and dict keys).
* :func:`out_sens` gives the element sensitivities of a list the rule created,
  taking them out of the box-sensitivity map (where the engine keeps the
  sensitivities of mutable values) after adding the ``A`` handed in directly.
* :func:`settle` hands the parts of a sensitivity that belong to mutable values
  into ``Abox`` at once, which is what a caller of a backpropagator must do before
  calling the next (earlier) one, and returns the rest.
"""

from __future__ import annotations

import collections
import itertools
import sys
from collections.abc import Sequence
from typing import Any

from dplus.errors import DplusError, NonDifferentiableError
from dplus.rules import inline_rule_for
from dplus.runtime.boxes import BoxSensitivities
from dplus.runtime.closures import is_plus_function
from dplus.runtime.fold import ItemColumns
from dplus.runtime.generators import GeneratorTaker
from dplus.runtime.handover import accumulate, handover
from dplus.runtime.hooks import hooks
from dplus.runtime.kinds import is_ndarray
from dplus.runtime.linear import (
    add,
    add_closure,
    coerce_zero,
    gen_zero,
    is_zero_sensitivity,
    tuple_items,
)
from dplus.runtime.registry import is_registered_transform, lookup_transform, primal_of_transform
from dplus.runtime.routers import ListIterator, iteration_router

from ._list_iterators import TakingFromList, TakingThrough, list_iterator_sens, take_rest

__all__ = [
    "LIST",
    "TUPLE",
    "CONST",
    "ARRAY",
    "REPEAT",
    "OTHER",
    "LIVE",
    "GEN",
    "SET",
    "LISTITER",
    "Seq",
    "seq",
    "lazy_seq",
    "out_sens",
    "settle",
    "items_of",
    "is_complex",
    "proj",
    "unbroadcast",
    "ensure_abox",
    "sum_sens",
    "is_infinite",
    "add_closure",
    "check_finite",
    "fast_rule",
    "all_float",
    "Calls",
    "columns",
    "rows_of",
]

LIST, TUPLE, CONST, ARRAY, REPEAT, OTHER, LIVE, SET, GEN, LISTITER = range(10)


def _np() -> Any:
    return sys.modules.get("numpy")


def is_infinite(x: Any) -> bool:
    """True for the iterators known to be infinite: ``count``, ``cycle``, ``repeat`` without ``times``."""
    t = type(x)
    if t is itertools.count or t is itertools.cycle:
        return True
    if t is itertools.repeat:
        try:
            x.__length_hint__()
        except TypeError:
            return True
    return False


class Seq:
    """An iterable argument of a rule: its elements and how to send sensitivities back to it."""

    __slots__ = ("value", "items", "kind", "fn", "arg", "lengths", "taking")

    def __init__(
        self, value: Any, items: Any, kind: int, fn: str, arg: str, taking: Any = None
    ) -> None:
        self.value = value
        self.items = items  # None for lazily consumed iterators
        self.kind = kind
        self.fn = fn
        self.arg = arg
        self.lengths: tuple[Any, ...] | None = (
            None  # LIVE: what runtime.routers.list_length recorded once the items were taken
        )
        # LISTITER: where the elements taken from ``iter(xs)`` were in ``xs`` (a router: ``lst``,
        # ``positions``, ``back``; a _TakingFromList while a lazy rule still takes them)
        self.taking = taking

    def source(self) -> Any:
        """What to iterate over to get the elements (the materialized items when there are any)."""
        if self.items is not None:
            return self.items
        return self.value if self.taking is None else self.taking

    def sens(self, s: list | None, Abox: BoxSensitivities | None = None) -> Any:
        """The sensitivity of the argument, from the sensitivities ``s`` of its first ``len(s)`` elements.

        Missing trailing elements (a ``zip`` that stopped early) get zero. ``None`` means all zero.
        """
        k = self.kind
        if s is None or k == CONST:
            return gen_zero
        if k == LIST:
            return list_sens(s, len(self.items))
        if k == TUPLE:
            n = len(self.items)
            if len(s) < n:
                s = list(s) + [gen_zero] * (n - len(s))
            return s if type(s) is tuple else tuple(s)
        if k == ARRAY:
            return self._array_sens(s)
        if k == REPEAT:
            return self._repeat_sens(s, Abox)
        if k == LIVE:
            return _live_sens(self.value, s, Abox, self.lengths, len(self.items))
        if k == SET:
            return set_sens(self.items, s, Abox)
        if k == GEN:
            # the values' sensitivities, in the order taken: consumes_generators hands each
            # to the resumption that produced it
            return list(s)
        if k == LISTITER:
            return list_iterator_sens(self.taking, s, Abox)
        self._refuse_unsized(s, Abox)
        return gen_zero

    def _repeat_sens(self, s: list, Abox: BoxSensitivities | None) -> Any:
        """``itertools.repeat(obj)``: every element is ``obj``, so its sensitivity is the sum."""
        obj = next(self.value)  # an infinite repeat does not change when advanced
        total: Any = gen_zero
        for si in s:
            if si is not gen_zero and si is not None:
                total = add(total, si)
        if Abox is not None and total is not gen_zero:
            total = settle(obj, total, Abox)
        return total

    def _refuse_unsized(self, s: list, Abox: BoxSensitivities | None) -> None:
        """OTHER: an iterator, generator, dict (keys), view or user iterable: its elements'
        sensitivities have nowhere to go, so one that is not zero is an error."""
        items = self.items
        for i, si in enumerate(s):
            if si is gen_zero or si is None:
                continue
            if Abox is not None and items is not None and i < len(items):
                si = settle(items[i], si, Abox)
            if not is_zero_sensitivity(si):
                raise NonDifferentiableError(self._unsized_message())

    def _unsized_message(self) -> str:
        what = type(self.value).__name__
        if what in ("ListIterator", "TakingFromList"):
            what = (
                "generator (differentiated again: an iterator over its values) or iter() of a list"
            )
        if isinstance(self.value, dict):
            detail = "iterating over a dict gives its keys, and dict keys are not differentiable"
        else:
            detail = (
                f"a {what} is not a list, tuple or array, so the sensitivity of its elements "
                "has nowhere to go"
            )
        return (
            f"{self.fn}(): sensitivity reached the elements of the argument {self.arg!r} "
            f"({what}), but {detail}. Fix: pass a list or tuple instead (e.g. list(...) of it, "
            "or a list comprehension instead of a generator expression)."
        )

    def _array_sens(self, s: list) -> Any:
        np = _np()
        items = self.items
        n = len(items)
        if all(si is gen_zero or si is None for si in s):
            return gen_zero
        rows = [coerce_zero(s[i] if i < len(s) else gen_zero, items[i]) for i in range(n)]
        arr = np.array(rows) if n else np.zeros_like(self.value)
        if np.iscomplexobj(arr) and not np.iscomplexobj(self.value):
            arr = arr.real
        return arr.reshape(self.value.shape) if arr.size == self.value.size else arr


def _live_seq(x: Any, fn: str, arg: str) -> Seq:
    """The items of a live iterator, taken now (as Python would take them here)."""
    from dplus.runtime.routers import list_length

    sq = Seq(x, list(x), LIVE, fn, arg)
    sq.lengths = list_length(x)
    return sq


def _live_sens(
    live: Any, s: list[Any], Abox: BoxSensitivities | None, lengths: tuple[Any, ...] | None, n: int
) -> Any:
    """The sensitivities of the items a rule took from a live ``zip``/``map``/... iterator
    (``runtime.routers.LiveIteration``), routed to the positions each item read, last item first;
    the iterator's own call hands them on. ``lengths``: recorded when the ``n`` items were taken."""
    from dplus.runtime.routers import iteration_router

    if all(si is gen_zero or si is None for si in s):
        return gen_zero
    Abox = Abox if Abox is not None else BoxSensitivities()
    route = iteration_router(live, n, lengths)
    for i in range(len(s) - 1, -1, -1):
        if s[i] is not gen_zero and s[i] is not None:
            route.back(i, s[i], Abox)
    return gen_zero


def _list_iterator_seq(x: ListIterator, fn: str, arg: str) -> Seq:
    """``iter(xs)`` given to a rule that takes its elements as it goes (``zip``, ``map``)."""
    return Seq(x, None, LISTITER, fn, arg, TakingFromList(x))


def _list_iterator_items(x: ListIterator, fn: str, arg: str) -> Seq:
    """``iter(xs)`` given to a rule that takes all its elements now (``sum``, ``sorted``):
    the rest of ``xs``; each element's sensitivity goes to its position in ``xs``."""
    n = len(x.source)
    start = x.index
    stop = start if x.done else max(start, n)
    # (routed before they are marked taken: the positions start..stop-1, in order)
    route = iteration_router(x, stop - start, (stop, n))
    return Seq(x, take_rest(x), LISTITER, fn, arg, route)


_LIST_LIKE = (list, collections.deque)  # (a constant for rule code differentiated again)


def _kind_of_sequence(x: Any) -> int | None:
    t = type(x)
    if t is list:
        return LIST
    if t is tuple:
        return TUPLE
    if isinstance(x, _LIST_LIKE):
        return LIST  # (a deque's sensitivity is a list, by position, kept in Abox as a list's)
    if isinstance(x, tuple):
        return TUPLE
    if isinstance(x, (range, str, bytes, bytearray, memoryview)):
        return CONST
    if is_ndarray(x):
        return ARRAY
    if type(x).__name__ == "LiveIteration" and type(x).__module__ == "dplus.runtime.routers":
        return LIVE
    if t is set or t is frozenset:
        return SET
    return None


def set_sens(items: list, s: list, Abox: BoxSensitivities | None) -> Any:
    """A set's sensitivity from those of its elements in iteration order ``items``: a dict from
    element to sensitivity, as a loop over the set gives (``gen_zero`` when all are zero)."""
    out: dict = {}
    for e, si in zip(items, s):
        if si is gen_zero or si is None or type(e) is int or type(e) is bool:
            continue  # (integers in a set are labels: see primitives.containers.set_sensitivity)
        if Abox is not None:
            si = settle(e, si, Abox)
        if not is_zero_sensitivity(si):
            out[e] = add(out[e], si) if e in out else si
    return out or gen_zero


def _generator_seq(taker: Any, fn: str, arg: str, lazy: bool) -> Seq:
    """A generator made by differentiated code, as ``runtime.generators.consumes_generators``
    hands it to a rule: a ``GeneratorTaker``, which knows the resumption each value came from."""
    return Seq(taker, None if lazy else list(taker), GEN, fn, arg)


def seq(x: Any, fn: str, arg: str) -> Seq:
    """A materialized iterable argument (for rules that consume the whole iterable)."""
    if type(x) is GeneratorTaker:
        return _generator_seq(x, fn, arg, False)
    if type(x) is ListIterator:
        return _list_iterator_items(x, fn, arg)
    if type(x) is TakingFromList or type(x) is TakingThrough:  # (rule code differentiated again)
        through = TakingThrough(x)
        return Seq(x, list(through), LISTITER, fn, arg, through)
    k = _kind_of_sequence(x)
    if k == TUPLE:
        return Seq(x, x, k, fn, arg)
    if k == LIVE:
        return _live_seq(x, fn, arg)
    if k is not None:
        return Seq(x, list(x), k, fn, arg)
    if is_infinite(x):
        raise DplusError(
            f"{fn}() returns a list inside differentiated code, so it cannot consume the infinite "
            f"iterator {x!r} (argument {arg!r}). Fix: bound it first, e.g. with itertools.islice "
            "or by zipping it with a finite list."
        )
    return Seq(x, list(x), OTHER, fn, arg)


def list_sens(s: Any, n: int) -> Any:
    """The sensitivity of a list of ``n`` elements from those of its first ``len(s)``
    (the rest zero; ``None``: all zero)."""
    if s is None:
        return gen_zero
    if len(s) < n:
        return list(s) + [gen_zero] * (n - len(s))
    return s if type(s) is list else list(s)


def lazy_seq(x: Any, fn: str, arg: str) -> Seq:
    """An iterable argument of a rule that may stop early (``zip``, ``map``, ``islice``): not materialized."""
    if type(x) is GeneratorTaker:
        return _generator_seq(x, fn, arg, True)
    if type(x) is ListIterator:
        return _list_iterator_seq(x, fn, arg)  # (taken as the rule iterates its source())
    if type(x) is TakingFromList or type(x) is TakingThrough:  # (rule code differentiated again)
        return Seq(x, None, LISTITER, fn, arg, TakingThrough(x))
    k = _kind_of_sequence(x)
    if k == TUPLE:
        return Seq(x, x, k, fn, arg)
    if k == LIVE:
        return _live_seq(x, fn, arg)
    if k is not None:
        return Seq(x, list(x), k, fn, arg)
    if type(x) is itertools.repeat and is_infinite(x):
        return Seq(x, None, REPEAT, fn, arg)
    if type(x) is itertools.count and _counts_integers(x):
        return Seq(x, None, CONST, fn, arg)  # (integers counted from constants, as range's)
    return Seq(x, None, OTHER, fn, arg)


def _counts_integers(x: itertools.count) -> bool:
    """Whether ``itertools.count`` ``x`` yields integers (its repr shows its next value and
    step: ``count(3)``, ``count(3, 2)``, ``count(0.5, 0.1)``)."""
    return all(
        part.strip().lstrip("-").isdigit() for part in repr(x)[len("count(") : -1].split(",")
    )


def ensure_abox(Abox: Any) -> BoxSensitivities:
    return Abox if Abox is not None else BoxSensitivities()


def out_sens(out: Sequence[Any], A: Any, Abox: BoxSensitivities) -> list | None:
    """The element sensitivities of the list ``out`` that the rule created (``None``: all zero).

    ``A`` given directly is added first (mutable elements' parts go to their own entries);
    the list's entry is then taken out of ``Abox``: before its creation, the list did not exist.
    """
    if A is not gen_zero and A is not None:
        handover(Abox, out, A)
    entry = Abox.pop(out)
    if entry is gen_zero or entry is None:
        return None
    return entry


def settle(v: Any, s: Any, Abox: BoxSensitivities) -> Any:
    """Hand the parts of ``s`` that belong to mutable values inside ``v`` into ``Abox``; return the rest."""
    if s is gen_zero or s is None:
        return gen_zero
    tv = type(v)
    if tv is float or tv is int or tv is complex:
        return s
    return accumulate(gen_zero, v, s, Abox)


items_of = tuple_items  # the element sensitivities of a tuple sensitivity, sparse forms included


def columns(rows: Any, m: int) -> tuple:
    """The ``m`` columns (tuples) of a list of length-``m`` tuple sensitivities (``gen_zero``: zeros).

    Linear, with :func:`rows_of` as its transpose (both have rules, so rules' backprops
    that use them can be differentiated again).
    """
    if type(rows) is ItemColumns:  # from the reverse of a fast loop: columns already
        return tuple(rows.cols)
    if not rows:
        return ((),) * m
    kinds = set(map(type, rows))
    if kinds <= _PLAIN_ROWS:
        if _GenZeroType in kinds:
            zm = (gen_zero,) * m
            rows = [zm if r is gen_zero else r for r in rows]
        try:
            cols = tuple(zip(*rows, strict=True))  # one pass: strict checks the lengths agree
        except ValueError:
            cols = ()
        if len(cols) == m:
            return cols
    columns_: list[list[Any]] = [[] for _ in range(m)]
    for r in rows:
        its = tuple_items(r, m)
        for j in range(m):
            columns_[j].append(its[j])
    return tuple(tuple(c) for c in columns_)


def rows_of(cols: Any, m: int) -> Any:
    """The transpose of :func:`columns`: rows (tuples) from ``m`` columns (``gen_zero`` for none)."""
    if cols is gen_zero or cols is None:
        return gen_zero
    parts = [None if c is gen_zero or c is None else tuple(c) for c in tuple_items(cols, m)]
    n = max((len(c) for c in parts if c is not None), default=0)
    parts = [(gen_zero,) * n if c is None else c + (gen_zero,) * (n - len(c)) for c in parts]
    return tuple(zip(*parts))


_GenZeroType = type(gen_zero)
_PLAIN_ROWS = frozenset({tuple, _GenZeroType})


def _columns_rule(rows: Any, m: int) -> Any:
    from dplus.runtime.result import ProcResult

    return ProcResult(columns(rows, m), lambda A, Abox: ((), rows_of(A, m), None))


def _rows_of_rule(cols: Any, m: int) -> Any:
    from dplus.runtime.result import ProcResult

    return ProcResult(
        rows_of(cols, m),
        lambda A, Abox: ((), gen_zero if A is gen_zero or A is None else columns(A, m), None),
    )


def _register_columns() -> None:
    from dplus.runtime.registry import register_primitive

    register_primitive(columns, _columns_rule, note="internal: the columns of zipped sensitivities")
    register_primitive(rows_of, _rows_of_rule, note="internal: the transpose of columns")


_register_columns()


def is_complex(x: Any) -> bool:
    if isinstance(x, complex):
        return True
    np = _np()
    return np is not None and isinstance(x, (np.ndarray, np.generic)) and np.iscomplexobj(x)


def unbroadcast(A: Any, x: Any) -> Any:
    """``A`` summed down to the shape of ``x`` (NumPy broadcasting), real when ``x`` is real."""
    np = _np()
    if is_ndarray(A):
        shape = np.shape(x)
        if A.shape != shape:
            while A.ndim > len(shape):
                A = A.sum(axis=0)
            for ax, d in enumerate(shape):
                if d == 1 and A.shape[ax] != 1:
                    A = A.sum(axis=ax, keepdims=True)
            if not is_ndarray(x):
                A = A.reshape(()) if hasattr(A, "reshape") else A
                A = A.item() if isinstance(x, (int, float, complex)) else A
    return proj(A, x)


def proj(A: Any, x: Any) -> Any:
    """``A`` made real when the primal ``x`` is real (the sensitivity of a real value is real)."""
    if A is gen_zero or A is None:
        return A
    tA = type(A)
    if tA is float or tA is int:
        return A
    if tA is complex or is_complex(A):
        if not is_complex(x):
            return A.real
    return A


def sum_sens(ss: list) -> Any:
    total: Any = gen_zero
    for s in ss:
        if s is not gen_zero and s is not None:
            total = add(total, s)
    return total


def check_finite(seqs: list, fn: str) -> None:
    """Raise when every input of a ``zip``-like rule is a known infinite iterator."""
    for sq in seqs:
        if sq.items is not None or not is_infinite(sq.value):
            return
    if seqs:
        raise DplusError(
            f"{fn}() returns a list inside differentiated code, and all its inputs are infinite "
            "iterators. Fix: bound one of them, e.g. with itertools.islice."
        )


def fast_rule(function: Any, arity: int) -> tuple | None:
    """``(fn, grads)`` when calls of ``function`` on floats may skip the transform.

    That is when ``function`` is a primitive (or its registered transform) with inline
    gradient lambdas of this arity (``dplus.rules.defvjp``): the rule functions then
    compute the primal directly and the gradients on the backward pass, exactly as the
    transformer's float fast paths do. Callers use it only when every argument and the
    result are floats and the sensitivity is a float.
    """
    fn = function
    if is_registered_transform(function):
        fn = primal_of_transform(function)
    elif is_plus_function(function):
        return None
    rule = inline_rule_for(fn)
    if rule is None or rule.arity != arity or lookup_transform(fn) is None:
        return None
    return fn, rule.grads


def all_float(a: Sequence[Any]) -> bool:
    for x in a:
        if type(x) is not float:
            return False
    return True


class Calls:
    """The calls a higher-order rule makes of its function argument, recorded for the backward pass.

    ``call(args)`` runs the function through its transform -- or, for a primitive with
    inline gradient lambdas called on floats with a float result, directly (see
    :func:`fast_rule`). ``back(k, A, Abox)`` runs the backpropagator of call ``k`` (call
    them in reverse order) and returns ``(closure_sens, *arg_sens)`` with the parts that
    belong to mutable values already handed into ``Abox``; ``None`` when all are zero.

    Rule code that differentiates again (``__dplus_from_source__``): at the next order a rule
    that made a ``Calls`` is differentiated from its source, and so is this class, as a user
    class is. So the function is called as generated code calls a callee
    (``runtime.calls.call``, whose next-order rule calls the transform of its transform) and the
    records are plain lists.
    """

    __slots__ = ("function", "fast", "args", "results", "bps")
    __dplus_from_source__ = True

    def __init__(self, function: Any) -> None:
        self.function = function
        self.fast: dict = {}
        self.args: list = []
        self.results: list = []
        self.bps: list = []

    def __len__(self) -> int:
        return len(self.args)

    def _rule(self, arity: int) -> Any:
        if arity not in self.fast:
            self.fast[arity] = fast_rule(self.function, arity)
        return self.fast[arity]

    def call(self, a: tuple) -> Any:
        self.args.append(a)
        if all_float(a):
            rule = self._rule(len(a))
            if rule is not None:
                r = rule[0](*a)
                if type(r) is float:
                    self.results.append(r)
                    self.bps.append(None)
                    return r
        res = _call_function(self.function, a)
        r = res.primal
        self.results.append(r)
        self.bps.append(res.backprop)
        return r

    def back(self, k: int, A: Any, Abox: BoxSensitivities) -> tuple | None:
        bp = self.bps[k]
        a = self.args[k]
        if bp is None:
            if A is gen_zero or A is None:
                return None
            if type(A) is float:
                r = self.results[k]
                return ((),) + tuple(
                    gen_zero if g is None else g(A, r, *a) for g in self.fast[len(a)][1]
                )
            bp = _call_function(self.function, a).backprop  # a non-float sensitivity: the full rule
        else:
            A = settle(self.results[k], A, Abox)
        rs = bp(A, Abox)
        return (rs[0],) + tuple(settle(x, s, Abox) for x, s in zip(a, rs[1:]))


hooks.install(recorded_calls=Calls)


def _call_function(function: Any, a: tuple) -> Any:
    """``function(*a)`` through its transform, as generated code calls a callee."""
    from dplus.runtime.calls import call

    return call(function, *a)


def _register_nondifferentiable_helpers() -> None:
    from dplus.rules import defnondiff

    defnondiff(fast_rule, note="internal: which inline rule a function argument has")
    defnondiff(all_float, note="internal: a type test")


_register_nondifferentiable_helpers()
