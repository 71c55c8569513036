"""Helpers derived from the reverse transform: Jacobians, Hessians and their products.

- ``jacobian(f)(*args)``: reverse mode, one forward pass and one backprop per scalar
  component of the result. The result is shaped like ``f``'s result; each of its number
  leaves is replaced by the tuple of gradients (one per positional argument, each
  shaped like its argument). For a NumPy array result, each argument's block is an
  array of shape ``result.shape + argument.shape``.
- ``hessian(f)(*args)``: ``jacobian(grad(f))(*args)``, reverse over reverse.
- ``hvp(f)(args, v)``: the Hessian-vector product, reverse over reverse, without building
  the Hessian: the gradient of ``dot(grad(f)(*args), v)``.
- ``jvp(f)(args, tangents)``: ``(f(*args), J·t)`` by transposing the backpropagator:
  ``(J·t)_i = <J^T e_i, t>``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

from .api import (
    _derived_closure_backprop,
    _grad_inside,
    _lift,
    _make_dplus,
    dplus,
    grad,
    is_scalar_array,
    scalar_array_unit,
)
from .errors import ArgumentError, SensitivityError
from .higher.call_rules import derived_maker_rule
from .markers import mark_derived
from .rules import defnondiff
from .runtime.boxes import BoxSensitivities
from .runtime.closures import is_plus_function
from .runtime.closures import is_plus_function as _is_plus
from .runtime.constants import constant_arguments, is_constant
from .runtime.core import apply_transform
from .runtime.hooks import hooks
from .runtime.kinds import is_ndarray, is_number
from .runtime.linear import dot, gen_zero, zero
from .runtime.portable import remember_source
from .runtime.registry import register_primitive
from .runtime.result import ProcResult
from .structured import shaped_like

__all__ = ["jacobian", "hessian", "hvp", "jvp", "value_and_grad"]


def _leaves(v: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Paths to the number leaves of a (nested) value."""
    if is_number(v) and type(v) is not bool:
        yield path
    elif isinstance(v, (list, tuple)):
        for i, e in enumerate(v):
            yield from _leaves(e, path + (i,))
    elif isinstance(v, dict):
        for k, e in v.items():
            yield from _leaves(e, path + (k,))
    elif is_ndarray(v):
        np = sys.modules["numpy"]
        for idx in np.ndindex(v.shape):
            yield path + (idx,)


def _block_paths(v: Any, path: tuple[Any, ...] = ()) -> list[Any]:
    """Paths to the numbers and to the NumPy arrays (each a whole) of a (nested) value."""
    if (is_number(v) and type(v) is not bool) or is_ndarray(v):
        return [path]
    if isinstance(v, (list, tuple)):
        return [p for i, e in enumerate(v) for p in _block_paths(e, path + (i,))]
    if isinstance(v, dict):
        return [p for k, e in v.items() for p in _block_paths(e, path + (k,))]
    return []


def _array_shape_at(v: Any, path: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The shape of the array at ``path`` in ``v``; ``None`` for a number."""
    for head in path:
        v = v[head]
    return v.shape if is_ndarray(v) else None


def _jacobian_block(r: ProcResult, y: Any, path: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
    """The Jacobian of the part of ``y`` at ``path``: for a number, one gradient per argument
    (shaped like it); for an array, one array per argument, of shape ``part.shape + arg.shape``."""
    shape = _array_shape_at(y, path)
    if shape is None:
        return _jacobian_entry(r, y, path, args)
    np = sys.modules["numpy"]
    rows = [_jacobian_entry(r, y, path + (idx,), args) for idx in _indexes(shape)]
    return tuple(
        np.reshape(
            np.array([row[i] for row in rows], dtype=_block_dtype([row[i] for row in rows])),
            shape + np.shape(a),
        )
        for i, a in enumerate(args)
    )


def _jacobian_entry(
    r: ProcResult, y: Any, path: tuple[Any, ...], args: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The derivatives of the number of ``y`` at ``path``, one per argument. For a complex
    number: its derivative, ``dy/dx`` for a real ``x`` (the sensitivity 1 reads the real part
    of a change of ``y``, ``-1j`` its imaginary part), ``f'(z)`` for a complex ``z`` where ``f``
    is holomorphic; elsewhere no complex number is the derivative, and it is refused."""
    s1 = r.backprop(_unit(y, path))
    if not _complex_at(y, path):
        return tuple(s1)
    s2 = r.backprop(_unit(y, path, -1j))
    return tuple(_complex_derivative(a, g1, g2) for a, g1, g2 in zip(args, s1, s2))


def _complex_derivative(a: Any, g1: Any, g2: Any) -> Any:
    """The derivative of a complex number of the result in the argument (part) ``a``, from the
    sensitivities ``g1`` (of the unit 1) and ``g2`` (of the unit -1j) that ``a`` received."""
    if isinstance(a, (list, tuple)):
        items = [_complex_derivative(e, u, v) for e, u, v in zip(a, g1, g2)]
        return items if isinstance(a, list) else tuple(items)
    if isinstance(a, dict):
        return {k: _complex_derivative(a[k], g1[k], g2[k]) for k in a}
    if g1 is None:
        return None
    if _complex_argument(a):
        _refuse_unless_holomorphic(g1, g2)
        return g1
    return g1 + 1j * g2


def _complex_argument(a: Any) -> bool:
    return (
        isinstance(a, complex) or _is_complex_scalar(a) or (is_ndarray(a) and a.dtype.kind == "c")
    )


def _refuse_unless_holomorphic(g1: Any, g2: Any) -> None:
    """For a complex argument, ``g2 == -1j * g1`` (the Cauchy-Riemann equations) says the
    derivative is the complex number ``g1``; otherwise there is none."""
    np = sys.modules.get("numpy")
    if np is not None:
        holomorphic = bool(np.allclose(g2, -1j * np.asarray(g1), rtol=1e-9, atol=1e-12))
    else:
        holomorphic = abs(g2 + 1j * g1) <= 1e-12 + 1e-9 * abs(g1)
    if not holomorphic:
        from .errors import NonDifferentiableError

        raise NonDifferentiableError(
            "jacobian: a complex number of the result is not a holomorphic function of a complex "
            "argument here, so no complex number is its derivative; take the Jacobian of its real "
            "and imaginary parts (np.real, np.imag), or use jvp or D for a directional derivative"
        )


def _block_dtype(column: list[Any]) -> Any:
    """The dtype of a Jacobian block: complex if a derivative is, float otherwise."""
    np = sys.modules["numpy"]
    return complex if any(np.iscomplexobj(v) for v in column) else float


def _unit(v: Any, path: tuple[Any, ...], one: Any = 1) -> Any:
    """The sensitivity of ``v`` that is ``one`` (1, or -1j for a complex number) at ``path`` and
    0 elsewhere."""
    if not path:
        if is_ndarray(v):
            raise SensitivityError("internal: a path must reach a number")
        return type(v)(one) if not isinstance(v, int) or isinstance(v, bool) else float(one)
    head, rest = path[0], path[1:]
    if is_ndarray(v):
        np = sys.modules["numpy"]
        s = np.zeros(v.shape, dtype=np.result_type(v.dtype, float))
        s[head] = one
        return s
    if isinstance(v, list):
        return [(_unit(e, rest, one) if i == head else zero(e)) for i, e in enumerate(v)]
    if isinstance(v, tuple):
        items = [(_unit(e, rest, one) if i == head else zero(e)) for i, e in enumerate(v)]
        # (a NamedTuple's _make when hasattr finds it; written as before, since rules
        # differentiate this source at the next order)
        return type(v)._make(items) if hasattr(type(v), "_make") else tuple(items)  # type: ignore[attr-defined]
    if isinstance(v, dict):
        return {k: (_unit(e, rest, one) if k == head else zero(e)) for k, e in v.items()}
    raise SensitivityError(f"cannot build a unit sensitivity inside a {type(v).__name__}")


def _indexes(shape: tuple[Any, ...]) -> list[Any]:
    """The indexes of an array of this shape, in order."""
    return list(sys.modules["numpy"].ndindex(shape))


def _place(out: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``out`` with the leaf at ``path`` replaced by ``value`` (for structure-shaped results)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(out, list):
        out = list(out)
        out[head] = _place(out[head], rest, value)
        return out
    if isinstance(out, tuple):
        items = list(out)
        items[head] = _place(items[head], rest, value)
        # (a NamedTuple's _make when hasattr finds it; written as before, since rules
        # differentiate this source at the next order)
        return type(out)._make(items) if hasattr(type(out), "_make") else tuple(items)  # type: ignore[attr-defined]
    if isinstance(out, dict):
        out = dict(out)
        out[head] = _place(out[head], rest, value)
        return out
    raise SensitivityError(f"cannot place a Jacobian row inside a {type(out).__name__}")


def _shaped_by_leaves(
    v: Any,
    at_number: Callable[[tuple[Any, ...]], Any],
    at_array: Callable[[Any, tuple[Any, ...]], Any],
    path: tuple[Any, ...] = (),
) -> Any:
    """``v`` with each number leaf replaced by ``at_number(path)`` and each NumPy array leaf
    by ``at_array(array, path)``; other leaves (bools, strings, ...) are kept."""
    if is_number(v) and type(v) is not bool:
        return at_number(path)
    if is_ndarray(v):
        return at_array(v, path)
    if isinstance(v, (list, tuple)):
        items = [_shaped_by_leaves(e, at_number, at_array, path + (i,)) for i, e in enumerate(v)]
        if isinstance(v, list):
            return items
        # (a NamedTuple's _make when hasattr finds it; written as before, since rules
        # differentiate this source at the next order)
        return type(v)._make(items) if hasattr(type(v), "_make") else tuple(items)  # type: ignore[attr-defined]
    if isinstance(v, dict):
        return {k: _shaped_by_leaves(e, at_number, at_array, path + (k,)) for k, e in v.items()}
    return v


def jacobian(f: Callable[..., Any]) -> Callable[..., Any]:
    """The Jacobian of ``f`` by reverse mode (one backprop per scalar component of the result)."""
    return _make_jacobian(dplus(f), f)


def _make_jacobian(fd: Callable[..., Any], f: Callable[..., Any]) -> Callable[..., Any]:
    # written in the language dplus differentiates (no in-place writes into arrays), so that
    # a Jacobian taken inside differentiated code is differentiated from this source
    def jacobian_fn(*args: Any) -> Any:
        r = fd(*args)
        y = r.primal
        out = y
        for path in _block_paths(y):
            out = _place(out, path, _jacobian_block(r, y, path, args))
        return out

    mark_derived(jacobian_fn, "jacobian", f)
    remember_source(f)
    return jacobian_fn


def _jacobian_inside(f: Any) -> ProcResult:
    """``jacobian(f)`` called inside differentiated code, where ``f`` is a plus-function: the
    Jacobian function made closes over ``dplus(f)``, which closes over ``f``'s plus-function;
    the sensitivity of what they close over goes back to ``f``."""
    fplus = f if is_plus_function(f) else _lift(f)
    fd = _make_dplus(fplus, f)
    G = _make_jacobian(fd, f)
    fd_backprop = _derived_closure_backprop(fd, ("fplus",))
    G_backprop = _derived_closure_backprop(G, ("fd",))

    def jacobian_inside_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        return fd_backprop(G_backprop(A, Abox)[1], Abox)

    return ProcResult(G, jacobian_inside_backprop)


def hessian(f: Callable[..., Any]) -> Callable[..., Any]:
    """The Hessian of a scalar function: the Jacobian of its gradient (reverse over reverse)."""
    return jacobian(grad(f))


def _hessian_inside(f: Any) -> ProcResult:
    """``hessian(f)`` called inside differentiated code: ``jacobian(grad(f))`` there."""
    made_grad = apply_transform(_grad_inside, f)
    made_jacobian = apply_transform(_jacobian_inside, made_grad.primal)

    def hessian_inside_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        return made_grad.backprop(made_jacobian.backprop(A, Abox)[1], Abox)

    return ProcResult(made_jacobian.primal, hessian_inside_backprop)


def hvp(f: Callable[..., Any]) -> Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]]:
    """``hvp(f)(args, v)``: the Hessian of ``f`` at ``args`` times ``v`` (shaped like ``args``)."""
    g = grad(f)

    def directional(*args_and_v: Any) -> Any:
        n = len(args_and_v) // 2
        return dot(g(*args_and_v[:n]), args_and_v[n:])

    gd = grad(directional)

    def hvp_fn(args: tuple[Any, ...], v: tuple[Any, ...]) -> tuple[Any, ...]:
        args = tuple(args)
        v = tuple(v)
        if len(args) != len(v):
            raise SensitivityError(
                f"hvp needs one direction per argument: {len(args)} arguments, {len(v)} directions"
            )
        return gd(*args, *v)[: len(args)]

    return hvp_fn


def jvp(f: Callable[..., Any]) -> Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]]:
    """``jvp(f)(args, tangents)`` returns ``(f(*args), J·tangents)``, by transposing the backprop."""
    return _make_jvp(dplus(f), f)


def _make_jvp(
    fd: Callable[..., Any], f: Callable[..., Any]
) -> Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]]:
    # written in the language dplus differentiates (no in-place writes into arrays), so that
    # a JVP taken inside differentiated code is differentiated from this source
    def jvp_fn(args: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, ...]:
        args = tuple(args)
        tangents = tuple(tangents)
        _check_directions(args, tangents, "jvp", "tangent")
        r = fd(*args)
        y = r.primal
        out = y
        for path in _block_paths(y):
            out = _place(out, path, _jvp_block(r, y, path, tangents))
        return y, out

    mark_derived(jvp_fn, "jvp", f)
    remember_source(f)
    return jvp_fn


def _jvp_block(r: ProcResult, y: Any, path: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
    """The part of ``J·t`` at ``path`` in the result ``y``: a number, or an array shaped like it."""
    shape = _array_shape_at(y, path)
    if shape is None:
        return _tangent_component(r, y, path, tangents)
    np = sys.modules["numpy"]
    parts = tuple(_tangent_component(r, y, path + (idx,), tangents) for idx in _indexes(shape))
    if not parts:
        return np.zeros(shape, dtype=np.result_type(_value_at(y, path).dtype, float))
    return np.reshape(np.stack(parts), shape)


def _tangent_component(
    r: ProcResult, y: Any, path: tuple[Any, ...], tangents: tuple[Any, ...]
) -> Any:
    """The number of ``J·t`` at ``path``. A sensitivity ``c`` pairs with a change ``dy`` as
    ``Re(c dy)``: the unit sensitivity reads the real part of the change, and for a complex
    number of the result, ``-1j`` reads its imaginary part."""
    re = _real_part(dot(r.backprop(_unit(y, path)), tangents))
    if not _complex_at(y, path):
        return re
    return re + 1j * _real_part(dot(r.backprop(_unit(y, path, -1j)), tangents))


def _real_part(v: Any) -> Any:
    return v.real if isinstance(v, complex) or _is_complex_scalar(v) else v


def _is_complex_scalar(v: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(v, np.complexfloating)


def _complex_at(y: Any, path: tuple[Any, ...]) -> bool:
    """Whether the number of ``y`` at ``path`` is complex (an element of a complex array too)."""
    for head in path:
        if is_ndarray(y):
            return bool(y.dtype.kind == "c")
        y = y[head]
    return (
        isinstance(y, complex) or _is_complex_scalar(y) or (is_ndarray(y) and y.dtype.kind == "c")
    )


def _value_at(y: Any, path: tuple[Any, ...]) -> Any:
    for head in path:
        y = y[head]
    return y


def _check_directions(args: tuple[Any, ...], v: tuple[Any, ...], what: str, kind: str) -> None:
    if len(args) != len(v):
        raise SensitivityError(
            f"{what} needs one {kind} per argument: {len(args)} arguments, {len(v)} {kind}s"
        )


def _jvp_inside(f: Any) -> ProcResult:
    """``jvp(f)`` called inside differentiated code, as :func:`_jacobian_inside`."""
    fplus = f if is_plus_function(f) else _lift(f)
    fd = _make_dplus(fplus, f)
    G = _make_jvp(fd, f)
    fd_backprop = _derived_closure_backprop(fd, ("fplus",))
    G_backprop = _derived_closure_backprop(G, ("fd",))

    def jvp_inside_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        return fd_backprop(G_backprop(A, Abox)[1], Abox)

    return ProcResult(G, jvp_inside_backprop)


def _selected(
    gradients: tuple[Any, ...], args: tuple[Any, ...], argnums: int | tuple[int, ...]
) -> Any:
    """The gradients ``argnums`` asks for, each in its argument's own structure."""
    if isinstance(argnums, int):
        return shaped_like(args[argnums], gradients[argnums])
    return tuple(shaped_like(args[i], gradients[i]) for i in argnums)


def _check_argnums(argnums: Any, what: str) -> None:
    numbers = (argnums,) if isinstance(argnums, int) else argnums
    if (
        not isinstance(numbers, tuple)
        or not numbers
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in numbers)
    ):
        raise ArgumentError(
            f"{what}: argnums must be an int or a non-empty tuple of ints, not {argnums!r}"
        )


def _check_positions(argnums: int | tuple[int, ...], args: tuple[Any, ...], what: str) -> None:
    for i in (argnums,) if isinstance(argnums, int) else argnums:
        if not -len(args) <= i < len(args):
            raise ArgumentError(
                f"{what}: argnums asks for the gradient of positional argument {i}, but the call passed "
                f"{len(args)} positional argument(s)"
            )


def value_and_grad(
    f: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., tuple[Any, Any]]:
    """``value_and_grad(f)(*args, **kwargs)`` returns ``(f(*args, **kwargs), gradient)``, as JAX's.

    ``argnums`` picks the positional arguments to differentiate: an int gives that argument's
    gradient, a tuple a tuple of gradients. With ``has_aux=True``, ``f`` returns
    ``(loss, aux)``: the result is ``((loss, aux), gradient)`` and ``aux`` is not
    differentiated. Keyword arguments are passed through and not differentiated.
    Gradients come in their argument's structure (:mod:`dplus.structured`).
    One forward and one backward pass, whatever ``argnums`` selects.
    """
    _check_argnums(argnums, "value_and_grad")
    return _make_value_and_grad(_lift(f), f, argnums, has_aux)


def _make_value_and_grad(
    fplus: Any, f: Any, argnums: int | tuple[int, ...], has_aux: bool
) -> Callable[..., tuple[Any, Any]]:
    fd = _make_dplus(fplus, f)

    def value_and_grad_fn(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        _check_positions(argnums, args, "value_and_grad")
        r = fd(*args, **kwargs)
        value = r.primal
        unit = _unit_of_loss(_loss_of(value, has_aux), f, has_aux)
        sensitivity = (unit, gen_zero) if has_aux else unit
        constants = constant_arguments(args, kwargs, argnums)
        return value, _selected(r.backprop(sensitivity, constants), args, argnums)

    mark_derived(value_and_grad_fn, "value_and_grad", f)
    remember_source(f)
    return value_and_grad_fn


def _unit_of_loss(loss: Any, f: Any, has_aux: bool) -> Any:
    """The sensitivity 1 of the loss: a number, or a NumPy array of shape ``()``."""
    if is_scalar_array(loss):
        return scalar_array_unit(loss)
    if not is_number(loss):
        kind = f"an array of shape {loss.shape}" if is_ndarray(loss) else type(loss).__name__
        raise SensitivityError(
            f"value_and_grad needs {'the first element of ' if has_aux else ''}the result of "
            f"{getattr(f, '__name__', 'f')} to be a number, but it is {kind}"
            + ("" if has_aux else "; a function returning (loss, aux) needs has_aux=True")
        )
    return 1.0


def _loss_of(value: Any, has_aux: bool) -> Any:
    if not has_aux:
        return value
    if not isinstance(value, tuple) or len(value) != 2:
        raise SensitivityError(
            f"with has_aux=True the function must return a pair (loss, aux), but it returned {type(value).__name__}"
        )
    return value[0]


def jax_style_grad(
    f: Callable[..., Any], argnums: int | tuple[int, ...], has_aux: bool
) -> Callable[..., Any]:
    """``grad(f, argnums=..., has_aux=...)``: JAX's ``grad``, the gradient without the value."""
    _check_argnums(argnums, "grad")
    return _make_jax_grad(_lift(f), f, argnums, has_aux)


def _make_jax_grad(
    fplus: Any, f: Any, argnums: int | tuple[int, ...], has_aux: bool
) -> Callable[..., Any]:
    vg = _make_value_and_grad(fplus, f, argnums, has_aux)

    def jax_grad_fn(*args: Any, **kwargs: Any) -> Any:
        value, gradient = vg(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    mark_derived(jax_grad_fn, "value_and_grad", f)
    remember_source(f)
    return jax_grad_fn


def _closure_sensitivity(G: Any, A: Any, path: tuple[str, ...]) -> Any:
    """The part of the closure sensitivity ``A`` of ``G`` that belongs to the variable reached
    by following ``path`` through the closures (``("vg", "fd", "fplus")``: ``G``'s ``vg``,
    whose ``fd``, whose ``fplus``)."""
    from .runtime.calls import closure_parts

    for name in path:
        if A is gen_zero or A is None:
            return gen_zero
        names = G.__code__.co_freevars
        parts = dict(zip(names, closure_parts(A, len(names))))
        A = parts.get(name, gen_zero)
        if name != path[-1]:
            G = G.__closure__[names.index(name)].cell_contents
    return A


def _jax_style_inside(f: Any, /, *rest: Any, grad: bool = False, **kwargs: Any) -> ProcResult:
    """``value_and_grad(f, ...)`` (or JAX's ``grad(f, argnums=..., has_aux=...)``) called inside
    differentiated code: ``f`` is a plus-function there, as for ``dplus.grad`` (api._grad_inside);
    the function made is differentiable again, and ``f``'s sensitivity is its closure's. Its
    other arguments (``argnums``, ``has_aux``) get none, by position or keyword as passed."""
    from .runtime.result import KeywordDict

    options = dict(zip(("argnums", "has_aux"), rest), **kwargs)
    argnums, has_aux = options.get("argnums"), options.get("has_aux", False)
    argnums = 0 if argnums is None else argnums
    _check_argnums(argnums, "grad" if grad else "value_and_grad")
    fplus = f if _is_plus(f) else _lift(f)
    made = (_make_jax_grad if grad else _make_value_and_grad)(fplus, f, argnums, has_aux)
    path = ("vg", "fd", "fplus") if grad else ("fd", "fplus")

    def jax_style_inside_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        return (
            ((), _closure_sensitivity(made, A, path))
            + (None,) * len(rest)
            + ((KeywordDict({k: gen_zero for k in kwargs}),) if kwargs else ())
        )

    return ProcResult(made, jax_style_inside_backprop)


register_primitive(
    value_and_grad, _jax_style_inside, note="value_and_grad called inside differentiated code"
)
# the makers that _jax_style_inside calls, when it is differentiated again (value_and_grad or
# JAX's grad inside code differentiated twice): the function made closes over fplus
register_primitive(
    _make_value_and_grad,
    derived_maker_rule(_make_value_and_grad, "value_and_grad", ("fd", "fplus")),
)
register_primitive(
    _make_jax_grad, derived_maker_rule(_make_jax_grad, "grad", ("vg", "fd", "fplus"))
)
register_primitive(jacobian, _jacobian_inside, note="jacobian called inside differentiated code")
register_primitive(jvp, _jvp_inside, note="jvp called inside differentiated code")
defnondiff(constant_arguments)
defnondiff(is_constant)  # (a rule's test, at every order)
defnondiff(_unit)  # (they depend on the result's shape only)
defnondiff(_indexes)
defnondiff(_block_paths)
defnondiff(_array_shape_at)
defnondiff(_complex_at)
defnondiff(_check_directions)
mark_derived(_jvp_block, "helper")
mark_derived(_tangent_component, "helper")
mark_derived(_real_part, "helper")
defnondiff(_is_complex_scalar)
# differentiated from their source inside differentiated code
mark_derived(_place, "helper")
mark_derived(_jacobian_block, "helper")
mark_derived(_jacobian_entry, "helper")
mark_derived(_complex_derivative, "helper")
defnondiff(_complex_argument)
defnondiff(_refuse_unless_holomorphic)
defnondiff(_block_dtype)
register_primitive(hessian, _hessian_inside, note="hessian called inside differentiated code")

# Differentiated again from their source when a JAX-style gradient is (grad(grad(f, argnums=0))).
mark_derived(_selected, "helper of value_and_grad", None)
mark_derived(_loss_of, "helper of value_and_grad", None)
defnondiff(_check_positions)
defnondiff(_unit_of_loss)

hooks.install(jax_style_grad=jax_style_grad, jax_style_inside=_jax_style_inside)
