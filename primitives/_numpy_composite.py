"""``defcomposite``: a NumPy function's rule made from a NumPy expression of it.

Many NumPy functions are short compositions of functions that have rules (``np.select``
is a chain of ``np.where``, ``np.pad`` a concatenation, ``np.gradient`` differences of
slices). For these, the rule is the composition itself: dplus differentiates the
expression from its source, so it is differentiable again at any order, while the
result returned is still the one of NumPy's own function (the composition runs again in
the reverse pass, to record its own reverse pass and run it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.rules import defnondiff
from dplus.runtime.calls import call
from dplus.runtime.memory import results_take_entries
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult, run_backprop

__all__ = ["defcomposite"]


def _same_values(a: Any, b: Any, eps: float) -> bool:
    import numpy as np

    if isinstance(b, (list, tuple)):
        return (
            isinstance(a, (list, tuple))
            and len(a) == len(b)
            and all(_same_values(x, y, eps) for x, y in zip(a, b))
        )
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if b.dtype.kind not in "fc" or a.dtype.kind not in "fc":
        return bool(np.array_equal(a, b))
    # rounding differs between NumPy's algorithm and the composition (which runs in double
    # precision): allow some ulps of the result's dtype, relative to its largest element
    rtol = max(1e-6, 64 * max(eps, float(np.finfo(b.dtype).eps)))
    return bool(
        np.allclose(
            a,
            b,
            rtol=rtol,
            atol=rtol * max(1.0, float(np.max(np.abs(b), initial=0.0))),
            equal_nan=True,
        )
    )


def widened(x: Any) -> Any:
    """A float16/float32 (complex64) array as a double-precision one: the composition is
    computed in double precision, and the sensitivities are given the argument's dtype after."""
    import numpy as np

    if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.dtype.itemsize < 8:
        return x.astype(np.float64)
    if isinstance(x, np.ndarray) and x.dtype.kind == "c" and x.dtype.itemsize < 16:
        return x.astype(np.complex128)
    return x


def refuse_if_different(composed: Any, result: Any, fn: Any, args: tuple) -> None:
    """The composition must compute what NumPy computed (up to rounding in the precision of
    the arguments): if it does not, its derivative would be a wrong number, so raise instead."""
    import numpy as np

    eps = max(
        [
            float(np.finfo(a.dtype).eps)
            for a in args
            if isinstance(a, np.ndarray) and a.dtype.kind in "fc"
        ],
        default=0.0,
    )
    if not _same_values(composed, result, eps):
        name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
        raise NonDifferentiableError(
            f"dplus's derivative of {name} does not apply to this call (its composition of rules computes a "
            "different result here): this is a gap in dplus, please report it with the call"
        )


def defcomposite(fn: Any, impl: Callable[..., Any], note: str = "") -> Callable[..., ProcResult]:
    """Register ``fn``'s transform as the transform of ``impl``, a composition of functions with
    rules that computes what ``fn`` computes (same arguments, same result)."""

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        if kwargs.get("out") is not None:
            from .numpy import with_out

            return with_out(fn, transform, args, kwargs)
        r = fn(*args, **kwargs)

        def composite_backprop(A: Any, Abox: Any) -> tuple:
            # the composition runs again here, in a backprop with source, so that a higher
            # order differentiates it from its source like any rule's backprop
            wide: tuple[Any, ...] = ()
            for a in args:
                wide = wide + (widened(a),)
            composed = call(impl, *wide, **kwargs)
            refuse_if_different(composed.primal, r, fn, args)
            return run_backprop(composed.backprop, A, Abox)

        return ProcResult(r, composite_backprop)

    name = getattr(fn, "__name__", "fn")
    transform.__name__ = transform.__qualname__ = f"{name}_plus"
    mark_derived(transform, "rule helper")
    mark_derived(impl, "rule helper")
    mark_derived(widened, "rule helper")
    module = getattr(fn, "__module__", None) or "numpy"
    register_primitive(
        fn,
        transform,
        note=note
        or f"numpy rule: the derivative of {impl.__name__}, a composition of "
        f"rules computing {module.split('.')[0]}.{name}",
    )
    return transform


defnondiff(refuse_if_different, note="internal: a check of a NumPy rule")

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
