"""``functools.cache`` and ``functools.lru_cache`` applied to a function defined inside
differentiated code (a decorated nested ``def``).

The decorator is replaced by Python code that dplus differentiates from its source, at
every order: a closure over a dict of computed values. Python's own ``lru_cache`` (made on
a function that hands out a new, empty slot) decides which calls hit, so keys (``1`` and
``1.0``, ``typed``), bounds, evictions, ``cache_info`` and ``cache_clear`` are exactly
Python's: a miss gets a new slot and computes, a hit gets the slot of the computation that
made its value and reads that value from the dict. A hit thus returns the same value
object, and the sensitivity of every use reaches the one computation that made the value
through the dict, as for any dict read (also at the next order: the dict's entries are
differentiated again like any container's). An evicted value's slot is not handed out
again: the next call with its key computes anew, with sensitivities of its own.
"""

from __future__ import annotations

import functools
from typing import Any

from dplus.markers import mark_derived
from dplus.rules import defnondiff
from dplus.runtime.core import apply_transform, lift
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult


class _Slot:
    """One computation of a cached function: the key of its value in the dict."""

    __slots__ = ("__weakref__",)


def _new_slot(*args: Any, **kwargs: Any) -> _Slot:
    return _Slot()


class CacheSlots:
    """Python's ``lru_cache`` over ``_new_slot``: keyed, bounded and counted as Python's."""

    def __init__(self, decorator: Any) -> None:
        self.python_cache = decorator(_new_slot)

    def slot(self, args: tuple, kwargs: dict) -> _Slot:
        return self.python_cache(*args, **kwargs)

    def cache_info(self) -> Any:
        return self.python_cache.cache_info()

    def cache_clear(self) -> None:
        self.python_cache.cache_clear()

    def cache_parameters(self) -> dict:
        return self.python_cache.cache_parameters()


def _python_decorator(maxsize: Any, typed: Any) -> Any:
    """``functools.lru_cache(maxsize, typed)``: raises the TypeError Python raises."""
    return functools.lru_cache(maxsize, typed)


def _slots_for(decorator: Any) -> CacheSlots:
    return CacheSlots(decorator)


# differentiated from their source, at every order


def _cached_function(fn: Any, slots: Any) -> Any:
    values: dict[Any, Any] = {}

    def cached(*args: Any, **kwargs: Any) -> Any:
        slot = slots.slot(args, kwargs)
        if slot in values:
            return values[slot]
        if kwargs:
            value = fn(*args, **kwargs)
        else:
            value = fn(*args)
        values[slot] = value
        return value

    cached.cache_info = slots.cache_info  # type: ignore[attr-defined]
    cached.cache_clear = slots.cache_clear  # type: ignore[attr-defined]
    cached.cache_parameters = slots.cache_parameters  # type: ignore[attr-defined]
    return cached


def _cache_of(fn: Any) -> Any:
    return _cached_function(fn, _slots_for(_python_decorator(None, False)))


def _lru_cache_of(maxsize: Any = 128, typed: Any = False) -> Any:
    if callable(maxsize) and not isinstance(maxsize, bool):  # @lru_cache without parentheses
        return _cached_function(maxsize, _slots_for(_python_decorator(128, typed)))
    decorator = _python_decorator(maxsize, typed)

    def decorating_function(fn: Any) -> Any:
        return _cached_function(fn, _slots_for(decorator))

    return decorating_function


for _helper in (_cached_function, _cache_of, _lru_cache_of):
    mark_derived(_helper, "rule helper")


def cache_plus(fn: Any) -> ProcResult:
    return apply_transform(lift(_cache_of), fn)


def lru_cache_plus(*args: Any, **kwargs: Any) -> ProcResult:
    return apply_transform(lift(_lru_cache_of), *args, **kwargs)


register_primitive(
    functools.cache,
    cache_plus,
    note="a dict of computed values keyed by Python's own cache: every use's sensitivity reaches the computation",
)
register_primitive(
    functools.lru_cache, lru_cache_plus, note="as functools.cache, keyed and bounded as Python's"
)
defnondiff(_python_decorator)
defnondiff(_slots_for)
defnondiff(CacheSlots.slot)
defnondiff(CacheSlots.cache_info)
defnondiff(CacheSlots.cache_clear)
defnondiff(CacheSlots.cache_parameters)
