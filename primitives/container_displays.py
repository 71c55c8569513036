"""Container rules for displays (``(a, b)``, ``[a, b]``, ``{k: v}``, ``{a, b}``, with starred
parts) and for unpacking (``a, b = v``, ``a, *rest, b = v``). See
:mod:`primitives.containers` for the conventions.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.runtime.boxes import BoxSensitivities
from dplus.runtime.generators import GeneratorTaker
from dplus.runtime.handover import handover
from dplus.runtime.kinds import is_ndarray
from dplus.runtime.linear import add, gen_zero, is_zero_sensitivity, tuple_items
from dplus.runtime.result import ProcResult

from .container_reads import _conform_items

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero


# ---------------------------------------------------------------------------
# displays: (a, b), [a, b], {k: v}, {a, b}, with starred parts


def build_tuple(*items: Any) -> ProcResult:
    n = len(items)

    def tuple_display_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return ((),) + (Z,) * n
        return ((),) + tuple(tuple_items(A, n))

    return ProcResult(items, tuple_display_backprop)


def build_list(*items: Any) -> ProcResult:
    lst = list(items)
    n = len(items)

    def list_display_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, lst, A)
        entry = Abox.pop(lst, Z)
        if entry is Z:
            return ((),) + (Z,) * n
        return ((),) + tuple(entry)

    return ProcResult(lst, list_display_backprop)


# Integers and booleans in a set are labels (indices, counts, flags): their elements carry
# no sensitivity, so a set of integer constants is as free of derivatives at every order as
# the constants are.
_LABELS = frozenset({int, bool})


def set_sensitivity(order: Any, sens: Any) -> Any:
    """A set's sensitivity (a dict from element to sensitivity) from the sensitivities ``sens``
    of its elements in the iteration ``order`` (``Z`` when all are zero)."""
    out: dict = {}
    for e, se in zip(order, sens):
        if se is Z or se is None or type(e) in _LABELS or is_zero_sensitivity(se):
            continue
        out[e] = add(out[e], se) if e in out else se
    return out or Z


def set_entry(s: Any, A: Any, Abox: BoxSensitivities) -> Any:
    """The sensitivity of the set ``s`` where its creation is reversed: ``A`` handed in
    directly plus, for a (mutable) ``set``, its entry taken out of ``Abox``; a dict or ``Z``."""
    if type(s) is not set and not isinstance(s, set) or Abox is None:
        return _as_set_sensitivity(A)
    if A is not Z and A is not None:
        handover(Abox, s, A)
    return Abox.pop(s, Z)


def _as_set_sensitivity(A: Any) -> Any:
    if A is Z or A is None or isinstance(A, dict):
        return Z if A is None else A
    if is_zero_sensitivity(A):
        return Z
    raise NonDifferentiableError(
        f"a {type(A).__name__} was given as the sensitivity of a set; a set's sensitivity is a dict "
        "from element to sensitivity. Fix: use a list or a tuple"
    )


def set_items_sensitivities(items: Any, A: Any) -> list:
    """The sensitivities of the ``items`` a set was made from, given the set's: a dict from
    element to sensitivity. Of equal items only the first is in the set: it gets the
    element's sensitivity, the others none."""
    A = _as_set_sensitivity(A)
    if A is Z:
        return [Z] * len(items)
    seen: set = set()
    out = []
    for x in items:
        if x in seen:
            out.append(Z)
            continue
        seen.add(x)
        out.append(A.get(x, Z))
    return out


def build_set(*items: Any) -> ProcResult:
    s = set(items)

    def set_display_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        return ((),) + tuple(set_items_sensitivities(items, set_entry(s, A, Abox)))

    return ProcResult(s, set_display_backprop)


def _set_from_iterable(make: Any, args: tuple) -> ProcResult:
    """``set(iterable)`` / ``frozenset(iterable)``: each element's sensitivity goes back to the
    item it was made from (of equal items, the first: the one the set keeps)."""
    s = make(*args)
    if not args:
        return ProcResult(s, lambda A, Abox: ((),))
    x = args[0]
    if type(x) is list or type(x) is tuple:
        items = tuple(x)

        def set_constructor_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            parts = set_items_sensitivities(items, set_entry(s, A, Abox))
            if all(p is Z for p in parts):
                return (), Z
            if type(x) is tuple:
                return (), tuple(parts)
            handover(Abox, x, parts)  # (by position, as the list was when read)
            return (), Z

        return ProcResult(s, set_constructor_backprop)
    if isinstance(x, (set, frozenset)):

        def set_copy_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            return (), set_entry(s, A, Abox)

        return ProcResult(s, set_copy_backprop)

    def set_other_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        sens = set_entry(s, A, Abox)
        if sens is not Z and not all(is_zero_sensitivity(v) for v in sens.values()):
            raise NonDifferentiableError(
                f"{make.__name__}(): sensitivity reached the elements of a {type(x).__name__}, which has "
                f"nowhere to send it. Fix: make the {make.__name__} from a list or a tuple"
            )
        return (), Z

    return ProcResult(s, set_other_backprop)


def set_plus(*args: Any) -> ProcResult:
    return _set_from_iterable(set, args)


def frozenset_plus(*args: Any) -> ProcResult:
    return _set_from_iterable(frozenset, args)


def build_dict(spec: tuple, *parts: Any) -> ProcResult:
    d: dict = {}
    origin: dict = {}
    plan = []
    pos = 0  # (indexing, not next() on an iterator: this code is differentiated again)
    for is_star in spec:
        if is_star:
            m = parts[pos]
            pos += 1
            plan.append(("star", m))
            for key in m:
                d[key] = m[key]
                origin[key] = len(plan) - 1
        else:
            key = parts[pos]
            val = parts[pos + 1]
            pos += 2
            plan.append(("kv", key))
            d[key] = val
            origin[key] = len(plan) - 1

    def dict_display_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, d, A)
        entry = Abox.pop(d, Z)
        out: list = [()]
        for pi, (kind, x) in enumerate(plan):
            if kind == "star":
                sens = (
                    {k: entry.get(k, Z) for k in x if origin.get(k) == pi} if entry is not Z else Z
                )
                out.append(sens if sens else Z)
            else:
                out.append(None)
                out.append(entry.get(x, Z) if entry is not Z and origin.get(x) == pi else Z)
        return tuple(out)

    return ProcResult(d, dict_display_backprop)


def _star_parts(spec: tuple, parts: tuple) -> tuple[list, list]:
    items: list = []
    lengths: list = []
    for is_star, p in zip(spec, parts):
        if is_star:
            seq = list(p)
            items.extend(seq)
            lengths.append(len(seq))
        else:
            items.append(p)
            lengths.append(None)
    return items, lengths


def _split_star(spec: tuple, parts: tuple, lengths: list, items_sens: Sequence[Any]) -> tuple:
    out: list = [()]
    pos = 0
    for is_star, p, ln in zip(spec, parts, lengths):
        if is_star:
            chunk = items_sens[pos : pos + ln]
            pos += ln
            out.append(Z if all(s is Z for s in chunk) else _conform_items(chunk, p))
        else:
            out.append(items_sens[pos])
            pos += 1
    return tuple(out)


def build_tuple_star(spec: tuple, *parts: Any) -> ProcResult:
    items, lengths = _star_parts(spec, parts)
    t = tuple(items)

    def tuple_star_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        return _split_star(spec, parts, lengths, tuple_items(A, len(t)))

    return ProcResult(t, tuple_star_backprop)


def build_list_star(spec: tuple, *parts: Any) -> ProcResult:
    items, lengths = _star_parts(spec, parts)

    def list_star_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, items, A)
        entry = Abox.pop(items, Z)
        return _split_star(spec, parts, lengths, entry if entry is not Z else [Z] * len(items))

    return ProcResult(items, list_star_backprop)


def build_set_star(spec: tuple, *parts: Any) -> ProcResult:
    items, lengths = _star_parts(spec, parts)

    s = set(items)

    def set_star_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        sens = set_items_sensitivities(items, set_entry(s, A, Abox))
        return _split_star(spec, parts, lengths, sens)

    return ProcResult(s, set_star_backprop)


# ---------------------------------------------------------------------------
# unpacking: a, b = v   and   a, *rest, b = v


def _sequence_sensitivity(v: Any, items: Sequence[Any], order: Any = None) -> Any:
    """The sensitivity of the iterable ``v`` from those of the ``items`` iterating it gave;
    ``order``: those items themselves (a set's sensitivity is keyed by element, and the set
    may have changed since it was iterated)."""
    if all(s is Z or s is None for s in items):
        return Z
    if type(v) is GeneratorTaker:
        return list(items)  # (consumes_generators hands each to its resumption)
    if isinstance(v, (list, tuple)):
        return _conform_items(items, v)
    if isinstance(v, (set, frozenset)):
        return set_sensitivity(tuple(v) if order is None else order, items)
    if isinstance(v, (dict, str, bytes, range)):
        return Z
    if is_ndarray(v):
        return array_from_parts(v, items)
    return _conform_items(items, v)


def array_from_parts(v: Any, items: Sequence[Any]) -> Any:
    """The sensitivity of the array ``v`` from those of its rows (its elements, for a vector)
    as unpacking or iterating it gave them; ``Z`` rows are zeros."""
    np = sys.modules["numpy"]
    dtype = np.result_type(v.dtype, float)
    return np.stack(
        [np.zeros(v.shape[1:], dtype) if s is Z or s is None else np.asarray(s) for s in items]
    )


def unpack_plus(v: Any, n: int) -> ProcResult:
    t = v if type(v) is tuple else tuple(v)
    if len(t) != n:
        if len(t) < n:
            raise ValueError(f"not enough values to unpack (expected {n}, got {len(t)})")
        raise ValueError(f"too many values to unpack (expected {n})")

    def unpack_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return (), Z, None
        if type(v) is tuple:
            return (), A, None
        return (), _sequence_sensitivity(v, tuple_items(A, n)), None

    return ProcResult(t, unpack_backprop)


def unpack_star_plus(v: Any, before: int, after: int) -> ProcResult:
    items = list(v)
    n = len(items)
    if n < before + after:
        raise ValueError(
            f"not enough values to unpack (expected at least {before + after}, got {n})"
        )
    rest = items[before : n - after]
    t = tuple(items[:before]) + (rest,) + tuple(items[n - after :])

    def unpack_star_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        parts = tuple_items(A, len(t))
        rest_sens = parts[before]
        if rest_sens is not Z and rest_sens is not None:
            handover(Abox, rest, rest_sens)
        entry = Abox.pop(rest, Z)
        mid = entry if entry is not Z else [Z] * len(rest)
        full = list(parts[:before]) + list(mid) + list(parts[before + 1 :])
        return (), _sequence_sensitivity(v, full, items), None, None

    return ProcResult(t, unpack_star_backprop)


def match_args_plus(subject: Any, n: int) -> ProcResult:
    names = getattr(type(subject), "__match_args__", ())
    return ProcResult(tuple(names[:n]), lambda A, Abox: ((), Z, None))


# differentiated from their source when a set display's backprop is differentiated again
# (derivatives of derivatives): they move sensitivities between the box map's entry of the
# set and the items, by element, with dict reads and writes
for _helper in (set_entry, set_items_sensitivities, _as_set_sensitivity):
    mark_derived(_helper, "rule helper")
