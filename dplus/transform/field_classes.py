"""Constructing instances of dataclasses and attrs classes, whose ``__init__`` is generated
(it has no source to transform).

The generated ``__init__`` only stores its arguments (or the fields' defaults) as attributes,
so the sensitivity of each argument is the sensitivity the instance's attribute of that
field received. That holds only for the ``__init__`` the library generated:

- a class whose ``__init__`` the user wrote (a dataclass keeps one written in its body; a
  subclass may define one) is constructed through that ``__init__``'s transform instead
  (``construct_plus`` falls through to it);
- a dataclass's ``__post_init__`` runs user code after the fields are stored (derived
  attributes, fields rewritten): the fields are stored as the generated ``__init__`` stores
  them, then ``__post_init__`` runs through its transform, and its reverse runs before the
  fields' sensitivities are read;
- an attrs class with a converter, ``__attrs_pre_init__`` or ``__attrs_post_init__`` is
  refused: its generated ``__init__`` runs user code dplus cannot see.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import attrs

from ..errors import NonDifferentiableError
from ..runtime.closures import PlusInfo, register_plus_code
from ..runtime.hooks import hooks
from ..runtime.registry import lookup_transform
from ..runtime.result import ProcResult
from .transformer import Z

__all__ = ["field_constructor"]


def field_constructor(cls: Any) -> Callable[..., ProcResult] | None:
    """The plus-function constructing ``cls``, when ``cls`` is a dataclass or an attrs class
    with the ``__init__`` its library generated (None: construct it another way)."""
    init = getattr(cls, "__init__", None)
    filename = getattr(getattr(init, "__code__", None), "co_filename", "")
    if dataclasses.is_dataclass(cls) and filename == "<string>":
        names = {f.name: f.name for f in dataclasses.fields(cls) if f.init}
        if callable(getattr(cls, "__post_init__", None)):
            return _post_init_constructor(cls, init)
        return _stored_fields_constructor(cls, names, init)
    if attrs.has(cls) and filename.startswith("<attrs generated"):
        runs_user_code = [
            hook for hook in ("__attrs_pre_init__", "__attrs_post_init__") if hasattr(cls, hook)
        ] + [f"the converter of {a.name}" for a in attrs.fields(cls) if a.converter is not None]
        if runs_user_code:
            raise NonDifferentiableError(
                f"constructing the attrs class {cls.__qualname__} runs "
                f"{', '.join(runs_user_code)} inside its generated __init__, which dplus cannot "
                "differentiate: write the __init__ (or a @classmethod that builds the instance) "
                "in Python, or register the class's construction with @dplus.define_dplus"
            )
        names = {_alias(a): a.name for a in attrs.fields(cls) if a.init}
        return _stored_fields_constructor(cls, names, init)
    return None


def _alias(a: Any) -> str:
    """The ``__init__`` parameter of an attrs field (a private ``_x`` is given as ``x``)."""
    alias = getattr(a, "alias", None)
    return alias if isinstance(alias, str) else a.name.lstrip("_")


def _stored_fields_constructor(
    cls: Any, names: dict[str, str], init: Any
) -> Callable[..., ProcResult]:
    """``names``: each ``__init__`` parameter's field (attribute) name."""
    params = list(inspect.signature(init).parameters)[1:]  # (without self)

    def construct_fields(*args: Any, **kwargs: Any) -> ProcResult:
        obj = cls(*args, **kwargs)

        def construct_fields_backprop(A: Any, Abox: Any) -> tuple:
            from ..runtime.handover import handover

            if A is not Z and A is not None:
                handover(Abox, obj, A)
            entry = Abox.pop(obj, Z)
            # (written out here, not in a helper: at the next order this code is differentiated)
            get = (
                (lambda p: entry.get(names[p], Z) if p in names else Z)
                if entry is not Z
                else (lambda p: Z)
            )
            out = ((),) + tuple(get(p) for p in params[: len(args)])
            if kwargs:
                out = out + ({k: get(k) for k in kwargs},)
            return out

        return ProcResult(obj, construct_fields_backprop)

    _mark_plus(construct_fields)
    return construct_fields


def _post_init_constructor(cls: Any, init: Any) -> Callable[..., ProcResult]:
    """A dataclass with ``__post_init__``: the fields stored as the generated ``__init__``
    stores them (in order; a ``default_factory`` called; through ``object.__setattr__`` when
    frozen), then ``__post_init__(self, *init_vars)`` through its transform."""
    signature = inspect.signature(init)
    params = list(signature.parameters)[1:]
    all_fields = cls.__dataclass_fields__.values()
    initvar = getattr(dataclasses, "_FIELD_INITVAR", None)
    init_vars = [f.name for f in all_fields if getattr(f, "_field_type", None) is initvar]
    fields = dataclasses.fields(cls)
    field_names = {f.name for f in fields if f.init}
    frozen = cls.__dataclass_params__.frozen
    post_init = cls.__post_init__
    post_plus = lookup_transform(post_init) or hooks.plus_function_for(post_init)

    def construct_post_init(*args: Any, **kwargs: Any) -> ProcResult:
        from ..runtime.core import apply_transform

        obj = cls.__new__(cls)
        signature.bind(obj, *args, **kwargs)  # (raises the TypeError Python raises)
        given = dict(zip(params, args))
        given.update(kwargs)
        for f in fields:
            if f.init and f.name in given:
                value = given[f.name]
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            elif f.init and f.default is not dataclasses.MISSING:
                value = f.default
            else:
                continue  # (a field not given to __init__, with a class-level default)
            if frozen:
                object.__setattr__(obj, f.name, value)
            else:
                setattr(obj, f.name, value)
        var_values = [
            given[n] if n in given else cls.__dataclass_fields__[n].default for n in init_vars
        ]
        # (through apply_transform, so that this code can be differentiated again)
        r = apply_transform(post_plus, obj, *var_values)
        post_backprop = r.backprop

        def construct_post_init_backprop(A: Any, Abox: Any) -> tuple:
            from ..runtime.handover import handover

            if A is not Z and A is not None:
                handover(Abox, obj, A)
            var_sensitivities = dict(zip(init_vars, post_backprop(Z, Abox)[2:]))
            entry = Abox.pop(obj, Z)
            get = (
                (lambda p: entry.get(p, Z) if p in field_names else Z)
                if entry is not Z
                else (lambda p: Z)
            )
            out = ((),) + tuple(
                var_sensitivities[p] if p in var_sensitivities else get(p)
                for p in params[: len(args)]
            )
            if kwargs:
                out = out + (
                    {k: var_sensitivities[k] if k in var_sensitivities else get(k) for k in kwargs},
                )
            return out

        return ProcResult(obj, construct_post_init_backprop)

    _mark_plus(construct_post_init)
    return construct_post_init


def _mark_plus(fn: Any) -> None:
    """Mark a constructor made here as a plus-function (differentiated again at the next
    order, as the other plus-functions dplus builds by hand)."""
    register_plus_code(fn.__code__, PlusInfo(None, (), None))
