"""The transform of a plus-function: a hand-written rule transformed from its source, a
generated plus-function rebuilt in its differentiable-again form and transformed.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from typing import Any, cast

from ..errors import NonDifferentiableError, describe_callable
from ..runtime.classes import TRANSFORM_IS
from ..runtime.closures import CodeMap, plus_info
from ..runtime.registry import next_order_form
from ..runtime.result import ProcResult

_TOWER: weakref.WeakKeyDictionary[Any, Callable[..., ProcResult]] = weakref.WeakKeyDictionary()
_NEST = CodeMap()


def transform_of_plus(P: Any) -> Callable[..., ProcResult]:
    """The plus-function of the plus-function ``P``."""
    try:
        cached = _TOWER.get(P)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    result = _transform_of_plus(P)
    try:
        _TOWER[P] = result
    except TypeError:
        pass
    return result


def _transform_of_plus(P: Any) -> Callable[..., ProcResult]:
    from ..transform.plus_functions import plus_function_for

    if getattr(P, "__dplus_consumes_generators__", False):
        # a rule taking generators (runtime.generators.consumes_generators): at the next order
        # the rule itself (a generator made by differentiated code is refused there)
        return transform_of_plus(P.__wrapped__)
    if isinstance(P, types.FunctionType) and TRANSFORM_IS in P.__dict__:
        # a method's stand-in in a class built by code differentiated again (runtime.classes)
        return cast(Callable[..., ProcResult], P.__dict__[TRANSFORM_IS])
    form = next_order_form(P)
    if form is not None:
        return plus_function_for(form)
    info = plus_info(P)
    source = P.__dict__.get("__dplus_source__") if isinstance(P, types.FunctionType) else None
    if info is None and isinstance(source, types.FunctionType):
        # a copy unpickled in another process (the code registry is per process): derive it again here
        from ..runtime.portable import remember_source

        remember_source(source)
        P = plus_function_for(source)
        info = plus_info(P)
    if info is not None and info.origin is not None and isinstance(P, types.FunctionType):
        return plus_function_for(_differentiable_again(P, info.origin))
    if getattr(P, "__dplus_lazy__", False):
        # define_dplus's lazy wrapper: differentiate the derived plus-function again
        return transform_of_plus(plus_function_for(P.__dplus_source__))
    if isinstance(P, types.FunctionType):
        return plus_function_for(P)
    refusal = getattr(type(P), "__dplus_again_refusal__", None)
    if refusal is not None:  # a plus-function object of dplus's own (functools.cache's)
        raise NonDifferentiableError(refusal)
    raise NonDifferentiableError(
        f"dplus cannot differentiate {describe_callable(P)} again: it is not a Python function. "
        "Register a rule for its transform with dplus.register_primitive"
    )


def _differentiable_again(P: types.FunctionType, f: types.FunctionType) -> types.FunctionType:
    """``P`` rebuilt from ``f`` without fast paths, with source that can be transformed again."""
    from ..transform.transformer import _compile_or_load

    nest = _NEST.get(f.__code__)
    if nest is None:
        nest = _NEST[f.__code__] = _compile_or_load(f, nestable=True)
    code = nest.codes.get(P.__code__.co_name)
    if code is None:
        raise NonDifferentiableError(f"dplus cannot differentiate {describe_callable(P)} again")
    cells = dict(zip(P.__code__.co_freevars, P.__closure__ or ()))
    closure = []
    for name in code.co_freevars:
        # the helpers first: the two compilations name their helpers independently, so a
        # name of P's (``_dp_add2``) may stand for another value (linear ``add`` for
        # ``operator.add``); P gives only what is its own (the program's variables)
        if name in nest.helper_cells:
            closure.append(nest.helper_cells[name])
        elif name in cells:
            closure.append(cells[name])
        else:
            raise NonDifferentiableError(
                f"dplus cannot differentiate {describe_callable(P)} again: the variable {name!r} is not available"
            )
    again = types.FunctionType(code, P.__globals__, code.co_name, P.__defaults__, tuple(closure))
    again.__dplus_constant_freevars__ = frozenset(  # type: ignore[attr-defined]
        n for n in code.co_freevars if n in nest.constant_names
    )
    if P.__kwdefaults__:
        again.__kwdefaults__ = {
            k.replace(_prefix_of(P), nest.prefix, 1): v for k, v in P.__kwdefaults__.items()
        }
    return again


def _prefix_of(P: types.FunctionType) -> str:
    for k in P.__kwdefaults__ or {}:
        if k.endswith("sig"):
            return k[: -len("sig")]
    return "_dp_"
