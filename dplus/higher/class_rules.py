"""Classes built by code differentiated again (a ``class`` statement inside a function whose
derivative is differentiated: ``hessian``, ``grad`` of ``grad``).

At order ``n`` the namespace of the class statement holds, for each method, the method's
plus-function of order ``n`` (made by the order-``n`` code, it stands for itself there). The
class Python calls must hold a plain function whose transform is a plus-function of order
1, whose transform is one of order 2, ..., up to that one: :func:`standing_for` over
``n - 1`` stand-ins (``runtime.classes.stand_in_one_order_down``), each one order below the
next. (Holding the order-``n`` plus-function directly, as the first-order operation does,
would make a method call of order ``n`` one order short: its primal a ``ProcResult``.)

The rule of ``standing_for`` adds one stand-in below the plus-function it is given and is a
constant (a function value carries no sensitivity); a stand-in is a constant too. At the
order after, the rule is differentiated from its source: its call of the stand-in's maker
is a constant call (the maker's transform calls it once), and its call of ``standing_for``
is this rule again, which adds the next stand-in: ``n - 1`` in all at order ``n``.

``build_class_plus`` itself is differentiated from its source at the next order; what the
class holds for a namespace value (``runtime.classes.class_holds``) has the rule below: a
method, the function a ``staticmethod`` or ``classmethod`` wraps and a ``property``'s
accessors (there plain functions calling the order-``n`` plus-function, made when the
decorator was called), and the function a ``functools.cached_property`` holds (the
plus-function itself) stand through the stand-ins. (What a method reads of the enclosing
function is kept in cells at every order, ``transform.scopes.is_method_name``: the method's
value carries no sensitivity, so holding it as a constant loses none.)
"""

from __future__ import annotations

import functools
import types
from typing import Any

from ..markers import mark_derived
from ..rules import defnondiff
from ..runtime.classes import class_holds, new_class, stand_in_one_order_down, standing_for
from ..runtime.closures import is_plus_function
from ..runtime.linear import gen_zero
from ..runtime.registry import register_primitive
from ..runtime.result import ProcResult

Z: Any = gen_zero


def _standing_for_rule(plus: Any, name: Any = None, qualname: Any = None) -> ProcResult:
    method = standing_for(stand_in_one_order_down(plus), name, qualname)
    return ProcResult(method, lambda A, Abox: ((), Z, Z, Z))


def _is_method(v: Any) -> bool:
    """A plus-function: a method's (a constant test, at every order)."""
    return is_plus_function(v)


def _plus_function_wrapped(fn: Any) -> Any:
    """The plus-function a plain function made by ``as_plain_callable`` calls, or ``None``."""
    if type(fn) is types.FunctionType:
        return fn.__dict__.get("__dplus_primal_of__")
    return None


def _class_holds_rule(v: Any, name: str, qualname: str) -> ProcResult:
    held = v
    if _is_method(v):
        held = standing_for(stand_in_one_order_down(v), name, qualname)
    elif type(v) is staticmethod or type(v) is classmethod:
        plus = _plus_function_wrapped(v.__func__)
        if plus is not None:
            held = type(v)(standing_for(stand_in_one_order_down(plus), name, qualname))
    elif type(v) is functools.cached_property and _is_method(v.func):
        held = functools.cached_property(
            standing_for(stand_in_one_order_down(v.func), name, qualname)
        )
    elif type(v) is property:
        held = property(
            _accessor_standing(v.fget, name, qualname),
            _accessor_standing(v.fset, name, qualname),
            _accessor_standing(v.fdel, name, qualname),
            v.__doc__,
        )
    return ProcResult(held, lambda A, Abox: ((), Z, Z, Z))


def _accessor_standing(fn: Any, name: str, qualname: str) -> Any:
    """A property's getter, setter or deleter as the class holds it: through the stand-ins
    when it is a plain function calling a plus-function of this order."""
    plus = _plus_function_wrapped(fn)
    return fn if plus is None else standing_for(stand_in_one_order_down(plus), name, qualname)


_NOTE = "internal: a method of a class built at a higher order"
defnondiff(stand_in_one_order_down, note=_NOTE)
defnondiff(new_class, note=_NOTE)
defnondiff(_plus_function_wrapped, note=_NOTE)
defnondiff(_is_method, note=_NOTE)
mark_derived(_accessor_standing, "rule helper")  # (its standing_for: the rule above, one order up)
register_primitive(standing_for, _standing_for_rule, note=_NOTE)
register_primitive(class_holds, _class_holds_rule, note=_NOTE)
