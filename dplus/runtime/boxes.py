"""Boxes and the box-sensitivity map (SPEC section 5)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .linear import add, gen_zero

__all__ = ["Box", "box", "unbox", "set_box", "BoxSensitivities"]


class Box:
    """A mutable container of one value, like Racket's boxes."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Box({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Box) and self.value == other.value

    __hash__ = object.__hash__


def box(value: Any) -> Box:
    """A new :class:`Box` holding ``value``."""
    return Box(value)


def unbox(b: Box) -> Any:
    """The value inside ``b``."""
    return b.value


def set_box(b: Box, value: Any) -> None:
    """Replace the value inside ``b``."""
    b.value = value


class BoxSensitivities:
    """An identity-keyed map from mutable objects to the sensitivity of their current contents.

    Equal but distinct objects are different keys. The map keeps its keys alive while it
    lives, so an id is never reused for another object during one backward pass.
    Entries for lists are lists of element sensitivities, for dicts and objects dicts of
    element (attribute) sensitivities, for boxes and variable cells a single sensitivity.
    """

    __slots__ = ("_entries", "_stashes", "_memory", "constants")

    def __init__(self, constants: dict[int, Any] | None = None) -> None:
        self._entries: dict[int, tuple[Any, Any]] = {}
        # arguments whose sensitivities the pass discards (runtime.constants), by id
        self.constants: dict[int, Any] = {} if constants is None else constants
        self._stashes: dict[int, tuple[Any, list[Any]]] | None = None
        # the entries of NumPy memory changed in place, and the writes undone (runtime.memory)
        self._memory: Any = None

    def stash_record(self, key: object) -> list[Any]:
        """A private ``[value, extra]`` record for ``key`` in this pass, apart from the entries
        (derivatives of derivatives keep values here that later operations of the pass read)."""
        stashes = self._stashes
        if stashes is None:
            stashes = self._stashes = {}
        entry = stashes.get(id(key))
        if entry is None:
            entry = stashes[id(key)] = (
                key,
                [gen_zero, None],
            )  # the key is kept alive: ids stay unique
        return entry[1]

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{type(k).__name__}@{id(k):#x}: {v!r}" for k, v in self._entries.values()
        )
        return f"BoxSensitivities({{{inner}}})"

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return id(key) in self._entries

    def __iter__(self) -> Iterator[Any]:
        return (k for k, _ in self._entries.values())

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._entries.values()))

    def get(self, key: object, default: Any = gen_zero) -> Any:
        entry = self._entries.get(id(key))
        return default if entry is None else entry[1]

    def __getitem__(self, key: object) -> Any:
        return self.get(key)

    def __setitem__(self, key: object, sens: Any) -> None:
        self._entries[id(key)] = (key, sens)

    def __delitem__(self, key: object) -> None:
        self._entries.pop(id(key), None)

    def pop(self, key: object, default: Any = gen_zero) -> Any:
        entry = self._entries.pop(id(key), None)
        return default if entry is None else entry[1]

    def accumulate(self, key: object, sens: Any) -> None:
        """Add ``sens`` into the entry for ``key`` (a whole-value sensitivity)."""
        if sens is gen_zero or sens is None:
            return
        k = id(key)
        entry = self._entries.get(k)
        self._entries[k] = (key, sens if entry is None else add(entry[1], sens))

    def list_entry(self, key: object, length: int) -> list[Any]:
        """The element sensitivities of list (or deque) ``key`` (created with ``length`` zeros)."""
        k = id(key)
        entry = self._entries.get(k)
        if entry is None:
            items = [gen_zero] * length
            self._entries[k] = (key, items)
            return items
        known: list[Any] = entry[1]
        return known

    def map_entry(self, key: object) -> dict[Any, Any]:
        """The element (attribute) sensitivities of a dict or object ``key``."""
        k = id(key)
        entry = self._entries.get(k)
        if entry is None:
            items: dict[Any, Any] = {}
            self._entries[k] = (key, items)
            return items
        known: dict[Any, Any] = entry[1]
        return known


# A Box's sensitivity is a Box of its contents' sensitivity (SPEC section 4: Boxes conform
# when their contents conform). Inside the box-sensitivity map a Box's entry holds the bare
# contents' sensitivity; a bare one is accepted where sensitivities are added, so both meet.


def _contents(v: Any) -> Any:
    return v.value if isinstance(v, Box) else v


def _add_boxes(u: Box, v: Any) -> Box:
    return Box(add(u.value, _contents(v)))


def _scale_box(v: Box, a: Any) -> Box:
    from .linear import scale

    return Box(scale(v.value, a))


def _dot_boxes(u: Box, v: Any) -> Any:
    from .linear import dot

    return dot(u.value, _contents(v))


def _zero_box(b: Box) -> Box:
    from .linear import zero

    return Box(zero(b.value))


def _coerce_box(u: Box, v: Any) -> Box:
    from .linear import coerce_zero

    return Box(coerce_zero(u.value, v.value if isinstance(v, Box) else gen_zero))


def _box_conforms(sens: Any, primal: Box) -> bool:
    from .conformance import conforms

    return isinstance(sens, Box) and conforms(sens.value, primal.value)


def _register_box_linear_type() -> None:
    from .linear import register_linear_type

    register_linear_type(
        Box,
        add=_add_boxes,
        scale=_scale_box,
        dot=_dot_boxes,
        zero=_zero_box,
        coerce=_coerce_box,
        conforms=_box_conforms,
    )


_register_box_linear_type()
