"""The builders of the operator rules (``_binary``, ``_unary``: numbers inline, arrays,
sequences and user objects by kind of operand) and the array-safe gradients of ``**``,
``abs`` and ``@``. The table in :mod:`primitives.operators` uses them.
"""

from __future__ import annotations

import cmath
import math
from collections.abc import Callable
from typing import Any

from dplus.api import define_dplus
from dplus.rules import defvjp
from dplus.runtime.constants import is_constant
from dplus.runtime.core import apply_transform
from dplus.runtime.linear import GenZero, gen_zero
from dplus.runtime.memory import results_take_entries
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .operator_operands import (
    SET_OPERATORS,
    _fit,
    _is_array_like,
    _is_numeric,
    _is_seq,
    _is_text,
    _np,
    _user_binary,
    _user_unary,
)

_Z1 = ((), gen_zero)
_Z2 = ((), gen_zero, gen_zero)
_REAL = frozenset((float, int))
_SCALAR = frozenset((float, int, complex))


# ---------------------------------------------------------------------------
# the rule builders


@define_dplus  # a helper of the transforms below: differentiable again for higher derivatives
def _numeric_binary(r: Any, gx: Any, gy: Any, x: Any, y: Any) -> ProcResult:
    def backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _Z2
        return (
            (),
            gen_zero if is_constant(x, Abox) else _fit(gx(A, r, x, y), x),
            gen_zero if is_constant(y, Abox) else _fit(gy(A, r, x, y), y),
        )

    return ProcResult(r, backprop)


def _binary(
    fn: Any,
    gx: Callable[..., Any],
    gy: Callable[..., Any],
    *,
    general: tuple[Callable[..., Any], Callable[..., Any]] | None = None,
    compute: Any = None,
    seq: Callable[[Any, Any], ProcResult] | None = None,
    inline: bool = True,
    also: tuple = (),
    real_to_complex: bool = False,
) -> Callable[..., ProcResult]:
    """Register a binary operator: inline lambdas ``gx, gy`` for numbers, ``general``
    (array-safe) versions for everything numeric, ``compute`` the out-of-place operation
    (for in-place operators), ``seq`` the rule for sequence operands."""
    if inline:
        defvjp(fn, gx, gy)
    ggx, ggy = general if general is not None else (gx, gy)
    comp = compute if compute is not None else fn

    def transform(x: Any, y: Any) -> ProcResult:
        tx = type(x)
        ty = type(y)
        if tx in _REAL and ty in _REAL:
            r = comp(x, y)
            if real_to_complex and type(r) is complex:  # (-8.0) ** (1/3)
                return _numeric_binary(r, gx, gy, x, y)

            def backprop(A: Any, Abox: Any) -> tuple:
                if A is gen_zero:
                    return _Z2
                return ((), gx(A, r, x, y), gy(A, r, x, y))

            return ProcResult(r, backprop)
        if tx in _SCALAR and ty in _SCALAR:
            return _numeric_binary(comp(x, y), gx, gy, x, y)
        if _is_numeric(x) and _is_numeric(y):
            return _numeric_binary(comp(x, y), ggx, ggy, x, y)
        if _is_text(x) or _is_text(y):
            return ProcResult(comp(x, y), lambda A, Abox: _Z2)
        if (
            (_is_array_like(x) or _is_array_like(y))
            and (_is_numeric(x) or _is_seq(x))
            and (_is_numeric(y) or _is_seq(y))
        ):
            return _numeric_binary(comp(x, y), ggx, ggy, x, y)
        if seq is not None and (_is_seq(x) or _is_seq(y)):
            return seq(x, y)
        if (
            fn in SET_OPERATORS
            and isinstance(x, (set, frozenset))
            and isinstance(y, (set, frozenset))
        ):
            return apply_transform(SET_OPERATORS[fn], x, y)
        return _user_binary(fn, x, y)

    name = getattr(fn, "__name__", "op")
    transform.__name__ = transform.__qualname__ = f"{name}_plus"
    register_primitive(fn, transform, note=f"operator rule: {name}")
    for other in also:
        register_primitive(other, transform)
    if compute is not None:
        # the out-of-place helper of an in-place operator has the operator's rule, so that
        # this transform can itself be differentiated (derivatives of derivatives)
        register_primitive(compute, transform)
    return transform


def _unary(
    fn: Any,
    g: Callable[..., Any],
    *,
    general: Callable[..., Any] | None = None,
    inline: bool = True,
    also: tuple = (),
) -> Callable[..., ProcResult]:
    if inline:
        defvjp(fn, g)
        for other in also:
            defvjp(other, g)
    gg = general if general is not None else g

    def transform(x: Any) -> ProcResult:
        tx = type(x)
        if tx in _SCALAR or (_is_numeric(x) and tx is not bool and tx is not GenZero):
            r = fn(x)
            if tx in _REAL:

                def real_backprop(A: Any, Abox: Any) -> tuple:
                    if A is gen_zero:
                        return _Z1
                    return ((), g(A, r, x))

                return ProcResult(r, real_backprop)
            grad_fn = g if tx in _SCALAR else gg

            def backprop(A: Any, Abox: Any) -> tuple:
                if A is gen_zero:
                    return _Z1
                return ((), _fit(grad_fn(A, r, x), x))

            return ProcResult(r, backprop)
        if tx is GenZero or tx is bool:
            return ProcResult(fn(x), lambda A, Abox: _Z1)
        return _user_unary(fn, x)

    name = getattr(fn, "__name__", "op")
    transform.__name__ = transform.__qualname__ = f"{name}_plus"
    register_primitive(fn, transform)
    for other in also:
        register_primitive(other, transform)
    return transform


# ---------------------------------------------------------------------------
# array-safe gradients of pow and abs (also used for NumPy scalars)


def _pow_gx_general(A: Any, r: Any, x: Any, y: Any) -> Any:
    if not (_is_array_like(x) or _is_array_like(y)):
        return _pow_gx(A, r, x, y)
    np = _np()
    with np.errstate(divide="ignore", invalid="ignore"):
        yy = np.asarray(y)
        xx = np.asarray(x)
        if not (np.iscomplexobj(xx) or np.iscomplexobj(yy)):
            xx = xx.astype(float) if xx.dtype.kind in "iub" else xx
        d = yy * np.power(xx, yy - 1)
        d = np.where(yy == 0, 0.0, d)
    from .numpy_ufuncs import _times_slope  # (NumPy's rules: imported only where NumPy is used)

    return _times_slope(A, d)


def _pow_gy_general(A: Any, r: Any, x: Any, y: Any) -> Any:
    if not (_is_array_like(x) or _is_array_like(y)):
        return _pow_gy(A, r, x, y)
    np = _np()
    xx = np.asarray(x)
    rr = np.asarray(r)
    with np.errstate(divide="ignore", invalid="ignore"):
        if np.iscomplexobj(rr):
            d = rr * np.log(xx.astype(complex))
            d = np.where(xx == 0, 0.0, d)
        else:
            # (a negative base has a real power at whole exponents: the real part of
            # r * log(x), r * log|x|, as for numbers)
            d = np.where(xx != 0, rr * np.log(np.where(xx != 0, np.abs(xx), 1.0)), 0.0)
    return A * d


def _abs_general(A: Any, r: Any, x: Any) -> Any:
    if not _is_array_like(x):
        return _abs_g(A, r, x)
    np = _np()
    rr = np.asarray(r)
    safe = np.where(rr == 0, 1.0, rr)
    return A * np.where(rr == 0, 0.0, np.conj(x) / safe)


# ---------------------------------------------------------------------------
# NumPy matmul


def _matmul_transform(fn: Any, compute: Any) -> Callable[..., ProcResult]:
    def transform(x: Any, y: Any) -> ProcResult:
        if type(x) is GenZero or type(y) is GenZero:
            return ProcResult(gen_zero, lambda A, Abox: _Z2)
        if not (_is_array_like(x) or _is_array_like(y)) and not (_is_seq(x) and _is_seq(y)):
            return _user_binary(fn, x, y)
        r = compute(x, y)

        def backprop(A: Any, Abox: Any) -> tuple:
            if A is gen_zero:
                return _Z2
            from .numpy_ufuncs import _matmul_grads  # (an array operand: NumPy is there)

            gx, gy = _matmul_grads(A, x, y, is_constant(x, Abox), is_constant(y, Abox))
            return ((), _fit(gx, x), _fit(gy, y))

        return ProcResult(r, backprop)

    transform.__name__ = transform.__qualname__ = f"{fn.__name__}_plus"
    return transform


# ---------------------------------------------------------------------------
# the gradients of the number operators (the inline rules the table registers)


_ADD = (lambda A, r, x, y: A, lambda A, r, x, y: A)
_SUB = (lambda A, r, x, y: A, lambda A, r, x, y: -A)
_MUL = (lambda A, r, x, y: A * y, lambda A, r, x, y: A * x)
_DIV = (lambda A, r, x, y: A / y, lambda A, r, x, y: -A * r / y)
_MOD = (lambda A, r, x, y: A, lambda A, r, x, y: -A * (x // y))
# ``x ** y`` of real numbers is complex for a negative base and a fractional exponent;
# a real argument then takes the real part of its sensitivity (checked through ``r.imag``
# so that the common real case costs one attribute read).
_type = type
_complex = complex


def _steep(A: Any) -> float:
    """The infinite slope of ``x ** y`` (0 < y < 1) or a root at 0, as a factor of ``A``:
    ``0`` when ``A`` is 0, a power the result does not read (``0 * inf`` would be nan)."""
    return math.inf if A else 0.0


_POW = (
    lambda A, r, x, y: (
        (
            A
            * (
                y * r / x
                if x
                else (y * x ** (y - 1) if _type(y) is _complex or not 0 < y < 1 else _steep(A))
                if y
                else 0.0
            )
        ).real
        if r.imag and _type(x) is not _complex
        else A
        * (
            y * r / x
            if x
            else (y * x ** (y - 1) if _type(y) is _complex or not 0 < y < 1 else _steep(A))
            if y
            else 0.0
        )
    ),
    lambda A, r, x, y: (
        (A * (0.0 if x == 0 else r * cmath.log(x))).real
        if (r.imag or x.real < 0) and _type(y) is not _complex
        else A
        * (
            0.0
            if x == 0
            else r * cmath.log(x)
            if x.imag or y.imag or x.real < 0
            else r * math.log(x.real)
        )
    ),
)
_ABS = lambda A, r, x: A * (x.conjugate() / r if r else 0.0)
_pow_gx, _pow_gy = _POW
_abs_g = _ABS

# (its rules make the arrays they return: runtime.memory)
results_take_entries(filename=__file__)
