"""Builtins that call the program's own dunder method: ``next`` (``__next__``, in
builtin_iteration), ``round`` (``__round__``) and ``math.floor``/``ceil``/``trunc``
(``__floor__``/``__ceil__``/``__trunc__``).

For numbers the rounding functions are steps (zero derivative). A class's Python method may
compute its result from the program's values (``return self.x * 3.0``), so it is run through
its transform, as ``xs[i]`` runs a class's own ``__getitem__``: differentiated from its source,
or refused by the policy, never taken as a step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dplus.runtime.linear import gen_zero
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .container_reads import _python_method, _python_method_call


def program_method(t: type, name: str) -> Any:
    """The program's own Python method ``name`` of ``t`` (not one of dplus's classes), or None."""
    method = _python_method(t, name)
    if method is None or t.__module__.startswith(("dplus.", "primitives.")):
        return None
    return method


def _rounding(fn: Callable[..., Any], dunder: str) -> Callable[..., ProcResult]:
    def transform(x: Any, *args: Any, **kwargs: Any) -> ProcResult:
        method = program_method(type(x), dunder)
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
