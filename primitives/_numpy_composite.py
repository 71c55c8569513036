"""``defcomposite``: a NumPy function's rule made from a NumPy expression of it.

Many NumPy functions are short compositions of functions that have rules (``np.select``
is a chain of ``np.where``, ``np.pad`` a concatenation, ``np.gradient`` differences of
slices). For these, the rule is the composition itself: dplus differentiates the
expression from its source, so it is differentiable again at any order, while the
result returned is still the one of NumPy's own function (the composition runs again in
the reverse pass, to record its own reverse pass and run it).
"""

from __future__ import annotations

from typing import Any, Callable

from dplus.registry import register_primitive
from dplus.result import ProcResult, run_backprop
from dplus.runtime_ops import call

__all__ = ["defcomposite"]


def defcomposite(fn: Any, impl: Callable[..., Any], note: str = "") -> Callable[..., ProcResult]:
    """Register ``fn``'s transform as the transform of ``impl``, a composition of functions with
    rules that computes what ``fn`` computes (same arguments, same result)."""

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        r = fn(*args, **kwargs)

        def composite_backprop(A: Any, Abox: Any) -> tuple:
            # the composition runs again here, in a backprop with source, so that a higher
            # order differentiates it from its source like any rule's backprop
            composed = call(impl, *args, **kwargs)
            return run_backprop(composed.backprop, A, Abox)

        return ProcResult(r, composite_backprop)

    name = getattr(fn, "__name__", "fn")
    transform.__name__ = transform.__qualname__ = f"{name}_plus"
    transform.__dplus_derived__ = ("rule helper",)
    impl.__dplus_derived__ = ("rule helper",)
    module = getattr(fn, "__module__", None) or "numpy"
    register_primitive(fn, transform, note=note or f"numpy rule: the derivative of {impl.__name__}, a composition of "
                                                    f"rules computing {module.split('.')[0]}.{name}")
    return transform
