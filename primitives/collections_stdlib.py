"""Rules for the ``collections`` module's dicts: ``OrderedDict`` and ``Counter`` (``defaultdict``
is a dict with ``__missing__``: the dict rules cover it), and ``dict.popitem``.

``OrderedDict``'s methods are its own C functions, so they are registered beside
``dict``'s, with the same rules; ``move_to_end`` moves no value (sensitivities are kept
by key). ``Counter``'s methods are Python: they are differentiated from their source.
"""

from __future__ import annotations

import collections
from typing import Any

from dplus.boxes import BoxSensitivities
from dplus.linear import gen_zero as Z, tuple_items
from dplus.registry import register_primitive
from dplus.result import ProcResult
from dplus.runtime import handover, is_tracked_mutable

from .containers import (dict_copy_plus, dict_items_plus, dict_keys_plus, dict_pop_plus, dict_setdefault_plus,
                         dict_update_plus, dict_values_plus)


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


def move_to_end_plus(d: collections.OrderedDict, key: Any, *last: Any, **keywords: Any) -> ProcResult:
    d.move_to_end(key, *last, **keywords)

    def move_to_end_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        out = ((), Z, None) + (None,) * len(last)
        return out + ({name: None for name in keywords},) if keywords else out

    return ProcResult(None, move_to_end_backprop)


_OD = collections.OrderedDict
for _method, _rule in ((_OD.keys, dict_keys_plus), (_OD.values, dict_values_plus), (_OD.items, dict_items_plus),
                       (_OD.pop, dict_pop_plus), (_OD.setdefault, dict_setdefault_plus),
                       (_OD.update, dict_update_plus), (_OD.copy, dict_copy_plus)):
    register_primitive(_method, _rule, note="as the dict method")
register_primitive(_OD.popitem, dict_popitem_plus, note="the popped value's sensitivity goes back to its key")
register_primitive(dict.popitem, dict_popitem_plus, note="the popped value's sensitivity goes back to its key")
register_primitive(_OD.move_to_end, move_to_end_plus, note="moves no value: sensitivities are kept by key")


def _register_counter_methods() -> None:
    from dplus.transformer import lazy_transform  # (the transformer imports the rule library)

    for name in ("total", "most_common", "update", "subtract", "copy", "__add__", "__sub__", "__or__", "__and__",
                 "__pos__", "__neg__", "__iadd__", "__isub__", "__ior__", "__iand__", "_keep_positive"):
        fn = getattr(collections.Counter, name)
        register_primitive(fn, lazy_transform(fn), note="derived from the Python source of collections.Counter")


_register_counter_methods()
