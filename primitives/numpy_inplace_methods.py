"""Rules of the NumPy methods and functions that change an array in place: ``a.fill``,
``a.sort``, ``a.partition``, ``a.put``, ``np.copyto``, ``np.put``, ``np.place``,
``np.putmask``, ``np.fill_diagonal``, ``np.put_along_axis`` (item, slice and operator writes
are in :mod:`primitives.numpy_inplace`, whose memory bookkeeping these share).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.runtime.core import apply_transform
from dplus.runtime.linear import gen_zero
from dplus.runtime.memory import hand_over, remember_write, take, track, undo
from dplus.runtime.registry import lookup_transform, register_primitive
from dplus.runtime.result import ProcResult

from .numpy_fit import fit
from .numpy_inplace import array_setitem_plus, check_writable, function_name, user_place

try:
    import numpy as np
except ImportError:  # without NumPy this module registers nothing
    np = None  # type: ignore[assignment]

Z: Any = gen_zero

__all__ = ["register_in_place_method_rules"]


# Each is written as ``body(**arguments) -> (result, backprop)``, where the backprop returns
# the sensitivities by parameter name; ``_by_name`` binds a call's arguments to the names and
# gives the sensitivities back by position (and by keyword), whatever the call passed.


def _by_name(
    names: tuple[str, ...], defaults: dict[str, Any], body: Callable[..., Any], fn: Any
) -> Callable[..., ProcResult]:
    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        if len(args) > len(names) or any(k not in names for k in kwargs):
            raise TypeError(f"{function_name(fn)}() got unexpected arguments")
        values = dict(defaults)
        values.update(zip(names, args))
        values.update(kwargs)
        result, back = body(**values)

        def by_name_backprop(A: Any, Abox: Any) -> tuple:
            sens = back(A, Abox)
            out: tuple = ((),) + tuple(sens.get(names[i], Z) for i in range(len(args)))
            if kwargs:
                out = out + ({k: sens.get(k, Z) for k in kwargs},)
            return out

        return ProcResult(result, by_name_backprop)

    transform.__name__ = transform.__qualname__ = f"{getattr(fn, '__name__', 'fn')}_in_place_plus"
    return transform


def _fill(a: Any, value: Any) -> tuple:
    """``a.fill(value)``: ``a[...] = value``."""
    back = apply_transform(array_setitem_plus, a, Ellipsis, value).backprop
    return None, lambda A, Abox: {"value": back(Z, Abox)[3]}


def _copyto(dst: Any, src: Any, casting: Any = "same_kind", where: Any = True) -> tuple:
    """``np.copyto(dst, src, casting, where)``."""
    owner = check_writable(dst, "numpy.copyto")
    rec = remember_write(dst, Ellipsis, dst.copy())
    np.copyto(dst, src, casting=casting, where=where)
    track(owner)
    mask = None if where is True else np.broadcast_to(np.asarray(where, dtype=bool), dst.shape)

    def copyto_backprop(A: Any, Abox: Any) -> dict:
        S = take(Abox, dst)
        undo(Abox, rec)
        if S is Z:
            return {}
        if mask is not None:
            hand_over(Abox, dst, np.where(mask, 0, S))
            S = np.where(mask, S, 0)
        return {"src": fit(S, src)}

    return None, copyto_backprop


def _permuted(a: Any, new: Any, axis: int) -> Any:
    """The permutation along ``axis`` that took the values of ``a`` to ``new`` (equal values:
    one of them): ``new == np.take_along_axis(a, perm, axis)``."""
    src = np.argsort(a, axis=axis, kind="stable")
    dst = np.argsort(new, axis=axis, kind="stable")
    perm = np.empty_like(src)
    np.put_along_axis(perm, dst, src, axis=axis)
    return perm


def _permuting(a: Any, change: Callable[[], Any], what: str, axis: Any) -> tuple:
    """An in-place change that permutes ``a`` along ``axis`` (``sort``, ``partition``): the
    sensitivities follow the elements."""
    owner = check_writable(a, what)
    old = a.copy()
    rec = remember_write(a, Ellipsis, old)
    change()
    track(owner)
    perm = _permuted(old, a, axis) if a.ndim else None

    def permuting_backprop(A: Any, Abox: Any) -> dict:
        S = take(Abox, a)
        undo(Abox, rec)
        if S is not Z and perm is not None:
            back = np.zeros_like(S)
            np.put_along_axis(back, perm, S, axis=axis)
            hand_over(Abox, a, back)
        elif S is not Z:
            hand_over(Abox, a, S)
        return {}

    return None, permuting_backprop


def _sort(a: Any, axis: int = -1, kind: Any = None, order: Any = None) -> tuple:
    if order is not None:
        raise NonDifferentiableError(
            f"ndarray.sort(order=...) ({user_place()}) is not supported: sort by an index instead, "
            "a[...] = a[np.argsort(a, order=...)]"
        )
    return _permuting(a, lambda: a.sort(axis=axis, kind=kind), "ndarray.sort", axis)


def _partition(
    a: Any, kth: Any, axis: int = -1, kind: str = "introselect", order: Any = None
) -> tuple:
    if order is not None:
        raise NonDifferentiableError(
            f"ndarray.partition(order=...) ({user_place()}) is not supported: partition by an "
            "index instead, a[...] = a[np.argpartition(a, kth, order=...)]"
        )
    return _permuting(a, lambda: a.partition(kth, axis=axis, kind=kind), "ndarray.partition", axis)


def _resized(values: Any, n: Any) -> tuple:
    """``np.resize(np.ravel(values), n)`` (``values`` repeated or cut to ``n``), by its rules:
    the values and the function giving the sensitivity of ``values`` from theirs."""
    flat = apply_transform(lookup_transform(np.ravel), values)
    res = apply_transform(lookup_transform(np.resize), flat.primal, n)
    fb, rb = flat.backprop, res.backprop

    def resized_back(A: Any, Abox: Any) -> Any:
        return fb(rb(A, Abox)[1], Abox)[1]

    return res.primal, resized_back


def _write_computed(dst: Any, idx: Any, values: tuple) -> Callable[[Any], Any]:
    """``dst[idx] = written`` for ``values = (written, back)`` computed from the values the
    user gave (``back`` gives their sensitivity from that of ``written``): the function of
    ``Abox`` giving the sensitivity of the user's values."""
    written, value_back = values
    write_back = apply_transform(array_setitem_plus, dst, idx, written).backprop

    def computed_write_back(Abox: Any) -> Any:
        s = write_back(Z, Abox)[3]
        return Z if s is Z else value_back(s, Abox)

    return computed_write_back


def _put_positions(a: Any, ind: Any, mode: str) -> Any:
    p = np.asarray(ind, dtype=np.intp).ravel()
    n = a.size
    if mode == "wrap":
        return p % n
    if mode == "clip":
        return np.clip(p, 0, n - 1)
    if p.size and (p.max() >= n or p.min() < -n):
        bad = int(p.max()) if p.max() >= n else int(p.min())
        raise IndexError(f"index {bad} is out of bounds for axis 0 with size {n}")
    return np.where(p < 0, p + n, p)


def _put(a: Any, ind: Any, v: Any, mode: str = "raise") -> tuple:
    """``np.put(a, ind, v, mode)``: ``a.flat[ind] = v``, ``v`` repeated."""
    check_writable(a, "numpy.put")
    p = _put_positions(a, ind, mode)
    back = _write_computed(a, np.unravel_index(p, a.shape), _resized(v, p.size))
    return None, lambda A, Abox: {"v": back(Abox)}


def _place(arr: Any, mask: Any, vals: Any) -> tuple:
    """``np.place(arr, mask, vals)``: the elements where ``mask`` holds get ``vals`` repeated."""
    check_writable(arr, "numpy.place")
    m = np.asarray(mask, dtype=bool)
    back = _write_computed(arr, m, _resized(vals, int(np.count_nonzero(m))))
    return None, lambda A, Abox: {"vals": back(Abox)}


def _putmask(a: Any, mask: Any, values: Any) -> tuple:
    """``np.putmask(a, mask, values)``: ``a.flat[n] = values.flat[n % len(values)]`` where the
    mask holds."""
    check_writable(a, "numpy.putmask")
    m = np.broadcast_to(np.asarray(mask, dtype=bool), a.shape)
    full, full_back = _resized(values, a.size)
    picked = apply_transform(lookup_transform(operator.getitem), full, np.ravel(m))
    pb = picked.backprop

    def picked_back(A: Any, Abox: Any) -> Any:
        return full_back(pb(A, Abox)[1], Abox)

    back = _write_computed(a, m, (picked.primal, picked_back))
    return None, lambda A, Abox: {"values": back(Abox)}


def _fill_diagonal(a: Any, val: Any, wrap: bool = False) -> tuple:
    """``np.fill_diagonal(a, val, wrap)``: the diagonal, in ``a``'s flat order, gets ``val``
    repeated."""
    check_writable(a, "numpy.fill_diagonal")
    probe = np.zeros(a.shape, dtype=np.intp)
    np.fill_diagonal(probe, 1, wrap)  # (raises as NumPy does for a bad array)
    p = np.flatnonzero(probe)
    back = _write_computed(a, np.unravel_index(p, a.shape), _resized(val, p.size))
    return None, lambda A, Abox: {"val": back(Abox)}


def _put_along_axis(arr: Any, indices: Any, values: Any, axis: Any) -> tuple:
    """``np.put_along_axis(arr, indices, values, axis)``: ``arr[index] = values`` for the index
    NumPy builds from ``indices`` along ``axis``."""
    check_writable(arr, "numpy.put_along_axis")
    indices = np.asarray(indices)
    if axis is None:
        idx: Any = np.unravel_index(indices.ravel(), arr.shape)
        values = np.ravel(values) if np.ndim(values) else values
    else:
        axis = axis % arr.ndim
        grids: list[Any] = list(np.indices(indices.shape, sparse=True))
        grids[axis] = indices
        idx = tuple(grids)
    back = apply_transform(array_setitem_plus, arr, idx, values).backprop
    return None, lambda A, Abox: {"values": back(Z, Abox)[3]}


def register_in_place_method_rules() -> None:
    """Register the rules of this module (on import, when NumPy is installed)."""
    nd = np.ndarray
    for fn, names, defaults, body in (
        (nd.fill, ("a", "value"), {}, _fill),
        (nd.sort, ("a", "axis", "kind", "order"), {}, _sort),
        (nd.partition, ("a", "kth", "axis", "kind", "order"), {}, _partition),
        (np.copyto, ("dst", "src", "casting", "where"), {}, _copyto),
        (np.put, ("a", "ind", "v", "mode"), {}, _put),
        (nd.put, ("a", "ind", "v", "mode"), {}, _put),
        (np.place, ("arr", "mask", "vals"), {}, _place),
        (np.putmask, ("a", "mask", "values"), {}, _putmask),
        (np.fill_diagonal, ("a", "val", "wrap"), {}, _fill_diagonal),
        (np.put_along_axis, ("arr", "indices", "values", "axis"), {}, _put_along_axis),
    ):
        register_primitive(
            fn,
            _by_name(names, defaults, body, fn),
            note=f"numpy rule: {function_name(fn)}, in place",
        )


if np is not None:
    register_in_place_method_rules()
