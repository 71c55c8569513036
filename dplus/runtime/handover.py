"""Moving sensitivities into the box-sensitivity map: which values are tracked mutables
(``is_tracked_mutable``), ``handover`` (a mutable value's sensitivity handed to its entry)
and ``accumulate`` (a sensitivity added to a value of any kind).
"""

from __future__ import annotations

import collections
import enum
import functools
import numbers
import operator
import types
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import NonDifferentiableError, SensitivityError
from . import memory as _memory
from .boxes import Box, BoxSensitivities
from .core import CellKey
from .kinds import is_ndarray, is_number
from .linear import OneHot, TupleAccumulator, add, gen_zero, is_zero_sensitivity
from .result import KeywordDict, ProcResult

_add_floats = operator.add


# ---------------------------------------------------------------------------
# mutable values and the box-sensitivity map

_MUTABLE_CACHE: dict[type, bool] = {
    list: True,
    dict: True,
    Box: True,
    CellKey: True,
    float: False,
    int: False,
    tuple: False,
    BoxSensitivities: False,
}


def _type_is_tracked(t: type) -> bool:
    if issubclass(t, KeywordDict):
        return False
    if issubclass(t, (list, dict, set, Box, collections.deque)):
        return True
    if issubclass(
        t, (tuple, str, bytes, int, float, complex, frozenset, ProcResult, BaseException, enum.Enum)
    ):
        return False
    if issubclass(
        t, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
    ):
        return False
    if t.__dict__.get("__dplus_from_source__"):
        return True  # rule machinery differentiated from its source, as a user class is
    if t.__module__ in (
        "builtins",
        "numpy",
        "functools",
        "itertools",
        "types",
        "typing",
    ) or t.__module__.startswith("dplus."):
        return False
    return hasattr(t, "__dict__") or bool(getattr(t, "__slots__", ()))


def is_tracked_mutable(v: Any) -> bool:
    """Lists, dicts, boxes, user objects, and NumPy arrays showing memory changed in place:
    their sensitivities live in ``Abox``."""
    t = type(v)
    r = _MUTABLE_CACHE.get(t)
    if r is None:
        r = _MUTABLE_CACHE[t] = _type_is_tracked(t)
    if t is _ndarray:
        return _memory.is_tracked_array(v)
    return r


def is_tracked_type(t: type) -> bool:
    """Whether values of the type ``t`` are tracked mutables (NumPy arrays: see
    :func:`is_tracked_mutable`, which looks at the array)."""
    r = _MUTABLE_CACHE.get(t)
    if r is None:
        r = _MUTABLE_CACHE[t] = _type_is_tracked(t)
    return r


_ndarray: Any = _memory._ndarray


def handover(Abox: BoxSensitivities, v: Any, s: Any, elements: list | None = None) -> None:
    """Add the sensitivity ``s`` of the mutable value ``v`` into its ``Abox`` entries.

    ``elements``: for a list, what it held when ``s`` was made (a rule's snapshot); by
    default its contents now, which a later ``append``/``extend``/``pop`` may have resized.
    """
    if s is gen_zero or s is None:
        return
    t = type(v)
    if t is _ndarray:
        _memory.hand_over(Abox, v, s)
        return
    if t is list or isinstance(v, list):
        _hand_over_list(Abox, v, s, elements)
    elif t is dict or isinstance(v, dict):
        if not isinstance(s, dict):
            raise SensitivityError(f"a {type(s).__name__} was given as the sensitivity of a dict")
        _hand_over_items(Abox, v, s, v.get)
    elif isinstance(v, collections.deque):
        _hand_over_deque(Abox, v, s)
    elif t is set or isinstance(v, set):
        _hand_over_set(Abox, v, s)
    elif t is Box:
        raw = s.value if isinstance(s, Box) else s
        if is_tracked_mutable(v.value):
            handover(Abox, v.value, raw)
        else:
            Abox.accumulate(v, raw)
    elif t is CellKey:
        Abox.accumulate(v, s)
    else:
        _hand_over_object(Abox, v, s)


def _hand_over_list(Abox: BoxSensitivities, v: list, s: Any, elements: list | None) -> None:
    if elements is None:
        found = Abox._entries.get(id(v))
        entry = None if found is None or found[1] is gen_zero else found[1]
        # the list's length where this reverse runs: its entry's, when it has one; otherwise
        # the sensitivity's (a rule's, for the list as it read it: it may be resized since)
        items = _as_items(s, len(entry) if type(entry) is list else None, v)
        if len(items) != len(v):
            _hand_over_resized(Abox, v, items)
            return
        elements = v
    else:
        items = _as_items(s, len(elements), v)
    if elements is v and v and v.__class__ is list and _hand_over_floats(Abox, v, items):
        return
    entry = Abox.list_entry(v, len(elements))
    for i, si in enumerate(items):
        if si is gen_zero or si is None:
            continue
        e = elements[i]
        if is_tracked_mutable(e):
            handover(Abox, e, si)
        else:
            entry[i] = add(entry[i], si)


def _hand_over_floats(Abox: BoxSensitivities, v: list, items: Sequence[Any]) -> bool:
    """The common case, float sensitivities: they conform only to numbers, so no element
    hands anything further (one pass over the items, none over the list). False when the
    items are not all floats (nothing done then)."""
    found = Abox._entries.get(id(v))
    if found is None:
        if only_floats(items):  # no entry yet: the items are the entry
            Abox[v] = list(items)
            return True
    elif type(found[1]) is list and len(found[1]) == len(items):
        # added at once (gen_zero + x is x); kept when every sum is a float, which only
        # numbers give: one pass to add, one to check, none over the list
        try:
            sums = list(map(_add_floats, found[1], items))
        except TypeError:  # (None, a tuple's or a list's sensitivity: element by element)
            sums = None
        if sums is not None and only_floats(sums):
            found[1][:] = sums
            return True
    return False


def _hand_over_items(
    Abox: BoxSensitivities, v: Any, s: dict, element: Callable[[Any, Any], Any]
) -> None:
    """A dict's sensitivity (by key), or an object's (by attribute name): each part goes to
    the element ``element(key, None)`` when that is a tracked mutable, else into the entry."""
    entry = Abox.map_entry(v)
    for k, sk in s.items():
        if sk is gen_zero or sk is None:
            continue
        e = element(k, None)
        if is_tracked_mutable(e):
            handover(Abox, e, sk)
        else:
            entry[k] = add(entry[k], sk) if k in entry else sk


def _hand_over_set(Abox: BoxSensitivities, v: set, s: Any) -> None:
    # (its elements are hashable values: their sensitivities stay in the set's entry)
    if not isinstance(s, dict):
        raise SensitivityError(
            f"a {type(s).__name__} was given as the sensitivity of a set; a set's sensitivity is a dict "
            "from element to sensitivity"
        )
    entry = Abox.map_entry(v)
    for k, sk in s.items():
        if sk is not gen_zero and sk is not None:
            entry[k] = add(entry[k], sk) if k in entry else sk


def _hand_over_object(Abox: BoxSensitivities, v: Any, s: Any) -> None:
    """A user object: its sensitivity is a dict of attribute sensitivities."""
    if not isinstance(s, dict):
        if is_zero_sensitivity(s):
            return  # (a method read from it, with nothing captured: its sensitivity is ``()``)
        if isinstance(v, numbers.Number):
            raise NonDifferentiableError(_exact_number_message(v))
        raise SensitivityError(
            f"the sensitivity of a {type(v).__name__} object is a dict of attribute sensitivities, "
            f"not a {type(s).__name__}"
        )
    if id(v) in _HANDING_OBJECTS:
        return  # an object graph with a cycle: this object's sensitivity is being handed over already
    _HANDING_OBJECTS.add(id(v))
    try:
        _hand_over_items(Abox, v, s, functools.partial(getattr, v))
    finally:
        _HANDING_OBJECTS.discard(id(v))


_HANDING_OBJECTS: set[int] = set()


def _exact_number_message(v: Any) -> str:
    kind = f"{type(v).__module__}.{type(v).__qualname__}"
    return (
        f"sensitivity reached a {kind} value ({v!r}): exact numbers such as fractions.Fraction and "
        "decimal.Decimal are not differentiable in dplus (their digits are integers, which carry no "
        "sensitivity). Fix: compute with floats, e.g. float(...) of the constant, outside the path "
        "from the arguments to the result"
    )


def _hand_over_deque(Abox: BoxSensitivities, v: collections.deque, s: Any) -> None:
    """``handover`` for a deque: its sensitivity is a list by position; as a list's, its length
    is its entry's where this reverse runs, or else the sensitivity's (a rule's, for the deque
    as it read it: it may have been resized since)."""
    found = Abox._entries.get(id(v))
    entry = None if found is None or found[1] is gen_zero else found[1]
    items = _as_items(s, len(entry) if type(entry) is list else None, v)
    if items is None:
        return
    if len(items) != len(v):
        _hand_over_resized(Abox, v, items)
        return
    entry = Abox.list_entry(v, len(v))
    for i, si in enumerate(items):
        if si is gen_zero or si is None:
            continue
        if is_tracked_mutable(v[i]):
            handover(Abox, v[i], si)
        else:
            entry[i] = add(entry[i], si)


def _hand_over_resized(
    Abox: BoxSensitivities, v: list[Any] | collections.deque[Any], items: Any
) -> None:
    """``handover`` for a list whose length differs from the sensitivity's: resized after the
    operation whose reverse runs now read it. Its entry (the sensitivities of the elements it
    held then) gets the items; an element that is itself a container cannot be found again."""
    entry = Abox.list_entry(v, len(items))
    for i, si in enumerate(items):
        if si is gen_zero or si is None:
            continue
        if not is_number(si):
            raise NonDifferentiableError(
                f"a list of {len(items)} containers (lists, dicts, objects) was read whole, then resized to "
                f"{len(v)} elements before its elements' sensitivities could reach them. Fix: read a copy "
                "(list(xs)) or resize a copy of the list instead"
            )
        entry[i] = add(entry[i], si)


def _as_items(s: Any, n: int | None, v: Any) -> Sequence[Any]:
    """The element sensitivities in ``s``, for a list of ``n`` elements (``None``: as many as ``s`` has)."""
    ts = type(s)
    if ts is list or ts is tuple:
        if n is not None and len(s) != n:
            raise SensitivityError(
                f"a sensitivity of length {len(s)} was given for a list of length {n}"
            )
        return s
    if ts is OneHot:
        return s.to_list()
    if ts is TupleAccumulator:
        return s.items
    if is_ndarray(s) and (n is None or len(s) == n):
        return list(s)
    raise SensitivityError(
        f"a {ts.__name__} was given as the sensitivity of a list of length {len(v) if n is None else n}"
    )


def accumulate(adj: Any, v: Any, s: Any, Abox: BoxSensitivities) -> Any:
    """Add sensitivity ``s`` of value ``v`` to the adjoint ``adj`` (or, if ``v`` is mutable, to ``Abox``)."""
    if s is gen_zero or s is None:
        return adj
    t = type(v)
    if t is float or t is int:
        if type(s) is float:  # the commonest case, written out
            if adj is gen_zero:
                return s
            if type(adj) is float:
                return adj + s
        return add(adj, s)
    if t is tuple:
        if type(s) is OneHot:  # one element: O(1), whatever the tuple's length
            return _accumulate_tuple(adj, v, s, Abox)
        for e in v:  # as long as s itself
            te = type(e)
            if te is not float and te is not int and is_tracked_mutable(e):
                return _accumulate_tuple(adj, v, s, Abox)
        return add(adj, s)
    if is_tracked_mutable(v):
        handover(Abox, v, s)
        return adj
    if isinstance(v, tuple) and v:
        return _accumulate_tuple(adj, v, s, Abox)
    return add(adj, s)


def _accumulate_tuple(adj: Any, v: tuple, s: Any, Abox: BoxSensitivities) -> Any:
    # elements that are mutable hand their part to Abox; the rest stays in the adjoint
    if type(s) is OneHot:
        if is_tracked_mutable(v[s.index]):
            handover(Abox, v[s.index], s.value)
            return adj
        return add(adj, s)
    has_mutable = False
    for e in v:
        if is_tracked_mutable(e):
            has_mutable = True
            break
    if not has_mutable:
        return add(adj, s)
    items = s.items if type(s) is TupleAccumulator else list(s)
    rest = []
    for e, se in zip(v, items):
        if is_tracked_mutable(e):
            handover(Abox, e, se)
            rest.append(gen_zero)
        else:
            rest.append(se)
    return add(adj, tuple(rest))


def only_floats(xs: Sequence[Any]) -> bool:
    """Whether every element of the list or tuple ``xs`` is a ``float``, in one C-level
    pass: counting the element types equal to ``float`` (compared by identity first) is
    a third faster than testing the set of types, and these passes are most of the cost
    of a gradient's boundary for functions of long lists."""
    return operator.countOf(map(type, xs), float) == len(xs)
