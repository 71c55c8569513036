"""Rules for containers: subscripts, attributes, displays, unpacking, list/dict methods, boxes.

Sensitivities of lists, dicts, boxes and user objects live in the box-sensitivity map
``Abox`` (SPEC section 5): a read adds the result's sensitivity into the container's
entry, a write moves the written element's sensitivity out of the entry (leaving zero)
and restores the layout the container had before the write. Tuples are values: a
projection's sensitivity is a sparse ``OneHot`` so that reading every element of a
length-n tuple costs O(n) in all, not O(n^2).

Decisions (documented in docs/containers.md):
- the sensitivity of a user object is a dict of attribute sensitivities;
- a set's sensitivity is a dict from element to sensitivity (a loop over the set gives it);
  sensitivity reaching a set element any other way raises;
- NumPy arrays are values; assigning into an array inside differentiated code raises.
"""

from __future__ import annotations

import builtins as builtins_module
import collections
import functools
import operator
import sys
import types
from collections.abc import Sequence
from typing import Any

from dplus.errors import NonDifferentiableError, UnknownTransformError
from dplus.markers import mark_derived
from dplus.rules import defnondiff
from dplus.runtime.boxes import Box, BoxSensitivities, box, set_box, unbox
from dplus.runtime.core import (
    apply_transform,
    handover,
    is_tracked_mutable,
    keywords_at,
    lift,
)
from dplus.runtime.hooks import hooks
from dplus.runtime.linear import (
    OneHot,
    add,
    gen_zero,
    is_ndarray,
    is_number,
    is_zero_sensitivity,
    tuple_items,
)
from dplus.runtime.ops import provide_to_generated_code
from dplus.runtime.registry import lookup_transform, register_primitive
from dplus.runtime.result import ProcResult

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero

_ATTR_RULES: dict[tuple[type, str], Any] = {}

# A subclass of list or dict may override a method in Python. Where the program calls the
# method (``xs.append(v)``, ``d[k] = v``), the override runs and is differentiated from its
# source; these rules describe the builtin methods, which the override reaches through
# ``super()`` or ``list.append(self, v)``. So a rule that changes a list or dict calls the
# builtin itself (``list.append(xs, v)``) when the instance's class overrides the method; it
# keeps the method syntax otherwise, which is what the rule's code differentiated again
# (second order) handles natively.
_EXACT_CONTAINERS = frozenset({list, tuple, dict})
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


def register_attribute(cls: type, name: str, transform: Any) -> None:
    """Register the transform of reading attribute ``name`` of instances of ``cls``: ``transform(obj)``."""
    _ATTR_RULES[(cls, name)] = transform
    _OWN_ATTRIBUTE_KINDS.clear()


# (module constants: rule code differentiated again reads them as constants, not as
# attributes of a module)
_DEQUE = collections.deque
_LIST_LIKE = (list, collections.deque)
_DEQUE_SETITEM = collections.deque.__setitem__
_DEQUE_DELITEM = collections.deque.__delitem__


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
    if not _overrides(obj, "__getitem__"):
        v = obj[idx]
    elif isinstance(obj, list):
        v = list.__getitem__(obj, idx)
    else:
        v = dict.__getitem__(obj, idx)
    if t is list or isinstance(obj, _LIST_LIKE):  # (a deque: by position, as a list)
        n = len(obj)
        if type(idx) is int or (not isinstance(idx, slice) and hasattr(idx, "__index__")):
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
    if t is tuple or isinstance(obj, tuple):
        n = len(obj)
        if isinstance(idx, slice):
            rng = range(*idx.indices(n))

            def tuple_slice_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
                if A is Z or A is None:
                    return (), Z, None
                return (), scatter_slice(A, rng, n), None

            return ProcResult(v, tuple_slice_backprop)
        i = idx + n if idx < 0 else idx

        def tuple_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            if A is Z or A is None:
                return (), Z, None
            if is_tracked_mutable(v):
                handover(Abox, v, A)
                return (), Z, None
            return (), OneHot(i, A, n), None

        return ProcResult(v, tuple_read_backprop)
    if t is dict or isinstance(obj, dict):
        return _keyed_read(obj, idx, v)
    if is_ndarray(obj):

        def array_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            if A is Z or A is None:
                return (), Z, None
            return (), scatter_add(obj, idx, A), None

        return ProcResult(v, array_read_backprop)
    if isinstance(obj, (str, bytes, range)):
        return ProcResult(v, lambda A, Abox: ((), Z, None))
    if _is_numpy_number(obj):
        # a NumPy scalar indexed as the 0-d array it stands for (x[..., np.newaxis], x[()]):
        # every element of the result is the scalar itself
        def numpy_scalar_read_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            if A is Z or A is None:
                return (), Z, None
            from .operators import _fit

            return (), _fit(sys.modules["numpy"].sum(A), obj), None

        return ProcResult(v, numpy_scalar_read_backprop)
    return _unknown_read(obj, v, f"indexing {_a_type_name(t)}")


def _is_numpy_number(obj: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.generic) and obj.dtype.kind in "fciu"


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
    from .operators import _fit

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


def _keyed_read(obj: Any, key: Any, v: Any) -> ProcResult:
    """Reading ``obj[key]`` of a dict or ``obj.key`` of an object whose value is ``v``."""

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


def getattr_plus(obj: Any, name: str) -> ProcResult:
    v = getattr(obj, name)
    t = type(obj)
    if isinstance(obj, (types.ModuleType, type)):
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
    prop = getattr(t, name, None)
    if isinstance(prop, property) and prop.fget is not None:
        r = apply_transform(lift(prop.fget), obj)
        inner = r.backprop
        return ProcResult(r.primal, lambda A, Abox: ((), inner(A, Abox)[1], None))
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


# ---------------------------------------------------------------------------
# writing: xs[i] = v, d[k] = v, obj.a = v, del


def setitem_plus(obj: Any, idx: Any, v: Any) -> ProcResult:
    """``obj[idx] = v``: the class's own ``__setitem__`` when it is Python, else the builtin's rule."""
    t = type(obj)
    if t not in _EXACT_CONTAINERS:
        method = _python_method(t, "__setitem__")
        if method is not None:
            return _python_method_call(method, obj, idx, v)
    return builtin_setitem_plus(obj, idx, v)


def builtin_setitem_plus(obj: Any, idx: Any, v: Any) -> ProcResult:
    t = type(obj)
    if isinstance(obj, _DEQUE):  # (the deque rules: primitives.collections_stdlib)
        return apply_transform(lookup_transform(_DEQUE_SETITEM), obj, idx, v)
    if t is list or isinstance(obj, list):
        n = len(obj)
        if isinstance(idx, slice):
            start, stop, step = idx.indices(n)
            vals = list(v)
            old_positions = list(range(start, stop, step))
            if _overrides(obj, "__setitem__"):
                list.__setitem__(obj, idx, vals)
            else:
                obj[idx] = vals
            m = len(vals)

            def list_slice_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
                entry = Abox.get(obj)
                if entry is Z:
                    new_sens = [Z] * m
                else:
                    if step == 1:
                        new_sens = entry[start : start + m]
                        entry[start : start + m] = [Z] * len(old_positions)
                    else:
                        new_sens = [entry[j] for j in old_positions]
                        for j in old_positions:
                            entry[j] = Z
                for e, s in zip(vals, new_sens):
                    pass
                return (
                    (),
                    Z,
                    None,
                    _conform_items(new_sens, v) if not all(s is Z for s in new_sens) else Z,
                )

            return ProcResult(None, list_slice_write_backprop)
        i = idx + n if idx < 0 else idx
        if _overrides(obj, "__setitem__"):
            list.__setitem__(obj, i, v)
        else:
            obj[i] = v

        def list_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            entry = Abox.get(obj)
            if entry is Z:
                return (), Z, None, Z
            s = entry[i]
            entry[i] = Z
            return (), Z, None, s

        return ProcResult(None, list_write_backprop)
    if t is dict or isinstance(obj, dict):
        if _overrides(obj, "__setitem__"):
            dict.__setitem__(obj, idx, v)
        else:
            obj[idx] = v

        def dict_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            entry = Abox.get(obj)
            if entry is Z:
                return (), Z, None, Z
            return (), Z, None, entry.pop(idx, Z)

        return ProcResult(None, dict_write_backprop)
    if is_ndarray(obj):
        raise NonDifferentiableError(
            "assigning into a NumPy array inside differentiated code is not supported (arrays are values "
            "in dplus); build a new array instead, e.g. with numpy.where or numpy.concatenate"
        )
    obj[idx] = v
    return ProcResult(None, _unknown_write_backprop(f"assigning into a {t.__name__}"))


def _unknown_write_backprop(what: str) -> Any:
    def unknown_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        return (), Z, None, Z

    return unknown_write_backprop


# Attributes of user objects read and assigned natively by first-order generated code
# (reverse.py, ``Reverser.attribute_read`` / ``attribute_write``): the same values, effects
# and sensitivities as ``getattr_plus``'s keyed read and ``setattr_plus``, without a
# ProcResult and a closure per operation (``self.px += DT * self.vx`` in a method).

NOT_OWN = object()  # the read is not a number attribute of the object's own: take the rule
_OWN_ATTRIBUTE_KINDS: dict[tuple[type, str], str | None] = {}


def _own_attribute_kind(obj: Any, name: str) -> str | None:
    """How instances of ``type(obj)`` hold ``name`` when reading it runs no user code and
    ``getattr_plus`` reads it as the object's own attribute: ``"slot"`` (a ``__slots__``
    member), ``"dict"`` (the instance's ``__dict__``, when it has the name), else None (a
    rule for the attribute, a ``Box``, an object that is not tracked, ``__getattribute__``
    overridden, a property or other data descriptor)."""
    t = type(obj)
    if (t, name) in _ATTR_RULES or t is Box or not is_tracked_mutable(obj):
        return None
    if t.__getattribute__ is not object.__getattribute__ or _class_descriptor_shadows(t, name):
        return None
    for cls in t.__mro__:
        if type(cls.__dict__.get(name)) is types.MemberDescriptorType:
            return "slot"
    return "dict"


def own_number_attribute(obj: Any, name: str) -> Any:
    """``obj.name`` when it is a number the object holds itself (what ``getattr_plus`` reads
    as a keyed read), else ``NOT_OWN`` (then nothing was run: the caller takes the rule)."""
    key = (type(obj), name)
    kind = _OWN_ATTRIBUTE_KINDS.get(key, NOT_OWN)
    if kind is NOT_OWN:
        kind = _OWN_ATTRIBUTE_KINDS[key] = _own_attribute_kind(obj, name)
    if kind is None:
        return NOT_OWN
    if kind == "dict":
        d = getattr(obj, "__dict__", None)
        if not (isinstance(d, dict) and name in d):
            return NOT_OWN
    v = getattr(obj, name)
    tv = type(v)
    return v if tv is float or tv is int else NOT_OWN


def own_attribute_back(obj: Any, name: str, A: Any, Abox: BoxSensitivities) -> tuple:
    """The reverse of ``v = obj.name`` read by ``own_number_attribute``: what the keyed
    read's backprop returns, ``A`` added into the object's entry."""
    if A is Z or A is None:
        return (), Z, None
    found = Abox._entries.get(id(obj))
    entry = Abox.map_entry(obj) if found is None else found[1]
    prev = entry.get(name, Z)
    entry[name] = (
        A if prev is Z else (prev + A if type(prev) is float and type(A) is float else add(prev, A))
    )
    return (), Z, None


def store_own_attribute(obj: Any, name: str, v: Any) -> bool:
    """``obj.name = v`` done here when ``setattr_plus`` would do only that (a tracked object
    other than a ``Box``); False: nothing was done, the caller takes the rule."""
    if type(obj) is Box or not is_tracked_mutable(obj):
        return False
    setattr(obj, name, v)
    return True


def own_attribute_write_back(obj: Any, name: str, Abox: BoxSensitivities) -> tuple:
    """The reverse of ``store_own_attribute``: what ``setattr_plus``'s backprop returns."""
    entry = Abox.get(obj)
    if entry is Z:
        return (), Z, None, Z
    return (), Z, None, entry.pop(name, Z)


def setattr_plus(obj: Any, name: str, v: Any) -> ProcResult:
    if is_ndarray(obj) or is_number(obj):
        raise NonDifferentiableError(
            f"assigning the attribute {name!r} of a {type(obj).__name__} is not supported"
        )
    if type(obj) is Box and name == "value":
        return _box_write(obj, v)
    setattr(obj, name, v)

    def attr_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(obj)
        if entry is Z:
            return (), Z, None, Z
        return (), Z, None, entry.pop(name, Z)

    return ProcResult(None, attr_write_backprop)


def delitem_plus(obj: Any, idx: Any) -> ProcResult:
    """``del obj[idx]``: the class's own ``__delitem__`` when it is Python, else the builtin's rule."""
    t = type(obj)
    if t not in _EXACT_CONTAINERS:
        method = _python_method(t, "__delitem__")
        if method is not None:
            return _python_method_call(method, obj, idx)
    return builtin_delitem_plus(obj, idx)


def builtin_delitem_plus(obj: Any, idx: Any) -> ProcResult:
    if isinstance(obj, _DEQUE):  # (the deque rules: primitives.collections_stdlib)
        return apply_transform(lookup_transform(_DEQUE_DELITEM), obj, idx)
    if isinstance(obj, list):
        n = len(obj)
        if isinstance(idx, slice):
            positions = list(range(*idx.indices(n)))
            if _overrides(obj, "__delitem__"):
                list.__delitem__(obj, idx)
            else:
                del obj[idx]

            def list_slice_del_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
                entry = Abox.get(obj)
                if entry is not Z:
                    restored = [Z] * n
                    keep = [j for j in range(n) if j not in set(positions)]
                    for j, s in zip(keep, entry):
                        restored[j] = s
                    entry[:] = restored
                return (), Z, None

            return ProcResult(None, list_slice_del_backprop)
        i = idx + n if idx < 0 else idx
        if _overrides(obj, "__delitem__"):
            list.__delitem__(obj, i)
        else:
            del obj[i]

        def list_del_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            entry = Abox.get(obj)
            if entry is not Z:
                entry.insert(i, Z)
            return (), Z, None

        return ProcResult(None, list_del_backprop)
    if isinstance(obj, dict):
        if _overrides(obj, "__delitem__"):
            dict.__delitem__(obj, idx)
        else:
            del obj[idx]

        def dict_del_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            entry = Abox.get(obj)
            if entry is not Z:
                entry.pop(idx, None)
            return (), Z, None

        return ProcResult(None, dict_del_backprop)
    if is_ndarray(obj):
        raise NonDifferentiableError("deleting from a NumPy array is not possible")
    del obj[idx]
    return ProcResult(None, _no_sens_2)


def delattr_plus(obj: Any, name: str) -> ProcResult:
    delattr(obj, name)

    def attr_del_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(obj)
        if entry is not Z:
            entry.pop(name, None)
        return (), Z, None

    return ProcResult(None, attr_del_backprop)


# ---------------------------------------------------------------------------
# displays: (a, b), [a, b], {k: v}, {a, b}, with starred parts


def build_tuple(*items: Any) -> ProcResult:
    n = len(items)

    def tuple_display_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return ((),) + (Z,) * n
        return ((),) + tuple(tuple_items(A, n))

    return ProcResult(items, tuple_display_backprop)


def build_list(*items: Any) -> ProcResult:
    lst = list(items)
    n = len(items)

    def list_display_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, lst, A)
        entry = Abox.pop(lst, Z)
        if entry is Z:
            return ((),) + (Z,) * n
        return ((),) + tuple(entry)

    return ProcResult(lst, list_display_backprop)


# Integers and booleans in a set are labels (indices, counts, flags): their elements carry
# no sensitivity, so a set of integer constants is as free of derivatives at every order as
# the constants are.
_LABELS = frozenset({int, bool})


def set_sensitivity(order: Any, sens: Any) -> Any:
    """A set's sensitivity (a dict from element to sensitivity) from the sensitivities ``sens``
    of its elements in the iteration ``order`` (``Z`` when all are zero)."""
    out: dict = {}
    for e, se in zip(order, sens):
        if se is Z or se is None or type(e) in _LABELS or is_zero_sensitivity(se):
            continue
        out[e] = add(out[e], se) if e in out else se
    return out or Z


def set_entry(s: Any, A: Any, Abox: BoxSensitivities) -> Any:
    """The sensitivity of the set ``s`` where its creation is reversed: ``A`` handed in
    directly plus, for a (mutable) ``set``, its entry taken out of ``Abox``; a dict or ``Z``."""
    if type(s) is not set and not isinstance(s, set) or Abox is None:
        return _as_set_sensitivity(A)
    if A is not Z and A is not None:
        handover(Abox, s, A)
    return Abox.pop(s, Z)


def _as_set_sensitivity(A: Any) -> Any:
    if A is Z or A is None or isinstance(A, dict):
        return Z if A is None else A
    if is_zero_sensitivity(A):
        return Z
    raise NonDifferentiableError(
        f"a {type(A).__name__} was given as the sensitivity of a set; a set's sensitivity is a dict "
        "from element to sensitivity. Fix: use a list or a tuple"
    )


def set_items_sensitivities(items: Any, A: Any) -> list:
    """The sensitivities of the ``items`` a set was made from, given the set's: a dict from
    element to sensitivity. Of equal items only the first is in the set: it gets the
    element's sensitivity, the others none."""
    A = _as_set_sensitivity(A)
    if A is Z:
        return [Z] * len(items)
    seen: set = set()
    out = []
    for x in items:
        if x in seen:
            out.append(Z)
            continue
        seen.add(x)
        out.append(A.get(x, Z))
    return out


def build_set(*items: Any) -> ProcResult:
    s = set(items)

    def set_display_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        return ((),) + tuple(set_items_sensitivities(items, set_entry(s, A, Abox)))

    return ProcResult(s, set_display_backprop)


def _set_from_iterable(make: Any, args: tuple) -> ProcResult:
    """``set(iterable)`` / ``frozenset(iterable)``: each element's sensitivity goes back to the
    item it was made from (of equal items, the first: the one the set keeps)."""
    s = make(*args)
    if not args:
        return ProcResult(s, lambda A, Abox: ((),))
    x = args[0]
    if type(x) is list or type(x) is tuple:
        items = tuple(x)

        def set_constructor_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            parts = set_items_sensitivities(items, set_entry(s, A, Abox))
            if all(p is Z for p in parts):
                return (), Z
            if type(x) is tuple:
                return (), tuple(parts)
            handover(Abox, x, parts)  # (by position, as the list was when read)
            return (), Z

        return ProcResult(s, set_constructor_backprop)
    if isinstance(x, (set, frozenset)):

        def set_copy_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            return (), set_entry(s, A, Abox)

        return ProcResult(s, set_copy_backprop)

    def set_other_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        sens = set_entry(s, A, Abox)
        if sens is not Z and not all(is_zero_sensitivity(v) for v in sens.values()):
            raise NonDifferentiableError(
                f"{make.__name__}(): sensitivity reached the elements of a {type(x).__name__}, which has "
                f"nowhere to send it. Fix: make the {make.__name__} from a list or a tuple"
            )
        return (), Z

    return ProcResult(s, set_other_backprop)


def set_plus(*args: Any) -> ProcResult:
    return _set_from_iterable(set, args)


def frozenset_plus(*args: Any) -> ProcResult:
    return _set_from_iterable(frozenset, args)


def build_dict(spec: tuple, *parts: Any) -> ProcResult:
    d: dict = {}
    origin: dict = {}
    plan = []
    pos = 0  # (indexing, not next() on an iterator: this code is differentiated again)
    for is_star in spec:
        if is_star:
            m = parts[pos]
            pos += 1
            plan.append(("star", m))
            for key in m:
                d[key] = m[key]
                origin[key] = len(plan) - 1
        else:
            key = parts[pos]
            val = parts[pos + 1]
            pos += 2
            plan.append(("kv", key))
            d[key] = val
            origin[key] = len(plan) - 1

    def dict_display_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, d, A)
        entry = Abox.pop(d, Z)
        out: list = [()]
        for pi, (kind, x) in enumerate(plan):
            if kind == "star":
                sens = (
                    {k: entry.get(k, Z) for k in x if origin.get(k) == pi} if entry is not Z else Z
                )
                out.append(sens if sens else Z)
            else:
                out.append(None)
                out.append(entry.get(x, Z) if entry is not Z and origin.get(x) == pi else Z)
        return tuple(out)

    return ProcResult(d, dict_display_backprop)


def _star_parts(spec: tuple, parts: tuple) -> tuple[list, list]:
    items: list = []
    lengths: list = []
    for is_star, p in zip(spec, parts):
        if is_star:
            seq = list(p)
            items.extend(seq)
            lengths.append(len(seq))
        else:
            items.append(p)
            lengths.append(None)
    return items, lengths


def _split_star(spec: tuple, parts: tuple, lengths: list, items_sens: Sequence[Any]) -> tuple:
    out: list = [()]
    pos = 0
    for is_star, p, ln in zip(spec, parts, lengths):
        if is_star:
            chunk = items_sens[pos : pos + ln]
            pos += ln
            out.append(Z if all(s is Z for s in chunk) else _conform_items(chunk, p))
        else:
            out.append(items_sens[pos])
            pos += 1
    return tuple(out)


def build_tuple_star(spec: tuple, *parts: Any) -> ProcResult:
    items, lengths = _star_parts(spec, parts)
    t = tuple(items)

    def tuple_star_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        return _split_star(spec, parts, lengths, tuple_items(A, len(t)))

    return ProcResult(t, tuple_star_backprop)


def build_list_star(spec: tuple, *parts: Any) -> ProcResult:
    items, lengths = _star_parts(spec, parts)

    def list_star_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, items, A)
        entry = Abox.pop(items, Z)
        return _split_star(spec, parts, lengths, entry if entry is not Z else [Z] * len(items))

    return ProcResult(items, list_star_backprop)


def build_set_star(spec: tuple, *parts: Any) -> ProcResult:
    items, lengths = _star_parts(spec, parts)

    s = set(items)

    def set_star_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        sens = set_items_sensitivities(items, set_entry(s, A, Abox))
        return _split_star(spec, parts, lengths, sens)

    return ProcResult(s, set_star_backprop)


# ---------------------------------------------------------------------------
# unpacking: a, b = v   and   a, *rest, b = v


def _sequence_sensitivity(v: Any, items: Sequence[Any], order: Any = None) -> Any:
    """The sensitivity of the iterable ``v`` from those of the ``items`` iterating it gave;
    ``order``: those items themselves (a set's sensitivity is keyed by element, and the set
    may have changed since it was iterated)."""
    if all(s is Z or s is None for s in items):
        return Z
    if isinstance(v, (list, tuple)):
        return _conform_items(items, v)
    if isinstance(v, (set, frozenset)):
        return set_sensitivity(tuple(v) if order is None else order, items)
    if isinstance(v, (dict, str, bytes, range)):
        return Z
    if is_ndarray(v):
        return array_from_parts(v, items)
    return _conform_items(items, v)


def array_from_parts(v: Any, items: Sequence[Any]) -> Any:
    """The sensitivity of the array ``v`` from those of its rows (its elements, for a vector)
    as unpacking or iterating it gave them; ``Z`` rows are zeros."""
    np = sys.modules["numpy"]
    dtype = np.result_type(v.dtype, float)
    return np.stack(
        [np.zeros(v.shape[1:], dtype) if s is Z or s is None else np.asarray(s) for s in items]
    )


def unpack_plus(v: Any, n: int) -> ProcResult:
    t = v if type(v) is tuple else tuple(v)
    if len(t) != n:
        if len(t) < n:
            raise ValueError(f"not enough values to unpack (expected {n}, got {len(t)})")
        raise ValueError(f"too many values to unpack (expected {n})")

    def unpack_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return (), Z, None
        if type(v) is tuple:
            return (), A, None
        return (), _sequence_sensitivity(v, tuple_items(A, n)), None

    return ProcResult(t, unpack_backprop)


def unpack_star_plus(v: Any, before: int, after: int) -> ProcResult:
    items = list(v)
    n = len(items)
    if n < before + after:
        raise ValueError(
            f"not enough values to unpack (expected at least {before + after}, got {n})"
        )
    rest = items[before : n - after]
    t = tuple(items[:before]) + (rest,) + tuple(items[n - after :])

    def unpack_star_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        parts = tuple_items(A, len(t))
        rest_sens = parts[before]
        if rest_sens is not Z and rest_sens is not None:
            handover(Abox, rest, rest_sens)
        entry = Abox.pop(rest, Z)
        mid = entry if entry is not Z else [Z] * len(rest)
        full = list(parts[:before]) + list(mid) + list(parts[before + 1 :])
        return (), _sequence_sensitivity(v, full, items), None, None

    return ProcResult(t, unpack_star_backprop)


def match_args_plus(subject: Any, n: int) -> ProcResult:
    names = getattr(type(subject), "__match_args__", ())
    return ProcResult(tuple(names[:n]), lambda A, Abox: ((), Z, None))


# ---------------------------------------------------------------------------
# constructors and methods of list, tuple, dict


def _iterable_to_list(x: Any) -> list:
    return list(x)


def list_plus(*args: Any) -> ProcResult:
    if not args:
        return ProcResult([], lambda A, Abox: ((),))
    (src,) = args
    lst = list(src)

    def list_constructor_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, lst, A)
        entry = Abox.pop(lst, Z)
        if entry is Z:
            return (), Z
        return (), _sequence_sensitivity(src, entry, lst)

    return ProcResult(lst, list_constructor_backprop)


def tuple_plus(*args: Any) -> ProcResult:
    if not args:
        return ProcResult((), lambda A, Abox: ((),))
    (src,) = args
    t = tuple(src)
    n = len(t)

    def tuple_constructor_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is Z or A is None:
            return (), Z
        if type(src) is tuple:
            return (), A
        return (), _sequence_sensitivity(src, tuple_items(A, n), t)

    return ProcResult(t, tuple_constructor_backprop)


def _pairs_sensitivity(src: Any, pairs: Any, entry: dict, overridden: Any) -> Any:
    """The sensitivity of the (key, value) pairs ``src`` a dict was built or updated from:
    only a key's last pair, and only when no keyword argument overrode it, gave its value."""
    last = {}
    for i, pair in enumerate(pairs):
        last[pair[0]] = i
    sens = []
    for i, pair in enumerate(pairs):
        k = pair[0]
        s = entry.get(k, Z) if last[k] == i and k not in overridden else Z
        sens.append((None, s) if s is not Z else Z)
    return _sequence_sensitivity(src, sens)


def dict_plus(*args: Any, **kwargs: Any) -> ProcResult:
    src = args[0] if args else None
    pairs_src = None
    if src is not None and not isinstance(src, dict):
        # (read once, before dict() would consume an iterator)
        pairs_src = list(src) if not isinstance(src, (list, tuple)) else src
    d = dict(*args, **kwargs) if pairs_src is None else dict(pairs_src, **kwargs)

    def dict_constructor_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, d, A)
        entry = Abox.pop(d, Z)
        out: list = [()]
        if entry is Z:
            entry = {}
        if args:
            if isinstance(src, dict):
                out.append({k: entry[k] for k in src if k in entry and k not in kwargs} or Z)
            else:
                out.append(_pairs_sensitivity(src, pairs_src, entry, kwargs))
        if kwargs:
            out.append({k: entry.get(k, Z) for k in kwargs})
        return tuple(out)

    return ProcResult(d, dict_constructor_backprop)


def list_append_plus(xs: list, v: Any) -> ProcResult:
    if _overrides(xs, "append"):
        list.append(xs, v)
    else:
        xs.append(v)

    def append_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is Z:
            return (), Z, Z
        return (), Z, entry.pop()

    return ProcResult(None, append_backprop)


def list_extend_plus(xs: list, ys: Any) -> ProcResult:
    items = list(ys)
    m = len(items)
    if _overrides(xs, "extend"):
        list.extend(xs, items)
    else:
        xs.extend(items)

    def extend_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is Z or m == 0:
            return (), Z, Z
        tail = entry[len(entry) - m :]
        del entry[len(entry) - m :]
        if isinstance(ys, list):
            # ``ys`` may have changed since (``xs.extend(xs)``: it is ``xs``): its elements
            # then were ``items``
            handover(Abox, ys, tail, items)
            return (), Z, Z
        return (), Z, _sequence_sensitivity(ys, tail)

    return ProcResult(None, extend_backprop)


def list_insert_plus(xs: list, i: int, v: Any) -> ProcResult:
    n = len(xs)
    if _overrides(xs, "insert"):
        list.insert(xs, i, v)
    else:
        xs.insert(i, v)
    j = max(0, min(n, i + n if i < 0 else i))

    def insert_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is Z:
            return (), Z, None, Z
        return (), Z, None, entry.pop(j)

    return ProcResult(None, insert_backprop)


def list_pop_plus(xs: list, *args: Any) -> ProcResult:
    n = len(xs)
    i = args[0] if args else -1
    j = i + n if i < 0 else i
    v = list.pop(xs, i) if _overrides(xs, "pop") else xs.pop(i)

    def pop_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if A is not Z and A is not None and is_tracked_mutable(v):
            handover(Abox, v, A)
            A = Z
        if entry is Z:
            if A is Z or A is None:
                return ((), Z) + ((None,) if args else ())
            entry = Abox.list_entry(xs, n - 1)
        entry.insert(j, A if A is not None else Z)
        return ((), Z) + ((None,) if args else ())

    return ProcResult(v, pop_backprop)


def list_remove_plus(xs: list, v: Any) -> ProcResult:
    j = xs.index(v)
    if _overrides(xs, "remove"):
        list.__delitem__(xs, j)
    else:
        del xs[j]

    def remove_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is not Z:
            entry.insert(j, Z)
        return (), Z, Z

    return ProcResult(None, remove_backprop)


def list_copy_plus(xs: list) -> ProcResult:
    return apply_transform(list_plus, xs)


def list_clear_plus(xs: list) -> ProcResult:
    n = len(xs)
    if _overrides(xs, "clear"):
        list.clear(xs)
    else:
        xs.clear()

    def clear_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is not Z:
            entry[:] = [Z] * n
        return (), Z

    return ProcResult(None, clear_backprop)


def list_reverse_plus(xs: list) -> ProcResult:
    if _overrides(xs, "reverse"):
        list.reverse(xs)
    else:
        xs.reverse()

    def reverse_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is not Z:
            entry.reverse()
        return (), Z

    return ProcResult(None, reverse_backprop)


def list_sort_plus(xs: list, *, key: Any = None, reverse: bool = False) -> ProcResult:
    keyf = (lambda x: x) if key is None else (lambda x: lift(key)(x).primal)
    order = sorted(range(len(xs)), key=lambda i: keyf(xs[i]), reverse=reverse)
    if _overrides(xs, "sort"):
        list.__setitem__(xs, slice(None), [xs[i] for i in order])
    else:
        xs[:] = [xs[i] for i in order]

    def sort_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(xs)
        if entry is not Z:
            restored = [Z] * len(order)
            for new_pos, old_pos in enumerate(order):
                restored[old_pos] = entry[new_pos]
            entry[:] = restored
        out = ((), Z)
        kw: dict[str, Any] = {}
        if key is not None:
            kw["key"] = Z
        if reverse:
            kw["reverse"] = None
        return out + ((kw,) if kw else ())

    return ProcResult(None, sort_backprop)


def list_index_plus(xs: list, *args: Any) -> ProcResult:
    return ProcResult(xs.index(*args), lambda A, Abox: ((), Z) + (Z,) * len(args))


def list_count_plus(xs: list, v: Any) -> ProcResult:
    return ProcResult(xs.count(v), lambda A, Abox: ((), Z, Z))


def dict_get_plus(d: dict, key: Any, *default: Any) -> ProcResult:
    if key in d:
        r = apply_transform(builtin_getitem_plus, d, key)
        inner = r.backprop
        return ProcResult(r.primal, lambda A, Abox: inner(A, Abox) + ((Z,) if default else ()))
    v = default[0] if default else None
    return ProcResult(v, lambda A, Abox: ((), Z, None) + ((A,) if default else ()))


def dict_setdefault_plus(d: dict, key: Any, *default: Any) -> ProcResult:
    if key in d:
        r = apply_transform(builtin_getitem_plus, d, key)
        inner = r.backprop
        return ProcResult(r.primal, lambda A, Abox: inner(A, Abox) + ((Z,) if default else ()))
    v = default[0] if default else None
    if _overrides(d, "setdefault"):
        dict.__setitem__(d, key, v)
    else:
        d[key] = v

    def setdefault_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        # the result is the stored value: its read sensitivity joins the entry, then moves to the default
        _add_to_entry(Abox, d, key, v, A)
        entry = Abox.get(d)
        s = entry.pop(key, Z) if entry is not Z else Z
        return ((), Z, None) + ((s,) if default else ())

    return ProcResult(v, setdefault_backprop)


def dict_update_plus(d: dict, /, *args: Any, **kwargs: Any) -> ProcResult:
    pairs = None
    if args and not isinstance(args[0], dict) and not hasattr(args[0], "keys"):
        # (read once, before dict() would consume an iterator)
        pairs = list(args[0]) if not isinstance(args[0], (list, tuple)) else args[0]
    src = dict(*args, **kwargs) if pairs is None else dict(pairs, **kwargs)
    if _overrides(d, "update"):
        dict.update(d, src)
    else:
        d.update(src)
    keys = (
        list(args[0]) if args and pairs is None else ()
    )  # (the mapping's keys now: it may change later)

    def update_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(d)
        moved = {}
        if entry is not Z:
            for k in src:
                moved[k] = entry.pop(k, Z)
        out: list = [(), Z]
        if args:
            a = args[0]
            if pairs is None:
                out.append({k: moved.get(k, Z) for k in keys if k not in kwargs} or Z)
            else:
                out.append(_pairs_sensitivity(a, pairs, moved, kwargs))
        if kwargs:
            out.append({k: moved.get(k, Z) for k in kwargs})
        return tuple(out)

    return ProcResult(None, update_backprop)


def user_namespace_plus(display: dict) -> ProcResult:
    """What ``locals()`` gives inside differentiated code: the display of the user's
    variables (``normalize.user_namespace``) without those not bound yet."""
    from dplus.transform.normalize.core import UNBOUND

    ns = {k: v for k, v in display.items() if not (type(v) is str and v == UNBOUND)}

    def user_namespace_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, ns, A)
        entry = Abox.pop(ns, Z)
        return (), (dict(entry) or Z) if entry is not Z else Z

    return ProcResult(ns, user_namespace_backprop)


# ``a | b`` and ``a |= b`` on dicts merge (the later value of a key wins); on anything else
# (ints, bools, sets, Counters' in-place maximum) they stay non-differentiable.
_MERGING_DICTS = (dict, collections.OrderedDict, collections.defaultdict)
_MERGE_OR = frozenset(t.__or__ for t in _MERGING_DICTS)
_MERGE_ROR = frozenset(t.__ror__ for t in _MERGING_DICTS)
_MERGE_IOR = frozenset(t.__ior__ for t in _MERGING_DICTS)


def _merges(x: Any, y: Any) -> bool:
    return (
        isinstance(x, dict)
        and isinstance(y, dict)
        and type(x).__or__ in _MERGE_OR
        and type(y).__ror__ in _MERGE_ROR
    )


def dict_or_plus(x: Any, y: Any) -> ProcResult:
    if not _merges(x, y):
        return ProcResult(operator.or_(x, y), lambda A, Abox: ((), Z, Z))
    r = x | y

    def dict_or_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, r, A)
        entry = Abox.pop(r, Z)
        if entry is Z:
            return (), Z, Z
        # a key of both takes the right-hand value: the left one gets no sensitivity
        sx = {k: entry[k] for k in x if k in entry and k not in y}
        sy = {k: entry[k] for k in y if k in entry}
        return (), sx or Z, sy or Z

    return ProcResult(r, dict_or_backprop)


def dict_ior_plus(x: Any, y: Any) -> ProcResult:
    if not (isinstance(x, dict) and type(x).__ior__ in _MERGE_IOR):
        if is_ndarray(x):
            raise NonDifferentiableError(
                "operator.ior would change a NumPy array in place, which dplus does not follow (arrays are "
                "values in dplus); use the operator that makes a new array (operator.or_, or `a = a | b`)"
            )
        return ProcResult(operator.ior(x, y), lambda A, Abox: ((), Z, Z))
    update = apply_transform(dict_update_plus, x, y)  # ``x |= y`` is ``x.update(y)``, then ``x``

    def dict_ior_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, x, A)  # the result is ``x`` itself, as it is after the update
        return update.backprop(Z, Abox)

    return ProcResult(x, dict_ior_backprop)


def dict_pop_plus(d: dict, key: Any, *default: Any) -> ProcResult:
    if key in d:
        v = dict.pop(d, key) if _overrides(d, "pop") else d.pop(key)

        def dict_pop_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            if A is not Z and A is not None:
                if is_tracked_mutable(v):
                    handover(Abox, v, A)
                else:
                    entry = Abox.map_entry(d)
                    entry[key] = A
            return ((), Z, None) + ((Z,) if default else ())

        return ProcResult(v, dict_pop_backprop)
    v = default[0] if default else d.pop(key)
    return ProcResult(v, lambda A, Abox: ((), Z, None) + ((A,) if default else ()))


def dict_items_plus(d: dict) -> ProcResult:
    keys = list(d)
    pairs = [(k, d[k]) for k in keys]

    def items_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, pairs, A)
        entry = Abox.pop(pairs, Z)
        if entry is not Z:
            dentry = None
            for k, s in zip(keys, entry):
                if s is Z or s is None:
                    continue
                part = tuple_items(s, 2)[1]
                if part is Z or part is None:
                    continue
                v = d.get(k) if k in d else None
                if is_tracked_mutable(v):
                    handover(Abox, v, part)
                    continue
                if dentry is None:
                    dentry = Abox.map_entry(d)
                dentry[k] = add(dentry[k], part) if k in dentry else part
        return (), Z

    return ProcResult(pairs, items_backprop)


def dict_values_plus(d: dict) -> ProcResult:
    keys = list(d)
    vals = [d[k] for k in keys]

    def values_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, vals, A)
        entry = Abox.pop(vals, Z)
        if entry is not Z:
            dentry = Abox.map_entry(d)
            for k, s in zip(keys, entry):
                if s is Z or s is None:
                    continue
                dentry[k] = add(dentry[k], s) if k in dentry else s
        return (), Z

    return ProcResult(vals, values_backprop)


def dict_keys_plus(d: dict) -> ProcResult:
    return ProcResult(list(d), lambda A, Abox: ((), Z))


def dict_copy_plus(d: dict) -> ProcResult:
    return apply_transform(dict_plus, d)


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


def box_plus(v: Any) -> ProcResult:
    b = Box(v)

    def box_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        if A is not Z and A is not None:
            handover(Abox, b, A)
        return (), Abox.pop(b, Z)

    return ProcResult(b, box_backprop)


def unbox_plus(b: Box) -> ProcResult:
    r = _box_read(b, b.value)
    inner = r.backprop
    return ProcResult(r.primal, lambda A, Abox: inner(A, Abox)[:2])


def set_box_plus(b: Box, v: Any) -> ProcResult:
    r = _box_write(b, v)
    inner = r.backprop
    return ProcResult(None, lambda A, Abox: ((), Z, inner(A, Abox)[3]))


register_primitive(
    list,
    list_plus,
    note="list(iterable): a new list; element sensitivities flow back to the iterable",
)
register_primitive(tuple, tuple_plus, note="tuple(iterable)")
register_primitive(dict, dict_plus, note="dict(mapping or pairs, **kwargs)")
register_primitive(
    list.append,
    list_append_plus,
    note="moves the appended element's sensitivity out of the list's entry",
)
register_primitive(list.extend, list_extend_plus)
register_primitive(list.insert, list_insert_plus)
register_primitive(
    list.pop, list_pop_plus, note="puts the popped element's sensitivity back at its index"
)
register_primitive(list.remove, list_remove_plus)
register_primitive(list.copy, list_copy_plus)
register_primitive(list.clear, list_clear_plus)
register_primitive(list.reverse, list_reverse_plus)
register_primitive(
    list.sort,
    list_sort_plus,
    note="gradients follow the permutation; key= is used for primals only",
)
register_primitive(list.index, list_index_plus, note="non-differentiable")
register_primitive(list.count, list_count_plus, note="non-differentiable")
defnondiff(_named_field_index)
defnondiff(_python_method)
defnondiff(_overrides)
register_primitive(dict.get, dict_get_plus)
register_primitive(dict.setdefault, dict_setdefault_plus)
register_primitive(dict.update, dict_update_plus)
register_primitive(operator.or_, dict_or_plus, note="dict merge; non-differentiable otherwise")
register_primitive(
    operator.ior, dict_ior_plus, note="dict update in place; non-differentiable otherwise"
)
register_primitive(dict.pop, dict_pop_plus)
register_primitive(
    dict.items, dict_items_plus, note="a list of (key, value) pairs inside differentiated code"
)
register_primitive(dict.values, dict_values_plus, note="a list inside differentiated code")
register_primitive(
    dict.keys, dict_keys_plus, note="a list inside differentiated code; keys carry no sensitivity"
)
register_primitive(dict.copy, dict_copy_plus)
register_primitive(Box, box_plus, note="a new Box")
register_primitive(box, box_plus, note="a new Box")
register_primitive(unbox, unbox_plus)
register_primitive(set_box, set_box_plus)
register_primitive(operator.getitem, getitem_plus, note="xs[i], d[k], t[i], a[idx]")
register_primitive(operator.setitem, setitem_plus)
register_primitive(operator.delitem, delitem_plus)


def partial_plus(func: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``functools.partial(func, *args, **kwargs)``: its sensitivity is (A_func, A_args, A_keywords)."""
    p = functools.partial(func, *args, **kwargs)
    n = len(args)

    def partial_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        # (the keywords' sensitivities are picked by keywords_at, which has a rule of its own:
        # no dict operations when this is differentiated again)
        if A is Z or A is None:
            return ((), Z) + (Z,) * n + ((keywords_at((), 0, tuple(kwargs)),) if kwargs else ())
        a_func, a_args, a_kw = tuple_items(A, 3)
        items = tuple_items(a_args, n) if a_args is not Z else (Z,) * n
        out = ((), a_func) + tuple(items)
        if kwargs:
            out = out + (keywords_at((a_kw,), 0, tuple(kwargs)),)
        return out

    return ProcResult(p, partial_backprop)


register_primitive(
    functools.partial,
    partial_plus,
    note="a partial application; its sensitivity is (func, args, keywords)",
)
register_primitive(
    getattr,
    lambda obj, name, *default: (
        getattr_plus(obj, name)
        if not default or hasattr(obj, name)
        else ProcResult(default[0], lambda A, Abox: ((), Z, None, A))
    ),
)
register_primitive(setattr, setattr_plus)
register_primitive(
    set,
    set_plus,
    note="set(iterable): the elements of a list or tuple get the sensitivities a "
    "for loop over the set gives them (the first of equal elements)",
)
register_primitive(frozenset, frozenset_plus, note="as set(iterable)")
register_primitive(delattr, delattr_plus)


# The helpers the rules above call are differentiated from their source when a rule is
# itself differentiated (derivatives of derivatives).
for _helper in (_conform_items, _sequence_sensitivity, _star_parts, _split_star, _instance_has):
    mark_derived(_helper, "rule helper")

# Generated code calls these by name (see dplus.runtime.ops.helper_named).
provide_to_generated_code(
    build_dict,
    build_list,
    build_list_star,
    build_set,
    build_set_star,
    build_tuple,
    build_tuple_star,
    delattr_plus,
    delitem_plus,
    getattr_plus,
    getitem_plus,
    match_args_plus,
    own_attribute_back,
    own_attribute_write_back,
    own_number_attribute,
    read_global_plus,
    setattr_plus,
    setitem_plus,
    unpack_plus,
    unpack_star_plus,
    user_namespace_plus,
    store_own_attribute,
    NOT_OWN=NOT_OWN,
)
hooks.install(sequence_sensitivity=_sequence_sensitivity)
