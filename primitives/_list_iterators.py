"""What rules need of ``iter(xs)`` (``runtime.routers.ListIterator``; differentiated again,
a generator's values are one): the elements a rule takes from it, and the positions in ``xs``
their sensitivities go back to."""

from __future__ import annotations

from typing import Any

from dplus.runtime.boxes import BoxSensitivities
from dplus.runtime.handover import handover, is_tracked_mutable
from dplus.runtime.kinds import is_number
from dplus.runtime.linear import add, gen_zero
from dplus.runtime.routers import ListIterator

__all__ = ["TakingFromList", "TakingThrough", "take_rest", "list_iterator_sens"]


class TakingFromList:
    """A lazy rule's iteration of ``iter(xs)`` (``runtime.routers.ListIterator``): takes the
    elements from the iterator itself, as Python's rule would (what it leaves stays in the
    iterator), and records the position of each in ``xs``, so that their sensitivities go
    to those elements of the list (``back``, as a loop router's). The positions are also
    marked taken other than by a loop over the iterator (``by_next``), so that such a loop
    skips them as it does ``next``'s."""

    __slots__ = ("it", "lst", "positions", "n")

    def __init__(self, it: ListIterator) -> None:
        self.it = it
        self.lst = it.source
        self.positions: list[int] = []
        self.n = len(it.source)

    def __iter__(self) -> TakingFromList:
        return self

    def __next__(self) -> Any:
        it = self.it
        pos = it.index
        value = next(it)
        self.positions.append(pos)
        _mark_taken(it, pos, pos + 1)
        self.n = len(it.source)
        return value

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is gen_zero or A is None:
            return
        pos = self.positions[i]
        if pos < len(self.lst) and is_tracked_mutable(self.lst[pos]) and not is_number(A):
            handover(Abox, self.lst[pos], A)
            return
        entry = Abox.list_entry(self.lst, self.n)
        entry[pos] = add(entry[pos], A)


class TakingThrough(TakingFromList):
    """A rule's iteration of a :class:`TakingFromList` (rule code differentiated again: the
    first order's ``zip`` of ``iter(xs)`` takes its elements through one, and the next
    order's ``zip`` takes them from it): each element is the one the inner taking took, so
    its sensitivity goes to that position of ``xs`` too."""

    __slots__ = ()

    def __init__(self, taking: TakingFromList) -> None:
        self.it = taking  # type: ignore[assignment]
        self.lst = taking.lst
        self.positions = []
        self.n = taking.n

    def __next__(self) -> Any:
        taking: TakingFromList = self.it  # type: ignore[assignment]
        value = next(taking)
        self.positions.append(taking.positions[-1])
        self.n = taking.n
        return value


def _mark_taken(it: ListIterator, start: int, stop: int) -> None:
    """Positions ``start..stop-1`` of ``it`` were taken by a rule (not a loop over ``it``)."""
    if it.by_next is None:
        it.by_next = set()
    it.by_next.update(range(start, stop))


def take_rest(it: ListIterator) -> list:
    """The elements left in ``iter(xs)``, taken (as ``list(it)`` takes them): ``xs[pos:]``
    where the iterator stood (its transpose at the next order is that slice's)."""
    pos = it.index
    rest = list(it)
    _mark_taken(it, pos, pos + len(rest))
    return rest


def list_iterator_sens(route: Any, s: list, Abox: BoxSensitivities | None) -> Any:
    """Hand the sensitivities ``s`` of the first ``len(s)`` elements a rule took from
    ``iter(xs)`` to the elements of ``xs`` they were (``route.positions``), last first."""
    if all(si is gen_zero or si is None for si in s):
        return gen_zero
    Abox = Abox if Abox is not None else BoxSensitivities()
    for i in range(len(s) - 1, -1, -1):
        if s[i] is not gen_zero and s[i] is not None:
            route.back(i, s[i], Abox)
    return gen_zero
