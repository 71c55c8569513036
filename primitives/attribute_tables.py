"""The tables attribute reads and writes consult: the rules registered for an attribute of a
class (``register_attribute``), and which attributes of which classes are plain (held by the
instance itself, read and assigned with no user code run), which first-order generated code
reads and assigns natively (``PLAIN_ATTRIBUTES``). See :mod:`primitives.container_reads`
and :mod:`primitives.container_writes`.
"""

from __future__ import annotations

import collections
import types
from typing import Any

from dplus.runtime.boxes import Box
from dplus.runtime.handover import is_tracked_type

_ATTR_RULES: dict[tuple[type, str], Any] = {}


def register_attribute(cls: type, name: str, transform: Any) -> None:
    """Register the transform of reading attribute ``name`` of instances of ``cls``: ``transform(obj)``."""
    _ATTR_RULES[(cls, name)] = transform
    _OWN_ATTRIBUTE_KINDS.clear()
    PLAIN_ATTRIBUTES.clear()


# Attributes of user objects read and assigned natively by first-order generated code
# (reverse.py, ``Reverser.attribute_read`` / ``attribute_write``): the same values, effects
# and sensitivities as ``getattr_plus``'s keyed read and ``setattr_plus``, without a
# ProcResult and a closure per operation (``self.px += DT * self.vx`` in a method).

NOT_OWN = object()  # the read is not a number attribute of the object's own: take the rule
_OWN_ATTRIBUTE_KINDS: dict[tuple[type, str], str | None] = {}


class _PlainAttributeClasses(dict):
    """``(class, names read, names written)`` -> whether a fast segment may read and assign
    those attributes of an instance with plain Python (``getattr(obj, name, None)``,
    ``obj.name = v``), its guard testing each value read is a number: what
    ``own_number_attribute`` and ``store_own_attribute`` read and store then, with no user
    code run. Filled on first sight of a class (see :func:`plain_attributes`)."""

    def __missing__(self, key: tuple[type, tuple[str, ...], tuple[str, ...]]) -> bool:
        if len(self) > 4096:  # (classes made per call: the table does not keep them all)
            self.clear()
        found = self[key] = plain_attributes(*key)
        return found


PLAIN_ATTRIBUTES = _PlainAttributeClasses()


def plain_attributes(t: type, read: tuple[str, ...], written: tuple[str, ...]) -> bool:
    """Whether instances of ``t`` hold each of ``read`` and ``written`` themselves (in their
    ``__dict__`` or a ``__slots__`` member, with nothing of that name on the class), reading
    and assigning them runs no user code (no ``__getattribute__``, ``__getattr__``,
    ``__setattr__``, property or other descriptor) and no rule of dplus's is registered for
    them. A container (list, dict, ...), a ``Box``, a class or a module is never plain: its
    sensitivities live in Abox in another shape."""
    if (
        t is Box
        or issubclass(t, (list, dict, set, collections.deque, type, types.ModuleType))
        or not is_tracked_type(t)
        or t.__getattribute__ is not object.__getattribute__
        or (read and any("__getattr__" in c.__dict__ for c in t.__mro__))
        or (written and t.__setattr__ is not object.__setattr__)
    ):
        return False
    for name in set(read) | set(written):
        if (t, name) in _ATTR_RULES:
            return False
        held = next((c.__dict__[name] for c in t.__mro__ if name in c.__dict__), NOT_OWN)
        if held is NOT_OWN:
            if not t.__dictoffset__:
                return False  # (slots without this one, no __dict__: assigning it raises)
        elif type(held) is not types.MemberDescriptorType:
            return False  # (a class attribute, a method, a property, another descriptor)
    return True
