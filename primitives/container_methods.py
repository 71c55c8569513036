"""Container rules for the constructors and methods of list, tuple and dict (``list(xs)``,
``xs.append``, ``d.update``, ``d | e``, ...) and for boxes. See :mod:`primitives.containers`
for the conventions.
"""

from __future__ import annotations

import collections
import operator
from typing import Any

from dplus.runtime.boxes import Box, BoxSensitivities
from dplus.runtime.core import apply_transform, lift
from dplus.runtime.handover import handover, is_tracked_mutable
from dplus.runtime.kinds import is_ndarray, sequence_index
from dplus.runtime.linear import add, gen_zero, tuple_items
from dplus.runtime.live_again import note_list_write
from dplus.runtime.result import KeywordDict, ProcResult, loops_in_flight
from dplus.runtime.routers import ListIterator

from ._iterables import seq
from .container_displays import _sequence_sensitivity
from .container_reads import (
    _add_to_entry,
    _box_read,
    _box_write,
    _overrides,
    builtin_getitem_plus,
    is_value_dict,
)

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero


# ---------------------------------------------------------------------------
# constructors and methods of list, tuple, dict


def _iterable_to_list(x: Any) -> list:
    return list(x)


def _taken_from_list_iterator(src: ListIterator, fn: str, as_list: bool) -> ProcResult:
    """``list(it)`` / ``tuple(it)`` of ``iter(xs)`` (at a higher order, a generator's values):
    the rest of ``xs``; each element's sensitivity goes to its position in ``xs``."""
    sq = seq(src, fn, "iterable")
    out = list(sq.items) if as_list else tuple(sq.items)
    n = len(out)

    def taken_from_list_iterator_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if as_list:
            if A is not Z and A is not None:
                handover(Abox, out, A)
            entry = Abox.pop(out, Z)
            if entry is not Z:
                sq.sens(list(entry), Abox)
        elif A is not Z and A is not None:
            sq.sens(list(tuple_items(A, n)), Abox)
        return (), Z

    return ProcResult(out, taken_from_list_iterator_backprop)


def list_plus(*args: Any) -> ProcResult:
    if not args:
        return ProcResult([], lambda A, Abox: ((),))
    (src,) = args
    if type(src) is ListIterator:
        return _taken_from_list_iterator(src, "list", True)
    lst = list(src)

    def list_constructor_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, lst, A)
        entry = Abox.pop(lst, Z)
        if entry is Z:
            return (), Z
        return (), _sequence_sensitivity(src, entry, lst)

    return ProcResult(lst, list_constructor_backprop)


def tuple_plus(*args: Any) -> ProcResult:
    if not args:
        return ProcResult((), lambda A, Abox: ((),))
    (src,) = args
    if type(src) is ListIterator:
        return _taken_from_list_iterator(src, "tuple", False)
    t = tuple(src)
    n = len(t)

    def tuple_constructor_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return (), Z
        if type(src) is tuple:
            return (), A
        return (), _sequence_sensitivity(src, tuple_items(A, n), t)

    return ProcResult(t, tuple_constructor_backprop)


def _pairs_sensitivity(src: Any, pairs: Any, entry: dict, overridden: Any) -> Any:
    """The sensitivity of the (key, value) pairs ``src`` a dict was built or updated from:
    only a key's last pair, and only when no keyword argument overrode it, gave its value."""
    last = {}
    for i, pair in enumerate(pairs):
        last[pair[0]] = i
    sens = []
    for i, pair in enumerate(pairs):
        k = pair[0]
        s = entry.get(k, Z) if last[k] == i and k not in overridden else Z
        sens.append((None, s) if s is not Z else Z)
    return _sequence_sensitivity(src, sens)


def dict_plus(*args: Any, **kwargs: Any) -> ProcResult:
    src = args[0] if args else None
    pairs_src = None
    if src is not None and not isinstance(src, dict):
        # (read once, before dict() would consume an iterator)
        pairs_src = list(src) if not isinstance(src, (list, tuple)) else src
    d = dict(*args, **kwargs) if pairs_src is None else dict(pairs_src, **kwargs)

    def dict_constructor_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, d, A)
        entry = Abox.pop(d, Z)
        out: list = [()]
        if entry is Z:
            entry = {}
        if args:
            if isinstance(src, dict):
                part = {k: entry[k] for k in src if k in entry and k not in kwargs}
                out.append((KeywordDict(part) if is_value_dict(src) else part) if part else Z)
            else:
                out.append(_pairs_sensitivity(src, pairs_src, entry, kwargs))
        if kwargs:
            out.append({k: entry.get(k, Z) for k in kwargs})
        return tuple(out)

    return ProcResult(d, dict_constructor_backprop)


def list_append_plus(xs: list, v: Any) -> ProcResult:
    if _overrides(xs, "append"):
        list.append(xs, v)
    else:
        xs.append(v)

    def append_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is Z:
            return (), Z, Z
        return (), Z, entry.pop()

    return ProcResult(None, append_backprop)


def list_extend_plus(xs: list, ys: Any) -> ProcResult:
    items = list(ys)
    m = len(items)
    if _overrides(xs, "extend"):
        list.extend(xs, items)
    else:
        xs.extend(items)

    def extend_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is Z or m == 0:
            return (), Z, Z
        tail = entry[len(entry) - m :]
        del entry[len(entry) - m :]
        if isinstance(ys, list):
            # ``ys`` may have changed since (``xs.extend(xs)``: it is ``xs``): its elements
            # then were ``items``
            handover(Abox, ys, tail, items)
            return (), Z, Z
        return (), Z, _sequence_sensitivity(ys, tail)

    return ProcResult(None, extend_backprop)


def list_insert_plus(xs: list, i: int, v: Any) -> ProcResult:
    n = len(xs)
    i = sequence_index(i)
    if _overrides(xs, "insert"):
        list.insert(xs, i, v)
    else:
        xs.insert(i, v)
    j = max(0, min(n, i + n if i < 0 else i))
    if loops_in_flight:  # (a loop differentiated again may read them later)
        note_list_write(xs, range(j, n + 1))

    def insert_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is Z:
            return (), Z, None, Z
        return (), Z, None, entry.pop(j)

    return ProcResult(None, insert_backprop)


def list_pop_plus(xs: list, *args: Any) -> ProcResult:
    n = len(xs)
    i = sequence_index(args[0]) if args else -1
    j = i + n if i < 0 else i
    v = list.pop(xs, i) if _overrides(xs, "pop") else xs.pop(i)
    if loops_in_flight:  # (a loop differentiated again may read them later)
        note_list_write(xs, range(j, n))

    def pop_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if A is not Z and A is not None and is_tracked_mutable(v):
            handover(Abox, v, A)
            A = Z
        if entry is Z:
            if A is Z or A is None:
                return ((), Z) + ((None,) if args else ())
            entry = Abox.list_entry(xs, n - 1)
        entry.insert(j, A if A is not None else Z)
        return ((), Z) + ((None,) if args else ())

    return ProcResult(v, pop_backprop)


def list_remove_plus(xs: list, v: Any) -> ProcResult:
    j = xs.index(v)
    if _overrides(xs, "remove"):
        list.__delitem__(xs, j)
    else:
        del xs[j]
    if loops_in_flight:  # (a loop differentiated again may read them later)
        note_list_write(xs, range(j, len(xs) + 1))

    def remove_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is not Z:
            entry.insert(j, Z)
        return (), Z, Z

    return ProcResult(None, remove_backprop)


def list_copy_plus(xs: list) -> ProcResult:
    return apply_transform(list_plus, xs)


def list_clear_plus(xs: list) -> ProcResult:
    n = len(xs)
    if _overrides(xs, "clear"):
        list.clear(xs)
    else:
        xs.clear()

    def clear_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is not Z:
            entry[:] = [Z] * n
        return (), Z

    return ProcResult(None, clear_backprop)


def list_reverse_plus(xs: list) -> ProcResult:
    if _overrides(xs, "reverse"):
        list.reverse(xs)
    else:
        xs.reverse()
    if loops_in_flight:  # (a loop differentiated again may read them later)
        note_list_write(xs, range(len(xs)))

    def reverse_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is not Z:
            entry.reverse()
        return (), Z

    return ProcResult(None, reverse_backprop)


def list_sort_plus(xs: list, *, key: Any = None, reverse: bool = False) -> ProcResult:
    keyf = (lambda x: x) if key is None else (lambda x: lift(key)(x).primal)
    order = sorted(range(len(xs)), key=lambda i: keyf(xs[i]), reverse=reverse)
    if _overrides(xs, "sort"):
        list.__setitem__(xs, slice(None), [xs[i] for i in order])
    else:
        xs[:] = [xs[i] for i in order]
    if loops_in_flight:  # (a loop differentiated again may read them later)
        note_list_write(xs, range(len(xs)))

    def sort_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is not Z:
            restored = [Z] * len(order)
            for new_pos, old_pos in enumerate(order):
                restored[old_pos] = entry[new_pos]
            entry[:] = restored
        out = ((), Z)
        kw: dict[str, Any] = {}
        if key is not None:
            kw["key"] = Z
        if reverse:
            kw["reverse"] = None
        return out + ((kw,) if kw else ())

    return ProcResult(None, sort_backprop)


def list_index_plus(xs: list, *args: Any) -> ProcResult:
    return ProcResult(xs.index(*args), lambda A, Abox: ((), Z) + (Z,) * len(args))


def list_count_plus(xs: list, v: Any) -> ProcResult:
    return ProcResult(xs.count(v), lambda A, Abox: ((), Z, Z))


def dict_get_plus(d: dict, key: Any, *default: Any) -> ProcResult:
    if key in d:
        r = apply_transform(builtin_getitem_plus, d, key)
        inner = r.backprop
        return ProcResult(r.primal, lambda A, Abox: inner(A, Abox) + ((Z,) if default else ()))
    v = default[0] if default else None
    return ProcResult(v, lambda A, Abox: ((), Z, None) + ((A,) if default else ()))


def dict_setdefault_plus(d: dict, key: Any, *default: Any) -> ProcResult:
    if key in d:
        r = apply_transform(builtin_getitem_plus, d, key)
        inner = r.backprop
        return ProcResult(r.primal, lambda A, Abox: inner(A, Abox) + ((Z,) if default else ()))
    v = default[0] if default else None
    if _overrides(d, "setdefault"):
        dict.__setitem__(d, key, v)
    else:
        d[key] = v

    def setdefault_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        # the result is the stored value: its read sensitivity joins the entry, then moves to the default
        _add_to_entry(Abox, d, key, v, A)
        entry = Abox.get(d)
        s = entry.pop(key, Z) if entry is not Z else Z
        return ((), Z, None) + ((s,) if default else ())

    return ProcResult(v, setdefault_backprop)


def dict_update_plus(d: dict, /, *args: Any, **kwargs: Any) -> ProcResult:
    pairs = None
    if args and not isinstance(args[0], dict) and not hasattr(args[0], "keys"):
        # (read once, before dict() would consume an iterator)
        pairs = list(args[0]) if not isinstance(args[0], (list, tuple)) else args[0]
    src = dict(*args, **kwargs) if pairs is None else dict(pairs, **kwargs)
    if _overrides(d, "update"):
        dict.update(d, src)
    else:
        d.update(src)
    keys = (
        list(args[0]) if args and pairs is None else ()
    )  # (the mapping's keys now: it may change later)

    def update_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(d)
        moved = {}
        if entry is not Z:
            for k in src:
                moved[k] = entry.pop(k, Z)
        out: list = [(), Z]
        if args:
            a = args[0]
            if pairs is None:
                out.append({k: moved.get(k, Z) for k in keys if k not in kwargs} or Z)
            else:
                out.append(_pairs_sensitivity(a, pairs, moved, kwargs))
        if kwargs:
            out.append({k: moved.get(k, Z) for k in kwargs})
        return tuple(out)

    return ProcResult(None, update_backprop)


def user_namespace_plus(display: dict) -> ProcResult:
    """What ``locals()`` gives inside differentiated code: the display of the user's
    variables (``normalize.user_namespace``) without those not bound yet."""
    from dplus.transform.normalize.core import UNBOUND

    ns = {k: v for k, v in display.items() if not (type(v) is str and v == UNBOUND)}

    def user_namespace_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, ns, A)
        entry = Abox.pop(ns, Z)
        return (), (dict(entry) or Z) if entry is not Z else Z

    return ProcResult(ns, user_namespace_backprop)


# ``a | b`` and ``a |= b`` on dicts merge (the later value of a key wins); on anything else
# (ints, bools, sets, Counters' in-place maximum) they stay non-differentiable.
_MERGING_DICTS = (dict, collections.OrderedDict, collections.defaultdict)
_MERGE_OR = frozenset(t.__or__ for t in _MERGING_DICTS)
_MERGE_ROR = frozenset(t.__ror__ for t in _MERGING_DICTS)
_MERGE_IOR = frozenset(t.__ior__ for t in _MERGING_DICTS)


def _merges(x: Any, y: Any) -> bool:
    return (
        isinstance(x, dict)
        and isinstance(y, dict)
        and type(x).__or__ in _MERGE_OR
        and type(y).__ror__ in _MERGE_ROR
    )


def dict_or_plus(x: Any, y: Any) -> ProcResult:
    if not _merges(x, y):
        return ProcResult(operator.or_(x, y), lambda A, Abox: ((), Z, Z))
    r = x | y

    def dict_or_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, r, A)
        entry = Abox.pop(r, Z)
        if entry is Z:
            return (), Z, Z
        # a key of both takes the right-hand value: the left one gets no sensitivity
        sx = {k: entry[k] for k in x if k in entry and k not in y}
        sy = {k: entry[k] for k in y if k in entry}
        return (), sx or Z, sy or Z

    return ProcResult(r, dict_or_backprop)


def dict_ior_plus(x: Any, y: Any) -> ProcResult:
    if not (isinstance(x, dict) and type(x).__ior__ in _MERGE_IOR):
        if is_ndarray(x):
            from .numpy_inplace import array_inplace_plus

            return apply_transform(array_inplace_plus, operator.ior, x, y)
        return ProcResult(operator.ior(x, y), lambda A, Abox: ((), Z, Z))
    update = apply_transform(dict_update_plus, x, y)  # ``x |= y`` is ``x.update(y)``, then ``x``

    def dict_ior_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, x, A)  # the result is ``x`` itself, as it is after the update
        return update.backprop(Z, Abox)

    return ProcResult(x, dict_ior_backprop)


def dict_pop_plus(d: dict, key: Any, *default: Any) -> ProcResult:
    if key in d:
        v = dict.pop(d, key) if _overrides(d, "pop") else d.pop(key)

        def dict_pop_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            if A is not Z and A is not None:
                if is_tracked_mutable(v):
                    handover(Abox, v, A)
                else:
                    entry = Abox.map_entry(d)
                    entry[key] = A
            return ((), Z, None) + ((Z,) if default else ())

        return ProcResult(v, dict_pop_backprop)
    v = default[0] if default else d.pop(key)
    return ProcResult(v, lambda A, Abox: ((), Z, None) + ((A,) if default else ()))


def dict_items_plus(d: dict) -> ProcResult:
    keys = list(d)
    pairs = [(k, d[k]) for k in keys]

    def items_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, pairs, A)
        entry = Abox.pop(pairs, Z)
        if entry is not Z:
            # (a value dict's sensitivity is returned: its entries are collected in ``dentry``)
            value = is_value_dict(d)
            dentry: dict[Any, Any] | None = {} if value else None
            for k, s in zip(keys, entry):
                if s is Z or s is None:
                    continue
                part = tuple_items(s, 2)[1]
                if part is Z or part is None:
                    continue
                v = d.get(k) if k in d else None
                if is_tracked_mutable(v):
                    handover(Abox, v, part)
                    continue
                if dentry is None:
                    dentry = Abox.map_entry(d)
                dentry[k] = add(dentry[k], part) if k in dentry else part
            if value and dentry:
                return (), KeywordDict(dentry)
        return (), Z

    return ProcResult(pairs, items_backprop)


def dict_values_plus(d: dict) -> ProcResult:
    keys = list(d)
    vals = [d[k] for k in keys]

    def values_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, vals, A)
        entry = Abox.pop(vals, Z)
        if entry is not Z:
            value = is_value_dict(d)  # (its sensitivity is returned, not kept in Abox)
            dentry = {} if value else Abox.map_entry(d)
            for k, s in zip(keys, entry):
                if s is Z or s is None:
                    continue
                dentry[k] = add(dentry[k], s) if k in dentry else s
            if value and dentry:
                return (), KeywordDict(dentry)
        return (), Z

    return ProcResult(vals, values_backprop)


def dict_keys_plus(d: dict) -> ProcResult:
    return ProcResult(list(d), lambda A, Abox: ((), Z))


def dict_copy_plus(d: dict) -> ProcResult:
    return apply_transform(dict_plus, d)


def box_plus(v: Any) -> ProcResult:
    b = Box(v)

    def box_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, b, A)
        return (), Abox.pop(b, Z)

    return ProcResult(b, box_backprop)


def unbox_plus(b: Box) -> ProcResult:
    r = _box_read(b, b.value)
    inner = r.backprop
    return ProcResult(r.primal, lambda A, Abox: inner(A, Abox)[:2])


def set_box_plus(b: Box, v: Any) -> ProcResult:
    r = _box_write(b, v)
    inner = r.backprop
    return ProcResult(None, lambda A, Abox: ((), Z, inner(A, Abox)[3]))
