"""NumPy functions that call a Python function: ``np.apply_along_axis`` and
``np.vectorize(pyfunc)(...)`` (issue #26).

Their rules are Python implementations that dplus differentiates from source, so the
Python function is called through its transform, once per slice or element, as ``map``
calls it (and at any order). They call it as NumPy does: in the same order, on the same
values (``apply_along_axis`` a 1-D view per index of the other axes; ``vectorize`` a
Python number per element, after one extra call on the first elements, as NumPy makes to
find the output type when ``otypes`` is not given), and return NumPy's result, dtype
included (the first result's dtype, ``otypes[0]`` for ``vectorize``).

Not covered (refused by name when differentiated): ``vectorize`` with ``signature``,
``excluded``, ``cache=True`` or several outputs, and results of ``func1d`` whose shapes
differ between slices (NumPy broadcasts them into the first one's shape).
"""

from __future__ import annotations

from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.rules import defnondiff
from dplus.runtime.registry import register_primitive
from dplus.transform.plus_functions import lazy_transform

try:
    import numpy as np
except ImportError:  # dplus works without NumPy
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)


def _outer_indices(shape: tuple) -> list:
    return list(np.ndindex(shape))


def _result_order(n_outer: int, n_result: int, axis: int) -> tuple:
    """The permutation NumPy applies to ``(outer axes..., result axes...)``: the result's
    axes go where ``axis`` was."""
    dims = tuple(range(n_outer + n_result))
    return dims[:axis] + dims[n_outer:] + dims[axis:n_outer]


def _axis_along(axis: int, ndim: int) -> int:
    from numpy.lib.array_utils import normalize_axis_index

    return normalize_axis_index(axis, ndim)


def _refuse_ragged(shapes: list, what: str) -> None:
    if any(s != shapes[0] for s in shapes):
        raise NonDifferentiableError(
            f"{what}: the function returned results of different shapes {sorted(set(shapes))}, "
            "which NumPy broadcasts into the first one's; dplus has no derivative for that. "
            "Return the same shape for every slice"
        )


def _shapes(results: list) -> list:
    return [np.shape(r) for r in results]


def _refuse_unsupported_vectorize(vec: Any) -> None:
    what = None
    if vec.signature is not None:
        what = "signature="
    elif vec.excluded:
        what = "excluded="
    elif vec.cache:
        what = "cache=True"
    if what is not None:
        raise NonDifferentiableError(
            f"dplus has no derivative for numpy.vectorize with {what}: call the function in a "
            "loop or a comprehension, and build the array with np.array"
        )


def _output_dtype(vec: Any, first: Any) -> Any:
    if isinstance(first, tuple):
        raise NonDifferentiableError(
            "dplus has no derivative for numpy.vectorize of a function with several outputs: "
            "vectorize one function per output"
        )
    if vec.otypes:
        return np.dtype(vec.otypes[0])
    return np.asarray(first).dtype


for _helper in (
    _outer_indices,
    _result_order,
    _axis_along,
    _refuse_ragged,
    _shapes,
    _refuse_unsupported_vectorize,
    _output_dtype,
):
    defnondiff(_helper, note="internal: numpy_callbacks bookkeeping")


def _apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``np.apply_along_axis``, in Python: ``func1d`` on each 1-D slice along ``axis``."""
    arr = np.asanyarray(arr)
    axis = _axis_along(axis, np.ndim(arr))
    slices = np.moveaxis(arr, axis, -1)
    outer = np.shape(slices)[:-1]
    if 0 in outer:  # NumPy's own error
        return np.apply_along_axis(func1d, axis, arr, *args, **kwargs)
    results = [np.asanyarray(func1d(slices[i], *args, **kwargs)) for i in _outer_indices(outer)]
    _refuse_ragged(_shapes(results), "numpy.apply_along_axis")
    first = results[0]
    stacked = np.stack(results)
    if stacked.dtype != first.dtype:
        stacked = stacked.astype(first.dtype)
    out = np.reshape(stacked, outer + np.shape(first))
    return np.transpose(out, _result_order(len(outer), np.ndim(first), axis))


def _vectorized_call(vec, *args, **kwargs):
    """``np.vectorize(pyfunc)(*args, **kwargs)``, in Python: ``pyfunc`` on the Python numbers
    of the broadcast arguments (keyword arguments are vectorized too), element by element."""
    _refuse_unsupported_vectorize(vec)
    names = list(kwargs)
    given = list(args) + [kwargs[name] for name in names]
    arrays = [np.asarray(a) for a in given]
    shape = np.broadcast_shapes(*[np.shape(a) for a in arrays])
    columns = [np.ravel(np.broadcast_to(a, shape)) for a in arrays]
    n = len(columns[0]) if columns else 1
    m = len(args)
    if not vec.otypes:
        if n == 0:  # NumPy's own error
            return np.vectorize(vec.pyfunc)(*args, **kwargs)
        first = [c[0] for c in columns]  # NumPy's call for the output type
        probe = vec.pyfunc(*first[:m], **dict(zip(names, first[m:])))
        dtype = _output_dtype(vec, probe)
    else:
        dtype = _output_dtype(vec, None)
    values = [c.tolist() for c in columns]
    results = []
    for k in range(n):
        at = [v[k] for v in values]
        results.append(vec.pyfunc(*at[:m], **dict(zip(names, at[m:]))))
    if n and not vec.otypes:
        _output_dtype(vec, results[0])
    out = np.array(results, dtype=dtype) if n else np.zeros(0, dtype=dtype)
    return np.reshape(out, shape)


if np is not None:
    register_primitive(
        np.apply_along_axis,
        lazy_transform(_apply_along_axis),
        note="numpy.apply_along_axis(func1d, axis, arr, ...): a Python loop over the slices "
        "(differentiated from source): func1d through its transform",
    )
    register_primitive(
        np.vectorize.__call__,
        lazy_transform(_vectorized_call),
        note="numpy.vectorize(pyfunc)(...): a Python loop over the elements (differentiated "
        "from source): pyfunc through its transform",
    )
