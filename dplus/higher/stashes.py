"""Stashes: where a sensitivity that one operation of a backward pass leaves for later ones (a
loop router's result, a captured variable's cell) waits, in that pass's box-sensitivity map.
The four stash operations transpose in pairs (add <-> take, set <-> take-and-clear) through a
dual stash per (stash, pass), so the passes of different orders never share a slot; and the
rules of the map's entry reads (``get``, ``pop``, ``list_entry``, ...) at the next order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..rules import defnondiff
from ..runtime.boxes import BoxSensitivities
from ..runtime.handover import is_tracked_mutable
from ..runtime.linear import (
    TupleAccumulator,
    add,
    gen_zero,
)
from ..runtime.registry import register_primitive
from ..runtime.result import ProcResult

Z = gen_zero


# Loops over tuples: each iteration's element sensitivity is added into a router, whose
# result is the tuple's sensitivity. At the next order that result's sensitivity S must
# reach every ``route_back`` call (part i of S for iteration i): it waits in the
# box-sensitivity map of the backward pass running (a backprop may run many times, each
# with its own map), under a Stash key, and stashes are differentiable again through their
# duals.
class Stash:
    """A key under which a sum waits from one operation of a backward pass to later ones."""

    __slots__ = ()


def _stash_record(h: Stash, Abox: BoxSensitivities) -> list:
    # [sum, dual]: the dual is per (stash, pass), since one stash is used by the passes of
    # several orders at once and their transposes must not meet
    return Abox.stash_record(h)


def stash_add(h: Stash, v: Any, Abox: BoxSensitivities) -> None:
    rec = _stash_record(h, Abox)
    rec[0] = add(rec[0], tuple(v.items) if type(v) is TupleAccumulator else v)


def stash_take(h: Stash, Abox: BoxSensitivities) -> Any:
    return _stash_record(h, Abox)[0]


def stash_set(h: Stash, v: Any, Abox: BoxSensitivities) -> None:
    _stash_record(h, Abox)[0] = tuple(v.items) if type(v) is TupleAccumulator else v


def stash_take_clear(h: Stash, Abox: BoxSensitivities) -> Any:
    rec = _stash_record(h, Abox)
    v = rec[0]
    rec[0] = Z
    return v


def stash_dual(h: Stash, Abox: BoxSensitivities) -> Stash:
    rec = _stash_record(h, Abox)
    if rec[1] is None:
        rec[1] = Stash()
    return rec[1]


def router_stash(route: Any) -> Stash:
    if route.stash is None:
        route.stash = Stash()
    return route.stash


# The four operations transpose in pairs, so each order's rules are the next order's
# operations: add <-> take (a read that leaves the sum), set <-> take_clear.
def _register_stash_pair(write: Callable[..., None], read: Callable[..., Any]) -> None:
    def write_rule(h: Stash, v: Any, Abox: BoxSensitivities) -> ProcResult:
        write(h, v, Abox)
        return ProcResult(None, lambda A, Abox2: ((), None, read(stash_dual(h, Abox), Abox2), None))

    def read_rule(h: Stash, Abox: BoxSensitivities) -> ProcResult:
        r = read(h, Abox)

        def read_backprop(T: Any, Abox2: BoxSensitivities) -> tuple:
            write(stash_dual(h, Abox), T, Abox2)
            return (), None, None

        return ProcResult(r, read_backprop)

    register_primitive(write, write_rule)
    register_primitive(read, read_rule)


_register_stash_pair(stash_add, stash_take)
_register_stash_pair(stash_set, stash_take_clear)


# Captured variables that are rebound live in BoxSensitivities under a cell key; at the
# next order the map itself is a container whose entries carry sensitivity.
def cell_stash(Abox: BoxSensitivities, key: Any) -> Stash:
    """The stash of ``key``'s entry (a captured variable's cell, a list) in one backward pass."""
    rec = Abox.stash_record(key)
    if rec[1] is None:
        rec[1] = Stash()
    return rec[1]


defnondiff(cell_stash)


def _value_stash(Abox: BoxSensitivities, key: Any) -> Any:
    return cell_stash(Abox, key)


def _add_to_value_entry_dual(
    Abox: BoxSensitivities, key: Any, A: Any, Abox2: BoxSensitivities
) -> None:
    stash_add(_value_stash(Abox, key), A, Abox2)


def _take_value_entry_dual(Abox: BoxSensitivities, key: Any, Abox2: BoxSensitivities) -> Any:
    return stash_take(_value_stash(Abox, key), Abox2)


def _take_clear_value_entry_dual(Abox: BoxSensitivities, key: Any, Abox2: BoxSensitivities) -> Any:
    return stash_take_clear(_value_stash(Abox, key), Abox2)


# ---------------------------------------------------------------------------
# reading and writing entries


def _made_entry_rule(method: Callable[..., Any]) -> Callable[..., ProcResult]:
    """``list_entry`` / ``map_entry``: the entry itself (an alias), made from zeros if missing."""

    def made_entry_rule(Abox: BoxSensitivities, key: Any, *rest: Any) -> ProcResult:
        existed = key in Abox
        entry = method(Abox, key, *rest)

        def made_entry_backprop(A: Any, Abox2: BoxSensitivities) -> tuple:
            if not existed:
                Abox2.pop(entry, Z)  # the zeros it was made of are constants
            return ((), Z, None) + (None,) * len(rest)

        return ProcResult(entry, made_entry_backprop)

    return made_entry_rule


def _get_rule(Abox: BoxSensitivities, key: Any, *default: Any) -> ProcResult:
    found = key in Abox
    v = Abox.get(key, *default)

    def get_backprop(A: Any, Abox2: BoxSensitivities) -> tuple:
        if not found:
            return ((), Z, None) + ((A,) if default else ())
        if not is_tracked_mutable(v):
            _add_to_value_entry_dual(Abox, key, A, Abox2)  # a value entry read: it keeps its value
        return ((), Z, None) + ((Z,) if default else ())

    return ProcResult(v, get_backprop)


def _pop_rule(Abox: BoxSensitivities, key: Any, *default: Any) -> ProcResult:
    found = key in Abox
    v = Abox.pop(key, *default)

    def pop_backprop(A: Any, Abox2: BoxSensitivities) -> tuple:
        if not found:
            return ((), Z, None) + ((A,) if default else ())
        if not is_tracked_mutable(v):
            # the entry held v before the pop: whatever came after started from zero
            stash_set(_value_stash(Abox, key), A, Abox2)
        return ((), Z, None) + ((Z,) if default else ())

    return ProcResult(v, pop_backprop)


def _accumulate_rule(Abox: BoxSensitivities, key: Any, sens: Any) -> ProcResult:
    # (a box's or a cell's entry: a value)
    Abox.accumulate(key, sens)

    def accumulate_entry_backprop(A: Any, Abox2: BoxSensitivities) -> tuple:
        if sens is Z or sens is None:
            return (), Z, None, Z
        return (), Z, None, _take_value_entry_dual(Abox, key, Abox2)

    return ProcResult(None, accumulate_entry_backprop)


def _setitem_rule(Abox: BoxSensitivities, key: Any, sens: Any) -> ProcResult:
    Abox[key] = sens

    def set_entry_backprop(A: Any, Abox2: BoxSensitivities) -> tuple:
        if is_tracked_mutable(sens):
            return (), Z, None, Z  # a list or dict entry: its sensitivity is its own, in Abox2
        return (), Z, None, _take_clear_value_entry_dual(Abox, key, Abox2)

    return ProcResult(None, set_entry_backprop)
