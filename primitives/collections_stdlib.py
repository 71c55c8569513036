"""Rules for the ``collections`` module's dicts: ``OrderedDict`` and ``Counter`` (``defaultdict``
is a dict with ``__missing__``: the dict rules cover it), and ``dict.popitem``.

``OrderedDict``'s methods are its own C functions, so they are registered beside
``dict``'s, with the same rules; ``move_to_end`` moves no value (sensitivities are kept
by key). ``Counter``'s methods are Python: they are differentiated from their source.
"""

from __future__ import annotations

import collections
from typing import Any

from dplus.runtime.boxes import BoxSensitivities
from dplus.runtime.handover import handover, is_tracked_mutable
from dplus.runtime.linear import add, tuple_items
from dplus.runtime.linear import gen_zero as Z
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .container_methods import (
    dict_copy_plus,
    dict_items_plus,
    dict_keys_plus,
    dict_pop_plus,
    dict_setdefault_plus,
    dict_update_plus,
    dict_values_plus,
)


def dict_popitem_plus(d: dict, *last: Any, **keywords: Any) -> ProcResult:
    """``d.popitem()`` (``OrderedDict.popitem(last)``): the popped value's sensitivity goes
    back into the dict's entry for its key."""
    k, v = d.popitem(*last, **keywords)

    def popitem_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        sv = tuple_items(A, 2)[1] if A is not Z and A is not None else Z
        if sv is not Z and sv is not None:
            if is_tracked_mutable(v):
                handover(Abox, v, sv)
            else:
                handover(Abox, d, {k: sv})
        out = ((), Z) + (None,) * len(last)
        return out + ({name: None for name in keywords},) if keywords else out

    return ProcResult((k, v), popitem_backprop)


def move_to_end_plus(
    d: collections.OrderedDict, key: Any, *last: Any, **keywords: Any
) -> ProcResult:
    d.move_to_end(key, *last, **keywords)

    def move_to_end_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        out = ((), Z, None) + (None,) * len(last)
        return out + ({name: None for name in keywords},) if keywords else out

    return ProcResult(None, move_to_end_backprop)


_OD = collections.OrderedDict
for _method, _rule in (
    (_OD.keys, dict_keys_plus),
    (_OD.values, dict_values_plus),
    (_OD.items, dict_items_plus),
    (_OD.pop, dict_pop_plus),
    (_OD.setdefault, dict_setdefault_plus),
    (_OD.update, dict_update_plus),
    (_OD.copy, dict_copy_plus),
):
    register_primitive(_method, _rule, note="as the dict method")
register_primitive(
    _OD.popitem, dict_popitem_plus, note="the popped value's sensitivity goes back to its key"
)
register_primitive(
    dict.popitem, dict_popitem_plus, note="the popped value's sensitivity goes back to its key"
)
register_primitive(
    _OD.move_to_end, move_to_end_plus, note="moves no value: sensitivities are kept by key"
)


def _register_counter_methods() -> None:
    from dplus.transform.plus_functions import lazy_transform

    for name in (
        "update",
        "total",
        "most_common",
        "subtract",
        "copy",
        "__add__",
        "__sub__",
        "__or__",
        "__and__",
        "__pos__",
        "__neg__",
        "__iadd__",
        "__isub__",
        "__ior__",
        "__iand__",
        "_keep_positive",
    ):
        fn = getattr(collections.Counter, name)
        register_primitive(
            fn, lazy_transform(fn), note="derived from the Python source of collections.Counter"
        )


_register_counter_methods()


# ---------------------------------------------------------------------------
# collections.deque: a sequence whose sensitivity, like a list's, is a list by position kept
# in Abox. Each change is replayed on a deque of tags (where each slot's value came from: an
# old position or a new value), with the same maxlen, so the reverse knows where every
# sensitivity goes, whatever the change (appends that push an element out, rotations, ...).

_OLD, _NEW = 0, 1


def _replay(d: collections.deque, change: Any, new_count: int) -> tuple[list, Any]:
    """The tags of ``d``'s slots after ``change(tags, new_tags)``, and what ``change`` returned
    (a tag for a popped element)."""
    tags = collections.deque(((_OLD, k) for k in range(len(d))), maxlen=d.maxlen)
    out = change(tags, [(_NEW, m) for m in range(new_count)])
    return list(tags), out


def _deque_change(
    name: str, d: collections.deque, change: Any, new_values: list, result: Any
) -> ProcResult:
    """``change`` applied to ``d`` (and to its tags); ``new_values`` the values the change puts in."""
    n_before = len(d)
    after, returned_tag = _replay(d, change, len(new_values))
    r = change(d, new_values)

    def deque_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(d)
        before: list = [Z] * n_before
        new_sens: list = [Z] * len(new_values)
        routes = list(zip(after, entry)) if type(entry) is list and len(entry) == len(after) else []
        if returned_tag is not None and A is not Z and A is not None:
            routes.append((returned_tag, A))
        for (kind, k), s in routes:
            if s is Z or s is None:
                continue
            if kind == _OLD:
                before[k] = add(before[k], s)
            else:
                new_sens[k] = add(new_sens[k], s)
        if entry is not Z or any(b is not Z for b in before):
            Abox.pop(d)
            _restore(Abox, d, before)
        return result(new_sens)

    return ProcResult(r, deque_backprop)


def _restore(Abox: BoxSensitivities, d: collections.deque, before: list) -> None:
    """``d``'s entry as it was before the change: the sensitivities ``before`` by position
    (``d`` itself is not as it was then: the layout is all that is needed)."""
    if any(b is not Z for b in before):
        Abox[d] = before


def _values_sensitivity(values: Any, items: list, sens: list) -> Any:
    from .container_displays import _sequence_sensitivity

    return _sequence_sensitivity(values, sens, items)


def _popping(name: str, tag_change: Any) -> Any:
    def transform(d: collections.deque, *args: Any) -> ProcResult:
        return _deque_change(
            name,
            d,
            lambda q, new: tag_change(q, *args),
            [],
            lambda new_sens: ((), Z) + (None,) * len(args),
        )

    transform.__name__ = f"deque_{name}_plus"
    return transform


def deque_append_plus(d: collections.deque, v: Any) -> ProcResult:
    return _deque_change("append", d, lambda q, new: q.append(new[0]), [v], lambda s: ((), Z, s[0]))


def deque_appendleft_plus(d: collections.deque, v: Any) -> ProcResult:
    return _deque_change(
        "appendleft", d, lambda q, new: q.appendleft(new[0]), [v], lambda s: ((), Z, s[0])
    )


def deque_extend_plus(d: collections.deque, values: Any) -> ProcResult:
    items = list(values)
    return _deque_change(
        "extend",
        d,
        lambda q, new: q.extend(new),
        items,
        lambda s: ((), Z, _values_sensitivity(values, items, s)),
    )


def deque_extendleft_plus(d: collections.deque, values: Any) -> ProcResult:
    items = list(values)
    return _deque_change(
        "extendleft",
        d,
        lambda q, new: q.extendleft(new),
        items,
        lambda s: ((), Z, _values_sensitivity(values, items, s)),
    )


def deque_insert_plus(d: collections.deque, i: int, v: Any) -> ProcResult:
    return _deque_change(
        "insert", d, lambda q, new: q.insert(i, new[0]), [v], lambda s: ((), Z, None, s[0])
    )


def deque_setitem_plus(d: collections.deque, i: Any, v: Any) -> ProcResult:
    def change(q: collections.deque, new: list) -> None:
        q[i] = new[0]

    return _deque_change("__setitem__", d, change, [v], lambda s: ((), Z, None, s[0]))


def deque_delitem_plus(d: collections.deque, i: Any) -> ProcResult:
    def change(q: collections.deque, new: list) -> None:
        del q[i]

    return _deque_change("__delitem__", d, change, [], lambda s: ((), Z, None))


def deque_remove_plus(d: collections.deque, v: Any) -> ProcResult:
    position = d.index(v)  # (the slot Python removes: the first equal element)

    def change(q: collections.deque, new: list) -> None:
        del q[position]

    return _deque_change("remove", d, change, [], lambda s: ((), Z, None))


def deque_constructor_plus(*args: Any, **kwargs: Any) -> ProcResult:
    """``deque(iterable, maxlen)``: each element's sensitivity goes back to the item it was
    made from (with ``maxlen``, the last items)."""
    values = args[0] if args else kwargs.get("iterable", ())
    items = list(values)
    d = collections.deque(items, *args[1:], **{k: v for k, v in kwargs.items() if k != "iterable"})
    first = len(items) - len(d)

    def deque_constructor_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, d, A)
        entry = Abox.pop(d, Z)
        rest = (None,) * (len(args) - 1)
        keywords = ({k: None for k in kwargs},) if kwargs else ()
        if entry is Z or not args and "iterable" not in kwargs:
            return ((), Z) + rest + keywords if args else ((),) + keywords
        sens = [Z] * first + list(entry)
        sv = _values_sensitivity(values, items, sens)
        if args:
            return ((), sv) + rest + keywords
        return ((), {**{k: None for k in kwargs}, "iterable": sv})

    return ProcResult(d, deque_constructor_backprop)


def deque_copy_plus(d: collections.deque) -> ProcResult:
    c = d.copy()

    def deque_copy_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, c, A)
        entry = Abox.pop(c, Z)
        if entry is not Z:
            handover(Abox, d, entry)
        return (), Z

    return ProcResult(c, deque_copy_backprop)


_DQ = collections.deque
register_primitive(
    _DQ,
    deque_constructor_plus,
    note="each element's sensitivity goes back to the item it was made from",
)
register_primitive(
    _DQ.append, deque_append_plus, note="sensitivities follow the elements, maxlen included"
)
register_primitive(
    _DQ.appendleft, deque_appendleft_plus, note="sensitivities follow the elements, maxlen included"
)
register_primitive(
    _DQ.extend, deque_extend_plus, note="sensitivities follow the elements, maxlen included"
)
register_primitive(
    _DQ.extendleft, deque_extendleft_plus, note="sensitivities follow the elements, maxlen included"
)
register_primitive(_DQ.insert, deque_insert_plus, note="sensitivities follow the elements")
register_primitive(_DQ.__setitem__, deque_setitem_plus, note="d[i] = v")
register_primitive(_DQ.__delitem__, deque_delitem_plus, note="del d[i]")
register_primitive(
    _DQ.pop,
    _popping("pop", lambda q: q.pop()),
    note="the popped element's sensitivity goes back to its slot",
)
register_primitive(
    _DQ.popleft,
    _popping("popleft", lambda q: q.popleft()),
    note="the popped element's sensitivity goes back to its slot",
)
register_primitive(
    _DQ.rotate,
    _popping("rotate", lambda q, *n: q.rotate(*n)),
    note="sensitivities follow the elements",
)
register_primitive(
    _DQ.reverse,
    _popping("reverse", lambda q: q.reverse()),
    note="sensitivities follow the elements",
)
register_primitive(_DQ.remove, deque_remove_plus, note="the removed element is read no more")
register_primitive(
    _DQ.clear, _popping("clear", lambda q: q.clear()), note="the removed elements are read no more"
)
register_primitive(_DQ.copy, deque_copy_plus, note="a new deque")
