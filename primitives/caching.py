"""``functools.cache`` and ``functools.lru_cache`` applied to a plus-function (a decorated
function defined inside differentiated code).

The cache is keyed as Python keys it. The first call with a key (a miss) runs the
plus-function and keeps its result; later calls with an equal key (hits) return the same
value, and their sensitivities are added up for the miss, whose backprop, reversed after
every hit (it ran before them), runs once with the total. The arguments of a hit get no
sensitivity: Python did not use them.
"""

from __future__ import annotations

import collections
import functools
from typing import Any

from dplus.errors import DplusError
from dplus.rules import defnondiff
from dplus.runtime.boxes import BoxSensitivities
from dplus.runtime.linear import add
from dplus.runtime.linear import gen_zero as Z
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult


class _Entry:
    __slots__ = ("result", "later")

    def __init__(self, result: ProcResult) -> None:
        self.result = result
        self.later: Any = Z  # the hits' sensitivities, added up


class CachedPlus:
    """What ``functools.cache(P)`` is inside differentiated code: a plus-function with a cache."""

    __dplus_plus_object__ = True
    __dplus_again_refusal__ = (
        "derivatives of derivatives through a function decorated with functools.cache or lru_cache are not "
        "supported yet; leave the cache out of functions differentiated more than once"
    )

    def __init__(self, plus: Any, maxsize: int | None, typed: bool) -> None:
        self.plus = plus
        self.maxsize = maxsize
        self.typed = typed
        self.entries: collections.OrderedDict = collections.OrderedDict()
        self.hits = 0
        self.misses = 0
        functools.update_wrapper(self, plus)

    def __call__(self, *args: Any, **kwargs: Any) -> ProcResult:
        key = functools._make_key(args, kwargs, self.typed)
        entry = self.entries.get(key)
        if entry is not None:
            self.hits += 1
            self.entries.move_to_end(key)
            return ProcResult(
                entry.result.primal, self._hit_backprop(entry, len(args), tuple(kwargs))
            )
        self.misses += 1
        result = self.plus(*args, **kwargs)
        entry = _Entry(result)
        if self.maxsize != 0:
            self.entries[key] = entry
            if self.maxsize is not None and len(self.entries) > self.maxsize:
                self.entries.popitem(last=False)

        def cache_miss_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            total = add(A, entry.later) if entry.later is not Z else A
            entry.later = Z
            return result.backprop(total, Abox)

        return ProcResult(result.primal, cache_miss_backprop)

    @staticmethod
    def _hit_backprop(entry: _Entry, n: int, keywords: tuple) -> Any:
        def cache_hit_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            if A is not Z and A is not None:
                entry.later = add(entry.later, A) if entry.later is not Z else A
            out = (Z,) + (Z,) * n
            return out + ({k: Z for k in keywords},) if keywords else out

        return cache_hit_backprop

    def cache_info(self) -> Any:
        return functools._CacheInfo(self.hits, self.misses, self.maxsize, len(self.entries))

    def cache_clear(self) -> None:
        self.entries.clear()
        self.hits = self.misses = 0


def _cached(plus: Any, maxsize: int | None, typed: bool) -> ProcResult:
    if not callable(plus):
        raise DplusError(f"functools caching decorator applied to {plus!r}, which is not callable")
    return ProcResult(CachedPlus(plus, maxsize, typed), lambda A, Abox: ((), A))


def cache_plus(plus: Any) -> ProcResult:
    return _cached(plus, None, False)


def lru_cache_plus(maxsize: Any = 128, typed: bool = False) -> ProcResult:
    if callable(maxsize) and not isinstance(maxsize, bool):  # @lru_cache without parentheses
        return _cached(maxsize, 128, typed)
    size = None if maxsize is None else max(int(maxsize), 0)
    return ProcResult(_CachingDecorator(size, typed), lambda A, Abox: ((), None, None))


class _CachingDecorator:
    """``functools.lru_cache(maxsize, typed)`` inside differentiated code: a plus-function
    that makes the cache."""

    __dplus_plus_object__ = True
    __dplus_again_refusal__ = CachedPlus.__dplus_again_refusal__

    def __init__(self, maxsize: int | None, typed: bool) -> None:
        self.maxsize = maxsize
        self.typed = typed

    def __call__(self, plus: Any) -> ProcResult:
        return _cached(plus, self.maxsize, self.typed)


register_primitive(
    functools.cache,
    cache_plus,
    note="a cache of plus-function results: hits' sensitivities go to the miss",
)
register_primitive(
    functools.lru_cache, lru_cache_plus, note="as functools.cache, keyed and bounded as Python's"
)
defnondiff(CachedPlus.cache_info)
defnondiff(CachedPlus.cache_clear)
