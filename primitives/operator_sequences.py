"""Operator rules on sequences: concatenation (``+``) and repetition (``*``) of tuples and
lists, and their in-place forms on lists. See :mod:`primitives.operators`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.runtime.linear import OneHot, gen_zero, tuple_items
from dplus.runtime.linear import add as _add
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .operator_operands import _is_seq, _is_text

_Z2 = ((), gen_zero, gen_zero)


# ---------------------------------------------------------------------------
# sequences: concatenation and repetition of tuples and lists


def _items(s: Any, n: int) -> list | None:
    """A tuple/list sensitivity as a list of ``n`` element sensitivities (``None``: all zero)."""
    if s is gen_zero or s is None:
        return None
    return list(tuple_items(s, n))


def _like(part: Sequence[Any], v: Any) -> Any:
    """Element sensitivities ``part`` shaped as the sensitivity of the sequence ``v``."""
    if isinstance(v, tuple):
        return tuple(part)
    if isinstance(v, list):
        return part
    if _is_text(v) or isinstance(v, range):
        return gen_zero
    if all(p is gen_zero or p is None or p == 0 for p in part):
        return gen_zero
    raise NonDifferentiableError(
        f"sensitivity reached the elements of a {type(v).__name__} used in a sequence operation; "
        "pass a list or a tuple to differentiate through its elements"
    )


def _take_list_entry(Abox: Any, r: list, n: int, A: Any, pop: bool) -> list | None:
    """The element sensitivities of list ``r`` (length ``n`` at this point), ``A`` folded in."""
    entry = Abox.pop(r) if pop else Abox.get(r)
    extra = _items(A, n)
    if entry is gen_zero or entry is None:
        return extra
    entry = list(entry)
    if len(entry) < n:
        entry.extend([gen_zero] * (n - len(entry)))
    if extra is not None:
        entry = [_add(a, b) for a, b in zip(entry, extra)]
    return entry


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
            entry = _take_list_entry(Abox, x, n + m, A, pop=False)
            if entry is None:
                return _Z2
            Abox[x] = entry[:n]
            return ((), gen_zero, _like(entry[n : n + m], y))

        return ProcResult(r, iadd_backprop)
    r = x + y
    n, m = len(x), len(y)
    if isinstance(r, list):

        def list_concat_backprop(A: Any, Abox: Any) -> tuple:
            entry = _take_list_entry(Abox, r, n + m, A, pop=True)
            if entry is None:
                return _Z2
            return ((), _like(entry[:n], x), _like(entry[n:], y))

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


def _sum_chunks(items: list, n: int, k: int) -> list:
    out = list(items[:n])
    for j in range(1, k):
        chunk = items[j * n : (j + 1) * n]
        out = [_add(a, b) for a, b in zip(out, chunk)]
    return out


def sum_tuple_chunks(items: tuple, n: int, k: int) -> tuple:
    """The sum of the ``k`` consecutive length-``n`` chunks of ``items`` (the transpose of ``* k``)."""
    return tuple(_sum_chunks(list(items), n, k))


def _sum_tuple_chunks_rule(items: tuple, n: int, k: int) -> ProcResult:
    # linear; its transpose repeats the sensitivity k times (whose transpose is this again)
    return ProcResult(
        sum_tuple_chunks(items, n, k),
        lambda A, Abox: (
            (),
            gen_zero if A is gen_zero or A is None else tuple_items(A, n) * k,
            None,
            None,
        ),
    )


register_primitive(sum_tuple_chunks, _sum_tuple_chunks_rule)


def _repeat_plus(x: Any, y: Any, inplace: bool) -> ProcResult:
    """``seq * k`` or ``k * seq`` (``seq *= k`` in place for lists)."""
    seq_first = _is_seq(x)
    seq, k = (x, y) if seq_first else (y, x)
    n = len(seq)

    def order(s_seq: Any) -> tuple:
        return ((), s_seq, gen_zero) if seq_first else ((), gen_zero, s_seq)

    if inplace and seq_first and isinstance(seq, list):
        seq *= k  # (Python checks k)
        r = seq
        kk = max(operator.index(k), 0)

        def imul_backprop(A: Any, Abox: Any) -> tuple:
            entry = _take_list_entry(Abox, seq, n * kk, A, pop=False)
            if entry is None:
                return _Z2
            Abox[seq] = _sum_chunks(entry, n, kk) if kk else [gen_zero] * n
            return _Z2

        return ProcResult(r, imul_backprop)
    r = seq * k
    kk = max(operator.index(k), 0)
    if isinstance(r, list):

        def list_repeat_backprop(A: Any, Abox: Any) -> tuple:
            entry = _take_list_entry(Abox, r, n * kk, A, pop=True)
            if entry is None or not kk:
                return _Z2
            return order(_sum_chunks(entry, n, kk))

        return ProcResult(r, list_repeat_backprop)

    def tuple_repeat_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or A is None or not kk:
            return _Z2
        return order(sum_tuple_chunks(tuple_items(A, n * kk), n, kk))

    return ProcResult(r, tuple_repeat_backprop)
