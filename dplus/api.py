"""The public reverse-transform API: lift_dplus, dplus, D, grad, grad1, define_dplus."""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast, overload

from .errors import ArgumentError, SensitivityError, describe_callable
from .markers import mark, mark_derived
from .policies import current_unknown_transform
from .runtime.boxes import BoxSensitivities
from .runtime.closures import is_plus_function
from .runtime.conformance import check_conforms
from .runtime.core import apply_transform
from .runtime.fold import Snapshot, fold_arguments, fold_float_list, snapshot
from .runtime.handover import is_tracked_mutable
from .runtime.hooks import hooks
from .runtime.kinds import is_ndarray, is_number
from .runtime.linear import add, gen_zero
from .runtime.memory import finish, is_tracked_array, peek
from .runtime.portable import DEFINED, remember_rule, remember_source
from .runtime.registry import lookup_transform, register_primitive
from .runtime.result import ProcResult, _depth, _outermost, call_plus, run_backprop

T = TypeVar("T")

__all__ = ["lift_dplus", "dplus", "D", "grad", "grad1", "define_dplus", "foldl", "apply"]


def lift_dplus(f: Any) -> Callable[..., ProcResult]:
    """The reverse transform of ``f``: calling it returns ``ProcResult(f(*args), backprop)``.

    ``backprop(Aw, Abox)`` returns ``(closure_sens, *arg_sens)``; when keyword arguments
    were passed, a dict of their sensitivities follows as the last element.
    """
    if is_plus_function(f):
        return cast(Callable[..., ProcResult], hooks.transform_of_plus(f))
    _refuse_generator_function(f)
    t = lookup_transform(f)
    if t is not None:
        return t
    from .transform.plus_functions import can_transform, plus_function_for

    if can_transform(f):
        return _public(plus_function_for(f))
    chosen: Callable[..., ProcResult] = current_unknown_transform()(f, describe_callable(f))
    return chosen


def _refuse_generator_function(f: Any) -> None:
    """A generator function differentiated directly: inside differentiated code it gives the
    list of its values (``normalize._YieldsToList``), which as a result would change what
    the program returns."""
    if inspect.isgeneratorfunction(f):
        from .errors import UnsupportedSyntaxError

        code = f.__code__
        err = UnsupportedSyntaxError(
            f"the generator function {f.__qualname__!r} (yield) cannot be differentiated by dplus as a whole "
            f"({code.co_filename}, line {code.co_firstlineno}): its result is a generator. Differentiate a function "
            "that consumes it instead (sum(g(x)), list(g(x)), a for loop), where its values are differentiated"
        )
        err.filename = code.co_filename
        err.lineno = code.co_firstlineno
        raise err


def _lift(f: Any) -> Callable[..., ProcResult]:
    """``lift_dplus`` without the public coercion of results (used by grad, D, dplus)."""
    if not callable(f):
        raise ArgumentError(
            f"dplus differentiates functions, but it was given {f!r} ({type(f).__name__}): pass the "
            "function itself, e.g. grad(f) rather than grad(f(x))"
        )
    if is_plus_function(f) or lookup_transform(f) is not None:
        return lift_dplus(f)
    _refuse_generator_function(f)
    from .transform.plus_functions import can_transform, plus_function_for

    if can_transform(f):
        return plus_function_for(f)
    chosen: Callable[..., ProcResult] = current_unknown_transform()(f, describe_callable(f))
    return chosen


def coerce_sensitivities(out: tuple[Any, ...], P: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Backprop results with no ``gen_zero`` inside: zeros shaped like what they stand for."""
    from .runtime.linear import coerce_zero

    items = [coerce_zero(out[0], P)]
    for i, s in enumerate(out[1:]):
        if i < len(args):
            items.append(coerce_zero(s, args[i]))
        else:
            items.append(
                coerce_zero(s, s if s is not gen_zero else 0.0)
                if not isinstance(s, dict)
                else {k: (0.0 if v is gen_zero else v) for k, v in s.items()}
            )
    return tuple(items)


def _public(P: Callable[..., ProcResult]) -> Callable[..., ProcResult]:
    """The plus-function handed to users: its backprop returns no gen_zero (SPEC section 4)."""

    def public_plus(*args: Any, **kwargs: Any) -> ProcResult:
        r = call_plus(P, *args, **kwargs)
        inner = r.backprop

        def public_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
            try:
                out = inner(A, Abox)
            finally:
                finish_pass(Abox)
            return coerce_sensitivities(with_array_entries(out, args, Abox), P, args)

        return ProcResult(r.primal, public_backprop)

    from .transform.plus_functions import _mark_plus

    _mark_plus(public_plus)
    mark(public_plus, "__dplus_public_of__", P)
    public_plus.__qualname__ = getattr(P, "__qualname__", "plus")
    return public_plus


def _lift_class(cls: type) -> Callable[..., ProcResult] | None:
    """Constructing an instance of a user class: attrs/dataclass/plain __init__ from source."""
    if cls.__module__.startswith("dplus.") and not cls.__dict__.get("__dplus_from_source__"):
        return None  # dplus's own classes have registered rules or none
    from .transform.plus_functions import construct_plus

    return construct_plus(cls)


# The functions that dplus, D, grad and grad1 return are written in the language dplus
# differentiates, so that lift_dplus can transform them again: derivatives of derivatives.
# Inside them, ``call_plus(P, *args)`` calls a plus-function captured from outside as the
# primal function it is; the small boundary helpers below have rules of their own.


# the end of a backward pass: the arrays it restored hold again what the program left in them
finish_pass = finish


def with_array_entries(
    out: tuple[Any, ...], args: tuple[Any, ...], Abox: BoxSensitivities
) -> tuple[Any, ...]:
    """A backprop's result with the map's entries for array arguments changed in place added
    to their sensitivities (arrays are values to whoever called ``lift_dplus``)."""
    if Abox._memory is None:
        return out
    items = list(out)
    for i, a in enumerate(args):
        if 1 + i < len(items) and is_ndarray(a) and is_tracked_array(a):
            items[1 + i] = add(items[1 + i], peek(Abox, a))
    return tuple(items)


def prepare_sensitivity(result: Any, Aw: Any, Abox: BoxSensitivities) -> Any:
    """Check ``Aw`` against the result; a sensitivity for a mutable result goes into ``Abox``."""
    if type(result) is float and type(Aw) is float:
        return Aw  # the common case
    check_conforms(Aw, result, "the sensitivity given")
    if is_tracked_mutable(result) or (
        type(result) is tuple and any(map(is_tracked_mutable, result))
    ):
        from .runtime.handover import accumulate

        return accumulate(gen_zero, result, Aw, Abox)
    return Aw


def default_sensitivity(result: Any, sensitivity: Any) -> Any:
    """``grad``'s sensitivity: 1.0 for a number (an array of shape ``()`` of ones for a
    0-d array, which NumPy gives as the number of ``np.tensordot`` and others), else the
    one given (error if none was)."""
    if sensitivity is _DEFAULT_SENSITIVITY:
        if is_scalar_array(result):
            return scalar_array_unit(result)
        if not is_number(result):
            raise SensitivityError(
                f"grad needs a number as the result, but the result is {_kind_of(result)}: pass "
                "grad(f, sensitivity=...) with a sensitivity conforming to the result"
            )
        return 1.0
    return sensitivity


def is_scalar_array(v: Any) -> bool:
    """A NumPy array of shape ``()`` and a number dtype: a number for ``grad``."""
    return is_ndarray(v) and v.shape == () and v.dtype.kind in "fciu"


def scalar_array_unit(v: Any) -> Any:
    """The sensitivity 1 of a NumPy array of shape ``()`` (of its dtype; float for integers)."""
    np = sys.modules["numpy"]
    return np.ones((), dtype=np.result_type(v.dtype, float))


def _kind_of(v: Any) -> str:
    return f"an array of shape {v.shape}" if is_ndarray(v) else type(v).__name__


def boundary(
    args: tuple[Any, ...], out: tuple[Any, ...], Abox: BoxSensitivities
) -> tuple[Any, ...]:
    """The user-facing argument sensitivities: ``Abox`` entries of mutable arguments folded in.

    ``args`` are the arguments' snapshots (their layouts at the call).
    """
    sens = out[1 : 1 + len(args)]
    if len(sens) == len(args):
        for a, s in zip(args, sens):
            if type(a) is not float or type(s) is not float:
                break
        else:
            return sens  # numbers in, numbers out: nothing to fold
    folded: list[Any] = []
    claimed: dict[
        Any, Any
    ] = {}  # (each place of memory changed in place gives its sensitivity once)
    for a, s in zip(args, sens):
        if type(a) is float and type(s) is float:
            folded.append(s)
        elif (
            type(a) is Snapshot
            and a.content == "floats"
            and s is gen_zero
            and (r := fold_float_list(a, Abox)) is not None
        ):
            folded.append(r)  # a list of floats: its entry's floats
        else:
            folded.append(fold_arguments(a, s, Abox, claimed))
    return tuple(folded)


_DEFAULT_SENSITIVITY = float("1.0")


def dplus(f: Any) -> Callable[..., ProcResult]:
    """Like :func:`lift_dplus`, but the backprop takes only ``Aw`` and returns the argument sensitivities."""
    return _make_dplus(_lift(f), f)


def _make_dplus(fplus: Any, f: Any) -> Callable[..., ProcResult]:
    def dplus_fn(*args: Any, **kwargs: Any) -> ProcResult:
        snaps = snapshot(args)
        if kwargs:
            r = call_plus(fplus, *args, **kwargs)
        else:
            r = call_plus(fplus, *args)

        def dplus_backprop(Aw: Any, constants: dict[int, Any] | None = None) -> tuple[Any, ...]:
            # (constants: the arguments whose sensitivities the caller discards, runtime.constants)
            Abox = BoxSensitivities(constants)
            try:
                out = run_backprop(r.backprop, prepare_sensitivity(r.primal, Aw, Abox), Abox)
            finally:
                finish_pass(Abox)
            return boundary(snaps, out, Abox)

        return ProcResult(r.primal, dplus_backprop)

    _mark_derived(dplus_fn, "dplus", f)
    return dplus_fn


def D(f: Any) -> Callable[..., Callable[[Any], tuple[Any, ...]]]:
    """``D(f)(*args)(Aw)`` returns the sensitivities of the arguments."""
    return _make_D(_lift(f), f)


def _make_D(fplus: Any, f: Any) -> Callable[..., Callable[[Any], tuple[Any, ...]]]:
    def D_fn(*args: Any, **kwargs: Any) -> Callable[[Any], tuple[Any, ...]]:
        snaps = snapshot(args)
        if kwargs:
            r = call_plus(fplus, *args, **kwargs)
        else:
            r = call_plus(fplus, *args)

        def D_backprop(Aw: Any) -> tuple[Any, ...]:
            Abox = BoxSensitivities()
            try:
                out = run_backprop(r.backprop, prepare_sensitivity(r.primal, Aw, Abox), Abox)
            finally:
                finish_pass(Abox)
            return boundary(snaps, out, Abox)

        return D_backprop

    _mark_derived(D_fn, "D", f)
    return D_fn


@overload
def grad(
    f: Any, sensitivity: Any = ..., *, argnums: None = None, has_aux: Literal[False] = False
) -> Callable[..., tuple[Any, ...]]: ...


@overload
def grad(
    f: Any,
    sensitivity: Any = ...,
    *,
    argnums: int | tuple[int, ...] | None = None,
    has_aux: bool = False,
) -> Callable[..., Any]: ...


def grad(
    f: Any,
    sensitivity: Any = _DEFAULT_SENSITIVITY,
    *,
    argnums: int | tuple[int, ...] | None = None,
    has_aux: bool = False,
) -> Callable[..., Any]:
    """``grad(f)(*args, **kwargs)`` returns one gradient per positional argument, each shaped like it.

    A result that is not a number needs an explicit ``sensitivity`` conforming to it.
    Keyword arguments of the call are passed to ``f`` and not differentiated. With
    ``argnums`` or ``has_aux``, ``grad`` is JAX's: ``argnums`` (an int or a tuple of ints)
    picks what is returned, ``has_aux`` returns ``(gradient, aux)`` for an ``f`` returning
    ``(loss, aux)``, and gradients come in their argument's structure (see ``value_and_grad``).
    """
    if argnums is not None or has_aux:
        if sensitivity is not _DEFAULT_SENSITIVITY:
            raise ArgumentError("grad: sensitivity= cannot be combined with argnums= or has_aux=")
        return cast(
            Callable[..., Any], hooks.jax_style_grad(f, 0 if argnums is None else argnums, has_aux)
        )
    if sensitivity is _DEFAULT_SENSITIVITY:
        gradient = _gradient_fused_first(f)
        if gradient is not None:
            return gradient
    return _make_gradient(_lift(f), f, sensitivity)


def _gradient_fused_first(f: Any) -> Callable[..., tuple[Any, ...]] | None:
    """``grad(f)`` for a function whose body is one float fast segment, made from its fused
    gradient alone (``transformer.fused_first``): the plus-function, most of the generated
    code, is built when a call first needs it (the fused gradient returned None: arguments
    other than floats, a guard failed; or inside differentiated code). It computes what
    ``_make_gradient``'s gradient computes, which stands for it where it is differentiated
    again (``__dplus_differentiated_as__``). None for any other ``f``."""
    if (
        type(f) is not types.FunctionType
        or is_plus_function(f)
        or hasattr(f, "__dplus_derived__")
        or lookup_transform(f) is not None
        or inspect.isgeneratorfunction(f)
    ):
        return None
    from .transform.transformer import fused_first

    fused = fused_first(f)
    if fused is None:
        return None
    n = fused.__code__.co_argcount
    plus: list[Callable[..., ProcResult]] = []  # f's plus-function, once made

    def gradient(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        if not _depth[0] and len(args) == n and not kwargs:
            out: tuple[Any, ...] | None = fused(*args)
            if out is not None:
                return out
        if not plus:
            plus.append(_lift(f))
        return _gradient_outermost(plus[0], _DEFAULT_SENSITIVITY, args, kwargs)

    _mark_derived(gradient, "grad", f, _DEFAULT_SENSITIVITY)
    mark(gradient, "__dplus_differentiated_as__", lambda: _make_gradient(_lift(f), f))
    return gradient


def _make_gradient(
    fplus: Any, f: Any, sensitivity: Any = _DEFAULT_SENSITIVITY
) -> Callable[..., tuple[Any, ...]]:
    fused = getattr(fplus, "__dplus_fused__", None) if sensitivity is _DEFAULT_SENSITIVITY else None
    if fused is None:

        def gradient(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
            return _gradient_outermost(fplus, sensitivity, args, kwargs)
    else:
        n = fused.__code__.co_argcount

        def gradient(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
            # a formula on floats (and lists of floats): forward and reverse in one generated
            # function (reverse.FunctionBuilder.fused_gradient, fused.py); None: the general way
            if not _depth[0] and len(args) == n and not kwargs:
                out: tuple[Any, ...] | None = fused(*args)
                if out is not None:
                    return out
            return _gradient_outermost(fplus, sensitivity, args, kwargs)

    _mark_derived(gradient, "grad", f, sensitivity)
    return gradient


def _gradient_steps(
    fplus: Any, sensitivity: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> tuple[Any, ...]:
    """A gradient: the forward pass, the backprop, and the boundary fold.

    Keyword arguments are passed through to the function and not differentiated (as in JAX).
    """
    snaps = snapshot(args)
    if kwargs:
        r = call_plus(fplus, *args, **kwargs)
    else:
        r = call_plus(fplus, *args)
    Abox = BoxSensitivities()
    Aw = default_sensitivity(r.primal, sensitivity)
    try:
        out = run_backprop(r.backprop, prepare_sensitivity(r.primal, Aw, Abox), Abox)
    finally:
        finish_pass(Abox)
    return boundary(snaps, out, Abox)


def _gradient_outermost(
    fplus: Any, sensitivity: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> tuple[Any, ...]:
    """:func:`_gradient_steps`, set up once for forward and reverse when outermost.

    With one set-up the cyclic collector stays paused from the forward pass until the
    record is freed: between the two passes it would traverse the whole record (its
    objects are all young), often more than once, which cost a third of a long gradient.
    Differentiated again, this is ``_gradient_steps`` (the rule in ``higher.py``).
    """
    if _depth[0]:
        return _gradient_steps(fplus, sensitivity, args, kwargs)
    try:
        if sensitivity is _DEFAULT_SENSITIVITY and not kwargs:
            for a in args:
                if type(a) is not float and type(a) is not int:
                    break
            else:
                return _outermost(_number_gradient, (fplus, args), {})
        return _outermost(_gradient_steps, (fplus, sensitivity, args, kwargs), {})
    except TypeError as e:
        raise_if_not_accepted(e, fplus, "grad", args, kwargs)
        raise


def raise_if_not_accepted(
    error: TypeError, fplus: Any, what: str, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> None:
    """Raise :class:`ArgumentError` when ``error`` came from calling the differentiated function
    with arguments it does not accept (rather than from a ``TypeError`` inside it)."""
    import inspect

    from .runtime.arguments import own_signature

    source = getattr(fplus, "__dplus_source__", None)
    signature: inspect.Signature | None
    try:
        if isinstance(source, types.FunctionType):
            signature = own_signature(source)  # (the parameters its body binds)
        else:
            signature = inspect.signature(source) if source is not None else None
    except (TypeError, ValueError):
        return
    if signature is None:
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as mismatch:
        name = getattr(source, "__name__", "f")
        raise ArgumentError(
            f"{what}({name}) was called with arguments that {describe_callable(source)} does not accept "
            f"({mismatch}); call {what}({name}) with the arguments of {name} itself"
        ) from None


def _number_gradient(fplus: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """:func:`_gradient_steps` when every argument is a number, at the outermost level: the
    arguments are their own snapshots, and the plus-function and backprop are called
    directly (nothing here is differentiated again). For small functions the steps cost
    more than the function's own forward and reverse."""
    r = fplus(*args)
    p = r.primal
    Abox = BoxSensitivities()
    try:
        if type(p) is float:
            out = r.backprop(1.0, Abox)
        else:
            out = r.backprop(
                prepare_sensitivity(p, default_sensitivity(p, _DEFAULT_SENSITIVITY), Abox), Abox
            )
    finally:
        finish_pass(Abox)
    return boundary(args, out, Abox)


def _grad_inside(f: Any, /, *rest: Any, **kwargs: Any) -> ProcResult:
    """``grad(f)`` (``grad(f, sensitivity)``) called inside differentiated code: ``f`` is
    already a plus-function there. The sensitivity given gets the part of the gradient
    function's closure sensitivity for it, by position or by keyword as it was passed."""
    jax_options = {k: kwargs.pop(k) for k in ("argnums", "has_aux") if k in kwargs}
    if jax_options.get("argnums") is not None or jax_options.get("has_aux"):
        if rest or kwargs:
            raise ArgumentError("grad: sensitivity= cannot be combined with argnums= or has_aux=")
        # (through apply_transform: a rule's transform called from rule code, see core.py)
        return apply_transform(hooks.jax_style_inside, f, grad=True, **jax_options)
    fplus = f if is_plus_function(f) else _lift(f)
    G = _make_gradient(fplus, f, *rest, **kwargs)

    def grad_inside_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        from .runtime.calls import closure_parts
        from .runtime.core import KeywordDict

        names = G.__code__.co_freevars
        parts = (
            dict(zip(names, closure_parts(A, len(names))))
            if A is not gen_zero and A is not None
            else {}
        )
        s = parts.get("sensitivity", gen_zero)
        keywords: dict[str, Any] = {k: s for k in kwargs}
        keywords.update((k, gen_zero) for k in jax_options)
        return (
            ((), parts.get("fplus", gen_zero))
            + tuple(s for _ in rest)
            + ((KeywordDict(keywords),) if keywords else ())
        )

    return ProcResult(G, grad_inside_backprop)


def _D_inside(f: Any) -> ProcResult:
    """``D(f)`` called inside differentiated code: ``f`` is already a plus-function there."""
    fplus = f if is_plus_function(f) else _lift(f)
    G = _make_D(fplus, f)
    return ProcResult(G, _derived_closure_backprop(G, ("fplus",)))


def _dplus_inside(f: Any) -> ProcResult:
    """``dplus(f)`` called inside differentiated code: ``f`` is already a plus-function there."""
    fplus = f if is_plus_function(f) else _lift(f)
    G = _make_dplus(fplus, f)
    return ProcResult(G, _derived_closure_backprop(G, ("fplus",)))


def _derived_closure_backprop(G: Any, names: tuple[Any, ...]) -> Callable[..., tuple[Any, ...]]:
    def derived_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if A is gen_zero or A is None:
            return ((), gen_zero)
        from .runtime.calls import closure_parts

        parts = dict(zip(G.__code__.co_freevars, closure_parts(A, len(G.__code__.co_freevars))))
        return ((), parts.get(names[0], gen_zero))

    return derived_backprop


def grad1(f: Any) -> Callable[[Any], Any]:
    """The gradient of a one-argument function, without the tuple."""
    return _make_gradient1(grad(f), f)


def _make_gradient1(g: Any, f: Any) -> Callable[[Any], Any]:
    def gradient1(x: Any) -> Any:
        return g(x)[0]

    _mark_derived(gradient1, "grad1", f)
    return gradient1


def _grad1_inside(f: Any) -> ProcResult:
    """``grad1(f)`` called inside differentiated code."""
    fplus = f if is_plus_function(f) else _lift(f)
    g = _make_gradient(fplus, f)
    G1 = _make_gradient1(g, f)

    def grad1_inside_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if A is gen_zero or A is None:
            return ((), gen_zero)
        from .runtime.calls import closure_parts

        (Ag,) = closure_parts(A, 1)
        return _derived_closure_backprop(g, ("fplus",))(Ag, Abox)

    return ProcResult(G1, grad1_inside_backprop)


# Functions made by grad, D, dplus, grad1 remember what they were made from, so that
# lift_dplus can differentiate them again (derivatives of derivatives).
def _mark_derived(fn: Any, kind: str, f: Any, *extra: Any) -> None:
    mark_derived(fn, kind, f, *extra)
    remember_source(f)  # (for a copy of fn made by unpickling in another process)
    try:
        fn.__name__ = f"{kind}_{getattr(f, '__name__', 'f')}"
        fn.__qualname__ = fn.__name__
    except (AttributeError, TypeError):
        pass


def define_dplus(f: T) -> T:
    """Define ``f`` as usual and register its derived reverse transform as a primitive.

    The transform is derived lazily, at the first differentiated call, so recursion
    and mutual recursion between decorated functions work in any definition order.
    """
    if isinstance(f, (staticmethod, classmethod)):
        inner = f.__func__
        define_dplus(inner)
        return f
    from .transform.plus_functions import lazy_transform

    register_primitive(f, lazy_transform(f), note="derived from source by define_dplus")
    remember_rule(f, DEFINED)
    return f


# --------------------------------------------------------------------------
# higher-order helpers with Racket's argument order


def foldl(f: Callable[[Any, Any], Any], init: Any, xs: Any) -> Any:
    """``f(x, acc)`` for each ``x`` of ``xs`` in order, starting from ``acc = init``."""
    acc = init
    for x in xs:
        acc = f(x, acc)
    return acc


def apply(f: Callable[..., Any], args: Any) -> Any:
    """``f(*args)``."""
    return f(*args)


hooks.install(lift_class=_lift_class, define_dplus=define_dplus)

# called inside differentiated code, foldl and apply are differentiated from their source
mark_derived(foldl, "helper")
mark_derived(_gradient_steps, "helper")
mark_derived(apply, "helper")
