"""The rule of ``functools.reduce``: the function argument through its transform, the
backprops run in reverse threading the accumulator's sensitivity (conventions: see
:mod:`primitives.functional`).

Two forms, one reference: ``reduce_recorded`` records the calls in a ``Calls`` (the general
rule, and the form the next order differentiates); ``reduce_plus`` takes a first-order path
for a function made by differentiated code (a lambda, a nested ``def``), equal to it.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import Any

from dplus.runtime.closures import is_plus_function
from dplus.runtime.linear import add, gen_zero
from dplus.runtime.registry import (
    is_registered_transform,
    register_next_order_form,
    register_primitive,
)
from dplus.runtime.result import ProcResult
from dplus.transform.reverse.syntax import FAST_PATHS

from ._iterables import Calls, add_closure, all_float, ensure_abox, seq, settle


def _named(transform: Any, name: str) -> Any:
    transform.__name__ = transform.__qualname__ = f"{name}_plus"
    return transform


# ---------------------------------------------------------------------------
# functools.reduce


def reduce_plus(*args: Any, **kwargs: Any) -> ProcResult:
    """``functools.reduce(f, iterable[, initial])`` inside differentiated code.

    When ``f`` is a function made by differentiated code (a lambda or a nested ``def``:
    a plus-function) taking exactly two positional parameters, it is called directly and
    its backprops run in a loop here (:func:`_reduce_of_plus_function`); everything else, and
    every order above the first, goes through :func:`reduce_recorded`, the reference.
    """
    if not kwargs and 2 <= len(args) <= 3 and FAST_PATHS[0] and _takes_two(args[0]):
        return _reduce_of_plus_function(args)
    return reduce_recorded(*args, **kwargs)


def _takes_two(function: Any) -> bool:
    """A plus-function made by dplus from the program's code, with two positional parameters
    (``Calls`` calls it as it is; a rule's registered transform may take ``fast_rule``)."""
    if (
        type(function) is not types.FunctionType
        or not is_plus_function(function)
        or is_registered_transform(function)
    ):
        return False
    code = function.__code__
    return (
        code.co_argcount == 2
        and code.co_kwonlyargcount == 0
        and not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    )


def _reduce_of_plus_function(args: tuple) -> ProcResult:
    """``reduce_recorded`` for a plus-function of two parameters, computing the same values
    in the same order: the function called directly (``Calls.call`` calls it through
    ``runtime.calls.call``, which for a plus-function calls it as it is), float
    sensitivities passed on where ``settle`` would return them unchanged, and the closure
    sensitivities summed at the end in the order ``add_closure`` sums them."""
    function = args[0]
    s, items, n, acc, start = _reduce_start(args)
    accs = [acc]  # accs[k]: the accumulator call k was given; accs[k + 1]: what it returned
    bps = []
    for i in range(start, n):
        r = function(acc, items[i])
        acc = r.primal
        accs.append(acc)
        bps.append(r.backprop)

    def reduce_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        a = A
        closures = []
        el: list = [gen_zero] * n
        for k in range(len(bps) - 1, -1, -1):
            if type(a) is not float or type(accs[k + 1]) is not float:
                a = settle(accs[k + 1], a, Abox)
            rs = bps[k](a, Abox)
            acc_in, item = accs[k], items[start + k]
            s_acc, s_item = rs[1], rs[2]
            if type(s_acc) is not float or type(acc_in) is not float:
                s_acc = settle(acc_in, s_acc, Abox)
            if type(s_item) is not float or type(item) is not float:
                s_item = settle(item, s_item, Abox)
            closures.append(rs[0])
            el[start + k] = s_item
            a = s_acc
        fs = _sum_closure_sensitivities(closures)
        if start == 1:
            el[0] = add(el[0], a)
            return ((), fs, s.sens(el, Abox))
        return ((), fs, s.sens(el, Abox), a)

    return ProcResult(acc, reduce_backprop)


def _sum_closure_sensitivities(cs: list) -> Any:
    """``add_closure`` over ``cs`` in order, from zero; runs of tuples of floats are added
    column by column (``add`` of two such tuples adds them element by element)."""
    total: Any = gen_zero
    cols: list | None = None  # while not None: the total is tuple(cols)
    for c in cs:
        if cols is not None:
            if type(c) is tuple and len(c) == len(cols) and all_float(c):
                for j, v in enumerate(c):
                    cols[j] += v
                continue
            total = tuple(cols)
            cols = None
        total = add_closure(total, c)
        if type(total) is tuple and total and all_float(total):
            cols = list(total)
    return total if cols is None else tuple(cols)


def _reduce_start(args: tuple) -> tuple[Any, list, int, Any, int]:
    """``reduce(function, iterable[, initial])``'s iterable as a ``Seq``, its items and their
    number, the first accumulator and the index of the first item the function is given."""
    function, iterable = args[0], args[1]
    s = seq(iterable, "reduce", "iterable")
    items = s.items
    n = len(items)
    if len(args) == 3:
        return s, items, n, args[2], 0
    if n == 0:
        functools.reduce(function, [])  # TypeError: empty iterable, no initial value
    return s, items, n, items[0], 1


def reduce_recorded(*args: Any, **kwargs: Any) -> ProcResult:
    """functools.reduce's general transform: each call of the function through ``Calls``.
    The next order differentiates this one (``reduce_plus``'s fast path is first order only)."""
    if kwargs or not 2 <= len(args) <= 3:
        functools.reduce(*args, **kwargs)  # raises the builtin's TypeError
    function = args[0]
    s, items, n, acc, start = _reduce_start(args)
    calls = Calls(function)
    call = calls.call
    for i in range(start, n):
        acc = call((acc, items[i]))
    result = acc

    def reduce_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        a = A
        fs: Any = gen_zero
        el: list = [gen_zero] * n
        for k in range(len(calls) - 1, -1, -1):
            rs = calls.back(k, a, Abox)
            if rs is None:
                a = gen_zero
                continue
            fs = add_closure(fs, rs[0])
            el[start + k] = rs[2]
            a = rs[1]
        if start == 1:
            el[0] = add(el[0], a)
            return ((), fs, s.sens(el, Abox))
        return ((), fs, s.sens(el, Abox), a)

    return ProcResult(result, reduce_backprop)


register_primitive(
    functools.reduce,
    _named(reduce_plus, "reduce"),
    note="functools.reduce(f, iterable[, initial]): f through its transform; backprops run in "
    "reverse, threading the accumulator's sensitivity.",
)
register_next_order_form(reduce_plus, reduce_recorded)
