"""NumPy rules for elementwise functions, scans, NaN-aware reductions and finite
differences that ``primitives.numpy`` lacks (issue #22).

Covered: ``nan_to_num`` (differentiable in ``x`` and in the ``nan``/``posinf``/``neginf``
replacements), ``real_if_close``, ``angle`` (``deg=``), ``copysign`` (in its first
argument), ``ldexp``, ``gradient`` (spacing as numbers or coordinate arrays, both
differentiable; ``axis``, ``edge_order`` 1 and 2), ``cumprod``, ``nanprod nanmax nanmin
nancumsum nanvar nanstd``, ``average`` (``weights``, ``returned``), ``ptp``,
``trapezoid``, ``vdot``, ``vecdot``, ``polyval``, ``quantile percentile median``
(``method='linear'``, one axis or none), ``cov corrcoef`` (no weights), ``convolve
correlate``, ``vander``, ``interp`` (no ``period``).

Most are compositions of rules (``primitives._numpy_composite``): differentiable again
at any order, with NumPy's own function computing the result.

NumPy is optional: without it this module registers nothing.
"""

from __future__ import annotations

from dplus.runtime.memory import results_take_entries

try:
    import numpy as np
except ImportError:  # dplus works without NumPy
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.rules import defnondiff
from dplus.runtime.linear import gen_zero

from ._numpy_composite import defcomposite

Z = gen_zero


# ---------------------------------------------------------------------------
# gradients


def _finite_parts(x, A):
    """``A`` where ``x`` is finite, 0 where NaN or infinity was replaced (real and imaginary
    parts separately for a complex ``x``)."""
    if np.iscomplexobj(x):
        return np.where(np.isfinite(np.real(x)), np.real(A), 0.0) + 1j * np.where(
            np.isfinite(np.imag(x)), np.imag(A), 0.0
        )
    return np.where(np.isfinite(x), A, 0.0)


def _replaced_sum(A, x, which):
    """The sensitivity of a replacement value: the sum of ``A`` where it was put."""
    if np.iscomplexobj(x):
        return np.sum(np.real(A) * which(np.real(x))) - np.sum(np.imag(A) * which(np.imag(x)))
    return np.sum(A * which(x))


def _nan_to_num_x(A, r, x, copy=True, nan=0.0, posinf=None, neginf=None):
    return _finite_parts(x, A)


def _nan_to_num_nan(A, r, x, copy=True, nan=0.0, posinf=None, neginf=None):
    return _replaced_sum(A, x, np.isnan)


def _nan_to_num_posinf(A, r, x, copy=True, nan=0.0, posinf=None, neginf=None):
    return Z if posinf is None else _replaced_sum(A, x, np.isposinf)


def _nan_to_num_neginf(A, r, x, copy=True, nan=0.0, posinf=None, neginf=None):
    return Z if neginf is None else _replaced_sum(A, x, np.isneginf)


def _real_if_close_grad(A, r, a, tol=100):
    return A  # the real part, or the array itself: the identity on the part kept (fit types it)


def _angle_grad(A, r, z, deg=False):
    if not np.iscomplexobj(z):
        return Z  # 0 or pi: piecewise constant
    z = np.asarray(z)
    sq = np.real(z * np.conj(z))
    zero = sq == 0
    g = -1j * A * np.conj(z) / np.where(zero, 1.0, sq)  # d angle = (x dy - y dx) / |z|^2
    g = np.where(zero, 0.0, g)
    return g * (180.0 / np.pi) if deg else g


def _copysign_grad(A, r, x1, x2):
    return A * np.where(np.signbit(x1) == np.signbit(r), 1.0, -1.0)


def _ldexp_grad(A, r, x1, x2):
    return A * np.ldexp(1.0, x2)


# ---------------------------------------------------------------------------
# compositions of rules


def _gradient(f, *varargs, axis=None, edge_order=1):
    f = np.asarray(f)
    axes = _gradient_axes(np.ndim(f), axis)
    spacings = ()
    for k in range(len(axes)):
        if len(varargs) == 0:
            spacings = spacings + (1.0,)
        elif len(varargs) == 1:
            spacings = spacings + (varargs[0],)
        else:
            spacings = spacings + (varargs[k],)
    out = ()
    for k in range(len(axes)):
        out = out + (_gradient_along(f, axes[k], spacings[k], edge_order),)
    return out[0] if len(axes) == 1 else out


def _gradient_axes(ndim: int, axis) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        return (axis % ndim,)
    return tuple(a % ndim for a in axis)


def _gradient_along(f, axis, spacing, edge_order):
    """``np.gradient`` along one axis, NumPy's formulas written with the axis first."""
    g = np.moveaxis(f, axis, 0)
    if np.ndim(spacing) == 0:
        out = _uniform_differences(g, spacing, edge_order)
    else:
        out = _coordinate_differences(g, np.diff(spacing), edge_order)
    return np.moveaxis(out, 0, axis)


def _uniform_differences(g, h, edge_order):
    inner = (g[2:] - g[:-2]) / (2.0 * h)
    if edge_order == 1:
        first = (g[1] - g[0]) / h
        last = (g[-1] - g[-2]) / h
    else:
        first = (-1.5 / h) * g[0] + (2.0 / h) * g[1] + (-0.5 / h) * g[2]
        last = (0.5 / h) * g[-3] + (-2.0 / h) * g[-2] + (1.5 / h) * g[-1]
    return np.concatenate((np.expand_dims(first, 0), inner, np.expand_dims(last, 0)), axis=0)


def _coordinate_differences(g, dx, edge_order):
    view = (-1,) + (1,) * (np.ndim(g) - 1)
    dx1 = np.reshape(dx[:-1], view)
    dx2 = np.reshape(dx[1:], view)
    a = -dx2 / (dx1 * (dx1 + dx2))
    b = (dx2 - dx1) / (dx1 * dx2)
    c = dx1 / (dx2 * (dx1 + dx2))
    inner = a * g[:-2] + b * g[1:-1] + c * g[2:]
    if edge_order == 1:
        first = (g[1] - g[0]) / dx[0]
        last = (g[-1] - g[-2]) / dx[-1]
    else:
        d1, d2 = dx[0], dx[1]
        first = (
            (-(2.0 * d1 + d2) / (d1 * (d1 + d2))) * g[0]
            + ((d1 + d2) / (d1 * d2)) * g[1]
            + (-d1 / (d2 * (d1 + d2))) * g[2]
        )
        d1, d2 = dx[-2], dx[-1]
        last = (
            (d2 / (d1 * (d1 + d2))) * g[-3]
            + (-(d2 + d1) / (d1 * d2)) * g[-2]
            + ((2.0 * d2 + d1) / (d2 * (d1 + d2))) * g[-1]
        )
    return np.concatenate((np.expand_dims(first, 0), inner, np.expand_dims(last, 0)), axis=0)


def _cumprod(a, axis=None, dtype=None, out=None):
    x = np.ravel(a) if axis is None else np.moveaxis(np.asarray(a), axis, 0)
    running = x[0]
    parts = (running,)
    for i in range(1, np.shape(x)[0]):  # the products in NumPy's order
        running = running * x[i]
        parts = parts + (running,)
    result = np.stack(parts) if parts else x
    return result if axis is None else np.moveaxis(result, 0, axis)


def _nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    return np.prod(np.where(np.isnan(a), 1.0, a), axis=axis, keepdims=keepdims)


def _nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    return np.fmax.reduce(a, axis=axis, keepdims=keepdims)


def _nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    return np.fmin.reduce(a, axis=axis, keepdims=keepdims)


def _nancumsum(a, axis=None, dtype=None, out=None):
    return np.cumsum(np.where(np.isnan(a), 0.0, a), axis=axis)


def _nanvar(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    where=True,
    mean=None,
    correction=None,
):
    kept = ~np.isnan(a)
    count = np.sum(kept, axis=axis, keepdims=True)
    centred = np.where(kept, a - np.nansum(a, axis=axis, keepdims=True) / count, 0.0)
    squares = np.real(centred * np.conj(centred))
    return np.sum(squares, axis=axis, keepdims=keepdims) / (
        np.sum(kept, axis=axis, keepdims=keepdims) - ddof
    )


def _nanstd(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    where=True,
    mean=None,
    correction=None,
):
    return np.sqrt(_nanvar(a, axis=axis, ddof=ddof, keepdims=keepdims))


def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = np.asarray(a)
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        scale = np.broadcast_to(
            np.asarray(np.size(a) / max(np.size(avg), 1), dtype=float), np.shape(avg)
        )
    else:
        w = np.asarray(weights)
        if np.shape(w) != np.shape(a):  # 1-D weights along `axis`, as NumPy allows
            w = np.swapaxes(np.reshape(w, (1,) * (np.ndim(a) - 1) + np.shape(w)), -1, axis)
        scale = np.sum(w + np.zeros(np.shape(a)), axis=axis, keepdims=keepdims)
        avg = np.sum(a * w, axis=axis, keepdims=keepdims) / scale
    return (avg, scale) if returned else avg


def _ptp(a, axis=None, out=None, keepdims=False):
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    y = np.moveaxis(np.asarray(y), axis, -1)
    if x is None:
        d = dx
    elif np.ndim(x) == 1:
        d = np.diff(x)
    else:
        d = np.diff(np.moveaxis(np.asarray(x), axis, -1), axis=-1)
    return np.sum(d * (y[..., 1:] + y[..., :-1]) / 2.0, axis=-1)


def _vdot(a, b):
    return np.sum(np.conj(np.ravel(a)) * np.ravel(b))


def _vecdot(x1, x2, /, *, axis=-1, **kwargs):
    return np.sum(np.conj(x1) * x2, axis=axis)


def _polyval(p, x):
    y = np.zeros_like(x, dtype=np.result_type(p, x, float))
    for i in range(len(p)):  # Horner's scheme, as NumPy computes it
        y = y * x + p[i]
    return y


def _quantile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input=False,
    method="linear",
    keepdims=False,
    *,
    weights=None,
    interpolation=None,
):
    if (
        method != "linear"
        or weights is not None
        or interpolation is not None
        or isinstance(axis, (tuple, list))
    ):
        raise NonDifferentiableError(
            "dplus differentiates numpy.quantile / percentile / median with method='linear' (the default), no "
            "weights, and one axis or none"
        )
    x = np.ravel(a) if axis is None else np.moveaxis(np.asarray(a), axis, -1)
    if axis is None:
        x = np.asarray(x)
    ordered = np.take_along_axis(x, np.argsort(x, axis=-1), axis=-1)
    n = np.shape(x)[-1]
    position = np.asarray(q) * (n - 1)
    below = np.floor(position).astype(np.intp)
    above = np.minimum(below + 1, n - 1)
    t = position - below
    v = ordered[..., below] * (1.0 - t) + ordered[..., above] * t
    if np.ndim(q):  # NumPy puts the axis of q first
        v = np.moveaxis(v, -1, 0)
    if keepdims:
        v = _keep_reduced_dims(v, a, axis, np.ndim(q))
    return v


def _keep_reduced_dims(v, a, axis, q_ndim):
    if axis is None:
        return np.reshape(v, np.shape(v)[:q_ndim] + (1,) * np.ndim(a))
    return np.expand_dims(v, q_ndim + axis % np.ndim(a))


def _percentile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input=False,
    method="linear",
    keepdims=False,
    *,
    weights=None,
    interpolation=None,
):
    return _quantile(
        a,
        np.asarray(q) / 100.0,
        axis=axis,
        method=method,
        keepdims=keepdims,
        weights=weights,
        interpolation=interpolation,
    )


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return _quantile(a, 0.5, axis=axis, keepdims=keepdims)


def _cov(
    m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None
):
    if fweights is not None or aweights is not None:
        raise NonDifferentiableError("dplus differentiates numpy.cov without fweights/aweights")
    X = np.atleast_2d(m)
    if not rowvar and np.shape(X)[0] != 1:
        X = np.transpose(X)
    if y is not None:
        Y = np.atleast_2d(y)
        if not rowvar and np.shape(Y)[0] != 1:
            Y = np.transpose(Y)
        X = np.concatenate((X, Y), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    centred = X - np.mean(X, axis=1, keepdims=True)
    return np.squeeze(np.matmul(centred, np.transpose(np.conj(centred))) / (np.shape(X)[1] - ddof))


def _corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = _cov(x, y, rowvar)
    if np.ndim(c) == 0:
        return c / c
    stddev = np.sqrt(np.real(np.sum(c * np.eye(np.shape(c)[0]), axis=1)))
    return c / stddev[:, None] / stddev[None, :]


def _convolve(a, v, mode="full"):
    a = np.ravel(a)
    v = np.ravel(v)
    if np.shape(v)[0] > np.shape(a)[0]:
        a, v = v, a
    n, m = np.shape(a)[0], np.shape(v)[0]
    full = 0.0
    for j in range(m):  # v[j] times a shifted by j
        full = full + v[j] * np.concatenate((np.zeros(j), a, np.zeros(m - 1 - j)))
    if mode == "full":
        return full
    if mode == "valid":
        return full[m - 1 : n]
    start = (m - 1) // 2
    return full[start : start + n]


def _correlate(a, v, mode="valid"):
    if np.shape(np.ravel(v))[0] > np.shape(np.ravel(a))[0]:
        return np.conj(_convolve(v, np.flip(np.conj(a)), mode))[::-1]
    return _convolve(a, np.flip(np.conj(v)), mode)


def _vander(x, N=None, increasing=False):
    n = np.shape(x)[0] if N is None else N
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    return np.power(np.asarray(x)[:, None], powers)


def _interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        raise NonDifferentiableError("dplus differentiates numpy.interp without period=")
    segment = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, np.shape(xp)[0] - 2)
    x0 = np.take(xp, segment)
    x1 = np.take(xp, segment + 1)
    f0 = np.take(fp, segment)
    f1 = np.take(fp, segment + 1)
    y = f0 + (np.asarray(x) - x0) / (x1 - x0) * (f1 - f0)
    below = np.take(fp, 0) if left is None else left
    above = np.take(fp, -1) if right is None else right
    return np.where(
        np.asarray(x) < np.take(xp, 0), below, np.where(np.asarray(x) > np.take(xp, -1), above, y)
    )


# ---------------------------------------------------------------------------
# registration


def register_numpy_math_rules() -> None:
    from .numpy import defgrad

    defgrad(
        np.nan_to_num,
        _nan_to_num_x,
        None,
        _nan_to_num_nan,
        _nan_to_num_posinf,
        _nan_to_num_neginf,
        kw={"x": 0, "nan": 2, "posinf": 3, "neginf": 4},
    )
    defgrad(np.real_if_close, _real_if_close_grad)
    defgrad(np.angle, _angle_grad)
    defgrad(np.copysign, _copysign_grad, None)
    defgrad(np.ldexp, _ldexp_grad, None)
    defnondiff(_gradient_axes, note="internal: axes of numpy.gradient")
    defnondiff(np.searchsorted, note="non-differentiable: an integer")
    for fn, impl in (
        (np.gradient, _gradient),
        (np.cumprod, _cumprod),
        (np.nanprod, _nanprod),
        (np.nanmax, _nanmax),
        (np.nanmin, _nanmin),
        (np.nancumsum, _nancumsum),
        (np.nanvar, _nanvar),
        (np.nanstd, _nanstd),
        (np.average, _average),
        (np.ptp, _ptp),
        (np.vdot, _vdot),
        (np.polyval, _polyval),
        (getattr(np, "trapezoid", None), _trapezoid),
        (getattr(np, "vecdot", None), _vecdot),
        (np.ndarray.cumprod, _cumprod),
        (np.quantile, _quantile),
        (np.percentile, _percentile),
        (np.median, _median),
        (np.cov, _cov),
        (np.corrcoef, _corrcoef),
        (np.convolve, _convolve),
        (np.correlate, _correlate),
        (np.vander, _vander),
        (np.interp, _interp),
    ):
        if fn is not None:
            defcomposite(fn, impl)
    for helper in (
        _finite_parts,
        _replaced_sum,
        _nan_to_num_x,
        _nan_to_num_nan,
        _nan_to_num_posinf,
        _nan_to_num_neginf,
        _real_if_close_grad,
        _angle_grad,
        _copysign_grad,
        _ldexp_grad,
        _gradient_along,
        _uniform_differences,
        _coordinate_differences,
    ):
        mark_derived(helper, "rule helper")


if np is not None:
    register_numpy_math_rules()

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
