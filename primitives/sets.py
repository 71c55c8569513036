"""Rules for sets: their operators and methods.

A set's sensitivity is a dict from element to sensitivity. A (mutable) ``set`` keeps it in
``Abox`` like a list's; a ``frozenset`` is a value and carries it like a tuple's. Each
element's sensitivity goes back to the value that put it in the set: Python keeps the
first of equal values, and so does dplus (the element found by identity, else the first
operand holding an equal one). Adding an element moves its sensitivity out of the set's
entry to the value added; removing one moves nothing (a removed element is read no more).
"""

from __future__ import annotations

import operator
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.runtime.boxes import BoxSensitivities
from dplus.runtime.core import apply_transform
from dplus.runtime.handover import handover
from dplus.runtime.linear import add, is_zero_sensitivity
from dplus.runtime.linear import gen_zero as Z
from dplus.runtime.registry import lookup_transform, register_primitive
from dplus.runtime.result import ProcResult

from .container_displays import set_entry
from .operator_operands import SET_OPERATORS
from .operators import UNSHARED_IN_PLACE


def _is_set(x: Any) -> bool:
    return isinstance(x, (set, frozenset))


class _Operand:
    """An operand of a set operation: its items in iteration order, each equal value's
    first item (and its position), and how its sensitivity is shaped."""

    __slots__ = ("value", "items", "first")
    __dplus_from_source__ = True  # (its sensitivity method runs in backprops differentiated again)

    def __init__(self, value: Any) -> None:
        self.value = value
        self.items = value if type(value) is tuple else list(value)
        self.first: dict = {}
        for i, e in enumerate(self.items):
            if e not in self.first:
                self.first[e] = (e, i)

    def sensitivity(self, parts: dict, name: str) -> Any:
        """This operand's sensitivity from ``parts``: element -> sensitivity of the elements it gave."""
        if not parts:
            return Z
        v = self.value
        if _is_set(v):
            return parts
        if isinstance(v, (list, tuple)):
            out: list = [Z] * len(self.items)
            for e, s in parts.items():
                out[self.first[e][1]] = s
            return tuple(out) if isinstance(v, tuple) else out
        if any(not is_zero_sensitivity(s) for s in parts.values()):
            raise NonDifferentiableError(
                f"{name}(): sensitivity reached the elements of a {type(v).__name__}, which has nowhere to "
                "send it. Fix: pass a list, a tuple or a set"
            )
        return Z


def _origin(e: Any, operands: list[_Operand]) -> int:
    """The operand that put the element ``e`` (the object a set holds) in the result."""
    holder = -1
    for i, op in enumerate(operands):
        found = op.first.get(e)
        if found is not None:
            if found[0] is e:
                return i
            if holder < 0:
                holder = i
    return holder


def _route(sens: dict, origins: dict, operands: list[_Operand], name: str) -> tuple:
    """The operands' sensitivities from the elements' ``sens`` and where each came from."""
    parts: list[dict] = [{} for _ in operands]
    for e, s in sens.items():
        i = origins.get(e, -1)
        if i >= 0 and s is not Z and s is not None:
            d = parts[i]
            d[e] = add(d[e], s) if e in d else s
    return tuple(op.sensitivity(p, name) for op, p in zip(operands, parts))


def _new_set(name: str, compute: Any, *args: Any) -> ProcResult:
    """A new set made from ``args`` (``s | t``, ``s.union(*others)``, ``s.copy()``, ...)."""
    operands = [_Operand(a) for a in args]
    r = compute(args[0], *(op.items if not _is_set(op.value) else op.value for op in operands[1:]))
    origins = {e: _origin(e, operands) for e in r}

    def set_operation_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        sens = set_entry(r, A, Abox)
        if sens is Z:
            return ((),) + (Z,) * len(args)
        return ((),) + _route(sens, origins, operands, name)

    return ProcResult(r, set_operation_backprop)


def _in_place(
    name: str, compute: Any, s: set, *args: Any, result_is_set: bool = False
) -> ProcResult:
    """A set changed in place by ``args`` (``s.update(t)``, ``s |= t``, ``s.add(v)``, ...): each
    element it gains takes its sensitivity out of the set's entry, to the operand it came from."""
    operands = [_Operand(a) for a in args]
    before = set(s)
    r = compute(s, *(op.items if not _is_set(op.value) else op.value for op in operands))
    gained = {e: _origin(e, operands) for e in s if e not in before}

    def set_update_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if result_is_set and A is not Z and A is not None:
            handover(Abox, s, A)  # (the result is the set itself, as it is after the change)
        entry = Abox.get(s)
        moved: dict = {}
        if isinstance(entry, dict):
            for e in gained:
                if e in entry:
                    moved[e] = entry.pop(e)
        return ((), Z) + _route(moved, gained, operands, name)

    return ProcResult(s if result_is_set else r, set_update_backprop)


# ---------------------------------------------------------------------------
# methods


def set_add_plus(s: set, v: Any) -> ProcResult:
    if v in s:
        s.add(v)
        return ProcResult(None, lambda A, Abox: ((), Z, Z))
    s.add(v)

    def set_add_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(s)
        if isinstance(entry, dict) and v in entry:
            return (), Z, entry.pop(v)
        return (), Z, Z

    return ProcResult(None, set_add_backprop)


def set_pop_plus(s: set) -> ProcResult:
    v = s.pop()

    def set_pop_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, s, {v: A})  # (the set held it before)
        return (), Z

    return ProcResult(v, set_pop_backprop)


def _removing(method: Any) -> Any:
    """``discard``/``remove``/``clear``/``difference_update``/``intersection_update``: what
    they remove is read no more, and what stays keeps its sensitivity in the set's entry."""

    def transform(s: set, *args: Any) -> ProcResult:
        r = method(s, *args)
        n = len(args)
        return ProcResult(r, lambda A, Abox: ((),) + (Z,) * (n + 1))

    transform.__name__ = f"{method.__name__}_plus"
    return transform


def _making(name: str, method: Any) -> Any:
    def transform(*args: Any) -> ProcResult:
        return _new_set(name, method, *args)

    transform.__name__ = f"{name}_plus"
    return transform


def _updating(name: str, method: Any) -> Any:
    def transform(s: set, *args: Any) -> ProcResult:
        return _in_place(name, method, s, *args)

    transform.__name__ = f"{name}_plus"
    return transform


for _cls in (set, frozenset):
    for _name in ("union", "intersection", "difference", "symmetric_difference", "copy"):
        _m = getattr(_cls, _name)
        register_primitive(
            _m,
            _making(f"{_cls.__name__}.{_name}", _m),
            note="each element's sensitivity goes back to the value that put it in the set",
        )
    for _dunder in ("__or__", "__and__", "__sub__", "__xor__"):
        _m = getattr(_cls, _dunder)
        register_primitive(_m, _making(f"{_cls.__name__}.{_dunder}", _m))

for _name in ("update", "symmetric_difference_update"):
    register_primitive(
        getattr(set, _name),
        _updating(f"set.{_name}", getattr(set, _name)),
        note="each element added takes its sensitivity to the value added",
    )
for _name in ("discard", "remove", "clear", "difference_update", "intersection_update"):
    register_primitive(
        getattr(set, _name),
        _removing(getattr(set, _name)),
        note="removed elements are read no more",
    )
register_primitive(
    set.add, set_add_plus, note="the element added takes its sensitivity to the value added"
)
register_primitive(
    set.pop, set_pop_plus, note="the popped element's sensitivity goes back into the set"
)


# ---------------------------------------------------------------------------
# operators: on two sets, the set rules; otherwise the rule registered before


_MAKING_OPERATORS = {
    operator.or_: set.__or__,
    operator.and_: set.__and__,
    operator.xor: set.__xor__,
    operator.sub: set.__sub__,
}
_UPDATING_OPERATORS = {
    operator.ior: set.__ior__,
    operator.iand: set.__iand__,
    operator.ixor: set.__ixor__,
    operator.isub: set.__isub__,
}


def _on_sets(fn: Any, set_rule: Any) -> None:
    other_rule = lookup_transform(fn)

    def transform(x: Any, y: Any) -> ProcResult:
        if isinstance(x, (set, frozenset)) and isinstance(y, (set, frozenset)):
            return apply_transform(set_rule, x, y)
        if other_rule is None:
            return ProcResult(fn(x, y), lambda A, Abox: ((), Z, Z))
        return apply_transform(other_rule, x, y)

    transform.__name__ = f"{getattr(fn, '__name__', 'op')}_on_sets_plus"
    register_primitive(fn, transform)


def _in_place_operator(fn: Any, method: Any) -> Any:
    def rule(x: Any, y: Any) -> ProcResult:
        if type(x) is frozenset or not isinstance(x, set):
            return _new_set(fn.__name__, fn, x, y)  # (a frozenset is replaced, not changed)
        return _in_place(fn.__name__, method, x, y, result_is_set=True)

    return rule


# (``-`` and ``-=`` keep the arithmetic rule, which hands two sets to SET_OPERATORS: a
# wrapper around it would change what its derivatives of derivatives run for numbers)
for _fn, _method in _MAKING_OPERATORS.items():
    if _fn is operator.sub:
        SET_OPERATORS[_fn] = _making(_fn.__name__, _fn)
    else:
        _on_sets(_fn, _making(_fn.__name__, _fn))
for _fn, _method in _UPDATING_OPERATORS.items():
    if _fn is operator.isub:
        SET_OPERATORS[_fn] = SET_OPERATORS[UNSHARED_IN_PLACE[_fn]] = _in_place_operator(
            _fn, _method
        )
    else:
        _on_sets(_fn, _in_place_operator(_fn, _method))
        _on_sets(UNSHARED_IN_PLACE[_fn], _in_place_operator(_fn, _method))


def _in_place_method(method: Any) -> Any:
    def rule(x: Any, y: Any) -> ProcResult:
        return _in_place(method.__name__, method, x, y, result_is_set=True)

    rule.__name__ = f"set_{method.__name__.strip('_')}_plus"
    return rule


# ``set.__ior__`` and the others, called by the rule above (in its source, differentiated
# again at the next order) or by the user's code
for _method in _UPDATING_OPERATORS.values():
    register_primitive(_method, _in_place_method(_method))

# the backprops' helper, differentiated from its source when a set operation's backprop is
# differentiated again (derivatives of derivatives)
mark_derived(_route, "rule helper")
