"""What generated code calls at run time to reach a callee's transform: lifting callees
(``lift``, ``call``, ``apply_transform``) and reading keyword arguments. Moving sensitivities of
mutable values in and out of the box-sensitivity map is in :mod:`dplus.runtime.handover` and
:mod:`dplus.runtime.fold`.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

from ..errors import NonDifferentiableError, describe_callable
from ..markers import mark
from .closures import is_plus_function
from .hooks import hooks
from .linear import (
    gen_zero,
)
from .registry import lookup_transform, register_primitive
from .result import KeywordDict, ProcResult

__all__ = ["lift", "call", "as_plain_callable", "CellKey"]


class CellKey:
    """The identity of one variable captured by a closure and rebound: its Abox key."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<cell {self.name}>"


# ---------------------------------------------------------------------------
# lifting callees


def lift(f: Any, where: str = "") -> Callable[..., ProcResult]:
    """The plus-function that transformed code calls in place of ``f``."""
    if type(f) is types.FunctionType and is_plus_function(f):
        return f
    t = lookup_transform(f)  # bound methods of registered functions included
    if t is not None:
        return t
    if is_plus_function(f) or getattr(type(f), "__dplus_plus_object__", False):
        return f
    if type(f) is types.FunctionType and "__dplus_kept_by__" in f.__dict__:
        _refuse_kept_function(f)
    if (
        type(f) is types.FunctionType and (hasattr(f, "__dplus_derived__") or _is_rule_closure(f))
    ) or (type(f) is types.MethodType and _is_rule_method(f)):
        # made by grad, D, dplus or grad1, or a backprop a rule made: transformable, so derivatives nest
        return hooks.plus_function_for(f)
    if isinstance(f, type):
        t = hooks.lift_class(f)
        if t is not None:
            return t
    elif isinstance(f, functools.partial):
        return hooks.plus_function_for(f)
    else:
        call = getattr(type(f), "__call__", None)  # noqa: B004  (the class's __call__ function)
        if isinstance(call, types.FunctionType) and lookup_transform(call) is not None:
            # a callable object whose __call__ is registered (define_dplus)
            return hooks.plus_function_for(f)
    if type(f) is types.FunctionType:
        carried = _registered_from_carried_rule(f)
        if carried is not None:
            return carried
    return hooks.unknown_transform_policy()(f, where)


def _refuse_kept_function(f: types.FunctionType) -> None:
    """A nested function handed to the user's code that dplus does not know, which kept it and
    gave it back through another way than its result (a registry, an attribute, a list)."""
    keeper = describe_callable(f.__dict__["__dplus_kept_by__"])
    raise NonDifferentiableError(
        f"dplus cannot differentiate this call of {describe_callable(f.__dict__['__dplus_primal_of__'])}: "
        f"it was handed to {keeper}, which dplus does not differentiate and which kept it (in a "
        "registry, a container or an attribute); the variables it reads from the function "
        "that made it get their sensitivities through the function value, which that way of "
        f"reaching it does not give back. Decorate {keeper.split(' (')[0]} with "
        "@dplus.define_dplus, or call the function through the name it is defined with"
    )


def _registered_from_carried_rule(f: types.FunctionType) -> Any:
    """A function unpickled in another process: registered again from the rule it carries."""
    from .portable import DEFINED, carried_rule

    rule = carried_rule(f)
    if rule is None:
        return None
    if rule == DEFINED:
        hooks.define_dplus(f)
    else:
        register_primitive(f, rule)
    return lookup_transform(f)


def _is_rule_closure(f: types.FunctionType) -> bool:
    """A rule's backprop or helper, met again at a higher order: differentiated from its source."""
    module = f.__module__ or ""
    return module.startswith("dplus.primitives.") or (
        module.startswith("dplus.") and "<locals>" in f.__qualname__
    )


def _is_rule_method(m: types.MethodType) -> bool:
    """A method of rule machinery written to be differentiated again (a class marked
    ``__dplus_from_source__``, such as ``primitives._iterables.Calls``), held bound."""
    return (
        type(m.__func__) is types.FunctionType
        and bool(type(m.__self__).__dict__.get("__dplus_from_source__"))
        and _is_rule_closure(m.__func__)
    )


def apply_transform(T: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``T(*args)`` for a rule's transform ``T`` that runtime code looked up.

    A function rather than a plain call so that, when the runtime code is itself
    differentiated (derivatives of derivatives), its rule calls the transform of ``T``.
    """
    return T(*args, **kwargs)


def call(f: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """Call ``f`` in transformed code: its transform, with the given arguments."""
    return lift(f)(*args, **kwargs)


def as_plain_callable(a: Any) -> Any:
    """A plus-function handed to foreign code becomes a callable returning primals."""
    if callable(a) and (is_plus_function(a) or getattr(type(a), "__dplus_plus_object__", False)):

        def primal_only(*args: Any, **kwargs: Any) -> Any:
            return a(*args, **kwargs).primal

        # (what the program reads of the function it handed over: its name, docstring and,
        # through ``__wrapped__``, its parameters)
        primal_only.__name__ = getattr(a, "__name__", "plus_function")
        primal_only.__qualname__ = getattr(a, "__qualname__", "plus_function")
        primal_only.__doc__ = getattr(a, "__doc__", None)
        primal_only.__wrapped__ = a  # type: ignore[attr-defined]
        # (inert here; a class built by differentiated code that holds it, as a staticmethod,
        # classmethod or property, marks it as standing for ``a``: runtime.classes)
        return mark(primal_only, "__dplus_primal_of__", a)
    return a


def keywords_at(g: tuple, pos: int, names: tuple) -> KeywordDict:
    """The sensitivities of the arguments passed by the keywords ``names``, by name, from a
    backprop's result ``g`` whose keywords' dict is at ``pos`` (zero for one not there)."""
    return KeywordDict({k: keyword_sensitivity(g, pos, k) for k in names})


def keyword_sensitivity(g: tuple, pos: int, name: str) -> Any:
    """The sensitivity of the argument passed by the keyword ``name``, from a backprop's
    result ``g`` whose keywords' dict is at ``pos``."""
    if len(g) > pos and isinstance(g[pos], dict):
        return g[pos].get(name, gen_zero)
    return gen_zero
