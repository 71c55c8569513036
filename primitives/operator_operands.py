"""Operands of the operator rules: fitting a computed sensitivity to its argument (real part
for real arguments, broadcasting undone for arrays, nothing for bools), classifying operands,
and differentiating user objects through their special methods (``__add__``, ``__radd__``,
...). See :mod:`primitives.operators` for the conventions.
"""

from __future__ import annotations

import numbers
import sys
import types
from collections.abc import Callable
from typing import Any

from dplus.runtime.core import apply_transform
from dplus.runtime.linear import GenZero, gen_zero
from dplus.runtime.memory import results_take_entries
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

_Z1 = ((), gen_zero)
_Z2 = ((), gen_zero, gen_zero)
_SCALAR = frozenset((float, int, complex))


def _np() -> Any:
    return sys.modules.get("numpy")


def _numpy_array_type() -> Any:
    try:  # (dplus.runtime.memory imports NumPy already when it is installed)
        from numpy import ndarray
    except ImportError:  # pragma: no cover - NumPy is an optional extra
        return type("NoArray", (), {})
    return ndarray


_ndarray: Any = _numpy_array_type()


# ---------------------------------------------------------------------------
# fitting a computed sensitivity to its argument: real part for real arguments,
# broadcasting undone for arrays, nothing for bools and gen_zero


def _fit(g: Any, v: Any) -> Any:
    """The sensitivity ``g`` made to conform to the argument ``v``."""
    if g is gen_zero or g is None:
        return g
    tv = type(v)
    if tv is float or tv is int or tv is complex:
        tg = type(g)
        if tg is float or tg is int or (tg is complex and tv is complex):
            return g
        if tg is complex:
            return g.real
    elif (
        tv is _ndarray
        and type(g) is _ndarray
        and g.shape == v.shape
        and g.dtype == v.dtype
        and v.dtype.kind in "fc"
    ):
        return g  # (what _fit_slow gives: nothing broadcast, no real part, the same dtype)
    return _fit_slow(g, v)  # (an array sensitivity of a number broadcast against an array: summed)


def _fit_slow(g: Any, v: Any) -> Any:
    tv = type(v)
    if tv is bool or tv is GenZero or v is None or isinstance(v, (str, bytes)):
        return gen_zero
    np = _np()
    if np is not None:
        if isinstance(v, np.bool_):
            return gen_zero
        if isinstance(v, np.ndarray):
            if v.dtype.kind in "biu":  # integer and bool arrays are constants: no sensitivity
                return gen_zero
            g = _unbroadcast(np, np.asarray(g) if not isinstance(g, np.ndarray) else g, v.shape)
            if np.iscomplexobj(g) and not np.iscomplexobj(v):
                g = g.real
            if (
                g.dtype != v.dtype and v.dtype.kind in "fc"
            ):  # a float32 array gets a float32 sensitivity
                g = g.astype(v.dtype)
            return g
        if isinstance(v, (list, tuple)) and isinstance(g, np.ndarray):
            # a nested sequence that NumPy converted: give back the same nesting
            g = _unbroadcast(np, g, np.shape(v))
            if np.iscomplexobj(g) and not np.iscomplexobj(np.asarray(v)):
                g = g.real
            out = g.tolist()
            return tuple(out) if isinstance(v, tuple) else out
        if isinstance(g, np.ndarray):  # a scalar argument broadcast against an array
            g = g.sum()
            complex_v = isinstance(v, (complex, np.complexfloating))
            if np.iscomplexobj(g) and not complex_v:
                g = g.real
            return g
        if isinstance(g, np.complexfloating) and not isinstance(v, (complex, np.complexfloating)):
            return g.real
    if isinstance(g, complex) and not isinstance(v, complex):
        return g.real
    return g


def _unbroadcast(np: Any, g: Any, shape: tuple) -> Any:
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra > 0:
        g = g.sum(axis=tuple(range(extra)))
    elif extra < 0:  # the sensitivity has fewer dimensions than the argument
        return np.broadcast_to(g, shape).copy()
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    if g.shape != shape:
        g = np.broadcast_to(g, shape).copy()
    return g


def _fit_plus(g: Any, v: Any) -> ProcResult:
    """``_fit`` is linear in ``g``: its adjoint passes ``A`` back, broadcast to ``g``'s shape
    (taking a real part or summing broadcast axes is adjoint to the embedding / broadcast).
    Registered so that backpropagators using it can themselves be differentiated."""
    r = _fit(g, v)

    def fit_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or g is gen_zero or g is None:
            return _Z2
        np = _np()
        if np is not None and isinstance(g, np.ndarray) and np.shape(A) != g.shape:
            A = np.broadcast_to(A, g.shape).copy()
        elif isinstance(A, (list, tuple)) and np is not None and isinstance(g, np.ndarray):
            A = np.asarray(A)
        return ((), A, gen_zero)

    return ProcResult(r, fit_backprop)


register_primitive(_fit, _fit_plus, note="projection of a sensitivity onto its argument (linear)")


# ---------------------------------------------------------------------------
# classifying operands


def _is_numeric(v: Any) -> bool:
    """Numbers, bools, gen_zero, NumPy arrays and scalars: the arithmetic rules apply."""
    t = type(v)
    if t in _SCALAR or t is bool or t is GenZero or t is _ndarray:
        return True
    if isinstance(v, numbers.Number):
        return True
    np = _np()
    return np is not None and isinstance(v, (np.ndarray, np.generic))


def _written_in_python(cls: type, meth: str) -> bool:
    """Whether a subclass of a number or an array type defines the operator method in Python
    (astropy's ``Quantity.__itruediv__`` by a unit): Python calls it, so dplus does too."""
    for klass in cls.__mro__:
        if meth in klass.__dict__:
            return isinstance(klass.__dict__[meth], types.FunctionType)
    return False


def _is_array_like(v: Any) -> bool:
    np = _np()
    return np is not None and isinstance(v, (np.ndarray, np.generic))


def _is_text(v: Any) -> bool:
    return isinstance(v, (str, bytes, bytearray))


def _is_seq(v: Any) -> bool:
    return isinstance(v, (list, tuple))


# ---------------------------------------------------------------------------
# user objects: differentiate through the special methods


_SPECIAL: dict[Any, tuple[str | None, str, str | None]] = {}

# ``a - b`` and ``a -= b`` on two sets: their rules, by operator (filled by primitives.sets)
SET_OPERATORS: dict[Any, Any] = {}


def _lift_method(m: Any) -> Callable[..., ProcResult]:
    # local: the API imports the rule library. Not lift_dplus: its public wrapper coerces the
    # sensitivities for users and has no derivative, so an undecorated operator method lifted
    # through it was refused at the second order
    from dplus.api import lift_for_rules

    return lift_for_rules(m)


def _user_binary(fn: Any, x: Any, y: Any) -> ProcResult:
    inplace, name, rname = _SPECIAL[fn]
    tx, ty = type(x), type(y)
    candidates: list[tuple[Any, Any, str, bool]] = []
    if inplace is not None:
        candidates.append((x, y, inplace, False))
    if (
        rname is not None
        and ty is not tx
        and issubclass(ty, tx)
        and getattr(ty, rname, None) is not getattr(tx, rname, None)
    ):
        candidates.append((y, x, rname, True))
        candidates.append((x, y, name, False))
    else:
        candidates.append((x, y, name, False))
        if rname is not None and ty is not tx:
            candidates.append((y, x, rname, True))
    for obj, other, meth, swapped in candidates:
        if (_is_numeric(obj) and not _written_in_python(type(obj), meth)) or (
            _is_seq(obj) or _is_text(obj)
        ):
            continue  # builtin operands: their part of the dispatch is covered by the rules
        m = getattr(type(obj), meth, None)
        if m is None:
            continue
        res = apply_transform(_lift_method(m), obj, other)
        if res.primal is NotImplemented:
            continue
        return ProcResult(res.primal, _swap_backprop(res.backprop, swapped))
    # let Python raise its own TypeError
    r = fn(x, y)
    return ProcResult(r, lambda A, Abox: _Z2)


def _swap_backprop(inner: Callable[..., tuple], swapped: bool) -> Callable[..., tuple]:
    def backprop(A: Any, Abox: Any) -> tuple:
        out = inner(A, Abox)
        if swapped:
            return ((), out[2], out[1])
        return ((), out[1], out[2])

    return backprop


def _user_unary(fn: Any, x: Any) -> ProcResult:
    name = _SPECIAL[fn][1]
    m = getattr(type(x), name, None)
    if m is None:
        r = fn(x)  # raises Python's TypeError
        return ProcResult(r, lambda A, Abox: _Z1)
    res = apply_transform(_lift_method(m), x)
    inner = res.backprop

    def backprop(A: Any, Abox: Any) -> tuple:
        out = inner(A, Abox)
        return ((), out[1])

    return ProcResult(res.primal, backprop)


# (its rules make the arrays they return: runtime.memory)
results_take_entries(filename=__file__)
