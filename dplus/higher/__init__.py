"""Derivatives of derivatives: the transform of a plus-function.

A plus-function ``P`` is itself a Python function, so it has a transform of its own
(:mod:`dplus.higher.transform_of_plus`):

- a rule written by hand (``defvjp``'s transforms, ``register_backprop``) is transformed
  from its source like any function;
- a plus-function that dplus generated is rebuilt in a *differentiable-again* form (no
  float fast paths, records read back through ``list.pop``) whose text is registered with
  ``linecache``, and that function is transformed. Its closure cells are the ones ``P``
  has, so nested closures keep their values.

Generated code calls a few operations of the runtime (:mod:`dplus.runtime.ops`); the rules
of this package make the tower work: the transform of "call ``f``'s transform" is "call the
transform of ``f``'s transform". One module per family: :mod:`.call_rules` (calls,
partials, keywords, ``grad`` inside differentiated code), :mod:`.sensitivity_rules`
(accumulating, routing and folding sensitivities; the linear interface),
:mod:`.argument_rules` (binding arguments, keyword sensitivities), :mod:`.loop_rules`
(loops' routers) and :mod:`.iterable_rules` (rule code over iterables and sets). Importing this package registers them.
"""

from __future__ import annotations

from ..runtime.hooks import hooks
from . import (  # noqa: F401  (they register)
    argument_rules,
    array_memory,
    call_rules,
    class_rules,
    iterable_rules,
    loop_rules,
    sensitivity_rules,
)
from .transform_of_plus import transform_of_plus

hooks.install(transform_of_plus=transform_of_plus)
