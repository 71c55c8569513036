"""NumPy gradients of shape functions (reshape, transpose, concatenate, split, flip, roll, tile,
repeat, sort, take, ...), array constructors, ``ndarray`` conversions and random draws.
Registered by :mod:`primitives.numpy_table`; the conventions and the list of what is covered
are in :mod:`primitives.numpy`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dplus.runtime.memory import results_take_entries

try:
    import numpy as np
except ImportError:  # dplus works without NumPy; then there is nothing to register
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from dplus.runtime.linear import gen_zero
from dplus.runtime.result import ProcResult

from .container_reads import scatter_add
from .numpy import _kw_sens, _list_result_sens, _register, fit
from .numpy_ufuncs import _unsupported

Z = gen_zero
_ndarray: Any = np.ndarray if np is not None else type(None)


# ---------------------------------------------------------------------------
# the rule builders


Grad = Callable[..., Any]


# --- shapes


def _reshape_like(A, r, x, *args, **kw):
    return np.reshape(A, np.shape(x))


def _unreshape(A: Any, a: Any, order: str) -> Any:
    """The adjoint of ``np.reshape(a, r.shape, order=order)`` (and of ``np.ravel``)."""
    shape = np.shape(a)
    if order == "K":  # ravel in memory order: follow a's layout
        idx = np.empty_like(a, dtype=np.intp)
        idx[...] = np.arange(np.size(a)).reshape(shape)
        src, vals = np.ravel(idx, order="K"), np.ravel(A)
    elif order == "F" or (order == "A" and np.isfortran(np.asarray(a))):
        src = np.ravel(np.arange(np.size(a)).reshape(shape), order="F")
        vals = np.ravel(A, order="F")
    else:
        return np.reshape(A, shape)
    g = np.zeros(np.size(a), dtype=np.result_type(A, float))
    g[src] = vals
    return g.reshape(shape)


def _reshape_grad(A, r, a, shape=None, order="C", *, newshape=None, copy=None):
    return _unreshape(A, a, order)


def _reshape_method_grad(A, r, a, *shape, order="C", copy=None):
    return _unreshape(A, a, order)


def _ravel_grad(A, r, a, order="C"):
    return _unreshape(A, a, order)


def _transpose_grad(A, r, a, axes=None):
    if axes is None:
        return np.transpose(A)
    return np.transpose(A, np.argsort(axes))


def _transpose_method_grad(A, r, a, *axes):
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    return _transpose_grad(A, r, a, axes or None)


def _swapaxes_grad(A, r, a, axis1, axis2):
    return np.swapaxes(A, axis1, axis2)


def _moveaxis_grad(A, r, a, source, destination):
    return np.moveaxis(A, destination, source)


def _broadcast_to_grad(A, r, array, shape, subok=False):
    return A  # fit sums the broadcast axes


def _split_pieces(A: Any, seq: Any, axis: int) -> list:
    sizes = [np.shape(np.asarray(e))[axis] if np.ndim(e) else 1 for e in seq]
    return np.split(A, np.cumsum(sizes)[:-1], axis=axis)


def _pieces_like(pieces: list, seq: Any) -> Any:
    if isinstance(seq, _ndarray):
        return (
            np.stack([np.reshape(p, np.shape(e)) for p, e in zip(pieces, seq)])
            if len(seq)
            else np.zeros_like(seq)
        )
    out = [fit(np.reshape(p, np.shape(e)), e) for p, e in zip(pieces, seq)]
    return tuple(out) if isinstance(seq, tuple) else out


def _concatenate_grad(A, r, arrays, axis=0, out=None, dtype=None, casting=None):
    A = np.asarray(A)
    if axis is None:
        sizes = [np.size(e) for e in arrays]
        pieces = np.split(A, np.cumsum(sizes)[:-1])
        return _pieces_like(pieces, arrays)
    nd = np.ndim(arrays[0])
    return _pieces_like(_split_pieces(A, arrays, axis % nd), arrays)


def _stack_grad(A, r, arrays, axis=0, out=None, dtype=None, casting=None):
    A = np.moveaxis(np.asarray(A), axis, 0)
    return _pieces_like(list(A), arrays)


def _hstack_grad(A, r, tup, dtype=None, casting=None):
    arrs = [np.atleast_1d(e) for e in tup]
    axis = 0 if arrs and arrs[0].ndim == 1 else 1
    return _pieces_like(_split_pieces(np.asarray(A), arrs, axis), tup)


def _vstack_grad(A, r, tup, dtype=None, casting=None):
    arrs = [np.atleast_2d(e) for e in tup]
    return _pieces_like(_split_pieces(np.asarray(A), arrs, 0), tup)


def _column_stack_grad(A, r, tup):
    # as np.column_stack reads them: a 1-D array is a column, a number a 1x1 block
    arrs = [np.asarray(e) for e in tup]
    arrs = [np.transpose(np.array(e, ndmin=2)) if e.ndim < 2 else e for e in arrs]
    return _pieces_like(_split_pieces(np.asarray(A), arrs, 1), tup)


def _split_transform(fn: Any, axis_of: Callable[[Any, Any], int]) -> Callable[..., ProcResult]:
    """``split`` and friends return a list of arrays: its sensitivity is gathered from the
    box-sensitivity map and concatenated back."""

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        r = fn(*args, **kwargs)
        ary = args[0]
        axis = axis_of(args, kwargs)

        def backprop(A: Any, Abox: Any) -> tuple:
            parts = _list_result_sens(r, A, Abox)
            g = np.concatenate(parts, axis=axis) if parts else np.zeros(np.shape(ary))
            out: tuple = ((), fit(np.reshape(g, np.shape(ary)), ary)) + (Z,) * (len(args) - 1)
            if kwargs:
                out = out + (_kw_sens(kwargs),)
            return out

        return ProcResult(r, backprop)

    return _register(fn, transform, "")


def _split_axis(args: tuple, kwargs: dict) -> int:
    return kwargs.get("axis", args[2] if len(args) > 2 else 0)


def _hsplit_axis(args: tuple, kwargs: dict) -> int:
    return 1 if np.ndim(args[0]) > 1 else 0


def _flip_grad(A, r, m, axis=None):
    return np.flip(A, axis)


def _roll_grad(A, r, a, shift, axis=None):
    if isinstance(shift, (tuple, list)):
        shift = tuple(-s for s in shift)
    else:
        shift = -np.asarray(shift) if not isinstance(shift, int) else -shift
    return np.reshape(np.roll(A, shift, axis), np.shape(a))


def _tile_grad(A, r, A_in, reps):
    x = np.asarray(A_in)
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    nd = max(x.ndim, len(reps))
    xs = (1,) * (nd - x.ndim) + x.shape
    rs = (1,) * (nd - len(reps)) + reps
    g = np.reshape(A, tuple(v for pair in zip(rs, xs) for v in pair))
    return np.reshape(np.sum(g, axis=tuple(range(0, 2 * nd, 2))), x.shape)


def _repeat_grad(A, r, a, repeats, axis=None):
    x = np.asarray(a)
    A = np.asarray(A)
    if axis is None:
        flat = x.ravel()
        src = np.repeat(np.arange(flat.size), repeats)
        return scatter_add(flat, src, A).reshape(x.shape)
    axis = axis % x.ndim
    src = np.repeat(np.arange(x.shape[axis]), repeats)
    idx = [slice(None)] * x.ndim
    idx[axis] = src
    return scatter_add(x, tuple(idx), A)


def _sort_grad(A, r, a, axis=-1, kind=None, order=None, **kw):
    x = np.asarray(a)
    if axis is None:
        perm = np.argsort(x, axis=None, kind="stable")
        return np.reshape(scatter_add(np.ravel(x), perm, A), x.shape)
    perm = np.argsort(x, axis=axis, kind="stable")
    # each element back where it came from; scatter_add (not put_along_axis, which writes in
    # place) keeps this reverse differentiable again
    where = list(np.indices(x.shape, sparse=True))
    where[axis % x.ndim] = perm
    return scatter_add(x, tuple(where), A)


def _take_grad(A, r, a, indices, axis=None, out=None, mode="raise"):
    x = np.asarray(a)
    if axis is None:
        flat = x.ravel()
        return scatter_add(
            flat,
            np.ravel(indices) if np.ndim(indices) else indices,
            np.ravel(A) if np.ndim(indices) else A,
        ).reshape(x.shape)
    idx = [slice(None)] * x.ndim
    idx[axis % x.ndim] = indices
    return scatter_add(x, tuple(idx), A)


def _triu_grad(A, r, m, k=0):
    return np.triu(A, k)


def _tril_grad(A, r, m, k=0):
    return np.tril(A, k)


def _array_grad(A, r, obj, *args, **kwargs):
    if r.dtype.kind not in "fc":
        return Z
    return A


def _astype_grad(A, r, a, dtype, *args, **kwargs):
    if r.dtype.kind not in "fc":
        return Z
    return A  # fit gives it a's dtype (the real part for a real a)


def _item_grad(A, r, a, *args):
    x = np.asarray(a)
    g = np.zeros(x.shape, dtype=np.result_type(A, float))
    if not args:
        g.reshape(-1)[0] = A
    elif len(args) == 1 and not isinstance(args[0], tuple):
        g.reshape(-1)[args[0]] = A
    else:
        g[args[0] if len(args) == 1 else args] = A
    return g


def _tolist_transform(a: Any) -> ProcResult:
    r = a.tolist()

    def backprop(A: Any, Abox: Any) -> tuple:
        from dplus.runtime.fold import fold

        s = fold(r, A, Abox)
        return ((), np.asarray(s, dtype=np.result_type(a.dtype, float)).reshape(a.shape))

    return ProcResult(r, backprop)


def _full_grad(A, r, shape, fill_value, *args, **kwargs):
    return np.sum(A)


def _full_like_grad(A, r, a, fill_value, *args, **kwargs):
    return np.sum(A)


def _linspace_start(A, r, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    return _linspace_part(A, r, start, stop, num, endpoint, retstep, axis, 0)


def _linspace_stop(A, r, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    return _linspace_part(A, r, start, stop, num, endpoint, retstep, axis, 1)


def _linspace_part(A, r, start, stop, num, endpoint, retstep, axis, which):
    if retstep:
        _unsupported("numpy.linspace with retstep=True")
    t = (
        np.arange(num) / ((num - 1) if endpoint else num)
        if num > (1 if endpoint else 0)
        else np.zeros(num)
    )
    w = t if which else 1.0 - t
    A = np.moveaxis(np.asarray(A), axis, 0) if np.ndim(A) > 1 else np.asarray(A)
    return np.tensordot(w, A, axes=(0, 0))


# --- random draws


def _normal_vjp(A, r, loc=0.0, scale=1.0, size=None):
    z = (np.asarray(r) - loc) / np.where(np.asarray(scale) == 0, 1.0, scale)
    return A, A * z


def _uniform_vjp(A, r, low=0.0, high=1.0, size=None):
    width = np.asarray(high) - low
    u = (np.asarray(r) - low) / np.where(width == 0, 1.0, width)
    return A * (1.0 - u), A * u


def _exponential_vjp(A, r, scale=1.0, size=None):
    return (A * np.asarray(r) / np.where(np.asarray(scale) == 0, 1.0, scale),)


def _method_vjp(vjp: Grad) -> Grad:
    """A random method's gradient: the generator (``self``) gets nothing."""

    def method(A, r, self, *args, **kwargs):
        return (Z,) + tuple(vjp(A, r, *args, **kwargs))

    return method


# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
