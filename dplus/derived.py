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

from .api import _derived_closure_backprop, _grad_inside, _lift, _make_dplus, dplus, grad
from .errors import ArgumentError, SensitivityError
from .markers import mark_derived
from .rules import defnondiff
from .runtime.boxes import BoxSensitivities
from .runtime.closures import is_plus_function
from .runtime.closures import is_plus_function as _is_plus
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
        return r.backprop(_unit(y, path))
    np = sys.modules["numpy"]
    rows = [r.backprop(_unit(y, path + (idx,))) for idx in _indexes(shape)]
    return tuple(
        np.reshape(np.array([row[i] for row in rows], dtype=float), shape + np.shape(a))
        for i, a in enumerate(args)
    )


def _unit(v: Any, path: tuple[Any, ...]) -> Any:
    """The sensitivity of ``v`` that is 1 at ``path`` and 0 elsewhere."""
    if not path:
        if is_ndarray(v):
            raise SensitivityError("internal: a path must reach a number")
        return type(v)(1) if not isinstance(v, int) or isinstance(v, bool) else 1.0
    head, rest = path[0], path[1:]
    if is_ndarray(v):
        np = sys.modules["numpy"]
        s = np.zeros(v.shape, dtype=np.result_type(v.dtype, float))
        s[head] = 1.0
        return s
    if isinstance(v, list):
        return [(_unit(e, rest) if i == head else zero(e)) for i, e in enumerate(v)]
    if isinstance(v, tuple):
        items = [(_unit(e, rest) if i == head else zero(e)) for i, e in enumerate(v)]
        # (a NamedTuple's _make when hasattr finds it; written as before, since rules
        # differentiate this source at the next order)
        return type(v)._make(items) if hasattr(type(v), "_make") else tuple(items)  # type: ignore[attr-defined]
    if isinstance(v, dict):
        return {k: (_unit(e, rest) if k == head else zero(e)) for k, e in v.items()}
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
    fd = dplus(f)

    def jvp_fn(args: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, ...]:
        args = tuple(args)
        tangents = tuple(tangents)
        r = fd(*args)
        y = r.primal

        def component(path: tuple[Any, ...]) -> Any:
            return dot(r.backprop(_unit(y, path)), tangents)

        np: Any = sys.modules.get("numpy")  # (loaded: the result holds an array)

        def components(array: Any, path: tuple[Any, ...]) -> Any:
            t = np.zeros(array.shape, dtype=float)
            for idx in np.ndindex(array.shape):
                t[idx] = component(path + (idx,))
            return t

        return y, _shaped_by_leaves(y, component, components)

    return jvp_fn


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
        loss = _loss_of(value, has_aux)
        if not is_number(loss):
            raise SensitivityError(
                f"value_and_grad needs {'the first element of ' if has_aux else ''}the result of "
                f"{getattr(f, '__name__', 'f')} to be a number, but it is {type(loss).__name__}"
                + ("" if has_aux else "; a function returning (loss, aux) needs has_aux=True")
            )
        sensitivity = (1.0, gen_zero) if has_aux else 1.0
        return value, _selected(r.backprop(sensitivity), args, argnums)

    mark_derived(value_and_grad_fn, "value_and_grad", f)
    remember_source(f)
    return value_and_grad_fn


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
register_primitive(jacobian, _jacobian_inside, note="jacobian called inside differentiated code")
defnondiff(_unit)  # (they depend on the result's shape only)
defnondiff(_indexes)
defnondiff(_block_paths)
defnondiff(_array_shape_at)
# differentiated from their source inside differentiated code
mark_derived(_place, "helper")
mark_derived(_jacobian_block, "helper")
register_primitive(hessian, _hessian_inside, note="hessian called inside differentiated code")

# Differentiated again from their source when a JAX-style gradient is (grad(grad(f, argnums=0))).
mark_derived(_selected, "helper of value_and_grad", None)
mark_derived(_loss_of, "helper of value_and_grad", None)
defnondiff(_check_positions)

hooks.install(jax_style_grad=jax_style_grad, jax_style_inside=_jax_style_inside)
