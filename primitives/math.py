"""Rules for the ``math`` module.

Every differentiable function of ``math`` has a rule; the piecewise-constant and
integer-valued ones (``floor ceil trunc isfinite isinf isnan isclose factorial comb
perm gcd lcm isqrt ulp``) are registered as non-differentiable, and integer arguments
(``ldexp``'s exponent, ``copysign``'s sign source, ``nextafter``'s direction) get no
sensitivity. ``math`` works on real numbers only, so every sensitivity here is real.

Derivatives (``A`` the result sensitivity, ``r`` the result), derived by hand:

=================  ==========================================================
``sin``            ``cos x``
``cos``            ``-sin x``
``tan``            ``1 + tan² x`` (``= sec² x``; written ``1 + r*r``)
``asin``/``acos``  ``±1/sqrt((1-x)(1+x))``
``atan``           ``1/(1+x²)``
``atan2(y, x)``    ``x/(x²+y²)`` for ``y``, ``-y/(x²+y²)`` for ``x``
``sinh``/``cosh``  ``cosh x`` / ``sinh x``
``tanh``           ``1 - tanh² x``
``asinh``          ``1/sqrt(x²+1)`` (``1/hypot(x, 1)``, no overflow)
``acosh``          ``1/sqrt((x-1)(x+1))``
``atanh``          ``1/((1-x)(1+x))``
``exp``/``expm1``  ``exp x`` (``r`` / ``r + 1``)
``exp2``           ``2**x ln 2``
``log(x)``         ``1/x``;  ``log(x, b) = ln x / ln b``: ``1/(x ln b)`` and ``-r/(b ln b)``
``log2``/``log10`` ``1/(x ln 2)`` / ``1/(x ln 10)``
``log1p``          ``1/(1+x)``
``sqrt``/``cbrt``  ``1/(2r)`` / ``1/(3r²)`` (``inf`` at 0, as autograd and JAX give; 0 for a 0 sensitivity)
``pow(x, y)``      ``y x**(y-1)`` and ``r ln x`` (``x > 0``; ``0`` for ``x <= 0``, where
                   ``math.pow`` is real only at integer ``y``)
``hypot(*xs)``     ``xᵢ/r`` (``0`` when ``r == 0``: a subgradient)
``dist(p, q)``     ``(pᵢ-qᵢ)/r`` and ``-(pᵢ-qᵢ)/r`` (``0`` when ``p == q``)
``erf``/``erfc``   ``±2/sqrt(pi) exp(-x²)``
``gamma``          ``Γ(x) ψ(x)`` (``ψ``: digamma, implemented below, with
                   ``polygamma`` for its own derivatives)
``lgamma``         ``ψ(x)`` (also for negative ``x``: ``d/dx ln|Γ(x)| = ψ(x)``)
``fabs``           ``sign x``, ``0`` at ``0``
``copysign(x, y)`` ``sign x · sign y`` for ``x`` (signed zeros count), nothing for ``y``
``fmod(x, y)``     ``1`` and ``-trunc(x/y)`` (``r = x - trunc(x/y) y``)
``remainder``      ``1`` and ``-n``, ``n`` the nearest integer to ``x/y``
``modf(x)``        ``1`` for the fractional part, ``0`` for the integral part
``frexp(x)``       ``2**-e`` for the mantissa, ``0`` for the exponent
``ldexp(x, i)``    ``2**i``
``nextafter``      ``1`` for ``x`` (it moves ``x`` by one ulp)
``degrees``        ``180/pi``; ``radians``: ``pi/180``
``fsum``           ``1`` for every element; ``prod``: the product of the others
                   (by prefix and suffix products, exact with zeros), ``start`` included
``sumprod(p, q)``  ``qᵢ`` and ``pᵢ`` (Python 3.12+)
=================  ==========================================================

Sequence arguments (``fsum``, ``prod``, ``dist``, ``sumprod``) get a sensitivity shaped
like them, as in the builtins rules: a list for a list, a tuple for a tuple, an array
for an array, none for a ``range``; other iterables (generators, sets, ...) are read
once, and a non-zero sensitivity reaching their elements raises
:class:`dplus.NonDifferentiableError` (pass a list instead).
"""

from __future__ import annotations

import math
import sys
from typing import Any

from dplus.rules import defnondiff, defvjp
from dplus.runtime.linear import gen_zero, tuple_items
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from ._iterables import seq as _seq
from .operator_builders import _steep
from .operator_operands import _fit

__all__ = ["digamma", "polygamma"]

# ---------------------------------------------------------------------------
# digamma, for the derivatives of gamma and lgamma


def digamma(x: float) -> float:
    """ψ(x) = Γ'(x)/Γ(x), to about 1e-15 absolute (relative away from its zero at 1.4616...).

    Reflection ψ(x) = ψ(1-x) - π/tan(πx) for negative x, the recurrence
    ψ(x) = ψ(x+1) - 1/x up to x >= 10, then the asymptotic series.
    """
    x = float(x)
    if x <= 0.0:
        if x == math.floor(x):
            return math.nan  # a pole of Γ
        t = x - round(x)  # exact; tan(πx) has period 1
        return digamma(1.0 - x) - math.pi / math.tan(math.pi * t)
    if math.isinf(x):
        return x
    if math.isnan(x):
        return x
    acc = 0.0
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    series = inv2 * (
        1.0 / 12.0
        - inv2
        * (
            1.0 / 120.0
            - inv2
            * (
                1.0 / 252.0
                - inv2
                * (1.0 / 240.0 - inv2 * (1.0 / 132.0 - inv2 * (691.0 / 32760.0 - inv2 / 12.0)))
            )
        )
    )
    return acc + math.log(x) - 0.5 * inv - series


# Bernoulli numbers B2, B4, ..., B16 for the asymptotic series of the polygamma functions
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def polygamma(n: int, x: float) -> float:
    """ψ⁽ⁿ⁾(x), the n-th derivative of digamma (n >= 0; ``polygamma(0, x) == digamma(x)``).

    The recurrence ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x+1) - (-1)ⁿ n!/x^(n+1) up to x >= 15 + 2n (it is valid
    for negative non-integer x as well), then the asymptotic series
    (-1)^(n+1) [(n-1)!/xⁿ + n!/(2x^(n+1)) + Σ B₂ₖ (2k+n-1)!/((2k)! x^(2k+n))].
    Used for the derivatives of digamma, hence for higher derivatives of gamma and lgamma.
    """
    n = int(n)
    if n < 0:
        raise ValueError("polygamma needs an order n >= 0")
    if n == 0:
        return digamma(x)
    x = float(x)
    if x <= 0.0 and x == math.floor(x):
        return math.nan
    if math.isnan(x):
        return x
    sign = -1.0 if n % 2 == 0 else 1.0  # (-1)^(n+1)
    fact_n = math.factorial(n)
    acc = 0.0
    limit = 15.0 + 2 * n
    while x < limit:
        acc += sign * fact_n / x ** (n + 1)  # -(-1)^n n!/x^(n+1)
        x += 1.0
    series = math.factorial(n - 1) / x**n + fact_n / (2.0 * x ** (n + 1))
    for k, b in enumerate(_BERNOULLI, start=1):
        series += b * math.factorial(2 * k + n - 1) / (math.factorial(2 * k) * x ** (2 * k + n))
    return acc + sign * series


_digamma = digamma
_polygamma = polygamma

# ---------------------------------------------------------------------------
# one-argument functions (inline rules: single expressions, valid for int and float)

defvjp(math.sin, lambda A, r, x: A * math.cos(x))
defvjp(math.cos, lambda A, r, x: -A * math.sin(x))
defvjp(math.tan, lambda A, r, x: A * (1.0 + r * r))
defvjp(
    math.asin,
    lambda A, r, x: (
        A / math.sqrt((1.0 - x) * (1.0 + x)) if x != 1.0 and x != -1.0 else A * math.inf
    ),
)
defvjp(
    math.acos,
    lambda A, r, x: (
        -A / math.sqrt((1.0 - x) * (1.0 + x)) if x != 1.0 and x != -1.0 else -A * math.inf
    ),
)
defvjp(math.atan, lambda A, r, x: A / (1.0 + x * x))
defvjp(math.sinh, lambda A, r, x: A * math.cosh(x))
defvjp(math.cosh, lambda A, r, x: A * math.sinh(x))
defvjp(math.tanh, lambda A, r, x: A * (1.0 - r * r))
defvjp(math.asinh, lambda A, r, x: A / math.hypot(x, 1.0))
defvjp(
    math.acosh, lambda A, r, x: A / math.sqrt((x - 1.0) * (x + 1.0)) if x != 1.0 else A * math.inf
)
defvjp(math.atanh, lambda A, r, x: A / ((1.0 - x) * (1.0 + x)))
defvjp(math.exp, lambda A, r, x: A * r)
defvjp(math.expm1, lambda A, r, x: A * (r + 1.0))
defvjp(math.log2, lambda A, r, x: A / (x * 0.6931471805599453))
defvjp(math.log10, lambda A, r, x: A / (x * 2.302585092994046))
defvjp(math.log1p, lambda A, r, x: A / (1.0 + x))
defvjp(math.sqrt, lambda A, r, x: A / (2.0 * r) if r else A * _steep(A))
defvjp(math.erf, lambda A, r, x: A * 1.1283791670955126 * math.exp(-x * x))
defvjp(math.erfc, lambda A, r, x: -A * 1.1283791670955126 * math.exp(-x * x))
defvjp(math.gamma, lambda A, r, x: A * r * _digamma(x))
defvjp(math.lgamma, lambda A, r, x: A * _digamma(x))
# the helpers themselves, so that derivatives of every order exist
defvjp(digamma, lambda A, r, x: A * _polygamma(1, x))
defvjp(polygamma, None, lambda A, r, n, x: A * _polygamma(n + 1, x))
defvjp(math.fabs, lambda A, r, x: A * (1.0 if x > 0 else -1.0 if x < 0 else 0.0))
defvjp(math.degrees, lambda A, r, x: A * 57.29577951308232)
defvjp(math.radians, lambda A, r, x: A * 0.017453292519943295)
if hasattr(math, "exp2"):
    defvjp(math.exp2, lambda A, r, x: A * r * 0.6931471805599453)
if hasattr(math, "cbrt"):
    defvjp(math.cbrt, lambda A, r, x: A / (3.0 * r * r) if r else A * _steep(A))

# ---------------------------------------------------------------------------
# two-argument functions

defvjp(
    math.atan2,
    lambda A, r, y, x: A * x / (x * x + y * y) if x or y else A * math.nan,
    lambda A, r, y, x: -A * y / (x * x + y * y) if x or y else A * math.nan,
)
defvjp(
    math.pow,
    lambda A, r, x, y: (
        A
        * (
            y * r / x
            if x
            else (y * math.pow(x, y - 1.0) if not 0 < y < 1 else _steep(A))
            if y
            else 0.0
        )
    ),
    lambda A, r, x, y: A * (r * math.log(x) if x > 0 else 0.0),
)
defvjp(math.copysign, lambda A, r, x, y: A * math.copysign(1.0, x) * math.copysign(1.0, y), None)
defvjp(math.fmod, lambda A, r, x, y: A, lambda A, r, x, y: -A * ((x - r) / y))
defvjp(math.remainder, lambda A, r, x, y: A, lambda A, r, x, y: -A * ((x - r) / y))
defvjp(math.ldexp, lambda A, r, x, i: A * math.ldexp(1.0, i), None)
defvjp(math.nextafter, lambda A, r, x, y: A, None)

# ---------------------------------------------------------------------------
# non-differentiable

for _fn in (
    math.isfinite, math.isinf, math.isnan, math.isclose,
    math.factorial, math.comb, math.perm, math.gcd, math.lcm, math.isqrt, math.ulp,
):  # fmt: skip
    defnondiff(_fn)


# ---------------------------------------------------------------------------
# helpers for tuple results and sequence arguments


def _zeros(n: int, kwargs: dict) -> tuple:
    out = ((),) + (gen_zero,) * n
    return out + ({k: gen_zero for k in kwargs},) if kwargs else out


# ---------------------------------------------------------------------------
# log(x[, base]): inline rule for the one-argument call, a full transform for both


defvjp(math.log, lambda A, r, x: A / x)  # the inline rule (arity 1) ...


def _log_plus(x: Any, *base: Any) -> ProcResult:  # ... and the transform used for every call
    r = math.log(x, *base)
    if not base:
        return ProcResult(r, lambda A, Abox: ((), gen_zero) if A is gen_zero else ((), A / x))
    b = base[0]

    def log_base_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _zeros(2, {})
        lb = math.log(b)
        return ((), A / (x * lb), -A * r / (b * lb))

    return ProcResult(r, log_base_backprop)


register_primitive(math.log, _log_plus, note="1/x; with a base b: 1/(x ln b), -log_b(x)/(b ln b)")


# ---------------------------------------------------------------------------
# variadic and sequence functions


def _hypot_plus(*xs: Any) -> ProcResult:
    r = math.hypot(*xs)

    def hypot_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or r == 0:
            return _zeros(len(xs), {})
        s = A / r
        return ((),) + tuple(s * x for x in xs)

    return ProcResult(r, hypot_backprop)


register_primitive(math.hypot, _hypot_plus, note="x_i / hypot(*xs)")


def _dist_plus(p: Any, q: Any) -> ProcResult:
    sp, sq = _seq(p, "math.dist", "p"), _seq(q, "math.dist", "q")
    ps, qs = sp.items, sq.items
    r = math.dist(ps, qs)

    def dist_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or r == 0:
            return _zeros(2, {})
        s = A / r
        d = [s * (a - b) for a, b in zip(ps, qs)]
        return ((), sp.sens(d, Abox), sq.sens([-e for e in d], Abox))

    return ProcResult(r, dist_backprop)


register_primitive(math.dist, _dist_plus, note="(p - q)/dist(p, q) and its negative")


def _fsum_plus(iterable: Any) -> ProcResult:
    sx = _seq(iterable, "math.fsum", "iterable")
    xs = sx.items
    r = math.fsum(xs)

    def fsum_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _Z1
        return ((), sx.sens([_fit(A, x) for x in xs], Abox))

    return ProcResult(r, fsum_backprop)


_Z1 = ((), gen_zero)
register_primitive(math.fsum, _fsum_plus, note="1 for every element")


def _prod_plus(iterable: Any, **kwargs: Any) -> ProcResult:
    sx = _seq(iterable, "math.prod", "iterable")
    xs = sx.items
    if set(kwargs) - {"start"}:
        math.prod(xs, **kwargs)  # raises Python's TypeError
    start = kwargs.get("start", 1)
    r = math.prod(xs, start=start)

    def prod_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _zeros(1, kwargs)
        n = len(xs)
        prefix = [start] * (n + 1)  # prefix[i] = start * x0 * ... * x(i-1)
        for i in range(n):
            prefix[i + 1] = prefix[i] * xs[i]
        sens = [gen_zero] * n
        suffix: Any = 1  # x(i+1) * ... * x(n-1)
        for i in range(n - 1, -1, -1):
            sens[i] = _fit(A * (prefix[i] * suffix), xs[i])
            suffix = xs[i] * suffix
        out: tuple[Any, ...] = ((), sx.sens(sens, Abox))
        if kwargs:
            out = out + ({"start": _fit(A * suffix, start)},)
        return out

    return ProcResult(r, prod_backprop)


register_primitive(math.prod, _prod_plus, note="the product of the other factors (start included)")


if sys.version_info >= (3, 12):  # math.sumprod

    def _sumprod_plus(p: Any, q: Any) -> ProcResult:
        sp, sq = _seq(p, "math.sumprod", "p"), _seq(q, "math.sumprod", "q")
        ps, qs = sp.items, sq.items
        r = math.sumprod(ps, qs)

        def sumprod_backprop(A: Any, Abox: Any) -> tuple:
            if A is gen_zero:
                return _zeros(2, {})
            return (
                (),
                sp.sens([_fit(A * b, a) for a, b in zip(ps, qs)], Abox),
                sq.sens([_fit(A * a, b) for a, b in zip(ps, qs)], Abox),
            )

        return ProcResult(r, sumprod_backprop)

    register_primitive(math.sumprod, _sumprod_plus, note="q_i and p_i")


# ---------------------------------------------------------------------------
# tuple results


def _modf_plus(x: Any) -> ProcResult:
    r = math.modf(x)

    def modf_backprop(A: Any, Abox: Any) -> tuple:
        a = tuple_items(A, 2)[0]
        return _Z1 if a is gen_zero else ((), a)

    return ProcResult(r, modf_backprop)


def _frexp_plus(x: Any) -> ProcResult:
    r = math.frexp(x)

    def frexp_backprop(A: Any, Abox: Any) -> tuple:
        a = tuple_items(A, 2)[0]
        return _Z1 if a is gen_zero else ((), a * math.ldexp(1.0, -r[1]))

    return ProcResult(r, frexp_backprop)


register_primitive(math.modf, _modf_plus, note="1 for the fractional part, 0 for the integral part")
register_primitive(math.frexp, _frexp_plus, note="2**-e for the mantissa")
