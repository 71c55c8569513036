"""Rules for the ``operator`` module: the functions Python's operator syntax maps to.

Covered: ``+ - * / // % ** @`` (``add sub mul truediv floordiv mod pow matmul``), unary
``- +`` (``neg pos``), ``abs`` (``operator.abs`` and the builtin ``abs``), the in-place
forms (``iadd isub imul itruediv ifloordiv imod ipow imatmul``), ``concat``/``iconcat``,
and the non-differentiable ones (comparisons, ``not_``, ``truth``, ``is_``, ``is_not``,
``contains``, bitwise operators, ``index``, ...). ``getitem``/``setitem`` and friends are
container rules and live elsewhere.

Each rule knows several kinds of operands:

* **numbers** (``int``, ``float``, ``complex``, NumPy scalars, other ``numbers.Number``):
  the rules below; ``bool`` operands get no sensitivity.
* **NumPy arrays**: the same rules written array-safely, with broadcasting undone
  (a sensitivity is summed over the broadcast axes so it has its argument's shape).
  In-place operators never change an array: ``a += b`` on a local array that nothing else
  can see (``dplus.transform.sharing``) is computed *out of place*, on a copy, and rebinds ``a``
  (``UNSHARED_IN_PLACE``); on any other array, and ``operator.iadd(a, b)`` called
  directly, they raise :class:`NonDifferentiableError`, since other references would see
  the change in Python, and an array that a backpropagator recorded must never change.
* **sequences**: ``+`` on tuples and lists (concatenation), ``*`` with an int
  (repetition), and ``+=``/``*=`` on lists (in-place extend / repeat; the list's entry in
  the box-sensitivity map is split back to its earlier layout). ``str``/``bytes``
  results (``"%s" % x``, ``"a" + "b"``) are non-differentiable.
* **user objects**: the operator's special methods (``__add__``, ``__radd__``,
  ``__iadd__``, ...) are differentiated, following Python's dispatch order.

Derivatives (``A`` is the result sensitivity, ``r`` the result):

* ``x + y``: ``A, A``; ``x - y``: ``A, -A``; ``x * y``: ``A*y, A*x``;
  ``x / y``: ``A/y, -A*r/y``.
* ``x // y``: zero almost everywhere (it is piecewise constant): non-differentiable.
* ``x % y == x - floor(x/y)*y``: ``d/dx = 1``, ``d/dy = -floor(x/y)`` (computed as
  ``-(x // y)``), exact away from the jumps at multiples of ``y``.
* ``x ** y``: ``d/dx = y * x**(y-1)`` (written ``y*r/x`` when ``x != 0``; exactly ``0``
  when ``y == 0``; ``0 ** y`` with ``0 < y < 1`` has an infinite derivative and raises
  ``ZeroDivisionError``). ``d/dy = r * log(x)`` for ``x > 0``; ``0`` for ``x == 0``
  (``0**y`` is constant for ``y > 0``); for ``x < 0`` the principal complex logarithm
  ``r * cmath.log(x)``: Python's ``**`` of a negative base is complex off the whole
  exponents (the principal branch) and real at them, so this is the derivative of the
  function Python computes, and a real exponent takes its real part (complex convention
  below): ``r * log|x|`` at a whole exponent, which finite differences of ``(x ** y).real``
  or ``abs(x ** y)`` see (autograd, JAX and PyTorch give ``nan`` there).
* ``abs(x)``: ``sign(x)`` for reals, ``0`` at ``x == 0`` (a subgradient); for complex
  ``z``, ``A * conj(z) / |z|`` (see the complex convention below).
* ``x @ y`` (NumPy): ``A @ y.T`` and ``x.T @ A`` with 1-D operands promoted as NumPy does
  and batch dimensions summed.

**Complex numbers.** A sensitivity ``c`` of a complex value ``z`` stands for the real
linear functional ``dz -> Re(c * dz)`` (the convention of JAX and autograd). So for a
holomorphic ``f``, ``A * f'(z)`` with no conjugation (``d/dz z*w = w``), and the gradient
of a real function ``L`` of ``z = x + iy`` is ``dL/dx - i dL/dy``. A non-holomorphic
``w = f(z)`` has ``c_z = A * df/dz + conj(A * df/dzbar)``: for ``abs``,
``A * conj(z) / |z|``. A real argument (int, float, real arrays) receives the real part
of its sensitivity: ``grad(lambda x: (x * 1j).real)`` is ``0``, and the gradient of a real
function of a real variable stays real even through complex intermediates.

The inline gradient lambdas (``dplus.rules.inline_rules()``) assume number operands
that are all real or complex as the primal needs; mixed real/complex calls, arrays,
sequences and objects go through the registered transforms, which handle them.

This module is the table of the operator rules; the rules are built in
:mod:`primitives.operator_builders` (with the gradients of the number operators), from
:mod:`primitives.operator_operands` (fitting sensitivities, classifying operands, user
objects' special methods) and :mod:`primitives.operator_sequences` (tuples and lists).
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.rules import defnondiff
from dplus.runtime.core import apply_transform
from dplus.runtime.hooks import hooks
from dplus.runtime.linear import gen_zero
from dplus.runtime.memory import results_take_entries
from dplus.runtime.registry import lookup_transform, register_primitive
from dplus.runtime.result import ProcResult

from .operator_builders import (
    _ABS,
    _ADD,
    _DIV,
    _MOD,
    _MUL,
    _POW,
    _SUB,
    _abs_general,
    _binary,
    _matmul_transform,
    _pow_gx_general,
    _pow_gy_general,
    _unary,
)
from .operator_operands import _SPECIAL, _np
from .operator_sequences import _concat_plus, _repeat_plus

_Z2 = ((), gen_zero, gen_zero)


# ---------------------------------------------------------------------------
# the table


def _concat(x: Any, y: Any) -> ProcResult:
    return _concat_plus(x, y, False)


def _iconcat(x: Any, y: Any) -> ProcResult:
    return _concat_plus(x, y, True)


def _repeat(x: Any, y: Any) -> ProcResult:
    return _repeat_plus(x, y, False)


def _irepeat(x: Any, y: Any) -> ProcResult:
    return _repeat_plus(x, y, True)


def _refusing_arrays(inplace_fn: Any) -> Any:
    """The in-place operator, for operands other than NumPy arrays (an array on the left is
    changed in place by ``numpy_inplace.array_inplace_plus``, which the registered transform
    calls before this is reached)."""

    def compute(x: Any, y: Any) -> Any:
        np = _np()
        if np is not None and isinstance(x, np.ndarray):
            raise NonDifferentiableError(
                f"operator.{inplace_fn.__name__} would change a {type(x).__qualname__} in place, which "
                f"dplus follows only for plain NumPy arrays; use the operator that makes a new array "
                f"(operator.{inplace_fn.__name__[1:]}, or `a = a + b`)"
            )
        return inplace_fn(x, y)

    compute.__name__ = f"{inplace_fn.__name__}_refusing_arrays"
    return compute


def unshared_in_place(inplace_fn: Any) -> Any:
    """``a op= b`` where no other reference can see ``a``'s old value (``dplus.transform.sharing``):
    the in-place operator, except that a NumPy array is replaced by a new one, computed in
    place on a copy, so NumPy's own checks (the result keeps the array's shape and dtype)
    still apply but no recorded array is changed."""

    def compute(x: Any, y: Any) -> Any:
        np = _np()
        if np is not None and isinstance(x, np.ndarray):
            return inplace_fn(x.copy(order="K"), y)  # (the same layout: reductions add up alike)
        return inplace_fn(x, y)

    compute.__name__ = f"{inplace_fn.__name__}_unshared"
    return compute


UNSHARED_IN_PLACE = {
    fn: unshared_in_place(fn)
    for fn in (
        operator.iadd,
        operator.isub,
        operator.imul,
        operator.itruediv,
        operator.ifloordiv,
        operator.imod,
        operator.ipow,
        operator.imatmul,
        operator.ilshift,
        operator.irshift,
        operator.ior,
        operator.ixor,
        operator.iand,
    )
}
"""The operation of ``a op= b`` on an unshared name, by in-place operator."""


_SPECIAL.update(
    {
        operator.add: (None, "__add__", "__radd__"),
        operator.sub: (None, "__sub__", "__rsub__"),
        operator.mul: (None, "__mul__", "__rmul__"),
        operator.truediv: (None, "__truediv__", "__rtruediv__"),
        operator.mod: (None, "__mod__", "__rmod__"),
        operator.pow: (None, "__pow__", "__rpow__"),
        operator.matmul: (None, "__matmul__", "__rmatmul__"),
        operator.iadd: ("__iadd__", "__add__", "__radd__"),
        operator.isub: ("__isub__", "__sub__", "__rsub__"),
        operator.imul: ("__imul__", "__mul__", "__rmul__"),
        operator.itruediv: ("__itruediv__", "__truediv__", "__rtruediv__"),
        operator.imod: ("__imod__", "__mod__", "__rmod__"),
        operator.ipow: ("__ipow__", "__pow__", "__rpow__"),
        operator.imatmul: ("__imatmul__", "__matmul__", "__rmatmul__"),
        operator.concat: (None, "__add__", "__radd__"),
        operator.iconcat: ("__iadd__", "__add__", "__radd__"),
        operator.neg: (None, "__neg__", None),
        operator.pos: (None, "__pos__", None),
        operator.abs: (None, "__abs__", None),
        builtins.abs: (None, "__abs__", None),
    }
)

for _fn, _unshared in UNSHARED_IN_PLACE.items():
    if _fn in _SPECIAL:
        _SPECIAL[_unshared] = _SPECIAL[_fn]

_binary(operator.add, *_ADD, seq=_concat)
_binary(operator.sub, *_SUB)
_binary(operator.mul, *_MUL, seq=_repeat)
_binary(operator.truediv, *_DIV)
_binary(operator.mod, *_MOD)
_POW_TRANSFORM = _binary(
    operator.pow, *_POW, general=(_pow_gx_general, _pow_gy_general), real_to_complex=True
)

_IN_PLACE_RULES: tuple[tuple[Callable[..., Any], Any, dict[str, Any]], ...] = (
    (operator.iadd, _ADD, dict(seq=_iconcat)),
    (operator.isub, _SUB, {}),
    (operator.imul, _MUL, dict(seq=_irepeat)),
    (operator.itruediv, _DIV, {}),
    (operator.imod, _MOD, {}),
    (operator.ipow, _POW, dict(general=(_pow_gx_general, _pow_gy_general), real_to_complex=True)),
)
for _fn, _grads, _options in _IN_PLACE_RULES:
    _binary(_fn, *_grads, compute=_refusing_arrays(_fn), **_options)
    _binary(
        UNSHARED_IN_PLACE[_fn], *_grads, compute=UNSHARED_IN_PLACE[_fn], inline=False, **_options
    )

# sequence concatenation: operator.concat / iconcat accept sequences only
register_primitive(operator.concat, lambda x, y: _concat_plus(x, y, False))
register_primitive(operator.iconcat, lambda x, y: _concat_plus(x, y, True))

register_primitive(operator.matmul, _matmul_transform(operator.matmul, operator.matmul))
for _fn, _compute in (
    (operator.imatmul, _refusing_arrays(operator.imatmul)),
    (UNSHARED_IN_PLACE[operator.imatmul], UNSHARED_IN_PLACE[operator.imatmul]),
):
    register_primitive(_fn, _matmul_transform(_fn, _compute))
    register_primitive(
        _compute, _matmul_transform(_fn, _compute)
    )  # (differentiated again at higher orders)

_unary(operator.neg, lambda A, r, x: -A)
_unary(operator.pos, lambda A, r, x: A)
_unary(operator.abs, _ABS, general=_abs_general, also=(builtins.abs,))


# ---------------------------------------------------------------------------
# piecewise constant: zero derivative everywhere it exists


def _floordiv_transform(fn: Any, compute: Any) -> Callable[..., ProcResult]:
    def transform(x: Any, y: Any) -> ProcResult:
        return ProcResult(compute(x, y), lambda A, Abox: _Z2)

    transform.__name__ = transform.__qualname__ = f"{fn.__name__}_plus"
    return transform


register_primitive(
    operator.floordiv,
    _floordiv_transform(operator.floordiv, operator.floordiv),
    note="zero almost everywhere",
)
register_primitive(
    operator.ifloordiv,
    _floordiv_transform(operator.ifloordiv, _refusing_arrays(operator.ifloordiv)),
    note="zero almost everywhere",
)
register_primitive(
    UNSHARED_IN_PLACE[operator.ifloordiv],
    _floordiv_transform(operator.ifloordiv, UNSHARED_IN_PLACE[operator.ifloordiv]),
    note="zero almost everywhere",
)

for _nondiff in (
    operator.lt, operator.le, operator.eq, operator.ne, operator.ge, operator.gt,
    operator.not_, operator.truth, operator.is_, operator.is_not, operator.contains,
    operator.index, operator.invert, operator.inv,
    operator.and_, operator.xor, operator.lshift, operator.rshift,  # (or_: a dict merge, in containers.py)
    operator.countOf, operator.indexOf, operator.length_hint,
):  # fmt: skip
    defnondiff(_nondiff)

# In-place bitwise operators: non-differentiable; on arrays they refuse as the other in-place
# operators do (``|=`` on dicts is a dict update, in containers.py).
for _fn in (operator.iand, operator.ixor, operator.ilshift, operator.irshift):
    register_primitive(
        _fn,
        defnondiff(_refusing_arrays(_fn)),
        note="non-differentiable (zero derivative); raises on a NumPy array",
    )
for _fn in (operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift):
    defnondiff(UNSHARED_IN_PLACE[_fn])


# builtins.pow(x, y[, mod]): two arguments as ``**``; three (modular, ints) non-differentiable


def _builtin_pow_transform(x: Any, y: Any, mod: Any = None) -> ProcResult:
    if mod is None:
        return apply_transform(_POW_TRANSFORM, x, y)
    r = builtins.pow(x, y, mod)
    return ProcResult(r, lambda A, Abox: ((), gen_zero, gen_zero, gen_zero))


register_primitive(builtins.pow, _builtin_pow_transform)


def _changing_arrays(fn: Any) -> None:
    """``fn``'s transform, except that a plain NumPy array on the left is changed in place
    (``a += b`` on a name that may be shared, ``operator.iadd(a, b)``)."""
    np = _np()
    if np is None:
        return
    ndarray = np.ndarray
    other = lookup_transform(fn)

    def in_place_transform(x: Any, y: Any) -> ProcResult:
        if type(x) is ndarray:
            from .numpy_inplace import array_inplace_plus

            return array_inplace_plus(fn, x, y)
        return apply_transform(other, x, y)

    in_place_transform.__name__ = in_place_transform.__qualname__ = f"{fn.__name__}_plus"
    register_primitive(
        fn, in_place_transform, note=f"operator rule: {fn.__name__} (arrays in place)"
    )


for _fn in (
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.imatmul, operator.iand, operator.ixor,
    operator.ilshift, operator.irshift,
):  # fmt: skip
    _changing_arrays(_fn)

hooks.install(unshared_in_place=UNSHARED_IN_PLACE.__getitem__)

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
