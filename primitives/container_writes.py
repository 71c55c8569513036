"""Container rules for writing: ``xs[i] = v``, ``d[k] = v``, ``obj.a = v`` and ``del``; a write
moves the written element's sensitivity out of the container's entry. See
:mod:`primitives.containers` for the conventions.
"""

from __future__ import annotations

import collections
import itertools
import linecache
import types
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.runtime.boxes import Box, BoxSensitivities
from dplus.runtime.classes import attribute_value
from dplus.runtime.core import apply_transform, lift
from dplus.runtime.handover import is_tracked_mutable
from dplus.runtime.hooks import hooks
from dplus.runtime.kinds import is_ndarray, is_number, sequence_index
from dplus.runtime.linear import add, gen_zero
from dplus.runtime.live_again import note_list_write
from dplus.runtime.registry import lookup_transform, register_primitive
from dplus.runtime.result import ProcResult, loops_in_flight

from .container_reads import (
    _ATTR_RULES,
    _EXACT_CONTAINERS,
    _OWN_ATTRIBUTE_KINDS,
    NOT_OWN,
    _box_write,
    _class_descriptor_shadows,
    _conform_items,
    _no_sens_2,
    _overrides,
    _python_method,
    _python_method_call,
)

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero


# (module constants: rule code differentiated again reads them as constants, not as
# attributes of a module)
_DEQUE = collections.deque
_DEQUE_SETITEM = collections.deque.__setitem__
_DEQUE_DELITEM = collections.deque.__delitem__


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
        if isinstance(idx, slice):
            return _list_slice_write(obj, idx, v)
        return _list_write(obj, sequence_index(idx), v)
    if t is dict or isinstance(obj, dict):
        return _dict_write(obj, idx, v)
    if is_ndarray(obj):
        from .numpy_inplace import array_setitem_plus

        return apply_transform(array_setitem_plus, obj, idx, v)
    obj[idx] = v
    return ProcResult(None, _unknown_write_backprop(f"assigning into a {t.__name__}"))


def _list_slice_write(obj: Any, idx: slice, v: Any) -> ProcResult:
    """``xs[a:b] = v``: the written elements' sensitivities move out of the list's entry."""
    n = len(obj)
    start, stop, step = idx.indices(n)
    vals = list(v)
    old_positions = list(range(start, stop, step))
    if _overrides(obj, "__setitem__"):
        list.__setitem__(obj, idx, vals)
    else:
        obj[idx] = vals
    m = len(vals)
    # (a loop differentiated again may read them later; a resize moves every later position)
    resized = m != len(old_positions)
    if loops_in_flight:  # (a loop differentiated again may read them later)
        note_list_write(
            obj, range(start, max(n, len(obj))) if resized else range(start, stop, step)
        )

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


def _list_write(obj: Any, idx: Any, v: Any) -> ProcResult:
    """``xs[i] = v``: the written element's sensitivity moves out of the list's entry."""
    n = len(obj)
    i = idx + n if idx < 0 else idx
    if _overrides(obj, "__setitem__"):
        list.__setitem__(obj, i, v)
    else:
        obj[i] = v
    if loops_in_flight:  # (a loop differentiated again may read them later)
        note_list_write(obj, range(i, i + 1))

    def list_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(obj)
        if entry is Z:
            return (), Z, None, Z
        s = entry[i]
        entry[i] = Z
        return (), Z, None, s

    return ProcResult(None, list_write_backprop)


def _dict_write(obj: Any, idx: Any, v: Any) -> ProcResult:
    """``d[k] = v``: the written value's sensitivity moves out of the dict's entry."""
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


def _unknown_write_backprop(what: str) -> Any:
    def unknown_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        return (), Z, None, Z

    return unknown_write_backprop


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
    if _own_python_setattr(obj):
        return False  # (the class's own __setattr__: the rule checks what it stored)
    key = (type(obj), name)
    kind = _OWN_ATTRIBUTE_KINDS.get(key, NOT_OWN)
    if kind is NOT_OWN:
        kind = _OWN_ATTRIBUTE_KINDS[key] = _own_attribute_kind(obj, name)
    if kind is None:
        return False  # (a property's setter, another descriptor: the rule)
    setattr(obj, name, attribute_value(obj, name, v))
    return True


def own_attribute_write_back(obj: Any, name: str, Abox: BoxSensitivities) -> tuple:
    """The reverse of ``store_own_attribute``: what ``setattr_plus``'s backprop returns."""
    entry = Abox.get(obj)
    if entry is Z:
        return (), Z, None, Z
    return (), Z, None, entry.pop(name, Z)


_ZEROS = itertools.repeat(Z)  # (the default of each pop, as many as there are names)


def attributes_read_back(
    obj: Any, names: tuple[str, ...], sensitivities: tuple, Abox: BoxSensitivities
) -> None:
    """The reverse of a fast segment's reads of ``obj``'s attributes ``names`` (its guard
    read them, ``PLAIN_ATTRIBUTES``), last read first: each sensitivity added into the
    object's entry, as ``own_attribute_back`` adds it."""
    entry = None
    for name, A in zip(names, sensitivities):
        if A is Z or A is None:
            continue
        if entry is None:
            found = Abox._entries.get(id(obj))
            entry = Abox.map_entry(obj) if found is None else found[1]
        prev = entry.get(name, Z)
        entry[name] = (
            A
            if prev is Z
            else (prev + A if type(prev) is float and type(A) is float else add(prev, A))
        )


def attributes_written_back(obj: Any, names: tuple[str, ...], Abox: BoxSensitivities) -> tuple:
    """The reverse of a fast segment's assignments of ``obj``'s attributes ``names``, last
    first: the sensitivity of each value assigned, moved out of the object's entry (as
    ``own_attribute_write_back`` moves it; a second assignment of a name gets zero)."""
    entry = Abox.get(obj)
    if entry is Z:
        return (Z,) * len(names)
    return tuple(map(entry.pop, names, _ZEROS))


def _attribute_value_plus(obj: Any, name: str, v: Any) -> ProcResult:
    """What ``setattr`` stores, at the next order: ``v``'s sensitivity is the stored value's."""

    def attribute_value_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        return (), gen_zero, None, A

    return ProcResult(attribute_value(obj, name, v), attribute_value_backprop)


register_primitive(
    attribute_value,
    _attribute_value_plus,
    note="internal: what setattr stores (a method standing for a plus-function), at the next order",
)


def _attribute_setter(obj: Any, name: str) -> Any:
    """What ``obj.name = v`` runs of the class: a ``property`` with a setter, or a
    descriptor whose ``__set__`` is Python; else ``None``. Non-differentiable: a constant at
    every order."""
    if isinstance(obj, (types.ModuleType, type)):
        return None
    for cls in type(obj).__mro__:
        if name in cls.__dict__:
            held = cls.__dict__[name]
            if isinstance(held, property):
                return held if held.fset is not None else None
            return held if _python_method(type(held), "__set__") is not None else None
    return None


def _property_write(obj: Any, fset: Any, v: Any) -> ProcResult:
    """``obj.name = v`` through a property's setter, differentiated (what it writes of the
    object carries ``v``'s sensitivity, as the setter's code moves it)."""
    r = apply_transform(lift(fset), obj, v)
    inner = r.backprop

    def property_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        g = inner(Z, Abox)
        return (), g[1], None, g[2]

    return ProcResult(None, property_write_backprop)


def _descriptor_write(obj: Any, descriptor: Any, v: Any) -> ProcResult:
    """``obj.name = v`` through a descriptor's Python ``__set__``, differentiated."""
    r = apply_transform(lift(_python_method(type(descriptor), "__set__")), descriptor, obj, v)
    inner = r.backprop

    def descriptor_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        g = inner(Z, Abox)
        return (), g[2], None, g[3]

    return ProcResult(None, descriptor_write_backprop)


def setattr_plus(obj: Any, name: str, v: Any) -> ProcResult:
    return _attribute_write(obj, name, v, through_class=True)


def object_setattr_plus(obj: Any, name: str, v: Any) -> ProcResult:
    """``object.__setattr__(obj, name, v)``: as ``setattr`` without the class's own
    ``__setattr__`` (the way a frozen dataclass's ``__post_init__`` sets attributes)."""
    return _attribute_write(obj, name, v, through_class=False)


def _attribute_write(obj: Any, name: str, v: Any, through_class: bool) -> ProcResult:
    if is_ndarray(obj) or is_number(obj):
        if not hasattr(obj, "__dict__") and not hasattr(type(obj), name):
            # (no such attribute and nowhere to keep one: Python's own AttributeError, which
            # code that names its result only where it can (pvlib) catches)
            setattr(obj, name, v)
        raise NonDifferentiableError(
            f"assigning the attribute {name!r} of a {type(obj).__name__} is not supported"
        )
    if type(obj) is Box and name == "value":
        return _box_write(obj, v)
    setter = _attribute_setter(obj, name)
    if isinstance(setter, property):
        return _property_write(obj, setter.fset, v)
    if setter is not None:
        return _descriptor_write(obj, setter, v)
    if through_class and _own_python_setattr(obj):
        return _python_setattr_write(obj, name, v)
    stored = attribute_value(obj, name, v)
    if not through_class:
        object.__setattr__(obj, name, stored)
    else:
        setattr(obj, name, stored)

    return ProcResult(None, _stored_attribute_backprop(obj, name))


def _stored_attribute_backprop(obj: Any, name: str) -> Any:
    """The backprop of storing a value as ``obj.name``: the attribute's sensitivity is the value's."""

    def attr_write_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(obj)
        if entry is Z:
            return (), Z, None, Z
        return (), Z, None, entry.pop(name, Z)

    return attr_write_backprop


def _own_python_setattr(obj: Any) -> bool:
    """Whether ``obj``'s class has a ``__setattr__`` written in Python."""
    return type(type(obj).__setattr__) is types.FunctionType


def _python_setattr_write(obj: Any, name: str, v: Any) -> ProcResult:
    """``obj.name = v`` where the class has its own ``__setattr__``: that method differentiated,
    as Python calls it (what it stores, logs or derives from ``v`` carries ``v``'s sensitivity
    as its code moves it; running it natively took the assignment for a plain store). Like
    ``__init__``, which calls it for every ``self.x = ...``, it is read from source under any
    policy (a registered rule first)."""
    method = type(obj).__setattr__
    t = lookup_transform(method)
    if t is None:
        if not linecache.getlines(method.__code__.co_filename):
            # (one made by exec, with no source: a frozen dataclass's, which raises or stores
            # the value)
            return _native_setattr_write(obj, name, v)
        t = hooks.plus_function_for(method)
    r = apply_transform(t, obj, name, v)
    inner = r.backprop

    def python_setattr_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        g = inner(Z, Abox)
        return (), g[1], None, g[3]

    return ProcResult(None, python_setattr_backprop)


def _native_setattr_write(obj: Any, name: str, v: Any) -> ProcResult:
    """``obj.name = v`` through a ``__setattr__`` without source, run as it is: followed only
    when it stores the value itself."""
    stored = attribute_value(obj, name, v)
    setattr(obj, name, stored)
    _refuse_other_value_stored(obj, name, stored)
    return ProcResult(None, _stored_attribute_backprop(obj, name))


def _refuse_other_value_stored(obj: Any, name: str, stored: Any) -> None:
    """A class's own ``__setattr__`` that keeps something other than the value assigned
    (``object.__setattr__(self, name, 2.0 * value)``): the assignment's sensitivity would be
    taken as the value's, silently wrong. One that stores the value itself is followed."""
    held = vars(obj).get(name, _MISSING) if hasattr(obj, "__dict__") else _MISSING
    if held is _MISSING:
        try:
            held = object.__getattribute__(obj, name)
        except AttributeError:
            return  # (kept elsewhere, or not at all: nothing reads it back as the attribute)
    if held is not stored:
        cls = type(obj)
        raise NonDifferentiableError(
            f"the class {cls.__qualname__!r} has its own __setattr__, which stored for the attribute "
            f"{name!r} something other than the value assigned: dplus cannot follow the sensitivity "
            "through it. Store the value itself in __setattr__ (and compute what else is needed in a "
            "method or a property), or differentiate a function that does not assign the attribute"
        )


_MISSING = object()


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
        if isinstance(idx, slice):
            return _list_slice_del(obj, idx)
        return _list_del(obj, sequence_index(idx))
    if isinstance(obj, dict):
        return _dict_del(obj, idx)
    if is_ndarray(obj):
        raise NonDifferentiableError("deleting from a NumPy array is not possible")
    del obj[idx]
    return ProcResult(None, _no_sens_2)


def _list_slice_del(obj: Any, idx: slice) -> ProcResult:
    """``del xs[a:b]``: the reverse puts zeros back where the elements were."""
    n = len(obj)
    positions = list(range(*idx.indices(n)))
    if _overrides(obj, "__delitem__"):
        list.__delitem__(obj, idx)
    else:
        del obj[idx]
    if positions:
        if loops_in_flight:  # (a loop differentiated again may read them later)
            note_list_write(obj, range(min(positions), n))  # (every later position moves)

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


def _list_del(obj: Any, idx: Any) -> ProcResult:
    n = len(obj)
    i = idx + n if idx < 0 else idx
    if _overrides(obj, "__delitem__"):
        list.__delitem__(obj, i)
    else:
        del obj[i]
    if loops_in_flight:  # (a loop differentiated again may read them later)
        note_list_write(obj, range(i, n))  # (every later position moves)

    def list_del_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(obj)
        if entry is not Z:
            entry.insert(i, Z)
        return (), Z, None

    return ProcResult(None, list_del_backprop)


def _dict_del(obj: Any, idx: Any) -> ProcResult:
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


def delattr_plus(obj: Any, name: str) -> ProcResult:
    delattr(obj, name)

    def attr_del_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        entry = Abox.get(obj)
        if entry is not Z:
            entry.pop(name, None)
        return (), Z, None

    return ProcResult(None, attr_del_backprop)
