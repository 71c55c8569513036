"""Rules for the builtins that iterate: ``zip``, ``enumerate``, ``map``, ``filter`` (lists
inside differentiated code, or Python's lazy iterators over live lists), ``iter`` and ``next``
(the elements a list iterator gives get their sensitivities). See :mod:`primitives.builtins`.
"""

from __future__ import annotations

import builtins as _b
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.runtime.core import apply_transform, as_plain_callable, lift
from dplus.runtime.fold import ItemColumns
from dplus.runtime.linear import gen_zero, is_zero_sensitivity
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from ._iterables import (
    LIST,
    TUPLE,
    Calls,
    add_closure,
    all_float,
    check_finite,
    columns,
    ensure_abox,
    fast_rule,
    items_of,
    lazy_seq,
    list_sens,
    out_sens,
    seq,
)
from .builtins import _bind, _named, _zeros
from .container_reads import _python_method_call
from .program_dunders import program_method

# ---------------------------------------------------------------------------
# zip, enumerate, map, filter


_ITERABLES = tuple(f"iterables[{j}]" for j in range(8))  # argument names for messages, made once


def _iterable_name(j: int) -> str:
    return _ITERABLES[j] if j < len(_ITERABLES) else f"iterables[{j}]"


def zip_plus(*iterables: Any, **kwargs: Any) -> ProcResult:
    if iterables and not kwargs and _LISTS.issuperset(map(type, iterables)):
        return _zip_lists(iterables)
    if kwargs and any(k != "strict" for k in kwargs):
        zip(*iterables, **kwargs)  # raises
    seqs = [lazy_seq(x, "zip", _iterable_name(j)) for j, x in enumerate(iterables)]
    check_finite(seqs, "zip")
    out = list(zip(*[sq.source() for sq in seqs], **kwargs))
    m = len(seqs)

    def zip_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        so = out_sens(out, A, Abox)
        if so is None:
            return _zeros(iterables, kwargs)
        pos = tuple(sq.sens(col, Abox) for sq, col in zip(seqs, columns(so, m)))
        res = ((),) + pos
        return res + ({k: gen_zero for k in kwargs},) if kwargs else res

    return ProcResult(out, zip_backprop)


_LISTS = frozenset({list})


def _zip_lists(lists: tuple) -> ProcResult:
    """``zip_plus`` of lists only, the common case: the lengths at the call are all the
    backprop needs of them."""
    out = list(zip(*lists))
    lengths = list(map(len, lists))

    def zip_lists_backprop(A: Any, Abox: Any) -> tuple:
        so = out_sens(out, A, ensure_abox(Abox))
        if so is None:
            return ((),) + (gen_zero,) * len(lists)
        # (zip stopped at the shortest list: the rest of a longer one gets zero)
        return ((),) + tuple(map(list_sens, columns(so, len(lists)), lengths))

    return ProcResult(out, zip_lists_backprop)


register_primitive(
    zip,
    _named(zip_plus, zip),
    note="zip(*iterables, strict=): a list of tuples inside differentiated code; stops at the "
    "shortest input (which may be infinite).",
)


def _enumerate_sig(iterable: Any, start: int = 0) -> tuple:
    return iterable, start


def enumerate_plus(*args: Any, **kwargs: Any) -> ProcResult:
    iterable, start = _bind(_enumerate_sig, enumerate, args, kwargs)
    s = seq(iterable, "enumerate", "iterable")
    out = list(enumerate(s.items, start))

    def enumerate_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        so = out_sens(out, A, Abox)
        if so is None:
            return _zeros(args, kwargs)
        el = so.cols[1] if type(so) is ItemColumns else [items_of(sk, 2)[1] for sk in so]
        res = ((), s.sens(el, Abox)) + (gen_zero,) * (len(args) - 1)
        return res + ({k: gen_zero for k in kwargs},) if kwargs else res

    return ProcResult(out, enumerate_backprop)


register_primitive(
    enumerate,
    _named(enumerate_plus, enumerate),
    note="enumerate(iterable, start=0): a list of (index, element) inside differentiated code.",
)


def map_plus(function: Any, *iterables: Any) -> ProcResult:
    if not iterables:
        map(function)  # type: ignore[call-overload]  # (to raise map's own TypeError)
    seqs = [lazy_seq(x, "map", _iterable_name(j)) for j, x in enumerate(iterables)]
    check_finite(seqs, "map")
    if all(sq.kind == LIST or sq.kind == TUPLE for sq in seqs):
        fast = _map_floats(function, seqs)
        if fast is not None:
            return fast
    calls = Calls(function)
    out = [calls.call(a) for a in zip(*[sq.source() for sq in seqs])]
    m = len(seqs)
    n = len(out)

    def map_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        so = out_sens(out, A, Abox)
        cols: list = [[gen_zero] * n for _ in range(m)]
        fsens: Any = gen_zero
        for k in range(n - 1, -1, -1):
            rs = calls.back(k, gen_zero if so is None else so[k], Abox)
            if rs is None:
                continue
            fsens = add_closure(fsens, rs[0])
            for j in range(m):
                cols[j][k] = rs[1 + j]
        pos = tuple(sq.sens(col, Abox) for sq, col in zip(seqs, cols))
        return ((), fsens) + pos

    return ProcResult(out, map_backprop)


def _map_floats(function: Any, seqs: list) -> ProcResult | None:
    """``map`` of a primitive with inline gradient lambdas over lists of floats, at C speed forward."""
    rule = fast_rule(function, len(seqs))
    if rule is None or not all(all_float(sq.items) for sq in seqs):
        return None
    fn, grads = rule
    lists = [sq.items for sq in seqs]
    out = list(map(fn, *lists))
    if not all_float(out):
        return None
    n = len(out)
    lists = [lst if len(lst) == n else lst[:n] for lst in lists]

    def map_floats_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        so = out_sens(out, A, Abox)
        if so is None:
            return ((), gen_zero) + (gen_zero,) * len(seqs)
        for a in so:
            if type(a) is not float and a is not gen_zero and a is not None:
                # a non-float sensitivity somewhere: the full rule, element by element
                cols: list[Any] = [[gen_zero] * n for _ in seqs]
                t = lift(function)
                for k in range(n):
                    if so[k] is gen_zero or so[k] is None:
                        continue
                    rs = t(*[lst[k] for lst in lists]).backprop(so[k], Abox)
                    for j in range(len(seqs)):
                        cols[j][k] = rs[1 + j]
                return ((), ()) + tuple(sq.sens(c, Abox) for sq, c in zip(seqs, cols))
        cols = []
        for g in grads:
            if g is None:
                cols.append(None)
            else:
                cols.append(
                    [
                        gen_zero if a is gen_zero or a is None else g(a, r, *xs)
                        for a, r, *xs in zip(so, out, *lists)
                    ]
                )
        return ((), ()) + tuple(sq.sens(c, Abox) for sq, c in zip(seqs, cols))

    return ProcResult(out, map_floats_backprop)


register_primitive(
    map,
    _named(map_plus, map),
    note="map(f, *iterables): a list inside differentiated code; f is called through its "
    "transform, its sensitivity is the sum of the closure sensitivities of all calls.",
)


def filter_plus(function: Any, iterable: Any) -> ProcResult:
    s = seq(iterable, "filter", "iterable")
    items = s.items
    pred = bool if function is None else as_plain_callable(function)
    keep = [i for i, x in enumerate(items) if pred(x)]
    out = [items[i] for i in keep]
    n = len(items)

    def filter_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        so = out_sens(out, A, Abox)
        if so is None:
            return ((), gen_zero, gen_zero)
        el: list = [gen_zero] * n
        for k, i in enumerate(keep):
            el[i] = so[k]
        return ((), gen_zero, s.sens(el, Abox))

    return ProcResult(out, filter_backprop)


register_primitive(
    filter,
    _named(filter_plus, filter),
    note="filter(pred, iterable): a list inside differentiated code; pred is used for the primal "
    "only, the kept elements receive their sensitivities.",
)


# ---------------------------------------------------------------------------
# iter and next: the elements a list iterator gives get their sensitivities


def iter_plus(*args: Any) -> ProcResult:
    from dplus.runtime.routers import ListIterator

    if len(args) == 1 and type(args[0]) is list:
        return ProcResult(ListIterator(args[0]), lambda A, Abox: ((), gen_zero))
    if len(args) == 1 and type(args[0]) is tuple:
        # over a list of its items, whose sensitivities list()'s rule gives back as the tuple's
        from .container_methods import list_plus

        items = apply_transform(list_plus, args[0])
        taken = items.backprop
        return ProcResult(ListIterator(items.primal), lambda A, Abox: taken(gen_zero, Abox))
    return ProcResult(_b.iter(*args), lambda A, Abox: ((),) + (gen_zero,) * len(args))


def next_plus(it: Any, *default: Any) -> ProcResult:
    from dplus.runtime.generators import Generator
    from dplus.runtime.handover import handover, is_tracked_mutable
    from dplus.runtime.linear import add
    from dplus.runtime.routers import ListIterator, LiveIteration

    if type(it) is LiveIteration:
        return _next_live(it, default)
    if type(it) is Generator:
        from .generators import generator_next_plus

        return generator_next_plus(it, *default)

    if type(it) is list:
        # (plain Python raises TypeError here too; inside a derivative differentiated again
        # the usual list is a generator's values, which dplus collects there: say so)
        raise NonDifferentiableError(
            "next() of a list: 'list' object is not an iterator. At a higher order of "
            "differentiation (hessian, grad of grad) dplus makes the values of a generator, a "
            "generator expression or a zip/map/filter/enumerate/reversed at once into a list, "
            "so next() of one is not supported there: take the values as a list "
            "(vs = list(...); vs[0], vs[1])"
        )
    own_next = program_method(type(it), "__next__")
    if own_next is not None:
        return _own_next(own_next, it, default)
    listed = type(it) is ListIterator
    pos = it.index if listed else -1
    n = len(it.source) if listed else -1
    v = _b.next(it, *default)
    took = listed and it.index != pos  # (else: the default)
    if took:
        if it.by_next is None:
            it.by_next = set()
        it.by_next.add(pos)
    fallback = bool(default) and (not took if listed else v is default[0])

    def next_backprop(A: Any, Abox: Any) -> tuple:
        tail = (A,) if fallback else (gen_zero,) * len(default)
        if fallback or A is gen_zero or A is None:
            return ((), gen_zero) + tail
        if took:
            if is_tracked_mutable(v):
                handover(Abox, v, A)
            else:
                entry = Abox.list_entry(it.source, n)
                entry[pos] = add(entry[pos], A)
            return ((), gen_zero) + tail
        if is_zero_sensitivity(A):
            return ((), gen_zero) + tail
        raise NonDifferentiableError(
            f"next(): sensitivity reached an element taken from a {type(it).__name__}, which has nowhere to "
            "send it. Fix: take the elements from iter() of a list, or index the list"
        )

    return ProcResult(v, next_backprop)


def _own_next(method: Any, it: Any, default: tuple) -> ProcResult:
    """``next`` of an object whose class defines ``__next__`` in Python: that method through
    its transform (it may compute the element from the program's values), as ``xs[i]`` runs a
    class's own ``__getitem__``; its ``StopIteration`` gives the default, as Python does."""
    try:
        r = _python_method_call(method, it)
    except StopIteration:
        if not default:
            raise
        return ProcResult(default[0], lambda A, Abox: ((), gen_zero, A))
    taken = r.backprop
    return ProcResult(r.primal, lambda A, Abox: tuple(taken(A, Abox)) + (gen_zero,) * len(default))


def _next_live(it: Any, default: tuple) -> ProcResult:
    """``next`` of a live ``zip``/``map``/... iterator: the item taken sends its sensitivity to
    the positions it read (as a loop's iteration does)."""
    from dplus.runtime.routers import iteration_router

    taken = it.taken
    v = _b.next(it, *default)
    took = it.taken != taken

    def next_live_backprop(A: Any, Abox: Any) -> tuple:
        if not took:
            return ((), gen_zero) + (A,) * len(default)
        if A is not gen_zero and A is not None:
            iteration_router(it, 1, lengths).back(0, A, Abox)
        return ((), gen_zero) + (gen_zero,) * len(default)

    lengths = None
    if took:
        from dplus.runtime.routers import list_length

        lengths = list_length(it)
    return ProcResult(v, next_live_backprop)


register_primitive(
    iter,
    _named(iter_plus, iter),
    note="iter(xs): for a list, an iterator whose elements (taken by next or a for loop) "
    "send their sensitivities back to the list",
)
register_primitive(
    next,
    _named(next_plus, next),
    note="next(it, default): the element taken gets the sensitivity (from iter() of a list), "
    "or the default when it is returned; a class's own Python __next__ runs through its transform",
)
