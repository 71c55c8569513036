"""Gradients shaped like the arguments they belong to, as JAX returns them for pytrees.

dplus's own sensitivity of an object is a dict of its attributes' sensitivities (SPEC
section 4 leaves objects to the implementation). The JAX-style entry points
(:func:`dplus.value_and_grad`, ``grad(f, argnums=...)``) hand gradients back in the
argument's own structure instead: a dataclass, an attrs class or a ``NamedTuple`` comes
back as an instance of its class whose fields hold their gradients, nested to any depth
inside lists, tuples and dicts. Other classes join with
:func:`register_gradient_structure`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from .markers import mark_derived

__all__ = ["register_gradient_structure", "shaped_like"]

_BUILDERS: dict[type, Callable[[Any, Any], Any]] = {}


def register_gradient_structure(cls: type, build: Callable[[Any, Any], Any]) -> None:
    """Return gradients of ``cls`` instances as ``build(instance, sensitivity)``.

    ``sensitivity`` is dplus's sensitivity of the instance: a dict from attribute names to
    their sensitivities (``None`` for attributes nothing differentiable reached).
    """
    _BUILDERS[cls] = build


def _fields(obj: Any) -> tuple[str, ...] | None:
    """The fields of a dataclass or attrs instance, or None for other objects."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return tuple(f.name for f in dataclasses.fields(obj))
    attrs_fields = getattr(type(obj), "__attrs_attrs__", None)
    if attrs_fields is not None:
        return tuple(a.name for a in attrs_fields)
    return None


def _with_fields(obj: Any, sens: dict[str, Any]) -> Any:
    """A shallow copy of ``obj`` whose fields hold their gradients (frozen classes too)."""
    out = copy.copy(obj)
    for name in _fields(obj) or ():
        object.__setattr__(out, name, shaped_like(getattr(obj, name, None), sens.get(name)))
    return out


def shaped_like(arg: Any, sens: Any) -> Any:
    """``sens`` (dplus's sensitivity of ``arg``) in the structure of ``arg``."""
    if sens is None or isinstance(arg, (bool, int, float, complex, str, bytes)):
        return sens
    for cls in type(arg).__mro__:
        build = _BUILDERS.get(cls)
        if build is not None:
            return build(arg, sens)
    if isinstance(arg, tuple) and isinstance(sens, tuple) and len(arg) == len(sens):
        items = [shaped_like(a, s) for a, s in zip(arg, sens)]
        make = getattr(type(arg), "_make", None)  # a NamedTuple's
        return make(items) if make is not None else tuple(items)
    if isinstance(arg, list) and isinstance(sens, list) and len(arg) == len(sens):
        return [shaped_like(a, s) for a, s in zip(arg, sens)]
    if isinstance(arg, dict) and isinstance(sens, dict):
        return {k: shaped_like(arg.get(k), s) for k, s in sens.items()}
    if isinstance(sens, dict) and _fields(arg) is not None:
        return _with_fields(arg, sens)
    return sens


# Differentiated again from their source when a JAX-style gradient is (grad(grad(f, argnums=0))).
mark_derived(shaped_like, "helper of value_and_grad", None)
mark_derived(_with_fields, "helper of value_and_grad", None)
