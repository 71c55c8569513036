"""The plus-function of a Python callable (``plus_function_for``): of a function, compiled by
:mod:`dplus.transform.transformer`; of a bound method, a ``functools.partial`` object or a
callable object, built around it; of a function transformed when first called
(``lazy_transform``); of a class whose construction is differentiable (``construct_plus``).
"""

from __future__ import annotations

import collections
import functools
import types
from collections.abc import Callable
from typing import Any, cast

from ..errors import SourceUnavailableError, describe_callable
from ..markers import mark
from ..runtime.closures import (
    PlusInfo,
    is_plus_function,
    register_plus_code,
)
from ..runtime.hooks import hooks
from ..runtime.registry import bind_transform, lookup_transform, register_primitive
from ..runtime.result import ProcResult
from .field_classes import field_constructor
from .transformer import Z, _plus_from, compile_function


def can_transform(f: Any) -> bool:
    if isinstance(f, (types.FunctionType, types.MethodType, functools.partial)):
        return True
    if isinstance(f, type):
        return False
    call = getattr(type(f), "__call__", None)  # noqa: B004  (the class's __call__ function)
    return isinstance(call, types.FunctionType)


def plus_function_for(f: Any) -> Callable[..., ProcResult]:
    """The plus-function of a Python callable, derived from its source."""
    if isinstance(f, types.MethodType):
        t = lookup_transform(f.__func__)
        return _bound_plus(t if t is not None else plus_function_for(f.__func__), f.__self__)
    if isinstance(f, functools.partial):
        return _partial_plus(f)
    if not isinstance(f, types.FunctionType):
        call = getattr(type(f), "__call__", None)  # noqa: B004  (the class's __call__ function)
        if isinstance(call, types.FunctionType):
            t = lookup_transform(call)
            # the sensitivity of a callable object is its own (a dict of attribute sensitivities)
            return _bound_plus(t if t is not None else plus_function_for(call), f, as_object=True)
        raise SourceUnavailableError(
            f"{describe_callable(f)} is not a Python function, so dplus cannot transform its source"
        )
    stand_in = getattr(f, "__dplus_differentiated_as__", None)
    if stand_in is not None:  # (a gradient made from its fused part: api._gradient_fused_first)
        f = stand_in()
    return _plus_from(compile_function(f), f)


# ---------------------------------------------------------------------------
# bound methods, partials, callable objects


def _bound_plus(
    t: Callable[..., ProcResult], owner: Any, as_object: bool = False
) -> Callable[..., ProcResult]:
    plus = bind_transform(t, owner, as_object)
    _mark_plus(plus)
    return plus


def _partial_plus(p: functools.partial) -> Callable[..., ProcResult]:
    from ..runtime.arguments import call_plus_keywords, merged_keywords
    from ..runtime.core import KeywordDict, keywords_at, lift

    inner_plus = (
        lift(p.func)
        if not can_transform(p.func)
        or lookup_transform(p.func) is not None
        or is_plus_function(p.func)  # made inside transformed code: it stands for itself
        else plus_function_for(p.func)
    )
    bound_args = p.args
    bound_kw = KeywordDict(p.keywords)  # (a value: its sensitivity is the partial's third part)
    bound_names = tuple(bound_kw)

    # (written in the language dplus differentiates, so that it is differentiated again: the
    # inner plus-function is called through call_plus_keywords, with the keywords as tuples,
    # and their sensitivities are picked by operations with rules of their own)
    def partial_plus(*args: Any, **kwargs: Any) -> ProcResult:
        names, values = merged_keywords(bound_kw, kwargs)
        r = call_plus_keywords(inner_plus, bound_args + args, names, values)
        inner = r.backprop
        nb = len(bound_args)

        def partial_backprop(A: Any, Abox: Any) -> tuple:
            out = inner(A, Abox)
            npos = nb + len(args)
            pos = out[1 : 1 + npos]
            kept = tuple([k for k in bound_names if k not in kwargs]) if kwargs else bound_names
            closure = (out[0], pos[:nb], keywords_at(out, 1 + npos, kept))
            res: tuple[Any, ...] = (closure,) + pos[nb:]
            if kwargs:
                res = res + (keywords_at(out, 1 + npos, tuple(kwargs)),)
            return res

        return ProcResult(r.primal, partial_backprop)

    if partial_plus.__code__ not in _EXTRA_PLUS:
        # its sensitivity is the partial's, (func, args, keywords): laid out by these variables
        _EXTRA_PLUS.add(partial_plus.__code__)
        register_plus_code(
            partial_plus.__code__, PlusInfo(None, ("inner_plus", "bound_args", "bound_kw"), None)
        )
    return partial_plus


_EXTRA_PLUS: set[types.CodeType] = set()


def _mark_plus(fn: Callable[..., Any]) -> None:
    code = cast(types.FunctionType, fn).__code__  # (a plus-function dplus made: a function)
    if code not in _EXTRA_PLUS:
        _EXTRA_PLUS.add(code)
        register_plus_code(code, PlusInfo(None, (), None))


# ---------------------------------------------------------------------------
# define_dplus: derive lazily, so recursion and mutual recursion work in any order


def lazy_transform(f: Any) -> Callable[..., ProcResult]:
    state: dict[str, Any] = {}

    def lazy_plus(*args: Any, **kwargs: Any) -> ProcResult:
        plus = state.get("plus")
        if plus is None:
            plus = state["plus"] = plus_function_for(f)
            register_primitive(f, plus, note="derived from source by define_dplus")
        if kwargs:  # (bound by runtime.calls.call, so their sensitivities come back by name)
            from ..runtime.calls import call

            return call(plus, *args, **kwargs)
        return plus(*args)

    lazy_plus.__name__ = lazy_plus.__qualname__ = f"{getattr(f, '__name__', 'f')}__plus"
    mark(lazy_plus, "__dplus_source__", f)
    mark(lazy_plus, "__dplus_lazy__", True)
    return lazy_plus


# ---------------------------------------------------------------------------
# constructing instances of user classes


# The ``__new__`` methods that only allocate (their arguments ignored, ``__init__`` fills the
# instance). Any other is given the arguments and may fill or replace the instance, as a
# tuple's, a float's or a caching class's does: what it makes of them is not differentiated.
ALLOCATING_NEW = (
    object.__new__,
    list.__new__,
    dict.__new__,
    set.__new__,
    collections.deque.__new__,
)


def construct_plus(cls: Any) -> Callable[..., ProcResult] | None:
    """``None`` (the policy decides) unless calling the class is ``type.__call__``: a
    metaclass's ``__call__`` may take other arguments or change or replace the instance."""
    if type(cls).__call__ is not type.__call__:
        return None
    fields = field_constructor(cls)
    if fields is not None:
        return fields
    if _is_plain_namedtuple(cls):
        return _namedtuple_constructor(cls)
    init = (
        cls.__dict__.get("__init__")
        if "__init__" in cls.__dict__
        else getattr(cls, "__init__", None)
    )
    if isinstance(init, types.FunctionType) and cls.__new__ in ALLOCATING_NEW:
        t = lookup_transform(init)
        init_plus = t if t is not None else plus_function_for(init)

        def construct(*args: Any, **kwargs: Any) -> ProcResult:
            from ..runtime.core import apply_transform
            from ..runtime.handover import handover

            obj = cls.__new__(cls)
            # (through apply_transform, so that this code can be differentiated again)
            r = apply_transform(init_plus, obj, *args, **kwargs)
            inner = r.backprop

            def construct_backprop(A: Any, Abox: Any) -> tuple:

                if A is not Z and A is not None:
                    handover(Abox, obj, A)
                out = inner(Z, Abox)
                return ((),) + tuple(out[2:])

            return ProcResult(obj, construct_backprop)

        _mark_plus(construct)
        return construct
    if isinstance(cls.__new__, types.FunctionType):  # (a __new__ written in Python)
        return _construct_through_new(cls, cls.__new__, init)
    return None


def _construct_through_new(cls: Any, new: Any, init: Any) -> Callable[..., ProcResult]:
    """A class with a ``__new__`` written in Python: ``__new__(cls, *args)`` and then, when
    it returns an instance of ``cls``, ``__init__(obj, *args)``, each through its transform,
    as ``type.__call__`` runs them (an ``__init__`` that is not Python code is run as it is:
    ``object.__init__`` changes nothing)."""
    new_plus = lookup_transform(new) or plus_function_for(new)
    init_plus = (
        (lookup_transform(init) or plus_function_for(init))
        if isinstance(init, types.FunctionType)
        else None
    )

    def construct_with_new(*args: Any, **kwargs: Any) -> ProcResult:
        from ..runtime.core import apply_transform
        from ..runtime.handover import handover
        from ..runtime.linear import add

        made = apply_transform(new_plus, cls, *args, **kwargs)
        obj = made.primal
        initialised = None
        if isinstance(obj, cls):
            if init_plus is not None:
                initialised = apply_transform(init_plus, obj, *args, **kwargs)
            else:
                init(obj, *args, **kwargs)

        def construct_with_new_backprop(A: Any, Abox: Any) -> tuple:
            if A is not Z and A is not None:
                handover(Abox, obj, A)
            out = tuple(initialised.backprop(Z, Abox)[2:]) if initialised is not None else None
            made_out = made.backprop(Z, Abox)[2:]  # (the object's sensitivity is in Abox)
            if out is None:
                return ((),) + tuple(made_out)
            return ((),) + tuple(add(a, b) for a, b in zip(made_out, out))

        return ProcResult(obj, construct_with_new_backprop)

    _mark_plus(construct_with_new)
    return construct_with_new


def _is_plain_namedtuple(cls: type[Any]) -> bool:
    """A ``collections.namedtuple`` / ``typing.NamedTuple`` class whose construction is the
    generated one (no ``__new__`` or ``__init__`` of the user's)."""
    if not (issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)):
        return False
    for klass in cls.__mro__:
        if klass is tuple:
            return True
        if "__init__" in klass.__dict__:
            return False
        new = klass.__dict__.get("__new__")
        new = getattr(new, "__func__", new)  # (a staticmethod in the class dict)
        if new is not None and not getattr(new, "__module__", "").startswith("namedtuple_"):
            return False  # (the generated __new__ lives in a module named namedtuple_<name>)
    return True


def _namedtuple_constructor(cls: type[Any]) -> Callable[..., ProcResult]:
    """A named tuple built from its fields: each argument gets its field's sensitivity."""
    names = list(cls._fields)

    def construct_namedtuple(*args: Any, **kwargs: Any) -> ProcResult:
        obj = cls(*args, **kwargs)
        n = len(names)

        def construct_namedtuple_backprop(A: Any, Abox: Any) -> tuple:
            from ..runtime.linear import tuple_items

            parts = dict(zip(names, tuple_items(A, n)))
            out = ((),) + tuple(parts[name] for name in names[: len(args)])
            if kwargs:
                out = out + ({k: parts.get(k, Z) for k in kwargs},)
            return out

        return ProcResult(obj, construct_namedtuple_backprop)

    _mark_plus(construct_namedtuple)
    return construct_namedtuple


hooks.install(plus_function_for=plus_function_for)
