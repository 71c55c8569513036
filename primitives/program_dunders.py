"""Builtins and operators that call the program's own dunder method: ``next`` (``__next__``,
in builtin_iteration), ``round`` (``__round__``), ``math.floor``/``ceil``/``trunc``
(``__floor__``/``__ceil__``/``__trunc__``), and ``//``, ``divmod``, ``<<``, ``>>``, ``&``,
``|``, ``^``, ``~`` (imported last: it wraps the final rules of these).

For numbers these are steps (zero derivative). A class's Python method may
compute its result from the program's values (``return self.x * 3.0``), so it is run through
its transform, as ``xs[i]`` runs a class's own ``__getitem__``: differentiated from its source,
or refused by the policy, never taken as a step.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

from dplus.runtime.core import apply_transform
from dplus.runtime.linear import gen_zero
from dplus.runtime.registry import lookup_transform, register_primitive
from dplus.runtime.result import ProcResult

from .container_reads import _python_method, _python_method_call
from .operator_operands import _SPECIAL, _user_binary, _user_unary, _written_in_python
from .operators import UNSHARED_IN_PLACE


def program_method(t: type, name: str) -> Any:
    """The program's own Python method ``name`` of ``t`` (not one of dplus's classes), or None."""
    method = _python_method(t, name)
    if method is None or t.__module__.startswith(("dplus.", "primitives.")):
        return None
    return method


def _zeros1(A: Any, Abox: Any) -> tuple:
    return ((), gen_zero)


def _zeros2(A: Any, Abox: Any) -> tuple:
    return ((), gen_zero, gen_zero)


_ZERO_BACKPROPS = (_zeros1, _zeros2)


def _rounding(fn: Callable[..., Any], dunder: str) -> Callable[..., ProcResult]:
    def transform(x: Any, *args: Any, **kwargs: Any) -> ProcResult:
        tx = type(x)
        if (tx is float or tx is int) and not kwargs:  # (the commonest: a number)
            return ProcResult(fn(x, *args), _ZERO_BACKPROPS[len(args)])
        method = program_method(tx, dunder)
        if method is None:  # a step: zero derivative in every argument
            zeros: tuple = ((),) + (gen_zero,) * (1 + len(args))
            zeros += ({k: gen_zero for k in kwargs},) if kwargs else ()
            return ProcResult(fn(x, *args, **kwargs), lambda A, Abox: zeros)
        r = _python_method_call(method, x, *args, *kwargs.values())
        taken = r.backprop

        def own_rounding_backprop(A: Any, Abox: Any) -> tuple:
            out = tuple(taken(A, Abox))[: 2 + len(args)]
            return out + ({k: gen_zero for k in kwargs},) if kwargs else out

        return ProcResult(r.primal, own_rounding_backprop)

    transform.__name__ = transform.__qualname__ = f"{fn.__name__}_plus"
    register_primitive(
        fn,
        transform,
        note="piecewise constant (zero derivative) for numbers; a class's own Python "
        f"{dunder} runs through its transform",
    )
    return transform


_rounding(round, "__round__")
_rounding(math.floor, "__floor__")
_rounding(math.ceil, "__ceil__")
_rounding(math.trunc, "__trunc__")


# ---------------------------------------------------------------------------
# operators whose rules are steps for numbers (//, divmod, <<, >>, &, |, ^, ~): an operand of
# the program's class with the operator method in Python is dispatched as + and * are
# (operator_operands._user_binary): the method may compute a float from the program's values

_STEP_BINARY: dict[Any, tuple[str | None, str, str | None]] = {
    operator.floordiv: (None, "__floordiv__", "__rfloordiv__"),
    operator.ifloordiv: ("__ifloordiv__", "__floordiv__", "__rfloordiv__"),
    builtins.divmod: (None, "__divmod__", "__rdivmod__"),
    operator.lshift: (None, "__lshift__", "__rlshift__"),
    operator.ilshift: ("__ilshift__", "__lshift__", "__rlshift__"),
    operator.rshift: (None, "__rshift__", "__rrshift__"),
    operator.irshift: ("__irshift__", "__rshift__", "__rrshift__"),
    operator.and_: (None, "__and__", "__rand__"),
    operator.iand: ("__iand__", "__and__", "__rand__"),
    operator.or_: (None, "__or__", "__ror__"),
    operator.ior: ("__ior__", "__or__", "__ror__"),
    operator.xor: (None, "__xor__", "__rxor__"),
    operator.ixor: ("__ixor__", "__xor__", "__rxor__"),
}
_STEP_UNARY: dict[Any, tuple[str | None, str, str | None]] = {
    operator.invert: (None, "__invert__", None),
    operator.inv: (None, "__invert__", None),
}


_NUMBERS = frozenset({float, int, bool})


def _program_operand(v: Any, names: tuple) -> bool:
    """Whether ``v``'s class defines one of the operator methods ``names`` in Python."""
    t = type(v)
    return t not in _NUMBERS and any(n is not None and _written_in_python(t, n) for n in names)


def _dispatching_program_operands(fn: Any, names: tuple, unary: bool) -> None:
    step = lookup_transform(fn)
    _SPECIAL[fn] = names

    def binary_transform(x: Any, y: Any) -> ProcResult:
        if _program_operand(x, names) or _program_operand(y, names):
            return _user_binary(fn, x, y)
        return apply_transform(step, x, y)

    def unary_transform(x: Any) -> ProcResult:
        if _program_operand(x, names):
            return _user_unary(fn, x)
        return apply_transform(step, x)

    transform = unary_transform if unary else binary_transform
    transform.__name__ = transform.__qualname__ = f"{fn.__name__}_plus"
    register_primitive(fn, transform)  # (keeps the step rule's note)


for _fn, _names in _STEP_BINARY.items():
    _dispatching_program_operands(_fn, _names, unary=False)
    if _fn in UNSHARED_IN_PLACE:
        _dispatching_program_operands(UNSHARED_IN_PLACE[_fn], _names, unary=False)
for _fn, _names in _STEP_UNARY.items():
    _dispatching_program_operands(_fn, _names, unary=True)
