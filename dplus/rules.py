"""Short ways to write derivative rules, so a family of rules reads like a table.

    defvjp(math.sin, lambda A, r, x: A * math.cos(x))
    defvjp(operator.mul, lambda A, r, x, y: A * y, lambda A, r, x, y: A * x)
    defnondiff(math.floor)

Each gradient function receives the result sensitivity ``A``, the primal result ``r``
and the primal arguments, and returns the sensitivity of one argument; ``None`` in a
slot marks a non-differentiable argument. Rules whose gradient functions are correct
for any numbers (int, float, complex with the holomorphic convention) are also
*inlined*: the transformer copies the lambda's body into the generated reverse code
of float fast paths, so no call or closure is made per operation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .markers import mark_derived
from .runtime.linear import gen_zero
from .runtime.memory import results_take_entries
from .runtime.portable import remember_source
from .runtime.registry import _CHANGES, register_primitive
from .runtime.result import ProcResult, plain_result

__all__ = ["defvjp", "defnondiff", "definline", "InlineRule", "inline_rule_for", "inline_rules"]

Grad = Callable[..., Any]


class InlineRule:
    """A rule the transformer may inline into fast paths: ``fn`` and its gradient lambdas."""

    __slots__ = ("fn", "grads", "arity")

    def __init__(self, fn: Any, grads: tuple[Grad | None, ...]) -> None:
        self.fn = fn
        self.grads = grads
        self.arity = len(grads)

    def __repr__(self) -> str:
        return f"InlineRule({getattr(self.fn, '__name__', self.fn)})"


_INLINE: dict[Any, InlineRule] = {}


def inline_rule_for(fn: Any) -> InlineRule | None:
    try:
        return _INLINE.get(fn)
    except TypeError:
        return None


def inline_rules() -> dict[Any, InlineRule]:
    return dict(_INLINE)


def defvjp(
    fn: Any, *grads: Grad | None, inline: bool = True, note: str = ""
) -> Callable[..., ProcResult]:
    """Register the reverse transform of ``fn`` from one gradient function per argument."""
    transform = _vjp_transform(fn, tuple(_no_gradient if g is None else g for g in grads))
    name = getattr(fn, "__name__", "fn")
    transform.__name__ = transform.__qualname__ = f"{name}_plus"
    register_primitive(fn, transform, note=note)
    for g in grads:
        if g is not None:
            # gradient functions are transformed from source when differentiated again
            mark_derived(g, "rule", fn)
            remember_source(g)
    if inline:
        _INLINE[fn] = InlineRule(fn, grads)
    else:
        _INLINE.pop(fn, None)
    return transform


def definline(fn: Any, *grads: Grad | None) -> None:
    """Let the transformer inline ``fn`` into float fast paths when it is called with exactly
    ``len(grads)`` number arguments, with these gradient lambdas (``lambda A, r, *args:``),
    beside the transform already registered for every other call (``max(a, b)`` beside ``max``)."""
    _INLINE[fn] = InlineRule(fn, grads)
    _CHANGES[0] += 1


def _no_gradient(A: Any, r: Any, *args: Any) -> Any:
    return gen_zero


mark_derived(_no_gradient, "rule")


def _vjp_transform(fn: Any, grads: tuple[Any, ...]) -> Callable[..., ProcResult]:
    """The transform for one gradient function per argument.

    Written without comprehensions or mutation, per arity, so that it can itself be
    differentiated from its source (derivatives of derivatives).
    """
    n = len(grads)
    zeros = ((),) + (gen_zero,) * n
    if n == 1:
        g0 = grads[0]

        def transform(x: Any) -> ProcResult:
            r = fn(x)

            def backprop(A: Any, Abox: Any) -> tuple[Any, ...]:
                if A is gen_zero:
                    return zeros
                return ((), g0(A, r, x))

            return ProcResult(r, backprop)

        return transform
    if n == 2:
        g0, g1 = grads

        def transform2(x: Any, y: Any) -> ProcResult:
            r = fn(x, y)

            def backprop2(A: Any, Abox: Any) -> tuple[Any, ...]:
                if A is gen_zero:
                    return zeros
                return ((), g0(A, r, x, y), g1(A, r, x, y))

            return ProcResult(r, backprop2)

        return transform2

    def transformn(*args: Any) -> ProcResult:
        r = fn(*args)

        def backpropn(A: Any, Abox: Any) -> tuple[Any, ...]:
            if A is gen_zero:
                return zeros
            out: tuple[Any, ...] = ((),)
            for g in grads:
                out = out + (g(A, r, *args),)
            return out

        return ProcResult(r, backpropn)

    return transformn


def _zero_sensitivities(n: int, kwargs: dict[Any, Any]) -> tuple[Any, ...]:
    return ((),) + (gen_zero,) * n + (({k: gen_zero for k in kwargs},) if kwargs else ())


def defnondiff(
    fn: Any, *, note: str = "non-differentiable (zero derivative)"
) -> Callable[..., ProcResult]:
    """Register ``fn`` as having zero derivative in every argument (comparisons, ``len``, ...)."""

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        r = fn(*args, **kwargs)
        out = _zero_sensitivities(len(args), kwargs)  # a constant: no derivative at higher orders
        # (plain: an array it returns that shows an argument's memory keeps that memory's
        # sensitivity where the memory was made; one it makes is a constant either way)
        return plain_result(r, lambda A, Abox: out)

    name = getattr(fn, "__name__", "fn")
    transform.__name__ = transform.__qualname__ = f"{name}_plus"
    register_primitive(fn, transform, note=note)
    _INLINE.pop(fn, None)
    return transform


defnondiff(_zero_sensitivities)

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
