"""List reads, writes, displays and unpacking run natively by generated code: their reverses,
one runtime call each, move the elements' sensitivities in and out of the list's entry.
"""

from __future__ import annotations

from typing import Any

from ..errors import NonDifferentiableError, SensitivityError
from .boxes import BoxSensitivities
from .handover import accumulate, handover, is_tracked_mutable
from .hooks import hooks
from .kinds import is_number
from .linear import OneHot, add, gen_zero

Z = gen_zero
_FLOATS = frozenset({float})


def append_back(xs: list, Abox: BoxSensitivities) -> tuple:
    """The reverse of ``xs.append(v)`` run natively: what ``list.append``'s backprop returns,
    the appended element's sensitivity taken off the end of the list's entry."""
    found = Abox._entries.get(id(xs))
    if found is None or found[1] is Z:
        return (), Z, None, Z
    return (), Z, None, found[1].pop()


def append_back_number(xs: list, Abox: BoxSensitivities) -> Any:
    """The reverse of a fast segment's ``xs.append(v)`` of a number: ``v``'s sensitivity,
    taken off the end of the list's entry (what :func:`append_back` returns last)."""
    found = Abox._entries.get(id(xs))
    if found is None or found[1] is Z:
        return Z
    return found[1].pop()


# ---------------------------------------------------------------------------
# cheap paths for the commonest container operations (lists and tuples)


def read_back(obj: Any, idx: int, kind: Any, v: Any, A: Any, Abox: BoxSensitivities) -> Any:
    """The reverse of ``v = obj[idx]``; ``kind`` is the length read from, or the rule's backprop."""
    if A is Z or A is None:
        if type(kind) is not int:
            # (the rule may give ``obj`` a sensitivity anyway: the memory of an array changed in
            # place later, which this read made)
            s = kind(Z, Abox)[1]
            return Z if s is None else s
        return Z
    if type(kind) is not int:
        out = kind(A, Abox)
        if len(out) > 2 and out[2] is not None and out[2] is not Z:
            raise NonDifferentiableError(
                f"the key of a subscript of {type(obj).__name__} (np.r_[...], np.c_[...]) received a sensitivity, "
                "but the key is a variable, not written in the subscript: write its items there, "
                "as np.r_[x, y] (or use np.concatenate)"
            )
        return out[1]
    if is_tracked_mutable(v):
        handover(Abox, v, A)
        return Z
    if type(obj) is dict:
        entry = Abox.map_entry(obj)
        entry[idx] = add(entry[idx], A) if idx in entry else A
        return Z
    n = kind
    i = idx + n if idx < 0 else idx
    if type(obj) is tuple:
        return OneHot(i, A, n)
    items = Abox.list_entry(obj, n)
    items[i] = add(items[i], A)
    return Z


def read_back_keyed(obj: Any, idx: Any, kind: Any, v: Any, A: Any, Abox: BoxSensitivities) -> tuple:
    """:func:`read_back` of a subscript whose key is a tuple display (``obj[x, y]``), and the
    key's own sensitivity: a rule may route the result's into the key's items (``np.r_[x, y]``
    is a concatenation of them). Every other subscript gives its key none (``Z``)."""
    if type(kind) is int:
        return read_back(obj, idx, kind, v, A, Abox), Z
    out = kind(Z if A is None else A, Abox)
    s = out[1]
    key = out[2] if len(out) > 2 else None
    return (Z if s is None else s), (Z if key is None else key)


def read_back_into(
    adj: Any, obj: Any, idx: Any, kind: Any, v: Any, A: Any, Abox: BoxSensitivities
) -> Any:
    """``accumulate(adj, obj, read_back(obj, idx, kind, v, A, Abox), Abox)``: the new adjoint of ``obj``.

    A number read from a list or dict (the commonest read in a loop) adds its sensitivity
    straight into the container's entry.
    """
    if A is Z or A is None:
        if type(kind) is not int:
            s = kind(Z, Abox)[1]  # (see read_back)
            if s is not Z and s is not None:
                return accumulate(adj, obj, s, Abox)
        return adj
    tv = type(v)
    if type(kind) is int and (tv is float or tv is int):
        t = type(obj)
        if t is list:
            found = Abox._entries.get(id(obj))  # the entry, without a method call when it exists
            i = idx + kind if idx < 0 else idx
            entry = Abox.list_entry(obj, kind) if found is None else found[1]
            prev = entry[i]
            entry[i] = (
                A
                if prev is Z
                else (prev + A if type(prev) is float and type(A) is float else add(prev, A))
            )
            return adj
        if t is dict:
            found = Abox._entries.get(id(obj))
            entry = Abox.map_entry(obj) if found is None else found[1]
            prev = entry.get(idx, Z)
            entry[idx] = (
                A
                if prev is Z
                else (prev + A if type(prev) is float and type(A) is float else add(prev, A))
            )
            return adj
    return accumulate(adj, obj, read_back(obj, idx, kind, v, A, Abox), Abox)


def read_back_number_into(
    adj: Any, obj: list | tuple, idx: int, n: int, A: Any, Abox: BoxSensitivities
) -> Any:
    """The reverse of a fast segment's ``v = obj[idx]``, ``obj`` a list or tuple of length
    ``n`` when read, ``idx`` an ``int`` in range, ``v`` a number (its guard tested all four):
    what :func:`read_back_into` does then. Returns the new adjoint of ``obj`` (a tuple's;
    a list's sensitivities live in its entry)."""
    if A is Z or A is None:
        return adj
    i = idx + n if idx < 0 else idx
    if type(obj) is tuple:
        return accumulate(adj, obj, OneHot(i, A, n), Abox)
    found = Abox._entries.get(id(obj))
    entry = Abox.list_entry(obj, n) if found is None else found[1]
    prev = entry[i]
    entry[i] = (
        A if prev is Z else (prev + A if type(prev) is float and type(A) is float else add(prev, A))
    )
    return adj


def list_display_parts(A: Any, lst: list, n: int, Abox: BoxSensitivities) -> tuple:
    """The reverse of ``lst = [a, b, ...]``: the sensitivities of the ``n`` elements
    (``A`` handed in, then the list's entry taken out of ``Abox``: before, it did not exist)."""
    if A is not Z and A is not None:
        handover(Abox, lst, A)
    found = Abox._entries.pop(id(lst), None)
    if found is None or found[1] is Z:
        return (Z,) * n
    return tuple(found[1])


def _stored_list_entry(obj: Any, kind: Any, lst: list, Abox: BoxSensitivities) -> Any:
    """The reverse of ``obj[i] = lst`` (:func:`write_back`, inline: the slot's sensitivity
    handed to ``lst``), then ``lst``'s entry taken out of ``Abox`` (``None``: it has none)."""
    entries = Abox._entries
    if type(kind) is int:
        found = entries.get(id(obj))
        s = Z
        if found is not None and found[1] is not Z:
            s = found[1][kind]
            found[1][kind] = Z
    else:
        s = kind(Z, Abox)[3]
    if s is not Z and s is not None:
        handover(Abox, lst, s)
    found = entries.pop(id(lst), None)
    return None if found is None or found[1] is Z else found[1]


_NO_ENTRY = (None, Z)


def store_display_numbers(obj: Any, kind: Any, lst: list, n: int, Abox: BoxSensitivities) -> list:
    """:func:`store_display_back` for a fast segment, whose elements are numbers: their
    sensitivities as numbers (``0.0`` for none)."""
    entries = Abox._entries
    found = entries.get(id(obj), _NO_ENTRY) if type(kind) is int else None
    if found is not None and (found[1] is Z or found[1][kind] is Z):
        # (the commonest case, inline: the slot holds nothing, ``lst``'s entry is its parts)
        found = entries.pop(id(lst), None)
        items = None if found is None or found[1] is Z else found[1]
    else:
        items = _stored_list_entry(obj, kind, lst, Abox)
    if items is None:
        return [0.0] * n
    if _FLOATS.issuperset(map(type, items)):
        return items  # (the entry, taken out of Abox: no one else holds it)
    out = [0.0 if si is Z or si is None else si for si in items]
    for si in out:
        if type(si) is not float and not is_number(si):
            raise SensitivityError(
                f"a {type(si).__name__} was given as the sensitivity of a number in a list"
            )
    return out


def store_display_back(obj: Any, kind: Any, lst: list, n: int, Abox: BoxSensitivities) -> tuple:
    """The reverse of ``lst = [a, b, ...]; obj[i] = lst`` where the list is used nowhere else:
    :func:`write_back` and :func:`list_display_parts` in one call, the sensitivities of
    the ``n`` elements."""
    items = _stored_list_entry(obj, kind, lst, Abox)
    return (Z,) * n if items is None else tuple(items)


def write_back(obj: Any, kind: Any, Abox: BoxSensitivities) -> Any:
    """The reverse of ``obj[i] = v``: the sensitivity moved out of the entry to ``v``."""
    if type(kind) is int:
        found = Abox._entries.get(id(obj))
        if found is None or found[1] is Z:
            return Z
        entry = found[1]
        s = entry[kind]
        entry[kind] = Z
        return s
    return kind(Z, Abox)[3]


def unpack_back(adj: Any, v: Any, parts: tuple, Abox: BoxSensitivities) -> Any:
    """``accumulate(adj, v, unpack_sensitivity(v, parts), Abox)``: the adjoint of ``v``
    after the reverse of ``a, b, ... = v``. A list hands the parts straight to its entry."""
    if type(v) is list:
        # the common case: float parts, and the list's first sensitivity (its entry is the parts)
        entries = Abox._entries
        if (
            len(parts) == len(v)
            and id(v) not in entries
            and (
                len(parts) == 2
                and type(parts[0]) is float
                and type(parts[1]) is float
                or _FLOATS.issuperset(map(type, parts))
            )
        ):
            entries[id(v)] = (v, list(parts))
            return adj
        handover(Abox, v, parts)
        return adj
    return accumulate(adj, v, unpack_sensitivity(v, parts), Abox)


def unpack_sensitivity(v: Any, parts: tuple) -> Any:
    """The sensitivity of ``v`` from those of the names ``a, b = v`` bound."""
    if type(v) is tuple:
        return parts
    if type(v) is list:
        return list(parts)
    return hooks.sequence_sensitivity(v, list(parts))
