"""Conforming the sensitivity a NumPy gradient returns to its argument (see
:mod:`primitives.numpy`'s module doc): summed over broadcast axes, real for a real argument,
a number for a scalar, nested lists for nested lists, nothing for integer arrays.

Its own module so that the rule forms (:mod:`primitives.numpy`) and the in-place rules
(:mod:`primitives.numpy_inplace`, which the rule forms call for ``out=``) both import it
without importing each other.
"""

from __future__ import annotations

from typing import Any

try:
    import numpy as np
except ImportError:  # dplus works without NumPy; then nothing here is called
    np = None  # type: ignore[assignment]

from dplus.runtime.linear import gen_zero

from .operator_operands import _fit, _unbroadcast

__all__ = ["fit"]

Z = gen_zero
_ndarray: Any = np.ndarray if np is not None else type(None)
_PLAIN = (float, int)


def fit(g: Any, v: Any) -> Any:
    """The sensitivity ``g`` made to conform to the argument ``v`` (see the module doc)."""
    if g is Z or g is None:
        return g
    if type(v) is _ndarray:
        if type(g) is _ndarray and g.shape == v.shape and g.dtype == v.dtype:
            return g
        if v.dtype.kind in "biu":  # integer and bool arrays are constants: no sensitivity
            return Z
    elif isinstance(v, (list, tuple)):
        if isinstance(g, (list, tuple)):  # already one sensitivity per element
            return g
        return _fit_sequence(g, v)
    return _fit(g, v)


def _fit_sequence(g: Any, v: Any) -> Any:
    """A list (tuple) sensitivity for a (nested) sequence NumPy read as an array."""
    g = np.asarray(g)
    shape = np.shape(v)
    if g.shape != shape:
        g = _unbroadcast(np, g, shape)
    if g.dtype.kind == "c" and not np.iscomplexobj(np.asarray(v)):
        g = g.real
    return _nest_like(g, v)


def _nest_like(g: Any, v: Any) -> Any:
    if isinstance(v, list):
        if all(type(e) in _PLAIN for e in v):
            return g.tolist()
        return [_nest_like(g[i], e) for i, e in enumerate(v)]
    if isinstance(v, tuple):
        return tuple(_nest_like(g[i], e) for i, e in enumerate(v))
    if type(v) is bool or isinstance(v, np.bool_):
        return None
    if isinstance(v, _ndarray):
        return g
    if isinstance(v, np.generic):
        return g[()]
    return g.item()
