"""Rules for NumPy: ufuncs, reductions, linear algebra, shape functions, ndarray methods.

Arrays are *values* in dplus: the sensitivity of an array is an array of the same shape,
returned like a number's. Every rule below is one short gradient function per argument,
in the style of autograd's ``numpy_vjps``; ``A`` is the result sensitivity, ``r`` the
result, then the arguments as the call passed them (keywords included)::

    defgrad(np.sin, lambda A, r, x: A * np.cos(x))
    defgrad(np.multiply, lambda A, r, x, y: A * y, lambda A, r, x, y: A * x)

What each gradient returns is then made to *conform* to its argument: summed over the
axes NumPy broadcast (so ``x + b`` with ``b`` of shape ``(3,)`` gives ``b`` a ``(3,)``
sensitivity), reduced to its real part for a real argument, a Python-like number for a
scalar, and a list (tuple) for a list (tuple) — ``np.array([x, y])`` gives ``x`` and ``y``
their elements of the array sensitivity, nested lists included. Complex numbers follow
the convention of :mod:`primitives.operators`: the sensitivity ``c`` of ``z`` pairs with
changes as ``Re(c * dz)``, so holomorphic functions take ``A * f'(z)``, no conjugation.

Covered:

* **ufuncs**: ``sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh exp
  exp2 expm1 log log2 log10 log1p sqrt cbrt square abs/absolute fabs negative positive
  reciprocal conj/conjugate real imag deg2rad/radians rad2deg/degrees sinc``; binary
  ``add subtract multiply divide/true_divide power float_power maximum minimum fmax fmin
  arctan2 hypot logaddexp logaddexp2 mod/remainder fmod``; ``where`` and ``clip``.
  ``maximum``/``minimum`` (and ``max``/``min``) split the sensitivity equally between
  ties. ``clip`` gives ``x`` the sensitivity where ``lo <= x <= hi``, the bounds the rest.
* **reductions** (``axis``, tuple axes, ``keepdims``; ``where=`` for ``sum``/``mean``):
  ``sum mean prod max/amax min/amin var std cumsum diff nansum nanmean`` (``diff`` with
  ``prepend``/``append``), ``np.add.reduce`` (and ``multiply``, ``maximum``, ``minimum``,
  ``fmax``, ``fmin``), ``ufunc.accumulate`` of the same ufuncs. ``prod`` uses prefix and suffix products, exact with zeros; ``std`` and
  ``linalg.norm`` give ``0`` where the result is ``0`` (a subgradient, where autograd
  gives ``nan``).
* **products**: ``dot matmul inner outer tensordot einsum`` (every subscript form: implicit
  output, ``->``, ellipsis, repeated indices such as ``"ii->"``, the operand/sublist form).
* **linear algebra**: ``linalg.norm`` (vector ``ord`` None/2/1/inf/-inf/p, matrix
  None/'fro'/'nuc'/2/-2/1/-1/inf/-inf), ``linalg.inv det slogdet solve``, ``trace``,
  ``diag``, ``diagonal``.
* **shapes**: ``reshape ravel transpose swapaxes moveaxis expand_dims squeeze
  broadcast_to atleast_1d atleast_2d concatenate stack hstack vstack column_stack split
  array_split hsplit vsplit flip fliplr flipud roll tile repeat triu tril sort take``,
  ``array/asarray/asanyarray/ascontiguousarray/copy``.
* **constructors** (non-differentiable): ``zeros ones empty zeros_like ones_like
  empty_like eye identity arange``, ``logspace``, ``meshgrid`` of constants; ``full`` and
  ``full_like`` are differentiable in the fill value, ``linspace`` in ``start``/``stop``.
* **ndarray** methods ``sum mean prod max min var std cumsum dot reshape transpose ravel
  flatten copy clip astype item tolist squeeze swapaxes conj conjugate repeat take
  diagonal trace`` and attributes ``T real imag`` (``shape ndim size dtype`` carry
  nothing).
* non-differentiable (zero sensitivity): ``sign floor ceil round/around rint trunc fix
  floor_divide``, comparisons and logical functions, ``isnan isfinite isinf``,
  ``argmax argmin argsort nonzero where(cond)`` (one argument) ``shape ndim size all any
  allclose isclose array_equal count_nonzero searchsorted``, ``random`` draws.

**Mutation.** Arrays are values, so mutating one in place inside differentiated code
would change what recorded backpropagators see. Every way of doing it raises
:class:`dplus.NonDifferentiableError` with a suggestion: ``out=`` on any rule here,
``ndarray.fill sort put resize partition setfield itemset``, ``np.copyto put place putmask
fill_diagonal put_along_axis``, ``ufunc.at`` (``np.add.at``), the in-place special methods
(``a.__iadd__(b)``, ...) and the random ``shuffle``; ``a.flat`` is read-only. (``a[i] = v``
raises in the container rules; ``a += b`` rebinds ``a`` to a new array when nothing else can
see ``a`` and raises otherwise, see ``dplus.transform.sharing`` and the operator rules.)

The family's modules: this one has the rule forms (``defgrad``, ``defvjp_joint``, ``nondiff``,
``mutating``) and conforming a sensitivity to its argument (``fit``); the gradients are in
:mod:`primitives.numpy_ufuncs` (ufuncs, reductions), :mod:`primitives.numpy_products`
(products, linear algebra) and :mod:`primitives.numpy_arrays` (shapes, constructors, methods,
random draws); :mod:`primitives.numpy_table` registers them. ``numpy_shape``, ``numpy_math``
and ``numpy_linalg`` add the rules of issue #22.

**Dispatch overrides.** An argument that is not an array but whose class defines
``__array_ufunc__`` or ``__array_function__`` makes NumPy run that class's code, not the
function the rule is the derivative of: every rule registered here (``_register``, which
``defgrad``, ``defvjp_joint`` and the hand-written rules go through) refuses such a call by
name. Subclasses of ``ndarray`` are arrays, and pass.

NumPy is optional: without it this module registers nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dplus.runtime.memory import results_take_entries

try:
    import numpy as np
except ImportError:  # dplus works without NumPy; then there is nothing to register
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.rules import defnondiff
from dplus.runtime.constants import is_constant
from dplus.runtime.linear import add, gen_zero
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .numpy_fit import fit

Z = gen_zero
_ndarray: Any = np.ndarray if np is not None else type(None)
# (values that never override NumPy's dispatch: Python and NumPy numbers)
_RESULT_SCALARS = frozenset(
    {float, int, bool, complex}
    | (
        {np.float64, np.float32, np.float16, np.complex128, np.complex64, np.int64, np.bool_}
        if np is not None
        else set()
    )
)
_ufunc: Any = np.ufunc if np is not None else type(None)


# ---------------------------------------------------------------------------
# the rule builders


Grad = Callable[..., Any]


_Z1 = ((), Z)
_Z2 = ((), Z, Z)

__all__ = ["defgrad", "defvjp_joint", "mark_module_helpers"]


def _kw_sens(kwargs: dict) -> dict:
    return {k: Z for k in kwargs}


def _zeros(args: tuple, kwargs: dict) -> tuple:
    out: tuple[Any, ...] = ((),) + (Z,) * len(args)
    if kwargs:
        out = out + (_kw_sens(kwargs),)
    return out


def _check_out(fn: Any, kwargs: dict) -> None:
    if kwargs.get("out") is not None:
        raise NonDifferentiableError(
            f"{_name(fn)}(..., out=...) writes into an existing array, which dplus does not follow for "
            "this function. Use the returned array instead"
        )


def writes_into(fn: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the call ``fn(*args, **kwargs)`` writes its result into an array (``out=``)."""
    if kwargs and kwargs.get("out") is not None:
        out = kwargs["out"]
        return not (type(out) is tuple and all(o is None for o in out))
    return type(fn) is _ufunc and len(args) > fn.nin and args[fn.nin] is not None


def with_out(
    fn: Any, transform: Callable[..., ProcResult], args: tuple, kwargs: dict
) -> ProcResult:
    """``fn(*args, out=y)``: the rule ``transform`` on the arguments, ``fn`` writing into ``y``."""
    from .numpy_inplace import out_plus

    return out_plus(fn, transform, args, kwargs)


def _name(fn: Any) -> str:
    name: Any = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    return name if "." in name else f"numpy.{name}"


def _as_array_sens(A: Any, r: Any) -> Any:
    """An array result's sensitivity as an array of its shape (a number is broadcast)."""
    if type(r) is _ndarray and type(A) is not _ndarray:
        return np.full(r.shape, A)
    return A


def _refuse_dispatch_overrides(fn: Any, args: tuple, kwargs: dict) -> None:
    """Refuse a call given an argument whose class overrides NumPy's dispatch
    (``__array_ufunc__``, ``__array_function__``: a wrapper that is not an array): NumPy ran
    that class's code, which the rule does not differentiate."""
    for a in (*args, *kwargs.values()):
        while (type(a) is list or type(a) is tuple) and _overrides(a):  # the item that does
            a = next(e for e in a if _overrides(e))
        cls = type(a)
        if _overrides(a):
            name = _name(fn)
            if args and type(args[0]) is _ufunc and args[0] is not fn:  # np.add.reduce(...)
                name = f"numpy.{args[0].__name__}.{getattr(fn, '__name__', fn)}"
            raise NonDifferentiableError(
                f"{name} was given a {cls.__qualname__}, whose class takes over NumPy's "
                "dispatch (__array_ufunc__ / __array_function__): NumPy ran its code, which "
                f"dplus does not differentiate. Call what {cls.__qualname__} does with the "
                "array it holds in your own code, or register a rule for it"
            )


defnondiff(_refuse_dispatch_overrides, note="internal: refuses a NumPy dispatch override")


def defgrad(
    fn: Any,
    *grads: Grad | None,
    kw: dict[str, int] | None = None,
    coerce: bool = True,
    note: str = "",
) -> Callable[..., ProcResult]:
    """Register ``fn`` from one gradient function per positional argument.

    ``grads[i](A, r, *args, **kwargs)`` returns the sensitivity of ``args[i]`` (``None`` in a
    slot: no sensitivity); arguments past the last gradient get none. ``kw`` maps the names
    of parameters that may also be passed by keyword and are differentiable to the index
    of their gradient; other keyword arguments (``axis``, ``keepdims``, ...) get none.
    ``out=`` writes the result into the array given, in place. With ``coerce``, differentiable
    arguments given as lists or tuples reach the gradients as arrays (NumPy reads them so).
    """
    for g in grads:
        if g is not None:  # transformed from source when differentiated again
            mark_derived(g, "rule", fn)
    coerced = tuple(i for i, g in enumerate(grads) if g is not None) if coerce else ()
    rule: list = []  # the registered transform, which an out= call runs on the other arguments
    general = _general_transform(fn, grads, kw or {}, coerced, rule)
    mark_derived(general, "rule helper")  # differentiated from its source at second order
    n = len(grads)
    if n == 1 and grads[0] is not None:
        transform = _unary_transform(fn, grads[0], general, coerce)
    elif n == 2 and grads[0] is not None and grads[1] is not None:
        transform = _binary_transform(fn, grads[0], grads[1], general, coerce)
    else:
        transform = _any_call_transform(general)
    rule.append(transform)
    return _register(fn, transform, note)


def _general_transform(
    fn: Any, grads: tuple[Grad | None, ...], kwmap: dict[str, int], coerced: tuple, rule: list
) -> Callable[[tuple, dict], ProcResult]:
    """``defgrad``'s transform of any call: ``(args, kwargs)`` to the result and a backprop
    giving each argument its gradient (keywords through ``kwmap``); ``rule[0]``, the
    registered transform, is run by an ``out=`` call on the other arguments."""
    n = len(grads)

    def general(args: tuple, kwargs: dict) -> ProcResult:
        if writes_into(fn, args, kwargs):
            return with_out(fn, rule[0], args, kwargs)  # (the rule, on the other arguments)
        r = fn(*args, **kwargs)

        def backprop(A: Any, Abox: Any) -> tuple:
            if A is Z:
                return _zeros(args, kwargs)
            A = _as_array_sens(A, r)
            cargs = _coerce(args, coerced)
            out: tuple = ((),)
            for i in range(
                len(args)
            ):  # (a range: enumerate's reverse is not differentiable at order 3)
                g = grads[i] if i < n else None
                if g is None or is_constant(args[i], Abox):
                    out = out + (Z,)
                else:
                    out = out + (fit(g(A, r, *cargs, **kwargs), args[i]),)
            if kwargs:
                ks = {}
                for k, v in kwargs.items():
                    j = kwmap.get(k)
                    g = grads[j] if j is not None else None
                    ks[k] = Z if g is None else fit(g(A, r, *cargs, **kwargs), v)
                out = out + (ks,)
            return out

        return ProcResult(r, backprop)

    return general


def _unary_transform(
    fn: Any, g0: Grad, general: Callable[[tuple, dict], ProcResult], coerce: bool
) -> Callable[..., ProcResult]:
    """``defgrad``'s transform of a function of one argument: a call of one positional
    argument without the general steps."""

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        if kwargs or len(args) != 1:
            return general(args, kwargs)
        x = args[0]
        r = fn(x)

        def backprop1(A: Any, Abox: Any) -> tuple:
            if A is Z:
                return _Z1
            if type(r) is _ndarray and type(A) is not _ndarray:
                A = np.full(r.shape, A)
            if is_constant(x, Abox):
                return _Z1
            if coerce and (type(x) is list or type(x) is tuple):
                return ((), fit(g0(A, r, np.asarray(x)), x))
            return ((), fit(g0(A, r, x), x))

        return ProcResult(r, backprop1)

    return transform


def _binary_transform(
    fn: Any, g0: Grad, g1: Grad, general: Callable[[tuple, dict], ProcResult], coerce: bool
) -> Callable[..., ProcResult]:
    """``defgrad``'s transform of a function of two arguments: a call of two positional
    arguments without the general steps."""

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        if kwargs or len(args) != 2:
            return general(args, kwargs)
        x, y = args
        r = fn(x, y)

        def backprop2(A: Any, Abox: Any) -> tuple:
            if A is Z:
                return _Z2
            if type(r) is _ndarray and type(A) is not _ndarray:
                A = np.full(r.shape, A)
            if coerce and (
                type(x) is list or type(x) is tuple or type(y) is list or type(y) is tuple
            ):
                xa, ya = _coerce((x, y), (0, 1))
                return ((), fit(g0(A, r, xa, ya), x), fit(g1(A, r, xa, ya), y))
            return (
                (),
                Z if is_constant(x, Abox) else fit(g0(A, r, x, y), x),
                Z if is_constant(y, Abox) else fit(g1(A, r, x, y), y),
            )

        return ProcResult(r, backprop2)

    return transform


def _any_call_transform(general: Callable[[tuple, dict], ProcResult]) -> Callable[..., ProcResult]:
    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        return general(args, kwargs)

    return transform


def _constants_among(args: tuple, Abox: Any) -> tuple[bool, ...]:
    return tuple([is_constant(a, Abox) for a in args])


defnondiff(_constants_among)


def _coerce(args: tuple, positions: tuple) -> tuple:
    """``args`` with the lists and tuples at ``positions`` read as arrays."""
    for i in positions:
        if i < len(args) and isinstance(args[i], (list, tuple)):
            return tuple(
                np.asarray(a) if j in positions and isinstance(a, (list, tuple)) else a
                for j, a in enumerate(args)
            )
    return args


def defvjp_joint(
    fn: Any, vjp: Grad, *, note: str = "", skips: bool = False
) -> Callable[..., ProcResult]:
    """Register ``fn`` from one function computing every positional sensitivity at once:
    ``vjp(A, r, *args, **kwargs) -> tuple`` (shorter than ``args``: the rest get none).
    For rules whose sensitivities share work (``dot``, ``einsum``, ``solve``, ...).
    ``skips``: ``vjp`` also takes ``constant=``, a bool per positional argument, true for
    the constants of the pass (:mod:`dplus.runtime.constants`), whose sensitivities it
    need not compute."""
    mark_derived(vjp, "rule", fn)

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        if writes_into(fn, args, kwargs):
            return with_out(fn, transform, args, kwargs)
        r = fn(*args, **kwargs)

        def backprop(A: Any, Abox: Any) -> tuple:
            if A is Z:
                return _zeros(args, kwargs)
            A = _as_array_sens(A, r)
            if skips:
                gs = vjp(A, r, *args, constant=_constants_among(args, Abox), **kwargs)
            else:
                gs = vjp(A, r, *args, **kwargs)
            out: tuple = ((),)
            for i in range(
                len(args)
            ):  # (a range: enumerate's reverse is not differentiable at order 3)
                out = out + ((fit(gs[i], args[i]) if i < len(gs) else Z),)
            if kwargs:
                out = out + (_kw_sens(kwargs),)
            return out

        return ProcResult(r, backprop)

    return _register(fn, transform, note)


def _register(
    fn: Any, transform: Callable[..., ProcResult], note: str
) -> Callable[..., ProcResult]:
    """Register ``transform`` as ``fn``'s rule, behind the one check every NumPy rule needs:
    an argument whose class takes over NumPy's dispatch is refused (see ``_overridden``)."""
    name = getattr(fn, "__name__", "fn")
    transform.__name__ = transform.__qualname__ = f"{name}_rule"

    def checked(*args: Any, **kwargs: Any) -> ProcResult:
        if _overridden(args, kwargs):
            _refuse_dispatch_overrides(fn, args, kwargs)
        return transform(*args, **kwargs)

    mark_derived(checked, "rule helper")  # differentiated from its source at second order
    checked.__name__ = checked.__qualname__ = f"{name}_plus"
    checked.__dplus_checked_rule__ = transform  # type: ignore[attr-defined]  # (docs/gen_primitives.py)
    register_primitive(fn, checked, note=note or f"numpy rule: {_name(fn)}")
    return checked


def _overrides(a: Any) -> bool:
    cls = type(a)
    if cls is _ndarray or cls in _RESULT_SCALARS or a is None or isinstance(a, _ndarray):
        return False
    if cls is list or cls is tuple:
        return any(_overrides(e) for e in a)
    # (``__array_ufunc__ = None`` opts out of ufuncs, which then raise: no code of the class runs)
    return getattr(cls, "__array_ufunc__", None) is not None or hasattr(cls, "__array_function__")


def _overridden(args: tuple, kwargs: dict) -> bool:
    """Whether an argument (or an item of a list or tuple argument) is not an array but its
    class defines ``__array_ufunc__``/``__array_function__``: NumPy then runs that class's
    code instead of the function the rule is the derivative of, whatever the result is (a
    wrapper that returns an array or a number would otherwise get a wrong derivative)."""
    for a in args:
        if _overrides(a):
            return True
    for a in kwargs.values():
        if _overrides(a):
            return True
    return False


defnondiff(_overridden, note="internal: tests for a NumPy dispatch override")


def nondiff(*fns: Any, note: str = "non-differentiable (zero derivative)") -> None:
    for fn in fns:
        if fn is not None:
            defnondiff(fn, note=note)


def mutating(fn: Any, suggestion: str) -> None:
    """``fn`` mutates an array in place in a way dplus does not differentiate: calling it in
    differentiated code raises (the in-place writes dplus follows are in
    :mod:`primitives.numpy_inplace`, registered after these)."""
    if fn is None:
        return

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        raise NonDifferentiableError(
            f"{_name(fn)} changes an array in place in a way dplus does not differentiate. "
            f"{suggestion}"
        )

    _register(fn, transform, "raises: in-place mutation of an array")


def _list_result_sens(r: list, A: Any, Abox: Any) -> list:
    """The element sensitivities of a list result (``A`` plus its box-sensitivity entry)."""
    n = len(r)
    items = [Z] * n
    if A is not Z and A is not None:
        parts = (
            A.to_list() if hasattr(A, "to_list") else (A.items if hasattr(A, "add_in_place") else A)
        )
        items = [add(a, b) for a, b in zip(items, parts)]
    entry: Any = Abox.pop(r, Z) if Abox is not None else Z
    if entry is not Z and entry is not None:
        items = [add(a, b) for a, b in zip(items, entry)]
    return [
        np.zeros_like(e, dtype=np.result_type(e, float)) if s is Z or s is None else s
        for s, e in zip(items, r)
    ]


# ---------------------------------------------------------------------------
# derivatives of derivatives: the transforms above are differentiated again from their
# source, so what they call must be differentiable too. ``fit`` is linear in the
# sensitivity: its adjoint spreads a sensitivity back over the shape ``g`` had.


def _fit_plus(g: Any, v: Any) -> ProcResult:
    r = fit(g, v)

    def fit_backprop(A: Any, Abox: Any) -> tuple:
        if r is not g and isinstance(r, (list, tuple)):
            # a list made here keeps its sensitivity in Abox; a tuple's may be sparse (OneHot)
            from dplus.runtime.fold import fold

            A = fold(r, A, Abox)
        if A is Z or A is None or g is Z or g is None:
            return _Z2
        if isinstance(g, (list, tuple)):  # fit passed it through: one sensitivity per element
            return ((), A, Z)
        if isinstance(A, (list, tuple)):
            A = np.asarray(A)
        if np.ndim(g) != np.ndim(A) or np.shape(g) != np.shape(A):
            A = np.broadcast_to(A, np.shape(g)).copy()
        return ((), A, Z)

    return ProcResult(r, fit_backprop)


def mark_module_helpers(namespace: dict[str, Any], *keep: str) -> None:
    """Let the transformer differentiate the gradient functions and helpers a module of NumPy
    rules defines (its ``globals()``), all but ``keep`` (a gradient that writes into an array
    raises NonDifferentiableError when differentiated). Done once the rules are registered
    (by :mod:`primitives.numpy_table`): the mark replaces the one ``defgrad`` gave."""
    for name, obj in list(namespace.items()):
        if (
            callable(obj)
            and getattr(obj, "__module__", None) == namespace["__name__"]
            and type(obj).__name__ == "function"
        ):
            if name not in keep:
                mark_derived(obj, "rule helper")


if np is not None:
    register_primitive(
        fit, _fit_plus, note="projection of a sensitivity onto its argument (linear)"
    )

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
