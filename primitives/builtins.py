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
from dplus.runtime.core import as_plain_callable
from dplus.runtime.kinds import is_atom, is_ndarray, is_number
from dplus.runtime.linear import gen_zero, is_zero_sensitivity
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from ._iterables import (
    all_float,
    ensure_abox,
    items_of,
    lazy_seq,
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
    start_kw = "start" in kwargs
    if _holds_objects(items, start):
        return _sum_of_objects(args, s, items, start, start_kw)
    result = _b.sum(items, start)

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


def _summable(x: Any) -> bool:
    return is_number(x) or is_ndarray(x) or isinstance(x, (list, tuple))


def _holds_objects(items: Sequence[Any], start: Any) -> bool:
    """Whether some term of the sum is neither a number, an array, nor a list or tuple
    (concatenated): an object whose ``+`` is the program's own code."""
    if type(start) is int and all_float(items):
        return False
    return not (_summable(start) and all(map(_summable, items)))


def _sum_of_objects(
    args: tuple, s: Any, items: Sequence[Any], start: Any, start_kw: bool
) -> ProcResult:
    """``sum`` of objects: ``start + items[0] + ...`` left to right, each ``+`` a call of
    ``operator.add`` through its rule (``__add__``/``__radd__`` differentiated or refused):
    ``functools.reduce``'s general rule, its sensitivities handed back through ``s``."""
    from .functional_reduce import reduce_recorded

    r = reduce_recorded(operator.add, items, start)
    inner = r.backprop

    def sum_objects_backprop(A: Any, Abox: Any) -> tuple:
        out = inner(A, Abox)
        el, a = out[2], out[3]
        s_items = s.sens(None if is_zero_sensitivity(el) else list(el), Abox)
        if start_kw:
            return ((), s_items, {"start": a})
        return ((), s_items, a) if len(args) == 2 else ((), s_items)

    return ProcResult(r.primal, sum_objects_backprop)


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
        if A is gen_zero or A is None or isinstance(x, bytearray) or is_atom(x):
            return ((), gen_zero)  # (a comparison's np.bool_ too: float(x >= 0) is a step)
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
# object.__new__(cls) makes an empty instance: nothing it holds comes from its arguments, and
# what is stored in it later is reversed by those stores (the constructor of a user class calls
# it, and at the second order that code is differentiated too)
defnondiff(object.__new__, note="an empty instance: zero derivative")


def cast_plus(typ: Any, value: Any) -> ProcResult:
    """``typing.cast(T, v)`` is ``v``: its sensitivity goes to ``v``, none to the type."""
    return ProcResult(value, lambda A, Abox: ((), None, A))


register_primitive(typing.cast, cast_plus, note="the identity on its value")

del _fn
