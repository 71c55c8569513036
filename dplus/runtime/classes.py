"""Classes built by differentiated code (a ``class`` statement inside a differentiated
function, rewritten by ``transform.normalize.class_statements``).

``build_class_plus`` builds the class from its namespace as Python does (``__prepare__``,
the metaclass, ``__init_subclass__``, ``__set_name__``). A method in the namespace is a
plus-function; the class holds a plain function standing for it (:func:`standing_for`),
which Python calls as the method and whose transform is the plus-function (``lookup_transform``
reads the mark), so a call from differentiated code, from an operator or a property, is
differentiated. What a method reads of the enclosing function is kept in cells (boxed), so
its sensitivity reaches the variable through the box-sensitivity map wherever it is called.

The class is a mutable value like an object: the sensitivity of an attribute it holds is
kept under the class in the box-sensitivity map (:func:`local_owner` finds the class a read
through an instance reaches), and the class's creation hands each attribute's sensitivity to
the namespace entry it came from, hence to the value the class body computed.
"""

from __future__ import annotations

import functools
import types
import weakref
from typing import Any

from ..errors import NonDifferentiableError
from ..markers import mark
from .boxes import BoxSensitivities
from .closures import closure_values, is_plus_function
from .linear import gen_zero
from .result import ProcResult, call_plus

__all__ = [
    "build_class_plus",
    "class_holds",
    "new_class",
    "standing_for",
    "attribute_value",
    "is_local_class",
    "local_owner",
    "raw_attribute",
    "STANDS_FOR",
    "TRANSFORM_IS",
    "stand_in_one_order_down",
]

Z: Any = gen_zero

# (a weak set: a class built in a loop, a new one per iteration, is not kept alive here)
_LOCAL_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()

STANDS_FOR = "__dplus_stands_for__"
TRANSFORM_IS = "__dplus_transform_is__"


def standing_for(plus: Any, name: str | None = None, qualname: str | None = None) -> Any:
    """A plain function that returns ``plus``'s primal: what Python calls (a method, a
    callback given to code dplus does not differentiate); its transform is ``plus``."""

    def primal_only(*args: Any, **kwargs: Any) -> Any:
        return call_plus(plus, *args, **kwargs).primal

    primal_only.__name__ = str(name or getattr(plus, "__name__", "plus_function"))
    primal_only.__qualname__ = str(qualname or getattr(plus, "__qualname__", primal_only.__name__))
    primal_only.__doc__ = getattr(plus, "__doc__", None)
    mark(primal_only, "__wrapped__", plus)  # (inspect.signature reads it)
    return mark(primal_only, STANDS_FOR, plus)


def stand_in_one_order_down(plus: Any) -> Any:
    """A plus-function one order below ``plus`` (a plus-function of a higher order, made by
    code differentiated again), whose transform is ``plus`` (``transform_of_plus`` reads the
    mark): what a class built by code differentiated again holds, through
    :func:`standing_for`, for a method whose plus-function is of that order
    (``higher.class_rules``)."""

    def next_order_stand_in(*args: Any, **kwargs: Any) -> Any:
        return call_plus(plus, *args, **kwargs).primal

    next_order_stand_in.__name__ = str(getattr(plus, "__name__", "plus_function"))
    next_order_stand_in.__qualname__ = str(getattr(plus, "__qualname__", "plus_function"))
    # (its transform is ``plus`` both for the tower, which asks for the transform of a
    # plus-function, and for rule code that looks up a method's transform and calls it)
    mark(next_order_stand_in, STANDS_FOR, plus)
    return mark(next_order_stand_in, TRANSFORM_IS, plus)


def attribute_value(obj: Any, name: str, v: Any) -> Any:
    """What ``obj.name = v`` stores: a plus-function set on a class (``T.m = lambda self:
    ...``) is stored as a plain function standing for it, as the class statement stores
    its methods, so that Python calls it as a method and gets its primal."""
    if isinstance(obj, type):
        # (a class differentiated code writes to holds values with sensitivities from now on,
        # kept under it in the box-sensitivity map as a local class's: local_owner)
        try:
            _LOCAL_CLASSES.add(obj)
        except TypeError:
            pass
    if isinstance(obj, type) and is_plus_function(v):
        if any(c is not None for c in closure_values(v)):
            # (its captures' sensitivities travel with the function value, which Python's call
            # of a method does not hand back: only a function whose captures are in cells fits)
            raise NonDifferentiableError(
                f"dplus cannot differentiate the function set as the method {name!r} of the class "
                f"{obj.__qualname__!r}: it reads variables of the function that made it, and "
                "dplus does not see that it becomes a method where it is made. Set it on the "
                f"class in that function ({obj.__name__}.{name} = ...), or define it in the "
                "class statement"
            )
        return standing_for(v, name, f"{obj.__qualname__}.{name}")
    return v


def is_local_class(cls: Any) -> bool:
    """A class built by differentiated code, or one whose attribute it assigned."""
    try:
        return cls in _LOCAL_CLASSES
    except TypeError:
        return False


def raw_attribute(t: type, name: str) -> Any:
    """``name`` as the first class of ``t``'s MRO holding it has it (a ``staticmethod``, a
    ``property``, a function...), or ``None``."""
    for klass in t.__mro__:
        d = klass.__dict__
        if name in d:
            return d[name]
    return None


def local_owner(obj: Any, name: str) -> type | None:
    """The class built by differentiated code whose own data attribute ``name`` a read of
    ``obj.name`` returns (``obj`` a class or an instance), or ``None``."""
    mro = obj.__mro__ if isinstance(obj, type) else type(obj).__mro__
    for klass in mro:
        d = klass.__dict__
        if name in d:
            if not is_local_class(klass):
                return None
            v = d[name]
            if callable(v) or hasattr(type(v), "__get__"):
                return None  # (a method or a descriptor: not a value the class holds)
            return klass
    return None


def class_holds(v: Any, name: str, qualname: str) -> Any:
    """What the class holds for the namespace value ``v``: a plain function for a method.
    (At a higher order its rule is ``higher.class_rules``'.)"""
    if is_plus_function(v):
        return standing_for(v, name, qualname)
    if isinstance(v, functools.cached_property) and is_plus_function(v.func):
        # (the decorator took the plus-function itself: Python's read of the property, from
        # code dplus does not differentiate, calls it and must get its primal)
        v.func = standing_for(v.func, name, qualname)
        return v
    inner = getattr(v, "__func__", None) if isinstance(v, (staticmethod, classmethod)) else None
    for fn in (inner, getattr(v, "fget", None), getattr(v, "fset", None), getattr(v, "fdel", None)):
        if not isinstance(fn, types.FunctionType):
            continue
        plus = fn.__dict__.get("__dplus_primal_of__")
        if plus is not None:
            # (a method given to staticmethod/classmethod/property, which took the plain
            # function runtime.core.as_plain_callable made: calls of it are differentiated as
            # calls of the method; only here, at first order, where classes are built)
            mark(fn, STANDS_FOR, plus)
        if STANDS_FOR in fn.__dict__:
            fn.__name__ = name
            fn.__qualname__ = qualname
    return v


def _is_data_attribute(cls: type, k: str, v: Any) -> bool:
    """A value the class holds as it is (a number, a container), that the class statement's
    body computed: not a method, a descriptor or a name Python sets."""
    return (
        not (k.startswith("__") and k.endswith("__"))
        and not callable(v)
        and not hasattr(type(v), "__get__")
        and cls.__dict__.get(k, None) is v
    )


def new_class(name: str, bases: tuple, held: dict, keywords: dict) -> type:
    """The class Python builds from a namespace holding ``held``'s values (a constant at
    every order: ``higher.class_rules``; the attributes' values are tied to the class body's
    by :func:`build_class_plus`)."""
    resolved = types.resolve_bases(bases)
    meta, ns, kwds = types.prepare_class(name, resolved, keywords)
    ns.update(held)
    if resolved is not bases:
        ns["__orig_bases__"] = bases
    cls = meta(name, resolved, ns, **kwds)
    try:
        _LOCAL_CLASSES.add(cls)
    except TypeError:
        pass
    return cls


def build_class_plus(name: str, bases: tuple, namespace: dict, keywords: dict) -> ProcResult:
    """The class a ``class`` statement builds from the namespace its body filled."""
    qual = namespace.get("__qualname__", name)
    held = {}
    for k, v in namespace.items():
        held[k] = class_holds(v, k, f"{qual}.{k}")
    cls = new_class(name, bases, held, keywords)
    for k, v in namespace.items():
        if _is_data_attribute(cls, k, v):
            # (the value it holds already: a no-op here; at the next order, where this
            # function is differentiated from its source, the write of an attribute ties the
            # class's attribute to the namespace's entry, as an object's)
            setattr(cls, k, v)

    def build_class_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        # the sensitivities of the attributes the class held, by name: the namespace's
        entry = Abox.pop(cls, Z)
        if entry is Z or entry is None or not entry:
            return (), None, Z, Z, Z
        return (), None, Z, {k: s for k, s in entry.items() if k in namespace}, Z

    return ProcResult(cls, build_class_backprop)
