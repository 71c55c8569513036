"""Arguments and parameters: binding a call's arguments (``*args``, ``**kwargs``, defaults) and
handing the parameters' sensitivities back to them; the checks of what a plus-function read
once on entry.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from typing import Any

from ..errors import DplusError, NonDifferentiableError
from .boxes import BoxSensitivities
from .calls import closure_parts
from .core import (
    KeywordDict,
)
from .kinds import is_ndarray
from .linear import add, gen_zero, is_zero_sensitivity
from .result import (
    ProcResult,
    call_plus,
)

Z = gen_zero


def star_length(value: Any) -> int:
    """How many arguments ``*value`` supplies, measured before the call (its sensitivities
    are routed back by position): an iterable with no length (a generator, an iterator) is
    consumed by the call itself and cannot be measured, so it is refused."""
    try:
        return len(value)
    except TypeError:
        raise NonDifferentiableError(
            f"a call's argument *{type(value).__name__}: dplus needs the number of arguments it "
            "supplies before the call, and this iterable has no length (taking its values would "
            "consume it). Unpack a list of its values: f(*list(it))"
        ) from None


def star_sensitivity(g: tuple, pos: int, n: int, value: Any) -> Any:
    """The sensitivities of the arguments a ``*value`` supplied, shaped like ``value``."""
    items = list(g[pos : pos + n])
    if all(s is Z or s is None for s in items):
        return Z
    if isinstance(value, list):
        return items
    if isinstance(value, tuple):
        return tuple(items)
    if is_ndarray(value):
        np = sys.modules["numpy"]
        return np.array([0.0 if s is Z else s for s in items])
    if all(is_zero_sensitivity(s) for s in items):
        return Z
    raise NonDifferentiableError(
        f"sensitivity reached arguments unpacked from a {type(value).__name__}; unpack a list or a tuple"
    )


def keyword_sensitivities(g: tuple, pos: int) -> dict:
    """The dict of keyword sensitivities in a backprop's result ``g`` at ``pos`` (empty if none)."""
    if len(g) > pos and isinstance(g[pos], dict):
        return g[pos]
    return KeywordDict()


def merged_keywords(bound: dict, kwargs: dict) -> tuple:
    """The keywords ``{**bound, **kwargs}`` as a pair of tuples: names and values."""
    merged = {**bound, **kwargs}
    return tuple(merged), tuple(merged.values())


def call_plus_keywords(P: Any, args: tuple, names: tuple, values: tuple) -> ProcResult:
    """``call_plus(P, *args, **dict(zip(names, values)))``: the keywords as tuples, so that
    code differentiated again reaches no dict."""
    return call_plus(P, *args, **dict(zip(names, values)))


def double_star_sensitivity(kw: dict, keys: tuple) -> Any:
    """The sensitivity of a dict passed as ``**d``, for the ``keys`` it held at the call."""
    out = KeywordDict({k: kw.get(k, Z) for k in keys})
    return out if any(v is not Z for v in out.values()) else Z


def holds_keys(obj: Any, keys: tuple) -> bool:
    """Whether reading ``obj[k]`` for every key gives an element without running user code:
    a dict holding the keys, or a list or tuple long enough for integer keys."""
    t = type(obj)
    if t is dict:
        for k in keys:
            if k not in obj:
                return False
        return True
    if t is list or t is tuple:
        n = len(obj)
        for k in keys:
            if type(k) is not int or not -n <= k < n:
                return False
        return True
    return False


def check_hoisted(obj: Any, keys: tuple, values: tuple, name: str) -> None:
    """After the forward pass: the elements read on entry are still those of ``obj``."""
    for k, v in zip(keys, values):
        try:
            same = obj[k] is v
        except (KeyError, IndexError):
            same = False
        if not same:
            raise DplusError(
                f"{name}[{k!r}] changed while a differentiated call that reads it ran, but dplus read it once, "
                "when the call started (the parameter is only read in the function). Fix: change it before or "
                "after the call, not from code the call runs."
            )


def inline_rebound(names: tuple) -> None:
    """A global whose calls a plus-function inlined was rebound while it ran."""
    raise DplusError(
        f"a function whose calls dplus inlined ({', '.join(names)}) was rebound while a differentiated "
        "call that inlined it ran, so that call computed with the function it had before. Fix: rebind "
        "it before or after calling the differentiated function, not from inside it."
    )


# ---------------------------------------------------------------------------
# calling conventions with defaults, *args and **kwargs


def make_signature(spec: str, defaults: tuple, kw_defaults: dict) -> inspect.Signature:
    """The signature of a nested function from its source parameter list and default values
    (run each time its ``def`` runs: the parameter list is read once per ``spec``)."""
    template = _parameter_list(spec)
    params = list(template.parameters.values())
    positional = [
        k
        for k, p in enumerate(params)
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    for k, d in zip(positional[len(positional) - len(defaults) :], defaults):
        params[k] = params[k].replace(default=d)
    for k, p in enumerate(params):
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name in kw_defaults:
            params[k] = p.replace(default=kw_defaults[p.name])
    return template.replace(parameters=params)


@functools.lru_cache(maxsize=4096)
def _parameter_list(spec: str) -> inspect.Signature:
    """The signature of ``def _f(<spec>): pass``, without default values."""
    ns: dict = {}
    exec(compile(f"def _f({spec}): pass", "<dplus signature>", "exec"), ns)
    return inspect.signature(ns["_f"])


def present_as_users(
    fn: types.FunctionType,
    name: str,
    qualname: str,
    doc: str | None = None,
    signature: inspect.Signature | None = None,
) -> None:
    """A nested function made by generated code (``inner__plus_1``) shows the program what
    the user's ``def``/``lambda`` would: its name, qualified name, docstring and, for one
    that binds its arguments itself, its parameters (``signature``) to ``inspect``."""
    fn.__name__ = name
    fn.__qualname__ = qualname
    if doc is not None:
        fn.__doc__ = doc
    if signature is not None:
        fn.__signature__ = signature  # type: ignore[attr-defined]


def own_signature(f: types.FunctionType) -> inspect.Signature:
    """The signature of ``f``'s own code and defaults. ``inspect.signature(f)`` follows
    ``__wrapped__`` (set by ``functools.wraps``) and ``__signature__``: the parameters of
    another function, not the ones ``f``'s body binds."""
    plain = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    plain.__kwdefaults__ = f.__kwdefaults__
    return inspect.signature(plain)


def bind_arguments(
    sig: inspect.Signature, args: tuple, kwargs: dict, defaults: tuple | None = None
) -> tuple:
    """The parameters' values, in the signature's order. ``defaults``: a nested function's
    default values (those of ``sig``), whose sensitivities a rule of higher.py hands back."""
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    values = [bound.arguments[name] for name in sig.parameters]
    if defaults is not None:
        for (k, used), d in zip(defaults_used(sig, args, kwargs), defaults):
            if used:
                values[k] = d
    return tuple(values)


def defaults_used(sig: inspect.Signature, args: tuple, kwargs: dict) -> list[tuple[int, bool]]:
    """For each parameter with a default value, in the signature's order: its position, and
    whether the call left it at its default."""
    out = []
    npos = len(args)
    i = 0
    for k, p in enumerate(sig.parameters.values()):
        passed = p.name in kwargs
        if (
            p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            and i < npos
        ):
            passed = True
            i += 1
        if p.default is not inspect.Parameter.empty:
            out.append((k, not passed))
    return out


def default_sensitivities(sig: inspect.Signature, args: tuple, kwargs: dict, sens: tuple) -> tuple:
    """The sensitivities of a nested function's parameters that have default values, in the
    signature's order: a parameter's own where the call left it at its default, else zero.
    A nested function's defaults are computed when its ``def`` runs, so they travel back
    with its closure sensitivity, after the variables it closes over."""
    return tuple(sens[k] if used else Z for k, used in defaults_used(sig, args, kwargs))


def bound_by_keyword(sig: inspect.Signature, name: str) -> bool:
    """Whether a keyword argument ``name`` binds a parameter of its own (else it goes into
    the ``**`` parameter: a positional-only parameter of that name does not take it)."""
    p = sig.parameters.get(name)
    return p is not None and p.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


def unbind_sensitivities(
    sig: inspect.Signature,
    args: tuple,
    kwargs: dict,
    closure: Any,
    sens: tuple,
    Abox: BoxSensitivities,
) -> tuple:
    """Map parameter sensitivities back to the positions and keywords the call used
    (``closure``: the closure's sensitivity, put first)."""
    params = list(sig.parameters.values())
    by_name = dict(zip([p.name for p in params], sens))
    pos_sens: list = []
    npos = len(args)
    i = 0
    for p in params:
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            if i < npos:
                pos_sens.append(by_name[p.name])
                i += 1
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            extra = npos - i
            if extra > 0:
                s = by_name[p.name]
                # () is how a pass that found nothing for *args says zero
                items = (
                    closure_parts(s, extra)
                    if s is not Z and s is not None and s != ()
                    else [Z] * extra
                )
                pos_sens.extend(items)
                i += extra
    out = (closure,) + tuple(pos_sens)
    if kwargs:
        kw_sens: dict = {}
        var_kw = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        for name in kwargs:
            if bound_by_keyword(sig, name):
                kw_sens[name] = by_name[name]
            elif var_kw is not None:
                kw_sens[name] = Z
        if var_kw is not None:
            s = by_name[var_kw]
            if isinstance(s, dict):
                for k, v in s.items():
                    kw_sens[k] = add(kw_sens.get(k, Z), v)
        out = out + (KeywordDict(kw_sens),)
    return out
