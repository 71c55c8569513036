"""Operator rules on sequences: concatenation (``+``) and repetition (``*``) of tuples and
lists, and their in-place forms on lists. See :mod:`primitives.operators`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.runtime.handover import handover
from dplus.runtime.linear import OneHot, gen_zero, tuple_items
from dplus.runtime.linear import add as _add
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .operator_operands import _is_seq, _is_text

_Z2 = ((), gen_zero, gen_zero)


# ---------------------------------------------------------------------------
# sequences: concatenation and repetition of tuples and lists


def _like(part: Sequence[Any], v: Any) -> Any:
    """Element sensitivities ``part`` shaped as the sensitivity of the sequence ``v``."""
    if isinstance(v, (tuple, list)):
        # a tuple for a list too: a list made here would be, differentiated again, a
        # mutable value of its own whose sensitivity the next order does not carry back
        return tuple(part)
    if _is_text(v) or isinstance(v, range):
        return gen_zero
    if all(p is gen_zero or p is None or p == 0 for p in part):
        return gen_zero
    raise NonDifferentiableError(
        f"sensitivity reached the elements of a {type(v).__name__} used in a sequence operation; "
        "pass a list or a tuple to differentiate through its elements"
    )


def _padded(entry: Any, n: int) -> tuple:
    """The element sensitivities of a list's entry in the box-sensitivity map, as ``n``.

    The rules below read the entry themselves (``handover``, ``Abox.pop``/``get``), not
    through a helper they call: differentiated a second time, a helper's reads of the map
    lost a term (the third derivative of ``ys = xs + []; ys[0] * x`` was 4x for 6x).
    """
    items = tuple_items(entry, n)
    if len(items) < n:
        items = items + (gen_zero,) * (n - len(items))
    return items


def _concat_plus(x: Any, y: Any, inplace: bool) -> ProcResult:
    if x is gen_zero or y is gen_zero:
        # a zero sensitivity added to a tuple's or list's (rule code differentiated again):
        # gen_zero is the identity of +, so the result is the other operand, whole
        if x is gen_zero:
            return ProcResult(y, lambda A, Abox: ((), gen_zero, A))
        return ProcResult(x, lambda A, Abox: ((), A, gen_zero))
    if inplace and isinstance(x, list):
        n = len(x)
        ys = y if isinstance(y, (list, tuple)) else list(y)
        m = len(ys)
        x += ys
        r = x

        def iadd_backprop(A: Any, Abox: Any) -> tuple:
            if A is not gen_zero and A is not None:
                handover(Abox, x, A)
            entry = Abox.get(x, gen_zero)
            if entry is gen_zero:
                return _Z2
            items = _padded(entry, n + m)
            Abox[x] = list(items[:n])
            return ((), gen_zero, _like(items[n : n + m], y))

        return ProcResult(r, iadd_backprop)
    r = x + y
    n, m = len(x), len(y)
    if isinstance(r, list):

        def list_concat_backprop(A: Any, Abox: Any) -> tuple:
            if A is not gen_zero and A is not None:
                handover(Abox, r, A)
            entry = Abox.pop(r, gen_zero)
            if entry is gen_zero:
                return _Z2
            items = _padded(entry, n + m)
            return ((), _like(items[:n], x), _like(items[n:], y))

        return ProcResult(r, list_concat_backprop)

    def tuple_concat_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or A is None:
            return _Z2
        if type(A) is OneHot:
            if A.index < n:
                return ((), OneHot(A.index, A.value, n), gen_zero)
            return ((), gen_zero, OneHot(A.index - n, A.value, m))
        items = tuple_items(A, n + m)  # a tuple, not a list: differentiable again
        return ((), _like(items[:n], x), _like(items[n:], y))

    return ProcResult(r, tuple_concat_backprop)


def _sum_chunks(items: Sequence[Any], n: int, k: int, constant: tuple = ()) -> list:
    """The sum of the ``k`` consecutive length-``n`` chunks of ``items``; the positions in
    ``constant`` (where the repeated sequence holds the symbolic zero) get none. The symbolic
    zero is a constant, and the zero of every space: code differentiated again repeats it
    (``[Z] * n``) and its copies get sensitivities of different shapes, which have no sum."""
    out = [gen_zero if i in constant else items[i] for i in range(n)]
    for j in range(1, k):
        chunk = items[j * n : (j + 1) * n]
        out = [a if i in constant else _add(a, b) for i, (a, b) in enumerate(zip(out, chunk))]
    return out


def sum_tuple_chunks(items: tuple, n: int, k: int, constant: tuple) -> tuple:
    """The sum of the ``k`` consecutive length-``n`` chunks of ``items`` (the transpose of ``* k``)."""
    return tuple(_sum_chunks(list(items), n, k, constant))


def _sum_tuple_chunks_rule(items: tuple, n: int, k: int, constant: tuple) -> ProcResult:
    # linear; its transpose repeats the sensitivity k times (whose transpose is this again),
    # with zeros where the positions in ``constant`` are
    def sum_tuple_chunks_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or A is None:
            return (), gen_zero, None, None, None
        parts = tuple(gen_zero if i in constant else a for i, a in enumerate(tuple_items(A, n)))
        return (), parts * k, None, None, None

    return ProcResult(sum_tuple_chunks(items, n, k, constant), sum_tuple_chunks_backprop)


register_primitive(sum_tuple_chunks, _sum_tuple_chunks_rule)


def _repeat_plus(x: Any, y: Any, inplace: bool) -> ProcResult:
    """``seq * k`` or ``k * seq`` (``seq *= k`` in place for lists)."""
    seq_first = _is_seq(x)
    seq, k = (x, y) if seq_first else (y, x)
    n = len(seq)
    constant = tuple(i for i, e in enumerate(seq) if e is gen_zero)

    def order(s_seq: Any) -> tuple:
        return ((), s_seq, gen_zero) if seq_first else ((), gen_zero, s_seq)

    if inplace and seq_first and isinstance(seq, list):
        seq *= k  # (Python checks k)
        r = seq
        kk = max(operator.index(k), 0)

        def imul_backprop(A: Any, Abox: Any) -> tuple:
            if A is not gen_zero and A is not None:
                handover(Abox, seq, A)
            entry = Abox.get(seq, gen_zero)
            if entry is gen_zero:
                return _Z2
            items = _padded(entry, n * kk)
            Abox[seq] = _sum_chunks(items, n, kk, constant) if kk else [gen_zero] * n
            return _Z2

        return ProcResult(r, imul_backprop)
    r = seq * k
    kk = max(operator.index(k), 0)
    if isinstance(r, list):

        def list_repeat_backprop(A: Any, Abox: Any) -> tuple:
            if A is not gen_zero and A is not None:
                handover(Abox, r, A)
            entry = Abox.pop(r, gen_zero)
            if entry is gen_zero or not kk:
                return _Z2
            return order(tuple(_sum_chunks(_padded(entry, n * kk), n, kk, constant)))

        return ProcResult(r, list_repeat_backprop)

    def tuple_repeat_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or A is None or not kk:
            return _Z2
        return order(sum_tuple_chunks(tuple_items(A, n * kk), n, kk, constant))

    return ProcResult(r, tuple_repeat_backprop)
