"""NumPy gradients of ufuncs (elementwise functions, ``where``, ``clip``), reductions and the
ufunc methods ``reduce``/``accumulate``, with the axis and broadcasting helpers they share.
Registered by :mod:`primitives.numpy_table`; the conventions and the list of what is covered
are in :mod:`primitives.numpy`.
"""

from __future__ import annotations

from typing import Any

from dplus.runtime.memory import results_take_entries

try:
    import numpy as np
except ImportError:  # dplus works without NumPy; then there is nothing to register
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from dplus.errors import NonDifferentiableError
from dplus.runtime.linear import gen_zero
from dplus.runtime.result import ProcResult

from .numpy import _as_array_sens, _check_out, _kw_sens, fit

Z = gen_zero
_NoValue: Any = getattr(np, "_NoValue", object()) if np is not None else object()


_Z1 = ((), Z)


# ---------------------------------------------------------------------------
# helpers shared by the gradients


def _axes(axis: Any, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(a % ndim for a in axis) if ndim else ()
    return (axis % ndim,) if ndim else ()


def _expand(A: Any, shape: tuple, axis: Any, keepdims: Any, copy: bool = True) -> Any:
    """A reduction's sensitivity spread back over the reduced axes."""
    if axis is None and not keepdims:
        if copy:
            return np.full(shape, A)
        return np.broadcast_to(A, shape)
    A = np.asarray(A)
    if not keepdims and axis is not None:
        A = np.expand_dims(A, axis)
    A = np.broadcast_to(A, shape)
    return A.copy() if copy else A


def _over_root(A: Any, d: Any) -> Any:
    """``A / d`` for a root's derivative ``1/d`` (``d`` is 0 where the root is): ``0`` where
    ``A`` and ``d`` are both 0. A zero sensitivity there is a root the result does not read
    (``np.where`` or ``np.tril`` masking ``sqrt(0)``), whose infinite slope contributes no
    term to the chain rule; ``0 * inf`` would make every partial ``nan``. A non-zero ``A``
    still gets ``inf``, the root's true slope at 0."""
    d = np.asarray(d)
    zero = d == 0
    if not zero.any():
        return A / d
    unread = zero & (np.asarray(A) == 0)
    return np.where(unread, 0.0, A / np.where(unread, 1.0, d))


def _times_slope(A: Any, slope: Any) -> Any:
    """``A * slope`` for a slope that may be infinite (``x ** 0.5`` at 0): ``0`` where ``A`` is
    0 and the slope is not finite, as in :func:`_over_root`: a power at 0 that the result does
    not read contributes no term."""
    slope = np.asarray(slope)
    steep = ~np.isfinite(slope)
    if not steep.any():
        return A * slope
    unread = steep & (np.asarray(A) == 0)
    return np.where(unread, 0.0, A * np.where(unread, 1.0, slope))


def _count(x: Any, r: Any) -> int:
    nr = np.size(r)
    return np.size(x) // nr if nr else 1


def _safe_div(a: Any, b: Any) -> Any:
    """``a / b`` with ``0`` where ``b == 0``."""
    b = np.asarray(b)
    zero = b == 0
    if not zero.any():
        return a / b
    return np.where(zero, 0.0, a / np.where(zero, 1.0, b))


def _sum_to(g: Any, shape: tuple) -> Any:
    """``g`` summed over the axes that broadcasting added or stretched to reach its shape."""
    g = np.asarray(g)
    if g.shape == tuple(shape):
        return g
    extra = g.ndim - len(shape)
    if extra > 0:
        g = np.sum(g, axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    return g


def _sign_conj(x: Any) -> Any:
    """d|x|: ``sign(x)`` for reals, ``conj(x)/|x|`` for complex numbers (``0`` at ``0``)."""
    if not np.iscomplexobj(x):
        return np.sign(x)
    ax = np.abs(x)
    return np.where(ax == 0, 0.0, np.conj(x) / np.where(ax == 0, 1.0, ax))


def _abs_grad(A, r, x):
    return A * _sign_conj(x)


def _power_gx(A, r, x, y):
    y = np.asarray(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _times_slope(A, y * np.power(x, np.where(y == 0, 1.0, y - 1)))


def _power_gy(A, r, x, y):
    x = np.asarray(x)
    if np.iscomplexobj(x) or np.iscomplexobj(r):
        xc = x + 0j
        return A * np.where(x == 0, 0.0, r * np.log(np.where(x == 0, 1.0, xc)))
    pos = x > 0  # a negative base has a real power only at integer exponents: 0 there
    return A * np.where(pos, r * np.log(np.where(pos, x, 1.0)), 0.0)


def _matmul_grads(
    A: Any, x: Any, y: Any, x_constant: bool = False, y_constant: bool = False
) -> tuple:
    """The sensitivities of ``x @ y`` (1-D operands promoted as NumPy does; ``fit`` sums
    the broadcast batch axes), none (zero) for an operand marked constant. Plain NumPy
    calls, so it can be differentiated again."""
    xa = np.asarray(x)
    ya = np.asarray(y)
    A = np.asarray(A)
    if xa.ndim == 1 and ya.ndim == 1:
        return (Z if x_constant else A * ya), (Z if y_constant else A * xa)
    if xa.ndim == 1:  # (k,) @ (..., k, m) -> (..., m)
        gx = Z if x_constant else np.matmul(np.expand_dims(A, -2), np.swapaxes(ya, -1, -2))
        gy = Z if y_constant else np.expand_dims(xa, -1) * np.expand_dims(A, -2)
        return gx, gy
    if ya.ndim == 1:  # (..., n, k) @ (k,) -> (..., n)
        gx = Z if x_constant else np.expand_dims(A, -1) * ya
        gy = Z if y_constant else np.matmul(np.expand_dims(A, -2), xa)
        return gx, gy
    gx = Z if x_constant else np.matmul(A, np.swapaxes(ya, -1, -2))
    gy = Z if y_constant else np.matmul(np.swapaxes(xa, -1, -2), A)
    return gx, gy


def _unsupported(what: str) -> Any:
    raise NonDifferentiableError(f"dplus has no derivative for {what}")


def _T(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


# --- reductions


def _sum_grad(A, r, x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    g = _expand(A, np.shape(x), axis, keepdims)
    return g if where is True else g * where


def _mean_grad(A, r, x, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    shape = np.shape(x)
    g = _expand(A, shape, axis, keepdims)
    if where is True:
        return g / _count(x, r)
    w = np.broadcast_to(where, shape)
    return g * w / np.maximum(np.sum(w, axis=axis, keepdims=True), 1)


def _prod_grad(A, r, x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    if where is not True:
        _unsupported("numpy.prod with where=")
    x = np.asarray(x)
    return _expand(A, x.shape, axis, keepdims, copy=False) * _prod_of_others(
        x, r, axis, keepdims, initial
    )


def _prod_of_others(x: Any, r: Any, axis: Any, keepdims: Any, initial: Any = None) -> Any:
    """For each element, the product of the other elements it was multiplied with."""
    if x.size and np.all(x != 0):
        return _expand(r, x.shape, axis, keepdims, copy=False) / x
    axes = _axes(axis, x.ndim)
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    xt = np.transpose(x, rest + axes)
    flat = xt.reshape(xt.shape[: len(rest)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.flip(
        np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], axis=-1), axis=-1), -1
    )
    others = (left * right).reshape(xt.shape)
    others = np.transpose(others, np.argsort(rest + axes))
    return others if initial is None else others * initial


def _chooser_grad(A, r, x, axis=None, out=None, keepdims=False, initial=None, where=True):
    """max/min: the sensitivity goes to the elements equal to the result, split between ties."""
    if where is not True:
        _unsupported("numpy.max/min with where=")
    x = np.asarray(x)
    mask = x == _expand(r, x.shape, axis, keepdims, copy=False)
    count = np.sum(mask, axis=axis, keepdims=True)
    return _expand(A, x.shape, axis, keepdims, copy=False) * mask / np.maximum(count, 1)


def _var_parts(x, r, axis, ddof, correction, where, mean):
    if where is not True and where is not _NoValue:
        _unsupported("numpy.var/std with where=")
    if mean is not None and mean is not _NoValue:
        _unsupported("numpy.var/std with mean= (compute it inside: the mean depends on the data)")
    if correction is not None and correction is not _NoValue:
        ddof = correction
    x = np.asarray(x)
    return x, np.conj(x - np.mean(x, axis=axis, keepdims=True)), _count(x, r) - ddof


def _var_grad(
    A,
    r,
    x,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    *,
    where=True,
    mean=None,
    correction=None,
):
    x, d, n = _var_parts(x, r, axis, ddof, correction, where, mean)
    return _expand(A, x.shape, axis, keepdims, copy=False) * d * (2.0 / n)


def _std_grad(
    A,
    r,
    x,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    *,
    where=True,
    mean=None,
    correction=None,
):
    x, d, n = _var_parts(x, r, axis, ddof, correction, where, mean)
    return _expand(_safe_div(A, r), x.shape, axis, keepdims, copy=False) * d / n


def _cumsum_grad(A, r, x, axis=None, dtype=None, out=None):
    if axis is None:
        return np.flip(np.cumsum(np.flip(np.ravel(A)))).reshape(np.shape(x))
    return np.flip(np.cumsum(np.flip(A, axis), axis), axis)


def _undiff(A: Any, axis: int) -> Any:
    """The adjoint of one ``np.diff`` along ``axis``."""
    before = [(0, 0)] * A.ndim
    after = [(0, 0)] * A.ndim
    before[axis] = (1, 0)
    after[axis] = (0, 1)
    return np.pad(A, before) - np.pad(A, after)


def _diff_full_grad(A, x, n, axis, prepend, append):
    A = np.asarray(A)
    for _ in range(n):
        A = _undiff(A, axis)
    nd = A.ndim
    p = 0 if prepend is _NoValue else (1 if np.ndim(prepend) == 0 else np.shape(prepend)[axis % nd])
    m = np.shape(x)[axis % nd]
    return A, p, m


def _diff_slice(G: Any, axis: int, start: int, stop: int | None) -> Any:
    idx = [slice(None)] * G.ndim
    idx[axis] = slice(start, stop)
    return G[tuple(idx)]


def _diff_grad(A, r, a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    G, p, m = _diff_full_grad(A, a, n, axis, prepend, append)
    return _diff_slice(G, axis, p, p + m)


def _diff_prepend_grad(A, r, a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    G, p, m = _diff_full_grad(A, a, n, axis, prepend, append)
    return _diff_slice(G, axis, 0, p).sum() if np.ndim(prepend) == 0 else _diff_slice(G, axis, 0, p)


def _diff_append_grad(A, r, a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    G, p, m = _diff_full_grad(A, a, n, axis, prepend, append)
    return (
        _diff_slice(G, axis, p + m, None).sum()
        if np.ndim(append) == 0
        else _diff_slice(G, axis, p + m, None)
    )


def _nansum_grad(
    A, r, a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True
):
    return _sum_grad(A, r, a, axis, dtype, out, keepdims, initial, where) * ~np.isnan(a)


def _nanmean_grad(A, r, a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    ok = ~np.isnan(a)
    return (
        _expand(A, np.shape(a), axis, keepdims, copy=False)
        * ok
        / np.maximum(np.sum(ok, axis=axis, keepdims=True), 1)
    )


# --- ufunc methods: np.add.reduce (a sum), np.multiply.reduce, np.maximum.reduce, ...

_REDUCE_GRADS: dict = {}


def _reduce_params(
    array, axis=0, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True
):
    return array, axis, dtype, out, keepdims, initial, where


def _ufunc_method_sens(args: tuple, kwargs: dict, sens: Any) -> tuple:
    """``((), self, *positional, {keywords})`` with ``sens`` for the array argument."""
    if args:
        out: tuple = ((), Z, sens) + (Z,) * (len(args) - 1)
    else:
        out = ((), Z)
    if kwargs:
        ks = _kw_sens(kwargs)
        if not args:
            ks["array"] = sens
        out = out + (ks,)
    return out


def _ufunc_reduce_plus(uf: Any, *args: Any, **kwargs: Any) -> ProcResult:
    array, axis, dtype, out, keepdims, initial, where = _reduce_params(*args, **kwargs)
    if out is not None:
        _check_out(uf.reduce, {"out": out})
    r = uf.reduce(*args, **kwargs)
    g = _REDUCE_GRADS.get(uf)

    def backprop(A: Any, Abox: Any) -> tuple:
        if A is Z:
            return _ufunc_method_sens(args, kwargs, Z)
        if g is None:
            raise NonDifferentiableError(f"dplus has no derivative for numpy.{uf.__name__}.reduce")
        extra = {"initial": initial} if initial is not _NoValue and uf is np.multiply else {}
        sens = g(
            _as_array_sens(A, r),
            r,
            np.asarray(array),
            axis=axis,
            keepdims=keepdims,
            where=where,
            **extra,
        )
        return _ufunc_method_sens(args, kwargs, fit(sens, array))

    return ProcResult(r, backprop)


def _accumulate_params(array, axis=0, dtype=None, out=None):
    return array, axis, dtype, out


def _running_chooser_grad(A, r, x, axis=0):
    """``np.maximum.accumulate`` (``minimum``, ``fmax``, ``fmin``): ``r[i]`` is the max (min)
    of ``x[:i+1]``, so ``x[j]`` gets ``A[i]`` split between the ties of that prefix, as
    ``np.max`` splits it. The ties of ``r[i]`` are the ``j <= i`` with ``x[j] == r[j] == r[i]``:
    the hits of the run of equal results holding ``i``, so a cumulative sum over the run
    counts and spreads them (linear in ``A``, the masks constant: differentiable again)."""
    x = np.moveaxis(np.asarray(x), axis, -1)
    r = np.moveaxis(r, axis, -1)
    A = np.moveaxis(A, axis, -1)
    n = x.shape[-1]
    at = np.arange(n)
    hit = x == r
    same_as_next = r[..., 1:] == r[..., :-1]
    starts = np.concatenate([np.ones_like(hit[..., :1]), ~same_as_next], axis=-1)
    ends = np.concatenate([~same_as_next, np.ones_like(hit[..., :1])], axis=-1)
    run_start = np.maximum.accumulate(np.where(starts, at, 0), axis=-1)
    run_end = np.flip(np.minimum.accumulate(np.flip(np.where(ends, at, n - 1), -1), axis=-1), -1)
    hits_so_far = np.cumsum(hit, axis=-1)
    ties = hits_so_far - np.take_along_axis(hits_so_far - hit, run_start, axis=-1)
    share = A / np.maximum(ties, 1)
    total = np.cumsum(share, axis=-1)
    rest_of_run = np.take_along_axis(total, run_end, axis=-1) - total + share
    return np.moveaxis(np.where(hit, rest_of_run, 0.0), -1, axis)


def _running_product_grad(A, r, x, axis=0):
    """``np.multiply.accumulate``: ``x[j]`` gets ``r[j-1] * s[j]`` with
    ``s[j] = sum over i >= j of A[i] * x[j+1] * ... * x[i]``, summed from the end (no division:
    exact where ``x`` has zeros)."""
    x = np.moveaxis(np.asarray(x), axis, 0)
    r = np.moveaxis(r, axis, 0)
    A = np.moveaxis(A, axis, 0)
    n = x.shape[0]
    if n == 0:
        return np.moveaxis(A, 0, axis)
    s = A[n - 1]
    from_end = (s,)
    for j in range(n - 2, -1, -1):
        s = A[j] + x[j + 1] * s
        from_end = from_end + (s,)
    before = np.concatenate([np.ones_like(r[:1]), r[:-1]], axis=0)
    return np.moveaxis(before * np.flip(np.stack(from_end), 0), 0, axis)


_ACCUMULATE_GRADS: dict = {}  # filled by numpy_table: np.add -> cumsum's, np.maximum -> ...


def _ufunc_accumulate_plus(uf: Any, *args: Any, **kwargs: Any) -> ProcResult:
    array, axis, dtype, out = _accumulate_params(*args, **kwargs)
    if out is not None:
        _check_out(uf.accumulate, {"out": out})
    r = uf.accumulate(*args, **kwargs)

    def backprop(A: Any, Abox: Any) -> tuple:
        if A is Z:
            return _ufunc_method_sens(args, kwargs, Z)
        g = _ACCUMULATE_GRADS.get(uf)
        if g is None:
            raise NonDifferentiableError(
                f"dplus has no derivative for numpy.{uf.__name__}.accumulate (it has one for "
                "add, multiply, maximum, minimum, fmax and fmin)"
            )
        sens = g(_as_array_sens(A, r), r, np.asarray(array), axis)
        return _ufunc_method_sens(args, kwargs, fit(sens, array))

    return ProcResult(r, backprop)


def _flat_plus(a: Any) -> ProcResult:
    """``a.flat`` is read-only in differentiated code (writing through it would mutate ``a``)."""
    view = a.view()
    view.flags.writeable = False
    r = view.flat

    def backprop(A: Any, Abox: Any) -> tuple:
        if A is Z or A is None:
            return _Z1
        raise NonDifferentiableError(
            "dplus has no derivative through a.flat: use a.ravel() or a.reshape(-1)"
        )

    return ProcResult(r, backprop)


# --- elementwise


def _balanced(x: Any, r: Any, y: Any) -> Any:
    """1 where ``x`` is the result, 1/2 where ``x`` and ``y`` tie."""
    return (x == r) / (1.0 + (x == y))


def _clip_bounds(a_min, a_max, mn, mx):
    lo = mn if a_min is None or a_min is _NoValue else a_min
    hi = mx if a_max is None or a_max is _NoValue else a_max
    lo = None if lo is _NoValue else lo
    hi = None if hi is _NoValue else hi
    return lo, hi


def _clip_x(A, r, a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    lo, hi = _clip_bounds(a_min, a_max, min, max)
    inside = True
    if lo is not None:
        inside = np.asarray(a) >= lo
    if hi is not None:
        inside = inside & (np.asarray(a) <= hi)
    return A * inside


def _clip_lo(A, r, a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    lo, hi = _clip_bounds(a_min, a_max, min, max)
    return Z if lo is None else A * (np.asarray(a) < lo)


def _clip_hi(A, r, a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    lo, hi = _clip_bounds(a_min, a_max, min, max)
    below = np.asarray(a) < lo if lo is not None else False
    return Z if hi is None else A * ((np.asarray(a) > hi) & ~below)


def _sinc_grad(A, r, x):
    x = np.asarray(x)
    px = np.pi * np.where(x == 0, 1.0, x)
    d = (np.cos(px) - np.sinc(x)) / np.where(x == 0, 1.0, x)
    return A * np.where(x == 0, 0.0, d)


# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
