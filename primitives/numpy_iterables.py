"""NumPy rules that consume a Python iterable: ``np.fromiter`` (issue #26).

``np.fromiter(iterable, dtype, count=-1)`` of numbers: the result's sensitivity goes back
to the values taken from ``iterable``, one element each, as ``list(iterable)`` sends it
(a list, a tuple or an array gets its elements' sensitivities, a generator made by
differentiated code hands each to the resumption that yielded it, an iterator of other
kinds refuses a non-zero one). ``count`` takes only that many values, as NumPy does. An
integer or boolean dtype carries no sensitivity; a subarray dtype (``(float, 3)``) is
refused when a sensitivity reaches it.
"""

from __future__ import annotations

import itertools
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.runtime.generators import consumes_generators
from dplus.runtime.linear import gen_zero
from dplus.runtime.memory import results_take_entries
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from ._iterables import lazy_seq, proj, seq

try:
    import numpy as np
except ImportError:  # dplus works without NumPy
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

Z: Any = gen_zero


def _fromiter_params(iter, dtype, count=-1, *, like=None):  # (NumPy's parameter names)
    return iter, dtype, count


def _fromiter_values(iterable: Any, count: int) -> tuple:
    """The iterable as a ``Seq`` and the values ``np.fromiter`` takes from it (all of them,
    or the first ``count``, leaving the rest of an iterator untaken)."""
    if count is None or count < 0:
        s = seq(iterable, "numpy.fromiter", "iter")
        return s, list(s.items)
    s = lazy_seq(iterable, "numpy.fromiter", "iter")
    if s.items is not None:
        return s, list(s.items[:count])
    return s, list(itertools.islice(s.source(), count))


def fromiter_plus(*args: Any, **kwargs: Any) -> ProcResult:
    iterable, dtype, count = _fromiter_params(*args, **kwargs)
    s, values = _fromiter_values(iterable, count)
    rest = {k: v for k, v in kwargs.items() if k != "iter"}
    r = np.fromiter(values, *args[1:], **rest)

    def fromiter_backprop(A: Any, Abox: Any) -> tuple:
        sens: Any = Z
        if A is not Z and A is not None and r.dtype.kind in "fc":
            if r.ndim != 1:
                raise NonDifferentiableError(
                    f"dplus has no derivative for numpy.fromiter with the subarray dtype {dtype!r}: "
                    "build the array with np.array([...]) of the values instead"
                )
            if type(A) is not np.ndarray:
                A = np.full(r.shape, A)
            taken = [proj(a, v) for a, v in zip(A.tolist(), values)]
            sens = s.sens(taken, Abox)
        out: tuple = ((),)
        for i in range(len(args)):
            out = out + ((sens if i == 0 else Z),)
        if kwargs:
            out = out + ({k: (sens if k == "iter" else Z) for k in kwargs},)
        return out

    return ProcResult(r, fromiter_backprop)


if np is not None:
    fromiter_plus.__name__ = fromiter_plus.__qualname__ = "fromiter_plus"
    register_primitive(
        np.fromiter,
        consumes_generators(fromiter_plus),
        note="numpy.fromiter(iterable, dtype, count=-1): the values' sensitivities go back to "
        "the iterable, as list(iterable) sends them",
    )

results_take_entries(filename=__file__)
