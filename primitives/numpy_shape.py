"""NumPy rules for shape, joining, padding and selecting functions (issue #22).

Covered: ``rot90 rollaxis append dsplit dstack kron partition take_along_axis select pad``
(modes ``constant`` with differentiable ``constant_values``, ``edge``, ``reflect``,
``symmetric``, ``wrap``; the statistic and ramp modes raise when a sensitivity reaches
them), ``diagflat``, ``matrix_transpose``, ``broadcast_arrays``, ``compress``,
``extract``, ``choose``, ``meshgrid``, ``resize``, ``block``, ``atleast_1d/2d/3d`` (of one
array or several). The index tricks
``np.r_[...]`` and ``np.c_[...]`` raise a ``NonDifferentiableError`` naming the fix
(``np.concatenate``, ``np.column_stack``) when a sensitivity reaches them: the items of a
subscript carry no sensitivity in dplus's engine.

``select``, ``append`` and ``pad`` are compositions of rules (``primitives._numpy_composite``);
the others are gradient functions in the style of ``primitives.numpy``. Index arithmetic
(which positions an element went to) is done in helpers registered as non-differentiable,
so that the gradients themselves use only rules and are differentiable again.

NumPy is optional: without it this module registers nothing.
"""

from __future__ import annotations

from typing import Any

from dplus.runtime.memory import results_take_entries

try:
    import numpy as np
except ImportError:  # dplus works without NumPy
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.rules import defnondiff
from dplus.runtime.linear import gen_zero
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from ._numpy_composite import defcomposite
from .container_reads import scatter_add

Z = gen_zero


# ---------------------------------------------------------------------------
# index arithmetic: constants, no derivative


def _rollaxis_order(ndim: int, axis: int, start: int) -> tuple:
    """The axes of ``np.rollaxis(a, axis, start)`` in terms of ``a``'s axes."""
    axis = axis % ndim
    start = start + ndim if start < 0 else start
    if axis < start:
        start -= 1
    order = [i for i in range(ndim) if i != axis]
    order.insert(start, axis)
    return tuple(order)


def _inverse_order(order: tuple) -> tuple:
    return tuple(int(i) for i in np.argsort(order))


def _along_axis_index(indices: Any, axis: int, shape: tuple) -> tuple:
    """The fancy index that reads what ``np.take_along_axis(a, indices, axis)`` reads."""
    indices = np.asarray(indices)
    axis = axis % len(shape)
    out = []
    for d in range(len(shape)):
        if d == axis:
            out.append(indices)
        else:
            view = [1] * len(shape)
            view[d] = indices.shape[d] if indices.shape[d] != 1 else shape[d]
            out.append(np.arange(view[d]).reshape(view))
    return tuple(out)


def _partition_order(a: Any, r: Any, axis: Any) -> Any:
    """``p`` with ``r == np.take_along_axis(a, p, axis)``: where each element of the
    partitioned result came from (equal values may trade places: their sensitivities add
    up the same)."""
    a_sorted_from = np.argsort(a, axis=axis, kind="stable")
    r_sorted_from = np.argsort(r, axis=axis, kind="stable")
    return np.take_along_axis(
        a_sorted_from, np.argsort(r_sorted_from, axis=axis, kind="stable"), axis=axis
    )


def _kron_layout(a_shape: tuple, b_shape: tuple) -> tuple:
    """Shapes for ``np.kron``: the result's shape with each axis split in an (a, b) pair,
    ``a`` and ``b`` reshaped to broadcast against it, and the axes that hold b's and a's parts."""
    nd = max(len(a_shape), len(b_shape))
    sa = (1,) * (nd - len(a_shape)) + tuple(a_shape)
    sb = (1,) * (nd - len(b_shape)) + tuple(b_shape)
    split = tuple(v for k in range(nd) for v in (sa[k], sb[k]))
    a_view = tuple(v for k in range(nd) for v in (sa[k], 1))
    b_view = tuple(v for k in range(nd) for v in (1, sb[k]))
    return split, a_view, b_view, tuple(range(1, 2 * nd, 2)), tuple(range(0, 2 * nd, 2))


_INDEX_PAD_MODES = ("edge", "reflect", "symmetric", "wrap")
_STATISTIC_PAD_MODES = ("mean", "maximum", "minimum", "median")


def _pad_index(shape: tuple, pad_width: Any, mode: Any, reflect_type: str) -> tuple:
    """The open-mesh index with ``np.pad(a, pad_width, mode) == a[index]`` for the modes that
    copy elements (each axis padded by the same mode applied to its positions)."""
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (len(shape), 2))
    extra: dict[str, Any] = (
        {"reflect_type": reflect_type} if mode in ("reflect", "symmetric") else {}
    )
    return np.ix_(
        *[np.pad(np.arange(n), tuple(w), mode=mode, **extra) for n, w in zip(shape, widths)]
    )


def _pad_matrix(n: int, widths: tuple, mode: Any) -> Any:
    """The ``(n, n + before + after)`` matrix taking an axis of length ``n`` to its padding
    with ``reflect_type='odd'`` (a linear map: NumPy's padding of each unit vector)."""
    return np.pad(np.eye(n), (widths, (0, 0)), mode=mode, reflect_type="odd").T


def _stat_window(n: int, axis: int, ndim: int, stat_length: Any, after: bool) -> Any:
    """The positions, along an axis of length ``n``, whose statistic fills one side."""
    if stat_length is None:
        return np.arange(n)
    lengths = np.broadcast_to(np.asarray(stat_length, dtype=np.intp), (ndim, 2))
    length = min(int(lengths[axis, 1 if after else 0]), n)
    return np.arange(n - length, n) if after else np.arange(0, length)


def _ramp_steps(width: int, axis: int, ndim: int, after: bool) -> Any:
    """``0, 1, ..., width - 1`` along ``axis`` (reversed for the side after the array)."""
    steps = np.arange(float(width))
    steps = steps[::-1] if after else steps
    return np.reshape(steps, tuple(width if d == axis else 1 for d in range(ndim)))


def _pad_widths(ndim: int, pad_width: Any) -> tuple:
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (ndim, 2))
    return tuple((int(b), int(e)) for b, e in widths)


def _side_shape(shape: tuple, axis: int, width: int) -> tuple:
    return tuple(shape[:axis]) + (width,) + tuple(shape[axis + 1 :])


# ---------------------------------------------------------------------------
# gradients


def _rot90_grad(A, r, m, k=1, axes=(0, 1)):
    return np.rot90(A, -k, axes)


def _rollaxis_grad(A, r, a, axis, start=0):
    return np.transpose(A, _inverse_order(_rollaxis_order(np.ndim(a), axis, start)))


def _dstack_grad(A, r, tup):
    from .numpy_arrays import _pieces_like, _split_pieces

    arrs = [np.atleast_3d(e) for e in tup]
    return _pieces_like(_split_pieces(np.asarray(A), arrs, 2), tup)


def _kron_vjp(A, r, a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    split, a_view, b_view, b_axes, a_axes = _kron_layout(a.shape, b.shape)
    G = np.reshape(A, split)
    ga = np.reshape(np.sum(G * np.reshape(b, b_view), axis=b_axes), a.shape)
    gb = np.reshape(np.sum(G * np.reshape(a, a_view), axis=a_axes), b.shape)
    return ga, gb


def _take_along_axis_grad(A, r, arr, indices, axis=-1):
    if axis is None:
        flat = np.ravel(arr)
        return np.reshape(
            scatter_add(flat, _along_axis_index(indices, 0, flat.shape), A), np.shape(arr)
        )
    return scatter_add(arr, _along_axis_index(indices, axis, np.shape(arr)), A)


def _partition_grad(A, r, a, kth, axis=-1, kind="introselect", order=None):
    if axis is None:
        flat = np.ravel(a)
        p = _partition_order(flat, r, 0)
        return np.reshape(scatter_add(flat, _along_axis_index(p, 0, flat.shape), A), np.shape(a))
    p = _partition_order(a, r, axis)
    return scatter_add(a, _along_axis_index(p, axis, np.shape(a)), A)


def _cross_vjp(A, r, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    if np.shape(a)[axisa] != 3 or np.shape(b)[axisb] != 3:
        raise NonDifferentiableError(
            "dplus differentiates numpy.cross of 3-vectors only: give 2-vectors a zero third component"
        )
    return np.cross(b, A, axisb, axisc, axisa), np.cross(A, a, axisc, axisa, axisb)


def _is_differentiable_item(item: Any) -> bool:
    """An item of ``np.r_[...]`` whose elements reach the result as numbers that can carry a
    sensitivity (float or complex arrays and numbers; not directives, slices or integers)."""
    if isinstance(item, (bool, int, str, slice)):
        return False
    return np.asarray(item).dtype.kind in "fc"


def _concatenated_positions(concatenator: Any, key: tuple, i: int) -> Any:
    """Where each element of item ``i`` of the key went in ``concatenator[key]`` (flat
    positions of the result, in the item's own flat order): the result of the key with the
    item replaced by zeros, then by labels 1..n, differs exactly at the item's places."""
    item = np.asarray(key[i])
    n = item.size
    shape = np.shape(item)

    def with_item(value: Any) -> Any:
        changed = list(key)
        changed[i] = value if shape else value.reshape(())[()]
        return np.ravel(type(concatenator).__getitem__(concatenator, tuple(changed)))

    zeros = with_item(np.zeros(shape))
    labels = with_item(np.arange(1.0, n + 1.0).reshape(shape))
    where = np.flatnonzero(labels != zeros)
    if where.size != n:
        raise NonDifferentiableError(
            "dplus's derivative of np.r_[...]/np.c_[...] does not apply to this call (an item's elements do "
            "not each appear once in the result): use np.concatenate or np.column_stack"
        )
    return where[np.argsort(np.real(labels[where]), kind="stable")]


def _concatenator_item_grad(A: Any, concatenator: Any, key: tuple, i: int) -> Any:
    g = np.ravel(A)[_concatenated_positions(concatenator, key, i)]
    item = key[i]
    if isinstance(item, np.ndarray):
        return np.reshape(g, np.shape(item))
    return g[0]


def _concatenator_getitem_plus(concatenator: Any, key: Any) -> ProcResult:
    """``np.r_[...]`` and ``np.c_[...]``: a concatenation of the items of the key, so each
    float or complex item gets the part of the result's sensitivity at the places its
    elements went (found by :func:`_concatenated_positions`, a constant)."""
    r = type(concatenator).__getitem__(concatenator, key)
    items = key if isinstance(key, tuple) else (key,)

    def concatenator_backprop(A: Any, Abox: Any) -> tuple:
        if A is Z or A is None:
            return (), Z, Z
        if isinstance(r, np.matrix):
            raise NonDifferentiableError(
                "dplus has no derivative through np.r_['r', ...] / np.r_['c', ...] (a np.matrix result): "
                "use np.concatenate or np.column_stack"
            )
        sens: tuple[Any, ...] = ()
        for i in range(len(items)):
            if _is_differentiable_item(items[i]):
                sens = sens + (_concatenator_item_grad(A, concatenator, items, i),)
            else:
                sens = sens + (Z,)
        return (), Z, sens if isinstance(key, tuple) else sens[0]

    return ProcResult(r, concatenator_backprop)


# ---------------------------------------------------------------------------
# compositions of rules


def _select(condlist, choicelist, default=0):
    result = default
    for i in range(len(condlist) - 1, -1, -1):  # as NumPy does: the first true condition wins
        result = np.where(condlist[i], choicelist[i], result)
    return result


def _append(arr, values, axis=None):
    if axis is None:
        return np.concatenate((np.ravel(arr), np.ravel(values)))
    return np.concatenate((arr, values), axis=axis)


def _pad(array, pad_width, mode="constant", constant_values=0, reflect_type="even", **other):
    x = np.asarray(array)
    if x.dtype.kind not in "fc":  # integers: rounded by NumPy, piecewise constant
        if mode in ("reflect", "symmetric"):
            other = {"reflect_type": reflect_type, **other}
        if mode == "constant":
            other = {"constant_values": constant_values, **other}
        return _pad_integers(x, pad_width, mode, other)
    if mode == "constant" and not other:
        return _pad_constant(x, pad_width, constant_values)
    if mode in _INDEX_PAD_MODES and reflect_type == "even" and not other:
        return x[_pad_index(np.shape(x), pad_width, mode, reflect_type)]
    if mode in ("reflect", "symmetric") and reflect_type == "odd" and not other:
        return _pad_odd(x, pad_width, mode)
    if mode in _STATISTIC_PAD_MODES and set(other) <= {"stat_length"}:
        return _pad_statistic(x, pad_width, mode, other.get("stat_length"))
    if mode == "linear_ramp" and set(other) <= {"end_values"}:
        return _pad_linear_ramp(x, pad_width, other.get("end_values", 0))
    if mode in ("reflect", "symmetric"):
        other = {"reflect_type": reflect_type, **other}
    return _pad_without_derivative(x, pad_width, mode, other)


def _pad_odd(x, pad_width, mode):
    """``reflect_type='odd'``: each axis's padding is linear in it (``2 * edge - mirror``,
    repeated as NumPy repeats it for long pads), so it is that axis times a constant matrix,
    NumPy's own padding of the identity."""
    widths = _pad_widths(np.ndim(x), pad_width)
    for k in range(np.ndim(x)):
        if widths[k] != (0, 0):
            M = _pad_matrix(np.shape(x)[k], widths[k], mode)
            x = np.moveaxis(np.matmul(np.moveaxis(x, k, -1), M), -1, k)
    return x


def _pad_statistic(x, pad_width, mode, stat_length):
    """The statistic modes: each side of an axis is filled with the statistic of the first
    (last) ``stat_length`` elements along it, axis by axis as NumPy pads (so the corners
    hold the statistic of the padding before them)."""
    widths = _pad_widths(np.ndim(x), pad_width)
    for k in range(np.ndim(x)):
        before, after = widths[k]
        if before == 0 and after == 0:
            continue
        parts = ()
        if before > 0:
            first = _stat_window(np.shape(x)[k], k, np.ndim(x), stat_length, False)
            edge = _statistic(np.take(x, first, axis=k), k, mode)
            parts = parts + (np.broadcast_to(edge, _side_shape(np.shape(x), k, before)),)
        parts = parts + (x,)
        if after > 0:
            last = _stat_window(np.shape(x)[k], k, np.ndim(x), stat_length, True)
            edge = _statistic(np.take(x, last, axis=k), k, mode)
            parts = parts + (np.broadcast_to(edge, _side_shape(np.shape(x), k, after)),)
        x = np.concatenate(parts, axis=k)
    return x


def _statistic(chunk, axis, mode):
    if mode == "mean":
        return np.mean(chunk, axis=axis, keepdims=True)
    if mode == "maximum":
        return np.max(chunk, axis=axis, keepdims=True)
    if mode == "minimum":
        return np.min(chunk, axis=axis, keepdims=True)
    return np.median(chunk, axis=axis, keepdims=True)


def _pad_linear_ramp(x, pad_width, end_values):
    """``linear_ramp``: a ramp from each end value to the edge element, the end value at the
    outside (``np.linspace(end, edge, width, endpoint=False)``), axis by axis."""
    ends = np.broadcast_to(np.asarray(end_values), (np.ndim(x), 2))
    widths = _pad_widths(np.ndim(x), pad_width)
    for k in range(np.ndim(x)):
        before, after = widths[k]
        n = np.shape(x)[k]
        parts = ()
        if before > 0:
            edge = np.take(x, np.arange(0, 1), axis=k)
            steps = _ramp_steps(before, k, np.ndim(x), False)
            parts = parts + (ends[k, 0] + (edge - ends[k, 0]) / before * steps,)
        parts = parts + (x,)
        if after > 0:
            edge = np.take(x, np.arange(n - 1, n), axis=k)
            steps = _ramp_steps(after, k, np.ndim(x), True)
            parts = parts + (ends[k, 1] + (edge - ends[k, 1]) / after * steps,)
        x = np.concatenate(parts, axis=k)
    return x


def _pad_constant(x, pad_width, constant_values):
    values = np.broadcast_to(np.asarray(constant_values), (np.ndim(x), 2))
    widths = _pad_widths(np.ndim(x), pad_width)
    for k in range(
        np.ndim(x)
    ):  # axis by axis, as NumPy does (the corners take the later axes' values)
        before = np.full(_side_shape(np.shape(x), k, widths[k][0]), values[k, 0])
        after = np.full(_side_shape(np.shape(x), k, widths[k][1]), values[k, 1])
        x = np.concatenate((before, x, after), axis=k)
    return x


def _pad_integers(x: Any, pad_width: Any, mode: Any, kwargs: dict) -> Any:
    return np.pad(x, pad_width, mode, **kwargs)


def _pad_without_derivative(x: Any, pad_width: Any, mode: Any, kwargs: dict) -> Any:
    return np.pad(x, pad_width, mode, **kwargs)


def _pad_without_derivative_plus(x: Any, pad_width: Any, mode: Any, kwargs: dict) -> ProcResult:
    def backprop(A: Any, Abox: Any) -> tuple:
        if A is Z or A is None:
            return (), Z, Z, Z, Z
        detail = f"mode={mode!r}" + (
            f", reflect_type={kwargs['reflect_type']!r}" if "reflect_type" in kwargs else ""
        )
        raise NonDifferentiableError(
            f"dplus has no derivative for numpy.pad with {detail}: use mode 'constant', 'edge', 'reflect', "
            "'symmetric' or 'wrap' (reflect_type 'even'), or build the padding with np.concatenate"
        )

    return ProcResult(_pad_without_derivative(x, pad_width, mode, kwargs), backprop)


def _diagflat(v, k=0):
    return np.diag(np.ravel(v), k)


def _matrix_transpose(x):
    return np.swapaxes(x, -1, -2)


def _atleast_1d(*arys):
    return _atleast(np.atleast_1d, arys)


def _atleast_2d(*arys):
    return _atleast(np.atleast_2d, arys)


def _atleast_3d(*arys):
    return _atleast(np.atleast_3d, arys)


def _atleast(fn, arys):
    """``np.atleast_*d(*arys)``: each array reshaped as NumPy views it (with axes of length 1
    added); of several arrays, the tuple of them."""
    if len(arys) == 1:
        return np.reshape(arys[0], _atleast_shape(fn, arys[0]))
    out = ()
    for a in arys:
        out = out + (np.reshape(a, _atleast_shape(fn, a)),)
    return out


def _atleast_shape(fn, a) -> tuple:
    return np.shape(fn(np.zeros(np.shape(a))))


def _broadcast_arrays(*args, subok=False):
    shape = _broadcast_shape(args)
    out = ()
    for a in args:
        out = out + (np.broadcast_to(a, shape),)
    return out


def _broadcast_shape(arrays: tuple) -> tuple:
    return np.broadcast_shapes(*[np.shape(a) for a in arrays])


def _compress(condition, a, axis=None, out=None):
    return np.take(a, np.nonzero(condition)[0], axis=axis)


def _extract(condition, arr):
    return np.take(np.ravel(arr), np.nonzero(np.ravel(condition))[0])


def _choose(a, choices, out=None, mode="raise"):
    parts = np.broadcast_arrays(a, *choices)
    index = parts[0]
    n = len(choices)
    if mode == "wrap":
        index = np.mod(index, n)
    elif mode == "clip":
        index = np.clip(index, 0, n - 1)
    stacked = np.stack(parts[1:])
    return np.take_along_axis(stacked, np.expand_dims(index, 0), axis=0)[0]


def _meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    ndim = len(xi)
    out = ()
    for i in range(ndim):
        out = out + (np.reshape(xi[i], _meshgrid_view(ndim, i, indexing)),)
    if sparse:
        return out
    shape = _broadcast_shape(out)
    full = ()
    for x in out:
        full = full + (np.broadcast_to(x, shape),)
    return full


def _meshgrid_view(ndim: int, i: int, indexing: str) -> tuple:
    position = i
    if indexing == "xy" and ndim > 1 and i < 2:
        position = 1 - i
    return tuple(-1 if k == position else 1 for k in range(ndim))


def _resize(a, new_shape):
    flat = np.ravel(a)
    total = int(np.prod(new_shape))
    repeats = -(-total // np.shape(flat)[0])
    return np.reshape(np.tile(flat, repeats)[:total], new_shape)


def _block(arrays):
    depth, ndim = _block_layout(arrays)
    return _block_level(arrays, depth, ndim, 0)


def _block_level(arrays, depth, ndim, level):
    if level == depth:  # a leaf: given NumPy's leading axes of length 1
        return np.reshape(arrays, (1,) * (ndim - np.ndim(arrays)) + np.shape(arrays))
    parts = ()
    for i in range(len(arrays)):
        parts = parts + (_block_level(arrays[i], depth, ndim, level + 1),)
    return np.concatenate(parts, axis=level - depth)


def _block_layout(arrays) -> tuple:
    """How deep ``np.block``'s lists nest, and the dimension of its result."""
    depth = 0
    item = arrays
    while isinstance(item, list):
        depth += 1
        item = item[0]
    leaves = [arrays]
    for _ in range(depth):
        leaves = [x for part in leaves for x in part]
    return depth, max([depth] + [np.ndim(x) for x in leaves])


# ---------------------------------------------------------------------------
# registration


def register_numpy_shape_rules() -> None:
    from .numpy import defgrad, defvjp_joint
    from .numpy_arrays import _split_transform

    defgrad(np.rot90, _rot90_grad)
    defgrad(np.rollaxis, _rollaxis_grad)
    defgrad(np.dstack, _dstack_grad, coerce=False)
    _split_transform(np.dsplit, lambda args, kwargs: 2)
    defvjp_joint(np.kron, _kron_vjp)
    defgrad(np.take_along_axis, _take_along_axis_grad)
    defgrad(np.partition, _partition_grad)
    defvjp_joint(np.cross, _cross_vjp)
    defcomposite(np.select, _select)
    defcomposite(np.append, _append)
    defcomposite(np.pad, _pad)
    defcomposite(np.diagflat, _diagflat)
    defcomposite(np.broadcast_arrays, _broadcast_arrays)
    for fn, impl in (
        (np.compress, _compress),
        (np.extract, _extract),
        (np.choose, _choose),
        (np.meshgrid, _meshgrid),
        (np.resize, _resize),
        (np.block, _block),
        (np.atleast_1d, _atleast_1d),
        (np.atleast_2d, _atleast_2d),
        (np.atleast_3d, _atleast_3d),
    ):
        defcomposite(fn, impl)
    if hasattr(np, "matrix_transpose"):
        defcomposite(np.matrix_transpose, _matrix_transpose)
    register_primitive(
        _pad_without_derivative,
        _pad_without_derivative_plus,
        note="internal: numpy.pad in a mode dplus has no derivative for",
    )
    register_primitive(
        type(np.r_).__getitem__,
        _concatenator_getitem_plus,
        note="numpy: np.r_[...] and np.c_[...], a concatenation of the items of the key",
    )
    for helper in (
        _rollaxis_order,
        _inverse_order,
        _along_axis_index,
        _partition_order,
        _kron_layout,
        _pad_index,
        _pad_widths,
        _pad_matrix,
        _stat_window,
        _ramp_steps,
        _side_shape,
        _broadcast_shape,
        _atleast_shape,
        _meshgrid_view,
        _block_layout,
        _concatenated_positions,
        _is_differentiable_item,
        _pad_integers,
    ):
        defnondiff(helper, note="internal: index arithmetic of a NumPy rule")
    for rule_helper in (
        _rot90_grad,
        _rollaxis_grad,
        _dstack_grad,
        _kron_vjp,
        _take_along_axis_grad,
        _partition_grad,
        _cross_vjp,
        _pad_constant,
        _pad_odd,
        _pad_statistic,
        _statistic,
        _pad_linear_ramp,
        _concatenator_getitem_plus,
        _concatenator_item_grad,
    ):
        mark_derived(rule_helper, "rule helper")


if np is not None:
    register_numpy_shape_rules()

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
