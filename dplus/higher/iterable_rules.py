"""Rule code over iterables and sets at the next order: a ``Seq`` is a record of its argument
(reading it sends the sensitivity back to where it came from); what is not differentiable
again yet is refused naming what the user's code did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import NonDifferentiableError
from ..primitives import _iterables, _list_iterators
from ..primitives import container_displays as _container_displays
from ..primitives.container_reads import register_attribute
from ..runtime.boxes import BoxSensitivities
from ..runtime.core import apply_transform
from ..runtime.handover import handover, is_tracked_mutable
from ..runtime.linear import (
    add,
    gen_zero,
    is_zero_sensitivity,
    tuple_part,
)
from ..runtime.registry import register_next_order_form, register_primitive
from ..runtime.result import ProcResult
from .box_map import added_to_element
from .sensitivity_rules import _unsupported_again

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero


# Rule code that keeps sensitivities of the elements of iterables is not differentiable
# again yet: refused naming what the user's code did, never these internals.
def _iterated(seq: Any, *rest: Any) -> str:
    """What the user's code iterated, for a refusal: ``sum() over a NumPy array``."""
    kinds = {
        _iterables.LIST: "a list",
        _iterables.ARRAY: "a NumPy array",
        _iterables.REPEAT: "itertools.repeat",
    }
    return f"{seq.fn}() over {kinds.get(seq.kind, 'an iterable')}"


def _seq_sens_rule(sq: Any, s: Any, Abox: Any = None) -> ProcResult:
    """``Seq.sens``: the sensitivity of a rule's iterable argument from its elements' ``s``.
    Linear in ``s``; for a list, a tuple or an array, the transpose gives each element its
    part back (iterators, sets and repeats keep the refusal)."""
    if sq.kind == _iterables.SET and s is not None and _numbers_only(sq.items):
        return _set_seq_sens(sq.items, s)
    if sq.kind == _iterables.LISTITER and s is not None and Abox is not None:
        return _list_iterator_sens_rule(sq, s, Abox)
    if (
        sq.kind not in (_iterables.LIST, _iterables.TUPLE, _iterables.ARRAY, _iterables.CONST)
        or s is None
    ):
        return _refused_seq_sens(sq, s, Abox)
    r = sq.sens(s, Abox)

    def seq_sens_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        if r is Z or sq.kind == _iterables.CONST or (r is s and is_tracked_mutable(r)):
            return (), Z, Z, None  # zero, or the list itself (its sensitivity is its own, in Abox2)
        S = Abox2.pop(r, Z) if is_tracked_mutable(r) else Z
        S = add(S, A)
        if S is Z or S is None:
            return (), Z, Z, None
        n = len(s)
        parts = [
            tuple_part(S, i, len(sq.items)) if sq.kind == _iterables.TUPLE else S[i]
            for i in range(n)
        ]
        return (), Z, parts if type(s) is list else tuple(parts), None

    return ProcResult(r, seq_sens_backprop)


def _numbers_only(items: Any) -> bool:
    return all(type(e) is float or type(e) is int or type(e) is bool for e in items)


def _set_seq_sens(items: Any, s: Any) -> ProcResult:
    """``Seq.sens`` of a set of numbers (``_iterables.set_sens``): a dict from element to the
    sensitivity of the element, integers left out (labels). Linear in ``s``: the transpose
    gives each float element its entry's sensitivity back. A sensitivity that is a computed
    zero is kept (its derivative may not be zero), unlike at the first order."""
    r: Any = {}
    for e, si in zip(items, s):
        if si is not Z and si is not None and type(e) is float:
            r[e] = si
    if not r:
        r = Z

    def set_seq_sens_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        S = Abox2.pop(r, Z) if type(r) is dict else Z
        S = add(S, A)
        if not isinstance(S, dict):
            return (), Z, Z, None
        parts = [S.get(e, Z) if type(e) is float else Z for e in items[: len(s)]]
        return (), Z, parts if type(s) is list else tuple(parts), None

    return ProcResult(r, set_seq_sens_backprop)


# A Seq in rule code differentiated again is a record of its argument: reading its value or
# items (a tuple argument's own elements) sends the sensitivity back to where they came from.
def _seq_rule(
    value: Any, items: Any, kind: int, fn: str, arg: str, taking: Any = None
) -> ProcResult:
    def seq_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if not isinstance(A, dict):
            return (), Z, Z, None, None, None, None
        return (), A.get("value", Z), A.get("items", Z), None, None, None, None

    return ProcResult(_iterables.Seq(value, items, kind, fn, arg, taking), seq_backprop)


def _seq_attribute_rule(name: str) -> Callable[[Any], ProcResult]:
    def seq_attribute_rule(sq: Any) -> ProcResult:
        return ProcResult(
            getattr(sq, name), lambda A, Abox: ((), Z if A is Z or A is None else {name: A})
        )

    return seq_attribute_rule


register_primitive(
    _iterables.Seq, _seq_rule, note="internal: a rule's iterable argument, at the next order"
)
register_attribute(_iterables.Seq, "items", _seq_attribute_rule("items"))
register_attribute(_iterables.Seq, "value", _seq_attribute_rule("value"))


def _seq_source_rule(sq: Any) -> ProcResult:
    """``sq.source()``: the materialized items, or the value itself when there are none
    (a lazy rule's ``iter(xs)``: what takes its elements, recording their positions)."""
    if sq.items is None and sq.taking is not None:
        return ProcResult(sq.source(), lambda A, Abox: ((), Z))
    return apply_transform(_seq_attribute_rule("value" if sq.items is None else "items"), sq)


def _list_iterator_sens_rule(sq: Any, s: Any, Abox: BoxSensitivities) -> ProcResult:
    """``Seq.sens`` of ``iter(xs)``: each ``s[i]`` added to the element of ``xs``'s entry it
    was taken from (last first, as the first order does); the transpose reads each part back."""
    route = sq.taking
    for i in range(len(s)):
        p = route.positions[i]
        if (
            p < len(route.lst)
            and is_tracked_mutable(route.lst[p])
            and not is_zero_sensitivity(s[i])
        ):
            raise NonDifferentiableError(
                f"derivatives of derivatives of {sq.fn}() over a generator or iter() giving "
                "lists, dicts or objects are not supported yet; give it numbers, or a list"
            )
    transposes = [
        (i, added_to_element(Abox, route, i, s[i], route.positions[i]))
        for i in range(len(s) - 1, -1, -1)
        if not is_zero_sensitivity(s[i])
    ]

    def list_iterator_sens_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        parts: list[Any] = [Z] * len(s)
        for i, transpose in reversed(transposes):  # (the first addition made the entry)
            parts[i] = transpose(Abox2)
        return (), Z, parts if type(s) is list else tuple(parts), None

    return ProcResult(Z, list_iterator_sens_backprop)


def _take_rest_rule(it: Any) -> ProcResult:
    """``take_rest(it)``: the elements left in ``iter(xs)``, a slice of ``xs``, whose
    sensitivities go back to the positions they were taken from (as ``xs[pos:]``'s)."""
    lst = it.source
    pos = it.index
    n = len(lst)
    rest = _list_iterators.take_rest(it)

    def take_rest_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if A is not Z and A is not None:
            handover(Abox, rest, A)
        part = Abox.pop(rest, Z)
        if part is not Z:
            entry = Abox.list_entry(lst, n)
            for j in range(len(part)):
                if part[j] is not Z:
                    entry[pos + j] = add(entry[pos + j], part[j])
        return (), Z

    return ProcResult(rest, take_rest_backprop)


register_primitive(
    _list_iterators.take_rest,
    _take_rest_rule,
    note="internal: the rest of iter(xs) a rule takes, at the next order",
)


register_primitive(
    _iterables.Seq.source,
    _seq_source_rule,
    note="internal: what a rule iterates, at the next order",
)

_refused_seq_sens = _unsupported_again(
    _iterables.Seq.sens,
    _iterated,
    "; on arrays use the NumPy function (np.sum, np.max, np.prod, ...), which is differentiable "
    "again, and pass lists, tuples or arrays rather than iterators",
)
register_primitive(
    _iterables.Seq.sens, _seq_sens_rule, note="internal: a rule's iterable argument's sensitivity"
)


def _set_seq_sens_again(*args: Any) -> ProcResult:
    """``_set_seq_sens`` differentiated again (the third order): refused, naming sets."""
    raise NonDifferentiableError(
        "derivatives of the third order and beyond through sum(), min(), max() or sorted() of a "
        "set are not supported yet; keep such values in tuples inside functions differentiated "
        "more than twice"
    )


register_primitive(_set_seq_sens, _set_seq_sens_again, note="internal: refused at the third order")

# A set's sensitivity is a dict keyed by its elements, made and read by these helpers of the
# set rules: refused at the next order, naming sets.
_SETS_AGAIN = "the elements of sets"
_SETS_FIX = "; keep such values in tuples inside functions differentiated more than once"
for _helper_module, _helper_name in (
    (_container_displays, "set_sensitivity"),
    (_iterables, "set_sens"),
):
    _helper = getattr(_helper_module, _helper_name)
    register_primitive(
        _helper,
        _unsupported_again(_helper, _SETS_AGAIN, _SETS_FIX),
        note="internal: refused at the next order",
    )

# The two rules above at the order after (third derivatives through a generator's values,
# or iter(xs)'s, taken by a rule): not differentiable again yet, refused when they run there
# (their sensitivities reach the map of the order below, which a refusal on the result's
# sensitivity would not see).
_LIST_ITERATOR_AGAIN = (
    "derivatives of derivatives of derivatives (third order) through a generator, or iter() of "
    "a list, whose values a builtin such as sum, list, tuple, sorted, max or enumerate takes, "
    "are not supported yet; at the third order take its values with a for loop or next(), or "
    "make them a list"
)


def _refused_at_the_third_order(*args: Any) -> ProcResult:
    raise NonDifferentiableError(_LIST_ITERATOR_AGAIN)


def _take_rest_again(it: Any) -> ProcResult:
    """``_take_rest_rule`` as the order after differentiates it: refused."""
    return _take_rest_refused(it)


def _take_rest_refused(it: Any) -> ProcResult:
    raise NonDifferentiableError(_LIST_ITERATOR_AGAIN)


register_primitive(
    _take_rest_refused, _refused_at_the_third_order, note="internal: refused at the third order"
)
register_primitive(
    _list_iterator_sens_rule,
    _refused_at_the_third_order,
    note="internal: refused at the third order",
)
register_next_order_form(_take_rest_rule, _take_rest_again)
