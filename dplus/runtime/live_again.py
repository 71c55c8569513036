"""Loops over a lazy builtin's iterator (``zip``, ``enumerate``, ``reversed``; ``map`` and
``filter`` loops are written as loops over ``zip`` by ``transform/normalize/loops.py``) in code
differentiated again: the list of its items made at once (the rule, whose next-order rules
exist), watched as the loop takes each item (:func:`live_item_taken`,
:func:`live_iteration_done`): where Python's lazy iterator would have given another item, or
another number of them, the loop is refused by name.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ..errors import NonDifferentiableError
from .calls import call
from .result import ProcResult, loops_in_flight
from .routers import _LIVE_CALLERS, laziness_visible


def live_iteration_again(fn: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """:func:`live_iteration` in code differentiated again, for the iterable of a ``for`` loop
    (or an iterator made for one, ``zip`` in ``enumerate(zip(xs, ys))``): the list of its items
    made at once (the rule, whose next-order rules exist), watched as the loop takes each item
    (:func:`live_item_taken`, :func:`live_iteration_done`): where Python's lazy iterator would
    have given another item, or another number of them, the loop is refused by name."""
    if not laziness_visible(fn, args, kwargs):
        return call(fn, *args, **kwargs)
    if fn in _LIVE_CALLERS:  # (map's and filter's calls of their function would be early)
        refuse_live_iteration_again(fn)
    refuse_reversed_iterator(fn, args)
    r = call(fn, *args, **kwargs)
    watch_items(fn, args, kwargs, r)
    return r


def kept_iteration_again(fn: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """:func:`kept_iteration` in code differentiated again: an ordinary call where the
    iterator's laziness cannot show (``zip`` of tuples); otherwise refused (kept in a variable,
    it may be read by ``next`` or passed on, which a list made at once would not follow)."""
    if not laziness_visible(fn, args, kwargs):
        return call(fn, *args, **kwargs)
    refuse_live_iteration_again(fn)


def refuse_live_iteration_again(fn: Any) -> NoReturn:
    name = getattr(fn, "__name__", "the iterator")
    raise NonDifferentiableError(
        f"derivatives of derivatives of {name}() iterated lazily (kept in a variable, or by a loop that changes "
        f"what it reads) are not supported yet; in a function differentiated more than once, make the list at "
        f"once, list({name}(...)), where the program does not depend on {name}'s laziness"
    )


# Code differentiated again iterates a lazy builtin's items made at once; each loop over them
# checks, as it takes an item, that Python's iterator would have given the same one: the lists
# it reads hold the same objects at the positions not yet read, are as long, and were not
# written by ``xs[i] = v`` there (:func:`note_list_write`: the very object that was there,
# written from another place, is the same item, but the place it came from may be another
# input with a sensitivity of its own, as in ``[v, v]``).


class _WatchedItems:
    """The items ``fn(*args)`` made at once (``items``), and what they were made from."""

    __slots__ = ("fn", "args", "items", "first", "strict", "taken", "written")

    def __init__(self, fn: Any, args: tuple, items: list, strict: bool = False) -> None:
        self.fn = fn
        self.args = args
        self.items = items
        self.strict = strict  # (zip(..., strict=True))
        self.first = len(args[0]) - 1 if fn is reversed else 0  # (reversed's first position)
        self.taken = 0  # (items the loop has taken)
        self.written: set[tuple[int, int]] = set()  # (id(list), position) written ahead

    def check(self, k: int) -> None:
        """Item ``k`` is taken: Python's iterator would give the same."""
        self.taken = k + 1
        item = self.items[k]
        if self.fn is zip:
            for a, x in zip(self.args, item):
                self.same(a, k, x)
        elif self.fn is enumerate:
            self.same(self.args[0], k, item[1])
        else:
            self.same(self.args[0], self.first - k, item)

    def same(self, a: Any, pos: int, x: Any) -> None:
        if type(a) is not list:
            return  # (a tuple, range or string: nothing changes it)
        inner = _watched(a)
        if inner is not None:
            inner.check(pos)
        elif not (0 <= pos < len(a) and a[pos] is x) or (id(a), pos) in self.written:
            self.refuse("changes or resizes a list it reads before reading it")

    def note_write(self, xs: list, positions: range) -> None:
        """``xs[i] = v`` for ``i`` in ``positions``: remembered where the loop has yet to read."""
        ahead = (
            range(self.first - self.taken + 1)
            if self.fn is reversed
            else range(self.taken, len(self.items))
        )
        for a in self.args:
            if a is xs:
                self.written.update((id(xs), i) for i in positions if i in ahead)

    def stops(self, k: int) -> bool:
        """Whether Python's iterator, asked for item ``k``, would stop."""
        if self.fn is reversed:
            return True
        iterables = self.args if self.fn is zip else self.args[:1]
        stopping = [_stops(a, k) for a in iterables]
        if self.strict and any(stopping) and not all(stopping):
            self.refuse("changes the length of a list it reads (strict=True)")
        return any(stopping)

    def refuse(self, what: str) -> NoReturn:
        name = self.fn.__name__
        raise NonDifferentiableError(
            f"derivatives of derivatives of a loop over {name}() that {what} are not supported: "
            f"Python's {name} reads the lists as the loop goes, and the list of its items made at "
            f"once (code differentiated again) would differ; in a function differentiated more "
            f"than once, leave the lists a loop iterates unchanged until it has read them, or "
            f"iterate over a copy made first, {name}(list(xs), ...)"
        )


# id(items) -> their watch, while a loop runs over them (left by an exception: until the
# outermost call ends)
_WATCHED: dict[int, _WatchedItems] = loops_in_flight


def note_list_write(xs: list, positions: range) -> None:
    """The rules of ``xs[i] = v`` and ``xs[a:b] = vs`` wrote ``positions`` of ``xs``: a loop
    whose iterator has yet to read one of them is refused when it takes it, even if the very
    object that was there was written (two inputs holding one float object, ``[v, v]``, have
    separate sensitivities: the item made at once would send its own to the wrong one)."""
    if _WATCHED:
        for watch in list(_WATCHED.values()):
            watch.note_write(xs, positions)


def _watched(items: Any) -> _WatchedItems | None:
    watch = _WATCHED.get(id(items))
    return watch if watch is not None and watch.items is items else None


def _stops(a: Any, k: int) -> bool:
    inner = _watched(a) if type(a) is list else None
    return inner.stops(k) if inner is not None else k >= len(a)


def _innermost(r: Any) -> Any:
    while type(r) is ProcResult:
        r = r.primal
    return r


def watch_items(fn: Any, args: tuple, kwargs: dict, r: Any) -> None:
    """Watch the items ``r`` (a result of ``call(fn, *args, **kwargs)``, at any order) as a
    loop takes them."""
    items = _innermost(r)
    if type(items) is list:
        iterables = args[:1] if fn is enumerate else args
        _WATCHED[id(items)] = _WatchedItems(fn, iterables, items, bool(kwargs.get("strict", False)))


def refuse_reversed_iterator(fn: Any, args: tuple) -> None:
    """``reversed(zip(...))``: Python's iterator is not reversible, the list made at once is."""
    if fn is reversed and args and type(args[0]) is list:
        inner = _watched(args[0])
        if inner is not None:
            raise TypeError(f"'{inner.fn.__name__}' object is not reversible")


def live_item_taken(items: Any, k: int) -> None:
    """A loop in code differentiated again took item ``k`` of ``items``."""
    watch = _watched(items)
    if watch is not None:
        watch.check(k)


def live_iteration_done(items: Any, n: int, stopped: Any) -> None:
    """A loop in code differentiated again left ``items`` after ``n`` of them (``stopped``: by
    ``break`` or ``return``; otherwise it asked for one more, where Python's iterator must stop
    too). The watch ends, with those of the iterators it read."""
    watch = _watched(items)
    if watch is None:
        return
    if not stopped and not watch.stops(n):
        watch.refuse("makes a list it reads longer")
    _unwatch(watch)


def _unwatch(watch: _WatchedItems) -> None:
    _WATCHED.pop(id(watch.items), None)
    for a in watch.args:
        inner = _watched(a) if type(a) is list else None
        if inner is not None:
            _unwatch(inner)
