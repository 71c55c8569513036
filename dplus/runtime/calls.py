"""Calls from generated code: lifting the callee (``call``, ``callmethod``, ``binop_plus``), calls
whose arguments are constants, in-place operators on arrays, a segment's replay program, and the
rules that provide themselves to generated code by name.
"""

from __future__ import annotations

import operator
import types
from typing import Any

from ..errors import SensitivityError
from .boxes import BoxSensitivities
from .closures import _PLUS_CODES, _REGISTERED_IDS, is_plus_function
from .core import CellKey, apply_transform, lift
from .fold import layouts
from .handover import accumulate, handover, is_tracked_mutable
from .kinds import is_ndarray, is_number
from .linear import add, gen_zero, tuple_items
from .memory import is_tracked_array
from .registry import _TRANSFORMS, lookup_transform
from .result import (
    ProcResult,
    _call_positionally,
)

Z = gen_zero
_PLUS_CODE_IDS = _PLUS_CODES._items

_NUMERIC = (int, float, complex)


def replay_segment(program: tuple, rec: tuple, adjoints: tuple, Abox: BoxSensitivities) -> tuple:
    """The reverse of a segment's general variant (run when its float guard failed), as a
    program over its record instead of generated statements (``reverse.replay_plan``).

    ``program`` is ``(slots, init, steps, result)``: one adjoint slot per value; ``init``
    fills slots from ``adjoints`` (the persistent adjoints the segment reads); each step,
    last operation first, is ``(value, source)`` for a copy or ``(backprop, value,
    ((position, operand, slot), ...))`` for an operation, ``backprop`` and ``operand``
    indexing the record; ``result`` names the slot each persistent adjoint ends as (-1: zero).
    """
    n, init, steps, result = program
    adj = [Z] * n
    for k, i in init:
        adj[k] = adjoints[i]
    for step in steps:
        if len(step) == 2:
            dst, src = step
            a = adj[dst]
            adj[dst] = Z
            if a is not Z:
                adj[src] = add(adj[src], a)
            continue
        bp, dst, operands = step
        a = adj[dst]
        adj[dst] = Z
        g = rec[bp](a, Abox)
        for pos, val, k in operands:
            adj[k] = accumulate(adj[k], rec[val], g[pos], Abox)
    return tuple([Z if k < 0 else adj[k] for k in result])


def call(f: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """Call ``f`` from transformed code: a plus-function directly, anything else lifted."""
    if not kwargs:
        tf = type(f)
        if tf is types.FunctionType:
            if id(f) not in _REGISTERED_IDS and id(f.__code__) not in _PLUS_CODE_IDS:
                t = _TRANSFORMS.get(f)
                if (
                    t is not None
                ):  # the commonest call: a registered function (define_dplus, a rule)
                    return t(*args)
        elif tf is types.BuiltinFunctionType or tf is type:  # max, len, zip, enumerate, ...
            t = _TRANSFORMS.get(f)
            if t is not None:
                return t(*args)
    if type(f) is types.FunctionType and is_plus_function(f):
        if kwargs:
            return _call_positionally(f, args, kwargs)
        return f(*args)
    p = lift(f)
    if kwargs and type(p) is types.FunctionType and p.__code__.co_flags & _VARKW == 0:
        return _call_positionally(p, args, kwargs)
    return p(*args, **kwargs)


def callee_plus(f: Any) -> Any:
    """What ``call(f, *args)`` (no keywords) calls, returned rather than called: generated
    first-order code calls it itself, so a recursive function costs one frame per level,
    as in the plain call (``call`` would be a second)."""
    tf = type(f)
    if tf is types.FunctionType:
        if id(f) not in _REGISTERED_IDS and id(f.__code__) not in _PLUS_CODE_IDS:
            t = _TRANSFORMS.get(f)
            if t is not None:
                return t
        elif is_plus_function(f):
            return f
    elif tf is types.BuiltinFunctionType or tf is type:
        t = _TRANSFORMS.get(f)
        if t is not None:
            return t
    if tf is types.FunctionType and is_plus_function(f):
        return f
    return lift(f)


_VARARGS = 0x04
_VARKW = 0x08


# in-place operator -> the operator computing the same value in a new object (what an
# in-place operator does on an immutable value; the NumPy in-place rules use it too)
IN_PLACE_OPERATORS: dict[Any, Any] = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.imatmul: operator.matmul,
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.ixor: operator.xor,
    operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift,
}


def _is_value(x: Any) -> bool:
    t = type(x)
    return t in _NUMERIC or is_number(x) or is_ndarray(x) or x is Z or t is bool


def call_on_constants(f: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``call(f, ...)`` where the callee is a module-level name and every argument is a
    literal or a module-level name (``np.ptp(W)``): when ``f`` is unknown (run by the
    default policy) and no argument holds a list, dict or object that this run could have
    filled, its result does not depend on the differentiated inputs, so it is a constant
    and its sensitivity is not asked for."""
    P = constant_callee(f, args, kwargs)
    if P is None:
        return call(f, *args, **kwargs)
    r = P(*args, **kwargs)
    if getattr(r.backprop, "dp_changed_arrays", False):
        return r  # (it changed an array in place: its reverse puts the old values back)
    zeros = ((),) + (Z,) * len(args) + (({k: Z for k in kwargs},) if kwargs else ())
    return ProcResult(r.primal, lambda A, Abox: zeros)


def constant_callee(f: Any, args: tuple, kwargs: dict) -> Any:
    """The plus-function of ``f`` when ``call_on_constants(f, *args, **kwargs)`` is a
    constant: ``f`` is unknown (the default policy runs it) and no argument holds a
    container this run could have filled; else None."""
    P = lift(f)
    if getattr(P, "dp_unknown", False) and not _may_hold_sensitivity(args + tuple(kwargs.values())):
        return P
    return None


def _may_hold_sensitivity(values: tuple) -> bool:
    """A mutable container reachable from ``values``: its contents may depend on this run."""
    return any(not is_ndarray(v) or is_tracked_array(v) for v, _ in layouts(values))


def select_binop(fn: Any, a: Any, b: Any) -> Any:
    """Which transform a binary operator uses: its registered rule (numbers, arrays, sequences
    and user objects' dunder methods are all handled there), else the policy."""
    t = lookup_transform(fn)
    if t is None and _is_value(a) and _is_value(b):
        t = lookup_transform(IN_PLACE_OPERATORS.get(fn, fn))
    return t if t is not None else lift(fn)


def binop_plus(fn: Any, a: Any, b: Any) -> ProcResult:
    """A binary operator on any operands, through the operator's rule."""
    return select_binop(fn, a, b)(a, b)


def accumulate_cell(Abox: BoxSensitivities, key: CellKey, value: Any, s: Any) -> None:
    """Add the sensitivity of a value read from a boxed variable into its cell's entry."""
    if s is Z or s is None:
        return
    if value is not None and is_tracked_mutable(value):
        handover(Abox, value, s)
    else:
        Abox.accumulate(key, s)


def closure_parts(A: Any, n: int) -> tuple:
    """The per-variable parts of a closure's (or a ``*args`` tuple's) sensitivity."""
    parts = tuple_items(A, n)
    if len(parts) != n:
        raise SensitivityError(
            f"a closure sensitivity of length {len(parts)} was given for a function closing over {n} variables"
        )
    return parts


# (class, name) -> (the class's function, its transform); used while the class still holds
# that function under the name and the instance holds nothing under it
_METHODS: dict[tuple[type, str], tuple[Any, Any]] = {}


def _static_or_class_method(t: type, name: str) -> bool:
    """Whether the class ``t`` holds ``name`` as a ``staticmethod`` or ``classmethod`` (which
    ``getattr(t, name)`` unwraps: called through an instance, it takes no instance argument)."""
    for klass in t.__mro__:
        if name in klass.__dict__:
            return isinstance(klass.__dict__[name], (staticmethod, classmethod))
    return False


_OBJECT_GETATTRIBUTE = object.__getattribute__


def holds_method(obj: Any, cls: type, name: str, fn: Any) -> bool:
    """Whether ``obj.name`` is the function ``fn`` bound to ``obj``: ``obj``'s class is
    ``cls`` itself, a class made by ``type`` (no metaclass: reading ``cls.name`` is then
    the lookup along its MRO that Python makes for the instance), which finds ``fn`` under
    ``name`` and looks attributes up as ``object`` does, and ``obj`` holds nothing under
    ``name`` (the test of a method call inlined at its call site: ``transform.inline``)."""
    if (
        type(obj) is not cls
        or type(cls) is not type
        or getattr(cls, name, None) is not fn
        or cls.__getattribute__ is not _OBJECT_GETATTRIBUTE
    ):
        return False
    own = getattr(obj, "__dict__", None)
    return own is None or name not in own


def callmethod(obj: Any, name: str, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``obj.name(*args)`` from transformed code; the backprop is ``((), A_obj, None, *A_args)``."""
    t = type(obj)
    key = (t, name)
    rule = None
    cached = _METHODS.get(key)
    if cached is not None and getattr(t, name, None) is cached[0]:
        # (a function the instance holds under the same name is what Python calls instead)
        own = getattr(obj, "__dict__", None)
        if own is None or name not in own:
            rule = cached[1]
    if rule is None:
        attr_ = getattr(t, name, None)
        if (
            attr_ is not None
            # (super(): the method is looked up past the class, not on the super object's type)
            and not isinstance(obj, (types.ModuleType, type, super))
            and not (
                _static_or_class_method(t, name)
                or isinstance(getattr(obj, "__dict__", None), dict)
                and name in obj.__dict__
            )
            and callable(attr_)
        ):
            rule = lookup_transform(attr_)
            if rule is None and isinstance(attr_, types.FunctionType):
                rule = lift(attr_)  # a user method: define_dplus'd, or the policy
            if (
                rule is not None
                and isinstance(attr_, types.FunctionType)
                and lookup_transform(attr_) is None
            ):
                rule = None  # do not cache policies: they may change
            if rule is not None:
                _METHODS[key] = (attr_, rule)
        if rule is None:
            # a module function, a class or static method, an attribute holding a callable
            r = _PROVIDED["getattr_plus"](obj, name)
            inner = r.backprop
            rc = call(r.primal, *args, **kwargs)
            inner_c = rc.backprop

            def callattr_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
                out = inner_c(A, Abox)
                return ((), inner(out[0], Abox)[1], None) + tuple(out[1:])

            return ProcResult(rc.primal, callattr_backprop)
    r = apply_transform(rule, obj, *args, **kwargs)
    inner = r.backprop

    def method_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        out = inner(A, Abox)
        return ((), out[1], None) + tuple(out[2:])

    return ProcResult(r.primal, method_backprop)


# ---------------------------------------------------------------------------
# the names generated code calls

# Rules of the rule library that generated code calls by name (building displays, reading
# and writing subscripts and attributes: dplus.primitives.containers) provide themselves
# here when they are defined, so this module need not import the layer above it.
_PROVIDED: dict[str, Any] = {}


def provide_to_generated_code(*functions: Any, **values: Any) -> None:
    """Let generated code call each of ``functions`` by its ``__name__`` (and read each of
    ``values`` by its keyword)."""
    for fn in functions:
        _PROVIDED[fn.__name__] = fn
    _PROVIDED.update(values)
