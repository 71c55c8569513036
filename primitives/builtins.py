"""Rules for Python's builtin functions.

Conventions (see also ``_iterables``):

* **Eager results.** Inside differentiated code ``map``, ``filter``, ``zip``,
  ``enumerate`` and ``reversed`` return *lists*, not iterators (and ``sorted``
  returns a list as always), except where the program could tell: a ``for`` loop over
  them that may change what they read, or a call kept in a variable, gets Python's own
  lazy iterator (``runtime.routers.live_iteration``; its items' sensitivities are routed back). Iterating over them works as usual; code that relies on
  their laziness (``next(map(...))`` on an infinite input, side effects interleaved
  with consumption) behaves differently. ``zip`` and ``map`` still stop at their
  shortest input, so an infinite iterator (``itertools.count()``, ``repeat(x)``) may
  be zipped with a finite list.
* **Sensitivities of iterable arguments** conform to them: a list gets a list, a
  tuple a tuple, a NumPy array an array; ``range``, ``str`` and ``bytes`` get none.
  Iterators, generators, sets, dict keys and other iterables are materialized for
  the primal, but sensitivity cannot be sent back into them: when a non-zero
  sensitivity would reach one of their elements, the backward pass raises
  :class:`dplus.NonDifferentiableError` naming the function and argument (fix: pass
  a list or tuple). An infinite ``itertools.repeat(x)`` is the exception: its
  sensitivity is the (summed) sensitivity of ``x``.
* ``iter(xs)`` of a list returns a :class:`dplus.runtime.routers.ListIterator` (Python's list
  iterator, whose list and position stay known): the elements ``next`` and ``for`` loops
  take from it send their sensitivities to the list.
* **Function arguments** (``map``) are called through ``dplus.runtime.core.lift``, so a
  plus-function, a registered primitive, or an unknown callable (under the current
  unknown-transform policy) may be passed; the function argument's sensitivity is
  the sum of the closure sensitivities of all calls. ``key=`` functions (``min``,
  ``max``, ``sorted``) and ``filter``'s predicate only choose elements: they are
  called for their primal value and get zero sensitivity.
* **Speed.** A function argument that is a primitive with inline gradient lambdas
  (``dplus.rules.defvjp``: ``math.sin``, ``operator.mul``, ...) called on floats with
  a float result skips its transform, as the transformer's float fast paths do;
  ``map`` of such a primitive over lists of floats runs forward at C speed. Other
  calls (ints, complex numbers, arrays, non-float sensitivities) take the full rule.
* **min / max**: the whole sensitivity goes to the element returned, i.e. the
  *first* extremal element when there are ties (Python's own choice). ``default=``
  receives the sensitivity when it is returned.
* **Complex numbers** follow the convention of ``operators.py`` (JAX / autograd): a
  sensitivity ``c`` of ``z`` pairs with changes as ``Re(c * dz)``, and a real argument
  receives the real part of its sensitivity. So ``complex(re, im)`` gives a real ``re``
  ``Re(A)`` and a real ``im`` ``-Im(A)``; complex arguments get ``A`` and ``1j * A``.
* ``abs`` and ``pow`` are registered with the operator rules (``operators.py``:
  ``abs`` like ``operator.abs``, ``pow(x, y)`` like ``x ** y``, ``pow(x, y, mod)``
  non-differentiable).
* **Piecewise-constant functions** have zero derivative everywhere: ``int``,
  ``round``, and the quotient of ``divmod`` (its remainder ``x - q*y`` has
  derivatives ``1`` and ``-q``, like ``%``).
* ``float(x)`` passes the sensitivity through to numbers and arrays of size 1.
* Non-differentiable (zero derivative, results never carry sensitivity): ``range``,
  ``len``, ``isinstance``, ``issubclass``, ``type``, ``bool``, ``any``, ``all``,
  ``id``, ``hash``, ``repr``, ``str``, ``print``, ``callable``, ``hasattr``, ``ord``,
  ``chr``, ``format``, ``bin``, ``oct``, ``hex``, ``ascii``, ``int``, ``round``.
"""

from __future__ import annotations

import builtins as _b
import operator
import sys
import typing
from collections.abc import Sequence
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.rules import definline, defnondiff
from dplus.runtime.core import ItemColumns, as_plain_callable, lift
from dplus.runtime.linear import gen_zero, is_ndarray, is_number, is_zero_sensitivity
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
    proj,
    seq,
    unbroadcast,
)

_MISSING = object()


def _np() -> Any:
    return sys.modules.get("numpy")


def _named(transform: Any, fn: Any) -> Any:
    transform.__name__ = transform.__qualname__ = f"{fn.__name__}_plus"
    return transform


def _kw_out(kwargs: dict, **sens: Any) -> dict:
    return {k: sens.get(k, gen_zero) for k in kwargs}


def _result(args: tuple, kwargs: dict, pos: tuple, **kw: Any) -> tuple:
    """``((), *pos)`` and, when keywords were passed, the dict of their sensitivities."""
    out = ((),) + pos
    if kwargs:
        out = out + (_kw_out(kwargs, **kw),)
    return out


def _bind(sig: Any, fn: Any, args: tuple, kwargs: dict) -> tuple:
    """Bind ``args`` to ``sig``; on a bad call, let ``fn`` raise its own error."""
    try:
        return sig(*args, **kwargs)
    except TypeError:
        fn(*args, **kwargs)
        raise


def _zeros(args: tuple, kwargs: dict) -> tuple:
    out: tuple[Any, ...] = ((),) + (gen_zero,) * len(args)
    if kwargs:
        out = out + ({k: gen_zero for k in kwargs},)
    return out


# ---------------------------------------------------------------------------
# sum


def _sum_sig(iterable: Any, /, start: Any = 0) -> tuple:
    return iterable, start


def sum_plus(*args: Any, **kwargs: Any) -> ProcResult:
    iterable, start = _bind(_sum_sig, sum, args, kwargs)
    s = seq(iterable, "sum", "iterable")
    items = s.items
    result = _b.sum(items, start)
    start_kw = "start" in kwargs

    if isinstance(result, (list, tuple)) and items:
        # concatenation: each piece of the result goes back to the value it came from
        lengths = [len(start)] + [len(x) for x in items]
        total = sum(lengths)
        new_list = type(result) is list or isinstance(result, list)

        def sum_concat_backprop(A: Any, Abox: Any) -> tuple:
            Abox = ensure_abox(Abox)
            if new_list:
                found = out_sens(result, A, Abox)
                es: Sequence[Any] = [gen_zero] * total if found is None else list(found)
            else:
                es = items_of(A, total)
            pieces = []
            pos = 0
            for piece, n in zip([start] + list(items), lengths):
                part = es[pos : pos + n]
                pos += n
                pieces.append(part if isinstance(piece, list) else tuple(part))
            s_start, s_items = pieces[0], s.sens(pieces[1:], Abox)
            if start_kw:
                return _result(args[:1], kwargs, (s_items,), start=s_start)
            return ((),) + ((s_items, s_start) if len(args) == 2 else (s_items,))

        return ProcResult(result, sum_concat_backprop)

    n = len(items)

    def sum_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or A is None:
            return _zeros(args, kwargs)
        if type(A) is float:
            el = [A] * n
        else:
            el = [unbroadcast(A, x) for x in items]
        s_items = s.sens(el, Abox)
        s_start = unbroadcast(A, start)
        if start_kw:
            return ((), s_items, {"start": s_start})
        return ((), s_items, s_start) if len(args) == 2 else ((), s_items)

    return ProcResult(result, sum_backprop)


register_primitive(
    sum,
    _named(sum_plus, sum),
    note="sum(iterable, start=0): every element and start get the result's sensitivity "
    "(summed over broadcast axes for arrays); concatenations of lists/tuples split it back.",
)


# ---------------------------------------------------------------------------
# min, max


def _first_extremum(fn: Any, better: Any, keys: Any) -> int:
    """The index of the element ``fn`` (min or max) picks: the first extremal one."""
    best = fn(keys)  # at C speed; then the first element equal to it is the one picked,
    try:  # unless comparisons are inconsistent (checked by identity)
        idx = keys.index(best)
        if keys[idx] is best:
            return idx
    except (ValueError, TypeError):
        pass
    best = keys[0]
    idx = 0
    for i in range(1, len(keys)):
        k = keys[i]
        if better(k, best):
            best, idx = k, i
    return idx


# (an index: piecewise constant. Rule code differentiated again calls it as it is, and does
# not differentiate its comparisons, and its call of min or max, from source)
defnondiff(_first_extremum, note="internal: the index min or max picks")


def _extremum(fn: Any, better: Any) -> Any:
    name = fn.__name__

    def extremum_plus(*args: Any, **kwargs: Any) -> ProcResult:
        if not args or any(k not in ("key", "default") for k in kwargs):
            fn(*args, **kwargs)  # raises the builtin's own TypeError
        key = kwargs.get("key", None)
        default = kwargs.get("default", _MISSING)
        if len(args) == 1:
            s = seq(args[0], name, "iterable")
            items = s.items
        else:
            if default is not _MISSING:
                fn(*args, **kwargs)  # TypeError: default with several positional arguments
            s = None
            items = args
        n = len(items)
        if n == 0:
            if default is _MISSING:
                fn([], **kwargs)  # ValueError: empty sequence
            idx = -1
            result = default
        else:
            keys = items if key is None else list(map(as_plain_callable(key), items))
            idx = _first_extremum(fn, better, keys)
            result = items[idx]

        def extremum_backprop(A: Any, Abox: Any) -> tuple:
            if A is gen_zero or A is None:
                return _zeros(args, kwargs)
            if idx < 0:
                s_default = A
                pos = (s.sens(None),) if s is not None else ()
                return ((),) + pos + (_kw_out(kwargs, default=s_default),)
            if s is not None:
                el: list = [gen_zero] * n
                el[idx] = A
                pos = (s.sens(el, ensure_abox(Abox)),)
            else:
                pl: list = [gen_zero] * n
                pl[idx] = A
                pos = tuple(pl)
            out = ((),) + pos
            return out + (_kw_out(kwargs),) if kwargs else out

        return ProcResult(result, extremum_backprop)

    return _named(extremum_plus, fn)


register_primitive(
    min,
    _extremum(min, operator.lt),
    note="min(*args or iterable, key=, default=): the sensitivity goes to the element returned "
    "(the first minimal one on ties); key= is used for the primal only.",
)
register_primitive(
    max,
    _extremum(max, operator.gt),
    note="max(*args or iterable, key=, default=): the sensitivity goes to the element returned "
    "(the first maximal one on ties); key= is used for the primal only.",
)
# min(a, b) and max(a, b) of two numbers inline into float fast paths (a ReLU's max(h, 0.0)),
# the sensitivity going to the argument returned, as above: the first one on ties
definline(
    min,
    lambda A, r, a, b: A if A is gen_zero or not b < a else 0.0,
    lambda A, r, a, b: A if A is gen_zero or b < a else 0.0,
)
definline(
    max,
    lambda A, r, a, b: A if A is gen_zero or not b > a else 0.0,
    lambda A, r, a, b: A if A is gen_zero or b > a else 0.0,
)


# ---------------------------------------------------------------------------
# float, complex, divmod


def float_plus(*args: Any) -> ProcResult:
    r = float(*args)

    def float_backprop(A: Any, Abox: Any) -> tuple:
        if not args:
            return ((),)
        x = args[0]
        if A is gen_zero or A is None or isinstance(x, (str, bytes, bytearray, bool)):
            return ((), gen_zero)
        if is_number(x):
            return ((), proj(A, x))
        if is_ndarray(x):
            np = _np()
            return ((), np.full(x.shape, proj(A, x), dtype=float))
        if is_zero_sensitivity(A):
            return ((), gen_zero)
        raise NonDifferentiableError(
            f"float(): sensitivity reached a {type(x).__name__} converted with its __float__, "
            "which has no derivative rule; register one with dplus.register_primitive"
        )

    return ProcResult(r, float_backprop)


register_primitive(
    float,
    _named(float_plus, float),
    note="float(x): identity derivative for numbers; none for strings.",
)


def _complex_sig(real: Any = 0, imag: Any = _MISSING) -> tuple:
    return real, imag


def complex_plus(*args: Any, **kwargs: Any) -> ProcResult:
    re, im = _bind(_complex_sig, complex, args, kwargs)
    r = complex(*args, **kwargs)

    def complex_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or A is None:
            return _zeros(args, kwargs)
        sens = {}
        if isinstance(re, (str, bytes)) or type(re) is bool:
            sens["real"] = gen_zero
        else:
            sens["real"] = proj(A, re)
        if im is not _MISSING:
            if type(im) is bool:
                sens["imag"] = gen_zero
            else:
                sens["imag"] = proj(A * 1j, im)
        names = ("real", "imag")
        pos = tuple(sens[names[i]] for i in range(len(args)))
        if kwargs:
            return ((),) + pos + ({k: sens.get(k, gen_zero) for k in kwargs},)
        return ((),) + pos

    return ProcResult(r, complex_backprop)


register_primitive(
    complex,
    _named(complex_plus, complex),
    note="complex(re, im): real arguments get Re(A) and -Im(A) (the Re(s*dz) pairing); "
    "complex ones A and 1j*A.",
)


def divmod_plus(x: Any, y: Any) -> ProcResult:
    q, rem = r = divmod(x, y)

    def divmod_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or A is None:
            return ((), gen_zero, gen_zero)
        Ar = items_of(A, 2)[1]
        if Ar is gen_zero or Ar is None:
            return ((), gen_zero, gen_zero)
        return ((), unbroadcast(Ar, x), unbroadcast(-Ar * q, y))

    return ProcResult(r, divmod_backprop)


register_primitive(
    divmod,
    _named(divmod_plus, divmod),
    note="divmod(x, y): the quotient has zero derivative; the remainder x - q*y has 1 and -q.",
)


# ---------------------------------------------------------------------------
# sorted, reversed


def _sorted_sig(iterable: Any, /, *, key: Any = None, reverse: bool = False) -> tuple:
    return iterable, key, reverse


def sorted_plus(*args: Any, **kwargs: Any) -> ProcResult:
    iterable, key, reverse = _bind(_sorted_sig, sorted, args, kwargs)
    s = seq(iterable, "sorted", "iterable")
    items = s.items
    n = len(items)
    if key is None:
        keys = items
    else:
        keyf = as_plain_callable(key)
        keys = [keyf(x) for x in items]
    perm = sorted(range(n), key=keys.__getitem__, reverse=reverse)
    out = [items[i] for i in perm]
    return ProcResult(out, _permutation_backprop(out, s, perm, n, args, kwargs))


def _permutation_backprop(out: list, s: Any, perm: list, n: int, args: tuple, kwargs: dict) -> Any:
    """The backprop of ``out[i] = items[perm[i]]``, ``out`` a new list."""

    def permutation_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        so = out_sens(out, A, Abox)
        if so is None:
            return _zeros(args, kwargs)
        el: list = [gen_zero] * n
        for i, p in enumerate(perm):
            el[p] = so[i]
        out_t = ((), s.sens(el, Abox)) + (gen_zero,) * (len(args) - 1)
        return out_t + ({k: gen_zero for k in kwargs},) if kwargs else out_t

    return permutation_backprop


register_primitive(
    sorted,
    _named(sorted_plus, sorted),
    note="sorted(iterable, key=, reverse=): a list; sensitivities follow the permutation; key= "
    "is used for the primal only.",
)


def reversed_plus(sequence: Any) -> ProcResult:
    r = list(reversed(sequence))  # the builtin's own checks: sequences and __reversed__ only
    s = lazy_seq(sequence, "reversed", "sequence")
    if s.items is None:
        s.items = r[::-1]
    n = len(r)
    perm = list(range(n - 1, -1, -1))
    return ProcResult(r, _permutation_backprop(r, s, perm, n, (sequence,), {}))


register_primitive(
    reversed,
    _named(reversed_plus, reversed),
    note="reversed(seq): a list inside differentiated code; sensitivities are reversed back.",
)


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
    return ProcResult(_b.iter(*args), lambda A, Abox: ((),) + (gen_zero,) * len(args))


def next_plus(it: Any, *default: Any) -> ProcResult:
    from dplus.runtime.core import handover, is_tracked_mutable
    from dplus.runtime.linear import add
    from dplus.runtime.routers import ListIterator, LiveIteration

    if type(it) is LiveIteration:
        return _next_live(it, default)

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
    "or the default when it is returned",
)


# ---------------------------------------------------------------------------
# non-differentiable builtins

for _fn in (
    range,
    len,
    isinstance,
    issubclass,
    type,
    bool,
    any,
    all,
    id,
    hash,
    repr,
    str,
    print,
    callable,
    hasattr,
    ord,
    chr,
    format,
    bin,
    oct,
    hex,
    ascii,
):
    defnondiff(_fn)

defnondiff(int, note="int(x): piecewise constant, zero derivative")
# super() is a view of the instance: what a method reached through it reads or changes is the
# instance's own state, whose sensitivities live in the box map by identity; the proxy itself
# carries none (and so its rule is the same at every order).
defnondiff(super, note="a view of the instance: sensitivities stay with the instance")


def cast_plus(typ: Any, value: Any) -> ProcResult:
    """``typing.cast(T, v)`` is ``v``: its sensitivity goes to ``v``, none to the type."""
    return ProcResult(value, lambda A, Abox: ((), None, A))


register_primitive(typing.cast, cast_plus, note="the identity on its value")
defnondiff(round, note="round(x, ndigits=None): piecewise constant, zero derivative")

del _fn


# ---------------------------------------------------------------------------
# eval / exec of a string: the string's code cannot be differentiated. Inside differentiated
# code, ``eval(s)`` and ``exec(s)`` run on the user's names (normalize passes them). Only a
# result (or a namespace entry ``exec`` wrote) that needs a sensitivity is an error: one that
# gets a sensitivity while the code read a differentiable value.


def _code_names(code: Any) -> set[str]:
    """The names the code (and code nested in it) reads."""
    import dis

    names = {
        ins.argval
        for ins in dis.get_instructions(code)
        if ins.opname.startswith("LOAD_")
        and isinstance(ins.argval, str)
        and ins.opname != "LOAD_CONST"
    }
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names |= _code_names(c)
    return names


def _carries_sensitivity(v: Any) -> bool:
    from dplus.runtime.core import is_tracked_mutable

    if type(v) is bool or v is None or callable(v) and not is_tracked_mutable(v):
        return False
    return (
        is_number(v) or is_ndarray(v) or isinstance(v, (tuple, list, dict)) or is_tracked_mutable(v)
    )


def _reads_differentiable(source: Any, namespaces: tuple) -> list[str]:
    """The names the code reads whose values carry sensitivity, in the namespaces it ran in."""
    code = source if hasattr(source, "co_names") else None
    if code is None:
        try:
            code = compile(source, "<string>", "exec")
        except (SyntaxError, TypeError, ValueError):
            return ["<unreadable code>"]
    found = []
    for n in sorted(_code_names(code)):
        for ns in namespaces:
            if isinstance(ns, dict) and n in ns:
                if _carries_sensitivity(ns[n]) and not _is_module_namespace(ns):
                    found.append(n)
                break
    return found


def _is_module_namespace(ns: dict) -> bool:
    """A module's globals: differentiated code gives the values read there no sensitivity."""
    name = ns.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, "__dict__", None) is ns


def _string_code_error(what: str, names: list[str]) -> NonDifferentiableError:
    return NonDifferentiableError(
        f"{what} of a string cannot be differentiated, and its result needs a sensitivity: the code "
        f"reads {', '.join(names)}; write the expression in the function itself"
    )


def eval_plus(source: Any, globals_: Any = None, locals_: Any = None) -> ProcResult:
    if globals_ is None:
        raise NonDifferentiableError(
            "eval inside differentiated code needs its namespaces; pass globals() and locals()"
        )
    r = _b.eval(source, globals_, locals_)
    nargs = 1 + (globals_ is not None) + (locals_ is not None)

    def eval_backprop(A: Any, Abox: Any) -> tuple:
        if not is_zero_sensitivity(A):
            names = _reads_differentiable(source, (locals_, globals_))
            if names:
                raise _string_code_error("eval", names)
        return ((),) + (gen_zero,) * nargs

    return ProcResult(r, eval_backprop)


def exec_plus(source: Any, globals_: Any = None, locals_: Any = None, **kwargs: Any) -> ProcResult:
    if globals_ is None:
        raise NonDifferentiableError(
            "exec inside differentiated code needs its namespaces; pass globals() and locals()"
        )
    spaces = [ns for ns in (globals_, locals_) if isinstance(ns, dict)]
    before = [dict(ns) for ns in spaces]
    _b.exec(source, globals_, locals_, **kwargs)
    written = [
        [k for k, v in ns.items() if k not in old or old[k] is not v]
        for ns, old in zip(spaces, before)
    ]
    nargs = 1 + (globals_ is not None) + (locals_ is not None)

    def exec_backprop(A: Any, Abox: Any) -> tuple:
        # what the code wrote: its sensitivity ends here (raising if the code read a
        # differentiable value); what it left alone keeps its sensitivity in the entry
        needs = False
        for ns, keys in zip(spaces, written):
            entry = Abox.get(ns)
            if entry is gen_zero or not isinstance(entry, dict):
                continue
            for k in keys:
                if not is_zero_sensitivity(entry.pop(k, gen_zero)):
                    needs = True
        if needs:
            names = _reads_differentiable(source, (locals_, globals_))
            if names:
                raise _string_code_error("exec", names)
        return ((),) + (gen_zero,) * nargs + ((None,) if kwargs else ())

    return ProcResult(None, exec_backprop)


register_primitive(
    _b.eval,
    eval_plus,
    note="eval of a string: runs on the user's names; no derivative through the string's code",
)
register_primitive(
    _b.exec,
    exec_plus,
    note="exec of a string: runs on the user's names; no derivative through the string's code",
)
