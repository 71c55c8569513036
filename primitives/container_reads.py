"""Container rules for reading: ``xs[i]``, ``d[k]``, ``t[i]``, ``obj.a`` (subscripts, slices,
attributes, a module's globals), and the attribute rules and Python-override checks the
other container rules share. See :mod:`primitives.containers` for the conventions.
"""

from __future__ import annotations

import builtins as builtins_module
import collections
import functools
import sys
import types
from collections.abc import Sequence
from typing import Any

from dplus.errors import NonDifferentiableError, UnknownTransformError, describe_callable
from dplus.runtime.boxes import Box, BoxSensitivities
from dplus.runtime.classes import local_owner
from dplus.runtime.core import apply_transform, lift
from dplus.runtime.handover import handover, is_tracked_mutable
from dplus.runtime.kinds import is_atom, is_ndarray, is_number, sequence_index
from dplus.runtime.linear import OneHot, add, gen_zero, is_zero_sensitivity, tuple_items
from dplus.runtime.memory import results_take_entries
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import KeywordDict, ProcResult

from .attribute_tables import (  # noqa: F401  (register_attribute: the rules' entry point)
    _ATTR_RULES,
    _OWN_ATTRIBUTE_KINDS,
    NOT_OWN,
    PLAIN_ATTRIBUTES,
    plain_attributes,
    register_attribute,
)

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero
_LIST_LIKE = (list, collections.deque)
_SEQUENCES = (list, tuple, collections.deque)  # (positional: a key with __index__ is a position)


# A subclass of list or dict may override a method in Python. Where the program calls the
# method (``xs.append(v)``, ``d[k] = v``), the override runs and is differentiated from its
# source; these rules describe the builtin methods, which the override reaches through
# ``super()`` or ``list.append(self, v)``. So a rule that changes a list or dict calls the
# builtin itself (``list.append(xs, v)``) when the instance's class overrides the method; it
# keeps the method syntax otherwise, which is what the rule's code differentiated again
# (second order) handles natively.
def _numpy_array_type() -> tuple[type, ...]:
    try:  # (dplus.runtime.memory imports NumPy already when it is installed)
        from numpy import ndarray
    except ImportError:  # pragma: no cover - NumPy is an optional extra
        return ()
    return (ndarray,)


# exact types whose item methods are the builtin ones (a subclass may override them in Python)
_EXACT_CONTAINERS = frozenset({list, tuple, dict, *_numpy_array_type()})
_PYTHON_OVERRIDES: dict[tuple[type, str], Any] = {}


def _python_method(t: type, name: str) -> Any:
    """``t``'s method ``name`` when it is a Python function (a user class, or a subclass of a
    builtin container overriding it), else None."""
    key = (t, name)
    if key not in _PYTHON_OVERRIDES:
        method = getattr(t, name, None)
        _PYTHON_OVERRIDES[key] = method if isinstance(method, types.FunctionType) else None
    return _PYTHON_OVERRIDES[key]


def _overrides(obj: Any, name: str) -> bool:
    """Whether ``obj``'s class overrides the builtin container method ``name`` in Python."""
    t = type(obj)
    return t not in _EXACT_CONTAINERS and _python_method(t, name) is not None


def _conform_items(items: Sequence[Any], like: Any) -> Any:
    if isinstance(like, _LIST_LIKE):  # (a deque's sensitivity is a list, by position)
        return list(items)
    if isinstance(like, tuple):
        return tuple(items)
    if all(is_zero_sensitivity(x) for x in items):
        return Z
    raise NonDifferentiableError(
        f"sensitivity reached the elements of a {type(like).__name__}, which cannot carry it; "
        "pass a list or a tuple instead"
    )


# ---------------------------------------------------------------------------
# reading: xs[i], d[k], t[i], obj.a


def scatter_slice(S: Any, rng: range, n: int) -> tuple:
    """The sensitivity of a length-``n`` tuple from that of its slice at positions ``rng``."""
    items = [Z] * n
    for j, s in zip(rng, tuple_items(S, len(rng))):
        items[j] = s
    return tuple(items)


def gather_slice(S: Any, rng: range, n: int) -> tuple:
    """The transpose of :func:`scatter_slice`: the parts of a length-``n`` sensitivity at ``rng``."""
    items = tuple_items(S, n)
    return tuple(items[j] for j in rng)


# each is the other's transpose, so both differentiate again at any order
register_primitive(
    scatter_slice,
    lambda S, rng, n: ProcResult(
        scatter_slice(S, rng, n),
        lambda A, Abox: ((), Z if A is Z or A is None else gather_slice(A, rng, n), None, None),
    ),
)
register_primitive(
    gather_slice,
    lambda S, rng, n: ProcResult(
        gather_slice(S, rng, n),
        lambda A, Abox: ((), Z if A is Z or A is None else scatter_slice(A, rng, n), None, None),
    ),
)


def read_global_plus(namespace: dict, name: str) -> ProcResult:
    """A read of a name the function declares ``global``: the module's namespace read as a
    dict (``getitem_plus``), or, as Python reads a global, the builtins, or ``NameError``."""
    if name in namespace:
        return apply_transform(getitem_plus, namespace, name)
    if hasattr(builtins_module, name):
        return ProcResult(getattr(builtins_module, name), lambda A, Abox: ((), Z, None))
    raise NameError(f"name {name!r} is not defined")


def _python_method_call(method: Any, obj: Any, *args: Any) -> ProcResult:
    """``method(obj, *args)``, a class's Python ``__getitem__``/``__setitem__``/``__delitem__``,
    through its transform (not ``call``: rule code differentiated again must see the
    transform); the backprop answers as the operator's, with no closure of its own."""
    r = apply_transform(lift(method), obj, *args)
    inner = r.backprop
    n = 1 + len(args)
    return ProcResult(r.primal, lambda A, Abox: ((),) + tuple(inner(A, Abox)[1 : 1 + n]))


def getitem_plus(obj: Any, idx: Any) -> ProcResult:
    """``obj[idx]``: the class's own ``__getitem__`` when it is Python, else the builtin's rule."""
    t = type(obj)
    if t not in _EXACT_CONTAINERS:
        method = _python_method(t, "__getitem__")
        if method is not None:
            return _python_method_call(method, obj, idx)
    return builtin_getitem_plus(obj, idx)


def builtin_getitem_plus(obj: Any, idx: Any) -> ProcResult:
    """The builtin ``__getitem__`` of lists, tuples, dicts, arrays (``list.__getitem__(xs, i)``)."""
    t = type(obj)
    if isinstance(obj, _SEQUENCES):
        idx = sequence_index(idx)
    if not _overrides(obj, "__getitem__"):
        v = obj[idx]
    elif isinstance(obj, list):
        v = list.__getitem__(obj, idx)
    else:
        v = dict.__getitem__(obj, idx)
    if t is list or isinstance(obj, _LIST_LIKE):  # (a deque: by position, as a list)
        if type(idx) is int or (not isinstance(idx, slice) and hasattr(idx, "__index__")):
            return _list_read(obj, idx, v)
        return _list_slice_read(obj, idx, v)
    if t is tuple or isinstance(obj, tuple):
        if isinstance(idx, slice):
            return _tuple_slice_read(obj, idx, v)
        return _tuple_read(obj, idx, v)
    if t is dict or isinstance(obj, dict):
        return _keyed_read(obj, idx, v)
    if is_ndarray(obj):
        return _array_read(obj, idx, v)
    if isinstance(obj, (str, bytes, range)):
        return ProcResult(v, lambda A, Abox: ((), Z, None))
    if _is_numpy_number(obj):
        # a NumPy scalar indexed as the 0-d array it stands for (x[..., np.newaxis], x[()]):
        # every element of the result is the scalar itself
        def numpy_scalar_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            if A is Z or A is None:
                return (), Z, None
            from .operator_operands import _fit

            return (), _fit(sys.modules["numpy"].sum(A), obj), None

        return ProcResult(v, numpy_scalar_read_backprop)
    return _unknown_read(obj, v, f"indexing {_a_type_name(t)}")


def _is_numpy_number(obj: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.generic) and obj.dtype.kind in "fciu"


def _list_read(obj: Any, idx: Any, v: Any) -> ProcResult:
    """``xs[i]`` of a list (or a deque): the sensitivity goes to the list's entry at ``i``."""
    n = len(obj)
    i = idx + n if idx < 0 else idx

    def list_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            if is_tracked_mutable(v):
                handover(Abox, v, A)
            else:
                entry = Abox.list_entry(obj, n)
                entry[i] = add(entry[i], A)
        return (), Z, None

    return ProcResult(v, list_read_backprop)


def _list_slice_read(obj: Any, idx: slice, v: Any) -> ProcResult:
    """``xs[a:b]``: the new list's sensitivity goes back to the positions it was read from."""
    n = len(obj)
    rng = range(*idx.indices(n))

    def list_slice_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, v, A)
        part = Abox.pop(v, Z)
        if part is not Z:
            entry = Abox.list_entry(obj, n)
            for j, s in zip(rng, part):
                if s is not Z:
                    entry[j] = add(entry[j], s)
        return (), Z, None

    return ProcResult(v, list_slice_backprop)


def _tuple_slice_read(obj: Any, idx: slice, v: Any) -> ProcResult:
    n = len(obj)
    rng = range(*idx.indices(n))

    def tuple_slice_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return (), Z, None
        return (), scatter_slice(A, rng, n), None

    return ProcResult(v, tuple_slice_backprop)


def _tuple_read(obj: Any, idx: Any, v: Any) -> ProcResult:
    """``t[i]``: a sparse sensitivity (``OneHot``), or the element's own if it is mutable."""
    n = len(obj)
    i = idx + n if idx < 0 else idx

    def tuple_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return (), Z, None
        if is_tracked_mutable(v):
            handover(Abox, v, A)
            return (), Z, None
        return (), OneHot(i, A, n), None

    return ProcResult(v, tuple_read_backprop)


def _array_read(obj: Any, idx: Any, v: Any) -> ProcResult:
    def array_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return (), Z, None
        return (), scatter_add(obj, idx, A), None

    return ProcResult(v, array_read_backprop)


def _a_type_name(t: type) -> str:
    """``a list``, ``an array.array``: the type as the user writes it, with its article."""
    name = (
        t.__qualname__
        if t.__module__ in ("builtins", "__main__")
        else f"{t.__module__}.{t.__qualname__}"
    )
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def scatter_add(like: Any, idx: Any, A: Any) -> Any:
    """A new array of zeros shaped like the array ``like``, with ``A`` added at ``idx``
    (repeated indices add up): the transpose of reading ``like[idx]``. A function with a
    rule of its own (below), so that the reverse of indexing is differentiable again."""
    np = sys.modules["numpy"]
    g = np.zeros(
        np.shape(like), dtype=np.result_type(np.asarray(like).dtype, np.asarray(A).dtype, float)
    )
    np.add.at(g, idx, A)
    return g


def _scatter_add_plus(like: Any, idx: Any, A: Any) -> ProcResult:
    """Linear in ``A``: its transpose reads the sensitivity at ``idx`` back (summed over
    the axes along which ``A`` was broadcast)."""
    from .operator_operands import _fit

    def scatter_add_backprop(S: Any, Abox: BoxSensitivities) -> tuple:
        if S is Z or S is None:
            return (), Z, None, Z
        return (), Z, None, _fit(S[idx], A)

    return ProcResult(scatter_add(like, idx, A), scatter_add_backprop)


register_primitive(
    scatter_add, _scatter_add_plus, note="internal: the transpose of indexing an array (linear)"
)


def _add_to_entry(Abox: BoxSensitivities, obj: Any, key: Any, v: Any, A: Any) -> None:
    """Add the sensitivity ``A`` of ``obj[key]`` (or ``obj.key``), whose value is ``v``, to ``Abox``."""
    if A is Z or A is None:
        return
    if is_tracked_mutable(v):
        handover(Abox, v, A)  # a mutable element keeps its sensitivity in its own entry
    else:
        entry = Abox.map_entry(obj)
        entry[key] = add(entry[key], A) if key in entry else A


def is_value_dict(d: Any) -> bool:
    """A dict no code changes (a ``KeywordDict``: keyword sensitivities, met again one order
    up): a value like a tuple, whose sensitivity is returned, not kept in ``Abox``."""
    return isinstance(d, dict) and not is_tracked_mutable(d)


def _keyed_read(obj: Any, key: Any, v: Any) -> ProcResult:
    """Reading ``obj[key]`` of a dict or ``obj.key`` of an object whose value is ``v``."""
    if is_value_dict(obj):

        def value_dict_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            if A is Z or A is None:
                return (), Z, None
            if is_tracked_mutable(v):
                handover(Abox, v, A)
                return (), Z, None
            return (), KeywordDict({key: A}), None

        return ProcResult(v, value_dict_read_backprop)

    def keyed_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        _add_to_entry(Abox, obj, key, v, A)
        return (), Z, None

    return ProcResult(v, keyed_read_backprop)


def _unknown_read(obj: Any, v: Any, what: str) -> ProcResult:
    def unknown_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if not is_zero_sensitivity(A):
            raise UnknownTransformError(
                f"no derivative is known for {what}, and its result received a non-zero sensitivity. "
                "Register a rule with dplus.register_primitive, or use lists, tuples, dicts or NumPy arrays"
            )
        return (), Z, None

    return ProcResult(v, unknown_read_backprop)


def _class_descriptor_shadows(t: type, name: str) -> bool:
    """Whether reading ``name`` of a ``t`` runs a data descriptor of the class (a property)
    rather than reading what the instance holds (its ``__dict__`` or a ``__slots__`` member)."""
    for cls in t.__mro__:
        if name in cls.__dict__:
            found = type(cls.__dict__[name])
            if found is types.MemberDescriptorType:
                return False
            return hasattr(found, "__set__") or hasattr(found, "__delete__")
    return False


def _instance_has(obj: Any, name: str) -> bool:
    if _class_descriptor_shadows(type(obj), name):
        return False
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict) and name in d:
        return True
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        if name in slots:
            return True
    return False


def _named_field_index(obj: Any, name: str) -> int:
    """The position of a named tuple's field ``name`` (-1: not a named tuple's field).
    Non-differentiable: rule code differentiated again reads it as a constant."""
    fields = getattr(type(obj), "_fields", ()) if isinstance(obj, tuple) else ()
    return fields.index(name) if isinstance(fields, tuple) and name in fields else -1


def _accessor_run_by_read(obj: Any, name: str) -> Any:
    """What reading ``obj.name`` runs of the class: a ``property`` (its getter runs on every
    read, before the instance's own attributes), a ``functools.cached_property`` whose value
    the instance does not hold yet, or a descriptor whose ``__get__`` is Python (a data
    descriptor before the instance's own attributes, another one when the instance does not
    hold the name); else ``None`` (an attribute rule registered for the type comes first).
    Non-differentiable: a constant at every order."""
    if isinstance(obj, (types.ModuleType, type)) or (type(obj), name) in _ATTR_RULES:
        return None
    for cls in type(obj).__mro__:
        if name in cls.__dict__:
            held = cls.__dict__[name]
            if isinstance(held, property):
                return held if held.fget is not None else None
            d = getattr(obj, "__dict__", None)
            if isinstance(held, functools.cached_property):
                return held if isinstance(d, dict) and held.attrname not in d else None
            if _python_method(type(held), "__get__") is None:
                return None
            data = hasattr(type(held), "__set__") or hasattr(type(held), "__delete__")
            return held if data or not (isinstance(d, dict) and name in d) else None
    return None


def _attribute_hook_run_by_read(obj: Any, name: str) -> Any:
    """The class's Python ``__getattr__`` when nothing the instance or the class holds
    answers ``name`` (Python calls it then), else ``None``. (A Python ``__getattribute__``
    is still run natively, its value taken as the instance's own or a class attribute:
    tests/fuzz/FINDINGS.md, stop 37.) Non-differentiable: a constant at every order."""
    t = type(obj)
    if (
        isinstance(obj, (types.ModuleType, type))
        or (t, name) in _ATTR_RULES
        or _python_method(t, "__getattribute__") is not None
    ):
        return None
    hook = _python_method(t, "__getattr__")
    if hook is None or _instance_has(obj, name) or any(name in c.__dict__ for c in t.__mro__):
        return None
    return hook


def _refuse_value_made_by_getattribute(obj: Any, name: str, v: Any) -> None:
    """Where a class's Python ``__getattribute__`` ran for ``obj.name`` natively (dplus has no rule
    for ``object.__getattribute__`` inside it). Its value is taken for what the object holds
    (the instance's own attribute, a method or a class attribute): right when it is that
    very value (a hook that counts or logs reads), silently wrong otherwise (``2.0 * value``,
    a value computed from other attributes). Refused then, where it may carry a sensitivity.
    Non-differentiable: a constant at every order."""
    hook = _python_method(type(obj), "__getattribute__")
    if hook is None or v is None or type(v) in (bool, int, str):
        return
    try:
        held = object.__getattribute__(obj, name)
    except AttributeError:
        held = _NOT_HELD
    if held is v or (
        isinstance(v, types.MethodType)
        and isinstance(held, types.MethodType)
        and v.__func__ is held.__func__
        and v.__self__ is held.__self__
    ):
        return
    raise NonDifferentiableError(
        f"reading .{name} of a {type(obj).__qualname__} object ran its class's __getattribute__ "
        f"({describe_callable(hook)}), which returned a value other than the one the object holds "
        "under that name: dplus cannot follow the sensitivity of that value. Compute it in a "
        "property or a method instead (dplus differentiates those)."
    )


_NOT_HELD = object()


def _property_read(obj: Any, prop: Any) -> ProcResult:
    """``obj.name`` of a property: its getter, differentiated (found before ``getattr`` runs
    it: at the next order that call would run the getter one order short)."""
    r = apply_transform(lift(prop.fget), obj)
    inner = r.backprop
    return ProcResult(r.primal, lambda A, Abox: ((), inner(A, Abox)[1], None))


def _cached_property_read(obj: Any, cached: Any) -> ProcResult:
    """The first read of a ``functools.cached_property``: its function differentiated as a
    property's getter, its value stored in the instance as Python stores it (later reads are
    reads of the instance's attribute, whose sensitivities this read's reverse collects)."""
    r = apply_transform(lift(cached.func), obj)
    setattr(obj, cached.attrname, r.primal)
    inner = r.backprop

    def cached_property_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(obj)
        later = Z if entry is Z else entry.pop(cached.attrname, Z)
        return (), inner(add(A, later), Abox)[1], None

    return ProcResult(r.primal, cached_property_read_backprop)


def _descriptor_read(obj: Any, descriptor: Any) -> ProcResult:
    """``obj.name`` of a descriptor whose ``__get__`` is Python: ``__get__(descriptor, obj,
    type(obj))`` differentiated (what it reads of the object carries its sensitivity)."""
    get = _python_method(type(descriptor), "__get__")
    r = apply_transform(lift(get), descriptor, obj, type(obj))
    inner = r.backprop
    return ProcResult(r.primal, lambda A, Abox: ((), inner(A, Abox)[2], None))


def _attribute_of_a_constant(obj: Any, name: str) -> ProcResult | None:
    """``obj.name`` of a value that never carries sensitivity (``np.finfo(float).eps``): a
    constant, whatever reads it (a property, a cached property). Methods take the rules'
    usual way; classes and modules are read by ``getattr_plus``."""
    if not is_atom(obj) or isinstance(obj, (types.ModuleType, type)):
        return None
    v = getattr(obj, name)
    return None if callable(v) else ProcResult(v, _no_sens_2)


def getattr_plus(obj: Any, name: str) -> ProcResult:
    constant = _attribute_of_a_constant(obj, name)
    if constant is not None:
        return constant
    hook = _attribute_hook_run_by_read(obj, name)
    if hook is not None:
        # (its result's sensitivity goes where the hook read it from: differentiated, as a
        # property's getter is; read natively, it was taken for a constant)
        r = apply_transform(lift(hook), obj, name)
        inner_hook = r.backprop
        return ProcResult(r.primal, lambda A, Abox: ((), inner_hook(A, Abox)[1], None))
    accessor = _accessor_run_by_read(obj, name)
    if isinstance(accessor, property):
        return _property_read(obj, accessor)
    if isinstance(accessor, functools.cached_property):
        return _cached_property_read(obj, accessor)
    if accessor is not None:
        return _descriptor_read(obj, accessor)
    v = getattr(obj, name)
    t = type(obj)
    _refuse_value_made_by_getattribute(obj, name, v)
    if isinstance(obj, (types.ModuleType, type)):
        owner = local_owner(obj, name) if isinstance(obj, type) else None
        if owner is not None:  # (an attribute of a class built by differentiated code)
            return _keyed_read(owner, name, v)
        return ProcResult(v, _no_sens_2)
    rule = _ATTR_RULES.get((t, name))
    if rule is not None:
        r = apply_transform(rule, obj)
        inner = r.backprop
        return ProcResult(r.primal, lambda A, Abox: ((), inner(A, Abox)[1], None))
    if t is ProcResult:
        if name == "primal":
            return ProcResult(v, lambda A, Abox: ((), ProcResult(A, Z) if A is not Z else Z, None))
        if name == "backprop":
            return ProcResult(v, lambda A, Abox: ((), ProcResult(Z, A) if A is not Z else Z, None))
    if t is Box and name == "value":
        return _box_read(obj, v)
    field = _named_field_index(obj, name)
    if field >= 0:
        # a named tuple's field: a projection like t[i]
        return apply_transform(getitem_plus, obj, field)
    if is_tracked_mutable(obj) and _instance_has(obj, name):
        return _keyed_read(obj, name, v)
    return _class_attribute_read(obj, name, v)


def _class_attribute_read(obj: Any, name: str, v: Any) -> ProcResult:
    """``obj.name`` found through the class: a method (bound to ``obj``), a property, a
    class attribute (a constant, unless the class was built by differentiated code)."""
    t = type(obj)
    owner = local_owner(obj, name)
    if owner is not None:
        # a value a class built by differentiated code holds, read through an instance: its
        # sensitivity goes to the class (runtime.classes), hence to the class body's value
        return _keyed_read(owner, name, v)
    if isinstance(v, types.MethodType) and v.__self__ is obj:
        # a bound method closes over its instance: its sensitivity is (A_self,)
        def method_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            if A is Z or A is None:
                return (), Z, None
            parts = tuple_items(A, len(A) if isinstance(A, tuple) else 1)
            return (), (parts[0] if parts else Z), None

        return ProcResult(v, method_read_backprop)
    if callable(v) and not is_tracked_mutable(obj):
        # builtin methods (xs.append, d.get): registered per descriptor, see lift()
        return ProcResult(v, _method_of_value_backprop)
    if callable(v):
        return ProcResult(v, _method_of_value_backprop)
    if is_number(obj) or is_ndarray(obj):
        return _unknown_read(obj, v, f"the attribute {name!r} of a {t.__name__}")
    if is_tracked_mutable(obj):
        # a class attribute read through an instance: a constant
        return ProcResult(v, _no_sens_2)
    return _unknown_read(obj, v, f"the attribute {name!r} of a {t.__name__}")


def _method_of_value_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
    # the sensitivity of a bound builtin method is (A_self,)
    if A is Z or A is None or A == ():
        return (), Z, None
    return (), tuple_items(A, len(A) if isinstance(A, tuple) else 1)[0], None


def _no_sens_2(A: Any, Abox: BoxSensitivities) -> tuple:
    return (), Z, None


def _box_read(b: Box, v: Any) -> ProcResult:
    def unbox_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            if is_tracked_mutable(v):
                handover(Abox, v, A)
            else:
                Abox.accumulate(b, A)
        return (), Z, None

    return ProcResult(v, unbox_backprop)


def _box_write(b: Box, v: Any) -> ProcResult:
    b.value = v

    def set_box_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        return (), Z, None, Abox.pop(b, Z)

    return ProcResult(None, set_box_backprop)


def _nested_code(fn: Any, name: str) -> Any:
    return next(c for c in fn.__code__.co_consts if getattr(c, "co_name", None) == name)


# reading elements of an array makes them (fancy indexing) or shows them (a view), and hands
# their sensitivity back to the array at once (runtime.memory)
results_take_entries(code=_nested_code(_array_read, "array_read_backprop"))
