"""Rules for the ``cmath`` module.

**Convention.** A sensitivity ``c`` of a complex value ``z`` stands for the real linear
functional ``dz -> Re(c * dz)``, as in JAX and autograd. Consequences:

* a holomorphic ``f`` has the rule ``A * f'(z)``, with no conjugation;
* the gradient of a real-valued ``L(z)``, ``z = x + iy``, is ``dL/dx - i dL/dy``
  (``grad(lambda z: abs(z) ** 2)(z) == 2 * conj(z)``); conjugate it for a descent
  direction;
* a non-holomorphic ``w = f(z)`` has ``c_z = A * df/dz + conj(A * df/dzbar)``:
  ``abs(z)`` gives ``A * conj(z) / |z|``, ``phase(z)`` gives ``-1j * A * conj(z) / |z|²``;
* a real argument receives the real part of its sensitivity, so ``cmath.sqrt(-x)`` of a
  float ``x`` has a real gradient, and a real function of real variables computed
  through complex intermediates gets its ordinary real gradient.

Holomorphic rules, derived on the principal branches ``cmath`` uses (the inverse
functions through the Kahan forms, so their derivatives agree with ``cmath`` on both
sides of the branch cuts): ``exp``: ``r``; ``log``: ``1/z`` (and with a base ``b``:
``1/(z log b)``, ``-r/(b log b)``); ``log10``: ``1/(z ln 10)``; ``sqrt``: ``1/(2r)``;
``sin``/``cos``/``tan``: ``cos z``, ``-sin z``, ``1 + r²``; ``sinh``/``cosh``/``tanh``:
``cosh z``, ``sinh z``, ``1 - r²``; ``asin``: ``1/(sqrt(1-z) sqrt(1+z))``; ``acos``: its
negative; ``atan``: ``1/(1+z²)``; ``asinh``: ``1/(sqrt(1+iz) sqrt(1-iz))``; ``acosh``:
``1/(sqrt(z-1) sqrt(z+1))``; ``atanh``: ``1/(1-z²)``.

Non-holomorphic: ``phase``, ``polar`` (``(|z|, phase z)``) and ``rect(r, phi)`` (of real
arguments: ``Re(A e^{i phi})`` and ``Re(A i r e^{i phi})``). ``isfinite``, ``isinf``,
``isnan``, ``isclose`` are non-differentiable.

The parts of a number: ``z.real`` passes ``A`` back, ``z.imag`` gives ``-1j * A``,
``z.conjugate()`` gives ``conj(A)`` (registered for ``complex``, ``float`` and ``int``;
for real numbers ``imag`` is the constant 0).

These rules are not inlined: they are rarely hot, and a real argument needs the
projection above.
"""

from __future__ import annotations

import cmath
from collections.abc import Callable
from typing import Any

from dplus.rules import defnondiff
from dplus.runtime.linear import gen_zero, tuple_items
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .operator_operands import _fit

_Z1 = ((), gen_zero)
_Z2 = ((), gen_zero, gen_zero)
_LN10 = cmath.log(10.0).real


def _holomorphic(fn: Any, deriv: Callable[[Any, Any], Any], note: str) -> None:
    """Register ``fn`` with the rule ``A * deriv(z, r)``, projected for real ``z``."""

    def transform(z: Any) -> ProcResult:
        r = fn(z)

        def backprop(A: Any, Abox: Any) -> tuple:
            if A is gen_zero:
                return _Z1
            return ((), _fit(A * deriv(z, r), z))

        return ProcResult(r, backprop)

    transform.__name__ = transform.__qualname__ = f"cmath_{fn.__name__}_plus"
    register_primitive(fn, transform, note=note)


_holomorphic(cmath.exp, lambda z, r: r, "exp z")
_holomorphic(cmath.log10, lambda z, r: 1.0 / (z * _LN10), "1/(z ln 10)")
_holomorphic(cmath.sqrt, lambda z, r: 0.5 / r, "1/(2 sqrt z)")
_holomorphic(cmath.sin, lambda z, r: cmath.cos(z), "cos z")
_holomorphic(cmath.cos, lambda z, r: -cmath.sin(z), "-sin z")
_holomorphic(cmath.tan, lambda z, r: 1.0 + r * r, "1 + tan² z")
_holomorphic(cmath.sinh, lambda z, r: cmath.cosh(z), "cosh z")
_holomorphic(cmath.cosh, lambda z, r: cmath.sinh(z), "sinh z")
_holomorphic(cmath.tanh, lambda z, r: 1.0 - r * r, "1 - tanh² z")
_holomorphic(
    cmath.asin, lambda z, r: 1.0 / (cmath.sqrt(1.0 - z) * cmath.sqrt(1.0 + z)), "1/sqrt(1 - z²)"
)
_holomorphic(
    cmath.acos, lambda z, r: -1.0 / (cmath.sqrt(1.0 - z) * cmath.sqrt(1.0 + z)), "-1/sqrt(1 - z²)"
)
_holomorphic(cmath.atan, lambda z, r: 1.0 / (1.0 + z * z), "1/(1 + z²)")
_holomorphic(
    cmath.asinh,
    lambda z, r: 1.0 / (cmath.sqrt(1.0 + 1j * z) * cmath.sqrt(1.0 - 1j * z)),
    "1/sqrt(1 + z²)",
)
_holomorphic(
    cmath.acosh, lambda z, r: 1.0 / (cmath.sqrt(z - 1.0) * cmath.sqrt(z + 1.0)), "1/sqrt(z² - 1)"
)
_holomorphic(cmath.atanh, lambda z, r: 1.0 / ((1.0 - z) * (1.0 + z)), "1/(1 - z²)")


def _log_plus(z: Any, *base: Any) -> ProcResult:
    r = cmath.log(z, *base)
    if not base:

        def log_backprop(A: Any, Abox: Any) -> tuple:
            return _Z1 if A is gen_zero else ((), _fit(A / z, z))

        return ProcResult(r, log_backprop)
    b = base[0]

    def log_base_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _Z2
        lb = cmath.log(b)
        return ((), _fit(A / (z * lb), z), _fit(-A * r / (b * lb), b))

    return ProcResult(r, log_base_backprop)


register_primitive(cmath.log, _log_plus, note="1/z; with a base b: 1/(z log b), -r/(b log b)")


# ---------------------------------------------------------------------------
# non-holomorphic


def _phase_sens(A: Any, z: Any) -> Any:
    m2 = (z * z.conjugate()).real
    if m2 == 0:
        return gen_zero
    return _fit(-1j * A * z.conjugate() / m2, z)


def _phase_plus(z: Any) -> ProcResult:
    r = cmath.phase(z)

    def phase_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _Z1
        return ((), _phase_sens(A, z))

    return ProcResult(r, phase_backprop)


def _polar_plus(z: Any) -> ProcResult:
    r = cmath.polar(z)

    def polar_backprop(A: Any, Abox: Any) -> tuple:
        a_mod, a_phase = tuple_items(A, 2)
        s: Any = gen_zero
        if a_mod is not gen_zero and r[0] != 0:
            s = _fit(a_mod * z.conjugate() / r[0], z)
        if a_phase is not gen_zero:
            p = _phase_sens(a_phase, z)
            s = p if s is gen_zero else (s if p is gen_zero else s + p)
        return ((), s)

    return ProcResult(r, polar_backprop)


def _rect_plus(m: Any, phi: Any) -> ProcResult:
    r = cmath.rect(m, phi)

    def rect_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _Z2
        e = cmath.exp(1j * phi)
        return ((), (A * e).real, (A * 1j * r).real)

    return ProcResult(r, rect_backprop)


register_primitive(
    cmath.phase, _phase_plus, note="-1j * conj(z) / |z|² (non-holomorphic; see module docs)"
)
register_primitive(
    cmath.polar, _polar_plus, note="conj(z)/|z| for the modulus, -1j conj(z)/|z|² for the phase"
)
register_primitive(cmath.rect, _rect_plus, note="Re(A e^{i phi}) and Re(A i r)")

for _fn in (cmath.isfinite, cmath.isinf, cmath.isnan, cmath.isclose):
    defnondiff(_fn)


# ---------------------------------------------------------------------------
# the parts of a number: ``z.real``, ``z.imag``, ``z.conjugate()`` (same convention:
# ``dL = Re(c dz)``, so ``real`` passes ``A``, ``imag`` gives ``-1j * A``, and the
# conjugate ``conj(A)``; for int and float, ``real`` and ``conjugate`` are the identity
# and ``imag`` the constant 0)

from .container_reads import register_attribute  # noqa: E402


def _real_part_plus(z: Any) -> ProcResult:
    r = z.real
    return ProcResult(
        r, lambda A, Abox: _Z1 if A is gen_zero else ((), A.real if isinstance(A, complex) else A)
    )


def _imag_part_plus(z: Any) -> ProcResult:
    r = z.imag
    if not isinstance(z, complex):
        return ProcResult(r, lambda A, Abox: _Z1)
    return ProcResult(
        r,
        lambda A, Abox: (
            _Z1 if A is gen_zero else ((), -1j * (A.real if isinstance(A, complex) else A))
        ),
    )


def _conjugate_plus(z: Any) -> ProcResult:
    r = z.conjugate()
    if not isinstance(z, complex):
        return ProcResult(r, lambda A, Abox: _Z1 if A is gen_zero else ((), _fit(A, z)))
    return ProcResult(r, lambda A, Abox: _Z1 if A is gen_zero else ((), A.conjugate()))


for _t in (complex, float, int):
    register_attribute(_t, "real", _real_part_plus)
    register_attribute(_t, "imag", _imag_part_plus)
    register_primitive(
        _t.conjugate, _conjugate_plus, note="conj(A) (non-holomorphic; see cmath rules)"
    )
