"""The attributes dplus writes on the functions it makes, each set in one place.

A function object takes any attribute; type checkers do not model that, so the writes
live here, typed, rather than as ignored errors across the code base. The readers use
``getattr`` with a default, as they must for functions dplus did not make.

* ``__dplus_derived__``: the function is made by dplus (a rule, a helper of a rule, a
  derivative made by the API): the runtime calls it as a primitive value instead of
  transforming its source, and the tuple says what it is (``("rule", fn)``,
  ``("helper",)``, ``("jacobian", f)``...).
* ``__dplus_source__``: the user's function a plus-function was made from.
* ``__dplus_lazy__``: a plus-function that transforms its source when first called.
* ``__dplus_fused__``: the fused gradient function of a plus-function.
* ``__dplus_differentiated_as__``: a gradient function ``grad`` made from a fused gradient
  alone (``api._gradient_fused_first``): called, it makes the gradient function it stands
  for where it is differentiated again.
* ``__dplus_public_of__``: the plus-function a public ``dplus(f)`` function calls.
* ``dp_unknown``: a plus-function made by an unknown-function policy.
* ``__dplus_stands_for__``: a plain function that calls a plus-function and returns its
  primal, a method of a class built by differentiated code: its transform is that
  plus-function (``lookup_transform``).
* ``__dplus_primal_of__``: the plus-function a plain function made by ``as_plain_callable``
  (a plus-function handed to code dplus does not differentiate) calls; inert, read only by
  ``runtime.classes`` when a class holds it as a staticmethod, classmethod or property.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["mark", "mark_derived"]

F = TypeVar("F", bound=Callable[..., Any])


def mark(fn: F, name: str, value: object) -> F:
    """Write ``fn.<name> = value``; ``fn`` is returned, so definitions can be marked inline."""
    setattr(fn, name, value)
    return fn


def mark_derived(fn: F, *description: object) -> F:
    """Mark ``fn`` as made by dplus (see the module's docstring): ``fn.__dplus_derived__``."""
    return mark(fn, "__dplus_derived__", description)
