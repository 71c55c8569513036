"""The primitive registry: callables whose reverse transform is registered, not derived."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import DplusError
from .portable import remember_rule, remember_source
from .result import ProcResult, call_plus, rule_result

__all__ = [
    "register_primitive",
    "register_backprop",
    "register_method",
    "lookup_transform",
    "is_registered_transform",
    "registered_primitives",
    "primal_of_transform",
    "register_next_order_form",
    "next_order_form",
    "register_lazy_rules",
]

Transform = Callable[..., ProcResult]

# fn -> transform.  Keyed by the callable itself: functions, builtins and method
# descriptors hash by identity, so this is an identity lookup for them.
_TRANSFORMS: dict[Any, Transform] = {}
# id(transform) -> (transform, fn): marks registered transforms as plus-functions.
_TRANSFORM_IDS: dict[int, tuple[Transform, Any]] = {}
# notes for the generated primitive listing
_NOTES: dict[Any, str] = {}
# transform -> a function, equal to it in value and sensitivities, differentiated in its
# place at the next order (see register_next_order_form)
_NEXT_ORDER_FORMS: dict[Any, Callable[..., ProcResult]] = {}

F = TypeVar("F", bound=Callable[..., Any])

_BUILTIN_METHOD: type[Any] = type([].append)
_METHOD_WRAPPER = type((1.0).__add__)


def register_primitive(fn: Any, transform: Transform, *, note: str = "") -> Transform:
    """Register ``transform`` (returning :class:`ProcResult`) as the reverse transform of ``fn``.

    ``fn``'s behaviour is not touched, so its plain calls cost exactly what they did (a
    function of ``__main__`` or a notebook keeps its rule in its ``__dict__``, so that a copy
    made by unpickling in another process has it too: :mod:`dplus.runtime.portable`).
    Registering again replaces the earlier transform. Methods of builtin types are
    registered through their descriptor: ``register_primitive(list.append, t)``;
    ``t`` then receives the instance as its first argument.
    """
    try:
        hash(fn)
    except TypeError:
        raise DplusError(f"cannot register {fn!r}: it is not hashable") from None
    _TRANSFORMS[fn] = transform
    _CHANGES[0] += 1
    _TRANSFORM_IDS[id(transform)] = (transform, fn)
    if note:
        _NOTES[fn] = note
    if not getattr(transform, "__dplus_lazy__", False):
        remember_rule(fn, transform)
    if getattr(transform, "__dplus_source__", None) is not fn:
        for hook in _ON_NEW_RULE:  # code that inlined fn's body must call it again
            hook(fn)
    return transform


_CHANGES = [
    0
]  # registrations so far (dplus.transform.persistent_cache digests the rules again after one)


def changes() -> int:
    return _CHANGES[0]


_ON_NEW_RULE: list[
    Callable[[Any], None]
] = []  # called with fn when a rule not derived from its source is registered


def register_method(cls: type, name: str, transform: Transform, *, note: str = "") -> Transform:
    """Register the transform of method ``name`` of builtin type ``cls`` (instance first)."""
    return register_primitive(getattr(cls, name), transform, note=note)


def register_backprop(fn: Any, *, note: str = "") -> Callable[[F], F]:
    """Decorator for a rule with no shared work between the primal and the backward pass.

    The decorated function takes ``fn``'s arguments and returns the backpropagator for
    them, ``backprop(Aw, Abox) -> (closure_sens, *arg_sens)``::

        @register_backprop(my_cube)
        def _(x):
            return lambda A, Abox: ((), 3 * x * x * A)
    """

    def decorate(make_backprop: F) -> F:
        def transform(*args: Any, **kwargs: Any) -> ProcResult:
            r = fn(*args, **kwargs)
            return rule_result(r, make_backprop(*args, **kwargs))

        transform.__name__ = f"{getattr(fn, '__name__', 'fn')}_plus"
        transform.__qualname__ = transform.__name__
        transform.__doc__ = make_backprop.__doc__
        register_primitive(fn, transform, note=note or (make_backprop.__doc__ or "").strip())
        remember_source(make_backprop)  # (differentiated from source at the next order)
        return make_backprop

    return decorate


# module name -> the loader of the rules for its functions, run once that module is imported
_LAZY_RULES: dict[str, Callable[[], None]] = {}


def register_lazy_rules(module: str, loader: Callable[[], None]) -> None:
    """Register the rules of an optional library (``scipy.special``) when the user imports it:
    at once if it is imported already, else at the first lookup after it is. dplus never
    imports the library itself, so it works, and starts as fast, without it."""
    if module in sys.modules:
        loader()
    else:
        _LAZY_RULES[module] = loader


def _load_imported_lazy_rules() -> bool:
    imported = [m for m in _LAZY_RULES if m in sys.modules]
    for module in imported:
        _LAZY_RULES.pop(module)()
    return bool(imported)


def lookup_transform(fn: Any) -> Transform | None:
    """The registered transform of ``fn``, bound methods of builtin types included."""
    try:
        t = _TRANSFORMS.get(fn)
    except TypeError:
        return None
    if t is None and _LAZY_RULES and _load_imported_lazy_rules():
        t = _TRANSFORMS.get(fn)
    if t is not None:
        return t
    tf = type(fn)
    if tf is types.FunctionType:
        # a plain function standing for a plus-function (markers.py: a method of a class built
        # by differentiated code, a plus-function handed to code dplus does not differentiate)
        stands_for: Transform | None = fn.__dict__.get("__dplus_stands_for__")
        return stands_for
    if tf is types.MethodType:
        func = fn.__func__
        t = _TRANSFORMS.get(func)
        if t is None and type(func) is types.FunctionType:
            t = func.__dict__.get("__dplus_stands_for__")
        if t is not None:
            return bind_transform(t, fn.__self__)
        return None
    if tf is _BUILTIN_METHOD or tf is _METHOD_WRAPPER:
        owner = fn.__self__
        if owner is None or isinstance(owner, types.ModuleType):
            return None
        descriptor = _builtin_descriptor(owner, fn)
        if descriptor is None:
            return None
        try:
            t = _TRANSFORMS.get(descriptor)
        except TypeError:
            return None
        if t is not None:
            return bind_transform(t, owner)
    return None


def _builtin_descriptor(owner: Any, method: Any) -> Any:
    """The C descriptor that ``method``, a builtin method bound to ``owner``, came from.

    Not ``getattr(type(owner), name)``: a subclass may override the name in Python and call
    the builtin through ``super()``, and the override is not the method that runs. A bound
    builtin method equals another when both wrap the same C function for the same instance.
    """
    name = method.__name__
    for klass in type(owner).__mro__:
        candidate = klass.__dict__.get(name)
        if (
            isinstance(candidate, (types.MethodDescriptorType, types.WrapperDescriptorType))
            and candidate.__get__(owner, type(owner)) == method
        ):
            return candidate
    return None


def bind_transform(t: Transform, owner: Any, as_object: bool = False) -> Transform:
    """The transform of a bound method: the instance is the first argument of ``t``.

    A bound method closes over its instance, so its closure sensitivity is ``(A_self,)``;
    for a callable object (``as_object``) it is the object's own sensitivity, ``A_self``.
    """

    def bound_plus(*args: Any, **kwargs: Any) -> ProcResult:
        r = call_plus(t, owner, *args, **kwargs)
        inner = r.backprop

        def bound_backprop(A: Any, Abox: Any) -> tuple[Any, ...]:
            out = inner(A, Abox)
            return ((out[1] if as_object else (out[1],)),) + tuple(out[2:])

        return ProcResult(r.primal, bound_backprop)

    return bound_plus


def is_registered_transform(obj: Any) -> bool:
    """True when ``obj`` is a transform registered for some primitive (so: a plus-function)."""
    return id(obj) in _TRANSFORM_IDS


def primal_of_transform(obj: Any) -> Any:
    entry = _TRANSFORM_IDS.get(id(obj))
    return None if entry is None else entry[1]


def registered_primitives() -> list[tuple[Any, Transform, str]]:
    """Every registered primitive with its transform and note, for the generated listing."""
    return [(fn, t, _NOTES.get(fn, "")) for fn, t in _TRANSFORMS.items()]


def register_next_order_form(transform: Transform, form: Callable[..., ProcResult]) -> None:
    """Differentiate ``form`` instead of ``transform`` when a derivative is differentiated again.

    For a rule whose source is not fit to be differentiated (it recomputes, or keeps state
    outside its record): ``form`` must return what ``transform`` returns for the same
    arguments, primal and backprop sensitivities alike.
    """
    _NEXT_ORDER_FORMS[transform] = form


def next_order_form(transform: Any) -> Callable[..., ProcResult] | None:
    try:
        return _NEXT_ORDER_FORMS.get(transform)
    except TypeError:
        return None
