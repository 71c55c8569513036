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
  ``fmax``, ``fmin``), ``np.add.accumulate``. ``prod`` uses prefix and suffix products, exact with zeros; ``std`` and
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

NumPy is optional: without it this module registers nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    import numpy as np
except ImportError:  # dplus works without NumPy; then there is nothing to register
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.rules import defnondiff
from dplus.runtime.linear import add, gen_zero, tuple_items
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .containers import scatter_add
from .operators import _fit, _unbroadcast

__all__ = ["defgrad", "defvjp_joint", "register_numpy_rules"]

Z = gen_zero
_ndarray: Any = np.ndarray if np is not None else type(None)
_NoValue: Any = getattr(np, "_NoValue", object()) if np is not None else object()


# ---------------------------------------------------------------------------
# conforming a sensitivity to its argument


def fit(g: Any, v: Any) -> Any:
    """The sensitivity ``g`` made to conform to the argument ``v`` (see the module doc)."""
    if g is Z or g is None:
        return g
    if type(v) is _ndarray:
        if type(g) is _ndarray and g.shape == v.shape and g.dtype == v.dtype:
            return g
        if v.dtype.kind in "biu":  # integer and bool arrays are constants: no sensitivity
            return Z
    elif isinstance(v, (list, tuple)):
        if isinstance(g, (list, tuple)):  # already one sensitivity per element
            return g
        return _fit_sequence(g, v)
    return _fit(g, v)


def _fit_sequence(g: Any, v: Any) -> Any:
    """A list (tuple) sensitivity for a (nested) sequence NumPy read as an array."""
    g = np.asarray(g)
    shape = np.shape(v)
    if g.shape != shape:
        g = _unbroadcast(np, g, shape)
    if g.dtype.kind == "c" and not np.iscomplexobj(np.asarray(v)):
        g = g.real
    return _nest_like(g, v)


_PLAIN = (float, int)


def _nest_like(g: Any, v: Any) -> Any:
    if isinstance(v, list):
        if all(type(e) in _PLAIN for e in v):
            return g.tolist()
        return [_nest_like(g[i], e) for i, e in enumerate(v)]
    if isinstance(v, tuple):
        return tuple(_nest_like(g[i], e) for i, e in enumerate(v))
    if type(v) is bool or isinstance(v, np.bool_):
        return None
    if isinstance(v, _ndarray):
        return g
    if isinstance(v, np.generic):
        return g[()]
    return g.item()


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
            f"{_name(fn)}(..., out=...) writes into an existing array, and arrays are values in dplus: "
            "in-place writes inside differentiated code are not supported. Use the returned array instead"
        )


def _name(fn: Any) -> str:
    name: Any = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    return name if "." in name else f"numpy.{name}"


def _as_array_sens(A: Any, r: Any) -> Any:
    """An array result's sensitivity as an array of its shape (a number is broadcast)."""
    if type(r) is _ndarray and type(A) is not _ndarray:
        return np.full(r.shape, A)
    return A


# ---------------------------------------------------------------------------
# the rule builders


Grad = Callable[..., Any]


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
    ``out=`` raises :class:`NonDifferentiableError`. With ``coerce``, differentiable
    arguments given as lists or tuples reach the gradients as arrays (NumPy reads them so).
    """
    n = len(grads)
    kwmap = kw or {}
    for g in grads:
        if g is not None:  # transformed from source when differentiated again
            mark_derived(g, "rule", fn)
    coerced = tuple(i for i, g in enumerate(grads) if g is not None) if coerce else ()

    def general(args: tuple, kwargs: dict) -> ProcResult:
        _check_out(fn, kwargs)
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
                out = out + ((Z if g is None else fit(g(A, r, *cargs, **kwargs), args[i])),)
            if kwargs:
                ks = {}
                for k, v in kwargs.items():
                    j = kwmap.get(k)
                    g = grads[j] if j is not None else None
                    ks[k] = Z if g is None else fit(g(A, r, *cargs, **kwargs), v)
                out = out + (ks,)
            return out

        return ProcResult(r, backprop)

    mark_derived(general, "rule helper")  # differentiated from its source at second order
    if n == 1 and grads[0] is not None:
        g0 = grads[0]

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
                if coerce and (type(x) is list or type(x) is tuple):
                    return ((), fit(g0(A, r, np.asarray(x)), x))
                return ((), fit(g0(A, r, x), x))

            return ProcResult(r, backprop1)

    elif n == 2 and grads[0] is not None and grads[1] is not None:
        g0, g1 = grads[0], grads[1]

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
                return ((), fit(g0(A, r, x, y), x), fit(g1(A, r, x, y), y))

            return ProcResult(r, backprop2)

    else:

        def transform(*args: Any, **kwargs: Any) -> ProcResult:
            return general(args, kwargs)

    return _register(fn, transform, note)


def _coerce(args: tuple, positions: tuple) -> tuple:
    """``args`` with the lists and tuples at ``positions`` read as arrays."""
    for i in positions:
        if i < len(args) and isinstance(args[i], (list, tuple)):
            return tuple(
                np.asarray(a) if j in positions and isinstance(a, (list, tuple)) else a
                for j, a in enumerate(args)
            )
    return args


def defvjp_joint(fn: Any, vjp: Grad, *, note: str = "") -> Callable[..., ProcResult]:
    """Register ``fn`` from one function computing every positional sensitivity at once:
    ``vjp(A, r, *args, **kwargs) -> tuple`` (shorter than ``args``: the rest get none).
    For rules whose sensitivities share work (``dot``, ``einsum``, ``solve``, ...)."""
    mark_derived(vjp, "rule", fn)

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        if kwargs:
            _check_out(fn, kwargs)
        r = fn(*args, **kwargs)

        def backprop(A: Any, Abox: Any) -> tuple:
            if A is Z:
                return _zeros(args, kwargs)
            A = _as_array_sens(A, r)
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
    name = getattr(fn, "__name__", "fn")
    transform.__name__ = transform.__qualname__ = f"{name}_plus"
    register_primitive(fn, transform, note=note or f"numpy rule: {_name(fn)}")
    return transform


_Z1 = ((), Z)
_Z2 = ((), Z, Z)


def nondiff(*fns: Any, note: str = "non-differentiable (zero derivative)") -> None:
    for fn in fns:
        if fn is not None:
            defnondiff(fn, note=note)


def mutating(fn: Any, suggestion: str) -> None:
    """``fn`` mutates an array in place: calling it in differentiated code raises."""
    if fn is None:
        return

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        raise NonDifferentiableError(
            f"{_name(fn)} changes an array in place, and arrays are values in dplus: in-place "
            f"mutation inside differentiated code is not supported. {suggestion}"
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
# helpers shared by the gradients


def _axes(axis: Any, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(a % ndim for a in axis) if ndim else ()
    return (axis % ndim,) if ndim else ()


def _expand(A: Any, shape: tuple, axis: Any, keepdims: Any, copy: bool = True) -> Any:
    """A reduction's sensitivity spread back over the reduced axes."""
    if axis is None and not keepdims:
        if copy:
            return np.full(shape, A)
        return np.broadcast_to(A, shape)
    A = np.asarray(A)
    if not keepdims and axis is not None:
        A = np.expand_dims(A, axis)
    A = np.broadcast_to(A, shape)
    return A.copy() if copy else A


def _count(x: Any, r: Any) -> int:
    nr = np.size(r)
    return np.size(x) // nr if nr else 1


def _safe_div(a: Any, b: Any) -> Any:
    """``a / b`` with ``0`` where ``b == 0``."""
    b = np.asarray(b)
    zero = b == 0
    if not zero.any():
        return a / b
    return np.where(zero, 0.0, a / np.where(zero, 1.0, b))


def _sum_to(g: Any, shape: tuple) -> Any:
    """``g`` summed over the axes that broadcasting added or stretched to reach its shape."""
    g = np.asarray(g)
    if g.shape == tuple(shape):
        return g
    extra = g.ndim - len(shape)
    if extra > 0:
        g = np.sum(g, axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    return g


def _sign_conj(x: Any) -> Any:
    """d|x|: ``sign(x)`` for reals, ``conj(x)/|x|`` for complex numbers (``0`` at ``0``)."""
    if not np.iscomplexobj(x):
        return np.sign(x)
    ax = np.abs(x)
    return np.where(ax == 0, 0.0, np.conj(x) / np.where(ax == 0, 1.0, ax))


def _abs_grad(A, r, x):
    return A * _sign_conj(x)


def _power_gx(A, r, x, y):
    y = np.asarray(y)
    return A * y * np.power(x, np.where(y == 0, 1.0, y - 1))


def _power_gy(A, r, x, y):
    x = np.asarray(x)
    if np.iscomplexobj(x) or np.iscomplexobj(r):
        xc = x + 0j
        return A * np.where(x == 0, 0.0, r * np.log(np.where(x == 0, 1.0, xc)))
    pos = x > 0  # a negative base has a real power only at integer exponents: 0 there
    return A * np.where(pos, r * np.log(np.where(pos, x, 1.0)), 0.0)


def _matmul_grads(A: Any, x: Any, y: Any) -> tuple:
    """The sensitivities of ``x @ y`` (1-D operands promoted as NumPy does; ``fit`` sums
    the broadcast batch axes). Plain NumPy calls, so it can be differentiated again."""
    xa = np.asarray(x)
    ya = np.asarray(y)
    A = np.asarray(A)
    if xa.ndim == 1 and ya.ndim == 1:
        return A * ya, A * xa
    if xa.ndim == 1:  # (k,) @ (..., k, m) -> (..., m)
        return np.matmul(np.expand_dims(A, -2), np.swapaxes(ya, -1, -2)), np.expand_dims(
            xa, -1
        ) * np.expand_dims(A, -2)
    if ya.ndim == 1:  # (..., n, k) @ (k,) -> (..., n)
        return np.expand_dims(A, -1) * ya, np.matmul(np.expand_dims(A, -2), xa)
    return np.matmul(A, np.swapaxes(ya, -1, -2)), np.matmul(np.swapaxes(xa, -1, -2), A)


def _unsupported(what: str) -> Any:
    raise NonDifferentiableError(f"dplus has no derivative for {what}")


def _T(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


# --- reductions


def _sum_grad(A, r, x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    g = _expand(A, np.shape(x), axis, keepdims)
    return g if where is True else g * where


def _mean_grad(A, r, x, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    shape = np.shape(x)
    g = _expand(A, shape, axis, keepdims)
    if where is True:
        return g / _count(x, r)
    w = np.broadcast_to(where, shape)
    return g * w / np.maximum(np.sum(w, axis=axis, keepdims=True), 1)


def _prod_grad(A, r, x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    if where is not True:
        _unsupported("numpy.prod with where=")
    x = np.asarray(x)
    return _expand(A, x.shape, axis, keepdims, copy=False) * _prod_of_others(
        x, r, axis, keepdims, initial
    )


def _prod_of_others(x: Any, r: Any, axis: Any, keepdims: Any, initial: Any = None) -> Any:
    """For each element, the product of the other elements it was multiplied with."""
    if x.size and np.all(x != 0):
        return _expand(r, x.shape, axis, keepdims, copy=False) / x
    axes = _axes(axis, x.ndim)
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    xt = np.transpose(x, rest + axes)
    flat = xt.reshape(xt.shape[: len(rest)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.flip(
        np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], axis=-1), axis=-1), -1
    )
    others = (left * right).reshape(xt.shape)
    others = np.transpose(others, np.argsort(rest + axes))
    return others if initial is None else others * initial


def _chooser_grad(A, r, x, axis=None, out=None, keepdims=False, initial=None, where=True):
    """max/min: the sensitivity goes to the elements equal to the result, split between ties."""
    if where is not True:
        _unsupported("numpy.max/min with where=")
    x = np.asarray(x)
    mask = x == _expand(r, x.shape, axis, keepdims, copy=False)
    count = np.sum(mask, axis=axis, keepdims=True)
    return _expand(A, x.shape, axis, keepdims, copy=False) * mask / np.maximum(count, 1)


def _var_parts(x, r, axis, ddof, correction, where, mean):
    if where is not True and where is not _NoValue:
        _unsupported("numpy.var/std with where=")
    if mean is not None and mean is not _NoValue:
        _unsupported("numpy.var/std with mean= (compute it inside: the mean depends on the data)")
    if correction is not None and correction is not _NoValue:
        ddof = correction
    x = np.asarray(x)
    return x, np.conj(x - np.mean(x, axis=axis, keepdims=True)), _count(x, r) - ddof


def _var_grad(
    A,
    r,
    x,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    *,
    where=True,
    mean=None,
    correction=None,
):
    x, d, n = _var_parts(x, r, axis, ddof, correction, where, mean)
    return _expand(A, x.shape, axis, keepdims, copy=False) * d * (2.0 / n)


def _std_grad(
    A,
    r,
    x,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    *,
    where=True,
    mean=None,
    correction=None,
):
    x, d, n = _var_parts(x, r, axis, ddof, correction, where, mean)
    return _expand(_safe_div(A, r), x.shape, axis, keepdims, copy=False) * d / n


def _cumsum_grad(A, r, x, axis=None, dtype=None, out=None):
    if axis is None:
        return np.flip(np.cumsum(np.flip(np.ravel(A)))).reshape(np.shape(x))
    return np.flip(np.cumsum(np.flip(A, axis), axis), axis)


def _undiff(A: Any, axis: int) -> Any:
    """The adjoint of one ``np.diff`` along ``axis``."""
    before = [(0, 0)] * A.ndim
    after = [(0, 0)] * A.ndim
    before[axis] = (1, 0)
    after[axis] = (0, 1)
    return np.pad(A, before) - np.pad(A, after)


def _diff_full_grad(A, x, n, axis, prepend, append):
    A = np.asarray(A)
    for _ in range(n):
        A = _undiff(A, axis)
    nd = A.ndim
    p = 0 if prepend is _NoValue else (1 if np.ndim(prepend) == 0 else np.shape(prepend)[axis % nd])
    m = np.shape(x)[axis % nd]
    return A, p, m


def _diff_slice(G: Any, axis: int, start: int, stop: int | None) -> Any:
    idx = [slice(None)] * G.ndim
    idx[axis] = slice(start, stop)
    return G[tuple(idx)]


def _diff_grad(A, r, a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    G, p, m = _diff_full_grad(A, a, n, axis, prepend, append)
    return _diff_slice(G, axis, p, p + m)


def _diff_prepend_grad(A, r, a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    G, p, m = _diff_full_grad(A, a, n, axis, prepend, append)
    return _diff_slice(G, axis, 0, p).sum() if np.ndim(prepend) == 0 else _diff_slice(G, axis, 0, p)


def _diff_append_grad(A, r, a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    G, p, m = _diff_full_grad(A, a, n, axis, prepend, append)
    return (
        _diff_slice(G, axis, p + m, None).sum()
        if np.ndim(append) == 0
        else _diff_slice(G, axis, p + m, None)
    )


def _nansum_grad(
    A, r, a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True
):
    return _sum_grad(A, r, a, axis, dtype, out, keepdims, initial, where) * ~np.isnan(a)


def _nanmean_grad(A, r, a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    ok = ~np.isnan(a)
    return (
        _expand(A, np.shape(a), axis, keepdims, copy=False)
        * ok
        / np.maximum(np.sum(ok, axis=axis, keepdims=True), 1)
    )


# --- ufunc methods: np.add.reduce (a sum), np.multiply.reduce, np.maximum.reduce, ...

_REDUCE_GRADS: dict = {}


def _reduce_params(
    array, axis=0, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True
):
    return array, axis, dtype, out, keepdims, initial, where


def _ufunc_method_sens(args: tuple, kwargs: dict, sens: Any) -> tuple:
    """``((), self, *positional, {keywords})`` with ``sens`` for the array argument."""
    if args:
        out: tuple = ((), Z, sens) + (Z,) * (len(args) - 1)
    else:
        out = ((), Z)
    if kwargs:
        ks = _kw_sens(kwargs)
        if not args:
            ks["array"] = sens
        out = out + (ks,)
    return out


def _ufunc_reduce_plus(uf: Any, *args: Any, **kwargs: Any) -> ProcResult:
    array, axis, dtype, out, keepdims, initial, where = _reduce_params(*args, **kwargs)
    if out is not None:
        _check_out(uf.reduce, {"out": out})
    r = uf.reduce(*args, **kwargs)
    g = _REDUCE_GRADS.get(uf)

    def backprop(A: Any, Abox: Any) -> tuple:
        if A is Z:
            return _ufunc_method_sens(args, kwargs, Z)
        if g is None:
            raise NonDifferentiableError(f"dplus has no derivative for numpy.{uf.__name__}.reduce")
        extra = {"initial": initial} if initial is not _NoValue and uf is np.multiply else {}
        sens = g(
            _as_array_sens(A, r),
            r,
            np.asarray(array),
            axis=axis,
            keepdims=keepdims,
            where=where,
            **extra,
        )
        return _ufunc_method_sens(args, kwargs, fit(sens, array))

    return ProcResult(r, backprop)


def _accumulate_params(array, axis=0, dtype=None, out=None):
    return array, axis, dtype, out


def _ufunc_accumulate_plus(uf: Any, *args: Any, **kwargs: Any) -> ProcResult:
    array, axis, dtype, out = _accumulate_params(*args, **kwargs)
    if out is not None:
        _check_out(uf.accumulate, {"out": out})
    r = uf.accumulate(*args, **kwargs)

    def backprop(A: Any, Abox: Any) -> tuple:
        if A is Z:
            return _ufunc_method_sens(args, kwargs, Z)
        if uf is not np.add:
            raise NonDifferentiableError(
                f"dplus has no derivative for numpy.{uf.__name__}.accumulate"
            )
        sens = _cumsum_grad(_as_array_sens(A, r), r, np.asarray(array), axis)
        return _ufunc_method_sens(args, kwargs, fit(sens, array))

    return ProcResult(r, backprop)


def _flat_plus(a: Any) -> ProcResult:
    """``a.flat`` is read-only in differentiated code (writing through it would mutate ``a``)."""
    view = a.view()
    view.flags.writeable = False
    r = view.flat

    def backprop(A: Any, Abox: Any) -> tuple:
        if A is Z or A is None:
            return _Z1
        raise NonDifferentiableError(
            "dplus has no derivative through a.flat: use a.ravel() or a.reshape(-1)"
        )

    return ProcResult(r, backprop)


# --- elementwise


def _balanced(x: Any, r: Any, y: Any) -> Any:
    """1 where ``x`` is the result, 1/2 where ``x`` and ``y`` tie."""
    return (x == r) / (1.0 + (x == y))


def _clip_bounds(a_min, a_max, mn, mx):
    lo = mn if a_min is None or a_min is _NoValue else a_min
    hi = mx if a_max is None or a_max is _NoValue else a_max
    lo = None if lo is _NoValue else lo
    hi = None if hi is _NoValue else hi
    return lo, hi


def _clip_x(A, r, a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    lo, hi = _clip_bounds(a_min, a_max, min, max)
    inside = True
    if lo is not None:
        inside = np.asarray(a) >= lo
    if hi is not None:
        inside = inside & (np.asarray(a) <= hi)
    return A * inside


def _clip_lo(A, r, a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    lo, hi = _clip_bounds(a_min, a_max, min, max)
    return Z if lo is None else A * (np.asarray(a) < lo)


def _clip_hi(A, r, a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    lo, hi = _clip_bounds(a_min, a_max, min, max)
    below = np.asarray(a) < lo if lo is not None else False
    return Z if hi is None else A * ((np.asarray(a) > hi) & ~below)


def _sinc_grad(A, r, x):
    x = np.asarray(x)
    px = np.pi * np.where(x == 0, 1.0, x)
    d = (np.cos(px) - np.sinc(x)) / np.where(x == 0, 1.0, x)
    return A * np.where(x == 0, 0.0, d)


# --- products


def _dot_vjp(A, r, a, b, out=None):
    an, bn = np.ndim(a), np.ndim(b)
    if an == 0 or bn == 0:
        return A * b, A * a
    if an <= 2 and bn <= 2:
        return _matmul_grads(A, a, b)
    a = np.asarray(a)
    b = np.asarray(b)
    if bn == 1:  # np.dot(a, b)[i...] = sum_m a[i..., m] b[m]
        return np.expand_dims(A, -1) * b, np.tensordot(A, a, an - 1)
    # np.dot(a, b)[i..., j..., k] = sum_m a[i..., m] b[j..., m, k]
    ga = np.tensordot(A, np.swapaxes(b, -1, -2), bn - 1)
    gb = np.swapaxes(
        np.tensordot(A, a, [list(range(-an - bn + 2, -bn + 1)), list(range(an - 1))]), -1, -2
    )
    return ga, gb


def _matmul_vjp(A, r, x1, x2, **kw):
    return _matmul_grads(A, x1, x2)


def _tensordot_axes(axes: Any, an: int, bn: int) -> tuple[list, list]:
    if isinstance(axes, int):
        return list(range(an - axes, an)), list(range(axes))
    xa, xb = axes
    xa = [xa] if isinstance(xa, int) else list(xa)
    xb = [xb] if isinstance(xb, int) else list(xb)
    return [i % an for i in xa], [i % bn for i in xb]


def _tensordot_grads(A: Any, a: Any, b: Any, axes: Any) -> tuple:
    a = np.asarray(a)
    b = np.asarray(b)
    an, bn = a.ndim, b.ndim
    ca, cb = _tensordot_axes(axes, an, bn)
    fa = [i for i in range(an) if i not in ca]
    fb = [i for i in range(bn) if i not in cb]
    nfa, nfb = len(fa), len(fb)
    A = np.asarray(A).reshape(tuple(a.shape[i] for i in fa) + tuple(b.shape[i] for i in fb))
    # a: contract A's b-axes with b's free axes; what is left of b comes in b's axis order
    ga = np.tensordot(A, b, (list(range(nfa, nfa + nfb)), fb))
    order_b = sorted(cb)
    ga_axes = fa + [ca[cb.index(j)] for j in order_b]
    ga = np.transpose(ga, np.argsort(ga_axes))
    gb = np.tensordot(a, A, (fa, list(range(nfa))))
    order_a = sorted(ca)
    gb_axes = [cb[ca.index(i)] for i in order_a] + fb
    gb = np.transpose(gb, np.argsort(gb_axes))
    return ga, gb


def _tensordot_vjp(A, r, a, b, axes=2):
    return _tensordot_grads(A, a, b, axes)


def _inner_vjp(A, r, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return A * b, A * a
    return _tensordot_grads(A, a, b, ([np.ndim(a) - 1], [np.ndim(b) - 1]))


def _outer_vjp(A, r, a, b, out=None):
    A = np.asarray(A)
    av = np.ravel(a)
    bv = np.ravel(b)
    return (A @ bv).reshape(np.shape(a)), (av @ A).reshape(np.shape(b))


def _einsum_parse(args: tuple) -> tuple[list[str], str, list, list[int]]:
    try:
        from numpy._core.einsumfunc import _parse_einsum_input  # type: ignore[attr-defined]  # (private: not in NumPy's stubs)
    except ImportError:  # NumPy < 2
        from numpy.core.einsumfunc import _parse_einsum_input  # type: ignore[no-redef]
    ins, out_subs, ops = _parse_einsum_input(args)
    if isinstance(args[0], str):
        positions = list(range(1, len(args)))
    else:
        positions = list(range(0, len(args) - (len(args) % 2 == 1), 2))
    return ins.split(","), out_subs, list(ops), positions


def _einsum_vjp(A: Any, r: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """The sensitivity of each operand is an einsum of the result sensitivity with the others."""
    subs, out_subs, _, positions = _einsum_parse(args)
    ops = [args[p] for p in positions]
    A = np.asarray(A)
    sens: list = [Z] * len(args)
    for k, (s_k, op_k) in enumerate(zip(subs, ops)):
        op_k = np.asarray(op_k)
        if len(s_k) != op_k.ndim:
            _unsupported("this numpy.einsum (an ellipsis that broadcasts over missing dimensions)")
        others = [(s, o) for j, (s, o) in enumerate(zip(subs, ops)) if j != k]
        named = set(out_subs).union(*[set(s) for s, _ in others]) if others else set(out_subs)
        uniq = "".join(dict.fromkeys(s_k))
        dims = {c: op_k.shape[s_k.index(c)] for c in uniq}
        naked = "".join(c for c in uniq if c not in named)
        in_subs = [out_subs] + [s for s, _ in others]
        operands = [A] + [o for _, o in others]
        if naked:
            in_subs.append(naked)
            operands.append(np.ones(tuple(dims[c] for c in naked)))
        g = np.einsum(",".join(in_subs) + "->" + uniq, *operands)
        g = _sum_to(g, tuple(dims[c] for c in uniq))
        if uniq != s_k:  # repeated indices (a diagonal): the values go onto it (through
            # scatter_add rather than a write into a view, so the reverse differentiates again)
            grid = np.indices(g.shape, sparse=True)
            g = scatter_add(op_k, tuple(grid[uniq.index(c)] for c in s_k), g)
        sens[positions[k]] = g
    return tuple(sens)


# --- linear algebra


def _norm_grad(A, r, x, ord=None, axis=None, keepdims=False):
    x = np.asarray(x)
    matrix = (isinstance(axis, (tuple, list)) and len(axis) == 2) or (
        axis is None and ord is not None and x.ndim == 2
    )
    if matrix:
        ax = (0, 1) if axis is None else tuple(a % x.ndim for a in axis)
        xm = np.moveaxis(x, ax, (-2, -1))
        Am = np.reshape(A, xm.shape[:-2] + (1, 1))
        rm = np.reshape(r, xm.shape[:-2] + (1, 1))
        gm = _matrix_norm_grad(Am, rm, xm, ord)
        return np.moveaxis(gm, (-2, -1), ax)
    if axis is None:
        Ae = np.broadcast_to(A, np.shape(x)) if keepdims else A
        re = r
    else:
        Ae = _expand(A, x.shape, axis, keepdims, copy=False)
        re = _expand(r, x.shape, axis, keepdims, copy=False)
    if ord is None or ord == 2:
        return _safe_div(Ae, re) * np.conj(x)
    if ord == 1:
        return Ae * _sign_conj(x)
    if ord == np.inf or ord == -np.inf:
        ax = np.abs(x)
        mask = ax == re
        count = np.sum(mask, axis=axis, keepdims=True)
        return Ae * mask * _sign_conj(x) / np.maximum(count, 1)
    if ord == 0:
        return Z
    p = float(ord)
    ax = np.abs(x)
    return _safe_div(Ae, re ** (p - 1)) * _sign_conj(x) * ax ** (p - 1)


def _matrix_norm_grad(A, r, x, ord):
    """Matrix norms over the last two axes; ``A`` and ``r`` have shape ``batch + (1, 1)``."""
    if ord is None or ord == "fro":
        return _safe_div(A, r) * np.conj(x)
    if ord == "nuc":
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        return A * np.conj(u @ vt)
    if ord == 2 or ord == -2:
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        i = 0 if ord == 2 else -1
        return A * np.conj(
            u[..., :, i : i + 1 if i == 0 else None] @ vt[..., i : i + 1 if i == 0 else None, :]
        )
    if ord in (1, -1, np.inf, -np.inf):
        sum_axis = -2 if ord in (1, -1) else -1  # 1: column sums; inf: row sums
        sums = np.sum(np.abs(x), axis=sum_axis, keepdims=True)
        mask = sums == r
        count = np.sum(mask, axis=-1 if sum_axis == -2 else -2, keepdims=True)
        return A * mask * _sign_conj(x) / np.maximum(count, 1)
    return _unsupported(f"numpy.linalg.norm with ord={ord!r}")


def _inv_grad(A, r, a):
    rt = _T(r)
    return -(rt @ A @ rt)


def _det_grad(A, r, a):
    return np.expand_dims(np.asarray(A * r), (-2, -1)) * _T(np.linalg.inv(a))


def _slogdet_grad(A, r, a):
    parts = tuple_items(A, 2)
    Al = parts[1]
    if Al is Z or Al is None:
        return Z
    return np.asarray(Al)[..., None, None] * _T(np.linalg.inv(a))


def _solve_vjp(A, r, a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    if b.ndim == 1:
        gb = np.linalg.solve(_T(a), np.asarray(A)[..., None])[..., 0]
        ga = -gb[..., :, None] * np.asarray(r)[..., None, :]
    else:
        gb = np.linalg.solve(_T(a), A)
        ga = -(gb @ _T(r))
    return ga, gb


def _trace_grad(A, r, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    a = np.asarray(a)
    n, m = a.shape[axis1], a.shape[axis2]
    eye = np.eye(n, m, k=offset)
    g = eye.reshape(eye.shape + (1,) * (a.ndim - 2)) * np.asarray(A)  # (n, m, *rest)
    return np.moveaxis(g, (0, 1), (axis1, axis2))


def _diagonal_grad(A, r, a, offset=0, axis1=0, axis2=1):
    a = np.asarray(a)
    # np.diagonal's result: the other axes first, the diagonal last; scatter_add (rather than a
    # write into a view) keeps this reverse differentiable again
    moved = np.moveaxis(a, (axis1, axis2), (-2, -1))
    i = np.arange(np.shape(A)[-1]) if np.ndim(A) else np.arange(0)
    rows = i - min(offset, 0)
    cols = i + max(offset, 0)
    return np.moveaxis(scatter_add(moved, (Ellipsis, rows, cols), A), (-2, -1), (axis1, axis2))


def _diag_grad(A, r, v, k=0):
    v = np.asarray(v)
    if v.ndim == 1:
        return np.diagonal(A, k).copy()
    return _diagonal_grad(A, r, v, k)


# --- shapes


def _reshape_like(A, r, x, *args, **kw):
    return np.reshape(A, np.shape(x))


def _unreshape(A: Any, a: Any, order: str) -> Any:
    """The adjoint of ``np.reshape(a, r.shape, order=order)`` (and of ``np.ravel``)."""
    shape = np.shape(a)
    if order == "K":  # ravel in memory order: follow a's layout
        idx = np.empty_like(a, dtype=np.intp)
        idx[...] = np.arange(np.size(a)).reshape(shape)
        src, vals = np.ravel(idx, order="K"), np.ravel(A)
    elif order == "F" or (order == "A" and np.isfortran(np.asarray(a))):
        src = np.ravel(np.arange(np.size(a)).reshape(shape), order="F")
        vals = np.ravel(A, order="F")
    else:
        return np.reshape(A, shape)
    g = np.zeros(np.size(a), dtype=np.result_type(A, float))
    g[src] = vals
    return g.reshape(shape)


def _reshape_grad(A, r, a, shape=None, order="C", *, newshape=None, copy=None):
    return _unreshape(A, a, order)


def _reshape_method_grad(A, r, a, *shape, order="C", copy=None):
    return _unreshape(A, a, order)


def _ravel_grad(A, r, a, order="C"):
    return _unreshape(A, a, order)


def _transpose_grad(A, r, a, axes=None):
    if axes is None:
        return np.transpose(A)
    return np.transpose(A, np.argsort(axes))


def _transpose_method_grad(A, r, a, *axes):
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    return _transpose_grad(A, r, a, axes or None)


def _swapaxes_grad(A, r, a, axis1, axis2):
    return np.swapaxes(A, axis1, axis2)


def _moveaxis_grad(A, r, a, source, destination):
    return np.moveaxis(A, destination, source)


def _broadcast_to_grad(A, r, array, shape, subok=False):
    return A  # fit sums the broadcast axes


def _split_pieces(A: Any, seq: Any, axis: int) -> list:
    sizes = [np.shape(np.asarray(e))[axis] if np.ndim(e) else 1 for e in seq]
    return np.split(A, np.cumsum(sizes)[:-1], axis=axis)


def _pieces_like(pieces: list, seq: Any) -> Any:
    if isinstance(seq, _ndarray):
        return (
            np.stack([np.reshape(p, np.shape(e)) for p, e in zip(pieces, seq)])
            if len(seq)
            else np.zeros_like(seq)
        )
    out = [fit(np.reshape(p, np.shape(e)), e) for p, e in zip(pieces, seq)]
    return tuple(out) if isinstance(seq, tuple) else out


def _concatenate_grad(A, r, arrays, axis=0, out=None, dtype=None, casting=None):
    A = np.asarray(A)
    if axis is None:
        sizes = [np.size(e) for e in arrays]
        pieces = np.split(A, np.cumsum(sizes)[:-1])
        return _pieces_like(pieces, arrays)
    nd = np.ndim(arrays[0])
    return _pieces_like(_split_pieces(A, arrays, axis % nd), arrays)


def _stack_grad(A, r, arrays, axis=0, out=None, dtype=None, casting=None):
    A = np.moveaxis(np.asarray(A), axis, 0)
    return _pieces_like(list(A), arrays)


def _hstack_grad(A, r, tup, dtype=None, casting=None):
    arrs = [np.atleast_1d(e) for e in tup]
    axis = 0 if arrs and arrs[0].ndim == 1 else 1
    return _pieces_like(_split_pieces(np.asarray(A), arrs, axis), tup)


def _vstack_grad(A, r, tup, dtype=None, casting=None):
    arrs = [np.atleast_2d(e) for e in tup]
    return _pieces_like(_split_pieces(np.asarray(A), arrs, 0), tup)


def _column_stack_grad(A, r, tup):
    # as np.column_stack reads them: a 1-D array is a column, a number a 1x1 block
    arrs = [np.asarray(e) for e in tup]
    arrs = [np.transpose(np.array(e, ndmin=2)) if e.ndim < 2 else e for e in arrs]
    return _pieces_like(_split_pieces(np.asarray(A), arrs, 1), tup)


def _split_transform(fn: Any, axis_of: Callable[[Any, Any], int]) -> Callable[..., ProcResult]:
    """``split`` and friends return a list of arrays: its sensitivity is gathered from the
    box-sensitivity map and concatenated back."""

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        r = fn(*args, **kwargs)
        ary = args[0]
        axis = axis_of(args, kwargs)

        def backprop(A: Any, Abox: Any) -> tuple:
            parts = _list_result_sens(r, A, Abox)
            g = np.concatenate(parts, axis=axis) if parts else np.zeros(np.shape(ary))
            out: tuple = ((), fit(np.reshape(g, np.shape(ary)), ary)) + (Z,) * (len(args) - 1)
            if kwargs:
                out = out + (_kw_sens(kwargs),)
            return out

        return ProcResult(r, backprop)

    return _register(fn, transform, "")


def _split_axis(args: tuple, kwargs: dict) -> int:
    return kwargs.get("axis", args[2] if len(args) > 2 else 0)


def _hsplit_axis(args: tuple, kwargs: dict) -> int:
    return 1 if np.ndim(args[0]) > 1 else 0


def _flip_grad(A, r, m, axis=None):
    return np.flip(A, axis)


def _roll_grad(A, r, a, shift, axis=None):
    if isinstance(shift, (tuple, list)):
        shift = tuple(-s for s in shift)
    else:
        shift = -np.asarray(shift) if not isinstance(shift, int) else -shift
    return np.reshape(np.roll(A, shift, axis), np.shape(a))


def _tile_grad(A, r, A_in, reps):
    x = np.asarray(A_in)
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    nd = max(x.ndim, len(reps))
    xs = (1,) * (nd - x.ndim) + x.shape
    rs = (1,) * (nd - len(reps)) + reps
    g = np.reshape(A, tuple(v for pair in zip(rs, xs) for v in pair))
    return np.reshape(np.sum(g, axis=tuple(range(0, 2 * nd, 2))), x.shape)


def _repeat_grad(A, r, a, repeats, axis=None):
    x = np.asarray(a)
    A = np.asarray(A)
    if axis is None:
        flat = x.ravel()
        src = np.repeat(np.arange(flat.size), repeats)
        return scatter_add(flat, src, A).reshape(x.shape)
    axis = axis % x.ndim
    src = np.repeat(np.arange(x.shape[axis]), repeats)
    idx = [slice(None)] * x.ndim
    idx[axis] = src
    return scatter_add(x, tuple(idx), A)


def _sort_grad(A, r, a, axis=-1, kind=None, order=None, **kw):
    x = np.asarray(a)
    if axis is None:
        perm = np.argsort(x, axis=None, kind="stable")
        return np.reshape(scatter_add(np.ravel(x), perm, A), x.shape)
    perm = np.argsort(x, axis=axis, kind="stable")
    # each element back where it came from; scatter_add (not put_along_axis, which writes in
    # place) keeps this reverse differentiable again
    where = list(np.indices(x.shape, sparse=True))
    where[axis % x.ndim] = perm
    return scatter_add(x, tuple(where), A)


def _take_grad(A, r, a, indices, axis=None, out=None, mode="raise"):
    x = np.asarray(a)
    if axis is None:
        flat = x.ravel()
        return scatter_add(
            flat,
            np.ravel(indices) if np.ndim(indices) else indices,
            np.ravel(A) if np.ndim(indices) else A,
        ).reshape(x.shape)
    idx = [slice(None)] * x.ndim
    idx[axis % x.ndim] = indices
    return scatter_add(x, tuple(idx), A)


def _triu_grad(A, r, m, k=0):
    return np.triu(A, k)


def _tril_grad(A, r, m, k=0):
    return np.tril(A, k)


def _array_grad(A, r, obj, *args, **kwargs):
    if r.dtype.kind not in "fc":
        return Z
    return A


def _astype_grad(A, r, a, dtype, *args, **kwargs):
    if r.dtype.kind not in "fc":
        return Z
    return A  # fit gives it a's dtype (the real part for a real a)


def _item_grad(A, r, a, *args):
    x = np.asarray(a)
    g = np.zeros(x.shape, dtype=np.result_type(A, float))
    if not args:
        g.reshape(-1)[0] = A
    elif len(args) == 1 and not isinstance(args[0], tuple):
        g.reshape(-1)[args[0]] = A
    else:
        g[args[0] if len(args) == 1 else args] = A
    return g


def _tolist_transform(a: Any) -> ProcResult:
    r = a.tolist()

    def backprop(A: Any, Abox: Any) -> tuple:
        from dplus.runtime.core import fold

        s = fold(r, A, Abox)
        return ((), np.asarray(s, dtype=np.result_type(a.dtype, float)).reshape(a.shape))

    return ProcResult(r, backprop)


def _full_grad(A, r, shape, fill_value, *args, **kwargs):
    return np.sum(A)


def _full_like_grad(A, r, a, fill_value, *args, **kwargs):
    return np.sum(A)


def _linspace_start(A, r, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    return _linspace_part(A, r, start, stop, num, endpoint, retstep, axis, 0)


def _linspace_stop(A, r, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    return _linspace_part(A, r, start, stop, num, endpoint, retstep, axis, 1)


def _linspace_part(A, r, start, stop, num, endpoint, retstep, axis, which):
    if retstep:
        _unsupported("numpy.linspace with retstep=True")
    t = (
        np.arange(num) / ((num - 1) if endpoint else num)
        if num > (1 if endpoint else 0)
        else np.zeros(num)
    )
    w = t if which else 1.0 - t
    A = np.moveaxis(np.asarray(A), axis, 0) if np.ndim(A) > 1 else np.asarray(A)
    return np.tensordot(w, A, axes=(0, 0))


# --- random draws


def _normal_vjp(A, r, loc=0.0, scale=1.0, size=None):
    z = (np.asarray(r) - loc) / np.where(np.asarray(scale) == 0, 1.0, scale)
    return A, A * z


def _uniform_vjp(A, r, low=0.0, high=1.0, size=None):
    width = np.asarray(high) - low
    u = (np.asarray(r) - low) / np.where(width == 0, 1.0, width)
    return A * (1.0 - u), A * u


def _exponential_vjp(A, r, scale=1.0, size=None):
    return (A * np.asarray(r) / np.where(np.asarray(scale) == 0, 1.0, scale),)


def _method_vjp(vjp: Grad) -> Grad:
    """A random method's gradient: the generator (``self``) gets nothing."""

    def method(A, r, self, *args, **kwargs):
        return (Z,) + tuple(vjp(A, r, *args, **kwargs))

    return method


# ---------------------------------------------------------------------------
# the table


def _attr(obj: Any, *names: str) -> Any:
    """``obj.name`` for the first name this NumPy version has (``None`` if none)."""
    for name in names:
        v = getattr(obj, name, None)
        if v is not None:
            return v
    return None


def register_numpy_rules() -> None:
    """Register every rule of this module (done on import when NumPy is installed)."""
    from .containers import register_attribute

    nd = np.ndarray

    # -- unary ufuncs
    defgrad(np.sin, lambda A, r, x: A * np.cos(x))
    defgrad(np.cos, lambda A, r, x: -A * np.sin(x))
    defgrad(np.tan, lambda A, r, x: A * (1 + r * r))
    defgrad(np.arcsin, lambda A, r, x: A / np.sqrt((1 - x) * (1 + x)))
    defgrad(np.arccos, lambda A, r, x: -A / np.sqrt((1 - x) * (1 + x)))
    defgrad(np.arctan, lambda A, r, x: A / (1 + x * x))
    defgrad(np.sinh, lambda A, r, x: A * np.cosh(x))
    defgrad(np.cosh, lambda A, r, x: A * np.sinh(x))
    defgrad(np.tanh, lambda A, r, x: A * (1 - r * r))
    defgrad(np.arcsinh, lambda A, r, x: A / np.sqrt(x * x + 1))
    defgrad(np.arccosh, lambda A, r, x: A / np.sqrt((x - 1) * (x + 1)))
    defgrad(np.arctanh, lambda A, r, x: A / ((1 - x) * (1 + x)))
    defgrad(np.exp, lambda A, r, x: A * r)
    defgrad(np.exp2, lambda A, r, x: A * r * np.log(2.0))
    defgrad(np.expm1, lambda A, r, x: A * (r + 1))
    defgrad(np.log, lambda A, r, x: A / x)
    defgrad(np.log2, lambda A, r, x: A / (x * np.log(2.0)))
    defgrad(np.log10, lambda A, r, x: A / (x * np.log(10.0)))
    defgrad(np.log1p, lambda A, r, x: A / (1 + x))
    defgrad(np.sqrt, lambda A, r, x: A / (2 * r))
    defgrad(np.cbrt, lambda A, r, x: A / (3 * r * r))
    defgrad(np.square, lambda A, r, x: A * 2 * x)
    defgrad(np.absolute, _abs_grad)  # np.abs is np.absolute
    defgrad(np.fabs, lambda A, r, x: A * np.sign(x))
    defgrad(np.negative, lambda A, r, x: -A)
    defgrad(np.positive, lambda A, r, x: A)
    defgrad(np.reciprocal, lambda A, r, x: -A * r * r)
    defgrad(np.conjugate, lambda A, r, x: np.conj(A))  # np.conj is np.conjugate
    defgrad(np.real, lambda A, r, x: A if not np.iscomplexobj(x) else A + 0j)
    defgrad(np.imag, lambda A, r, x: Z if not np.iscomplexobj(x) else -1j * A)
    defgrad(np.deg2rad, lambda A, r, x: A * (np.pi / 180.0))
    defgrad(np.radians, lambda A, r, x: A * (np.pi / 180.0))
    defgrad(np.rad2deg, lambda A, r, x: A * (180.0 / np.pi))
    defgrad(np.degrees, lambda A, r, x: A * (180.0 / np.pi))
    defgrad(np.sinc, _sinc_grad)

    # -- binary ufuncs (fit sums the broadcast axes)
    defgrad(np.add, lambda A, r, x, y: A, lambda A, r, x, y: A)
    defgrad(np.subtract, lambda A, r, x, y: A, lambda A, r, x, y: -A)
    defgrad(np.multiply, lambda A, r, x, y: A * y, lambda A, r, x, y: A * x)
    defgrad(np.divide, lambda A, r, x, y: A / y, lambda A, r, x, y: -A * r / y)  # np.true_divide
    defgrad(np.power, _power_gx, _power_gy)
    defgrad(
        np.float_power,
        lambda A, r, x, y: _power_gx(A, r, np.asarray(x, float), y),
        lambda A, r, x, y: _power_gy(A, r, np.asarray(x, float), y),
    )
    defgrad(
        np.maximum,
        lambda A, r, x, y: A * _balanced(x, r, y),
        lambda A, r, x, y: A * _balanced(y, r, x),
    )
    defgrad(
        np.minimum,
        lambda A, r, x, y: A * _balanced(x, r, y),
        lambda A, r, x, y: A * _balanced(y, r, x),
    )
    defgrad(
        np.fmax,
        lambda A, r, x, y: A * _balanced(x, r, y),
        lambda A, r, x, y: A * _balanced(y, r, x),
    )
    defgrad(
        np.fmin,
        lambda A, r, x, y: A * _balanced(x, r, y),
        lambda A, r, x, y: A * _balanced(y, r, x),
    )
    defgrad(
        np.arctan2,
        lambda A, r, y, x: A * x / (x * x + y * y),
        lambda A, r, y, x: -A * y / (x * x + y * y),
    )
    defgrad(
        np.hypot, lambda A, r, x, y: A * _safe_div(x, r), lambda A, r, x, y: A * _safe_div(y, r)
    )
    defgrad(
        np.logaddexp, lambda A, r, x, y: A * np.exp(x - r), lambda A, r, x, y: A * np.exp(y - r)
    )
    defgrad(
        np.logaddexp2, lambda A, r, x, y: A * np.exp2(x - r), lambda A, r, x, y: A * np.exp2(y - r)
    )
    defgrad(
        np.remainder, lambda A, r, x, y: A, lambda A, r, x, y: -A * np.floor_divide(x, y)
    )  # np.mod
    defgrad(np.fmod, lambda A, r, x, y: A, lambda A, r, x, y: -A * np.trunc(np.divide(x, y)))
    defgrad(
        np.where,
        None,
        lambda A, r, c, x, y: np.where(c, A, 0.0),
        lambda A, r, c, x, y: np.where(c, 0.0, A),
    )
    defgrad(
        np.clip,
        _clip_x,
        _clip_lo,
        _clip_hi,
        kw={"a": 0, "a_min": 1, "a_max": 2, "min": 1, "max": 2},
    )
    defgrad(nd.clip, _clip_x, _clip_lo, _clip_hi, kw={"min": 1, "max": 2})

    # -- reductions (the same gradients serve the functions and the methods)
    for fns, g in (
        ((np.sum, nd.sum), _sum_grad),
        ((np.mean, nd.mean), _mean_grad),
        ((np.prod, nd.prod), _prod_grad),
        ((np.max, _attr(np, "amax"), nd.max), _chooser_grad),
        ((np.min, _attr(np, "amin"), nd.min), _chooser_grad),
        ((np.var, nd.var), _var_grad),
        ((np.std, nd.std), _std_grad),
        ((np.cumsum, nd.cumsum), _cumsum_grad),
    ):
        for fn in fns:
            if fn is not None:
                defgrad(fn, g)
    defgrad(np.nansum, _nansum_grad)
    defgrad(np.nanmean, _nanmean_grad)
    _REDUCE_GRADS.update(
        {
            np.add: _sum_grad,
            np.multiply: _prod_grad,
            np.maximum: _chooser_grad,
            np.minimum: _chooser_grad,
            np.fmax: _chooser_grad,
            np.fmin: _chooser_grad,
        }
    )
    _register(
        np.ufunc.reduce,
        _ufunc_reduce_plus,
        "numpy rule: ufunc.reduce (add, multiply, maximum, minimum)",
    )
    _register(np.ufunc.accumulate, _ufunc_accumulate_plus, "numpy rule: ufunc.accumulate (add)")
    mutating(
        np.ufunc.at, "Use np.bincount, or build the array with np.zeros and a NumPy expression"
    )
    defgrad(
        np.diff,
        _diff_grad,
        None,
        None,
        _diff_prepend_grad,
        _diff_append_grad,
        kw={"prepend": 3, "append": 4},
    )

    # -- products
    defvjp_joint(np.dot, _dot_vjp)
    defvjp_joint(nd.dot, _dot_vjp)
    defvjp_joint(np.matmul, _matmul_vjp)
    defvjp_joint(np.inner, _inner_vjp)
    defvjp_joint(np.outer, _outer_vjp)
    defvjp_joint(np.tensordot, _tensordot_vjp)
    defvjp_joint(np.einsum, _einsum_vjp)

    # -- linear algebra
    la = np.linalg
    defgrad(la.norm, _norm_grad)
    defgrad(la.inv, _inv_grad)
    defgrad(la.det, _det_grad)
    defgrad(la.slogdet, _slogdet_grad)
    defvjp_joint(la.solve, _solve_vjp)
    defgrad(np.trace, _trace_grad)
    defgrad(nd.trace, _trace_grad)
    defgrad(np.diagonal, _diagonal_grad)
    defgrad(nd.diagonal, _diagonal_grad)
    defgrad(np.diag, _diag_grad)

    # -- shapes
    defgrad(np.reshape, _reshape_grad)
    defgrad(nd.reshape, _reshape_method_grad)
    for fn in (np.ravel, nd.ravel, nd.flatten):
        defgrad(fn, _ravel_grad)
    for fn in (np.expand_dims, np.squeeze, nd.squeeze, np.atleast_1d, np.atleast_2d, np.atleast_3d):
        defgrad(fn, _reshape_like)
    defgrad(np.transpose, _transpose_grad)
    defgrad(nd.transpose, _transpose_method_grad)
    defgrad(np.swapaxes, _swapaxes_grad)
    defgrad(nd.swapaxes, _swapaxes_grad)
    defgrad(np.moveaxis, _moveaxis_grad)
    defgrad(np.broadcast_to, _broadcast_to_grad)
    defgrad(np.concatenate, _concatenate_grad, coerce=False)
    defgrad(np.stack, _stack_grad, coerce=False)
    defgrad(np.hstack, _hstack_grad, coerce=False)
    defgrad(np.vstack, _vstack_grad, coerce=False)
    defgrad(np.column_stack, _column_stack_grad, coerce=False)
    _split_transform(np.split, _split_axis)
    _split_transform(np.array_split, _split_axis)
    _split_transform(np.hsplit, _hsplit_axis)
    _split_transform(np.vsplit, lambda args, kwargs: 0)
    defgrad(np.flip, _flip_grad)
    defgrad(np.fliplr, lambda A, r, m: np.fliplr(A))
    defgrad(np.flipud, lambda A, r, m: np.flipud(A))
    defgrad(np.roll, _roll_grad)
    defgrad(np.tile, _tile_grad)
    defgrad(np.repeat, _repeat_grad)
    defgrad(nd.repeat, _repeat_grad)
    defgrad(np.sort, _sort_grad)
    defgrad(np.take, _take_grad)
    defgrad(nd.take, _take_grad)
    defgrad(np.triu, _triu_grad)
    defgrad(np.tril, _tril_grad)
    for fn in (np.array, np.asarray, np.asanyarray, np.ascontiguousarray, np.copy, nd.copy):
        defgrad(fn, _array_grad)
    defgrad(nd.astype, _astype_grad)
    defgrad(nd.item, _item_grad, coerce=False)
    register_primitive(nd.tolist, _tolist_transform, note="numpy rule: ndarray.tolist")
    defgrad(nd.conj, lambda A, r, x: np.conj(A))
    defgrad(nd.conjugate, lambda A, r, x: np.conj(A))

    # -- the same methods on NumPy scalars (np.float64(2.0).sum(), np.max(x).item(), ...)
    gen = np.generic
    scalar_method_grads: tuple[tuple[str, Callable[..., Any]], ...] = (
        ("sum", _sum_grad),
        ("mean", _mean_grad),
        ("prod", _prod_grad),
        ("max", _chooser_grad),
        ("min", _chooser_grad),
        ("var", _var_grad),
        ("std", _std_grad),
        ("cumsum", _cumsum_grad),
        ("reshape", _reshape_method_grad),
        ("ravel", _ravel_grad),
        ("flatten", _ravel_grad),
        ("squeeze", _reshape_like),
        ("transpose", _transpose_method_grad),
        ("copy", _array_grad),
        ("astype", _astype_grad),
        ("conj", lambda A, r, x: np.conj(A)),
        ("conjugate", lambda A, r, x: np.conj(A)),
        ("item", lambda A, r, x, *args: A),
        ("tolist", lambda A, r, x: A),
    )
    for name, scalar_grad in scalar_method_grads:
        fn = getattr(gen, name, None)
        if fn is not None:
            defgrad(fn, scalar_grad)
    defgrad(gen.clip, _clip_x, _clip_lo, _clip_hi, kw={"min": 1, "max": 2})
    nondiff(gen.argmax, gen.argmin, gen.argsort, gen.all, gen.any, gen.nonzero)

    # -- attributes (of arrays, and of NumPy scalars, which have the same ones)
    scalar_types = (
        np.float64,
        np.float32,
        np.float16,
        np.longdouble,
        np.complex128,
        np.complex64,
        np.clongdouble,
    )

    def attribute(name: str, grad: Grad | None, scalars: bool = False) -> None:
        def transform(a: Any) -> ProcResult:
            r = getattr(a, name)

            def backprop(A: Any, Abox: Any) -> tuple:
                if A is Z or grad is None:
                    return _Z1
                return ((), fit(grad(_as_array_sens(A, r), r, a), a))

            return ProcResult(r, backprop)

        transform.__name__ = transform.__qualname__ = f"ndarray_{name}_plus"
        mark_derived(transform, "rule helper")
        register_attribute(nd, name, transform)
        for t in scalar_types if scalars else ():
            register_attribute(t, name, transform)

    attribute("T", lambda A, r, a: np.transpose(A))
    attribute("mT", lambda A, r, a: np.swapaxes(A, -1, -2))
    attribute("real", lambda A, r, a: A if not np.iscomplexobj(a) else A + 0j, scalars=True)
    attribute("imag", lambda A, r, a: Z if not np.iscomplexobj(a) else -1j * A, scalars=True)
    for name in ("shape", "ndim", "size", "dtype", "itemsize", "nbytes", "strides", "flags"):
        attribute(name, None, scalars=True)
    register_attribute(nd, "flat", _flat_plus)

    # -- NumPy scalar types: conversions
    for t in (np.float64, np.float32, np.float16, np.longdouble, np.complex128, np.complex64):
        defgrad(t, lambda A, r, x=0.0: A)
    nondiff(
        np.int64,
        np.int32,
        np.int16,
        np.int8,
        np.uint64,
        np.uint32,
        np.uint16,
        np.uint8,
        np.bool_,
        np.intp,
        note="non-differentiable: an integer or bool conversion",
    )

    # -- constructors: differentiable in the fill value / end points only
    defgrad(np.full, None, _full_grad, kw={"fill_value": 1})
    defgrad(np.full_like, None, _full_like_grad, kw={"fill_value": 1})
    defgrad(np.linspace, _linspace_start, _linspace_stop, kw={"start": 0, "stop": 1})
    nondiff(
        np.zeros,
        np.ones,
        np.empty,
        np.zeros_like,
        np.ones_like,
        np.empty_like,
        np.eye,
        np.identity,
        np.arange,
        np.logspace,
        np.geomspace,
        np.tri,
        np.indices,
        np.diag_indices,
        np.tril_indices,
        np.triu_indices,
        note="non-differentiable: an array constructor",
    )
    # (a class whose __next__ calls next() on an itertools.product: run as it is, not from source)
    nondiff(np.ndindex, note="non-differentiable: an iterator of index tuples")
    from dplus.runtime.ops import LABEL_ITERATORS

    LABEL_ITERATORS.add(np.ndindex)

    # -- piecewise constant, integer- or bool-valued: zero sensitivity
    nondiff(
        np.sign,
        np.floor,
        np.ceil,
        np.round,
        _attr(np, "around"),
        np.rint,
        np.trunc,
        np.fix,
        np.floor_divide,
        np.heaviside,
        np.greater,
        np.greater_equal,
        np.less,
        np.less_equal,
        np.equal,
        np.not_equal,
        np.logical_and,
        np.logical_or,
        np.logical_not,
        np.logical_xor,
        np.isnan,
        np.isinf,
        np.isfinite,
        np.isneginf,
        np.isposinf,
        np.signbit,
        np.iscomplexobj,
        np.isrealobj,
        np.iscomplex,
        np.isreal,
        np.isscalar,
        np.argmax,
        np.argmin,
        np.argsort,
        np.argpartition,
        np.argwhere,
        np.nonzero,
        np.flatnonzero,
        np.count_nonzero,
        np.searchsorted,
        np.digitize,
        np.shape,
        np.ndim,
        np.size,
        np.all,
        np.any,
        np.allclose,
        np.isclose,
        np.array_equal,
        np.array_equiv,
        np.result_type,
        np.unravel_index,
        np.ravel_multi_index,
        np.bincount,
        nd.argmax,
        nd.argmin,
        nd.argsort,
        nd.nonzero,
        nd.all,
        nd.any,
    )

    # -- in place: raise
    fresh = "Build a new array instead (np.where, np.concatenate, np.sort(a), a.copy(), ...)"
    for fn in (
        nd.fill,
        nd.sort,
        nd.put,
        nd.resize,
        nd.partition,
        nd.setfield,
        _attr(nd, "itemset"),
        nd.__setitem__,
        np.copyto,
        np.put,
        np.place,
        np.putmask,
        np.fill_diagonal,
        np.put_along_axis,
    ):
        mutating(fn, fresh)
    for name in (
        "iadd",
        "isub",
        "imul",
        "itruediv",
        "ifloordiv",
        "imod",
        "ipow",
        "imatmul",
        "iand",
        "ior",
        "ixor",
        "ilshift",
        "irshift",
    ):
        mutating(
            getattr(nd, f"__{name}__", None),
            "Use the operator that makes a new array (`a = a + b`).",
        )

    # -- random draws: constants, except the location/scale of normal, uniform, exponential,
    # which get their pathwise (reparameterization) sensitivities
    rs = np.random.RandomState
    generator = np.random.Generator
    for name in (
        "random",
        "random_sample",
        "rand",
        "randn",
        "standard_normal",
        "integers",
        "randint",
        "choice",
        "permutation",
        "bytes",
        "beta",
        "binomial",
        "chisquare",
        "dirichlet",
        "f",
        "gamma",
        "geometric",
        "gumbel",
        "hypergeometric",
        "laplace",
        "logistic",
        "lognormal",
        "logseries",
        "multinomial",
        "multivariate_normal",
        "negative_binomial",
        "noncentral_chisquare",
        "noncentral_f",
        "pareto",
        "poisson",
        "power",
        "rayleigh",
        "standard_cauchy",
        "standard_exponential",
        "standard_gamma",
        "standard_t",
        "triangular",
        "vonmises",
        "wald",
        "weibull",
        "zipf",
        "seed",
    ):
        for cls in (rs, generator):
            fn = getattr(cls, name, None)
            if fn is not None:
                defnondiff(
                    fn, note="random draw: treated as a constant (no derivative in its parameters)"
                )
    for cls in (rs, generator):
        defvjp_joint(cls.normal, _method_vjp(_normal_vjp))
        defvjp_joint(cls.uniform, _method_vjp(_uniform_vjp))
        defvjp_joint(cls.exponential, _method_vjp(_exponential_vjp))
        mutating(cls.shuffle, "Use rng.permutation(a), which returns a new array")
    defnondiff(np.random.default_rng)


# ---------------------------------------------------------------------------
# derivatives of derivatives: the transforms above are differentiated again from their
# source, so what they call must be differentiable too. ``fit`` is linear in the
# sensitivity: its adjoint spreads a sensitivity back over the shape ``g`` had.


def _fit_plus(g: Any, v: Any) -> ProcResult:
    r = fit(g, v)

    def fit_backprop(A: Any, Abox: Any) -> tuple:
        if r is not g and isinstance(r, (list, tuple)):
            # a list made here keeps its sensitivity in Abox; a tuple's may be sparse (OneHot)
            from dplus.runtime.core import fold

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


def _mark_helpers() -> None:
    """Let the transformer differentiate this module's gradient functions and helpers
    (a gradient that writes into an array raises NonDifferentiableError when differentiated)."""
    for name, obj in list(globals().items()):
        if (
            callable(obj)
            and getattr(obj, "__module__", None) == __name__
            and type(obj).__name__ == "function"
        ):
            if name not in ("fit", "_fit_plus", "register_numpy_rules", "_mark_helpers"):
                mark_derived(obj, "rule helper")


if np is not None:
    register_numpy_rules()
    register_primitive(
        fit, _fit_plus, note="projection of a sensitivity onto its argument (linear)"
    )
    _mark_helpers()
