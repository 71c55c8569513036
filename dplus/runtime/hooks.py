"""What the lower layers call but the upper layers define, installed by them on import.

dplus imports only downwards (the contract is in pyproject.toml): the runtime never imports
the transformer, the rules or the public API, and the transformer never imports the API.
Where a lower layer must still call up -- the runtime lifting a Python function it meets
(that needs the transformer), the transformer reading a table of the rule library -- it calls
a slot of :data:`hooks`, and the module that defines the function installs it when it is
imported. ``import dplus`` imports them all, so every slot is filled before any code runs;
a slot called before it is filled raises a :class:`~dplus.errors.DplusError` naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import DplusError

_SLOTS = {
    # installed by dplus.transform.transformer
    "plus_function_for": "the plus-function made from a Python function's source",
    # installed by dplus.api
    "lift_class": "the transform of a class (its constructor), or None",
    "define_dplus": "register a function as differentiated from its source",
    # installed by dplus.policies
    "unknown_transform_policy": "the current policy for callables without a transform",
    # installed by dplus.higher
    "transform_of_plus": "the transform of a plus-function (derivatives of derivatives)",
    # installed by dplus.derived
    "jax_style_grad": "grad(f, argnums=..., has_aux=...) outside differentiated code",
    "jax_style_inside": "the refusal of the JAX-style grad inside differentiated code",
    # installed by dplus.primitives.operators
    "unshared_in_place": "the in-place operator that replaces an unshared array by a new one",
    # installed by dplus.primitives.containers
    "sequence_sensitivity": "an iterable's sensitivity from those of its items",
    # installed by dplus.primitives._iterables
    "recorded_calls": "the record of a higher-order rule's calls of its function argument",
}


def _missing(name: str) -> Callable[..., Any]:
    def not_installed(*args: Any, **kwargs: Any) -> Any:
        raise DplusError(
            f"dplus was used before it finished loading ({name}: {_SLOTS[name]}, is not "
            "installed yet). Fix: import dplus, not one of its modules alone, before calling it."
        )

    return not_installed


class Hooks:
    """One slot per function that a lower layer calls up to; see the module docstring."""

    __slots__ = tuple(_SLOTS)

    plus_function_for: Callable[[Any], Any]
    lift_class: Callable[[type], Any]
    define_dplus: Callable[[Any], Any]
    unknown_transform_policy: Callable[[], Any]
    transform_of_plus: Callable[[Any], Any]
    jax_style_grad: Callable[..., Any]
    jax_style_inside: Callable[..., Any]
    unshared_in_place: Callable[[Any], Any]
    sequence_sensitivity: Callable[..., Any]
    recorded_calls: Callable[[Any], Any]

    def __init__(self) -> None:
        for name in _SLOTS:
            setattr(self, name, _missing(name))

    def install(self, **functions: Callable[..., Any]) -> None:
        for name, fn in functions.items():
            if name not in _SLOTS:
                raise DplusError(f"no hook named {name!r}; the hooks are {sorted(_SLOTS)}")
            setattr(self, name, fn)


hooks = Hooks()
