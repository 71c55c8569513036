"""The linear interface: sensitivities as elements of a vector space.

``gen_zero`` is one value standing for the zero of every type, so that code
never builds zeros it will not use. It behaves as an additive identity and a
multiplicative annihilator under Python's arithmetic operators, which keeps
derivative rules short: ``A * cos(x)`` is ``gen_zero`` when ``A`` is.

New sensitivity types join through :func:`register_linear_type` (built on
``functools.singledispatch``), never by editing this module.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch
from typing import Any

from ..errors import SensitivityError
from .kinds import _NUMBER_TYPES, _numpy, is_atom, is_ndarray, is_number
from .result import ProcResult

__all__ = [
    "gen_zero",
    "GenZero",
    "add",
    "scale",
    "dot",
    "zero",
    "coerce_zero",
    "register_linear_type",
    "OneHot",
    "TupleAccumulator",
]


class GenZero:
    """The generic zero. There is exactly one instance: :data:`gen_zero`."""

    __slots__ = ()
    __array_ufunc__ = None  # make NumPy defer to our reflected operators
    _instance: GenZero | None = None

    def __new__(cls) -> GenZero:
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "gen_zero"

    def __reduce__(self) -> str:
        return "gen_zero"

    def __bool__(self) -> bool:
        return False

    def __add__(self, other: Any) -> Any:
        return other

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return -other

    def __rsub__(self, other: Any) -> Any:
        return other

    def __mul__(self, other: Any) -> GenZero:
        return self

    __rmul__ = __mul__
    __truediv__ = __mul__
    __matmul__ = __mul__
    __rmatmul__ = __mul__

    def __neg__(self) -> GenZero:
        return self

    __pos__ = __neg__

    def conjugate(self) -> GenZero:
        return self

    @property
    def real(self) -> GenZero:
        return self

    @property
    def imag(self) -> GenZero:
        return self


gen_zero = GenZero()


# --------------------------------------------------------------------------
# Sparse tuple sensitivities: reading one element of a length-n tuple must
# not cost O(n), so a projection's sensitivity is a OneHot, and sums of them
# accumulate in place in a TupleAccumulator owned by the adjoint it lives in.


class OneHot:
    """The sensitivity of a length-``length`` tuple that is ``value`` at ``index``, zero elsewhere."""

    __slots__ = ("index", "value", "length")

    def __init__(self, index: int, value: Any, length: int) -> None:
        self.index = index
        self.value = value
        self.length = length

    def __repr__(self) -> str:
        return f"OneHot({self.index}, {self.value!r}, {self.length})"

    def to_list(self) -> list[Any]:
        out = [gen_zero] * self.length
        out[self.index] = self.value
        return out


class TupleAccumulator:
    """A mutable, privately owned sum of tuple sensitivities (internal)."""

    __slots__ = ("items",)

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __repr__(self) -> str:
        return f"TupleAccumulator({self.items!r})"

    def add_in_place(self, v: Any) -> TupleAccumulator:
        items = self.items
        if type(v) is OneHot:
            items[v.index] = add(items[v.index], v.value)
        else:
            for i, e in enumerate(_tuple_items(v, len(items))):
                items[i] = add(items[i], e)
        return self


def _tuple_items(v: Any, n: int) -> list[Any]:
    if type(v) is OneHot:
        return v.to_list()
    if type(v) is TupleAccumulator:
        return v.items
    if len(v) != n:
        raise SensitivityError(f"cannot add tuple sensitivities of lengths {n} and {len(v)}")
    return list(v)


def tuple_items(S: Any, n: int) -> tuple[Any, ...]:
    """The ``n`` element sensitivities of a tuple sensitivity in any representation.

    Rules read tuple sensitivities only through this function (and ``add``): it has a
    rule of its own in :mod:`dplus.higher`, so their backprops can be differentiated again.
    """
    if S is gen_zero or S is None:
        return (gen_zero,) * n
    t = type(S)
    if t is OneHot:
        return tuple(S.to_list())
    if t is TupleAccumulator:
        return tuple(S.items)
    return tuple(S)


# Sparse tuple sensitivities at the next order: OneHot and taking one part are adjoint.
def tuple_part(S: Any, i: int, n: int) -> Any:
    """Component ``i`` of a sensitivity of a length-``n`` tuple, in any representation."""
    if S is gen_zero or S is None:
        return gen_zero
    t = type(S)
    if t is OneHot:
        return S.value if S.index == i else gen_zero
    if t is TupleAccumulator:
        return S.items[i]
    return S[i]


# --------------------------------------------------------------------------
# add


@singledispatch
def _add(u: Any, v: Any) -> Any:
    if (is_number(u) or is_ndarray(u)) and (is_number(v) or is_ndarray(v)):
        return u + v
    raise SensitivityError(
        f"cannot add sensitivities of types {type(u).__name__} and {type(v).__name__}; "
        "register the type with dplus.register_linear_type"
    )


def add(u: Any, v: Any) -> Any:
    """The sum of two conforming sensitivities; ``gen_zero`` and ``None`` are identities.

    ``u`` may be updated in place when it is an internal accumulator.
    """
    if u is gen_zero or u is None:
        if type(v) is TupleAccumulator:
            return TupleAccumulator(list(v.items))
        return v
    if v is gen_zero or v is None:
        return u
    tu = type(u)
    if tu is float or tu is int or tu is complex:
        if type(v) in _NUMBER_TYPES:
            return u + v
    return _add(u, v)


def add_closure(total: Any, c: Any) -> Any:
    """Add the closure sensitivity ``c`` of one call of a function argument to ``total``."""
    if c is gen_zero or c is None or (type(c) is tuple and not c and total is not gen_zero):
        return total
    if total is gen_zero:
        return c
    return add(total, c)


# the rules call it in their backprops: differentiated from its source at the next order
add_closure.__dplus_derived__ = ("rule helper",)  # type: ignore[attr-defined]


@_add.register(float)
@_add.register(int)
@_add.register(complex)
def _add_number(u: Any, v: Any) -> Any:
    if isinstance(v, (tuple, list, dict)):
        # (a NumPy scalar would broadcast against it: np.float64(1.0) + () is array([]))
        raise SensitivityError(f"cannot add a number and {_describe(v)}")
    return u + v


@_add.register(tuple)
def _add_tuple(u: tuple[Any, ...], v: Any) -> Any:
    tv = type(v)
    if tv is OneHot or tv is TupleAccumulator:
        return TupleAccumulator(list(u)).add_in_place(v)
    if not isinstance(v, tuple) or len(u) != len(v):
        raise SensitivityError(f"cannot add a tuple of {len(u)} and {_describe(v)}")
    return tuple(add(a, b) for a, b in zip(u, v))


@_add.register(OneHot)
def _add_onehot(u: OneHot, v: Any) -> Any:
    return TupleAccumulator(u.to_list()).add_in_place(v)


@_add.register(TupleAccumulator)
def _add_acc(u: TupleAccumulator, v: Any) -> Any:
    return u.add_in_place(v)


@_add.register(list)
def _add_list(u: list[Any], v: Any) -> Any:
    if not isinstance(v, list) or len(u) != len(v):
        raise SensitivityError(f"cannot add a list of {len(u)} and {_describe(v)}")
    return [add(a, b) for a, b in zip(u, v)]


@_add.register(dict)
def _add_dict(u: dict[Any, Any], v: Any) -> Any:
    if not isinstance(v, dict):
        raise SensitivityError(f"cannot add a dict and {_describe(v)}")
    out = dict(u)
    for k, b in v.items():
        out[k] = add(out[k], b) if k in out else b
    if type(u) is not dict or type(v) is not dict:
        from .result import KeywordDict

        if isinstance(u, KeywordDict) or isinstance(v, KeywordDict):
            # keyword sensitivities are values (at the next order, carried as a tuple's are),
            # and so is their sum: a plain dict would be taken for a mutable dict of the program
            return KeywordDict(out)
    return out


@_add.register(ProcResult)
def _add_procresult(u: ProcResult, v: Any) -> Any:
    if not isinstance(v, ProcResult):
        raise SensitivityError(f"cannot add a ProcResult and {_describe(v)}")
    return ProcResult(add(u.primal, v.primal), add(u.backprop, v.backprop))


# --------------------------------------------------------------------------
# scale, dot, zero


@singledispatch
def _scale(v: Any, a: Any) -> Any:
    if is_number(v) or is_ndarray(v):
        return v * a
    raise SensitivityError(f"cannot scale a sensitivity of type {type(v).__name__}")


def scale(v: Any, a: Any) -> Any:
    """``v`` multiplied by the scalar ``a``."""
    if v is gen_zero or v is None:
        return v
    return _scale(v, a)


@_scale.register(tuple)
def _scale_tuple(v: tuple[Any, ...], a: Any) -> tuple[Any, ...]:
    return tuple(scale(e, a) for e in v)


@_scale.register(list)
def _scale_list(v: list[Any], a: Any) -> list[Any]:
    return [scale(e, a) for e in v]


@_scale.register(dict)
def _scale_dict(v: dict[Any, Any], a: Any) -> dict[Any, Any]:
    return {k: scale(e, a) for k, e in v.items()}


@_scale.register(OneHot)
def _scale_onehot(v: OneHot, a: Any) -> OneHot:
    return OneHot(v.index, scale(v.value, a), v.length)


@_scale.register(TupleAccumulator)
def _scale_acc(v: TupleAccumulator, a: Any) -> tuple[Any, ...]:
    return tuple(scale(e, a) for e in v.items)


@_scale.register(ProcResult)
def _scale_procresult(v: ProcResult, a: Any) -> ProcResult:
    return ProcResult(scale(v.primal, a), scale(v.backprop, a))


@singledispatch
def _dot(u: Any, v: Any) -> Any:
    if is_number(u) or is_ndarray(u):
        if is_ndarray(u) or is_ndarray(v):
            np = _numpy()
            return np.sum(np.multiply(u, v))
        return u * v
    raise SensitivityError(f"cannot take the dot product of a {type(u).__name__}")


def dot(u: Any, v: Any) -> Any:
    """The sum of the products of matching components (bilinear, no conjugation)."""
    if u is gen_zero or v is gen_zero or u is None or v is None:
        return 0.0
    if type(u) is OneHot or type(u) is TupleAccumulator:
        u = _as_tuple(u)
    if type(v) is OneHot or type(v) is TupleAccumulator:
        v = _as_tuple(v)
    return _dot(u, v)


def _dot_sequence(u: Any, v: Any) -> Any:
    if not isinstance(v, (tuple, list)) or len(u) != len(v):
        raise SensitivityError(f"cannot take the dot product of {_describe(u)} and {_describe(v)}")
    total: Any = 0.0
    for a, b in zip(u, v):
        total = total + dot(a, b)
    return total


_dot.register(tuple, _dot_sequence)
_dot.register(list, _dot_sequence)


@_dot.register(dict)
def _dot_dict(u: dict[Any, Any], v: Any) -> Any:
    total: Any = 0.0
    for k, a in u.items():
        if k in v:
            total = total + dot(a, v[k])
    return total


@_dot.register(ProcResult)
def _dot_procresult(u: ProcResult, v: Any) -> Any:
    return dot(u.primal, v.primal) + dot(u.backprop, v.backprop)


@singledispatch
def _zero(v: Any) -> Any:
    if type(v) is bool or is_atom(v):
        return None
    if is_number(v):
        return type(v)(0)
    if is_ndarray(v):
        return _numpy().zeros_like(v)
    if callable(v):
        return _zero_function(v)
    if hasattr(v, "__dict__") or hasattr(type(v), "__slots__"):
        return {name: zero(val) for name, val in object_attributes(v).items()}
    return None


def zero(v: Any) -> Any:
    """The concrete zero sensitivity conforming to the primal ``v``."""
    t = type(v)
    if t is float:
        return 0.0
    if t is int:
        return 0
    return _zero(v)


@_zero.register(tuple)
def _zero_tuple(v: tuple[Any, ...]) -> Any:
    return _same_tuple_type(v, [zero(e) for e in v])


@_zero.register(list)
def _zero_list(v: list[Any]) -> list[Any]:
    return [zero(e) for e in v]


@_zero.register(dict)
def _zero_dict(v: dict[Any, Any]) -> dict[Any, Any]:
    return {k: zero(e) for k, e in v.items()}


@_zero.register(ProcResult)
def _zero_procresult(v: ProcResult) -> ProcResult:
    return ProcResult(zero(v.primal), zero(v.backprop))


def _zero_function(fn: Any) -> Any:
    """A function's sensitivity is the tuple of its closed-over values' sensitivities."""
    if getattr(fn, "__code__", None) is None:
        return ()
    from .closures import closure_values  # local: avoid an import cycle

    return tuple(zero(val) for val in closure_values(fn))


def object_attributes(obj: Any) -> dict[Any, Any]:
    """The instance attributes of a user object (``__dict__`` and ``__slots__``)."""
    attrs: dict[Any, Any] = {}
    for cls in type(obj).__mro__:
        slots = getattr(cls, "__slots__", ())
        for name in slots if not isinstance(slots, str) else (slots,):
            if name in ("__dict__", "__weakref__"):
                continue
            if hasattr(obj, name):
                attrs[name] = getattr(obj, name)
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        attrs.update(d)
    return attrs


def _same_tuple_type(like: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    t = type(like)
    if t is tuple:
        return tuple(items)
    if hasattr(t, "_make"):  # named tuple: keep its type
        named: tuple[Any, ...] = t._make(items)
        return named
    return tuple(items)


def _as_tuple(v: Any) -> tuple[Any, ...]:
    if type(v) is OneHot:
        return tuple(v.to_list())
    if type(v) is TupleAccumulator:
        return tuple(v.items)
    as_is: tuple[Any, ...] = v
    return as_is


# --------------------------------------------------------------------------
# coerce_zero


@singledispatch
def _coerce(u: Any, v: Any) -> Any:
    return u


def coerce_zero(u: Any, v: Any) -> Any:
    """``u`` with every ``gen_zero`` inside replaced by the zero of the matching part of ``v``."""
    if u is gen_zero:
        return zero(v)
    t = type(u)
    if t is float or t is int:
        return u
    if t is OneHot or t is TupleAccumulator:
        u = _as_tuple(u)
    return _coerce(u, v)


@_coerce.register(tuple)
def _coerce_tuple(u: tuple[Any, ...], v: Any) -> Any:
    if isinstance(v, (tuple, list)) and len(v) == len(u):
        items = [coerce_zero(a, b) for a, b in zip(u, v)]
        return _same_tuple_type(v, items) if isinstance(v, tuple) else tuple(items)
    if callable(v) and not isinstance(v, type):
        from .closures import closure_values

        vals = closure_values(v)
        if len(vals) == len(u):
            return tuple(coerce_zero(a, b) for a, b in zip(u, vals))
    return tuple(coerce_zero(a, gen_zero) if a is not gen_zero else a for a in u)


@_coerce.register(list)
def _coerce_list(u: list[Any], v: Any) -> list[Any]:
    if isinstance(v, (list, tuple)) and len(v) == len(u):
        return [coerce_zero(a, b) for a, b in zip(u, v)]
    return list(u)


@_coerce.register(dict)
def _coerce_dict(u: dict[Any, Any], v: Any) -> dict[Any, Any]:
    if isinstance(v, dict):
        return {k: coerce_zero(u[k], val) if k in u else zero(val) for k, val in v.items()} | {
            k: a for k, a in u.items() if k not in v
        }
    if not isinstance(v, (list, tuple)) and (
        hasattr(v, "__dict__") or hasattr(type(v), "__slots__")
    ):
        attrs = object_attributes(v)
        return {k: coerce_zero(u[k], val) if k in u else zero(val) for k, val in attrs.items()}
    return dict(u)


@_coerce.register(ProcResult)
def _coerce_procresult(u: ProcResult, v: Any) -> ProcResult:
    if isinstance(v, ProcResult):
        return ProcResult(coerce_zero(u.primal, v.primal), coerce_zero(u.backprop, v.backprop))
    return u


# --------------------------------------------------------------------------
# conformance


def _describe(v: Any) -> str:
    if v is gen_zero:
        return "gen_zero"
    if type(v) is OneHot or type(v) is TupleAccumulator:
        return f"a tuple sensitivity of length {len(_as_tuple(v))}"
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of length {len(v)}"
    if isinstance(v, dict):
        return f"a dict with keys {sorted(map(repr, v))}"
    if is_ndarray(v):
        return f"an array of shape {v.shape}"
    return f"a {type(v).__name__} ({v!r})"
    # Boxes, user objects, functions: checked by their own registrations or accepted.


_extra_conformance: dict[type, Callable[[Any, Any], bool]] = {}


def register_linear_type(
    cls: type,
    *,
    add: Callable[[Any, Any], Any],
    scale: Callable[[Any, Any], Any],
    dot: Callable[[Any, Any], Any],
    zero: Callable[[Any], Any],
    coerce: Callable[[Any, Any], Any] | None = None,
    conforms: Callable[[Any, Any], bool] | None = None,
) -> None:
    """Make ``cls`` a sensitivity type: the linear interface dispatches on it from now on.

    ``add(u, v)``, ``scale(v, a)``, ``dot(u, v)`` receive no ``gen_zero``; ``zero(primal)``
    returns the zero sensitivity of a primal of type ``cls``; ``coerce(u, primal)`` replaces
    ``gen_zero`` inside ``u``; ``conforms(sens, primal)`` says whether ``sens`` fits ``primal``.
    """
    _add.register(cls, add)
    _scale.register(cls, scale)
    _dot.register(cls, dot)
    _zero.register(cls, zero)
    if coerce is not None:
        _coerce.register(cls, coerce)
    if conforms is not None:
        _extra_conformance[cls] = conforms


def is_zero_sensitivity(s: Any) -> bool:
    """True when ``s`` is ``gen_zero``, ``None``, or a structure of zeros."""
    if s is gen_zero or s is None:
        return True
    t = type(s)
    if t is float or t is int or t is complex:
        is_zero: bool = s == 0
        return is_zero
    if t is OneHot:
        return is_zero_sensitivity(s.value)
    if t is TupleAccumulator:
        return all(is_zero_sensitivity(e) for e in s.items)
    if isinstance(s, (tuple, list)):
        return all(is_zero_sensitivity(e) for e in s)
    if isinstance(s, dict):
        return all(is_zero_sensitivity(e) for e in s.values())
    if isinstance(s, ProcResult):
        return is_zero_sensitivity(s.primal) and is_zero_sensitivity(s.backprop)
    if is_ndarray(s):
        return not s.any()
    if is_number(s):
        is_zero_number: bool = s == 0  # (a NumPy scalar's answer, np.bool_, is kept)
        return is_zero_number
    return False
