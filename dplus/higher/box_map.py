"""The box-sensitivity map at the next order of differentiation.

A first-order backward pass keeps the sensitivities of mutable values (lists, dicts, boxes,
objects, rebound captured variables) in a :class:`BoxSensitivities` map. When that pass is
itself differentiated, its map is a container whose entries carry sensitivities, and the
operations on it need rules of their own. Every one of them is linear in the sensitivities
it moves (the backpropagator of a backpropagator is linear in the sensitivity), so each rule
is a transpose:

- the entry of a list, a dict or an object is itself a list or a dict. At the next order it
  is a mutable value like any other: reading it (``get``, ``list_entry``, ``map_entry``,
  ``pop``) returns the entry itself, an alias with nothing to transpose, and the next
  order's map keeps the sensitivity of its contents under the entry. An entry made from
  zeros drops that sensitivity where it was made (zeros are constants);
- the entry of a box or a cell is a value, replaced on each change: its sensitivity waits
  in the entry's dual stash (``cell_stash``): a read adds to it, an addition takes
  it, a write takes and clears it;
- ``handover`` (adding a value's sensitivity into the entries) and ``fold`` (a value's
  sensitivity plus its entries) are run as they are, with a record of the entries they
  met; their transposes read those entries' sensitivities back, or hand them over.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable
from typing import Any

from ..markers import mark_derived
from ..rules import defnondiff
from ..runtime.boxes import Box, BoxSensitivities
from ..runtime.classes import local_owner
from ..runtime.fold import Snapshot, fold, fold_arguments, keyword_dict_sensitivity
from ..runtime.handover import handover, is_tracked_mutable
from ..runtime.kinds import is_ndarray
from ..runtime.linear import (
    OneHot,
    TupleAccumulator,
    is_zero_sensitivity,
    object_attributes,
    tuple_part,
)
from ..runtime.registry import register_primitive
from ..runtime.result import ProcResult
from .stashes import (
    Z,
    _accumulate_rule,
    _add_to_value_entry_dual,
    _get_rule,
    _made_entry_rule,
    _pop_rule,
    _setitem_rule,
    _take_clear_value_entry_dual,
    _take_value_entry_dual,
    _value_stash,
)

# ---------------------------------------------------------------------------
# handover: a value's sensitivity added into the entries of the mutable values inside it


class _Entries:
    """The entries of the mutable values reached from one value, as they were when recorded:
    per key, the entry (a list or dict, or the key itself for a value entry) and whether the
    operation recorded made it."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: dict[int, tuple[Any, Any, bool]] = {}


# a deque's entry is a list by position, as a list's is
_LIST_LIKE = (list, collections.deque)
_SEQUENCES = (list, tuple, collections.deque)


def _mutables_in(v: Any, out: dict, depth: int = 0) -> None:
    """Every tracked mutable value reachable from ``v`` (snapshots, elements, attributes)."""
    t = type(v)
    if t is float or t is int or v is None or depth > 200:
        return
    if t is Snapshot:
        _mutables_in(v.obj, out, depth + 1)
        _mutables_in(v.items, out, depth + 1)
        return
    if is_tracked_mutable(v):
        if id(v) in out:
            return
        out[id(v)] = v
    for e in _members(v):
        _mutables_in(e, out, depth + 1)


def _members(v: Any) -> Any:
    if is_ndarray(v):
        return ()  # (an array changed in place: its entry belongs to its memory)
    if isinstance(v, _SEQUENCES):
        return v
    if isinstance(v, dict):
        return v.values()
    if type(v) is Box:
        return (v.value,)
    if is_tracked_mutable(v):
        return object_attributes(v).values()
    return ()


def _record_entries(Abox: BoxSensitivities, reachable: dict, existed: set) -> dict:
    """id(key) -> (key, entry, made here) for the reachable keys that have an entry now."""
    found = {}
    for k, key in reachable.items():
        if key in Abox:
            found[k] = (key, Abox.get(key), k not in existed)
    return found


def _entry_sensitivity(entries: dict, v: Any, Abox2: BoxSensitivities) -> Any:
    """The next order's sensitivity of ``v``'s entry (its contents: a list or a dict of
    parts; a value entry's dual); ``Z`` when it had none."""
    rec = entries.get(id(v))
    if rec is None:
        return Z
    key, entry, made = rec
    if is_tracked_mutable(entry):
        sens = Abox2.get(entry, Z)
        if made:
            Abox2.pop(entry, Z)
        return sens
    return Z


def _part(sens: Any, i: Any) -> Any:
    if sens is Z or sens is None:
        return Z
    if isinstance(sens, dict):
        return sens.get(i, Z)
    if type(sens) is OneHot:
        return sens.value if sens.index == i else Z
    if type(sens) is TupleAccumulator:
        return sens.items[i]
    return sens[i] if i < len(sens) else Z


def _handed_back(
    v: Any,
    s: Any,
    entries: dict,
    Abox: BoxSensitivities,
    Abox2: BoxSensitivities,
    seen: set,
    elements: Any = None,
) -> Any:
    """The transpose of ``handover(Abox, v, s, elements)``: the sensitivity of ``s`` (shaped like ``s``)."""
    if s is Z or s is None:
        return Z
    if is_ndarray(v):
        return _array_back(v, entries, Abox2) if is_tracked_mutable(v) else Z
    if type(v) is Snapshot:
        return _handed_back(v.obj, s, entries, Abox, Abox2, seen)
    if type(v) is Box:
        raw = s.value if isinstance(s, Box) else s
        if is_tracked_mutable(v.value):
            back = _handed_back(v.value, raw, entries, Abox, Abox2, seen)
        else:
            back = _take_value_entry_dual(Abox, v, Abox2)
        return Box(back) if isinstance(s, Box) else back
    if not is_tracked_mutable(v):
        return Z
    if id(v) in seen:  # one value reached twice: its entry was handed the sum
        return Z
    seen.add(id(v))
    own = _entry_sensitivity(entries, v, Abox2)
    if isinstance(v, _LIST_LIKE):
        items = _items_of(s)
        held = v if elements is None else elements  # (what handover took the elements from)
        back = [
            _element_back(
                held[i] if i < len(held) else None,
                items[i],
                _part(own, i),
                entries,
                Abox,
                Abox2,
                seen,
            )
            for i in range(len(items))
        ]
        return _shaped_like_sensitivity(back, s)
    keys = s.keys() if isinstance(s, dict) else ()
    values = v if isinstance(v, dict) else object_attributes(v)
    return {
        k: _element_back(values.get(k), s[k], _part(own, k), entries, Abox, Abox2, seen)
        for k in keys
    }


def _element_back(
    e: Any, se: Any, own: Any, entries: dict, Abox: Any, Abox2: Any, seen: set
) -> Any:
    if se is Z or se is None:
        return Z
    if is_ndarray(e):
        return _array_back(e, entries, Abox2) if is_tracked_mutable(e) else own
    if is_tracked_mutable(e):
        return _handed_back(e, se, entries, Abox, Abox2, seen)
    return own


def _items_of(s: Any) -> list:
    t = type(s)
    if t is OneHot:
        return s.to_list()
    if t is TupleAccumulator:
        return list(s.items)
    return list(s)


def _shaped_like_sensitivity(parts: list, s: Any) -> Any:
    if type(s) is list:
        return parts
    if is_ndarray(s):
        np = sys.modules["numpy"]
        return np.array([0.0 if p is Z or p is None else p for p in parts])
    return tuple(parts)


def handed_over(
    Abox: BoxSensitivities, v: Any, s: Any, *elements: Any
) -> Callable[[BoxSensitivities], Any]:
    """``handover(Abox, v, s, *elements)``, and its transpose: a function of the next order's
    map that returns the sensitivity of ``s``."""
    if is_ndarray(v) and is_tracked_mutable(v):
        from .array_memory import handed_over_array

        return handed_over_array(Abox, v, s)
    reachable: dict = {}
    if elements and elements[0] is not None:
        _mutables_in(elements[0], reachable)
    _mutables_in(v, reachable)
    existed = {k for k, key in reachable.items() if key in Abox}
    arrays = _handing_over_arrays(lambda: handover(Abox, v, s, *elements))
    entries = _record_entries(Abox, reachable, existed)
    if arrays:
        entries[_ARRAYS] = arrays

    held = elements[0] if elements else None

    def transpose(Abox2: BoxSensitivities) -> Any:
        return _handed_back(v, s, entries, Abox, Abox2, set(), held)

    return transpose


_ARRAYS = "arrays"  # (a key of the entries a handover met: no id is a string)


def _handing_over_arrays(hand_over: Callable[[], None]) -> dict:
    """Run ``hand_over`` with each addition into the entry of an array's memory made as the
    next order records it: by array (id), the transposes of those additions, in order."""
    from ..runtime import memory
    from .array_memory import handed_over_array

    arrays: dict = {}

    def record(Abox: BoxSensitivities, a: Any, s: Any) -> None:
        arrays.setdefault(id(a), []).append(handed_over_array(Abox, a, s))

    previous = memory.RECORDER[0]
    memory.RECORDER[0] = record
    try:
        hand_over()
    finally:
        memory.RECORDER[0] = previous
    return arrays


def _array_back(e: Any, entries: dict, Abox2: BoxSensitivities) -> Any:
    """The transpose of handing a sensitivity over to the array ``e`` (next in order)."""
    pending = entries.get(_ARRAYS, {}).get(id(e))
    if not pending:
        return Z
    return pending.pop(0)(Abox2)


def added_to_element(
    Abox: BoxSensitivities, route: Any, i: int, A: Any, position: int | None = None
) -> Callable[[BoxSensitivities], Any]:
    """A list router's ``back(i, A, Abox)`` (``A`` added to element ``position`` of the
    list's entry: ``i`` unless given), and its transpose: a function of the next order's map
    returning ``A``'s sensitivity."""
    at = i if position is None else position
    existed = route.lst in Abox
    arrays = _handing_over_arrays(lambda: route.back(i, A, Abox))
    entry = Abox.get(route.lst)
    if arrays:  # (an element that is an array changed in place: its memory took A)
        (transposes,) = arrays.values()
        return transposes[0]

    def transpose(Abox2: BoxSensitivities) -> Any:
        part = _part(Abox2.get(entry, Z), at)
        if not existed:
            Abox2.pop(entry, Z)  # this addition made the entry (its reverse is the last to run)
        return part

    return transpose


def _handover_rule(Abox: BoxSensitivities, v: Any, s: Any, *elements: Any) -> ProcResult:
    transpose = handed_over(Abox, v, s, *elements)
    return ProcResult(
        None, lambda A, Abox2: ((), Z, None, transpose(Abox2)) + (None,) * len(elements)
    )


# ---------------------------------------------------------------------------
# fold: a value's sensitivity plus its entries, as new values


def _fold_entries(Abox: BoxSensitivities | None, v: Any) -> dict:
    if Abox is None:
        return {}
    reachable: dict = {}
    _mutables_in(v, reachable)
    return _record_entries(Abox, reachable, set(reachable))


def _folded_back(
    v: Any,
    F: Any,
    entries: dict,
    Abox: Any,
    Abox2: BoxSensitivities,
    seen: set,
    memory: bool = False,
) -> None:
    """The transpose of fold's reading of ``v``'s entries: ``F``, the sensitivity of the folded
    value, goes to each entry it read (as an addition to the entry's contents)."""
    if F is Z or F is None:
        return
    t = type(v)
    if t is float or t is int:
        return
    if is_ndarray(v):
        if memory:  # (fold_arguments read the entry of memory changed in place)
            from .array_memory import folded_array_back

            folded_array_back(Abox, v, F, Abox2)
        return
    if t is Snapshot:
        rec = entries.get(id(v.obj))
        if rec is not None and id(v.obj) not in seen:
            seen.add(id(v.obj))
            _entry_back(rec, F, Abox, Abox2)
        if type(v.obj) is Box:  # (its items: the contents it held)
            _folded_back(
                v.items, F.value if isinstance(F, Box) else F, entries, Abox, Abox2, seen, memory
            )
        else:
            _folded_members_back(v.items, F, entries, Abox, Abox2, seen, memory)
        return
    if t is Box:
        raw = F.value if isinstance(F, Box) else F
        rec = entries.get(id(v))
        if rec is not None and id(v) not in seen:
            seen.add(id(v))
            _add_to_value_entry_dual(Abox, v, raw, Abox2)
        _folded_back(v.value, raw, entries, Abox, Abox2, seen, memory)
        return
    if is_tracked_mutable(v):
        rec = entries.get(id(v))
        if rec is not None and id(v) not in seen:
            seen.add(id(v))
            _entry_back(rec, F, Abox, Abox2)
        _folded_members_back(
            v if isinstance(v, (*_LIST_LIKE, dict)) else object_attributes(v),
            F,
            entries,
            Abox,
            Abox2,
            seen,
            memory,
        )
        return
    if isinstance(v, tuple):
        _folded_members_back(v, F, entries, Abox, Abox2, seen, memory)


def _folded_members_back(
    items: Any, F: Any, entries: dict, Abox: Any, Abox2: Any, seen: set, memory: bool = False
) -> None:
    if isinstance(items, dict):
        for k, e in items.items():
            _folded_back(e, _part(F, k), entries, Abox, Abox2, seen, memory)
    elif isinstance(items, _SEQUENCES):
        for i, e in enumerate(items):
            _folded_back(e, _part(F, i), entries, Abox, Abox2, seen, memory)
    elif type(items) is Box or is_tracked_mutable(items):
        _folded_back(items, F, entries, Abox, Abox2, seen, memory)


def _entry_back(rec: tuple, F: Any, Abox: Any, Abox2: BoxSensitivities) -> None:
    key, entry, _ = rec
    if isinstance(entry, list):
        parts = [_part(F, i) for i in range(len(entry))]
        handover(Abox2, entry, parts)
    elif isinstance(entry, dict):
        handover(Abox2, entry, {k: _part(F, k) for k in entry})
    elif not is_tracked_mutable(entry):
        _add_to_value_entry_dual(Abox, key, F.value if isinstance(F, Box) else F, Abox2)


def _settled(out: Any, A: Any, Abox2: BoxSensitivities) -> Any:
    """The whole next-order sensitivity of ``out``, a value ``fold`` made: ``A`` plus what the
    next order's map holds for the lists and dicts in it (taken out: they were made here)."""
    F = fold(out, A, Abox2)
    made: dict = {}
    _mutables_in(out, made)
    for key in made.values():
        Abox2.pop(key, Z)
    return F


def folded_with_transpose(
    v: Any, s: Any, Abox: BoxSensitivities | None, memory: bool = False, claimed: Any = None
) -> tuple:
    """``fold(v, s, Abox)`` (with ``memory``: ``fold_arguments``) and the transpose of that
    fold: a function of the folded value's next-order sensitivity that hands its parts to the
    entries read and returns ``s``'s."""
    entries = _fold_entries(Abox, v)
    out = fold_arguments(v, s, Abox, claimed) if memory else fold(v, s, Abox)

    def transpose(A: Any, Abox2: BoxSensitivities) -> Any:
        F = _settled(out, A, Abox2)
        _folded_back(v, F, entries, Abox, Abox2, set(), memory)
        return Z if s is Z or s is None or is_zero_sensitivity(F) else F

    return out, transpose


def _keyword_dict_sensitivity_rule(kwargs: dict, s: Any, Abox: BoxSensitivities) -> ProcResult:
    # linear in s and in the dict's entry, which it reads whole: the next order's sensitivity
    # of each keyword goes back to both
    rec = (kwargs, Abox.get(kwargs), False) if kwargs in Abox else None
    out = keyword_dict_sensitivity(kwargs, s, Abox)

    def keyword_dict_sensitivity_backprop(A: Any, Abox2: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return (), Z, Z, None
        F = {k: _part(A, k) for k in out}
        if rec is not None:
            _entry_back(rec, F, Abox, Abox2)
        return (), Z, (Z if s is Z or s is None else F), None

    return ProcResult(out, keyword_dict_sensitivity_backprop)


def holds_mutables(v: Any) -> bool:
    """``v`` is or holds a list, dict, box or object (a snapshot of one included)."""
    reachable: dict = {}
    _mutables_in(v, reachable)
    return bool(reachable)


def held_sensitivities(v: Any, Abox: BoxSensitivities) -> list:
    """The entries in ``Abox`` of the lists, dicts, boxes and objects inside ``v`` (not ``v``
    itself): the sensitivities they hold, not zero."""
    reachable: dict = {}
    for e in _members(v):
        _mutables_in(e, reachable)
    return [
        Abox.get(m, Z)
        for m in reachable.values()
        if m in Abox and not is_zero_sensitivity(Abox.get(m, Z))
    ]


# the transposes' helpers run in backprops: at the order after next they are differentiated
# from their source, as rule code is
for _helper in (
    _value_stash,
    _add_to_value_entry_dual,
    _take_value_entry_dual,
    _take_clear_value_entry_dual,
    _entry_sensitivity,
    _part,
    _handed_back,
    _element_back,
    _items_of,
    _shaped_like_sensitivity,
    _settled,
    _folded_back,
    _folded_members_back,
    _entry_back,
):
    mark_derived(_helper, "rule helper")

defnondiff(_mutables_in)  # (structure: which lists and dicts a value holds)
defnondiff(local_owner)  # (structure: the class whose entry holds an attribute's sensitivity)

for _method in (BoxSensitivities.list_entry, BoxSensitivities.map_entry):
    register_primitive(
        _method,
        _made_entry_rule(_method),
        note="internal: the box-sensitivity map at the next order",
    )
register_primitive(
    BoxSensitivities.get, _get_rule, note="internal: the box-sensitivity map at the next order"
)
register_primitive(
    BoxSensitivities.__getitem__,
    _get_rule,
    note="internal: the box-sensitivity map at the next order",
)
register_primitive(
    BoxSensitivities.pop, _pop_rule, note="internal: the box-sensitivity map at the next order"
)
register_primitive(
    BoxSensitivities.accumulate,
    _accumulate_rule,
    note="internal: the box-sensitivity map at the next order",
)
register_primitive(
    BoxSensitivities.__setitem__,
    _setitem_rule,
    note="internal: the box-sensitivity map at the next order",
)
register_primitive(
    handover, _handover_rule, note="internal: the box-sensitivity map at the next order"
)


# At the order after next, the functions above are operations of the code differentiated:
# each one's transpose is the function it returns (which reads the next order's map, the
# same way at every order); what that function closes over is structure, not sensitivity.
def _handed_over_rule(Abox: BoxSensitivities, v: Any, s: Any, *elements: Any) -> ProcResult:
    transpose = handed_over(Abox, v, s, *elements)
    return ProcResult(
        transpose, lambda A, Abox2: ((), Z, None, transpose(Abox2)) + (None,) * len(elements)
    )


def _added_to_element_rule(
    Abox: BoxSensitivities, route: Any, i: int, A: Any, position: int | None = None
) -> ProcResult:
    transpose = added_to_element(Abox, route, i, A, position)
    return ProcResult(transpose, lambda S, Abox2: ((), Z, None, None, transpose(Abox2), None))


def _folded_with_transpose_rule(
    v: Any, s: Any, Abox: BoxSensitivities | None, *memory: bool
) -> ProcResult:
    out, transpose = folded_with_transpose(v, s, Abox, *memory)

    def folded_backprop(A: Any, Abox2: BoxSensitivities) -> tuple:
        return (), Z, transpose(tuple_part(A, 0, 2), Abox2), None, *((None,) * len(memory))

    return ProcResult((out, transpose), folded_backprop)


register_primitive(
    handed_over, _handed_over_rule, note="internal: the box-sensitivity map at the next order"
)
register_primitive(
    added_to_element,
    _added_to_element_rule,
    note="internal: the box-sensitivity map at the next order",
)
register_primitive(
    folded_with_transpose,
    _folded_with_transpose_rule,
    note="internal: the box-sensitivity map at the next order",
)
register_primitive(
    keyword_dict_sensitivity,
    _keyword_dict_sensitivity_rule,
    note="internal: a **kwargs dict's sensitivity at the next order",
)
