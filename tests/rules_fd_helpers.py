"""Finite differences and helpers shared by the rule tests (test_rules_*.py).

Derivatives are taken by central differences with one Richardson extrapolation step,
accurate to about 1e-10 relative for smooth functions away from singularities, so
rules can be held to tight tolerances. Complex numbers follow the convention of the
rules: the sensitivity ``c`` of ``z`` pairs with changes as ``Re(c * dz)``, so the
expected sensitivity of a complex argument is ``dL/dx - i dL/dy`` and of a real one
``dL/dx``, with ``L = Re(A * f(args))``.
"""

from __future__ import annotations

import dis
import math
import types
from collections.abc import Callable
from typing import Any

import dplus
from dplus import BoxSensitivities, gen_zero
from dplus.runtime.registry import lookup_transform


def richardson(g: Callable[[float], float], x: float, h: float) -> float:
    """d/dx g at x: central differences at h and h/2, Richardson-extrapolated."""
    d1 = (g(x + h) - g(x - h)) / (2 * h)
    h2 = h / 2
    d2 = (g(x + h2) - g(x - h2)) / (2 * h2)
    return (4 * d2 - d1) / 3


def step(x: float, rel: float = 1e-4) -> float:
    return rel * max(1.0, abs(x))


def expected_sens(fn: Callable[..., Any], args: tuple, A: Any, i: int, rel: float = 1e-4) -> Any:
    """The expected sensitivity of number argument ``i`` of ``fn`` for result sensitivity ``A``."""
    args = list(args)
    x = args[i]

    def L_at(v: Any) -> float:
        a = list(args)
        a[i] = v
        out = A * fn(*a)
        return out.real if isinstance(out, complex) else float(out)

    if isinstance(x, complex):
        hx, hy = step(x.real, rel), step(x.imag, rel)
        dx = richardson(lambda t: L_at(complex(t, x.imag)), x.real, hx)
        dy = richardson(lambda t: L_at(complex(x.real, t)), x.imag, hy)
        return complex(dx, -dy)
    xf = float(x)
    return richardson(lambda t: L_at(t), xf, step(xf, rel))


def holomorphic_derivative(
    f: Callable[[complex], complex], z: complex, rel: float = 1e-4
) -> complex:
    h = step(abs(z), rel)
    d1 = (f(z + h) - f(z - h)) / (2 * h)
    d2 = (f(z + h / 2) - f(z - h / 2)) / h
    return (4 * d2 - d1) / 3


def backprop(fn: Any, *args: Any, A: Any = 1.0, Abox: Any = None, **kwargs: Any) -> tuple:
    """The registered transform's backprop output for ``fn(*args)`` and sensitivity ``A``."""
    t = lookup_transform(fn)
    assert t is not None, f"{fn} has no registered transform"
    r = t(*args, **kwargs)
    out = r.backprop(A, BoxSensitivities() if Abox is None else Abox)
    assert out[0] == (), out
    return out


def primal(fn: Any, *args: Any, **kwargs: Any) -> Any:
    return lookup_transform(fn)(*args, **kwargs).primal


def close(a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    if a is gen_zero:
        a = 0.0
    if b is gen_zero:
        b = 0.0
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(close(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, complex) or isinstance(b, complex):
        return abs(complex(a) - complex(b)) <= atol + rtol * max(abs(a), abs(b))
    if math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def assert_close(a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-9, what: str = "") -> None:
    assert close(a, b, rtol, atol), f"{what}: got {a!r}, expected {b!r}"


def check_number_rule(
    fn: Any,
    args: tuple,
    diff: tuple[int, ...] | None = None,
    A: Any = 1.0,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    rel: float = 1e-4,
) -> tuple:
    """Compare the backprop of ``fn`` at ``args`` with finite differences, argument by argument.

    ``diff`` lists the differentiable argument positions (the others must get a zero).
    Also checks ``dplus.grad`` for real ``A == 1.0`` results. Returns the backprop output.
    """
    out = backprop(fn, *args, A=A)
    assert len(out) == len(args) + 1
    idx = range(len(args)) if diff is None else diff
    for i in range(len(args)):
        s = out[i + 1]
        if i in idx:
            e = expected_sens(fn, args, A, i, rel)
            assert_close(s, e, rtol, atol, f"{getattr(fn, '__name__', fn)}{args} argument {i}")
            if not isinstance(args[i], complex) and s is not gen_zero:
                assert not isinstance(s, complex), (
                    f"a real argument got a complex sensitivity {s!r}"
                )
        else:
            assert s is gen_zero or s == 0, f"argument {i} should get no sensitivity, got {s!r}"
    return out


def check_grad_matches_backprop(fn: Any, args: tuple, out: tuple) -> None:
    g = dplus.grad(fn)(*args)
    assert len(g) == len(args)
    for gi, si, a in zip(g, out[1:], args):
        assert gi is not gen_zero
        if si is gen_zero:
            assert gi == 0 or gi is None
        else:
            assert_close(gi, si, 1e-12, 0.0, "grad vs backprop")


def _loaded_globals(fn) -> set[str]:
    return {
        ins.argval for ins in dis.get_instructions(fn) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }


def check_inlinable(fn, rule) -> None:
    """An inline gradient: a lambda, one expression, no closure, no nested code, only its
    parameters and its module's globals."""
    for g in rule.grads:
        if g is None:
            continue
        code = g.__code__
        assert g.__name__ == "<lambda>", f"{fn}: inline gradients must be lambdas"
        assert g.__closure__ is None and not code.co_freevars, (
            f"{fn}: an inline gradient closes over variables"
        )
        assert not g.__defaults__ and not g.__kwdefaults__
        assert code.co_argcount == rule.arity + 2, f"{fn}: an inline gradient takes (A, r, *args)"
        assert not (code.co_flags & (0x04 | 0x08)), "no *args / **kwargs"
        assert not any(isinstance(c, types.CodeType) for c in code.co_consts), f"{fn}: nested code"
        for name in _loaded_globals(g):
            assert name in g.__globals__, (
                f"{fn}: inline gradient uses {name!r}, not a global of its module"
            )


# Paths to the number leaves of nested lists and tuples, for finite differences by hand.
def leaves(x: Any, kinds: tuple = (float,), path: tuple = ()) -> Any:
    if isinstance(x, bool):
        return
    if isinstance(x, kinds):
        yield path
    elif isinstance(x, (list, tuple)):
        for i, e in enumerate(x):
            yield from leaves(e, kinds, path + (i,))


def get_leaf(x: Any, path: tuple) -> Any:
    for i in path:
        x = x[i]
    return x


def set_leaf(x: Any, path: tuple, v: Any) -> Any:
    """``x`` with the leaf at ``path`` replaced (the containers copied, not mutated)."""
    if not path:
        return v
    items = list(x)
    items[path[0]] = set_leaf(items[path[0]], path[1:], v)
    return items if isinstance(x, list) else type(x)(items)
