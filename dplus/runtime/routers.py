"""Loop routers: how the sensitivities of the items a ``for`` loop bound go back to what it
iterated (lists, tuples, arrays, sets, live iterators over lists that change), one iteration
at a time or all at once after the loop's reverse.
"""

from __future__ import annotations

import collections
import operator
import sys
from collections.abc import Iterator
from typing import Any

from ..errors import NonDifferentiableError
from .boxes import BoxSensitivities
from .calls import call
from .core import as_plain_callable
from .fold import ItemColumns
from .handover import handover, is_tracked_mutable, only_floats
from .hooks import hooks
from .kinds import is_ndarray, is_number
from .linear import TupleAccumulator, add, add_closure, gen_zero, is_zero_sensitivity, tuple_items
from .result import (
    ProcResult,
)

Z = gen_zero
_NUMBERS = frozenset({int, float})
_LABELS = frozenset({int, bool})
# iterators whose items are integer labels (np.ndindex's index tuples): their items' sensitivities
# go nowhere, as a range's do (rule modules add their types)
LABEL_ITERATORS: set[type] = set()


# ---------------------------------------------------------------------------
# loops: where the sensitivity of each iteration's element goes


class _NullRouter:
    __slots__ = ()

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        pass

    def result(self) -> Any:
        return Z


class _RaisingRouter:
    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if not is_zero_sensitivity(A):
            raise NonDifferentiableError(
                f"sensitivity reached the elements of a {self.what} iterated by a for loop; such elements cannot "
                "carry sensitivity in dplus. Iterate over a list or a tuple instead"
            )

    def result(self) -> Any:
        return Z


class _ListRouter:
    __slots__ = ("lst", "n", "entry")

    def __init__(self, lst: list, n: int) -> None:
        self.lst = lst
        self.n = n  # its length where the loop ended (it may be resized since)
        self.entry: list | None = None

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        entry = self.entry
        if entry is None or Abox.get(self.lst) is not entry:
            entry = self.entry = Abox.list_entry(self.lst, self.n)
        e = entry[i]
        if type(e) is float and type(A) is float:
            entry[i] = e + A
        else:
            entry[i] = add(e, A)

    def result(self) -> Any:
        return Z


class _TupleRouter:
    __slots__ = ("items", "stash")

    def __init__(self, n: int) -> None:
        self.items: list = [Z] * n
        self.stash: Any = None  # derivatives of derivatives: where result's sensitivity waits

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        self.items[i] = add(self.items[i], A)

    def result(self) -> Any:
        if all(s is Z for s in self.items):
            return Z
        return TupleAccumulator(self.items)


class _ArrayRouter:
    __slots__ = ("arr", "g", "stash")

    def __init__(self, arr: Any) -> None:
        self.arr = arr
        self.g: Any = None  # the array of sensitivities, made by the first one
        self.stash: Any = None  # derivatives of derivatives: where result's sensitivity waits

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        if self.g is None:
            np = sys.modules["numpy"]
            self.g = np.zeros_like(self.arr, dtype=float)
        self.g[i] += A

    def result(self) -> Any:
        return Z if self.g is None else self.g


_NULL = _NullRouter()


# ---------------------------------------------------------------------------
# ``for ... in zip(xs, ...)`` / ``enumerate(xs)`` / ``reversed(xs)`` whose body may write into
# the lists, and ``for ... in map(f, xs)`` / ``filter(f, xs)``: Python's own lazy iterator over
# the live lists, as in a plain call (``map`` calls ``f`` when the loop takes an item)


_LIVE_BUILTINS = (zip, enumerate, reversed)
_LIVE_CALLERS = (map, filter)
_LIVE_ARGS = (list, tuple, range, str)


class LiveIteration:
    """The iterator ``fn(*args)`` of the builtin ``zip``, ``enumerate``, ``reversed``, ``map``
    or ``filter`` over lists (and tuples, ranges, strings), made when the loop starts, as Python
    makes it: each item reads the lists as they are when it is taken. ``first`` is the position
    the first item of ``reversed`` reads; ``calls`` records ``map``'s calls of its function
    (their backprops run when the iterations are reversed); ``positions`` the position of each
    element ``filter`` kept. An argument may itself be a live iterator (``enumerate(zip(xs, ys))``,
    ``zip(reversed(xs), ys)``): each item then takes the inner one's next item, as in Python;
    ``inner_taken`` holds how many items each inner one had given before this one started."""

    __slots__ = ("fn", "args", "it", "first", "calls", "positions", "taken", "inner_taken")

    def __init__(
        self, fn: Any, args: tuple, start: Any, function: Any = None, strict: bool = False
    ) -> None:
        self.fn = fn
        self.args = args
        self.first = len(args[0]) - 1 if fn is reversed else 0
        self.calls: Any = None  # a dplus.primitives._iterables.Calls, for map
        self.positions: list[int] = []  # for filter
        self.it: Iterator[Any]
        self.taken = 0  # items taken so far (a loop or a rule may go on where next() stopped)
        self.inner_taken = tuple(a.taken if type(a) is LiveIteration else 0 for a in args)
        if fn is map:
            self.calls = hooks.recorded_calls(function)
            self.it = map(self._call, *args)
        elif fn is filter:
            self.it = self._kept(
                bool if function is None else as_plain_callable(function), iter(args[0])
            )
        elif fn is enumerate:
            self.it = enumerate(args[0], start)
        else:  # (strict: zip's)
            self.it = zip(*args, strict=True) if strict else fn(*args)

    def _call(self, *items: Any) -> Any:
        return self.calls.call(items)

    def _kept(self, predicate: Any, items: Any) -> Any:
        for i, x in enumerate(items):
            if predicate(x):
                self.positions.append(i)
                yield x

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        item = next(self.it)
        self.taken += 1
        return item

    def __reversed__(self) -> Any:
        raise TypeError(f"'{self.fn.__name__}' object is not reversible")  # (as Python's)


def live_iteration(fn: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``call(fn, *args, **kwargs)`` for the iterable of a ``for`` loop that Python's laziness
    may show through: for ``zip``, ``enumerate``, ``reversed``, ``map`` and ``filter`` of lists
    (tuples, ranges, strings), a :class:`LiveIteration` (the loop's router sends each item's
    sensitivity to the positions it read); otherwise the rule."""
    return _live_iteration(fn, args, kwargs, False)


def kept_iteration(fn: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """:func:`live_iteration` for an iterator kept in a variable or given to a function: read
    in part or more than once, Python's iterator shows that it is used up, over tuples too."""
    return _live_iteration(fn, args, kwargs, True)


def _live_iteration(fn: Any, args: tuple, kwargs: dict, kept: bool) -> ProcResult:
    if fn in _LIVE_CALLERS:
        return _live_call(fn, args, kwargs)
    given = len(args)
    if laziness_visible(fn, args, kwargs, kept):
        iterables, start = args, 0
        if fn is enumerate:  # (its start: the second positional argument or the keyword)
            iterables, start = args[:1], args[1] if given == 2 else kwargs.get("start", 0)
        args = iterables
        live = LiveIteration(fn, args, start, strict=bool(kwargs.get("strict", False)))

        def live_iteration_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            parts = Abox.stash_record(live)[1] or {}
            out = tuple(gen_zero if j not in parts else tuple(parts[j]) for j in range(len(args)))
            return (
                ((),)
                + out
                + (None,) * (given - len(args))
                + (({k: None for k in kwargs},) if kwargs else ())
            )

        return ProcResult(live, live_iteration_backprop)
    return call(fn, *args, **kwargs)


def laziness_visible(fn: Any, args: tuple, kwargs: dict, kept: bool = False) -> bool:
    """Whether the iterator ``fn(*args, **kwargs)`` can show its laziness to a loop: ``map`` and
    ``filter`` call their function as items are taken; ``zip``, ``enumerate`` and ``reversed``
    read a list as it is when each item is taken (over tuples, ranges and strings, which
    nothing changes, the eager list gives the same items to one loop; ``kept``: the iterator
    is kept or passed on, and may be read again, when Python's is used up)."""
    if fn in _LIVE_CALLERS:
        iterables = args[1:]
        return (
            not kwargs
            and bool(iterables)
            and (fn is map or len(iterables) == 1)
            and all(type(a) in _LIVE_ARGS for a in iterables)
        )
    given = len(args)
    iterables = args[:1] if fn is enumerate else args
    return (
        fn in _LIVE_BUILTINS
        and bool(iterables)
        and all(
            type(a) in _LIVE_ARGS or (type(a) is LiveIteration and fn is not reversed)
            for a in iterables
        )
        and (kept or any(type(a) is list or type(a) is LiveIteration for a in iterables))
        and set(kwargs) <= ({"start"} if fn is enumerate else {"strict"} if fn is zip else set())
        and (fn is zip or given == 1 or (fn is enumerate and given == 2 and not kwargs))
    )


def _live_call(fn: Any, args: tuple, kwargs: dict) -> ProcResult:
    """``map(function, *iterables)`` / ``filter(function, iterable)`` as a :class:`LiveIteration`:
    the function is called as the loop takes items; its closure sensitivity (the sum over the
    calls, collected by the router) and the tuples' go back when the call is reversed."""
    iterables = args[1:]
    if (
        kwargs
        or not iterables
        or (fn is filter and len(iterables) != 1)
        or not all(type(a) in _LIVE_ARGS for a in iterables)
    ):
        return call(fn, *args, **kwargs)
    live = LiveIteration(fn, iterables, 0, args[0])

    def live_call_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        parts = Abox.stash_record(live)[1] or {}
        out = tuple(gen_zero if j not in parts else tuple(parts[j]) for j in range(len(iterables)))
        return ((), parts.get("function", gen_zero)) + out

    return ProcResult(live, live_call_backprop)


class _LiveRouter:
    """Routes iteration ``i``'s item sensitivity of a :class:`LiveIteration` to the element each
    argument gave it: a list's entry (created with the list's length where the loop ended), a
    tuple's sensitivity (kept for the iterable's backprop in the pass's stash); for ``map``,
    through the backprop of the call that made the item (its function's closure sensitivity
    kept in the stash too)."""

    __slots__ = ("live", "lengths", "start", "inner")

    def __init__(self, live: LiveIteration, lengths: tuple, start: int) -> None:
        self.live = live
        self.lengths = lengths
        self.start = start  # the number of items taken before the first one routed here
        self.inner: dict[int, _LiveRouter] = {}  # the routers of live iterators among the args

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        live = self.live
        i += self.start
        if live.fn is zip:
            parts = tuple_items(A, len(live.args))
            pos = i
        elif live.fn is enumerate:
            parts = (tuple_items(A, 2)[1],)
            pos = i
        elif live.fn is map:
            rs = live.calls.back(i, A, Abox)
            if rs is None:
                return
            self.add_to_function(rs[0], Abox)
            parts = rs[1:]
            pos = i
        elif live.fn is filter:
            parts = (A,)
            pos = live.positions[i]
        else:
            parts = (A,)
            pos = live.first - i
        for j, (arg, s) in enumerate(zip(live.args, parts)):
            if s is Z or s is None:
                continue
            t = type(arg)
            if t is list:
                n = self.lengths[j] if self.lengths[j] >= 0 else len(arg)
                if not is_number(s) and pos < len(arg) and is_tracked_mutable(arg[pos]):
                    handover(Abox, arg[pos], s)
                    continue
                entry = Abox.list_entry(arg, n)
                entry[pos] = add(entry[pos], s)
            elif t is tuple:
                items = self.stashed(Abox).setdefault(j, [Z] * len(arg))
                items[pos] = add(items[pos], s)
            elif t is LiveIteration:  # (its item ``pos`` counted from when this one began)
                inner = self.inner.get(j)
                if inner is None:
                    inner = self.inner[j] = _LiveRouter(arg, self.lengths[j], live.inner_taken[j])
                inner.back(pos, s, Abox)

    def add_to_function(self, s: Any, Abox: BoxSensitivities) -> None:
        if s is Z or s is None or (type(s) is tuple and not s):
            return
        parts = self.stashed(Abox)
        parts["function"] = add_closure(parts.get("function", Z), s)

    def stashed(self, Abox: BoxSensitivities) -> dict:
        rec = Abox.stash_record(self.live)
        if rec[1] is None:
            rec[1] = {}
        return rec[1]

    def result(self) -> Any:
        return Z


def route_back(route: Any, i: int, A: Any, Abox: BoxSensitivities) -> None:
    route.back(i, A, Abox)  # (a function with a rule, for derivatives of derivatives)


def route_result(route: Any) -> Any:
    return route.result()  # (a function with a rule, for derivatives of derivatives)


def prefix_reversed(items: Any, n: int) -> Any:
    """The first ``n`` of ``items`` (a list or tuple), last first."""
    return reversed(items) if n == len(items) else reversed(items[:n])


def route_columns(itv: list, sens: list | None, nf: int, cols: list, Abox: BoxSensitivities) -> Any:
    """:func:`route_all` for a loop over a fresh list of tuples (``zip``, ``enumerate``)
    whose first ``nf`` iterations' item sensitivities were collected as columns, last
    iteration first (``None``: a column of zeros); ``sens`` holds the later iterations'
    (``None``: there were none).

    When every iteration took the fast way, the columns become the list's entry as they are
    (an :class:`ItemColumns`, which the builtin's backprop reads without transposing).
    """
    for c in cols:
        if c is not None:
            c.reverse()
    if sens is None:
        if nf == len(itv) and Abox.get(itv) is Z:
            Abox[itv] = ItemColumns(cols)
            return Z
        sens = [Z] * nf
    full = [[Z] * nf if c is None else c for c in cols]
    sens[:nf] = zip(*full)
    return route_all(itv, sens, Abox)


def all_numbers(*lists: list) -> bool:
    """Whether every element of the lists is an ``int`` or a ``float`` (one C-level pass each)."""
    for xs in lists:
        if not (only_floats(xs) or _NUMBERS.issuperset(map(type, xs))):
            return False
    return True


def zip_lists_back(
    lists: tuple, lengths: tuple, cols: list, Abox: BoxSensitivities, backwards: bool
) -> None:
    """The reverse of ``zip`` of lists for a loop that ran over the lists themselves: ``cols[j]``
    holds the sensitivities of ``lists[j]``'s first elements (``None``: zeros), last first
    when ``backwards``, and ``lengths[j]`` is that list's length at the call; they go to the
    lists' entries."""
    for xs, n, col in zip(lists, lengths, cols):
        if col is None:
            continue
        if backwards:
            col.reverse()
        found = Abox._entries.get(id(xs))
        if found is None or found[1] is Z:
            Abox[xs] = col if len(col) == n else col + [Z] * (n - len(col))
            continue
        # by position: the elements were numbers when zip read them, whatever the list holds now
        entry = found[1]
        nf = len(col)
        if len(entry) < nf:
            entry.extend([Z] * (nf - len(entry)))
        try:
            sums = list(map(operator.add, entry[:nf], col))  # (gen_zero + x is x)
        except TypeError:  # (None in the entry)
            sums = None
        if sums is None or not only_floats(sums):
            sums = [add(e, c) for e, c in zip(entry, col)]
        entry[:nf] = sums


class ListIterator:
    """``iter(xs)`` of a list inside differentiated code: Python's list iterator (it reads the
    live list, and once exhausted stays exhausted), whose list and position stay known, so
    that the elements ``next`` and ``for`` take get their sensitivities."""

    __slots__ = ("source", "index", "done", "by_next")

    def __init__(self, source: list) -> None:
        self.source = source
        self.index = 0
        self.done = False
        self.by_next: set | None = None  # the positions ``next()`` took (not a loop over it)

    def __iter__(self) -> ListIterator:
        return self

    def __next__(self) -> Any:
        i = self.index
        if not self.done and i < len(self.source):
            self.index = i + 1
            return self.source[i]
        self.done = True
        raise StopIteration

    def __length_hint__(self) -> int:
        return 0 if self.done else max(0, len(self.source) - self.index)

    # Differentiated again (hessian, grad of grad), a generator is one of these, over the list
    # of its values (transform.normalize.rewrites._YieldsToList): what needs the generator
    # itself is refused by name. (For iter(xs) Python raises AttributeError, which a program
    # could catch; a refusal is not caught: left so, since nothing here tells the two apart.)
    def close(self) -> None:
        raise _generator_method_refused("close")

    def send(self, value: Any) -> Any:
        raise _generator_method_refused("send")

    def throw(self, *args: Any) -> Any:
        raise _generator_method_refused("throw")


def _generator_method_refused(method: str) -> NonDifferentiableError:
    return NonDifferentiableError(
        f"'list_iterator' object has no attribute {method!r}; if it is a generator, "
        f"g.{method}() cannot be differentiated again by dplus: at a higher order "
        "of differentiation (hessian, grad of grad) a generator runs to completion where it is "
        "made and gives an iterator over its values, which has no "
        f"{method}(). Take the values with next() or a for loop instead"
    )


class _ListIteratorRouter:
    """Iteration ``i`` of a loop over a :class:`ListIterator` took the element at ``start + i``."""

    __slots__ = ("lst", "positions", "n")

    def __init__(self, it: ListIterator, end: tuple, iterations: int) -> None:
        self.lst = it.source
        self.n = end[1]
        # each iteration took one element, the last where the loop ended; stopping takes none,
        # and the elements next() took in the body are not the loop's
        skipped = it.by_next or ()
        positions: list[int] = []
        pos = end[0] - 1
        while len(positions) < iterations:
            if pos not in skipped:
                positions.append(pos)
            pos -= 1
        positions.reverse()
        self.positions = positions

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        pos = self.positions[i]
        if not is_number(A) and pos < len(self.lst) and is_tracked_mutable(self.lst[pos]):
            handover(Abox, self.lst[pos], A)
            return
        entry = Abox.list_entry(self.lst, self.n)
        entry[pos] = add(entry[pos], A)

    def result(self) -> Any:
        return Z


class _SetRouter:
    """A loop over a set: its element's sensitivity, by element, in a dict (the set's
    sensitivity; ``order`` is the set's iteration order, recorded where the loop ended)."""

    __slots__ = ("order", "sens")

    def __init__(self, order: tuple) -> None:
        self.order = order
        self.sens: dict = {}

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        e = self.order[i]
        if type(e) is int or type(e) is bool:
            return  # (integers in a set are labels: see primitives.containers.set_sensitivity)
        self.sens[e] = add(self.sens[e], A) if e in self.sens else A

    def result(self) -> Any:
        return self.sens or Z


def list_length(itv: Any) -> Any:
    """The length of the list a loop iterates, recorded where the loop ends (the list may be
    resized before the loop's reverse runs); ``-1`` for any other iterable; for a
    :class:`LiveIteration`, one for each argument."""
    if type(itv) is LiveIteration:  # (and, last, the number of items taken)
        return tuple(
            len(a) if type(a) is list else list_length(a) if type(a) is LiveIteration else -1
            for a in itv.args
        ) + (itv.taken,)
    if type(itv) is ListIterator:
        return itv.index, len(itv.source)
    if type(itv) is set or type(itv) is frozenset:
        return tuple(itv)  # (its order: the set may change before the loop's reverse)
    return len(itv) if type(itv) is list or isinstance(itv, (list, collections.deque)) else -1


def _entries_where_loop_ended(itv: Any, length: Any, Abox: BoxSensitivities) -> None:
    if type(itv) is list:
        Abox.list_entry(itv, length if type(length) is int and length >= 0 else len(itv))
    elif type(itv) is LiveIteration:
        lengths = length if type(length) is tuple else list_length(itv)
        for a, n in zip(itv.args, lengths):
            if type(a) is list or type(a) is LiveIteration:
                _entries_where_loop_ended(a, n, Abox)


def route_all(itv: Any, sens: list, Abox: BoxSensitivities, length: int = -1) -> Any:
    """After the reverse of a loop over ``itv``: ``sens[i]`` is the sensitivity of the element
    iteration ``i`` took. List elements' go into ``Abox``; returns the iterable's own sensitivity.
    ``length`` is a list's length where the loop ended (:func:`list_length`; ``-1``: now).

    (The per-iteration routers do the same one element at a time; this is for loops whose body
    cannot write into the list, and ``sens`` is the generated code's own list, taken over.)
    """
    if type(sens) is not list:  # (a generator's route: each iteration was routed as reversed)
        route: Any = sens
        return route.result()
    t = type(itv)
    if t is list or isinstance(itv, (list, collections.deque)):
        n = len(itv) if length < 0 else length
        if len(sens) < n:  # the loop broke early
            sens.extend([Z] * (n - len(sens)))
        elif len(sens) > n:  # the body appended while iterating
            del sens[n:]
        entry = Abox.get(itv)
        if entry is Z:
            Abox[itv] = sens
            return Z
        for i, si in enumerate(sens):
            if si is not Z and si is not None:
                e = entry[i]
                entry[i] = e + si if type(e) is float and type(si) is float else add(e, si)
        return Z
    if t is tuple or isinstance(itv, tuple):
        for si in sens:
            if si is not Z and si is not None:
                if len(sens) < len(itv):
                    sens.extend([Z] * (len(itv) - len(sens)))
                return TupleAccumulator(sens)
        return Z
    if t is range:
        return Z
    route = iteration_router(itv, len(sens), length)
    for i, si in enumerate(sens):
        if si is not Z and si is not None:
            route.back(i, si, Abox)
    return route.result()


def iteration_router(itv: Any, n: int, length: Any = -1, Abox: Any = None) -> Any:
    """Where each iteration's element sensitivity goes, for a loop over ``itv`` that ran ``n``
    times; ``length``: a list's length where the loop ended (:func:`list_length`; ``-1``: now),
    or the tuple :func:`list_length` recorded for a live iterator or a set's order.

    Given ``Abox`` (where the loop's reverse starts), the lists it read get their entries now,
    as long as where the loop ended: the reverse of the body's ``pop``, ``append``... keeps
    each as long as its list was when each element was read."""
    if Abox is not None:
        _entries_where_loop_ended(itv, length, Abox)
    t = type(itv)
    if t is range:
        return _NULL
    if t is list or isinstance(itv, (list, collections.deque)):
        return _ListRouter(itv, len(itv) if length < 0 else length)
    if t is tuple:
        return _TupleRouter(len(itv))
    if t is LiveIteration:
        lengths = length if type(length) is tuple else list_length(itv)
        return _LiveRouter(itv, lengths, lengths[-1] - n)
    if t is ListIterator:
        return _ListIteratorRouter(itv, length if type(length) is tuple else list_length(itv), n)
    if isinstance(itv, tuple):
        return _TupleRouter(len(itv))
    if isinstance(itv, (str, bytes, dict, type({}.keys()))):
        return _NULL
    if is_ndarray(itv):
        return _ArrayRouter(itv)
    if t is set or t is frozenset:
        order = length if type(length) is tuple else tuple(itv)
        if _LABELS.issuperset(map(type, order)):
            return _NULL  # integers in a set are labels (primitives.containers.set_sensitivity)
        return _SetRouter(order)
    if isinstance(itv, (set, frozenset)):
        return _RaisingRouter("set")
    if t in LABEL_ITERATORS:
        return _NULL
    return _RaisingRouter(t.__name__)
