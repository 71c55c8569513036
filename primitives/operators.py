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
"""

from __future__ import annotations

import builtins
import cmath
import math
import numbers
import operator
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dplus.api import define_dplus
from dplus.errors import NonDifferentiableError
from dplus.rules import defnondiff, defvjp
from dplus.runtime.calls import refuse_array_in_place
from dplus.runtime.core import apply_transform
from dplus.runtime.hooks import hooks
from dplus.runtime.linear import GenZero, OneHot, gen_zero, tuple_items
from dplus.runtime.linear import add as _add
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

_Z1 = ((), gen_zero)
_Z2 = ((), gen_zero, gen_zero)
_REAL = frozenset((float, int))
_SCALAR = frozenset((float, int, complex))


def _np() -> Any:
    return sys.modules.get("numpy")


# ---------------------------------------------------------------------------
# fitting a computed sensitivity to its argument: real part for real arguments,
# broadcasting undone for arrays, nothing for bools and gen_zero


def _fit(g: Any, v: Any) -> Any:
    """The sensitivity ``g`` made to conform to the argument ``v``."""
    if g is gen_zero or g is None:
        return g
    tv = type(v)
    if tv is complex:
        return g
    if tv is float or tv is int:
        tg = type(g)
        if tg is float or tg is int:
            return g
        if tg is complex:
            return g.real
    return _fit_slow(g, v)


def _fit_slow(g: Any, v: Any) -> Any:
    tv = type(v)
    if tv is bool or tv is GenZero or v is None or isinstance(v, (str, bytes)):
        return gen_zero
    np = _np()
    if np is not None:
        if isinstance(v, np.bool_):
            return gen_zero
        if isinstance(v, np.ndarray):
            if v.dtype.kind in "biu":  # integer and bool arrays are constants: no sensitivity
                return gen_zero
            g = _unbroadcast(np, np.asarray(g) if not isinstance(g, np.ndarray) else g, v.shape)
            if np.iscomplexobj(g) and not np.iscomplexobj(v):
                g = g.real
            if (
                g.dtype != v.dtype and v.dtype.kind in "fc"
            ):  # a float32 array gets a float32 sensitivity
                g = g.astype(v.dtype)
            return g
        if isinstance(v, (list, tuple)) and isinstance(g, np.ndarray):
            # a nested sequence that NumPy converted: give back the same nesting
            g = _unbroadcast(np, g, np.shape(v))
            if np.iscomplexobj(g) and not np.iscomplexobj(np.asarray(v)):
                g = g.real
            out = g.tolist()
            return tuple(out) if isinstance(v, tuple) else out
        if isinstance(g, np.ndarray):  # a scalar argument broadcast against an array
            g = g.sum()
            complex_v = isinstance(v, (complex, np.complexfloating))
            if np.iscomplexobj(g) and not complex_v:
                g = g.real
            return g
        if isinstance(g, np.complexfloating) and not isinstance(v, (complex, np.complexfloating)):
            return g.real
    if isinstance(g, complex) and not isinstance(v, complex):
        return g.real
    return g


def _unbroadcast(np: Any, g: Any, shape: tuple) -> Any:
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra > 0:
        g = g.sum(axis=tuple(range(extra)))
    elif extra < 0:  # the sensitivity has fewer dimensions than the argument
        return np.broadcast_to(g, shape).copy()
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    if g.shape != shape:
        g = np.broadcast_to(g, shape).copy()
    return g


def _fit_plus(g: Any, v: Any) -> ProcResult:
    """``_fit`` is linear in ``g``: its adjoint passes ``A`` back, broadcast to ``g``'s shape
    (taking a real part or summing broadcast axes is adjoint to the embedding / broadcast).
    Registered so that backpropagators using it can themselves be differentiated."""
    r = _fit(g, v)

    def fit_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or g is gen_zero or g is None:
            return _Z2
        np = _np()
        if np is not None and isinstance(g, np.ndarray) and np.shape(A) != g.shape:
            A = np.broadcast_to(A, g.shape).copy()
        elif isinstance(A, (list, tuple)) and np is not None and isinstance(g, np.ndarray):
            A = np.asarray(A)
        return ((), A, gen_zero)

    return ProcResult(r, fit_backprop)


register_primitive(_fit, _fit_plus, note="projection of a sensitivity onto its argument (linear)")


# ---------------------------------------------------------------------------
# classifying operands


def _is_numeric(v: Any) -> bool:
    """Numbers, bools, gen_zero, NumPy arrays and scalars: the arithmetic rules apply."""
    t = type(v)
    if t in _SCALAR or t is bool or t is GenZero:
        return True
    if isinstance(v, numbers.Number):
        return True
    np = _np()
    return np is not None and isinstance(v, (np.ndarray, np.generic))


def _is_array_like(v: Any) -> bool:
    np = _np()
    return np is not None and isinstance(v, (np.ndarray, np.generic))


def _is_text(v: Any) -> bool:
    return isinstance(v, (str, bytes, bytearray))


def _is_seq(v: Any) -> bool:
    return isinstance(v, (list, tuple))


# ---------------------------------------------------------------------------
# user objects: differentiate through the special methods


_SPECIAL: dict[Any, tuple[str | None, str, str | None]] = {}

# ``a - b`` and ``a -= b`` on two sets: their rules, by operator (filled by primitives.sets)
SET_OPERATORS: dict[Any, Any] = {}


def _lift_method(m: Any) -> Callable[..., ProcResult]:
    from dplus.api import lift_dplus  # local: the API imports the rule library

    return lift_dplus(m)


def _user_binary(fn: Any, x: Any, y: Any) -> ProcResult:
    inplace, name, rname = _SPECIAL[fn]
    tx, ty = type(x), type(y)
    candidates: list[tuple[Any, Any, str, bool]] = []
    if inplace is not None:
        candidates.append((x, y, inplace, False))
    if (
        rname is not None
        and ty is not tx
        and issubclass(ty, tx)
        and getattr(ty, rname, None) is not getattr(tx, rname, None)
    ):
        candidates.append((y, x, rname, True))
        candidates.append((x, y, name, False))
    else:
        candidates.append((x, y, name, False))
        if rname is not None and ty is not tx:
            candidates.append((y, x, rname, True))
    for obj, other, meth, swapped in candidates:
        if _is_numeric(obj) or _is_seq(obj) or _is_text(obj):
            continue  # builtin operands: their part of the dispatch is covered by the rules
        m = getattr(type(obj), meth, None)
        if m is None:
            continue
        res = _lift_method(m)(obj, other)
        if res.primal is NotImplemented:
            continue
        return ProcResult(res.primal, _swap_backprop(res.backprop, swapped))
    # let Python raise its own TypeError
    r = fn(x, y)
    return ProcResult(r, lambda A, Abox: _Z2)


def _swap_backprop(inner: Callable[..., tuple], swapped: bool) -> Callable[..., tuple]:
    def backprop(A: Any, Abox: Any) -> tuple:
        out = inner(A, Abox)
        if swapped:
            return ((), out[2], out[1])
        return ((), out[1], out[2])

    return backprop


def _user_unary(fn: Any, x: Any) -> ProcResult:
    name = _SPECIAL[fn][1]
    m = getattr(type(x), name, None)
    if m is None:
        r = fn(x)  # raises Python's TypeError
        return ProcResult(r, lambda A, Abox: _Z1)
    res = _lift_method(m)(x)
    inner = res.backprop

    def backprop(A: Any, Abox: Any) -> tuple:
        out = inner(A, Abox)
        return ((), out[1])

    return ProcResult(res.primal, backprop)


# ---------------------------------------------------------------------------
# sequences: concatenation and repetition of tuples and lists


def _items(s: Any, n: int) -> list | None:
    """A tuple/list sensitivity as a list of ``n`` element sensitivities (``None``: all zero)."""
    if s is gen_zero or s is None:
        return None
    return list(tuple_items(s, n))


def _like(part: Sequence[Any], v: Any) -> Any:
    """Element sensitivities ``part`` shaped as the sensitivity of the sequence ``v``."""
    if isinstance(v, tuple):
        return tuple(part)
    if isinstance(v, list):
        return part
    if _is_text(v) or isinstance(v, range):
        return gen_zero
    if all(p is gen_zero or p is None or p == 0 for p in part):
        return gen_zero
    raise NonDifferentiableError(
        f"sensitivity reached the elements of a {type(v).__name__} used in a sequence operation; "
        "pass a list or a tuple to differentiate through its elements"
    )


def _take_list_entry(Abox: Any, r: list, n: int, A: Any, pop: bool) -> list | None:
    """The element sensitivities of list ``r`` (length ``n`` at this point), ``A`` folded in."""
    entry = Abox.pop(r) if pop else Abox.get(r)
    extra = _items(A, n)
    if entry is gen_zero or entry is None:
        return extra
    entry = list(entry)
    if len(entry) < n:
        entry.extend([gen_zero] * (n - len(entry)))
    if extra is not None:
        entry = [_add(a, b) for a, b in zip(entry, extra)]
    return entry


def _concat_plus(x: Any, y: Any, inplace: bool) -> ProcResult:
    if x is gen_zero or y is gen_zero:
        # a zero sensitivity added to a tuple's or list's (rule code differentiated again):
        # gen_zero is the identity of +, so the result is the other operand, whole
        if x is gen_zero:
            return ProcResult(y, lambda A, Abox: ((), gen_zero, A))
        return ProcResult(x, lambda A, Abox: ((), A, gen_zero))
    if inplace and isinstance(x, list):
        n = len(x)
        ys = y if isinstance(y, (list, tuple)) else list(y)
        m = len(ys)
        x += ys
        r = x

        def iadd_backprop(A: Any, Abox: Any) -> tuple:
            entry = _take_list_entry(Abox, x, n + m, A, pop=False)
            if entry is None:
                return _Z2
            Abox[x] = entry[:n]
            return ((), gen_zero, _like(entry[n : n + m], y))

        return ProcResult(r, iadd_backprop)
    r = x + y
    n, m = len(x), len(y)
    if isinstance(r, list):

        def list_concat_backprop(A: Any, Abox: Any) -> tuple:
            entry = _take_list_entry(Abox, r, n + m, A, pop=True)
            if entry is None:
                return _Z2
            return ((), _like(entry[:n], x), _like(entry[n:], y))

        return ProcResult(r, list_concat_backprop)

    def tuple_concat_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or A is None:
            return _Z2
        if type(A) is OneHot:
            if A.index < n:
                return ((), OneHot(A.index, A.value, n), gen_zero)
            return ((), gen_zero, OneHot(A.index - n, A.value, m))
        items = tuple_items(A, n + m)  # a tuple, not a list: differentiable again
        return ((), _like(items[:n], x), _like(items[n:], y))

    return ProcResult(r, tuple_concat_backprop)


def _sum_chunks(items: list, n: int, k: int) -> list:
    out = list(items[:n])
    for j in range(1, k):
        chunk = items[j * n : (j + 1) * n]
        out = [_add(a, b) for a, b in zip(out, chunk)]
    return out


def sum_tuple_chunks(items: tuple, n: int, k: int) -> tuple:
    """The sum of the ``k`` consecutive length-``n`` chunks of ``items`` (the transpose of ``* k``)."""
    return tuple(_sum_chunks(list(items), n, k))


def _sum_tuple_chunks_rule(items: tuple, n: int, k: int) -> ProcResult:
    # linear; its transpose repeats the sensitivity k times (whose transpose is this again)
    return ProcResult(
        sum_tuple_chunks(items, n, k),
        lambda A, Abox: (
            (),
            gen_zero if A is gen_zero or A is None else tuple_items(A, n) * k,
            None,
            None,
        ),
    )


register_primitive(sum_tuple_chunks, _sum_tuple_chunks_rule)


def _repeat_plus(x: Any, y: Any, inplace: bool) -> ProcResult:
    """``seq * k`` or ``k * seq`` (``seq *= k`` in place for lists)."""
    seq_first = _is_seq(x)
    seq, k = (x, y) if seq_first else (y, x)
    n = len(seq)

    def order(s_seq: Any) -> tuple:
        return ((), s_seq, gen_zero) if seq_first else ((), gen_zero, s_seq)

    if inplace and seq_first and isinstance(seq, list):
        seq *= k  # (Python checks k)
        r = seq
        kk = max(operator.index(k), 0)

        def imul_backprop(A: Any, Abox: Any) -> tuple:
            entry = _take_list_entry(Abox, seq, n * kk, A, pop=False)
            if entry is None:
                return _Z2
            Abox[seq] = _sum_chunks(entry, n, kk) if kk else [gen_zero] * n
            return _Z2

        return ProcResult(r, imul_backprop)
    r = seq * k
    kk = max(operator.index(k), 0)
    if isinstance(r, list):

        def list_repeat_backprop(A: Any, Abox: Any) -> tuple:
            entry = _take_list_entry(Abox, r, n * kk, A, pop=True)
            if entry is None or not kk:
                return _Z2
            return order(_sum_chunks(entry, n, kk))

        return ProcResult(r, list_repeat_backprop)

    def tuple_repeat_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or A is None or not kk:
            return _Z2
        return order(sum_tuple_chunks(tuple_items(A, n * kk), n, kk))

    return ProcResult(r, tuple_repeat_backprop)


# ---------------------------------------------------------------------------
# the rule builders


@define_dplus  # a helper of the transforms below: differentiable again for higher derivatives
def _numeric_binary(r: Any, gx: Any, gy: Any, x: Any, y: Any) -> ProcResult:
    def backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _Z2
        return ((), _fit(gx(A, r, x, y), x), _fit(gy(A, r, x, y), y))

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
    return A * d


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


def _matmul_grads(A: Any, x: Any, y: Any) -> tuple[Any, Any]:
    import numpy as np

    xa = np.asarray(x)
    ya = np.asarray(y)
    Aa = np.asarray(A)
    if xa.ndim == 1 and ya.ndim == 1:
        return Aa * ya, Aa * xa
    x2 = xa[None, :] if xa.ndim == 1 else xa
    y2 = ya[:, None] if ya.ndim == 1 else ya
    A2 = Aa
    if xa.ndim == 1:
        A2 = np.expand_dims(A2, -2)
    if ya.ndim == 1:
        A2 = np.expand_dims(A2, -1)
    gx = _unbroadcast(np, A2 @ np.swapaxes(y2, -1, -2), x2.shape).reshape(xa.shape)
    gy = _unbroadcast(np, np.swapaxes(x2, -1, -2) @ A2, y2.shape).reshape(ya.shape)
    return gx, gy


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
            gx, gy = _matmul_grads(A, x, y)
            return ((), _fit(gx, x), _fit(gy, y))

        return ProcResult(r, backprop)

    transform.__name__ = transform.__qualname__ = f"{fn.__name__}_plus"
    return transform


# ---------------------------------------------------------------------------
# the table


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
_POW = (
    lambda A, r, x, y: (
        (
            A
            * (
                y * r / x
                if x
                else (y * x ** (y - 1) if _type(y) is _complex or not 0 < y < 1 else math.inf)
                if y
                else 0.0
            )
        ).real
        if r.imag and _type(x) is not _complex
        else A
        * (
            y * r / x
            if x
            else (y * x ** (y - 1) if _type(y) is _complex or not 0 < y < 1 else math.inf)
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


def _concat(x: Any, y: Any) -> ProcResult:
    return _concat_plus(x, y, False)


def _iconcat(x: Any, y: Any) -> ProcResult:
    return _concat_plus(x, y, True)


def _repeat(x: Any, y: Any) -> ProcResult:
    return _repeat_plus(x, y, False)


def _irepeat(x: Any, y: Any) -> ProcResult:
    return _repeat_plus(x, y, True)


def _refusing_arrays(inplace_fn: Any) -> Any:
    """The in-place operator, except on NumPy arrays: changing an array in place is seen by
    every other reference to it (views, containers, the caller), which dplus cannot follow,
    and would change values that backpropagators recorded. So it raises, before anything
    changed. (``a op= b`` on a local array that nothing else can see is computed out of
    place instead: see :func:`unshared_in_place` and ``dplus.transform.sharing``.)"""

    def compute(x: Any, y: Any) -> Any:
        np = _np()
        if np is not None and isinstance(x, np.ndarray):
            raise NonDifferentiableError(
                f"operator.{inplace_fn.__name__} would change a NumPy array in place, which dplus does not "
                f"follow (arrays are values in dplus); use the operator that makes a new array "
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
            return inplace_fn(x.copy(), y)
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

hooks.install(unshared_in_place=UNSHARED_IN_PLACE.__getitem__)
# generated code runs this test before an in-place operator changes a shared array
defnondiff(refuse_array_in_place)
