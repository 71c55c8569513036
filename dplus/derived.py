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
from typing import Any, Callable, Iterator

from .api import dplus, grad
from .errors import SensitivityError
from .linear import dot, is_ndarray, is_number, zero

__all__ = ["jacobian", "hessian", "hvp", "jvp"]


def _leaves(v: Any, path: tuple = ()) -> Iterator[tuple]:
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


def _unit(v: Any, path: tuple) -> Any:
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
        return type(v)._make(items) if hasattr(type(v), "_make") else tuple(items)
    if isinstance(v, dict):
        return {k: (_unit(e, rest) if k == head else zero(e)) for k, e in v.items()}
    raise SensitivityError(f"cannot build a unit sensitivity inside a {type(v).__name__}")


def _place(out: Any, path: tuple, value: Any) -> Any:
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
        return type(out)._make(items) if hasattr(type(out), "_make") else tuple(items)
    if isinstance(out, dict):
        out = dict(out)
        out[head] = _place(out[head], rest, value)
        return out
    raise SensitivityError(f"cannot place a Jacobian row inside a {type(out).__name__}")


def jacobian(f: Callable[..., Any]) -> Callable[..., Any]:
    """The Jacobian of ``f`` by reverse mode (one backprop per scalar component of the result)."""
    fd = dplus(f)

    def jacobian_fn(*args: Any) -> Any:
        r = fd(*args)
        y = r.primal
        if is_number(y):
            return r.backprop(_unit(y, ()))
        if is_ndarray(y):
            np = sys.modules["numpy"]
            blocks = [np.zeros(y.shape + np.shape(a), dtype=float) for a in args]
            for idx in np.ndindex(y.shape):
                rows = r.backprop(_unit(y, (idx,)))
                for b, row in zip(blocks, rows):
                    b[idx] = row
            return tuple(blocks)
        out = y
        for path in _leaves(y):
            out = _place(out, path, r.backprop(_unit(y, path)))
        return out

    jacobian_fn.__dplus_derived__ = ("jacobian", f)
    return jacobian_fn


def hessian(f: Callable[..., Any]) -> Callable[..., Any]:
    """The Hessian of a scalar function: the Jacobian of its gradient (reverse over reverse)."""
    return jacobian(grad(f))


def hvp(f: Callable[..., Any]) -> Callable[[tuple, tuple], tuple]:
    """``hvp(f)(args, v)``: the Hessian of ``f`` at ``args`` times ``v`` (shaped like ``args``)."""
    g = grad(f)

    def directional(*args_and_v: Any) -> Any:
        n = len(args_and_v) // 2
        return dot(g(*args_and_v[:n]), args_and_v[n:])

    gd = grad(directional)

    def hvp_fn(args: tuple, v: tuple) -> tuple:
        args = tuple(args)
        v = tuple(v)
        if len(args) != len(v):
            raise SensitivityError(f"hvp needs one direction per argument: {len(args)} arguments, {len(v)} directions")
        return gd(*args, *v)[: len(args)]

    return hvp_fn


def jvp(f: Callable[..., Any]) -> Callable[[tuple, tuple], tuple]:
    """``jvp(f)(args, tangents)`` returns ``(f(*args), J·tangents)``, by transposing the backprop."""
    fd = dplus(f)

    def jvp_fn(args: tuple, tangents: tuple) -> tuple:
        args = tuple(args)
        tangents = tuple(tangents)
        r = fd(*args)
        y = r.primal

        def component(path: tuple) -> Any:
            return dot(r.backprop(_unit(y, path)), tangents)

        if is_number(y):
            return y, component(())
        if is_ndarray(y):
            np = sys.modules["numpy"]
            t = np.zeros(y.shape, dtype=float)
            for idx in np.ndindex(y.shape):
                t[idx] = component((idx,))
            return y, t
        out = zero(y)
        for path in _leaves(y):
            out = _place(out, path, component(path))
        return y, out

    return jvp_fn
