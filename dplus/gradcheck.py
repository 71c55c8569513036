"""``check_grad``: compare dplus's gradient of a function with central finite differences.

Every float inside the arguments is checked: plain floats and NumPy floating scalars,
the real and imaginary parts of complex numbers, the elements of float and complex
NumPy arrays, at any depth inside tuples, lists, dicts and ``Box``es. Ints and bools
are left alone (they are often counts and flags; pass ``2.0`` rather than ``2`` to have a
number checked).

For a result that is not a number, pass ``sensitivity=`` (conforming to the result): the
gradient is then the one of the real scalar ``Re(dot(sensitivity, f(*args)))``, which is
what the finite differences are taken of. A complex result without a sensitivity is
checked through its real part, matching ``grad``'s default sensitivity ``1.0``; a complex
argument ``z = x + iy`` is compared as ``dL/dx - i dL/dy`` (the convention of the complex
rules, see ``dplus.primitives.cmath``).
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable, Iterator
from typing import Any

from .errors import DplusError
from .runtime.boxes import Box

__all__ = ["check_grad", "GradCheckError"]


class GradCheckError(DplusError, AssertionError):
    """The gradient dplus computed does not match central finite differences."""


# a path is a tuple of steps: ("item", index_or_key) | ("elem", array_index) | ("box",)
Path = tuple[Any, ...]


def _np() -> Any:
    return sys.modules.get("numpy")


def _is_float_leaf(x: Any) -> bool:
    if type(x) is float:
        return True
    if type(x) is bool or isinstance(x, int):
        return False
    if isinstance(x, float):
        return True
    np = _np()
    return np is not None and isinstance(x, np.floating)


def _is_complex_leaf(x: Any) -> bool:
    if isinstance(x, complex):
        return True
    np = _np()
    return np is not None and isinstance(x, np.complexfloating)


def _leaves(x: Any, path: Path, seen: set[Any]) -> Iterator[tuple[Path, Any]]:
    """The (path, value) of every float or complex leaf inside ``x``."""
    if _is_float_leaf(x) or _is_complex_leaf(x):
        yield path, x
        return
    np = _np()
    if np is not None and isinstance(x, np.ndarray):
        if x.dtype.kind in "fc":
            for idx in np.ndindex(*x.shape):
                yield path + (("elem", idx),), x[idx]
        return
    if isinstance(x, (list, dict, Box)):
        if id(x) in seen:  # a cycle
            return
        seen = seen | {id(x)}
    if isinstance(x, (tuple, list)):
        for i, e in enumerate(x):
            yield from _leaves(e, path + (("item", i),), seen)
    elif isinstance(x, dict):
        for k, e in x.items():
            yield from _leaves(e, path + (("item", k),), seen)
    elif isinstance(x, Box):
        yield from _leaves(x.value, path + (("box",),), seen)


def _format_path(path: Path) -> str:
    out = "args"
    for step in path:
        if step[0] == "item":
            out += f"[{step[1]!r}]"
        elif step[0] == "elem":
            idx = step[1]
            out += "[" + ", ".join(str(i) for i in idx) + "]"
        else:
            out += ".value"
    return out


def _get(x: Any, path: Path) -> Any:
    for step in path:
        if x is None:
            return None
        if step[0] == "item":
            x = x[step[1]]
        elif step[0] == "elem":
            x = x[step[1]]
        else:
            x = x.value
    return x


def _set(x: Any, path: Path, value: Any) -> Any:
    """``x`` with the leaf at ``path`` replaced (``x`` is a private deep copy; tuples are rebuilt)."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    if step[0] == "elem":
        x[step[1]] = value
        return x
    if step[0] == "box":
        x.value = _set(x.value, rest, value)
        return x
    key = step[1]
    new = _set(x[key], rest, value)
    if isinstance(x, tuple):
        items = list(x)
        items[key] = new
        make = getattr(type(x), "_make", None)  # a NamedTuple's
        return make(items) if make is not None else type(x)(items)
    x[key] = new
    return x


def _objective(f: Callable[..., Any], args: tuple[Any, ...], sensitivity: Any) -> float:
    from .runtime.linear import dot

    result = f(*args)
    if sensitivity is None:
        value = result
    else:
        value = dot(sensitivity, result)
    if isinstance(value, complex) or _is_complex_leaf(value):
        return float(value.real)
    np = _np()
    if np is not None and isinstance(value, np.ndarray):
        if value.size != 1:
            raise DplusError(
                f"check_grad needs a scalar result, but {_name(f)} returned an array of shape "
                f"{value.shape}: pass sensitivity=..."
            )
        value = value.reshape(()).item()
        if isinstance(value, complex):
            return value.real
    return float(value)


def _name(f: Any) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def _step(x: float, eps: float) -> float:
    return eps * max(1.0, abs(x))


def _numeric(
    f: Callable[..., Any], args: tuple[Any, ...], path: Path, x: Any, sensitivity: Any, eps: float
) -> Any:
    """Central differences of the objective at the leaf ``path`` (value ``x``)."""

    def at(value: Any) -> float:
        trial = copy.deepcopy(args)
        trial = _set(trial, path, value)
        return _objective(f, trial, sensitivity)

    if _is_complex_leaf(x):
        z = complex(x)
        hx = _step(z.real, eps)
        hy = _step(z.imag, eps)
        kind = type(x)
        dx = (at(kind(complex(z.real + hx, z.imag))) - at(kind(complex(z.real - hx, z.imag)))) / (
            2 * hx
        )
        dy = (at(kind(complex(z.real, z.imag + hy))) - at(kind(complex(z.real, z.imag - hy)))) / (
            2 * hy
        )
        return complex(dx, -dy)
    xf = float(x)
    h = _step(xf, eps)
    kind = type(x)
    return (at(kind(xf + h)) - at(kind(xf - h))) / (2 * h)


def _magnitude(v: Any) -> float:
    try:
        return abs(complex(v))
    except (TypeError, ValueError):
        return math.inf


def check_grad(
    f: Callable[..., Any],
    *args: Any,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    sensitivity: Any = None,
) -> tuple[Any, ...]:
    """Check ``dplus.grad(f)(*args)`` against central finite differences; return the gradient.

    Every float inside ``args`` (see the module docs) is moved by ``±eps * max(1, |x|)``
    and ``f`` is evaluated on a deep copy of the arguments each time, so functions that
    mutate their arguments are checked correctly. A component passes when
    ``|analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|)``. Otherwise
    :class:`GradCheckError` (an ``AssertionError`` and a ``DplusError``) names the worst
    component by its index path, e.g. ``args[1][2]['w']``, with both values.
    """
    from .api import grad

    g = grad(f) if sensitivity is None else grad(f, sensitivity=sensitivity)
    analytic = g(*copy.deepcopy(args))
    worst: tuple[float, str, Any, Any] | None = None
    failures = 0
    checked = 0
    for path, x in list(_leaves(args, (), set())):
        checked += 1
        numeric = _numeric(f, args, path, x, sensitivity, eps)
        try:
            a = _get(analytic, path)
        except (IndexError, KeyError, TypeError, AttributeError):
            a = None
        where = _format_path(path)
        if a is None:
            ratio = math.inf
        else:
            err = _magnitude(a - numeric) if _magnitude(a) != math.inf else math.inf
            tol = atol + rtol * max(_magnitude(a), _magnitude(numeric))
            ratio = err / tol if tol > 0 else (0.0 if err == 0 else math.inf)
        if not ratio <= 1.0:  # (nan fails too)
            failures += 1
            if ratio != ratio:
                ratio = math.inf
            if worst is None or ratio > worst[0]:
                worst = (ratio, where, a, numeric)
    if failures:
        assert worst is not None
        _, where, a, numeric = worst
        if a is None:
            detail = (
                "the analytic gradient has no value there (it does not conform to the arguments)"
            )
        else:
            detail = (
                f"analytic {a!r}, numeric {numeric!r} (central differences, eps={eps:g}); "
                f"|difference| = {_magnitude(a - numeric):.3g} > atol + rtol * max(|analytic|, |numeric|) = "
                f"{atol + rtol * max(_magnitude(a), _magnitude(numeric)):.3g}"
            )
        raise GradCheckError(
            f"check_grad({_name(f)}): the gradient does not match finite differences at {where}: {detail}. "
            f"{failures} of {checked} component{'s' if checked != 1 else ''} failed; this was the worst."
        )
    return analytic
