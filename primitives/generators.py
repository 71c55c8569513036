"""Rules for generators made by differentiated code (``dplus.runtime.generators``).

* ``next(g)``, ``g.send(v)``, ``g.throw(...)``, ``g.close()`` run one resumption of ``g`` each;
  their backprops reverse it, where the call is reversed (``send``'s value gets the
  sensitivity the generator's code gave the ``yield`` expression).
* A rule that consumes iterables (``sum``, ``max``, ``sorted``, ``list``, ``zip``,
  ``itertools.islice``, ``statistics.mean``, ...) takes a generator's values lazily, as
  Python's builtin does, each from its resumption (``consumes_generators``): imported last,
  this module wraps the rules registered before it.
"""

from __future__ import annotations

import builtins as _b
import collections
import functools
import heapq
import itertools
import math
import statistics
from typing import Any

from dplus.runtime.boxes import BoxSensitivities
from dplus.runtime.generators import (
    NEXT,
    THROW,
    Generator,
    GeneratorCore,
    close_generator,
    consumes_generators,
    exception_of,
)
from dplus.runtime.linear import gen_zero
from dplus.runtime.registry import lookup_transform, register_primitive, registered_primitives
from dplus.runtime.result import ProcResult

Z: Any = gen_zero


def _run(core: GeneratorCore, mode: int, value: Any) -> tuple[Any, int, BaseException | None]:
    """One resumption: its value (or the ``StopIteration`` it ended with) and its index
    (-1: none ran)."""
    n0 = len(core.log)
    try:
        k, v = core.resume_protocol(mode, value)
        return v, k, None
    except StopIteration as e:
        return None, (n0 if len(core.log) > n0 else -1), e


def generator_next_plus(g: Generator, *default: Any) -> ProcResult:
    """``next(g[, default])``."""
    core = g.core
    v, k, stop = _run(core, NEXT, None)
    if stop is not None:
        if not default:
            raise stop
        v = default[0]

    def generator_next_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if k >= 0:
            if stop is None:
                core.deliver(k, A, Abox)
            core.reverse_down_to(k, Abox)
        if default:
            return (), Z, (A if stop is not None else Z)
        return (), Z

    return ProcResult(v, generator_next_backprop)


def generator_send_plus(g: Generator, value: Any) -> ProcResult:
    """``g.send(value)``: the value's sensitivity is what the generator's code gave the
    ``yield`` expression that received it."""
    core = g.core
    v, k, stop = _run(core, NEXT, value)
    if stop is not None and k < 0:
        raise stop

    def generator_send_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if stop is None:
            core.deliver(k, A, Abox)
        return (), Z, core.reverse_down_to(k, Abox)

    if stop is not None:
        # (the generator returned: its StopIteration carries the value, with no sensitivity
        # of its own: the resumption is reversed where the exception is caught, by catch-up)
        raise stop
    return ProcResult(v, generator_send_backprop)


def generator_throw_plus(g: Generator, typ: Any, val: Any = None, tb: Any = None) -> ProcResult:
    """``g.throw(...)``: the exception is raised where the generator is suspended."""
    core = g.core
    n_args = 1 + (val is not None) + (tb is not None)
    v, k, stop = _run(core, THROW, exception_of(typ, val, tb))
    if stop is not None:
        raise stop

    def generator_throw_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        core.deliver(k, A, Abox)
        core.reverse_down_to(k, Abox)
        return ((), Z) + (None,) * n_args

    return ProcResult(v, generator_throw_backprop)


def generator_close_plus(g: Generator) -> ProcResult:
    """``g.close()``: the generator's ``finally`` clauses run where it is suspended."""
    return close_generator(g)


register_primitive(
    Generator.send,
    generator_send_plus,
    note="one resumption: the value sent gets the yield's sensitivity",
)
register_primitive(
    Generator.throw, generator_throw_plus, note="one resumption, raising where it is suspended"
)
register_primitive(
    Generator.close, generator_close_plus, note="runs the generator's finally clauses"
)
register_primitive(Generator.__next__, generator_next_plus, note="one resumption: next(g)")


# ---------------------------------------------------------------------------
# the rules that consume iterables take generators lazily, value by value


def _consumers() -> list[Any]:
    """The callables whose registered rules consume iterable arguments."""
    named = [
        sum,
        min,
        max,
        sorted,
        zip,
        enumerate,
        map,
        filter,
        list,
        tuple,
        dict,
        set,
        frozenset,
        _b.any,
        _b.all,
        functools.reduce,
        math.fsum,
        math.prod,
        math.dist,
        list.extend,
        dict.update,
        set.update,
        set.union,
        set.intersection,
        set.difference,
        set.symmetric_difference,
        frozenset.union,
        collections.deque,
        collections.Counter,
        collections.OrderedDict,
        collections.deque.extend,
        collections.deque.extendleft,
        str.join,
    ]
    sumprod = getattr(math, "sumprod", None)
    if sumprod is not None:
        named.append(sumprod)
    # the functions of these modules (not what they import: statistics has operator.mul)
    modules = {m.__name__ for m in (itertools, statistics, heapq)} | {"_heapq"}
    for fn, _, _ in registered_primitives():
        if getattr(fn, "__module__", None) in modules:
            named.append(fn)
    try:
        from dplus import parallel

        named.append(parallel.map)
    except ImportError:  # pragma: no cover
        pass
    return named


def _wrap_consumers() -> None:
    notes = {id(fn): note for fn, _, note in registered_primitives()}
    seen: set[int] = set()
    for fn in _consumers():
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        t = lookup_transform(fn)
        if t is None or getattr(t, "__dplus_consumes_generators__", False):
            continue
        wrapped = consumes_generators(t)
        register_primitive(fn, wrapped, note=notes.get(id(fn), ""))


_wrap_consumers()
