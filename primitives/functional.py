"""Rules for higher-order and iterator tools: ``functools.reduce`` and ``itertools``.

Covered: ``functools.reduce`` (with and without ``initial``; its rule is in
:mod:`primitives.functional_reduce`), ``itertools.accumulate``
(default addition and with a function, ``initial=``), ``chain``,
``chain.from_iterable``, ``product`` (``repeat=``), ``repeat``, ``islice``,
``starmap``, ``compress``, ``takewhile``, ``dropwhile``, ``pairwise`` and
``zip_longest`` (``fillvalue=`` gets the summed sensitivity of its uses).
Predicates (``takewhile``, ``dropwhile``) and selectors (``compress``) only choose
elements: they are used for the primal and get zero sensitivity.

Conventions (the same as for the builtins, see ``builtins.py``):

* **Eager results.** Inside differentiated code these return *lists* (``reduce``
  returns its value). ``islice`` stops early, so it may slice an infinite iterator;
  the others consume their whole input, and raise a :class:`dplus.DplusError` for a
  known infinite iterator (``count``, ``cycle``, ``repeat(x)``) instead of hanging.
* ``repeat(x, n)`` is the list ``[x] * n`` (the same object ``n`` times, as the
  iterator gives); its sensitivity is summed into ``x``. ``repeat(x)`` with no ``n``
  stays the infinite iterator, and *its* sensitivity is the (summed) sensitivity of
  ``x``: ``zip``, ``map``, ``starmap``-style consumers and ``islice`` send the
  sensitivities of its elements back that way, so ``map(mul, xs, repeat(y))`` is
  differentiable in ``y``.
* Sensitivities of iterable arguments conform to them (list, tuple, array; nothing for
  ``range``/``str``); sensitivity that would have to flow into an iterator, generator,
  set or dict keys raises :class:`dplus.NonDifferentiableError` (pass a list instead).
* **Function arguments** are called through ``dplus.runtime.core.lift``: plus-functions,
  registered primitives, or unknown callables under the current policy (the default
  raises :class:`dplus.UnknownTransformError` only when sensitivity reaches an
  unknown function's result). Their backpropagators run in reverse order of the
  calls, with the shared box-sensitivity map; the function argument's sensitivity is
  the sum of the closure sensitivities of all calls.
* ``accumulate`` without ``func`` adds with ``operator.add``'s rule (a reversed
  cumulative sum of the sensitivities for numbers).
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

from dplus.runtime.core import as_plain_callable
from dplus.runtime.linear import add, gen_zero
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from ._iterables import (
    REPEAT,
    Calls,
    add_closure,
    ensure_abox,
    items_of,
    lazy_seq,
    out_sens,
    proj,
    seq,
    settle,
    sum_sens,
)

_MISSING = object()


def _named(transform: Any, name: str) -> Any:
    transform.__name__ = transform.__qualname__ = f"{name}_plus"
    return transform


def _bind(sig: Any, fn: Any, args: tuple, kwargs: dict) -> tuple:
    """Bind ``args`` to ``sig``; on a bad call, let ``fn`` raise its own error."""
    try:
        return sig(*args, **kwargs)
    except TypeError:
        fn(*args, **kwargs)
        raise


# ---------------------------------------------------------------------------
# itertools.accumulate


def _accumulate_sig(iterable: Any, func: Any = None, *, initial: Any = None) -> tuple:
    return iterable, func, initial


def accumulate_plus(*args: Any, **kwargs: Any) -> ProcResult:
    iterable, func, initial = _bind(_accumulate_sig, itertools.accumulate, args, kwargs)
    s = seq(iterable, "accumulate", "iterable")
    items = s.items
    n = len(items)
    has_init = initial is not None
    fast = (
        func is None
        and all(type(x) in (float, int, complex) for x in items)
        and (not has_init or type(initial) in (float, int, complex))
    )
    if fast:
        out = list(itertools.accumulate(items, initial=initial))
        calls = None
    else:
        out, calls = _accumulated_calls(func, items, initial, has_init)
    vals = tuple(out)
    m = len(vals)
    off = 1 if has_init else 0  # out[k] combines items[k - off]

    def _result(fs: Any, el: list, s_init: Any, Abox: Any) -> tuple:
        return _accumulate_result(s.sens(el, Abox), args, kwargs, fs, s_init)

    def accumulate_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        so = out_sens(out, A, Abox)
        el: list = [gen_zero] * n
        fs: Any = gen_zero
        if calls is None:
            # numbers added: reversed cumulative sum
            if so is None:
                return _result(fs, el, gen_zero, Abox)
            a: Any = gen_zero
            for k in range(m - 1, off - 1, -1):
                a = add(a, so[k])
                el[k - off] = proj(a, items[k - off])
            s_init = gen_zero
            if has_init:
                s_init = proj(add(a, so[0]), initial)
            return _result(fs, el, s_init, Abox)
        # general: out[k] = f(out[k-1], items[k - off]) for k >= 1
        a = gen_zero
        for k in range(m - 1, -1, -1):
            if so is not None:
                a = add(a, settle(vals[k], so[k], Abox))
            if k == 0:
                break
            rs = calls.back(k - 1, a, Abox)
            if rs is None:
                a = gen_zero
                continue
            fs = add_closure(fs, rs[0])
            el[k - off] = rs[2]
            a = rs[1]
        if m == 0:
            return _result(fs, el, gen_zero, Abox)
        if has_init:
            return _result(fs, el, a, Abox)
        el[0] = add(el[0], a)
        return _result(fs, el, gen_zero, Abox)

    return ProcResult(out, accumulate_backprop)


def _accumulated_calls(func: Any, items: Any, initial: Any, has_init: bool) -> tuple:
    """``accumulate``'s results computed by calls of ``func`` (its transform, recorded)."""
    n = len(items)
    calls = Calls(operator.add if func is None else func)
    out = []
    if has_init:
        acc = initial
        lo = 0
    elif n:
        acc = items[0]
        lo = 1
    else:
        acc = _MISSING
        lo = 0
    if acc is not _MISSING:
        out.append(acc)
    for i in range(lo, n):
        acc = calls.call((acc, items[i]))
        out.append(acc)
    return out, calls


def _accumulate_result(s_items: Any, args: tuple, kwargs: dict, fs: Any, s_init: Any) -> tuple:
    """``accumulate``'s backprop result: the items', the function's and the initial value's
    sensitivities, positional or by keyword as they were passed."""
    pos: tuple = ((), s_items)
    if len(args) >= 2:
        pos = pos + (fs,)
    if kwargs:
        kw = {}
        for k in kwargs:
            kw[k] = fs if k == "func" else s_init if k == "initial" else gen_zero
        pos = pos + (kw,)
    return pos


register_primitive(
    itertools.accumulate,
    _named(accumulate_plus, "accumulate"),
    note="itertools.accumulate(iterable, func=operator.add, initial=None): a list inside "
    "differentiated code; func through its transform.",
)


# ---------------------------------------------------------------------------
# chain, chain.from_iterable


def _chain_pieces(seqs: list, es: list | None, Abox: Any) -> list:
    out = []
    pos = 0
    for sq in seqs:
        n = len(sq.items)
        out.append(sq.sens(None if es is None else es[pos : pos + n], Abox))
        pos += n
    return out


def chain_plus(*iterables: Any) -> ProcResult:
    seqs = [seq(x, "chain", f"iterables[{j}]") for j, x in enumerate(iterables)]
    out = [x for sq in seqs for x in sq.items]

    def chain_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        es = out_sens(out, A, Abox)
        if es is None:
            return ((),) + (gen_zero,) * len(seqs)
        return ((),) + tuple(_chain_pieces(seqs, es, Abox))

    return ProcResult(out, chain_backprop)


register_primitive(
    itertools.chain,
    _named(chain_plus, "chain"),
    note="itertools.chain(*iterables): a list inside differentiated code; the sensitivity is split back.",
)


def chain_from_iterable_plus(iterable: Any) -> ProcResult:
    outer = seq(iterable, "chain.from_iterable", "iterable")
    seqs = [seq(x, "chain.from_iterable", f"iterable[{j}]") for j, x in enumerate(outer.items)]
    out = [x for sq in seqs for x in sq.items]

    def chain_from_iterable_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        es = out_sens(out, A, Abox)
        if es is None:
            return ((), gen_zero)
        pieces = _chain_pieces(seqs, es, Abox)
        return ((), outer.sens(pieces, Abox))

    return ProcResult(out, chain_from_iterable_backprop)


register_primitive(
    itertools.chain.from_iterable,
    _named(chain_from_iterable_plus, "chain.from_iterable"),
    note="itertools.chain.from_iterable(iterables): a list inside differentiated code.",
)


# ---------------------------------------------------------------------------
# product


def product_plus(*iterables: Any, **kwargs: Any) -> ProcResult:
    if any(k != "repeat" for k in kwargs):
        itertools.product(*iterables, **kwargs)  # raises
    rep = kwargs.get("repeat", 1)
    if not isinstance(rep, int) or rep < 0:
        itertools.product(*iterables, **kwargs)  # raises
    seqs = [seq(x, "product", f"iterables[{j}]") for j, x in enumerate(iterables)]
    pools = [sq.items for sq in seqs] * rep
    index_tuples = list(itertools.product(*[range(len(p)) for p in pools]))
    out = [tuple(pools[j][i] for j, i in enumerate(t)) for t in index_tuples]
    m = len(seqs)
    width = len(pools)

    def product_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        es = out_sens(out, A, Abox)
        if es is None:
            res = ((),) + (gen_zero,) * m
        else:
            els = [[gen_zero] * len(sq.items) for sq in seqs]
            for t, sk in zip(index_tuples, es):
                if sk is gen_zero or sk is None:
                    continue
                parts = items_of(sk, width)
                for j, i in enumerate(t):
                    p = parts[j]
                    if p is not gen_zero and p is not None:
                        col = els[j % m]
                        col[i] = add(col[i], p)
            res = ((),) + tuple(sq.sens(el, Abox) for sq, el in zip(seqs, els))
        return res + ({k: gen_zero for k in kwargs},) if kwargs else res

    return ProcResult(out, product_backprop)


register_primitive(
    itertools.product,
    _named(product_plus, "product"),
    note="itertools.product(*iterables, repeat=1): a list of tuples inside differentiated code.",
)


# ---------------------------------------------------------------------------
# repeat


def _repeat_sig(object: Any, times: Any = _MISSING) -> tuple:
    return object, times


def repeat_plus(*args: Any, **kwargs: Any) -> ProcResult:
    obj, times = _bind(_repeat_sig, itertools.repeat, args, kwargs)
    names = ("object", "times")

    def _res(s_obj: Any) -> tuple:
        sens = {"object": s_obj, "times": gen_zero}
        res = ((),) + tuple(sens[names[i]] for i in range(len(args)))
        return res + ({k: sens[k] for k in kwargs},) if kwargs else res

    if times is _MISSING:
        # infinite: stays an iterator; its sensitivity is its element's
        return ProcResult(itertools.repeat(obj), lambda A, Abox: _res(A))
    out = list(itertools.repeat(obj, times))

    def repeat_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        es = out_sens(out, A, Abox)
        return _res(gen_zero if es is None else sum_sens(es))

    return ProcResult(out, repeat_backprop)


register_primitive(
    itertools.repeat,
    _named(repeat_plus, "repeat"),
    note="itertools.repeat(x, n): the list [x]*n inside differentiated code; repeat(x) stays "
    "infinite and its sensitivity is x's.",
)


# ---------------------------------------------------------------------------
# islice


def islice_plus(iterable: Any, *bounds: Any) -> ProcResult:
    s = lazy_seq(iterable, "islice", "iterable")
    if s.items is not None:
        idx = list(itertools.islice(range(len(s.items)), *bounds))
        out = [s.items[i] for i in idx]
    else:
        idx = None
        out = list(itertools.islice(s.source(), *bounds))
    vals = tuple(out)
    nb = len(bounds)

    def islice_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        es = out_sens(out, A, Abox)
        if es is None:
            return ((), gen_zero) + (gen_zero,) * nb
        if idx is not None:
            el: list = [gen_zero] * len(s.items)
            for k, i in enumerate(idx):
                el[i] = es[k]
            return ((), s.sens(el, Abox)) + (gen_zero,) * nb
        if s.kind == REPEAT:
            return ((), s.sens(list(es), Abox)) + (gen_zero,) * nb
        # an iterator: mutable elements take their own sensitivities; others cannot be reached
        s.items = list(vals)
        return ((), s.sens(list(es), Abox)) + (gen_zero,) * nb

    return ProcResult(out, islice_backprop)


register_primitive(
    itertools.islice,
    _named(islice_plus, "islice"),
    note="itertools.islice(iterable, [start,] stop[, step]): a list inside differentiated code; "
    "the iterable may be infinite.",
)


# ---------------------------------------------------------------------------
# starmap


def starmap_plus(function: Any, iterable: Any) -> ProcResult:
    outer = seq(iterable, "starmap", "iterable")
    inners = [seq(x, "starmap", f"iterable[{k}]") for k, x in enumerate(outer.items)]
    calls = Calls(function)
    out = [calls.call(tuple(inner.items)) for inner in inners]
    n = len(inners)

    def starmap_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        so = out_sens(out, A, Abox)
        fs: Any = gen_zero
        el: list = [gen_zero] * n
        for k in range(n - 1, -1, -1):
            rs = calls.back(k, gen_zero if so is None else so[k], Abox)
            if rs is None:
                continue
            fs = add_closure(fs, rs[0])
            inner = inners[k]
            el[k] = settle(inner.value, inner.sens(list(rs[1:]), Abox), Abox)
        return ((), fs, outer.sens(el, Abox))

    return ProcResult(out, starmap_backprop)


register_primitive(
    itertools.starmap,
    _named(starmap_plus, "starmap"),
    note="itertools.starmap(f, iterable): a list inside differentiated code; f through its transform.",
)


# ---------------------------------------------------------------------------
# selections: compress, takewhile, dropwhile; pairwise; zip_longest


def _selection_plus(
    name: str, out_idx: list, s: Any, out: list, nargs: int, data_pos: int
) -> ProcResult:
    """``out[k] = s.items[out_idx[k]]``: sensitivities go back to the selected elements."""

    def selection_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        es = out_sens(out, A, Abox)
        res = [gen_zero] * nargs
        if es is not None:
            el: list = [gen_zero] * len(s.items)
            for k, i in enumerate(out_idx):
                el[i] = add(el[i], es[k])
            res[data_pos] = s.sens(el, Abox)
        return ((),) + tuple(res)

    selection_backprop.__name__ = selection_backprop.__qualname__ = f"{name}_backprop"
    return ProcResult(out, selection_backprop)


def compress_plus(data: Any, selectors: Any) -> ProcResult:
    s = seq(data, "compress", "data")
    idx = list(itertools.compress(range(len(s.items)), selectors))
    return _selection_plus("compress", idx, s, [s.items[i] for i in idx], 2, 0)


def takewhile_plus(predicate: Any, iterable: Any) -> ProcResult:
    s = seq(iterable, "takewhile", "iterable")
    pred = as_plain_callable(predicate)
    n = 0
    for x in s.items:
        if not pred(x):
            break
        n += 1
    return _selection_plus("takewhile", list(range(n)), s, list(s.items[:n]), 2, 1)


def dropwhile_plus(predicate: Any, iterable: Any) -> ProcResult:
    s = seq(iterable, "dropwhile", "iterable")
    pred = as_plain_callable(predicate)
    n = 0
    for x in s.items:
        if not pred(x):
            break
        n += 1
    m = len(s.items)
    return _selection_plus("dropwhile", list(range(n, m)), s, list(s.items[n:]), 2, 1)


for _fn, _t, _what in (
    (itertools.compress, compress_plus, "compress(data, selectors): the selected elements of data"),
    (
        itertools.takewhile,
        takewhile_plus,
        "takewhile(pred, iterable): the leading elements that pass pred",
    ),
    (
        itertools.dropwhile,
        dropwhile_plus,
        "dropwhile(pred, iterable): the elements after the leading ones that pass pred",
    ),
):
    register_primitive(
        _fn,
        _named(_t, _fn.__name__),
        note=f"itertools.{_what}, as a list inside differentiated code; the choice has zero sensitivity.",
    )


def pairwise_plus(iterable: Any) -> ProcResult:
    s = seq(iterable, "pairwise", "iterable")
    items = s.items
    out = list(itertools.pairwise(items))
    m = len(out)

    def pairwise_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        es = out_sens(out, A, Abox)
        if es is None:
            return ((), gen_zero)
        el: list = [gen_zero] * len(items)
        for k in range(m):
            a, b = items_of(es[k], 2)
            el[k] = add(el[k], a)
            el[k + 1] = add(el[k + 1], b)
        return ((), s.sens(el, Abox))

    return ProcResult(out, pairwise_backprop)


register_primitive(
    itertools.pairwise,
    _named(pairwise_plus, "pairwise"),
    note="itertools.pairwise(iterable): a list of overlapping pairs inside differentiated code.",
)


def zip_longest_plus(*iterables: Any, **kwargs: Any) -> ProcResult:
    if any(k != "fillvalue" for k in kwargs):
        itertools.zip_longest(*iterables, **kwargs)  # raises
    fill = kwargs.get("fillvalue", None)
    seqs = [seq(x, "zip_longest", f"iterables[{j}]") for j, x in enumerate(iterables)]
    out = list(itertools.zip_longest(*[sq.items for sq in seqs], fillvalue=fill))
    m = len(seqs)

    def zip_longest_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        es = out_sens(out, A, Abox)
        if es is None:
            res = ((),) + (gen_zero,) * m
            return res + ({k: gen_zero for k in kwargs},) if kwargs else res
        cols = [[gen_zero] * len(sq.items) for sq in seqs]
        s_fill: Any = gen_zero
        for k, sk in enumerate(es):
            parts = items_of(sk, m)
            for j in range(m):
                if k < len(cols[j]):
                    cols[j][k] = parts[j]
                elif parts[j] is not gen_zero and parts[j] is not None:
                    s_fill = add(s_fill, parts[j])
        res = ((),) + tuple(sq.sens(col, Abox) for sq, col in zip(seqs, cols))
        return res + ({k: s_fill for k in kwargs},) if kwargs else res

    return ProcResult(out, zip_longest_backprop)


register_primitive(
    itertools.zip_longest,
    _named(zip_longest_plus, "zip_longest"),
    note="itertools.zip_longest(*iterables, fillvalue=None): a list of tuples inside differentiated "
    "code; fillvalue receives the summed sensitivity of its uses.",
)
